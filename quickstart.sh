#!/usr/bin/env bash
# gpured's quick start, for a Debian 12 machine (as root, or with sudo):
#
#   ./quickstart.sh run    install what is missing, build, start the daemon
#                          in the foreground on ./gpured.sock
#   ./quickstart.sh test   install what is missing, build, run every test;
#                          then the same tests built with ASan and UBSan,
#                          then each fuzz target for 20 s (both clang); the last
#                          line reads "N passed, N failed, N skipped",
#                          counted over all three runs
#
# Arguments after "test" go to meson test (e.g. a test's name, --suite
# unit) for the first two runs, and then the fuzz run is left out.
# GPURED_SANITIZE=0 or GPURED_FUZZ=0 leaves out the second or third run.
# Build directories: $GPURED_BUILDDIR (default build), with -asan and
# -fuzz appended for the others.
#
# The CUDA backend is built when nvcc is found (PATH or /usr/local/cuda/bin);
# without a GPU the daemon serves from its CPU backend and GPU tests skip.
set -euo pipefail

cd "$(dirname "$0")"
top=$PWD
builddir=${GPURED_BUILDDIR:-build}

# libmicrohttpd-dev: the daemon's --metrics-listen (optional in meson).
build_deps=(gcc meson ninja-build pkg-config libuv1-dev libmsgpack-dev libsystemd-dev libmicrohttpd-dev)
# The test suite also checks the systemd units, socket activation, the
# man pages and the Debian packages. promtool (Debian's prometheus, ~300 MiB
# with what it pulls in) is not among them: the metrics test checks the
# format with a checker of its own, and runs promtool where it is installed.
test_deps=(python3 python3-msgpack python3-numpy python3-pytest python3-dask python3-distributed systemd scdoc dpkg-dev debhelper fakeroot build-essential git groff-base)
# The sanitizer and fuzz runs build with clang, its sanitizer runtimes and
# libFuzzer.
clang_deps=(clang libclang-rt-14-dev)

die() { echo "quickstart: $*" >&2; exit 1; }

install_missing() {
	local missing=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "quickstart: installing ${missing[*]}" >&2
	local sudo=
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
		"${missing[@]}" >/dev/null
}

# setup_build DIR [MESON OPTIONS...] [-- TARGETS...]: configure (once) and build.
setup_build() {
	local dir=$1 opts=() targets=()
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		opts+=("$1")
		shift
	done
	[ $# -gt 0 ] && shift && targets=("$@")
	if [ -x /usr/local/cuda/bin/nvcc ]; then
		export PATH="/usr/local/cuda/bin:$PATH"
	fi
	if [ ! -f "$dir/build.ninja" ]; then
		meson setup "$dir" -Dbuildtype=debugoptimized "${opts[@]}"
	elif [ ${#opts[@]} -gt 0 ]; then
		meson configure "$dir" "${opts[@]}"
	fi
	meson compile -C "$dir" "${targets[@]}"
}

# The test runs whose results count, and the builds that failed.
test_logs=()
failed_builds=0

# run_tests DIR [MESON TEST ARGS...]
run_tests() {
	local dir=$1
	shift
	test_logs+=("$dir/meson-logs/testlog.json")
	rm -f "$dir/meson-logs/testlog.json"
	meson test -C "$dir" --print-errorlogs --num-processes 2 "$@"
}

summarize() {
	# Count results from meson's own logs, so a run that ran nothing says
	# so; a build that failed counts as one failure.
	python3 - "$failed_builds" "${test_logs[@]}" <<'PY'
import json, os, sys
passed = skipped = 0
failed = int(sys.argv[1])
for log in sys.argv[2:]:
    if not os.path.exists(log):
        continue
    for line in open(log):
        line = line.strip()
        if not line:
            continue
        r = json.loads(line).get("result")
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r == "SKIP":
            skipped += 1
        else:
            failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
PY
}

case "${1:-}" in
run)
	install_missing "${build_deps[@]}"
	setup_build "$builddir"
	sock="$top/gpured.sock"
	echo "quickstart: starting gpured on $sock (Ctrl-C stops it)" >&2
	echo "quickstart: from another shell: $top/$builddir/client/gpuredctl --socket $sock info" >&2
	echo "quickstart:                     echo 1 2 3 | $top/$builddir/client/gpuredctl --socket $sock sum" >&2
	exec "$builddir/daemon/gpured" --socket "$sock" "${@:2}"
	;;
test)
	fuzz=${GPURED_FUZZ:-1}
	[ $# -gt 1 ] && fuzz=0
	deps=("${build_deps[@]}" "${test_deps[@]}")
	[ "$fuzz" = 0 ] && [ "${GPURED_SANITIZE:-1}" = 0 ] || deps+=("${clang_deps[@]}")
	install_missing "${deps[@]}"
	# Tests build with every warning an error, as the project promises.
	setup_build "$builddir" -Dwerror=true
	rc=0
	run_tests "$builddir" "${@:2}" || rc=1

	# The same suite under ASan and UBSan, CPU only: any report fails its
	# test. Where GPURED_SANITIZED is set, these skip themselves, and no
	# others: Limits.test_reader_that_never_reads in
	# tests/daemon/test_daemon.py (RSS), and tests/systemd/deb.sh (it
	# builds packages of its own, without sanitizers). Tests run 2-3 times
	# slower there (completion-wakeups: 33 s -> 80 s on a loaded VM), so
	# their time limits are tripled.
	if [ "${GPURED_SANITIZE:-1}" != 0 ]; then
		# clang: its "undefined" also checks float-to-integer conversions
		# and pointer arithmetic on NULL, which gcc's leaves out.
		if CC=clang CXX=clang++ setup_build "$builddir-asan" -Dwerror=true -Dcuda=disabled \
			-Db_sanitize=address,undefined -Db_lundef=false; then
			GPURED_SANITIZED=1 \
			ASAN_OPTIONS=detect_leaks=1 \
			UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
				run_tests "$builddir-asan" --timeout-multiplier 3 "${@:2}" || rc=1
		else
			echo "quickstart: the sanitizer build failed" >&2
			failed_builds=$((failed_builds + 1))
			rc=1
		fi
	fi

	# Each fuzz target for a bounded time on its seeds (tests/fuzz).
	if [ "$fuzz" != 0 ]; then
		if CC=clang setup_build "$builddir-fuzz" -Dwerror=true -Dcuda=disabled \
			-Dfuzzing=true -Db_lundef=false -- fuzz; then
			run_tests "$builddir-fuzz" --no-rebuild --suite fuzz || rc=1
		else
			echo "quickstart: the fuzz build failed" >&2
			failed_builds=$((failed_builds + 1))
			rc=1
		fi
	fi
	summarize
	exit $rc
	;;
*)
	sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
	;;
esac
