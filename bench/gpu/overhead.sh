#!/bin/sh
# On a machine with a GPU: the tracer's wall-time overhead. Runs a launch-bound loop, a
# compute-bound loop and a PyTorch training loop RUNS times each without the tracer, with it (as
# `synctop run --no-tui` uses it: publishing to a live subscriber and recording a trace file), and
# for the PyTorch loop under torch.profiler too; prints the median times and the overhead in %.
# Targets: at most 3% on the launch-bound loop, at most 0.5% on the compute-bound one.
#
# A traced run counts only if it traced: its trace must hold the kernels the loop launched (all of
# them for the C loops, at least one per step for PyTorch). Any run that fails, or a trace that
# falls short, stops the benchmark with the reason; the programs' stderr is left on stderr.
#
# usage: bench/gpu/overhead.sh BUILD_DIR    RUNS=5 PYTHON=python3
# BUILD_DIR: the build/ of a folder made by tests/gpu/pack.sh (see tests/gpu/run.sh), its env.sh
# sourced; or a build folder of this machine that has the overhead loops (CUDA samples built).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: bench/gpu/overhead.sh BUILD_DIR}
runs=${RUNS:-5}
python=${PYTHON:-python3}

fail() {
    echo "overhead.sh: FAILED: $*" >&2
    exit 1
}

nvidia-smi -L >/dev/null 2>&1 || { echo "overhead.sh: no GPU here (nvidia-smi -L failed)" >&2; exit 2; }
synctop=$build/synctop
for f in "$synctop" "$build/tracer/libsynctop-tracer.so" "$build/samples/overhead_launch" \
    "$build/samples/overhead_compute"; do
    [ -e "$f" ] || fail "$f is missing (make BUILD_DIR with tests/gpu/pack.sh)"
done
if ldd "$synctop" | grep -q "not found"; then
    fail "$synctop lacks libraries ($(ldd "$synctop" | awk '/not found/ { printf "%s ", $1 }')): source the pack's env.sh first"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# kernels_in TRACE: the kernel records of a trace file
kernels_in() {
    "$synctop" info --json "$1" | sed -n 's/.*"kinds": {[^}]*"kernel": \([0-9]*\).*/\1/p'
}

# time_of MODE KERNELS CMD...: the median of the ms figure CMD prints, over RUNS runs. MODE plain
# or traced; KERNELS: what a traced run's trace must hold ("=N" exactly, ">=N" at least).
time_of() {
    mode=$1 want=$2
    shift 2
    i=0
    : >"$tmp/times"
    while [ "$i" -lt "$runs" ]; do
        case $mode in
        plain)
            "$@" >"$tmp/out" || fail "exit status $? from: $*"
            ;;
        traced)
            rm -f "$tmp/t.trace"
            "$synctop" run --no-tui --record "$tmp/t.trace" -- "$@" >"$tmp/out" ||
                fail "exit status $? from: synctop run --record ... -- $*"
            [ -f "$tmp/t.trace" ] || fail "no trace from: synctop run -- $* (the tracer did not start?)"
            k=$(kernels_in "$tmp/t.trace")
            case $want in
            =*) [ "${k:-0}" -eq "${want#=}" ] ||
                    fail "the trace of '$*' holds ${k:-0} kernels, not ${want#=}: the tracer lost some" ;;
            *) [ "${k:-0}" -ge "${want#>=}" ] ||
                    fail "the trace of '$*' holds ${k:-0} kernels, fewer than ${want#>=}: it did not trace" ;;
            esac
            ;;
        esac
        t=$(head -1 "$tmp/out")
        case $t in
        '' | *[!0-9.]*) fail "'$*' printed '$t', not a time in ms" ;;
        esac
        echo "$t" >>"$tmp/times"
        i=$((i + 1))
    done
    median <"$tmp/times"
}

report() {
    name=$1 base=$2 other=$3 label=$4
    awk -v n="$name" -v b="$base" -v o="$other" -v l="$label" \
        'BEGIN { printf "%-22s %-16s %10.1f ms vs %10.1f ms  overhead %+.2f%%\n", n, l, o, b, (o - b) * 100 / b }'
}

# the loops' kernels: warm-up and timed part (launch_bound.cu: 1000 + 200000; compute_bound.cu:
# 6 calibration runs + 150)
base=$(time_of plain - "$build/samples/overhead_launch")
traced=$(time_of traced =201000 "$build/samples/overhead_launch")
report "launch-bound loop" "$base" "$traced" "synctop tracer"
base=$(time_of plain - "$build/samples/overhead_compute")
traced=$(time_of traced =156 "$build/samples/overhead_compute")
report "compute-bound loop" "$base" "$traced" "synctop tracer"
if "$python" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    py=$root/bench/gpu/torch_loop.py
    base=$(time_of plain - "$python" "$py" plain)
    traced=$(time_of traced ">=320" "$python" "$py" plain) # 20 warm-up + 300 steps
    prof=$(time_of plain - "$python" "$py" profiler)
    report "pytorch loop" "$base" "$traced" "synctop tracer"
    report "pytorch loop" "$base" "$prof" "torch.profiler"
else
    echo "(PyTorch with CUDA not available: the PyTorch loop is skipped)"
fi
