/*
 * Ranks and their collectives (ranks.h).
 */
#include "ranks.h"

#include <stdlib.h>
#include <string.h>

#include "busy.h"
#include "grow.h"

void an_ranks_free(an_ranks *rk) {
    free(rk->ranks);
    free(rk->colls);
    memset(rk, 0, sizeof *rk);
}

static int is_nccl(const char *name) {
    return strncmp(name, "ncclKernel_", 11) == 0 || strncmp(name, "ncclDevKernel_", 14) == 0;
}

/* One NCCL kernel of one process: its collective's key and its ordinal under that key. The key's
 * stream is the place of the kernel's stream among its process's NCCL streams, by their first NCCL
 * kernel: each process numbers its streams its own way (7 in one, 15 in the other of a real
 * two-process export), but a communicator's first collective comes in the same order on each. */
typedef struct nccl_k {
    uint32_t producer, stream, name;
    size_t ordinal;
    uint64_t start, end;
    uint32_t id; /* the stream's own id */
} nccl_k;

/* A rank's end against its collective's median end. */
typedef struct end_d {
    uint32_t producer;
    int64_t d;
} end_d;

static int d_cmp(const void *a, const void *b) {
    const end_d *x = a, *y = b;
    if (x->producer != y->producer)
        return x->producer < y->producer ? -1 : 1;
    return x->d < y->d ? -1 : x->d > y->d;
}

static int i64_cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0, n) (sorted here), the mean of the middle two when n is even. */
static int64_t median_i64(int64_t *v, size_t n) {
    qsort(v, n, sizeof *v, i64_cmp);
    return n % 2 ? v[n / 2] : v[n / 2 - 1] / 2 + v[n / 2] / 2 + (v[n / 2 - 1] % 2 + v[n / 2] % 2) / 2;
}

int an_rank_clock_measured(const an_rank *rk) {
    uint64_t off = rk->clock_offset_ns < 0 ? (uint64_t)-rk->clock_offset_ns : (uint64_t)rk->clock_offset_ns;
    return rk->clock_n >= 3 && off > rk->clock_spread_ns;
}

/* Each rank's clock against the job's, from the ends of the collectives (k grouped by key). */
static int clock_offsets(nccl_k *k, size_t nk, an_ranks *out) {
    end_d *d = malloc((nk ? nk : 1) * sizeof *d);
    int64_t *tmp = malloc((nk ? nk : 1) * sizeof *tmp);
    if (d == NULL || tmp == NULL) {
        free(d);
        free(tmp);
        return ERR_NOMEM;
    }
    size_t nd = 0;
    for (size_t a = 0, b; a < nk; a = b) {
        for (b = a + 1; b < nk && k[b].stream == k[a].stream && k[b].name == k[a].name && k[b].ordinal == k[a].ordinal;
             b++)
            ;
        if (b - a < 2)
            continue;
        for (size_t i = a; i < b; i++)
            tmp[i - a] = (int64_t)k[i].end;
        int64_t mid = median_i64(tmp, b - a);
        for (size_t i = a; i < b; i++)
            d[nd++] = (end_d){k[i].producer, (int64_t)k[i].end - mid};
    }
    qsort(d, nd, sizeof *d, d_cmp);
    for (size_t a = 0, b; a < nd; a = b) {
        for (b = a + 1; b < nd && d[b].producer == d[a].producer; b++)
            ;
        an_rank *rk = &out->ranks[d[a].producer];
        for (size_t i = a; i < b; i++)
            tmp[i - a] = d[i].d;
        rk->clock_offset_ns = median_i64(tmp, b - a);
        for (size_t i = a; i < b; i++)
            tmp[i - a] = d[i].d > rk->clock_offset_ns ? d[i].d - rk->clock_offset_ns : rk->clock_offset_ns - d[i].d;
        rk->clock_spread_ns = (uint64_t)median_i64(tmp, b - a);
        rk->clock_n = b - a;
    }
    free(d);
    free(tmp);
    return 0;
}

static int k_cmp(const void *a, const void *b) {
    const nccl_k *x = a, *y = b;
    if (x->stream != y->stream)
        return x->stream < y->stream ? -1 : 1;
    if (x->name != y->name)
        return x->name < y->name ? -1 : 1;
    if (x->ordinal != y->ordinal)
        return x->ordinal < y->ordinal ? -1 : 1;
    if (x->producer != y->producer)
        return x->producer < y->producer ? -1 : 1;
    return 0;
}

static int by_start(const void *a, const void *b) {
    const nccl_k *x = a, *y = b;
    if (x->producer != y->producer)
        return x->producer < y->producer ? -1 : 1;
    if (x->stream != y->stream)
        return x->stream < y->stream ? -1 : 1;
    if (x->name != y->name)
        return x->name < y->name ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* A process's NCCL stream and the start of its first NCCL kernel. */
typedef struct sfirst {
    uint32_t producer, stream;
    uint64_t first;
} sfirst;

static int sfirst_cmp(const void *a, const void *b) {
    const sfirst *x = a, *y = b;
    if (x->producer != y->producer)
        return x->producer < y->producer ? -1 : 1;
    if (x->first != y->first)
        return x->first < y->first ? -1 : 1;
    return x->stream < y->stream ? -1 : x->stream > y->stream;
}

/* k (sorted by_start: process, stream, name, start) gets its streams' places for keys. */
static int stream_places(nccl_k *k, size_t nk) {
    size_t ns = 0;
    for (size_t i = 0; i < nk; i++)
        ns += i == 0 || k[i].producer != k[i - 1].producer || k[i].stream != k[i - 1].stream;
    sfirst *f = malloc(ns * sizeof *f);
    if (f == NULL)
        return -1;
    ns = 0;
    for (size_t i = 0; i < nk; i++) {
        if (i == 0 || k[i].producer != k[i - 1].producer || k[i].stream != k[i - 1].stream)
            f[ns++] = (sfirst){k[i].producer, k[i].stream, k[i].start};
        else if (k[i].start < f[ns - 1].first)
            f[ns - 1].first = k[i].start;
    }
    qsort(f, ns, sizeof *f, sfirst_cmp);
    /* a run of k is one process's stream: its place is its index among that process's entries of f */
    for (size_t a = 0, b, j = 0; a < nk; a = b) {
        uint32_t producer = k[a].producer, stream = k[a].stream, place = 0;
        for (b = a + 1; b < nk && k[b].producer == producer && k[b].stream == stream; b++)
            ;
        while (j < ns && f[j].producer < producer)
            j++;
        for (size_t x = j; x < ns && f[x].producer == producer && f[x].stream != stream; x++)
            place++;
        for (size_t i = a; i < b; i++)
            k[i].stream = place;
    }
    free(f);
    return 0;
}

static int coll_cmp(const void *a, const void *b) {
    const an_collective *x = a, *y = b;
    return x->first < y->first ? -1 : x->first > y->first;
}


/* The straggler's blocking span that overlaps [a, b) most. */
static void what_held(const an_result *r, an_collective *c) {
    c->block = SIZE_MAX;
    c->block_ns = 0;
    for (size_t i = 0; i < r->n_blocks && r->blocks[i].start < c->last; i++) {
        const an_block *b = &r->blocks[i];
        if (b->producer != c->straggler || b->end <= c->first)
            continue;
        uint64_t s0 = b->start > c->first ? b->start : c->first, s1 = b->end < c->last ? b->end : c->last;
        if (s1 > s0 && s1 - s0 > c->block_ns) {
            c->block_ns = s1 - s0;
            c->block = i;
        }
    }
}

int an_ranks_find(const st_store *s, const an_result *r, an_ranks *out, err_msg *err) {
    memset(out, 0, sizeof *out);
    size_t np = st_producer_count(s);
    out->ranks = calloc(np ? np : 1, sizeof *out->ranks);
    if (out->ranks == NULL)
        return err_set(err, ERR_NOMEM, "out of memory");
    out->n_ranks = np;
    for (uint32_t p = 0; p < np; p++) {
        an_rank *rk = &out->ranks[p];
        rk->producer = p;
        rk->rank = st_producer_get(s, p)->rank;
        for (size_t i = 0; i < r->n_devices; i++)
            if (r->devices[i].producer == p) {
                rk->span_ns += r->devices[i].span_ns;
                rk->busy_ns += r->devices[i].busy_ns;
                rk->idle_ns += r->devices[i].idle_ns;
            }
        for (size_t i = 0; i < r->n_blocks; i++)
            if (r->blocks[i].producer == p)
                rk->blocked_ns += r->blocks[i].own_ns;
    }
    /* every NCCL kernel, numbered per (process, stream, name) in time order */
    nccl_k *k = NULL;
    size_t nk = 0, cap = 0;
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (li->kind != ST_LANE_STREAM)
            continue;
        size_t n;
        const st_event *e = st_lane_events(s, l, &n);
        for (size_t i = 0; i < n; i++) {
            if (st_ev_kind(s, &e[i]) != TP_K_KERNEL || st_ev_name(s, &e[i]) == 0 || !is_nccl(st_str(s, st_ev_name(s, &e[i]))))
                continue;
            if (CM_GROW(k, cap, nk + 1)) {
                free(k);
                an_ranks_free(out);
                return err_set(err, ERR_NOMEM, "out of memory");
            }
            k[nk++] = (nccl_k){li->producer, li->id, st_ev_name(s, &e[i]), 0, e[i].start, st_ev_end(s, &e[i]), li->id};
        }
    }
    if (nk)
        qsort(k, nk, sizeof *k, by_start);
    for (size_t i = 0; i < nk; i++)
        k[i].ordinal = i && k[i].producer == k[i - 1].producer && k[i].stream == k[i - 1].stream &&
                               k[i].name == k[i - 1].name
                           ? k[i - 1].ordinal + 1
                           : 0;
    if (nk && stream_places(k, nk) != 0) {
        free(k);
        an_ranks_free(out);
        return err_set(err, ERR_NOMEM, "out of memory");
    }
    if (nk)
        qsort(k, nk, sizeof *k, k_cmp);
    if (clock_offsets(k, nk, out) != 0) {
        free(k);
        an_ranks_free(out);
        return err_set(err, ERR_NOMEM, "out of memory");
    }
    /* arrivals on the job's clock where a rank's offset was measured (larger than its spread) */
    for (size_t i = 0; i < nk; i++) {
        const an_rank *rk = &out->ranks[k[i].producer];
        if (an_rank_clock_measured(rk))
            k[i].start = (uint64_t)((int64_t)k[i].start - rk->clock_offset_ns);
    }
    /* a collective: the kernels of one key on two processes or more */
    size_t ccap = 0;
    for (size_t a = 0, b; a < nk; a = b) {
        for (b = a + 1; b < nk && k[b].stream == k[a].stream && k[b].name == k[a].name && k[b].ordinal == k[a].ordinal;
             b++)
            ;
        if (b - a < 2)
            continue;
        if (CM_GROW(out->colls, ccap, out->n_colls + 1)) {
            free(k);
            an_ranks_free(out);
            return err_set(err, ERR_NOMEM, "out of memory");
        }
        an_collective *c = &out->colls[out->n_colls++];
        memset(c, 0, sizeof *c);
        c->name = k[a].name;
        c->stream = k[a].id;
        c->ordinal = k[a].ordinal;
        c->n_ranks = b - a;
        c->first = UINT64_MAX;
        for (size_t i = a; i < b; i++) {
            if (k[i].start < c->first)
                c->first = k[i].start;
            if (k[i].start >= c->last) { /* ties: the later process, for a stable answer */
                c->last = k[i].start;
                c->straggler = k[i].producer;
            }
        }
        for (size_t i = a; i < b; i++) {
            out->ranks[k[i].producer].collectives++;
            if (k[i].producer != c->straggler) {
                c->wait_ns += c->last - k[i].start;
                out->ranks[k[i].producer].waited_ns += c->last - k[i].start;
            }
        }
        out->ranks[c->straggler].last_count++;
        out->ranks[c->straggler].made_wait_ns += c->wait_ns;
        what_held(r, c);
        c->gpu_ns = c->last > c->first ? an_busy_process(s, r, c->straggler, c->first, c->last) : 0;
        an_host_in(r, c->straggler, c->first, c->last, &c->host_ns, &c->host_range, &c->host_range_ns);
    }
    free(k);
    if (out->n_colls)
        qsort(out->colls, out->n_colls, sizeof *out->colls, coll_cmp);
    return 0;
}
