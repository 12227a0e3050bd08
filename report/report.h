/*
 * Report rendering: an analysis (analysis.h) and optionally HTA's breakdowns (hta.h) as text for a
 * terminal, JSON for programs, or Markdown for a CI summary; and the `--fail-if` thresholds that let
 * a CI job fail on a synchronization regression. Shared by `synctop report` and `synctop run`.
 *
 * Every name from a trace is untrusted: text and Markdown sanitize it, JSON escapes it.
 */
#ifndef SYNCTOP_REPORT_H
#define SYNCTOP_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "analysis.h"
#include "compare.h"
#include "ranks.h"
#include "hta.h"
#include "steps.h"
#include "store.h"

typedef enum rp_format { RP_TEXT = 0, RP_JSON = 1, RP_MARKDOWN = 2 } rp_format;
/* "text", "json", "markdown" (or "md"); -1 when unknown. */
int rp_format_parse(const char *s);

typedef struct rp_opts {
    int format;          /* rp_format */
    const char *source;  /* what was analysed (a path or endpoints), for the header */
    size_t top;          /* call sites listed; 0: 15 */
    const hta_result *hta; /* HTA breakdowns to print, NULL: none */
    int hta_only;        /* print only the HTA part (report --hta) */
    const an_steps *steps; /* the steps, their outliers and periodic stalls; NULL: not asked */
    const an_diff *diff;   /* against a baseline run; NULL: none */
    const char *baseline;  /* what the baseline was read from */
    const an_ranks *ranks; /* per rank figures and the stragglers at collectives; NULL: not asked */
    unsigned sources;      /* RP_SRC_* bits: the kinds of input, for what is said of calls without a site */
    size_t left_out;       /* sources that could not be read and are not in it */
} rp_opts;

enum { RP_SRC_KINETO = 1u, RP_SRC_NSYS = 2u, RP_SRC_TRACER = 4u };

/* Writes the report. Returns 0, or -1 when out could not be written. */
int rp_write(FILE *out, const st_store *s, const an_result *r, const rp_opts *o);
/* A few lines of text: host time blocked and GPU busy share, then the top call sites by time
 * blocked (at most top), each with its calls and API. Returns 0, or -1 when out could not be
 * written. */
int rp_write_brief(FILE *out, const st_store *s, const an_result *r, size_t top);

/* A call site in one line: the innermost Python frame (file:line function) when there is one,
 * else the innermost native frame (function (module+offset)); "" when no call site was taken
 * (callsite 0: the caller names the API instead). Sanitized. Returns buf. */
char *rp_site_text(const st_store *s, uint64_t callsite, uint32_t api, char *buf, size_t len);

/* ---- --fail-if thresholds ---- */

/* One threshold: METRIC OP VALUE, e.g. "blocked>5%", "idle>=40%", "stalls>100", "blocked>2s",
 * "site:train.py:42>10ms", "api:cudaStreamSynchronize>50ms", "sync-api>0", "findings>0".
 * Metrics: blocked (host blocked, % of wall time or a time), idle (GPU idle, % of the span of the
 * idlest device or a time), stalls (blocking calls), bubbles (GPU bubbles per device), findings
 * (all findings), a rule id (sync-api, sync-memcpy, pageable-memcpy, sync-memset: their calls;
 * gpu-gaps: its gaps; low-util: its windows), site:TEXT (blocked time at call sites whose
 * description contains TEXT, or whose API does when no call site was taken), api:NAME (blocked
 * time in that API), new-sites (call sites the baseline did not have; needs a baseline). OP: > >=
 * < <= ==. VALUE: a number, with % for shares, or ns/us/ms/s for times; with a sign and % ("+10%")
 * the change against the baseline (blocked, idle, stalls, site:, api:). */
typedef struct rp_check {
    char text[256];   /* as given, for messages */
    int metric;
    char arg[160];    /* site:/api: argument */
    int op;
    double value;     /* in %, ns or a count */
    int unit;         /* 0 count, 1 percent, 2 time (ns), 3 change against the baseline (%) */
} rp_check;

int rp_check_parse(const char *text, rp_check *out, err_msg *err);
/* Does the check compare with a baseline (new-sites, a change in %)? */
int rp_check_needs_baseline(const rp_check *c);
/* Evaluates; returns 1 when the threshold is crossed (the check fails), 0 otherwise, and writes
 * a line saying what was measured into msg. */
int rp_check_eval(const rp_check *c, const st_store *s, const an_result *r, char *msg, size_t len);
/* The same, for checks that need the baseline (diff, its store and analysis; NULL when none: such
 * a check then fails, saying so). */
int rp_check_eval_base(const rp_check *c, const st_store *s, const an_result *r, const st_store *bs,
                       const an_result *br, const an_diff *diff, char *msg, size_t len);

#endif
