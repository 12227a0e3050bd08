#!/bin/sh
# synctop against Holistic Trace Analysis 0.5.0, side by side in one run, on every large real trace
# (the profiler traces in samples/traces/kineto of 5 MB of JSON or more, and any trace given): the
# same two breakdowns (temporal, and idle time with its interval statistics, HTA told the trace's
# ranks) from the same gzip'd trace, end to end (process start to exit). Each figure is CPU time
# (user + system of the process), the best of N runs, so that other work on the machine moves it
# little. Prints per trace the seconds of each, the ratio, and HTA's CPU time without the Python
# interpreter's and the libraries' start-up (measured inside its process); and the same for
# synctop's plain `report` (the whole analysis: stalls, idle time by cause, rules) against HTA.
# The last line gives the smallest ratio of all.
#
#   bench/vs_hta.sh [RUNS] [TRACE.json.gz ...]     (RUNS default 3)
#
# Needs a Release build (build/synctop) and HTA in a virtualenv: $HTA_PYTHON, else
# /work/venv-hta/bin/python (python3 -m venv /work/venv-hta && /work/venv-hta/bin/pip install
# HolisticTraceAnalysis==0.5.0). Without it, says so and exits 0: CI does not need HTA.
set -eu
cd "$(dirname "$0")/.."
runs=3
case ${1:-} in [0-9]*) runs=$1; shift ;; esac
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
from hta.trace_analysis import TraceAnalysis
t_imported = time.process_time()
ta = TraceAnalysis(trace_dir=sys.argv[1])
ranks = sorted(ta.t.traces.keys())
for f in (lambda: ta.get_temporal_breakdown(visualize=False),
          lambda: ta.get_idle_time_breakdown(ranks=ranks, visualize=False, show_idle_interval_stats=True)):
    try:
        f()
    except Exception as e:  # HTA's own assertions on some traces: timed as far as it went
        print(f"HTA stopped: {type(e).__name__}: {e}", file=sys.stderr)
print(f"{time.process_time() - t_imported:.3f}")
EOF

# The CPU time of a child to the microsecond (time(1) prints hundredths: synctop's runs take a few).
cat >"$tmp/cpu.py" <<'EOF'
import os, sys
pid = os.fork()
if pid == 0:
    fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(fd, 1)
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, ru = os.wait4(pid, 0)
if status != 0:
    sys.exit(1)
print(f"{ru.ru_utime + ru.ru_stime:.6f}", file=sys.stderr)
EOF

# cpu FILE CMD...: runs CMD, its output thrown away, and appends its CPU seconds to FILE
cpu() {
    out=$1
    shift
    python3 "$tmp/cpu.py" "$@" 2>>"$out" || { echo "vs_hta: failed: $*" >&2; exit 1; }
}
best() { sort -g | head -n 1; }

if [ $# -eq 0 ]; then
    for f in samples/traces/kineto/*.json.gz; do
        [ "$(gzip -dcf "$f" | wc -c)" -ge 5000000 ] && set -- "$@" "$f"
    done
fi

printf '%-38s %9s %9s %10s %9s %9s %10s %9s\n' trace "JSON MB" "--hta s" "HTA s" "x (e2e)" "x (work)" "report s" "x (e2e)"
lowest=
for f in "$@"; do
    t=$(basename "${f%.gz}" .json)
    mkdir -p "$tmp/$t"
    cp "$f" "$tmp/$t/"
    mb=$(gzip -dcf "$f" | wc -c | awk '{printf "%.1f", $1 / 1e6}')
    : >"$tmp/s"
    : >"$tmp/r"
    : >"$tmp/h"
    : >"$tmp/hw"
    i=0
    while [ "$i" -lt "$runs" ]; do
        cpu "$tmp/s" "$synctop" report --hta "$f"
        cpu "$tmp/r" "$synctop" report "$f"
        # HTA's own line (its CPU time after the imports) to hw, the process's to h
        "$py" -c 'import os, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
sys.stderr.write(r.stderr)
if r.returncode != 0:
    sys.exit(1)
print(r.stdout.strip().splitlines()[-1])
t = os.times()
print(f"{t.children_user + t.children_system:.6f}", file=sys.stderr)' "$py" "$tmp/hta_run.py" "$tmp/$t" \
            >>"$tmp/hw" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
        if grep -q "HTA stopped" "$tmp/err"; then
            sed -n 's/^/  /; /HTA stopped/p' "$tmp/err" | head -n 2 >&2
        fi
        tail -n 1 "$tmp/err" >>"$tmp/h"
        i=$((i + 1))
    done
    s=$(best <"$tmp/s")
    r=$(best <"$tmp/r")
    h=$(best <"$tmp/h")
    hw=$(best <"$tmp/hw")
    x=$(echo "$h / $s" | bc -l)
    printf '%-38s %9s %9.3f %10.3f %9.1f %9.1f %10.3f %9.1f\n' "$t" "$mb" "$s" "$h" "$x" \
        "$(echo "$hw / $s" | bc -l)" "$r" "$(echo "$h / $r" | bc -l)"
    if [ -z "$lowest" ] || [ "$(echo "$x < $lowest" | bc -l)" = 1 ]; then lowest=$x; fi
done
echo "(CPU seconds, best of $runs runs each; x (work): HTA without the interpreter's and its imports' start-up)"
printf 'lowest --hta ratio: %.1fx\n' "${lowest:-0}"
