#!/bin/bash
# Arrays on each GPU of the host reduced by one CUDA daemon: one client a
# GPU (gpured-device-bench -g, its f32 array mapped on that GPU), first
# each alone, then all at once; N rounds, the order of the GPUs turned
# each round. Prints each run's JSON lines and, per GPU and size, the
# rate together over the rate alone (median of the rounds), and the
# daemon's jobs per device over the whole run (where each array ran).
#
#   bench/device-gpus.sh BINDIR [ROUNDS [REQUESTS [LOG2,...]]]
#     (BINDIR holds gpured, gpuredctl and gpured-device-bench; 3 rounds,
#      2000 requests a run, sizes 2^26,2^28 f32)
set -u
B=${1:?usage: device-gpus.sh BINDIR [ROUNDS [REQUESTS [LOG2,...]]]}
ROUNDS=${2:-3}
REQS=${3:-2000}
SIZES=${4:-26,28}
NGPU=$(nvidia-smi -L | wc -l)
L=$(mktemp -d "${TMPDIR:-/tmp}/gpured-gpus.XXXXXX")
S=$L/s
"$B/gpured" --socket "$S" --backend cuda > "$L/daemon.log" 2>&1 &
P=$!
trap 'kill $P 2>/dev/null; wait $P 2>/dev/null; rm -rf "$L"' EXIT
for _ in $(seq 100); do [ -S "$S" ] && break; sleep 0.1; done
echo "$NGPU GPUs"
for r in $(seq "$ROUNDS"); do
	for k in $(seq 0 $((NGPU - 1))); do
		g=$(( (k + r) % NGPU ))
		"$B/gpured-device-bench" -g "$g" "$S" "$REQS" f32 "$SIZES" |
			sed "s/^{/{\"round\":$r,\"mode\":\"alone\",/"
	done
	pids=()
	for g in $(seq 0 $((NGPU - 1))); do
		"$B/gpured-device-bench" -g "$g" "$S" "$REQS" f32 "$SIZES" > "$L/t$g.json" &
		pids+=($!)
	done
	wait "${pids[@]}"
	for g in $(seq 0 $((NGPU - 1))); do
		sed "s/^{/{\"round\":$r,\"mode\":\"together\",/" "$L/t$g.json"
	done
done | tee "$L/runs"
"$B/gpuredctl" -s "$S" info > "$L/info" 2>&1 || true
grep -i -E "jobs|device|region" "$L/info"
python3 - "$L/runs" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
keys = sorted({(r["gpu"], r["elements"]) for r in runs})
for g, n in keys:
    rate = {}
    for r in runs:
        if r["gpu"] == g and r["elements"] == n:
            rate.setdefault(r["round"], {})[r["mode"]] = r["gpured_gb_per_s"]
    ratios = [v["together"] / v["alone"] for v in rate.values() if len(v) == 2]
    alone = [v["alone"] for v in rate.values() if "alone" in v]
    print(f"GPU {g} n=2^{n.bit_length() - 1}: alone {statistics.median(alone):.1f} GB/s, "
          f"together/alone per round {' '.join(f'{x:.3f}' for x in ratios)}, "
          f"median {statistics.median(ratios):.3f}")
PY
