/*
 * CUPTI's activity buffers: the pool the tracer hands out to CUPTI (any application thread,
 * concurrently: CUPTI 13 keeps per-thread buffers), the list of completed ones the flush thread
 * takes, and the counts of buffers that reached it or were lost on the way (refused, another
 * client's). The pool is under one mutex, held for a few stores or a scan of the slots; a new
 * buffer is allocated outside it. Memory is bounded: at most SYNCTOP_MAX_BUFFERS buffers live, and
 * LOST_FACTOR times that with those written off when another CUPTI client took them.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "tracer_int.h"

#define BUF_SLOTS 8192 /* activity buffers known at once (2 x SYNCTOP_MAX_BUFFERS' bound) */
#define LOST_FACTOR 2  /* buffers live and written off together: at most this many
                          times SYNCTOP_MAX_BUFFERS (the tracer's memory bound) */

/* An activity buffer the tracer allocated, by state. */
enum { BUF_NONE = 0, BUF_FREE, BUF_OUT, BUF_DONE, BUF_LOST };

typedef struct buf_slot {
    uint8_t *buf;
    uint8_t state;
} buf_slot;

typedef struct done_buf {
    unsigned slot;
    size_t valid;
} done_buf;

static const tr_config *cfg;
static size_t buf_size;

static atomic_uint_fast64_t buf_refused;
static atomic_uint_fast64_t buf_foreign; /* buffers CUPTI completed that were not the tracer's */
static atomic_uint_fast64_t bufs_in;     /* buffers with records that reached the tracer */

/* The pool, under pool_mu. */
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static buf_slot bufs[BUF_SLOTS];
static unsigned n_slots; /* slots ever used */
static unsigned n_live;  /* buffers free, out or done: at most cfg->max_buffers */
static unsigned n_lost;  /* written off (BUF_LOST) */
static done_buf done[BUF_SLOTS];
static unsigned n_done;
static int pool_gone; /* released at exit: buffers coming back are freed */

void tr_bufs_reset(void) {
    atomic_store(&buf_refused, 0);
    atomic_store(&buf_foreign, 0);
    atomic_store(&bufs_in, 0);
    pthread_mutex_lock(&pool_mu);
    pool_gone = 0;
    pthread_mutex_unlock(&pool_mu);
}

void tr_bufs_session(const tr_config *c) {
    cfg = c;
    buf_size = (size_t)c->buffer_kb * 1024u;
}

uint64_t tr_bufs_in(void) { return atomic_load(&bufs_in); }
uint64_t tr_bufs_missed(void) { return atomic_load(&buf_refused) + atomic_load(&buf_foreign); }

/* The slot of a buffer the tracer allocated, or -1. Under pool_mu. */
static int slot_of(const uint8_t *buf) {
    for (unsigned i = 0; i < n_slots; i++)
        if (bufs[i].buf == buf && bufs[i].state != BUF_NONE)
            return (int)i;
    return -1;
}

/* A slot for a new buffer, or -1. Under pool_mu. */
static int slot_new(void) {
    for (unsigned i = 0; i < n_slots; i++)
        if (bufs[i].state == BUF_NONE)
            return (int)i;
    return n_slots < BUF_SLOTS ? (int)n_slots++ : -1;
}

void CUPTIAPI tr_bufs_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = NULL;
    *size = 0;
    *max_records = 0;
    if (tr_callbacks_state() != TR_ON)
        return;
    uint8_t *b = NULL;
    int fresh = -1;
    pthread_mutex_lock(&pool_mu);
    for (unsigned i = 0; i < n_slots && b == NULL; i++)
        if (bufs[i].state == BUF_FREE) {
            bufs[i].state = BUF_OUT;
            b = bufs[i].buf;
        }
    if (b == NULL && n_live < cfg->max_buffers &&
        n_live + n_lost < LOST_FACTOR * cfg->max_buffers && (fresh = slot_new()) >= 0) {
        bufs[fresh] = (buf_slot){NULL, BUF_OUT}; /* reserved; no buffer matches NULL */
        n_live++;
    }
    pthread_mutex_unlock(&pool_mu);
    if (fresh >= 0) {
        b = aligned_alloc(8, buf_size);
        pthread_mutex_lock(&pool_mu);
        if (b != NULL) {
            bufs[fresh].buf = b;
        } else {
            bufs[fresh].state = BUF_NONE;
            n_live--;
        }
        pthread_mutex_unlock(&pool_mu);
    }
    if (b == NULL) {
        /* CUPTI drops the records it cannot store and counts them; the flush thread reports it. */
        atomic_fetch_add_explicit(&buf_refused, 1, memory_order_relaxed);
        return;
    }
    *buffer = b;
    *size = buf_size;
}

void CUPTIAPI tr_bufs_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                size_t valid) {
    (void)ctx;
    (void)stream;
    (void)size;
    if (buffer == NULL)
        return;
    int state = tr_callbacks_state();
    if (state == TR_FORKED)
        return; /* the child's copy of the pool is not ours to touch */
    int keep = 0, release = 0;
    pthread_mutex_lock(&pool_mu);
    int i = slot_of(buffer);
    if (i < 0) {
        /* Not the tracer's (another CUPTI client's, completed after the tracer registered again):
         * its owner frees it; its records are lost to the tracer, and counted. */
        pthread_mutex_unlock(&pool_mu);
        if (valid > 0)
            atomic_fetch_add_explicit(&buf_foreign, 1, memory_order_relaxed);
        return;
    }
    if (bufs[i].state == BUF_LOST) {
        n_lost--; /* written off when another client took over; back now */
        n_live++;
    }
    if (pool_gone) {
        release = 1;
    } else if (valid > 0 && n_done < BUF_SLOTS) {
        bufs[i].state = BUF_DONE;
        done[n_done++] = (done_buf){(unsigned)i, valid};
        keep = 1;
    } else if (n_live > cfg->max_buffers) {
        release = 1;
    } else {
        bufs[i].state = BUF_FREE;
    }
    if (release) {
        bufs[i] = (buf_slot){NULL, BUF_NONE};
        n_live--;
    }
    pthread_mutex_unlock(&pool_mu);
    if (release)
        free(buffer);
    if (keep) {
        atomic_fetch_add_explicit(&bufs_in, 1, memory_order_relaxed);
        if (state == TR_ON)
            tr_wake_kick();
    }
}

/* The buffers CUPTI held for the tracer went to another client. They stay allocated (whoever has
 * them may still write, or free them), no longer count against SYNCTOP_MAX_BUFFERS but against
 * LOST_FACTOR times it, and are taken back if they ever return. */
void tr_bufs_write_off(void) {
    pthread_mutex_lock(&pool_mu);
    for (unsigned i = 0; i < n_slots; i++)
        if (bufs[i].state == BUF_OUT && bufs[i].buf != NULL) {
            bufs[i].state = BUF_LOST;
            n_live--;
            n_lost++;
        }
    pthread_mutex_unlock(&pool_mu);
}

void tr_bufs_drain(void (*walk)(uint8_t *buf, size_t valid, void *arg), void *arg) {
    done_buf local[64];
    for (;;) {
        unsigned n = 0;
        pthread_mutex_lock(&pool_mu);
        while (n < 64 && n_done > 0)
            local[n++] = done[--n_done];
        uint8_t *walked[64];
        for (unsigned i = 0; i < n; i++)
            walked[i] = bufs[local[i].slot].buf;
        pthread_mutex_unlock(&pool_mu);
        if (n == 0)
            return;
        /* The list is a stack; walk in the order CUPTI completed them. */
        for (unsigned i = n; i-- > 0;)
            walk(walked[i], local[i].valid, arg);
        uint8_t *spare[64];
        unsigned n_spare = 0;
        pthread_mutex_lock(&pool_mu);
        for (unsigned i = 0; i < n; i++) {
            buf_slot *s = &bufs[local[i].slot];
            if (n_live > cfg->max_buffers) { /* buffers taken back after a takeover */
                spare[n_spare++] = s->buf;
                *s = (buf_slot){NULL, BUF_NONE};
                n_live--;
            } else {
                s->state = BUF_FREE;
            }
        }
        pthread_mutex_unlock(&pool_mu);
        for (unsigned i = 0; i < n_spare; i++)
            free(spare[i]);
    }
}

void tr_bufs_release(void) {
    uint8_t *gone[BUF_SLOTS];
    unsigned n = 0;
    pthread_mutex_lock(&pool_mu);
    for (unsigned i = 0; i < n_slots; i++)
        if (bufs[i].state == BUF_FREE || bufs[i].state == BUF_DONE) {
            gone[n++] = bufs[i].buf;
            bufs[i] = (buf_slot){NULL, BUF_NONE};
            n_live--;
        }
    n_done = 0;
    pool_gone = 1;
    pthread_mutex_unlock(&pool_mu);
    for (unsigned i = 0; i < n; i++)
        free(gone[i]);
}
