/*
 * The Kineto importer's output (kineto_int.h): once the whole text is read, timestamps get
 * baseTimeNanoseconds, host calls their device and flags (emit.c's correlation pass), blocking
 * calls get their call sites from the operators and Python frames open around them, and everything
 * is handed out through emit.c: metadata, call sites, events. Memory is what a large trace is short
 * of: the order is made in the contexts' pages once they have named the calls, the records are
 * moved into time order in place (a radix sort of one word each) and their pages given back as they
 * are emitted, so that the records, the contexts, the order and the store never all peak together.
 * A text parsed on threads, with IMPORT_END_TWO_LEAST records or more, has two threads for its
 * end: the order's halves are sorted apart, and the records are moved on one while the other emits
 * those already in place.
 */
#include "kineto_int.h"
#include "emit.h"
#include "hash.h"
#include "grow.h"
#include "radix.h"
#include "text.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* Adds baseTimeNanoseconds, in one pass that drops the events that end up out of range (keeping
 * the order of the others) and returns the span of those left in *lo, *hi (0, 0 when none). */
static void fix_times(kimp *k, uint64_t *lo, uint64_t *hi) {
    int64_t base = k->have_base ? k->base : 0;
    size_t n = 0;
    *lo = *hi = 0;
    for (size_t i = 0; i < k->n_rec; i++) {
        kkernel *r = &k->rec[i].kernel; /* every event kind has start/end at the same place */
        int64_t s, e;
        if (__builtin_add_overflow((int64_t)r->start, base, &s) ||
            __builtin_add_overflow((int64_t)r->end, base, &e) || s < 0) {
            if (k->st->invalid++ == 0)
                snprintf(k->st->first_invalid, sizeof k->st->first_invalid,
                         "an event whose time is before 1970 or out of range");
            continue;
        }
        r->start = (uint64_t)s;
        r->end = (uint64_t)e;
        if (n == 0 || r->start < *lo)
            *lo = r->start;
        if (n == 0 || r->end > *hi)
            *hi = r->end;
        if (n != i)
            k->rec[n] = k->rec[i];
        n++;
    }
    kt_held(k, -(int64_t)((k->n_rec - n) * sizeof *k->rec));
    k->n_rec = n;
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

/* ---- time order: one sort word per record or context ---- */

static int bits_of(uint64_t v) {
    return v ? 64 - __builtin_clzll(v) : 0;
}

/* How a word's place (its low bits) is compared within a run of equal keys. */
typedef struct word_order {
    uint64_t mask; /* the place's bits */
    int (*cmp)(const void *k, size_t x, size_t y);
    const void *k;
} word_order;

static int word_cmp(const void *a, const void *b, void *arg) {
    const word_order *o = arg;
    return o->cmp(o->k, (size_t)(*(const uint64_t *)a & o->mask), (size_t)(*(const uint64_t *)b & o->mask));
}

/* Words of sort_by_start, places from to from + n: made, then sorted by their bits from low up in w
 * with the room at room (out: w or room, NULL when out of memory). */
typedef struct kwords {
    uint64_t *w, *room, *out;
    size_t from, n;
    size_t (*at)(const void *k, size_t i);
    uint64_t (*start)(const void *k, size_t i);
    const void *k;
    uint64_t lo;
    int shift, ib;
} kwords;

static void *words_sort(void *arg) {
    kwords *h = arg;
    for (size_t i = 0; i < h->n; i++)
        h->w[i] = ((h->start(h->k, h->from + i) - h->lo) >> h->shift) << h->ib | h->at(h->k, h->from + i);
    h->out = cm_radix_sort_u64_above(h->w, h->room, h->n, (unsigned)h->ib);
    return NULL;
}

/* The sorted words of a and b, merged into d by their bits from low up, a's first where those are
 * equal: as a stable sort of a's words followed by b's would leave them. */
static void words_merge(const uint64_t *a, size_t na, const uint64_t *b, size_t nb, uint64_t *d, int low) {
    size_t i = 0, j = 0;
    while (i < na && j < nb)
        *d++ = b[j] >> low < a[i] >> low ? b[j++] : a[i++];
    memcpy(d, a + i, (na - i) * sizeof *a);
    memcpy(d + (na - i), b + j, (nb - j) * sizeof *b);
}

/* Sorts the n places at[i] (the i-th's start start[i]; places rising with i) by start, ties in the
 * order given, as words: the place in the low bits (*mask), above it the start less lo (hi the
 * latest), both in one word; a span too wide for that gives up the start's last bits, and each run
 * that then shares a key is sorted by cmp. The sort reads the starts' bits alone: being stable, it
 * leaves places of one start rising. In the 2n words at w, the first n for the words and the rest
 * their room: returns where the sorted words are (w or w + n), NULL when out of memory. With two
 * (and places enough), the second half of the words is made and sorted on a thread of its own
 * while this one does the first, and the halves merged: the same order. */
static uint64_t *sort_by_start(uint64_t *w, size_t n, size_t (*at)(const void *k, size_t i),
                               uint64_t (*start)(const void *k, size_t i), const void *k, size_t places, uint64_t lo,
                               uint64_t hi, int (*cmp)(const void *k, size_t x, size_t y), uint64_t *mask, int two) {
    int ib = bits_of(places), sb = bits_of(hi - lo);
    int shift = ib + sb > 64 ? ib + sb - 64 : 0;
    *mask = ((uint64_t)1 << ib) - 1;
    size_t m = two && n >= IMPORT_END_TWO_LEAST ? n / 2 : n;
    kwords a = {w, w + n, NULL, 0, m, at, start, k, lo, shift, ib};
    kwords b = {w + m, w + n + m, NULL, m, n - m, at, start, k, lo, shift, ib};
    pthread_t th;
    int on_thread = m < n && pthread_create(&th, NULL, words_sort, &b) == 0;
    words_sort(&a);
    if (m < n) {
        if (on_thread)
            pthread_join(th, NULL);
        else
            words_sort(&b);
    }
    uint64_t *s = a.out;
    if (s != NULL && m < n) {
        if (b.out == NULL)
            return NULL;
        uint64_t *in = s == w ? w : w + n, *to = s == w ? w + n : w; /* b's words beside a's, then merged */
        if (b.out != in + m)
            memcpy(in + m, b.out, (n - m) * sizeof *in);
        words_merge(in, m, in + m, n - m, to, ib);
        s = to;
    }
    word_order o = {*mask, cmp, k};
    for (size_t i = 0, j; s != NULL && shift > 0 && i < n; i = j) {
        for (j = i + 1; j < n && s[j] >> ib == s[i] >> ib; j++) {
        }
        if (j - i > 1)
            qsort_r(s + i, j - i, sizeof *s, word_cmp, &o);
    }
    return s;
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

/* The places and starts sort_by_start reads from a thread's contexts, and how it orders ties. */
typedef struct ctx_run {
    const kimp *k;
    const uint32_t *idx;
} ctx_run;
static size_t ctx_run_at(const void *r, size_t i) {
    return ((const ctx_run *)r)->idx[i];
}
static uint64_t ctx_run_start(const void *r, size_t i) {
    const ctx_run *c = r;
    return c->k->ctx[c->idx[i]].start;
}
static int ctx_run_cmp(const void *r, size_t x, size_t y) {
    const kimp *k = ((const ctx_run *)r)->k;
    return ctx_cmp(k, &k->ctx[x], &k->ctx[y]);
}

/* Sorts the contexts idx[0, n) of one thread (starts from lo to hi) by start, keeping file order
 * among equal starts (sort_by_start, in 16 bytes a context). 0 or -1 when out of memory. */
static int ctx_sort_run(kimp *k, uint32_t *idx, size_t n, uint64_t lo, uint64_t hi) {
    ctx_run r = {k, idx};
    uint64_t mask, *w = cm_big_alloc_filled(2 * n * sizeof *w), *s = NULL;
    if (w != NULL && (s = sort_by_start(w, n, ctx_run_at, ctx_run_start, &r, k->n_ctx, lo, hi, ctx_run_cmp, &mask, 0)))
        for (size_t i = 0; i < n; i++)
            idx[i] = (uint32_t)(s[i] & mask);
    cm_big_free(w, 2 * n * sizeof *w);
    return s != NULL ? 0 : -1;
}

/* The contexts the sweep of kineto_callsites reads, in ctx_cmp order, as indices into k->ctx
 * (*out, their count returned; -1 when out of memory): those of the threads with blocking calls
 * (calls, sorted by thread and start) that start no later than the thread's last one. Put in
 * thread order by counting (4 bytes a context), each thread's in file order; a thread whose rows
 * do not come in time order in the file is then sorted by start (16 bytes more a context of that
 * thread); each run of the same thread and start is sorted by the rest. */
typedef struct kthread_run {
    uint64_t last;    /* the start of its last blocking call */
    uint64_t lo, hi;  /* its contexts' earliest and latest start */
    uint64_t prev;    /* the start of its context met last */
    size_t n, at;     /* its contexts, and where they go in the order */
    int sorted;       /* met in time order so far */
} kthread_run;

static ssize_t ctx_order(kimp *k, const kcall *calls, size_t nb, uint32_t **out) {
    cm_u64map rank = {0}; /* tid -> its index in th + 1 */
    kthread_run *th = calloc(nb ? nb : 1, sizeof *th);
    uint32_t *idx = NULL;
    size_t nt = 0, m = 0;
    if (th == NULL || k->n_ctx > UINT32_MAX)
        goto nomem;
    for (size_t c = 0; c < nb; c++) { /* the threads in tid order */
        if (c + 1 < nb && calls[c + 1].tid == calls[c].tid)
            continue;
        if (cm_u64map_put(&rank, calls[c].tid, nt + 1) != 0)
            goto nomem;
        th[nt++] = (kthread_run){.last = calls[c].start, .lo = UINT64_MAX, .sorted = 1};
    }
    rank_memo memo = {0};
    for (size_t i = 0; i < k->n_ctx; i++) {
        const kctx *x = &k->ctx[i];
        const uint64_t *r = rank_of(&rank, kt_ctx_tid(k, x), &memo);
        if (r == NULL || x->start > th[*r - 1].last)
            continue;
        kthread_run *t = &th[*r - 1];
        if (t->n > 0 && x->start < t->prev)
            t->sorted = 0;
        t->prev = x->start;
        t->lo = x->start < t->lo ? x->start : t->lo;
        t->hi = x->start > t->hi ? x->start : t->hi;
        t->n++;
        m++;
    }
    if ((idx = malloc((m ? m : 1) * sizeof *idx)) == NULL)
        goto nomem;
    for (size_t t = 0, at = 0; t < nt; t++) {
        th[t].at = at;
        at += th[t].n;
    }
    for (size_t i = 0; i < k->n_ctx; i++) { /* by thread, in file order */
        const kctx *x = &k->ctx[i];
        const uint64_t *r = rank_of(&rank, kt_ctx_tid(k, x), &memo);
        if (r != NULL && x->start <= th[*r - 1].last)
            idx[th[*r - 1].at++] = (uint32_t)i;
    }
    for (size_t t = 0; t < nt; t++)
        if (!th[t].sorted && ctx_sort_run(k, idx + th[t].at - th[t].n, th[t].n, th[t].lo, th[t].hi) != 0)
            goto nomem;
    for (size_t i = 0, j; i < m; i = j) {
        const kctx *x = &k->ctx[idx[i]];
        for (j = i + 1; j < m && kt_ctx_tid(k, &k->ctx[idx[j]]) == kt_ctx_tid(k, x) && k->ctx[idx[j]].start == x->start;
             j++) {
        }
        if (j - i > 1)
            qsort_r(idx + i, j - i, sizeof *idx, ctx_index_cmp, k);
    }
    cm_u64map_free(&rank);
    free(th);
    *out = idx;
    return (ssize_t)m;
nomem:
    cm_u64map_free(&rank);
    free(th);
    free(idx);
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

/* The places and starts sort_by_start reads from the records, and how it orders ties: by whole
 * start, then by place in the file. */
static size_t rec_at(const void *k, size_t i) {
    (void)k;
    return i;
}
static uint64_t rec_start(const void *k, size_t i) {
    return ((const kimp *)k)->rec[i].kernel.start;
}
static int rec_cmp(const void *kp, size_t x, size_t y) {
    const kimp *k = kp;
    uint64_t sx = k->rec[x].kernel.start, sy = k->rec[y].kernel.start;
    if (sx != sy)
        return sx < sy ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* The records' order by start, ties in file order, as a permutation: perm[i] & mask is the index of
 * the record that goes i-th (the bits above the mask are sort keys to ignore), one word a record,
 * in the bytes of pages at pages. */
typedef struct korder {
    uint64_t *perm, mask;
    void *pages;
    size_t bytes;
} korder;

/* Makes the order (sort_by_start: 8 bytes a record and 8 of room) in room, room_bytes of pages
 * that it takes (the contexts', already in memory, where fresh pages cost the kernel a fault each)
 * where they are enough, else in pages of its own; then gives back all but the words' pages. 0, or
 * -1 when out of memory (o->pages still to be given back). */
static int order_of(kimp *k, uint64_t lo, uint64_t hi, void *room, size_t room_bytes, korder *o) {
    size_t n = k->n_rec, need = 2 * (n ? n : 1) * sizeof *o->perm;
    if (room != NULL && room_bytes < need) {
        cm_big_free(room, room_bytes);
        room = NULL;
    }
    o->pages = room != NULL ? room : cm_big_alloc_filled(need);
    o->bytes = room != NULL ? room_bytes : need;
    if (o->pages == NULL)
        return -1;
    kt_held(k, (int64_t)(2 * n * sizeof *o->perm));
    o->perm = sort_by_start(o->pages, n, rec_at, rec_start, k, n, lo, hi, rec_cmp, &o->mask, k->on_threads);
    if (o->perm == NULL)
        return -1;
    cm_big_give_back(o->pages, o->perm);
    cm_big_give_back(o->perm + n, (char *)o->pages + o->bytes);
    kt_held(k, -(int64_t)(n * sizeof *o->perm));
    return 0;
}

/* The permutation of the records (permute), and how far it has gone: every record before ready is
 * in its place and stays there, so that they can be emitted while it goes on (on a thread of its
 * own: kperm_start). */
#define PERM_STEP (1u << 14) /* places between two reports of how far it has gone */
typedef struct kperm {
    kimp *k;
    uint64_t *perm, mask;
    size_t ready;
    int threaded;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} kperm;

static void perm_ready(kperm *p, size_t ready) {
    pthread_mutex_lock(&p->mu);
    p->ready = ready;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* Moves the records into the order perm gives (see order_of), one cycle of the permutation at a
 * time from the front, marking each place done in perm: a cycle that starts at place i moves
 * records into places from i on only, so the places before i are final. */
static void permute(kperm *p) {
    kimp *k = p->k;
    uint64_t *perm = p->perm, mask = p->mask;
    for (size_t i = 0; i < k->n_rec; i++) {
        if (p->threaded && i % PERM_STEP == 0 && i > 0)
            perm_ready(p, i);
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
    if (p->threaded)
        perm_ready(p, k->n_rec);
    else
        p->ready = k->n_rec;
}

static void *permute_main(void *arg) {
    permute(arg);
    return NULL;
}

/* Starts the permutation: on a thread of its own when the parse had threads and the records are
 * IMPORT_END_TWO_LEAST or more, so that the records in their places are emitted (and their pages
 * given back) while the rest are moved; else here. */
static void kperm_start(kperm *p) {
    if (p->k->on_threads && p->k->n_rec >= IMPORT_END_TWO_LEAST && pthread_mutex_init(&p->mu, NULL) == 0) {
        if (pthread_cond_init(&p->cv, NULL) == 0) {
            p->threaded = 1;
            if (pthread_create(&p->th, NULL, permute_main, p) == 0)
                return;
            pthread_cond_destroy(&p->cv);
        }
        pthread_mutex_destroy(&p->mu);
        p->threaded = 0;
    }
    permute(p);
}

/* Waits until the records before upto (at most all of them) are in their places; returns how many
 * are. */
static size_t kperm_wait(kperm *p, size_t upto) {
    if (!p->threaded)
        return p->ready;
    pthread_mutex_lock(&p->mu);
    while (p->ready < upto)
        pthread_cond_wait(&p->cv, &p->mu);
    size_t ready = p->ready;
    pthread_mutex_unlock(&p->mu);
    return ready;
}

static void kperm_end(kperm *p) {
    if (!p->threaded)
        return;
    pthread_join(p->th, NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    p->threaded = 0;
}

/* Gives back the pages of the records before rec[upto], and of their places in perm (NULL: none),
 * that *done did not yet give back: the permutation is done with both. */
#define REC_GIVE_BACK (1u << 16) /* records emitted between two give-backs */
static void rec_give_back(kimp *k, uint64_t *perm, size_t upto, size_t *done) {
    kt_held(k, -(int64_t)cm_big_give_back(&k->rec[*done], &k->rec[upto]));
    if (perm != NULL)
        kt_held(k, -(int64_t)cm_big_give_back(&perm[*done], &perm[upto]));
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
    fix_times(k, &st->t_min, &st->t_max);
    int rc = resolve_apis(k);
    em_out o;
    em_out_init(&o, k->enc, k->opts, emit, ctx, k->name, k->err, st);
    if (k->on_threads) /* the batches handed out while the next ones are made */
        em_out_async(&o);
    if (rc == 0)
        rc = emit_meta(k, &o);
    if (rc == 0)
        rc = kineto_callsites(k, &o);
    /* the contexts have named the calls: their pages hold the order next */
    kt_held(k, -(int64_t)(k->n_ctx * sizeof *k->ctx));
    kt_held(k, -(int64_t)(k->n_frames * sizeof *k->frames));
    void *room = k->ctx;
    size_t room_bytes = k->cap_ctx * sizeof *k->ctx;
    k->ctx = NULL;
    k->n_ctx = k->cap_ctx = 0;
    cm_u64map_free(&k->ctx_long);
    free(k->frames);
    k->frames = NULL;
    k->n_frames = k->cap_frames = 0;
    cm_u64map_free(&k->frame_ids);
    korder ord = {.pages = room, .bytes = room_bytes};
    if (rc == 0 && order_of(k, st->t_min, st->t_max, room, room_bytes, &ord) != 0)
        rc = err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
    kperm pm = {.k = k, .perm = ord.perm, .mask = ord.mask};
    if (rc == 0)
        kperm_start(&pm);
    if (!pm.threaded) { /* the records are in order (or nothing is emitted): the order is done with */
        if (ord.perm != NULL)
            kt_held(k, -(int64_t)(k->n_rec * sizeof *ord.perm));
        cm_big_free(ord.pages, ord.bytes);
        ord = (korder){0};
    }
    size_t given = 0, ready = 0;
    for (size_t i = 0; i < k->n_rec && rc == 0; i++) {
        if (i >= ready)
            ready = kperm_wait(&pm, i + 1);
        tp_record r;
        kt_rec_out(k, &k->rec[i], &r);
        rc = em_add(&o, &r, i + 1 < k->n_rec);
        if ((i + 1) % REC_GIVE_BACK == 0)
            rec_give_back(k, ord.perm, i + 1, &given);
    }
    kperm_end(&pm);
    if (ord.perm != NULL)
        kt_held(k, -(int64_t)((k->n_rec - given) * sizeof *ord.perm));
    cm_big_free(ord.pages, ord.bytes);
    if (rc == 0)
        rc = em_end(&o);
    em_out_free(&o);
    st->importer_peak_bytes = k->held_peak;
    return rc;
}
