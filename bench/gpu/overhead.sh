#!/bin/sh
# On a machine with a GPU: the tracer's wall-time overhead. Runs a launch-bound loop, a
# compute-bound loop and a PyTorch training loop RUNS times each without the tracer, with it (as
# `synctop run --no-tui` uses it: publishing to a live subscriber and recording a trace file), the
# C loops also under CUPTI's floor (libsynctop-cupti-floor.so: an injection that asks CUPTI for
# what the tracer asks and does nothing with it) and under the tracer dormant (on-demand, no
# viewer), and the PyTorch loop under torch.profiler too; prints the median times and the overhead
# in %, and the tracer's points above CUPTI's floor. Then holds the kernels, copies and memsets
# the tracer recorded of the PyTorch program against torch.profiler's count of the same program.
# Targets: launch-bound within 2 points of CUPTI's floor, compute-bound at most 0.5%, dormant at
# most 1%, the PyTorch loop slower under synctop than untraced by less than under torch.profiler,
# and the counts equal.
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
tracer_so=$build/tracer/libsynctop-tracer.so
floor_so=$build/tracer/libsynctop-cupti-floor.so
for f in "$synctop" "$tracer_so" "$floor_so" "$build/samples/overhead_launch" \
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

# time_of MODE KERNELS CMD...: the median of the ms figure CMD prints, over RUNS runs. MODE plain,
# traced, floor (CUPTI's floor injected) or dormant (the tracer injected on demand, no viewer: its
# verbose line on stderr shows it loaded); KERNELS: what a traced run's trace must hold ("=N"
# exactly, ">=N" at least).
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
        floor)
            CUDA_INJECTION64_PATH=$floor_so "$@" >"$tmp/out" || fail "exit status $? from: (CUPTI floor) $*"
            ;;
        dormant)
            CUDA_INJECTION64_PATH=$tracer_so SYNCTOP_MODE=on-demand SYNCTOP_VERBOSE=1 "$@" >"$tmp/out" \
                2>"$tmp/err" || { cat "$tmp/err" >&2; fail "exit status $? from: (dormant tracer) $*"; }
            grep -q "^synctop: CUPTI" "$tmp/err" ||
                { cat "$tmp/err" >&2; fail "the dormant tracer did not start in: $* (no CUPTI line from it)"; }
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
# points NAME BASE TRACED FLOOR: the tracer's overhead minus CUPTI's floor's, in points of %
points() {
    awk -v n="$1" -v b="$2" -v t="$3" -v f="$4" \
        'BEGIN { printf "%-22s %-16s %+.2f points above CUPTI'"'"'s floor (%+.2f%% vs %+.2f%%)\n", n, "synctop tracer", (t - f) * 100 / b, (t - b) * 100 / b, (f - b) * 100 / b }'
}
for loop in launch compute; do
    case $loop in
    launch) name="launch-bound loop" kernels="=201000" ;;
    *) name="compute-bound loop" kernels="=156" ;;
    esac
    bin=$build/samples/overhead_$loop
    base=$(time_of plain - "$bin")
    traced=$(time_of traced "$kernels" "$bin")
    floor=$(time_of floor - "$bin")
    dormant=$(time_of dormant - "$bin")
    report "$name" "$base" "$traced" "synctop tracer"
    report "$name" "$base" "$floor" "CUPTI floor"
    report "$name" "$base" "$dormant" "tracer dormant"
    points "$name" "$base" "$traced" "$floor"
done
if "$python" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    py=$root/bench/gpu/torch_loop.py
    base=$(time_of plain - "$python" "$py" plain)
    traced=$(time_of traced ">=320" "$python" "$py" plain) # 20 warm-up + 300 steps
    prof=$(time_of plain - "$python" "$py" profiler)
    report "pytorch loop" "$base" "$traced" "synctop tracer"
    report "pytorch loop" "$base" "$prof" "torch.profiler"
    # The last traced run's trace against torch.profiler's count of the same program.
    mine=$("$synctop" info --json "$tmp/t.trace")
    ours() {
        v=$(echo "$mine" | sed -n 's/.*"kinds": {[^}]*"'"$1"'": \([0-9]*\).*/\1/p')
        echo "${v:-0}"
    }
    theirs=$("$python" "$py" counts) || fail "exit status $? from: $python $py counts"
    echo "pytorch program        counts: synctop kernels=$(ours kernel) memcpy=$(ours memcpy) memset=$(ours memset); torch.profiler $theirs"
    [ "kernels=$(ours kernel) memcpy=$(ours memcpy) memset=$(ours memset)" = "$theirs" ] ||
        fail "the kernels, copies and memsets synctop recorded differ from torch.profiler's count"
else
    echo "(PyTorch with CUDA not available: the PyTorch loop is skipped)"
fi
