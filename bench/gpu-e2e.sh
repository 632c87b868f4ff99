#!/usr/bin/env bash
# End to end on a GPU host: the same load against a CUDA daemon on every
# GPU, one on GPU 0 only, and a CPU daemon, in one run, with the raw socket
# bandwidth as the ceiling. Prints one JSON line per measurement, tagged.
#
# usage: bench/gpu-e2e.sh BINDIR [ROUNDS]
#   BINDIR holds gpured, gpured-benchmark, gpured-sockbw and gpuredctl
#   (e.g. build-gpu/daemon etc. copied together).
set -u
bin=${1:?usage: gpu-e2e.sh BINDIR [ROUNDS]}
rounds=${2:-3}
tmp=$(mktemp -d)
b=$bin/gpured-benchmark

"$bin/gpured" --socket "$tmp/all.sock" --backend cuda 2>"$tmp/all.log" & p1=$!
CUDA_VISIBLE_DEVICES=0 "$bin/gpured" --socket "$tmp/one.sock" --backend cuda 2>"$tmp/one.log" & p2=$!
"$bin/gpured" --socket "$tmp/cpu.sock" --backend cpu 2>"$tmp/cpu.log" & p3=$!
trap 'kill $p1 $p2 $p3 2>/dev/null; wait; rm -rf "$tmp"' EXIT
for _ in $(seq 200); do
	[ -S "$tmp/all.sock" ] && [ -S "$tmp/one.sock" ] && [ -S "$tmp/cpu.sock" ] && break
	sleep 0.05
done

tag() { sed "s/^{/{\"round\":$1,\"daemon\":\"$2\",\"load\":\"$3\",/"; }
for r in $(seq "$rounds"); do
	for d in all one cpu; do
		s=$tmp/$d.sock
		$b -s "$s" -c 8 -P 16 -n 600000 -d 256 --json | tag "$r" "$d" small-c8-P16
		$b -s "$s" -c 1 -P 1 -n 20000 -d 256 --json | tag "$r" "$d" small-c1-P1
		$b -s "$s" -c 1 -P 1 -n 24 -d 16777216 --json | tag "$r" "$d" 64MiB-P1
		$b -s "$s" -c 1 -P 2 -n 24 -d 16777216 --json | tag "$r" "$d" 64MiB-P2
	done
	"$bin/gpured-sockbw" -b 8G --json | tag "$r" socket raw
done
for d in all one cpu; do
	"$bin/gpuredctl" --socket "$tmp/$d.sock" stats --json | tr -d '\n ' | tag 0 "$d" stats
	echo
done
