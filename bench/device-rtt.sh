#!/bin/bash
# One array in GPU memory (f32, 2^16 elements, unless told), summed one
# request at a time through fresh CUDA daemons (gpured-device-bench), each daemon run
# with the client sleeping for its replies and spinning for them
# (gpured_set_spin(), -S), in turns; the round trip's p50 over the exact
# kernel's own single launch (the exact sum's for floats), and the
# daemon's own p50.
#
#   bench/device-rtt.sh BINDIR [DAEMONS [SPIN_US [LOG2 [DTYPE]]]]
#     (BINDIR holds gpured and gpured-device-bench; 4 daemons, 200 us, 16,
#      f32; f64 and i32 take the same bytes as f32 at LOG2)
set -u
B=${1:?usage: device-rtt.sh BINDIR [DAEMONS [SPIN_US [LOG2 [DTYPE]]]]}
N=${2:-4}
SPIN=${3:-200}
LG=${4:-16}
DT=${5:-f32}
L=$(mktemp -d "${TMPDIR:-/tmp}/gpured-rtt.XXXXXX")
P=
trap '[ -n "$P" ] && kill $P 2>/dev/null; rm -rf "$L"' EXIT
for k in $(seq "$N"); do
	S=$L/d$k.sock
	"$B/gpured" --socket "$S" --backend cuda > "$L/d$k.log" 2>&1 &
	P=$!
	for _ in $(seq 100); do [ -S "$S" ] && break; sleep 0.1; done
	if [ $((k % 2)) = 1 ]; then order="0 $SPIN 0 $SPIN"; else order="$SPIN 0 $SPIN 0"; fi
	for sp in $order; do
		"$B/gpured-device-bench" -S "$sp" "$S" 200 "$DT" "$LG" | sed "s/^{/{\"daemon\":$k,/"
	done
	kill "$P"; wait "$P" 2>/dev/null; P=
done | tee "$L/runs"
python3 - "$L/runs" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
for sp in sorted({r["spin_us"] for r in runs}):
    rs = [r for r in runs if r["spin_us"] == sp]
    over = [r["rtt_minus_kernel_us"] for r in rs]
    print(f"spin {sp} us: rtt p50 {statistics.median(r['rtt_p50_us'] for r in rs):.1f} us, "
          f"over the kernel {min(over):.1f}-{max(over):.1f} (median {statistics.median(over):.1f}), "
          f"daemon p50 {statistics.median(r['daemon_p50_us'] for r in rs):.0f} us, "
          f"exact kernel {statistics.median(r['exact_launch_us'] for r in rs):.1f} us (0: not a float), "
          f"rounding kernel {statistics.median(r['kernel_launch_us'] for r in rs):.1f} us")
PY
