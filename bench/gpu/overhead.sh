#!/bin/sh
# On a machine with a GPU: the tracer's wall-time overhead. Runs a launch-bound loop, a
# compute-bound loop and a PyTorch training loop RUNS times each without the tracer, with it (as
# `synctop run --no-tui` uses it: publishing to a live subscriber and recording a trace file), and
# for the PyTorch loop under torch.profiler too; prints the median times and the overhead in %.
# Targets: at most 3% on the launch-bound loop, at most 0.5% on the compute-bound one.
#
# usage: bench/gpu/overhead.sh [BUILD_DIR (default build-gpu)]    RUNS=5 PYTHON=python3
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}
runs=${RUNS:-5}
python=${PYTHON:-python3}
nvidia-smi -L >/dev/null 2>&1 || { echo "overhead.sh: no GPU here (nvidia-smi -L failed)" >&2; exit 2; }
[ -x "$build/synctop" ] || { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
                                 cmake --build "$build" -j"$(nproc)" >/dev/null; }
synctop=$build/synctop
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# time_of MODE CMD...: the median of the ms figure CMD prints, over RUNS runs
time_of() {
    mode=$1
    shift
    i=0
    : >"$tmp/times"
    while [ "$i" -lt "$runs" ]; do
        case $mode in
        plain) "$@" >"$tmp/out" 2>/dev/null ;;
        traced) "$synctop" run --no-tui --record "$tmp/t.trace" -- "$@" >"$tmp/out" 2>/dev/null
                rm -f "$tmp/t.trace" ;;
        esac
        head -1 "$tmp/out" >>"$tmp/times"
        i=$((i + 1))
    done
    median <"$tmp/times"
}

report() {
    name=$1 base=$2 other=$3 label=$4
    awk -v n="$name" -v b="$base" -v o="$other" -v l="$label" \
        'BEGIN { printf "%-22s %-16s %10.1f ms vs %10.1f ms  overhead %+.2f%%\n", n, l, o, b, (o - b) * 100 / b }'
}

for prog in launch compute; do
    bin=$build/samples/overhead_$prog
    base=$(time_of plain "$bin")
    traced=$(time_of traced "$bin")
    report "$prog-bound loop" "$base" "$traced" "synctop tracer"
done
if "$python" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    py=$root/bench/gpu/torch_loop.py
    base=$(time_of plain "$python" "$py" plain)
    traced=$(time_of traced "$python" "$py" plain)
    prof=$(time_of plain "$python" "$py" profiler)
    report "pytorch loop" "$base" "$traced" "synctop tracer"
    report "pytorch loop" "$base" "$prof" "torch.profiler"
else
    echo "(PyTorch with CUDA not available: the PyTorch loop is skipped)"
fi
