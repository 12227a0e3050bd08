/*
 * The store (store.h): lanes of time-ordered events and, per lane, an index that answers "how busy
 * was this lane in [a, b)" in time that does not grow with the number of events.
 *
 * The index rests on one function per category, F(t) = busy time of the lane before t, so that the
 * busy time of a bucket [a, b) is F(b) - F(a). With events sorted by start,
 *   F(t) = (sum of the durations of the events that start before t)
 *        - (for each of those still running at t: the part after t).
 * The first term is a prefix sum kept per block of ST_PB events (the rest of a block is summed on
 * the fly); the second needs the few events active at t, found by descending a 16-ary tree of
 * "latest end" maxima that skips every group of events over by t. A second tree of the same shape
 * keeps the longest event per group for st_bucket.longest. A frame then costs O(buckets x (block +
 * active events x tree depth)), whatever the zoom and however many events the lane holds.
 *
 * Appends in time order only extend the index; an out-of-order batch is sorted and merged into the
 * tail and the index rebuilt from the first position that moved. The live bound (max_events) drops
 * the oldest events in chunks of a sixteenth of the bound, so the cost of dropping is amortised.
 */
#include "store.h"
#include "grow.h"
#include "shapes.h"
#include "strpool.h"
#include "u64map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


_Static_assert(sizeof(st_event) == 20, "an event is 20 bytes (store.h)");
_Static_assert(ST_CAT_N <= 8 && ST_CAT_SYNC + TP_K_KERNEL == TP_K_SYNC && TP_K_API + 1 == TP_K_NVTX,
               "an event's category, in its shape id's top 3 bits, gives its kind (store.h)");

#define ST_PB 32         /* events per prefix-sum block */
#define ST_FAN 16        /* fan-out of the max-end and longest trees */
#define ST_LEVELS 8      /* 16^8 groups: more than any store holds */
#define ST_MAX_FRAMES 64 /* frames kept per call site */
#define ST_MAX_PENDING 4096 /* NVTX START halves waiting for their END, per store */

/* ---- the store ---- */

typedef struct lane {
    st_lane_info info;
    uint64_t key;
    st_event *ev;
    size_t cap;
    size_t sorted;  /* ev[0, sorted) is in order */
    size_t indexed; /* the index describes ev[0, indexed) */
    uint64_t *pre;  /* (blocks + 1) x ST_CAT_N prefix sums of durations */
    size_t pre_cap;
    uint64_t *maxend[ST_LEVELS]; /* level l: per ST_FAN^(l+1) events */
    uint32_t *longest[ST_LEVELS];
    size_t lvl_cap[ST_LEVELS];
    size_t lvl_n[ST_LEVELS]; /* nodes per level */
    int levels;
    /* ranges lanes: the events by depth (aux), each depth's in time order, and where each begins */
    uint32_t *byd;
    size_t byd_cap;
    uint32_t *dofs; /* n_depths + 1 offsets in byd */
    size_t dofs_cap, n_depths;
} lane;

typedef struct st_module_id {
    uint8_t len;
    uint8_t id[TP_BUILD_ID_MAX];
} st_module_id;

typedef struct cs_entry {
    uint32_t producer, id;
    uint32_t n_frames;
    st_frame *frames;
} cs_entry;

typedef struct nvtx_pending {
    uint32_t producer, tid;
    uint16_t device;
    uint64_t id, start;
    uint32_t name;
} nvtx_pending;

/* A host's measured clock and the offset applied to its producers. */
typedef struct host_clock {
    uint32_t host; /* store string */
    int64_t applied_ns;
    uint64_t uncertainty_ns;
} host_clock;

typedef struct prod_ext {
    int seen_seq;
    uint64_t last_seq;
} prod_ext;

#define ST_LIVE_NAME_BYTES (128u << 20) /* names a live store keeps, in bytes */
#define ST_LIVE_NAMES (4u << 20)        /* and in (producer, name) entries */
#define REFUSED_NAME "(name past the live view's bound)"

/* A lane lane_get found: its key (0: none) and its index in lanes. */
#define LANE_MEMO_BITS 6
#define LANE_MEMO (1u << LANE_MEMO_BITS)
typedef struct lane_seen {
    uint64_t key;
    size_t index;
} lane_seen;

struct st_store {
    st_store_head head; /* first: the accessors read it (store.h) */
    st_shapes shapes;   /* head.shapes is shapes.v */
    st_opts opts;
    /* strings */
    cm_strpool strings; /* the store's ids; id 0 is "" */
    cm_u64map pstr; /* (producer index << 32 | producer string id) -> store id */
    uint64_t pstr_memo[16][2]; /* pstr's last answers, by the id's low bits: the key (0: none), its store id */
    /* producers, devices */
    st_producer_info *prods;
    prod_ext *pext;
    size_t n_prods, prods_cap, pext_cap;
    cm_u64map prod_by_id;
    st_device_info *devs;
    size_t n_devs, devs_cap;
    /* lanes */
    lane *lanes;
    size_t n_lanes, lanes_cap;
    cm_u64map lane_by_key;
    lane_seen lane_memo[LANE_MEMO]; /* the lanes lane_get found lately, two ways a slot, the last first */
    size_t *order; /* display index -> lane */
    size_t order_cap;
    int order_dirty;
    /* metadata waiting for lanes */
    cm_u64map stream_meta; /* (prod, device, stream) -> record flags<<32 | (uint32_t)priority */
    cm_u64map thread_name; /* (prod, tid) -> store string */
    /* call sites */
    cs_entry *cs;
    size_t n_cs, cs_cap;
    cm_u64map cs_by_key; /* producer << 32 | id -> store id (index + 1) */
    /* native modules the producers announced (TP_K_MODULE): build ids */
    st_module_id *mods;
    size_t n_mods, mods_cap;
    cm_u64map mod_by_key; /* producer << 32 | module string -> index + 1 */
    nvtx_pending *pend;
    size_t n_pend, pend_cap;
    host_clock *clocks; /* st_store_set_host_clock */
    size_t n_clocks, clocks_cap;
    /* totals */
    size_t events;
    uint64_t dropped;
    uint64_t strings_refused; /* names past the live bound on names, shown as REFUSED_NAME */
    uint32_t refused_id;
    uint32_t op_domain; /* "cpu_op", once a range names a domain (ST_EV_OP) */
    int dirty;
};

uint32_t st_intern(st_store *s, const char *str, size_t len) {
    if (len > TP_STRING_MAX)
        len = TP_STRING_MAX;
    uint32_t id;
    return cm_strpool_intern(&s->strings, str, len, &id) == 0 ? id : 0;
}

/* A live store bounds its names as it bounds its events: a publisher that sends ever new names
 * (hostile, or a program that names every kernel launch differently) would otherwise grow it
 * without end. Past the bound, new names read as REFUSED_NAME and are counted. */
static int names_full(st_store *s, uint64_t key, uint32_t len) {
    if (s->opts.max_events == 0 || cm_u64map_find(&s->pstr, key) != NULL)
        return 0;
    return s->strings.used + len > ST_LIVE_NAME_BYTES || cm_u64map_count(&s->pstr) >= ST_LIVE_NAMES;
}

static uint32_t refused_name(st_store *s) {
    s->strings_refused++;
    if (s->refused_id == 0)
        s->refused_id = st_intern(s, REFUSED_NAME, sizeof REFUSED_NAME - 1);
    return s->refused_id;
}

uint64_t st_store_names_refused(const st_store *s) { return s->strings_refused; }

const char *st_str(const st_store *s, uint32_t id) { return cm_strpool_str(&s->strings, id); }

size_t st_str_count(const st_store *s) { return s->strings.n; }

/* ---- categories ---- */

static int shape_cat(const st_shape *k) {
    switch (k->kind) {
    case TP_K_KERNEL: return ST_CAT_KERNEL;
    case TP_K_MEMCPY: return ST_CAT_MEMCPY;
    case TP_K_MEMSET: return ST_CAT_MEMSET;
    case TP_K_SYNC: return ST_CAT_SYNC;
    case TP_K_API: return (k->flags & TP_F_BLOCKING) ? ST_CAT_BLOCKED : ST_CAT_API;
    default: return ST_CAT_NVTX;
    }
}

/* The category is kept in the event's shape id: the summaries read no shape. */
int st_event_cat(const st_store *s, const st_event *e) { return (int)(e->shape >> 29); }

uint16_t st_event_device(const st_store *s, const st_event *e) {
    const st_shape *k = st_ev_shape(s, e);
    return k->kind == TP_K_API ? (uint16_t)(k->sub | (uint16_t)k->mem << 8) : TP_NO_DEVICE;
}

/* ---- shapes ---- */

/* The id of a shape (UINT32_MAX: out of memory). */
static uint32_t shape_id(st_store *s, const st_shape *k) {
    uint32_t id = st_shapes_intern(&s->shapes, k);
    s->head.shapes = s->shapes.v;
    return id;
}

/* Sets an event's start and end, its shape k (dur set here); 0 or ERR_NOMEM. */
static int ev_set(st_store *s, st_event *e, uint64_t start, uint64_t end, st_shape k) {
    uint64_t d = end - start;
    k.dur = d >= ST_DUR_LONG ? d : 0;
    uint32_t id = shape_id(s, &k);
    if (id == UINT32_MAX)
        return ERR_NOMEM;
    e->start = start;
    e->dur = d >= ST_DUR_LONG ? ST_DUR_LONG : (uint32_t)d;
    e->shape = (uint32_t)shape_cat(&k) << 29 | id;
    return 0;
}

/* Moves an event to [start, end], which may have a duration of its own (clipped at a bound of the
 * clock); an event whose new shape finds no memory keeps its duration. */
static void ev_move(st_store *s, st_event *e, uint64_t start, uint64_t end) {
    uint64_t d = st_ev_dur(s, e);
    if (end - start == d) {
        e->start = start;
        return;
    }
    if (ev_set(s, e, start, end, *st_ev_shape(s, e)) != 0)
        e->start = start;
}

/* ---- life cycle ---- */

st_store *st_store_new(const st_opts *opts) {
    st_store *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    if (opts)
        s->opts = *opts;
    return s;
}

static void lane_free(lane *l) {
    free(l->ev);
    free(l->pre);
    free(l->byd);
    free(l->dofs);
    for (int i = 0; i < ST_LEVELS; i++) {
        free(l->maxend[i]);
        free(l->longest[i]);
    }
}

void st_store_destroy(st_store **sp) {
    if (sp == NULL || *sp == NULL)
        return;
    st_store *s = *sp;
    for (size_t i = 0; i < s->n_lanes; i++)
        lane_free(&s->lanes[i]);
    free(s->lanes);
    free(s->order);
    for (size_t i = 0; i < s->n_cs; i++)
        free(s->cs[i].frames);
    free(s->cs);
    free(s->mods);
    cm_u64map_free(&s->mod_by_key);
    free(s->pend);
    free(s->clocks);
    cm_strpool_free(&s->strings);
    st_shapes_free(&s->shapes);
    free(s->prods);
    free(s->pext);
    free(s->devs);
    cm_u64map_free(&s->pstr);
    cm_u64map_free(&s->prod_by_id);
    cm_u64map_free(&s->lane_by_key);
    cm_u64map_free(&s->stream_meta);
    cm_u64map_free(&s->thread_name);
    cm_u64map_free(&s->cs_by_key);
    free(s);
    *sp = NULL;
}

/* ---- lookups that create ---- */

static long producer_index(st_store *s, uint64_t id) {
    uint64_t *v = cm_u64map_find(&s->prod_by_id, id);
    if (v)
        return (long)*v;
    if (s->n_prods >= 65536 || CM_GROW(s->prods, s->prods_cap, s->n_prods + 1) ||
        CM_GROW(s->pext, s->pext_cap, s->n_prods + 1) ||
        cm_u64map_put(&s->prod_by_id, id, s->n_prods) != 0)
        return -1;
    st_producer_info *p = &s->prods[s->n_prods];
    memset(p, 0, sizeof *p);
    p->producer = id;
    p->rank = p->world = -1;
    memset(&s->pext[s->n_prods], 0, sizeof s->pext[0]);
    s->order_dirty = 1;
    return (long)s->n_prods++;
}

static uint64_t lane_key(uint32_t prod, st_lane_kind kind, uint16_t device, uint32_t id) {
    return (uint64_t)prod << 50 | (uint64_t)kind << 48 | (uint64_t)device << 32 | id;
}

static uint64_t stream_key(uint32_t prod, uint16_t device, uint32_t stream) {
    return (uint64_t)prod << 48 | (uint64_t)device << 32 | stream;
}

static lane *lane_get(st_store *s, uint32_t prod, st_lane_kind kind, uint16_t device, uint32_t id) {
    uint64_t key = lane_key(prod, kind, device, id);
    /* records in time order go to a few lanes by turns: those met lately are found here without a
     * hash (keys are never 0: kind is in them) */
    lane_seen *seen = &s->lane_memo[(size_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - LANE_MEMO_BITS)) & ~(size_t)1];
    if (seen[0].key == key)
        return &s->lanes[seen[0].index];
    if (seen[1].key == key) {
        lane_seen t = seen[1];
        seen[1] = seen[0];
        seen[0] = t;
        return &s->lanes[t.index];
    }
    seen[1] = seen[0];
    seen[0].key = 0;
    uint64_t *v = cm_u64map_find(&s->lane_by_key, key);
    if (v) {
        seen[0] = (lane_seen){key, (size_t)*v};
        return &s->lanes[*v];
    }
    if (CM_GROW(s->lanes, s->lanes_cap, s->n_lanes + 1) || cm_u64map_put(&s->lane_by_key, key, s->n_lanes) != 0)
        return NULL;
    seen[0] = (lane_seen){key, s->n_lanes};
    lane *l = &s->lanes[s->n_lanes++];
    memset(l, 0, sizeof *l);
    l->key = key;
    l->info.kind = kind;
    l->info.producer = prod;
    l->info.device = device;
    l->info.id = id;
    if (kind == ST_LANE_STREAM) {
        uint64_t *m = cm_u64map_find(&s->stream_meta, stream_key(prod, device, id));
        if (m) {
            l->info.stream_flags = (unsigned)(*m >> 32) & 0xff;
            l->info.null_stream = (l->info.stream_flags & TP_F_NULL_STREAM) != 0;
            l->info.priority = (int)(int32_t)(uint32_t)*m;
        }
    } else if (device == TP_NO_DEVICE) {
        uint64_t *m = cm_u64map_find(&s->thread_name, (uint64_t)prod << 32 | id);
        if (m)
            l->info.name = (uint32_t)*m;
    }
    s->order_dirty = 1;
    return l;
}

static uint64_t callsite_id(st_store *s, uint32_t prod, uint32_t id) {
    if (id == 0)
        return 0;
    uint64_t key = (uint64_t)prod << 32 | id;
    uint64_t *v = cm_u64map_find(&s->cs_by_key, key);
    if (v)
        return *v;
    if (CM_GROW(s->cs, s->cs_cap, s->n_cs + 1) || cm_u64map_put(&s->cs_by_key, key, s->n_cs + 1) != 0)
        return 0;
    s->cs[s->n_cs] = (cs_entry){.producer = prod, .id = id};
    return ++s->n_cs;
}

static uint32_t pstr(st_store *s, uint32_t prod, uint32_t id) {
    if (id == 0)
        return 0;
    uint64_t key = (uint64_t)prod << 32 | id;
    uint64_t *memo = s->pstr_memo[id & 15];
    if (memo[0] == key)
        return (uint32_t)memo[1];
    uint64_t *v = cm_u64map_find(&s->pstr, key);
    if (v == NULL)
        return 0;
    memo[0] = key;
    memo[1] = *v;
    return (uint32_t)*v;
}

/* ---- adding ---- */

/* t with shift taken off, kept within the clock's range. */
static uint64_t shifted(uint64_t t, int64_t shift) {
    if (shift >= 0)
        return t > (uint64_t)shift ? t - (uint64_t)shift : 0;
    uint64_t up = (uint64_t)0 - (uint64_t)shift;
    return t < UINT64_MAX - up ? t + up : UINT64_MAX;
}

/* Moves a producer's events (held, and NVTX starts waiting for their end) from the shift they
 * have to a new one. The order within a lane stays as it was unless an event met a bound of the
 * clock; the lanes are indexed again at the next commit. */
static int producer_shift(st_store *s, uint32_t prod, int64_t to) {
    int64_t from = s->prods[prod].clock_shift_ns;
    s->prods[prod].clock_shift_ns = to;
    if (to == from)
        return 0;
    for (size_t i = 0; i < s->n_lanes; i++) {
        lane *l = &s->lanes[i];
        if (l->info.producer != prod || l->info.n_events == 0)
            continue;
        int clipped = 0;
        for (size_t k = 0; k < l->info.n_events; k++) {
            st_event *e = &l->ev[k];
            uint64_t a = shifted(shifted(e->start, -from), to), b = shifted(shifted(st_ev_end(s, e), -from), to);
            clipped |= a == 0 || b == UINT64_MAX;
            ev_move(s, e, a, b);
        }
        if (clipped)
            l->sorted = 0;
        l->indexed = 0;
        s->dirty = 1;
    }
    for (size_t i = 0; i < s->n_pend; i++)
        if (s->pend[i].producer == prod)
            s->pend[i].start = shifted(shifted(s->pend[i].start, -from), to);
    return 1;
}

/* Puts a producer on its host's measured clock, when one was given for its host; 1 when its events
 * moved. */
static int producer_clock(st_store *s, uint32_t prod) {
    st_producer_info *p = &s->prods[prod];
    for (size_t i = 0; i < s->n_clocks; i++)
        if (p->host != 0 && s->clocks[i].host == p->host) {
            p->clock_aligned = 1;
            p->clock_uncertainty_ns = s->clocks[i].uncertainty_ns;
            return producer_shift(s, prod, s->clocks[i].applied_ns);
        }
    return 0;
}

int st_store_set_host_clock(st_store *s, const char *host, int64_t offset_ns, uint64_t uncertainty_ns) {
    size_t len = strlen(host);
    if (len == 0)
        return ERR_INVAL;
    uint32_t id = st_intern(s, host, len);
    if (id == 0)
        return ERR_NOMEM;
    host_clock *c = NULL;
    for (size_t i = 0; i < s->n_clocks && c == NULL; i++)
        if (s->clocks[i].host == id)
            c = &s->clocks[i];
    if (c == NULL) {
        if (s->n_clocks == 256)
            return ERR_LIMIT;
        if (CM_GROW(s->clocks, s->clocks_cap, s->n_clocks + 1))
            return ERR_NOMEM;
        c = &s->clocks[s->n_clocks++];
        *c = (host_clock){.host = id, .applied_ns = offset_ns, .uncertainty_ns = uncertainty_ns};
    } else {
        uint64_t off = c->applied_ns > offset_ns ? (uint64_t)c->applied_ns - (uint64_t)offset_ns
                                                 : (uint64_t)offset_ns - (uint64_t)c->applied_ns;
        if (off > uncertainty_ns) {
            c->applied_ns = offset_ns;
            c->uncertainty_ns = uncertainty_ns;
        } else {
            c->uncertainty_ns = off + uncertainty_ns;
        }
    }
    int moved = 0;
    for (uint32_t p = 0; p < s->n_prods; p++)
        if (s->prods[p].host == id)
            moved |= producer_clock(s, p);
    return moved;
}

/* Order in a lane: by start, then by end. */
static int ev_cmp(const st_store *s, const st_event *a, const st_event *b) {
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    if (a->dur != b->dur)
        return a->dur < b->dur ? -1 : 1;
    uint64_t x = st_ev_dur(s, a), y = st_ev_dur(s, b);
    return x < y ? -1 : x > y;
}

static int lane_push(st_store *s, lane *l, const st_event *e) {
    if (CM_GROW(l->ev, l->cap, l->info.n_events + 1))
        return ERR_NOMEM;
    size_t n = l->info.n_events;
    l->ev[n] = *e;
    if (l->sorted == n && (n == 0 || ev_cmp(s, &l->ev[n - 1], e) <= 0))
        l->sorted = n + 1;
    l->info.n_events = n + 1;
    s->events++;
    s->dirty = 1;
    return 0;
}

static int add_event(st_store *s, uint32_t prod, const tp_record *r) {
    st_shape k;
    memset(&k, 0, sizeof k);
    k.kind = r->head.kind;
    k.flags = r->head.flags;
    uint64_t start, end;
    uint32_t corr = 0;
    tp_record_span(r, &start, &end);
    /* A time CUPTI could not collect (a forced flush of work still running) is 0: such an event
     * would reach 55 years back and stretch the trace. Imported traces may start at 0, but none
     * of their events ends at 0 or lasts a day from it. */
    if (r->head.kind >= TP_K_KERNEL && r->head.kind <= TP_K_NVTX &&
        (end == 0 || (start == 0 && end > 86400ull * 1000000000ull)))
        return 0;
    int64_t shift = s->prods[prod].clock_shift_ns;
    if (shift != 0) {
        start = shifted(start, shift);
        end = shifted(end, shift);
    }
    lane *l = NULL;
    switch (r->head.kind) {
    case TP_K_KERNEL:
        k.name = pstr(s, prod, r->kernel.name);
        corr = r->kernel.correlation;
        k.value = (uint64_t)r->kernel.grid[0] * r->kernel.grid[1] * r->kernel.grid[2];
        k.aux = r->kernel.block[0] * r->kernel.block[1] * r->kernel.block[2];
        l = lane_get(s, prod, ST_LANE_STREAM, r->head.device, r->kernel.stream);
        break;
    case TP_K_MEMCPY:
        corr = r->memcpy.correlation;
        k.value = r->memcpy.bytes;
        k.sub = r->memcpy.copy_kind;
        k.mem = (uint8_t)(r->memcpy.src_kind << 4 | (r->memcpy.dst_kind & 15));
        l = lane_get(s, prod, ST_LANE_STREAM, r->head.device, r->memcpy.stream);
        break;
    case TP_K_MEMSET:
        corr = r->memset.correlation;
        k.value = r->memset.bytes;
        k.sub = r->memset.mem_kind;
        l = lane_get(s, prod, ST_LANE_STREAM, r->head.device, r->memset.stream);
        break;
    case TP_K_SYNC:
        corr = r->sync.correlation;
        k.sub = r->sync.sync_type;
        k.aux = r->sync.event;
        l = lane_get(s, prod, ST_LANE_STREAM, r->head.device, r->sync.stream);
        break;
    case TP_K_API:
        k.name = pstr(s, prod, r->api.name);
        corr = r->api.correlation;
        k.aux = r->api.cbid;
        k.value = callsite_id(s, prod, r->api.callsite);
        k.sub = (uint8_t)(r->head.device & 0xff);
        k.mem = (uint8_t)(r->head.device >> 8);
        l = lane_get(s, prod, ST_LANE_THREAD, TP_NO_DEVICE, r->api.tid);
        break;
    case TP_K_NVTX: {
        /* A range keeps no id (its START and END halves are paired here), and its correlation's
         * place holds its depth (lane_depths). */
        k.name = pstr(s, prod, r->nvtx.name);
        k.sub = r->head.flags;
        k.flags = 0;
        if (r->nvtx.domain != 0) {
            if (s->op_domain == 0)
                s->op_domain = st_intern(s, "cpu_op", 6);
            if (pstr(s, prod, r->nvtx.domain) == s->op_domain)
                k.flags = ST_EV_OP;
        }
        if (r->head.flags == TP_NVTX_START) {
            if (s->n_pend >= ST_MAX_PENDING || CM_GROW(s->pend, s->pend_cap, s->n_pend + 1))
                return 0; /* an unmatched flood of starts: forget them */
            s->pend[s->n_pend++] = (nvtx_pending){prod, r->nvtx.tid, r->head.device, r->nvtx.id,
                                                  start, k.name};
            return 0;
        }
        if (r->head.flags == TP_NVTX_END) {
            size_t i = s->n_pend;
            while (i-- > 0)
                if (s->pend[i].producer == prod && s->pend[i].id == r->nvtx.id)
                    break;
            if (i == (size_t)-1)
                return 0;
            nvtx_pending p = s->pend[i];
            s->pend[i] = s->pend[--s->n_pend];
            if (p.start > end)
                return 0;
            start = p.start;
            k.name = p.name;
            k.sub = TP_NVTX_RANGE;
        }
        l = lane_get(s, prod, ST_LANE_NVTX, r->head.device, r->nvtx.tid);
        break;
    }
    case TP_K_DROPS: {
        unsigned src = r->drops.source;
        if (src < TP_DROP_MAX_) {
            s->prods[prod].drop_records[src] = r->drops.records;
            s->prods[prod].drop_batches[src] = r->drops.batches;
        }
        return 0;
    }
    default:
        return 0; /* clock beacons */
    }
    if (l == NULL)
        return ERR_NOMEM;
    st_event e = {.corr = corr};
    if (ev_set(s, &e, start, end, k) != 0)
        return ERR_NOMEM;
    return lane_push(s, l, &e);
}

static int add_meta(st_store *s, uint32_t prod, const tp_record *r, cs_entry **cur) {
    switch (r->head.kind) {
    case TP_K_PROCESS: {
        st_producer_info *p = &s->prods[prod];
        p->pid = r->process.pid;
        p->host = pstr(s, prod, r->process.host);
        p->cmdline = pstr(s, prod, r->process.cmdline);
        p->rank = r->process.rank;
        p->world = r->process.world;
        p->flags = r->head.flags;
        producer_clock(s, prod);
        return 0;
    }
    case TP_K_DEVICE: {
        st_device_info *d = NULL;
        for (size_t i = 0; i < s->n_devs; i++)
            if (s->devs[i].producer == prod && s->devs[i].device == r->head.device)
                d = &s->devs[i];
        if (d == NULL) {
            if (s->n_devs >= 4096 || CM_GROW(s->devs, s->devs_cap, s->n_devs + 1))
                return s->n_devs >= 4096 ? 0 : ERR_NOMEM;
            d = &s->devs[s->n_devs++];
        }
        *d = (st_device_info){.producer = prod, .device = r->head.device,
                              .name = pstr(s, prod, r->device.name), .cc_major = r->device.cc_major,
                              .cc_minor = r->device.cc_minor, .sm_count = r->device.sm_count,
                              .memory_bytes = r->device.memory_bytes};
        return 0;
    }
    case TP_K_STREAM: {
        uint64_t v = (uint64_t)r->head.flags << 32 | (uint32_t)r->stream.priority;
        int rc = cm_u64map_put(&s->stream_meta, stream_key(prod, r->head.device, r->stream.stream), v);
        uint64_t *li = cm_u64map_find(&s->lane_by_key, lane_key(prod, ST_LANE_STREAM, r->head.device, r->stream.stream));
        if (li) {
            s->lanes[*li].info.null_stream = (r->head.flags & TP_F_NULL_STREAM) != 0;
            s->lanes[*li].info.stream_flags = r->head.flags;
            s->lanes[*li].info.priority = r->stream.priority;
            s->order_dirty = 1;
        }
        return rc;
    }
    case TP_K_THREAD: {
        uint32_t name = pstr(s, prod, r->thread.name);
        int rc = cm_u64map_put(&s->thread_name, (uint64_t)prod << 32 | r->thread.tid, name);
        for (int k = ST_LANE_THREAD; k <= ST_LANE_NVTX; k++) {
            uint64_t *li = cm_u64map_find(&s->lane_by_key, lane_key(prod, (st_lane_kind)k, TP_NO_DEVICE, r->thread.tid));
            if (li)
                s->lanes[*li].info.name = name;
        }
        return rc;
    }
    case TP_K_MODULE: {
        uint32_t path = pstr(s, prod, r->module.path);
        if (path == 0)
            return 0;
        uint64_t key = (uint64_t)prod << 32 | path;
        uint64_t *v = cm_u64map_find(&s->mod_by_key, key);
        if (v == NULL) {
            if (s->n_mods >= (1u << 20)) /* a hostile producer's flood: ignored beyond this */
                return 0;
            if (CM_GROW(s->mods, s->mods_cap, s->n_mods + 1) || cm_u64map_put(&s->mod_by_key, key, s->n_mods + 1))
                return ERR_NOMEM;
            v = cm_u64map_find(&s->mod_by_key, key);
            s->n_mods++;
        }
        st_module_id *m = &s->mods[*v - 1];
        m->len = r->module.build_id_len;
        memcpy(m->id, r->module.build_id, sizeof m->id);
        return 0;
    }
    case TP_K_CALLSITE: {
        uint64_t id = callsite_id(s, prod, r->callsite.id);
        if (id == 0)
            return ERR_NOMEM;
        cs_entry *c = &s->cs[id - 1];
        uint32_t n = r->callsite.n_frames < ST_MAX_FRAMES ? r->callsite.n_frames : ST_MAX_FRAMES;
        st_frame *f = calloc(n ? n : 1, sizeof *f);
        if (f == NULL)
            return ERR_NOMEM;
        free(c->frames);
        c->frames = f;
        c->n_frames = n;
        *cur = c;
        return 0;
    }
    case TP_K_FRAME: {
        cs_entry *c = *cur;
        if (c == NULL || c->id != r->frame.callsite || c->producer != prod || r->frame.index >= c->n_frames)
            return 0;
        st_frame *f = &c->frames[r->frame.index];
        f->kind = r->head.flags;
        f->line = r->frame.line;
        f->file = pstr(s, prod, r->frame.file);
        f->func = pstr(s, prod, r->frame.func);
        f->module = pstr(s, prod, r->frame.module);
        f->pc = r->frame.pc;
        return 0;
    }
    default:
        return 0;
    }
}

/* A recorder's notes (a synthetic batch of TP_PRODUCER_NOTES): the hosts' clocks it measured, given
 * to the producers of those hosts as st_store_set_host_clock does; no producer of their own. */
static int add_notes(st_store *s, tp_dec *d, err_msg *err) {
    const tp_record *r;
    char host[256];
    while ((r = tp_dec_next_record(d)) != NULL) {
        if (r->head.kind != TP_K_HOSTCLOCK || tp_dec_string_copy(d, r->hostclock.host, host, sizeof host) < 0)
            continue;
        int rc = st_store_set_host_clock(s, host, r->hostclock.offset_ns, r->hostclock.uncertainty_ns);
        if (rc == ERR_NOMEM)
            return err_set(err, rc, "store: out of memory (host clocks)");
    }
    return 0;
}

int st_store_add_batch(st_store *s, const void *batch, size_t len, err_msg *err) {
    tp_dec d;
    memset(&d, 0, sizeof d);
    int rc = tp_dec_open(&d, batch, len, err);
    if (rc != 0) {
        tp_dec_free(&d);
        return rc;
    }
    if (d.hdr.flags & TP_BF_INDEX) {
        tp_dec_free(&d);
        return 0;
    }
    if ((d.hdr.flags & TP_BF_SYNTHETIC) && d.hdr.producer == TP_PRODUCER_NOTES) {
        rc = add_notes(s, &d, err);
        tp_dec_free(&d);
        return rc;
    }
    long pi = producer_index(s, d.hdr.producer);
    if (pi < 0) {
        tp_dec_free(&d);
        return err_set(err, ERR_NOMEM, "store: out of memory (producers)");
    }
    uint32_t prod = (uint32_t)pi;
    st_producer_info *p = &s->prods[prod];
    prod_ext *x = &s->pext[prod];
    int synthetic = (d.hdr.flags & TP_BF_SYNTHETIC) != 0;
    if (!synthetic) {
        p->batches++;
        if (x->seen_seq && d.hdr.seq > x->last_seq + 1)
            p->missed += d.hdr.seq - x->last_seq - 1;
        if (!x->seen_seq || d.hdr.seq > x->last_seq)
            x->last_seq = d.hdr.seq;
        x->seen_seq = 1;
        if (d.hdr.flags & TP_BF_END)
            p->ended = 1;
    }
    uint32_t id, slen;
    const char *str;
    while (tp_dec_next_string(&d, &id, &str, &slen)) {
        uint32_t sid = names_full(s, (uint64_t)prod << 32 | id, slen) ? refused_name(s) : st_intern(s, str, slen);
        if ((sid == 0 && slen > 0) || cm_u64map_put(&s->pstr, (uint64_t)prod << 32 | id, sid) != 0) {
            rc = err_set(err, ERR_NOMEM, "store: out of memory (strings)");
            break;
        }
        s->pstr_memo[id & 15][0] = 0;
    }
    const tp_record *r;
    cs_entry *cur = NULL;
    while (rc == 0 && (r = tp_dec_next_record(&d)) != NULL) {
        if (TP_KIND_IS_META(r->head.kind))
            rc = add_meta(s, prod, r, &cur);
        else if (!synthetic)
            rc = add_event(s, prod, r);
        if (rc != 0)
            err_set(err, rc, "store: out of memory");
    }
    tp_dec_free(&d);
    return rc;
}

/* ---- sorting, merging, dropping ---- */

/* ev_cmp for qsort_r, the store its argument: the sort in place when the merge finds no memory. */
static int ev_rcmp(const void *a, const void *b, void *s) { return ev_cmp(s, a, b); }

/* Sorts ev[0, n) by ev_cmp, with tmp[0, n) to merge into: a merge sort of whole events, which
 * qsort copies byte by byte at 20 bytes each. */
static void ev_msort(const st_store *s, st_event *ev, st_event *tmp, size_t n) {
    if (n <= 16) {
        for (size_t i = 1; i < n; i++) {
            st_event x = ev[i];
            size_t j = i;
            for (; j > 0 && ev_cmp(s, &ev[j - 1], &x) > 0; j--)
                ev[j] = ev[j - 1];
            ev[j] = x;
        }
        return;
    }
    size_t h = n / 2;
    ev_msort(s, ev, tmp, h);
    ev_msort(s, ev + h, tmp, n - h);
    if (ev_cmp(s, &ev[h - 1], &ev[h]) <= 0)
        return;
    memcpy(tmp, ev, h * sizeof *tmp);
    size_t i = 0, j = h, o = 0;
    while (i < h && j < n)
        ev[o++] = ev_cmp(s, &tmp[i], &ev[j]) <= 0 ? tmp[i++] : ev[j++];
    while (i < h)
        ev[o++] = tmp[i++];
}

/* Sorts the unsorted tail and merges it into the sorted prefix; returns the first index that moved
 * (n when nothing did). */
static size_t lane_sort(const st_store *s, lane *l) {
    size_t n = l->info.n_events, k = l->sorted;
    if (k >= n)
        return n;
    int tail_sorted = 1;
    for (size_t i = k + 1; i < n && tail_sorted; i++)
        tail_sorted = ev_cmp(s, &l->ev[i - 1], &l->ev[i]) <= 0;
    l->sorted = n;
    size_t m = n - k;
    if (!tail_sorted) {
        st_event *tmp = malloc((m / 2 + 1) * sizeof *tmp);
        if (tmp != NULL)
            ev_msort(s, l->ev + k, tmp, m);
        else
            qsort_r(l->ev + k, m, sizeof *l->ev, ev_rcmp, (void *)s);
        free(tmp);
    }
    if (k == 0 || ev_cmp(s, &l->ev[k - 1], &l->ev[k]) <= 0)
        return k;
    /* First element of the prefix that sorts after the tail's first. */
    size_t lo = 0, hi = k;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ev_cmp(s, &l->ev[mid], &l->ev[k]) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t p = k - lo;
    st_event *tmp = malloc(p * sizeof *tmp);
    if (tmp == NULL) { /* fall back to sorting in place */
        qsort_r(l->ev + lo, n - lo, sizeof *l->ev, ev_rcmp, (void *)s);
        return lo;
    }
    memcpy(tmp, l->ev + lo, p * sizeof *tmp);
    size_t i = 0, j = k, o = lo;
    while (i < p && j < n)
        l->ev[o++] = ev_cmp(s, &tmp[i], &l->ev[j]) <= 0 ? tmp[i++] : l->ev[j++];
    while (i < p)
        l->ev[o++] = tmp[i++];
    free(tmp);
    return lo;
}

static size_t lane_lb(const lane *l, size_t n, uint64_t t) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (l->ev[mid].start < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* A live store's shapes, once they outnumber twice its events, are made again from those its
 * events use: a peer that sends ever new shapes (a new size per copy) would otherwise grow them
 * without end. Paid once per doubling, so amortised over the shapes added. */
static void shapes_collect(st_store *s) {
    if (s->shapes.n <= 2 * s->events + 4096)
        return;
    uint32_t *to = malloc(s->shapes.n * sizeof *to);
    if (to == NULL)
        return;
    memset(to, 0xff, s->shapes.n * sizeof *to);
    st_shapes fresh = {0};
    /* the new ids first, then the events moved to them: out of memory, nothing has changed */
    for (size_t i = 0; i < s->n_lanes; i++) {
        const lane *l = &s->lanes[i];
        for (size_t k = 0; k < l->info.n_events; k++) {
            uint32_t id = l->ev[k].shape & ST_SHAPE_INDEX;
            if (to[id] == UINT32_MAX && (to[id] = st_shapes_intern(&fresh, &s->shapes.v[id])) == UINT32_MAX) {
                st_shapes_free(&fresh);
                free(to);
                return;
            }
        }
    }
    for (size_t i = 0; i < s->n_lanes; i++)
        for (size_t k = 0; k < s->lanes[i].info.n_events; k++) {
            st_event *e = &s->lanes[i].ev[k];
            e->shape = (e->shape & ~ST_SHAPE_INDEX) | to[e->shape & ST_SHAPE_INDEX];
        }
    st_shapes_free(&s->shapes);
    s->shapes = fresh;
    s->head.shapes = fresh.v;
    free(to);
}

/* Drops the oldest events until the store holds at most max_events (down to 15/16 of it, so that
 * the memmove and reindex are paid once per sixteenth of the bound). */
static void store_enforce_bound(st_store *s) {
    size_t max = s->opts.max_events;
    if (max == 0 || s->events <= max)
        return;
    size_t target = max - max / 16;
    size_t need = s->events - target;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < s->n_lanes; i++) {
        lane *l = &s->lanes[i];
        if (l->info.n_events == 0)
            continue;
        if (l->ev[0].start < lo)
            lo = l->ev[0].start;
        if (l->ev[l->info.n_events - 1].start > hi)
            hi = l->ev[l->info.n_events - 1].start;
    }
    /* Smallest cut T with (events starting before T) >= need. */
    uint64_t a = lo, b = hi + 1;
    while (a < b) {
        uint64_t mid = a + (b - a) / 2;
        size_t c = 0;
        for (size_t i = 0; i < s->n_lanes; i++)
            c += lane_lb(&s->lanes[i], s->lanes[i].info.n_events, mid);
        if (c >= need)
            b = mid;
        else
            a = mid + 1;
    }
    for (size_t i = 0; i < s->n_lanes; i++) {
        lane *l = &s->lanes[i];
        size_t k = lane_lb(l, l->info.n_events, a);
        if (k == 0)
            continue;
        memmove(l->ev, l->ev + k, (l->info.n_events - k) * sizeof *l->ev);
        l->info.n_events -= k;
        l->sorted = l->info.n_events;
        l->indexed = 0;
        s->events -= k;
        s->dropped += k;
    }
    shapes_collect(s);
}

/* ---- the index ---- */

static int lane_index(const st_store *s, lane *l, size_t from) {
    size_t n = l->info.n_events;
    if (from > l->indexed)
        from = l->indexed;
    /* prefix sums */
    size_t nb = (n + ST_PB - 1) / ST_PB;
    if (cm_grow((void **)&l->pre, &l->pre_cap, (nb + 1) * ST_CAT_N, sizeof *l->pre))
        return ERR_NOMEM;
    size_t b0 = from / ST_PB;
    if (b0 == 0)
        memset(l->pre, 0, ST_CAT_N * sizeof *l->pre);
    for (size_t b = b0; b < nb; b++) {
        uint64_t *p = l->pre + b * ST_CAT_N, *q = p + ST_CAT_N;
        memcpy(q, p, ST_CAT_N * sizeof *q);
        size_t end = (b + 1) * ST_PB < n ? (b + 1) * ST_PB : n;
        for (size_t i = b * ST_PB; i < end; i++)
            q[st_event_cat(s, &l->ev[i])] += st_ev_dur(s, &l->ev[i]);
    }
    /* trees: level 0 groups ST_FAN events; level k groups ST_FAN nodes of level k-1 */
    size_t cnt = n, lf = from;
    int lv = 0;
    while (lv < ST_LEVELS) {
        size_t groups = (cnt + ST_FAN - 1) / ST_FAN;
        if (cm_grow((void **)&l->maxend[lv], &l->lvl_cap[lv], groups ? groups : 1, sizeof(uint64_t)))
            return ERR_NOMEM;
        size_t lc = l->lvl_cap[lv];
        void *q = realloc(l->longest[lv], lc * sizeof(uint32_t));
        if (q == NULL)
            return ERR_NOMEM;
        l->longest[lv] = q;
        for (size_t g = lf / ST_FAN; g < groups; g++) {
            size_t c0 = g * ST_FAN, c1 = c0 + ST_FAN < cnt ? c0 + ST_FAN : cnt;
            uint64_t mx = 0, best = 0;
            uint32_t bi = UINT32_MAX;
            for (size_t c = c0; c < c1; c++) {
                uint64_t me;
                uint32_t li;
                if (lv == 0) {
                    me = st_ev_end(s, &l->ev[c]);
                    li = (uint32_t)c;
                } else {
                    me = l->maxend[lv - 1][c];
                    li = l->longest[lv - 1][c];
                }
                if (me > mx)
                    mx = me;
                uint64_t d = st_ev_dur(s, &l->ev[li]);
                if (bi == UINT32_MAX || d > best) {
                    best = d;
                    bi = li;
                }
            }
            l->maxend[lv][g] = mx;
            l->longest[lv][g] = bi;
        }
        l->lvl_n[lv] = groups;
        lv++;
        if (groups <= 1)
            break;
        cnt = groups;
        lf /= ST_FAN;
    }
    l->levels = lv;
    l->indexed = n;
    return 0;
}

/* A ranges lane's depths, as Perfetto's slice depth (kept in each range's aux): a range goes on
 * the stack of those open when it starts, after those that ended are taken off its top, so that
 * ranges of one depth never overlap; where ranges nest, that is how many enclose it. Ranges that
 * start together nest longest outside. Then byd lists the events depth by depth, each
 * depth's in time order (by start, and so by end). The whole lane is done again when it changed:
 * once after a replay's load, and at a live view's commits, whose ranges lanes are small. */
static int lane_depths(const st_store *s, lane *l) {
    size_t n = l->indexed, top = 0, cap = 0;
    uint32_t *stk = NULL;
    size_t nd = 0;
    l->n_depths = 0; /* until done */
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && l->ev[j].start == l->ev[i].start)
            j++;
        while (top > 0 && st_ev_end(s, &l->ev[stk[top - 1]]) <= l->ev[i].start)
            top--;
        if (top + (j - i) > cap) {
            size_t c = (top + (j - i)) * 2 + 64;
            uint32_t *p = realloc(stk, c * sizeof *p);
            if (p == NULL) {
                free(stk);
                return ERR_NOMEM;
            }
            stk = p;
            cap = c;
        }
        for (size_t k = j; k-- > i;) {
            l->ev[k].corr = (uint32_t)top;
            stk[top++] = (uint32_t)k;
        }
        if (top > nd)
            nd = top;
        i = j;
    }
    free(stk);
    if (cm_grow((void **)&l->dofs, &l->dofs_cap, nd + 2, sizeof *l->dofs) ||
        cm_grow((void **)&l->byd, &l->byd_cap, n ? n : 1, sizeof *l->byd))
        return ERR_NOMEM;
    memset(l->dofs, 0, (nd + 2) * sizeof *l->dofs);
    for (size_t i = 0; i < n; i++)
        l->dofs[l->ev[i].corr + 1]++;
    for (size_t d = 0; d < nd; d++)
        l->dofs[d + 1] += l->dofs[d];
    for (size_t i = 0; i < n; i++) /* counting sort; dofs[d] runs ahead and is set back below */
        l->byd[l->dofs[l->ev[i].corr]++] = (uint32_t)i;
    for (size_t d = nd; d > 0; d--)
        l->dofs[d] = l->dofs[d - 1];
    l->dofs[0] = 0;
    l->n_depths = nd;
    return 0;
}

static int order_cmp_ctx(const st_store *s, size_t x, size_t y) {
    const st_lane_info *a = &s->lanes[x].info, *b = &s->lanes[y].info;
    if (a->producer != b->producer)
        return a->producer < b->producer ? -1 : 1;
    int ga = a->device == TP_NO_DEVICE, gb = b->device == TP_NO_DEVICE; /* GPU lanes first */
    if (ga != gb)
        return ga - gb;
    if (a->device != b->device)
        return a->device < b->device ? -1 : 1;
    if (!ga) {
        int na = a->kind == ST_LANE_STREAM && a->null_stream, nb = b->kind == ST_LANE_STREAM && b->null_stream;
        if (na != nb)
            return nb - na;
    }
    if (a->id != b->id)
        return a->id < b->id ? -1 : 1;
    return (int)a->kind - (int)b->kind;
}

static void store_order(st_store *s) {
    if (CM_GROW(s->order, s->order_cap, s->n_lanes ? s->n_lanes : 1))
        return;
    for (size_t i = 0; i < s->n_lanes; i++)
        s->order[i] = i;
    /* insertion sort: lanes are few */
    for (size_t i = 1; i < s->n_lanes; i++) {
        size_t v = s->order[i], j = i;
        while (j > 0 && order_cmp_ctx(s, s->order[j - 1], v) > 0) {
            s->order[j] = s->order[j - 1];
            j--;
        }
        s->order[j] = v;
    }
    s->order_dirty = 0;
}

void st_store_commit(st_store *s) {
    if (s->dirty) {
        size_t *from = malloc((s->n_lanes ? s->n_lanes : 1) * sizeof *from);
        for (size_t i = 0; i < s->n_lanes; i++) {
            size_t f = lane_sort(s, &s->lanes[i]);
            if (from)
                from[i] = f;
        }
        store_enforce_bound(s);
        for (size_t i = 0; i < s->n_lanes; i++) {
            lane *l = &s->lanes[i];
            size_t f = from ? from[i] : 0;
            /* a lane the bound emptied before its first index still gets one (an empty one) */
            if (l->indexed != l->info.n_events || f < l->info.n_events || l->pre == NULL) {
                lane_index(s, l, f);
                if (l->info.kind == ST_LANE_NVTX)
                    lane_depths(s, l);
            }
        }
        free(from);
        s->dirty = 0;
    }
    if (s->order_dirty)
        store_order(s);
}

/* Gives back what *p holds past n elements of elem bytes (capacity *cap). */
static void shrink_to(void **p, size_t *cap, size_t n, size_t elem) {
    if (n == 0 || n >= *cap)
        return;
    void *q = realloc(*p, n * elem);
    if (q != NULL) {
        *p = q;
        *cap = n;
    }
}

void st_store_shrink(st_store *s) {
    for (size_t i = 0; i < s->n_lanes; i++) {
        lane *l = &s->lanes[i];
        shrink_to((void **)&l->ev, &l->cap, l->info.n_events, sizeof *l->ev);
        if (l->indexed == l->info.n_events) { /* the index, when current: its own sizes */
            shrink_to((void **)&l->pre, &l->pre_cap, ((l->indexed + ST_PB - 1) / ST_PB + 1) * ST_CAT_N, sizeof *l->pre);
            for (int k = 0; k < l->levels; k++) {
                size_t c1 = l->lvl_cap[k], c2 = c1; /* one capacity for both: the smaller */
                shrink_to((void **)&l->maxend[k], &c1, l->lvl_n[k], sizeof *l->maxend[k]);
                shrink_to((void **)&l->longest[k], &c2, l->lvl_n[k], sizeof *l->longest[k]);
                l->lvl_cap[k] = c1 < c2 ? c1 : c2;
            }
            if (l->byd != NULL) { /* a ranges lane's depths */
                shrink_to((void **)&l->byd, &l->byd_cap, l->indexed, sizeof *l->byd);
                shrink_to((void **)&l->dofs, &l->dofs_cap, l->n_depths + 2, sizeof *l->dofs);
            }
        }
    }
    st_shapes_shrink(&s->shapes);
    s->head.shapes = s->shapes.v;
}

/* ---- reading ---- */

size_t st_lane_count(const st_store *s) { return s->n_lanes; }

static const lane *lane_at(const st_store *s, size_t i) {
    if (i >= s->n_lanes)
        return NULL;
    return &s->lanes[s->order_dirty ? i : s->order[i]];
}

const st_lane_info *st_lane_get(const st_store *s, size_t i) {
    const lane *l = lane_at(s, i);
    return l ? &l->info : NULL;
}

const st_event *st_lane_events(const st_store *s, size_t i, size_t *n) {
    const lane *l = lane_at(s, i);
    *n = l ? l->indexed : 0;
    return l ? l->ev : NULL;
}

size_t st_lane_depths(const st_store *s, size_t i) {
    const lane *l = lane_at(s, i);
    return l && l->info.kind == ST_LANE_NVTX && l->byd ? l->n_depths : 0;
}

const uint32_t *st_lane_at_depth(const st_store *s, size_t i, size_t depth, size_t *n) {
    const lane *l = lane_at(s, i);
    *n = 0;
    if (l == NULL || l->info.kind != ST_LANE_NVTX || l->byd == NULL || depth >= l->n_depths)
        return NULL;
    *n = l->dofs[depth + 1] - l->dofs[depth];
    return l->byd + l->dofs[depth];
}

size_t st_lane_depth_find(const st_store *s, size_t i, size_t depth, uint64_t t) {
    size_t n;
    const uint32_t *d = st_lane_at_depth(s, i, depth, &n);
    const lane *l = lane_at(s, i);
    size_t lo = 0, hi = n;
    while (lo < hi) { /* the first whose end is past t: a depth's ranges end in order */
        size_t m = lo + (hi - lo) / 2;
        if (st_ev_end(s, &l->ev[d[m]]) <= t)
            lo = m + 1;
        else
            hi = m;
    }
    return lo;
}

size_t st_lane_range_at(const st_store *s, size_t i, uint64_t t0, uint64_t t1) {
    for (size_t d = st_lane_depths(s, i); d-- > 0;) {
        size_t n;
        const uint32_t *idx = st_lane_at_depth(s, i, d, &n);
        size_t k = st_lane_depth_find(s, i, d, t0);
        const lane *l = lane_at(s, i);
        if (k < n && l->ev[idx[k]].start <= t0 && st_ev_end(s, &l->ev[idx[k]]) >= t1)
            return idx[k];
    }
    return SIZE_MAX;
}

size_t st_lane_lower_bound(const st_store *s, size_t i, uint64_t t) {
    const lane *l = lane_at(s, i);
    return l ? lane_lb(l, l->indexed, t) : 0;
}

/* Events j < lim with end > t: calls fn for each; returns how many. */
typedef struct active_set {
    uint32_t *idx;
    size_t n, cap;
} active_set;

static void active_push(active_set *a, size_t j) {
    if (a->n == a->cap) {
        size_t c = a->cap ? a->cap * 2 : 64;
        uint32_t *p = realloc(a->idx, c * sizeof *p);
        if (p == NULL)
            return;
        a->idx = p;
        a->cap = c;
    }
    a->idx[a->n++] = (uint32_t)j;
}

static void active_rec(const st_store *s, const lane *l, int lv, size_t node, size_t lim, uint64_t t, active_set *a) {
    /* A node of level lv covers the events [node * span(lv), (node + 1) * span(lv)) where
     * span(lv) = ST_FAN^(lv+1); its children are the nodes node * ST_FAN... of level lv - 1. */
    if (l->maxend[lv][node] <= t)
        return;
    size_t c0 = node * ST_FAN;
    if (lv == 0) {
        for (size_t j = c0; j < c0 + ST_FAN && j < lim; j++)
            if (st_ev_end(s, &l->ev[j]) > t)
                active_push(a, j);
        return;
    }
    size_t child_span = 1;
    for (int k = 0; k < lv; k++)
        child_span *= ST_FAN;
    for (size_t c = c0; c < c0 + ST_FAN && c < l->lvl_n[lv - 1] && c * child_span < lim; c++)
        active_rec(s, l, lv - 1, c, lim, t, a);
}

/* Collects the events j < lim that are still running at t (end > t). */
static void active_at(const st_store *s, const lane *l, size_t lim, uint64_t t, active_set *a) {
    a->n = 0;
    if (lim == 0 || l->levels == 0)
        return;
    int top = l->levels - 1;
    for (size_t g = 0; g < l->lvl_n[top]; g++)
        active_rec(s, l, top, g, lim, t, a);
}

/* Range argmax of durations over events [lo, hi). */
static uint32_t longest_in(const st_store *s, const lane *l, size_t lo, size_t hi) {
    uint32_t best = UINT32_MAX;
    uint64_t bd = 0;
#define CONSIDER(j)                                                                      \
    do {                                                                                 \
        uint32_t j_ = (j);                                                               \
        uint64_t d_ = st_ev_dur(s, &l->ev[j_]);                                          \
        if (best == UINT32_MAX || d_ > bd || (d_ == bd && j_ < best)) {                  \
            best = j_;                                                                   \
            bd = d_;                                                                     \
        }                                                                                \
    } while (0)
    /* Walk up: at level -1 (events) take the ragged edges, then whole nodes of higher levels. */
    size_t a = lo, b = hi;
    while (a < b && a % ST_FAN)
        CONSIDER((uint32_t)a++);
    while (a < b && b % ST_FAN)
        CONSIDER((uint32_t)--b);
    a /= ST_FAN;
    b /= ST_FAN;
    for (int lv = 0; lv < l->levels && a < b; lv++) {
        while (a < b && a % ST_FAN)
            CONSIDER(l->longest[lv][a++]);
        while (a < b && b % ST_FAN)
            CONSIDER(l->longest[lv][--b]);
        if (lv + 1 == l->levels) {
            while (a < b)
                CONSIDER(l->longest[lv][a++]);
        }
        a /= ST_FAN;
        b /= ST_FAN;
    }
#undef CONSIDER
    return best;
}

/* F(t) for every category, with the active set at t. */
static void busy_before(const st_store *s, const lane *l, uint64_t t, size_t lb, const active_set *a,
                        uint64_t out[ST_CAT_N]) {
    size_t b = lb / ST_PB;
    memcpy(out, l->pre + b * ST_CAT_N, ST_CAT_N * sizeof *out);
    for (size_t j = b * ST_PB; j < lb; j++)
        out[st_event_cat(s, &l->ev[j])] += st_ev_dur(s, &l->ev[j]);
    for (size_t k = 0; k < a->n; k++) {
        const st_event *e = &l->ev[a->idx[k]];
        out[st_event_cat(s, e)] -= st_ev_end(s, e) - t;
    }
}

int st_lane_summary(const st_store *s, size_t li, uint64_t t0, uint64_t t1, size_t n, st_bucket *out) {
    const lane *l = lane_at(s, li);
    if (l == NULL || n == 0 || t1 < t0)
        return ERR_INVAL;
    size_t ne = l->indexed;
    if (ne == 0 || l->pre == NULL) { /* nothing indexed (or no memory for the index): idle */
        memset(out, 0, n * sizeof *out);
        for (size_t i = 0; i < n; i++)
            out[i].longest = UINT32_MAX;
        return 0;
    }
    uint64_t w = (t1 - t0) / n;
    active_set a = {0};
    uint64_t fprev[ST_CAT_N], fcur[ST_CAT_N];
    size_t lb_prev = lane_lb(l, ne, t0);
    active_at(s, l, lb_prev, t0, &a);
    busy_before(s, l, t0, lb_prev, &a, fprev);
    for (size_t i = 0; i < n; i++) {
        uint64_t b = i + 1 == n ? t1 : t0 + (uint64_t)(i + 1) * w;
        st_bucket *o = &out[i];
        /* events touching [a, b): those active at a that started before it, and those starting in it */
        size_t lb = lane_lb(l, ne, b);
        uint32_t best = longest_in(s, l, lb_prev, lb);
        uint64_t bd = best == UINT32_MAX ? 0 : st_ev_dur(s, &l->ev[best]);
        uint32_t cnt = (uint32_t)a.n;
        for (size_t k = 0; k < a.n; k++) {
            uint32_t j = a.idx[k];
            uint64_t d = st_ev_dur(s, &l->ev[j]);
            if (best == UINT32_MAX || d > bd || (d == bd && j < best)) {
                best = j;
                bd = d;
            }
        }
        cnt += (uint32_t)(lb - lb_prev);
        active_at(s, l, lb, b, &a);
        busy_before(s, l, b, lb, &a, fcur);
        for (int c = 0; c < ST_CAT_N; c++)
            o->busy[c] = fcur[c] - fprev[c];
        o->count = cnt;
        o->longest = best;
        memcpy(fprev, fcur, sizeof fprev);
        lb_prev = lb;
    }
    free(a.idx);
    return 0;
}

/* Widens [*lo, *hi] to the first start and latest end of a lane's indexed events (the roots of
 * its max tree). */
static void lane_indexed_span(const lane *l, uint64_t *lo, uint64_t *hi) {
    if (l->indexed == 0)
        return;
    if (l->ev[0].start < *lo)
        *lo = l->ev[0].start;
    int top = l->levels - 1;
    for (size_t g = 0; g < l->lvl_n[top]; g++)
        if (l->maxend[top][g] > *hi)
            *hi = l->maxend[top][g];
}

void st_store_span(const st_store *s, uint64_t *t0, uint64_t *t1) {
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < s->n_lanes; i++)
        lane_indexed_span(&s->lanes[i], &lo, &hi);
    if (lo == UINT64_MAX)
        lo = hi = 0;
    *t0 = lo;
    *t1 = hi;
}

size_t st_store_events(const st_store *s) { return s->events; }
uint64_t st_store_dropped(const st_store *s) { return s->dropped; }

void st_store_memory_parts(const st_store *s, st_memory *m) {
    memset(m, 0, sizeof *m);
    m->strings = cm_strpool_bytes(&s->strings) + cm_u64map_bytes(&s->pstr);
    m->other = sizeof *s + cm_u64map_bytes(&s->prod_by_id) + cm_u64map_bytes(&s->lane_by_key) +
               cm_u64map_bytes(&s->stream_meta) + cm_u64map_bytes(&s->thread_name) + cm_u64map_bytes(&s->mod_by_key) +
               s->mods_cap * sizeof *s->mods;
    m->other += s->prods_cap * sizeof *s->prods + s->pext_cap * sizeof *s->pext + s->devs_cap * sizeof *s->devs;
    m->other += s->lanes_cap * sizeof *s->lanes + s->order_cap * sizeof *s->order + s->pend_cap * sizeof *s->pend;
    m->shapes = st_shapes_bytes(&s->shapes);
    m->callsites = cm_u64map_bytes(&s->cs_by_key);
    for (size_t i = 0; i < s->n_cs; i++)
        m->callsites += sizeof s->cs[i] + s->cs[i].n_frames * sizeof(st_frame);
    for (size_t i = 0; i < s->n_lanes; i++) {
        const lane *l = &s->lanes[i];
        m->events += l->cap * sizeof *l->ev;
        m->summaries += l->pre_cap * sizeof *l->pre;
        for (int k = 0; k < ST_LEVELS; k++)
            m->summaries += l->lvl_cap[k] * (sizeof(uint64_t) + sizeof(uint32_t));
        m->depths += l->byd_cap * sizeof *l->byd + l->dofs_cap * sizeof *l->dofs;
    }
}

size_t st_store_memory(const st_store *s) {
    st_memory m;
    st_store_memory_parts(s, &m);
    return m.events + m.summaries + m.depths + m.shapes + m.strings + m.callsites + m.other;
}

size_t st_producer_count(const st_store *s) { return s->n_prods; }

void st_producer_span(const st_store *s, uint32_t prod, uint64_t *t0, uint64_t *t1) {
    uint64_t a = UINT64_MAX, b = 0;
    for (size_t i = 0; i < s->n_lanes; i++) {
        const lane *l = &s->lanes[i];
        if (l->info.producer != prod)
            continue;
        lane_indexed_span(l, &a, &b);
        for (size_t k = l->indexed; k < l->info.n_events; k++) { /* and those added since */
            if (l->ev[k].start < a)
                a = l->ev[k].start;
            if (st_ev_end(s, &l->ev[k]) > b)
                b = st_ev_end(s, &l->ev[k]);
        }
    }
    *t0 = b ? a : 0;
    *t1 = b;
}

void st_store_producers_read(st_store *s, uint32_t first) {
    for (size_t i = first; i < s->n_prods; i++)
        s->prods[i].ended = 1;
}

int st_store_shift_producer(st_store *s, uint32_t prod, int64_t shift_ns) {
    return prod < s->n_prods ? producer_shift(s, prod, shift_ns) : ERR_INVAL;
}
const st_producer_info *st_producer_get(const st_store *s, size_t i) {
    return i < s->n_prods ? &s->prods[i] : NULL;
}
size_t st_device_count(const st_store *s) { return s->n_devs; }
const st_device_info *st_device_get(const st_store *s, size_t i) { return i < s->n_devs ? &s->devs[i] : NULL; }

const st_frame *st_callsite_frames(const st_store *s, uint64_t callsite, size_t *n) {
    if (callsite == 0 || callsite > s->n_cs || s->cs[callsite - 1].n_frames == 0) {
        *n = 0;
        return NULL;
    }
    *n = s->cs[callsite - 1].n_frames;
    return s->cs[callsite - 1].frames;
}

size_t st_callsite_count(const st_store *s) { return s->n_cs; }

int st_module_build_id(const st_store *s, uint64_t callsite, uint32_t module, const uint8_t **id, size_t *len) {
    *id = NULL;
    *len = 0;
    if (callsite == 0 || callsite > s->n_cs)
        return 0;
    const uint64_t *v = cm_u64map_find(&s->mod_by_key, (uint64_t)s->cs[callsite - 1].producer << 32 | module);
    if (v == NULL)
        return 0;
    *id = s->mods[*v - 1].id;
    *len = s->mods[*v - 1].len;
    return 1;
}

void st_frame_set_symbol(st_store *s, uint64_t callsite, size_t index, uint32_t module, uint64_t pc,
                         const char *func, const char *file, uint32_t line) {
    if (callsite == 0 || callsite > s->n_cs || index >= s->cs[callsite - 1].n_frames)
        return;
    st_frame *f = &s->cs[callsite - 1].frames[index];
    if (f->kind != TP_FRAME_NATIVE || f->module != module || f->pc != pc)
        return;
    f->symbolized = 1;
    if (func != NULL) {
        uint32_t id = st_intern(s, func, strlen(func));
        if (id != 0)
            f->func = id;
    }
    if (file != NULL && line != 0) {
        uint32_t id = st_intern(s, file, strlen(file));
        if (id != 0) {
            f->file = id;
            f->line = line;
        }
    }
}

/* ---- naming call sites ---- */

int st_is_runtime_function(const char *f) {
    if (f == NULL)
        return 0;
    if (strncmp(f, "cudart::", 8) == 0 || strncmp(f, "_ZN6cudart", 10) == 0 ||
        strncmp(f, "__cuda", 6) == 0 || strncmp(f, "libcudart_static_", 17) == 0 ||
        strncmp(f, "__device_stub_", 14) == 0) /* nvcc's launch stubs: <<<>>> calls them */
        return 1;
    /* the runtime API itself: cudaStreamSynchronize, cudaMemcpy, ... (and their _ptsz forms) */
    return (strncmp(f, "cuda", 4) == 0 && f[4] >= 'A' && f[4] <= 'Z') ||
           (strncmp(f, "hip", 3) == 0 && f[3] >= 'A' && f[3] <= 'Z'); /* HIP's runtime API */
}

/* Standard library modules a profiler names by their bare path ("threading.py", "multiprocessing/spawn.py"). */
static const char *const k_stdlib[] = {
    "__future__", "_collections_abc", "_weakrefset", "abc", "argparse", "ast", "asyncio", "base64", "bdb",
    "bisect", "bz2", "cProfile", "calendar", "code", "codecs", "codeop", "collections", "concurrent",
    "configparser", "contextlib", "contextvars", "copy", "copyreg", "csv", "ctypes", "dataclasses",
    "datetime", "decimal", "dis", "distutils", "email", "enum", "fnmatch", "fractions", "functools",
    "genericpath", "gettext", "glob", "gzip", "hashlib", "heapq", "hmac", "html", "http", "importlib",
    "inspect", "io", "json", "keyword", "linecache", "locale", "logging", "lzma", "multiprocessing",
    "numbers", "opcode", "operator", "os", "pathlib", "pdb", "pickle", "pkgutil", "platform", "posixpath",
    "pprint", "profile", "pstats", "queue", "random", "re", "reprlib", "runpy", "sched", "selectors",
    "shutil", "signal", "site", "socket", "socketserver", "sre_compile", "sre_parse", "ssl", "stat",
    "statistics", "string", "struct", "subprocess", "sysconfig", "tarfile", "tempfile", "textwrap",
    "threading", "timeit", "token", "tokenize", "traceback", "types", "typing", "unittest", "urllib",
    "uuid", "warnings", "weakref", "xml", "zipfile", "zipimport",
};

int st_is_library_file(const char *file) {
    if (file == NULL || *file == '\0' || *file == '<')
        return 1;
    if (strncmp(file, "torch/", 6) == 0)
        return 1;
    const char *pk = strstr(file, "-packages/");
    if (pk != NULL) /* site-packages or dist-packages: PyTorch's own files there */
        return strncmp(pk + 10, "torch/", 6) == 0;
    if (strstr(file, "/lib/python") != NULL) /* an interpreter's library, outside site-packages */
        return 1;
    if (*file == '/')
        return 0;
    size_t n = strcspn(file, "/.");
    for (size_t i = 0; i < sizeof k_stdlib / sizeof *k_stdlib; i++)
        if (strlen(k_stdlib[i]) == n && strncmp(file, k_stdlib[i], n) == 0)
            return 1;
    return 0;
}

/* Of the operators in f[0..n), the one that made the call: the outermost ATen operator (what the
 * program called: aten::is_nonzero around aten::item around aten::_local_scalar_dense), else the
 * outermost operator (a module's "forward", an autograd node); NULL when there is none. */
static const st_frame *causal_op(const st_store *s, const st_frame *f, size_t n) {
    const st_frame *aten = NULL, *any = NULL;
    for (size_t i = 0; i < n; i++)
        if (f[i].kind == TP_FRAME_OP) {
            any = &f[i];
            if (strncmp(st_str(s, f[i].func), "aten::", 6) == 0)
                aten = &f[i];
        }
    return aten != NULL ? aten : any;
}

const st_frame *st_site_frame(const st_store *s, uint64_t callsite) {
    size_t n = 0;
    const st_frame *f = callsite ? st_callsite_frames(s, callsite, &n) : NULL;
    const st_frame *py = NULL, *nat = NULL;
    size_t ops = 0; /* the frames below the first program frame: the operators there */
    for (size_t i = 0; i < n; i++) {
        if (f[i].kind == TP_FRAME_PYTHON) {
            const char *file = st_str(s, f[i].file);
            if (f[i].line != 0 && !st_is_library_file(file))
                return &f[i];
            if (py == NULL && f[i].line != 0 && *file != '\0' && *file != '<')
                py = &f[i];
        } else if (f[i].kind == TP_FRAME_NATIVE) {
            if (nat == NULL && !st_is_runtime_function(st_str(s, f[i].func)))
                nat = &f[i];
        }
        if (py == NULL && nat == NULL)
            ops = i + 1;
    }
    if (py != NULL)
        return py;
    if (nat != NULL)
        return nat;
    const st_frame *op = causal_op(s, f, ops);
    if (op != NULL)
        return op;
    return n > 0 ? &f[0] : NULL;
}

const st_frame *st_site_op(const st_store *s, uint64_t callsite) {
    size_t n = 0;
    const st_frame *f = callsite ? st_callsite_frames(s, callsite, &n) : NULL;
    const st_frame *named = st_site_frame(s, callsite);
    if (named != NULL && named->kind == TP_FRAME_OP)
        return named;
    return named != NULL ? causal_op(s, f, (size_t)(named - f)) : NULL;
}
