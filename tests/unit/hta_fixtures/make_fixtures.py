#!/usr/bin/env python3
"""Writes the reference numbers for `synctop report --hta` (tests/unit/test_hta.c): Holistic Trace
Analysis' own temporal breakdown and idle-time breakdown (with its idle interval statistics) for
each case below, as JSON, one file per case in this directory.

HTA version: HolisticTraceAnalysis 0.5.0 (PyPI), run with pandas and numpy as pip resolved them
(the versions used are written into each fixture). Not needed to build or test synctop.

Usage:
    python3 -m venv /work/venv-hta
    /work/venv-hta/bin/pip install HolisticTraceAnalysis==0.5.0
    /work/venv-hta/bin/python tests/unit/hta_fixtures/make_fixtures.py [EXTRA_TRACE_DIR [CASE...]]

Traces are read from samples/traces/kineto; EXTRA_TRACE_DIR (default /work/shared/traces/kineto)
supplies the cases whose traces are not in samples yet (skipped when absent); CASE names limit the
run to those cases (the other fixtures are left as they are); float_ts_trace.json
here is a small hand-written trace (ns-precision float ts relative to baseTimeNanoseconds, a GPU row
with no host call, a sub-microsecond memset, overlapping kernels, a Stream Sync row) and
stream_zero_trace.json kernels on stream 0 (a GPU stream for HTA: stream >= 0). Each case is a
directory of traces for TraceAnalysis (one file per rank), made in a temporary directory.

Fixture layout (times in microseconds, HTA's values as it returns them):
    {"hta_version", "pandas_version", "numpy_version", "case", "files": [...],
     "temporal": [{"rank", "idle_time(us)", ...}],          get_temporal_breakdown
     "idle_time": [{"rank", "stream", "idle_category", "idle_time", "idle_time_ratio"}],
     "idle_interval_stats": [{"rank", "stream", "idle_category", "count", "mean", "std",
                              "min", "25%", "50%", "75%", "max"}]}
NaN (a category whose only interval is the stream's first row) is written as null. Where HTA itself
fails (an assertion), "temporal_error" or "idle_time_error" holds its message instead; for the
temporal breakdown, "temporal_unasserted" then holds what HTA's own code computes when Python runs
it with assertions off (python -O), in a process of its own.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = os.path.normpath(os.path.join(HERE, "..", "..", "..", "samples", "traces", "kineto"))

CASES = {
    "alexnet_a100_sync_heavy": (None, ["alexnet_a100_sync_heavy.json.gz"]),
    "event_sync_multi_stream": (None, ["event_sync_multi_stream.json.gz"]),
    "event_sync_single_stream": (None, ["event_sync_single_stream.json.gz"]),
    "sampled_two_ranks": (None, ["sampled_rank-0.json.gz", "sampled_rank-1.json.gz"]),
    "float_ts": ("fixtures", ["float_ts_trace.json"]),
    "stream_zero": ("fixtures", ["stream_zero_trace.json"]),
    "qwen_h100_with_stack": ("extra", ["qwen_h100_with_stack.json.gz"]),
    "resnet_2080ti_two_threads": ("extra", ["resnet_2080ti_two_threads.json.gz"]),
    "resnet50_v100_legacy_2021": (None, ["resnet50_v100_legacy_2021.json.gz"]),
    "qwen_mi300_rocm_with_stack": (None, ["qwen_mi300_rocm_with_stack.json.gz"]),
    "v100_ns_resolution_hta": (None, ["v100_ns_resolution_hta.json.gz"]),
}


def plain(v):
    """A JSON-able Python value for a pandas/numpy scalar."""
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def records(df):
    return [{str(k): plain(v) for k, v in row.items()} for row in df.to_dict(orient="records")]


def run_case(name, src_dir, files):
    import hta
    import numpy
    import pandas
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as d:
        for f in files:
            shutil.copy(os.path.join(src_dir, f), os.path.join(d, f))
        ta = TraceAnalysis(trace_dir=d)
        ranks = sorted(ta.t.traces.keys())
        out = {}
        try:
            out["temporal"] = records(ta.get_temporal_breakdown(visualize=False))
        except Exception as e:  # HTA's own assertions: the fixture says which
            out["temporal_error"] = f"{type(e).__name__}: {e}"
            if isinstance(e, AssertionError):
                run = subprocess.run([sys.executable, "-O", os.path.abspath(__file__), "--temporal", d],
                                     check=True, capture_output=True, text=True)
                out["temporal_unasserted"] = json.loads(run.stdout)
        try:
            idle, stats = ta.get_idle_time_breakdown(ranks=ranks, visualize=False, show_idle_interval_stats=True)
            out["idle_time"] = records(idle)
            out["idle_interval_stats"] = records(stats.reset_index())
        except Exception as e:
            out["idle_time_error"] = f"{type(e).__name__}: {e}"
    version = getattr(hta, "__version__", None)
    if version is None:
        from importlib.metadata import version as v

        version = v("HolisticTraceAnalysis")
    out.update({
        "hta_version": version,
        "pandas_version": pandas.__version__,
        "numpy_version": numpy.__version__,
        "case": name,
        "files": files,
        "ranks": ranks,
    })
    return out


def main(argv):
    if len(argv) == 3 and argv[1] == "--temporal":
        # HTA's temporal breakdown of one case directory, as JSON on stdout, with HTA's own
        # assertions off: only meaningful under python -O.
        if __debug__:
            sys.exit("make_fixtures.py --temporal: run with python -O")
        from hta.trace_analysis import TraceAnalysis

        ta = TraceAnalysis(trace_dir=argv[2])
        print(json.dumps(records(ta.get_temporal_breakdown(visualize=False))))
        return
    extra = argv[1] if len(argv) > 1 else "/work/shared/traces/kineto"
    only = set(argv[2:])
    for name, (where, files) in CASES.items():
        if only and name not in only:
            continue
        src = {None: SAMPLES, "fixtures": HERE, "extra": extra}[where]
        if not all(os.path.exists(os.path.join(src, f)) for f in files):
            print(f"{name}: skipped, no {files} in {src}", file=sys.stderr)
            continue
        out = run_case(name, src, files)
        with open(os.path.join(HERE, name + ".json"), "w") as f:
            json.dump(out, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"{name}: {len(out.get('idle_time', []))} idle rows, {len(out.get('temporal', []))} ranks,"
              f" errors: {out.get('temporal_error')} {out.get('idle_time_error')}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
