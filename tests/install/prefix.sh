#!/bin/sh
# `cmake --install` into a temporary prefix, the prefix moved elsewhere and the build tree hidden
# (an empty directory mounted over it in a mount namespace of this script's own): synctop run,
# attach, replay and report must work from the installed files alone.
#
# usage: prefix.sh BUILD_DIR AUX_DIR... -- TRACE
#   BUILD_DIR  the build tree to install
#   AUX_DIR    files the checks need (lib.sh): the stand-ins and the two test programs
#   TRACE      a PyTorch-profiler trace for the report check
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

[ $# -ge 3 ] || { echo "usage: prefix.sh BUILD_DIR AUX... -- TRACE" >&2; exit 2; }
build=$(cd "$1" && pwd)
shift
setup_work "$@"
mount_namespace

cmake --install "$build" --prefix "$WORK/inst" >"$WORK/install.log" || fail "cmake --install: $(cat "$WORK/install.log")"
mv "$WORK/inst" "$WORK/moved"
prefix="$WORK/moved"
for f in bin/synctop lib/synctop/libsynctop-tracer.so share/man/man1/synctop.1 share/doc/synctop/copyright \
    share/synctop/traces/qwen_h100_with_stack.json.gz; do
    [ -f "$prefix/$f" ] || fail "the install has no $f: $(cd "$prefix" && find . -type f)"
done
if readelf -d "$prefix/bin/synctop" "$prefix/lib/synctop/libsynctop-tracer.so" | grep -i "path" | grep -qF "$build"; then
    fail "an installed file keeps the build tree in its run path"
fi
TRACE_REPORT="$WORK/trace.report"
"$build/synctop" report "$TRACE" >"$TRACE_REPORT" 2>&1 || fail "the build tree's synctop report $TRACE failed"
mkdir -p "$WORK/empty"

export SYNCTOP="$prefix/bin/synctop" AUX WORK TRACE TRACE_REPORT
# shellcheck disable=SC2016 # expanded by the inner shell
$NS sh -c 'mount --bind "$WORK/empty" "$1" && cd "$WORK" && . "$2/lib.sh" &&
    [ ! -e "$1/synctop" ] && check_report && check_run && check_replay && check_attach && check_demo' \
    sh "$build" "$here" || fail "a check failed with the build tree hidden"
say "installed into a prefix, moved it, hid the build tree: run, attach, replay, report and demo work"
