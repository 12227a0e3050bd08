/*
 * The detail pane: the event under the cursor (what, where, when, how long), the other end of its
 * launch, what to change at a blocking call, its call site's frames, and the legend; and the keys
 * that act on that event (f fits it in the window, m marks it on the ruler).
 */
#include "screen_int.h"
#include "advice.h"
#include "text.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The event under the cursor: on the cursor row's lane, the event that covers the cursor time
 * (the longest, when several do), else the longest in the cursor's column. */
static const st_event *event_at_cursor(const frame_ctx *f, size_t *lane_out) {
    const vw_state *v = f->v;
    if (v->cursor_row < 0 || v->cursor_row >= (int)f->n_rows || f->rows[v->cursor_row].type != ROW_LANE)
        return NULL;
    size_t l = f->rows[v->cursor_row].lane, n;
    *lane_out = l;
    const st_event *e = st_lane_events(f->s, l, &n);
    if (f->rows[v->cursor_row].depth1 > 0) { /* a depth of a thread's ranges: its range at the cursor */
        size_t d = f->rows[v->cursor_row].depth1 - 1, m;
        const uint32_t *idx = st_lane_at_depth(f->s, l, d, &m);
        size_t k = st_lane_depth_find(f->s, l, d, v->cursor);
        return k < m && e[idx[k]].start <= v->cursor && e[idx[k]].start <= v->now ? &e[idx[k]] : NULL;
    }
    uint64_t w = (v->t1 - v->t0) / (uint64_t)f->L->timeline.w;
    if (w == 0)
        w = 1;
    int c = vw__col_of(v, f->L, v->cursor);
    uint64_t a = v->t0 + (uint64_t)c * w;
    /* the event starting at the cursor (where n and search put it), else the innermost covering it */
    size_t hi = st_lane_lower_bound(f->s, l, v->cursor + 1);
    const st_event *best = NULL;
    for (size_t k = 0; k < 64 && k < hi; k++) {
        const st_event *x = &e[hi - 1 - k];
        if (x->start > v->now)
            continue;
        if (x->start == v->cursor)
            return x;
        if (st_ev_end(f->s, x) > v->cursor && (best == NULL || st_ev_dur(f->s, x) < st_ev_dur(f->s, best)))
            best = x;
    }
    if (best)
        return best;
    st_bucket b;
    if (st_lane_summary(f->s, l, v->cursor, v->cursor + 1, 1, &b) == 0 && b.longest != UINT32_MAX &&
        e[b.longest].start <= v->now)
        return &e[b.longest];
    if (st_lane_summary(f->s, l, a, a + w, 1, &b) == 0 && b.longest != UINT32_MAX && e[b.longest].start < v->now)
        return &e[b.longest];
    return NULL;
}

/* The other end of a launch (Perfetto's flow arrow): for a GPU operation, the CUDA call that
 * launched it (same producer and correlation id, started before it); for a call, the GPU
 * operation it launched. Looks at the nearest FLOW_SCAN events of each lane on the right side. */
#define FLOW_SCAN 4096
static const st_event *flow_peer(const st_store *s, size_t lane, const st_event *e, size_t *peer_lane) {
    const st_lane_info *li = st_lane_get(s, lane);
    if (e->corr == 0 || st_ev_kind(s, e) == TP_K_SYNC || (li->kind != ST_LANE_STREAM && li->kind != ST_LANE_THREAD))
        return NULL; /* a synchronization record is a wait, not something launched */
    int want = li->kind == ST_LANE_STREAM ? ST_LANE_THREAD : ST_LANE_STREAM;
    const st_event *best = NULL;
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *o = st_lane_get(s, l);
        if ((int)o->kind != want || o->producer != li->producer)
            continue;
        size_t n;
        const st_event *ev = st_lane_events(s, l, &n);
        if (want == ST_LANE_THREAD) { /* the latest call with this id that started before it */
            size_t hi = st_lane_lower_bound(s, l, e->start + 1);
            for (size_t k = 0; k < FLOW_SCAN && k < hi; k++) {
                const st_event *x = &ev[hi - 1 - k];
                if (x->corr == e->corr && st_ev_kind(s, x) == TP_K_API) {
                    if (best == NULL || x->start > best->start) {
                        best = x;
                        *peer_lane = l;
                    }
                    break;
                }
            }
        } else { /* the first GPU operation with this id that started after it */
            for (size_t k = st_lane_lower_bound(s, l, e->start), m = 0; k < n && m < FLOW_SCAN; k++, m++) {
                const st_event *x = &ev[k];
                if (x->corr == e->corr && st_ev_kind(s, x) != TP_K_API && st_ev_kind(s, x) != TP_K_SYNC) {
                    if (best == NULL || x->start < best->start) {
                        best = x;
                        *peer_lane = l;
                    }
                    break;
                }
            }
        }
    }
    return best;
}

/* The range a host event sits in (Perfetto's parent slice): for a call, the innermost range of
 * its thread that holds it (an operator, an annotation, an NVTX range); for a range, the one a
 * depth above that holds it. Its index in the ranges lane *rlane; SIZE_MAX when none. */
static size_t holder_of(const st_store *s, size_t lane, const st_event *e, size_t *rlane) {
    const st_lane_info *li = st_lane_get(s, lane);
    if (li->device != TP_NO_DEVICE || li->kind == ST_LANE_STREAM)
        return SIZE_MAX;
    if (li->kind == ST_LANE_NVTX) {
        size_t m, n;
        if (st_ev_aux(s, e) == 0 || st_ev_aux(s, e) > st_lane_depths(s, lane))
            return SIZE_MAX;
        const uint32_t *idx = st_lane_at_depth(s, lane, st_ev_aux(s, e) - 1, &m);
        const st_event *ev = st_lane_events(s, lane, &n);
        size_t k = st_lane_depth_find(s, lane, st_ev_aux(s, e) - 1, e->start);
        *rlane = lane;
        return k < m && ev[idx[k]].start <= e->start ? idx[k] : SIZE_MAX;
    }
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *t = st_lane_get(s, l);
        if (t->kind == ST_LANE_NVTX && t->device == TP_NO_DEVICE && t->producer == li->producer && t->id == li->id) {
            *rlane = l;
            return st_lane_range_at(s, l, e->start, st_ev_end(s, e));
        }
    }
    return SIZE_MAX;
}

/* One line on the range a host event sits in, and the key that goes there. */
static void holder_text(const frame_ctx *f, size_t lane, const st_event *e, char *out, size_t n) {
    size_t rl = 0, h = holder_of(f->s, lane, e, &rl), ne;
    out[0] = '\0';
    if (h == SIZE_MAX)
        return;
    const st_event *r = &st_lane_events(f->s, rl, &ne)[h];
    char nm[256];
    vw__sanitized(nm, sizeof nm, st_str(f->s, st_ev_name(f->s, r)));
    snprintf(out, n, " in %s (depth %u of the thread's ranges; r goes there)", nm, st_ev_aux(f->s, r));
}

/* One line on the launch behind a GPU operation, or the operation behind a call. */
static void flow_text(const frame_ctx *f, size_t lane, const st_event *e, char *out, size_t n) {
    const st_store *s = f->s;
    out[0] = '\0';
    size_t pl = 0;
    const st_event *p = flow_peer(s, lane, e, &pl);
    if (p == NULL)
        return;
    const st_lane_info *pi = st_lane_get(s, pl);
    char nm[160], d[32];
    vw__sanitized(nm, sizeof nm, st_str(s, st_ev_name(s, p)));
    if (st_ev_kind(s, p) == TP_K_API) {
        vw_fmt_dur(d, sizeof d, e->start > p->start ? e->start - p->start : 0, f->v->ascii);
        snprintf(out, n, " %s launched by %s on thread %u; %s from the call to the start", f->v->ascii ? "<-" : "\xe2\x86\x90",
                 nm, pi->id, d);
    } else {
        vw_fmt_dur(d, sizeof d, p->start > e->start ? p->start - e->start : 0, f->v->ascii);
        char what[200];
        if (st_ev_kind(s, p) == TP_K_MEMCPY)
            snprintf(what, sizeof what, "copy %s", tp_copy_kind_name(st_ev_sub(s, p)));
        else if (st_ev_kind(s, p) == TP_K_KERNEL && nm[0])
            snprintf(what, sizeof what, "kernel %s", nm);
        else
            snprintf(what, sizeof what, "%s", tp_kind_name(st_ev_kind(s, p)));
        snprintf(out, n, " %s %s on GPU%u stream %u starts %s after the call", f->v->ascii ? "->" : "\xe2\x86\x92",
                 what, pi->device, pi->id, d);
    }
}

/* What the lanes' glyphs and colours mean, on one row. */
static void render_legend(frame_ctx *f, int y) {
    const vw_state *v = f->v;
    vw_grid *g = f->g;
    static const struct { int cat; const char *what; } items[] = {
        {ST_CAT_KERNEL, "kernel"}, {ST_CAT_MEMCPY, "copy"}, {ST_CAT_MEMSET, "memset"}, {ST_CAT_SYNC, "sync"},
        {ST_CAT_API, "call"}, {ST_CAT_BLOCKED, "blocked"}, {ST_CAT_NVTX, "range"},
    };
    int x = vw__put_str(g, v, 0, y, g->w, " ", ROLE_DIM, 0);
    for (size_t i = 0; i < sizeof items / sizeof items[0] + 1 && x + 2 < g->w; i++) {
        int last = i == sizeof items / sizeof items[0];
        vw__put_cell(g, x, y, last ? (v->ascii ? '.' : 0x00B7) : vw__cell_glyph(v, items[i].cat, 1.0),
                 last ? ROLE_BUBBLE : vw__cat_role(items[i].cat), last ? VW_A_BOLD : 0);
        x += 2 + vw__put_str(g, v, x + 2, y, g->w - x - 2, last ? "GPU idle" : items[i].what, ROLE_DIM, 0);
        x += vw__put_str(g, v, x, y, g->w - x, "  ", ROLE_DIM, 0);
    }
}

/* What to change at a blocking call, as the report says it, on row y; 1 when there is a fix. */
static int render_fix(frame_ctx *f, size_t lane, const st_event *e, int y) {
    const st_store *s = f->s;
    const vw_state *v = f->v;
    const st_lane_info *tl = st_lane_get(s, lane);
    for (size_t i = 0; i < v->an->n_sites; i++) {
        const an_site *site = &v->an->sites[i];
        if (site->producer != tl->producer || site->callsite != st_ev_value(s, e) || (!st_ev_value(s, e) && site->name != st_ev_name(s, e)))
            continue;
        an_advice a;
        an_advise(s, site, &a);
        if (a.fix == AN_FIX_NONE)
            return 0;
        char fix[512];
        snprintf(fix, sizeof fix, " %s. Fix: %s.", a.cause, a.change);
        vw__put_str(f->g, v, 0, y, f->g->w, fix, ROLE_WARN, 0);
        return 1;
    }
    return 0;
}

/* One frame of a call site, numbered i, marked '>' when the site is named after it. */
static void frame_text(const st_store *s, const st_frame *fr, size_t i, int named, char *raw, size_t n) {
    const char *mark = named ? " > " : "   ";
    if (fr->kind == TP_FRAME_PYTHON && fr->line == 0)
        snprintf(raw, n, "%s#%zu py  %s", mark, i, st_str(s, fr->func));
    else if (fr->kind == TP_FRAME_PYTHON)
        snprintf(raw, n, "%s#%zu py  %s:%u  %s", mark, i, st_str(s, fr->file), fr->line, st_str(s, fr->func));
    else if (fr->kind == TP_FRAME_OP)
        snprintf(raw, n, "%s#%zu op  %s", mark, i, st_str(s, fr->func));
    else if (fr->file && fr->line)
        snprintf(raw, n, "%s#%zu     %s:%u  %s  (%s+0x%" PRIx64 ")", mark, i, st_str(s, fr->file), fr->line,
                 st_str(s, fr->func), cm_base_name(st_str(s, fr->module)), fr->pc);
    else if (fr->pc == 0) /* an imported frame: a function and its module, no address */
        snprintf(raw, n, "%s#%zu     %s  %s", mark, i, fr->func ? st_str(s, fr->func) : "??", st_str(s, fr->module));
    else
        snprintf(raw, n, "%s#%zu     %s  %s+0x%" PRIx64, mark, i, fr->func ? st_str(s, fr->func) : "??",
                 st_str(s, fr->module), fr->pc);
}

/* The frames of a call site on room rows from y, from the innermost, moved on so that the one
 * the site is named after (marked '>') is in sight when they do not all fit. */
static void render_frames(frame_ctx *f, uint64_t callsite, int y, size_t room) {
    const st_store *s = f->s;
    size_t nf;
    const st_frame *fr = st_callsite_frames(s, callsite, &nf);
    const st_frame *named = st_site_frame(s, callsite);
    size_t first = 0, at = named != NULL ? (size_t)(named - fr) : 0;
    if (at >= room)
        first = at - room / 2;
    for (size_t i = first; i < nf && i - first < room; i++) {
        char raw[512], clean[512];
        frame_text(s, &fr[i], i, &fr[i] == named, raw, sizeof raw);
        vw__sanitized(clean, sizeof clean, raw);
        vw__put_str(f->g, f->v, 0, y + (int)(i - first), f->g->w, clean,
                    fr[i].kind == TP_FRAME_PYTHON ? ROLE_LABEL : ROLE_DEFAULT, 0);
    }
}

/* The rows the pane has when the cursor is on nothing: the stall row selected in the panel, its
 * figures and its call site's frames. */
static void render_selected_site(frame_ctx *f, int y, int rows) {
    const vw_state *v = f->v;
    if (v->stalls.n_sites == 0 || v->stalls.sel < 0 || (size_t)v->stalls.sel >= v->stalls.n_sites)
        return;
    const an_stall_site *x = &v->stalls.sites[v->stalls.sel];
    char label[VW_STALL_LABEL], tot[32], buf[160];
    size_t head = vw__stall_label(v, v->stalls.sel, label);
    vw_fmt_dur(tot, sizeof tot, x->total_ns, v->ascii);
    snprintf(buf, sizeof buf, " top stall %d: %" PRIu64 " call%s, %s blocked at ", v->stalls.sel + 1, x->count,
             x->count == 1 ? "" : "s", tot);
    int at = vw__put_str(f->g, v, 0, y, f->g->w, buf, ROLE_LABEL, 0);
    vw__put_str_tail(f->g, v, at, y, f->g->w - at, label, head, ROLE_LABEL, 0);
    if (x->callsite != 0 && rows > 1)
        render_frames(f, x->callsite, y + 1, (size_t)(rows - 1));
}

/* A line of the pane below row *y, when there is one to write: it takes that row. */
static void pane_line(frame_ctx *f, int *y, int *rows, const char *text, int role) {
    if (text[0] == '\0')
        return;
    vw__put_str(f->g, f->v, 0, *y + 1, f->g->w, text, role, 0);
    (*y)++;
    (*rows)--;
}

void vw__render_detail(frame_ctx *f) {
    const st_store *s = f->s;
    const vw_state *v = f->v;
    vw_grid *g = f->g;
    const vw_layout *L = f->L;
    int y = L->detail.y;
    int rows = L->detail.h;
    if (rows >= 4) { /* room to spare: the legend on the pane's last row */
        render_legend(f, y + rows - 1);
        rows--;
    }
    if (v->ruler.marked && v->ruler.what[0] && rows >= 3) { /* a dragged span: what ran in it, first */
        vw__put_str(g, v, 0, y, g->w, v->ruler.what, ROLE_SELECTION, VW_A_BOLD);
        y++;
        rows--;
    }
    size_t lane = 0;
    const st_event *e = event_at_cursor(f, &lane);
    char buf[1024], nm[512], d[32], st[32];
    if (e == NULL) {
        char cur[32];
        vw_fmt_dur(cur, sizeof cur, v->cursor > v->origin ? v->cursor - v->origin : 0, v->ascii);
        snprintf(buf, sizeof buf, " cursor +%s  (no event here: arrows move, +/- zoom, n next stall)", cur);
        vw__put_str(g, v, 0, y, g->w, buf, ROLE_DIM, 0);
        if (rows > 3)
            render_selected_site(f, y + 1, rows - 1);
        return;
    }
    const st_lane_info *li = st_lane_get(s, lane);
    /* a range is named as what it is, not by where it came from: the store keeps NVTX ranges and
     * a profiler's annotations alike, telling apart only its operators */
    const char *kname = st_ev_kind(s, e) == TP_K_API   ? ((st_ev_flags(s, e) & TP_F_BLOCKING) ? "BLOCKING call" : "call")
                        : st_ev_kind(s, e) != TP_K_NVTX ? tp_kind_name(st_ev_kind(s, e))
                        : st_ev_flags(s, e) & ST_EV_OP  ? "op"
                        : st_ev_sub(s, e) == TP_NVTX_INSTANT ? "mark"
                                                             : "range";
    vw__sanitized(nm, sizeof nm, st_str(s, st_ev_name(s, e)));
    if (st_ev_kind(s, e) == TP_K_MEMCPY)
        snprintf(nm, sizeof nm, "%s %s", tp_copy_kind_name(st_ev_sub(s, e)), st_ev_mem(s, e) >> 4 == TP_MEM_PAGEABLE || (st_ev_mem(s, e) & 15) == TP_MEM_PAGEABLE ? "(pageable)" : "");
    else if (st_ev_kind(s, e) == TP_K_MEMSET)
        snprintf(nm, sizeof nm, "%s memory", tp_mem_kind_name(st_ev_sub(s, e)));
    else if (st_ev_kind(s, e) == TP_K_SYNC)
        snprintf(nm, sizeof nm, "%s", tp_sync_type_name(st_ev_sub(s, e)));
    int x = vw__put_str(g, v, 0, y, 16, " ", ROLE_DEFAULT, 0);
    x += vw__put_str(g, v, x, y, 16, kname, st_ev_kind(s, e) == TP_K_API && (st_ev_flags(s, e) & TP_F_BLOCKING) ? ROLE_BLOCKED
                                        : vw__cat_role(st_event_cat(s, e)), VW_A_BOLD);
    x += vw__put_str(g, v, x, y, 2, "  ", ROLE_DEFAULT, 0);
    vw__put_str(g, v, x, y, g->w - x, nm, ROLE_DEFAULT, VW_A_BOLD);
    /* second line: where, when, how long, bytes, call site */
    y++;
    vw_fmt_dur(d, sizeof d, st_ev_dur(s, e), v->ascii);
    vw_fmt_dur(st, sizeof st, e->start > v->origin ? e->start - v->origin : 0, v->ascii);
    char where[96];
    if (li->kind == ST_LANE_STREAM)
        snprintf(where, sizeof where, "GPU%u stream %u", li->device, li->id);
    else
        snprintf(where, sizeof where, "thread %u", li->id);
    int n = snprintf(buf, sizeof buf, " %s  start +%s  dur %s", where, st, d);
    if (st_ev_kind(s, e) == TP_K_MEMCPY || st_ev_kind(s, e) == TP_K_MEMSET) {
        char by[32];
        vw__fmt_bytes(by, sizeof by, st_ev_value(s, e));
        n += snprintf(buf + n, sizeof buf - (size_t)n, "  %s", by);
        if (st_ev_kind(s, e) == TP_K_MEMCPY && st_ev_end(s, e) > e->start)
            n += snprintf(buf + n, sizeof buf - (size_t)n, " (%.1f GB/s)", (double)st_ev_value(s, e) / (double)st_ev_dur(s, e));
    } else if (st_ev_kind(s, e) == TP_K_KERNEL && st_ev_value(s, e)) {
        n += snprintf(buf + n, sizeof buf - (size_t)n, "  %" PRIu64 " blocks x %u threads", st_ev_value(s, e), st_ev_aux(s, e));
    }
    if (st_ev_corr(s, e))
        n += snprintf(buf + n, sizeof buf - (size_t)n, "  corr %u", st_ev_corr(s, e));
    int x2 = vw__put_str(g, v, 0, y, g->w, buf, ROLE_DEFAULT, 0);
    if (st_ev_kind(s, e) == TP_K_API && st_ev_value(s, e)) {
        char site[512];
        an_site_label(s, st_ev_value(s, e), st_ev_name(s, e), site, sizeof site);
        x2 += vw__put_str(g, v, x2, y, 4, v->ascii ? "  @ " : "  \xe2\x86\x90 ", ROLE_DIM, 0);
        vw__put_str(g, v, x2, y, g->w - x2, site, ROLE_LABEL, VW_A_BOLD);
    }
    /* with room: the range it sits in (when the launch, the fix and a frame still fit after it),
     * the launch's other end, then (expanded, or rows the lanes leave) every frame of the call site */
    if (rows > 5) {
        char in[320];
        holder_text(f, lane, e, in, sizeof in);
        pane_line(f, &y, &rows, in, ROLE_NVTX);
    }
    if (rows > 2) {
        char flow[320];
        flow_text(f, lane, e, flow, sizeof flow);
        pane_line(f, &y, &rows, flow, ROLE_LABEL);
    }
    /* a blocking call: what to change there, as the report says it */
    if (rows > 2 && st_ev_kind(s, e) == TP_K_API && (st_ev_flags(s, e) & TP_F_BLOCKING) && v->an != NULL && render_fix(f, lane, e, y + 1)) {
        y++;
        rows--;
    }
    if (rows > 2 && st_ev_kind(s, e) == TP_K_API && st_ev_value(s, e)) {
        render_frames(f, st_ev_value(s, e), y + 1, (size_t)(rows - 2));
    } else if (v->detail && rows > 2) {
        vw__put_str(g, v, 1, y + 1, g->w - 2, "(no call site for this event; enter closes the detail pane)", ROLE_DIM, 0);
    }
}

/* The event under the cursor, as the detail pane names it; NULL when none. */
static const st_event *cursor_event(vw_state *v, const st_store *s, const vw_layout *L, size_t *lane) {
    frame_ctx f = {.s = s, .v = v, .L = L};
    f.rows = vw__rows_build(s, v, &f.n_rows);
    const st_event *e = f.rows ? event_at_cursor(&f, lane) : NULL;
    free(f.rows);
    return e;
}

/* f and m: the event under the cursor fills the window, or is marked. */
void vw__select_cmd(vw_state *v, const st_store *s, const vw_layout *L, vw_cmd c) {
    size_t lane = 0;
    const st_event *e = L->too_small ? NULL : cursor_event(v, s, L, &lane);
    if (c == VW_CMD_MARK && v->ruler.marked && (e == NULL || (e->start == v->ruler.mark0 && st_ev_end(s, e) == v->ruler.mark1))) {
        v->ruler.marked = 0;
        snprintf(v->message, sizeof v->message, "mark removed");
        return;
    }
    if (e == NULL) {
        snprintf(v->message, sizeof v->message, "no event under the cursor");
        return;
    }
    if (c == VW_CMD_RANGE) { /* to the range it sits in; again: the one around that */
        size_t rl = 0, h = holder_of(s, lane, e, &rl), ne;
        if (h == SIZE_MAX) {
            snprintf(v->message, sizeof v->message, "no range holds the event under the cursor");
            return;
        }
        const st_event *r = &st_lane_events(s, rl, &ne)[h];
        char nm[96];
        vw__sanitized(nm, sizeof nm, st_str(s, st_ev_name(s, r)));
        v->cursor = r->start;
        vw__reveal(v, r->start, st_ev_end(s, r), L->timeline.w);
        v->cursor_row = vw__row_of_range(v, s, rl, st_ev_aux(s, r));
        v->focus = VW_FOCUS_TIMELINE;
        snprintf(v->message, sizeof v->message, "in %s, depth %u (r again: the range around it)", nm, st_ev_aux(s, r));
        return;
    }
    uint64_t d = st_ev_end(s, e) > e->start ? st_ev_dur(s, e) : 1;
    if (c == VW_CMD_FIT_SEL) {
        /* the event in the middle eight tenths of the window */
        uint64_t w = d + d / 4 > (uint64_t)L->timeline.w ? d + d / 4 : (uint64_t)L->timeline.w;
        v->t0 = e->start > (w - d) / 2 ? e->start - (w - d) / 2 : 0;
        if (v->t0 < v->origin && v->origin <= e->start)
            v->t0 = v->origin;
        v->t1 = v->t0 + w;
        v->cursor = e->start;
        v->follow = 0;
        v->live_span = 0;
        return;
    }
    v->ruler.marked = 1;
    v->ruler.what[0] = '\0';
    v->ruler.mark0 = e->start;
    v->ruler.mark1 = e->start + d;
    char dur[32], nm[96];
    vw_fmt_dur(dur, sizeof dur, d, v->ascii);
    vw__sanitized(nm, sizeof nm, st_str(s, st_ev_name(s, e)));
    snprintf(v->message, sizeof v->message, "marked %s: %s", nm[0] ? nm : tp_kind_name(st_ev_kind(s, e)), dur);
}
