/*
 * The trace-file summary behind `synctop info` (traceinfo.h): one pass over every batch through
 * the reader and the decoder, gathering counts, sequence gaps, drop counters and the latest of each
 * metadata record per producer.
 */
#include "traceinfo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "synctop/file.h"

#define TI_MAX_PROBLEMS 10000
#define TI_MAX_PRODUCERS 65536

static void ti_problem_add(traceinfo *ti, uint64_t off, uint64_t len, const char *what) {
    if (ti->n_probs >= TI_MAX_PROBLEMS)
        return;
    ti_problem *p = realloc(ti->probs, (ti->n_probs + 1) * sizeof *p);
    if (p == NULL)
        return;
    ti->probs = p;
    p += ti->n_probs++;
    p->offset = off;
    p->length = len;
    snprintf(p->what, sizeof p->what, "%s", what);
}

/* A file holds a few producers; a hostile one with many costs a map entry and a producer record
 * each (string tables grow with their ids), up to TI_MAX_PRODUCERS. NULL past that, or out of memory
 * (*nomem set). */
static ti_producer *ti_producer_get(traceinfo *ti, uint64_t id, int *nomem) {
    *nomem = 0;
    uint64_t *slot = cm_u64map_find(&ti->prod_index, id);
    if (slot != NULL)
        return &ti->prods[*slot - 1];
    if (ti->n_prods >= TI_MAX_PRODUCERS)
        return NULL;
    if (CM_GROW(ti->prods, ti->cap_prods, ti->n_prods + 1) ||
        cm_u64map_put(&ti->prod_index, id, ti->n_prods + 1) != 0) {
        *nomem = 1;
        return NULL;
    }
    ti_producer *p = &ti->prods[ti->n_prods];
    memset(p, 0, sizeof *p);
    p->id = id;
    if ((p->strings = tp_strtab_new()) == NULL) {
        *nomem = 1;
        return NULL;
    }
    ti->n_prods++;
    return p;
}

static int ti_meta_add(ti_producer *p, const tp_record *r) {
    if (p->n_meta == p->cap_meta) {
        size_t cap = p->cap_meta ? p->cap_meta * 2 : 4;
        tp_record *m = realloc(p->meta, cap * sizeof *m);
        if (m == NULL)
            return ERR_NOMEM;
        p->meta = m;
        p->cap_meta = cap;
    }
    memset(&p->meta[p->n_meta], 0, sizeof *p->meta);
    memcpy(&p->meta[p->n_meta++], r, tp_kind_size(r->head.kind));
    return 0;
}

typedef struct keyed {
    uint64_t k1, k2;
    size_t order;
} keyed;

static int cmp_keyed(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    if (x->k1 != y->k1)
        return x->k1 < y->k1 ? -1 : 1;
    if (x->k2 != y->k2)
        return x->k2 < y->k2 ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Keeps the last record of each key, in key order. */
static int ti_meta_settle(ti_producer *p) {
    if (p->n_meta == 0)
        return 0;
    keyed *k = malloc(p->n_meta * sizeof *k);
    tp_record *out = malloc(p->n_meta * sizeof *out);
    if (k == NULL || out == NULL) {
        free(k);
        free(out);
        return ERR_NOMEM;
    }
    for (size_t i = 0; i < p->n_meta; i++) {
        tp_fmeta_key(&p->meta[i], &k[i].k1, &k[i].k2);
        k[i].order = i;
    }
    qsort(k, p->n_meta, sizeof *k, cmp_keyed);
    size_t n = 0;
    for (size_t i = 0; i < p->n_meta; i++)
        if (i + 1 == p->n_meta || k[i + 1].k1 != k[i].k1 || k[i + 1].k2 != k[i].k2)
            out[n++] = p->meta[k[i].order];
    free(k);
    free(p->meta);
    p->meta = out;
    p->n_meta = p->cap_meta = n;
    return 0;
}

/* Counts a batch from its index entry: a damaged batch is in the file, so its sequence number
 * is no gap (the damage is listed among the problems instead). */
static ti_producer *ti_count(traceinfo *ti, const tp_findex_entry *e, int *nomem) {
    ti_producer *p = ti_producer_get(ti, e->producer, nomem);
    if (p == NULL) {
        if (!*nomem)
            ti->batches_beyond++;
        return NULL;
    }
    ti->stored_bytes += e->size;
    if (e->flags & TP_BF_SYNTHETIC) {
        ti->keyframes++;
        p->keyframes++;
        return p;
    }
    ti->batches++;
    p->batches++;
    if (!p->seq_known) {
        p->seq_known = 1;
        p->first_seq = e->seq;
    } else if (e->seq > p->last_seq) {
        p->missed += e->seq - p->last_seq - 1;
    } else {
        p->restarts++; /* the same id started over, or a batch came twice */
    }
    p->last_seq = e->seq;
    if (e->flags & TP_BF_END)
        p->ended = 1;
    return p;
}

/* A recorder's notes (TP_PRODUCER_NOTES): the hosts' clocks it measured, the last word on a host
 * winning, and what it received and could not write. */
static void ti_notes(traceinfo *ti, tp_dec *d) {
    const tp_record *r;
    char host[sizeof ti->hostclocks[0].host];
    while ((r = tp_dec_next_record(d)) != NULL) {
        if (r->head.kind == TP_K_DROPS && r->drops.source == TP_DROP_RECORDER) {
            ti->unwritten_batches += r->drops.batches;
            ti->unwritten_events += r->drops.records;
            continue;
        }
        if (r->head.kind != TP_K_HOSTCLOCK || tp_dec_string_copy(d, r->hostclock.host, host, sizeof host) < 0)
            continue;
        size_t h = 0;
        while (h < ti->n_hostclocks && strcmp(ti->hostclocks[h].host, host) != 0)
            h++;
        if (h == TI_MAX_HOSTCLOCKS)
            continue;
        if (h == ti->n_hostclocks)
            ti->n_hostclocks++;
        ti_hostclock *c = &ti->hostclocks[h];
        memcpy(c->host, host, sizeof c->host);
        c->offset_ns = r->hostclock.offset_ns;
        c->uncertainty_ns = r->hostclock.uncertainty_ns;
    }
}

static int ti_batch(traceinfo *ti, const tp_findex_entry *e, tp_dec *d) {
    if ((e->flags & TP_BF_SYNTHETIC) && e->producer == TP_PRODUCER_NOTES) {
        ti->stored_bytes += e->size;
        ti->raw_bytes += TP_BATCH_HDR_SIZE + (uint64_t)d->hdr.raw_size;
        ti_notes(ti, d);
        return 0;
    }
    int nomem;
    ti_producer *p = ti_count(ti, e, &nomem);
    if (p == NULL)
        return nomem ? ERR_NOMEM : 0;
    int synthetic = (e->flags & TP_BF_SYNTHETIC) != 0;
    ti->raw_bytes += TP_BATCH_HDR_SIZE + (uint64_t)d->hdr.raw_size;
    int rc = tp_dec_load_strings(d, p->strings);
    if (rc)
        return rc;
    const tp_record *r;
    while ((r = tp_dec_next_record(d)) != NULL) {
        unsigned k = r->head.kind;
        if (TP_KIND_IS_META(k)) {
            if ((rc = ti_meta_add(p, r)) != 0)
                return rc;
            continue;
        }
        if (synthetic)
            continue; /* keyframes hold no events; a relayed one would repeat what is counted */
        ti->events++;
        p->events++;
        ti->per_kind[k]++;
        uint64_t s, t;
        tp_record_span(r, &s, &t);
        if (ti->events == 1 || s < ti->t_first)
            ti->t_first = s;
        if (t > ti->t_last)
            ti->t_last = t;
        if (k == TP_K_DROPS) {
            unsigned src = r->drops.source; /* checked by the decoder */
            p->drop_records[src] = r->drops.records;
            p->drop_batches[src] = r->drops.batches;
            p->drops_seen[src] = 1;
        }
    }
    return 0;
}

static int cmp_problem(const void *a, const void *b) {
    const ti_problem *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

int traceinfo_load(traceinfo *ti, const char *path, err_msg *err) {
    memset(ti, 0, sizeof *ti);
    tp_freader *r = tp_freader_open(path, err);
    if (r == NULL)
        return ERR_INVAL;
    ti->file_bytes = tp_freader_size(r);
    ti->created_ns = tp_freader_created(r);
    ti->complete = tp_freader_complete(r);
    ti->indexed = tp_freader_indexed(r);
    ti->index_blocks = tp_freader_index_blocks(r);
    tp_buf buf = {0};
    tp_dec d = {0};
    int rc = 0;
    size_t n = tp_freader_count(r);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const tp_findex_entry *e = tp_freader_entry(r, i);
        err_msg why;
        if (tp_freader_read(r, i, &buf, &why) != 0) {
            ti->unreadable++; /* the reader lists it among its problems */
        } else if (tp_dec_open(&d, buf.data, buf.len, &why) != 0) {
            ti->unreadable++;
            char what[sizeof why.msg + 32];
            snprintf(what, sizeof what, "undecodable batch: %s", why.msg);
            ti_problem_add(ti, e->offset, e->size, what);
        } else {
            rc = ti_batch(ti, e, &d);
            continue;
        }
        int nomem;
        if (ti_count(ti, e, &nomem) == NULL && nomem)
            rc = ERR_NOMEM;
    }
    for (size_t i = 0; i < ti->n_prods && rc == 0; i++)
        rc = ti_meta_settle(&ti->prods[i]);
    /* The reader's problems (from opening and from reading) come first, in its order. */
    size_t mine = ti->n_probs;
    ti_problem *own = ti->probs;
    ti->probs = NULL;
    ti->n_probs = 0;
    for (size_t i = 0; i < tp_freader_problem_count(r); i++) {
        const tp_fproblem *p = tp_freader_problem(r, i);
        ti_problem_add(ti, p->offset, p->length, p->what);
    }
    for (size_t i = 0; i < mine; i++)
        ti_problem_add(ti, own[i].offset, own[i].length, own[i].what);
    free(own);
    if (ti->n_probs > 1)
        qsort(ti->probs, ti->n_probs, sizeof *ti->probs, cmp_problem);
    tp_dec_free(&d);
    tp_buf_free(&buf);
    tp_freader_close(&r);
    if (rc) {
        traceinfo_free(ti);
        return err_set(err, rc, "%s: %s while reading it", path, err_str(rc));
    }
    return 0;
}

void traceinfo_free(traceinfo *ti) {
    for (size_t i = 0; i < ti->n_prods; i++) {
        tp_strtab_destroy(&ti->prods[i].strings);
        free(ti->prods[i].meta);
    }
    free(ti->prods);
    cm_u64map_free(&ti->prod_index);
    free(ti->probs);
    memset(ti, 0, sizeof *ti);
}

const char *traceinfo_string(const ti_producer *p, uint32_t id, uint32_t *len) {
    return id ? tp_strtab_get(p->strings, id, len) : NULL;
}
