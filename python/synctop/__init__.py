"""synctop from Python: the stall report of a PyTorch profiler cycle, and budgets on it.

    import torch, synctop

    with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
            schedule=torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=2),
            on_trace_ready=synctop.on_trace_ready(fail_if=["blocked>5%", "sync-api>10"])) as prof:
        for batch in loader:
            train_step(batch)
            prof.step()

Each profiling cycle's trace goes to `synctop report` through memory (a memfd, not a file on disk
where the platform has one); its report is printed (or written where `output` says) and a broken
`fail_if` budget raises `BudgetExceeded` (or, with action="warn", is logged on the "synctop"
logger). The same `synctop` the wheel puts on PATH does the work.
"""

import logging
import os
import shutil
import subprocess
import sys
import tempfile

from ._command import binary as _packaged_binary

__all__ = ["BudgetExceeded", "ReportError", "executable", "on_trace_ready", "report"]

try:
    from importlib.metadata import version as _version

    __version__ = _version("synctop")
except Exception:  # not installed as a distribution (a source checkout)
    __version__ = "0"

_log = logging.getLogger("synctop")


class BudgetExceeded(RuntimeError):
    """A fail_if budget held: `failed` lists synctop's lines for the expressions that held."""

    def __init__(self, failed, report_text):
        self.failed = failed
        self.report = report_text
        super().__init__("synctop budget broken: " + "; ".join(failed))


class ReportError(RuntimeError):
    """synctop could not make the report (a damaged trace, a bad option)."""


def executable():
    """The synctop binary: the one this package carries, else `synctop` on PATH."""
    path = _packaged_binary()
    if os.access(path, os.X_OK):
        return path
    found = shutil.which("synctop")
    if found is None:
        raise ReportError("no synctop binary in the package and none on PATH")
    return found


def _format_of(output):
    if output is None:
        return "text"
    if output.endswith(".json"):
        return "json"
    if output.endswith(".md"):
        return "markdown"
    return "text"


def _command(fail_if, output, fmt, steps, top, args):
    cmd = [executable(), "report", "-", "--format", fmt]
    if isinstance(fail_if, str):
        fail_if = [fail_if]
    for expr in fail_if or ():
        cmd += ["--fail-if", expr]
    if steps:
        cmd.append("--steps")
    if top is not None:
        cmd += ["--top", str(int(top))]
    if output is not None:
        cmd += ["-o", output]
    cmd += list(args)
    return cmd


def _run(cmd, trace_fd):
    os.lseek(trace_fd, 0, os.SEEK_SET)
    proc = subprocess.run(cmd, stdin=trace_fd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    text = proc.stdout.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8", "replace")
    if proc.returncode not in (0, 1):
        raise ReportError("synctop report failed (exit %d): %s" % (proc.returncode, err.strip()))
    failed = [line.split("FAIL", 1)[1].strip() for line in err.splitlines() if ": FAIL " in line]
    if proc.returncode == 1 and not failed:
        raise ReportError("synctop report failed: %s" % err.strip())
    return text, failed


def _open_memory():
    """A file in memory (memfd) and the path another writer opens it by; None where there is none."""
    if not hasattr(os, "memfd_create") or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        fd = os.memfd_create("synctop-trace", getattr(os, "MFD_CLOEXEC", 1))
    except OSError:
        return None
    return fd, "/proc/self/fd/%d" % fd


def _export(prof):
    """The profiler's Chrome trace as an open file descriptor (the caller closes it)."""
    mem = _open_memory()
    if mem is not None:
        fd, path = mem
        try:
            prof.export_chrome_trace(path)
            if os.fstat(fd).st_size > 0:
                return fd
        except Exception as e:  # a profiler that writes elsewhere first: the temporary file below
            _log.debug("synctop: exporting through memory failed (%s); using a temporary file", e)
        os.close(fd)
    tmpdir = tempfile.mkdtemp(prefix="synctop-")
    path = os.path.join(tmpdir, "trace.json")
    try:
        prof.export_chrome_trace(path)
        return os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def report(trace, fail_if=(), output=None, fmt=None, steps=False, top=None, args=()):
    """Runs `synctop report` on a trace: a path, or a torch.profiler profile (its last cycle).

    Returns (text, failed): the report (empty when written to `output`) and the fail_if lines that
    held. Raises ReportError when synctop could not read the trace."""
    fmt = fmt or _format_of(output)
    cmd = _command(fail_if, output, fmt, steps, top, args)
    if isinstance(trace, (str, bytes, os.PathLike)):
        fd = os.open(trace, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    else:
        fd = _export(trace)
    try:
        return _run(cmd, fd)
    finally:
        os.close(fd)


def on_trace_ready(fail_if=(), output=None, fmt=None, steps=False, top=None, action="raise", stream=None,
                   args=()):
    """A handler for torch.profiler.profile(on_trace_ready=...): each cycle's stall report.

    fail_if  budgets as `synctop report --fail-if` takes them ('blocked>5%', 'stalls>100',
             'sync-api>0', 'site:train.py:42>10ms', ...); when one holds, `action` says what
             happens: "raise" (BudgetExceeded, the default) or "warn" (a warning on the "synctop"
             logger).
    output   None: the report is printed on `stream` (sys.stdout); else a path, where "{step}" is
             the profiler's step number: .json writes JSON, .md markdown, anything else text.
    steps, top, args: as `synctop report --steps`, `--top N`, and further options.
    """
    if action not in ("raise", "warn"):
        raise ValueError("action is 'raise' or 'warn', not %r" % (action,))

    def handler(prof):
        step = getattr(prof, "step_num", 0)
        where = None if output is None else output.format(step=step)
        text, failed = report(prof, fail_if=fail_if, output=where, fmt=fmt, steps=steps, top=top, args=args)
        if where is None:
            out = stream if stream is not None else sys.stdout
            out.write("synctop: profiler cycle ending at step %s\n" % step)
            out.write(text)
            out.flush()
        if failed:
            if action == "raise":
                raise BudgetExceeded(failed, text)
            for line in failed:
                _log.warning("synctop budget broken at step %s: %s", step, line)

    return handler
