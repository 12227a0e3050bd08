/*
 * The host-call queue: how a CUDA callback on an application thread hands a measured call to the
 * flush thread. A bounded multi-producer queue (Dmitry Vyukov's array of sequenced cells): a push
 * is a compare-and-swap and a copy, never a lock, a system call or an allocation, and a full queue
 * drops the event and counts it instead of making the application wait.
 */
#ifndef SYNCTOP_TRACER_HOSTQ_H
#define SYNCTOP_TRACER_HOSTQ_H

#include <stdint.h>

#include "pyframes.h"

#define TR_RAW_FRAMES 32 /* return addresses taken per blocking call, before filtering */
#define TR_PY_FRAMES 16  /* Python frames taken per blocking call, innermost first */

/* One host call, as measured by the callbacks. */
typedef struct tr_hostev {
    uint64_t start, end; /* CUPTI clock */
    uint32_t tid;
    uint32_t correlation;
    uint32_t cbid;
    uint32_t context; /* CUPTI context id (contextUid), 0 when none */
    int32_t ret;
    uint32_t polls;   /* query calls folded into this event (busy loops), 0 for other calls */
    uint8_t driver;   /* 1: driver API, 0: runtime API */
    uint8_t blocking; /* waited at least the threshold */
    uint8_t n_frames;
    uint8_t n_py;
    uint8_t pad0[4];
    tr_pyframe py[TR_PY_FRAMES];     /* the calling thread's Python frames, innermost first */
    uintptr_t frames[TR_RAW_FRAMES]; /* return addresses, innermost first */
} tr_hostev;

typedef struct tr_hostq tr_hostq;

/* capacity: a power of two. */
tr_hostq *tr_hostq_new(uint32_t capacity);
void tr_hostq_destroy(tr_hostq **q);
/* Copies ev in; returns 0, or -1 when the queue is full (the event is dropped and counted). Only
 * the first n_py Python frames and n_frames native frames are copied. Safe from any number of
 * threads. */
int tr_hostq_push(tr_hostq *q, const tr_hostev *ev);
/* Takes the oldest event; returns 1, or 0 when empty. One consumer at a time. */
int tr_hostq_pop(tr_hostq *q, tr_hostev *out);
uint64_t tr_hostq_dropped(const tr_hostq *q);

#endif
