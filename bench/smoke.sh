#!/usr/bin/env bash
# Every measurement program run once, small, so that none rots unseen:
# each must exit 0, print something, and print no FAIL or MISMATCH (the
# CUDA benchmarks check their results against CUB's, and gpured-ops-bench
# says so only in its output). The sizes are chosen to take moments, not
# to measure anything.
#
#   smoke.sh [--NAME PATH]...
#
# NAME is a program's name (bench/meson.build passes every one it built),
# or gpured (the daemon: the Python client's benchmarks and
# gpured-device-bench run against one of their own) or python (the
# interpreter for bench/python). CUDA programs, when given, need a GPU;
# where nvidia-smi sees none they are skipped with a line saying so.
set -u

die() { echo "smoke: $*" >&2; exit 1; }

declare -A exe
while [ $# -gt 0 ]; do
	case $1 in
	--*) [ $# -ge 2 ] || die "$1 needs a path"; exe[${1#--}]=$2; shift 2 ;;
	*) die "usage: smoke.sh [--NAME PATH]..." ;;
	esac
done

# Under the sanitizers (GPURED_SANITIZED: quickstart.sh test's second run)
# they are built, which keeps them compiling there; running them, which
# measures nothing of the product's code, is the main run's.
if [ -n "${GPURED_SANITIZED:-}" ]; then
	echo "smoke: the measurement programs run in the main build, not under the sanitizers"
	exit 77
fi

here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpured-smoke.XXXXXX") || exit 1
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

failed=0
ran=0
# run NAME COMMAND...: the last lines of the command's output go to the
# test's log, more of them (and any FAIL lines) when it fails.
run() {
	local name=$1
	shift
	echo "== $name"
	local t0=$SECONDS rc=0
	timeout 300 "$@" >"$tmp/out" 2>&1 || rc=$?
	ran=$((ran + 1))
	if [ $rc -ne 0 ] || [ ! -s "$tmp/out" ] || grep -qE 'FAIL|MISMATCH' "$tmp/out"; then
		grep -E 'FAIL|MISMATCH' "$tmp/out" | head -n 20
		tail -n 30 "$tmp/out"
		echo "FAIL: $name exited $rc$([ -s "$tmp/out" ] || echo ", printing nothing")"
		failed=$((failed + 1))
	else
		tail -n 3 "$tmp/out"
		echo "ok: $name ($((SECONDS - t0)) s)"
	fi
}
has() { [ -n "${exe[$1]:-}" ]; }

# A daemon of our own on a socket in tmp, with the backend named.
start_daemon() {
	rm -f "$tmp/s"
	"${exe[gpured]}" --socket "$tmp/s" --backend "$1" --config /dev/null >"$tmp/daemon.log" 2>&1 &
	pid=$!
	for _ in $(seq 200); do
		[ -S "$tmp/s" ] && return 0
		sleep 0.05
	done
	cat "$tmp/daemon.log"
	die "the $1 daemon did not start"
}
stop_daemon() { kill "$pid"; wait "$pid" 2>/dev/null; pid=; }

# The CPU programs (bench/cpu).
ncpu=$(nproc)
has reduce-bench && run reduce-bench "${exe[reduce-bench]}" 12 1
has reduce-bench && run "reduce-bench --exact" "${exe[reduce-bench]}" --exact 1 all 16
has narrow-bench && run narrow-bench "${exe[narrow-bench]}" 1 sum near 16
has inline-bench && run inline-bench "${exe[inline-bench]}" 2 10
has bench-request && run bench-request "${exe[bench-request]}" 1000 1024 65536 2
has bench-request && run "bench-request, one feed" "${exe[bench-request]}" 1000 1024 0 2
has gpured-readsum && run gpured-readsum "${exe[gpured-readsum]}" $((1 << 20)) 2 1
has gpured-vcpu-speed && run gpured-vcpu-speed "${exe[gpured-vcpu-speed]}" $((ncpu < 2 ? 1 : 2)) 1

# The Python client's (bench/python), against a CPU daemon each starts;
# rows.py and tensors.py need torch and a GPU, dask_chunks.py a cluster,
# so they are only compiled.
if has python && has gpured; then
	if "${exe[python]}" -c 'import numpy, msgpack' 2>/dev/null; then
		export PYTHONDONTWRITEBYTECODE=1
		run arrays.py "${exe[python]}" "$here/python/arrays.py" --daemon "${exe[gpured]}" \
			--mib 1 --inflight 2 --seconds 0.05 --runs 1
		run pipeline.py "${exe[python]}" "$here/python/pipeline.py" --daemon "${exe[gpured]}" \
			--inflight 2 --seconds 0.05 --runs 1
		run "pipeline.py --aio" "${exe[python]}" "$here/python/pipeline.py" --daemon "${exe[gpured]}" \
			--inflight 2 --seconds 0.05 --runs 1 --aio
		has gpured-benchmark && run small.py "${exe[python]}" "$here/python/small.py" \
			--daemon "${exe[gpured]}" --c-bench "${exe[gpured-benchmark]}" \
			--inflight 2 --seconds 0.05 --runs 1
		# rows.py and tensors.py need a GPU, dask_chunks.py a cluster and
		# libgpured: compiled only
		for heavy in rows.py tensors.py dask_chunks.py; do
			run "$heavy (compiled only)" "${exe[python]}" -c \
				'import sys; compile(open(sys.argv[1]).read(), sys.argv[1], "exec"); print("compiles")' \
				"$here/python/$heavy"
		done
	else
		echo "skip: bench/python (${exe[python]} lacks numpy or msgpack)"
	fi
fi

# The CUDA programs (bench/cuda), where there is a GPU to run them on.
cuda=()
for name in "${!exe[@]}"; do
	case $name in gpured-*-bench | gpured-staging-write | gpured-cuda-rtt) cuda+=("$name") ;; esac
done
if [ ${#cuda[@]} -gt 0 ] && ! nvidia-smi -L >/dev/null 2>&1; then
	echo "skip: ${cuda[*]} (no GPU here)"
elif [ ${#cuda[@]} -gt 0 ]; then
	has gpured-kernel-bench && run gpured-kernel-bench "${exe[gpured-kernel-bench]}" --lo 10 --hi 14 --step 4
	# the sweep's other settings: each is its own instantiation
	has gpured-kernel-bench && run "gpured-kernel-bench, swept knobs" "${exe[gpured-kernel-bench]}" \
		--lo 10 --hi 14 --step 4 --group 16 --fence acqrel --fold plain --form general --per-sm 1
	has gpured-exact-bench && run gpured-exact-bench "${exe[gpured-exact-bench]}" --hi 16
	has gpured-det-bench && run gpured-det-bench "${exe[gpured-det-bench]}" --hi 16 --reps 1
	has gpured-ops-bench && run gpured-ops-bench "${exe[gpured-ops-bench]}" --reps 1
	has gpured-narrow-bench && run gpured-narrow-bench "${exe[gpured-narrow-bench]}" --hi 24
	has gpured-staging-write && run gpured-staging-write "${exe[gpured-staging-write]}" 64
	has gpured-h2d-bench && run gpured-h2d-bench "${exe[gpured-h2d-bench]}" $((16 << 20)) $((1 << 20)) 2 1
	has gpured-cuda-rtt && run gpured-cuda-rtt "${exe[gpured-cuda-rtt]}" 100
	if has gpured-device-bench && has gpured; then
		start_daemon cuda
		run gpured-device-bench "${exe[gpured-device-bench]}" "$tmp/s" 20 f32 10,14
		stop_daemon
	fi
fi

echo "$ran run, $failed failed"
[ $ran -gt 0 ] || die "nothing to run"
[ $failed -eq 0 ]
