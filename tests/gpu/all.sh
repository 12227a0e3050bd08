#!/bin/sh
# On a GPU machine, everything that needs the GPU, step by step, with what the machine is (GPU,
# driver, CUDA, Python, PyTorch): the stand-in CUPTI's assumptions checked against the real one
# first (tests/gpu/conformance.sh), the gpu-probe (tests/gpu/probe.sh: what the real CUPTI
# does), the samples under the tracer (tests/gpu/run.sh), attaching to a running PyTorch loop
# (tests/gpu/attach.sh) and the tracer's overhead (bench/gpu/overhead.sh). Writes into OUTDIR
# machine.txt and, per step, STEP.log; probe.tar (the probe's logs and the synctop traces and
# reports of its scripts) and traces.tar (the recorded samples/traces/*.trace, to commit).
#
# usage: tests/gpu/all.sh BUILD_DIR OUTDIR [STEP...]
#   STEP: conformance, probe, run, attach, overhead, wheel (default: the first five, in that order;
#   wheel: the wheel pack.sh made, with the machine's PyTorch, tests/gpu/wheel.sh). They may
#   outlast one 10-minute call of the device runner: `conformance probe run attach` in one,
#   `overhead` in the next. RUNS=5 for overhead.sh.
# BUILD_DIR is the build/ of a folder made by tests/gpu/pack.sh, its env.sh sourced (run.sh says
# why that is the one way). Exit status: that of the first step that failed, else 0.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: tests/gpu/all.sh BUILD_DIR OUTDIR [conformance probe run attach overhead]}
out=${2:?usage: tests/gpu/all.sh BUILD_DIR OUTDIR [conformance probe run attach overhead]}
shift 2
[ $# -gt 0 ] || set -- conformance probe run attach overhead
mkdir -p "$out"
out=$(cd "$out" && pwd)
python=${PYTHON:-python3}
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/CUDA (driver) \1/p'
    (nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>/dev/null | tail -1
    "$python" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
    uname -r
    ldd --version 2>&1 | head -1
} >"$out/machine.txt" 2>&1
cat "$out/machine.txt"

status=0
for step in "$@"; do
    echo "==== $step"
    start=$(date +%s)
    case $step in
    conformance)
        "$root/tests/gpu/conformance.sh" "$build" >"$out/conformance.log" 2>&1
        rc=$?
        tail -40 "$out/conformance.log"
        ;;
    probe)
        "$root/tests/gpu/probe.sh" "$build" "$out/probe.d" >"$out/probe.log" 2>&1
        rc=$?
        (cd "$out/probe.d" && tar -cf "$out/probe.tar" probe) && rm -rf "$out/probe.d"
        tail -60 "$out/probe.log"
        ;;
    run)
        "$root/tests/gpu/run.sh" "$build" >"$out/run.log" 2>&1
        rc=$?
        tail -40 "$out/run.log"
        ;;
    wheel)
        whl=$(ls "$(dirname "$build")"/wheel/synctop-*.whl 2>/dev/null | head -1)
        if [ -z "$whl" ]; then
            echo "all.sh: no wheel in $(dirname "$build")/wheel (pack.sh makes one where PyPI is reachable)" >"$out/wheel.log"
            rc=2
        else
            "$root/tests/gpu/wheel.sh" "$whl" "$out/wheel" >"$out/wheel.log" 2>&1
            rc=$?
        fi
        tail -20 "$out/wheel.log"
        ;;
    attach)
        "$root/tests/gpu/attach.sh" "$build" >"$out/attach.log" 2>&1
        rc=$?
        tail -20 "$out/attach.log"
        ;;
    overhead)
        "$root/bench/gpu/overhead.sh" "$build" >"$out/overhead.log" 2>&1
        rc=$?
        cat "$out/overhead.log"
        ;;
    *)
        echo "all.sh: no step $step (conformance, probe, run, attach, overhead, wheel)" >&2
        rc=2
        ;;
    esac
    echo "==== $step: exit $rc, $(($(date +%s) - start)) s"
    [ "$status" -ne 0 ] || status=$rc
done
(cd "$root/samples/traces" && ls ./*.trace >/dev/null 2>&1 && tar -cf "$out/traces.tar" ./*.trace)
exit "$status"
