/*
 * The stalls a viewer lists: the blocking spans of an analysis (analysis.h) summed per call site up
 * to a moment (a replay's "now"), optionally within the step each process is in at a time, with the
 * same call in several processes of a large job taken as one row, sorted by a column. The viewer's
 * stalls panel shows them; its keys walk the spans of a row (an_stall_site_has).
 *
 * A call site is named as the panel names it (an_site_label): its first Python frame, else its
 * innermost native frame, sanitized for a terminal.
 */
#ifndef SYNCTOP_STALLS_H
#define SYNCTOP_STALLS_H

#include <stddef.h>
#include <stdint.h>

#include "analysis.h"
#include "steps.h"
#include "store.h"

/* A call site of one process, among those a row stands for. */
typedef struct an_stall_member {
    uint32_t producer;
    uint64_t callsite;
    uint32_t name;
} an_stall_member;

/* A call site's totals over the spans counted. */
typedef struct an_stall_site {
    uint32_t producer;
    uint64_t callsite; /* 0: none; name says the API */
    uint32_t name;
    int kind; /* an_block_kind */
    uint64_t count, total_ns, max_ns;
    uint64_t gpu_idle_ns; /* GPU idle its stalls caused */
    /* In a job of many processes, the same call (the same API, the same frames) in several of them
     * is one row: members lists each process's site, n_procs how many processes (NULL, 1: one). */
    an_stall_member *members;
    size_t n_members;
    uint32_t n_procs;
} an_stall_site;

/* The columns rows are sorted by, largest first. */
typedef enum an_stall_order { AN_STALL_BY_TOTAL, AN_STALL_BY_MAX, AN_STALL_BY_COUNT, AN_STALL_BY_IDLE, AN_STALL_BY_N_ } an_stall_order;

/* What to count: the spans that end by now; with by_step only those that start in the step at
 * `at` of their process (none when steps is NULL or `at` is in no step). */
typedef struct an_stall_scope {
    uint64_t now;
    int by_step;
    const an_steps *steps;
    uint64_t at;
} an_stall_scope;

/* The rows of an's spans in scope, sorted by order, into *out (free with an_stall_sites_free).
 * *step_no gets the number of the step at `at` of the first process that is in one (-1: none, or
 * not by_step). Returns 0, or ERR_NOMEM (then no rows). */
int an_stall_sites(const st_store *s, const an_result *an, const an_stall_scope *scope, an_stall_order order,
                   an_stall_site **out, size_t *n, int64_t *step_no);
void an_stall_sites_free(an_stall_site *sites, size_t n);
/* Sorts rows by a column, ties by total, then producer, call site and name. */
void an_stall_sites_sort(an_stall_site *sites, size_t n, an_stall_order order);
/* Whether a span is one of the row's. */
int an_stall_site_has(const an_stall_site *site, const an_block *b);

/* The label of a call site (first Python frame, then native), sanitized, at most n-1 bytes. */
void an_site_label(const st_store *s, uint64_t callsite, uint32_t name, char *out, size_t n);
/* Makes n labels (labels + i * len, of callsites[i], each written as an_site_label or the report
 * writes them) tell their call sites apart: those that read the same get, each, its frame at the
 * first place where their chains differ, outward from the frame they are named after (" (from
 * FRAME)", " (top level)" where a chain ends) and else inward (" (via FRAME)", " (innermost)").
 * Labels of sites whose frames read the same all along stay as they are. Returns 0, or ERR_NOMEM (labels unchanged). */
int an_labels_distinguish(const st_store *s, const uint64_t *callsites, char *labels, size_t len, size_t n);

#endif
