/*
 * The lanes panel: the rows in display order (a process, its GPUs' summary rows, their streams,
 * the host threads and their ranges), the groups folded into their heads (vw_lanes), each row's
 * cells over the window with the GPU's idle bubbles, the selected call site's stalls and the
 * cursor; and the keys that fold and hide rows (c, C, e).
 */
#include "screen_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Folds: a process (all its rows but its own), a GPU (its streams; its row stays, the union of
 * them), a thread (its ranges lane). And, kept with them, the threads whose ranges are open by
 * depth (o): ranges are one summary row until opened, as Perfetto's collapsed tracks. */
enum { FOLD_PROCESS = 1, FOLD_DEVICE = 2, FOLD_THREAD = 3, OPEN_RANGES = 4 };
static uint64_t fold_key(int kind, uint32_t producer, uint32_t id) {
    return ((uint64_t)kind << 56) | ((uint64_t)producer << 24) | (id & 0xFFFFFFu);
}

/* Where key is in the sorted a[0..n), or would go. */
static size_t u64_lower_bound(const uint64_t *a, size_t n, uint64_t key) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t m = lo + (hi - lo) / 2;
        if (a[m] < key)
            lo = m + 1;
        else
            hi = m;
    }
    return lo;
}

/* The folds are kept sorted: every row of every frame asks whether its group is folded, and a job
 * of many ranks opens with all of them folded. Returns where key is, or would go. */
static size_t fold_find(const vw_state *v, uint64_t key) { return u64_lower_bound(v->lanes.folds, v->lanes.n_folds, key); }

static int folded(const vw_state *v, uint64_t key) {
    if (v == NULL)
        return 0;
    size_t i = fold_find(v, key);
    return i < v->lanes.n_folds && v->lanes.folds[i] == key;
}

/* Folds key, or unfolds it when it is folded; returns whether it is folded now. */
static int fold_toggle(vw_state *v, uint64_t key) {
    size_t i = fold_find(v, key);
    if (i < v->lanes.n_folds && v->lanes.folds[i] == key) {
        memmove(&v->lanes.folds[i], &v->lanes.folds[i + 1], (v->lanes.n_folds - i - 1) * sizeof *v->lanes.folds);
        v->lanes.n_folds--;
        return 0;
    }
    uint64_t *nf = realloc(v->lanes.folds, (v->lanes.n_folds + 1) * sizeof *nf);
    if (nf == NULL)
        return 0;
    v->lanes.folds = nf;
    memmove(&v->lanes.folds[i + 1], &v->lanes.folds[i], (v->lanes.n_folds - i) * sizeof *v->lanes.folds);
    v->lanes.folds[i] = key;
    v->lanes.n_folds++;
    return 1;
}

/* The rows in display order: with several processes a row per process first; a device row before
 * each device's lanes, then the lanes. With v, folded groups and (hide_idle) lanes with nothing in
 * the window are left out; without, every row is there. Writes them to r when r is not NULL;
 * returns how many, and the devices (folded or not) in *devices. */
size_t vw__rows_walk(const st_store *s, const vw_state *v, vw_row *r, size_t *devices) {
    size_t nl = st_lane_count(s), n = 0, d = 0;
    int multi = st_producer_count(s) > 1;
    uint32_t last_p = UINT32_MAX;
    uint16_t last_d = TP_NO_DEVICE;
    for (size_t l = 0; l < nl; l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (multi && li->producer != last_p) {
            if (r)
                r[n] = (vw_row){ROW_PROCESS, SIZE_MAX, li->producer, TP_NO_DEVICE, 0};
            n++;
        }
        int pfold = folded(v, fold_key(FOLD_PROCESS, li->producer, 0));
        if (li->device != TP_NO_DEVICE && (li->producer != last_p || li->device != last_d)) {
            if (r && !pfold)
                r[n] = (vw_row){ROW_DEVICE, SIZE_MAX, li->producer, li->device, 0};
            n += !pfold;
            d++;
        }
        last_p = li->producer;
        last_d = li->device;
        if (pfold || (li->kind == ST_LANE_STREAM && folded(v, fold_key(FOLD_DEVICE, li->producer, li->device))) ||
            (li->kind == ST_LANE_NVTX && folded(v, fold_key(FOLD_THREAD, li->producer, li->id))))
            continue;
        if (v && v->lanes.hide_idle) {
            st_bucket b;
            if (st_lane_summary(s, l, v->t0, v->t1 > v->t0 ? v->t1 : v->t0 + 1, 1, &b) == 0 && b.count == 0)
                continue;
        }
        if (r)
            r[n] = (vw_row){ROW_LANE, l, li->producer, li->device, 0};
        n++;
        if (li->kind == ST_LANE_NVTX && li->device == TP_NO_DEVICE && folded(v, fold_key(OPEN_RANGES, li->producer, li->id))) {
            size_t nd = st_lane_depths(s, l);
            for (size_t k = 0; k < nd && k < VW_DEPTH_ROWS; k++, n++)
                if (r)
                    r[n] = (vw_row){ROW_LANE, l, li->producer, li->device, (uint32_t)k + 1};
        }
    }
    if (devices)
        *devices = d;
    return n;
}

vw_row *vw__rows_build(const st_store *s, const vw_state *v, size_t *n_out) {
    vw_row *r = malloc((vw__rows_walk(s, v, NULL, NULL) + 1) * sizeof *r);
    *n_out = r ? vw__rows_walk(s, v, r, NULL) : 0;
    return r;
}

/* A thread as its rows name it: "T783658 python3" (profiler traces name threads "thread 783658
 * (python3)": the tid once). */
static void thread_name(const st_store *s, const st_lane_info *li, const char *pfx, char *out, size_t n) {
    const char *nm = st_str(s, li->name);
    char tid[24];
    int tl = snprintf(tid, sizeof tid, "thread %u", li->id);
    size_t nl = strlen(nm);
    if (strncmp(nm, tid, (size_t)tl) == 0) {
        nm += tl;
        while (*nm == ' ' || *nm == '(')
            nm++;
        nl = strlen(nm);
        if (nl > 0 && nm[nl - 1] == ')')
            nl--;
    }
    snprintf(out, n, "%sT%u%s%.*s", pfx, li->id, nl ? " " : "", (int)nl, nm);
}

/* The label of row r; above is the row before it (NULL: none). A thread's ranges row says
 * " ranges" under its thread's row, and " T<tid> ranges" when that row is not above it (a thread
 * with ranges and no CUDA calls, or its row hidden as idle). */
static void row_label(const st_store *s, const vw_row *r, const vw_row *above, int multi_producer, char *out,
                      size_t n) {
    char raw[256];
    char pfx[24] = "";
    if (multi_producer) {
        vw__producer_tag(s, r->producer, pfx, sizeof pfx - 1);
        strcat(pfx, ":");
    }
    if (r->type == ROW_PROCESS) {
        vw__producer_tag(s, r->producer, pfx, sizeof pfx);
        snprintf(raw, sizeof raw, "%s", pfx);
    } else if (r->type == ROW_DEVICE) {
        snprintf(raw, sizeof raw, "%sGPU%u", pfx, r->device);
    } else {
        const st_lane_info *li = st_lane_get(s, r->lane);
        const st_lane_info *up = above != NULL && above->type == ROW_LANE ? st_lane_get(s, above->lane) : NULL;
        if (li->kind == ST_LANE_STREAM) {
            if (li->id == TP_NO_ID)
                snprintf(raw, sizeof raw, " sync (device)");
            else
                snprintf(raw, sizeof raw, " stream %u%s", li->id, li->null_stream ? "*" : "");
        } else if (li->kind == ST_LANE_THREAD) {
            thread_name(s, li, pfx, raw, sizeof raw);
        } else if (r->depth1 > 0) {
            snprintf(raw, sizeof raw, "   depth %u", r->depth1 - 1);
        } else if (li->device != TP_NO_DEVICE) {
            snprintf(raw, sizeof raw, " ranges s%u", li->id);
        } else if (up != NULL && up->kind == ST_LANE_THREAD && up->producer == li->producer && up->id == li->id) {
            snprintf(raw, sizeof raw, " ranges"); /* NVTX ranges, profiler annotations */
        } else { /* the tid only: the word "ranges" stays in sight */
            snprintf(raw, sizeof raw, " %sT%u ranges", pfx, li->id);
        }
    }
    vw__sanitized(out, n, raw);
}

/* The first bubble that may overlap time a or later: the first with start >= a - maxlen (no bubble
 * is longer). */
size_t vw__bubble_from(const an_result *an, uint64_t maxlen, uint64_t a) {
    uint64_t from = a > maxlen ? a - maxlen : 0;
    size_t lo = 0, hi = an->n_bubbles;
    while (lo < hi) {
        size_t m = lo + (hi - lo) / 2;
        if (an->bubbles[m].start < from)
            lo = m + 1;
        else
            hi = m;
    }
    return lo;
}

static uint64_t overlap(uint64_t s, uint64_t e, uint64_t a, uint64_t b) {
    uint64_t s0 = s > a ? s : a, s1 = e < b ? e : b;
    return s1 > s0 ? s1 - s0 : 0;
}

static int bubble_dev_slot(const bubble_rows *br, uint32_t p, uint16_t d) {
    uint64_t key = (uint64_t)p << 16 | d;
    size_t lo = u64_lower_bound(br->dev_key, br->n_dev, key);
    return lo < br->n_dev && br->dev_key[lo] == key ? br->dev_slot[lo] : -1;
}

/* The bubbles' overlap with each column of every row in br, in one pass over the bubbles in the
 * window: column c is [t0 + c w, t0 + (c + 1) w), the last one [t0 + (cols - 1) w, t1). A device
 * row takes the whole-device bubbles of its (producer, device), a stream lane its stream's. */
static void bubble_columns(const an_result *an, bubble_rows *br, uint64_t t0, uint64_t t1, uint64_t w, int cols,
                           uint64_t gap) {
    if (an == NULL || an->n_bubbles == 0 || cols <= 0)
        return;
    uint64_t last = t0 + (uint64_t)(cols - 1) * w, stop = last > t1 ? last : t1; /* no column reaches stop */
    for (size_t i = vw__bubble_from(an, an->bubble_max_ns, t0); i < an->n_bubbles && an->bubbles[i].start < stop; i++) {
        const an_bubble *x = &an->bubbles[i];
        if (x->end - x->start < gap)
            continue;
        int slot = x->lane == AN_DEVICE_LANE ? bubble_dev_slot(br, x->producer, x->device)
                   : x->lane < br->n_lanes ? br->lane_slot[x->lane]
                                           : -1;
        if (slot < 0)
            continue;
        uint64_t *sum = br->sum + (size_t)slot * (size_t)cols;
        for (uint64_t c = x->start > t0 ? (x->start - t0) / w : 0; c + 1 < (uint64_t)cols && t0 + c * w < x->end; c++)
            sum[c] += overlap(x->start, x->end, t0 + c * w, t0 + c * w + w);
        sum[cols - 1] += overlap(x->start, x->end, last, t1);
    }
}

/* Many processes (ranks): each folded into its own row, busy and blocked at a glance; c opens one. */
#define VW_FOLD_ABOVE 4
void vw__fold_new_processes(vw_state *v, const st_store *s) {
    size_t np = st_producer_count(s);
    if (np <= VW_FOLD_ABOVE || v->lanes.procs_folded >= np)
        return;
    for (size_t p = v->lanes.procs_folded; p < np; p++)
        if (!folded(v, fold_key(FOLD_PROCESS, (uint32_t)p, 0)))
            fold_toggle(v, fold_key(FOLD_PROCESS, (uint32_t)p, 0));
    v->lanes.procs_folded = np;
}

/* Names inside the bars wide enough to hold them (kernels, copies, calls, ranges), as Perfetto and
 * Nsight Systems write them: for each column, the longest event touching it (the lane's summary
 * says which), written over its inner cells in reverse video when its name fits. */
static void label_bars(frame_ctx *f, int y, size_t lane, const st_bucket *b) {
    const vw_state *v = f->v;
    vw_grid *g = f->g;
    const vw_layout *L = f->L;
    int cols = L->timeline.w, done = -1;
    size_t n;
    const st_event *ev = st_lane_events(f->s, lane, &n);
    for (int c = 0; c < cols; c++) {
        if (c <= done || b[c].longest == UINT32_MAX || b[c].longest >= n)
            continue;
        const st_event *e = &ev[b[c].longest];
        if (e->start > v->now || st_ev_end(f->s, e) <= e->start)
            continue;
        int c0 = e->start > v->t0 ? vw__col_of(v, L, e->start) : 0;
        int c1 = st_ev_end(f->s, e) < v->t1 ? vw__col_of(v, L, st_ev_end(f->s, e) - 1) : cols - 1;
        char raw[256], nm[256];
        if (st_ev_kind(f->s, e) == TP_K_MEMCPY)
            snprintf(raw, sizeof raw, "%s", tp_copy_kind_name(st_ev_sub(f->s, e)));
        else if (st_ev_kind(f->s, e) == TP_K_MEMSET)
            snprintf(raw, sizeof raw, "memset");
        else { /* a kernel's signature reads from its name: "void " before it says nothing */
            const char *name = st_str(f->s, st_ev_name(f->s, e));
            snprintf(raw, sizeof raw, "%s", strncmp(name, "void ", 5) == 0 ? name + 5 : name);
        }
        vw__sanitized(nm, sizeof nm, raw);
        /* inside the bar, a cell of margin each side; cut with an ellipsis past its width */
        int room = c1 - c0 - 1;
        if (nm[0] == '\0' || room < 8)
            continue;
        int x0 = L->timeline.x + c0 + 1, role = g->cells[y * g->w + x0].role;
        if (role == ROLE_DEFAULT || role == ROLE_BUBBLE || role == ROLE_DIM)
            continue;
        for (int x = x0; x < x0 + room; x++)
            vw__put_cell(g, x, y, ' ', role, VW_A_REVERSE);
        vw__put_str(g, v, x0, y, room, nm, role, VW_A_REVERSE);
        done = c1;
    }
}

/* Whether a row heads a folded group: a process, a GPU's streams, a thread's ranges. */
static int row_folded(const vw_state *v, const st_store *s, const vw_row *r) {
    if (r->type == ROW_PROCESS)
        return folded(v, fold_key(FOLD_PROCESS, r->producer, 0));
    if (r->type == ROW_DEVICE)
        return folded(v, fold_key(FOLD_DEVICE, r->producer, r->device));
    const st_lane_info *li = st_lane_get(s, r->lane);
    if (li->kind == ST_LANE_NVTX && li->device == TP_NO_DEVICE && r->depth1 == 0 && st_lane_depths(s, r->lane) > 1)
        return folded(v, fold_key(OPEN_RANGES, li->producer, li->id)) ? -1 : 1;
    return li->kind == ST_LANE_THREAD && folded(v, fold_key(FOLD_THREAD, li->producer, li->id));
}

/* A process's own row: where and what it runs, and its GPUs' figures at a glance. */
static void render_process_row(frame_ctx *f, int y, const vw_row *r) {
    const vw_state *v = f->v;
    vw_grid *g = f->g;
    const vw_layout *L = f->L;
    const st_producer_info *pi = st_producer_get(f->s, r->producer);
    char what[512], clean[512];
    vw__fill(g, L->timeline.x, y, L->timeline.w, ROLE_DEFAULT, 0);
    if (pi != NULL) {
        int n = 0;
        uint64_t span = 0, busy = 0, blocked = 0;
        for (size_t i = 0; v->an && i < v->an->n_devices; i++)
            if (v->an->devices[i].producer == r->producer) {
                span += v->an->devices[i].span_ns;
                busy += v->an->devices[i].busy_ns;
                blocked += v->an->devices[i].blocked_ns;
            }
        if (span) { /* at a glance, as the header says it per GPU */
            char d[32];
            vw_fmt_dur(d, sizeof d, blocked, v->ascii);
            n = snprintf(what, sizeof what, " busy %4.1f%%  host blocked %s ", 100.0 * (double)busy / (double)span, d);
        }
        n += snprintf(what + n, sizeof what - (size_t)n, " pid %u", pi->pid);
        if (pi->rank >= 0 && pi->world > 0)
            n += snprintf(what + n, sizeof what - (size_t)n, "  rank %d/%d", pi->rank, pi->world);
        else if (pi->rank >= 0)
            n += snprintf(what + n, sizeof what - (size_t)n, "  rank %d", pi->rank);
        if (pi->host)
            n += snprintf(what + n, sizeof what - (size_t)n, "  on %.100s", st_str(f->s, pi->host));
        if (pi->clock_aligned) /* its host's clock, as measured: how well this row lines up with others */
            n += snprintf(what + n, sizeof what - (size_t)n, " (clock %+.3f ms %s %.3f ms)",
                          (double)pi->clock_shift_ns / 1e6, v->ascii ? "+-" : "\xc2\xb1",
                          (double)pi->clock_uncertainty_ns / 1e6);
        if (pi->cmdline)
            snprintf(what + n, sizeof what - (size_t)n, "  %.300s", st_str(f->s, pi->cmdline));
        vw__sanitized(clean, sizeof clean, what);
        vw__put_str(g, v, L->timeline.x, y, L->timeline.w, clean, ROLE_DIM, 0);
    }
}

/* One depth of a thread's ranges: per column, how much of it the ranges of that depth cover (they
 * never overlap, so a binary search finds the first and a few steps the rest: the cost is the
 * columns', not the ranges'), and the names of those wide enough to hold them. */
#define DEPTH_COL_SCAN 16
static void render_depth_row(frame_ctx *f, int y, const vw_row *r) {
    const vw_state *v = f->v;
    vw_grid *g = f->g;
    const vw_layout *L = f->L;
    int cols = L->timeline.w, done = -1;
    size_t d = r->depth1 - 1, m, n;
    const uint32_t *idx = st_lane_at_depth(f->s, r->lane, d, &m);
    const st_event *ev = st_lane_events(f->s, r->lane, &n);
    uint64_t w = (v->t1 - v->t0) / (uint64_t)cols;
    if (w == 0)
        w = 1;
    for (int c = 0; c < cols; c++) {
        uint64_t a = v->t0 + (uint64_t)c * w, e = c + 1 == cols ? v->t1 : a + w, cover = 0;
        int x = L->timeline.x + c, any = 0;
        if (a >= v->now) {
            vw__put_cell(g, x, y, ' ', ROLE_DEFAULT, 0);
            continue;
        }
        size_t k = st_lane_depth_find(f->s, r->lane, d, a);
        for (size_t j = 0; k + j < m && j < DEPTH_COL_SCAN; j++) {
            const st_event *x1 = &ev[idx[k + j]];
            if (x1->start >= e || x1->start > v->now)
                break;
            uint64_t s0 = x1->start > a ? x1->start : a, s1 = st_ev_end(f->s, x1) < e ? st_ev_end(f->s, x1) : e;
            cover += s1 > s0 ? s1 - s0 : 0;
            any = 1;
            if (j + 1 == DEPTH_COL_SCAN) /* more than the scan: as busy as a column gets */
                cover = e - a;
        }
        if (!any) {
            vw__put_cell(g, x, y, ' ', ROLE_DEFAULT, 0);
            continue;
        }
        double frac = (double)cover / (double)(e - a);
        vw__put_cell(g, x, y, cover ? vw__cell_glyph(v, ST_CAT_NVTX, frac > 1 ? 1 : frac) : (v->ascii ? '\'' : 0x2575),
                     ROLE_NVTX, 0);
    }
    /* names, inside the bars that can hold them, as label_bars writes them */
    for (size_t k = st_lane_depth_find(f->s, r->lane, d, v->t0); k < m; k++) {
        const st_event *e = &ev[idx[k]];
        if (e->start >= v->t1 || e->start > v->now)
            break;
        int c0 = e->start > v->t0 ? vw__col_of(v, L, e->start) : 0;
        int c1 = st_ev_end(f->s, e) < v->t1 ? vw__col_of(v, L, st_ev_end(f->s, e) > 0 ? st_ev_end(f->s, e) - 1 : 0) : cols - 1;
        /* the bar before may end in the column this one starts in: that column is the margin
         * between their names */
        if (c1 - c0 - 1 >= 8 && c0 >= done) {
            char nm[256];
            vw__sanitized(nm, sizeof nm, st_str(f->s, st_ev_name(f->s, e)));
            int x0 = L->timeline.x + c0 + 1, room = c1 - c0 - 1;
            for (int x = x0; x < x0 + room; x++)
                vw__put_cell(g, x, y, ' ', ROLE_NVTX, VW_A_REVERSE);
            vw__put_str(g, v, x0, y, room, nm, ROLE_NVTX, VW_A_REVERSE);
            done = c1;
        }
        if (c1 >= cols - 1)
            break;
        /* on to the first range that ends past this one's last column (one that ends in it is
         * too narrow to name): a search per column, whatever the ranges in the window */
        k = st_lane_depth_find(f->s, r->lane, d, v->t0 + (uint64_t)(c1 + 1) * w) - 1;
    }
}

static void render_lane_row(frame_ctx *f, int y, const vw_row *r, const vw_row *above, int is_cursor_row, int multi) {
    const vw_state *v = f->v;
    vw_grid *g = f->g;
    const vw_layout *L = f->L;
    int cols = L->timeline.w;
    char lab[128], shown[160];
    row_label(f->s, r, above, multi, lab, sizeof lab);
    /* a folded group says so before its name; an open process says so too (it is a tree) */
    int fold = row_folded(v, f->s, r); /* -1: a ranges lane opened by depth */
    const char *mark = fold > 0 ? (v->ascii ? ">" : "\xe2\x96\xb8")
                       : r->type == ROW_PROCESS || fold < 0 ? (v->ascii ? "v" : "\xe2\x96\xbe")
                                                            : "";
    snprintf(shown, sizeof shown, "%s%s", mark, lab);
    int lrole = r->type == ROW_LANE ? ROLE_LANE : ROLE_DEVICE;
    int lattr = (r->type != ROW_LANE ? VW_A_BOLD : 0) | (is_cursor_row && v->focus == VW_FOCUS_TIMELINE ? VW_A_REVERSE : 0);
    vw__fill(g, 0, y, L->label_w, lrole, lattr);
    vw__put_str(g, v, 0, y, L->label_w, shown, lrole, lattr);
    vw__put_cell(g, L->label_w, y, v->ascii ? '|' : 0x2502, ROLE_DIM, 0);
    if (r->type == ROW_PROCESS) {
        render_process_row(f, y, r);
        return;
    }
    if (r->depth1 > 0) {
        render_depth_row(f, y, r);
        return;
    }
    uint64_t w = (v->t1 - v->t0) / (uint64_t)cols;
    if (w == 0)
        w = 1;
    st_bucket *b = f->buf;
    int kind = 0;
    if (r->type == ROW_DEVICE) {
        memset(f->dev, 0, (size_t)cols * sizeof *f->dev);
        for (size_t l = 0; l < st_lane_count(f->s); l++) {
            const st_lane_info *li = st_lane_get(f->s, l);
            if (li->kind != ST_LANE_STREAM || li->producer != r->producer || li->device != r->device)
                continue;
            st_lane_summary(f->s, l, v->t0, v->t1, (size_t)cols, b);
            for (int c = 0; c < cols; c++) {
                for (int k = 0; k < ST_CAT_SYNC; k++)
                    f->dev[c].busy[k] += b[c].busy[k];
                f->dev[c].count += b[c].count;
            }
        }
        b = f->dev;
    } else {
        st_lane_summary(f->s, r->lane, v->t0, v->t1, (size_t)cols, b);
        kind = st_lane_get(f->s, r->lane)->kind;
    }
    /* bubble columns: the device's own on its summary row, each stream's on its lane */
    int slot = r->type == ROW_DEVICE      ? bubble_dev_slot(&f->br, r->producer, r->device)
               : kind == ST_LANE_STREAM && r->lane < f->br.n_lanes ? f->br.lane_slot[r->lane]
                                                                   : -1;
    if (slot >= 0) {
        const uint64_t *sum = f->br.sum + (size_t)slot * (size_t)cols;
        for (int c = 0; c < cols; c++) {
            uint64_t a = v->t0 + (uint64_t)c * w, e = c + 1 == cols ? v->t1 : a + w;
            f->bubble_col[c] = sum[c] * 2 >= e - a;
        }
    }
    for (int c = 0; c < cols; c++) {
        uint64_t a = v->t0 + (uint64_t)c * w, e = c + 1 == cols ? v->t1 : a + w;
        int x = L->timeline.x + c;
        if (a >= v->now) {
            vw__put_cell(g, x, y, ' ', ROLE_DEFAULT, 0);
            continue;
        }
        uint64_t bw = e - a, tot = 0, best = 0;
        int cat = -1;
        for (int k = 0; k < ST_CAT_N; k++) {
            tot += b[c].busy[k];
            if (b[c].busy[k] > best) {
                best = b[c].busy[k];
                cat = k;
            }
        }
        if (kind == ST_LANE_THREAD && b[c].busy[ST_CAT_BLOCKED] * 4 >= bw && b[c].busy[ST_CAT_BLOCKED] > 0)
            cat = ST_CAT_BLOCKED;
        int on_bubble = (r->type == ROW_DEVICE || kind == ST_LANE_STREAM) && f->bubble_col[c];
        if (b[c].count == 0 || cat < 0) {
            if (on_bubble && v->an)
                vw__put_cell(g, x, y, v->ascii ? '.' : 0x00B7, ROLE_BUBBLE, 0);
            else if (b[c].count > 0) /* instants only */
                vw__put_cell(g, x, y, v->ascii ? '\'' : 0x2575, kind == ST_LANE_NVTX ? ROLE_NVTX : ROLE_DIM, 0);
            continue;
        }
        double frac = (double)tot / (double)bw;
        if (frac > 1)
            frac = 1;
        int role = vw__cat_role(cat);
        if (on_bubble && r->type == ROW_DEVICE)
            role = ROLE_BUBBLE;
        vw__put_cell(g, x, y, vw__cell_glyph(v, cat, frac), role, 0);
    }
    if (r->type == ROW_LANE)
        label_bars(f, y, r->lane, b);
}

static int u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sets f->br up for the rows shown (their GPU rows and stream lanes) and sums their bubbles per
 * column; 0, or -1 when out of memory (then no bubbles are drawn). */
static int bubble_rows_make(frame_ctx *f) {
    const vw_state *v = f->v;
    bubble_rows *br = &f->br;
    int cols = f->L->timeline.w;
    size_t shown = 0, n_dev = 0;
    for (int i = 0; i < f->L->lanes.h && v->row_scroll + i < (int)f->n_rows; i++)
        shown++;
    br->n_lanes = st_lane_count(f->s);
    br->lane_slot = malloc((br->n_lanes ? br->n_lanes : 1) * sizeof *br->lane_slot);
    br->dev_key = malloc((shown ? shown : 1) * sizeof *br->dev_key);
    br->dev_slot = malloc((shown ? shown : 1) * sizeof *br->dev_slot);
    br->sum = calloc((shown ? shown : 1) * (size_t)cols, sizeof *br->sum);
    if (br->lane_slot == NULL || br->dev_key == NULL || br->dev_slot == NULL || br->sum == NULL)
        return -1;
    for (size_t l = 0; l < br->n_lanes; l++)
        br->lane_slot[l] = -1;
    for (size_t i = 0; i < shown; i++) {
        const vw_row *r = &f->rows[(size_t)v->row_scroll + i];
        if (r->type == ROW_DEVICE)
            br->dev_key[n_dev++] = ((uint64_t)r->producer << 16 | r->device) << 16 | i; /* slot below the key */
        else if (r->type == ROW_LANE && r->lane < br->n_lanes && st_lane_get(f->s, r->lane)->kind == ST_LANE_STREAM)
            br->lane_slot[r->lane] = (int)i;
    }
    qsort(br->dev_key, n_dev, sizeof *br->dev_key, u64_cmp);
    for (size_t k = 0; k < n_dev; k++) {
        br->dev_slot[k] = (int)(br->dev_key[k] & 0xFFFF);
        br->dev_key[k] >>= 16;
    }
    br->n_dev = n_dev;
    uint64_t w = (v->t1 - v->t0) / (uint64_t)cols;
    bubble_columns(v->an, br, v->t0, v->t1, w ? w : 1, cols, v->gap_ns);
    return 0;
}

void vw__bubble_rows_free(bubble_rows *br) {
    free(br->lane_slot);
    free(br->dev_key);
    free(br->dev_slot);
    free(br->sum);
    memset(br, 0, sizeof *br);
}

void vw__render_lanes(frame_ctx *f) {
    const st_store *s = f->s;
    vw_state *v = f->v;
    vw_grid *g = f->g;
    const vw_layout *L = f->L;
    int multi = st_producer_count(s) > 1;
    int cols = L->timeline.w;
    if (bubble_rows_make(f) != 0)
        vw__bubble_rows_free(&f->br);
    for (int i = 0; i < L->lanes.h; i++) {
        int ri = v->row_scroll + i;
        if (ri >= (int)f->n_rows)
            break;
        memset(f->bubble_col, 0, (size_t)cols);
        render_lane_row(f, L->lanes.y + i, &f->rows[ri], ri > 0 ? &f->rows[ri - 1] : NULL, ri == v->cursor_row, multi);
    }
    /* the process the top row belongs to stays named while its rows scroll under it */
    if (multi && v->row_scroll > 0 && v->row_scroll < (int)f->n_rows && f->rows[v->row_scroll].type != ROW_PROCESS)
        for (int ri = v->row_scroll - 1; ri >= 0; ri--)
            if (f->rows[ri].type == ROW_PROCESS) {
                render_lane_row(f, L->lanes.y, &f->rows[ri], NULL, 0, multi);
                break;
            }
    if (f->n_rows == 0)
        vw__put_str(g, v, L->timeline.x + 2, L->lanes.y + 1, cols - 4,
                v->mode == VW_LIVE && !v->live_over ? "waiting for events..." : "no events", ROLE_DIM, 0);
    if (v->notice[0]) {
        char m[sizeof v->notice];
        vw__sanitized(m, sizeof m, v->notice);
        vw__put_str(g, v, L->timeline.x + 2, L->lanes.y + (f->n_rows == 0 ? 2 : 0), cols - 4, m, ROLE_WARN, VW_A_BOLD);
    }
    /* the selected stall's spans */
    if ((v->focus == VW_FOCUS_STALLS || v->stalls.show_site) && v->stalls.n_sites > 0 && v->an && v->stalls.sel >= 0) {
        const an_stall_site *site = &v->stalls.sites[v->stalls.sel];
        for (size_t k = 0; k < v->an->n_blocks; k++) {
            const an_block *b = &v->an->blocks[k];
            if (b->start >= v->t1 || b->end <= v->t0 || b->end > v->now || !an_stall_site_has(site, b))
                continue;
            for (int i = 0; i < L->lanes.h; i++) {
                int ri = v->row_scroll + i;
                if (ri >= (int)f->n_rows)
                    break;
                if (f->rows[ri].type != ROW_LANE || f->rows[ri].lane != b->lane)
                    continue;
                int c0 = vw__col_of(v, L, b->start), c1 = vw__col_of(v, L, b->end > 0 ? b->end - 1 : 0);
                for (int c = c0; c <= c1; c++) {
                    vw_cell *cell = &g->cells[(L->lanes.y + i) * g->w + L->timeline.x + c];
                    if (cell->ch == ' ')
                        cell->ch = v->ascii ? 'X' : 0x2588;
                    cell->role = ROLE_SELECTION;
                    cell->attr |= VW_A_BOLD;
                }
            }
        }
    }
    /* cursor */
    if (v->cursor >= v->t0 && v->cursor < v->t1) {
        int c = vw__col_of(v, L, v->cursor);
        for (int i = 0; i < L->lanes.h; i++) {
            int ri = v->row_scroll + i;
            if (ri >= (int)f->n_rows)
                break;
            vw_cell *cell = &g->cells[(L->lanes.y + i) * g->w + L->timeline.x + c];
            if (ri == v->cursor_row) {
                cell->attr |= VW_A_REVERSE;
                if (cell->ch == ' ')
                    cell->ch = v->ascii ? '|' : 0x2502;
                if (cell->role == ROLE_DEFAULT)
                    cell->role = ROLE_CURSOR;
            } else if (cell->ch == ' ' || cell->ch == 0x00B7 || cell->ch == '.') {
                cell->ch = v->ascii ? ':' : 0x2502;
                cell->role = ROLE_CURSOR;
            }
        }
    }
    /* scroll marks */
    if (v->row_scroll > 0)
        vw__put_cell(g, L->label_w, L->lanes.y, v->ascii ? '^' : 0x25B2, ROLE_DIM, 0);
    if (v->row_scroll + L->lanes.h < (int)f->n_rows)
        vw__put_cell(g, L->label_w, L->lanes.y + L->lanes.h - 1, v->ascii ? 'v' : 0x25BC, ROLE_DIM, 0);
}

/* The row of a lane, unfolding what hides it (a jump lands on it); the first row when even so
 * it is not shown (an idle lane while idle lanes are hidden). */
int vw__row_of_lane(vw_state *v, const st_store *s, size_t lane) {
    const st_lane_info *li = st_lane_get(s, lane);
    uint64_t keys[] = {fold_key(FOLD_PROCESS, li->producer, 0), fold_key(FOLD_DEVICE, li->producer, li->device),
                       fold_key(FOLD_THREAD, li->producer, li->id)};
    for (size_t k = 0; k < 3; k++)
        if ((k != 1 || li->kind == ST_LANE_STREAM) && (k != 2 || li->kind == ST_LANE_NVTX) && folded(v, keys[k]))
            fold_toggle(v, keys[k]);
    size_t n;
    vw_row *r = vw__rows_build(s, v, &n);
    int out = 0;
    for (size_t i = 0; r && i < n; i++)
        if (r[i].type == ROW_LANE && r[i].lane == lane && r[i].depth1 == 0)
            out = (int)i;
    free(r);
    return out;
}

/* The row of a range of a ranges lane: its depth's row when the thread's ranges are open by depth
 * (and it is not deeper than they open), else the lane's row. */
int vw__row_of_range(vw_state *v, const st_store *s, size_t lane, uint32_t depth) {
    int row = vw__row_of_lane(v, s, lane);
    const st_lane_info *li = st_lane_get(s, lane);
    if (li->kind == ST_LANE_NVTX && li->device == TP_NO_DEVICE && depth < VW_DEPTH_ROWS &&
        folded(v, fold_key(OPEN_RANGES, li->producer, li->id)) && depth < st_lane_depths(s, lane))
        row += 1 + (int)depth;
    return row;
}

/* c, C and e: fold the group under the cursor, unfold them all, hide the idle lanes. The cursor
 * stays on the group's own row. */
/* o: the ranges of the cursor's thread open into a row per depth, or close into one; the cursor
 * goes to their first row. */
static void open_ranges_cmd(vw_state *v, const st_store *s) {
    size_t n, lane = SIZE_MAX;
    vw_row *rows = vw__rows_build(s, v, &n);
    if (rows != NULL && v->cursor_row >= 0 && v->cursor_row < (int)n && rows[v->cursor_row].type == ROW_LANE) {
        const st_lane_info *li = st_lane_get(s, rows[v->cursor_row].lane);
        for (size_t l = 0; li->device == TP_NO_DEVICE && li->kind != ST_LANE_STREAM && l < st_lane_count(s); l++) {
            const st_lane_info *t = st_lane_get(s, l);
            if (t->kind == ST_LANE_NVTX && t->producer == li->producer && t->id == li->id)
                lane = l;
        }
    }
    free(rows);
    if (lane == SIZE_MAX || st_lane_depths(s, lane) == 0) {
        snprintf(v->message, sizeof v->message, "no ranges on this row's thread (o opens a thread's ranges by depth)");
        return;
    }
    const st_lane_info *li = st_lane_get(s, lane);
    int open = fold_toggle(v, fold_key(OPEN_RANGES, li->producer, li->id));
    size_t nd = st_lane_depths(s, lane);
    if (open)
        snprintf(v->message, sizeof v->message, "ranges by depth: %zu row%s%s (o closes)", nd < VW_DEPTH_ROWS ? nd : VW_DEPTH_ROWS,
                 nd == 1 ? "" : "s", nd > VW_DEPTH_ROWS ? ", the deepest left to the detail pane" : "");
    else
        snprintf(v->message, sizeof v->message, "ranges in one row (o opens them by depth)");
    v->cursor_row = vw__row_of_lane(v, s, lane);
}

void vw__fold_cmd(vw_state *v, const st_store *s, vw_cmd c) {
    if (c == VW_CMD_OPEN_RANGES) {
        open_ranges_cmd(v, s);
        return;
    }
    if (c == VW_CMD_UNFOLD_ALL) {
        size_t kept = 0, had = 0; /* threads' ranges opened by depth stay open */
        for (size_t i = 0; i < v->lanes.n_folds; i++) {
            if (v->lanes.folds[i] >> 56 == OPEN_RANGES)
                v->lanes.folds[kept++] = v->lanes.folds[i];
            else
                had++;
        }
        snprintf(v->message, sizeof v->message, "%s", had ? "every group unfolded" : "nothing is folded");
        v->lanes.n_folds = kept;
        return;
    }
    if (c == VW_CMD_HIDE_IDLE) {
        v->lanes.hide_idle = !v->lanes.hide_idle;
        snprintf(v->message, sizeof v->message, "%s", v->lanes.hide_idle ? "lanes with nothing in the window are hidden (e shows them)"
                                                                 : "every lane is shown");
        return;
    }
    size_t n;
    vw_row *rows = vw__rows_build(s, v, &n);
    if (rows == NULL || v->cursor_row < 0 || v->cursor_row >= (int)n) {
        free(rows);
        return;
    }
    vw_row r = rows[v->cursor_row];
    free(rows);
    uint64_t key;
    vw_row head = r; /* the row that names the group */
    if (r.type == ROW_PROCESS) {
        key = fold_key(FOLD_PROCESS, r.producer, 0);
    } else if (r.type == ROW_DEVICE) {
        key = fold_key(FOLD_DEVICE, r.producer, r.device);
    } else {
        const st_lane_info *li = st_lane_get(s, r.lane);
        if (li->kind == ST_LANE_STREAM) {
            key = fold_key(FOLD_DEVICE, li->producer, li->device);
            head = (vw_row){ROW_DEVICE, SIZE_MAX, li->producer, li->device, 0};
        } else if (li->device == TP_NO_DEVICE) { /* a thread and its ranges */
            key = fold_key(FOLD_THREAD, li->producer, li->id);
            if (li->kind == ST_LANE_NVTX)
                for (size_t l = 0; l < st_lane_count(s); l++) {
                    const st_lane_info *t = st_lane_get(s, l);
                    if (t->kind == ST_LANE_THREAD && t->producer == li->producer && t->id == li->id)
                        head = (vw_row){ROW_LANE, l, t->producer, t->device, 0};
                }
        } else {
            snprintf(v->message, sizeof v->message, "nothing to fold here");
            return;
        }
    }
    int now = fold_toggle(v, key);
    snprintf(v->message, sizeof v->message, "%s (c again: %s)", now ? "folded" : "unfolded", now ? "unfold" : "fold");
    rows = vw__rows_build(s, v, &n);
    for (size_t i = 0; rows && i < n; i++)
        if (rows[i].type == head.type && rows[i].producer == head.producer &&
            (head.type != ROW_DEVICE || rows[i].device == head.device) &&
            (head.type != ROW_LANE || (rows[i].lane == head.lane && rows[i].depth1 == head.depth1)))
            v->cursor_row = (int)i;
    free(rows);
}

void vw__lanes_free(vw_state *v) {
    free(v->lanes.folds);
    v->lanes.folds = NULL;
    v->lanes.n_folds = 0;
}
