#!/bin/sh
# On a machine with a GPU: builds everything, runs every sample under the tracer (synctop run),
# checks the stalls each must produce (count, API, call site file:line: the EXPECT lines at the top
# of each sample), and writes the recorded traces into samples/traces/.
#
# usage: tests/gpu/run.sh [BUILD_DIR]     (default: build-gpu)
# BUILD_DIR may be the build/ of a folder made by tests/gpu/pack.sh (for a GPU machine without
# synctop's Debian packages): source its env.sh first.
# The PyTorch scripts run when `python3 -c "import torch"` works with CUDA, and are checked the same
# way against their EXPECT-PY lines (the Python file:line of each blocking call, which the tracer
# reads from CPython 3.10 to 3.13). PYTHON=/path/to/python3 picks the interpreter.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}
traces=$root/samples/traces
nvidia-smi -L >/dev/null 2>&1 || { echo "run.sh: no GPU here (nvidia-smi -L failed)" >&2; exit 2; }

# A folder made by tests/gpu/pack.sh is used as it is; any other is (re)built here.
if [ -x "$build/synctop" ] && [ ! -f "$build/CMakeCache.txt" ]; then
    echo "prebuilt: $build"
else
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build "$build" -j"$(nproc)"
fi
mkdir -p "$traces"
synctop=$build/synctop
check=$build/tests/synctop_check_trace
echo "driver: $(nvidia-smi --query-gpu=driver_version,name --format=csv,noheader | head -1)"

failed=0
for src in "$root"/samples/sample_*.cu; do
    name=$(basename "$src" .cu)
    echo "== $name"
    if ! "$synctop" run --no-tui --record "$traces/$name.trace" -- "$build/samples/$name"; then
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
        if ! "$synctop" run --no-tui --record "$traces/$name.trace" -- "$python" "$py" >/dev/null; then
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
