#!/usr/bin/env bash
# Measure gpured and its references side by side, in one run, on this
# machine, and print the tables of docs/benchmarks/socket.md:
#   - 1 KiB f32 requests, 8 connections, pipeline 16: gpured-benchmark vs
#     redis-benchmark SET with 1 KiB values (redis-server on a Unix socket);
#   - 1 KiB, 1 connection, no pipelining: p50 round trips, likewise;
#   - 64 MiB f32 requests on one connection vs the raw bandwidth of a Unix
#     stream socket between two processes (gpured-sockbw);
#   - the daemon's peak RSS against its staging size.
#
# usage: bench/compare.sh [BUILDDIR] [-- extra gpured options]
#   e.g. bench/compare.sh build -- --backend cpu
# ROUNDS=N (default 3) rounds, medians reported; PIN=1 runs the servers on
# the last CPU and the clients on the others (steadier on small machines).
# Besides req/s it reports each server's CPU time per request, which does
# not depend on how the two load generators pace their pipelines.
# Needs redis-server and redis-benchmark (Debian: redis-server, redis-tools).
set -euo pipefail

builddir=${1:-build}
shift || true
[ "${1:-}" = "--" ] && shift
extra=("$@")
rounds=${ROUNDS:-3}

gpured=$builddir/daemon/gpured
bench=$builddir/bench/gpured-benchmark
sockbw=$builddir/bench/gpured-sockbw
for x in "$gpured" "$bench" "$sockbw"; do
	[ -x "$x" ] || { echo "compare: $x not built" >&2; exit 2; }
done
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null || {
	echo "compare: needs redis-server and redis-benchmark (apt-get install redis-server)" >&2
	exit 2
}

tmp=$(mktemp -d)
trap 'kill $gpid $rpid 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
gsock=$tmp/gpured.sock
rsock=$tmp/redis.sock

srv=() cli=()
if [ "${PIN:-0}" = 1 ] && [ "$(nproc)" -ge 2 ]; then
	last=$(($(nproc) - 1))
	srv=(taskset -c "$last")
	cli=(taskset -c "0-$((last - 1))")
fi
"${srv[@]}" "$gpured" --socket "$gsock" "${extra[@]}" 2>"$tmp/gpured.log" &
gpid=$!
"${srv[@]}" redis-server --unixsocket "$rsock" --unixsocketperm 700 --port 0 --save '' \
	--appendonly no --daemonize no >"$tmp/redis.log" 2>&1 &
rpid=$!
for _ in $(seq 100); do
	[ -S "$gsock" ] && [ -S "$rsock" ] && break
	sleep 0.05
done

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# CPU time of a process so far, in clock ticks (user + system).
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# redis-benchmark -q prints "SET: N requests per second, p50=X msec".
redis_rps() { "${cli[@]}" redis-benchmark -s "$rsock" -t set -d 1024 "$@" -q 2>/dev/null | tr '\r' '\n' |
	sed -n 's/.*SET: \([0-9.]*\) requests per second.*/\1/p' | tail -1; }
redis_p50_us() { "${cli[@]}" redis-benchmark -s "$rsock" -t set -d 1024 "$@" -q 2>/dev/null | tr '\r' '\n' |
	sed -n 's/.*p50=\([0-9.]*\) msec.*/\1/p' | tail -1 | awk '{print $1 * 1000}'; }

backend=$("$builddir/client/gpuredctl" --socket "$gsock" info --json | json 'd["backend"]')
staging=$("$builddir/client/gpuredctl" --socket "$gsock" info --json | json 'd["limits"]["staging_bytes"]')

echo "machine: $(nproc) CPUs, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
echo "gpured backend: $backend, staging $((staging >> 20)) MiB; $rounds rounds, medians"
echo

g_rps=() r_rps=() g_p50=() r_p50=() g_bw=() s_bw=() s_bw_sys=() g_p99=() g_big_p50=() g_cpu=() r_cpu=()
n_small=400000
for _ in $(seq "$rounds"); do
	t0=$(ticks $gpid)
	out=$("${cli[@]}" "$bench" -s "$gsock" -c 8 -P 16 -n $n_small -d 256 --dtype f32 --json)
	g_cpu+=("$(echo "($(ticks $gpid) - $t0) * 1000000 / $hz / $n_small" | bc -l)")
	g_rps+=("$(echo "$out" | json 'd["requests_per_s"]')")
	g_p99+=("$(echo "$out" | json 'd["latency_us"]["p99"]')")
	t0=$(ticks $rpid)
	r_rps+=("$(redis_rps -c 8 -P 16 -n $n_small)")
	r_cpu+=("$(echo "($(ticks $rpid) - $t0) * 1000000 / $hz / $n_small" | bc -l)")
	out=$("${cli[@]}" "$bench" -s "$gsock" -c 1 -P 1 -n 50000 -d 256 --dtype f32 --json)
	g_p50+=("$(echo "$out" | json 'd["latency_us"]["p50"]')")
	r_p50+=("$(redis_p50_us -c 1 -P 1 -n 50000)")
	s_bw+=("$("$sockbw" -b 4G --json | json 'd["gb_per_s"]')")
	s_bw_sys+=("$("$sockbw" -b 4G --sndbuf system --json | json 'd["gb_per_s"]')")
	out=$("${cli[@]}" "$bench" -s "$gsock" -c 1 -P 1 -n 24 -d $((16 << 20)) --dtype f32 --json)
	g_bw+=("$(echo "$out" | json 'd["payload_gb_per_s"]')")
	g_big_p50+=("$(echo "$out" | json 'd["latency_us"]["p50"]')")
done
rss_kib=$(awk '/VmHWM/ {print $2}' /proc/$gpid/status)

m() { printf '%s\n' "$@" | median; }
gr=$(m "${g_rps[@]}") rr=$(m "${r_rps[@]}") gp=$(m "${g_p50[@]}") rp=$(m "${r_p50[@]}")
gb=$(m "${g_bw[@]}") sb=$(m "${s_bw[@]}")
printf '| 1 KiB, -c 8 -P 16 | gpured %.0f req/s (p99 %s us) | redis SET %.0f req/s | ratio %.2f |\n' \
	"$gr" "$(m "${g_p99[@]}")" "$rr" "$(echo "$gr / $rr" | bc -l)"
printf '| 1 KiB, -c 8 -P 16, server CPU per request | gpured %.2f us | redis-server %.2f us | ratio %.2f (lower is better) |\n' \
	"$(m "${g_cpu[@]}")" "$(m "${r_cpu[@]}")" "$(echo "$(m "${g_cpu[@]}") / $(m "${r_cpu[@]}")" | bc -l)"
printf '| 1 KiB, -c 1 -P 1, p50 | gpured %.1f us | redis SET %.1f us | ratio %.2f (lower is better) |\n' \
	"$gp" "$rp" "$(echo "$gp / $rp" | bc -l)"
printf '| 64 MiB f32, -c 1 | gpured %.2f GB/s (p50 %.1f ms) | raw socket %.2f GB/s | ratio %.2f |\n' \
	"$gb" "$(echo "$(m "${g_big_p50[@]}") / 1000" | bc -l)" "$sb" "$(echo "$gb / $sb" | bc -l)"
printf '| raw socket, send buffer | %.2f GB/s with 4 MiB (what clients use) | %.2f GB/s with the system default | ratio %.2f |\n' \
	"$sb" "$(m "${s_bw_sys[@]}")" "$(echo "$sb / $(m "${s_bw_sys[@]}")" | bc -l)"
printf '| peak RSS | %d MiB | staging %d MiB | bound (staging + 64 MiB) %d MiB |\n' \
	$((rss_kib >> 10)) $((staging >> 20)) $(((staging >> 20) + 64))
echo
echo "rounds: gpured req/s ${g_rps[*]}; redis ${r_rps[*]}"
echo "        server CPU us/request: gpured ${g_cpu[*]}; redis ${r_cpu[*]}"
echo "        gpured p50 ${g_p50[*]} us; redis ${r_p50[*]} us"
echo "        gpured 64 MiB ${g_bw[*]} GB/s; socket ${s_bw[*]} GB/s (system send buffer ${s_bw_sys[*]})"
