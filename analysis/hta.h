/*
 * Holistic Trace Analysis' idle-time and temporal breakdowns, recomputed from a store so that
 * `synctop report --hta` can be compared number for number with HTA's own output on the same trace
 * (facebookresearch/HolisticTraceAnalysis: hta/analyzers/breakdown_analysis.py
 * get_idle_time_breakdown, _analyze_idle_time_for_stream, get_temporal_breakdown).
 *
 * Results are in microseconds, HTA's unit (the trace's), kept exact as integer nanoseconds.
 * Where the store cannot tell what HTA would see, the choice is an option (hta_opts) or noted in
 * hta.c.
 */
#ifndef SYNCTOP_HTA_H
#define SYNCTOP_HTA_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "synctop/error.h"

enum hta_wide { HTA_WIDE_AUTO = 0, HTA_WIDE_HOST = 1, HTA_WIDE_STREAM = 2 };

enum hta_idle { HTA_HOST_WAIT = 0, HTA_KERNEL_WAIT = 1, HTA_OTHER = 2, HTA_IDLE_N_ };
const char *hta_idle_name(int category); /* "host_wait", "kernel_wait", "other" */

/* HTA's show_idle_interval_stats for one category of one stream: pandas' describe() of the idle
 * intervals, in ns. count excludes the stream's first row (no interval; it is in "other"); std has
 * ddof 1; the rest are NaN where pandas gives NaN (no interval, or one for std). */
typedef struct hta_interval_stats {
    uint64_t count;
    double mean, std, min, q25, q50, q75, max;
} hta_interval_stats;

/* One CUDA stream of one rank: idle time per category (a category is present only when some
 * operation fell into it, as in HTA's grouped result). */
typedef struct hta_stream {
    uint32_t producer;
    int32_t rank;                  /* distributedInfo.rank; 0 when the trace has none, as HTA */
    int64_t stream;                /* HTA's stream number (4294967295 for device-wide syncs, see opts) */
    uint64_t ops;                  /* operations HTA considers on it (after step filtering) */
    int64_t idle_ns[HTA_IDLE_N_];  /* may be negative: HTA sums overlaps as negative intervals */
    int present[HTA_IDLE_N_];
    hta_interval_stats stats[HTA_IDLE_N_];
} hta_stream;

/* get_temporal_breakdown for one rank. */
typedef struct hta_rank {
    uint32_t producer;
    int32_t rank;                  /* distributedInfo.rank; 0 when the trace has none, as HTA */
    int filtered;  /* ProfilerStep filtering applied (two or more step names in the store) */
    int rounded;   /* float timestamps: ts rounded up, ends down, to whole microseconds */
    int doubles;   /* ... from HTA's doubles of absolute times (0.25 us apart near 1.7e15 us) */
    uint64_t negative_rows; /* GPU rows the rounding left ending before they start (dur < 0) */
    int has_gpu;   /* some GPU operation survived: the numbers below mean something */
    int64_t idle_ns, compute_ns, non_compute_ns, kernel_ns;
} hta_rank;

typedef struct hta_opts {
    uint64_t delay_ns;       /* consecutive_kernel_delay; 0: 30 us (HTA's default) */
    int wide_sync;           /* device-wide cuda_sync rows: HTA_WIDE_AUTO (0) as the trace spelled
                                them (kineto.h), HTA_WIDE_HOST as stream -1 (host rows for HTA),
                                HTA_WIDE_STREAM as stream 4294967295 (a GPU stream for HTA) */
    int include_last_step;   /* HTA's include_last_profiler_step */
} hta_opts;

typedef struct hta_result {
    hta_rank *ranks;
    size_t n_ranks;
    hta_stream *streams; /* by rank, then stream number */
    size_t n_streams;
} hta_result;

int hta_analyze(const st_store *s, const hta_opts *opts, hta_result *out, err_msg *err);
void hta_result_free(hta_result *r);

#endif
