/*
 * How other threads reach the flush thread, and how it answers: a wake-up (a buffer completed, a
 * context created, a fork coming), a drain waited for (context destruction and exit: everything
 * queued so far shipped), a stop (synctop_tracer_stop, or exit), and what they wait on in turn (the
 * first subscriber, the thread's end). All of it under one mutex, held for a few stores; every
 * wait is bounded.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "tracer_int.h"

static pthread_mutex_t wake_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake_cv = PTHREAD_COND_INITIALIZER, done_cv = PTHREAD_COND_INITIALIZER;
static int stop, exited, kicked;
static int detaching; /* the flush thread is stopping for synctop_tracer_stop, not for exit */
static int running;   /* a flush thread exists (joinable at exit, or ending by itself when detaching) */
static uint64_t drain_req, drain_done;
static int subscribers;
static atomic_int stop_req; /* synctop_tracer_stop asked */

void tr_wake_deadline(struct timespec *ts, uint32_t ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    uint64_t ns = (uint64_t)ts->tv_nsec + (uint64_t)ms * 1000000ull;
    ts->tv_sec += (time_t)(ns / 1000000000ull);
    ts->tv_nsec = (long)(ns % 1000000000ull);
}

void tr_wake_reset(void) {
    stop = exited = kicked = detaching = 0;
    drain_req = drain_done = 0;
    subscribers = 0;
    atomic_store(&stop_req, 0);
}

/* ---- what other threads ask ---- */

void tr_wake_kick(void) {
    pthread_mutex_lock(&wake_mu);
    kicked = 1;
    pthread_cond_signal(&wake_cv);
    pthread_mutex_unlock(&wake_mu);
}

void tr_wake_drain_sync(uint32_t wait_ms) {
    struct timespec until;
    tr_wake_deadline(&until, wait_ms);
    pthread_mutex_lock(&wake_mu);
    uint64_t want = ++drain_req;
    pthread_cond_signal(&wake_cv);
    while (drain_done < want && !exited && !detaching)
        if (pthread_cond_timedwait(&done_cv, &wake_mu, &until) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&wake_mu);
}

void tr_wake_request_stop(void) { atomic_store(&stop_req, 1); }
int tr_wake_stop_requested(void) { return atomic_load(&stop_req); }

void tr_wake_wait_subscribers(uint32_t wait_ms) {
    struct timespec until;
    tr_wake_deadline(&until, wait_ms);
    pthread_mutex_lock(&wake_mu);
    while (subscribers == 0 && !exited)
        if (pthread_cond_timedwait(&done_cv, &wake_mu, &until) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&wake_mu);
}

int tr_wake_wait_ended(uint32_t wait_ms) {
    struct timespec until;
    tr_wake_deadline(&until, wait_ms);
    pthread_mutex_lock(&wake_mu);
    while (running && (detaching || atomic_load(&stop_req)))
        if (pthread_cond_timedwait(&done_cv, &wake_mu, &until) == ETIMEDOUT)
            break;
    int idle = !running;
    pthread_mutex_unlock(&wake_mu);
    return idle;
}

int tr_wake_stop(const struct timespec *until, void (*first)(void)) {
    pthread_mutex_lock(&wake_mu);
    if (detaching) {
        /* Stopping already, for synctop_tracer_stop: it ships and frees by itself. */
        while (running)
            if (pthread_cond_timedwait(&done_cv, &wake_mu, until) == ETIMEDOUT)
                break;
        pthread_mutex_unlock(&wake_mu);
        return 0;
    }
    /* Under the lock: a stop for synctop_tracer_stop cannot begin after this. */
    first();
    stop = 1;
    pthread_cond_signal(&wake_cv);
    pthread_mutex_unlock(&wake_mu);
    return 1;
}

/* ---- the flush thread's side ---- */

void tr_wake_started(void) {
    pthread_mutex_lock(&wake_mu);
    running = 1;
    pthread_mutex_unlock(&wake_mu);
}

int tr_wake_wait(uint32_t wait_ms, uint64_t *want, int *detach) {
    pthread_mutex_lock(&wake_mu);
    struct timespec until;
    tr_wake_deadline(&until, wait_ms);
    while (!stop && !kicked && drain_req == drain_done)
        if (pthread_cond_timedwait(&wake_cv, &wake_mu, &until) == ETIMEDOUT)
            break;
    if (!stop && atomic_load(&stop_req))
        detaching = 1;
    int stopping = stop || detaching;
    *detach = detaching;
    *want = drain_req;
    kicked = 0;
    pthread_mutex_unlock(&wake_mu);
    return stopping;
}

/* Read by the flush thread, the one that writes them: no lock. */
int tr_wake_draining(uint64_t want) { return want != drain_done; }
int tr_wake_detaching(void) { return detaching; }
int tr_wake_subscribers(void) { return subscribers; }

void tr_wake_drained(uint64_t want) {
    pthread_mutex_lock(&wake_mu);
    if (want != drain_done) {
        drain_done = want;
        pthread_cond_broadcast(&done_cv);
    }
    pthread_mutex_unlock(&wake_mu);
}

void tr_wake_set_subscribers(int subs) {
    pthread_mutex_lock(&wake_mu);
    subscribers = subs;
    pthread_cond_broadcast(&done_cv);
    pthread_mutex_unlock(&wake_mu);
}

void tr_wake_ended(void) {
    pthread_mutex_lock(&wake_mu);
    exited = 1;
    if (detaching)
        running = 0;
    pthread_cond_broadcast(&done_cv);
    pthread_mutex_unlock(&wake_mu);
}
