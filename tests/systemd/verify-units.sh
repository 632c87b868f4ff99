#!/bin/bash
# gpured.service and gpured.socket as `meson install` lays them out, checked
# by systemd-analyze verify, which needs no running systemd:
#  --root=DESTDIR       units, ExecStart= and the config are looked up in the
#                       installed tree, not on the host;
#  --recursive-errors=no  that tree has none of systemd's own units
#                       (sysinit.target, ...), so only errors in ours count;
#  --man=no             Documentation= is checked apart (man pages test).
# Any message from verify fails the test, warnings included.
#
# usage: verify-units.sh MESON UNITDIR SYSUSERSDIR  (env: GPURED_BUILD_ROOT)
set -euo pipefail

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

[ $# -eq 3 ] || fail "usage: verify-units.sh MESON UNITDIR SYSUSERSDIR"
meson=$1
unitdir=$2
sysusersdir=$3
: "${GPURED_BUILD_ROOT:?}"
if ! command -v systemd-analyze >/dev/null; then
	echo "SKIP: systemd-analyze not found (Debian package systemd)"
	exit 77
fi

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
"$meson" install -C "$GPURED_BUILD_ROOT" --destdir "$root" --no-rebuild --quiet >/dev/null

service=$root$unitdir/gpured.service
socket=$root$unitdir/gpured.socket
sysusers=$root$sysusersdir/gpured.conf
for f in "$service" "$socket" "$sysusers"; do
	[ -f "$f" ] || fail "${f#"$root"} not installed"
done

# ExecStart= names the installed daemon and the installed config file.
exec_line=$(sed -n 's/^ExecStart=//p' "$service")
read -r -a argv <<<"$exec_line"
[ -x "$root${argv[0]}" ] || fail "ExecStart=${argv[0]} is not an installed executable"
config=
for ((i = 1; i < ${#argv[@]}; i++)); do
	[ "${argv[i]}" = --config ] && config=${argv[i + 1]:-}
done
[ -n "$config" ] || fail "ExecStart= passes no --config"
[ -f "$root$config" ] || fail "--config $config is not installed"

out=$(systemd-analyze verify --root="$root" --recursive-errors=no --man=no \
	"$service" "$socket" 2>&1) || fail "systemd-analyze verify failed:
$out"
[ -z "$out" ] || fail "systemd-analyze verify warned:
$out"

# The metrics examples (installed as documentation): they verify too, the
# service runs the installed gpuredctl and the timer starts that service.
mservice=$(find "$root" -path '*/doc/gpured/examples/gpured-metrics.service')
mtimer=$(find "$root" -path '*/doc/gpured/examples/gpured-metrics.timer')
[ -f "$mservice" ] && [ -f "$mtimer" ] || fail "gpured-metrics.service and .timer not installed"
# where an administrator puts them
mdir=$root/etc/systemd/system
mkdir -p "$mdir"
cp "$mservice" "$mtimer" "$mdir/"
mexec=$(sed -n 's/^ExecStart=//p' "$mservice")
read -r -a margv <<<"$mexec"
[ -x "$root${margv[0]}" ] || fail "gpured-metrics.service: ExecStart=${margv[0]} is not an installed executable"
[[ " ${margv[*]} " == *" metrics --output "* ]] || fail "gpured-metrics.service does not run 'gpuredctl metrics --output'"
out=$(systemd-analyze verify --root="$root" --recursive-errors=no --man=no \
	"$mdir/gpured-metrics.service" "$mdir/gpured-metrics.timer" 2>&1) ||
	fail "systemd-analyze verify failed on the metrics units:
$out"
[ -z "$out" ] || fail "systemd-analyze verify warned on the metrics units:
$out"

# The socket is where the daemon and the clients look for it.
grep -qx 'ListenStream=/run/gpured.sock' "$socket" || fail "gpured.socket does not listen on /run/gpured.sock"
grep -qx 'Accept=no' "$socket" || fail "gpured.socket must pass its listening socket (Accept=no)"

# Every account the units name is one sysusers.d creates: apply it to an
# empty /etc in the tree and look.
mkdir -p "$root/etc"
systemd-sysusers --root="$root" "$sysusers" >/dev/null 2>&1 || fail "systemd-sysusers rejected ${sysusers#"$root"}"
for key in User Group SocketUser SocketGroup; do
	name=$(sed -n "s/^$key=//p" "$service" "$socket")
	[ -n "$name" ] || fail "no $key= in the units"
	case $key in
	*User) db=passwd ;;
	*) db=group ;;
	esac
	grep -q "^$name:" "$root/etc/$db" || fail "$key=$name is not created by sysusers.d/gpured.conf"
done
echo "ok: units verified in $root (ExecStart=${argv[0]})"
