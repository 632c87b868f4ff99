#!/bin/bash
# One pass on a GPU host: tests, sanitizers, the tables and the sweep.
# usage: gpu-run.sh BINDIR OUTDIR
#   BINDIR holds gpured-kernels, test-variants and sanitize.sh (statically
#   linked against cudart: no build folder needed), or is the meson build
#   folder that built them (sanitize.sh is then taken from beside this
#   script); OUTDIR gets summary.txt, test.log, racecheck.log,
#   memcheck.log, reduce.json, scan.json, sweep.json and sweep.tsv.
set -u
bin=${1:?bindir}
out=${2:?outdir}
find_in() {
	local d
	for d in "$bin" "$bin/progressions" "$bin/progressions/tests" "$(dirname "$0")/tests"; do
		[ -e "$d/$1" ] && { echo "$d/$1"; return; }
	done
	echo "gpu-run: no $1 in $bin" >&2
	exit 1
}
kernels=$(find_in gpured-kernels) || exit 1
test_variants=$(find_in test-variants) || exit 1
sanitize=$(find_in sanitize.sh) || exit 1
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
sum=$out/summary.txt
log() { echo "$@" | tee -a "$sum"; }

log "# $(date -u +%FT%TZ) $(uname -r)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv 2>&1 | tee -a "$sum"

log "## test-variants"
timeout 180 "$test_variants" >"$out/test.log" 2>&1
log "test-variants exit $?"
tail -n 5 "$out/test.log" | tee -a "$sum"
grep -c '^FAIL' "$out/test.log" | sed 's/^/FAIL lines: /' | tee -a "$sum"

for dt in int float double; do
	log "## gpured-kernels --dtype $dt --n 2^24"
	timeout 120 "$kernels" --dtype $dt --n '2^24' --json-out "$out/reduce-$dt.json" 2>&1 | tee -a "$sum"
	log "exit ${PIPESTATUS[0]}"
done
log "## gpured-kernels --dtype float --n 2^24, again (run-to-run spread)"
timeout 120 "$kernels" --dtype float --n '2^24' 2>&1 | tee -a "$sum"
log "exit ${PIPESTATUS[0]}"
log "## gpured-kernels --dtype float --n 2^28"
timeout 120 "$kernels" --dtype float --n '2^28' --reps 21 --json-out "$out/reduce-float28.json" 2>&1 | tee -a "$sum"
log "exit ${PIPESTATUS[0]}"
for dt in int float double; do
	log "## gpured-kernels --scan --dtype $dt --n 2^24"
	timeout 120 "$kernels" --scan --dtype $dt --n '2^24' --json-out "$out/scan-$dt.json" 2>&1 | tee -a "$sum"
	log "exit ${PIPESTATUS[0]}"
done
log "## gpured-kernels --sweep --dtype float"
timeout 150 "$kernels" --sweep --dtype float --json-out "$out/sweep.json" >"$out/sweep.tsv" 2>&1
log "exit $?"
tee -a "$sum" <"$out/sweep.tsv"

# Joined into one array each, so that few files come back.
for t in reduce scan; do
	{
		echo "["
		first=1
		for dt in int float double float28; do
			f=$out/$t-$dt.json
			[ -s "$f" ] || continue
			[ $first = 1 ] || echo ","
			cat "$f"
			first=0
			rm -f "$f"
		done
		echo "]"
	} >"$out/$t.json"
done

log "## racecheck (test-variants --racecheck)"
timeout 200 sh "$sanitize" racecheck "$test_variants" --racecheck >"$out/racecheck.log" 2>&1
log "racecheck exit $?"
tail -n 4 "$out/racecheck.log" | tee -a "$sum"
log "## memcheck (test-variants --small)"
timeout 150 sh "$sanitize" memcheck "$test_variants" --small >"$out/memcheck.log" 2>&1
log "memcheck exit $?"
tail -n 4 "$out/memcheck.log" | tee -a "$sum"
for f in "$out"/*.log; do
	# Keep what comes back small.
	if [ "$(stat -c %s "$f")" -gt 4000000 ]; then
		head -c 2000000 "$f" >"$f.tmp" && mv "$f.tmp" "$f"
	fi
done
log "# done $(date -u +%FT%TZ)"
