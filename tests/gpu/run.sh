#!/bin/sh
# On a machine with a GPU: runs every sample under the tracer (synctop run), checks the stalls each
# must produce (count, API, call site file:line: the EXPECT lines at the top of each sample), and
# writes the recorded traces into samples/traces/.
#
# The one way to run it: a GPU machine need not have synctop's build dependencies, nor reach a
# package registry, so nothing is built there. On a Debian machine with them (and nvcc; no GPU
# needed), tests/gpu/pack.sh builds synctop, the tracer, the checker, the samples and the overhead
# loops into .gpu/; that folder travels to the GPU machine with the source tree (copied, or named in
# the device runner's `carry`), and there, from the source tree:
#   . .gpu/env.sh && tests/gpu/run.sh .gpu/build
# Any other BUILD_DIR is refused, saying so.
#
# usage: tests/gpu/run.sh PACK_BUILD_DIR     (default: .gpu/build)
# The PyTorch scripts run when `python3 -c "import torch"` works with CUDA, and are checked the same
# way against their EXPECT-PY lines (the Python file:line of each blocking call, which the tracer
# reads from CPython 3.10 to 3.13). PYTHON=/path/to/python3 picks the interpreter.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/.gpu/build}
traces=$root/samples/traces
how="on a machine with synctop's build dependencies and nvcc run tests/gpu/pack.sh, bring .gpu/ here with the source tree, then: . .gpu/env.sh && tests/gpu/run.sh .gpu/build"
nvidia-smi -L >/dev/null 2>&1 || { echo "run.sh: no GPU here (nvidia-smi -L failed)" >&2; exit 2; }
if [ ! -f "$build/PACKED" ]; then
    echo "run.sh: $build is not a folder made by tests/gpu/pack.sh; $how" >&2
    exit 2
fi
for f in "$build/synctop" "$build/tracer/libsynctop-tracer.so" "$build/tests/synctop_check_trace"; do
    [ -x "$f" ] || [ -f "$f" ] || { echo "run.sh: $f is missing from the pack; $how" >&2; exit 2; }
done
if ldd "$build/synctop" "$build/tracer/libsynctop-tracer.so" | grep -q "not found"; then
    echo "run.sh: libraries not found ($(ldd "$build/synctop" "$build/tracer/libsynctop-tracer.so" |
        awk '/not found/ { printf "%s ", $1 }')): source the pack's env.sh first (. .gpu/env.sh)" >&2
    exit 2
fi
echo "pack: $(head -2 "$build/PACKED" | tr '\n' ' ')"
mkdir -p "$traces"
synctop=$build/synctop
check=$build/tests/synctop_check_trace
echo "driver: $(nvidia-smi --query-gpu=driver_version,name --format=csv,noheader | head -1)"

failed=0
for src in "$root"/samples/sample_*.cu; do
    name=$(basename "$src" .cu)
    echo "== $name"
    if ! "$synctop" run --no-tui --force --record "$traces/$name.trace" -- "$build/samples/$name"; then
        echo "FAIL $name: exited with an error"; failed=$((failed + 1)); continue
    fi
    "$check" "$traces/$name.trace" "$src" || failed=$((failed + 1))
done

python=${PYTHON:-python3}
if "$python" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    echo "python: $("$python" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__)')"
    for py in "$root"/samples/torch_*.py; do
        name=$(basename "$py" .py)
        echo "== $name"
        if ! "$synctop" run --no-tui --force --record "$traces/$name.trace" -- "$python" "$py" >/dev/null; then
            echo "FAIL $name: exited with an error"; failed=$((failed + 1)); continue
        fi
        "$check" "$traces/$name.trace" "$py" || failed=$((failed + 1))
    done
else
    echo "(PyTorch with CUDA not available: torch_*.py skipped)"
fi

if [ "$failed" -ne 0 ]; then
    echo "run.sh: $failed sample(s) failed"; exit 1
fi
echo "run.sh: all samples produced their expected stalls; traces in $traces"
