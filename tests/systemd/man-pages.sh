#!/bin/bash
# The generated man pages: each is roff with the sections a reader looks
# for, groff (where installed) formats it without a warning, and gpured(8)
# documents every option of the daemon.
#
# usage: man-pages.sh [--daemon GPURED] PAGE...
# With --daemon, gpured(8) must also name every option gpured --help lists.
set -euo pipefail

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

daemon_opts=
if [ "${1:-}" = --daemon ]; then
	help=$("$2" --help) || fail "$2 --help failed"
	daemon_opts=$(grep -o -- '--[a-z][a-z-]*' <<<"$help" | sort -u)
	[ -n "$daemon_opts" ] || fail "$2 --help lists no options"
	shift 2
fi
[ $# -gt 0 ] || fail "no pages given"
for page; do
	name=${page##*/}
	grep -q '^\.TH' "$page" || fail "$name has no .TH header"
	for section in NAME SYNOPSIS DESCRIPTION 'SEE ALSO'; do
		grep -q "^\.SH \"\{0,1\}$section\"\{0,1\}\$" "$page" || fail "$name has no $section section"
	done
	if command -v groff >/dev/null; then
		warnings=$(groff -man -t -ww -z "$page" 2>&1) || fail "groff cannot format $name"
		[ -z "$warnings" ] || fail "groff warns on $name: $warnings"
	else
		echo "note: groff not installed, $name not formatted"
	fi
	# The text without roff's escapes (scdoc writes "\\&" after periods).
	text=$(sed -e 's/\\&//g' -e 's/\\f[BIRP]//g' -e 's/\\-/-/g' "$page")
	case $name in
	gpured.8)
		for opt in --socket --socket-mode --backend --max-request-bytes --max-connections \
			--staging-bytes --chunk-bytes --threads --config -v $daemon_opts \
			SIGTERM SIGINT /run/gpured.sock /etc/gpured/gpured.conf gpured.socket gpured.service; do
			grep -qF -- "$opt" <<<"$text" || fail "gpured.8 does not mention $opt"
		done
		;;
	gpuredctl.1)
		for word in ping info stats metrics --output --json sum min max sumsq --dtype --raw --socket \
			top --interval --iterations --quiet cumsum; do
			grep -qF -- "$word" <<<"$text" || fail "gpuredctl.1 does not mention $word"
		done
		;;
	gpured-benchmark.1)
		for word in --socket -c -P -n -d --dtype --op -t --json; do
			grep -qF -- "$word" <<<"$text" || fail "gpured-benchmark.1 does not mention $word"
		done
		;;
	libgpured.3)
		for fn in gpured_connect gpured_close gpured_sum_f32 gpured_sum_i64 gpured_reduce \
			gpured_submit gpured_wait gpured_reduce_partial gpured_partial_combine \
			gpured_partial_round gpured_wait_partial gpured_cumsum gpured_region_new_flags \
			'pkg-config --cflags --libs gpured'; do
			grep -qF -- "$fn" <<<"$text" || fail "libgpured.3 does not mention $fn"
		done
		;;
	esac
	echo "ok: $name"
done
