/*
 * GPU busy time: the union, over one GPU's stream lanes, of its work (kernels, copies, memsets),
 * by a k-way merge by start time. The analysis walks it to the end to find the device bubbles;
 * the viewer's header resumes it frame after frame as a replay's "now" moves forward.
 *
 * Work is clipped to start no earlier than a; the merge takes the work that starts before the
 * bound the caller gives, so the union over [a, b) is the closed intervals plus the open one
 * clipped to b.
 */
#ifndef SYNCTOP_BUSY_H
#define SYNCTOP_BUSY_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* Kernels, copies and memsets: what keeps a GPU busy. */
int an_is_gpu_work(const st_store *s, const st_event *e);

typedef struct an_busy {
    const st_store *s;
    uint32_t producer;
    uint16_t device;
    uint64_t a;
    size_t *lanes, *pos; /* the device's stream lanes, and the next event of each */
    size_t n_lanes;
    int have;            /* an interval is open: [cur_s, cur_e) */
    uint64_t cur_s, cur_e;
    uint64_t busy_ns;    /* the closed intervals' total */
} an_busy;

/* A gap the merge found: the device idle over [start, end), ended by the work at (lane, index). */
typedef struct an_busy_gap {
    uint64_t start, end;
    uint64_t busy_s;  /* the busy interval the gap closed: [busy_s, start) */
    size_t lane, index;
} an_busy_gap;

enum { AN_BUSY_DONE = 0, AN_BUSY_GAP = 1, AN_BUSY_MORE = 2 };

/* Starts a merge of the device's work from a. Work that began before a and still runs at a is
 * looked for among the last lookback events before a on each lane (streams run their work one
 * after another, so a few suffice; SIZE_MAX looks at all). 0, or ERR_NOMEM. */
int an_busy_init(an_busy *m, const st_store *s, uint32_t producer, uint16_t device, uint64_t a,
                 size_t lookback);
void an_busy_free(an_busy *m);

/* Merges the work that starts before b. Returns AN_BUSY_GAP when it closed a busy interval at a
 * gap (*gap says where; call again to go on), AN_BUSY_DONE when all work before b is merged, and
 * AN_BUSY_MORE when *budget (events, decremented; NULL: no limit) ran out first. */
int an_busy_step(an_busy *m, uint64_t b, size_t *budget, an_busy_gap *gap);

/* The busy time over [a, b) of what has been merged, the open interval clipped to b. */
uint64_t an_busy_total(const an_busy *m, uint64_t b);

/* The open interval clipped to b; 0 when there is none. */
int an_busy_open(const an_busy *m, uint64_t b, uint64_t *start, uint64_t *end);

/* The part of [a, b) a process's GPUs are counted over: all of it when the store holds one process;
 * with several, from the process's first event on, and to its last where it has ended (a trace read
 * from a file, a process gone). Time before a process was traced, or after, was not seen, so it is
 * not its GPUs' idle. */
uint64_t an_process_span(const st_store *s, uint32_t producer, uint64_t a, uint64_t b);

struct an_result;
/* The busy time over [a, b) of each of the process's GPUs (those r lists), summed over them. */
uint64_t an_busy_process(const st_store *s, const struct an_result *r, uint32_t producer, uint64_t a, uint64_t b);

/* ---- a resumable sweep of every GPU: the viewer header's figures over a range ---- */

/* One GPU's figures over a range of time. */
typedef struct an_gpu_fig {
    uint32_t producer;
    uint16_t device;
    uint64_t span_ns, busy_ns, idle_ns, blocked_ns;
} an_gpu_fig;

/* Per GPU, the merge of its work that starts before b, from a. The merge keeps its place, so a
 * replay's "now" moving forward only extends it, and a caller can spread a long sweep over several
 * frames. */
typedef struct an_sweep an_sweep;

/* A fresh sweep of [a, ...) over the store as it is, an's blocking spans giving the host's time
 * blocked (an may be NULL). NULL when out of memory. */
an_sweep *an_sweep_new(const st_store *s, const struct an_result *an, uint64_t a);
void an_sweep_free(an_sweep **sp);
/* Whether the sweep can go on to b: the same store, unchanged since, the same analysis and start,
 * and b not before what it has swept. */
int an_sweep_fits(const an_sweep *w, const st_store *s, const struct an_result *an, uint64_t a, uint64_t b);
/* Merges the work that starts before b, at most budget events (0: all); 1 when done. */
int an_sweep_to(an_sweep *w, uint64_t b, size_t budget);
/* The figures of a finished sweep for [a, b), a GPU each, over its process's part of the range
 * (an_process_span) (free *out). 0, or ERR_NOMEM. */
int an_sweep_figures(const an_sweep *w, uint64_t b, an_gpu_fig **out, size_t *n_out);

#endif
