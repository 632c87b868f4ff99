#!/bin/sh
# gpured-benchmark against the real daemon, on a socket of its own: a few
# short runs (connections on one thread and on two, small and large
# requests). Passes when every run exits 0 and its JSON reports every
# request done and no wrong result.
# Usage: test-benchmark.sh GPURED GPURED-BENCHMARK
set -u
daemon=$1
bench=$2

dir=$(mktemp -d "${TMPDIR:-/tmp}/gpured-bench.XXXXXX") || exit 1
sock=$dir/s
pid=
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

"$daemon" --socket "$sock" --backend cpu --threads 2 --config /dev/null \
	>"$dir/log" 2>&1 &
pid=$!
i=0
while [ ! -S "$sock" ]; do
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "daemon exited:"; cat "$dir/log"
		exit 1
	fi
	i=$((i + 1))
	if [ $i -gt 200 ]; then
		echo "no socket after 10 s"; cat "$dir/log"
		exit 1
	fi
	sleep 0.05
done

fail=0
# Each run: requests, then the other options. The last ones send 4-16 MiB
# requests, which take many partial writes each: out of a repeated buffer
# (by default, and a small odd one that splits every writev), and flat;
# then the same through shared-memory regions.
while read -r n args; do
	# shellcheck disable=SC2086
	out=$("$bench" -s "$sock" -n "$n" $args --json)
	rc=$?
	echo "-n $n $args: exit $rc: $out"
	case $out in
	*"\"requests\":$n,\"errors\":0,\"mismatches\":0,\"failed_connections\":0,"*) ;;
	*) fail=1 ;;
	esac
	[ $rc -eq 0 ] || fail=1
done <<RUNS
2000 -c 4 -P 8
2000 -c 4 -P 8 --threads 2 --dtype i64 --op sumsq
2000 -c 1 -P 1 --dtype u32 --op min
20 -c 2 -P 2 -d 4M --op max
20 -c 2 -P 3 -d 1000003 --dtype f64 --op min --send-buffer 4100
20 -c 1 -P 2 -d 1048577 --dtype u32 --op sum --send-buffer 0
2000 -c 4 -P 8 --region --dtype i32 --op sumsq
20 -c 2 -P 2 -d 4000001 --region --dtype f64 --op max
RUNS
exit $fail
