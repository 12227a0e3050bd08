/*
 * Several sources imported at once, their batches handed on in order (ahead.h). A worker takes the
 * first free source below cur + width (cur: the caller's), imports it into the source's list of
 * batches (pages of their own, given back once handed on) and marks it done; the caller, coming to
 * a source a worker holds, imports a later free source into its list while it waits.
 */
#include "ahead.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grow.h"

enum { S_FREE, S_RUN, S_DONE, S_CALLER };

typedef struct src {
    int state;          /* S_*; S_CALLER also for a source that is never read ahead */
    int rc;             /* its import's result, once S_DONE */
    err_msg err;
    import_stats *st;   /* its figures, once S_DONE */
    uint8_t *buf;       /* its batches, each a size_t length, the batch, padding to 8 */
    size_t len, cap;
    _Atomic uint64_t done, total; /* its reading progress */
} src;

struct ing_ahead {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t *th;
    size_t n_th;
    src *s;
    size_t n;
    size_t cur;   /* the source the caller is at */
    size_t scan;  /* no free source below this one */
    size_t width; /* the sources that may be read or held: those from cur below cur + width */
    int each;     /* threads of one import */
    ahead_read_fn read;
    void *ctx;
    _Atomic int stop;
};

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

static int keep_batch(void *ctx, const void *batch, size_t len, err_msg *err) {
    src *p = ctx;
    size_t need = p->len + sizeof len + pad8(len);
    if (cm_big_grow((void **)&p->buf, &p->cap, need) != 0)
        return err_set(err, ERR_NOMEM, "out of memory");
    memcpy(p->buf + p->len, &len, sizeof len);
    memcpy(p->buf + p->len + sizeof len, batch, len);
    p->len = need;
    return 0;
}

static void drop_batches(src *p) {
    cm_big_free(p->buf, p->cap);
    p->buf = NULL;
    p->len = p->cap = 0;
}

typedef struct job {
    ing_ahead *a;
    src *p;
    import_progress_fn progress; /* the caller's, when the caller reads the source */
    void *progress_ctx;
    int cancelled;
} job;

static int job_progress(void *ctx, uint64_t done, uint64_t total) {
    job *j = ctx;
    atomic_store_explicit(&j->p->done, done, memory_order_relaxed);
    atomic_store_explicit(&j->p->total, total, memory_order_relaxed);
    if (j->progress && j->progress(j->progress_ctx, done, total) != 0)
        j->cancelled = 1;
    return j->cancelled || atomic_load_explicit(&j->a->stop, memory_order_relaxed);
}

/* The next source a worker may take (under a->mu): its index, a->n when none may be taken now, or
 * SIZE_MAX when none is left. */
static size_t pick(ing_ahead *a) {
    size_t i = a->scan;
    while (i < a->n && a->s[i].state != S_FREE)
        i++;
    a->scan = i;
    if (i >= a->n)
        return SIZE_MAX;
    return i < a->cur + a->width ? i : a->n;
}

/* Imports source i (taken: S_RUN) into its list, with a->mu held on entry and on return; progress:
 * the caller's, when the caller runs it. Returns 0, or -1 when progress stopped it (the source is
 * then free again). */
static int run(ing_ahead *a, size_t i, import_progress_fn progress, void *progress_ctx) {
    src *p = &a->s[i];
    p->state = S_RUN;
    pthread_mutex_unlock(&a->mu);
    job j = {a, p, progress, progress_ctx, 0};
    import_opts o = {.progress = job_progress, .progress_ctx = &j, .threads = a->each};
    if (p->st == NULL)
        p->st = calloc(1, sizeof *p->st);
    int rc = p->st ? a->read(a->ctx, i, &o, keep_batch, p, p->st, &p->err) : err_set(&p->err, ERR_NOMEM, "out of memory");
    pthread_mutex_lock(&a->mu);
    if (j.cancelled) {
        drop_batches(p);
        p->state = S_FREE;
        a->scan = i < a->scan ? i : a->scan;
        return -1;
    }
    p->rc = rc;
    p->state = S_DONE;
    pthread_cond_broadcast(&a->cv);
    return 0;
}

static void *worker(void *arg) {
    ing_ahead *a = arg;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        size_t i;
        while ((i = pick(a)) == a->n && !atomic_load(&a->stop))
            pthread_cond_wait(&a->cv, &a->mu);
        if (i == SIZE_MAX || atomic_load(&a->stop))
            break;
        run(a, i, NULL, NULL);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

ing_ahead *ahead_start(size_t n, const uint8_t *may, int threads, ahead_read_fn read, void *ctx, int *nomem) {
    *nomem = 0;
    size_t n_may = 0;
    for (size_t i = 0; i < n; i++)
        n_may += may[i] != 0;
    if (n_may < 2 || threads < 2)
        return NULL;
    size_t at_once = n_may < (size_t)threads ? n_may : (size_t)threads;
    ing_ahead *a = calloc(1, sizeof *a);
    if (a == NULL || (a->s = calloc(n, sizeof *a->s)) == NULL || (a->th = calloc(at_once - 1, sizeof *a->th)) == NULL) {
        if (a)
            free(a->s);
        free(a);
        *nomem = 1;
        return NULL;
    }
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    a->n = n;
    a->width = 2 * at_once;
    a->each = threads / (int)at_once;
    a->read = read;
    a->ctx = ctx;
    for (size_t i = 0; i < n; i++)
        a->s[i].state = may[i] && i > 0 ? S_FREE : S_CALLER;
    for (size_t i = 0; i + 1 < at_once; i++) {
        if (pthread_create(&a->th[a->n_th], NULL, worker, a) != 0)
            break; /* fewer workers: the caller takes what they do not */
        a->n_th++;
    }
    return a;
}

int ahead_threads_each(const ing_ahead *a) { return a->each; }

static void in_50ms(struct timespec *t) {
    clock_gettime(CLOCK_REALTIME, t);
    t->tv_nsec += 50 * 1000000L;
    if (t->tv_nsec >= 1000000000L) {
        t->tv_sec++;
        t->tv_nsec -= 1000000000L;
    }
}

int ahead_take(ing_ahead *a, size_t i, import_emit_fn emit, void *emit_ctx, import_stats *st,
               import_progress_fn progress, void *progress_ctx, const char *name, err_msg *err) {
    src *p = &a->s[i];
    pthread_mutex_lock(&a->mu);
    a->cur = i;
    pthread_cond_broadcast(&a->cv); /* the workers may take the sources it allows now */
    if (p->state == S_FREE)
        p->state = S_CALLER;
    while (p->state == S_RUN) {
        size_t j = pick(a);
        if (j < a->n) { /* a later source, meanwhile */
            if (run(a, j, progress, progress_ctx) != 0) {
                pthread_mutex_unlock(&a->mu);
                return err_set(err, ERR_EOF, "%s: import cancelled", name);
            }
            continue;
        }
        struct timespec until;
        in_50ms(&until);
        pthread_cond_timedwait(&a->cv, &a->mu, &until);
        if (p->state == S_RUN && progress &&
            progress(progress_ctx, atomic_load_explicit(&p->done, memory_order_relaxed),
                     atomic_load_explicit(&p->total, memory_order_relaxed)) != 0) {
            pthread_mutex_unlock(&a->mu);
            return err_set(err, ERR_EOF, "%s: import cancelled", name);
        }
    }
    int state = p->state;
    pthread_mutex_unlock(&a->mu);
    if (state == S_CALLER)
        return AHEAD_MINE;
    int rc = p->rc;
    if (rc != 0)
        *err = p->err;
    for (size_t at = 0; rc == 0 && at < p->len;) {
        size_t len;
        memcpy(&len, p->buf + at, sizeof len);
        rc = emit(emit_ctx, p->buf + at + sizeof len, len, err);
        at += sizeof len + pad8(len);
    }
    if (st && rc == 0)
        *st = *p->st;
    drop_batches(p);
    free(p->st);
    p->st = NULL;
    return rc ? rc : 1;
}

void ahead_end(ing_ahead **ap) {
    ing_ahead *a = ap ? *ap : NULL;
    if (a == NULL)
        return;
    pthread_mutex_lock(&a->mu);
    atomic_store(&a->stop, 1);
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    for (size_t i = 0; i < a->n_th; i++)
        pthread_join(a->th[i], NULL);
    for (size_t i = 0; i < a->n; i++) {
        drop_batches(&a->s[i]);
        free(a->s[i].st);
    }
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    free(a->s);
    free(a->th);
    free(a);
    *ap = NULL;
}
