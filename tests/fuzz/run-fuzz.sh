#!/bin/sh
# Runs a libFuzzer target for a bounded time on its checked-in seeds, as a
# meson test: any crash, sanitizer report, leak or timeout fails it.
# New inputs go to a scratch corpus in the build tree (the seeds directory
# is only read); a failing input is saved under WORKDIR/artifacts/.
#
# usage: run-fuzz.sh TARGET SEEDS WORKDIR SECONDS
# GPURED_FUZZ_SECONDS, when set, replaces SECONDS.
set -eu
exe=$1
seeds=$2
work=$3
secs=${GPURED_FUZZ_SECONDS:-$4}
mkdir -p "$work/corpus" "$work/artifacts"
echo "fuzzing $exe for ${secs}s: seeds $seeds, scratch $work"
# libFuzzer's own exit codes for a crash (77) and a timeout (70) read as
# "skipped" and "failed" to meson: both must fail.
exec "$exe" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
	-error_exitcode=1 -timeout_exitcode=1 \
	-print_final_stats=1 -artifact_prefix="$work/artifacts/" \
	"$work/corpus" "$seeds"
