#!/bin/sh
# bench/paired-ab.py against two real CPU daemons (one with an option and
# an environment setting), on split CPUs: a few short turns, then every
# figure and both summary lines must be there, the daemons' and the load
# generator's CPUs must not overlap, and no daemon may be left running.
# Usage: test-paired-ab.sh PAIRED-AB.PY GPURED GPURED-BENCHMARK GPUREDCTL
set -u
script=$1
dir=$(mktemp -d "${TMPDIR:-/tmp}/gpured-ab.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
for exe in "$2" "$3" "$4"; do
	ln -s "$(readlink -f "$exe")" "$dir/$(basename "$exe")" || exit 1
done

python3 "$script" --split "$dir" 3 "-c 2 -P 4 -n 2000 -d 256" \
	"a:gpured:cpu:--threads 1" "b:gpured:cpu:GPURED_UNUSED=1 --busy-poll-us 0" \
	>"$dir/out" 2>"$dir/err"
rc=$?
cat "$dir/out"
if [ $rc -ne 0 ]; then
	echo "paired-ab.py exited $rc:"; cat "$dir/err"; exit 1
fi
python3 - "$dir/out" <<'PY' || exit 1
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
runs = [l for l in lines if "req_per_s" in l]
summ = [l for l in lines if "median" in l]
cpus = [l for l in lines if "daemon_cpus" in l]
assert len(cpus) == 1 and cpus[0]["daemon_cpus"] and cpus[0]["client_cpus"], cpus
d, c = set(cpus[0]["daemon_cpus"]), set(cpus[0]["client_cpus"])
assert not (d & c) or d == c, cpus  # one CPU only: nothing to split
assert [r["variant"] for r in runs] == ["a", "b"], runs
for r in runs:
    assert len(r["req_per_s"]) == 3 and all(v and v > 0 for v in r["req_per_s"]), r
    assert r["device_jobs"] == [6000], r
assert [s["variant"] for s in summ] == ["a", "b"], summ
assert summ[0]["ratio_to_a"] == 1.0 and summ[1]["ratio_to_a"] > 0, summ
print("ok: two daemons, three turns, every figure and both summaries")
PY
if pgrep -f "$dir/gpured" >/dev/null; then
	echo "a daemon is still running"; exit 1
fi
