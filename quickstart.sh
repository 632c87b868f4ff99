#!/usr/bin/env bash
# gpured's quick start, for a Debian 12 machine (as root, or with sudo):
#
#   ./quickstart.sh run    install what is missing, build, start the daemon
#                          in the foreground on ./gpured.sock
#   ./quickstart.sh test   install what is missing, build, run every test,
#                          and the same tests built with ASan and UBSan,
#                          then each fuzz target for 20 s (both clang); the last
#                          line reads "N passed, N failed, N skipped",
#                          counted over all three runs
#
# The two suites run at once, apart from their tests that must run alone
# (is_parallel: false), and the builds that are not awaited run in the
# background at the lowest CPU priority; each phase's time goes to
# standard error. Arguments after "test" go to meson test (e.g. a test's
# name, --suite unit) for the first two runs, one after the other, and
# then the fuzz run is left out.
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
# The Python suite drives the daemon through two stock msgpack-RPC clients
# too: pynvim's session layer (python3-pynvim) and aio-msgpack-rpc, which
# only PyPI has (install_pypi_deps).
test_deps=(python3 python3-dev python3-msgpack python3-numpy python3-pytest python3-dask python3-distributed python3-pynvim python3-pip systemd scdoc dpkg-dev debhelper fakeroot build-essential git groff-base)
# The sanitizer and fuzz runs build with clang, its sanitizer runtimes and
# libFuzzer.
clang_deps=(clang libclang-rt-14-dev)

die() { echo "quickstart: $*" >&2; exit 1; }

# install_pypi_deps: aio-msgpack-rpc, pinned, without its dependencies
# (msgpack is Debian's), into a folder of the build's, never into the
# system's Python; python/tests/conftest.py finds it through
# $GPURED_TEST_PYDEPS. Where PyPI cannot be reached, its tests skip and
# say why. pip waits on the network most of its time, so it runs in the
# background, beside the builds: pydeps_wait, before the first tests.
pydeps_pid=
install_pypi_deps() {
	local dir=$top/$builddir-pydeps
	export GPURED_TEST_PYDEPS=$dir
	[ -d "$dir/aio_msgpack_rpc" ] && return 0
	python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
		--no-deps --target "$dir" aio-msgpack-rpc==0.2.0 >&2 ||
		echo "quickstart: aio-msgpack-rpc could not be installed from PyPI: its tests will skip" >&2 &
	pydeps_pid=$!
}
pydeps_wait() {
	[ -z "$pydeps_pid" ] || wait "$pydeps_pid"
	pydeps_pid=
}

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
rc=0

t0=$SECONDS
# took WHAT START: how long a phase took, and when it ended, for CI's log.
took() {
	echo "quickstart: $1: $((SECONDS - $2)) s (done at $((SECONDS - t0)) s)" >&2
}

# count_log DIR LOGBASE: the results in DIR/meson-logs/LOGBASE.json count
# (those of an earlier run are removed first); a run in the background
# cannot add them itself.
count_log() {
	rm -f "$1/meson-logs/$2.json"
	test_logs+=("$1/meson-logs/$2.json")
}

# run_tests DIR LOGBASE [MESON TEST ARGS...]: meson test, its results in
# DIR/meson-logs/LOGBASE.json.
run_tests() {
	local dir=$1 logbase=$2
	shift 2
	meson test -C "$dir" --print-errorlogs --num-processes 2 --logbase "$logbase" "$@"
}

# test_names DIR parallel|alone: DIR's tests that may run beside others,
# or those that must run alone (is_parallel: false), one a line. Meson
# starts named tests in the order named: the longest time limit first
# (after meson's own priority), so that the long tests start early rather
# than run on one core at the end while the other idles.
test_names() {
	meson introspect --tests "$1" | python3 -c '
import json, sys
want = sys.argv[1] == "parallel"
tests = [t for t in json.load(sys.stdin) if t["is_parallel"] == want]
tests.sort(key=lambda t: (-t["priority"], -(t["timeout"] or 1e9)))
for name in dict.fromkeys(t["name"] for t in tests):
    print(name)
' "$2"
}

# run_kind DIR LOGBASE parallel|alone [MESON TEST ARGS...]: run_tests on
# DIR's tests of that kind, in test_names' order; none is no run.
run_kind() {
	local dir=$1 logbase=$2 kind=$3 names
	shift 3
	mapfile -t names < <(test_names "$dir" "$kind")
	[ ${#names[@]} -gt 0 ] || return 0
	run_tests "$dir" "$logbase" "$@" "${names[@]}"
}

# background_build WHAT DIR [MESON OPTIONS...] [-- TARGETS...]:
# setup_build in the background at the lowest CPU priority (SCHED_IDLE,
# else nice 19), taking only what the rest leaves; its output goes to
# DIR/quickstart-build.log, and $! is its pid.
background_build() {
	local what=$1 dir=$2
	shift
	mkdir -p "$dir"
	(
		chrt --idle -p 0 $BASHPID >/dev/null 2>&1 || renice -n 19 -p $BASHPID >/dev/null
		start=$SECONDS
		setup_build "$@"
		took "$what (in the background)" $start 2>&3
	) 3>&2 >"$dir/quickstart-build.log" 2>&1 &
}

# built WHAT PID DIR: wait for a background build; a failure prints its
# log and counts as one failure.
built() {
	wait "$2" && return 0
	cat "$3/quickstart-build.log" >&2
	failed "$1"
	return 1
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
	sanitize=${GPURED_SANITIZE:-1}
	[ $# -gt 1 ] && fuzz=0
	deps=("${build_deps[@]}" "${test_deps[@]}")
	[ "$fuzz" = 0 ] && [ "$sanitize" = 0 ] || deps+=("${clang_deps[@]}")
	install_missing "${deps[@]}"
	install_pypi_deps
	t0=$SECONDS
	asan=$builddir-asan
	fuzzdir=$builddir-fuzz

	# Tests build with every warning an error, as the project promises.
	# Where no GPU will run them, the CUDA sources are compiled only to
	# check that they compile (meson_options.txt: gpu_code).
	# Nothing in the suite reads debug information, and writing it took
	# about an eighth of this build's compile time (gcc's and nvcc's
	# alike): this build has none, and the two clang builds only the line
	# tables their reports print. Where its CUDA code is only checked, its
	# build type is custom, as meson gives every nvcc command of a
	# debugoptimized build -g -lineinfo, even where the target overrides
	# debug (a GPU host keeps them: compute-sanitizer reports source lines).
	gpu_code=full
	nvidia-smi -L 2>/dev/null | grep -q '^GPU' || gpu_code=check
	main_opts=(-Dwerror=true -Dgpu_code=$gpu_code -Ddebug=false)
	[ $gpu_code = full ] || main_opts+=(-Dbuildtype=custom -Doptimization=2)
	build_main() {
		"$@" "$builddir" "${main_opts[@]}"
	}
	# The same suite under ASan and UBSan, CPU only: any report fails its
	# test. Where GPURED_SANITIZED is set, these skip themselves, and no
	# others: Limits.test_reader_that_never_reads in
	# tests/daemon/test_daemon.py (RSS), tests/systemd/deb.sh (it builds
	# packages of its own, without sanitizers), python/tests/test_dask.py
	# (gpured.dask's graphs, Python) and bench/smoke.sh (the measurement
	# programs, built but not run). Tests run 2-3 times slower there, so
	# their time limits are tripled. clang: its "undefined" also checks
	# float-to-integer conversions and pointer arithmetic on NULL, which
	# gcc's leaves out. UBSan stops at its first report here
	# (halt_on_error=1); -fno-sanitize-recover says so when compiling,
	# which leaves out the code that would go on after one.
	# MALLOC_PERTURB_=0 keeps meson test from setting it: every program of
	# this build allocates through ASan, which ignores it, so it would only
	# make the uninstrumented Python and tools fill what they allocate.
	asan_flags="-gline-tables-only -fno-sanitize-recover=undefined"
	build_asan() {
		CC=clang CXX=clang++ "$@" "$asan" -Dwerror=true -Dcuda=disabled \
			-Db_sanitize=address,undefined -Db_lundef=false \
			"-Dc_args=$asan_flags" "-Dcpp_args=$asan_flags"
	}
	sanitized() {
		GPURED_SANITIZED=1 MALLOC_PERTURB_=0 ASAN_OPTIONS=detect_leaks=1 \
		UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "$@"
	}
	# Each fuzz target for a bounded time on its seeds (tests/fuzz).
	build_fuzz() {
		CC=clang "$@" "$fuzzdir" -Dwerror=true -Dcuda=disabled \
			-Dfuzzing=true -Db_lundef=false -Dc_args=-gline-tables-only -- fuzz
	}
	# failed WHAT: a build that failed counts as one failure.
	failed() {
		echo "quickstart: the $1 build failed" >&2
		failed_builds=$((failed_builds + 1))
		rc=1
	}

	if [ $# -gt 1 ]; then
		# The tests named on the command line, in each build in turn; the
		# sanitizer build meanwhile in the background.
		asan_pid=
		if [ "$sanitize" != 0 ]; then
			build_asan background_build "sanitizer build"
			asan_pid=$!
		fi
		start=$SECONDS
		if build_main setup_build; then
			took build $start
			pydeps_wait
			count_log "$builddir" testlog
			run_tests "$builddir" testlog "${@:2}" || rc=1
		else
			failed main
		fi
		if [ -n "$asan_pid" ] && built sanitizer "$asan_pid" "$asan"; then
			count_log "$asan" testlog
			sanitized run_tests "$asan" testlog --timeout-multiplier 3 "${@:2}" || rc=1
		fi
		summarize
		exit $rc
	fi

	# The sanitizer build and its tests come first: they take longest.
	# The main build meanwhile runs in the background, and the fuzz build
	# after it, taking only the CPU that the rest leaves.
	build_main background_build build
	main_pid=$!
	asan_built=0
	if [ "$sanitize" != 0 ]; then
		start=$SECONDS
		if build_asan setup_build; then
			asan_built=1
		else
			failed sanitizer
		fi
		took "sanitizer build" $start
	fi

	# The tests that must run alone, one after another (the hostile users,
	# which measure latencies; the watchdog's timing); then those that may
	# run beside others, two at a time, and the main build's beside them
	# once it is built: their tests wait on sockets, timers and other
	# processes more than they compute. While both suites run, each line of
	# their output starts with its build directory.
	asan_tests_pid=
	pydeps_wait
	if [ $asan_built = 1 ]; then
		start=$SECONDS
		count_log "$asan" testlog-alone
		sanitized run_kind "$asan" testlog-alone alone --timeout-multiplier 3 || rc=1
		took "sanitizer tests run alone" $start
		count_log "$asan" testlog
		(s=0 start=$SECONDS
		 sanitized run_kind "$asan" testlog parallel --timeout-multiplier 3 2>&1 |
			sed -u "s|^|$asan: |" || s=1
		 took "sanitizer tests" $start
		 exit $s) &
		asan_tests_pid=$!
	fi
	main_built=0
	built main "$main_pid" "$builddir" && main_built=1
	fuzz_pid=
	if [ "$fuzz" != 0 ]; then
		build_fuzz background_build "fuzz build"
		fuzz_pid=$!
	fi
	if [ $main_built = 1 ]; then
		# Sharing the machine with the other suite, its time limits double.
		count_log "$builddir" testlog
		start=$SECONDS
		run_kind "$builddir" testlog parallel --timeout-multiplier 2 2>&1 |
			sed -u "s|^|$builddir: |" || rc=1
		took tests $start
	fi
	[ -z "$asan_tests_pid" ] || wait "$asan_tests_pid" || rc=1

	# The fuzz targets, two at a time, in the background at the lowest CPU
	# priority, beside the main build's tests that run alone: those wait
	# on timers and sockets most of the time, and a test that wakes takes
	# its core back from an idle-priority fuzzer at once.
	fuzz_tests_pid=
	if [ -n "$fuzz_pid" ] && built fuzz "$fuzz_pid" "$fuzzdir"; then
		count_log "$fuzzdir" testlog
		(chrt --idle -p 0 $BASHPID >/dev/null 2>&1 || renice -n 19 -p $BASHPID >/dev/null
		 s=0 start=$SECONDS
		 run_tests "$fuzzdir" testlog --no-rebuild --suite fuzz 2>&1 |
			sed -u "s|^|$fuzzdir: |" || s=1
		 took "fuzz (in the background)" $start
		 exit $s) &
		fuzz_tests_pid=$!
	fi
	if [ $main_built = 1 ]; then
		start=$SECONDS
		count_log "$builddir" testlog-alone
		run_kind "$builddir" testlog-alone alone || rc=1
		took "tests run alone" $start
	fi
	[ -z "$fuzz_tests_pid" ] || wait "$fuzz_tests_pid" || rc=1
	took all $t0
	summarize
	exit $rc
	;;
*)
	sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
	;;
esac
