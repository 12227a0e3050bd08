/*
 * The steps of a training or serving loop, and what made some of them slow.
 *
 * Step boundaries, the first kind found wins:
 *   1. the profiler's ProfilerStep#N ranges (PyTorch's profiler writes one per step);
 *   2. a range the user names (an NVTX range, or a profiler annotation), by its exact name;
 *   3. a heartbeat: a repeated blocking call site whose stalls end at regular times (robustly:
 *      the gaps between them mostly within a third of their median), or a range of one name whose
 *      starts do (a data loader's __next__, an optimizer step), the most frequent; a step runs
 *      from one beat to the next.
 * When none gives at least three steps, there are no steps: the caller says so rather than guess.
 *
 * Per step: wall time, GPU busy (the union of the process's GPU work, summed over its GPUs), host
 * time blocked, the stalls and the call site that blocked longest. Outliers are steps longer than
 * median + 3 x 1.4826 x MAD (a robust three sigma) and at least a tenth above the median, per
 * process. A periodic stall is a call site that blocks long (above twice its median share of a
 * step and above 1% of the median step) in steps that come every Nth step, N >= 2, at least three
 * times in a row; its cost is what those steps take beyond the median of the others.
 */
#ifndef SYNCTOP_STEPS_H
#define SYNCTOP_STEPS_H

#include <stddef.h>
#include <stdint.h>

#include "analysis.h"
#include "store.h"
#include "synctop/error.h"

/* Times a range or a blocking call must come, at least, to be taken for a loop's beat. */
#define AN_HEARTBEAT_MIN 6

typedef enum an_step_source {
    AN_STEPS_NONE = 0,
    AN_STEPS_PROFILER = 1,  /* ProfilerStep#N ranges */
    AN_STEPS_RANGE = 2,     /* the range named by the caller */
    AN_STEPS_HEARTBEAT = 3, /* a regular blocking call site */
} an_step_source;
const char *an_step_source_name(int source); /* "ProfilerStep ranges", "range", "heartbeat" */

typedef struct an_step {
    uint32_t producer;
    int64_t number;        /* ProfilerStep#N's N; else the step's ordinal in its process, from 0 */
    uint64_t start, end;
    uint64_t gpu_busy_ns;  /* GPU work's union over the step, summed over the process's GPUs */
    uint64_t blocked_ns;   /* host time blocked in the step (blocks' own time, clipped) */
    uint32_t stalls;       /* blocking calls that start in the step */
    size_t top_site;       /* index in an_result.sites that blocked longest in it; SIZE_MAX: none */
    uint64_t top_site_ns;
    uint64_t host_ns;      /* GPU idle the host caused in it outside any waiting call (an_host_piece),
                              summed over the process's GPUs */
    uint32_t host_range;   /* the range most of that went to (store string); 0: none, or no range */
    uint64_t host_range_ns;
    int outlier;
} an_step;

typedef struct an_periodic {
    size_t site;           /* index in an_result.sites */
    uint32_t producer;
    uint32_t period;       /* every period-th step */
    size_t first;          /* index in an_steps.steps of the first step it hit */
    uint32_t hits;         /* steps it blocked long in */
    uint64_t extra_ns;     /* those steps' mean wall time minus the median of the others */
} an_periodic;

typedef struct an_steps {
    int source;            /* an_step_source */
    char what[160];        /* the range name, or the heartbeat's call site; sanitized */
    an_step *steps;        /* by process, then time */
    size_t n_steps;
    uint64_t median_ns;    /* of all steps' wall time */
    an_periodic *periodic;
    size_t n_periodic;
    size_t profiler_ranges; /* with no steps: the ProfilerStep#N ranges found, fewer than three */
} an_steps;

/* Why no steps were found, in a few words ("no ProfilerStep ranges", "2 ProfilerStep ranges, fewer
 * than the three steps need"). */
const char *an_steps_none_why(const an_steps *st, char *buf, size_t len);

/* Finds the steps in an analysed store: the ranges named range_name (NULL: none) when three or more,
 * else the profiler's ProfilerStep#N ranges, else the most regular blocking call. Returns
 * 0 (out->source AN_STEPS_NONE when there are none) or ERR_NOMEM with err set. */
int an_steps_find(const st_store *s, const an_result *r, const char *range_name, an_steps *out, err_msg *err);
void an_steps_free(an_steps *st);

#endif
