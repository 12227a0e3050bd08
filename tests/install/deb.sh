#!/bin/sh
# The Debian package: built by `bootstrap --deb` (cpack from a release build), its Depends checked against the
# packages that hold the libraries its binaries load, then installed with apt-get into a fresh
# Debian 12 (debootstrap --variant=minbase), where synctop run, attach, replay and report must work.
#
# usage: deb.sh SOURCE_DIR PACKAGE_BUILD_DIR
#   PACKAGE_BUILD_DIR  the release build the package is made from (kept between runs)
# Needs root (debootstrap, chroot), debootstrap, dpkg-dev, tmux and a Debian mirror; the test
# programs and stand-ins it runs in the new system come from the same release build.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

[ $# -eq 2 ] || { echo "usage: deb.sh SOURCE_DIR PACKAGE_BUILD_DIR" >&2; exit 2; }
src=$(cd "$1" && pwd)
pkg=$2
mirror=${SYNCTOP_DEBIAN_MIRROR:-http://deb.debian.org/debian}

[ "$(id -u)" -eq 0 ] || { echo "SKIP: debootstrap and chroot need root"; exit 77; }
for tool in debootstrap dpkg-shlibdeps cpack tmux; do
    command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/synctop-deb.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# ---- the package, as the README makes it ----
rm -rf "$pkg/dist"
SYNCTOP_BUILD_DIR="$pkg" SYNCTOP_DIST_DIR="$pkg/dist" "$src/bootstrap" --deb >"$WORK/build.log" 2>&1 ||
    fail "bootstrap --deb: $(tail -30 "$WORK/build.log")"
deb=$(ls "$pkg"/dist/synctop_*_*.deb)
say "built $(basename "$deb") ($(wc -c <"$deb") bytes)"

# Every library the two binaries load comes from a package the Depends line names.
depends=$(dpkg-deb -f "$deb" Depends)
[ -n "$depends" ] || fail "the package has no Depends"
for elf in "$pkg/synctop" "$pkg/tracer/libsynctop-tracer.so"; do
    for lib in $(readelf -d "$elf" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
        path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64|AArch64/ { print $NF; exit }')
        [ -n "$path" ] || fail "$lib (needed by $(basename "$elf")) is not on this machine's library path"
        owner=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null || dpkg -S "$path" 2>/dev/null) ||
            fail "no package holds $path"
        owner=${owner%%:*}
        echo "$depends" | tr ',' '\n' | sed 's/^ *//; s/ .*//' | grep -qx "$owner" ||
            fail "$(basename "$elf") loads $lib from package $owner, which Depends does not name: $depends"
    done
done
say "Depends names every library's package: $depends"

# ---- a fresh Debian 12 ----
root="$WORK/root"
if ! debootstrap --variant=minbase bookworm "$root" "$mirror" >"$WORK/debootstrap.log" 2>&1; then
    if ! getent hosts "$(echo "$mirror" | sed 's|^[a-z]*://||; s|/.*||')" >/dev/null; then
        echo "SKIP: cannot reach the Debian mirror $mirror"
        exit 77
    fi
    fail "debootstrap: $(tail -20 "$WORK/debootstrap.log")"
fi
say "debootstrapped a fresh Debian 12 (minbase)"
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp "$deb" "$root/tmp/"
mkdir -p "$root/opt/aux" "$root/opt/work" "$root/opt/check"
cp "$pkg/tests/tracer/standin/libcupti.so.13" "$pkg/tests/tracer/standin/driver/libcuda.so.1" \
    "$pkg/tests/tracer_harness_plain" "$pkg/tests/inject_target" "$root/opt/aux/"
cp "$here/lib.sh" "$root/opt/check/"
"$pkg/synctop" report "$src/samples/traces/kineto/qwen_h100_with_stack.json.gz" >"$root/opt/check/trace.report" 2>&1 ||
    fail "the build tree's synctop report failed"
version=$(dpkg-deb -f "$deb" Version)

# apt-get installs the package (and tmux, which it suggests, for the viewer checks) from the file;
# then the checks run against the installed files only.
cat >"$root/opt/check/inside.sh" <<INSIDE
set -e
apt-get update -qq
apt-get install -y -qq --no-install-recommends /tmp/$(basename "$deb") tmux >/tmp/apt.log 2>&1 ||
    { cat /tmp/apt.log; exit 1; }
. /opt/check/lib.sh
SYNCTOP=\$(command -v synctop) || fail "synctop is not on PATH"
[ "\$SYNCTOP" = /usr/bin/synctop ] || fail "synctop is \$SYNCTOP"
synctop --version | grep -qF "$version" || fail "synctop --version: \$(synctop --version)"
dpkg -L synctop | grep -qx /usr/share/man/man1/synctop.1 || fail "the package has no man page"
dpkg -L synctop | grep -qx /usr/share/doc/synctop/copyright || fail "the package has no copyright file"
AUX=/opt/aux WORK=/opt/work TRACE=/usr/share/synctop/traces/qwen_h100_with_stack.json.gz
TRACE_REPORT=/opt/check/trace.report
cd /opt/work
check_report
check_run
check_replay
check_attach
check_demo
INSIDE
# shellcheck disable=SC2016 # expanded by the inner shell
unshare --mount sh -c '
    set -e
    mount -t proc proc "$1/proc"
    mount --bind /dev "$1/dev"
    mount --bind /dev/pts "$1/dev/pts"
    chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=xterm \
        DEBIAN_FRONTEND=noninteractive sh /opt/check/inside.sh' sh "$root" ||
    fail "a check failed in the fresh Debian 12"
say "apt-get install ./$(basename "$deb") on a fresh Debian 12: run, attach, replay and report work"
