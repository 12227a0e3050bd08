/*
 * The Kineto importer's entries to records (kineto_int.h): each traceEvents entry, once read, is
 * counted and becomes a record in memory (a GPU operation, a host call or range), a context that
 * names the calls inside it (an operator or a Python frame, with its Call stack), a thread name, or
 * a count of what was skipped; names are interned here. The records live in mappings of their own
 * until they are emitted.
 */
#include "kineto_int.h"
#include "api.h"
#include "grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/crc64.h>

static int ieq(const char *a, size_t n, const char *lit) {
    size_t m = strlen(lit);
    if (n != m)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = a[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != lit[i])
            return 0;
    }
    return 1;
}

/* The categories imported, as Kineto writes them now and as PyTorch 1.8/1.9 did (any case). */
static const struct {
    const char *name;
    uint8_t len, cat;
} k_cats[] = {
    {"kernel", 6, CAT_KERNEL},
    {"cuda_runtime", 12, CAT_RUNTIME},
    {"runtime", 7, CAT_RUNTIME},
    {"gpu_memcpy", 10, CAT_MEMCPY},
    {"memcpy", 6, CAT_MEMCPY},
    {"gpu_memset", 10, CAT_MEMSET},
    {"memset", 6, CAT_MEMSET},
    {"cuda_sync", 9, CAT_SYNC},
    {"cuda_driver", 11, CAT_DRIVER},
    {"driver", 6, CAT_DRIVER},
    {"user_annotation", 15, CAT_ANNOT},
    {"gpu_user_annotation", 19, CAT_GPU_ANNOT},
    {"cpu_op", 6, CAT_OP},
    {"operator", 8, CAT_OP},
    {"python_function", 15, CAT_PYFN},
};

int kt_cat_of(kimp *k, const char *s, size_t n) {
    for (int i = 0; i < KCAT_SEEN; i++)
        if (k->cat_seen[i].len == n && memcmp(k->cat_seen[i].text, s, n) == 0)
            return k->cat_seen[i].cat;
    int cat = CAT_OTHER;
    for (size_t i = 0; i < sizeof k_cats / sizeof k_cats[0]; i++)
        if (k_cats[i].len == n && ieq(s, n, k_cats[i].name)) {
            cat = k_cats[i].cat;
            break;
        }
    if (n > 0 && n <= sizeof k->cat_seen[0].text) {
        kcatseen *c = &k->cat_seen[k->cat_next++ % KCAT_SEEN];
        memcpy(c->text, s, n);
        c->len = (uint8_t)n;
        c->cat = (uint8_t)cat;
    }
    return cat;
}

/* The st_api_class of a host call's name (id: its string id, 0 when it has none), worked out once
 * per name: ids are dense, so by id in an array. */
static int api_class(kimp *k, uint32_t id, const char *s, size_t n) {
    if (id != 0 && id < k->api_class_cap && k->api_class[id] != 0)
        return k->api_class[id] - 1;
    int cls = (int)st_api_class_of(s, n);
    if (id != 0 && CM_GROW(k->api_class, k->api_class_cap, (size_t)id + 1) == 0) {
        for (size_t i = k->api_class_known; i < k->api_class_cap; i++)
            k->api_class[i] = 0;
        k->api_class_known = k->api_class_cap;
        k->api_class[id] = (uint8_t)(cls + 1);
    }
    return cls;
}

static int starts(const char *s, size_t n, const char *lit) {
    size_t m = strlen(lit);
    return n >= m && memcmp(s, lit, m) == 0;
}

static int equals(const char *s, size_t n, const char *lit) {
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

/* The memory kinds as copy and memset names spell them, in enum tp_mem_kind's order. */
static const char *const mem_kind_names[] = {"Unknown", "Pageable", "Pinned",        "Device",
                                             "Array",   "Managed",  "Device Static", "Managed Static"};

static int mem_kind_of(const char *s, size_t n) {
    for (int i = 1; i < TP_MEM_MAX_; i++)
        if (equals(s, n, mem_kind_names[i]))
            return i;
    return TP_MEM_UNKNOWN;
}

/* "Memcpy HtoD (Pageable -> Device)": copy kind and the two memory kinds. */
static void parse_memcpy_name(const char *s, size_t n, uint8_t *copy, uint8_t *src, uint8_t *dst) {
    static const char *const kinds[] = {NULL,   "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                        "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
    *copy = TP_COPY_UNKNOWN;
    *src = *dst = TP_MEM_UNKNOWN;
    if (!starts(s, n, "Memcpy ") || n < 11)
        return;
    for (int i = 1; i < TP_COPY_MAX_; i++)
        if (memcmp(s + 7, kinds[i], 4) == 0)
            *copy = (uint8_t)i;
    const char *open = memchr(s, '(', n);
    if (open == NULL)
        return;
    const char *end = s + n;
    const char *close = memchr(open, ')', (size_t)(end - open));
    if (close == NULL)
        return;
    const char *a = open + 1;
    for (const char *q = a; q + 4 <= close; q++) {
        if (memcmp(q, " -> ", 4) == 0) {
            *src = (uint8_t)mem_kind_of(a, (size_t)(q - a));
            *dst = (uint8_t)mem_kind_of(q + 4, (size_t)(close - q - 4));
            return;
        }
    }
}

/* "Memset (Device)": the memory kind. */
static uint8_t parse_memset_name(const char *s, size_t n) {
    if (n == 0)
        return TP_MEM_UNKNOWN;
    const char *open = memchr(s, '(', n);
    if (open == NULL)
        return TP_MEM_UNKNOWN;
    const char *close = memchr(open, ')', (size_t)(s + n - open));
    if (close == NULL)
        return TP_MEM_UNKNOWN;
    return (uint8_t)mem_kind_of(open + 1, (size_t)(close - open - 1));
}

int kt_sync_type_of(const char *s, size_t n) {
    if (equals(s, n, "Event Sync"))
        return TP_SYNC_EVENT;
    if (equals(s, n, "Stream Wait Event"))
        return TP_SYNC_STREAM_WAIT_EVENT;
    if (equals(s, n, "Stream Sync"))
        return TP_SYNC_STREAM;
    if (equals(s, n, "Context Sync"))
        return TP_SYNC_CONTEXT;
    return TP_SYNC_UNKNOWN;
}

void kt_count_skip(kimp *k, const char *cat, size_t len) {
    import_stats *st = k->st;
    st->skipped++;
    if (len >= IMPORT_CAT_MAX)
        len = IMPORT_CAT_MAX - 1;
    for (size_t i = 0; i < st->n_skip; i++) {
        if (strlen(st->skip[i].cat) == len && memcmp(st->skip[i].cat, cat, len) == 0) {
            st->skip[i].count++;
            return;
        }
    }
    if (st->n_skip == IMPORT_SKIP_SLOTS) {
        st->skip_other++;
        return;
    }
    import_skip *s = &st->skip[st->n_skip++];
    memcpy(s->cat, cat, len);
    s->cat[len] = '\0';
    s->count = 1;
}

/* An entry of an imported category that cannot be used: counted, the first one described. */
static int invalid(kimp *k, const kev *e, const char *why) {
    import_stats *st = k->st;
    if (st->invalid++ == 0) {
        uint64_t line, col;
        kt_pos_at(k, off_of(k, k->at), &line, &col);
        static const char *const cats[] = {
            "?",           "?",          "kernel",        "memcpy", "memset", "cuda_sync", "runtime call",
            "driver call", "annotation", "gpu annotation"};
        snprintf(st->first_invalid, sizeof st->first_invalid,
                 "traceEvents entry %llu (ending line %llu): %s %s", (unsigned long long)(st->entries - 1),
                 (unsigned long long)line, cats[e->cat], why);
    }
    return 1;
}
/* The records and the operators grow to many megabytes: each lives in a mapping of its own
 * (cm_big_resize), which grows by moving its pages, never by copying them, and goes back whole. */

_Static_assert(sizeof(krec) == 48, "a record is held in 48 bytes");
_Static_assert(offsetof(kkernel, graph) == offsetof(tp_kernel, graph) &&
                   offsetof(kkernel, correlation) == offsetof(tp_kernel, correlation) &&
                   offsetof(kkernel, start) == offsetof(tp_kernel, start) &&
                   offsetof(kkernel, end) == offsetof(tp_kernel, end) &&
                   offsetof(kkernel, shape) == offsetof(tp_kernel, grid),
               "a kkernel is a tp_kernel up to its shape");

int kt_shape(kimp *k, const uint32_t grid[3], const uint32_t block[3], uint32_t *id) {
    kshape s;
    memcpy(s.grid, grid, sizeof s.grid);
    memcpy(s.block, block, sizeof s.block);
    if (k->last_shape != 0 && memcmp(&k->shapes[k->last_shape - 1], &s, sizeof s) == 0) {
        *id = k->last_shape - 1;
        return 0;
    }
    uint64_t h = CM_FNV64_BASIS;
    for (int i = 0; i < 3; i++)
        h = cm_fnv64_word(h, (uint64_t)s.grid[i] << 32 | s.block[i]);
    const uint64_t *v;
    for (; (v = cm_u64map_find(&k->shape_ids, h)) != NULL; h++) /* another shape's hash: the next key */
        if (memcmp(&k->shapes[*v - 1], &s, sizeof s) == 0) {
            *id = (uint32_t)(*v - 1);
            k->last_shape = (uint32_t)*v;
            return 0;
        }
    if (k->n_shapes >= UINT32_MAX - 1 || CM_GROW(k->shapes, k->cap_shapes, k->n_shapes + 1) != 0 ||
        cm_u64map_put(&k->shape_ids, h, k->n_shapes + 1) != 0)
        return ERR_NOMEM;
    k->shapes[k->n_shapes] = s;
    *id = (uint32_t)k->n_shapes++;
    k->last_shape = *id + 1;
    kt_held(k, sizeof s);
    return 0;
}

void kt_rec_out(const kimp *k, const krec *r, tp_record *out) {
    memset(out, 0, sizeof *out);
    if (r->head.kind != TP_K_KERNEL) {
        memcpy(out, r, sizeof *r);
        return;
    }
    const kkernel *x = &r->kernel;
    tp_kernel *y = &out->kernel;
    memcpy(y, x, offsetof(kkernel, shape)); /* the fields before the shape are tp_kernel's */
    if (x->shape < k->n_shapes) {
        memcpy(y->grid, k->shapes[x->shape].grid, sizeof y->grid);
        memcpy(y->block, k->shapes[x->shape].block, sizeof y->block);
    }
}

static krec *rec_new(kimp *k) {
    if (k->n_rec >= k->max_events + k->n_ops) { /* the records other than operators are at the limit */
        char what[128];
        snprintf(what, sizeof what, "more than %llu events: over the import limit (a larger --max-events N reads it)",
                 (unsigned long long)k->max_events);
        kt_fail_here(k, ERR_LIMIT, what);
        return NULL;
    }
    if (k->n_rec == k->cap_rec) {
        uint64_t limit = k->max_events + (k->opts && k->opts->ops ? k->max_events : 0);
        size_t cap = k->cap_rec ? k->cap_rec * 2 : 4096;
        if (cap > limit)
            cap = (size_t)limit;
        krec *r = cm_big_resize(k->rec, k->cap_rec * sizeof *r, cap * sizeof *r);
        if (r == NULL) {
            kt_fail_nomem(k);
            return NULL;
        }
        k->rec = r;
        k->cap_rec = cap;
    }
    cm_big_populate_ahead(k->rec, k->n_rec, k->cap_rec, sizeof *k->rec, KT_POPULATE);
    krec *r = &k->rec[k->n_rec++];
    memset(r, 0, sizeof *r);
    kt_held(k, sizeof *r);
    return r;
}

/* Where a name may sit in name_memo: a quick mix of all its bytes, eight at a time in two lanes.
 * Unkeyed, as the memo is only a shortcut in front of the table: a name that misses it is looked up
 * there. */
static size_t memo_slot(const char *s, size_t len) {
    uint64_t a = len, b = 0, w;
    size_t i = 0;
    for (; i + 16 <= len; i += 16) {
        memcpy(&w, s + i, 8);
        a = (a ^ w) * 0x9e3779b97f4a7c15ull;
        memcpy(&w, s + i + 8, 8);
        b = (b ^ w) * 0xc2b2ae3d27d4eb4full;
    }
    if (len >= 8) { /* the last eight, which may overlap those taken */
        memcpy(&w, s + len - 8, 8);
        b = (b ^ w) * 0x165667b19e3779f9ull;
        if (i + 8 < len) {
            memcpy(&w, s + i, 8);
            a = (a ^ w) * 0x9e3779b97f4a7c15ull;
        }
    } else {
        w = 0;
        memcpy(&w, s, len);
        a = (a ^ w) * 0x9e3779b97f4a7c15ull;
    }
    uint64_t x = a ^ (b << 31 | b >> 33);
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    return (size_t)(x >> (64 - KNAME_MEMO_BITS));
}

/* kt_intern: a name met lately is found in the memo with a compare (two ways a slot, the one met
 * last first); any other in the table, by its keyed hash. */
static uint32_t intern(kimp *k, const char *s, size_t len) {
    if (s == NULL || len == 0 || len > UINT32_MAX)
        return tp_enc_intern(k->enc, s, len);
    kname *memo = &k->name_memo[memo_slot(s, len) & ~(size_t)1]; /* two ways, the one met last first */
    if (memo[0].id && memo[0].len == len && memcmp(k->names_text.s + memo[0].off, s, len) == 0)
        return memo[0].id;
    if (memo[1].id && memo[1].len == len && memcmp(k->names_text.s + memo[1].off, s, len) == 0) {
        kname t = memo[1];
        memo[1] = memo[0];
        memo[0] = t;
        return t.id;
    }
    memo[1] = memo[0];
    uint64_t h = cm_hash_bytes_k(&k->name_key, s, len);
    size_t mask = k->n_names_cap - 1, j = (size_t)h & mask;
    for (; k->n_names_cap && k->names[j].id; j = (j + 1) & mask) {
        const kname *e = &k->names[j];
        if (e->hash == h && e->len == len && memcmp(k->names_text.s + e->off, s, len) == 0) {
            *memo = *e;
            return e->id;
        }
    }
    if (k->n_names_cap && ((j - (size_t)h) & mask) > CM_HASH_LONG_PROBE)
        cm_hash_long_probe_note();
    uint32_t id = tp_enc_intern(k->enc, s, len);
    if (id == 0 || k->names_text.len + len > UINT32_MAX)
        return id;
    if (2 * (k->n_names + 1) > k->n_names_cap) { /* grow: half full at most */
        size_t cap = k->n_names_cap ? 2 * k->n_names_cap : 1024;
        kname *t = calloc(cap, sizeof *t);
        if (t == NULL)
            return id;
        for (size_t i = 0; i < k->n_names_cap; i++) {
            if (k->names[i].id == 0)
                continue;
            size_t at = (size_t)k->names[i].hash & (cap - 1);
            while (t[at].id)
                at = (at + 1) & (cap - 1);
            t[at] = k->names[i];
        }
        free(k->names);
        k->names = t;
        k->n_names_cap = cap;
        mask = cap - 1;
        for (j = (size_t)h & mask; t[j].id; j = (j + 1) & mask) {
        }
    }
    if (kt_buf_append(&k->names_text, s, len) != 0)
        return id;
    k->names[j] = (kname){h, (uint32_t)(k->names_text.len - len), (uint32_t)len, id};
    *memo = k->names[j];
    k->n_names++;
    return id;
}

uint32_t kt_intern(kimp *k, const char *s, size_t len) {
    return intern(k, s, len);
}

uint32_t kt_intern_ev(kimp *k, const kev *e) {
    return intern(k, e->name_s, e->name_len);
}

/* Where a GPU row runs: device (args.device, else pid) and stream (args.stream, else a numeric
 * tid); a stream of -1 or 4294967295 is TP_NO_ID, which only syncs may have. */
static const char *gpu_where(const kev *e, int allow_no_stream, uint16_t *dev, uint32_t *stream) {
    int64_t d, s;
    if (e->have & H_DEVICE)
        d = e->device;
    else if (e->have & H_PID)
        d = e->pid;
    else
        return "without a device";
    if (d < 0 || d >= TP_NO_DEVICE)
        return "with a device out of range";
    if (e->have & H_STREAM)
        s = e->stream;
    else if (e->have & H_TID)
        s = e->tid;
    else
        return "without a stream";
    if (s == -1 || s == (int64_t)TP_NO_ID) {
        if (!allow_no_stream)
            return "without a stream";
        s = TP_NO_ID;
    } else if (s < 0 || s > (int64_t)TP_NO_ID) {
        return "with a stream out of range";
    }
    *dev = (uint16_t)d;
    *stream = (uint32_t)s;
    return NULL;
}

static uint32_t u32_or(const kev *e, uint32_t bit, int64_t v, uint32_t none) {
    return (e->have & bit) && v >= 0 && v <= (int64_t)UINT32_MAX ? (uint32_t)v : none;
}

/* The streams and threads seen, each put in its map the first time; the last of each is
 * remembered, since rows of one stream or thread come in runs. */
static int note_stream(kimp *k, uint16_t dev, uint32_t stream, uint32_t context) {
    k->dev_used[dev / 8] |= (uint8_t)(1u << (dev % 8));
    uint64_t key = (uint64_t)dev << 32 | stream;
    if (stream == TP_NO_ID || (k->last_stream == key + 1))
        return 1;
    if (cm_u64map_get_or_add(&k->streams, key, context, NULL) == NULL)
        return kt_fail_nomem(k);
    k->last_stream = key + 1;
    return 1;
}

static int note_thread(kimp *k, uint32_t pid, uint32_t tid) {
    if (!k->have_pid) {
        k->have_pid = 1;
        k->pid = pid;
    }
    uint64_t key = (uint64_t)pid << 32 | tid;
    if (k->last_thread == key + 1)
        return 1;
    if (cm_u64map_get_or_add(&k->threads, key, 1, NULL) == NULL)
        return kt_fail_nomem(k);
    k->last_thread = key + 1;
    return 1;
}

/* Start and end (relative to baseTimeNanoseconds until the fix-up) of an X event. */
static const char *span_of(const kev *e, uint64_t *start, uint64_t *end) {
    if (e->have & H_TS_BAD)
        return "with an unusable ts";
    if (!(e->have & H_TS))
        return "without ts";
    if (e->have & H_DUR_BAD)
        return "with an unusable dur";
    int64_t dur = (e->have & H_DUR) ? e->dur : 0;
    if (dur < 0)
        return "with a negative dur";
    int64_t t1;
    if (__builtin_add_overflow(e->ts, dur, &t1))
        return "with ts + dur out of range";
    *start = (uint64_t)e->ts;
    *end = (uint64_t)t1;
    return NULL;
}

static int event_gpu(kimp *k, kev *e) {
    uint16_t dev;
    uint32_t stream;
    uint64_t t0, t1;
    const char *why = span_of(e, &t0, &t1);
    if (why == NULL)
        why = gpu_where(e, e->cat == CAT_SYNC || e->cat == CAT_GPU_ANNOT, &dev, &stream);
    if (why)
        return invalid(k, e, why);
    if (stream == TP_NO_ID && e->cat == CAT_SYNC) /* which spelling: HTA reads them differently */
        k->wide[dev] |= ((e->have & H_STREAM) ? e->stream : e->tid) == -1 ? TP_F_SYNC_ID_NEG : TP_F_SYNC_ID_U32;
    krec *r = rec_new(k);
    if (r == NULL)
        return 0;
    uint32_t corr = u32_or(e, H_CORR, e->corr, 0);
    uint32_t context = u32_or(e, H_CONTEXT, e->context, 0);
    switch (e->cat) {
    case CAT_KERNEL: {
        kkernel *x = &r->kernel;
        x->kind = TP_K_KERNEL;
        x->correlation = corr;
        x->context = context;
        x->name = kt_intern_ev(k, e);
        x->graph = u32_or(e, H_GRAPH, e->graph, 0);
        if (x->graph)
            x->flags = TP_F_GRAPH;
        if (kt_shape(k, e->grid, e->block, &x->shape) != 0)
            return kt_fail_nomem(k);
        break;
    }
    case CAT_MEMCPY: {
        tp_memcpy *x = &r->memcpy;
        x->kind = TP_K_MEMCPY;
        x->correlation = corr;
        x->context = context;
        x->bytes = (e->have & H_BYTES) && e->bytes >= 0 ? (uint64_t)e->bytes : 0;
        parse_memcpy_name(e->name_s, e->name_len, &x->copy_kind, &x->src_kind, &x->dst_kind);
        x->src_device = x->dst_device = TP_NO_DEVICE;
        if (x->copy_kind == TP_COPY_PTOP) {
            x->src_device =
                (uint16_t)u32_or(e, H_FROM_DEV, e->from_dev < TP_NO_DEVICE ? e->from_dev : -1, TP_NO_DEVICE);
            x->dst_device =
                (uint16_t)u32_or(e, H_TO_DEV, e->to_dev < TP_NO_DEVICE ? e->to_dev : -1, TP_NO_DEVICE);
        }
        break;
    }
    case CAT_MEMSET: {
        tp_memset *x = &r->memset;
        x->kind = TP_K_MEMSET;
        x->correlation = corr;
        x->context = context;
        x->bytes = (e->have & H_BYTES) && e->bytes >= 0 ? (uint64_t)e->bytes : 0;
        x->mem_kind = parse_memset_name(e->name_s, e->name_len);
        break;
    }
    case CAT_SYNC: {
        tp_sync *x = &r->sync;
        x->kind = TP_K_SYNC;
        x->correlation = corr;
        x->context = context;
        x->event = u32_or(e, H_EVENT, e->event, TP_NO_ID);
        x->sync_type = (uint8_t)(e->sync_kind ? e->sync_kind : kt_sync_type_of(e->name_s, e->name_len));
        break;
    }
    default: { /* CAT_GPU_ANNOT */
        tp_nvtx *x = &r->nvtx;
        x->kind = TP_K_NVTX;
        x->flags = TP_NVTX_RANGE;
        x->tid = stream;
        x->name = kt_intern_ev(k, e);
        if (k->gpu_domain == 0)
            k->gpu_domain = kt_intern(k, "gpu_user_annotation", strlen("gpu_user_annotation"));
        x->domain = k->gpu_domain;
        break;
    }
    }
    /* every event record has the same head, stream/tid word and span */
    r->kernel.device = dev;
    if (e->cat != CAT_GPU_ANNOT)
        r->kernel.stream = stream;
    r->kernel.start = t0;
    r->kernel.end = t1;
    return note_stream(k, dev, stream, context);
}

static int event_host(kimp *k, kev *e) {
    uint64_t t0, t1;
    const char *why = span_of(e, &t0, &t1);
    if (why == NULL && !(e->have & H_TID))
        why = "without a numeric tid";
    if (why)
        return invalid(k, e, why);
    /* 64-bit thread ids (pthread_self in old traces) keep their low 32 bits */
    uint32_t tid = (uint32_t)(uint64_t)e->tid;
    uint32_t pid = (e->have & H_PID) ? (uint32_t)(uint64_t)e->pid : 0;
    krec *r = rec_new(k);
    if (r == NULL)
        return 0;
    if (e->cat == CAT_ANNOT || e->cat == CAT_OP) {
        tp_nvtx *x = &r->nvtx;
        x->kind = TP_K_NVTX;
        x->flags = TP_NVTX_RANGE;
        x->device = TP_NO_DEVICE;
        x->tid = tid;
        x->start = t0;
        x->end = t1;
        x->name = kt_intern_ev(k, e);
        if (e->cat == CAT_OP) {
            if (k->op_domain == 0)
                k->op_domain = kt_intern(k, "cpu_op", strlen("cpu_op"));
            x->domain = k->op_domain;
        }
    } else {
        tp_api *x = &r->api;
        x->kind = TP_K_API;
        x->flags = e->cat == CAT_DRIVER ? TP_F_DRIVER : 0;
        x->device = TP_NO_DEVICE;
        x->tid = tid;
        x->start = t0;
        x->end = t1;
        x->correlation = u32_or(e, H_CORR, e->corr, 0);
        x->cbid = u32_or(e, H_CBID, e->cbid, 0);
        x->name = kt_intern_ev(k, e);
        x->pad0 = (uint32_t)api_class(k, x->name, e->name_s, e->name_len); /* until resolve_apis */
    }
    return note_thread(k, pid, tid);
}

/* A Python frame's name as the profiler writes it, "path/file.py(123): function" (s[0..n)). */
static int py_frame_parse(const char *s, size_t n, size_t *file_len, uint32_t *line, size_t *func_at) {
    size_t close = 0;
    while (close + 3 <= n && !(s[close] == ')' && s[close + 1] == ':' && s[close + 2] == ' '))
        close++;
    if (close + 3 > n)
        return 0;
    size_t open = close;
    while (open > 0 && s[open - 1] != '(')
        open--;
    if (open == 0 || open == close)
        return 0;
    uint32_t v = 0;
    for (size_t p = open; p < close; p++) {
        if (s[p] < '0' || s[p] > '9' || v > 100000000)
            return 0;
        v = v * 10 + (uint32_t)(s[p] - '0');
    }
    *file_len = open - 1;
    *line = v;
    *func_at = close + 3;
    return 1;
}

uint64_t kt_stack_key(const char *s, size_t n) {
    uint64_t h = crc64_ecma_refl(0, (const unsigned char *)s, n);
    return h ? h : 1;
}

/* The index + 1 of the operator's Call stack, "file.py(611): f;file.py(54): <module>" (innermost
 * first), parsed into frames once per distinct text (key: kt_stack_key of it); 0 when out of memory. */
static uint32_t call_stack(kimp *k, const char *s, size_t n, uint64_t key) {
    int added;
    uint64_t *id = cm_u64map_get_or_add(&k->stack_ids, key, 0, &added);
    if (id == NULL)
        return 0;
    if (!added)
        return (uint32_t)*id;
    if (k->n_stacks == k->cap_stacks) {
        size_t cap = k->cap_stacks ? k->cap_stacks * 2 : 256;
        uint64_t *st = realloc(k->stacks, cap * sizeof *st);
        if (st == NULL)
            return 0;
        k->stacks = st;
        k->cap_stacks = cap;
    }
    if (k->cap_pyfr - k->n_pyfr < KCALLSITE_FRAMES) {
        size_t cap = k->cap_pyfr ? k->cap_pyfr * 2 : 2048;
        kpyframe *f = realloc(k->pyfr, cap * sizeof *f);
        if (f == NULL)
            return 0;
        k->pyfr = f;
        k->cap_pyfr = cap;
    }
    size_t first = k->n_pyfr, nf = 0;
    for (size_t at = 0; at < n && nf < KCALLSITE_FRAMES;) {
        size_t len = 0;
        while (at + len < n && s[at + len] != ';')
            len++;
        if (len > 0) {
            kpyframe *f = &k->pyfr[first + nf++];
            size_t file_len, func_at;
            if (py_frame_parse(s + at, len, &file_len, &f->line, &func_at)) {
                f->file = kt_intern(k, s + at, file_len);
                f->func = kt_intern(k, s + at + func_at, len - func_at);
            } else {
                *f = (kpyframe){0, 0, kt_intern(k, s + at, len)};
            }
        }
        at += len + 1;
    }
    k->n_pyfr += nf;
    k->stacks[k->n_stacks++] = (uint64_t)first << 8 | nf;
    *id = k->n_stacks;
    return (uint32_t)*id;
}

/* The index in k->frames of a frame like f, added when it is new (a trace names a few thousand at
 * most, each in many rows): one met lately is found in the memo with a compare, any other in
 * frame_ids. 0 or ERR_NOMEM. */
static int frame_id(kimp *k, const kframe *f, uint32_t *id) {
    uint64_t h = CM_FNV64_BASIS;
    h = cm_fnv64_word(cm_fnv64_word(cm_fnv64_word(h, f->name), f->file), (uint64_t)f->line << 32 | f->func);
    h = cm_fnv64_word(cm_fnv64_word(cm_fnv64_word(h, (uint64_t)f->py << 32 | f->stack), f->module), f->tid);
    uint32_t *memo = &k->frame_memo[(h * 0x9e3779b97f4a7c15ull) >> (64 - KFRAME_MEMO_BITS) & ~(uint64_t)1];
    for (int w = 0; w < 2; w++)
        if (memo[w] != 0 && memcmp(&k->frames[memo[w] - 1], f, sizeof *f) == 0) {
            *id = memo[w] - 1;
            memo[w] = memo[0];
            memo[0] = *id + 1;
            return 0;
        }
    memo[1] = memo[0];
    const uint64_t *v;
    for (; (v = cm_u64map_find(&k->frame_ids, h)) != NULL; h++) /* another frame's hash: the next key */
        if (memcmp(&k->frames[*v - 1], f, sizeof *f) == 0) {
            *id = (uint32_t)(*v - 1);
            memo[0] = *id + 1;
            return 0;
        }
    if (k->n_frames >= UINT32_MAX - 1 || CM_GROW(k->frames, k->cap_frames, k->n_frames + 1) != 0 ||
        cm_u64map_put(&k->frame_ids, h, k->n_frames + 1) != 0)
        return ERR_NOMEM;
    k->frames[k->n_frames] = *f;
    *id = (uint32_t)k->n_frames++;
    memo[0] = *id + 1;
    kt_held(k, sizeof *f);
    return 0;
}

/* An operator or a Python frame: kept (up to the event limit) to name the blocking calls in it. */
static int event_ctx(kimp *k, kev *e) {
    uint64_t t0, t1;
    if (span_of(e, &t0, &t1) != NULL || !(e->have & H_TID) || k->n_ctx >= k->max_events) {
        kt_count_skip(k, e->cat_text, e->cat_len);
        return 1;
    }
    if (k->n_ctx == k->cap_ctx) {
        size_t cap = k->cap_ctx ? k->cap_ctx * 2 : 4096;
        kctx *c = cm_big_resize(k->ctx, k->cap_ctx * sizeof *c, cap * sizeof *c);
        if (c == NULL)
            return kt_fail_nomem(k);
        k->ctx = c;
        k->cap_ctx = cap;
    }
    cm_big_populate_ahead(k->ctx, k->n_ctx, k->cap_ctx, sizeof *k->ctx, KT_POPULATE);
    kframe f = {.tid = (uint32_t)(uint64_t)e->tid, .name = kt_intern_ev(k, e), .py = e->cat == CAT_PYFN};
    if (e->cat == CAT_OP && (e->have & H_STACK) && e->stack_id != 0 && k->n_stacks < k->max_events)
        f.stack = e->stack_id;
    else if (e->cat == CAT_OP && (e->have & H_STACK) && e->stack.len > 0 && k->n_stacks < k->max_events &&
             (f.stack = call_stack(k, e->stack.s, e->stack.len, e->stack_key)) == 0)
        return kt_fail_nomem(k);
    size_t file_len, func_at;
    if (f.py && py_frame_parse(e->name_s, e->name_len, &file_len, &f.line, &func_at)) {
        f.file = kt_intern(k, e->name_s, file_len);
        f.func = kt_intern(k, e->name_s + func_at, e->name_len - func_at);
    }
    if (f.py && (e->have & H_MODULE) && e->module.len > 0 && (f.module = kt_intern(k, e->module.s, e->module.len)) == 0)
        return kt_fail_nomem(k);
    uint32_t id;
    if (frame_id(k, &f, &id) != 0)
        return kt_fail_nomem(k);
    uint64_t dur = t1 - t0;
    if (dur >= KCTX_LONG && cm_u64map_put(&k->ctx_long, k->n_ctx, dur) != 0)
        return kt_fail_nomem(k);
    k->ctx[k->n_ctx++] = (kctx){t0, dur >= KCTX_LONG ? KCTX_LONG : (uint32_t)dur, id};
    kt_held(k, sizeof(kctx));
    k->st->contexts++;
    return 1;
}

static int event_meta(kimp *k, kev *e) {
    k->st->meta_rows++;
    if (!equals(e->name_s, e->name_len, "thread_name") || !(e->have & H_MNAME) || !(e->have & H_TID) ||
        !(e->have & H_PID))
        return 1;
    if (e->mname.len > NAME_KEEP)
        e->mname.len = NAME_KEEP;
    uint64_t key = (uint64_t)(uint32_t)(uint64_t)e->pid << 32 | (uint32_t)(uint64_t)e->tid;
    uint64_t *v = cm_u64map_get_or_add(&k->tnames, key, 0, NULL);
    if (v == NULL || kt_buf_append(&k->tnames_text, e->mname.s, e->mname.len) != 0)
        return kt_fail_nomem(k);
    *v = (uint64_t)(k->tnames_text.len - e->mname.len) << 16 | e->mname.len;
    return 1;
}

int kt_event_end(kimp *k, kev *e) {
    k->st->entries++;
    if (e->ph_len == 1 && e->ph == 'M')
        return event_meta(k, e);
    if (e->cat < CAT_KERNEL || e->ph_len != 1 || e->ph != 'X') {
        if (e->cat == CAT_NONE)
            kt_count_skip(k, "(none)", 6);
        else
            kt_count_skip(k, e->cat_text, e->cat_len);
        return 1;
    }
    switch (e->cat) {
    case CAT_RUNTIME:
    case CAT_DRIVER:
    case CAT_ANNOT: return event_host(k, e);
    case CAT_OP:
        if (e->name_len > 13 && memcmp(e->name_s, "ProfilerStep#", 13) == 0) {
            e->cat = CAT_ANNOT; /* legacy traces: a step, as newer ones write it */
            return event_host(k, e);
        }
        /* the viewer shows operators as ranges (up to a budget of their own); the context naming
         * the calls is kept either way */
        if (k->opts && k->opts->ops && k->n_ops < k->max_events && span_of(e, &(uint64_t){0}, &(uint64_t){0}) == NULL &&
            (e->have & H_TID) && (k->n_ops++, event_host(k, e) == 0))
            return 0;
        return event_ctx(k, e);
    case CAT_PYFN: return event_ctx(k, e);
    default: return event_gpu(k, e);
    }
}
