/*
 * The Kineto importer's output (kineto_int.h): once the whole text is read, timestamps get
 * baseTimeNanoseconds, host calls their device and flags (emit.c's correlation pass), blocking
 * calls get their call sites from the operators and Python frames open around them, and everything
 * is handed out through emit.c: metadata, call sites, events. Memory is what a large trace is short
 * of: the contexts go before the order is made, the records are moved into time order in place
 * (a radix sort of one word each) and their pages given back as they are emitted, so that the
 * records, the contexts, the order and the store never all peak together.
 */
#include "kineto_int.h"
#include "emit.h"
#include "hash.h"
#include "text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

/* Adds baseTimeNanoseconds; drops (kind 0) events that end up out of range. */
static void fix_times(kimp *k) {
    int64_t base = k->have_base ? k->base : 0;
    for (size_t i = 0; i < k->n_rec; i++) {
        kkernel *r = &k->rec[i].kernel; /* every event kind has start/end at the same place */
        int64_t s, e;
        if (__builtin_add_overflow((int64_t)r->start, base, &s) ||
            __builtin_add_overflow((int64_t)r->end, base, &e) || s < 0) {
            if (k->st->invalid++ == 0)
                snprintf(k->st->first_invalid, sizeof k->st->first_invalid,
                         "an event whose time is before 1970 or out of range");
            r->kind = 0;
            continue;
        }
        r->start = (uint64_t)s;
        r->end = (uint64_t)e;
    }
    for (size_t i = 0; i < k->n_ctx; i++) { /* operators and Python frames: on the same clock */
        int64_t s, e;
        if (__builtin_add_overflow((int64_t)k->ctx[i].start, base, &s) ||
            __builtin_add_overflow((int64_t)kt_ctx_end(k, &k->ctx[i]), base, &e) || s < 0) {
            s = 0; /* contains no call */
            k->ctx[i].dur = 0;
        }
        k->ctx[i].start = (uint64_t)s;
    }
}

/* A host call's st_api_class, kept in its pad0 since it was read (see event_host); pad0 is 0 again
 * once it is taken. */
static unsigned api_class_kept(void *arg, size_t i, tp_api *a) {
    unsigned cls = a->pad0;
    a->pad0 = 0;
    return cls;
}

/* Gives host calls their device and flags from the GPU operation with the same correlation id;
 * marks copies and memsets issued by an Async call TP_F_ASYNC. */
static int resolve_apis(kimp *k) {
    if (em_resolve(k->rec, sizeof *k->rec, k->n_rec, NULL, api_class_kept, NULL, k->st) != 0)
        return err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
    return 0;
}

/* A key and what it is the key of, for radix_sort. */
typedef struct kpair {
    uint64_t key, val;
} kpair;

/* Sorts the n elements of size bytes at a by the 64-bit key each starts with, keeping the order of
 * equal keys (LSD radix, eleven bits at a time, the digits that all keys share skipped); tmp holds
 * n more. Returns the sorted array (a or tmp), or NULL when out of memory. Inlined for each size. */
#define RADIX_BITS 11
#define RADIX_PASSES ((64 + RADIX_BITS - 1) / RADIX_BITS)
static inline __attribute__((always_inline)) void *radix_sort_by(void *a, void *tmp, size_t n, size_t size) {
    if (n < 2)
        return a;
    size_t(*count)[1 << RADIX_BITS] = calloc(RADIX_PASSES, sizeof *count);
    if (count == NULL)
        return NULL;
    const uint64_t mask = (1u << RADIX_BITS) - 1;
    uint64_t x;
    for (size_t i = 0; i < n; i++) {
        memcpy(&x, (char *)a + i * size, sizeof x);
        for (int b = 0; b < RADIX_PASSES; b++)
            count[b][(x >> (RADIX_BITS * b)) & mask]++;
    }
    memcpy(&x, a, sizeof x);
    for (int b = 0; b < RADIX_PASSES; b++) {
        if (count[b][(x >> (RADIX_BITS * b)) & mask] == n)
            continue;
        size_t at = 0;
        for (size_t v = 0; v <= mask; v++) {
            size_t c = count[b][v];
            count[b][v] = at;
            at += c;
        }
        for (size_t i = 0; i < n; i++) {
            uint64_t y;
            memcpy(&y, (char *)a + i * size, sizeof y);
            memcpy((char *)tmp + count[b][(y >> (RADIX_BITS * b)) & mask]++ * size, (char *)a + i * size, size);
        }
        void *t = a;
        a = tmp;
        tmp = t;
    }
    free(count);
    return a;
}

static kpair *radix_sort(kpair *a, kpair *tmp, size_t n) {
    return radix_sort_by(a, tmp, n, sizeof *a);
}

/* The same for keys alone. */
static uint64_t *radix_sort_u64(uint64_t *a, uint64_t *tmp, size_t n) {
    return radix_sort_by(a, tmp, n, sizeof *a);
}

/* ---- call sites from operators and Python frames ---- */


static int ctx_cmp(const kimp *k, const kctx *x, const kctx *y) {
    uint32_t xt = kt_ctx_tid(k, x), yt = kt_ctx_tid(k, y);
    if (xt != yt)
        return xt < yt ? -1 : 1;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    uint64_t xe = kt_ctx_end(k, x), ye = kt_ctx_end(k, y);
    if (xe != ye) /* the outer one first */
        return xe > ye ? -1 : 1;
    uint32_t xpy = k->frames[x->frame].py, ypy = k->frames[y->frame].py;
    if (xpy != ypy) /* of one span, the Python frame calls the operator */
        return xpy ? -1 : 1;
    return x < y ? -1 : x > y; /* else the earlier row (in the file, and in k->ctx) holds the later */
}

typedef struct kcall {
    uint32_t tid;
    uint64_t start;
    size_t index;
} kcall;

static int call_cmp(const void *a, const void *b) {
    const kcall *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int ctx_index_cmp(const void *a, const void *b, void *arg) {
    const kimp *k = arg;
    return ctx_cmp(k, &k->ctx[*(const uint32_t *)a], &k->ctx[*(const uint32_t *)b]);
}

static int bits_of(uint64_t v) {
    return v ? 64 - __builtin_clzll(v) : 0;
}

/* A thread's index in ctx_order's last + 1 (NULL: none), from its map; contexts come in runs of
 * one thread, so the last answer is kept in *memo. */
typedef struct rank_memo {
    uint64_t tid;
    const uint64_t *r;
    int known;
} rank_memo;

static const uint64_t *rank_of(const cm_u64map *rank, uint64_t tid, rank_memo *memo) {
    if (!memo->known || memo->tid != tid)
        *memo = (rank_memo){.tid = tid, .r = cm_u64map_find(rank, tid), .known = 1};
    return memo->r;
}

/* The contexts the sweep of kineto_callsites reads, in ctx_cmp order, as indices into k->ctx
 * (*out, their count returned; -1 when out of memory): those of the threads with blocking calls
 * (calls, sorted by thread and start) that start no later than the thread's last one. Sorted by
 * thread and start with radix_sort, then each run of the same thread and start by the rest. */
static ssize_t ctx_order(kimp *k, const kcall *calls, size_t nb, uint32_t **out) {
    cm_u64map rank = {0}; /* tid -> its index in last + 1 */
    uint64_t *last = malloc(nb * sizeof *last);
    kpair *a = NULL, *s = NULL;
    uint32_t *idx = NULL;
    size_t nt = 0, n = 0, m = 0;
    if (last == NULL || k->n_ctx > UINT32_MAX)
        goto nomem;
    for (size_t c = 0; c < nb; c++) {
        if (c + 1 < nb && calls[c + 1].tid == calls[c].tid)
            continue;
        if (cm_u64map_put(&rank, calls[c].tid, nt + 1) != 0)
            goto nomem;
        last[nt++] = calls[c].start;
    }
    rank_memo memo = {0};
    for (size_t i = 0; i < k->n_ctx; i++) {
        const uint64_t *r = rank_of(&rank, kt_ctx_tid(k, &k->ctx[i]), &memo);
        m += r != NULL && k->ctx[i].start <= last[*r - 1];
    }
    if ((a = malloc((2 * m + 1) * sizeof *a)) == NULL)
        goto nomem;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < k->n_ctx; i++) {
        const kctx *x = &k->ctx[i];
        const uint64_t *r = rank_of(&rank, kt_ctx_tid(k, x), &memo);
        if (r == NULL || x->start > last[*r - 1])
            continue;
        a[n++] = (kpair){x->start, (uint64_t)(*r - 1) << 32 | i}; /* in file order */
        lo = x->start < lo ? x->start : lo;
        hi = x->start > hi ? x->start : hi;
    }
    int sbits = n ? bits_of(hi - lo) : 0;
    if (sbits + bits_of(nt) <= 64) { /* one key: thread, then start */
        for (size_t i = 0; i < n; i++)
            a[i].key = (a[i].val >> 32) << sbits | (a[i].key - lo);
        s = radix_sort(a, a + n, n);
    } else if ((s = radix_sort(a, a + n, n)) != NULL) { /* by start, then by thread */
        for (size_t i = 0; i < n; i++)
            s[i].key = s[i].val >> 32;
        s = radix_sort(s, s == a ? a + n : a, n);
    }
    if (s == NULL || (idx = malloc((n ? n : 1) * sizeof *idx)) == NULL)
        goto nomem;
    for (size_t i = 0; i < n; i++)
        idx[i] = (uint32_t)s[i].val;
    for (size_t i = 0, j; i < n; i = j) {
        const kctx *x = &k->ctx[idx[i]];
        for (j = i + 1; j < n && kt_ctx_tid(k, &k->ctx[idx[j]]) == kt_ctx_tid(k, x) && k->ctx[idx[j]].start == x->start;
             j++) {
        }
        if (j - i > 1)
            qsort_r(idx + i, j - i, sizeof *idx, ctx_index_cmp, k);
    }
    cm_u64map_free(&rank);
    free(last);
    free(a);
    *out = idx;
    return (ssize_t)n;
nomem:
    cm_u64map_free(&rank);
    free(last);
    free(a);
    return -1;
}

/* Frame i of a call site, from the array at arg. */
static void frame_copy(void *arg, uint32_t i, tp_frame *fr) {
    *fr = ((const tp_frame *)arg)[i];
}

/* Emits a call site for each distinct stack of operators and Python frames around a blocking call
 * (frames innermost first, as the tracer sends them) and sets the calls' call-site ids. One sweep
 * per thread over its contexts and calls in time order: a stack holds the contexts open at a call. */
static int kineto_callsites(kimp *k, em_out *o) {
    size_t nb = 0;
    for (size_t i = 0; i < k->n_rec; i++)
        nb += k->rec[i].head.kind == TP_K_API && (k->rec[i].api.flags & TP_F_BLOCKING);
    if (nb == 0 || k->n_ctx == 0)
        return 0;
    kcall *calls = malloc(nb * sizeof *calls);
    size_t *stack = malloc(k->n_ctx * sizeof *stack);
    uint32_t *ci = NULL; /* the contexts in order (ctx_order) */
    cm_u64map ids = {0};
    int rc = 0;
    if (calls == NULL || stack == NULL) {
        rc = err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
        goto out;
    }
    nb = 0;
    for (size_t i = 0; i < k->n_rec; i++)
        if (k->rec[i].head.kind == TP_K_API && (k->rec[i].api.flags & TP_F_BLOCKING))
            calls[nb++] = (kcall){k->rec[i].api.tid, k->rec[i].api.start, i};
    qsort(calls, nb, sizeof *calls, call_cmp);
    ssize_t n_ci = ctx_order(k, calls, nb, &ci);
    if (n_ci < 0) {
        rc = err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
        goto out;
    }
    size_t j = 0, depth = 0, n_ctx = (size_t)n_ci;
    uint32_t tid = UINT32_MAX;
    uint32_t next_id = 1;
    for (size_t c = 0; c < nb && rc == 0; c++) {
        tp_api *a = &k->rec[calls[c].index].api;
        if (a->tid != tid) { /* a new thread: its contexts */
            tid = a->tid;
            depth = 0;
            while (j < n_ctx && kt_ctx_tid(k, &k->ctx[ci[j]]) < tid)
                j++;
        }
        while (j < n_ctx && kt_ctx_tid(k, &k->ctx[ci[j]]) == tid && k->ctx[ci[j]].start <= a->start) {
            while (depth > 0 && kt_ctx_end(k, &k->ctx[stack[depth - 1]]) < k->ctx[ci[j]].start)
                depth--;
            stack[depth++] = ci[j++];
        }
        while (depth > 0 && kt_ctx_end(k, &k->ctx[stack[depth - 1]]) < a->start)
            depth--;
        /* the contexts around the call, innermost first; an operator's Call stack (legacy traces)
         * holds the Python frames above it and the operators called from the same line */
        tp_frame fr[KCALLSITE_FRAMES];
        size_t nf = 0;
        uint32_t pystack = 0;
        /* rows that overlap without nesting can stay on the stack below open ones: look at a
         * bounded number of them per call */
        size_t floor = depth > KCALLSITE_LOOK ? depth - KCALLSITE_LOOK : 0;
        for (size_t d = depth; d > floor && nf < KCALLSITE_FRAMES; d--) {
            const kctx *cx = &k->ctx[stack[d - 1]];
            if (kt_ctx_end(k, cx) < a->end)
                continue;
            const kframe *x = &k->frames[cx->frame];
            if (pystack != 0 && (x->py || (x->stack != 0 && x->stack != pystack)))
                break; /* called from elsewhere than the line the Call stack names */
            fr[nf++] = (tp_frame){.flags = !x->py ? TP_FRAME_OP : x->module ? TP_FRAME_NATIVE : TP_FRAME_PYTHON,
                                  .func = x->func ? x->func : x->name, .file = x->file, .line = x->line,
                                  .module = x->module};
            if (pystack == 0)
                pystack = x->stack;
        }
        if (pystack != 0) {
            uint64_t at = k->stacks[pystack - 1];
            for (size_t f = 0; f < (at & 0xff) && nf < KCALLSITE_FRAMES; f++) {
                const kpyframe *p = &k->pyfr[(at >> 8) + f];
                fr[nf++] = (tp_frame){.flags = TP_FRAME_PYTHON, .func = p->func, .file = p->file, .line = p->line};
            }
        }
        if (nf == 0)
            continue;
        uint64_t h = cm_fnv64_word(CM_FNV64_BASIS, a->name); /* one site per API and frames */
        for (size_t f = 0; f < nf; f++)
            h = cm_fnv64_word(cm_fnv64_word(cm_fnv64_word(h, fr[f].flags), fr[f].func),
                              (uint64_t)fr[f].file << 32 | fr[f].line);
        if (h == 0)
            h = 1;
        int added;
        uint64_t *id = cm_u64map_get_or_add(&ids, h, next_id, &added);
        if (id == NULL) {
            rc = err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
            break;
        }
        a->callsite = (uint32_t)*id;
        k->st->sited_calls++;
        if (!added)
            continue;
        next_id++;
        rc = em_site(o, a->callsite, (uint32_t)nf, frame_copy, fr);
    }
out:
    free(calls);
    free(stack);
    free(ci);
    cm_u64map_free(&ids);
    return rc;
}

/* Drops the records fix_times made kind 0, keeping the order of the others; returns the span of
 * those left in *lo, *hi (0, 0 when none). */
static void drop_dead(kimp *k, uint64_t *lo, uint64_t *hi) {
    size_t n = 0;
    *lo = *hi = 0;
    for (size_t i = 0; i < k->n_rec; i++) {
        const kkernel *r = &k->rec[i].kernel; /* every event kind has start/end at the same place */
        if (r->kind == 0)
            continue;
        if (*lo == 0 && *hi == 0) {
            *lo = r->start;
            *hi = r->end;
        }
        if (r->start < *lo)
            *lo = r->start;
        if (r->end > *hi)
            *hi = r->end;
        if (n != i)
            k->rec[n] = k->rec[i];
        n++;
    }
    kt_held(k, -(int64_t)((k->n_rec - n) * sizeof *k->rec));
    k->n_rec = n;
}

/* The records' order by start, ties in file order, as a permutation: out[i] & mask is the index of
 * the record that goes i-th (*mask returned; the bits above it are sort keys to ignore). Most
 * traces get one word per record: the start less the first one, above the index, sorted whole (8
 * bytes and 8 of room); a span too wide for that is sorted as pairs. NULL when out of memory. */
static uint64_t *order_of(kimp *k, uint64_t lo, uint64_t hi, uint64_t *mask) {
    size_t n = k->n_rec;
    int ib = bits_of(n), sb = bits_of(hi - lo);
    *mask = ib >= 64 ? UINT64_MAX : ((uint64_t)1 << ib) - 1;
    if (ib + sb <= 64) {
        uint64_t *a = malloc((n ? n : 1) * sizeof *a), *tmp = malloc((n ? n : 1) * sizeof *tmp);
        uint64_t *s = NULL;
        if (a != NULL && tmp != NULL) {
            kt_held(k, (int64_t)(2 * n * sizeof *a));
            for (size_t i = 0; i < n; i++)
                a[i] = (k->rec[i].kernel.start - lo) << ib | i;
            s = radix_sort_u64(a, tmp, n);
            kt_held(k, -(int64_t)(n * sizeof *a));
        }
        if (s != a)
            free(a);
        if (s != tmp)
            free(tmp);
        return s;
    }
    *mask = UINT64_MAX;
    kpair *a = malloc((n ? n : 1) * 2 * sizeof *a), *s = NULL;
    uint64_t *out = NULL;
    if (a == NULL)
        return NULL;
    kt_held(k, (int64_t)(2 * n * sizeof *a));
    for (size_t i = 0; i < n; i++)
        a[i] = (kpair){k->rec[i].kernel.start, i};
    if ((s = radix_sort(a, a + n, n)) != NULL && (out = malloc((n ? n : 1) * sizeof *out)) != NULL) {
        kt_held(k, (int64_t)(n * sizeof *out));
        for (size_t i = 0; i < n; i++)
            out[i] = s[i].val;
    }
    kt_held(k, -(int64_t)(2 * n * sizeof *a));
    free(a);
    return out;
}

/* Moves the records into the order perm gives (see order_of), one cycle of the permutation at a
 * time, marking each place done in perm; so that they can be emitted from the front and their
 * pages given back behind the emit. */
static void permute(kimp *k, uint64_t *perm, uint64_t mask) {
    for (size_t i = 0; i < k->n_rec; i++) {
        if ((perm[i] & mask) == i)
            continue;
        krec tmp = k->rec[i];
        size_t j = i;
        for (;;) {
            size_t from = (size_t)(perm[j] & mask);
            perm[j] = j;
            if (from == i) {
                k->rec[j] = tmp;
                break;
            }
            k->rec[j] = k->rec[from];
            j = from;
        }
    }
}

/* Gives back the pages of the records before rec[upto] that *done did not yet give back. */
#define REC_GIVE_BACK (1u << 16) /* records emitted between two give-backs */
static void rec_give_back(kimp *k, size_t upto, size_t *done) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t from = ((uintptr_t)k->rec + *done * sizeof *k->rec + page - 1) / page * page;
    uintptr_t to = ((uintptr_t)k->rec + upto * sizeof *k->rec) / page * page;
    if (to > from && madvise((void *)from, to - from, MADV_DONTNEED) == 0)
        kt_held(k, -(int64_t)(to - from));
    *done = upto;
}

/* A device's record from deviceProperties (the last entry with its id). */
static void device_describe(void *arg, tp_device *dv) {
    kimp *k = arg;
    for (size_t i = 0; i < k->n_devprops; i++) {
        const kdevprop *q = &k->devprops[i];
        if (q->id != (int64_t)dv->device)
            continue;
        dv->name = kt_intern(k, q->name, q->name_len);
        dv->cc_major = q->major >= 0 && q->major < 256 ? (uint8_t)q->major : 0;
        dv->cc_minor = q->minor >= 0 && q->minor < 256 ? (uint8_t)q->minor : 0;
        dv->sm_count = q->sms >= 0 && q->sms <= (int64_t)UINT32_MAX ? (uint32_t)q->sms : 0;
        dv->memory_bytes = q->mem > 0 ? (uint64_t)q->mem : 0;
    }
}

/* A thread's name from its thread_name row (key pid << 32 | tid), 0 when it has none. */
static uint32_t thread_name(void *arg, uint64_t key) {
    kimp *k = arg;
    const uint64_t *nm = cm_u64map_find(&k->tnames, key);
    return nm ? kt_intern(k, k->tnames_text.s + (*nm >> 16), (size_t)(*nm & 0xffff)) : 0;
}

/* The metadata: the process, the devices used, streams and threads in id order, and the
 * device-wide pseudo-streams, whose records say how the trace spelled them (see kineto.h). */
static int emit_meta(kimp *k, em_out *o) {
    import_stats *st = k->st;
    st->rank = k->have_rank ? (int32_t)k->rank : -1;
    st->world = k->have_world ? (int32_t)k->world : -1;
    st->pid = k->pid;
    tp_process p = {
        .kind = TP_K_PROCESS, .device = TP_NO_DEVICE, .pid = k->pid, .rank = st->rank, .world = st->world};
    /* HTA reads ts as written, as doubles: absolute ones are 0.25 us apart (analysis/hta.c). */
    p.flags = k->have_base ? 0 : TP_F_TS_ABSOLUTE;
    p.host = kt_intern(k, k->host.s, k->host.len);
    p.cmdline = tp_enc_intern_cstr(k->enc, cm_base_name(k->name));
    int rc = em_add(o, &p, 1);
    if (rc == 0)
        rc = em_devices(o, k->dev_used, device_describe, k);
    if (rc == 0)
        rc = em_streams(o, &k->streams);
    if (rc == 0)
        rc = em_threads(o, &k->threads, thread_name, k);
    for (unsigned d = 0; d < TP_NO_DEVICE && rc == 0; d++) {
        if (k->wide[d] == 0)
            continue;
        tp_record r;
        memset(&r, 0, sizeof r);
        r.stream.kind = TP_K_STREAM;
        r.stream.device = (uint16_t)d;
        r.stream.stream = TP_NO_ID;
        r.stream.flags = k->wide[d];
        rc = em_add(o, &r, 1);
    }
    return rc;
}

int kt_emit_all(kimp *k, import_emit_fn emit, void *ctx) {
    import_stats *st = k->st;
    fix_times(k);
    int rc = resolve_apis(k);
    em_out o;
    em_out_init(&o, k->enc, k->opts, emit, ctx, k->name, k->err, st);
    if (k->on_threads) /* the batches handed out while the next ones are made */
        em_out_async(&o);
    if (rc == 0)
        rc = emit_meta(k, &o);
    if (rc == 0)
        rc = kineto_callsites(k, &o);
    /* the contexts have named the calls: their pages go back before the order takes its own */
    kt_held(k, -(int64_t)(k->n_ctx * sizeof *k->ctx));
    kt_held(k, -(int64_t)(k->n_frames * sizeof *k->frames));
    kt_big_free(k->ctx, k->cap_ctx * sizeof *k->ctx);
    k->ctx = NULL;
    k->n_ctx = k->cap_ctx = 0;
    cm_u64map_free(&k->ctx_long);
    free(k->frames);
    k->frames = NULL;
    k->n_frames = k->cap_frames = 0;
    cm_u64map_free(&k->frame_ids);
    uint64_t mask = 0, *perm = NULL;
    if (rc == 0) {
        drop_dead(k, &st->t_min, &st->t_max);
        if ((perm = order_of(k, st->t_min, st->t_max, &mask)) == NULL)
            rc = err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
    }
    if (rc == 0) {
        permute(k, perm, mask);
        kt_held(k, -(int64_t)(k->n_rec * sizeof *perm));
    }
    free(perm);
    size_t given = 0;
    for (size_t i = 0; i < k->n_rec && rc == 0; i++) {
        tp_record r;
        kt_rec_out(k, &k->rec[i], &r);
        rc = em_add(&o, &r, i + 1 < k->n_rec);
        if ((i + 1) % REC_GIVE_BACK == 0)
            rec_give_back(k, i + 1, &given);
    }
    if (rc == 0)
        rc = em_end(&o);
    em_out_free(&o);
    st->importer_peak_bytes = k->held_peak;
    return rc;
}
