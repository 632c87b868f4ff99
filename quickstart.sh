#!/usr/bin/env bash
# gpured's quick start, for a Debian 12 machine (as root, or with sudo):
#
#   ./quickstart.sh run    install what is missing, build, start the daemon
#                          in the foreground on ./gpured.sock
#   ./quickstart.sh test   install what is missing, build, run every test;
#                          the last line reads "N passed, N failed, N skipped"
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
test_deps=(python3 python3-msgpack python3-numpy python3-pytest systemd scdoc dpkg-dev debhelper fakeroot build-essential git groff-base)

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

setup_build() {
	if [ -x /usr/local/cuda/bin/nvcc ]; then
		export PATH="/usr/local/cuda/bin:$PATH"
	fi
	if [ ! -f "$builddir/build.ninja" ]; then
		meson setup "$builddir" -Dbuildtype=debugoptimized "$@"
	elif [ $# -gt 0 ]; then
		meson configure "$builddir" "$@"
	fi
	meson compile -C "$builddir"
}

summarize() {
	# Count results from meson's own log, so a run that ran nothing says so.
	local log="$builddir/meson-logs/testlog.json"
	if [ ! -s "$log" ]; then
		echo "0 passed, 0 failed"
		return
	fi
	python3 - "$log" <<'PY'
import json, sys
passed = failed = skipped = 0
for line in open(sys.argv[1]):
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
	setup_build
	sock="$top/gpured.sock"
	echo "quickstart: starting gpured on $sock (Ctrl-C stops it)" >&2
	echo "quickstart: from another shell: $top/$builddir/client/gpuredctl --socket $sock info" >&2
	echo "quickstart:                     echo 1 2 3 | $top/$builddir/client/gpuredctl --socket $sock sum" >&2
	exec "$builddir/daemon/gpured" --socket "$sock" "${@:2}"
	;;
test)
	install_missing "${build_deps[@]}" "${test_deps[@]}"
	# Tests build with every warning an error, as the project promises.
	setup_build -Dwerror=true
	rc=0
	meson test -C "$builddir" --print-errorlogs --num-processes 2 "${@:2}" || rc=$?
	summarize
	exit $rc
	;;
*)
	sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
	;;
esac
