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
    if (TU_GROW(out->steps, *cap, out->n_steps + 1))
        return -1;
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
            if (e[i].kind != TP_K_NVTX || e[i].end <= e[i].start || e[i].name == 0)
                continue;
            const char *nm = st_str(s, e[i].name);
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
            if (add_step(out, cap, li->producer, number, e[i].start, e[i].end))
                return -1;
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

/* 3: per process, among its call sites with four or more stalls whose ends come regularly (the
 * median absolute deviation of the times between them under a quarter of their median: outlier
 * steps do not spoil a loop's beat), the one that blocks most often; a step runs from one of its
 * ends to the next. */
static int steps_from_heartbeat(const st_store *s, const an_result *r, an_steps *out, size_t *cap) {
    size_t np = st_producer_count(s);
    uint64_t *ends = malloc((r->n_blocks + 1) * sizeof *ends), *gaps = malloc((r->n_blocks + 1) * sizeof *gaps);
    if (ends == NULL || gaps == NULL) {
        free(ends);
        free(gaps);
        return -1;
    }
    for (uint32_t p = 0; p < np; p++) {
        size_t best = SIZE_MAX;
        for (size_t k = 0; k < r->n_sites && k < STEP_SITES; k++) {
            const an_site *st = &r->sites[k];
            if (st->producer != p || st->count < 4 || (best != SIZE_MAX && st->count <= r->sites[best].count))
                continue;
            size_t n = 0;
            for (size_t i = 0; i < r->n_blocks; i++)
                if (block_is_site(&r->blocks[i], st))
                    ends[n++] = r->blocks[i].end;
            if (n < 4)
                continue;
            qsort(ends, n, sizeof *ends, u64_cmp);
            for (size_t i = 1; i < n; i++)
                gaps[i - 1] = ends[i] - ends[i - 1];
            uint64_t med = median(gaps, n - 1);
            for (size_t i = 0; i < n - 1; i++)
                gaps[i] = gaps[i] > med ? gaps[i] - med : med - gaps[i];
            if (med > 0 && median(gaps, n - 1) * 4 < med)
                best = k;
        }
        if (best == SIZE_MAX)
            continue;
        size_t n = 0;
        for (size_t i = 0; i < r->n_blocks; i++)
            if (block_is_site(&r->blocks[i], &r->sites[best]))
                ends[n++] = r->blocks[i].end;
        qsort(ends, n, sizeof *ends, u64_cmp);
        for (size_t i = 1; i < n; i++)
            if (ends[i] > ends[i - 1] && add_step(out, cap, p, (int64_t)(i - 1), ends[i - 1], ends[i])) {
                free(ends);
                free(gaps);
                return -1;
            }
        if (out->what[0] == '\0') {
            const an_site *st = &r->sites[best];
            char raw[160];
            const st_frame *f = st->callsite ? st_site_frame(s, st->callsite) : NULL;
            if (f != NULL && f->kind == TP_FRAME_PYTHON)
                snprintf(raw, sizeof raw, "%s:%u %s", st_str(s, f->file), f->line, st_str(s, f->func));
            else if (f != NULL && f->file && f->line)
                snprintf(raw, sizeof raw, "%s:%u %s", st_str(s, f->file), f->line, st_str(s, f->func));
            else
                snprintf(raw, sizeof raw, "%s", st_str(s, st->name));
            tp_sanitize(out->what, sizeof out->what, raw, strlen(raw), NULL);
        }
    }
    free(ends);
    free(gaps);
    return 0;
}

/* Busy time of the process's GPUs over [a, b), summed over its GPUs. */
static uint64_t gpu_busy(const st_store *s, const an_result *r, uint32_t producer, uint64_t a, uint64_t b) {
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

/* Sites' blocked time per step (steps x tracked sites), and the steps' own figures. */
static int step_figures(const st_store *s, const an_result *r, an_steps *out, uint64_t *per_site, size_t ns) {
    uint64_t maxlen = 0;
    for (size_t i = 0; i < r->n_blocks; i++)
        if (r->blocks[i].end - r->blocks[i].start > maxlen)
            maxlen = r->blocks[i].end - r->blocks[i].start;
    for (size_t k = 0; k < out->n_steps; k++) {
        an_step *st = &out->steps[k];
        st->gpu_busy_ns = gpu_busy(s, r, st->producer, st->start, st->end);
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
        if (TU_GROW(out->periodic, *pcap, out->n_periodic + 1))
            return -1;
        out->periodic[out->n_periodic++] =
            (an_periodic){j, r->sites[j].producer, (uint32_t)period, a + first, (uint32_t)hits, mean_in - rest};
    }
    return 0;
}

int an_steps_find(const st_store *s, const an_result *r, const char *range_name, an_steps *out, err_msg *err) {
    memset(out, 0, sizeof *out);
    size_t cap = 0, pcap = 0;
    int rc = steps_from_ranges(s, NULL, out, &cap);
    out->source = AN_STEPS_PROFILER;
    snprintf(out->what, sizeof out->what, "ProfilerStep#N");
    if (rc == 0 && out->n_steps < 3 && range_name != NULL) {
        out->n_steps = 0;
        rc = steps_from_ranges(s, range_name, out, &cap);
        out->source = AN_STEPS_RANGE;
        tp_sanitize(out->what, sizeof out->what, range_name, strlen(range_name), NULL);
    }
    if (rc == 0 && out->n_steps < 3) {
        out->n_steps = 0;
        out->what[0] = '\0';
        rc = steps_from_heartbeat(s, r, out, &cap);
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
        err_set(err, ERR_NOMEM, "out of memory finding steps");
        return -1;
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
        err_set(err, ERR_NOMEM, "out of memory finding steps");
        return -1;
    }
    return 0;
}
