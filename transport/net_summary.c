/*
 * Summaries (net.h): the wire form of tp_summary, and the summer that a relay feeds with the batches
 * of its producers and asks, once an interval, for one summary per producer that sent something.
 * The summer trusts nothing it is fed: each batch is opened by the codec (which validates every
 * record), and what it keeps per producer is bounded (SUM_MAX_PRODUCERS producers, SUM_MAX_KEYS
 * devices and threads each). A producer is forgotten once its last batch was summarised, or after
 * SUM_FORGET_IDLE intervals without a batch, so that a relay that runs for long keeps room.
 */
#include "synctop/net.h"
#include "hash.h"
#include "net_loss.h"
#include "net_summary.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(TP_SUMMARY_SIZE == 8 + 12 * 8 + 4 * 4 + 64, "the summary's wire form");

size_t tp_summary_encode(const tp_summary *s, uint8_t out[TP_SUMMARY_SIZE]) {
    memset(out, 0, TP_SUMMARY_SIZE);
    uint32_t magic = TP_SUMMARY_MAGIC;
    uint16_t version = TP_SUMMARY_VERSION, size = TP_SUMMARY_SIZE;
    memcpy(out, &magic, 4);
    memcpy(out + 4, &version, 2);
    memcpy(out + 6, &size, 2);
    const uint64_t v[12] = {s->producer, s->relay,      s->start_ns, s->interval_ns, s->t_min,   s->t_max,
                            s->busy_ns,  s->blocked_ns, s->events,   s->batches,     s->missed, s->drops};
    for (int i = 0; i < 12; i++)
        net_loss_put_u64(out + 8 + 8 * i, v[i]);
    uint8_t *p = out + 8 + 96;
    memcpy(p, &s->pid, 4);
    memcpy(p + 4, &s->rank, 4);
    memcpy(p + 8, &s->world, 4);
    memcpy(p + 12, &s->devices, 4);
    size_t hl = strnlen(s->host, 64);
    memcpy(p + 16, s->host, hl);
    return TP_SUMMARY_SIZE;
}

int tp_summary_decode(const void *buf, size_t len, tp_summary *out, err_msg *err) {
    const uint8_t *b = buf;
    if (len < 8)
        return err_set(err, ERR_MALFORMED, "a %zu-byte summary is shorter than its header", len);
    uint32_t magic;
    uint16_t version, size;
    memcpy(&magic, b, 4);
    memcpy(&version, b + 4, 2);
    memcpy(&size, b + 6, 2);
    if (magic != TP_SUMMARY_MAGIC)
        return err_set(err, ERR_MALFORMED, "not a summary (magic %08x)", magic);
    if (version > TP_SUMMARY_VERSION)
        return err_set(err, ERR_VERSION, "a summary of version %u, newer than this synctop's %d", version,
                       TP_SUMMARY_VERSION);
    if (version == 0 || size != TP_SUMMARY_SIZE || len != TP_SUMMARY_SIZE)
        return err_set(err, ERR_MALFORMED, "a summary of version %u says %u bytes and has %zu", version, size, len);
    tp_summary s;
    memset(&s, 0, sizeof s);
    uint64_t *v[12] = {&s.producer, &s.relay,      &s.start_ns, &s.interval_ns, &s.t_min,  &s.t_max,
                       &s.busy_ns,  &s.blocked_ns, &s.events,   &s.batches,     &s.missed, &s.drops};
    for (int i = 0; i < 12; i++)
        *v[i] = net_loss_get_u64(b + 8 + 8 * i);
    const uint8_t *p = b + 8 + 96;
    memcpy(&s.pid, p, 4);
    memcpy(&s.rank, p + 4, 4);
    memcpy(&s.world, p + 8, 4);
    memcpy(&s.devices, p + 12, 4);
    const uint8_t *h = p + 16;
    size_t hl = 0;
    while (hl < 64 && h[hl] != 0) {
        if (h[hl] <= 0x20 || h[hl] >= 0x7f)
            return err_set(err, ERR_MALFORMED, "a summary's host name holds byte 0x%02x", h[hl]);
        hl++;
    }
    for (size_t i = hl; i < 64; i++)
        if (h[i] != 0)
            return err_set(err, ERR_MALFORMED, "a summary's host name is not NUL-padded");
    memcpy(s.host, h, hl);
    s.host[hl] = '\0';
    if (s.t_min > s.t_max)
        return err_set(err, ERR_MALFORMED, "a summary's span ends before it starts");
    if (s.devices > 65536 || (s.devices > 0 && s.busy_ns / s.devices > s.t_max - s.t_min))
        return err_set(err, ERR_MALFORMED, "a summary's busy time (%llu ns on %u devices) exceeds its span",
                       (unsigned long long)s.busy_ns, s.devices);
    if (s.devices == 0 && s.busy_ns != 0)
        return err_set(err, ERR_MALFORMED, "a summary has busy time and no device");
    *out = s;
    return 0;
}

/* ---- the summer ---- */

#define SUM_MAX_PRODUCERS 4096
#define SUM_SLOTS (2 * SUM_MAX_PRODUCERS)
#define SUM_MAX_KEYS 256 /* devices, and threads, followed per producer */
#define SUM_FORGET_IDLE 600

struct mark {
    uint32_t key;     /* device or thread id */
    uint64_t covered; /* the latest end counted on it */
};

struct span {
    uint32_t key;
    uint64_t start, end;
};

struct sum_producer {
    tp_summary s; /* the interval so far (producer, pid, rank, world, host kept across intervals) */
    int active;   /* a batch came in this interval */
    int ended;    /* its last batch (TP_BF_END) came */
    unsigned idle; /* intervals in a row without a batch */
    int seq_known;
    uint64_t last_seq;
    uint64_t drops[TP_DROP_MAX_];
    struct mark dev[SUM_MAX_KEYS], thr[SUM_MAX_KEYS];
    size_t n_dev, n_thr;
    uint8_t dev_busy[SUM_MAX_KEYS]; /* device worked in this interval */
};

struct net_summer {
    uint64_t relay;
    struct sum_producer **p;
    size_t n;
    uint32_t slot[SUM_SLOTS];
    cm_hash_key key; /* chooses the slots: peers choose the producer ids */
    tp_dec dec;
    struct span *gpu, *blk;
    size_t gpu_cap, blk_cap;
    const char **str;
    uint32_t *str_len, *str_id;
    size_t str_cap;
};

net_summer *net_summer_new(uint64_t relay) {
    net_summer *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    m->relay = relay;
    cm_hash_key_get(&m->key);
    m->p = calloc(SUM_MAX_PRODUCERS, sizeof *m->p);
    if (m->p == NULL) {
        free(m);
        return NULL;
    }
    return m;
}

void net_summer_reset(net_summer *m) {
    for (size_t i = 0; i < m->n; i++)
        free(m->p[i]);
    m->n = 0;
    memset(m->slot, 0, sizeof m->slot);
}

void net_summer_destroy(net_summer **mp) {
    if (mp == NULL || *mp == NULL)
        return;
    net_summer *m = *mp;
    net_summer_reset(m);
    tp_dec_free(&m->dec);
    free(m->p);
    free(m->gpu);
    free(m->blk);
    free(m->str);
    free(m->str_len);
    free(m->str_id);
    free(m);
    *mp = NULL;
}

static struct sum_producer *find(net_summer *m, uint64_t id) {
    size_t from = (size_t)cm_hash_u64(&m->key, id) & (SUM_SLOTS - 1), i = from;
    while (m->slot[i] != 0 && m->p[m->slot[i] - 1]->s.producer != id)
        i = (i + 1) & (SUM_SLOTS - 1);
    if (((i - from) & (SUM_SLOTS - 1)) > CM_HASH_LONG_PROBE)
        cm_hash_long_probe_note();
    if (m->slot[i] != 0)
        return m->p[m->slot[i] - 1];
    if (m->n == SUM_MAX_PRODUCERS)
        return NULL;
    struct sum_producer *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->s.producer = id;
    p->s.rank = p->s.world = -1;
    m->p[m->n++] = p;
    m->slot[i] = (uint32_t)m->n;
    return p;
}

static int push(struct span **v, size_t *cap, size_t n, uint32_t key, uint64_t s, uint64_t e) {
    if (n == *cap) {
        size_t c = *cap ? 2 * *cap : 1024;
        struct span *x = realloc(*v, c * sizeof *x);
        if (x == NULL)
            return ERR_NOMEM;
        *v = x;
        *cap = c;
    }
    (*v)[n] = (struct span){key, s, e};
    return 0;
}

static int by_key_start(const void *a, const void *b) {
    const struct span *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The mark of key, added when new; NULL when SUM_MAX_KEYS are followed already. */
static struct mark *mark_of(struct mark *v, size_t *n, uint32_t key, size_t *index) {
    for (size_t i = 0; i < *n; i++)
        if (v[i].key == key) {
            *index = i;
            return &v[i];
        }
    if (*n == SUM_MAX_KEYS)
        return NULL;
    v[*n] = (struct mark){key, 0};
    *index = *n;
    return &v[(*n)++];
}

/* Adds the union of spans (sorted by key, then start) beyond each key's mark; returns the time. */
static uint64_t add_union(struct span *v, size_t n, struct mark *marks, size_t *n_marks, uint8_t *touched) {
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k;
        struct mark *mk = mark_of(marks, n_marks, v[i].key, &k);
        if (mk == NULL)
            continue;
        if (touched != NULL)
            touched[k] = 1;
        uint64_t from = v[i].start > mk->covered ? v[i].start : mk->covered;
        if (v[i].end > from)
            total += v[i].end - from;
        if (v[i].end > mk->covered)
            mk->covered = v[i].end;
    }
    return total;
}

static int string_room(net_summer *m, size_t n) {
    if (n <= m->str_cap)
        return 0;
    size_t c = n < 64 ? 64 : n;
    const char **s = realloc(m->str, c * sizeof *s);
    if (s == NULL)
        return ERR_NOMEM;
    m->str = s;
    uint32_t *l = realloc(m->str_len, c * sizeof *l);
    if (l == NULL)
        return ERR_NOMEM;
    m->str_len = l;
    uint32_t *d = realloc(m->str_id, c * sizeof *d);
    if (d == NULL)
        return ERR_NOMEM;
    m->str_id = d;
    m->str_cap = c;
    return 0;
}

int net_summer_add(net_summer *m, const void *batch, size_t len, err_msg *err) {
    int rc = tp_dec_open(&m->dec, batch, len, err);
    if (rc < 0)
        return rc;
    const tp_batch_hdr *h = &m->dec.hdr;
    if (h->flags & TP_BF_INDEX)
        return 0;
    struct sum_producer *p = find(m, h->producer);
    if (p == NULL)
        return err_set(err, ERR_LIMIT, "more than %d producers to summarise", SUM_MAX_PRODUCERS);
    /* the strings of this batch, for the process record's host name */
    size_t ns = 0;
    if (string_room(m, h->n_strings) < 0)
        return err_set(err, ERR_NOMEM, "out of memory");
    uint32_t id, sl;
    const char *str;
    while (ns < m->str_cap && tp_dec_next_string(&m->dec, &id, &str, &sl)) {
        m->str[ns] = str;
        m->str_len[ns] = sl;
        m->str_id[ns++] = id;
    }
    if (!(h->flags & TP_BF_SYNTHETIC)) {
        if (p->seq_known && h->seq > p->last_seq) {
            p->s.missed += h->seq - p->last_seq - 1;
        } else if (p->seq_known) {
            /* the same id started over: its devices and threads too */
            p->n_dev = p->n_thr = 0;
            memset(p->dev_busy, 0, sizeof p->dev_busy);
            memset(p->drops, 0, sizeof p->drops);
        }
        p->seq_known = 1;
        p->last_seq = h->seq;
    }
    size_t ng = 0, nb = 0;
    const tp_record *r;
    while ((r = tp_dec_next_record(&m->dec)) != NULL) {
        switch (r->head.kind) {
        case TP_K_KERNEL:
        case TP_K_MEMCPY:
        case TP_K_MEMSET: {
            uint64_t s, e;
            tp_record_span(r, &s, &e);
            if (push(&m->gpu, &m->gpu_cap, ng++, r->head.device, s, e) < 0)
                return err_set(err, ERR_NOMEM, "out of memory");
            break;
        }
        case TP_K_API:
            if ((r->api.flags & TP_F_BLOCKING) && push(&m->blk, &m->blk_cap, nb++, r->api.tid, r->api.start, r->api.end) < 0)
                return err_set(err, ERR_NOMEM, "out of memory");
            break;
        case TP_K_DROPS:
            if (r->drops.source < TP_DROP_MAX_ && r->drops.records > p->drops[r->drops.source])
                p->drops[r->drops.source] = r->drops.records;
            break;
        case TP_K_PROCESS:
            p->s.pid = r->process.pid;
            p->s.rank = r->process.rank;
            p->s.world = r->process.world;
            for (size_t i = 0; i < ns; i++)
                if (m->str_id[i] == r->process.host && m->str_len[i] <= 64) {
                    char host[65];
                    size_t k = 0;
                    for (uint32_t j = 0; j < m->str_len[i]; j++) /* printable ASCII only, as on the wire */
                        if ((unsigned char)m->str[i][j] > 0x20 && (unsigned char)m->str[i][j] < 0x7f)
                            host[k++] = m->str[i][j];
                    host[k] = '\0';
                    memcpy(p->s.host, host, k + 1);
                }
            break;
        default: break;
        }
    }
    if (ng > 1) /* none yet: the arrays may not be allocated */
        qsort(m->gpu, ng, sizeof *m->gpu, by_key_start);
    if (nb > 1)
        qsort(m->blk, nb, sizeof *m->blk, by_key_start);
    p->s.busy_ns += add_union(m->gpu, ng, p->dev, &p->n_dev, p->dev_busy);
    p->s.blocked_ns += add_union(m->blk, nb, p->thr, &p->n_thr, NULL);
    if (h->n_events > 0 && h->t_max >= h->t_min) {
        if (p->s.t_min == 0 && p->s.t_max == 0) {
            p->s.t_min = h->t_min;
            p->s.t_max = h->t_max;
        } else {
            if (h->t_min < p->s.t_min)
                p->s.t_min = h->t_min;
            if (h->t_max > p->s.t_max)
                p->s.t_max = h->t_max;
        }
    }
    p->s.events += h->n_events;
    p->s.batches++;
    p->active = 1;
    p->ended = (h->flags & TP_BF_END) != 0;
    return 0;
}

/* Drops the producers that ended or went quiet, and rebuilds the index of the others. */
static void forget(net_summer *m) {
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++) {
        struct sum_producer *p = m->p[i];
        if (p->ended || p->idle > SUM_FORGET_IDLE)
            free(p);
        else
            m->p[k++] = p;
    }
    if (k == m->n)
        return;
    m->n = k;
    memset(m->slot, 0, sizeof m->slot);
    for (size_t i = 0; i < k; i++) {
        size_t j = (size_t)cm_hash_u64(&m->key, m->p[i]->s.producer) & (SUM_SLOTS - 1);
        while (m->slot[j] != 0)
            j = (j + 1) & (SUM_SLOTS - 1);
        m->slot[j] = (uint32_t)i + 1;
    }
}

size_t net_summer_flush(net_summer *m, uint64_t start_ns, uint64_t interval_ns,
                        void (*emit)(void *ctx, const tp_summary *s), void *ctx) {
    size_t n = 0, gone = 0;
    for (size_t i = 0; i < m->n; i++) {
        struct sum_producer *p = m->p[i];
        if (!p->active) {
            gone += ++p->idle > SUM_FORGET_IDLE;
            continue;
        }
        p->idle = 0;
        gone += p->ended;
        tp_summary s = p->s;
        s.relay = m->relay;
        s.start_ns = start_ns;
        s.interval_ns = interval_ns;
        s.devices = 0;
        for (size_t k = 0; k < p->n_dev; k++)
            s.devices += p->dev_busy[k];
        s.drops = 0;
        for (int k = 0; k < TP_DROP_MAX_; k++)
            s.drops += p->drops[k];
        emit(ctx, &s);
        n++;
        p->active = 0;
        memset(p->dev_busy, 0, sizeof p->dev_busy);
        p->s.t_min = p->s.t_max = 0;
        p->s.busy_ns = p->s.blocked_ns = p->s.events = p->s.batches = p->s.missed = 0;
    }
    if (gone > 0)
        forget(m);
    return n;
}
