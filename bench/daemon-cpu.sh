#!/usr/bin/env bash
# What a small request costs the host's CPUs: the daemon's own CPU time
# (/proc/PID/stat, every thread, the driver's included) per 1 KiB f32 sum,
# on a CPU daemon, a CUDA daemon with its default routing (small requests
# on its CPU route) and a CUDA daemon that sends everything to the GPU
# (--route-cpu-max-bytes 0); each under 8 connections with 16 in flight
# and under one request at a time. A fresh daemon of each kind a round,
# the kinds in turn (docs/benchmarks/gpu-e2e.md).
#
#   bench/daemon-cpu.sh BINDIR [ROUNDS]
#     (BINDIR holds gpured and gpured-benchmark; 2 rounds by default)
#
# One JSON line a measurement: gpured-benchmark's, with the daemon's kind,
# the round, its CPU seconds over the load and microseconds a request.
set -euo pipefail
b=${1:?usage: daemon-cpu.sh BINDIR [ROUNDS]}
rounds=${2:-2}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpured-cpu.XXXXXX")
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
cpu_s() { # utime + stime of every thread, in seconds
	python3 -c 'import os, sys
f = open("/proc/%s/stat" % sys.argv[1]).read().rsplit(")", 1)[1].split()
print((int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK"))' "$1"
}
for r in $(seq "$rounds"); do
	for kind in cpu cuda cuda-gpu; do
		case $kind in
		cpu) args=(--backend cpu) ;;
		cuda) args=(--backend cuda) ;;
		cuda-gpu) args=(--backend cuda --route-cpu-max-bytes 0) ;;
		esac
		rm -f "$tmp/s"
		"$b/gpured" --socket "$tmp/s" --config /dev/null "${args[@]}" >"$tmp/log" 2>&1 &
		pid=$!
		for _ in $(seq 200); do [ -S "$tmp/s" ] && break; sleep 0.05; done
		for load in "c8P16:-c 8 -P 16 --threads 4 -n 400000" "c1P1:-c 1 -P 1 -n 20000"; do
			name=${load%%:*}
			read -ra la <<<"${load#*:}"
			c0=$(cpu_s "$pid")
			out=$("$b/gpured-benchmark" -s "$tmp/s" "${la[@]}" -d 256 --json)
			c1=$(cpu_s "$pid")
			python3 -c 'import json, sys
j = json.loads(sys.argv[1])
cpu = float(sys.argv[5]) - float(sys.argv[4])
j.update(kind=sys.argv[2], round=int(sys.argv[3]), load=sys.argv[6], daemon_cpu_s=round(cpu, 3),
         daemon_cpu_us_per_req=round(cpu * 1e6 / j["requests"], 3))
print(json.dumps(j))' "$out" "$kind" "$r" "$c0" "$c1" "$name"
		done
		kill "$pid"
		wait "$pid" 2>/dev/null || true
		pid=
	done
done | tee "$tmp/runs"
python3 - "$tmp/runs" <<'PY'
import json, statistics, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
for load in ("c8P16", "c1P1"):
    for kind in ("cpu", "cuda", "cuda-gpu"):
        v = [r for r in rs if r["load"] == load and r["kind"] == kind]
        print("%s %-8s: %s us of daemon CPU a request (rounds), %s req/s, p50 %s us" % (
            load, kind, " ".join("%.2f" % r["daemon_cpu_us_per_req"] for r in v),
            " ".join("%.0f" % r["requests_per_s"] for r in v),
            " ".join("%.1f" % r["latency_us"]["p50"] for r in v)))
PY
