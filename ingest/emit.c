/*
 * The importers' back end (emit.h): the batch output of a producer, the metadata records it starts
 * with, call sites with their frames, and the correlation pass over an importer's records.
 */
#include "emit.h"
#include "api.h"
#include "corrmap.h"
#include "grow.h"
#include "radix.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The thread that hands out the batches of an em_out (em_out_async): one batch at a time, in the
 * slot, while the importer's thread makes the next in em_out.buf. */
typedef struct em_async {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    tp_buf slot;
    int busy; /* the slot holds a batch being handed out */
    int stop;
    int rc; /* the first error of the emit function; no batch is handed out after it */
    err_msg err;
    import_emit_fn emit;
    void *ctx;
} em_async;

static void *deliver_main(void *arg) {
    em_async *a = arg;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (!a->busy && !a->stop)
            pthread_cond_wait(&a->cv, &a->mu);
        if (!a->busy)
            break;
        pthread_mutex_unlock(&a->mu);
        int rc = a->emit(a->ctx, a->slot.data, a->slot.len, &a->err);
        pthread_mutex_lock(&a->mu);
        if (rc)
            a->rc = rc < 0 ? rc : ERR_IO;
        a->busy = 0;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* Waits until the slot is free; the emit function's first error (its message into o->err) or 0. */
static int async_wait(em_out *o) {
    em_async *a = o->async;
    pthread_mutex_lock(&a->mu);
    while (a->busy)
        pthread_cond_wait(&a->cv, &a->mu);
    int rc = a->rc;
    pthread_mutex_unlock(&a->mu);
    if (rc && o->err)
        *o->err = a->err;
    return rc;
}

int em_out_async(em_out *o) {
    em_async *a = calloc(1, sizeof *a);
    if (a == NULL)
        return ERR_NOMEM;
    a->emit = o->emit;
    a->ctx = o->ctx;
    if (pthread_mutex_init(&a->mu, NULL) != 0) {
        free(a);
        return ERR_NOMEM;
    }
    pthread_cond_init(&a->cv, NULL);
    if (pthread_create(&a->th, NULL, deliver_main, a) != 0) {
        pthread_cond_destroy(&a->cv);
        pthread_mutex_destroy(&a->mu);
        free(a);
        return ERR_NOMEM;
    }
    o->async = a;
    return 0;
}

import_stats *em_stats_init(import_stats *st, import_stats *local) {
    if (st == NULL)
        st = local;
    memset(st, 0, sizeof *st);
    st->rank = st->world = -1;
    return st;
}

size_t em_batch_records(const import_opts *opts) {
    return opts && opts->batch_records ? opts->batch_records : IMPORT_BATCH_RECORDS;
}

uint64_t em_max_events(const import_opts *opts, uint64_t input_bytes) {
    if (opts && opts->max_events)
        return opts->max_events;
    return input_bytes / IMPORT_BYTES_PER_EVENT > IMPORT_MAX_EVENTS ? input_bytes / IMPORT_BYTES_PER_EVENT
                                                                    : IMPORT_MAX_EVENTS;
}

void em_out_init(em_out *o, tp_enc *enc, const import_opts *opts, import_emit_fn emit, void *ctx, const char *name,
                 err_msg *err, import_stats *st) {
    *o = (em_out){.enc = enc,
                  .emit = emit,
                  .ctx = ctx,
                  .batch_records = em_batch_records(opts),
                  .name = name,
                  .err = err,
                  .st = st,
                  .first = 1};
}

void em_out_free(em_out *o) {
    em_async *a = o->async;
    if (a) {
        pthread_mutex_lock(&a->mu);
        a->stop = 1;
        pthread_cond_broadcast(&a->cv);
        pthread_mutex_unlock(&a->mu);
        pthread_join(a->th, NULL);
        pthread_cond_destroy(&a->cv);
        pthread_mutex_destroy(&a->mu);
        tp_buf_free(&a->slot);
        free(a);
        o->async = NULL;
    }
    tp_buf_free(&o->buf);
}

int em_flush(em_out *o, uint32_t flags) {
    if (o->first) {
        tp_enc_keyframe(o->enc);
        o->first = 0;
    }
    int rc = tp_enc_finish_flags(o->enc, flags, &o->buf);
    if (rc)
        return err_set(o->err, rc, "%s: cannot encode a batch: %s", o->name, err_str(rc));
    size_t len = o->buf.len;
    if (o->async) {
        if ((rc = async_wait(o)) != 0)
            return rc;
        em_async *a = o->async;
        tp_buf t = a->slot; /* the batch goes to the slot; the slot's old room makes the next */
        pthread_mutex_lock(&a->mu);
        a->slot = o->buf;
        a->busy = 1;
        pthread_cond_broadcast(&a->cv);
        pthread_mutex_unlock(&a->mu);
        o->buf = t;
        o->buf.len = 0;
    } else if ((rc = o->emit(o->ctx, o->buf.data, o->buf.len, o->err)) != 0) {
        return rc < 0 ? rc : ERR_IO;
    }
    tp_enc_delivered(o->enc, 1);
    o->st->batches++;
    o->st->batch_bytes += len;
    return 0;
}

int em_add(em_out *o, const void *rec, int more) {
    int rc = tp_enc_add(o->enc, rec);
    if (rc)
        return err_set(o->err, rc, "%s: too many metadata records (threads, streams): %s", o->name, err_str(rc));
    unsigned kind = ((const tp_head *)rec)->kind;
    o->st->records[kind]++;
    if (!TP_KIND_IS_META(kind))
        o->st->events++;
    if (more && tp_enc_pending(o->enc) >= o->batch_records)
        return em_flush(o, 0);
    return 0;
}

int em_end(em_out *o) {
    int rc = em_flush(o, TP_BF_END);
    if (rc == 0 && o->async)
        rc = async_wait(o);
    if (rc == 0) {
        tp_enc_stats es;
        tp_enc_stats_get(o->enc, &es);
        o->st->strings_refused += es.strings_refused;
    }
    return rc;
}

int em_devices(em_out *o, const uint8_t *used, void (*describe)(void *arg, tp_device *dv), void *arg) {
    for (unsigned d = 0; d < TP_NO_DEVICE; d++) {
        if (used[d / 8] == 0) { /* none of these eight */
            d |= 7;
            continue;
        }
        if (!(used[d / 8] & (1u << (d % 8))))
            continue;
        tp_device dv = {.kind = TP_K_DEVICE, .device = (uint16_t)d};
        describe(arg, &dv);
        int rc = em_add(o, &dv, 1);
        if (rc)
            return rc;
    }
    return 0;
}

static int u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The map whose keys become records, and what names them (threads). */
typedef struct em_keyed {
    const cm_u64map *m;
    uint32_t (*name)(void *arg, uint64_t key);
    void *arg;
} em_keyed;

static void stream_fill(tp_record *r, uint64_t key, const em_keyed *src) {
    r->stream.kind = TP_K_STREAM;
    r->stream.device = (uint16_t)(key >> 32);
    r->stream.stream = (uint32_t)key;
    r->stream.context = (uint32_t)*cm_u64map_find(src->m, key);
}

static void thread_fill(tp_record *r, uint64_t key, const em_keyed *src) {
    r->thread.kind = TP_K_THREAD;
    r->thread.device = TP_NO_DEVICE;
    r->thread.pid = (uint32_t)(key >> 32);
    r->thread.tid = (uint32_t)key;
    r->thread.name = src->name(src->arg, key);
}

/* A record for each key of src->m, in key order, made by fill. */
static int keyed_records(em_out *o, const em_keyed *src,
                         void (*fill)(tp_record *r, uint64_t key, const em_keyed *src)) {
    uint64_t *keys = malloc((cm_u64map_count(src->m) ? cm_u64map_count(src->m) : 1) * sizeof *keys);
    if (keys == NULL)
        return err_set(o->err, ERR_NOMEM, "%s: out of memory", o->name);
    size_t n = cm_u64map_keys(src->m, keys);
    qsort(keys, n, sizeof *keys, u64_cmp);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        tp_record r;
        memset(&r, 0, sizeof r);
        fill(&r, keys[i], src);
        rc = em_add(o, &r, 1);
    }
    free(keys);
    return rc;
}

int em_streams(em_out *o, const cm_u64map *streams) {
    return keyed_records(o, &(em_keyed){.m = streams}, stream_fill);
}

int em_threads(em_out *o, const cm_u64map *threads, uint32_t (*name)(void *arg, uint64_t key), void *arg) {
    return keyed_records(o, &(em_keyed){.m = threads, .name = name, .arg = arg}, thread_fill);
}

int em_site(em_out *o, uint32_t id, uint32_t n, void (*frame)(void *arg, uint32_t i, tp_frame *fr), void *arg) {
    size_t pending = tp_enc_pending(o->enc);
    int rc = 0;
    if (pending > 0 && pending + 1 + n > o->batch_records)
        rc = em_flush(o, 0);
    tp_callsite cs = {.kind = TP_K_CALLSITE, .device = TP_NO_DEVICE, .id = id, .n_frames = n};
    if (rc == 0)
        rc = em_add(o, &cs, 0);
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        tp_frame fr;
        memset(&fr, 0, sizeof fr);
        frame(arg, i, &fr);
        fr.kind = TP_K_FRAME;
        fr.index = (uint16_t)i;
        fr.callsite = id;
        rc = em_add(o, &fr, 0);
    }
    return rc;
}

/* Record i of those at rec, stride bytes apart. */
#define REC_AT(rec, stride, i) ((void *)((char *)(rec) + (i) * (stride)))

/* A GPU operation's correlation id (kernels, copies, memsets and syncs have it at one place). */
_Static_assert(offsetof(tp_kernel, correlation) == offsetof(tp_memcpy, correlation) &&
                   offsetof(tp_kernel, correlation) == offsetof(tp_memset, correlation) &&
                   offsetof(tp_kernel, correlation) == offsetof(tp_sync, correlation),
               "one place for the correlation id");
static uint32_t op_correlation(const void *r) {
    uint32_t c;
    memcpy(&c, (const char *)r + offsetof(tp_kernel, correlation), sizeof c);
    return c;
}

static int is_op(unsigned kind) {
    return kind == TP_K_KERNEL || kind == TP_K_MEMCPY || kind == TP_K_MEMSET || kind == TP_K_SYNC;
}

/* Counts the operations with a correlation id; whether one process's ids (pid NULL) are too
 * sparse for a table over their range (CUPTI numbers a process's API calls in turn, so they are
 * mostly dense): those are joined by sorting (resolve_sorted), the others through a corrmap. */
static int ops_sparse(const void *rec, size_t stride, size_t n, const uint32_t *pid, size_t *n_ops) {
    uint32_t lo = UINT32_MAX, hi = 0;
    size_t ops = 0;
    for (size_t i = 0; i < n; i++) {
        const tp_head *r = REC_AT(rec, stride, i);
        uint32_t corr = is_op(r->kind) ? op_correlation(r) : 0;
        if (corr == 0)
            continue;
        ops++;
        lo = corr < lo ? corr : lo;
        hi = corr > hi ? corr : hi;
    }
    *n_ops = ops;
    return pid == NULL && n < UINT32_MAX && ops > 0 && (size_t)(hi - lo) >= 4 * ops + 1024;
}

/* Host call i (a) given its operation (the record index + 1 of it, 0: none): its device, its
 * flags, and the count of blocking calls. */
static void resolve_call(void *rec, size_t stride, size_t i, tp_api *a, uint64_t v,
                         unsigned (*class_of)(void *arg, size_t i, tp_api *a), void *arg, import_stats *st) {
    unsigned cls = class_of(arg, i, a);
    tp_record op; /* the operation, whole: st_api_resolve reads and flags it */
    tp_head *at = NULL;
    if (v != 0) {
        at = REC_AT(rec, stride, v - 1);
        memset(&op, 0, sizeof op);
        memcpy(&op, at, stride < sizeof op ? stride : sizeof op);
        a->device = at->device;
    }
    unsigned flags = st_api_resolve((st_api_class)cls, at != NULL ? &op : NULL);
    if (at != NULL)
        at->flags = op.head.flags;
    a->flags |= (uint8_t)flags;
    if (flags & TP_F_BLOCKING) {
        st->blocking_calls++;
        st->blocked_ns += a->end - a->start;
    }
}

/* Whether operation j (of kind kj) takes the place of operation i: the first row with a
 * correlation id is its operation, unless a later copy or memset comes. */
static int op_wins(unsigned kj, unsigned ki) {
    return (kj == TP_K_MEMCPY || kj == TP_K_MEMSET) && ki != TP_K_MEMCPY && ki != TP_K_MEMSET;
}

/* em_resolve for one process's sparse ids, by sorting instead of a map: the operations' ids above
 * their indices, one word each, sorted in place (the words are all different); each call's id is
 * then sought from where the last one was found (a process numbers its calls in turn, and traces
 * list them in that order: a gallop of one look), so the calls take nothing. 8 bytes an operation,
 * where a map holds 32-48. 1 done, 0 out of memory (nothing changed). */
static int resolve_sorted(void *rec, size_t stride, size_t n, size_t n_ops,
                          unsigned (*class_of)(void *arg, size_t i, tp_api *a), void *arg, import_stats *st) {
    uint64_t *os = cm_big_alloc_filled(n_ops * sizeof *os);
    size_t no = 0;
    if (os == NULL)
        return 0;
    for (size_t i = 0; i < n; i++) {
        const tp_head *r = REC_AT(rec, stride, i);
        uint32_t corr = is_op(r->kind) ? op_correlation(r) : 0;
        if (corr != 0 && no < n_ops)
            os[no++] = (uint64_t)corr << 32 | i;
    }
    cm_radix_sort_inplace_by(os, no, sizeof *os);
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        tp_api *a = REC_AT(rec, stride, i);
        if (a->kind != TP_K_API)
            continue;
        uint64_t v = 0;
        if (a->correlation != 0) {
            j = cm_seek_sorted(os, no, sizeof *os, 0, j, (uint64_t)a->correlation << 32);
            for (size_t q = j; q < no && (uint32_t)(os[q] >> 32) == a->correlation; q++) {
                size_t oi = (size_t)(os[q] & UINT32_MAX);
                unsigned kq = ((const tp_head *)REC_AT(rec, stride, oi))->kind;
                if (v == 0 || op_wins(kq, ((const tp_head *)REC_AT(rec, stride, v - 1))->kind))
                    v = oi + 1;
            }
        }
        resolve_call(rec, stride, i, a, v, class_of, arg, st);
    }
    cm_big_free(os, n_ops * sizeof *os);
    return 1;
}

int em_resolve(void *rec, size_t stride, size_t n, const uint32_t *pid,
               unsigned (*class_of)(void *arg, size_t i, tp_api *a), void *arg, import_stats *st) {
    size_t n_ops = 0;
    if (ops_sparse(rec, stride, n, pid, &n_ops))
        return resolve_sorted(rec, stride, n, n_ops, class_of, arg, st) ? 0 : ERR_NOMEM;
    cm_corrmap ops = {0}; /* (process, correlation) -> record index + 1; a copy or memset wins over other rows */
    for (size_t i = 0; i < n; i++) {
        const tp_head *r = REC_AT(rec, stride, i);
        if (!is_op(r->kind))
            continue;
        uint32_t corr = op_correlation(r);
        if (corr == 0)
            continue;
        uint32_t p = pid != NULL ? pid[i] : 0;
        uint64_t old = 0;
        if (cm_corrmap_find(&ops, p, corr, &old) && old != 0 &&
            !op_wins(r->kind, ((const tp_head *)REC_AT(rec, stride, old - 1))->kind))
            continue;
        if (cm_corrmap_put(&ops, p, corr, i + 1) != 0) {
            cm_corrmap_free(&ops);
            return ERR_NOMEM;
        }
    }
    for (size_t i = 0; i < n; i++) {
        tp_api *a = REC_AT(rec, stride, i);
        if (a->kind != TP_K_API)
            continue;
        uint64_t v = 0;
        if (a->correlation && !cm_corrmap_find(&ops, pid != NULL ? pid[i] : 0, a->correlation, &v))
            v = 0;
        resolve_call(rec, stride, i, a, v, class_of, arg, st);
    }
    cm_corrmap_free(&ops);
    return 0;
}
