/*
 * The importers' back end (emit.h): the batch output of a producer, the metadata records it starts
 * with, call sites with their frames, and the correlation pass over an importer's records.
 */
#include "emit.h"
#include "api.h"

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

uint64_t em_max_events(const import_opts *opts) {
    return opts && opts->max_events ? opts->max_events : IMPORT_MAX_EVENTS;
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

/* The key of a correlation id in its process. */
static uint64_t corr_key(const uint32_t *pid, size_t i, uint32_t correlation) {
    return (pid ? (uint64_t)pid[i] << 32 : 0) | correlation;
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

int em_resolve(void *rec, size_t stride, size_t n, const uint32_t *pid,
               unsigned (*class_of)(void *arg, size_t i, tp_api *a), void *arg, import_stats *st) {
    cm_u64map ops = {0}; /* correlation -> record index; a copy or memset wins over other rows */
    for (size_t i = 0; i < n; i++) {
        const tp_head *r = REC_AT(rec, stride, i);
        if (r->kind != TP_K_KERNEL && r->kind != TP_K_MEMCPY && r->kind != TP_K_MEMSET && r->kind != TP_K_SYNC)
            continue;
        uint32_t corr = op_correlation(r);
        if (corr == 0)
            continue;
        int added;
        uint64_t *v = cm_u64map_get_or_add(&ops, corr_key(pid, i, corr), i, &added);
        if (v == NULL) {
            cm_u64map_free(&ops);
            return ERR_NOMEM;
        }
        if (!added && (r->kind == TP_K_MEMCPY || r->kind == TP_K_MEMSET)) {
            unsigned old = ((const tp_head *)REC_AT(rec, stride, *v))->kind;
            if (old != TP_K_MEMCPY && old != TP_K_MEMSET)
                *v = i;
        }
    }
    for (size_t i = 0; i < n; i++) {
        tp_api *a = REC_AT(rec, stride, i);
        if (a->kind != TP_K_API)
            continue;
        unsigned cls = class_of(arg, i, a);
        tp_record op; /* the operation, whole: st_api_resolve reads and flags it */
        tp_head *at = NULL;
        if (a->correlation) {
            const uint64_t *v = cm_u64map_find(&ops, corr_key(pid, i, a->correlation));
            if (v) {
                at = REC_AT(rec, stride, *v);
                memset(&op, 0, sizeof op);
                memcpy(&op, at, stride < sizeof op ? stride : sizeof op);
                a->device = at->device;
            }
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
    cm_u64map_free(&ops);
    return 0;
}
