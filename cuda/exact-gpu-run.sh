#!/bin/bash
# The exact sums on a GPU host, in one go: the test, memcheck and racecheck
# on its quick sizes, the benchmark twice (run-to-run spread).
#   cuda/exact-gpu-run.sh BINDIR OUTDIR
# BINDIR holds test-exact and gpured-exact-bench (from the build's
# tests/gpu and cuda folders); each step's log goes to OUTDIR.
set -u
bin=$1 out=$2
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
}
step test 200 "$bin/test-exact"
step memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 3 "$bin/test-exact" --quick
step racecheck 90 compute-sanitizer --tool racecheck --error-exitcode 3 "$bin/test-exact" --quick
step bench1 70 "$bin/gpured-exact-bench"
step bench2 70 "$bin/gpured-exact-bench"
cat "$out/bench1.log"
