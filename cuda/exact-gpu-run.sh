#!/bin/bash
# The exact sums on a GPU host, in one go: the test, memcheck and racecheck
# on its quick sizes, then (where BINDIR has them) the CUDA backend's test
# and the device-array test, each benchmark twice (run-to-run spread).
#   cuda/exact-gpu-run.sh BINDIR OUTDIR [TAR]
# BINDIR holds test-exact and gpured-exact-bench (from the build's
# tests/gpu and bench/cuda folders), and may hold test-exact-wide,
# test-cuda-backend,
# test-device-map with gpured (the daemon it starts), and gpured-det-bench
# (built with -Dcccl_include). Each step's log goes to OUTDIR, which is
# packed into TAR after every step when one is named, so that a run cut
# short still hands back what it did.
set -u
bin=$1 out=$2 tarball=${3:-}
mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv \
	| tee "$out/smi.txt"
step() { # name timeout command...
	local name=$1 to=$2
	shift 2
	local s
	s=$(date +%s%N)
	timeout "$to" "$@" > "$out/$name.log" 2>&1
	echo "$name rc=$? $(( ($(date +%s%N) - s) / 1000000 )) ms" | tee -a "$out/$name.log"
	if [ -n "$tarball" ]; then
		tar -C "$(dirname "$out")" -cf "$tarball" "$(basename "$out")"
	fi
}
step test 300 "$bin/test-exact"
if [ -x "$bin/test-exact-wide" ]; then
	step test-wide 300 "$bin/test-exact-wide"
	step memcheck-wide 240 compute-sanitizer --tool memcheck --error-exitcode 3 "$bin/test-exact-wide" --quick
fi
step memcheck 240 compute-sanitizer --tool memcheck --error-exitcode 3 "$bin/test-exact" --quick
step racecheck 180 compute-sanitizer --tool racecheck --error-exitcode 3 "$bin/test-exact" --quick
if [ -x "$bin/test-cuda-backend" ]; then
	step backend 400 "$bin/test-cuda-backend"
fi
if [ -x "$bin/test-device-map" ] && [ -x "$bin/gpured" ]; then
	step device-map 240 "$bin/test-device-map" "$bin/gpured"
fi
step bench1 120 "$bin/gpured-exact-bench"
step bench2 120 "$bin/gpured-exact-bench"
if [ -x "$bin/gpured-det-bench" ]; then
	step det-bench1 120 "$bin/gpured-det-bench"
	step det-bench2 120 "$bin/gpured-det-bench"
fi
grep -h "rc=" "$out"/*.log
