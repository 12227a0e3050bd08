"""On a GPU: torch.profiler with synctop.on_trace_ready (the wheel's `import synctop`) on a real loop.

usage: python hook_loop.py OUTDIR

A loop that calls loss.item() once a step, profiled with a schedule of two cycles of two active
steps each. Each .item() copies one scalar to pageable memory and waits for the stream: at least
one blocking call per active step, so each cycle's report holds at least 2 (the figure comes from
the loop, not from synctop). Checks: one JSON report per cycle with those calls, a warning per
cycle for the broken budget with action="warn", and BudgetExceeded out of prof.step() with
action="raise". Prints what it saw, and whether the trace went through memory.
"""

import json
import logging
import os
import sys

import torch
import synctop

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
logging.basicConfig(level=logging.DEBUG, format="%(name)s %(levelname)s %(message)s")
warnings = []


class Keep(logging.Handler):
    def emit(self, record):
        if record.levelno >= logging.WARNING:
            warnings.append(record.getMessage())


logging.getLogger("synctop").addHandler(Keep())

model = torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 1)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(256, 2048, device="cuda")
y = torch.randn(256, 1, device="cuda")


def step():
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
sched = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=2)
handler = synctop.on_trace_ready(fail_if="sync-api>0", action="warn", output=os.path.join(out, "cycle{step}.json"))
with torch.profiler.profile(activities=acts, schedule=sched, on_trace_ready=handler) as prof:
    for _ in range(10):
        step()
        prof.step()

reports = sorted(f for f in os.listdir(out) if f.startswith("cycle") and f.endswith(".json"))
print("hook_loop: reports", reports)
ok = len(reports) == 2
for name in reports:
    with open(os.path.join(out, name)) as f:
        rep = json.load(f)
    calls = rep["host"]["blocking_calls"]
    print("hook_loop: %s: %d blocking calls, %.3f ms blocked" % (name, calls, rep["host"]["blocked_ns"] / 1e6))
    ok = ok and calls >= 2
print("hook_loop: warnings", warnings)
ok = ok and len(warnings) == 2

raised = None
try:
    with torch.profiler.profile(activities=acts, schedule=torch.profiler.schedule(wait=0, warmup=1, active=1),
                                on_trace_ready=synctop.on_trace_ready(fail_if="sync-api>0",
                                                                      stream=open(os.devnull, "w"))) as prof:
        for _ in range(4):
            step()
            prof.step()
except synctop.BudgetExceeded as e:
    raised = e.failed
print("hook_loop: raise mode:", raised)
ok = ok and raised is not None
print("hook_loop:", "OK" if ok else "FAILED")
sys.exit(0 if ok else 1)
