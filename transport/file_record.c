/*
 * Recording what a subscriber receives into a trace file (file.h): the trace-file writer, the
 * latch that the first failure sets, after which nothing more is written, and the hosts' clocks
 * appended last. The latch is atomic because a recording relay's stats are read from another
 * thread than the one that appends.
 *
 * With a queue (tp_recorder_opts.queue_bytes), appends copy the batch into a queue bounded in
 * bytes and a thread of the recorder's own writes them, so that a slow disk or a slow compression
 * never holds up receiving: the subscriber's socket is drained as fast as messages come, and only
 * when the queue is full does the caller wait, and then the publishers drop what it cannot take
 * (sequence gaps, counted and reported by the subscriber). The writer's state (w) is the thread's
 * alone while it runs; the caller touches it only when the queue is drained and the thread idle.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "synctop/file.h"
#include "synctop/net.h"

/* A batch waiting in the queue. */
typedef struct rq_item {
    struct rq_item *next;
    size_t len;
    uint8_t data[];
} rq_item;

struct tp_recorder {
    tp_fwriter *w;
    atomic_int failed;   /* 0, or the code that stopped the recording */
    atomic_int latching; /* the one latch that sets why: the writer's thread or the caller's */
    err_msg why;         /* its reason (read after failed is set) */
    /* the queue, when there is one; everything below under mu */
    int queued;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work, room; /* work: an item, a flush or the end to do; room: the queue shrank */
    rq_item *head, *tail;
    size_t bytes, budget; /* bytes counts the item being written too */
    int busy, flush_wanted, stopping;
    tp_fwriter_stats snap; /* the writer's stats as of its last step */
    void (*on_refused)(void *ctx, const void *batch, size_t len, const err_msg *why);
    void *ctx;
};

static int rec_latched(const tp_recorder *r, err_msg *err) {
    return err_set(err, atomic_load(&((tp_recorder *)r)->failed), "%s", r->why.msg);
}

/* Ends the recording on code rc, whose reason is in e. Returns rc. */
static int rec_latch(tp_recorder *r, int rc, const err_msg *e) {
    int first = 0;
    if (!atomic_compare_exchange_strong(&r->latching, &first, 1))
        return rc;
    r->why = *e;
    atomic_store(&r->failed, rc);
    return rc;
}

/* Writes one batch (the writer's thread, or the caller's without a queue). */
static int rec_write(tp_recorder *r, const void *batch, size_t len, err_msg *err) {
    if (atomic_load(&r->failed))
        return rec_latched(r, err);
    err_msg e = {{0}};
    int rc = tp_fwriter_append(r->w, batch, len, &e);
    if (rc != 0 && rc != ERR_MALFORMED)
        rec_latch(r, rc, &e);
    return rc == 0 ? 0 : err_set(err, rc, "%s", e.msg);
}

static int rec_flush(tp_recorder *r, err_msg *err) {
    if (atomic_load(&r->failed))
        return rec_latched(r, err);
    err_msg e = {{0}};
    int rc = tp_fwriter_flush(r->w, &e);
    return rc == 0 ? 0 : err_set(err, rec_latch(r, rc, &e), "%s", e.msg);
}

/* The writer's thread: items in order, flushes when asked, until told to end with the queue empty.
 * After a failure the items are only dropped: the caller counts what the file lacks. */
static void *rec_thread(void *arg) {
    tp_recorder *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (r->head == NULL && !r->flush_wanted && !r->stopping)
            pthread_cond_wait(&r->work, &r->mu);
        if (r->head == NULL && !r->flush_wanted)
            break; /* stopping, nothing left */
        /* A flush asked for comes before the next item, so that the file keeps up with the
         * caller's cadence (what a kill -9 can lose) even while the queue never empties. */
        int flush = r->flush_wanted;
        rq_item *it = flush ? NULL : r->head;
        if (flush) {
            r->flush_wanted = 0;
        } else {
            r->head = it->next;
            if (r->head == NULL)
                r->tail = NULL;
        }
        r->busy = 1;
        pthread_mutex_unlock(&r->mu);
        err_msg e = {{0}};
        if (flush) {
            rec_flush(r, &e);
        } else if (rec_write(r, it->data, it->len, &e) == ERR_MALFORMED && r->on_refused != NULL) {
            r->on_refused(r->ctx, it->data, it->len, &e);
        }
        tp_fwriter_stats st;
        tp_fwriter_stats_get(r->w, &st);
        size_t len = it != NULL ? it->len : 0;
        free(it);
        pthread_mutex_lock(&r->mu);
        r->snap = st;
        r->bytes -= len;
        r->busy = 0;
        pthread_cond_broadcast(&r->room);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

tp_recorder *tp_recorder_open(const char *path, int flags, err_msg *err) {
    tp_recorder_opts o = {.flags = flags};
    return tp_recorder_open_opts(path, &o, err);
}

tp_recorder *tp_recorder_open_opts(const char *path, const tp_recorder_opts *opts, err_msg *err) {
    tp_recorder_opts o = opts ? *opts : (tp_recorder_opts){0};
    tp_recorder *r = calloc(1, sizeof *r);
    if (r == NULL) {
        err_set(err, ERR_NOMEM, "out of memory");
        return NULL;
    }
    if ((r->w = tp_fwriter_open(path, o.flags, err)) == NULL) {
        free(r);
        return NULL;
    }
    if (o.queue_bytes == 0)
        return r;
    r->budget = o.queue_bytes;
    r->on_refused = o.on_refused;
    r->ctx = o.ctx;
    tp_fwriter_stats_get(r->w, &r->snap);
    int ok = pthread_mutex_init(&r->mu, NULL) == 0;
    ok = ok && pthread_cond_init(&r->work, NULL) == 0;
    ok = ok && pthread_cond_init(&r->room, NULL) == 0;
    if (ok) {
        /* The writer's thread takes no signal: the caller's thread handles them. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        ok = pthread_create(&r->thread, NULL, rec_thread, r) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    if (!ok) {
        err_set(err, ERR_NOMEM, "%s: cannot start the recording's writer thread", path);
        tp_fwriter_close(&r->w, NULL);
        free(r);
        return NULL;
    }
    r->queued = 1;
    return r;
}

/* Queues a copy of the batch, waiting for room up to timeout_ms (-1: as long as it takes). A batch
 * larger than the whole budget is taken when the queue is empty, so that it never waits forever. */
static int rec_enqueue(tp_recorder *r, const void *batch, size_t len, int timeout_ms, err_msg *err) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    if (timeout_ms > 0) {
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
    }
    pthread_mutex_lock(&r->mu);
    while (r->bytes > 0 && r->bytes + len > r->budget && !atomic_load(&r->failed)) {
        if (timeout_ms == 0 ||
            (timeout_ms > 0 ? pthread_cond_timedwait(&r->room, &r->mu, &until) : pthread_cond_wait(&r->room, &r->mu)) ==
                ETIMEDOUT) {
            pthread_mutex_unlock(&r->mu);
            return err_set(err, ERR_AGAIN, "the recording's queue is full");
        }
    }
    if (atomic_load(&r->failed)) {
        pthread_mutex_unlock(&r->mu);
        return rec_latched(r, err);
    }
    rq_item *it = malloc(sizeof *it + len);
    if (it == NULL) {
        pthread_mutex_unlock(&r->mu);
        return err_set(err, ERR_NOMEM, "out of memory for the recording's queue");
    }
    it->next = NULL;
    it->len = len;
    memcpy(it->data, batch, len);
    if (r->tail != NULL)
        r->tail->next = it;
    else
        r->head = it;
    r->tail = it;
    r->bytes += len;
    pthread_cond_signal(&r->work);
    pthread_mutex_unlock(&r->mu);
    return 0;
}

int tp_recorder_append(tp_recorder *r, const void *batch, size_t len, err_msg *err) {
    if (r->queued)
        return rec_enqueue(r, batch, len, -1, err);
    return rec_write(r, batch, len, err);
}

int tp_recorder_offer(tp_recorder *r, const void *batch, size_t len, int timeout_ms, err_msg *err) {
    if (r->queued)
        return rec_enqueue(r, batch, len, timeout_ms, err);
    return rec_write(r, batch, len, err);
}

/* Waits until the queue is empty and the writer's thread idle: then the caller may use w. */
static void rec_quiesce(tp_recorder *r) {
    if (!r->queued)
        return;
    pthread_mutex_lock(&r->mu);
    while (r->head != NULL || r->busy || r->flush_wanted)
        pthread_cond_wait(&r->room, &r->mu);
    pthread_mutex_unlock(&r->mu);
}

void tp_recorder_drain(tp_recorder *r) { rec_quiesce(r); }

void tp_recorder_stop(tp_recorder *r, const err_msg *why) {
    if (!atomic_load(&r->failed))
        rec_latch(r, ERR_IO, why);
    if (r->queued) { /* wake a caller waiting for room */
        pthread_mutex_lock(&r->mu);
        pthread_cond_broadcast(&r->room);
        pthread_mutex_unlock(&r->mu);
    }
}

int tp_recorder_flush(tp_recorder *r, err_msg *err) {
    if (!r->queued)
        return rec_flush(r, err);
    if (atomic_load(&r->failed))
        return rec_latched(r, err);
    pthread_mutex_lock(&r->mu);
    r->flush_wanted = 1;
    pthread_cond_signal(&r->work);
    pthread_mutex_unlock(&r->mu);
    return 0;
}

int tp_recorder_failed(const tp_recorder *r) { return atomic_load(&((tp_recorder *)r)->failed) != 0; }

int tp_recorder_error(const tp_recorder *r, err_msg *err) { return tp_recorder_failed(r) ? rec_latched(r, err) : 0; }

void tp_recorder_stats_get(const tp_recorder *r, tp_fwriter_stats *out) {
    if (!r->queued) {
        tp_fwriter_stats_get(r->w, out);
        return;
    }
    tp_recorder *m = (tp_recorder *)r;
    pthread_mutex_lock(&m->mu);
    *out = m->snap;
    pthread_mutex_unlock(&m->mu);
}

int tp_recorder_add_clocks(tp_recorder *r, const tp_sub *sub, err_msg *err) {
    rec_quiesce(r);
    tp_buf notes = {0};
    size_t hosts = tp_sub_clock_notes(sub, &notes);
    int rc = 0;
    if (hosts > 0 && atomic_load(&r->failed)) {
        rc = rec_latched(r, err);
    } else if (hosts > 0) {
        err_msg e = {{0}};
        if ((rc = tp_fwriter_append(r->w, notes.data, notes.len, &e)) != 0)
            err_set(err, rec_latch(r, rc, &e), "%s", e.msg);
    }
    tp_buf_free(&notes);
    return rc != 0 ? rc : (int)hosts;
}

int tp_recorder_add_unwritten(tp_recorder *r, uint64_t batches, uint64_t events, err_msg *err) {
    if (batches == 0)
        return 0;
    rec_quiesce(r);
    if (atomic_load(&r->failed))
        return rec_latched(r, err);
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = TP_PRODUCER_NOTES});
    if (enc == NULL)
        return err_set(err, ERR_NOMEM, "out of memory");
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    tp_drops d = {.kind = TP_K_DROPS, .device = TP_NO_DEVICE, .source = TP_DROP_RECORDER,
                  .ts = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec, .records = events,
                  .batches = batches};
    tp_buf note = {0};
    int rc = tp_enc_add(enc, &d);
    if (rc == 0)
        rc = tp_enc_finish_flags(enc, TP_BF_SYNTHETIC, &note);
    tp_enc_destroy(&enc);
    if (rc != 0) {
        tp_buf_free(&note);
        return err_set(err, rc, "cannot encode the recorder's note");
    }
    err_msg e = {{0}};
    if ((rc = tp_fwriter_append(r->w, note.data, note.len, &e)) != 0)
        err_set(err, rec_latch(r, rc, &e), "%s", e.msg);
    tp_buf_free(&note);
    return rc;
}

int tp_recorder_close(tp_recorder **rp, err_msg *err) { return tp_recorder_close_stats(rp, NULL, err); }

int tp_recorder_close_stats(tp_recorder **rp, tp_fwriter_stats *out, err_msg *err) {
    tp_recorder *r = rp ? *rp : NULL;
    if (r == NULL)
        return 0;
    if (r->queued) { /* the writer's thread writes what is queued, then ends */
        pthread_mutex_lock(&r->mu);
        r->stopping = 1;
        pthread_cond_signal(&r->work);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->thread, NULL);
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->work);
        pthread_cond_destroy(&r->room);
    }
    int rc;
    if (atomic_load(&r->failed)) {
        rc = err_set(err, ERR_IO, "%s", r->why.msg);
        tp_fwriter_close_stats(&r->w, out, NULL);
    } else {
        rc = tp_fwriter_close_stats(&r->w, out, err);
    }
    free(r);
    *rp = NULL;
    return rc;
}
