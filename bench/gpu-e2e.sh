#!/usr/bin/env bash
# End to end on a GPU host: the same load against a CUDA daemon on every
# GPU, one on GPU 0 only, and a CPU daemon, in one run, with the raw socket
# bandwidth as the ceiling. Prints one JSON line per measurement, tagged.
#
# usage: bench/gpu-e2e.sh BINDIR [ROUNDS]
#   BINDIR holds gpured, gpured-benchmark, gpured-sockbw and gpuredctl
#   (e.g. build-gpu/daemon etc. copied together).
#
# Every process runs off the CPUs that take the GPUs' interrupts (the
# "nvidia" lines of /proc/interrupts; see PERFORMANCE in gpured(8)); the
# first line printed says which CPUs were used. KEEP_IRQ_CPUS=1 runs
# wherever the scheduler puts them. SPLIT_CPUS=1 then puts the daemons on
# the first half of those CPUs and the load generators on the second, so
# that neither takes CPU time from the other.
set -u
bin=${1:?usage: gpu-e2e.sh BINDIR [ROUNDS]}
rounds=${2:-3}

if [ "${KEEP_IRQ_CPUS:-0}" != 1 ] && [ -z "${GPU_E2E_PINNED:-}" ]; then
	irq_cpus=$(awk '/nvidia/ {sub(":", "", $1); print $1}' /proc/interrupts |
		while read -r irq; do cat "/proc/irq/$irq/effective_affinity_list" \
			"/proc/irq/$irq/smp_affinity_list" 2>/dev/null | head -n 1; done |
		tr ',' '\n' | sort -un | tr '\n' ',' | sed 's/,$//')
	if [ -n "$irq_cpus" ]; then
		cpus=$(python3 -c 'import os, sys
drop = set()
for part in sys.argv[1].split(","):
    lo, _, hi = part.partition("-")
    drop.update(range(int(lo), int(hi or lo) + 1))
print(",".join(str(c) for c in sorted(os.sched_getaffinity(0) - drop)))' "$irq_cpus")
		if [ -n "$cpus" ]; then
			echo "{\"gpu_irq_cpus\":\"$irq_cpus\",\"cpus\":\"$cpus\"}"
			GPU_E2E_PINNED=1 exec taskset -c "$cpus" bash "$0" "$@"
		fi
	fi
fi
tmp=$(mktemp -d)
on_daemon=
on_client=
if [ "${SPLIT_CPUS:-0}" = 1 ]; then
	halves=$(python3 -c 'import os
c = sorted(os.sched_getaffinity(0))
h = max(1, len(c) // 2)
print(",".join(map(str, c[:h])), ",".join(map(str, c[h:] or c)))')
	on_daemon="taskset -c ${halves% *}"
	on_client="taskset -c ${halves#* }"
	echo "{\"daemon_cpus\":\"${halves% *}\",\"client_cpus\":\"${halves#* }\"}"
fi
b="$on_client $bin/gpured-benchmark"

$on_daemon "$bin/gpured" --socket "$tmp/all.sock" --backend cuda 2>"$tmp/all.log" & p1=$!
CUDA_VISIBLE_DEVICES=0 $on_daemon "$bin/gpured" --socket "$tmp/one.sock" --backend cuda \
	2>"$tmp/one.log" & p2=$!
$on_daemon "$bin/gpured" --socket "$tmp/cpu.sock" --backend cpu 2>"$tmp/cpu.log" & p3=$!
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
		# one load-generator thread is itself nearly saturated at c8P16;
		# with two the daemon is the limit
		$b -s "$s" -c 8 -P 16 -n 600000 -d 256 --threads 2 --json |
			tag "$r" "$d" small-c8-P16-t2
		$b -s "$s" -c 1 -P 1 -n 20000 -d 256 --json | tag "$r" "$d" small-c1-P1
		$b -s "$s" -c 1 -P 1 -n 24 -d 16777216 --json | tag "$r" "$d" 64MiB-P1
		$b -s "$s" -c 1 -P 2 -n 24 -d 16777216 --json | tag "$r" "$d" 64MiB-P2
	done
	$on_client "$bin/gpured-sockbw" -b 8G --json | tag "$r" socket raw
	$on_client "$bin/gpured-sockbw" -b 8G --sndbuf system --json | tag "$r" socket raw-system-sndbuf
done
for d in all one cpu; do
	"$bin/gpuredctl" --socket "$tmp/$d.sock" stats --json | tr -d '\n ' | tag 0 "$d" stats
	echo
	# the devices, with the jobs each ran: work spreads over every GPU
	"$bin/gpuredctl" --socket "$tmp/$d.sock" info --json | tr -d '\n ' | tag 0 "$d" info
	echo
done
