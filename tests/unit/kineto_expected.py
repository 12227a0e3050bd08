#!/usr/bin/env python3
"""Expected figures for tests/unit/test_kineto.c, derived from the Kineto traces with the standard
library alone (json + gzip, numbers read as Decimal so timestamps are exact), independently of the
C importer.

    python3 tests/unit/kineto_expected.py [DIR]        # human-readable figures
    python3 tests/unit/kineto_expected.py --c [DIR]    # the C tables pasted into tests/unit/test_kineto.c
    python3 tests/unit/kineto_expected.py --shapes [DIR]  # the kernels' launch shapes, for the same
    python3 tests/unit/kineto_expected.py --sites [DIR] # the call-site table pasted there too
    python3 tests/unit/kineto_expected.py --idle TRACE  # the GPU idle each blocking API's calls cost
    python3 tests/unit/kineto_expected.py --check-ranks REPORT.json TRACE...  # a report --ranks: each
                                                       # collective's straggler's host share and range
    python3 tests/unit/kineto_expected.py --check-devices REPORT.json TRACE...  # a report of several
                                                       # traces: each GPU's busy and idle over its own
                                                       # trace's span
    python3 tests/unit/kineto_expected.py --check-idle TRACE REPORT.json  # the same against a report's
                                                       # sites (synctop report --format json): exit 1
                                                       # when they differ

DIR defaults to ../shared/traces/kineto beside the checkout. The rules are the importer's
(ingest/kineto.h): GPU rows are kernel/gpu_memcpy/gpu_memset/cuda_sync with ph "X", on (args.device or
pid, args.stream or tid), a sync on stream -1 or 4294967295 being device-wide; host calls are
cuda_runtime/cuda_driver/Runtime rows; a call blocks the host when it is an explicit synchronize, a
freeing call, a non-Async memcpy that is not device-to-device, an Async memcpy whose copy touches
pageable memory, or a non-Async memset not shown to target device memory.

Call sites: the cpu_op and python_function rows of the same pid and tid that start at or before a
blocking call and end at or after its end hold it; innermost first (the later start, then the earlier
end, an operator inside a Python frame of the same span, then the later row in the file), at most 48.
A Python frame "path/file.py(123): func" is written "path/file.py:123 func", any other row by its name.
An operator with args."Call stack" (legacy traces: "file.py(611): f;file.py(54): <module>",
innermost first) ends the frames: after it come the operators around it with no Call stack or the
same one (a row with another, or a Python frame, ends them), then that stack's frames.
Calls with the same API and frames make one site: its count and summed duration.

GPU idle a wait cost (--idle; analysis/analysis.c's stall_share): the device's bubbles are the gaps
of 20 us or more in the union of its kernels, copies and memsets (of some length). A bubble belongs to the waits of its
process that end within it, at or before the submission (the launch row of the same correlation) of
the work that ended it, the last of them taking it: their share is the time of the bubble they
cover (each instant once), plus, of the host's time between them and then of the bubble after the
last one's end, up to the time from the first one's start (or the previous bubble's end, if later)
to the bubble's start; it ends where the last one ended, or past it by what that time leaves. A
bubble with no such wait whose work was submitted by a launch row that itself blocks (a pageable
copy) and still held the host when the bubble began is that row's from its start (or the bubble's,
if later) to its end (or the bubble's, if sooner). The rest of
such bubbles before the submission, and the whole of one with no wait whose work was submitted
after it began, is the host's: by the innermost user_annotation of the submitting thread (the launch
row's pid and tid; "" for none; a legacy ProfilerStep#N Operator row is one), names ending in
"#<digits>" counted as one ("ProfilerStep#N", when there are two or more); per step (a report's steps), the host's share in it
and the range most of it went to; per range, the time of it the submitting thread spent in its
host calls that do not block (each instant once) and the longest of them there.

Legacy traces: a host pid or tid written as a string of digits is that number; an Operator row
named ProfilerStep#N is a step annotation (as user_annotation), not an operator. ROCm traces: HIP
runtime names are their CUDA twins (hipMemcpyAsync as cudaMemcpyAsync, hipHostFree as a free), and
hipMemcpyWithStream, a copy followed by a wait for its stream, always blocks.
"""
import decimal
import gzip
import json
import os
import re
import sys
from collections import Counter, defaultdict

SITE_TRACES = [
    "alexnet_a100_sync_heavy.json.gz",
    "event_sync_single_stream.json.gz",
    "qwen_h100_with_stack.json.gz",
    "resnet_2080ti_two_threads.json.gz",
    "sampled_rank-0.json.gz",
    "sampled_rank-1.json.gz",
    "resnet50_v100_legacy_2021.json.gz",
    "qwen_mi300_rocm_with_stack.json.gz",
]
SITE_FRAMES = 48

TRACES = [
    "alexnet_a100_sync_heavy.json.gz",
    "event_sync_multi_stream.json.gz",
    "event_sync_single_stream.json.gz",
    "sampled_rank-0.json.gz",
    "sampled_rank-1.json.gz",
    "resnet50_v100_legacy_2021.json.gz",
    "qwen_mi300_rocm_with_stack.json.gz",
]

GPU = {"kernel": "TP_K_KERNEL", "gpu_memcpy": "TP_K_MEMCPY", "memcpy": "TP_K_MEMCPY",
       "gpu_memset": "TP_K_MEMSET", "memset": "TP_K_MEMSET", "cuda_sync": "TP_K_SYNC"}
HOST = {"cuda_runtime", "cuda_driver", "runtime", "driver"}
SYNCS = {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
         "cudaThreadSynchronize", "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize"}
FREES = {"cudaFree", "cudaFreeHost", "cudaFreeArray", "cudaFreeMipmappedArray", "cuMemFree",
         "cuMemFreeHost", "cuArrayDestroy", "cuMipmappedArrayDestroy", "cudaHostFree"}
NO_STREAM = 0xFFFFFFFF


def ns(v):
    return int((decimal.Decimal(v) * 1000).to_integral_value(rounding=decimal.ROUND_HALF_UP))


def base_name(name):
    m = re.search(r"_(v[0-9]|pt)", name[1:])
    return name[: m.start() + 1] if m else name


def is_step(e):
    """A legacy Operator row that marks a step."""
    return str(e.get("cat", "")).lower() == "operator" and str(e.get("name", "")).startswith("ProfilerStep#") \
        and len(e["name"]) > len("ProfilerStep#")


def note_op(ops, cat, e):
    """The GPU operation a call's correlation names: a copy or memset wins over a kernel."""
    corr = e.get("args", {}).get("correlation")
    if not corr:
        return
    moves = ("gpu_memcpy", "memcpy", "gpu_memset", "memset")
    prev = ops.get(corr)
    if prev is None or (cat in moves and prev["cat"].lower() not in moves):
        ops[corr] = e


def blocks(name, op):
    b = base_name(name)
    if re.match(r"hip[A-Z]", b):
        b = "cuda" + b[3:]
    if b == "cudaMemcpyWithStream":
        return True
    kind = op["cat"].lower() if op else None
    copy = kind in ("gpu_memcpy", "memcpy")
    if b in SYNCS or b in FREES:
        return True
    if b.startswith("cudaMemcpy") or b.startswith("cuMemcpy"):
        if b.endswith("Async"):
            return copy and "Pageable" in op["name"]
        return not (copy and op["name"].startswith("Memcpy DtoD"))
    if b.startswith("cudaMemset") or b.startswith("cuMemset"):
        if b.endswith("Async"):
            return False
        return not (kind in ("gpu_memset", "memset") and op["name"].endswith("(Device)"))
    return False


def figures(path):
    with gzip.open(path, "rt") as f:
        doc = json.load(f, parse_float=decimal.Decimal)
    base = int(doc.get("baseTimeNanoseconds", 0))
    dist = doc.get("distributedInfo", {})
    lanes = Counter()
    apis = Counter()
    blocked = defaultdict(int)
    n_blocking = Counter()
    threads, streams, devices, wide = set(), set(), set(), set()
    nvtx = 0
    t_min = t_max = None
    ops = {}
    host = []
    copies = Counter()
    for e in doc["traceEvents"]:
        cat = str(e.get("cat", "")).lower()
        if e.get("ph") != "X":
            continue
        if cat in GPU or cat in HOST or cat in ("user_annotation", "gpu_user_annotation") or is_step(e):
            t0 = base + ns(e["ts"])
            t1 = t0 + ns(e.get("dur", 0))
            t_min = t0 if t_min is None else min(t_min, t0)
            t_max = t1 if t_max is None else max(t_max, t1)
        args = e.get("args", {})
        if cat in GPU:
            dev = int(args.get("device", e["pid"]))
            stream = int(args.get("stream", e["tid"]))
            if stream in (-1, NO_STREAM):
                stream = NO_STREAM
                wide.add(dev)  # the pseudo-stream record that says how the trace spelled it
            else:
                streams.add((dev, stream))
            devices.add(dev)
            lanes[(GPU[cat], dev, stream)] += 1
            if cat in ("gpu_memcpy", "memcpy"):
                copies[e["name"]] += 1
            note_op(ops, cat, e)
        elif cat in HOST:
            host.append(e)
            threads.add((int(e["pid"]), int(e["tid"])))
        elif cat == "user_annotation" or is_step(e):
            nvtx += 1
            threads.add((int(e["pid"]), int(e["tid"])))
        elif cat == "gpu_user_annotation":
            nvtx += 1
    for e in host:
        name = e["name"]
        apis[name] += 1
        op = ops.get(e.get("args", {}).get("correlation"))
        if blocks(name, op):
            n_blocking[name] += 1
            blocked[name] += ns(e["dur"])
    return {
        "rank": int(dist.get("rank", -1)), "world": int(dist.get("world_size", -1)),
        "t_min": t_min, "t_max": t_max, "lanes": lanes, "apis": apis, "blocked": blocked,
        "n_blocking": n_blocking, "nvtx": nvtx, "threads": len(threads), "streams": len(streams) + len(wide),
        "devices": len(devices), "copies": copies,
    }


def frame_text(name, py):
    """A python_function row's name as the tracer writes the frame: "file.py(123): f" -> "file.py:123 f"."""
    close = name.find("): ") if py else -1
    if close < 0:
        return name
    open_ = name.rfind("(", 0, close)
    digits = name[open_ + 1:close] if open_ > 0 else ""
    if not digits or not digits.isdigit() or not digits.isascii() or int(digits) > 1000000000:
        return name
    return f"{name[:open_]}:{int(digits)} {name[close + 3:]}"


def sites(path):
    """(api, frames innermost first joined by " < ") -> [count, summed ns], each blocking call by a
    plain search over every context row of its thread."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f, parse_float=decimal.Decimal)
    ops, host, ctx = {}, [], defaultdict(list)
    for seq, e in enumerate(doc["traceEvents"]):
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat = str(e.get("cat", "")).lower()
        args = e.get("args", {})
        if cat in GPU:
            note_op(ops, cat, e)
        elif cat in HOST:
            host.append(e)
        elif cat in ("cpu_op", "operator", "python_function") and not is_step(e):
            t0 = ns(e["ts"])
            py = cat == "python_function"
            stack = e.get("args", {}).get("Call stack") if not py else None
            ctx[(str(e["pid"]), str(e["tid"]))].append((t0, t0 + ns(e.get("dur", 0)), py, seq, frame_text(e["name"], py),
                                                        stack or None))
    out = defaultdict(lambda: [0, 0])
    for e in host:
        if not blocks(e["name"], ops.get(e.get("args", {}).get("correlation"))):
            continue
        t0 = ns(e["ts"])
        t1 = t0 + ns(e["dur"])
        around = [c for c in ctx[(str(e["pid"]), str(e["tid"]))] if c[0] <= t0 and c[1] >= t1]
        if not around:
            continue
        around.sort(key=lambda c: (-c[0], c[1], c[2], -c[3]))  # innermost first
        frames, pystack = [], None
        for c in around:
            if pystack is not None and (c[2] or (c[5] is not None and c[5] != pystack)):
                break
            frames.append(c[4])
            if pystack is None:
                pystack = c[5]
        if pystack is not None:
            frames += [frame_text(p, True) for p in pystack.split(";") if p]
        key = (e["name"], " < ".join(frames[:SITE_FRAMES]))
        out[key][0] += 1
        out[key][1] += t1 - t0
    return out


def bubble_costs(path, gap=20000):
    """(api -> GPU idle ns its blocking calls cost (the last wait of each bubble's chain),
        range -> GPU idle ns the host spent in it, innermost user_annotation of the submitting thread,
                 "" for none, names ending in #<digits> taken as one with "#N",
        the pieces of that: (start, end, the range's own name),
        range -> [ns of it the submitting thread spent in its calls that did not wait (each instant
                  once), the longest such call's ns in it, the names of the calls that long])."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f, parse_float=decimal.Decimal)
    ops, host, work, annots = {}, [], defaultdict(list), defaultdict(list)
    for e in doc["traceEvents"]:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat = str(e.get("cat", "")).lower()
        if cat in GPU:
            note_op(ops, cat, e)
            if cat != "cuda_sync" and ns(e.get("dur", 0)) > 0:  # work of no length is no work
                dev = e.get("args", {}).get("device", e.get("pid"))
                t0 = ns(e["ts"])
                work[str(dev)].append((t0, t0 + ns(e.get("dur", 0)), e.get("args", {}).get("correlation")))
        elif cat in HOST:
            host.append(e)
        elif (cat == "user_annotation" or is_step(e)) and ns(e.get("dur", 0)) > 0:
            t0 = ns(e["ts"])
            annots[(str(e["pid"]), int(e["tid"]) & 0xFFFFFFFF)].append((t0, t0 + ns(e["dur"]), e["name"]))
    launch, submitter = {}, {}
    for e in host:
        corr = e.get("args", {}).get("correlation")
        if corr and corr not in launch:
            launch[corr] = (ns(e["ts"]), (str(e["pid"]), int(e["tid"]) & 0xFFFFFFFF))
            if blocks(e["name"], ops.get(corr)):
                submitter[corr] = (e["name"], ns(e["ts"]) + ns(e.get("dur", 0)))
    waits, calls = [], defaultdict(list)
    for e in host:
        t0 = ns(e["ts"])
        if blocks(e["name"], ops.get(e.get("args", {}).get("correlation"))):
            waits.append((t0, t0 + ns(e["dur"]), e["name"]))
        else:
            calls[(str(e["pid"]), int(e["tid"]) & 0xFFFFFFFF)].append((t0, t0 + ns(e.get("dur", 0)), e["name"]))
    by_api, by_range, pieces = Counter(), Counter(), []
    numbered = defaultdict(set)  # "ProfilerStep#N" -> the names it stands for
    api = defaultdict(lambda: [0, 0, set()])  # range -> [ns in calls that did not wait, longest, its names]

    def credit(thread, key, lo, hi):
        by_range[key] += hi - lo
        if thread is None:
            return
        spans = sorted((max(x, lo), min(y, hi), n) for x, y, n in calls.get(thread, []) if x < hi and y > lo)
        reach = lo
        for x, y, n in spans:  # each instant once
            if y > reach:
                api[key][0] += y - max(x, reach)
                reach = y
            if y - x > api[key][1]:
                api[key][1], api[key][2] = y - x, {n}
            elif y - x == api[key][1] and y > x:
                api[key][2].add(n)

    def in_ranges(thread, a, b):
        rows = [r for r in annots.get(thread, []) if r[0] < b and r[1] > a]
        cuts = sorted({a, b} | {x for r in rows for x in r[:2] if a < x < b})
        for lo, hi in zip(cuts, cuts[1:]):
            inner = [r for r in rows if r[0] <= lo and r[1] >= hi]
            name = max(inner, key=lambda r: r[0])[2] if inner else ""
            pieces.append((lo, hi, name))
            m = re.match(r"^(.*#)[0-9]+$", name)
            key = m.group(1) + "N" if m and m.group(1) != "#" else name
            numbered[key].add(name)
            credit(thread, key, lo, hi)

    for dev, rows in work.items():
        rows.sort(key=lambda r: (r[0], r[1]))
        end, prev_end = None, 0
        for a, b, corr in rows:
            if end is not None and a > end and a - end >= gap:
                s, t = end, a
                L, thread = launch.get(corr, (None, None))
                chain = [w for w in waits if w[1] >= s and w[1] <= (L if L is not None else t) and w[0] < t]
                if chain:
                    first = min(w[0] for w in chain)
                    last = max(chain, key=lambda w: w[1])
                    lo, hi = max(first, s), max(min(last[1], t), max(first, s))
                    spans = sorted((max(w[0], lo), min(w[1], hi)) for w in chain)
                    waited, reach = 0, lo
                    for x, y in spans:  # each instant once
                        if y > reach:
                            waited += y - max(x, reach)
                            reach = y
                    held = max(0, s - max(first, prev_end))
                    cover = min(held, hi - lo - waited)
                    to = hi + min(held - cover, t - hi)
                    frm = hi - waited - cover
                    by_api[last[2]] += to - frm
                    launch_from = L if L is not None and to < L < t else t
                    host_parts = [(s, frm), (to, launch_from)]
                elif L is not None and L < t and corr in submitter and submitter[corr][1] > s:
                    # submitted by a call that waits (a synchronous copy through pageable memory),
                    # still holding the host when the GPU ran dry: the idle in it before its work
                    # began is its own; after it returned, launch latency
                    by_api[submitter[corr][0]] += min(submitter[corr][1], t) - max(L, s)
                    host_parts = [(s, L)]
                elif L is not None and L > s:
                    host_parts = [(s, t)]
                else:
                    host_parts = []
                for x, y in host_parts:
                    if y > x:
                        if thread is None:
                            credit(None, "", x, y)
                            pieces.append((x, y, ""))
                        else:
                            in_ranges(thread, x, y)
                prev_end = t
            end = b if end is None or b > end else end
    for key, names in numbered.items():  # a numbered name alone keeps its own
        if len(names) == 1 and key not in names:
            (name,) = names
            by_range[name] += by_range.pop(key)
            api[name] = api.pop(key)
    return by_api, by_range, pieces, api


def device_busy(path):
    """(the trace's own span in ns, device -> ns its kernels, copies and memsets kept busy, each
    instant once)."""
    span = figures(path)
    with gzip.open(path, "rt") as f:
        doc = json.load(f, parse_float=decimal.Decimal)
    work = defaultdict(list)
    for e in doc["traceEvents"]:
        cat = str(e.get("cat", "")).lower()
        if isinstance(e, dict) and e.get("ph") == "X" and cat in GPU and cat != "cuda_sync":
            t0 = ns(e["ts"])
            work[int(e.get("args", {}).get("device", e.get("pid")))].append((t0, t0 + ns(e.get("dur", 0))))
    busy = {}
    for dev, spans in work.items():
        total, end = 0, None
        for a, b in sorted(spans):
            if end is None or a > end:
                total += b - a
                end = b
            elif b > end:
                total += b - end
                end = b
        busy[dev] = total
    return span["t_max"] - span["t_min"], busy


def step_host(pieces, start, end):
    """(the host's GPU idle in [start, end), the range most of it went to, its ns)."""
    per = Counter()
    for a, b, name in pieces:
        if a < end and b > start:
            per[name] += min(b, end) - max(a, start)
    if not per:
        return 0, "", 0
    name, ns_ = max(per.items(), key=lambda kv: kv[1])
    return sum(per.values()), name, ns_


def idle_by_api(path, gap=20000):
    """api -> summed GPU idle ns its blocking calls cost (the last wait of each bubble's chain)."""
    return bubble_costs(path, gap)[0]


def c_str(s):
    """A C string literal: printable ASCII as is, anything else as octal escapes of its UTF-8 bytes."""
    out = []
    for b in s.encode("utf-8"):
        c = chr(b)
        out.append("\\" + c if c in '"\\' else c if 32 <= b < 127 and c != "?" else f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def print_sites(d):
    print("/* Generated by tests/unit/kineto_expected.py --sites: do not edit by hand. */")
    for name in SITE_TRACES:
        ident = c_ident(name)
        print(f"static const exp_site sites_{ident}[] = {{")
        for (api, frames), (n, total) in sorted(sites(os.path.join(d, name)).items()):
            print(f"    {{{c_str(api)}, {c_str(frames)}, {n}, {total}ull}},")
        print("};")
    print("static const exp_sites expected_sites[] = {")
    for name in SITE_TRACES:
        ident = c_ident(name)
        print(f'    {{"{name}", sites_{ident}, sizeof sites_{ident} / sizeof sites_{ident}[0]}},')
    print("};")


def shapes(path):
    """The kernels' launch shapes: how many kernels, how many distinct (grid, block), and a sum that
    changes when any kernel's shape does: sum of (g0 + 3 g1 + 5 g2) * (b0 + 7 b1 + 11 b2) * (c % 13 + 1)
    over the kernel rows, c a row's correlation id (0 without one), modulo 2^64."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f, parse_float=decimal.Decimal)
    n, total, seen = 0, 0, set()
    for e in doc["traceEvents"]:
        if e.get("ph") != "X" or str(e.get("cat", "")).lower() != "kernel":
            continue
        args = e.get("args", {})
        g = ([int(v) for v in args.get("grid", [])] + [0, 0, 0])[:3]
        b = ([int(v) for v in args.get("block", [])] + [0, 0, 0])[:3]
        seen.add((tuple(g), tuple(b)))
        c = int(args.get("correlation", 0))
        total += (g[0] + 3 * g[1] + 5 * g[2]) * (b[0] + 7 * b[1] + 11 * b[2]) * (c % 13 + 1)
        n += 1
    return n, len(seen), total % (1 << 64)


def print_shapes(d):
    print("/* Generated by tests/unit/kineto_expected.py --shapes: do not edit by hand. */")
    print("static const exp_shapes expected_shapes[] = {")
    for name in sorted(set(TRACES) | set(SITE_TRACES)):
        n, distinct, total = shapes(os.path.join(d, name))
        print(f'    {{"{name}", {n}, {distinct}, {total}ull}},')
    print("};")


def c_ident(name):
    return re.sub(r"[^a-z0-9]+", "_", name.split(".")[0].lower()).strip("_")


def print_c(results):
    print("/* Generated by tests/unit/kineto_expected.py --c: do not edit by hand. */")
    for name, r in results:
        ident = c_ident(name)
        print(f"static const exp_lane lanes_{ident}[] = {{")
        for (kind, dev, stream), n in sorted(r["lanes"].items()):
            s = "TP_NO_ID" if stream == NO_STREAM else f"{stream}u"
            print(f"    {{{kind}, {dev}, {s}, {n}}},")
        print("};")
        print(f"static const exp_api apis_{ident}[] = {{")
        for api, n in sorted(r["apis"].items()):
            print(f'    {{"{api}", {n}, {r["n_blocking"][api]}, {r["blocked"][api]}ull}},')
        print("};")
    print("static const exp_trace expected[] = {")
    for name, r in results:
        ident = c_ident(name)
        print(f'    {{"{name}", {r["rank"]}, {r["world"]}, {r["t_min"]}ull, {r["t_max"]}ull, '
              f"{r['nvtx']}, {r['threads']}, {r['streams']}, {r['devices']},")
        print(f"     lanes_{ident}, sizeof lanes_{ident} / sizeof lanes_{ident}[0],")
        print(f"     apis_{ident}, sizeof apis_{ident} / sizeof apis_{ident}[0]}},")
    print("};")


def print_ranges(name, path):
    """The ranges the viewer shows under each host thread (operators and annotations, ph "X"): per
    tid how many, how many are called name, and the first of those (by start) with the rows that
    hold it (start at or before its start, end at or after its end), outermost first."""
    with (gzip.open(path) if path.endswith(".gz") else open(path, "rb")) as f:
        ev = json.load(f, parse_float=decimal.Decimal)["traceEvents"]
    rows = [e for e in ev if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")
            and isinstance(e.get("tid"), int) and "dur" in e]
    per = {}
    for e in rows:
        per[e["tid"]] = per.get(e["tid"], 0) + 1
    for tid, n in sorted(per.items()):
        # depths: how many rows of the thread hold a row, at most, + 1 (rows that start together
        # nest longest outside)
        mine = sorted(((e["ts"], -e["dur"]) for e in rows if e["tid"] == tid))
        ends, depths = [], 0
        for ts, mdur in mine:
            while ends and ends[-1] <= ts:
                ends.pop()
            ends.append(ts - mdur)
            depths = max(depths, len(ends))
        print(f"thread {tid} {n} depths {depths}")
    hits = sorted((e for e in rows if e["name"] == name), key=lambda e: e["ts"])
    print(f"matches {len(hits)}")
    if hits:
        h = hits[0]
        outer = [e for e in rows if e is not h and e["tid"] == h["tid"] and e["ts"] <= h["ts"]
                 and e["ts"] + e["dur"] >= h["ts"] + h["dur"]]
        outer.sort(key=lambda e: (e["ts"], -e["dur"]))
        print(f"depth {len(outer)} " + ">".join([e["name"] for e in outer] + [name]))
        # the runtime calls inside it: the innermost row that holds each, and that row's depth
        def holding(x):
            return [e for e in rows if e is not x and e["tid"] == x["tid"] and e["ts"] <= x["ts"]
                    and e["ts"] + e["dur"] >= x["ts"] + x["dur"]]
        for c in ev:
            if (c.get("ph") == "X" and c.get("cat") == "cuda_runtime" and c.get("tid") == h["tid"]
                    and h["ts"] <= c["ts"] and c["ts"] + c["dur"] <= h["ts"] + h["dur"]):
                inner = max(holding(c), key=lambda e: (e["ts"], -e["dur"]))
                print(f"call {c['name']} {inner['name']} {len(holding(inner))}")


def main():
    if "--check-ranks" in sys.argv:
        i = sys.argv.index("--check-ranks")
        with open(sys.argv[i + 1]) as f:
            colls = json.load(f)["ranks"]["collectives"]
        pieces = {}
        for path in sys.argv[i + 2:]:
            with gzip.open(path, "rt") as f:
                rank = int(json.load(f).get("distributedInfo", {}).get("rank", -1))
            pieces[rank] = bubble_costs(path)[2]
        for c in colls:
            want_c = step_host(pieces[c["straggler_rank"]], c["first"], c["last"])
            got_c = (c["straggler_host_idle_ns"], c["straggler_host_range"], c["straggler_host_range_ns"])
            if want_c != got_c:
                print(f"{c['kernel'][:40]}#{c['ordinal']}: expected {want_c}, the report says {got_c}")
                sys.exit(1)
        print(f"{len(colls)} collectives, each straggler's host share as expected")
        return
    if "--check-devices" in sys.argv:
        i = sys.argv.index("--check-devices")
        with open(sys.argv[i + 1]) as f:
            devices = json.load(f)["devices"]
        n = 0
        for path in sys.argv[i + 2:]:
            with gzip.open(path, "rt") as f:
                rank = int(json.load(f).get("distributedInfo", {}).get("rank", -1))
            span, busy = device_busy(path)
            for dev, b in sorted(busy.items()):
                got = [(d["span_ns"], d["busy_ns"], d["idle_ns"]) for d in devices
                       if d["rank"] == rank and d["device"] == dev]
                if got != [(span, b, span - b)]:
                    print(f"rank {rank} GPU {dev}: expected span {span}, busy {b}, idle {span - b} ns; "
                          f"the report says {got}")
                    sys.exit(1)
                n += 1
        if n != len(devices):
            print(f"{n} GPUs in the traces, {len(devices)} in the report")
            sys.exit(1)
        print(f"{n} GPUs, each over its own trace's span, as expected")
        return
    if "--check-idle" in sys.argv:
        i = sys.argv.index("--check-idle")
        want = idle_by_api(sys.argv[i + 1])
        with open(sys.argv[i + 2]) as f:
            got = Counter()
            for site in json.load(f)["sites"]:
                got[site["api"]] += site["gpu_idle_ns"]
        got = Counter({k: v for k, v in got.items() if v})
        with open(sys.argv[i + 2]) as f:
            report = json.load(f)
        rows = report.get("host_ranges", [])
        got_ranges = Counter({h["range"]: h["idle_ns"] for h in rows})
        _, by_range, pieces, api = bubble_costs(sys.argv[i + 1])
        want_ranges = Counter({k: v for k, v in by_range.items() if v})
        for h in rows:  # the time in CUDA calls that did not wait, and the longest of them
            w = api[h["range"]]
            if (h["cuda_calls_ns"], h["longest_call_ns"]) != (w[0], w[1]) or (w[1] and h["longest_call"] not in w[2]):
                print(f"host range {h['range']!r}: expected {w[0]} ns in CUDA calls that did not wait, the longest "
                      f"{w[1]} ns ({sorted(w[2])}); the report says {h['cuda_calls_ns']}, {h['longest_call_ns']} "
                      f"({h['longest_call']!r})")
                sys.exit(1)
        for st in (report.get("steps") or {}).get("steps", []):
            want_step = step_host(pieces, st["start"], st["end"])
            got_step = (st["host_idle_ns"], st["host_range"], st["host_range_ns"])
            if want_step != got_step:
                print(f"step {st['number']}: expected host {want_step}, the report says {got_step}")
                sys.exit(1)
        if got != want or got_ranges != want_ranges:
            print(f"expected {dict(sorted(want.items()))}, the report says {dict(sorted(got.items()))}; "
                  f"host ranges expected {dict(sorted(want_ranges.items()))}, "
                  f"the report says {dict(sorted(got_ranges.items()))}")
            sys.exit(1)
        print(f"{len(want)} APIs, {sum(want.values())} ns in all; {len(want_ranges)} host ranges, "
              f"{sum(want_ranges.values())} ns in all, as expected")
        return
    if "--ranges" in sys.argv:
        i = sys.argv.index("--ranges")
        print_ranges(sys.argv[i + 1], sys.argv[i + 2])
        return
    if "--idle" in sys.argv:
        for api, v in sorted(idle_by_api(sys.argv[sys.argv.index("--idle") + 1]).items()):
            print(f"{api}: {v} ns")
        return
    args = [a for a in sys.argv[1:] if a not in ("--c", "--sites", "--shapes")]
    d = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                          "..", "..", "samples", "traces", "kineto")
    if "--sites" in sys.argv:
        print_sites(d)
        return
    if "--shapes" in sys.argv:
        print_shapes(d)
        return
    results = [(name, figures(os.path.join(d, name))) for name in TRACES]
    if "--c" in sys.argv:
        print_c(results)
        return
    for name, r in results:
        print(f"== {name}: rank {r['rank']} world {r['world']} span [{r['t_min']}, {r['t_max']}] "
              f"nvtx {r['nvtx']} threads {r['threads']} streams {r['streams']} devices {r['devices']}")
        for k, n in sorted(r["lanes"].items()):
            print("  lane", k, n)
        for api, n in sorted(r["apis"].items()):
            print(f"  api {api}: {n} calls, {r['n_blocking'][api]} blocking, {r['blocked'][api]} ns")
        for c, n in sorted(r["copies"].items()):
            print(f"  copy {c}: {n}")


if __name__ == "__main__":
    main()
