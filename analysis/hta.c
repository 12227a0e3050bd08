/*
 * HTA breakdowns (hta.h), following Holistic Trace Analysis 0.5.0's code step by step:
 *
 *   hta/common/trace_parser.py round_down_time_stamps: when a trace's ts column is float, every ts
 *     is rounded up and every end (ts + dur) down to whole microseconds.
 *   hta/common/trace.py transform_correlation_to_index: a GPU row (stream >= 0) is linked to the
 *     host row with the same correlation; one with a correlation but no host row to row index 0;
 *     _filter_irrelevant_gpu_kernels: with two or more distinct ProfilerStep names, only host rows
 *     that start before the last ProfilerStep are kept and GPU rows are inner-joined on correlation
 *     with them (one copy per matching host row).
 *   hta/analyzers/breakdown_analysis.py get_idle_time_breakdown: per stream, the rows of cat kernel,
 *     gpu_memcpy and gpu_memset (not cuda_sync) sorted by ts, idle_interval = ts - (previous ts +
 *     dur); host_wait when the launching row started after the previous row ended, kernel_wait when
 *     the interval is below consecutive_kernel_delay (30 us by trace_analysis.py's default), other
 *     otherwise (the first row: other, with no interval); show_idle_interval_stats: pandas'
 *     describe() of the intervals per category. get_temporal_breakdown: union of every row with a
 *     stream (cuda_sync rows included); compute time is the union of the COMPUTATION rows
 *     (hta/utils/utils.py get_kernel_type).
 *
 * Where HTA reads something the store does not keep, what is done (tests/unit/hta_fixtures holds
 * HTA's own output for each sample trace; none reaches the cases marked "differs"):
 *   - device-wide cuda_sync rows: HTA reads stream -1 as host rows and 4294967295 as a GPU stream of
 *     its own (in the temporal breakdown only: it has no kernel rows). The importer notes the
 *     spelling in the pseudo-stream's record flags (TP_F_SYNC_ID_*), so the reading follows the
 *     trace; hta_opts.wide_sync overrides it (and decides for live traces, where no spelling
 *     exists: host rows). A trace using both spellings is read as 4294967295.
 *   - the rank: distributedInfo.rank, else 0 as HTA (the store says -1: unknown).
 *   - float timestamps: HTA rounds when its ts column is float64, i.e. when any row of the file
 *     has a float ts or none at all, rows synctop does not import (cpu_op) included. Here: when an
 *     imported event's ts has a fraction of a microsecond. Differs for a file whose float ts are
 *     all whole microseconds while some durations are not (HTA rounds the ends down, this does
 *     not); the importer would have to note the JSON number type to tell.
 *   - the rounding itself is on exact nanoseconds (round_row): HTA's doubles of a ts relative to
 *     baseTimeNanoseconds keep every ns, so the two agree but where the double sum ts + dur falls
 *     a rounding error short of a whole microsecond (none of Qwen's 12,080 rows). Differs for an
 *     absolute float ts (no base): doubles there are 0.25 us apart and HTA rounds what the double
 *     kept; the importer does not say whether a base was added.
 *   - a GPU row with a correlation but no host call: HTA links it to row index 0, the file's first
 *     row (with a dur and a cat), whose ts then counts as its launch. The store does not keep the
 *     file's order; here the first ProfilerStep is taken for that row (profilers write it first:
 *     Qwen's 509 such kernels, launched before the step began, are host_wait as in HTA), and with
 *     no ProfilerStep the row has no launch (never host_wait). Differs when the file's first row
 *     is another one.
 *   - negative non_compute_time: rounding gives a sub-microsecond row a negative dur (end < ts),
 *     and such a row alone in the union subtracts from the busy time, so idle + compute can exceed
 *     kernel_time. HTA's get_temporal_breakdown then fails its own assertion (Qwen: -17 us); here
 *     the figures are given as computed.
 *   - ts ties on one stream: HTA's sort_values is not stable, so its own result depends on the
 *     order pandas leaves; here store order (start, then end: the shorter first). Equal rows give
 *     the same figures either way.
 */
#include "hta.h"
#include "grow.h"


#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HTA_DEF_DELAY_NS 30000

const char *hta_idle_name(int c) {
    static const char *const n[] = {"host_wait", "kernel_wait", "other"};
    return c >= 0 && c < HTA_IDLE_N_ ? n[c] : "?";
}

typedef struct hrow {
    int64_t ts, end;     /* ns, after HTA's rounding */
    int64_t stream;
    int64_t runtime;     /* ts of the linked host row; INT64_MIN: none */
    uint32_t corr;
    int compute;         /* KernelType COMPUTATION */
    int kernel;          /* cat kernel, gpu_memcpy or gpu_memset: not cuda_sync */
    size_t seq;          /* order of appearance, for ties */
} hrow;

typedef struct hcpu {
    uint32_t corr;
    int64_t ts;
} hcpu;


/* HTA's rounding of one row: ts = ceil(ts), end = floor(ts + dur), here on exact nanoseconds. HTA
 * does it on the file's doubles; for a ts relative to baseTimeNanoseconds (what profilers write
 * with ns precision: below 2^42 us, a double keeps every ns) the two agree except where the double
 * sum ts + dur falls a rounding error short of a whole microsecond that the exact sum reaches.
 * For an absolute float ts (about 1.7e15 us, doubles 0.25 us apart) HTA's own result depends on
 * the double's rounding of the fraction; this takes the fraction as written (the importer does
 * not say whether a base was added, and the exact figure is the trace's). */
static void round_row(uint64_t start, uint64_t end, int64_t *ts, int64_t *te) {
    *ts = (int64_t)((start + 999) / 1000 * 1000);
    *te = (int64_t)(end / 1000 * 1000);
}

/* hta/utils/utils.py get_kernel_type() == COMPUTATION: not ^nccl.*Kernel, not ^Memcpy|^Memset|^dma,
 * and not matched by (^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync). */
static int name_is_compute(const char *n) {
    if (strncmp(n, "nccl", 4) == 0 && strstr(n + 4, "Kernel") != NULL)
        return 0;
    if (strncmp(n, "Memcpy", 6) == 0 || strncmp(n, "Memset", 6) == 0 || strncmp(n, "dma", 3) == 0)
        return 0;
    if (strstr(n, "Memcpy") != NULL || strstr(n, "Sync") != NULL)
        return 0;
    return 1;
}

static int event_is_compute(const st_store *s, const st_event *e) {
    switch (e->kind) {
    case TP_K_KERNEL: return name_is_compute(st_str(s, e->name));
    case TP_K_MEMCPY: /* "Memcpy HtoD (...)" */
    case TP_K_MEMSET: return 0; /* "Memset (Device)" */
    case TP_K_SYNC: /* "Stream Sync", "Event Sync", "Context Sync" hold "Sync"; "Stream Wait Event" not */
        return e->sub == TP_SYNC_STREAM_WAIT_EVENT;
    default: return 0;
    }
}

static int i64_cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* numpy's linear quantile of sorted values (pandas' describe). */
static double quantile(const int64_t *v, size_t n, double q) {
    double h = (double)(n - 1) * q;
    size_t lo = (size_t)h;
    if (lo + 1 >= n)
        return (double)v[n - 1];
    return (double)v[lo] + (h - (double)lo) * (double)(v[lo + 1] - v[lo]);
}

/* pandas' describe() of n intervals (sorted here). */
static void describe(int64_t *v, size_t n, hta_interval_stats *st) {
    st->count = n;
    st->mean = st->std = st->min = st->q25 = st->q50 = st->q75 = st->max = NAN;
    if (n == 0)
        return;
    tu_sort(v, n, sizeof *v, i64_cmp);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += (double)v[i];
    st->mean = sum / (double)n;
    if (n > 1) {
        double ss = 0;
        for (size_t i = 0; i < n; i++)
            ss += ((double)v[i] - st->mean) * ((double)v[i] - st->mean);
        st->std = sqrt(ss / (double)(n - 1));
    }
    st->min = (double)v[0];
    st->max = (double)v[n - 1];
    st->q25 = quantile(v, n, 0.25);
    st->q50 = quantile(v, n, 0.5);
    st->q75 = quantile(v, n, 0.75);
}

static int cpu_cmp(const void *a, const void *b) {
    const hcpu *x = a, *y = b;
    if (x->corr != y->corr)
        return x->corr < y->corr ? -1 : 1;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* Host rows with this correlation: [*lo, *hi) in the sorted array. */
static void cpu_range(const hcpu *c, size_t n, uint32_t corr, size_t *lo, size_t *hi) {
    size_t a = 0, b = n;
    while (a < b) {
        size_t m = (a + b) / 2;
        if (c[m].corr < corr)
            a = m + 1;
        else
            b = m;
    }
    *lo = a;
    b = n;
    while (a < b) {
        size_t m = (a + b) / 2;
        if (c[m].corr <= corr)
            a = m + 1;
        else
            b = m;
    }
    *hi = a;
}

static int row_cmp(const void *a, const void *b) {
    const hrow *x = a, *y = b;
    if (x->stream != y->stream)
        return x->stream < y->stream ? -1 : 1;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int row_ts_cmp(const void *a, const void *b) {
    const hrow *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Union length, first start and last end of rows (sorted by ts in place); which: all or compute. */
static int64_t union_time(hrow *r, size_t n, int compute_only, int64_t *first, int64_t *last) {
    int64_t busy = 0, cs = 0, ce = 0;
    int have = 0;
    for (size_t i = 0; i < n; i++) {
        if (compute_only && !r[i].compute)
            continue;
        if (!have || r[i].ts > ce) {
            if (have)
                busy += ce - cs;
            else if (first)
                *first = r[i].ts;
            cs = r[i].ts;
            ce = r[i].end;
            have = 1;
        } else if (r[i].end > ce) {
            ce = r[i].end;
        }
    }
    if (have) {
        busy += ce - cs;
        if (last)
            *last = ce;
    }
    return busy;
}

/* HTA's stream number of a lane. Device-wide syncs are -1 (host rows, left out of the breakdown)
 * or 4294967295 (a GPU stream of their own) as the trace spelled them: the importer notes the
 * spelling in the lane's stream flags (TP_F_SYNC_ID_*); a trace that used both is read as 4294967295, since
 * the store holds them in one lane. */
static int64_t stream_of(const st_lane_info *li, const hta_opts *o) {
    if (li->id != TP_NO_ID)
        return (int64_t)li->id;
    int as_stream = o->wide_sync == HTA_WIDE_STREAM ||
                    (o->wide_sync == HTA_WIDE_AUTO && (li->stream_flags & TP_F_SYNC_ID_U32) != 0);
    return as_stream ? (int64_t)TP_NO_ID : -1;
}

static int analyze_producer(const st_store *s, uint32_t p, size_t n_step_names, const hta_opts *o,
                            hta_result *out, size_t *streams_cap, size_t *ranks_cap) {
    const st_producer_info *pi = st_producer_get(s, p);
    /* HTA's rank: distributedInfo.rank, 0 when the trace has none (trace_parser.py). */
    int32_t rank = pi->rank >= 0 ? pi->rank : 0;
    hrow *rows = NULL, *kern = NULL;
    int64_t *iv[HTA_IDLE_N_] = {NULL}; /* one stream's idle intervals by category */
    hcpu *cpu = NULL;
    size_t n_rows = 0, rows_cap = 0, n_cpu = 0, cpu_cap = 0;
    int rc = -1;

    /* Float timestamps? Any imported event with a fraction of a microsecond. */
    int rounded = 0;
    for (size_t l = 0; l < st_lane_count(s) && !rounded; l++) {
        if (st_lane_get(s, l)->producer != p)
            continue;
        size_t n;
        const st_event *ev = st_lane_events(s, l, &n);
        for (size_t i = 0; i < n && !rounded; i++)
            rounded = ev[i].start % 1000 != 0;
    }

    /* Host rows with a correlation, and the ProfilerSteps' window. */
    int64_t last_step_start = INT64_MIN, last_step_end = INT64_MIN, min_cpu = INT64_MAX, max_cpu_end = INT64_MIN;
    int64_t first_step_start = INT64_MAX;
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (li->producer != p)
            continue;
        int host_rows = li->kind == ST_LANE_THREAD || (li->kind == ST_LANE_NVTX && li->device == TP_NO_DEVICE) ||
                        (li->kind == ST_LANE_STREAM && stream_of(li, o) == -1);
        if (!host_rows)
            continue;
        size_t n;
        const st_event *ev = st_lane_events(s, l, &n);
        for (size_t i = 0; i < n; i++) {
            const st_event *e = &ev[i];
            int64_t ts = (int64_t)e->start, te = (int64_t)e->end;
            if (rounded)
                round_row(e->start, e->end, &ts, &te);
            min_cpu = ts < min_cpu ? ts : min_cpu;
            max_cpu_end = te > max_cpu_end ? te : max_cpu_end;
            if (li->kind == ST_LANE_NVTX) {
                if (strncmp(st_str(s, e->name), "ProfilerStep", 12) == 0) {
                    last_step_start = ts > last_step_start ? ts : last_step_start;
                    first_step_start = ts < first_step_start ? ts : first_step_start;
                    last_step_end = te > last_step_end ? te : last_step_end;
                }
                continue;
            }
            if (e->corr == 0)
                continue;
            if (TU_GROW(cpu, cpu_cap, n_cpu + 1))
                goto done;
            cpu[n_cpu++] = (hcpu){e->corr, ts};
        }
    }
    tu_sort(cpu, n_cpu, sizeof *cpu, cpu_cmp);
    int filtered = n_step_names >= 2 && n_cpu > 0;
    int64_t cut = last_step_start != INT64_MIN ? last_step_start : min_cpu;
    int64_t cut_incl = last_step_end != INT64_MIN ? last_step_end : max_cpu_end;

    /* GPU rows, each linked to its host row (the last one with its correlation), and copied once
     * per kept host row when filtering. */
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (li->producer != p || li->kind != ST_LANE_STREAM)
            continue;
        int64_t stream = stream_of(li, o);
        if (stream == -1)
            continue;
        size_t n;
        const st_event *ev = st_lane_events(s, l, &n);
        for (size_t i = 0; i < n; i++) {
            const st_event *e = &ev[i];
            if (e->kind != TP_K_KERNEL && e->kind != TP_K_MEMCPY && e->kind != TP_K_MEMSET && e->kind != TP_K_SYNC)
                continue;
            hrow r = {.stream = stream, .runtime = INT64_MIN, .corr = e->corr, .compute = event_is_compute(s, e),
                      .kernel = e->kind != TP_K_SYNC};
            r.ts = (int64_t)e->start;
            r.end = (int64_t)e->end;
            if (rounded)
                round_row(e->start, e->end, &r.ts, &r.end);
            size_t lo = 0, hi = 0, copies = 1;
            if (e->corr != 0) {
                cpu_range(cpu, n_cpu, e->corr, &lo, &hi);
                if (hi > lo && stream >= 0)
                    r.runtime = cpu[hi - 1].ts;
                else if (hi == lo && first_step_start != INT64_MAX)
                    r.runtime = first_step_start; /* HTA's row 0, taken to be the first ProfilerStep */
            }
            if (filtered) {
                /* GPU rows (stream >= 0) are inner-joined with the kept host rows on correlation. */
                copies = 0;
                if (stream >= 0)
                    for (size_t k = lo; k < hi; k++)
                        copies += o->include_last_step ? cpu[k].ts <= cut_incl : cpu[k].ts < cut;
                if (copies && r.runtime != INT64_MIN &&
                    !(o->include_last_step ? r.runtime <= cut_incl : r.runtime < cut))
                    r.runtime = INT64_MIN; /* the linked row itself was filtered out */
            }
            for (size_t k = 0; k < copies; k++) {
                if (TU_GROW(rows, rows_cap, n_rows + 1))
                    goto done;
                rows[n_rows++] = r;
            }
        }
    }

    /* Idle-time breakdown per stream: kernel, memcpy and memset rows (cuda_sync rows are left out,
     * as get_idle_time_breakdown's kernel_cats do), by (stream, ts), ties in store order. */
    for (size_t i = 0; i < n_rows; i++)
        rows[i].seq = i;
    tu_sort(rows, n_rows, sizeof *rows, row_cmp);
    if (n_rows > 0) {
        kern = malloc(n_rows * sizeof *kern);
        for (int c = 0; c < HTA_IDLE_N_; c++)
            if ((iv[c] = malloc(n_rows * sizeof *iv[c])) == NULL)
                goto done;
        if (kern == NULL)
            goto done;
    }
    for (size_t i = 0; i < n_rows;) {
        size_t j = i;
        while (j < n_rows && rows[j].stream == rows[i].stream)
            j++;
        size_t n_kern = 0;
        for (size_t k = i; k < j; k++)
            if (rows[k].kernel)
                kern[n_kern++] = rows[k];
        if (n_kern == 0) {
            i = j;
            continue;
        }
        if (TU_GROW(out->streams, *streams_cap, out->n_streams + 1))
            goto done;
        hta_stream *st = &out->streams[out->n_streams++];
        memset(st, 0, sizeof *st);
        st->producer = p;
        st->rank = rank;
        st->stream = rows[i].stream;
        st->ops = n_kern;
        st->present[HTA_OTHER] = 1; /* the first row: no interval, category other */
        const hrow *g = kern;
        size_t n_iv[HTA_IDLE_N_] = {0};
        for (size_t k = 1; k < st->ops; k++) {
            int64_t prev_end = g[k - 1].end;
            int64_t interval = g[k].ts - prev_end;
            int cat = g[k].runtime != INT64_MIN && g[k].runtime > prev_end ? HTA_HOST_WAIT
                      : interval < (int64_t)o->delay_ns                          ? HTA_KERNEL_WAIT
                                                                                 : HTA_OTHER;
            st->idle_ns[cat] += interval;
            st->present[cat] = 1;
            iv[cat][n_iv[cat]++] = interval;
        }
        for (int c = 0; c < HTA_IDLE_N_; c++)
            describe(iv[c], n_iv[c], &st->stats[c]);
        i = j;
    }

    /* Temporal breakdown: the union of every GPU row, and of the compute rows. */
    {
        hta_rank rk = {.producer = p, .rank = rank, .filtered = filtered, .rounded = rounded};
        if (n_rows > 0) {
            tu_sort(rows, n_rows, sizeof *rows, row_ts_cmp);
            int64_t first = 0, last = 0;
            int64_t busy = union_time(rows, n_rows, 0, &first, &last);
            rk.has_gpu = 1;
            rk.kernel_ns = last - first;
            rk.idle_ns = rk.kernel_ns - busy;
            rk.compute_ns = union_time(rows, n_rows, 1, NULL, NULL);
            rk.non_compute_ns = rk.kernel_ns - rk.compute_ns - rk.idle_ns;
        }
        if (TU_GROW(out->ranks, *ranks_cap, out->n_ranks + 1))
            goto done;
        out->ranks[out->n_ranks++] = rk;
    }
    rc = 0;
done:
    for (int c = 0; c < HTA_IDLE_N_; c++)
        free(iv[c]);
    free(kern);
    free(rows);
    free(cpu);
    return rc;
}

int hta_analyze(const st_store *s, const hta_opts *opts, hta_result *out, err_msg *err) {
    memset(out, 0, sizeof *out);
    hta_opts o = {0};
    if (opts)
        o = *opts;
    if (o.delay_ns == 0)
        o.delay_ns = HTA_DEF_DELAY_NS;
    /* Distinct ProfilerStep names over the whole store (HTA's symbol table spans all ranks). */
    uint32_t *names = NULL;
    size_t n_names = 0, cap = 0;
    for (size_t l = 0; l < st_lane_count(s); l++) {
        if (st_lane_get(s, l)->kind != ST_LANE_NVTX)
            continue;
        size_t n;
        const st_event *ev = st_lane_events(s, l, &n);
        for (size_t i = 0; i < n; i++) {
            if (strncmp(st_str(s, ev[i].name), "ProfilerStep", 12) != 0)
                continue;
            size_t k = 0;
            while (k < n_names && names[k] != ev[i].name)
                k++;
            if (k < n_names)
                continue;
            if (TU_GROW(names, cap, n_names + 1)) {
                free(names);
                return err_set(err, ERR_NOMEM, "hta: out of memory");
            }
            names[n_names++] = ev[i].name;
        }
    }
    free(names);
    size_t streams_cap = 0, ranks_cap = 0;
    for (size_t p = 0; p < st_producer_count(s); p++)
        if (analyze_producer(s, (uint32_t)p, n_names, &o, out, &streams_cap, &ranks_cap)) {
            hta_result_free(out);
            return err_set(err, ERR_NOMEM, "hta: out of memory");
        }
    return 0;
}

void hta_result_free(hta_result *r) {
    if (r == NULL)
        return;
    free(r->ranks);
    free(r->streams);
    memset(r, 0, sizeof *r);
}
