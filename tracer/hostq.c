/*
 * Bounded MPMC queue after Vyukov: each cell carries a sequence number that says whose turn it
 * is, so producers claim a cell with one CAS on the enqueue position and publish it with a release
 * store; the consumer sees it with an acquire load. No ABA: positions only grow.
 */
#include "hostq.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct cell {
    atomic_size_t seq;
    tr_hostev ev;
} cell;

struct tr_hostq {
    alignas(64) atomic_size_t enq;
    alignas(64) atomic_size_t deq;
    alignas(64) atomic_uint_fast64_t dropped;
    size_t mask;
    cell *cells;
};

tr_hostq *tr_hostq_new(uint32_t capacity) {
    if (capacity < 2 || (capacity & (capacity - 1)) != 0)
        return NULL;
    tr_hostq *q = aligned_alloc(64, sizeof *q);
    if (q == NULL)
        return NULL;
    memset(q, 0, sizeof *q);
    q->cells = calloc(capacity, sizeof *q->cells);
    if (q->cells == NULL) {
        free(q);
        return NULL;
    }
    q->mask = capacity - 1;
    for (size_t i = 0; i < capacity; i++)
        atomic_init(&q->cells[i].seq, i);
    atomic_init(&q->enq, 0);
    atomic_init(&q->deq, 0);
    atomic_init(&q->dropped, 0);
    return q;
}

void tr_hostq_destroy(tr_hostq **qp) {
    if (qp == NULL || *qp == NULL)
        return;
    free((*qp)->cells);
    free(*qp);
    *qp = NULL;
}

/* The header, then only the frames in use. */
static void copy_event(tr_hostev *to, const tr_hostev *from) {
    unsigned np = from->n_py <= TR_PY_FRAMES ? from->n_py : TR_PY_FRAMES;
    unsigned nf = from->n_frames <= TR_RAW_FRAMES ? from->n_frames : TR_RAW_FRAMES;
    memcpy(to, from, offsetof(tr_hostev, py) + np * sizeof from->py[0]);
    memcpy(to->frames, from->frames, nf * sizeof from->frames[0]);
    to->n_py = (uint8_t)np;
    to->n_frames = (uint8_t)nf;
}

int tr_hostq_push(tr_hostq *q, const tr_hostev *ev) {
    size_t pos = atomic_load_explicit(&q->enq, memory_order_relaxed);
    for (;;) {
        cell *c = &q->cells[pos & q->mask];
        size_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        intptr_t dif = (intptr_t)seq - (intptr_t)pos;
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->enq, &pos, pos + 1,
                                                      memory_order_relaxed, memory_order_relaxed)) {
                copy_event(&c->ev, ev);
                atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
                return 0;
            }
        } else if (dif < 0) {
            atomic_fetch_add_explicit(&q->dropped, 1, memory_order_relaxed);
            return -1;
        } else {
            pos = atomic_load_explicit(&q->enq, memory_order_relaxed);
        }
    }
}

int tr_hostq_pop(tr_hostq *q, tr_hostev *out) {
    size_t pos = atomic_load_explicit(&q->deq, memory_order_relaxed);
    for (;;) {
        cell *c = &q->cells[pos & q->mask];
        size_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        intptr_t dif = (intptr_t)seq - (intptr_t)(pos + 1);
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->deq, &pos, pos + 1,
                                                      memory_order_relaxed, memory_order_relaxed)) {
                copy_event(out, &c->ev);
                atomic_store_explicit(&c->seq, pos + q->mask + 1, memory_order_release);
                return 1;
            }
        } else if (dif < 0) {
            return 0;
        } else {
            pos = atomic_load_explicit(&q->deq, memory_order_relaxed);
        }
    }
}

uint64_t tr_hostq_dropped(const tr_hostq *q) {
    return atomic_load_explicit(&((tr_hostq *)q)->dropped, memory_order_relaxed);
}
