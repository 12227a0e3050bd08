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
 *   - the rounding itself: HTA reads ts and dur as the file wrote them, into doubles (Python's
 *     json), and rounds ts and the double sum ts + dur. For a ts relative to baseTimeNanoseconds
 *     the doubles keep every ns, so the rounding is done on exact nanoseconds; the two agree but
 *     where the double sum falls a rounding error short of a whole microsecond (none of Qwen's
 *     12,080 rows, nor of the A100 NCCL trace's). For an absolute ts (no base: the importer marks
 *     the process TP_F_TS_ABSOLUTE) HTA's doubles are recomputed from the exact nanoseconds
 *     (round_row), as the file wrote them with three decimals; a file written with more decimals
 *     than ns resolve would differ where the lost digits decide the double.
 *   - a GPU row with a correlation but no host call: HTA links it to row index 0, the file's first
 *     row (with a dur and a cat), whose ts then counts as its launch. The store does not keep the
 *     file's order; here the first ProfilerStep is taken for that row (profilers write it first:
 *     Qwen's 509 such kernels, launched before the step began, are host_wait as in HTA), and with
 *     no ProfilerStep the row has no launch (never host_wait). Differs when the file's first row
 *     is another one.
 *   - negative non_compute_time: rounding gives a sub-microsecond row a negative dur (end < ts),
 *     and such a row alone in the union subtracts from the busy time, so idle + compute can exceed
 *     kernel_time. HTA's get_temporal_breakdown then fails its own assertion (Qwen: -17 us, which
 *     its code computes with assertions off); here the figures are given as computed, with the
 *     count of such rows (hta_rank.negative_rows) for the report to say why.
 *   - ts ties on one stream: HTA's sort_values is not stable, so its own result depends on the
 *     order pandas leaves; here store order (start, then end: the shorter first). Equal rows give
 *     the same figures either way.
 */
#include "hta.h"
#include "grow.h"
#include "hash.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HTA_DEF_DELAY_NS 30000
#define HTA_NAME_CACHE 1024 /* kernel names whose KernelType is remembered (a power of two) */
#define HTA_RADIX_BITS 11
#define HTA_RADIX_MIN 256   /* fewer intervals than this are sorted with qsort */

const char *hta_idle_name(int c) {
    static const char *const n[] = {"host_wait", "kernel_wait", "other"};
    return c >= 0 && c < HTA_IDLE_N_ ? n[c] : "?";
}

/* One GPU row as HTA sees it, copies times (the inner join with the kept host rows). */
typedef struct hrow {
    int64_t ts, end;     /* ns, after HTA's rounding */
    int64_t runtime;     /* ts of the linked host row; INT64_MIN: none */
    uint32_t copies;
    uint8_t compute;     /* KernelType COMPUTATION */
    uint8_t kernel;      /* cat kernel, gpu_memcpy or gpu_memset: not cuda_sync */
} hrow;

typedef struct hcpu {
    uint32_t corr;
    int64_t ts;
} hcpu;

/* The host rows of one correlation: how many, the latest ts (the row HTA links to) and how many
 * survive the ProfilerStep filter. */
typedef struct hlink {
    int64_t last_ts;
    uint32_t n, kept;
} hlink;

/* Correlation -> hlink. Dense (link[corr - base]) when the correlations fill their range well, as
 * profilers number them; else open addressing on keys (0: empty slot; correlation 0 is never a key). */
typedef struct hlinks {
    hlink *link;
    uint32_t *keys; /* NULL when dense */
    uint32_t base;
    size_t size;    /* slots */
    int bits;       /* hashed: log2(size) */
    cm_hash_key key; /* hashed: traces choose the correlations, so the process's key chooses slots */
} hlinks;

/* A GPU lane being read in time order, with its current row. */
typedef struct hlane {
    const st_event *ev;
    size_t n, i;   /* events; the next one to read */
    size_t order;  /* among the producer's GPU lanes: rows with equal ts come in lane order */
    size_t group;  /* its stream: index in the producer's stream groups */
    hrow row;
} hlane;

/* One HTA stream number (one or more lanes): the idle-time breakdown as its rows come. */
typedef struct hgroup {
    int64_t stream;
    uint64_t ops;
    int64_t prev_end;
    int64_t idle_ns[HTA_IDLE_N_];
    int present[HTA_IDLE_N_];
    int64_t *iv[HTA_IDLE_N_]; /* idle intervals by category */
    size_t n_iv[HTA_IDLE_N_], cap_iv[HTA_IDLE_N_];
} hgroup;

/* A union of rows taken in ts order, as HTA's merge of overlapping intervals: a row that starts
 * after the current end opens a new interval (rows with end < ts included). */
typedef struct hunion {
    int64_t busy, cs, ce, first;
    int have;
} hunion;

/* What reading one producer's GPU rows needs. */
typedef struct hprod {
    const st_store *s;
    const hta_opts *o;
    int rounded, filtered;
    int doubles;       /* rounding on HTA's doubles of absolute times (TP_F_TS_ABSOLUTE) */
    int64_t shift;     /* the producer's clock shift: start + shift is the time as written */
    uint64_t negative; /* GPU rows (copies) whose rounded end is before their ts */
    int64_t first_step_start, cut, cut_incl;
    hlinks links;
    uint32_t name_id[HTA_NAME_CACHE];
    int8_t name_compute[HTA_NAME_CACHE]; /* -1: slot empty */
} hprod;

/* The double Python's json (hence HTA) makes of a time written as ns / 1000 us with three
 * decimals: the nearest one, ties to even, as a correctly rounded strtod gives, computed on
 * integers so that no locale or excess precision enters. Above 2^53 us (the year 2255) the double
 * of the whole microseconds is taken. */
static double us_double(int64_t ns) {
    uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    uint64_t q = a / 1000, r = a % 1000;
    double d;
    if (q == 0) {
        d = (double)r / 1000.0; /* two exact doubles: IEEE division rounds once */
    } else if (q >= (1ull << 52)) {
        d = (double)(q + (q < (1ull << 53) && (r > 500 || (r == 500 && (q & 1))))); /* 1 us apart */
    } else {
        /* q has e + 1 bits, so the double keeps j = 52 - e bits of the fraction r / 1000. */
        int j = 52 - (63 - __builtin_clzll(q));
        uint64_t num = r << j, m = num / 1000, rem = num % 1000; /* r < 2^10, j <= 52 */
        m += rem > 500 || (rem == 500 && (m & 1));
        d = (double)q + ldexp((double)m, -j); /* exact: q * 2^j + m fits in 53 bits */
    }
    return ns < 0 ? -d : d;
}

/* HTA's rounding of one row (trace_parser.py round_down_time_stamps): end = ts + dur on the
 * file's doubles, then ts = ceil(ts), end = floor(end). For a ts relative to baseTimeNanoseconds
 * (what profilers write with ns precision: below 2^42 us, a double keeps every ns) it is done on
 * exact nanoseconds, which agrees with HTA but where the double sum ts + dur falls a rounding
 * error short of a whole microsecond that the exact sum reaches. For an absolute ts (no base,
 * about 1.7e15 us: doubles 0.25 us apart) the doubles are HTA's own: a fraction of a
 * microsecond moves by up to 0.125 us before the rounding, enough to move a row's ts or end by
 * a whole microsecond (the V100 trace: 12% of its idle time). */
static void round_row(hprod *c, uint64_t start, uint64_t end, int64_t *ts, int64_t *te) {
    if (c->doubles) {
        int64_t at = (int64_t)start + c->shift;
        double t = us_double(at), e = t + us_double((int64_t)(end - start));
        *ts = (int64_t)ceil(t) * 1000 - c->shift;
        *te = (int64_t)floor(e) * 1000 - c->shift;
    } else {
        *ts = (int64_t)((start + 999) / 1000 * 1000);
        *te = (int64_t)(end / 1000 * 1000);
    }
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

static int event_is_compute(hprod *c, const st_event *e) {
    const st_shape *k = st_ev_shape(c->s, e);
    switch (k->kind) {
    case TP_K_KERNEL: {
        size_t slot = (k->name * 2654435761u) & (HTA_NAME_CACHE - 1);
        if (c->name_compute[slot] < 0 || c->name_id[slot] != k->name) {
            c->name_id[slot] = k->name;
            c->name_compute[slot] = (int8_t)name_is_compute(st_str(c->s, k->name));
        }
        return c->name_compute[slot];
    }
    case TP_K_MEMCPY: /* "Memcpy HtoD (...)" */
    case TP_K_MEMSET: return 0; /* "Memset (Device)" */
    case TP_K_SYNC: /* "Stream Sync", "Event Sync", "Context Sync" hold "Sync"; "Stream Wait Event" not */
        return k->sub == TP_SYNC_STREAM_WAIT_EVENT;
    default: return 0;
    }
}

static int i64_cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorts v[n] ascending (tmp holds n): an LSD radix sort of v - min, as many passes of
 * HTA_RADIX_BITS as max - min needs. */
static void sort_i64(int64_t *v, size_t n, int64_t *tmp) {
    if (n < HTA_RADIX_MIN) {
        cm_sort(v, n, sizeof *v, i64_cmp);
        return;
    }
    int64_t lo = v[0], hi = v[0];
    for (size_t i = 1; i < n; i++) {
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] > hi ? v[i] : hi;
    }
    uint64_t base = (uint64_t)lo, range = (uint64_t)hi - base;
    int64_t *src = v, *dst = tmp;
    for (int shift = 0; shift < 64 && (range >> shift) != 0; shift += HTA_RADIX_BITS) {
        size_t pos[1u << HTA_RADIX_BITS] = {0};
        const uint64_t mask = (1u << HTA_RADIX_BITS) - 1;
        for (size_t i = 0; i < n; i++)
            pos[((uint64_t)src[i] - base) >> shift & mask]++;
        size_t at = 0;
        for (size_t d = 0; d <= mask; d++) {
            size_t k = pos[d];
            pos[d] = at;
            at += k;
        }
        for (size_t i = 0; i < n; i++)
            dst[pos[((uint64_t)src[i] - base) >> shift & mask]++] = src[i];
        int64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != v)
        memcpy(v, src, n * sizeof *v);
}

/* numpy's linear quantile of sorted values (pandas' describe). */
static double quantile(const int64_t *v, size_t n, double q) {
    double h = (double)(n - 1) * q;
    size_t lo = (size_t)h;
    if (lo + 1 >= n)
        return (double)v[n - 1];
    return (double)v[lo] + (h - (double)lo) * (double)(v[lo + 1] - v[lo]);
}

/* pandas' describe() of n intervals (sorted here; tmp holds n). Sums are taken in sorted order. */
static void describe(int64_t *v, size_t n, int64_t *tmp, hta_interval_stats *st) {
    st->count = n;
    st->mean = st->std = st->min = st->q25 = st->q50 = st->q75 = st->max = NAN;
    if (n == 0)
        return;
    sort_i64(v, n, tmp);
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

static int step_kept(const hprod *c, int64_t ts) {
    return c->o->include_last_step ? ts <= c->cut_incl : ts < c->cut;
}

static size_t link_slot(const hlinks *t, uint32_t corr) { return (size_t)cm_hash_u64(&t->key, corr) & (t->size - 1); }

/* The host rows of cpu[n], by correlation. Returns 0 or -1 (out of memory). */
static int links_build(const hprod *c, hlinks *t, const hcpu *cpu, size_t n) {
    memset(t, 0, sizeof *t);
    if (n == 0)
        return 0;
    uint32_t lo = cpu[0].corr, hi = cpu[0].corr;
    for (size_t i = 1; i < n; i++) {
        lo = cpu[i].corr < lo ? cpu[i].corr : lo;
        hi = cpu[i].corr > hi ? cpu[i].corr : hi;
    }
    size_t span = (size_t)(hi - lo) + 1;
    if (span <= 2 * n + 4096) {
        t->base = lo;
        t->size = span;
    } else {
        t->bits = 1;
        while (((size_t)1 << t->bits) < 2 * n)
            t->bits++;
        t->size = (size_t)1 << t->bits;
        cm_hash_key_get(&t->key);
        if ((t->keys = calloc(t->size, sizeof *t->keys)) == NULL)
            return ERR_NOMEM;
    }
    if ((t->link = calloc(t->size, sizeof *t->link)) == NULL) {
        free(t->keys);
        t->keys = NULL;
        return ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        size_t k;
        if (t->keys == NULL) {
            k = cpu[i].corr - t->base;
        } else {
            size_t from = link_slot(t, cpu[i].corr);
            for (k = from; t->keys[k] != 0 && t->keys[k] != cpu[i].corr;)
                k = (k + 1) & (t->size - 1);
            if (((k - from) & (t->size - 1)) > CM_HASH_LONG_PROBE)
                cm_hash_long_probe_note();
            t->keys[k] = cpu[i].corr;
        }
        hlink *l = &t->link[k];
        if (l->n == 0 || cpu[i].ts > l->last_ts)
            l->last_ts = cpu[i].ts;
        l->n++;
        l->kept += step_kept(c, cpu[i].ts);
    }
    return 0;
}

static const hlink *links_find(const hlinks *t, uint32_t corr) {
    if (t->size == 0)
        return NULL;
    if (t->keys == NULL) {
        if (corr < t->base || corr - t->base >= t->size)
            return NULL;
        const hlink *l = &t->link[corr - t->base];
        return l->n ? l : NULL;
    }
    for (size_t k = link_slot(t, corr); t->keys[k] != 0; k = (k + 1) & (t->size - 1))
        if (t->keys[k] == corr)
            return &t->link[k];
    return NULL;
}

static void links_free(hlinks *t) {
    free(t->link);
    free(t->keys);
    memset(t, 0, sizeof *t);
}

/* Reads the lane's next row HTA keeps (a kernel, memcpy, memset or cuda_sync row with at least
 * one copy) into ln->row, linked to its host row (the latest with its correlation) and counted
 * once per kept host row when filtering. Returns 0 at the lane's end. */
static int lane_next(hprod *c, hlane *ln) {
    while (ln->i < ln->n) {
        const st_event *e = &ln->ev[ln->i++];
        unsigned kind = st_ev_kind(c->s, e);
        if (kind != TP_K_KERNEL && kind != TP_K_MEMCPY && kind != TP_K_MEMSET && kind != TP_K_SYNC)
            continue;
        hrow r = {.runtime = INT64_MIN, .copies = 1, .kernel = kind != TP_K_SYNC};
        const hlink *l = e->corr != 0 ? links_find(&c->links, e->corr) : NULL;
        if (l != NULL)
            r.runtime = l->last_ts;
        else if (e->corr != 0 && c->first_step_start != INT64_MAX)
            r.runtime = c->first_step_start; /* HTA's row 0, taken to be the first ProfilerStep */
        if (c->filtered) {
            /* GPU rows are inner-joined with the kept host rows on correlation. */
            r.copies = l != NULL ? l->kept : 0;
            if (r.copies == 0)
                continue;
            if (r.runtime != INT64_MIN && !step_kept(c, r.runtime))
                r.runtime = INT64_MIN; /* the linked row itself was filtered out */
        }
        r.ts = (int64_t)e->start;
        r.end = (int64_t)st_ev_end(c->s, e);
        if (c->rounded)
            round_row(c, e->start, st_ev_end(c->s, e), &r.ts, &r.end);
        c->negative += r.end < r.ts ? r.copies : 0;
        r.compute = (uint8_t)event_is_compute(c, e);
        ln->row = r;
        return 1;
    }
    return 0;
}

static int lane_before(const hlane *a, const hlane *b) {
    return a->row.ts != b->row.ts ? a->row.ts < b->row.ts : a->order < b->order;
}

/* Restores the min-heap h[n] (by ts, then lane order) below position k. */
static void heap_down(hlane **h, size_t n, size_t k) {
    for (;;) {
        size_t m = k, a = 2 * k + 1, b = a + 1;
        if (a < n && lane_before(h[a], h[m]))
            m = a;
        if (b < n && lane_before(h[b], h[m]))
            m = b;
        if (m == k)
            return;
        hlane *t = h[k];
        h[k] = h[m];
        h[m] = t;
        k = m;
    }
}

static void union_add(hunion *u, int64_t ts, int64_t end) {
    if (!u->have || ts > u->ce) {
        if (u->have)
            u->busy += u->ce - u->cs;
        else
            u->first = ts;
        u->cs = ts;
        u->ce = end;
        u->have = 1;
    } else if (end > u->ce) {
        u->ce = end;
    }
}

static int64_t union_busy(const hunion *u) {
    return u->have ? u->busy + u->ce - u->cs : 0;
}

/* One kernel, memcpy or memset row of a stream, in ts order: the idle interval since the previous
 * one's end and its category. Returns 0 or -1 (out of memory). */
static int group_add(hgroup *g, const hrow *r, int64_t delay_ns) {
    if (g->ops > 0) {
        int64_t interval = r->ts - g->prev_end;
        int cat = r->runtime != INT64_MIN && r->runtime > g->prev_end ? HTA_HOST_WAIT
                  : interval < delay_ns                                 ? HTA_KERNEL_WAIT
                                                                        : HTA_OTHER;
        if (CM_GROW(g->iv[cat], g->cap_iv[cat], g->n_iv[cat] + 1))
            return ERR_NOMEM;
        g->idle_ns[cat] += interval;
        g->present[cat] = 1;
        g->iv[cat][g->n_iv[cat]++] = interval;
    }
    g->prev_end = r->end;
    g->ops++;
    return 0;
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

/* The producer's rows by correlation (host rows) and its ProfilerStep window into c. Returns 0 or
 * -1 (out of memory). */
static int read_host(hprod *c, uint32_t p, size_t n_step_names) {
    const st_store *s = c->s;
    hcpu *cpu = NULL;
    size_t n_cpu = 0, cpu_cap = 0;
    int64_t last_step_start = INT64_MIN, last_step_end = INT64_MIN, min_cpu = INT64_MAX, max_cpu_end = INT64_MIN;
    c->first_step_start = INT64_MAX;
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (li->producer != p)
            continue;
        int host_rows = li->kind == ST_LANE_THREAD || (li->kind == ST_LANE_NVTX && li->device == TP_NO_DEVICE) ||
                        (li->kind == ST_LANE_STREAM && stream_of(li, c->o) == -1);
        if (!host_rows)
            continue;
        size_t n;
        const st_event *ev = st_lane_events(s, l, &n);
        if (li->kind != ST_LANE_NVTX && CM_GROW(cpu, cpu_cap, n_cpu + n)) {
            free(cpu);
            return ERR_NOMEM;
        }
        for (size_t i = 0; i < n; i++) {
            const st_event *e = &ev[i];
            if (st_ev_flags(s, e) & ST_EV_OP) /* operators only the viewer holds: HTA's figures as report's */
                continue;
            int64_t ts = (int64_t)e->start, te = (int64_t)st_ev_end(s, e);
            if (c->rounded)
                round_row(c, e->start, st_ev_end(s, e), &ts, &te);
            min_cpu = ts < min_cpu ? ts : min_cpu;
            max_cpu_end = te > max_cpu_end ? te : max_cpu_end;
            if (li->kind == ST_LANE_NVTX) {
                if (strncmp(st_str(s, st_ev_name(s, e)), "ProfilerStep", 12) == 0) {
                    last_step_start = ts > last_step_start ? ts : last_step_start;
                    c->first_step_start = ts < c->first_step_start ? ts : c->first_step_start;
                    last_step_end = te > last_step_end ? te : last_step_end;
                }
                continue;
            }
            if (e->corr != 0)
                cpu[n_cpu++] = (hcpu){e->corr, ts};
        }
    }
    c->filtered = n_step_names >= 2 && n_cpu > 0;
    c->cut = last_step_start != INT64_MIN ? last_step_start : min_cpu;
    c->cut_incl = last_step_end != INT64_MIN ? last_step_end : max_cpu_end;
    int rc = links_build(c, &c->links, cpu, n_cpu);
    free(cpu);
    return rc;
}

/* A producer's GPU lanes and the streams they make up (lanes of one number are one stream for
 * HTA), while its rows are swept. */
typedef struct hsweep {
    hlane *lanes;
    hlane **heap;
    hgroup *groups; /* by stream number */
    size_t n_lanes, n_groups;
} hsweep;

static void sweep_free(hsweep *w) {
    for (size_t g = 0; g < w->n_groups; g++)
        for (int k = 0; k < HTA_IDLE_N_; k++)
            free(w->groups[g].iv[k]);
    free(w->groups);
    free(w->heap);
    free(w->lanes);
}

/* Float timestamps? Any imported event of the producer with a fraction of a microsecond. */
static int has_fractions(const st_store *s, uint32_t p) {
    for (size_t l = 0; l < st_lane_count(s); l++) {
        if (st_lane_get(s, l)->producer != p)
            continue;
        size_t n;
        const st_event *ev = st_lane_events(s, l, &n);
        for (size_t i = 0; i < n; i++)
            if (ev[i].start % 1000 != 0)
                return 1;
    }
    return 0;
}

/* The producer's GPU lanes, grouped into streams by number in ascending order. */
static int sweep_lanes(hsweep *w, const st_store *s, uint32_t p, const hta_opts *o) {
    size_t n_lanes = 0;
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (li->producer == p && li->kind == ST_LANE_STREAM && stream_of(li, o) != -1)
            n_lanes++;
    }
    if (n_lanes == 0)
        return 0;
    w->lanes = calloc(n_lanes, sizeof *w->lanes);
    w->heap = calloc(n_lanes, sizeof *w->heap);
    w->groups = calloc(n_lanes, sizeof *w->groups);
    if (w->lanes == NULL || w->heap == NULL || w->groups == NULL)
        return ERR_NOMEM;
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        int64_t stream = li->producer == p && li->kind == ST_LANE_STREAM ? stream_of(li, o) : -1;
        if (stream == -1)
            continue;
        size_t g = 0;
        while (g < w->n_groups && w->groups[g].stream < stream)
            g++;
        if (g == w->n_groups || w->groups[g].stream != stream) {
            memmove(&w->groups[g + 1], &w->groups[g], (w->n_groups - g) * sizeof *w->groups);
            memset(&w->groups[g], 0, sizeof *w->groups);
            w->groups[g].stream = stream;
            w->n_groups++;
            for (size_t k = 0; k < w->n_lanes; k++)
                w->lanes[k].group += w->lanes[k].group >= g;
        }
        hlane *ln = &w->lanes[w->n_lanes];
        ln->ev = st_lane_events(s, l, &ln->n);
        ln->order = w->n_lanes++;
        ln->group = g;
    }
    return 0;
}

/* Every kept GPU row in ts order (ties: lane order, then store order: start, then end), as HTA's
 * sort by ts: the idle-time breakdown of each stream from its kernel, memcpy and memset rows
 * (cuda_sync rows are left out, as get_idle_time_breakdown's kernel_cats do), and the temporal
 * breakdown from the union of all rows and of the compute rows. */
static int sweep_rows(hsweep *w, hprod *c, hunion *all, hunion *compute) {
    size_t n_heap = 0;
    for (size_t k = 0; k < w->n_lanes; k++)
        if (lane_next(c, &w->lanes[k]))
            w->heap[n_heap++] = &w->lanes[k];
    for (size_t k = n_heap / 2; k-- > 0;)
        heap_down(w->heap, n_heap, k);
    while (n_heap > 0) {
        hlane *ln = w->heap[0];
        const hrow *r = &ln->row;
        for (uint32_t k = 0; k < r->copies; k++) {
            union_add(all, r->ts, r->end);
            if (r->compute)
                union_add(compute, r->ts, r->end);
            if (r->kernel && group_add(&w->groups[ln->group], r, (int64_t)c->o->delay_ns))
                return ERR_NOMEM;
        }
        if (!lane_next(c, ln))
            w->heap[0] = w->heap[--n_heap];
        heap_down(w->heap, n_heap, 0);
    }
    return 0;
}

/* Each stream that ran anything, with its idle time by category and the intervals' statistics. */
static int emit_streams(const hsweep *w, uint32_t p, int32_t rank, hta_result *out, size_t *streams_cap) {
    size_t most = 0;
    for (size_t g = 0; g < w->n_groups; g++)
        for (int k = 0; k < HTA_IDLE_N_; k++)
            most = w->groups[g].n_iv[k] > most ? w->groups[g].n_iv[k] : most;
    int64_t *tmp = NULL;
    if (most > 0 && (tmp = malloc(most * sizeof *tmp)) == NULL)
        return ERR_NOMEM;
    for (size_t g = 0; g < w->n_groups; g++) {
        const hgroup *gr = &w->groups[g];
        if (gr->ops == 0)
            continue;
        if (CM_GROW(out->streams, *streams_cap, out->n_streams + 1)) {
            free(tmp);
            return ERR_NOMEM;
        }
        hta_stream *st = &out->streams[out->n_streams++];
        memset(st, 0, sizeof *st);
        st->producer = p;
        st->rank = rank;
        st->stream = gr->stream;
        st->ops = gr->ops;
        memcpy(st->idle_ns, gr->idle_ns, sizeof st->idle_ns);
        memcpy(st->present, gr->present, sizeof st->present);
        st->present[HTA_OTHER] = 1; /* the first row: no interval, category other */
        for (int k = 0; k < HTA_IDLE_N_; k++)
            describe(gr->iv[k], gr->n_iv[k], tmp, &st->stats[k]);
    }
    free(tmp);
    return 0;
}

static int analyze_producer(const st_store *s, uint32_t p, size_t n_step_names, const hta_opts *o,
                            hta_result *out, size_t *streams_cap, size_t *ranks_cap) {
    const st_producer_info *pi = st_producer_get(s, p);
    /* HTA's rank: distributedInfo.rank, 0 when the trace has none (trace_parser.py). */
    int32_t rank = pi->rank >= 0 ? pi->rank : 0;
    hprod *c = calloc(1, sizeof *c);
    if (c == NULL)
        return ERR_NOMEM;
    c->s = s;
    c->o = o;
    memset(c->name_compute, -1, sizeof c->name_compute);
    c->rounded = has_fractions(s, p);
    c->doubles = c->rounded && (pi->flags & TP_F_TS_ABSOLUTE) != 0;
    c->shift = pi->clock_shift_ns;
    hsweep w = {0};
    hunion all = {0}, compute = {0};
    int rc = ERR_NOMEM;
    if (read_host(c, p, n_step_names) || sweep_lanes(&w, s, p, o) || sweep_rows(&w, c, &all, &compute) ||
        emit_streams(&w, p, rank, out, streams_cap))
        goto done;
    hta_rank rk = {.producer = p, .rank = rank, .filtered = c->filtered, .rounded = c->rounded,
                   .doubles = c->doubles, .negative_rows = c->negative};
    if (all.have) {
        rk.has_gpu = 1;
        rk.kernel_ns = all.ce - all.first;
        rk.idle_ns = rk.kernel_ns - union_busy(&all);
        rk.compute_ns = union_busy(&compute);
        rk.non_compute_ns = rk.kernel_ns - rk.compute_ns - rk.idle_ns;
    }
    if (CM_GROW(out->ranks, *ranks_cap, out->n_ranks + 1))
        goto done;
    out->ranks[out->n_ranks++] = rk;
    rc = 0;
done:
    sweep_free(&w);
    links_free(&c->links);
    free(c);
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
            if ((st_ev_flags(s, &ev[i]) & ST_EV_OP) || strncmp(st_str(s, st_ev_name(s, &ev[i])), "ProfilerStep", 12) != 0)
                continue;
            size_t k = 0;
            while (k < n_names && names[k] != st_ev_name(s, &ev[i]))
                k++;
            if (k < n_names)
                continue;
            if (CM_GROW(names, cap, n_names + 1)) {
                free(names);
                return err_set(err, ERR_NOMEM, "hta: out of memory");
            }
            names[n_names++] = st_ev_name(s, &ev[i]);
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
