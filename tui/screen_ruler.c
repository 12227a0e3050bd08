/*
 * The ruler (time ticks, the cursor, the marked span) and the steps strip under it, and the keys
 * that go from one slow step to the next ({ and }).
 */
#include "screen_int.h"
#include "steps.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vw__render_ruler(const vw_state *v, vw_grid *g, const vw_layout *L) {
    int y = L->ruler.y;
    char lab[32];
    vw_fmt_dur(lab, sizeof lab, v->t1 - v->t0, v->ascii);
    char left[48];
    snprintf(left, sizeof left, " %s %s", v->ascii ? "<->" : "\xe2\x86\x94", lab);
    vw__fill(g, 0, y, g->w, ROLE_RULER, 0);
    vw__put_str(g, v, 0, y, L->label_w, left, ROLE_DIM, 0);
    vw__put_cell(g, L->label_w, y, v->ascii ? '+' : 0x253C, ROLE_RULER, 0);
    int cols = L->timeline.w;
    uint64_t span = v->t1 - v->t0;
    uint64_t want = span * 14 / (uint64_t)cols; /* a tick every ~14 columns */
    uint64_t step = 1;
    while (step < want) {
        if (step * 2 >= want) {
            step *= 2;
            break;
        }
        if (step * 5 >= want) {
            step *= 5;
            break;
        }
        step *= 10;
    }
    if (step == 0)
        step = 1;
    for (int c = 0; c < cols; c++)
        vw__put_cell(g, L->timeline.x + c, y, v->ascii ? '-' : 0x2500, ROLE_RULER, 0);
    uint64_t rel0 = v->t0 > v->origin ? v->t0 - v->origin : 0;
    uint64_t first = (rel0 + step - 1) / step * step;
    int last_end = -1;
    /* The cursor's mark goes on the ruler; a label it would cut in two is left out (its tick
     * stays), so every label shown reads whole. */
    int cur = v->cursor >= v->t0 && v->cursor < v->t1 ? vw__col_of(v, L, v->cursor) : -1;
    int m0 = -1, m1 = -1; /* the marked span's columns */
    if (v->ruler.marked && v->ruler.mark1 > v->t0 && v->ruler.mark0 < v->t1) {
        m0 = v->ruler.mark0 > v->t0 ? vw__col_of(v, L, v->ruler.mark0) : 0;
        m1 = v->ruler.mark1 < v->t1 ? vw__col_of(v, L, v->ruler.mark1 - 1) : cols - 1;
    }
    /* Zoomed in far from the start, ticks would differ only in their last digits (4.523610s,
     * 4.523620s): the first label shown is the time, the others its distance from it (+10µs), as
     * Perfetto's ruler does. */
    int relative = first >= step * 1000;
    uint64_t anchor = UINT64_MAX;
    for (uint64_t t = first; v->origin + t < v->t1; t += step) {
        int c = vw__col_of(v, L, v->origin + t);
        if (c <= last_end)
            continue;
        char d[32];
        if (relative && anchor != UINT64_MAX) {
            char dd[32];
            vw_fmt_dur(dd, sizeof dd, t - anchor, v->ascii);
            snprintf(d, sizeof d, "+%s", dd);
        } else {
            vw__fmt_tick(d, sizeof d, t, step, v->ascii);
        }
        vw__put_cell(g, L->timeline.x + c, y, v->ascii ? '|' : 0x2534, ROLE_RULER, 0);
        int n = (int)strlen(d) - (!v->ascii && strstr(d, "\xc2\xb5") ? 1 : 0);
        if (c + 1 + n < cols && !(cur > c && cur <= c + n) && !(m0 >= 0 && m0 <= c + n + 1 && m1 >= c)) {
            vw__put_str(g, v, L->timeline.x + c + 1, y, n, d, ROLE_RULER, 0);
            last_end = c + n + 1;
            if (anchor == UINT64_MAX)
                anchor = t;
        }
    }
    if (m0 >= 0) {
        /* the marked span: a band on the ruler with its duration, inside when it fits */
        int c0 = m0, c1 = m1;
        for (int c = c0; c <= c1; c++)
            vw__put_cell(g, L->timeline.x + c, y, v->ascii ? '=' : 0x2550, ROLE_SELECTION, 0);
        vw__put_cell(g, L->timeline.x + c0, y, v->ascii ? '[' : 0x255E, ROLE_SELECTION, VW_A_BOLD);
        vw__put_cell(g, L->timeline.x + c1, y, v->ascii ? ']' : 0x2561, ROLE_SELECTION, VW_A_BOLD);
        char d[40];
        vw_fmt_dur(lab, sizeof lab, v->ruler.mark1 - v->ruler.mark0, v->ascii);
        snprintf(d, sizeof d, " %s ", lab);
        int n = (int)strlen(d) - (!v->ascii && strstr(d, "\xc2\xb5") ? 1 : 0);
        int at = c1 - c0 + 1 >= n + 2 ? c0 + (c1 - c0 + 1 - n) / 2 : c1 + 1 + n <= cols ? c1 + 1 : c0 - n;
        if (at >= 0)
            vw__put_str(g, v, L->timeline.x + at, y, n, d, ROLE_SELECTION, VW_A_BOLD);
    }
    if (cur >= 0)
        vw__put_cell(g, L->timeline.x + cur, y, v->ascii ? 'v' : 0x25BC, ROLE_CURSOR, VW_A_BOLD);
}

/* The steps of the process on the cursor's row (else the first with steps): a segment per step
 * from its start, numbered where there is room; slow steps in red, marked "!". */
void vw__render_steps(const st_store *s, const vw_state *v, vw_grid *g, const vw_layout *L, uint32_t producer) {
    const an_steps *st = v->steps;
    if (L->steps.h == 0 || st == NULL)
        return;
    int y = L->steps.y, cols = L->timeline.w;
    vw__fill(g, 0, y, g->w, ROLE_DEFAULT, 0);
    char lab[48];
    snprintf(lab, sizeof lab, " steps (%s)", st->source == AN_STEPS_HEARTBEAT ? "beat" : st->source == AN_STEPS_RANGE ? "range" : "prof");
    vw__put_str(g, v, 0, y, L->label_w, lab, ROLE_LABEL, 0);
    vw__put_cell(g, L->label_w, y, v->ascii ? '|' : 0x2502, ROLE_DIM, 0);
    int found = 0;
    for (size_t i = 0; i < st->n_steps; i++)
        found |= st->steps[i].producer == producer;
    if (!found && st->n_steps)
        producer = st->steps[0].producer;
    int numbered_to = -1;
    for (size_t i = 0; i < st->n_steps; i++) {
        const an_step *x = &st->steps[i];
        if (x->producer != producer || x->end <= v->t0 || x->start >= v->t1 || x->start > v->now)
            continue;
        int c0 = x->start > v->t0 ? vw__col_of(v, L, x->start) : 0;
        int c1 = x->end < v->t1 ? vw__col_of(v, L, x->end - 1) : cols - 1;
        int role = x->outlier ? ROLE_BLOCKED : ROLE_DIM;
        for (int c = c0; c <= c1; c++)
            vw__put_cell(g, L->timeline.x + c, y, x->outlier ? (v->ascii ? '=' : 0x2501) : (v->ascii ? '-' : 0x2500), role, 0);
        vw__put_cell(g, L->timeline.x + c0, y, v->ascii ? '|' : 0x251C, role, x->outlier ? VW_A_BOLD : 0);
        char num[32];
        int n = snprintf(num, sizeof num, "%" PRId64 "%s", x->number, x->outlier ? "!" : "");
        if (c0 + 1 > numbered_to && c1 - c0 - 1 >= n) {
            vw__put_str(g, v, L->timeline.x + c0 + 1, y, n, num, role, VW_A_BOLD);
            numbered_to = c0 + n;
        }
    }
    (void)s;
}

/* { and }: the previous / next slow step after the cursor, fitted in the window. */
void vw__slow_step_cmd(vw_state *v, const vw_layout *L, vw_cmd c) {
    const an_steps *st = v->steps;
    const an_step *best = NULL;
    for (size_t i = 0; st && i < st->n_steps; i++) {
        const an_step *x = &st->steps[i];
        if (!x->outlier || x->start > v->now)
            continue;
        if (c == VW_CMD_NEXT_SLOW && x->start > v->cursor && (best == NULL || x->start < best->start))
            best = x;
        if (c == VW_CMD_PREV_SLOW && x->start < v->cursor && (best == NULL || x->start > best->start))
            best = x;
    }
    if (best == NULL) {
        char why[96];
        if (st == NULL || st->n_steps == 0)
            snprintf(v->message, sizeof v->message, "no steps found: %s", an_steps_none_why(st, why, sizeof why));
        else
            snprintf(v->message, sizeof v->message, "%s",
                     c == VW_CMD_NEXT_SLOW ? "no slow step after the cursor" : "no slow step before the cursor");
        return;
    }
    uint64_t d = best->end - best->start, w = d + d / 4 > (uint64_t)L->timeline.w ? d + d / 4 : (uint64_t)L->timeline.w;
    v->t0 = best->start > (w - d) / 2 ? best->start - (w - d) / 2 : 0;
    v->t1 = v->t0 + w;
    v->cursor = best->start;
    v->follow = 0;
    v->live_span = 0;
    char dw[32], dm[32];
    vw_fmt_dur(dw, sizeof dw, d, v->ascii);
    vw_fmt_dur(dm, sizeof dm, st->median_ns, v->ascii);
    snprintf(v->message, sizeof v->message, "step %" PRId64 ": %s, slow (median %s)", best->number, dw, dm);
}

/* ---- a dragged span, measured ---- */

typedef struct span_list {
    uint64_t (*iv)[2];
    size_t n, cap;
} span_list;

static void span_add(span_list *l, uint64_t a, uint64_t b) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        uint64_t(*nv)[2] = realloc(l->iv, cap * sizeof *nv);
        if (nv == NULL)
            return; /* out of memory: the figure comes out short, never wrong in kind */
        l->iv = nv;
        l->cap = cap;
    }
    l->iv[l->n][0] = a;
    l->iv[l->n][1] = b;
    l->n++;
}

static int span_cmp(const void *x, const void *y) {
    const uint64_t *a = x, *b = y;
    return a[0] < b[0] ? -1 : a[0] > b[0];
}

/* The length of the union of the spans gathered, which it empties. */
static uint64_t span_union(span_list *l) {
    qsort(l->iv, l->n, sizeof *l->iv, span_cmp);
    uint64_t total = 0, s0 = 0, s1 = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (i == 0 || l->iv[i][0] > s1) {
            total += s1 - s0;
            s0 = l->iv[i][0];
            s1 = l->iv[i][1];
        } else if (l->iv[i][1] > s1) {
            s1 = l->iv[i][1];
        }
    }
    total += s1 - s0;
    l->n = 0;
    return total;
}

#define MARK_LOOK_BACK 256 /* events before a lane's first start in the span that may still cover it */

void vw__mark_measure(vw_state *v, const st_store *s, uint64_t a, uint64_t b) {
    v->ruler.marked = 1;
    v->ruler.mark0 = a;
    v->ruler.mark1 = b;
    uint64_t to = v->now < b ? v->now : b; /* a replay shows nothing after now */
    span_list l = {0};
    uint64_t busy = 0, blocked = 0, kernels = 0, calls = 0;
    size_t n_lanes = st_lane_count(s), gpus = 0;
    for (size_t i = 0; i < n_lanes; i++) {
        const st_lane_info *li = st_lane_get(s, i);
        if (li->kind == ST_LANE_NVTX)
            continue;
        size_t n, k = st_lane_lower_bound(s, i, a);
        const st_event *ev = st_lane_events(s, i, &n);
        for (k = k > MARK_LOOK_BACK ? k - MARK_LOOK_BACK : 0; k < n && ev[k].start < to; k++) {
            const st_event *e = &ev[k];
            if (st_ev_end(s, e) <= a && !(e->start == st_ev_end(s, e) && e->start >= a))
                continue;
            uint64_t s0 = e->start > a ? e->start : a, s1 = st_ev_end(s, e) < to ? st_ev_end(s, e) : to;
            if (li->kind == ST_LANE_STREAM) {
                kernels += st_ev_kind(s, e) == TP_K_KERNEL;
                if (st_ev_kind(s, e) == TP_K_KERNEL || st_ev_kind(s, e) == TP_K_MEMCPY || st_ev_kind(s, e) == TP_K_MEMSET)
                    span_add(&l, s0, s1);
            } else if (st_ev_kind(s, e) == TP_K_API) {
                calls++;
                if (st_ev_flags(s, e) & TP_F_BLOCKING)
                    span_add(&l, s0, s1);
            }
        }
        /* a GPU's streams come one after another: its work is one union; a thread's calls another */
        const st_lane_info *nx = i + 1 < n_lanes ? st_lane_get(s, i + 1) : NULL;
        if (li->kind == ST_LANE_THREAD)
            blocked += span_union(&l);
        else if (nx == NULL || nx->kind != ST_LANE_STREAM || nx->producer != li->producer || nx->device != li->device) {
            busy += span_union(&l);
            gpus++;
        }
    }
    free(l.iv);
    uint64_t len = b - a;
    char dl[32], db[32], dh[32];
    vw_fmt_dur(dl, sizeof dl, len, v->ascii);
    vw_fmt_dur(db, sizeof db, busy, v->ascii);
    vw_fmt_dur(dh, sizeof dh, blocked, v->ascii);
    snprintf(v->ruler.what, sizeof v->ruler.what,
             " selected %s: GPU busy %s (%.1f%%), host blocked %s, %" PRIu64 " kernel%s, %" PRIu64 " call%s  (esc clears)",
             dl, db, len && gpus ? 100.0 * (double)busy / ((double)len * (double)gpus) : 0.0, dh, kernels,
             kernels == 1 ? "" : "s", calls, calls == 1 ? "" : "s");
}
