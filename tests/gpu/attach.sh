#!/bin/sh
# On a machine with a GPU: `synctop attach` on a PyTorch training loop started without synctop
# (tests/gpu/attach_loop.py). Loads and starts the tracer, records 5 s, checks that the recording
# holds the loop's waits named after its Python line (attach_loop.py, the line tagged @item) and
# its GPU named, detaches, checks that no thread of the tracer's is left in the program, then does
# CYCLES more attach/detach cycles; prints every pause synctop held the program's main thread for,
# and the program's own longest step against its median (the pause it saw).
#
# usage: tests/gpu/attach.sh BUILD_DIR [CYCLES (default 20)]    PYTHON=python3
# BUILD_DIR: the build/ of a folder made by tests/gpu/pack.sh, its env.sh sourced (tests/gpu/run.sh
# says why). Needs ptrace of one's own processes (Yama ptrace_scope 0, or 1 with CAP_SYS_PTRACE).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: tests/gpu/attach.sh BUILD_DIR [CYCLES]}
cycles=${2:-20}
python=${PYTHON:-python3}
synctop=$build/synctop
fail() {
    echo "attach.sh: FAILED: $*" >&2
    exit 1
}
nvidia-smi -L >/dev/null 2>&1 || { echo "attach.sh: no GPU here (nvidia-smi -L failed)" >&2; exit 2; }
"$python" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null ||
    { echo "attach.sh: PyTorch with CUDA not available: nothing to attach to" >&2; exit 2; }
tmp=$(mktemp -d)
pid=""
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# The program must not find the tracer by itself.
env -u CUDA_INJECTION64_PATH -u NVTX_INJECTION64_PATH "$python" "$root/tests/gpu/attach_loop.py" "$tmp/stop" \
    >"$tmp/loop.out" 2>"$tmp/loop.err" &
pid=$!
i=0
until grep -q ready "$tmp/loop.out" 2>/dev/null; do
    i=$((i + 1))
    [ "$i" -lt 600 ] || fail "the loop did not start: $(cat "$tmp/loop.err")"
    kill -0 "$pid" 2>/dev/null || fail "the loop exited: $(cat "$tmp/loop.err")"
    sleep 0.1
done
sleep 2 # a few steps untraced

tracer_threads() {
    cat /proc/"$pid"/task/*/comm 2>/dev/null | grep -c '^synctop-' || true
}

"$synctop" attach "$pid" --yes --inject-only 2>"$tmp/attach.err" || fail "attach: $(cat "$tmp/attach.err")"
cat "$tmp/attach.err"
"$synctop" record "$pid" -o "$tmp/attach.trace" --duration 5 2>"$tmp/record.err" ||
    fail "record: $(cat "$tmp/record.err")"
"$synctop" detach "$pid" 2>"$tmp/detach.err" || fail "detach: $(cat "$tmp/detach.err")"
cat "$tmp/detach.err"
[ "$(tracer_threads)" -eq 0 ] || fail "threads of the tracer left in the program after detach"

line=$(grep -n '# @item' "$root/tests/gpu/attach_loop.py" | cut -d: -f1)
"$synctop" report "$tmp/attach.trace" --format json >"$tmp/report.json" || fail "report of the recording"
grep -q "attach_loop.py:$line" "$tmp/report.json" || fail "no wait named attach_loop.py:$line in the recording"
"$synctop" info "$tmp/attach.trace" | tee "$tmp/info.txt" | head -20
grep -qi "nvidia\|h100\|h200" "$tmp/info.txt" || echo "attach.sh: note: the GPU is not named in the recording"
cp "$tmp/attach.trace" "$root/samples/traces/torch_attach.trace"

n=0
while [ "$n" -lt "$cycles" ]; do
    "$synctop" attach "$pid" --yes --inject-only 2>>"$tmp/cycles.err" || fail "attach (cycle $n): $(tail -2 "$tmp/cycles.err")"
    "$synctop" detach "$pid" 2>>"$tmp/cycles.err" || fail "detach (cycle $n): $(tail -2 "$tmp/cycles.err")"
    [ "$(tracer_threads)" -eq 0 ] || fail "threads of the tracer left after cycle $n"
    n=$((n + 1))
done
echo "attach: held ms, each attach: $(sed -n 's/.*started the tracer.*held \([0-9.]*\) ms.*/\1/p' "$tmp/cycles.err" | tr '\n' ' ')"
echo "detach: held ms, each detach: $(sed -n 's/.*stopped the tracer.*held \([0-9.]*\) ms.*/\1/p' "$tmp/cycles.err" | tr '\n' ' ')"

touch "$tmp/stop"
wait "$pid" || fail "the loop exited with an error: $(cat "$tmp/loop.err")"
pid=""
tail -1 "$tmp/loop.out"
echo "attach.sh: attached, traced with Python lines, detached and cycled $cycles times; recording in samples/traces/torch_attach.trace"
