/*
 * The keys and clicks of the view model (screen.h): each command goes to the panel it belongs to
 * (keys.h names them); the ones that move the viewport itself (the cursor, the window, play and
 * pause) and switch the panels and overlays are answered here. Pure, like the rest of the view.
 */
#include "screen_int.h"

#include <stdio.h>
#include <string.h>

static uint64_t time_of(const vw_state *v, const vw_layout *L, int col) {
    uint64_t w = (v->t1 - v->t0) / (uint64_t)L->timeline.w;
    return v->t0 + (uint64_t)col * w;
}

static void zoom(vw_state *v, uint64_t at, double factor, uint64_t min_w) {
    if (at < v->t0)
        at = v->t0;
    if (at > v->t1)
        at = v->t1;
    double w = (double)(v->t1 - v->t0), nw = w * factor;
    if (nw < (double)min_w)
        nw = (double)min_w;
    double frac = w > 0 ? (double)(at - v->t0) / w : 0.5;
    double t0 = (double)at - frac * nw;
    if (t0 < 0)
        t0 = 0;
    v->t0 = (uint64_t)t0;
    v->t1 = v->t0 + (uint64_t)nw;
    v->live_span = 0; /* the width is the user's now */
    if (factor > 1 && v->mode == VW_LIVE)
        return;
    v->follow = v->mode == VW_REPLAY ? v->follow : 0;
}

static void pan(vw_state *v, int64_t d) {
    if (d < 0 && (uint64_t)-d > v->t0)
        d = -(int64_t)v->t0;
    v->t0 = (uint64_t)((int64_t)v->t0 + d);
    v->t1 = (uint64_t)((int64_t)v->t1 + d);
    v->cursor = (uint64_t)((int64_t)v->cursor + d);
    if (v->mode == VW_LIVE)
        v->follow = 0;
}

/* The cursor in time, the lane or stall row under it. */
static void move_cmd(vw_state *v, const vw_layout *L, vw_cmd c, uint64_t colw) {
    int stalls = v->focus == VW_FOCUS_STALLS;
    int stall_page = L->stalls.h > 2 ? L->stalls.h - 2 : 1, lane_page = L->lanes.h > 1 ? L->lanes.h - 1 : 1;
    switch (c) {
    case VW_CMD_LEFT:
        if (v->cursor < v->t0 + colw)
            pan(v, -(int64_t)colw * 8);
        else
            v->cursor -= colw;
        break;
    case VW_CMD_RIGHT:
        if (v->cursor + colw >= v->t1)
            pan(v, (int64_t)colw * 8);
        else
            v->cursor += colw;
        break;
    case VW_CMD_PAN_LEFT:
        pan(v, -(int64_t)(v->t1 - v->t0) / 2);
        break;
    case VW_CMD_PAN_RIGHT:
        pan(v, (int64_t)(v->t1 - v->t0) / 2);
        break;
    case VW_CMD_UP:
    case VW_CMD_DOWN: {
        int d = c == VW_CMD_UP ? -1 : 1;
        if (stalls)
            vw__stalls_move(v, d);
        else
            v->cursor_row += d;
        break;
    }
    case VW_CMD_PAGE_UP:
    case VW_CMD_PAGE_DOWN: {
        int d = c == VW_CMD_PAGE_UP ? -1 : 1;
        if (stalls)
            vw__stalls_move(v, d * stall_page);
        else
            v->cursor_row += d * lane_page;
        break;
    }
    case VW_CMD_HOME:
        v->cursor = v->t0;
        break;
    case VW_CMD_END:
        v->cursor = v->t1 - 1;
        break;
    default:
        break;
    }
}

/* The window: zoom, fit, and what the header's figures cover. */
static void window_cmd(vw_state *v, vw_cmd c, int cols) {
    switch (c) {
    case VW_CMD_ZOOM_IN:
        zoom(v, v->cursor, 0.5, (uint64_t)cols); /* a replay playing still follows its playhead */
        break;
    case VW_CMD_ZOOM_OUT:
        zoom(v, v->cursor, 2.0, (uint64_t)cols);
        break;
    case VW_CMD_FIT:
        v->t0 = v->origin;
        v->t1 = v->end > v->origin ? v->end : v->origin + 1000000;
        if (v->mode == VW_LIVE)
            v->live_span = UINT64_MAX; /* following, the window keeps all of it as it grows */
        break;
    case VW_CMD_SCOPE:
        v->header.scope_window = !v->header.scope_window;
        snprintf(v->message, sizeof v->message, "GPU figures: %s",
                 v->header.scope_window ? "what the window shows" : v->mode == VW_REPLAY ? "the trace up to now" : "the whole run");
        break;
    default:
        break;
    }
}

int vw_replay_advance(vw_state *v, uint64_t ns, int loading) {
    if (v->mode != VW_REPLAY || v->now == UINT64_MAX || v->paused)
        return 0;
    if (v->now + ns >= v->end && !loading) {
        v->now = UINT64_MAX;
        v->paused = 1;
    } else if (v->now + ns < v->end) {
        v->now += ns;
    }
    return 1;
}

/* Time: play and pause, speed, start and end, following the newest events. */
static void time_cmd(vw_state *v, vw_cmd c) {
    uint64_t width = v->t1 - v->t0;
    switch (c) {
    case VW_CMD_PLAY:
        if (v->mode == VW_REPLAY && v->paused && v->now == UINT64_MAX)
            v->now = v->origin; /* everything is shown: play from the start */
        if (v->mode == VW_REPLAY && v->paused && !v->follow_off)
            v->follow = 1; /* playing pages the window after the playhead, unless F stopped that */
        v->paused = !v->paused;
        break;
    case VW_CMD_SLOWER:
    case VW_CMD_FASTER:
        if (c == VW_CMD_SLOWER && v->speed > 1.0 / 64)
            v->speed /= 2;
        else if (c == VW_CMD_FASTER && v->speed < 1024)
            v->speed *= 2;
        snprintf(v->message, sizeof v->message, "speed %gx", v->speed);
        break;
    case VW_CMD_START:
        if (v->mode == VW_REPLAY && v->now != UINT64_MAX)
            v->now = v->origin; /* playing: start again; showing it all: only move there */
        v->t0 = v->origin;
        v->t1 = v->origin + width;
        v->cursor = v->t0;
        if (v->mode == VW_LIVE)
            v->follow = 0;
        break;
    case VW_CMD_FINISH:
        if (v->mode == VW_REPLAY) { /* at the end playback stops, as when it gets there */
            v->now = UINT64_MAX;
            v->paused = 1;
        }
        v->t0 = v->end > width ? v->end - width + width / 50 : v->origin;
        if (v->t0 < v->origin)
            v->t0 = v->origin;
        v->t1 = v->t0 + (width ? width : 1);
        v->cursor = v->end > v->t0 ? v->end - 1 : v->t0;
        v->follow = 1;
        v->follow_off = 0;
        break;
    case VW_CMD_FOLLOW:
        v->follow = !v->follow;
        v->follow_off = !v->follow;
        snprintf(v->message, sizeof v->message, "follow %s", v->follow ? "on" : "off");
        break;
    default:
        break;
    }
}

/* The panels and overlays: search, the detail pane, the focus, and esc back to the timeline. */
static void panel_cmd(vw_state *v, vw_cmd c) {
    switch (c) {
    case VW_CMD_SEARCH:
        vw__search_open(v);
        break;
    case VW_CMD_ENTER:
        v->detail = !v->detail;
        break;
    case VW_CMD_PANEL:
        v->focus = v->focus == VW_FOCUS_STALLS ? VW_FOCUS_TIMELINE : VW_FOCUS_STALLS;
        break;
    case VW_CMD_BACK:
        v->search.active = 0; /* n and N are the stalls' again */
        v->ruler.marked = 0;
        v->ruler.what[0] = '\0';
        v->detail = 0;
        v->stalls.show_site = 0;
        v->stalls.worst_pos = -1;
        v->focus = VW_FOCUS_TIMELINE;
        break;
    default:
        break;
    }
}

int vw_key(vw_state *v, const st_store *s, int w, int h, int key) {
    vw_layout L;
    vw_layout_for(v, s, w, h, &L);
    int cols = L.too_small ? 80 : L.timeline.w;
    uint64_t colw = (v->t1 - v->t0) / (uint64_t)cols;
    if (colw == 0)
        colw = 1;
    if (v->search.typing) {
        vw__search_key(v, s, cols, key);
        return VW_ACT_REDRAW;
    }
    vw_cmd c = vw_cmd_of_key(key);
    if (v->help) {
        if (c == VW_CMD_HELP || c == VW_CMD_QUIT || c == VW_CMD_BACK || c == VW_CMD_ENTER)
            v->help = 0;
        return VW_ACT_REDRAW;
    }
    if (c == VW_CMD_NONE)
        return VW_ACT_NONE;
    if (c == VW_CMD_QUIT)
        return VW_ACT_QUIT;
    v->message[0] = '\0';
    if (c == VW_CMD_HELP)
        v->help = 1;
    else if (c >= VW_CMD_LEFT && c <= VW_CMD_END)
        move_cmd(v, &L, c, colw);
    else if (c >= VW_CMD_ZOOM_IN && c <= VW_CMD_SCOPE)
        window_cmd(v, c, cols);
    else if (c == VW_CMD_BREAKDOWN)
        vw__breakdown_cmd(v, s);
    else if (c == VW_CMD_FIT_SEL || c == VW_CMD_MARK || c == VW_CMD_RANGE)
        vw__select_cmd(v, s, &L, c);
    else if (c >= VW_CMD_FOLD && c <= VW_CMD_OPEN_RANGES)
        vw__fold_cmd(v, s, c);
    else if (c == VW_CMD_NEXT_SLOW || c == VW_CMD_PREV_SLOW)
        vw__slow_step_cmd(v, &L, c);
    else if ((c == VW_CMD_NEXT_STALL || c == VW_CMD_PREV_STALL) && v->search.active)
        vw__search_again(v, s, cols, c == VW_CMD_NEXT_STALL ? 1 : -1); /* as in less */
    else if (c >= VW_CMD_NEXT_STALL && c <= VW_CMD_STALL_STEP)
        vw__stall_cmd(v, s, c, cols);
    else if (c == VW_CMD_ENTER && v->focus == VW_FOCUS_STALLS)
        vw__stalls_enter(v, s, cols); /* Enter opens what is selected: there, a stall */
    else if (c >= VW_CMD_SEARCH && c <= VW_CMD_BACK)
        panel_cmd(v, c);
    else
        time_cmd(v, c);
    vw_state_settle(v, s, w, h);
    return VW_ACT_REDRAW;
}

#define VW_WHEEL_ROWS 3 /* rows a notch of the wheel scrolls */

int vw_mouse(vw_state *v, const st_store *s, int w, int h, int kind, int x, int y) {
    vw_layout L;
    vw_layout_for(v, s, w, h, &L);
    if (L.too_small)
        return VW_ACT_NONE;
    if (v->help) {
        v->help = 0;
        return VW_ACT_REDRAW;
    }
    int in_tl = x >= L.timeline.x && x < L.timeline.x + L.timeline.w && y >= L.lanes.y && y < L.lanes.y + L.lanes.h;
    uint64_t at = in_tl ? time_of(v, &L, x - L.timeline.x) : v->cursor;
    int ctrl = (kind & VW_MOUSE_CTRL) != 0;
    kind &= ~VW_MOUSE_CTRL;
    if ((kind == VW_MOUSE_WHEEL_UP || kind == VW_MOUSE_WHEEL_DOWN) && ctrl) { /* ctrl+wheel zooms at the pointer */
        zoom(v, at, kind == VW_MOUSE_WHEEL_UP ? 0.5 : 2.0, (uint64_t)L.timeline.w);
        vw_state_settle(v, s, w, h);
        return VW_ACT_REDRAW;
    }
    if (kind == VW_MOUSE_WHEEL_UP || kind == VW_MOUSE_WHEEL_DOWN) { /* the wheel scrolls what is under it */
        int d = kind == VW_MOUSE_WHEEL_UP ? -VW_WHEEL_ROWS : VW_WHEEL_ROWS;
        if (y >= L.stalls.y && y < L.stalls.y + L.stalls.h) {
            v->stalls.sel += d;
        } else {
            v->row_scroll += d;
            v->cursor_row += d;
        }
        vw_state_settle(v, s, w, h);
        return VW_ACT_REDRAW;
    }
    if (kind == VW_MOUSE_RELEASE) { /* a drag across the timeline marks and measures its span */
        int was = v->ruler.pressing;
        v->ruler.pressing = 0;
        int dx = x - v->ruler.press_x;
        if (!was || !in_tl || (dx < 2 && dx > -2))
            return VW_ACT_NONE;
        vw__mark_measure(v, s, v->ruler.press < at ? v->ruler.press : at, v->ruler.press < at ? at : v->ruler.press);
        if (v->mode == VW_LIVE)
            v->follow = 0; /* the span stays in view */
        vw_state_settle(v, s, w, h);
        return VW_ACT_REDRAW;
    }
    if (kind != VW_MOUSE_CLICK)
        return VW_ACT_NONE;
    v->ruler.pressing = in_tl;
    v->ruler.press = at;
    v->ruler.press_x = x;
    if (in_tl || (y >= L.lanes.y && y < L.lanes.y + L.lanes.h)) {
        v->cursor_row = v->row_scroll + (y - L.lanes.y);
        if (in_tl)
            v->cursor = at;
        v->focus = VW_FOCUS_TIMELINE;
    } else if (!v->stalls.breakdown && y > L.stalls.y && y < L.stalls.y + L.stalls.h) {
        int k = v->stalls.scroll + (y - L.stalls.y - 1);
        if (k < (int)v->stalls.n_sites) {
            v->stalls.sel = k;
            v->stalls.worst_pos = -1;
            v->focus = VW_FOCUS_STALLS;
        }
    } else if (y == L.stalls.y && L.stalls.h) {
        v->focus = VW_FOCUS_STALLS;
    } else {
        return VW_ACT_NONE;
    }
    vw_state_settle(v, s, w, h);
    return VW_ACT_REDRAW;
}
