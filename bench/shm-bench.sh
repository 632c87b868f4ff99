#!/usr/bin/env bash
# Shared-memory regions against their ceilings, in one run
# (docs/benchmarks/regions.md):
#
#   bench/shm-bench.sh BINDIR [ROUNDS] [BACKENDS]
#
# BINDIR holds gpured, gpured-benchmark, gpured-readsum and, for the CUDA
# backend, gpured-h2d-bench (or is a meson build folder that has them:
# -Dbenchmarks=true, or those two built by name). BACKENDS is "cuda cpu"
# (the default) or "cpu".
# For each backend, a fresh daemon each round, on the same array:
#   - 1 GiB of f32 (SHM_BENCH_BYTES) summed in a region by one client, -P 1, and over the
#     socket, and the daemon's CPU seconds per GB of each (/proc/PID/stat);
#   - 4 KiB requests, 8 connections, 16 in flight, region against socket;
# and beside them the ceilings: pinned and registered-memfd copies to the
# GPU (gpured-h2d-bench) and a plain threaded read-sum of a mapping with
# the CPU daemon's thread count (gpured-readsum). One JSON line per
# measurement, tagged "round backend what", then a summary of medians.
set -euo pipefail
bin=$1
rounds=${2:-3}
backends=${3:-cuda cpu}
threads=${SHM_BENCH_THREADS:-$(nproc)}
gib=${SHM_BENCH_BYTES:-$((1 << 30))}
n_big=$((gib / 4))
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpured-shm.XXXXXX")
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# BINDIR/NAME, or where a meson build folder puts it
exe() {
	local d
	for d in "$bin" "$bin/daemon" "$bin/bench" "$bin/bench/cpu" "$bin/bench/cuda"; do
		[ -x "$d/$1" ] && { echo "$d/$1"; return; }
	done
	echo "shm-bench: no $1 in $bin" >&2
	exit 1
}
gpured=$(exe gpured)
benchmark=$(exe gpured-benchmark)
readsum=$(exe gpured-readsum)
[[ " $backends " == *" cuda "* ]] && h2d=$(exe gpured-h2d-bench)

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
tag() { sed "s/^{/{\"round\":$1,\"backend\":\"$2\",\"what\":\"$3\",/"; }

start() {
	rm -f "$tmp/s"
	"$gpured" --socket "$tmp/s" --backend "$1" --threads "$threads" --config /dev/null \
		>"$tmp/log.$1" 2>&1 &
	pid=$!
	for _ in $(seq 200); do [ -S "$tmp/s" ] && return 0; sleep 0.05; done
	echo "daemon did not start:" >&2
	cat "$tmp/log.$1" >&2
	exit 1
}
stop() { kill "$pid"; wait "$pid" || true; pid=; }

# One benchmark run, its JSON tagged, with the daemon's CPU seconds per GB.
run() {
	local r=$1 b=$2 what=$3
	shift 3
	local t0 out
	t0=$(ticks "$pid")
	out=$("$benchmark" -s "$tmp/s" "$@" --json)
	local cpu_s
	cpu_s=$(awk -v a="$t0" -v b="$(ticks "$pid")" -v hz="$hz" 'BEGIN { printf "%.3f", (b - a) / hz }')
	echo "$out" | sed "s/}\$/,\"daemon_cpu_s\":$cpu_s}/" | tag "$r" "$b" "$what"
}

{
	for r in $(seq "$rounds"); do
		if [[ " $backends " == *" cuda "* ]]; then
			"$h2d" $gib $((8 << 20)) 4 5 | tag "$r" cuda h2d
		fi
		"$readsum" $gib "$threads" 5 | tag "$r" cpu readsum
		for b in $backends; do
			start "$b"
			run "$r" "$b" region-1GiB -c 1 -P 1 -n 12 -d $n_big --region
			run "$r" "$b" socket-1GiB -c 1 -P 1 -n 4 -d $n_big
			run "$r" "$b" region-4KiB-c8P16 -c 8 -P 16 -n 400000 -d 1024 --region
			run "$r" "$b" socket-4KiB-c8P16 -c 8 -P 16 -n 400000 -d 1024
			stop
		done
	done
} | tee "$tmp/all.jsonl"

python3 - "$tmp/all.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def med(backend, what, key):
    v = [r[key] for r in rows if r["backend"] == backend and r["what"] == what]
    return statistics.median(v) if v else None
def gbs(b, w): return med(b, w, "payload_gb_per_s")
def cpu_per_gb(b, w):
    v = [r["daemon_cpu_s"] / (r["requests"] * r["elements"] * 4 / 1e9)
         for r in rows if r["backend"] == b and r["what"] == w]
    return statistics.median(v) if v else None
print()
for b in ("cuda", "cpu"):
    reg, sock = gbs(b, "region-1GiB"), gbs(b, "socket-1GiB")
    if reg is None:
        continue
    big = next(r["elements"] * 4 for r in rows if r["backend"] == b and r["what"] == "region-1GiB")
    size = f"{big >> 30} GiB" if big % (1 << 30) == 0 else f"{big >> 20} MiB"
    print(f"{b}: {size} f32 in a region {reg:.2f} GB/s, over the socket {sock:.2f} GB/s: {reg / sock:.1f}x")
    print(f"{b}: daemon CPU s per GB: region {cpu_per_gb(b, 'region-1GiB'):.4f}, socket {cpu_per_gb(b, 'socket-1GiB'):.4f}")
    r4, s4 = med(b, "region-4KiB-c8P16", "requests_per_s"), med(b, "socket-4KiB-c8P16", "requests_per_s")
    print(f"{b}: 4 KiB c8P16: region {r4:.0f} req/s, socket {s4:.0f} req/s: {r4 / s4:.2f}")
def h2d(source, streams):
    v = [r["gb_per_s"] for r in rows if r["what"] == "h2d" and r["source"] == source and r["streams"] == streams]
    return statistics.median(v) if v else None
pinned, memfd = h2d("pinned", 1), h2d("memfd-registered", 4)
if pinned:
    reg = gbs("cuda", "region-1GiB")
    print(f"cuda: cudaMemcpy host to device: pinned {pinned:.2f} GB/s, registered memfd in 8 MiB copies {memfd:.2f} GB/s; region path {reg / pinned:.2f} of pinned")
rs = statistics.median([r["gb_per_s"] for r in rows if r["what"] == "readsum"])
reg = gbs("cpu", "region-1GiB")
if reg:
    print(f"cpu: plain read-sum, same threads {rs:.2f} GB/s; region path {reg / rs:.2f} of it")
c, p = cpu_per_gb("cuda", "region-1GiB"), cpu_per_gb("cpu", "region-1GiB")
if c is not None and p:
    print(f"daemon CPU s per GB, CUDA region / CPU region: {c / p:.3f}")
PY
