/*
 * The view model's state and frame (screen.h): the state made and kept valid as the store grows, the
 * layout of a frame, and a frame drawn panel by panel (each panel is a file of its own,
 * screen_int.h). Pure: no terminal, no I/O; the clock is read only for vw_state.timing.
 */
#include "screen_int.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void vw_layout_compute(int w, int h, int gpu_rows, int detail_expanded, vw_layout *L) {
    memset(L, 0, sizeof *L);
    if (w < VW_MIN_W || h < VW_MIN_H) {
        L->too_small = 1;
        return;
    }
    int g = clampi(gpu_rows, 1, 1 + (h - VW_MIN_H) / 8);
    int stalls = clampi(h / 4, 6, 16);
    int detail = 2;
    if (detail_expanded) {
        detail += stalls;
        stalls = 0;
    }
    int y = 0;
    L->title = (vw_rect){0, y, w, 1};
    y += 1;
    L->gpus = (vw_rect){0, y, w, g};
    y += g;
    L->ruler = (vw_rect){0, y, w, 1};
    y += 1;
    int lanes = h - y - detail - stalls - 1;
    L->lanes = (vw_rect){0, y, w, lanes};
    y += lanes;
    L->detail = (vw_rect){0, y, w, detail};
    y += detail;
    L->stalls = (vw_rect){0, y, w, stalls};
    y += stalls;
    L->keys = (vw_rect){0, y, w, 1};
    L->label_w = clampi(w / 7, 12, 26);
    L->timeline = (vw_rect){L->label_w + 1, L->lanes.y, w - L->label_w - 1, lanes};
}

void vw_layout_fit(vw_layout *L, int lane_rows, int site_rows) {
    if (L->too_small)
        return;
    int lanes = L->lanes.h, detail = L->detail.h, stalls = L->stalls.h;
    int want = 1 + (site_rows > 1 ? site_rows : 1); /* the header, then a row per site (or the "none" line) */
    if (stalls > want) { /* the panel shrinks to its rows, the lanes get them */
        lanes += stalls - want;
        stalls = want;
    }
    int need = lane_rows > VW_MIN_LANES ? lane_rows : VW_MIN_LANES;
    if (lanes > need) { /* rows the lanes would leave empty: more stall rows, then the detail pane */
        int spare = lanes - need, more = want > stalls ? mini(want - stalls, spare) : 0;
        if (stalls == 0 && more < 3) /* the detail pane took the panel's rows: back only with a row or two of it */
            more = 0;
        stalls += more;
        detail += spare - more;
        lanes = need;
    }
    L->lanes.h = lanes;
    L->timeline.h = lanes;
    L->detail = (vw_rect){0, L->lanes.y + lanes, L->detail.w, detail};
    L->stalls = (vw_rect){0, L->detail.y + detail, L->stalls.w, stalls};
}

void vw_layout_for(const vw_state *v, const st_store *s, int w, int h, vw_layout *L) {
    size_t devices, rows = vw__rows_walk(s, v, NULL, &devices);
    vw_layout_compute(w, h, devices > INT_MAX ? INT_MAX : (int)devices, v->detail, L);
    size_t panel = v->stalls.breakdown ? vw__breakdown_rows(v) : v->stalls.n_sites;
    int strip = v->steps != NULL && v->steps->n_steps > 0;
    vw_layout_fit(L, (rows > INT_MAX - 1 ? INT_MAX - 1 : (int)rows) + strip, panel > INT_MAX ? INT_MAX : (int)panel);
    if (strip && !L->too_small && L->lanes.h > VW_MIN_LANES) { /* the step strip: the lanes' first row */
        L->steps = (vw_rect){0, L->lanes.y, w, 1};
        L->lanes.y++;
        L->lanes.h--;
        L->timeline.y = L->lanes.y;
        L->timeline.h = L->lanes.h;
    }
}

void vw_too_small_text(int w, int h, char *out, size_t n) {
    int len = snprintf(out, n, "terminal too small: %dx%d, synctop needs %dx%d", w, h, VW_MIN_W, VW_MIN_H);
    if (len > w)
        len = snprintf(out, n, "too small: %dx%d, needs %dx%d", w, h, VW_MIN_W, VW_MIN_H);
    if (len > w)
        len = snprintf(out, n, "needs %dx%d", VW_MIN_W, VW_MIN_H);
    if (len > w)
        snprintf(out, n, "%dx%d", VW_MIN_W, VW_MIN_H);
}

void vw_state_init(vw_state *v, vw_mode mode, const st_store *s) {
    memset(v, 0, sizeof *v);
    v->mode = mode;
    uint64_t t0, t1;
    st_store_span(s, &t0, &t1);
    v->origin = t0;
    v->end = t1;
    v->t0 = t0;
    v->t1 = t1 > t0 ? t1 : t0 + 1000000;
    v->now = UINT64_MAX;
    v->paused = mode == VW_REPLAY; /* a replay showing it all has played to its end */
    v->cursor = t0;
    v->follow = 1;
    v->live_span = mode == VW_LIVE ? VW_LIVE_SPAN_NS : 0;
    v->speed = 1.0;
    v->load_progress = 1.0;
    v->stalls.worst_pos = -1;
    v->store = s;
}

void vw_state_free(vw_state *v) {
    vw__stalls_free(v);
    vw__lanes_free(v);
    vw__header_free(v);
}

void vw_state_settle(vw_state *v, const st_store *s, int w, int h) {
    vw__fold_new_processes(v, s);
    vw_layout L;
    vw_layout_for(v, s, w, h, &L);
    uint64_t cols = L.too_small ? 1 : (uint64_t)L.timeline.w;
    uint64_t width = v->t1 > v->t0 ? v->t1 - v->t0 : 1;
    if (width < cols)
        width = cols;
    uint64_t lim = v->end > v->origin ? v->end - v->origin : 1;
    if (width > lim + lim / 10 + cols)
        width = lim + lim / 10 + cols;
    uint64_t shown = v->now < v->end ? v->now : v->end;
    if (v->follow && v->mode == VW_LIVE && v->now == UINT64_MAX) {
        /* the newest events at the right edge; the window grows with what arrived (from its
         * start, with the same margin on the right) until it spans live_span, then slides */
        if (v->live_span > 0) {
            uint64_t span = v->end > v->origin ? v->end - v->origin : 0;
            width = span < v->live_span ? span + span / 49 : v->live_span;
            if (width < cols)
                width = cols;
        }
        v->t1 = v->end + width / 50;
        v->t0 = v->t1 > width ? v->t1 - width : 0;
    } else if (v->follow && v->mode == VW_REPLAY && v->now != UINT64_MAX && !v->paused &&
               (shown > v->t1 || shown < v->t0)) {
        /* replay: the moving "now" pages the window forward, like a chart recorder, at any zoom;
         * paused, the window is the user's to move */
        v->t0 = shown > width / 10 ? shown - width / 10 : 0;
        if (v->t0 < v->origin)
            v->t0 = v->origin;
        v->t1 = v->t0 + width;
    } else {
        /* the window stays on the trace: not before its start, not far past its end */
        uint64_t right = v->end + width / 50;
        if (v->t0 + width > right && right > v->origin + width)
            v->t0 = right - width;
        if (v->t0 < v->origin)
            v->t0 = v->origin;
        v->t1 = v->t0 + width;
    }
    if (v->cursor < v->t0)
        v->cursor = v->t0;
    if (v->cursor >= v->t1)
        v->cursor = v->t1 - 1;
    size_t nr;
    vw_row *r = vw__rows_build(s, v, &nr);
    free(r);
    if (v->cursor_row >= (int)nr)
        v->cursor_row = nr ? (int)nr - 1 : 0;
    if (v->cursor_row < 0)
        v->cursor_row = 0;
    int vis = L.too_small ? 1 : L.lanes.h;
    if (v->cursor_row < v->row_scroll)
        v->row_scroll = v->cursor_row;
    if (v->cursor_row >= v->row_scroll + vis)
        v->row_scroll = v->cursor_row - vis + 1;
    if (v->row_scroll > (int)nr - vis)
        v->row_scroll = (int)nr - vis;
    if (v->row_scroll < 0)
        v->row_scroll = 0;
    int srows = L.stalls.h - 1;
    if (v->stalls.sel >= (int)v->stalls.n_sites)
        v->stalls.sel = v->stalls.n_sites ? (int)v->stalls.n_sites - 1 : 0;
    if (v->stalls.sel < 0)
        v->stalls.sel = 0;
    if (srows > 0) {
        if (v->stalls.sel < v->stalls.scroll)
            v->stalls.scroll = v->stalls.sel;
        if (v->stalls.sel >= v->stalls.scroll + srows)
            v->stalls.scroll = v->stalls.sel - srows + 1;
    }
}

const char *const vw_part_names[VW_PART_N_] = {"layout and rows", "title", "GPU header", "ruler", "steps",
                                                "lanes", "detail", "stalls", "key bar"};

/* With v->timing: adds the time since *at to part's sum, and starts the next part's clock. */
static void part_done(vw_state *v, int part, struct timespec *at) {
    if (v->timing == NULL)
        return;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    v->timing[part] += (double)(now.tv_sec - at->tv_sec) + (double)(now.tv_nsec - at->tv_nsec) * 1e-9;
    *at = now;
}

void vw_render_loading(const vw_state *v, vw_grid *g, const char *name, uint64_t done, uint64_t total) {
    if (vw_grid_resize(g, g->w, g->h) != 0)
        return;
    for (int y = 0; y < g->h; y++)
        vw__fill(g, 0, y, g->w, ROLE_DEFAULT, 0);
    vw__fill(g, 0, 0, g->w, ROLE_TITLE, 0);
    char safe[256], line[400], d[32], t[32];
    vw__sanitized(safe, sizeof safe, name);
    snprintf(line, sizeof line, " synctop  reading %s", safe);
    vw__put_str(g, v, 0, 0, g->w, line, ROLE_TITLE, VW_A_BOLD);
    vw__fmt_bytes(d, sizeof d, done);
    int bar_w = g->w > 60 ? 40 : g->w / 2, y = g->h / 2;
    if (total > 0) {
        vw__fmt_bytes(t, sizeof t, total);
        double frac = done >= total ? 1.0 : (double)done / (double)total;
        int fill = (int)(frac * bar_w);
        int x = (g->w - bar_w) / 2;
        for (int i = 0; i < bar_w && y > 0; i++)
            vw__put_cell(g, x + i, y, i < fill ? (v->ascii ? '#' : 0x2588) : (v->ascii ? '.' : 0x2591),
                         i < fill ? ROLE_KERNEL : ROLE_DIM, 0);
        snprintf(line, sizeof line, "%.0f%%  %s of %s", frac * 100, d, t);
    } else {
        snprintf(line, sizeof line, "%s read", d);
    }
    int n = (int)strlen(line);
    vw__put_str(g, v, n < g->w ? (g->w - n) / 2 : 0, y + 1, g->w, line, ROLE_DEFAULT, 0);
    const char *hint = "a profiler trace is read whole before it is shown; q stops";
    n = (int)strlen(hint);
    vw__put_str(g, v, n < g->w ? (g->w - n) / 2 : 0, y + 3, g->w, hint, ROLE_DIM, 0);
}

void vw_render(const st_store *s, vw_state *v, vw_grid *g) {
    struct timespec at = {0};
    if (v->timing)
        clock_gettime(CLOCK_MONOTONIC, &at);
    if (vw_grid_resize(g, g->w, g->h) != 0)
        return;
    vw__fold_new_processes(v, s);
    vw_layout L;
    vw_layout_for(v, s, g->w, g->h, &L);
    if (L.too_small) {
        char m[96];
        vw_too_small_text(g->w, g->h, m, sizeof m);
        int n = (int)strlen(m);
        vw__put_str(g, v, n < g->w ? (g->w - n) / 2 : 0, g->h / 2, g->w, m, ROLE_WARN, VW_A_BOLD);
        return;
    }
    vw_state_settle(v, s, g->w, g->h);
    frame_ctx f = {.s = s, .v = v, .g = g, .L = &L};
    f.rows = vw__rows_build(s, v, &f.n_rows);
    f.buf = calloc((size_t)L.timeline.w, sizeof *f.buf);
    f.dev = calloc((size_t)L.timeline.w, sizeof *f.dev);
    f.bubble_col = calloc((size_t)L.timeline.w, 1);
    f.bmax = v->an ? v->an->bubble_max_ns : 0;
    if (f.buf && f.dev && f.bubble_col) {
        part_done(v, VW_PART_SETUP, &at);
        vw__render_title(s, v, g, &L);
        part_done(v, VW_PART_TITLE, &at);
        vw__render_gpus(s, v, g, &L);
        part_done(v, VW_PART_GPUS, &at);
        vw__render_ruler(v, g, &L);
        part_done(v, VW_PART_RULER, &at);
        vw__render_steps(s, v, g, &L, v->cursor_row < (int)f.n_rows ? f.rows[v->cursor_row].producer : 0);
        part_done(v, VW_PART_STEPS, &at);
        vw__render_lanes(&f);
        part_done(v, VW_PART_LANES, &at);
        vw__render_detail(&f);
        part_done(v, VW_PART_DETAIL, &at);
        vw__render_stalls(&f);
        part_done(v, VW_PART_STALLS, &at);
        vw__render_keys(v, g, &L);
        if (v->help)
            vw__render_help(v, g);
        part_done(v, VW_PART_KEYS, &at);
    }
    free(f.rows);
    free(f.buf);
    free(f.dev);
    free(f.bubble_col);
    vw__bubble_rows_free(&f.br);
}
