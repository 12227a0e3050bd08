#!/bin/sh
# On a machine with a GPU: what the real CUPTI does, read by the gpu-probe (a throwaway CUPTI
# injection kept outside this repository, in ../shared/gpu-probe, which tests/gpu/pack.sh copies
# into the pack's probe/ folder), before synctop's own runs are judged against it. Builds
# libprobe.so there with the machine's compiler against the machine's CUPTI, then runs under it:
# a CUDA sample (sample_item) with CUPTI's default and with system thread ids, the probe's PyTorch
# script (diag_torch.py: .item(), an NVTX range, sparse event queries) likewise, and the
# torch.profiler script (diag_profiler.py); then the two scripts under `synctop run --record`,
# with synctop's report of each, to compare. Every run is bounded (PROBE_TIMEOUT seconds, 180).
#
# usage: tests/gpu/probe.sh PACK_BUILD_DIR OUTDIR      PYTHON=python3
# Writes OUTDIR/probe/probe.<pid>.log (one per process, each ending with a SUMMARY line), the
# synctop traces and reports of the scripts, and prints the SUMMARY lines and what each log says
# of CUPTI's version and path. Exit status 0 when every run exited 0.
set -u
build=${1:?usage: tests/gpu/probe.sh PACK_BUILD_DIR OUTDIR}
out=${2:?usage: tests/gpu/probe.sh PACK_BUILD_DIR OUTDIR}
src=$(cd "$build/.." && pwd)/probe
python=${PYTHON:-python3}
limit=${PROBE_TIMEOUT:-180}
nvidia-smi -L >/dev/null 2>&1 || { echo "probe.sh: no GPU here (nvidia-smi -L failed)" >&2; exit 2; }
[ -f "$src/probe.c" ] || {
    echo "probe.sh: no probe sources in $src: tests/gpu/pack.sh copies them from ../shared/gpu-probe when it has them" >&2
    exit 2
}

cuda=${CUDA_HOME:-/usr/local/cuda}
inc="" lib=""
for d in "$cuda/extras/CUPTI/include" "$cuda/include"; do
    [ -f "$d/cupti.h" ] && { inc=$d; break; }
done
for d in "$cuda/extras/CUPTI/lib64" "$cuda/lib64" "$cuda/targets/x86_64-linux/lib"; do
    [ -e "$d/libcupti.so" ] && { lib=$d; break; }
done
if [ -z "$inc" ] || [ -z "$lib" ]; then
    echo "probe.sh: no cupti.h or libcupti.so under $cuda (CUDA_HOME picks another)" >&2
    exit 2
fi
mkdir -p "$out/probe"
logs=$(cd "$out/probe" && pwd)
probe=$logs/libprobe.so
# The run path names the toolkit's CUPTI for a process that has loaded none; one that has (PyTorch,
# from its wheel) keeps its own, which is what the probe is there to see.
cc=${CC:-gcc}
command -v "$cc" >/dev/null 2>&1 || cc=cc
"$cc" -O1 -g -shared -fPIC "$src/probe.c" -I"$inc" -I"$cuda/include" -L"$lib" -Wl,-rpath,"$lib" \
    -lcupti -ldl -lpthread -o "$probe" || { echo "probe.sh: the probe did not build" >&2; exit 1; }
echo "probe: built against $lib"

failed=0
# run LABEL ENV... -- PROGRAM ARGS...: one program under the probe
run() {
    label=$1
    shift
    echo "== $label"
    env PROBE_DIR="$logs" CUDA_INJECTION64_PATH="$probe" "$@" >"$logs/$label.out" 2>&1 </dev/null
    rc=$?
    if [ "$rc" -ne 0 ]; then
        why="exit status $rc"
        [ "$rc" -ne 124 ] || why="still running after $limit s"
        echo "FAIL $label: $why; its output:"
        tail -20 "$logs/$label.out"
        failed=$((failed + 1))
    fi
    tail -3 "$logs/$label.out"
}
sample=$build/samples/sample_item
run native-default timeout "$limit" "$sample"
run native-system-tid PROBE_SYSTEM_TID=1 timeout "$limit" "$sample"
if "$python" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    run torch-default timeout "$limit" "$python" "$src/diag_torch.py"
    run torch-system-tid PROBE_SYSTEM_TID=1 timeout "$limit" "$python" "$src/diag_torch.py"
    run torch-profiler timeout "$limit" "$python" "$src/diag_profiler.py"
    for py in diag_torch diag_profiler; do
        echo "== synctop run --record $py.trace"
        timeout "$limit" "$build/synctop" run --no-tui --force --record "$logs/$py.trace" -- "$python" "$src/$py.py" \
            >"$logs/$py.synctop.out" 2>&1 </dev/null
        rc=$?
        if [ "$rc" -eq 0 ]; then
            "$build/synctop" info "$logs/$py.trace" >"$logs/$py.info.txt" 2>&1
            "$build/synctop" report "$logs/$py.trace" >"$logs/$py.report.txt" 2>&1
            cat "$logs/$py.info.txt" "$logs/$py.report.txt" | head -60
        else
            echo "FAIL synctop run $py: exit status $rc; its output:"
            tail -20 "$logs/$py.synctop.out"
            failed=$((failed + 1))
        fi
    done
else
    echo "(PyTorch with CUDA not available: diag_torch.py and diag_profiler.py skipped)"
fi

echo "== what CUPTI said"
for f in "$logs"/probe.*.log; do
    [ -f "$f" ] || continue
    echo "-- $(basename "$f")"
    grep -m1 "cupti api version" "$f"
    grep -m2 "record cbid=" "$f"
    grep "SUMMARY" "$f"
done
[ "$failed" -eq 0 ] || { echo "probe.sh: $failed run(s) failed"; exit 1; }
echo "probe.sh: logs in $logs"
