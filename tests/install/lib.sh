# shellcheck shell=sh
# The checks of an installed synctop, sourced by prefix.sh, deb.sh and wheel.sh: each runs the
# installed command the way a user would and compares what it says with figures its input fixes.
#   SYNCTOP  the installed command
#   AUX      a directory with the stand-ins a CUDA program would load (libcupti.so.13, libcuda.so.1)
#            and two programs built against them (tracer_harness_plain, inject_target)
#   WORK     a scratch directory
#   TRACE    a PyTorch-profiler trace, and TRACE_REPORT the report of it that a build tree gives

# The scratch directory (removed at exit), AUX in it with the files named before "--" in the
# arguments given, and TRACE a copy of the one after; skips (77) without tmux. Sets WORK, AUX, TRACE.
setup_work() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/synctop-install.XXXXXX")
    trap 'rm -rf "$WORK"' EXIT
    AUX="$WORK/aux"
    mkdir -p "$AUX"
    while [ "$1" != "--" ]; do
        cp "$1" "$AUX/"
        shift
    done
    cp "$2" "$WORK/trace.json.gz"
    TRACE="$WORK/trace.json.gz"
    command -v tmux >/dev/null || { echo "SKIP: tmux is not installed"; exit 77; }
}

# How to run a command in a mount namespace of its own, where build trees are hidden: root's own,
# else one of a user namespace; skips (77) when neither can be made. Sets NS.
# shellcheck disable=SC2034 # NS is read by the scripts that source this
mount_namespace() {
    if unshare --mount true 2>/dev/null; then
        NS="unshare --mount"
    elif unshare --mount --map-root-user true 2>/dev/null; then
        NS="unshare --mount --map-root-user"
    else
        echo "SKIP: cannot make a mount namespace to hide the build trees in (needs root or user namespaces)"
        exit 77
    fi
}

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

say() { echo "install: $*"; }

# `synctop run` on a program that blocks three times, 0.5 ms each, at one call site.
check_run() {
    cat >"$WORK/run.script" <<'SCRIPT'
context_create 1
x3@0 call domain=rt cbid=131 wait=500000 site=4
x20@1000 kernel name=k start=1000 end=1500 corr=1
context_destroy 1
SCRIPT
    rm -f "$WORK/run.trace"
    SYNCTOP_STANDIN="$AUX/libcupti.so.13" SYNCTOP_CUPTI="$AUX/libcupti.so.13" \
        "$SYNCTOP" run --record "$WORK/run.trace" -- "$AUX/tracer_harness_plain" "$WORK/run.script" \
        >"$WORK/run.out" 2>&1 </dev/null || fail "synctop run: $(cat "$WORK/run.out")"
    grep -q "host blocked 1.500 ms in 3 calls" "$WORK/run.out" ||
        fail "synctop run did not see the 3 waits of 0.5 ms: $(cat "$WORK/run.out")"
    "$SYNCTOP" report "$WORK/run.trace" >"$WORK/run.report" 2>&1 || fail "synctop report of run's trace failed"
    grep -q "3 calls, 1.500 ms, longest 0.500 ms: cudaStreamSynchronize at" "$WORK/run.report" ||
        fail "the recorded trace does not hold the 3 waits: $(cat "$WORK/run.report")"
    say "run: traced the program and recorded its 3 waits"
}

# `synctop report` on a real profiler trace says what the build tree's synctop says.
check_report() {
    "$SYNCTOP" report "$TRACE" >"$WORK/report.out" 2>&1 || fail "synctop report $TRACE failed"
    # the first lines name the file (wrapped when its path is long), which the install keeps
    # elsewhere: compared from the span on
    sed -n '/^span /,$p' "$WORK/report.out" >"$WORK/report.body"
    sed -n '/^span /,$p' "$TRACE_REPORT" >"$WORK/report.want"
    [ -s "$WORK/report.want" ] || fail "the build tree's report has no span line: $(head -5 "$TRACE_REPORT")"
    cmp -s "$WORK/report.body" "$WORK/report.want" ||
        fail "synctop report $TRACE differs from the build tree's: $(diff "$WORK/report.want" "$WORK/report.body" | head -20)"
    grep -q "cudaStreamSynchronize" "$WORK/report.body" || fail "the report names no cudaStreamSynchronize"
    say "report: the same report as the build tree's"
}

TMUX_SOCK="synctop-install-$$"

tmux_screen() { tmux -L "$TMUX_SOCK" capture-pane -p 2>/dev/null; }

# Waits (60 s at most) until the screen shows $1.
tmux_wait() {
    i=0
    while ! tmux_screen | grep -qF -- "$1"; do
        i=$((i + 1))
        [ "$i" -lt 600 ] || fail "the screen never showed '$1':
$(tmux_screen)"
        sleep 0.1
    done
}

tmux_start() {
    tmux -L "$TMUX_SOCK" kill-server 2>/dev/null || true
    tmux -L "$TMUX_SOCK" -f /dev/null new-session -d -x 120 -y 40 "$1; echo EXITED rc=\$?; sleep 60"
}

tmux_end() { tmux -L "$TMUX_SOCK" kill-server 2>/dev/null || true; }

# `synctop replay` in a terminal: the recording of check_run, its waits listed, q quits.
check_replay() {
    tmux_start "'$SYNCTOP' replay '$WORK/run.trace'"
    tmux_wait "cudaStreamSynchronize"
    tmux -L "$TMUX_SOCK" send-keys q
    tmux_wait "EXITED rc=0"
    tmux_end
    say "replay: showed the recording and quit"
}

# `synctop attach PID` on a running program started without synctop: the tracer is loaded into it,
# the program is shown live, and quitting stops the tracer again.
check_attach() {
    rm -f "$WORK/target.stop"
    SYNCTOP_STANDIN="$AUX/libcupti.so.13" SYNCTOP_CUPTI="$AUX/libcupti.so.13" \
        SYNCTOP_STANDIN_DRIVER="$AUX/libcuda.so.1" \
        "$AUX/inject_target" run "$WORK/target.stop" >"$WORK/target.out" 2>&1 &
    target=$!
    i=0
    until grep -q ready "$WORK/target.out" 2>/dev/null; do
        i=$((i + 1))
        [ "$i" -lt 600 ] || fail "the target program did not start: $(cat "$WORK/target.out")"
        sleep 0.1
    done
    tmux_start "'$SYNCTOP' attach $target --yes"
    tmux_wait "inject_target run"
    tmux -L "$TMUX_SOCK" send-keys q
    tmux_wait "EXITED rc=0"
    tmux_screen | grep -q "stopped the tracer in process" || fail "attach did not stop the tracer: $(tmux_screen)"
    tmux_end
    touch "$WORK/target.stop"
    wait "$target" || fail "the target program failed after attach: $(cat "$WORK/target.out")"
    say "attach: loaded the tracer into process $target, showed it live, stopped it"
}

# `synctop demo` plays the sample trace installed with it (not the source tree's) live, and
# `synctop report PID` records one loop of it to its end.
check_demo() {
    "$SYNCTOP" demo --no-tui --loops 1 --speed 1000 >"$WORK/demo.out" 2>&1 </dev/null &
    demo=$!
    i=0
    until grep -q "publishing" "$WORK/demo.out" 2>/dev/null; do
        i=$((i + 1))
        [ "$i" -lt 600 ] || fail "synctop demo did not start: $(cat "$WORK/demo.out")"
        sleep 0.1
    done
    grep -q "publishing .*/share/synctop/traces/resnet_2080ti_two_threads.json.gz" "$WORK/demo.out" ||
        fail "synctop demo does not play the installed sample: $(cat "$WORK/demo.out")"
    "$SYNCTOP" report "$demo" --wait 30 >"$WORK/demo.report" 2>&1 || fail "synctop report of the demo: $(cat "$WORK/demo.report")"
    wait "$demo" || fail "synctop demo failed: $(cat "$WORK/demo.out")"
    grep -q "cudaStreamSynchronize" "$WORK/demo.report" || fail "the demo's report names no cudaStreamSynchronize"
    say "demo: played the installed sample live, and report recorded it"
}
