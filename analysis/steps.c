/*
 * Steps, their figures, outliers and periodic stalls (steps.h).
 */
#include "steps.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "busy.h"
#include "grow.h"
#include "synctop/sanitize.h"

/* Sites tracked per step: the longest-blocking ones (an_result.sites is sorted by total). */
#define STEP_SITES 256
/* Beats a heartbeat needs: with fewer, "regular" means little. */
#define HEARTBEAT_MIN AN_HEARTBEAT_MIN
/* The shortest step a heartbeat may give, on average: a step launches work and the host waits on
 * it at least once, tens of microseconds at the least. */
#define STEP_MIN_NS 100000u

const char *an_step_source_name(int source) {
    switch (source) {
    case AN_STEPS_PROFILER: return "ProfilerStep ranges";
    case AN_STEPS_RANGE: return "range";
    case AN_STEPS_HEARTBEAT: return "heartbeat";
    default: return "none";
    }
}

void an_steps_free(an_steps *st) {
    free(st->steps);
    free(st->periodic);
    memset(st, 0, sizeof *st);
}

static int step_cmp(const void *a, const void *b) {
    const an_step *x = a, *y = b;
    if (x->producer != y->producer)
        return x->producer < y->producer ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The median of n values (sorted in place); 0 for none. */
static uint64_t median(uint64_t *v, size_t n) {
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, u64_cmp);
    return n % 2 ? v[n / 2] : v[n / 2 - 1] / 2 + v[n / 2] / 2 + (v[n / 2 - 1] % 2 + v[n / 2] % 2) / 2;
}

static int add_step(an_steps *out, size_t *cap, uint32_t producer, int64_t number, uint64_t start, uint64_t end) {
    if (CM_GROW(out->steps, *cap, out->n_steps + 1))
        return ERR_NOMEM;
    an_step *st = &out->steps[out->n_steps++];
    memset(st, 0, sizeof *st);
    st->producer = producer;
    st->number = number;
    st->start = start;
    st->end = end;
    st->top_site = SIZE_MAX;
    return 0;
}

/* 1 and 2: ranges, ProfilerStep#N when name is NULL, else those named name. */
static int steps_from_ranges(const st_store *s, const char *name, an_steps *out, size_t *cap) {
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (li->kind != ST_LANE_NVTX)
            continue;
        size_t n;
        const st_event *e = st_lane_events(s, l, &n);
        for (size_t i = 0; i < n; i++) {
            if (st_ev_kind(s, &e[i]) != TP_K_NVTX || st_ev_end(s, &e[i]) <= e[i].start || st_ev_name(s, &e[i]) == 0 || (st_ev_flags(s, &e[i]) & ST_EV_OP))
                continue;
            const char *nm = st_str(s, st_ev_name(s, &e[i]));
            int64_t number = -1;
            if (name == NULL) {
                if (strncmp(nm, "ProfilerStep#", 13) != 0)
                    continue;
                char *endp;
                long long v = strtoll(nm + 13, &endp, 10);
                if (endp == nm + 13 || *endp != '\0')
                    continue;
                number = v;
            } else if (strcmp(nm, name) != 0) {
                continue;
            }
            if (add_step(out, cap, li->producer, number, e[i].start, st_ev_end(s, &e[i])))
                return ERR_NOMEM;
        }
    }
    if (out->n_steps)
        qsort(out->steps, out->n_steps, sizeof *out->steps, step_cmp);
    /* ordinals where the trace gives no numbers */
    for (size_t i = 0, k = 0; i < out->n_steps; i++, k++) {
        if (i && out->steps[i].producer != out->steps[i - 1].producer)
            k = 0;
        if (out->steps[i].number < 0)
            out->steps[i].number = (int64_t)k;
    }
    return 0;
}

static int block_is_site(const an_block *b, const an_site *st) {
    return b->producer == st->producer && b->callsite == st->callsite && (b->callsite || b->name == st->name);
}

/* Whether times (n >= HEARTBEAT_MIN, sorted here) come regularly: the median absolute deviation
 * of the gaps between them under a third of their median (gaps of a random process are near two
 * thirds), so that a few slow steps do not spoil a beat. The median gap when they do, else 0. */
static uint64_t regular(uint64_t *t, size_t n, uint64_t *gaps) {
    qsort(t, n, sizeof *t, u64_cmp);
    for (size_t i = 1; i < n; i++)
        gaps[i - 1] = t[i] - t[i - 1];
    uint64_t med = median(gaps, n - 1);
    for (size_t i = 0; i < n - 1; i++)
        gaps[i] = gaps[i] > med ? gaps[i] - med : med - gaps[i];
    return med > 0 && median(gaps, n - 1) * 3 < med ? med : 0;
}

typedef struct named_t {
    uint32_t name;
    uint64_t t;
} named_t;

static int named_cmp(const void *a, const void *b) {
    const named_t *x = a, *y = b;
    if (x->name != y->name)
        return x->name < y->name ? -1 : 1;
    return x->t < y->t ? -1 : x->t > y->t;
}

/* A process's ranges, by name then start. */
static named_t *ranges_of(const st_store *s, uint32_t p, size_t *n_out) {
    size_t n = 0, cap = 0;
    named_t *v = NULL;
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (li->kind != ST_LANE_NVTX || li->producer != p)
            continue;
        size_t ne;
        const st_event *e = st_lane_events(s, l, &ne);
        for (size_t i = 0; i < ne; i++)
            if (st_ev_kind(s, &e[i]) == TP_K_NVTX && st_ev_end(s, &e[i]) > e[i].start && st_ev_name(s, &e[i]) && !(st_ev_flags(s, &e[i]) & ST_EV_OP)) {
                if (CM_GROW(v, cap, n + 1)) {
                    free(v);
                    *n_out = 0;
                    return NULL;
                }
                v[n++] = (named_t){st_ev_name(s, &e[i]), e[i].start};
            }
    }
    if (n)
        qsort(v, n, sizeof *v, named_cmp);
    *n_out = n;
    return v;
}


/* Whether the GPU works between most beats (t sorted): a loop's steps do; calls that come
 * regularly with nothing on the GPU between them (a teardown freeing buffers one by one) are not
 * a loop. */
static int beats_hold_work(const st_store *s, const an_result *r, uint32_t producer, const uint64_t *t, size_t n) {
    size_t with = 0;
    for (size_t i = 1; i < n; i++)
        with += t[i] > t[i - 1] && an_busy_process(s, r, producer, t[i - 1], t[i]) > 0;
    return 2 * with >= n - 1;
}

/* Whether beats (sorted, regular, med apart in the median) can be a loop's steps: the GPU works
 * between most of them, they span a tenth of the trace or more, and they come no faster than
 * STEP_MIN_NS apart: a range that a compiler pass opens every 16 us, with nothing on the GPU, or a
 * synchronize after every kernel, is no loop. */
static int plausible(const st_store *s, const an_result *r, uint32_t producer, const uint64_t *t, size_t n,
                     uint64_t med) {
    uint64_t span = r->t1 > r->t0 ? r->t1 - r->t0 : 0;
    if (n < 2 || (t[n - 1] - t[0]) * 10 < span || med < STEP_MIN_NS)
        return 0;
    return beats_hold_work(s, r, producer, t, n);
}

/* 3: per process, the beat that comes most often among (a) its call sites with HEARTBEAT_MIN or
 * more stalls whose ends come regularly and (b) its ranges of one name, as many, whose starts come
 * regularly (a range marks the loop on purpose: it wins a tie, and among ranges the one that comes
 * first in the loop). A step runs from one beat to the next. */
static int steps_from_heartbeat(const st_store *s, const an_result *r, an_steps *out, size_t *cap) {
    size_t np = st_producer_count(s);
    size_t room = r->n_blocks + 1;
    uint64_t *t = malloc(room * sizeof *t), *gaps = malloc(room * sizeof *gaps);
    int rc = 0;
    if (t == NULL || gaps == NULL)
        rc = -1;
    for (uint32_t p = 0; p < np && rc == 0; p++) {
        size_t best = SIZE_MAX, best_n = HEARTBEAT_MIN - 1, nr = 0, rbest = SIZE_MAX, rbest_n = 0;
        for (size_t k = 0; k < r->n_sites && k < STEP_SITES; k++) {
            const an_site *st = &r->sites[k];
            if (st->producer != p || st->count <= best_n)
                continue;
            size_t n = 0;
            for (size_t i = 0; i < r->n_blocks; i++)
                if (block_is_site(&r->blocks[i], st))
                    t[n++] = r->blocks[i].end;
            uint64_t med = n > best_n ? regular(t, n, gaps) : 0;
            if (med && plausible(s, r, p, t, n, med)) {
                best = k;
                best_n = n;
            }
        }
        named_t *rg = ranges_of(s, p, &nr);
        for (size_t a = 0, b; a < nr; a = b) {
            for (b = a + 1; b < nr && rg[b].name == rg[a].name; b++)
                ;
            size_t n = b - a;
            if (n < HEARTBEAT_MIN || n < best_n || n + 1 < rbest_n)
                continue;
            uint64_t *rt = malloc(n * sizeof *rt), *rgap = malloc(n * sizeof *rgap);
            if (rt == NULL || rgap == NULL) {
                free(rt);
                free(rgap);
                rc = -1;
                break;
            }
            for (size_t i = 0; i < n; i++)
                rt[i] = rg[a + i].t;
            /* the range that repeats most; counts one apart are a tie, which the one that begins
             * first wins: the last range of a loop's name may be open still (live) or cut off at the
             * trace's end, and the loop's first range is its beat */
            uint64_t med = regular(rt, n, rgap);
            if (med && plausible(s, r, p, rt, n, med) &&
                (rbest == SIZE_MAX || n > rbest_n + 1 || (n + 1 >= rbest_n && rg[a].t < rg[rbest].t)))
                rbest = a, rbest_n = n;
            free(rt);
            free(rgap);
        }
        char raw[200] = "";
        if (rc == 0 && rbest != SIZE_MAX && rbest_n >= best_n) { /* a range */
            for (size_t i = rbest + 1; i < nr && rg[i].name == rg[rbest].name; i++)
                if (add_step(out, cap, p, (int64_t)(i - rbest - 1), rg[i - 1].t, rg[i].t))
                    rc = -1;
            snprintf(raw, sizeof raw, "range %s", st_str(s, rg[rbest].name));
        } else if (rc == 0 && best != SIZE_MAX) { /* a call site */
            size_t n = 0;
            for (size_t i = 0; i < r->n_blocks; i++)
                if (block_is_site(&r->blocks[i], &r->sites[best]))
                    t[n++] = r->blocks[i].end;
            qsort(t, n, sizeof *t, u64_cmp);
            for (size_t i = 1; i < n && rc == 0; i++)
                if (t[i] > t[i - 1] && add_step(out, cap, p, (int64_t)(i - 1), t[i - 1], t[i]))
                    rc = -1;
            const an_site *st = &r->sites[best];
            const st_frame *f = st->callsite ? st_site_frame(s, st->callsite) : NULL;
            if (f != NULL && (f->kind == TP_FRAME_PYTHON || (f->file && f->line)))
                snprintf(raw, sizeof raw, "%s:%u %s", st_str(s, f->file), f->line, st_str(s, f->func));
            else if (f != NULL && f->kind == TP_FRAME_OP)
                snprintf(raw, sizeof raw, "%s in %s", st_str(s, st->name), st_str(s, f->func));
            else
                snprintf(raw, sizeof raw, "%s", st_str(s, st->name));
        }
        free(rg);
        if (out->what[0] == '\0' && raw[0])
            tp_sanitize(out->what, sizeof out->what, raw, strlen(raw), NULL);
    }
    free(t);
    free(gaps);
    return rc;
}

/* Sites' blocked time per step (steps x tracked sites), and the steps' own figures. */
static int step_figures(const st_store *s, const an_result *r, an_steps *out, uint64_t *per_site, size_t ns) {
    uint64_t maxlen = 0;
    for (size_t i = 0; i < r->n_blocks; i++)
        if (r->blocks[i].end - r->blocks[i].start > maxlen)
            maxlen = r->blocks[i].end - r->blocks[i].start;
    for (size_t k = 0; k < out->n_steps; k++) {
        an_step *st = &out->steps[k];
        st->gpu_busy_ns = an_busy_process(s, r, st->producer, st->start, st->end);
        uint64_t from = st->start > maxlen ? st->start - maxlen : 0;
        size_t lo = 0, hi = r->n_blocks;
        while (lo < hi) {
            size_t m = lo + (hi - lo) / 2;
            if (r->blocks[m].start < from)
                lo = m + 1;
            else
                hi = m;
        }
        for (size_t i = lo; i < r->n_blocks && r->blocks[i].start < st->end; i++) {
            const an_block *b = &r->blocks[i];
            if (b->producer != st->producer || b->end <= st->start || b->own_ns == 0)
                continue;
            uint64_t s0 = b->start > st->start ? b->start : st->start, s1 = b->end < st->end ? b->end : st->end;
            uint64_t d = s1 - s0 < b->own_ns ? s1 - s0 : b->own_ns;
            st->blocked_ns += d;
            st->stalls += b->start >= st->start;
            for (size_t j = 0; j < ns; j++)
                if (block_is_site(b, &r->sites[j])) {
                    per_site[k * ns + j] += d;
                    break;
                }
        }
        for (size_t j = 0; j < ns; j++)
            if (per_site[k * ns + j] > st->top_site_ns) {
                st->top_site_ns = per_site[k * ns + j];
                st->top_site = j;
            }
        an_host_in(r, st->producer, st->start, st->end, &st->host_ns, &st->host_range, &st->host_range_ns);
    }
    return 0;
}

/* Outliers and periodic stalls over the steps [a, b) of one process. */
static int judge(const an_result *r, an_steps *out, const uint64_t *per_site, size_t ns, size_t a, size_t b,
                 uint64_t *tmp, size_t *pcap) {
    size_t n = b - a;
    for (size_t i = 0; i < n; i++)
        tmp[i] = out->steps[a + i].end - out->steps[a + i].start;
    uint64_t med = median(tmp, n);
    for (size_t i = 0; i < n; i++) {
        uint64_t w = out->steps[a + i].end - out->steps[a + i].start;
        tmp[i] = w > med ? w - med : med - w;
    }
    double mad = (double)median(tmp, n), bound = (double)med + 3 * 1.4826 * mad;
    for (size_t i = 0; i < n; i++) {
        uint64_t w = out->steps[a + i].end - out->steps[a + i].start;
        out->steps[a + i].outlier = (double)w > bound && (double)w > 1.1 * (double)med;
    }
    for (size_t j = 0; j < ns && n >= 6; j++) {
        for (size_t i = 0; i < n; i++)
            tmp[i] = per_site[(a + i) * ns + j];
        uint64_t smed = median(tmp, n), thr = 2 * smed > med / 100 ? 2 * smed : med / 100;
        size_t first = SIZE_MAX, last = 0, hits = 0, period = 0;
        int regular = 1;
        for (size_t i = 0; i < n && regular; i++) {
            if (per_site[(a + i) * ns + j] <= thr || per_site[(a + i) * ns + j] == 0)
                continue;
            if (first == SIZE_MAX)
                first = i;
            else if (period == 0)
                period = i - last;
            else if (i - last != period)
                regular = 0;
            last = i;
            hits++;
        }
        /* every period-th step, none missed: the first within the first period, the last within
         * the last */
        if (!regular || hits < 3 || period < 2 || first >= period || n - 1 - last >= period)
            continue;
        uint64_t in = 0;
        size_t others = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t w = out->steps[a + i].end - out->steps[a + i].start;
            if (i >= first && (i - first) % period == 0)
                in += w;
            else
                tmp[others++] = w;
        }
        uint64_t rest = median(tmp, others), mean_in = in / hits;
        if (mean_in <= rest)
            continue;
        if (CM_GROW(out->periodic, *pcap, out->n_periodic + 1))
            return ERR_NOMEM;
        out->periodic[out->n_periodic++] =
            (an_periodic){j, r->sites[j].producer, (uint32_t)period, a + first, (uint32_t)hits, mean_in - rest};
    }
    return 0;
}

const char *an_steps_none_why(const an_steps *st, char *buf, size_t len) {
    if (st == NULL || st->profiler_ranges == 0)
        snprintf(buf, len, "no ProfilerStep ranges");
    else
        snprintf(buf, len, "%zu ProfilerStep range%s, fewer than the three steps need", st->profiler_ranges,
                 st->profiler_ranges == 1 ? "" : "s");
    return buf;
}

int an_steps_find(const st_store *s, const an_result *r, const char *range_name, an_steps *out, err_msg *err) {
    memset(out, 0, sizeof *out);
    size_t cap = 0, pcap = 0;
    int rc = 0;
    /* The range the user named comes first, then the profiler's ProfilerStep#N, then a heartbeat. */
    if (range_name != NULL) {
        rc = steps_from_ranges(s, range_name, out, &cap);
        out->source = AN_STEPS_RANGE;
        tp_sanitize(out->what, sizeof out->what, range_name, strlen(range_name), NULL);
    }
    if (rc == 0 && out->n_steps < 3) {
        out->n_steps = 0;
        rc = steps_from_ranges(s, NULL, out, &cap);
        out->source = AN_STEPS_PROFILER;
        snprintf(out->what, sizeof out->what, "ProfilerStep#N");
    }
    if (rc == 0 && out->n_steps < 3) {
        size_t profiler = out->n_steps;
        out->n_steps = 0;
        out->what[0] = '\0';
        rc = steps_from_heartbeat(s, r, out, &cap);
        if (out->n_steps < 3)
            out->profiler_ranges = profiler;
        out->source = AN_STEPS_HEARTBEAT;
    }
    if (rc == 0 && out->n_steps < 3) {
        out->n_steps = 0;
        out->source = AN_STEPS_NONE;
        out->what[0] = '\0';
        return 0;
    }
    size_t ns = r->n_sites < STEP_SITES ? r->n_sites : STEP_SITES;
    uint64_t *per_site = rc ? NULL : calloc(out->n_steps * (ns ? ns : 1), sizeof *per_site);
    uint64_t *tmp = rc ? NULL : malloc(out->n_steps * sizeof *tmp);
    if (per_site == NULL || tmp == NULL) {
        free(per_site);
        free(tmp);
        an_steps_free(out);
        return err_set(err, ERR_NOMEM, "out of memory finding steps");
    }
    step_figures(s, r, out, per_site, ns);
    for (size_t i = 0; i < out->n_steps; i++)
        tmp[i] = out->steps[i].end - out->steps[i].start;
    out->median_ns = median(tmp, out->n_steps);
    for (size_t a = 0, b; a < out->n_steps && rc == 0; a = b) {
        for (b = a; b < out->n_steps && out->steps[b].producer == out->steps[a].producer; b++)
            ;
        rc = judge(r, out, per_site, ns, a, b, tmp, &pcap);
    }
    free(per_site);
    free(tmp);
    if (rc) {
        an_steps_free(out);
        return err_set(err, ERR_NOMEM, "out of memory finding steps");
    }
    return 0;
}
