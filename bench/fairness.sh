#!/usr/bin/env bash
# One client streaming large arrays back to back against small requests
# from others, on one daemon (docs/benchmarks/regions.md):
#
#   bench/fairness.sh BUILDDIR [ROUNDS] [-- DAEMON-ARGS...]
#
# Each round: 1 KiB f32 sums from 8 connections, one in flight on each,
# alone; then the same while a ninth connection sends 1 GiB arrays (256 MiB
# with FAIRNESS_HOG_BYTES) one after another. Prints each run's JSON, then
# the p99 with the hog over the p99 without, per round and their median.
set -euo pipefail
b=$1
rounds=${2:-3}
shift $(($# >= 2 ? 2 : $#))
[ "${1:-}" = -- ] && shift
hog_elems=$(( ${FAIRNESS_HOG_BYTES:-$((1 << 30))} / 4 ))
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpured-fair.XXXXXX")
pid= hog=
cleanup() {
	[ -n "$hog" ] && kill "$hog" 2>/dev/null && wait "$hog" 2>/dev/null
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
"$b/daemon/gpured" --socket "$tmp/s" --config /dev/null "$@" >"$tmp/log" 2>&1 &
pid=$!
for _ in $(seq 200); do [ -S "$tmp/s" ] && break; sleep 0.05; done
bench=$b/bench/gpured-benchmark
small() { "$bench" -s "$tmp/s" -c 8 -P 1 -n 40000 -d 256 --json; }
for r in $(seq "$rounds"); do
	alone=$(small)
	"$bench" -s "$tmp/s" -c 1 -P 1 -n 100000 -t 600 -d $hog_elems --json >"$tmp/hog.json" &
	hog=$!
	sleep 1
	busy=$(small)
	kill "$hog"; wait "$hog" 2>/dev/null || true; hog=
	echo "{\"round\":$r,\"alone\":$alone,\"with_hog\":$busy}"
done | tee "$tmp/runs"
python3 - "$tmp/runs" <<'PY'
import json, statistics, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
q = [r["with_hog"]["latency_us"]["p99"] / r["alone"]["latency_us"]["p99"] for r in rs]
for r, x in zip(rs, q):
    print("round %d: p99 alone %.0f us, with the hog %.0f us: %.2fx" % (r["round"], r["alone"]["latency_us"]["p99"], r["with_hog"]["latency_us"]["p99"], x))
print("median %.2fx" % statistics.median(q))
PY
