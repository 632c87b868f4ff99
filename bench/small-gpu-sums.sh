#!/bin/bash
# Small requests through the GPU (no CPU route): exact float sums (the
# exact kernel, 1080-byte results folded on the host) against integer
# sums and f32 max (the batch kernel, 8-byte results), on two fresh CUDA
# daemons, each measured twice over with the kinds in turn.
#
#   bench/small-gpu-sums.sh BINDIR    (BINDIR holds gpured and gpured-benchmark)
#
# One line a run: the daemon, the round, the kind and shape, then
# gpured-benchmark's JSON.
set -u
B=${1:?usage: small-gpu-sums.sh BINDIR}
for k in 1 2; do
	S=/tmp/gpured-small-$$-$k.sock
	"$B/gpured" --socket "$S" --backend cuda --route-cpu-max-bytes 0 > /dev/null 2>&1 &
	P=$!
	for i in $(seq 50); do [ -S "$S" ] && break; sleep 0.1; done
	for r in 1 2; do
		for c in "f32 sum" "i32 sum" "f32 max" "f64 sum" "i64 sum"; do
			set -- $c
			for shape in "-c 8 -P 16 --threads 4 -n 1000000" "-c 1 -P 1 -n 20000"; do
				# shellcheck disable=SC2086
				echo "daemon=$k round=$r dtype=$1 op=$2 shape=$shape" \
					"$("$B/gpured-benchmark" -s "$S" $shape -d 256 --dtype "$1" --op "$2" --json)"
			done
		done
	done
	kill $P
	wait $P
done
