#!/bin/sh
# On a GPU machine, everything that needs the GPU, in one go: the samples under the tracer
# (tests/gpu/run.sh), the tracer's overhead (bench/gpu/overhead.sh) and attaching to a running
# PyTorch loop (tests/gpu/attach.sh), with what the machine is (GPU, driver, CUDA, Python,
# PyTorch). Writes into OUTDIR: run.log, overhead.log, attach.log, machine.txt and traces.tar (the
# recorded samples/traces/*.trace, to commit).
#
# usage: tests/gpu/all.sh BUILD_DIR OUTDIR        RUNS=5 for overhead.sh
# BUILD_DIR is the build/ of a folder made by tests/gpu/pack.sh, its env.sh sourced (run.sh says
# why that is the one way). Exit status: run.sh's, else attach.sh's, else overhead.sh's.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
out=$2
mkdir -p "$out"
python=${PYTHON:-python3}
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/CUDA (driver) \1/p'
    (nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>/dev/null | tail -1
    "$python" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
    uname -r
} >"$out/machine.txt" 2>&1
cat "$out/machine.txt"

"$root/tests/gpu/run.sh" "$build" >"$out/run.log" 2>&1
run=$?
tail -40 "$out/run.log"
"$root/tests/gpu/attach.sh" "$build" >"$out/attach.log" 2>&1
attach=$?
tail -20 "$out/attach.log"
(cd "$root/samples/traces" && tar -cf "$out/traces.tar" ./*.trace 2>/dev/null)

"$root/bench/gpu/overhead.sh" "$build" >"$out/overhead.log" 2>&1
bench=$?
cat "$out/overhead.log"
[ "$run" -ne 0 ] && exit "$run"
[ "$attach" -ne 0 ] && exit "$attach"
exit "$bench"
