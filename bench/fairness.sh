#!/usr/bin/env bash
# One client streaming large arrays back to back against small requests
# from others, on one daemon (docs/benchmarks/regions.md):
#
#   bench/fairness.sh BUILDDIR [ROUNDS] [-- DAEMON-ARGS...]
#
# Each round: 1 KiB f32 sums from 8 connections, one in flight on each,
# alone for 3 s; a ninth connection sending 1 GiB arrays (256 MiB with
# FAIRNESS_HOG_BYTES) one after another, alone for 5 s; then the hog again
# for 5 s with the 8 connections running from its second 1 to 4. Prints
# each run's JSON, then per round and as medians: the p99 with the hog
# over the p99 without, and the hog's GB/s beside the others over its GB/s
# alone.
set -euo pipefail
b=$1
rounds=${2:-3}
shift $(($# >= 2 ? 2 : $#))
[ "${1:-}" = -- ] && shift
hog_elems=$(( ${FAIRNESS_HOG_BYTES:-$((1 << 30))} / 4 ))
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpured-fair.XXXXXX")
pid= hog=
cleanup() {
	[ -n "$hog" ] && kill "$hog" 2>/dev/null && wait "$hog" 2>/dev/null
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
"$b/daemon/gpured" --socket "$tmp/s" --config /dev/null "$@" >"$tmp/log" 2>&1 &
pid=$!
for _ in $(seq 200); do [ -S "$tmp/s" ] && break; sleep 0.05; done
bench=$b/bench/gpured-benchmark
small() { "$bench" -s "$tmp/s" -c 8 -P 1 -n 0 -t 3 -d 256 --json; }
hog_run() { "$bench" -s "$tmp/s" -c 1 -P 1 -n 0 -t 5 -d $hog_elems --json; }
for r in $(seq "$rounds"); do
	alone=$(small)
	hog_alone=$(hog_run)
	hog_run >"$tmp/hog.json" &
	hog=$!
	sleep 1
	busy=$(small)
	wait "$hog"; hog=
	echo "{\"round\":$r,\"alone\":$alone,\"with_hog\":$busy,\"hog_alone\":$hog_alone,\"hog_beside\":$(cat "$tmp/hog.json")}"
done | tee "$tmp/runs"
python3 - "$tmp/runs" <<'PY'
import json, statistics, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
q = [r["with_hog"]["latency_us"]["p99"] / r["alone"]["latency_us"]["p99"] for r in rs]
h = [r["hog_beside"]["payload_gb_per_s"] / r["hog_alone"]["payload_gb_per_s"] for r in rs]
for r, x, y in zip(rs, q, h):
    print("round %d: p99 alone %.0f us, with the hog %.0f us: %.2fx; hog %.2f GB/s alone, %.2f beside: %.2f"
          % (r["round"], r["alone"]["latency_us"]["p99"], r["with_hog"]["latency_us"]["p99"], x,
             r["hog_alone"]["payload_gb_per_s"], r["hog_beside"]["payload_gb_per_s"], y))
print("median %.2fx; the hog keeps %.2f of its GB/s" % (statistics.median(q), statistics.median(h)))
PY
