#!/bin/sh
# On a GPU machine with PyTorch: the wheel (bootstrap --wheel; tests/gpu/pack.sh carries it) in a
# virtual environment that sees the machine's torch. `synctop run` from the wheel on a PyTorch loop
# (samples/torch_item.py: 50 waits at its line tagged @item) must find the CUPTI of torch's CUDA
# wheel and name that line; `import synctop` must give torch.profiler a working on_trace_ready
# (tests/gpu/hook_loop.py).
#
# usage: tests/gpu/wheel.sh WHEEL OUTDIR    PYTHON=python3 (the one with torch)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
whl=${1:?usage: tests/gpu/wheel.sh WHEEL OUTDIR}
out=${2:?usage: tests/gpu/wheel.sh WHEEL OUTDIR}
python=${PYTHON:-python3}
fail() {
    echo "wheel.sh: FAILED: $*" >&2
    exit 1
}
"$python" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null ||
    { echo "wheel.sh: PyTorch with CUDA not available" >&2; exit 2; }
mkdir -p "$out"
venv=$(mktemp -d)/venv
"$python" -m venv "$venv"
# torch from the environment that has it (a venv made from a venv's python does not see that
# venv's packages, --system-site-packages or not): its site-packages through a .pth file
torch_site=$("$python" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
"$venv/bin/python" -c 'import site; print(site.getsitepackages()[0])' | {
    read -r site
    echo "$torch_site" >"$site/torch_site.pth"
}
"$venv/bin/pip" install -q --no-index --no-deps "$whl" || fail "pip install $whl"
"$venv/bin/python" -c 'import torch, synctop' || fail "the venv sees no torch or no synctop"
"$venv/bin/synctop" --version

line=$(grep -n "# @item" "$root/samples/torch_item.py" | cut -d: -f1)
SYNCTOP_VERBOSE=1 timeout 180 "$venv/bin/synctop" run --no-tui --force --record "$out/wheel_item.trace" -- \
    "$venv/bin/python" "$root/samples/torch_item.py" >"$out/wheel_run.log" 2>&1 || fail "synctop run: $(tail -20 "$out/wheel_run.log")"
grep -i "libcupti" "$out/wheel_run.log" | head -3
timeout 120 "$venv/bin/synctop" report "$out/wheel_item.trace" >"$out/wheel_item.report" 2>&1 || fail "synctop report"
grep -q "torch_item.py:$line" "$out/wheel_item.report" || fail "the report does not name torch_item.py:$line: $(head -30 "$out/wheel_item.report")"
echo "wheel.sh: run from the wheel named torch_item.py:$line"
timeout 300 "$venv/bin/python" "$root/tests/gpu/hook_loop.py" "$out/hook" >"$out/wheel_hook.log" 2>&1
rc=$?
tail -12 "$out/wheel_hook.log"
[ "$rc" -eq 0 ] || fail "hook_loop.py"
echo "wheel.sh: OK"
