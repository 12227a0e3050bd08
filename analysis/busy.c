/*
 * GPU busy time by a k-way merge over a device's stream lanes (busy.h).
 */
#include "busy.h"

#include "analysis.h"

#include <stdlib.h>

int an_is_gpu_work(const st_store *s, const st_event *e) {
    unsigned kind = st_ev_kind(s, e);
    return kind == TP_K_KERNEL || kind == TP_K_MEMCPY || kind == TP_K_MEMSET;
}

static void extend(an_busy *m, uint64_t s, uint64_t e) {
    if (!m->have) {
        m->have = 1;
        m->cur_s = s;
        m->cur_e = e;
    } else if (e > m->cur_e) {
        m->cur_e = e;
    }
}

int an_busy_init(an_busy *m, const st_store *s, uint32_t producer, uint16_t device, uint64_t a,
                 size_t lookback) {
    *m = (an_busy){.s = s, .producer = producer, .device = device, .a = a};
    size_t n_lanes = 0;
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        n_lanes += li->kind == ST_LANE_STREAM && li->producer == producer && li->device == device;
    }
    if (n_lanes == 0)
        return 0;
    m->lanes = malloc(n_lanes * sizeof *m->lanes);
    m->pos = malloc(n_lanes * sizeof *m->pos);
    if (m->lanes == NULL || m->pos == NULL) {
        an_busy_free(m);
        return ERR_NOMEM;
    }
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (li->kind != ST_LANE_STREAM || li->producer != producer || li->device != device)
            continue;
        size_t n, lb = st_lane_lower_bound(s, l, a);
        const st_event *ev = st_lane_events(s, l, &n);
        for (size_t k = 0; k < lookback && k < lb; k++) {
            const st_event *e = &ev[lb - 1 - k];
            if (an_is_gpu_work(s, e) && st_ev_end(m->s, e) > a)
                extend(m, a, st_ev_end(m->s, e));
        }
        m->lanes[m->n_lanes] = l;
        m->pos[m->n_lanes++] = lb;
    }
    return 0;
}

void an_busy_free(an_busy *m) {
    free(m->lanes);
    free(m->pos);
    m->lanes = m->pos = NULL;
    m->n_lanes = 0;
}

int an_busy_step(an_busy *m, uint64_t b, size_t *budget, an_busy_gap *gap) {
    for (;;) {
        size_t best = SIZE_MAX;
        uint64_t bs = 0;
        for (size_t j = 0; j < m->n_lanes; j++) {
            size_t n;
            const st_event *ev = st_lane_events(m->s, m->lanes[j], &n);
            while (m->pos[j] < n && !an_is_gpu_work(m->s, &ev[m->pos[j]]) && ev[m->pos[j]].start < b)
                m->pos[j]++;
            if (m->pos[j] >= n || ev[m->pos[j]].start >= b)
                continue;
            if (best == SIZE_MAX || ev[m->pos[j]].start < bs) {
                best = j;
                bs = ev[m->pos[j]].start;
            }
        }
        if (best == SIZE_MAX)
            return AN_BUSY_DONE;
        if (budget != NULL) {
            if (*budget == 0)
                return AN_BUSY_MORE;
            (*budget)--;
        }
        size_t n, idx = m->pos[best]++;
        const st_event *e = &st_lane_events(m->s, m->lanes[best], &n)[idx];
        uint64_t s0 = e->start < m->a ? m->a : e->start;
        if (st_ev_end(m->s, e) <= s0)
            continue;
        if (m->have && s0 > m->cur_e) {
            *gap = (an_busy_gap){.start = m->cur_e, .end = s0, .busy_s = m->cur_s,
                                 .lane = m->lanes[best], .index = idx};
            m->busy_ns += m->cur_e - m->cur_s;
            m->cur_s = s0;
            m->cur_e = st_ev_end(m->s, e);
            return AN_BUSY_GAP;
        }
        extend(m, s0, st_ev_end(m->s, e));
    }
}

int an_busy_open(const an_busy *m, uint64_t b, uint64_t *start, uint64_t *end) {
    if (!m->have || m->cur_s >= b)
        return 0;
    *start = m->cur_s;
    *end = m->cur_e < b ? m->cur_e : b;
    return 1;
}

uint64_t an_busy_total(const an_busy *m, uint64_t b) {
    uint64_t s, e;
    return m->busy_ns + (an_busy_open(m, b, &s, &e) ? e - s : 0);
}

uint64_t an_busy_process(const st_store *s, const an_result *r, uint32_t producer, uint64_t a, uint64_t b) {
    uint64_t sum = 0;
    for (size_t i = 0; i < r->n_devices; i++) {
        if (r->devices[i].producer != producer)
            continue;
        an_busy m;
        if (an_busy_init(&m, s, producer, r->devices[i].device, a, 64))
            continue;
        an_busy_gap gap;
        while (an_busy_step(&m, b, NULL, &gap) == AN_BUSY_GAP)
            ;
        sum += an_busy_total(&m, b);
        an_busy_free(&m);
    }
    return sum;
}

/* ---- the sweep ---- */

struct an_sweep {
    const st_store *s;
    const an_result *an;
    size_t events;
    uint64_t dropped;
    size_t n_lanes_store;
    uint64_t a, b; /* swept so far: work starting before b */
    an_busy *devs;
    size_t n_devs;
};

void an_sweep_free(an_sweep **sp) {
    if (*sp == NULL)
        return;
    for (size_t i = 0; i < (*sp)->n_devs; i++)
        an_busy_free(&(*sp)->devs[i]);
    free((*sp)->devs);
    free(*sp);
    *sp = NULL;
}

an_sweep *an_sweep_new(const st_store *s, const an_result *an, uint64_t a) {
    an_sweep *w = calloc(1, sizeof *w);
    if (w == NULL)
        return NULL;
    w->s = s;
    w->an = an;
    w->events = st_store_events(s);
    w->dropped = st_store_dropped(s);
    w->n_lanes_store = st_lane_count(s);
    w->a = w->b = a;
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (li->kind != ST_LANE_STREAM)
            continue;
        int seen = 0;
        for (size_t k = 0; k < w->n_devs && !seen; k++)
            seen = w->devs[k].producer == li->producer && w->devs[k].device == li->device;
        if (seen)
            continue;
        an_busy *nd = realloc(w->devs, (w->n_devs + 1) * sizeof *nd);
        if (nd == NULL)
            goto fail;
        w->devs = nd;
        if (an_busy_init(&w->devs[w->n_devs], s, li->producer, li->device, a, 64))
            goto fail;
        w->n_devs++;
    }
    return w;
fail:
    an_sweep_free(&w);
    return NULL;
}

int an_sweep_fits(const an_sweep *w, const st_store *s, const an_result *an, uint64_t a, uint64_t b) {
    return w != NULL && w->s == s && w->an == an && w->a == a && b >= w->b && w->events == st_store_events(s) &&
           w->dropped == st_store_dropped(s) && w->n_lanes_store == st_lane_count(s);
}

int an_sweep_to(an_sweep *w, uint64_t b, size_t budget) {
    size_t left = budget;
    for (size_t k = 0; k < w->n_devs; k++) {
        an_busy_gap g;
        int rc;
        while ((rc = an_busy_step(&w->devs[k], b, budget ? &left : NULL, &g)) == AN_BUSY_GAP)
            ;
        if (rc == AN_BUSY_MORE)
            return 0;
    }
    w->b = b;
    return 1;
}

uint64_t an_process_span(const st_store *s, uint32_t producer, uint64_t a, uint64_t b) {
    if (b <= a)
        return 0;
    if (st_producer_count(s) < 2)
        return b - a;
    uint64_t first, last;
    st_producer_span(s, producer, &first, &last);
    const st_producer_info *p = st_producer_get(s, producer);
    if (p == NULL || !p->ended || last > b)
        last = b;
    if (first < a)
        first = a;
    return last > first ? last - first : 0;
}

int an_sweep_figures(const an_sweep *w, uint64_t b, an_gpu_fig **out, size_t *n_out) {
    an_gpu_fig *f = calloc(w->n_devs ? w->n_devs : 1, sizeof *f);
    if (f == NULL)
        return ERR_NOMEM;
    for (size_t k = 0; k < w->n_devs; k++) {
        const an_busy *d = &w->devs[k];
        uint64_t busy = an_busy_total(d, b), own = an_process_span(w->s, d->producer, w->a, b);
        f[k] = (an_gpu_fig){.producer = d->producer, .device = d->device, .span_ns = own, .busy_ns = busy,
                            .idle_ns = own > busy ? own - busy : 0};
    }
    /* host time blocked: the analysis' spans (their GPU already resolved), clipped to the range */
    for (size_t i = 0; w->an && i < w->an->n_blocks && w->an->blocks[i].start < b; i++) {
        const an_block *bl = &w->an->blocks[i];
        uint64_t own = bl->end - bl->own_ns; /* nested calls count once: only the uncovered tail */
        uint64_t s0 = own > w->a ? own : w->a, s1 = bl->end < b ? bl->end : b;
        if (s1 <= s0)
            continue;
        for (size_t k = 0; k < w->n_devs; k++)
            if (f[k].producer == bl->producer && f[k].device == bl->device)
                f[k].blocked_ns += s1 - s0;
    }
    *out = f;
    *n_out = w->n_devs;
    return 0;
}
