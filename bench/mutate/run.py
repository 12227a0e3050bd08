#!/usr/bin/env python3
"""Mutation testing of synctop's rules, with the unit suite as the judge.

It plants one small bug at a time (a mutant) in a copy of the tree, builds it, runs the test cases that
execute the mutated line, and counts the mutant killed when one of them fails or runs past its timeout.
The share of mutants killed, per file, says how much of the code's behaviour the suite pins down; each
survivor is a change no test notices (a missing test, or a change no input can tell apart).

The files: analysis/ whole, store/api.c (which calls block), ingest/emit.c's resolution of blocking calls,
and the functions of the importers that choose a call site or say what blocks (RULE_FUNCS below).

The operators, one per mutant, on one line: a relational operator moved across its boundary or negated
(< <=, > >=, == !=), && and || swapped, binary + and - swapped (also += -=, ++ --), an integer or
floating constant made c+1, c-1 or 0 (0 made 1), a statement deleted (break and continue included), an
if or while condition negated, and a function that returns at its first statement.

How it runs (the tree is copied, the worktree is never touched):
  1. WORK/src: the tracked and untracked-unignored files of the checkout.
  2. WORK/cov: a -O0 --coverage build; each test case of the judging binaries runs once there and gcov
     says which lines of the mutated files it executed.
  3. WORK/build: a -O1 build (warnings not errors, so a mutant is rejected only when it does not compile).
     Each case runs once clean: a case that fails or skips clean is no judge; its time sets its timeout
     (3x, at least 10 s).
  4. Each mutant: the file is rewritten, make rebuilds the object and relinks the binaries its judges
     need, and the cases that executed the line run, those that killed most so far first, until one
     fails. A line gcov gives no count (a declaration, a table) is judged by every case of the binaries.
     A mutant on a line no case executed survives without running (it is still compiled).
Results go to WORK/results.jsonl as they come (a rerun resumes), and the summary to standard output,
or as Markdown with --markdown.

Usage (from the checkout's root; the figures in RESULTS.md came from exactly this):
  A="--frac 0.06 --frac-rules 0.03 --frac-for analysis/busy.c=0.01 analysis/compare.c=0.01 \
     analysis/hta.c=0.01 analysis/ranks.c=0.01 analysis/stalls.c=0.01 analysis/steps.c=0.01 \
     --uniform-for analysis/busy.c=6 analysis/compare.c=4 analysis/hta.c=10 analysis/ranks.c=6 \
     analysis/stalls.c=6 analysis/steps.c=8"
  nice -n 19 bench/mutate/run.py $A                       # judge the drawn mutants (resumes)
  nice -n 19 bench/mutate/run.py $A --recheck --markdown bench/mutate/RESULTS.md
                                                          # after new tests: the survivors again
--frac draws that share of each function's mutants (at least one of each function), --frac-rules the
same for the importers' rules and store/api.c (so every rule function is drawn from), --uniform-for a
uniform sample of COUNT mutants of a file instead; the seed is fixed, so a rerun draws the same
mutants. --list prints the draw; --frac 1 --frac-rules 1 draws them all (about 5,900).
Cost, on two cores shared with four other jobs (load 5 to 9): both builds about 2 minutes, the
coverage pass about 4, then 2 to 15 s a mutant the suite kills and 5 to 70 s one it does not (the
222 drawn: about 50 minutes). Too slow for CI; not part of the suite.
"""
import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The test binaries that judge, and the files each one links (all link analysis through synctop's
# runs too: test_report and test_view start the binary).
JUDGES = ["test_analysis", "test_hta", "test_view", "test_store", "test_kineto", "test_nsys", "test_hash",
          "test_symbols", "test_report"]
ANALYSIS_LINKERS = {"test_analysis", "test_hta", "test_view", "test_report", "test_hash"}
INGEST_LINKERS = set(JUDGES)

FILES_WHOLE = ["analysis/advice.c", "analysis/analysis.c", "analysis/busy.c", "analysis/compare.c",
               "analysis/hta.c", "analysis/ranks.c", "analysis/stalls.c", "analysis/steps.c", "store/api.c"]
# The importers' rules: which calls block (the resolution by correlation, the class of a name) and which
# call site a call is charged to (the Call-stack / Python-frame choice, the callchain walk).
RULE_FUNCS = {
    "ingest/emit.c": ["corr_key", "em_resolve"],
    "ingest/kineto_event.c": ["api_class", "kt_sync_type_of", "py_frame_parse", "call_stack", "event_ctx",
                              "event_host"],
    "ingest/kineto_emit.c": ["api_class_kept", "resolve_apis", "ctx_order", "kineto_callsites"],
    "ingest/nsys.c": ["api_class_of", "tracer_module", "chain_span", "chain_named", "chains_resolve",
                      "sync_devices", "resolve", "site_frames", "emit_sites"],
}
LIB_OF = {"analysis": "synctop_analysis", "store": "synctop_store", "ingest": "synctop_ingest"}

TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<str>"(?:\\.|[^"\\])*")
  | (?P<chr>'(?:\\.|[^'\\])*')
  | (?P<num>(?:0[xX][0-9a-fA-F]+|\d+\.\d*(?:[eE][+-]?\d+)?|\d*\.\d+(?:[eE][+-]?\d+)?|\d+(?:[eE][+-]?\d+)?)[uUlLfF]*)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<op>->|\+\+|--|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||\+=|-=|\*=|/=|%=|&=|\|=|\^=|[-+*/%<>=!&|^~?:;,.(){}\[\]\#])
  | (?P<other>.)
""", re.X)

REL = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
SWAP = {"&&": "||", "||": "&&", "+": "-", "-": "+", "+=": "-=", "-=": "+=", "++": "--", "--": "++"}
UNARY_BEFORE = {"(", "[", ",", "=", "return", "?", ":", "{", ";", "&&", "||", "!", "<", ">", "<=", ">=",
                "==", "!=", "+", "-", "*", "/", "%", "+=", "-=", "*=", "/=", "&", "|", "^", "~", "<<", ">>",
                "case", "sizeof"}


def strip_comments(lines):
    """The lines with comments blanked (same columns), and which lines sit in a macro definition."""
    out, in_macro, in_block = [], [], False
    macro = False
    for line in lines:
        s, i, res = line, 0, []
        while i < len(s):
            if in_block:
                j = s.find("*/", i)
                if j < 0:
                    res.append(" " * (len(s) - i))
                    i = len(s)
                else:
                    res.append(" " * (j + 2 - i))
                    i = j + 2
                    in_block = False
                continue
            m = TOKEN.match(s, i)
            if s.startswith("/*", i):
                in_block = True
                continue
            if s.startswith("//", i):
                res.append(" " * (len(s) - i))
                break
            res.append(m.group(0))
            i = m.end()
        text = "".join(res)
        starts_macro = text.lstrip().startswith("#")
        in_macro.append(macro or starts_macro)
        macro = (macro or starts_macro) and text.rstrip().endswith("\\")
        out.append(text)
    return out, in_macro


def tokens(text):
    toks, i = [], 0
    while i < len(text):
        m = TOKEN.match(text, i)
        kind = m.lastgroup
        if kind != "ws":
            toks.append((kind, m.group(0), m.start(), m.end()))
        i = m.end()
    return toks


# A declaration's array size (a buffer's length) is left alone: changing it changes no rule.
DECL = re.compile(r"^\s*(?:static\s+)?(?:const\s+)?(?:unsigned\s+|signed\s+)?(?:char|int|long|double|float|size_t|"
                  r"u?int\d+_t|struct\s+\w+|\w+_t|[a-z_]+)\s+\**\w+\s*\[")
# A declaration is not deleted (what follows would not compile).
VARDECL = re.compile(r"^(?:const\s+|static\s+|struct\s+|unsigned\s+)*[A-Za-z_]\w*(?:\s+\**|\s*\*+\s*)(?:const\s+)?"
                     r"[A-Za-z_]\w*\s*(?:=|;|\[|,)")
# Nor a call that frees: a leak is the sanitizer build's to catch, not a rule's.
FREE = re.compile(r"^(?:free|\w+_free|\w+_destroy)\s*\(")
FUNC_START = re.compile(r"^(?:static\s+)?(?:inline\s+)?(?:const\s+)?([A-Za-z_][\w\s\*]*?)\b([a-z_]\w*)\s*\(")


def functions(clean):
    """(name, return type, first line, last line) of each function defined at the top level."""
    funcs, depth, pending = [], 0, None
    for n, text in enumerate(clean):
        if depth == 0 and pending is None:
            m = FUNC_START.match(text)
            if m and not text.rstrip().endswith(";") and m.group(1).strip() not in ("typedef", "return"):
                pending = (m.group(2), m.group(1).strip(), n)
        for kind, tok, _, _ in tokens(text):
            if tok == "{":
                depth += 1
                if depth == 1 and pending is not None:
                    body = n
            elif tok == "}":
                depth -= 1
                if depth == 0 and pending is not None:
                    funcs.append((pending[0], pending[1], body, n))
                    pending = None
            elif tok == ";" and depth == 0:
                pending = None
    return funcs


def number_variants(tok):
    m = re.match(r"^(0[xX][0-9a-fA-F]+|[\d.]+(?:[eE][+-]?\d+)?)([uUlLfF]*)$", tok)
    if not m:
        return []
    body, suf = m.groups()
    if body.lower().startswith("0x"):
        v, fmt = int(body, 16), lambda x: hex(x)
    elif re.match(r"^\d+$", body):
        v, fmt = int(body), str
    else:
        v, fmt = float(body), repr
        if "f" in suf.lower():
            suf = suf
    outs = []
    for w in ([v + 1, v - 1, 0] if v != 0 else [1]):
        if isinstance(v, int) and w < 0:
            continue
        if w == v:
            continue
        s = fmt(w)
        if isinstance(v, float) and "." not in s and "e" not in s:
            s += ".0"
        outs.append(s + suf)
    return list(dict.fromkeys(outs))


def mutants_of(path, lines, only_funcs):
    clean, in_macro = strip_comments(lines)
    funcs = functions(clean)
    muts = []
    for name, rtype, body, last in funcs:
        if only_funcs is not None and name not in only_funcs:
            continue
        first_stmt = None
        for n in range(body, last + 1):
            text = clean[n]
            if in_macro[n] or not text.strip():
                continue
            toks = tokens(text)
            if n == body:
                # the tokens after the body's opening brace only
                k = max(i for i, t in enumerate(toks) if t[1] == "{")
                toks = toks[k + 1:]
            if n == last and toks and toks[-1][1] == "}":
                toks = toks[:-1]
            if not toks:
                continue
            if first_stmt is None and n > body:
                first_stmt = n
            prev = None
            for i, (kind, tok, a, b) in enumerate(toks):
                unary = prev is None or prev in UNARY_BEFORE
                if kind == "op" and tok in REL and not (tok in "<>" and prev == "#"):
                    muts.append((n, a, b, tok, REL[tok], "rel"))
                elif kind == "op" and tok in ("&&", "||"):
                    muts.append((n, a, b, tok, SWAP[tok], "logic"))
                elif kind == "op" and tok in ("+", "-") and not unary:
                    muts.append((n, a, b, tok, SWAP[tok], "arith"))
                elif kind == "op" and tok in ("+=", "-=", "++", "--"):
                    muts.append((n, a, b, tok, SWAP[tok], "arith"))
                elif kind == "num" and not (prev == "[" and DECL.match(text)):
                    for w in number_variants(tok):
                        muts.append((n, a, b, tok, w, "const"))
                prev = tok if kind in ("op", "id") else kind
            stripped = text.strip()
            prev_line = ""
            for p in range(n - 1, body - 1, -1):
                if clean[p].strip():
                    prev_line = clean[p].strip()
                    break
            opens = prev_line.endswith((";", "{", "}")) or n == body + 1 or prev_line.startswith(("else", "if", "for", "while")) and prev_line.endswith(")")
            if (stripped.endswith(";") and opens and stripped.count("(") == stripped.count(")")
                    and "{" not in stripped and "}" not in stripped and not stripped.startswith("return")
                    and not stripped.startswith(("for", "if", "while", "else", "case", "default"))
                    and not (VARDECL.match(stripped) and not stripped.startswith("goto"))
                    and not FREE.match(stripped)):
                col = text.index(stripped)
                muts.append((n, col, col + len(stripped), stripped, ";", "delete"))
            m = re.match(r"^(\s*(?:\}\s*else\s+)?(?:if|while)\s*)\((.*)\)(\s*\{?\s*)$", text)
            if m and m.group(2).count("(") == m.group(2).count(")"):
                a = len(m.group(1))
                b = len(text) - len(m.group(3))
                muts.append((n, a, b, text[a:b], "(!(" + m.group(2) + "))", "negate"))
        if first_stmt is not None:
            r = rtype.replace("static", "").replace("inline", "").strip()
            ret = "return;" if r == "void" else ("return NULL;" if "*" in r else "return 0;")
            text = lines[first_stmt]
            col = len(text) - len(text.lstrip())
            muts.append((first_stmt, col, col, "", ret + " ", "return"))
    out = []
    for n, a, b, old, new, op in muts:
        fn = next((f[0] for f in funcs if f[2] <= n <= f[3]), "?")
        out.append({"file": path, "line": n + 1, "col": a, "end": b, "old": old, "new": new, "op": op, "func": fn,
                    "id": "%s:%d:%d:%s:%s" % (path, n + 1, a, op, new)})
    return out


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=isinstance(cmd, str), **kw)


def configure(src, build, flags, extra):
    if os.path.exists(os.path.join(build, "Makefile")):
        return
    os.makedirs(build, exist_ok=True)
    r = sh(["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=Mut", "-DCMAKE_C_FLAGS_MUT=" + flags,
            "-DCMAKE_CXX_FLAGS_MUT=" + flags, "-DSYNCTOP_WERROR=OFF", "-DCUDAToolkit_ROOT=/usr/local/cuda"] + extra,
           stdout=subprocess.DEVNULL)
    if r.returncode:
        sys.exit("cmake failed for " + build)


def make(build, targets, quiet=True):
    r = sh(["make", "-C", build, "-j1", "--no-print-directory"] + targets,
           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL if quiet else None)
    return r.returncode == 0


def list_cases(build):
    out = sh(["ctest", "--test-dir", build, "-N"], capture_output=True, text=True).stdout
    cases = []
    for line in out.splitlines():
        m = re.match(r"\s*Test\s+#\d+: (\w+)\.(\w+)$", line)
        if m and m.group(1) in JUDGES:
            cases.append((m.group(1), m.group(2)))
    return cases


def run_case(build, binary, case, timeout, extra_env=None):
    env = dict(os.environ, SYNCTOP_BIN=os.path.join(build, "synctop"), **(extra_env or {}))
    t0 = time.monotonic()
    try:
        r = subprocess.run([os.path.join(build, "tests", binary), case], cwd=os.path.join(build, "tests"), env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout,
                           start_new_session=True)
        rc = r.returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    return rc, time.monotonic() - t0


def obj_dir(build, path):
    top = path.split("/")[0]
    return os.path.join(build, top, "CMakeFiles", LIB_OF[top] + ".dir")


def coverage(args, cases, files):
    """{(binary, case): {file: set(lines executed)}} and {file: set(lines gcov counts)}."""
    cache = os.path.join(args.work, "coverage.json")
    hit, lines = {}, {}
    if os.path.exists(cache):
        data = json.load(open(cache))
        hit = {tuple(k.split(" ")): {f: set(v) for f, v in d.items()} for k, d in data["hit"].items()}
        lines = {f: set(v) for f, v in data["lines"].items()}
        if all(bc in hit for bc in cases):
            return hit, lines
    cov = os.path.join(args.work, "cov")
    gcdas = {f: os.path.join(obj_dir(cov, f), os.path.basename(f) + ".gcda") for f in files}
    for i, (b, c) in enumerate(cases):
        if (b, c) in hit:
            continue
        sh(["find", cov, "-name", "*.gcda", "-delete"])
        rc, dt = run_case(cov, b, c, 600, {"GCOV_ERROR_FILE": "/dev/null"})
        got = {}
        for f, g in gcdas.items():
            if not os.path.exists(g):
                continue
            r = sh(["gcov", "--json-format", "--stdout", "-o", os.path.dirname(g), g], capture_output=True,
                   text=True, cwd=args.work)
            for doc in r.stdout.splitlines():
                if not doc.startswith("{"):
                    continue
                for fj in json.loads(doc)["files"]:
                    if not fj["file"].endswith(f):
                        continue
                    for ln in fj["lines"]:
                        lines.setdefault(f, set()).add(ln["line_number"])
                        if ln["count"] > 0:
                            got.setdefault(f, set()).add(ln["line_number"])
        hit[(b, c)] = got
        print("coverage %d/%d %s.%s rc=%s %.1fs" % (i + 1, len(cases), b, c, rc, dt), file=sys.stderr)
    json.dump({"hit": {" ".join(k): {f: sorted(v) for f, v in d.items()} for k, d in hit.items()},
               "lines": {f: sorted(v) for f, v in lines.items()}}, open(cache, "w"))
    return hit, lines


def restore(src, rel):
    """The file as the checkout has it, with a new mtime (so that make rebuilds it: copy2's old
    mtime would leave the last mutant's object in place)."""
    shutil.copyfile(os.path.join(ROOT, rel), os.path.join(src, rel))
    os.utime(os.path.join(src, rel))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", default="/tmp/mut")
    ap.add_argument("--seed", type=int, default=33)
    ap.add_argument("--frac", type=float, default=0.06)
    ap.add_argument("--frac-rules", type=float, default=0.12, help="the same, for the importers' rules and store/api.c")
    ap.add_argument("--files", nargs="*")
    ap.add_argument("--frac-for", nargs="*", default=[], metavar="FILE=SHARE", help="a file's own share")
    ap.add_argument("--uniform-for", nargs="*", default=[], metavar="FILE=COUNT",
                    help="a file's mutants drawn uniformly, COUNT of them, not per function")
    ap.add_argument("--markdown")
    ap.add_argument("--list", action="store_true", help="print the drawn mutants and stop")
    ap.add_argument("--summary", action="store_true", help="the figures of the mutants judged so far, and stop")
    ap.add_argument("--only", nargs="*", help="run these mutant ids only (a survivor's recheck)")
    ap.add_argument("--recheck", action="store_true",
                    help="after new tests: bring the copy up to date, judge the survivors again")
    args = ap.parse_args()

    src = os.path.join(args.work, "src")
    files = args.files or (FILES_WHOLE + list(RULE_FUNCS))
    rng = random.Random(args.seed)
    drawn = []
    for f in FILES_WHOLE + list(RULE_FUNCS):
        lines = open(os.path.join(ROOT, f)).read().split("\n")
        ms = mutants_of(f, lines, RULE_FUNCS.get(f))
        for m in ms:
            m["pool"] = len(ms)
        # every function drawn from, the same share of each (at least one mutant)
        frac = args.frac_rules if (f in RULE_FUNCS or f == "store/api.c") else args.frac
        frac = dict(x.split("=") for x in args.frac_for).get(f, frac)
        byfunc = {}
        for m in ms:
            byfunc.setdefault(m["func"], []).append(m)
        pick = []
        for fn in sorted(byfunc):
            group = byfunc[fn]
            pick += rng.sample(group, min(len(group), max(1, math.ceil(float(frac) * len(group)))))
        uniform = dict(x.split("=") for x in args.uniform_for)
        if f in uniform:
            # a uniform sample of the file, from a generator of its own (the shared one is drawn as
            # above all the same, so that the other files' draws do not depend on this choice)
            pick = random.Random("%d:%s" % (args.seed, f)).sample(ms, min(len(ms), int(uniform[f])))
        if f in files:
            drawn.extend(sorted(pick, key=lambda m: (m["line"], m["col"], m["new"])))
    if args.only:
        drawn = [m for m in drawn if m["id"] in set(args.only)]
    if args.list:
        for m in drawn:
            print(m["id"], m["func"], repr(m["old"]), "->", repr(m["new"]))
        return
    if args.summary:
        done = {}
        for line in open(os.path.join(args.work, "results.jsonl")):
            r = json.loads(line)
            done[r["id"]] = r
        summarize(args, drawn, done)
        return

    if not os.path.exists(src) or args.recheck:
        # the copy, or (a recheck after new tests) the files that changed since it was made
        os.makedirs(args.work, exist_ok=True)
        listed = sh(["git", "-C", ROOT, "ls-files", "-co", "--exclude-standard", "-z"], capture_output=True).stdout
        for rel in listed.decode().split("\0"):
            if not rel or not os.path.isfile(os.path.join(ROOT, rel)):
                continue
            dst = os.path.join(src, rel)
            if os.path.exists(dst) and open(dst, "rb").read() == open(os.path.join(ROOT, rel), "rb").read():
                continue
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(os.path.join(ROOT, rel), dst)
    build, cov = os.path.join(args.work, "build"), os.path.join(args.work, "cov")
    configure(src, build, "-O1 -g0 -DNDEBUG", [])
    configure(src, cov, "-O0 -g --coverage", ["-DCMAKE_EXE_LINKER_FLAGS=--coverage",
                                              "-DCMAKE_SHARED_LINKER_FLAGS=--coverage"])
    targets = JUDGES + ["synctop", "synctop-testpub"]
    for b in (build, cov):
        print("building", b, file=sys.stderr)
        if not make(b, targets, quiet=False):
            sys.exit("the clean build failed: " + b)

    cases = list_cases(build)
    base_path = os.path.join(args.work, "baseline.json")
    base = {}
    if os.path.exists(base_path):
        base = {tuple(k.split(" ")): v for k, v in json.load(open(base_path)).items()}
    if any(bc not in base for bc in cases):
        for b, c in cases:
            if (b, c) in base:
                continue
            rc, dt = run_case(build, b, c, 300)
            base[(b, c)] = dt if rc == 0 else None
            print("clean %s.%s rc=%s %.2fs" % (b, c, rc, dt), file=sys.stderr)
        json.dump({" ".join(k): v for k, v in base.items()}, open(base_path, "w"))
    judges = [bc for bc in cases if base.get(bc) is not None]
    hit, gcov_lines = coverage(args, judges, sorted(set(FILES_WHOLE) | set(RULE_FUNCS)))

    res_path = os.path.join(args.work, "results.jsonl")
    done = {}
    if os.path.exists(res_path):
        for line in open(res_path):
            r = json.loads(line)
            done[r["id"]] = r
    kills = {bc: 0 for bc in judges}
    for r in done.values():
        if r.get("by"):
            kills[tuple(r["by"].split("."))] = kills.get(tuple(r["by"].split(".")), 0) + 1
    verdicts = read_verdicts()  # a recheck judges again the survivors a test was written for
    out = open(res_path, "a")
    # a run cut short leaves its last mutant in place: every file as the checkout has it, rebuilt
    for f in sorted(set(FILES_WHOLE) | set(RULE_FUNCS)):
        restore(src, f)
    make(build, targets)
    current = None
    for i, m in enumerate(drawn):
        if m["id"] in done and not args.only and not (args.recheck and done[m["id"]]["status"] == "survived" and
                                                       verdicts.get(m["id"], "").startswith("killed by")):
            continue
        path = os.path.join(src, m["file"])
        if current != m["file"]:
            if current is not None:
                restore(src, current)
            current = m["file"]
            original = open(os.path.join(ROOT, m["file"])).read().split("\n")
        lines = list(original)
        t = lines[m["line"] - 1]
        lines[m["line"] - 1] = t[:m["col"]] + m["new"] + t[m["end"]:]
        with open(path, "w") as fh:
            fh.write("\n".join(lines))
        linkers = ANALYSIS_LINKERS if m["file"].startswith("analysis/") else INGEST_LINKERS
        if m["line"] in gcov_lines.get(m["file"], set()):
            sel = [bc for bc in judges if m["line"] in hit.get(bc, {}).get(m["file"], set())]
        else:
            sel = []
        if not sel and (args.only or m["line"] not in gcov_lines.get(m["file"], set())):
            # no count for the line (a declaration, a table), or a line no case executed when a
            # mutant is judged again by name (gcov may give a continued expression's line no count)
            sel = [bc for bc in judges if bc[0] in linkers]
        t0 = time.monotonic()
        top, leaf = m["file"].split("/")
        # the object alone first (its folder's Makefile has a target per object): a mutant that
        # does not compile is rejected, never judged by the binaries built before it
        if not make(os.path.join(build, top), [leaf + ".o"]):
            status, by = "uncompiled", None
        elif not sel:
            status, by = "survived", None
        else:
            # each binary is relinked when its first case is to run: the first kill ends the rest
            sel.sort(key=lambda bc: (-kills.get(bc, 0), base[bc]))
            status, by, built = "survived", None, set()
            for bc in sel:
                if bc[0] not in built:
                    if not make(build, [bc[0]] + ([] if built else ["synctop"])):
                        status = "uncompiled"
                        break
                    built.add(bc[0])
                rc, dt = run_case(build, bc[0], bc[1], max(10.0, 3 * base[bc]))
                if rc not in (0, 77):
                    status, by = "killed", "%s.%s" % bc
                    kills[bc] = kills.get(bc, 0) + 1
                    break
        m.update(status=status, by=by, judges=len(sel), secs=round(time.monotonic() - t0, 1))
        out.write(json.dumps(m) + "\n")
        out.flush()
        done[m["id"]] = m
        print("%4d/%d %-9s %s %r -> %r (%s, %d judges, %.1fs)" % (i + 1, len(drawn), status, m["id"], m["old"],
                                                                  m["new"], by, len(sel), m["secs"]), file=sys.stderr)
    if current is not None:
        restore(src, current)
        make(build, targets)
    summarize(args, drawn, done)


def read_verdicts():
    """verdicts.txt beside this script: a mutant's id, a tab, what was found about it."""
    verdicts = {}
    vpath = os.path.join(os.path.dirname(os.path.abspath(__file__)), "verdicts.txt")
    if os.path.exists(vpath):
        for line in open(vpath):
            if "\t" in line and not line.startswith("#"):
                k, v = line.rstrip("\n").split("\t", 1)
                verdicts[k] = v
    return verdicts


def summarize(args, drawn, done):
    """Per file: mutants killed by the suite as it was (the first verdict of each) and as it is now
    (the last, after a --recheck); each survivor with its verdict from verdicts.txt beside this
    script (equivalent, or why no test kills it)."""
    first = {}
    res_path = os.path.join(args.work, "results.jsonl")
    if os.path.exists(res_path):
        for line in open(res_path):
            r = json.loads(line)
            first.setdefault(r["id"], r)
    verdicts = read_verdicts()
    text = ["| file | mutants | drawn | not compiled | killed before | killed now | survived now | killed now % "
            "| equivalent | killed in CI's sanitizer build | score % |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    surv, newly = [], []
    tot = [0, 0, 0, 0, 0, 0]
    for f in dict.fromkeys(m["file"] for m in drawn):
        ms = [m for m in drawn if m["file"] == f and m["id"] in done]
        u = sum(done[m["id"]]["status"] == "uncompiled" for m in ms)
        k0 = sum(first[m["id"]]["status"] == "killed" for m in ms)
        k1 = sum(done[m["id"]]["status"] == "killed" for m in ms)
        s1 = [done[m["id"]] for m in ms if done[m["id"]]["status"] == "survived"]
        newly += [done[m["id"]] for m in ms if done[m["id"]]["status"] == "killed" and first[m["id"]]["status"] != "killed"]
        surv += s1
        pool = next((m["pool"] for m in drawn if m["file"] == f), 0)
        eq = sum(verdicts.get(r["id"], "").startswith("equivalent") for r in s1)
        san = sum(verdicts.get(r["id"], "").startswith("killed under the sanitizers") for r in s1)
        tot = [tot[0] + len(ms) - u, tot[1] + k0, tot[2] + k1, tot[3] + len(s1), tot[4] + eq, tot[5] + san]
        # the score: killed (here or by the sanitizers) of the mutants some input can tell apart
        text.append("| %s | %d | %d | %d | %d | %d | %d | %.1f | %d | %d | %.1f |" % (
            f, pool, len(ms), u, k0, k1, len(s1), 100.0 * k1 / max(1, k1 + len(s1)), eq, san,
            100.0 * (k1 + san) / max(1, k1 + len(s1) - eq)))
    text.append("| all | | %d | | %d | %d | %d | %.1f | %d | %d | %.1f |" % (
        tot[0], tot[1], tot[2], tot[3], 100.0 * tot[2] / max(1, tot[2] + tot[3]), tot[4], tot[5],
        100.0 * (tot[2] + tot[5]) / max(1, tot[2] + tot[3] - tot[4])))
    text += ["", "Killed by the tests written for them:"]
    for r in newly:
        text.append("- `%s` (%s): `%s` -> `%s`: %s" % (r["id"], r["func"], r["old"], r["new"], r["by"]))
    text += ["", "Survivors:"]
    for r in surv:
        text.append("- `%s` (%s): `%s` -> `%s`: %s" % (r["id"], r["func"], r["old"], r["new"],
                                                    verdicts.get(r["id"], "NO VERDICT YET")))
    print("\n".join(text))
    if args.markdown:
        open(args.markdown, "w").write("\n".join(text) + "\n")


if __name__ == "__main__":
    main()
