#!/bin/bash
# Build the Debian packages with packaging/build-deb (CPU-only, without
# optimisation and without -dbgsym packages, DEB_BUILD_OPTIONS="noopt
# noddebs", to keep it quick: none of it changes a path, a script or a
# unit, and nothing here reads debug symbols), unpack them into a scratch
# root with dpkg -x, and check that every file sits where the units, the
# pkg-config file and the man pages say, in the package it belongs to.
#
# usage: deb.sh   (env: GPURED_SOURCE_ROOT)
set -euo pipefail

fail() {
	echo "FAIL: $*" >&2
	exit 1
}
skip() {
	echo "SKIP: $*"
	exit 77
}

src=${GPURED_SOURCE_ROOT:?}
# It builds packages of its own: the sanitizer build has nothing to add.
[ -z "${GPURED_SANITIZED:-}" ] || skip "builds its own packages, without sanitizers"
for tool in dpkg-buildpackage dpkg-checkbuilddeps dh dpkg-deb systemd-analyze systemd-sysusers; do
	command -v $tool >/dev/null ||
		skip "$tool not found (Debian packages dpkg-dev, debhelper, systemd)"
done
if ! unmet=$(dpkg-checkbuilddeps "$src/packaging/debian/control" 2>&1); then
	skip "build dependencies missing: $unmet"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# MALLOC_PERTURB_ (meson test sets it) is for the programs under test, run
# below; in the build it would only make the compiler, dpkg and debhelper
# fill every block they allocate.
if ! out=$(MALLOC_PERTURB_=0 DEB_BUILD_OPTIONS="noopt noddebs${DEB_BUILD_OPTIONS:+ $DEB_BUILD_OPTIONS}" \
	"$src/packaging/build-deb" --cuda=disabled "$tmp/debs" 2>"$tmp/build.log"); then
	tail -n 60 "$tmp/build.log" >&2
	fail "packaging/build-deb failed"
fi
[ "$out" = "$tmp/debs" ] || fail "build-deb printed '$out', not its output folder"

ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
root=$tmp/root
mkdir -p "$root"
declare -A deb
for pkg in gpured libgpured0 libgpured-dev gpured-tools; do
	f=$(find "$tmp/debs" -name "${pkg}_*.deb" | head -n1)
	[ -n "$f" ] || fail "no ${pkg}_*.deb built"
	deb[$pkg]=$f
	dpkg -x "$f" "$root"
done

# path (without the leading /) -> the package that must ship it
expect() {
	local pkg=$1 path=$2
	dpkg-deb -c "${deb[$pkg]}" | awk '{print $6}' | grep -qx "./$path" ||
		fail "$pkg does not ship /$path"
	[ -e "$root/$path" ] || [ -L "$root/$path" ] || fail "/$path missing after unpacking"
}
expect gpured usr/sbin/gpured
expect gpured lib/systemd/system/gpured.service
expect gpured lib/systemd/system/gpured.socket
expect gpured usr/lib/sysusers.d/gpured.conf
expect gpured etc/gpured/gpured.conf
expect gpured usr/share/man/man8/gpured.8.gz
expect libgpured0 usr/lib/$ma/libgpured.so.0
expect libgpured-dev usr/include/gpured.h
expect libgpured-dev usr/lib/$ma/libgpured.so
expect libgpured-dev usr/lib/$ma/libgpured.a
expect libgpured-dev usr/lib/$ma/pkgconfig/gpured.pc
expect libgpured-dev usr/share/man/man3/libgpured.3.gz
expect gpured-tools usr/bin/gpuredctl
expect gpured-tools usr/bin/gpured-benchmark
expect gpured-tools usr/share/man/man1/gpuredctl.1.gz
expect gpured-tools usr/share/man/man1/gpured-benchmark.1.gz
expect gpured-tools usr/bin/gpured-sockbw
expect gpured-tools usr/share/man/man1/gpured-sockbw.1.gz

# The units point at what the package installed.
service=$root/lib/systemd/system/gpured.service
socket=$root/lib/systemd/system/gpured.socket
read -r -a argv <<<"$(sed -n 's/^ExecStart=//p' "$service")"
[ "${argv[0]}" = /usr/sbin/gpured ] || fail "ExecStart=${argv[0]}, expected /usr/sbin/gpured"
[ -x "$root${argv[0]}" ] || fail "ExecStart=${argv[0]} is not executable"
[ "${argv[1]:-}" = --config ] && [ "${argv[2]:-}" = /etc/gpured/gpured.conf ] ||
	fail "ExecStart= does not pass --config /etc/gpured/gpured.conf"
dpkg-deb -I "${deb[gpured]}" conffiles | grep -qx /etc/gpured/gpured.conf ||
	fail "/etc/gpured/gpured.conf is not a conffile"
vout=$(systemd-analyze verify --root="$root" --recursive-errors=no --man=no \
	"$service" "$socket" 2>&1) || fail "systemd-analyze verify failed on the packaged units:
$vout"
[ -z "$vout" ] || fail "systemd-analyze verify warned on the packaged units:
$vout"

# The gpured user: created by postinst through systemd-sysusers before the
# socket (SocketUser=gpured) is started, and the package depends on it.
postinst=$(dpkg-deb -I "${deb[gpured]}" postinst)
sysusers_line=$(grep -n 'systemd-sysusers.* gpured.conf' <<<"$postinst" | head -n1 | cut -d: -f1)
start_line=$(grep -n "deb-systemd-invoke .*gpured.socket" <<<"$postinst" | head -n1 | cut -d: -f1)
[ -n "$sysusers_line" ] || fail "postinst does not run systemd-sysusers gpured.conf"
[ -n "$start_line" ] || fail "postinst does not start gpured.socket"
[ "$sysusers_line" -lt "$start_line" ] || fail "postinst starts the socket before creating its user"
dpkg-deb -f "${deb[gpured]}" Depends | grep -q 'systemd-sysusers' ||
	fail "gpured does not depend on a systemd-sysusers provider"
mkdir -p "$root/etc"
systemd-sysusers --root="$root" "$root/usr/lib/sysusers.d/gpured.conf" >/dev/null 2>&1 ||
	fail "systemd-sysusers rejected the packaged gpured.conf"
grep -q '^gpured:' "$root/etc/passwd" || fail "sysusers.d/gpured.conf creates no user gpured"

# Man pages are compressed roff. (grep reads all of zcat's output: with
# -q it could stop first, and zcat's next write, failing, would fail the
# pipeline, pipefail being set.)
for page in man8/gpured.8 man1/gpuredctl.1 man1/gpured-benchmark.1 man1/gpured-sockbw.1 \
	man3/libgpured.3; do
	zcat "$root/usr/share/man/$page.gz" | grep '^\.TH' >/dev/null || fail "$page.gz is not a man page"
done

# The library: right SONAME, the -dev symlink resolves, and a program built
# with the packaged pkg-config file, header and library links and runs.
readelf -d "$root/usr/lib/$ma/libgpured.so.0" | grep -q 'SONAME.*\[libgpured\.so\.0\]' ||
	fail "libgpured.so.0 has not SONAME libgpured.so.0"
[ -e "$root/usr/lib/$ma/libgpured.so" ] || fail "libgpured.so dangles"
cat >"$tmp/use.c" <<'C'
#include <errno.h>
#include <gpured.h>
int main(void)
{
	gpured_t *g = NULL;
	/* Nothing listens there: the connect errno comes back, negative. */
	return gpured_connect("/nonexistent/gpured.sock", &g) == -ENOENT ? 0 : 1;
}
C
flags=$(PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_LIBDIR=$root/usr/lib/$ma/pkgconfig \
	pkg-config --cflags --libs gpured) || fail "pkg-config cannot read the packaged gpured.pc"
# shellcheck disable=SC2086
cc -o "$tmp/use" "$tmp/use.c" $flags || fail "cannot build against the packaged library ($flags)"
LD_LIBRARY_PATH=$root/usr/lib/$ma "$tmp/use" || fail "the packaged library misbehaves"
LD_LIBRARY_PATH=$root/usr/lib/$ma "$root/usr/bin/gpuredctl" --version >/dev/null ||
	fail "the packaged gpuredctl does not run"

# Installing for real, maintainer scripts included: dpkg --root into an
# empty root, the scripts running here with DPKG_ROOT set, which
# systemd-sysusers and deb-systemd-helper honour. Some of debhelper 13.11's
# snippets still call the running systemd (daemon-reload) if there is one,
# so this part runs only where none runs, as in CI's container, and as root.
if [ "$(id -u)" = 0 ] && [ ! -d /run/systemd/system ]; then
	iroot=$tmp/installed
	mkdir -p "$iroot/var/lib/dpkg/info" "$iroot/var/lib/dpkg/updates" \
		"$iroot/var/lib/dpkg/triggers" "$iroot/etc"
	: >"$iroot/var/lib/dpkg/status"
	idpkg() {
		dpkg --root="$iroot" --force-script-chrootless --force-depends \
			--log="$tmp/dpkg.log" "$@" >>"$tmp/dpkg.out" 2>&1 ||
			fail "dpkg $*: $(tail -n 20 "$tmp/dpkg.out")"
	}
	idpkg -i "${deb[gpured]}" "${deb[libgpured0]}" "${deb[libgpured-dev]}" "${deb[gpured-tools]}"
	grep -q '^gpured:' "$iroot/etc/passwd" || fail "installing gpured created no user gpured"
	wants=$iroot/etc/systemd/system/sockets.target.wants/gpured.socket
	[ "$(readlink "$wants")" = /lib/systemd/system/gpured.socket ] ||
		fail "installing gpured did not enable gpured.socket"
	[ ! -e "$iroot/etc/systemd/system/multi-user.target.wants/gpured.service" ] ||
		fail "installing gpured enabled the service itself; the socket starts it"
	[ -x "$iroot/usr/sbin/gpured" ] || fail "dpkg -i did not install /usr/sbin/gpured"
	idpkg --purge gpured-tools libgpured-dev libgpured0 gpured
	[ ! -e "$wants" ] && [ ! -L "$wants" ] || fail "purging gpured left gpured.socket enabled"
	for f in usr/sbin/gpured etc/gpured/gpured.conf lib/systemd/system/gpured.service; do
		[ ! -e "$iroot/$f" ] || fail "purging gpured left /$f"
	done
	echo "ok: installed with dpkg --root (user gpured, gpured.socket enabled), then purged"
else
	echo "note: the dpkg --root install was not tried (it needs root and no running systemd)"
fi

echo "ok: $(cd "$tmp/debs" && ls ./*.deb | tr '\n' ' ')"
