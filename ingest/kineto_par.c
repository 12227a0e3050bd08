/*
 * The Kineto importer on several threads (kineto_int.h's kt_par_parse). traceEvents is most of a
 * trace, and its entries can be read apart: the text is cut into pieces where an entry seems to
 * end ('}', a comma, '{'), each piece is scanned on a worker thread from the state between two
 * entries of traceEvents, and its entries are kept in few bytes (kcap). The importer's
 * own parser then takes the pieces in order: when it is itself between two entries at the start of
 * a piece, and the worker's scan of it ended between two entries with nothing unusual on the way,
 * the kept entries are made records exactly as if the parser had read them (names interned, limits
 * and messages in the same order); otherwise (the start of the text, a cut inside a string, the end
 * of traceEvents, an error, a cut string) the parser scans the piece itself. Whatever the pieces
 * are, the result is that of one thread reading the text. The pieces in flight are bounded, so a
 * stream (gzip, a pipe) is never held whole.
 *
 * This module owns the pieces, the workers' parsers and the threads; kineto.c the parser.
 */
#include "cores.h"
#include "grow.h"
#include "json_lex.h"
#include "json_src.h"
#include "kineto_int.h"

#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Names and other text of the entries a worker keeps that are not in its piece's text (decoded
 * escapes, the copies the scanner made): blocks that never move, reused from piece to piece. */
typedef struct karena_blk {
    struct karena_blk *next;
    size_t used, cap;
    char data[];
} karena_blk;

/* An entry a worker kept, in few bytes (a kev is about 370): its fixed part here; its numbers, in
 * the order of their H_* bits, then what its flags say it has (KC_*), in kpiece.vals from vals on;
 * its texts in the piece's text or its arena. Fields of a kev that it had not read are not kept:
 * the parser reads none of them (its own kev keeps them from earlier entries, a worker's from
 * others). */
typedef struct kcap {
    uint32_t at;   /* offset of its end in the piece's text */
    uint32_t have; /* H_* */
    uint32_t vals; /* its first value in kpiece.vals */
    uint32_t name_len;
    const char *name_s;
    int8_t cat; /* -1: not an object */
    char ph;
    uint8_t ph_len; /* up to 2: only whether it is 1 matters */
    uint8_t cat_len;
    uint8_t flags; /* KC_* */
} kcap;

enum {
    KC_SYNC = 2, /* a value: sync_kind (0 when absent) */
    KC_DIMS = 4, /* values: n_grid | n_block << 8, then grid[i] | block[i] << 32 for i 0..2 */
    KC_CAT = 8,  /* a value: where the category's text (cat_len bytes) is */
};

/* The numbers of a kev that its have bits say it read, by bit (H_MNAME's is a text). */
#define KC_NUMS                                                                                                    \
    (H_PID | H_TID | H_TS | H_DUR | H_DEVICE | H_STREAM | H_CORR | H_CBID | H_BYTES | H_CONTEXT | H_EVENT |     \
     H_FROM_DEV | H_TO_DEV | H_GRAPH)
static const uint16_t k_num_at[15] = {
    offsetof(kev, pid),    offsetof(kev, tid),     offsetof(kev, ts),    offsetof(kev, dur),
    offsetof(kev, device), offsetof(kev, stream),  offsetof(kev, corr),  offsetof(kev, cbid),
    offsetof(kev, bytes),  offsetof(kev, context), offsetof(kev, event), 0,
    offsetof(kev, from_dev), offsetof(kev, to_dev), offsetof(kev, graph),
};
/* The most values an entry keeps: 14 numbers, sync_kind, 4 of dims, the category, three texts of
 * two and the stack's key and id. */
#define KC_MAX_VALS 28

typedef struct kpiece {
    uint8_t *buf; /* JSRC_HEAD bytes of room, the text, JSRC_PAD bytes */
    size_t len;
    uint64_t base; /* offset of the text in the whole */
    uint64_t done; /* input bytes taken when its last byte was read (progress) */
    int spec;      /* it starts where an entry seemed to end: a worker scans it */
    int direct;    /* its text is still in the input (kpar.mem or kpar.fd) at base */
    int io_err;    /* reading it from there failed (a negative code) */
    int state;     /* P_*, the importer's thread's to read and write */
    int scanned;   /* a worker has scanned it (under kpar.mu) */
    /* the worker's scan: the entries kept (at: offset of each one's end in the text), and how it
     * ended: ok when between two entries with nothing unusual on the way */
    int ok;
    kcap *ents;
    size_t n, cap;
    uint64_t *vals; /* the entries' numbers and texts (see kcap) */
    size_t n_vals, cap_vals;
    const char *cat_last; /* the last category text put in the arena, and its length */
    uint8_t cat_last_len;
    karena_blk *arena, *cur;
    uint64_t nl, line_at, line_prev, drop, drop_prev;
    int key;
} kpiece;

enum { P_FREE, P_FILLING, P_SEQ, P_QUEUED };

typedef struct kpar {
    kimp *k;
    size_t piece; /* bytes of text a piece is cut at, at least */
    size_t buf_bytes;
    int n_pieces;
    kpiece *pieces;
    int *order, o_head, o_n; /* the pieces filled, in text order */
    kpiece *filling;
    size_t fill;      /* bytes a piece is filled to before it is cut (from a stream), */
    size_t dfill;     /* or looked at (read directly) */
    int slot;         /* the source's slot being read into pieces, -1 none, */
    size_t slot_at;   /* and how much of it was read */
    uint64_t next_base;
    int eof;         /* no more pieces: the text ended, or its source failed */
    int src_rc;      /* the source failed after the text handed out (its message in src_err): */
    err_msg src_err; /* the pieces before are scanned first, as one thread would */

    /* plain text in memory or a regular file is read by whoever scans a piece: the importer's
     * thread only looks for the places to cut it */
    int direct, fd, cut_ok; /* cut_ok: the last piece was cut where an entry seemed to end */
    const uint8_t *mem;
    uint64_t total;
    uint8_t *view; /* the text around a cut, read from the file */

    /* the state between two entries of traceEvents that the workers start from */
    int on, sp, depth;
    uint8_t stack[8], ystk[8];

    int n_workers;
    kimp *wk[KT_MAX_THREADS];
    err_msg werr[KT_MAX_THREADS];
    import_stats wst[KT_MAX_THREADS];
    pthread_t th[KT_MAX_THREADS];
    int started, own; /* own: wk[0], the importer's thread's parser of pieces, is set up */
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    int *work, w_head, w_n; /* pieces for the workers, in order */
    int stop;
} kpar;

static const uint8_t k_empty[JSRC_PAD];

static int piece_read(kpar *par, kpiece *p, err_msg *err);

int import_threads(int asked) { return cm_threads(asked); }

int kt_threads(const import_opts *o) { return import_threads(o ? o->threads : 0); }

/* ---- what a worker keeps ---- */

static char *arena_put(kpiece *p, const char *s, size_t n) {
    karena_blk *b = p->cur;
    while (b && b->cap - b->used < n + 1)
        b = b->next;
    if (b == NULL) {
        size_t cap = n + 1 > (64u << 10) ? n + 1 : (64u << 10);
        b = malloc(sizeof *b + cap);
        if (b == NULL)
            return NULL;
        b->cap = cap;
        b->used = 0;
        b->next = p->arena;
        p->arena = b;
    }
    p->cur = b;
    char *d = b->data + b->used;
    memcpy(d, s, n);
    d[n] = '\0';
    b->used += n + 1;
    return d;
}

static void arena_reset(kpiece *p) {
    for (karena_blk *b = p->arena; b; b = b->next)
        b->used = 0;
    p->cur = p->arena;
}

/* A kbuf's text, put in the piece's arena, as two values at v: where and how long. v after them, or
 * NULL when out of memory. */
static uint64_t *keep_text(kpiece *p, uint64_t *v, const kbuf *in) {
    const char *d = in->len ? arena_put(p, in->s, in->len) : "";
    if (d == NULL)
        return NULL;
    v[0] = (uint64_t)(uintptr_t)d;
    v[1] = in->len;
    return v + 2;
}

/* Room in p for one more entry and its values. */
static int keep_room(kimp *k, kpiece *p) {
    if (CM_GROW(p->ents, p->cap, p->n + 1) != 0 || CM_GROW(p->vals, p->cap_vals, p->n_vals + KC_MAX_VALS) != 0)
        return kt_fail_nomem(k);
    return 1;
}

int kt_par_keep(kimp *k, const kev *e, int not_object) {
    kpiece *p = k->capt;
    if (!keep_room(k, p))
        return 0;
    kcap *c = &p->ents[p->n++];
    c->at = (uint32_t)(k->at - k->wbeg);
    c->vals = (uint32_t)p->n_vals;
    if (not_object) {
        c->cat = -1;
        return 1;
    }
    c->have = e->have;
    c->cat = (int8_t)e->cat;
    c->ph = e->ph;
    c->ph_len = e->ph_len > 2 ? 2 : (uint8_t)e->ph_len;
    c->cat_len = (uint8_t)e->cat_len;
    c->name_len = (uint32_t)e->name_len;
    c->name_s = e->in_window || !e->name_len ? e->name_s : arena_put(p, e->name_s, e->name_len);
    if (c->name_s == NULL)
        return kt_fail_nomem(k);
    /* the values written through a pointer of their own: p->n_vals, which a store to p->vals might
     * alias, is read and written once */
    uint64_t *v = p->vals + p->n_vals;
    uint8_t flags = 0;
    for (uint32_t m = e->have & KC_NUMS; m; m &= m - 1)
        *v++ = (uint64_t) * (const int64_t *)((const char *)e + k_num_at[__builtin_ctz(m)]);
    if (e->sync_kind) {
        flags |= KC_SYNC;
        *v++ = (uint64_t)e->sync_kind;
    }
    if (e->n_grid || e->n_block) {
        flags |= KC_DIMS;
        *v++ = (uint64_t)(uint8_t)e->n_grid | (uint64_t)(uint8_t)e->n_block << 8;
        for (int i = 0; i < 3; i++)
            *v++ = e->grid[i] | (uint64_t)e->block[i] << 32;
    }
    if (e->cat_len) { /* read only when the entry is counted as skipped; categories are few */
        if (p->cat_last == NULL || p->cat_last_len != e->cat_len || memcmp(p->cat_last, e->cat_text, e->cat_len) != 0) {
            if ((p->cat_last = arena_put(p, e->cat_text, e->cat_len)) == NULL)
                return kt_fail_nomem(k);
            p->cat_last_len = (uint8_t)e->cat_len;
        }
        flags |= KC_CAT;
        *v++ = (uint64_t)(uintptr_t)p->cat_last;
    }
    if (((e->have & H_MNAME) && (v = keep_text(p, v, &e->mname)) == NULL) ||
        ((e->have & H_STACK) && (v = keep_text(p, v, &e->stack)) == NULL) ||
        ((e->have & H_MODULE) && (v = keep_text(p, v, &e->module)) == NULL))
        return kt_fail_nomem(k);
    if (e->have & H_STACK) {
        *v++ = e->stack_key;
        *v++ = e->stack_id;
    }
    c->flags = flags;
    p->n_vals = (size_t)(v - p->vals);
    return 1;
}

/* The kev that a worker read as c, in e (its fields that c does not have are left as they are). */
static void cap_expand(const kpiece *p, const kcap *c, kev *e) {
    const uint64_t *v = p->vals + c->vals;
    e->have = c->have;
    e->ph = c->ph;
    e->ph_len = c->ph_len;
    e->cat = c->cat;
    e->name_s = c->name_s;
    e->name_len = c->name_len;
    e->in_window = 0;
    for (uint32_t m = c->have & KC_NUMS; m; m &= m - 1)
        *(int64_t *)((char *)e + k_num_at[__builtin_ctz(m)]) = (int64_t)*v++;
    e->sync_kind = c->flags & KC_SYNC ? (int64_t)*v++ : 0;
    e->dims = 0;
    if (c->flags & KC_DIMS) {
        e->n_grid = (int)(*v & 0xff);
        e->n_block = (int)(*v++ >> 8 & 0xff);
        for (int i = 0; i < 3; i++, v++) {
            e->grid[i] = (uint32_t)*v;
            e->block[i] = (uint32_t)(*v >> 32);
        }
    } else {
        e->n_grid = e->n_block = 0;
        memset(e->grid, 0, sizeof e->grid);
        memset(e->block, 0, sizeof e->block);
    }
    e->cat_len = c->cat_len;
    if (c->flags & KC_CAT)
        memcpy(e->cat_text, (const char *)(uintptr_t)*v++, c->cat_len);
    e->mname = e->stack = e->module = (kbuf){(char *)"", 0, 0};
    if (c->have & H_MNAME) {
        e->mname = (kbuf){(char *)(uintptr_t)v[0], (size_t)v[1], 0};
        v += 2;
    }
    if (c->have & H_STACK) {
        e->stack = (kbuf){(char *)(uintptr_t)v[0], (size_t)v[1], 0};
        v += 2;
    }
    if (c->have & H_MODULE) {
        e->module = (kbuf){(char *)(uintptr_t)v[0], (size_t)v[1], 0};
        v += 2;
    }
    e->stack_id = 0;
    if (c->have & H_STACK) {
        e->stack_key = v[0];
        e->stack_id = (uint32_t)v[1];
    }
}

/* ---- the workers ---- */

/* Scans piece p with worker w from the state between two entries of traceEvents. */
static void piece_scan(kpar *par, kimp *w, kpiece *p) {
    p->n = p->n_vals = 0;
    p->ok = 0;
    if (piece_read(par, p, w->err) != 0)
        return;
    arena_reset(p);
    p->cat_last = NULL;
    w->capt = p;
    w->capt_sp = par->sp;
    w->sp = par->sp;
    memcpy(w->stack, par->stack, sizeof w->stack);
    w->depth = (uint16_t)par->depth;
    memcpy(w->ystk, par->ystk, (size_t)par->depth);
    for (int i = 0; i < par->sp; i++)
        w->pnext[i] = w->pred[w->stack[i]];
    w->pcur = w->pred[C_EVENTS];
    w->ys = Y_ARR_GOT;
    w->skip = 0;
    w->key = K_NONE;
    w->tail = w->lnum = 0;
    w->nv = NULL;
    w->nl = w->line_at = w->line_prev = w->drop = w->drop_prev = 0;
    w->cuts = 0;
    w->fail = 0;
    w->feed0 = par->k->feed0;
    w->cut_close = 0;
    uint8_t *t = p->buf + JSRC_HEAD;
    t[p->len] = 0;
    w->wbeg = w->wpos = w->at = t;
    w->wend = t + p->len;
    w->wbase = p->base;
    int rc = kt_scan(w, 0);
    p->ok = rc == S_MORE && !w->fail && w->wpos == w->wend && w->ys == Y_ARR_GOT && w->sp == par->sp && !w->skip &&
            w->depth == par->depth && !w->tail && !w->lnum && !w->cuts;
    p->nl = w->nl;
    p->line_at = w->line_at;
    p->line_prev = w->line_prev;
    p->drop = w->drop;
    p->drop_prev = w->drop_prev;
    p->key = w->key;
    w->capt = NULL;
}

typedef struct kworker {
    kpar *par;
    int id;
} kworker;

static void *worker_main(void *arg) {
    kpar *par = ((kworker *)arg)->par;
    kimp *w = par->wk[((kworker *)arg)->id];
    free(arg);
    pthread_mutex_lock(&par->mu);
    for (;;) {
        while (!par->stop && par->w_n == 0)
            pthread_cond_wait(&par->cv_work, &par->mu);
        if (par->stop)
            break;
        kpiece *p = &par->pieces[par->work[par->w_head]];
        par->w_head = (par->w_head + 1) % par->n_pieces;
        par->w_n--;
        pthread_mutex_unlock(&par->mu);
        piece_scan(par, w, p);
        pthread_mutex_lock(&par->mu);
        p->scanned = 1;
        pthread_cond_broadcast(&par->cv_done);
    }
    pthread_mutex_unlock(&par->mu);
    return NULL;
}

/* The parsers of n threads: the importer's own (wk[0], which scans the piece it waits for when no
 * worker has taken it yet) and n - 1 workers. 0 when not even the first could be made. */
static int workers_start(kpar *par, int n) {
    kimp *k = par->k;
    if (pthread_mutex_init(&par->mu, NULL) != 0)
        return 0;
    pthread_cond_init(&par->cv_work, NULL);
    pthread_cond_init(&par->cv_done, NULL);
    par->started = 1;
    for (int i = 0; i < n; i++) {
        kimp *w = calloc(1, sizeof *w);
        if (w == NULL)
            break;
        w->name = k->name;
        w->opts = k->opts;
        w->err = &par->werr[i];
        w->st = &par->wst[i];
        w->max_events = k->max_events;
        w->name_key = k->name_key;
        par->wk[i] = w;
        kworker *a = i > 0 ? malloc(sizeof *a) : NULL;
        if (kt_setup(w) != 0 || (i > 0 && a == NULL)) {
            free(a);
            break;
        }
        if (i == 0) {
            par->own = 1;
            continue;
        }
        *a = (kworker){par, i};
        if (pthread_create(&par->th[par->n_workers], NULL, worker_main, a) != 0) {
            free(a);
            break;
        }
        par->n_workers++;
    }
    return par->own;
}

static void workers_stop(kpar *par) {
    if (!par->started)
        return;
    pthread_mutex_lock(&par->mu);
    par->stop = 1;
    pthread_cond_broadcast(&par->cv_work);
    pthread_mutex_unlock(&par->mu);
    for (int i = 0; i < par->n_workers; i++)
        pthread_join(par->th[i], NULL);
    for (int i = 0; i < KT_MAX_THREADS; i++) {
        if (par->wk[i]) {
            kt_release(par->wk[i]);
            free(par->wk[i]);
        }
    }
    pthread_cond_destroy(&par->cv_work);
    pthread_cond_destroy(&par->cv_done);
    pthread_mutex_destroy(&par->mu);
}

/* ---- cutting the text into pieces ---- */

#define CUT_NEAR 4096 /* bytes past a piece's length where its cut is looked for first */

static int is_blank(uint8_t c) {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f';
}

/* Whether the comma at t[at] (of t[0, n)) seems to end an entry and begin the next: '}' before it
 * and '{' after it, blanks between. The piece that starts there is checked by whoever scans it: a
 * comma inside a string only makes it scanned twice. */
static int boundary_at(const uint8_t *t, size_t n, size_t at) {
    size_t a = at + 1, b = at;
    while (a < n && is_blank(t[a]))
        a++;
    while (b > 0 && is_blank(t[b - 1]))
        b--;
    return a < n && t[a] == '{' && b > 0 && t[b - 1] == '}';
}

/* Where to cut t[0, n) into a piece: the first such comma at or after from, else the last one
 * before it; 0 when there is none. */
static size_t boundary_find(const uint8_t *t, size_t n, size_t from) {
    for (const uint8_t *c = t + from; from < n && (c = memchr(c, ',', (size_t)(t + n - c))) != NULL; c++)
        if (boundary_at(t, n, (size_t)(c - t)))
            return (size_t)(c - t);
    for (size_t end = from < n ? from : n; end > 0;) {
        const uint8_t *c = memrchr(t, ',', end);
        if (c == NULL)
            return 0;
        end = (size_t)(c - t);
        if (boundary_at(t, n, end))
            return end;
    }
    return 0;
}

static kpiece *piece_take(kpar *par) {
    for (int i = 0; i < par->n_pieces; i++) {
        kpiece *p = &par->pieces[i];
        if (p->state != P_FREE)
            continue;
        if (p->buf == NULL && (p->buf = cm_big_alloc(par->buf_bytes)) == NULL)
            return NULL;
        p->len = 0;
        p->spec = 0;
        p->state = P_FILLING;
        return p;
    }
    return NULL;
}

/* Piece p, the next len bytes of the text, handed on in *out. */
static int piece_out(kpar *par, kpiece *p, size_t len, kpiece **out) {
    p->base = par->next_base;
    p->len = len;
    p->state = P_SEQ;
    par->next_base += len;
    *out = p;
    return 1;
}

/* Fills piece p with text from the source up to lim bytes, or to the end of the text: where the
 * source ends or fails (the failure kept in par->src_rc and src_err, to be said once the text
 * before it is scanned, as one thread would). */
static void piece_fill_to(kpar *par, jsrc *s, kpiece *p, size_t lim) {
    uint8_t *t = p->buf + JSRC_HEAD;
    while (p->len < lim && !par->eof) {
        if (par->slot < 0) {
            int rc = jsrc_next(s, &par->slot, par->k->err);
            if (rc <= 0) {
                if (rc < 0) {
                    par->src_rc = rc;
                    par->src_err = *par->k->err;
                }
                par->slot = -1;
                par->eof = 1;
                break;
            }
            par->slot_at = 0;
        }
        int i = par->slot;
        size_t n = s->len[i] - par->slot_at;
        if (n > lim - p->len)
            n = lim - p->len;
        memcpy(t + p->len, s->slot[i] + JSRC_HEAD + par->slot_at, n);
        p->len += n;
        par->slot_at += n;
        p->done = s->done[i];
        if (par->slot_at == s->len[i]) {
            jsrc_release(s, i);
            par->slot = -1;
        }
    }
}

/* Fills the piece being filled with text from the source past par->piece bytes, and cuts it where
 * an entry seems to end: the rest begins the next piece. The first CUT_NEAR bytes past par->piece
 * mostly hold the place, and the rest is copied to the next piece, so the slack is read only when
 * they do not. 1 with a piece in *out, 0 at the end of the text, or a negative code. */
static int piece_fill(kpar *par, jsrc *s, kpiece **out) {
    kimp *k = par->k;
    kpiece *p = par->filling;
    if (p == NULL)
        return 0;
    uint8_t *t = p->buf + JSRC_HEAD;
    piece_fill_to(par, s, p, par->piece + CUT_NEAR < par->fill ? par->piece + CUT_NEAR : par->fill);
    size_t cut = 0;
    if (!(par->eof && p->len <= par->piece) && (cut = boundary_find(t, p->len, par->piece)) == 0 &&
        p->len < par->fill && !par->eof) {
        piece_fill_to(par, s, p, par->fill);
        cut = boundary_find(t, p->len, par->piece);
    }
    par->filling = NULL;
    if (p->len == 0) {
        p->state = P_FREE;
        return 0;
    }
    if (cut > 0) {
        kpiece *next = piece_take(par);
        if (next == NULL)
            return err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
        memcpy(next->buf + JSRC_HEAD, t + cut, p->len - cut);
        next->len = p->len - cut;
        next->done = p->done;
        next->spec = 1;
        p->len = cut;
        par->filling = next;
    } else if (!par->eof && (par->filling = piece_take(par)) == NULL) {
        return err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
    }
    if (par->filling)
        par->filling->base = par->next_base + p->len;
    return piece_out(par, p, p->len, out);
}

/* The bytes [off, off + n) of plain text read directly: 0, or a negative code with a message. */
static int direct_read(kpar *par, uint64_t off, uint8_t *dst, size_t n, err_msg *err) {
    if (par->fd < 0) {
        memcpy(dst, par->mem + off, n);
        return 0;
    }
    while (n > 0) {
        ssize_t r = pread(par->fd, dst, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return err_set(err, r < 0 ? ERR_IO : ERR_TRUNCATED, "%s: read: %s", par->k->name,
                           r < 0 ? strerror(errno) : "the file got shorter while it was read");
        dst += r;
        off += (uint64_t)r;
        n -= (size_t)r;
    }
    return 0;
}

/* A piece's text in its buffer, read from the input the first time. */
static int piece_read(kpar *par, kpiece *p, err_msg *err) {
    if (!p->direct && !p->io_err)
        return 0;
    p->direct = 0;
    return p->io_err = direct_read(par, p->base, p->buf + JSRC_HEAD, p->len, err);
}

/* The next piece of plain text read directly: cut at the first place past par->piece bytes where
 * an entry seems to end, looked for in the slack after them (and a little before). Where that text
 * cannot be read, the pieces end there, the failure kept to be said once those before are scanned
 * (par->src_rc, as a stream's). */
static int piece_fill_direct(kpar *par, kpiece **out) {
    kimp *k = par->k;
    uint64_t pos = par->next_base;
    if (pos >= par->total || par->eof)
        return 0;
    kpiece *p = piece_take(par);
    if (p == NULL)
        return err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
    uint64_t cut = par->total, left = par->total - pos;
    int cut_ok = 0;
    if (left > par->piece) {
        size_t before = par->piece < 256 ? par->piece : 256;
        uint64_t v0 = pos + par->piece - before;
        size_t vn = (size_t)((left < par->dfill ? left : par->dfill) - par->piece) + before;
        const uint8_t *v = par->view;
        size_t at = 0;
        if (par->fd >= 0) { /* the first few KiB mostly hold the place */
            size_t n = vn < CUT_NEAR + before ? vn : CUT_NEAR + before;
            int rc = direct_read(par, v0, par->view, n, k->err);
            if (rc == 0 && (at = boundary_find(par->view, n, before)) == 0 && n < vn)
                rc = direct_read(par, v0, par->view, vn, k->err);
            if (rc < 0) {
                p->state = P_FREE;
                par->src_rc = rc;
                par->src_err = *k->err;
                par->eof = 1;
                return 0;
            }
        } else {
            v = par->mem + v0;
        }
        if (at == 0)
            at = boundary_find(v, vn, before);
        if (at != 0) {
            cut = v0 + at;
            cut_ok = 1;
        } else if (left > par->dfill) {
            cut = pos + par->dfill;
        }
    }
    p->done = cut;
    p->spec = par->cut_ok;
    p->direct = 1;
    p->io_err = 0;
    par->cut_ok = cut_ok;
    return piece_out(par, p, (size_t)(cut - pos), out);
}

/* ---- taking the pieces in order ---- */

/* Whether k is between two entries of traceEvents, with nothing of the last piece left to scan. */
static int at_boundary(const kimp *k) {
    return k->ys == Y_ARR_GOT && k->sp < 8 && k->stack[k->sp] == C_EVENTS && k->depth < 8 && !k->skip &&
           k->wpos == k->wend && !k->tail && !k->lnum && !k->fail;
}

static int at_par_boundary(const kimp *k, const kpar *par) {
    return at_boundary(k) && k->sp == par->sp && k->depth == par->depth &&
           memcmp(k->stack, par->stack, (size_t)par->sp + 1) == 0 && memcmp(k->ystk, par->ystk, (size_t)par->depth) == 0;
}

/* The entries a worker kept of piece p, made records as k would have made them. */
static int piece_replay(kimp *k, kpiece *p) {
    uint64_t nl = k->nl, line_at = k->line_at, line_prev = k->line_prev, drop = k->drop, drop_prev = k->drop_prev;
    const uint8_t *t = p->buf + JSRC_HEAD;
    k->wbeg = k->wpos = t;
    k->wend = t + p->len;
    k->wbase = p->base;
    k->rp_text = t;
    k->rp_base = k->rp_lines = p->base;
    int ok = 1;
    kev e;
    memset(&e, 0, sizeof e);
    for (size_t i = 0; i < p->n && ok; i++) {
        const kcap *c = &p->ents[i];
        k->at = t + c->at;
        if (c->cat < 0) {
            k->st->entries++;
            kt_count_skip(k, "(not an object)", strlen("(not an object)"));
        } else {
            cap_expand(p, c, &e);
            ok = kt_event_end(k, &e);
        }
    }
    k->rp_text = NULL;
    if (!ok)
        return k->fail ? k->fail : ERR_MALFORMED;
    k->nl = nl + p->nl;
    k->line_at = p->nl >= 1 ? p->line_at : line_at;
    k->drop = p->nl >= 1 ? p->drop : drop;
    k->line_prev = p->nl >= 2 ? p->line_prev : p->nl == 1 ? line_at : line_prev;
    k->drop_prev = p->nl >= 2 ? p->drop_prev : p->nl == 1 ? drop : drop_prev;
    k->key = p->key;
    k->wbeg = k->wpos = k->wend = k->at = k_empty;
    k->wbase = p->base + p->len;
    return 0;
}

static void piece_free(const kpar *par, kpiece *p) {
    cm_big_free(p->buf, par->buf_bytes);
    free(p->ents);
    free(p->vals);
    for (karena_blk *b = p->arena, *n; b; b = n) {
        n = b->next;
        free(b);
    }
}

/* Hands the pieces filled and not yet given to a worker to the workers. */
static void work_submit(kpar *par) {
    pthread_mutex_lock(&par->mu);
    for (int j = 0; j < par->o_n; j++) {
        int i = par->order[(par->o_head + j) % par->n_pieces];
        kpiece *p = &par->pieces[i];
        if (p->state == P_SEQ && p->spec) {
            p->state = P_QUEUED;
            p->scanned = 0;
            par->work[(par->w_head + par->w_n++) % par->n_pieces] = i;
        }
    }
    pthread_cond_broadcast(&par->cv_work);
    pthread_mutex_unlock(&par->mu);
}

int kt_par_parse(kimp *k, jsrc *s, int threads, size_t piece) {
    kpar *par = calloc(1, sizeof *par);
    if (par == NULL)
        return err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
    const import_opts *o = k->opts;
    par->k = k;
    par->piece = piece;
    /* a piece is cut at the first place an entry seems to end past piece bytes, in the slack
     * read after them */
    size_t slack = piece < 4096 ? 4096 : piece > JSRC_CHUNK ? JSRC_CHUNK : piece;
    par->fill = piece + slack;
    par->slot = -1;
    par->dfill = piece + JSRC_CHUNK;
    par->buf_bytes = JSRC_HEAD + par->dfill + JSRC_PAD;
    par->fd = -1;
    if (!s->gz && s->fd < 0) {
        par->direct = 1;
        par->mem = s->mem;
        par->total = s->mem_len;
    } else if (!s->gz && s->regular && (uint64_t)s->fd_at == s->head_len && s->fd_size == s->total) {
        par->direct = 1;
        par->fd = s->fd;
        par->total = s->fd_size;
    }
    par->n_pieces = 2 * threads + 3;
    par->pieces = calloc((size_t)par->n_pieces, sizeof *par->pieces);
    par->order = calloc(2 * (size_t)par->n_pieces, sizeof *par->order);
    par->work = par->order ? par->order + par->n_pieces : NULL; /* one allocation */
    int rc = 0;
    if (par->pieces == NULL || par->order == NULL || par->work == NULL ||
        (par->direct ? par->fd >= 0 && (par->view = malloc(par->dfill)) == NULL : (par->filling = piece_take(par)) == NULL))
        rc = err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
    kpiece *held = NULL; /* the piece the window's carry lies in */
    while (rc >= 0) {
        /* pieces ahead for the workers, as many as the pool allows; one at a time before them */
        int ahead = par->on ? par->n_pieces - 2 : 1;
        int added = 0;
        while (par->o_n < ahead) {
            kpiece *p = NULL;
            rc = par->direct ? piece_fill_direct(par, &p) : piece_fill(par, s, &p);
            if (rc <= 0)
                break;
            par->order[(par->o_head + par->o_n++) % par->n_pieces] = (int)(p - par->pieces);
            added = 1;
        }
        if (rc < 0)
            break;
        rc = 0;
        if (added && par->on)
            work_submit(par);
        if (par->o_n == 0)
            break;
        kpiece *p = &par->pieces[par->order[par->o_head]];
        par->o_head = (par->o_head + 1) % par->n_pieces;
        par->o_n--;
        if (p->state == P_QUEUED) {
            pthread_mutex_lock(&par->mu);
            while (!p->scanned) {
                if (par->w_n > 0) { /* a piece no worker took yet: this one, or one after it */
                    kpiece *q = &par->pieces[par->work[par->w_head]];
                    par->w_head = (par->w_head + 1) % par->n_pieces;
                    par->w_n--;
                    if (q == p) { /* scanned here as one thread scans, with nothing kept to replay */
                        p->ok = 0;
                        p->scanned = 1;
                        break;
                    }
                    pthread_mutex_unlock(&par->mu);
                    piece_scan(par, par->wk[0], q);
                    pthread_mutex_lock(&par->mu);
                    q->scanned = 1;
                    continue;
                }
                pthread_cond_wait(&par->cv_done, &par->mu);
            }
            pthread_mutex_unlock(&par->mu);
        }
        int replayed = 0;
        if (p->state == P_QUEUED && p->ok && at_par_boundary(k, par)) {
            rc = piece_replay(k, p);
            replayed = 1;
        } else if ((rc = piece_read(par, p, k->err)) == 0) {
            rc = kt_scan_piece(k, p->buf + JSRC_HEAD, p->len);
        }
        if (held)
            held->state = P_FREE;
        held = NULL;
        if (replayed)
            p->state = P_FREE;
        else
            held = p;
        if (rc < 0)
            break;
        if (!par->on && at_boundary(k) && k->sp < 8 && k->depth < 8) {
            par->sp = k->sp;
            par->depth = k->depth;
            memcpy(par->stack, k->stack, sizeof par->stack);
            memcpy(par->ystk, k->ystk, (size_t)k->depth);
            par->on = workers_start(par, threads);
        }
        if (o && o->progress && o->progress(o->progress_ctx, p->done, s->total) != 0) {
            rc = err_set(k->err, ERR_EOF, "%s: import cancelled", k->name);
            break;
        }
    }
    if (rc >= 0 && par->src_rc < 0) {
        rc = par->src_rc;
        *k->err = par->src_err;
    }
    if (rc >= 0)
        rc = kt_scan(k, 1);
    if (par->direct && rc >= 0)
        s->read_bytes = par->total;
    /* the window's text goes with the pieces; where it ended stays */
    uint64_t end = off_of(k, k->wend);
    k->wbeg = k->wpos = k->wend = k->at = k_empty;
    k->wbase = end;
    workers_stop(par);
    if (par->pieces)
        for (int i = 0; i < par->n_pieces; i++)
            piece_free(par, &par->pieces[i]);
    free(par->pieces);
    free(par->order);
    free(par->view);
    free(par);
    return rc;
}
