#!/bin/sh
# synctop against Holistic Trace Analysis 0.5.0, side by side in one run, on the largest real traces
# in samples/traces/kineto: the same two breakdowns (temporal, and idle time with its interval
# statistics) from the same gzip'd trace, end to end (process start to exit), the best of N runs
# of each. Prints per trace the seconds of each, the ratio, and HTA's time without the Python
# interpreter's and the libraries' start-up (measured inside its process); and the same for
# synctop's plain `report` (the whole analysis: stalls, idle time by cause, rules) against HTA.
#
#   bench/vs_hta.sh [RUNS]          (default 3)
#
# Needs a Release build (build/synctop) and HTA in a virtualenv: $HTA_PYTHON, else
# /work/venv-hta/bin/python (python3 -m venv /work/venv-hta && /work/venv-hta/bin/pip install
# HolisticTraceAnalysis==0.5.0). Without it, says so and exits 0: CI does not need HTA.
set -eu
cd "$(dirname "$0")/.."
runs=${1:-3}
py=${HTA_PYTHON:-/work/venv-hta/bin/python}
synctop=build/synctop
if [ ! -x "$synctop" ]; then
    echo "vs_hta: no $synctop: build it first (./bootstrap)" >&2
    exit 1
fi
if [ ! -x "$py" ] || ! "$py" -c "import hta" 2>/dev/null; then
    echo "vs_hta: skipped: no HolisticTraceAnalysis at $py (set HTA_PYTHON, or make /work/venv-hta)"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

cat >"$tmp/hta_run.py" <<'EOF'
import sys, time
t_start = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
t_imported = time.perf_counter()
ta = TraceAnalysis(trace_dir=sys.argv[1])
ranks = sorted(ta.t.traces.keys())
for f in (lambda: ta.get_temporal_breakdown(visualize=False),
          lambda: ta.get_idle_time_breakdown(ranks=ranks, visualize=False, show_idle_interval_stats=True)):
    try:
        f()
    except Exception as e:  # HTA's own assertions on some traces: timed as far as it went
        print(f"HTA stopped: {type(e).__name__}: {e}", file=sys.stderr)
print(f"{time.perf_counter() - t_imported:.3f}")
EOF

now() { date +%s.%N; }
best() { sort -g | head -n 1; }

printf '%-38s %9s %9s %10s %9s %9s %10s %9s\n' trace "JSON MB" "--hta s" "HTA s" "x (e2e)" "x (work)" "report s" "x (e2e)"
for t in qwen_h100_with_stack qwen_mi300_rocm_with_stack resnet_2080ti_two_threads resnet50_v100_legacy_2021; do
    f=samples/traces/kineto/$t.json.gz
    [ -f "$f" ] || continue
    mkdir -p "$tmp/$t"
    cp "$f" "$tmp/$t/"
    mb=$(zcat "$f" | wc -c | awk '{printf "%.1f", $1 / 1e6}')
    : >"$tmp/s"
    : >"$tmp/r"
    : >"$tmp/h"
    : >"$tmp/hw"
    i=0
    while [ "$i" -lt "$runs" ]; do
        a=$(now)
        "$synctop" report --hta "$f" >/dev/null
        b=$(now)
        echo "$b - $a" | bc -l >>"$tmp/s"
        a=$(now)
        "$synctop" report "$f" >/dev/null
        b=$(now)
        echo "$b - $a" | bc -l >>"$tmp/r"
        a=$(now)
        "$py" "$tmp/hta_run.py" "$tmp/$t" >>"$tmp/hw" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
        b=$(now)
        echo "$b - $a" | bc -l >>"$tmp/h"
        i=$((i + 1))
    done
    s=$(best <"$tmp/s")
    r=$(best <"$tmp/r")
    h=$(best <"$tmp/h")
    hw=$(best <"$tmp/hw")
    printf '%-38s %9s %9.3f %10.3f %9.1f %9.1f %10.3f %9.1f\n' "$t" "$mb" "$s" "$h" "$(echo "$h / $s" | bc -l)" \
        "$(echo "$hw / $s" | bc -l)" "$r" "$(echo "$h / $r" | bc -l)"
done
echo "(best of $runs runs each; x (work): HTA without the interpreter's and its imports' start-up)"
