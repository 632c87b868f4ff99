#!/usr/bin/env bash
# GB/s against array size for every data path, with the ceilings, in one
# run (docs/benchmarks/regions.md, docs/paths.png):
#
#   bench/path-sweep.sh BINDIR OUT.jsonl [DTYPE]
#
# Sums of DTYPE (default f32), one client, 4 in flight, 4 KiB to 1 GiB
# (the same bytes whatever the dtype): the socket and
# shared-memory paths on a CPU daemon and a CUDA daemon, and arrays on the
# GPU (gpured-device-bench, which also times the read-bandwidth kernel);
# the raw socket (gpured-sockbw) and pinned host-to-device copies
# (gpured-h2d-bench). bench/plot-paths.py draws OUT.jsonl.
# BINDIR holds gpured, gpured-benchmark, gpured-sockbw and, where there
# is a GPU, gpured-device-bench and gpured-h2d-bench, or is a meson build
# folder that has them (-Dbenchmarks=true).
set -euo pipefail
b=$1
out=$2
dtype=${3:-f32}
case $dtype in
i32 | u32 | f32) size=4 ;;
i64 | u64 | f64) size=8 ;;
f16 | bf16 | i16 | u16) size=2 ;;
f8e4m3 | f8e5m2 | i8 | u8) size=1 ;;
*) echo "path-sweep: unknown dtype $dtype" >&2; exit 2 ;;
esac
exe() {
	local d
	for d in "$b" "$b/daemon" "$b/bench" "$b/bench/cuda"; do
		[ -x "$d/$1" ] && { echo "$d/$1"; return; }
	done
	echo "path-sweep: no $1 in $b" >&2
	exit 1
}
gpured=$(exe gpured) bench=$(exe gpured-benchmark)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpured-sweep.XXXXXX")
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
start() {
	rm -f "$tmp/s"
	"$gpured" --socket "$tmp/s" --backend "$1" --config /dev/null >"$tmp/log" 2>&1 &
	pid=$!
	for _ in $(seq 200); do [ -S "$tmp/s" ] && return; sleep 0.05; done
	cat "$tmp/log" >&2
	exit 1
}
stop() { kill "$pid"; wait "$pid" || true; pid=; }
: >"$out"
backends="cpu"
command -v nvidia-smi >/dev/null && backends="cpu cuda"
for be in $backends; do
	start "$be"
	for lg in 10 14 18 22 26 28; do
		bytes=$((4 << lg)) n=$(((4 << lg) / size))
		reqs=$((bytes >= (1 << 28) ? 12 : bytes >= (1 << 24) ? 60 : 4000))
		for path in socket region; do
			extra=
			[ $path = region ] && extra=--region
			r=$("$bench" -s "$tmp/s" -c 1 -P 4 -n $reqs -d $n --dtype "$dtype" $extra --json)
			echo "{\"backend\":\"$be\",\"path\":\"$path\",\"dtype\":\"$dtype\",\"bytes\":$bytes,\"r\":$r}" >>"$out"
		done
	done
	if [ "$be" = cuda ]; then
		"$(exe gpured-device-bench)" "$tmp/s" 200 "$dtype" 10,14,18,22,26,28 |
			sed 's/^/{"backend":"cuda","path":"device","r":/; s/$/}/' >>"$out"
	fi
	stop
done
"$(exe gpured-sockbw)" -b 4G --json | sed 's/^/{"ceiling":"socket","r":/; s/$/}/' >>"$out"
if [[ " $backends " == *" cuda "* ]]; then
	"$(exe gpured-h2d-bench)" $((1 << 30)) $((8 << 20)) 4 5 | head -1 |
		sed 's/^/{"ceiling":"h2d","r":/; s/$/}/' >>"$out"
fi
cat "$out"
