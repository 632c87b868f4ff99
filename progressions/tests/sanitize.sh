#!/bin/sh
# Runs the variants test under compute-sanitizer.
# usage: sanitize.sh TOOL TEST-EXECUTABLE [ARGS...]
# Exits 77 (skip) where there is no GPU or no compute-sanitizer.
tool=$1
exe=$2
shift 2
"$exe" --probe >/dev/null || exit $?
cs=$(command -v compute-sanitizer || true)
[ -z "$cs" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && cs=/usr/local/cuda/bin/compute-sanitizer
if [ -z "$cs" ]; then
	echo "compute-sanitizer not found: skipped"
	exit 77
fi
exec "$cs" --tool "$tool" --error-exitcode 1 "$exe" "$@"
