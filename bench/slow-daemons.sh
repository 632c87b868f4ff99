#!/bin/bash
# Many fresh CUDA daemons, one after the other, each loaded the same way:
# 1 KiB i32 sums through the GPU (no CPU route) from 8 connections with 16
# in flight for 3 s, then one connection with one in flight (latency).
# Before them, how fast each CPU runs a spinning thread, alone and in
# pairs (gpured-vcpu-speed). One line a daemon: its rate, its latency, how
# much of its memory is in transparent huge pages once it listens (the
# staging memory asks for them), the GPU's clocks, performance state and
# use (nvidia-smi, mid-run), and the CPU and %CPU of each of its threads
# that was busy (ps, mid-run).
#
#   bench/slow-daemons.sh BINDIR [N [OUTDIR]]
#     (BINDIR holds gpured, gpured-benchmark and gpured-vcpu-speed; N
#      daemons, default 10; raw files in OUTDIR, default a temporary one)
#
# With SLOW_DAEMONS_SPLIT=1 the daemons run on the first half of the CPUs
# and the load on the second, so that the load generator's threads and the
# daemon's never share a CPU (their speeds vary with the pairing on
# virtual machines). SLOW_DAEMONS_ARGS replaces the daemon's options
# (default "--backend cuda --route-cpu-max-bytes 0"; "--backend cpu" gives
# the same spread measured on CPU daemons).
set -u
B=${1:?usage: slow-daemons.sh BINDIR [N [OUTDIR]]}
N=${2:-10}
L=${3:-$(mktemp -d)}
mkdir -p "$L"
ON_D=() ON_B=()
if [ "${SLOW_DAEMONS_SPLIT:-0}" = 1 ]; then
	half=$(( $(nproc) / 2 ))
	ON_D=(taskset -c "0-$((half - 1))")
	ON_B=(taskset -c "$half-$(( $(nproc) - 1 ))")
	echo "daemons on CPUs 0-$((half - 1)), load on $half-$(( $(nproc) - 1 ))"
fi
lscpu > "$L/lscpu.txt" 2>&1
"$B/gpured-vcpu-speed" > "$L/vcpu-speed.txt" 2>&1
grep -v '^pair' "$L/vcpu-speed.txt"
for k in $(seq "$N"); do
	S=$L/d$k.sock
	# shellcheck disable=SC2086 # options, split on purpose
	"${ON_D[@]}" "$B/gpured" --socket "$S" ${SLOW_DAEMONS_ARGS:---backend cuda --route-cpu-max-bytes 0} \
		> "$L/d$k.log" 2>&1 &
	P=$!
	for i in $(seq 100); do [ -S "$S" ] && break; sleep 0.1; done
	grep AnonHugePages "/proc/$P/smaps_rollup" > "$L/h$k.txt" 2>&1
	"${ON_B[@]}" "$B/gpured-benchmark" -s "$S" -c 8 -P 16 --threads 4 -n 0 -t 3 -d 256 --dtype i32 \
		--json > "$L/b$k.json" 2> "$L/b$k.err" &
	BP=$!
	sleep 1.5
	ps -L -o tid,comm,psr,pcpu -p "$P" > "$L/t$k.txt"
	ps -L -o tid,comm,psr,pcpu -p "$BP" > "$L/bt$k.txt"
	nvidia-smi --query-gpu=clocks.sm,clocks.mem,pstate,utilization.gpu --format=csv,noheader \
		> "$L/g$k.txt" 2>&1
	wait "$BP"
	"${ON_B[@]}" "$B/gpured-benchmark" -s "$S" -c 1 -P 1 -n 20000 -d 256 --dtype i32 --json \
		> "$L/l$k.json" 2> "$L/l$k.err"
	kill "$P"
	wait "$P"
	python3 - "$L" "$k" <<'PY'
import json, sys
L, k = sys.argv[1], sys.argv[2]
b = json.load(open(f"{L}/b{k}.json"))
l = json.load(open(f"{L}/l{k}.json"))
busy = [ln.split() for ln in open(f"{L}/t{k}.txt").read().splitlines()[1:]]
busy = ["%s:cpu%s:%s%%" % (t[1], t[2], t[3]) for t in busy if float(t[3]) > 5]
huge = open(f"{L}/h{k}.txt").read().split()
gpu = open(f"{L}/g{k}.txt").read().strip().replace(" ", "")
print("daemon %s rate %.0f p50 %.1f p99 %.1f huge %s gpu %s busy %s" % (
    k, b["requests_per_s"], l["latency_us"]["p50"], l["latency_us"]["p99"],
    "".join(huge[1:2]) + "kB" if len(huge) > 1 else "?", gpu, " ".join(busy)))
PY
done
