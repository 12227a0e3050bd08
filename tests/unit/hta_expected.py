#!/usr/bin/env python3
"""Independent reference for `synctop report --hta`: Holistic Trace Analysis' idle-time breakdown and
temporal breakdown, recomputed from the raw Kineto JSON with the standard library only (json, gzip).

It follows HTA's own code (facebookresearch/HolisticTraceAnalysis), step by step:
  - hta/common/trace_parser.py  _parse_trace_dataframe_json: when the `ts` column is float64 (a float
    `ts`, or a row without one), ts = ceil(ts), end = floor(ts + dur) in double precision, dur = end - ts;
    _compress_df: rows without dur or cat are dropped, and cat == "Trace"; args.stream and
    args.correlation default to -1.
  - hta/common/trace.py  transform_correlation_to_index: CPU rows (stream == -1) and GPU rows
    (stream > 0) with the same correlation are linked; an unlinked row gets min(correlation, 0).
    _filter_irrelevant_gpu_kernels: with two or more ProfilerStep names (over all ranks loaded), only
    CPU rows that start before the last ProfilerStep are kept, and GPU rows are inner-joined with their
    correlation (one copy per matching CPU row).
  - hta/analyzers/breakdown_analysis.py  get_idle_time_breakdown / _analyze_idle_time_for_stream: per
    stream (rows with stream != -1, sorted by ts), idle_interval = ts - (previous ts + dur);
    host_wait when the launching call started after the previous op ended, else kernel_wait when the
    interval is below consecutive_kernel_delay (30 us), else other. get_temporal_breakdown: merged
    intervals of all GPU rows, compute = merged COMPUTATION rows (hta/utils/utils.py get_kernel_type).
Times are microseconds, as in HTA's output. Usage: hta_expected.py TRACE.json[.gz]... (one per rank,
loaded together as one HTA Trace); prints JSON.
"""
import gzip
import json
import math
import re
import sys

DELAY_US = 30  # trace_analysis.py get_idle_time_breakdown(consecutive_kernel_delay=30)

NCCL_KERNEL_RE = re.compile(r"^nccl.*Kernel")
MEMORY_KERNEL_RE = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
NCCL_COMPUTE_KERNEL_RE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")


def kernel_type(name):
    if NCCL_KERNEL_RE.match(name):
        return "COMMUNICATION"
    if MEMORY_KERNEL_RE.match(name):
        return "MEMORY"
    if not NCCL_COMPUTE_KERNEL_RE.match(name):
        return "COMPUTATION"
    return "OTHER"


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return json.loads(data)


def rows_of(trace):
    events = trace.get("traceEvents", [])
    ts_float = any(not isinstance(e.get("ts"), int) or isinstance(e.get("ts"), bool) for e in events)
    rows = []
    for index, e in enumerate(events):
        ts, dur, cat = e.get("ts"), e.get("dur"), e.get("cat")
        if ts_float and ts is not None:
            end = float(ts) + float(dur) if dur is not None else None
            ts = math.ceil(float(ts))
            if end is not None:
                dur = math.floor(end) - ts
        if dur is None or cat is None or cat == "Trace":
            continue
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        rows.append({
            "index": index, "ts": ts, "dur": dur, "cat": cat, "name": e.get("name", ""),
            "stream": args.get("stream", -1), "correlation": args.get("correlation", -1),
        })
    return rows


def link(rows):
    by_index = {r["index"]: r for r in rows}
    for r in rows:
        r["index_correlation"] = min(r["correlation"], 0)
    cpu = {}
    for r in rows:
        if r["correlation"] != -1 and r["stream"] == -1:
            cpu.setdefault(r["correlation"], []).append(r["index"])
    for r in rows:
        if r["correlation"] != -1 and r["stream"] > 0 and r["correlation"] in cpu:
            partners = cpu[r["correlation"]]
            r["index_correlation"] = partners[-1]  # the merge lists CPU rows in order; the last write wins
            for i in partners:
                by_index[i]["index_correlation"] = r["index"]
    return rows


def step_filter(rows, n_step_names):
    if n_step_names < 2:
        return rows
    cpu = [r for r in rows if r["stream"] == -1]
    gpu = [r for r in rows if r["stream"] > 0]
    if not cpu:
        return rows
    steps = [r for r in cpu if r["name"].startswith("ProfilerStep")]
    last_start = max(r["ts"] for r in steps) if steps else min(r["ts"] for r in cpu)
    cpu = [r for r in cpu if r["ts"] < last_start]
    count = {}
    for r in cpu:
        count[r["correlation"]] = count.get(r["correlation"], 0) + 1
    out = []
    for r in gpu:
        out.extend([r] * count.get(r["correlation"], 0))
    return out + cpu


def idle_breakdown(rows):
    ts_of = {}
    for r in rows:
        ts_of.setdefault(r["index"], r["ts"])
    streams = {}
    for r in rows:
        if r["stream"] != -1:
            streams.setdefault(r["stream"], []).append(r)
    result, ties = {}, []
    for stream, ops in streams.items():
        ops = sorted(ops, key=lambda r: r["ts"])
        for a, b in zip(ops, ops[1:]):
            if a["ts"] == b["ts"] and a["dur"] != b["dur"]:
                ties.append(stream)
        cats = {}
        prev_end = None
        for r in ops:
            runtime = ts_of.get(r["index_correlation"])
            if prev_end is None:
                cats.setdefault("other", 0)
            else:
                interval = r["ts"] - prev_end
                if runtime is not None and runtime > prev_end:
                    cat = "host_wait"
                elif interval < DELAY_US:
                    cat = "kernel_wait"
                else:
                    cat = "other"
                cats[cat] = cats.get(cat, 0) + interval
            prev_end = r["ts"] + r["dur"]
        result[str(stream)] = cats
    return result, sorted(set(ties))


def merged_time(ops):
    ops = sorted(ops, key=lambda r: r["ts"])
    busy, first, last = 0, None, None
    cur_s = cur_e = None
    for r in ops:
        s, e = r["ts"], r["ts"] + r["dur"]
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
        first = s if first is None else first
    if cur_e is not None:
        busy += cur_e - cur_s
        last = cur_e
    return busy, first, last


def temporal(rows):
    gpu = [r for r in rows if r["stream"] != -1]
    if not gpu:
        return None
    busy, first, last = merged_time(gpu)
    kernel_time = last - first
    idle = kernel_time - busy
    compute, _, _ = merged_time([r for r in gpu if kernel_type(r["name"]) == "COMPUTATION"])
    return {"idle_time": idle, "compute_time": compute, "non_compute_time": kernel_time - compute - idle,
            "kernel_time": kernel_time}


def main(paths):
    traces = [load(p) for p in paths]
    all_rows = [rows_of(t) for t in traces]
    step_names = set()
    for rows in all_rows:
        step_names.update(r["name"] for r in rows if r["name"].startswith("ProfilerStep"))
    out = []
    for path, trace, rows in zip(paths, traces, all_rows):
        rows = step_filter(link(rows), len(step_names))
        idle, ties = idle_breakdown(rows)
        info = trace.get("distributedInfo") or {}
        out.append({"file": path, "rank": info.get("rank", 0), "idle": idle, "ties": ties,
                    "temporal": temporal(rows), "filtered": len(step_names) >= 2})
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main(sys.argv[1:])
