"""`import synctop` from an installed wheel: torch.profiler's on_trace_ready handler on a real trace.

usage: python hook_check.py TRACE.json.gz WORKDIR

torch is not needed: the handler is given an object with the two things torch.profiler.profile
hands an on_trace_ready handler that it uses (export_chrome_trace(path), step_num), which writes
a real PyTorch-profiler trace where it is asked to. The figures come from the trace's own JSON
and from the installed `synctop report` run on the file.
"""

import gzip
import io
import json
import logging
import os
import subprocess
import sys

import synctop

trace, work = sys.argv[1], sys.argv[2]
data = gzip.open(trace).read()


class Profile:
    """What on_trace_ready's handler uses of torch.profiler.profile."""

    def __init__(self, payload, step):
        self.payload = payload
        self.step_num = step
        self.paths = []

    def export_chrome_trace(self, path):
        self.paths.append(path)
        with open(path, "wb") as f:
            f.write(self.payload)


def check(cond, what):
    if not cond:
        sys.stderr.write("FAIL: %s\n" % what)
        sys.exit(1)


# The synchronize calls in the trace's own JSON: each one held the host.
n_sync = sum(1 for e in json.loads(data)["traceEvents"]
             if e.get("cat") == "cuda_runtime" and e.get("name") in ("cudaDeviceSynchronize", "cudaStreamSynchronize"))
check(n_sync == 3, "the trace holds %d synchronize calls, not 3" % n_sync)

# The report, printed: the one `synctop report FILE` gives, after the cycle's heading.
by_file = subprocess.run(["synctop", "report", trace], stdout=subprocess.PIPE, check=True).stdout.decode()
out = io.StringIO()
prof = Profile(data, 7)
synctop.on_trace_ready(fail_if="stalls>%d" % n_sync, stream=out)(prof)
printed = out.getvalue()
check(printed.startswith("synctop: profiler cycle ending at step 7\n"), "the heading: %r" % printed[:80])
check(printed.split("\n", 2)[2] == by_file.split("\n", 1)[1], "the printed report differs from synctop report's")
check(len(prof.paths) == 1 and prof.paths[0].startswith("/proc/self/fd/"),
      "the trace went through %s, not memory" % prof.paths)
print("hook: printed the cycle's report, the trace passed through memory (%s)" % prof.paths[0])

# A budget that holds raises, naming it; one that does not, does not.
broken = []
try:
    synctop.on_trace_ready(fail_if=["stalls>%d" % (n_sync - 1), "idle>100%"], stream=io.StringIO())(Profile(data, 8))
    check(False, "stalls>%d did not raise" % (n_sync - 1))
except synctop.BudgetExceeded as e:
    broken = e.failed
check(len(broken) == 1 and broken[0].startswith("stalls>%d: %d blocking calls" % (n_sync - 1, n_sync)),
      "the budget broken: %s" % broken)
print("hook: stalls>%d raised BudgetExceeded: %s" % (n_sync - 1, broken[0]))

# action="warn" logs instead of raising.
records = []


class Keep(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())


logging.getLogger("synctop").addHandler(Keep())
synctop.on_trace_ready(fail_if="sync-api>0", action="warn", stream=io.StringIO())(Profile(data, 9))
check(len(records) == 1 and "at step 9" in records[0] and "sync-api>0" in records[0], "the warning: %s" % records)
print("hook: action='warn' logged: %s" % records[0])

# output= writes each cycle's report where asked, JSON by its name, with the blocking calls in it.
pattern = os.path.join(work, "cycle{step}.json")
synctop.on_trace_ready(output=pattern)(Profile(data, 12))
with open(os.path.join(work, "cycle12.json")) as f:
    rep = json.load(f)
check(rep["host"]["blocking_calls"] == n_sync and sum(s["count"] for s in rep["sites"]) == n_sync,
      "the JSON's blocking calls: %s" % rep.get("host"))
print("hook: wrote cycle12.json with the %d blocking calls" % n_sync)

# A trace synctop cannot read is an error that says why, not a report.
try:
    synctop.on_trace_ready()(Profile(b"{\"traceEvents\": [", 13))
    check(False, "a damaged trace did not raise")
except synctop.ReportError as e:
    print("hook: a damaged trace raised ReportError: %s" % str(e).splitlines()[0])

# synctop.report on a path gives the same failures as the handler.
text, failed = synctop.report(trace, fail_if="sync-api>0")
check(text == by_file.replace("synctop report: " + trace, "synctop report: -", 1) and len(failed) == 1,
      "synctop.report(path): %r %s" % (text[:60], failed))
print("hook: synctop.report(path) agrees")
