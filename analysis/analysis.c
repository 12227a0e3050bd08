/*
 * Analysis (analysis.h): from a committed store to the blocking spans, the GPU idle bubbles and
 * their causes, totals per call site, per-device utilisation and the checks of Nsight Systems'
 * expert rules.
 *
 * One pass over the host lanes collects the blocking spans; one k-way merge per device over its
 * stream lanes gives the union of GPU work, hence the device bubbles and the low-utilisation
 * windows; one pass per stream lane gives the stream bubbles. Correlation ids link a span to its
 * device and a bubble to the call that submitted the work that ended it; only the few correlations
 * that matter are put in a hash set, and each is resolved by one scan, so memory stays about the
 * size of the result, not of the store.
 *
 * The rules follow the Nsight Systems User Guide, "Expert Systems Analysis": cuda_api_sync
 * (synchronization APIs that block the host), cuda_memcpy_sync (synchronous copies that block the
 * host), cuda_memcpy_async (async copies through pageable memory, which the driver runs
 * synchronously), cuda_memset_sync (synchronous memsets), gpu_gaps (a GPU idle longer than a
 * threshold, 500 ms by default, between its first and last operation) and gpu_time_util (that span
 * cut into 30 equal chunks; chunks whose GPU time utilisation is below 50% are reported).
 *
 * This module owns nothing but its result.
 */
#include "analysis.h"
#include "api.h"
#include "busy.h"
#include "cores.h"
#include "grow.h"
#include "radix.h"
#include "u64map.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define AN_DEF_GAP_NS      20000ull       /* 20 us */
#define AN_DEF_RULE_GAP_NS 500000000ull   /* 500 ms */
#define AN_DEF_CHUNKS      30u
#define AN_DEF_UTIL        0.5
#define AN_MAX_UTIL_CHUNKS (1u << 20)     /* utilisation windows per device, at most */

/* ------------------------------------------------------------------------------------------ */
/* Names                                                                                      */
/* ------------------------------------------------------------------------------------------ */

const char *an_block_kind_name(int kind) {
    static const char *const n[] = {"?", "sync", "memcpy", "pageable-memcpy", "memset", "alloc", "query", "other"};
    return kind > 0 && kind < AN_BLOCK_KIND_N_ ? n[kind] : "?";
}

const char *an_cause_name(int cause) {
    static const char *const n[] = {"unattributed", "blocked", "launch", "host"};
    return cause >= 0 && cause < AN_CAUSE_N_ ? n[cause] : "?";
}

const char *an_rule_name(int rule) {
    static const char *const n[] = {"?", "sync-api", "sync-memcpy", "pageable-memcpy", "sync-memset", "gpu-gaps", "low-util"};
    return rule > 0 && rule < AN_RULE_N_ ? n[rule] : "?";
}

const char *an_rule_nsys(int rule) {
    static const char *const n[] = {"?", "cuda_api_sync", "cuda_memcpy_sync", "cuda_memcpy_async", "cuda_memset_sync", "gpu_gaps", "gpu_time_util"};
    return rule > 0 && rule < AN_RULE_N_ ? n[rule] : "?";
}

const char *an_rule_title(int rule) {
    static const char *const n[] = {
        "?",
        "synchronization API calls that blocked the host",
        "synchronous copies that blocked the host",
        "async copies through pageable memory (run synchronously)",
        "synchronous memsets that blocked the host",
        "GPU idle gaps above the threshold",
        "windows of low GPU time utilization"};
    return rule > 0 && rule < AN_RULE_N_ ? n[rule] : "?";
}

int an_block_kind_of_name(const char *api) {
    switch (st_api_class_of(api, (size_t)-1)) {
    case ST_API_SYNC: return AN_BLOCK_SYNC;
    case ST_API_QUERY: return AN_BLOCK_QUERY;
    case ST_API_COPY:
    case ST_API_COPY_WAIT: return AN_BLOCK_MEMCPY;
    case ST_API_COPY_ASYNC: return AN_BLOCK_PAGEABLE;
    case ST_API_SET:
    case ST_API_SET_ASYNC: return AN_BLOCK_MEMSET;
    case ST_API_FREE:
    case ST_API_ALLOC: return AN_BLOCK_ALLOC;
    default: return 0;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* (producer, correlation) keys, sorted, and walked in time order                              */
/* ------------------------------------------------------------------------------------------ */

_Static_assert(sizeof(an_bubble) == 40, "a bubble is 40 bytes: a trace has about one per kernel");

#define POS_NONE UINT64_MAX
#define POS(lane, idx) ((uint64_t)(lane) << 40 | (uint64_t)(idx))
#define POS_LANE(p) ((size_t)((p) >> 40))
#define POS_IDX(p) ((size_t)((p) & ((1ull << 40) - 1)))

static uint64_t ckey(uint32_t producer, uint32_t corr) {
    return (uint64_t)(producer + 1u) << 32 | corr;
}

/* A (process, correlation) key and a value: a bubble's index (launches_of), or the position of the
 * work a blocking call waited for (the wanted correlations). */
typedef struct an_pair {
    uint64_t key, val;
} an_pair;
#define PAIR_TAKEN ((uint64_t)1 << 63) /* in val of a key's first pair: a call was found for it */

static size_t pair_seek(const an_pair *a, size_t n, size_t from, uint64_t key) {
    return cm_seek_sorted(a, n, sizeof *a, offsetof(an_pair, key), from, key);
}

/* The correlations the blocking calls waited on: their keys, sorted and each once, with the
 * position of the work found for each (POS_NONE until then). */
typedef struct an_want {
    an_pair *p;
    size_t n, cap;
} an_want;

static int want_add(an_want *w, uint64_t key) {
    if (CM_GROW(w->p, w->cap, w->n + 1))
        return -1;
    w->p[w->n++] = (an_pair){key, POS_NONE};
    return 0;
}

/* Sorts the keys and keeps each once. */
static void want_seal(an_want *w) {
    cm_radix_sort_inplace_by(w->p, w->n, sizeof *w->p);
    size_t m = 0;
    for (size_t i = 0; i < w->n; i++)
        if (m == 0 || w->p[m - 1].key != w->p[i].key)
            w->p[m++] = w->p[i];
    w->n = m;
}

/* The value of key, or NULL; *at: where the last search ended, the next one's start. */
static uint64_t *want_find(const an_want *w, size_t *at, uint64_t key) {
    *at = pair_seek(w->p, w->n, *at, key);
    return *at < w->n && w->p[*at].key == key ? &w->p[*at].val : NULL;
}


/* ------------------------------------------------------------------------------------------ */
/* The analysis                                                                               */
/* ------------------------------------------------------------------------------------------ */

typedef struct an_ctx {
    const st_store *s;
    an_opts o;
    an_result *r;
    size_t blocks_cap, splits_cap, findings_cap, devices_cap, pieces_cap;
    uint64_t last_credit_key; /* host_credit's last (producer, name) key, and its entry */
    size_t last_credit;
    uint64_t *pend; /* parallel to r->bubbles: POS of the work that ended each */
    size_t pend_room; /* bytes mapped for pend (room_for) */
    uint64_t *prefix_end; /* max block end over blocks[0..i] */
    size_t *chain;        /* the waits of the bubble being attributed, latest start first */
    size_t chain_cap;
} an_ctx;

static uint64_t clip_lo(uint64_t v, uint64_t lo) {
    return v < lo ? lo : v;
}
static uint64_t clip_hi(uint64_t v, uint64_t hi) {
    return v > hi ? hi : v;
}

static int by_start(const void *a, const void *b) {
    const an_block *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* The index in r->devices of a whole-device bubble's device. */
static size_t device_index(const an_result *r, const an_bubble *x) {
    for (size_t i = 0; i < r->n_devices; i++)
        if (r->devices[i].producer == x->producer && r->devices[i].device == x->device)
            return i;
    return r->n_devices;
}

/* Bubbles that start together: by lane (whole-device bubbles last), those of devices in the
 * devices' order. */
static int bubble_tie(const void *a, const void *b, void *ctx) {
    const an_bubble *x = a, *y = b;
    if (x->lane != y->lane)
        return x->lane < y->lane ? -1 : 1;
    if (x->lane != AN_DEVICE_LANE)
        return 0;
    size_t i = device_index(ctx, x), j = device_index(ctx, y);
    return i < j ? -1 : i > j;
}

/* Bubbles [lo, hi) in time order, in place: by start, then by bubble_tie. */
typedef struct bubble_part {
    an_result *r;
    size_t lo, hi;
} bubble_part;

static void *bubble_part_sort(void *arg) {
    const bubble_part *p = arg;
    if (p->hi == p->lo) /* none (the bubbles may be NULL) */
        return NULL;
    an_bubble *b = p->r->bubbles + p->lo;
    cm_radix_sort_inplace_by(b, p->hi - p->lo, sizeof *b);
    cm_sort_runs(b, p->hi - p->lo, sizeof *b, bubble_tie, p->r);
    return NULL;
}

/* A place near the middle of the n bubbles where every start before it is below every start from
 * it on, the bubbles moved in place to make one: split by the first byte of their starts that
 * differs, and the part holding the middle split again while it holds more than a quarter. */
static size_t bubbles_cut(an_bubble *b, size_t n) {
    size_t lo = 0, hi = n, half = n / 2, bounds[257];
    while (hi - lo > n / 4 && cm_radix_partition_by(b + lo, hi - lo, sizeof *b, bounds)) {
        size_t k = 0;
        while (k < 255 && lo + bounds[k + 1] <= half)
            k++;
        size_t a = lo + bounds[k], z = lo + bounds[k + 1];
        lo = a;
        hi = z;
    }
    return half - lo <= hi - half ? lo : hi;
}

/* The bubbles in time order, sorted in place (a merge sort's room, 16 bytes a bubble, would come
 * at the analysis's peak): by start, then by bubble_tie. That is the order a stable sort by start
 * and lane gives the bubbles as they were found (each device's, in the devices' order, then each
 * stream lane's), since a lane's bubbles start apart, and so do a device's: no two compare equal,
 * so however the sort moves them, one order comes out. Where the process may use two threads and
 * the bubbles are many, they are cut near the middle where the starts before are all below those
 * after (bubbles_cut), and the later part sorted on a thread of its own. */
static void sort_bubbles(an_result *r) {
    size_t n = r->n_bubbles, cut = n < AN_SORT_TWO_LEAST || cm_threads(0) < 2 ? 0 : bubbles_cut(r->bubbles, n);
    bubble_part first = {r, 0, cut}, later = {r, cut, n};
    pthread_t th;
    int on_thread = cut > 0 && cut < n && pthread_create(&th, NULL, bubble_part_sort, &later) == 0;
    if (!on_thread) {
        first.hi = n;
        later.lo = n;
    }
    bubble_part_sort(&first);
    if (on_thread)
        pthread_join(th, NULL);
}

static an_device *device_get(an_ctx *c, uint32_t producer, uint16_t device) {
    an_result *r = c->r;
    for (size_t i = 0; i < r->n_devices; i++)
        if (r->devices[i].producer == producer && r->devices[i].device == device)
            return &r->devices[i];
    if (CM_GROW(r->devices, c->devices_cap, r->n_devices + 1))
        return NULL;
    an_device *d = &r->devices[r->n_devices++];
    memset(d, 0, sizeof *d);
    d->producer = producer;
    d->device = device;
    d->span_ns = an_process_span(c->s, producer, r->t0, r->t1);
    return d;
}

/* The one device of a producer, TP_NO_DEVICE when it has none or several. */
static uint16_t only_device(const an_result *r, uint32_t producer) {
    uint16_t dev = TP_NO_DEVICE;
    for (size_t i = 0; i < r->n_devices; i++) {
        if (r->devices[i].producer != producer)
            continue;
        if (dev != TP_NO_DEVICE)
            return TP_NO_DEVICE;
        dev = r->devices[i].device;
    }
    return dev;
}

static int collect_blocks(an_ctx *c, an_want *want) {
    const st_store *s = c->s;
    an_result *r = c->r;
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (li->kind != ST_LANE_THREAD)
            continue;
        size_t n;
        const st_event *ev = st_lane_events(s, l, &n);
        uint64_t covered = 0; /* the thread's blocked time is a union: nested calls count once */
        for (size_t i = 0; i < n; i++) {
            const st_event *e = &ev[i];
            if (st_ev_kind(s, e) != TP_K_API || st_ev_end(s, e) <= r->t0 || e->start >= r->t1)
                continue;
            r->api_calls++;
            if (!(st_ev_flags(s, e) & TP_F_BLOCKING))
                continue;
            if (r->n_blocks >= AN_NONE || CM_GROW(r->blocks, c->blocks_cap, r->n_blocks + 1))
                return ERR_NOMEM;
            an_block *b = &r->blocks[r->n_blocks++];
            memset(b, 0, sizeof *b);
            b->lane = l;
            b->index = i;
            b->start = clip_lo(e->start, r->t0);
            b->end = clip_hi(st_ev_end(s, e), r->t1);
            b->name = st_ev_name(s, e);
            b->callsite = st_ev_value(s, e);
            b->producer = li->producer;
            b->device = st_event_device(s, e);
            b->kind = an_block_kind_of_name(st_str(s, st_ev_name(s, e)));
            if (b->kind == 0)
                b->kind = AN_BLOCK_OTHER;
            uint64_t from = b->start > covered ? b->start : covered;
            b->own_ns = b->end > from ? b->end - from : 0;
            if (b->end > covered)
                covered = b->end;
            r->blocked_ns += b->own_ns;
            if (e->corr != 0 && want_add(want, ckey(li->producer, e->corr)))
                return ERR_NOMEM;
        }
    }
    want_seal(want);
    cm_sort(r->blocks, r->n_blocks, sizeof *r->blocks, by_start);
    return 0;
}

/* Resolves the wanted correlations against the lanes of one kind (GPU work or host calls): a
 * lane's correlations grow with time, so each search starts where the one before ended. */
static void resolve(const st_store *s, an_want *want, st_lane_kind kind) {
    if (want->n == 0)
        return;
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (li->kind != kind)
            continue;
        size_t n, at = 0;
        const st_event *ev = st_lane_events(s, l, &n);
        for (size_t i = 0; i < n; i++) {
            if (ev[i].corr == 0)
                continue;
            uint64_t *v = want_find(want, &at, ckey(li->producer, ev[i].corr));
            if (v == NULL)
                continue;
            /* Prefer GPU work over a GPU-side sync record with the same correlation. */
            if (*v == POS_NONE) {
                *v = POS(l, i);
            } else if (kind == ST_LANE_STREAM && an_is_gpu_work(s, &ev[i])) {
                size_t nn;
                if (!an_is_gpu_work(s, &st_lane_events(s, POS_LANE(*v), &nn)[POS_IDX(*v)]))
                    *v = POS(l, i);
            }
        }
    }
}

#define AN_POPULATE 4096 /* bubbles whose pages are made at once, ahead of them (add_bubble) */

/* Room for n elements of elem bytes in the array at *p, mapped apart (cm_big_grow; *room: its
 * bytes): the bubbles grow to a third or more of the analysis's memory, and arrays grown on the
 * heap would leave the blocks they outgrew behind, resident, where nothing else of the analysis
 * fits. 0, or ERR_NOMEM with *p as it was. */
static int room_for(void **p, size_t *room, size_t n, size_t elem) {
    return n > SIZE_MAX / elem ? ERR_NOMEM : cm_big_grow(p, room, n * elem);
}

/* A bubble [gs, ge) on a stream lane (AN_DEVICE_LANE: the whole device) that the work at
 * (next_lane, next_idx) ended. */
static int add_bubble(an_ctx *c, uint32_t producer, uint16_t device, uint32_t lane, uint64_t gs, uint64_t ge,
                      size_t next_lane, size_t next_idx) {
    an_result *r = c->r;
    if (room_for((void **)&r->bubbles, &r->bubbles_room, r->n_bubbles + 1, sizeof *r->bubbles) ||
        room_for((void **)&c->pend, &c->pend_room, r->n_bubbles + 1, sizeof *c->pend))
        return ERR_NOMEM;
    cm_big_populate_ahead(r->bubbles, r->n_bubbles, r->bubbles_room / sizeof *r->bubbles, sizeof *r->bubbles,
                          AN_POPULATE);
    cm_big_populate_ahead(c->pend, r->n_bubbles, c->pend_room / sizeof *c->pend, sizeof *c->pend, AN_POPULATE);
    r->bubbles[r->n_bubbles] = (an_bubble){.start = gs,
                                           .end = ge,
                                           .producer = producer,
                                           .lane = lane,
                                           .block = AN_NONE,
                                           .split = AN_NONE,
                                           .launch_lane = AN_NONE,
                                           .device = device};
    c->pend[r->n_bubbles] = POS(next_lane, next_idx);
    r->n_bubbles++;
    return 0;
}

/* Per-device low-utilisation accounting: busy time per chunk of [first, last). */
typedef struct util_acc {
    uint64_t first, len; /* chunk length */
    size_t n;
    uint64_t *busy;
} util_acc;

static void util_add(util_acc *u, uint64_t a, uint64_t b) {
    if (u->busy == NULL || b <= a)
        return;
    while (a < b) {
        size_t k = (size_t)((a - u->first) / u->len);
        if (k >= u->n)
            k = u->n - 1;
        uint64_t ce = k == u->n - 1 ? b : u->first + (uint64_t)(k + 1) * u->len;
        uint64_t e = b < ce ? b : ce;
        u->busy[k] += e - a;
        if (e == a)
            break;
        a = e;
    }
}

static int add_finding(an_ctx *c, const an_finding *f) {
    an_result *r = c->r;
    if (CM_GROW(r->findings, c->findings_cap, r->n_findings + 1))
        return ERR_NOMEM;
    r->findings[r->n_findings++] = *f;
    return 0;
}

/* The device's records in range, and the first start and last end of its work; 0 when it has
 * no work in range. */
static int device_counts(an_ctx *c, an_device *d) {
    const st_store *s = c->s;
    const an_result *r = c->r;
    uint64_t first = UINT64_MAX, last = 0;
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (li->kind != ST_LANE_STREAM || li->producer != d->producer || li->device != d->device)
            continue;
        size_t n;
        const st_event *ev = st_lane_events(s, l, &n);
        for (size_t i = 0; i < n; i++) {
            const st_event *e = &ev[i];
            if (st_ev_end(s, e) <= r->t0 || e->start >= r->t1)
                continue;
            d->kernels += st_ev_kind(s, e) == TP_K_KERNEL;
            d->copies += st_ev_kind(s, e) == TP_K_MEMCPY;
            d->memsets += st_ev_kind(s, e) == TP_K_MEMSET;
            d->syncs += st_ev_kind(s, e) == TP_K_SYNC;
            if (!an_is_gpu_work(s, e))
                continue;
            uint64_t a = clip_lo(e->start, r->t0), b = clip_hi(st_ev_end(s, e), r->t1);
            first = a < first ? a : first;
            last = b > last ? b : last;
        }
    }
    if (first == UINT64_MAX)
        return 0;
    d->first = first;
    d->last = last;
    return 1;
}

/* The union of the device's work: its busy time, its bubbles, the gaps rule and the busy time
 * per utilisation chunk. */
static int device_merge(an_ctx *c, an_device *d, util_acc *u) {
    an_result *r = c->r;
    an_busy m;
    if (an_busy_init(&m, c->s, d->producer, d->device, r->t0, SIZE_MAX))
        return ERR_NOMEM;
    an_finding gaps = {.rule = AN_RULE_GPU_GAPS, .producer = d->producer, .device = d->device};
    size_t worst_gap_bubble = SIZE_MAX;
    an_busy_gap g;
    while (an_busy_step(&m, r->t1, NULL, &g) == AN_BUSY_GAP) {
        util_add(u, g.busy_s, g.start);
        uint64_t gap = g.end - g.start;
        if (gap < c->o.gap_ns)
            continue;
        if (add_bubble(c, d->producer, d->device, AN_DEVICE_LANE, g.start, g.end, g.lane, g.index)) {
            an_busy_free(&m);
            return ERR_NOMEM;
        }
        if (gap >= c->o.rule_gap_ns) {
            gaps.count++;
            gaps.total_ns += gap;
            if (gap > gaps.max_ns) {
                gaps.max_ns = gap;
                gaps.start = g.start;
                gaps.end = g.end;
                worst_gap_bubble = r->n_bubbles - 1;
            }
        }
    }
    uint64_t os, oe;
    if (an_busy_open(&m, r->t1, &os, &oe))
        util_add(u, os, oe);
    d->busy_ns = an_busy_total(&m, r->t1);
    d->idle_ns = d->span_ns > d->busy_ns ? d->span_ns - d->busy_ns : 0;
    an_busy_free(&m);
    if (gaps.count == 0)
        return 0;
    /* The call site comes later, when the worst gap's cause is known: keep its bubble. */
    gaps.callsite = worst_gap_bubble; /* replaced in finish_findings */
    return add_finding(c, &gaps);
}

static int chunk_low(const an_ctx *c, const util_acc *u, size_t k, uint64_t last, uint64_t *cs, uint64_t *ce) {
    *cs = u->first + (uint64_t)k * u->len;
    *ce = k == u->n - 1 ? last : *cs + u->len;
    return *ce > *cs && (double)u->busy[k] < c->o.low_util_threshold * (double)(*ce - *cs);
}

/* Low-utilisation windows: runs of adjacent chunks below the threshold, one finding each. */
static int low_util_findings(an_ctx *c, const an_device *d, const util_acc *u) {
    uint64_t cs, ce;
    for (size_t k = 0; k < u->n;) {
        if (!chunk_low(c, u, k, d->last, &cs, &ce)) {
            k++;
            continue;
        }
        an_finding f = {.rule = AN_RULE_LOW_UTIL, .producer = d->producer, .device = d->device, .start = cs};
        uint64_t busy = 0;
        for (; k < u->n && chunk_low(c, u, k, d->last, &cs, &ce); k++) {
            busy += u->busy[k];
            f.count++;
            f.end = ce;
        }
        f.total_ns = (f.end - f.start) - busy; /* idle time in the window */
        f.max_ns = busy;                      /* busy time in the window */
        if (add_finding(c, &f))
            return ERR_NOMEM;
    }
    return 0;
}

/* The device pass: union of work, device bubbles, gaps rule, utilisation windows. */
static int device_pass(an_ctx *c, an_device *d) {
    if (!device_counts(c, d)) {
        d->idle_ns = d->span_ns;
        d->idle_by_cause[0] = d->span_ns;
        return 0;
    }
    util_acc u = {0};
    unsigned chunks = c->o.util_chunks;
    if (d->last > d->first) {
        uint64_t span = d->last - d->first;
        /* ceilings without overflow: a hostile trace may span 2^64 ns */
        u.len = c->o.low_util_window_ns ? c->o.low_util_window_ns : span / chunks + (span % chunks != 0);
        if (u.len == 0)
            u.len = 1;
        if (span / u.len >= AN_MAX_UTIL_CHUNKS) /* a window too small for the span: widen it */
            u.len = span / (AN_MAX_UTIL_CHUNKS - 1) + 1;
        u.n = (size_t)(span / u.len + (span % u.len != 0));
        u.first = d->first;
        if ((u.busy = calloc(u.n, sizeof *u.busy)) == NULL)
            return ERR_NOMEM;
    }
    int rc = device_merge(c, d, &u) == 0 && low_util_findings(c, d, &u) == 0 ? 0 : -1;
    free(u.busy);
    return rc;
}

static int stream_pass(an_ctx *c, size_t l) {
    const st_store *s = c->s;
    an_result *r = c->r;
    const st_lane_info *li = st_lane_get(s, l);
    size_t n;
    const st_event *ev = st_lane_events(s, l, &n);
    uint64_t cur_e = 0;
    int have = 0;
    for (size_t i = 0; i < n; i++) {
        const st_event *e = &ev[i];
        if (!an_is_gpu_work(s, e) || st_ev_end(s, e) <= r->t0 || e->start >= r->t1)
            continue;
        uint64_t a = clip_lo(e->start, r->t0), b = clip_hi(st_ev_end(s, e), r->t1);
        if (have && a > cur_e && a - cur_e >= c->o.gap_ns &&
            add_bubble(c, li->producer, li->device, (uint32_t)l, cur_e, a, l, i))
            return ERR_NOMEM;
        if (!have || b > cur_e)
            cur_e = b;
        have = 1;
    }
    return 0;
}

/* The time in [lo, hi) that the blocks at idx[0..n) (latest start first) cover, each instant once
 * (a driver call inside a runtime call, a wait inside another). */
static uint64_t waits_cover(const an_result *r, const size_t *idx, size_t n, uint64_t lo, uint64_t hi) {
    uint64_t sum = 0, cs = 0, ce = 0;
    int open = 0;
    for (size_t j = n; j-- > 0;) { /* by start */
        const an_block *bl = &r->blocks[idx[j]];
        uint64_t a = clip_lo(bl->start, lo), e = clip_hi(bl->end, hi);
        if (e <= a)
            continue;
        if (open && a <= ce) {
            if (e > ce)
                ce = e;
            continue;
        }
        if (open)
            sum += ce - cs;
        cs = a;
        ce = e;
        open = 1;
    }
    return open ? sum + ce - cs : sum;
}

/* What of a bubble [start, end) a wait costs, the waits of its chain running from first to last
 * (which ended before the submission at L of the work that ended the bubble) and covering waited
 * of the bubble between them. The idle while the host waited is the wait's. The idle while the
 * host was busy between the waits and after the last is, up to the GPU time the waits held the
 * host back for (the work the GPU still ran after the first wait began, before the bubble): without
 * the wait the host would have gone on that much sooner and queued work behind it. The rest is the
 * host's own: idle before the wait began (the GPU ran dry first), and host time between and after
 * the waits beyond what they held back; from the submission on, launch latency. So a wait that held
 * the host for a 100 ms step costs the 25 ms of host work after it, one that found the GPU idle
 * costs its own length, and two short waits found idle with 40 ms of host work between them cost
 * their own lengths. The share is placed to end where the last wait ended, or past it by what the
 * waits held back beyond the host's time between them. */
static an_wait_split stall_share(const an_bubble *b, uint64_t first, uint64_t last, uint64_t waited, uint64_t L,
                                 uint64_t prev_end) {
    uint64_t from = first > b->start ? first : b->start;
    uint64_t to = last < b->end ? last : b->end;
    if (from > b->end)
        from = b->end;
    if (to < from)
        to = from;
    if (waited > to - from)
        waited = to - from;
    /* the GPU's work while the host waited: from the wait's start (or the end of the bubble before,
     * if later) to this bubble; gaps too short to be bubbles count as work */
    uint64_t since = first > prev_end ? first : prev_end;
    uint64_t held = since < b->start ? b->start - since : 0;
    uint64_t between = to - from - waited; /* the host busy between the waits */
    uint64_t cover = held < between ? held : between;
    held -= cover;
    uint64_t after = b->end - to;
    an_wait_split w = {to - waited - cover, to + (held < after ? held : after), 0};
    w.launch_from = L != UINT64_MAX && L > w.block_to && L < b->end ? L : b->end;
    return w;
}

an_wait_split an_bubble_parts(const an_result *r, const an_bubble *x) {
    if (x->cause == AN_CAUSE_BLOCK && x->split < r->n_splits)
        return r->splits[x->split];
    return (an_wait_split){x->end, x->end, x->end};
}

void an_bubble_split(const an_result *r, const an_bubble *x, uint64_t a, uint64_t b, uint64_t out[AN_CAUSE_N_]) {
    if (x->cause <= 0 || x->cause >= AN_CAUSE_N_)
        return;
    uint64_t s[5] = {x->start, x->end, x->end, x->end, x->end};
    int c[4] = {x->cause, 0, 0, 0};
    if (x->cause == AN_CAUSE_BLOCK) {
        an_wait_split w = an_bubble_parts(r, x);
        s[1] = w.block_from;
        s[2] = w.block_to;
        s[3] = w.launch_from;
        c[0] = AN_CAUSE_HOST;
        c[1] = AN_CAUSE_BLOCK;
        c[2] = AN_CAUSE_HOST;
        c[3] = AN_CAUSE_LAUNCH;
    }
    for (int i = 0; i < 4; i++) {
        uint64_t lo = s[i] > a ? s[i] : a, hi = s[i + 1] < b ? s[i + 1] : b;
        if (c[i] > 0 && hi > lo)
            out[c[i]] += hi - lo;
    }
}

/* The first of the blocks (sorted by start) that starts at t or later, searched from where the
 * bubble before left off. */
static size_t blocks_starting_at(const an_result *r, size_t from, uint64_t t) {
    return cm_seek_sorted(r->blocks, r->n_blocks, sizeof *r->blocks, offsetof(an_block, start), from, t);
}

/* The blocking span of the call that submitted the work ending bubble b (pos, its start L), when
 * that call blocked the host and still held it when the bubble began; else SIZE_MAX. */
static size_t submitting_wait(const an_result *r, uint64_t pos, uint64_t L, const an_bubble *b) {
    if (pos == POS_NONE || L == UINT64_MAX || L >= b->end)
        return SIZE_MAX;
    for (size_t i = blocks_starting_at(r, 0, L); i < r->n_blocks && r->blocks[i].start == L; i++)
        if (r->blocks[i].lane == POS_LANE(pos) && r->blocks[i].index == POS_IDX(pos) &&
            r->blocks[i].producer == b->producer)
            return r->blocks[i].end > b->start ? i : SIZE_MAX;
    return SIZE_MAX;
}

/* Gives each bubble its cause, from the launch time of the work that ended it and the blocking
 * spans that overlap it. 0 or ERR_NOMEM. */
static int attribute(an_ctx *c) {
    const st_store *s = c->s;
    an_result *r = c->r;
    size_t blocks_from = 0;
    for (size_t k = 0; k < r->n_bubbles; k++) {
        an_bubble *b = &r->bubbles[k];
        const an_bubble *p = k > 0 ? &r->bubbles[k - 1] : NULL; /* a row's bubbles come in time order */
        uint64_t prev_end = p != NULL && p->producer == b->producer && p->device == b->device && p->lane == b->lane
                                ? p->end
                                : 0;
        size_t nn;
        uint64_t L = UINT64_MAX; /* when the host submitted the work that ended the bubble */
        const uint64_t *v = &c->pend[k]; /* that submission (launches_of) */
        if (*v != POS_NONE)
            L = st_lane_events(s, POS_LANE(*v), &nn)[POS_IDX(*v)].start;
        /* Blocks with start < b->end whose end >= b->start; the latest ending one that ended
         * before the submission wins. */
        size_t lo = blocks_from = blocks_starting_at(r, blocks_from, b->end);
        b->launch_lane = *v != POS_NONE ? (uint32_t)POS_LANE(*v) : AN_NONE;
        size_t best = SIZE_MAX, n_chain = 0;
        uint64_t limit = L != UINT64_MAX ? L : b->end, first = UINT64_MAX;
        for (size_t i = lo; i-- > 0;) {
            if (c->prefix_end[i] < b->start)
                break;
            const an_block *bl = &r->blocks[i];
            if (bl->producer != b->producer || bl->end < b->start || bl->end > limit)
                continue;
            if (bl->device != TP_NO_DEVICE && bl->device != b->device)
                continue;
            if (CM_GROW(c->chain, c->chain_cap, n_chain + 1))
                return ERR_NOMEM;
            c->chain[n_chain++] = i;
            if (best == SIZE_MAX || bl->end > r->blocks[best].end)
                best = i;
            if (bl->start < first)
                first = bl->start;
        }
        if (best != SIZE_MAX) {
            if (r->n_splits >= AN_NONE || CM_GROW(r->splits, c->splits_cap, r->n_splits + 1))
                return ERR_NOMEM;
            b->cause = AN_CAUSE_BLOCK;
            b->block = (uint32_t)best;
            b->split = (uint32_t)r->n_splits;
            uint64_t last = r->blocks[best].end;
            uint64_t waited = waits_cover(r, c->chain, n_chain, clip_lo(first, b->start), clip_hi(last, b->end));
            r->splits[r->n_splits++] = stall_share(b, first, last, waited, L, prev_end);
        } else if ((best = submitting_wait(r, *v, L, b)) != SIZE_MAX) {
            /* no wait ended in the bubble (those come first: their share, then launch latency), and
             * the work was submitted by a call that holds the host until it is done (a synchronous
             * copy through pageable memory, staged before its transfer starts): the GPU idle in
             * the call, before its work began, is its cost; before the call, the host's */
            if (r->n_splits >= AN_NONE || CM_GROW(r->splits, c->splits_cap, r->n_splits + 1))
                return ERR_NOMEM;
            b->cause = AN_CAUSE_BLOCK;
            b->block = (uint32_t)best;
            b->split = (uint32_t)r->n_splits;
            uint64_t from = L > b->start ? L : b->start, to = r->blocks[best].end < b->end ? r->blocks[best].end : b->end;
            r->splits[r->n_splits++] = (an_wait_split){from, to, to}; /* after the call: launch latency */
        } else if (L != UINT64_MAX && L > b->start) {
            b->cause = AN_CAUSE_HOST;
        } else {
            b->cause = AN_CAUSE_LAUNCH;
        }
    }
    return 0;
}

typedef struct site_key {
    uint32_t producer;
    uint64_t callsite;
    uint32_t name;
} site_key;

static int site_cmp(const void *a, const void *b) {
    const an_site *x = a, *y = b;
    if (x->total_ns != y->total_ns)
        return x->total_ns > y->total_ns ? -1 : 1;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    if (x->producer != y->producer)
        return x->producer < y->producer ? -1 : 1;
    if (x->callsite != y->callsite)
        return x->callsite < y->callsite ? -1 : 1;
    return x->name < y->name ? -1 : x->name > y->name;
}

/* Groups blocks by (producer, call site), or (producer, API name) when no call site was taken. */
static int build_sites(an_ctx *c) {
    an_result *r = c->r;
    cm_u64map idx = {0};
    size_t cap = 0;
    for (size_t i = 0; i < r->n_blocks; i++) {
        const an_block *b = &r->blocks[i];
        uint64_t key = b->callsite ? (uint64_t)b->callsite * 2 + 1 : ((uint64_t)b->producer << 33 | (uint64_t)b->name << 1);
        key = key * 0x9e3779b97f4a7c15ull + b->producer + 1;
        if (key == 0)
            key = 1;
        uint64_t *v = cm_u64map_get_or_add(&idx, key, POS_NONE, NULL);
        if (v == NULL) {
            cm_u64map_free(&idx);
            return ERR_NOMEM;
        }
        if (*v == POS_NONE) {
            if (CM_GROW(r->sites, cap, r->n_sites + 1)) {
                cm_u64map_free(&idx);
                return ERR_NOMEM;
            }
            an_site *st = &r->sites[r->n_sites];
            memset(st, 0, sizeof *st);
            st->producer = b->producer;
            st->callsite = b->callsite;
            st->name = b->name;
            st->kind = b->kind;
            *v = r->n_sites++;
        }
        an_site *st = &r->sites[*v];
        uint64_t d = b->end - b->start;
        st->count++;
        st->total_ns += d;
        st->max_ns = d > st->max_ns ? d : st->max_ns;
        st->gpu_idle_ns += b->gpu_idle_ns;
    }
    cm_u64map_free(&idx);
    uint64_t wall = r->t1 > r->t0 ? r->t1 - r->t0 : 0;
    for (size_t i = 0; i < r->n_sites; i++)
        r->sites[i].wall_share = wall ? (double)r->sites[i].total_ns / (double)wall : 0.0;
    cm_sort(r->sites, r->n_sites, sizeof *r->sites, site_cmp);
    return 0;
}

/* One finding per (rule, producer, call site or name) for the call rules. */
static int call_findings(an_ctx *c) {
    an_result *r = c->r;
    for (size_t i = 0; i < r->n_sites; i++) {
        const an_site *st = &r->sites[i];
        int rule = st->kind == AN_BLOCK_SYNC ? AN_RULE_SYNC_API
                   : st->kind == AN_BLOCK_MEMCPY ? AN_RULE_SYNC_MEMCPY
                   : st->kind == AN_BLOCK_PAGEABLE ? AN_RULE_PAGEABLE_MEMCPY
                   : st->kind == AN_BLOCK_MEMSET ? AN_RULE_SYNC_MEMSET
                   : 0;
        if (rule == 0)
            continue;
        an_finding f = {.rule = rule, .kind = st->kind, .callsite = st->callsite, .name = st->name,
                        .producer = st->producer, .device = TP_NO_DEVICE, .count = st->count,
                        .total_ns = st->total_ns, .max_ns = st->max_ns};
        /* The worst instance, and the device when all of the site's spans agree. */
        int dev_set = 0;
        for (size_t k = 0; k < r->n_blocks; k++) {
            const an_block *b = &r->blocks[k];
            if (b->producer != st->producer || b->callsite != st->callsite || (st->callsite == 0 && b->name != st->name))
                continue;
            if (b->end - b->start == st->max_ns && f.end == 0) {
                f.start = b->start;
                f.end = b->end;
            }
            if (!dev_set) {
                f.device = b->device;
                dev_set = 1;
            } else if (f.device != b->device) {
                f.device = TP_NO_DEVICE;
            }
        }
        if (add_finding(c, &f))
            return ERR_NOMEM;
    }
    return 0;
}

/* Findings by rule; the call rules and gaps worst first, low-utilisation windows per GPU in time
 * order (a timeline reads them left to right; the report names the worst apart). */
static int finding_cmp(const void *a, const void *b) {
    const an_finding *x = a, *y = b;
    if (x->rule != y->rule)
        return x->rule < y->rule ? -1 : 1;
    if (x->rule == AN_RULE_LOW_UTIL) {
        if (x->producer != y->producer)
            return x->producer < y->producer ? -1 : 1;
        if (x->device != y->device)
            return x->device < y->device ? -1 : 1;
        return x->start < y->start ? -1 : x->start > y->start;
    }
    if (x->total_ns != y->total_ns)
        return x->total_ns > y->total_ns ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The options with their defaults filled in. */
static an_opts opts_with_defaults(const an_opts *opts) {
    an_opts o = opts ? *opts : (an_opts){0};
    if (o.gap_ns == 0)
        o.gap_ns = AN_DEF_GAP_NS;
    if (o.rule_gap_ns == 0)
        o.rule_gap_ns = AN_DEF_RULE_GAP_NS;
    if (o.util_chunks == 0)
        o.util_chunks = AN_DEF_CHUNKS;
    if (!(o.low_util_threshold > 0))
        o.low_util_threshold = AN_DEF_UTIL;
    return o;
}

/* The blocking spans, each on the device its wait was for, and their running maximum end. */
static int blocks_phase(an_ctx *c, an_want *want_gpu) {
    const st_store *s = c->s;
    an_result *out = c->r;
    /* Devices: every (producer, device) with a stream lane, and those the store describes. */
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (li->kind == ST_LANE_STREAM && device_get(c, li->producer, li->device) == NULL)
            return ERR_NOMEM;
    }
    if (collect_blocks(c, want_gpu))
        return ERR_NOMEM;
    resolve(s, want_gpu, ST_LANE_STREAM);
    size_t at = 0; /* blocks come by start, and their correlations mostly grow with it */
    for (size_t i = 0; i < out->n_blocks; i++) {
        an_block *b = &out->blocks[i];
        size_t nn;
        const st_event *e = &st_lane_events(s, b->lane, &nn)[b->index];
        const uint64_t *v = e->corr ? want_find(want_gpu, &at, ckey(b->producer, e->corr)) : NULL;
        if (v != NULL && *v != POS_NONE)
            b->device = st_lane_get(s, POS_LANE(*v))->device;
        if (b->device == TP_NO_DEVICE)
            b->device = only_device(out, b->producer);
    }
    c->prefix_end = malloc((out->n_blocks + 1) * sizeof *c->prefix_end);
    if (c->prefix_end == NULL)
        return ERR_NOMEM;
    for (size_t i = 0; i < out->n_blocks; i++)
        c->prefix_end[i] = i && c->prefix_end[i - 1] > out->blocks[i].end ? c->prefix_end[i - 1] : out->blocks[i].end;
    return 0;
}

/* The bubbles (device ones first: *n_device_bubbles of them) and their causes. */
/* Turns each bubble's pend (the work that ended it) into the host call that submitted that work:
 * the first call of its process with the work's correlation id, in lane order and then time
 * order; POS_NONE when there is none. The bubbles' keys are sorted in place (16 bytes a bubble)
 * and each thread lane's calls walk them: a hash map of the keys held two to four times that. 0 or
 * ERR_NOMEM. */
static int launches_of(an_ctx *c) {
    const st_store *s = c->s;
    an_result *r = c->r;
    size_t nb = r->n_bubbles, n = 0;
    an_pair *k = cm_big_alloc(nb * sizeof *k);
    if (k == NULL)
        return ERR_NOMEM;
    for (size_t b = 0; b < nb; b++) {
        size_t nn;
        const st_event *next = &st_lane_events(s, POS_LANE(c->pend[b]), &nn)[POS_IDX(c->pend[b])];
        if (next->corr)
            k[n++] = (an_pair){ckey(r->bubbles[b].producer, next->corr), b};
        c->pend[b] = POS_NONE;
    }
    cm_radix_sort_inplace_by(k, n, sizeof *k); /* the bubbles of one key all get its call */
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (li->kind != ST_LANE_THREAD)
            continue;
        size_t ne, at = 0;
        const st_event *ev = st_lane_events(s, l, &ne);
        for (size_t i = 0; i < ne; i++) {
            if (ev[i].corr == 0)
                continue;
            uint64_t key = ckey(li->producer, ev[i].corr);
            at = pair_seek(k, n, at, key);
            if (at == n || k[at].key != key || (k[at].val & PAIR_TAKEN))
                continue;
            for (size_t q = at; q < n && k[q].key == key; q++)
                c->pend[k[q].val & ~PAIR_TAKEN] = POS(l, i);
            k[at].val |= PAIR_TAKEN;
        }
    }
    cm_big_free(k, nb * sizeof *k);
    return 0;
}

static int bubbles_phase(an_ctx *c, size_t *n_device_bubbles) {
    const st_store *s = c->s;
    an_result *out = c->r;
    size_t n_dev = out->n_devices;
    if (st_lane_count(s) >= AN_NONE) /* lanes are 32-bit in the bubbles */
        return ERR_NOMEM;
    for (size_t i = 0; i < n_dev; i++)
        if (device_pass(c, &out->devices[i]))
            return ERR_NOMEM;
    *n_device_bubbles = out->n_bubbles;
    for (size_t l = 0; l < st_lane_count(s); l++)
        if (st_lane_get(s, l)->kind == ST_LANE_STREAM && stream_pass(c, l))
            return ERR_NOMEM;
    int rc = launches_of(c) == 0 ? attribute(c) : ERR_NOMEM;
    /* when the work that ended each bubble was submitted, and by whom, is in the bubbles now */
    cm_big_free(c->pend, c->pend_room);
    c->pend = NULL;
    c->pend_room = 0;
    return rc;
}

/* What the device bubbles cost: per block, per device and cause; host time blocked per device. */
static void costs_phase(an_ctx *c, size_t n_device_bubbles) {
    an_result *out = c->r;
    for (size_t k = 0; k < n_device_bubbles; k++) {
        const an_bubble *b = &out->bubbles[k];
        uint64_t part[AN_CAUSE_N_] = {0};
        an_bubble_split(out, b, b->start, b->end, part);
        an_device *dv = device_get(c, b->producer, b->device);
        for (int q = 1; dv != NULL && q < AN_CAUSE_N_; q++)
            dv->idle_by_cause[q] += part[q];
        if (b->cause == AN_CAUSE_BLOCK)
            out->blocks[b->block].gpu_idle_ns += part[AN_CAUSE_BLOCK];
    }
    for (size_t i = 0; i < out->n_devices; i++) {
        an_device *dv = &out->devices[i];
        uint64_t in_bubbles = dv->idle_by_cause[1] + dv->idle_by_cause[2] + dv->idle_by_cause[3];
        dv->idle_by_cause[0] = dv->idle_ns > in_bubbles ? dv->idle_ns - in_bubbles : 0;
    }
    for (size_t i = 0; i < out->n_blocks; i++) {
        const an_block *b = &out->blocks[i];
        for (size_t k = 0; k < out->n_devices; k++)
            if (out->devices[k].producer == b->producer && out->devices[k].device == b->device)
                out->devices[k].blocked_ns += b->own_ns;
    }
}

/* A call site's (an API's, without one) share of a window's idle. */
typedef struct site_share {
    uint64_t callsite;
    uint32_t name;
    uint64_t ns;
} site_share;

/* The findings' call sites, now that the bubbles' causes are known: the gaps rule names the wait
 * behind its worst gap when the wait cost most of it, a low-utilisation window the call site that
 * cost the most idle in it. */
static void findings_sites(an_ctx *c, size_t n_device_bubbles) {
    an_result *out = c->r;
    for (size_t i = 0; i < out->n_findings; i++) {
        an_finding *f = &out->findings[i];
        if (f->rule != AN_RULE_GPU_GAPS)
            continue;
        size_t k = (size_t)f->callsite; /* the worst gap's bubble, kept there by device_merge */
        f->callsite = 0;
        const an_bubble *b = k < out->n_bubbles ? &out->bubbles[k] : NULL;
        /* the wait is named when it cost most of the gap; a gap the host spent elsewhere is not its */
        an_wait_split w = b != NULL ? an_bubble_parts(out, b) : (an_wait_split){0, 0, 0};
        if (b != NULL && b->cause == AN_CAUSE_BLOCK && 2 * (w.block_to - w.block_from) >= b->end - b->start) {
            f->callsite = out->blocks[b->block].callsite;
            f->name = out->blocks[b->block].name;
        }
    }
    for (size_t i = 0; i < out->n_findings; i++) {
        an_finding *f = &out->findings[i];
        if (f->rule != AN_RULE_LOW_UTIL)
            continue;
        /* the waits' share of the window's idle, summed per call site (per API without one): the
         * first eight sites met are told apart, the rest go uncounted */
        site_share per[8];
        size_t n = 0;
        for (size_t k = 0; k < n_device_bubbles; k++) {
            const an_bubble *b = &out->bubbles[k];
            if (b->producer != f->producer || b->device != f->device || b->cause != AN_CAUSE_BLOCK ||
                b->end <= f->start || b->start >= f->end)
                continue;
            uint64_t part[AN_CAUSE_N_] = {0};
            an_bubble_split(out, b, f->start, f->end, part);
            const an_block *bl = &out->blocks[b->block];
            size_t j = 0;
            while (j < n && !(per[j].callsite == bl->callsite && (bl->callsite || per[j].name == bl->name)))
                j++;
            if (j == n && n < sizeof per / sizeof per[0])
                per[n++] = (site_share){bl->callsite, bl->name, 0};
            if (j < n)
                per[j].ns += part[AN_CAUSE_BLOCK];
        }
        /* named when its waits cost at least half of the window's idle ("mostly after") */
        for (size_t j = 0; j < n; j++)
            if (2 * per[j].ns >= f->total_ns && per[j].ns > 0) {
                f->callsite = per[j].callsite;
                f->name = per[j].name;
            }
    }
}

/* A stretch of a device bubble that the host spent elsewhere, on the ranges of the thread that then
 * submitted the work (nvtx: that thread's range lane; SIZE_MAX: it has none). */
typedef struct host_seg {
    size_t nvtx;
    uint32_t producer;
    uint16_t device;
    uint32_t lane; /* the submitting call's lane (AN_NONE: not known) */
    uint64_t a, b;
} host_seg;

static int host_seg_cmp(const void *x, const void *y) {
    const host_seg *p = x, *q = y;
    if (p->nvtx != q->nvtx)
        return p->nvtx < q->nvtx ? -1 : 1;
    if (p->device != q->device)
        return p->device < q->device ? -1 : 1;
    return p->a < q->a ? -1 : p->a > q->a;
}

static int host_range_cmp(const void *x, const void *y) {
    const an_host_range *p = x, *q = y;
    if (p->idle_ns != q->idle_ns)
        return p->idle_ns > q->idle_ns ? -1 : 1;
    if (p->producer != q->producer)
        return p->producer < q->producer ? -1 : 1;
    return p->name < q->name ? -1 : p->name > q->name;
}

static int host_piece_cmp(const void *x, const void *y) {
    const an_host_piece *p = x, *q = y;
    if (p->producer != q->producer)
        return p->producer < q->producer ? -1 : 1;
    return p->a < q->a ? -1 : p->a > q->a;
}

/* The time of [a, b) that the thread of a calls' lane spent in CUDA calls that did not wait (each
 * instant once: a driver call inside a runtime call), into h, with the call that took the most of
 * it. A call that encloses a is found among the eight calls that started last before it (calls
 * nest a level or two deep). */
static void host_api_time(const an_ctx *c, uint32_t lane, uint64_t a, uint64_t b, an_host_range *h) {
    const st_store *s = c->s;
    if (lane == AN_NONE || (size_t)lane >= st_lane_count(s) || st_lane_get(s, lane)->kind != ST_LANE_THREAD)
        return;
    size_t n;
    const st_event *ev = st_lane_events(s, lane, &n);
    size_t i = st_lane_lower_bound(s, lane, a);
    for (size_t back = 0, j = i; back < 8 && j > 0; back++)
        if (st_ev_end(s, &ev[--j]) > a)
            i = j;
    uint64_t reach = a;
    for (; i < n && ev[i].start < b; i++) {
        uint64_t x = clip_lo(ev[i].start, a), y = clip_hi(st_ev_end(s, &ev[i]), b);
        if (y <= x || st_ev_kind(s, &ev[i]) != TP_K_API || (st_ev_flags(s, &ev[i]) & TP_F_BLOCKING)) /* a block */
            continue;
        if (y > reach) {
            h->api_ns += y - (x > reach ? x : reach);
            reach = y;
        }
        if (y - x > h->api_max_ns) {
            h->api_max_ns = y - x;
            h->api_name = st_ev_name(s, &ev[i]);
        }
    }
}

/* Adds [a, b), spent by the thread of the calls' lane (AN_NONE: not known), to (producer, name)'s
 * entry, and as a piece. */
static int host_credit(an_ctx *c, cm_u64map *idx, size_t *cap, uint32_t producer, uint32_t name, uint32_t lane,
                       uint64_t a, uint64_t b) {
    an_result *r = c->r;
    uint64_t ns = b - a;
    if (CM_GROW(r->host_pieces, c->pieces_cap, r->n_host_pieces + 1))
        return ERR_NOMEM;
    r->host_pieces[r->n_host_pieces++] = (an_host_piece){producer, name, a, b};
    if (ns > r->host_piece_max_ns)
        r->host_piece_max_ns = ns;
    uint64_t key = ((uint64_t)producer << 32 | name) + 1;
    if (c->last_credit_key == key) { /* the same range as the stretch before: no lookup */
        r->host_ranges[c->last_credit].idle_ns += ns;
        host_api_time(c, lane, a, b, &r->host_ranges[c->last_credit]);
        return 0;
    }
    uint64_t *v = cm_u64map_get_or_add(idx, key, POS_NONE, NULL);
    if (v == NULL)
        return ERR_NOMEM;
    if (*v == POS_NONE) {
        if (CM_GROW(r->host_ranges, *cap, r->n_host_ranges + 1))
            return ERR_NOMEM;
        r->host_ranges[r->n_host_ranges] = (an_host_range){.producer = producer, .name = name};
        *v = r->n_host_ranges++;
    }
    r->host_ranges[*v].idle_ns += ns;
    host_api_time(c, lane, a, b, &r->host_ranges[*v]);
    c->last_credit_key = key;
    c->last_credit = (size_t)*v;
    return 0;
}

/* The length of a name without a "#<digits>" ending (the whole length when it has none). */
static size_t unnumbered_len(const char *n) {
    size_t len = strlen(n), k = len;
    while (k > 0 && n[k - 1] >= '0' && n[k - 1] <= '9')
        k--;
    return k < len && k > 0 && n[k - 1] == '#' ? k : len;
}

/* A host range's name as host_merge_numbered compares it. */
typedef struct named_range {
    an_host_range h;
    const char *text;
    size_t len;   /* without its "#<digits>" ending */
    int numbered; /* it had one */
} named_range;

static int named_range_cmp(const void *x, const void *y) {
    const named_range *p = x, *q = y;
    if (p->h.producer != q->h.producer)
        return p->h.producer < q->h.producer ? -1 : 1;
    if (p->numbered != q->numbered)
        return p->numbered - q->numbered;
    size_t n = p->len < q->len ? p->len : q->len;
    int c = memcmp(p->text, q->text, n);
    if (c != 0 || p->len == q->len)
        return c != 0 ? c : (p->h.name < q->h.name ? -1 : p->h.name > q->h.name);
    return p->len < q->len ? -1 : 1;
}

/* Ranges of a process whose names differ only in a "#<digits>" ending (a profiler's numbered steps)
 * make one: sorted by that name, equal neighbours merged. */
static int host_merge_numbered(an_ctx *c) {
    an_result *r = c->r;
    if (r->n_host_ranges == 0)
        return 0;
    named_range *v = malloc(r->n_host_ranges * sizeof *v);
    if (v == NULL)
        return ERR_NOMEM;
    for (size_t i = 0; i < r->n_host_ranges; i++) {
        const char *t = r->host_ranges[i].name ? st_str(c->s, r->host_ranges[i].name) : "";
        size_t len = unnumbered_len(t);
        v[i] = (named_range){r->host_ranges[i], t, len, len < strlen(t)};
    }
    cm_sort(v, r->n_host_ranges, sizeof *v, named_range_cmp);
    size_t n = 0;
    for (size_t i = 0; i < r->n_host_ranges; i++) {
        const named_range *p = i > 0 ? &v[i - 1] : NULL;
        if (p != NULL && v[i].numbered && p->numbered && p->h.producer == v[i].h.producer && p->len == v[i].len &&
            memcmp(p->text, v[i].text, v[i].len) == 0) {
            an_host_range *into = &r->host_ranges[n - 1];
            into->numbered = 1;
            into->idle_ns += v[i].h.idle_ns;
            into->api_ns += v[i].h.api_ns;
            if (v[i].h.api_max_ns > into->api_max_ns) {
                into->api_max_ns = v[i].h.api_max_ns;
                into->api_name = v[i].h.api_name;
            }
            continue;
        }
        r->host_ranges[n] = v[i].h;
        r->host_ranges[n++].numbered = 0; /* until a second one is met */
    }
    r->n_host_ranges = n;
    free(v);
    return 0;
}

/* The host's share of the device bubbles, by the innermost range the submitting thread was in:
 * one sweep per (range lane, device) over its stretches in time order, with the ranges open at
 * each moment on a stack (a thread's ranges nest; one that ends under another is dropped when it
 * comes to the top). */
static int host_phase(an_ctx *c, size_t n_device_bubbles) {
    const st_store *s = c->s;
    an_result *r = c->r;
    size_t nl = st_lane_count(s), n_segs = 0, segs_cap = 0, cap = 0, stack_cap = 0;
    host_seg *segs = NULL;
    size_t *stack = NULL;
    cm_u64map lanes = {0}, idx = {0};
    int rc = 0;
    for (size_t l = 0; l < nl && rc == 0; l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (li->kind != ST_LANE_NVTX)
            continue;
        uint64_t key = ((uint64_t)li->producer << 32 | (uint32_t)li->id) + 1;
        if (cm_u64map_put(&lanes, key, l) != 0)
            rc = -1;
    }
    for (size_t k = 0; k < n_device_bubbles && rc == 0; k++) {
        const an_bubble *b = &r->bubbles[k];
        uint64_t iv[2][2] = {{b->start, b->end}, {0, 0}};
        if (b->cause == AN_CAUSE_BLOCK) {
            an_wait_split w = an_bubble_parts(r, b);
            iv[0][1] = w.block_from;
            iv[1][0] = w.block_to;
            iv[1][1] = w.launch_from;
        } else if (b->cause != AN_CAUSE_HOST) {
            continue;
        }
        size_t nvtx = SIZE_MAX;
        if (b->launch_lane < nl) {
            const st_lane_info *tl = st_lane_get(s, b->launch_lane);
            const uint64_t *v = cm_u64map_find(&lanes, ((uint64_t)tl->producer << 32 | (uint32_t)tl->id) + 1);
            if (v != NULL && *v != POS_NONE)
                nvtx = (size_t)*v;
        }
        for (int i = 0; i < 2 && rc == 0; i++) {
            if (iv[i][1] <= iv[i][0])
                continue;
            if (nvtx == SIZE_MAX) {
                rc = host_credit(c, &idx, &cap, b->producer, 0, b->launch_lane, iv[i][0], iv[i][1]);
            } else if (CM_GROW(segs, segs_cap, n_segs + 1)) {
                rc = -1;
            } else {
                segs[n_segs++] = (host_seg){nvtx, b->producer, b->device, b->launch_lane, iv[i][0], iv[i][1]};
            }
        }
    }
    if (rc == 0)
        cm_sort(segs, n_segs, sizeof *segs, host_seg_cmp);
    size_t n_ev = 0, ptr = 0, top = 0;
    const st_event *ev = NULL;
    for (size_t i = 0; i < n_segs && rc == 0; i++) {
        const host_seg *g = &segs[i];
        if (i == 0 || g->nvtx != segs[i - 1].nvtx || g->device != segs[i - 1].device) {
            ev = st_lane_events(s, g->nvtx, &n_ev);
            ptr = top = 0;
        }
        for (uint64_t t = g->a; t < g->b && rc == 0;) {
            for (; ptr < n_ev && ev[ptr].start <= t; ptr++) {
                if (st_ev_end(s, &ev[ptr]) <= t || (st_ev_flags(s, &ev[ptr]) & ST_EV_OP))
                    continue;
                if (CM_GROW(stack, stack_cap, top + 1)) {
                    rc = -1;
                    break;
                }
                stack[top++] = ptr;
            }
            while (top > 0 && st_ev_end(s, &ev[stack[top - 1]]) <= t)
                top--;
            uint64_t next = g->b;
            if (ptr < n_ev && ev[ptr].start < next)
                next = ev[ptr].start;
            if (top > 0 && st_ev_end(s, &ev[stack[top - 1]]) < next)
                next = st_ev_end(s, &ev[stack[top - 1]]);
            if (rc == 0)
                rc = host_credit(c, &idx, &cap, g->producer, top > 0 ? st_ev_name(s, &ev[stack[top - 1]]) : 0, g->lane,
                                 t, next);
            t = next;
        }
    }
    if (rc == 0)
        rc = host_merge_numbered(c);
    if (rc == 0) {
        cm_sort(r->host_ranges, r->n_host_ranges, sizeof *r->host_ranges, host_range_cmp);
        int sorted = 1; /* one process, one GPU: the pieces come in order already */
        for (size_t i = 1; sorted && i < r->n_host_pieces; i++)
            sorted = host_piece_cmp(&r->host_pieces[i - 1], &r->host_pieces[i]) <= 0;
        if (!sorted)
            cm_sort(r->host_pieces, r->n_host_pieces, sizeof *r->host_pieces, host_piece_cmp);
    }
    free(segs);
    free(stack);
    cm_u64map_free(&lanes);
    cm_u64map_free(&idx);
    return rc;
}

void an_host_in(const an_result *r, uint32_t producer, uint64_t a, uint64_t b, uint64_t *ns, uint32_t *range,
                uint64_t *range_ns) {
    *ns = *range_ns = 0;
    *range = 0;
    uint64_t from = a > r->host_piece_max_ns ? a - r->host_piece_max_ns : 0;
    size_t lo = 0, hi = r->n_host_pieces;
    while (lo < hi) { /* the process's first piece that may reach into [a, b) (by producer, start) */
        size_t m = lo + (hi - lo) / 2;
        const an_host_piece *p = &r->host_pieces[m];
        if (p->producer < producer || (p->producer == producer && p->a < from))
            lo = m + 1;
        else
            hi = m;
    }
    uint32_t names[64]; /* the first 64 ranges met are told apart: enough for a step or a collective */
    uint64_t sums[64];
    size_t n = 0;
    for (size_t i = lo; i < r->n_host_pieces && r->host_pieces[i].producer == producer; i++) {
        const an_host_piece *p = &r->host_pieces[i];
        if (p->a >= b)
            break;
        if (p->b <= a)
            continue;
        uint64_t d = (p->b < b ? p->b : b) - (p->a > a ? p->a : a);
        *ns += d;
        size_t k = 0;
        while (k < n && names[k] != p->name)
            k++;
        if (k == n && n < 64) {
            names[n] = p->name;
            sums[n++] = 0;
        }
        if (k < n)
            sums[k] += d;
    }
    for (size_t k = 0; k < n; k++)
        if (sums[k] > *range_ns) {
            *range_ns = sums[k];
            *range = names[k];
        }
}

int an_analyze(const st_store *s, const an_opts *opts, an_result *out, err_msg *err) {
    memset(out, 0, sizeof *out);
    an_ctx c = {.s = s, .r = out, .o = opts_with_defaults(opts)};
    uint64_t t0, t1;
    st_store_span(s, &t0, &t1);
    if (c.o.t0 || c.o.t1) {
        t0 = c.o.t0;
        t1 = c.o.t1;
    }
    if (t1 < t0)
        return err_set(err, ERR_INVAL, "analysis: the range ends before it starts");
    out->t0 = t0;
    out->t1 = t1;
    an_want want_gpu = {0};
    size_t n_device_bubbles = 0;
    int rc = blocks_phase(&c, &want_gpu) || bubbles_phase(&c, &n_device_bubbles) ? -1 : 0;
    if (rc == 0) {
        costs_phase(&c, n_device_bubbles);
        rc = build_sites(&c) || call_findings(&c) || host_phase(&c, n_device_bubbles) ? -1 : 0;
    }
    if (rc == 0) {
        findings_sites(&c, n_device_bubbles);
        /* Bubbles in time order: remap nothing, blocks are referenced by index and stay put. */
        sort_bubbles(out);
        for (size_t k = 0; k < out->n_bubbles; k++)
            if (out->bubbles[k].end - out->bubbles[k].start > out->bubble_max_ns)
                out->bubble_max_ns = out->bubbles[k].end - out->bubbles[k].start;
        cm_sort(out->findings, out->n_findings, sizeof *out->findings, finding_cmp);
    }
    free(want_gpu.p);
    cm_big_free(c.pend, c.pend_room);
    free(c.prefix_end);
    free(c.chain);
    if (rc != 0) {
        an_result_free(out);
        return err_set(err, ERR_NOMEM, "analysis: out of memory");
    }
    return 0;
}

void an_result_free(an_result *r) {
    if (r == NULL)
        return;
    free(r->blocks);
    cm_big_free(r->bubbles, r->bubbles_room);
    free(r->splits);
    free(r->sites);
    free(r->findings);
    free(r->devices);
    free(r->host_ranges);
    free(r->host_pieces);
    memset(r, 0, sizeof *r);
}
