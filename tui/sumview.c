/*
 * The summary-only screen (sumview.h): rank rows from the relays' summaries, drawn into a cell
 * grid, and the keys that move over them. No terminal here; viewer.c owns the subscriber.
 */
#include "sumview.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synctop/sanitize.h"

static double pct(uint64_t part, double whole) { return whole > 0 ? 100.0 * (double)part / whole : 0; }

void vw_sum_row_update(vw_sum_row *r, const tp_sub_summary *x) {
    unsigned gpus = x->last.devices > 0 ? x->last.devices : 1;
    double span = (double)x->span_ns;
    r->producer = x->last.producer;
    r->rank = x->last.rank;
    r->pid = x->last.pid;
    snprintf(r->host, sizeof r->host, "%s", x->last.host);
    r->busy = pct(x->busy_ns, span * gpus);
    r->blocked = pct(x->blocked_ns, span);
    r->idle = r->busy > 100 ? 0.0 : 100.0 - r->busy;
    if (r->first_start == 0 || x->last.start_ns < r->first_start)
        r->first_start = x->last.start_ns;
    uint64_t end = x->last.start_ns + x->last.interval_ns;
    r->events_per_s = end > r->first_start ? (double)x->events / ((double)(end - r->first_start) * 1e-9) : 0.0;
    r->missed = x->missed;
    r->drops = x->last.drops;
    if (x->summaries != r->summaries) {
        uint64_t lspan = x->last.t_max > x->last.t_min ? x->last.t_max - x->last.t_min : 0;
        double f = lspan > 0 ? (double)x->last.busy_ns / ((double)lspan * gpus) : 0.0;
        if (f > 1)
            f = 1;
        if (r->n_hist == VW_SUM_HIST) {
            memmove(r->hist, r->hist + 1, (VW_SUM_HIST - 1) * sizeof *r->hist);
            r->n_hist--;
        }
        r->hist[r->n_hist++] = (float)f;
        r->summaries = x->summaries;
    }
}

static int by_rank(const void *a, const void *b) {
    const vw_sum_row *x = a, *y = b;
    unsigned rx = (unsigned)x->rank, ry = (unsigned)y->rank; /* -1: last */
    if (rx != ry)
        return rx < ry ? -1 : 1;
    int c = strcmp(x->host, y->host);
    if (c != 0)
        return c;
    return x->producer < y->producer ? -1 : x->producer > y->producer;
}

void vw_sum_sort(vw_sum_row *rows, size_t n) {
    if (n > 1)
        qsort(rows, n, sizeof *rows, by_rank);
}

/* ---- drawing ---- */

static void put_ch(vw_grid *g, int x, int y, uint32_t ch, int role, int attr) {
    if (x < 0 || y < 0 || x >= g->w || y >= g->h)
        return;
    vw_cell *c = &g->cells[(size_t)y * (size_t)g->w + (size_t)x];
    c->ch = ch;
    c->role = (uint8_t)role;
    c->attr = (uint8_t)attr;
}

/* Writes ASCII text from x, at most max columns (anything else becomes '?'); returns the columns. */
static int put_str(vw_grid *g, int x, int y, const char *s, int max, int role, int attr) {
    int n = 0;
    for (; s[n] && n < max; n++) {
        unsigned char c = (unsigned char)s[n];
        put_ch(g, x + n, y, c >= 0x20 && c < 0x7f ? c : '?', role, attr);
    }
    return n;
}

static void fill_row(vw_grid *g, int y, int role, int attr) {
    for (int x = 0; x < g->w; x++)
        put_ch(g, x, y, ' ', role, attr);
}

static void fmt_rate(char *out, size_t n, double v) {
    if (v >= 1e6)
        snprintf(out, n, "%.1fM", v / 1e6);
    else if (v >= 1e4)
        snprintf(out, n, "%.1fk", v / 1e3);
    else
        snprintf(out, n, "%.0f", v);
}

/* The columns of a w-wide screen: where each starts, and the widths that depend on w. */
typedef struct sum_cols {
    int mark, rank, host, host_w, pid, busy, blk, idle, spark, spark_w, evs, missed, drops;
} sum_cols;

static void sum_cols_compute(int w, sum_cols *c) {
    int with_missed = w >= 120;
    /* mark 2, rank 5+1, pid 7+1, three percents 7 each, a space, ev/s 8+1, missed 8, drops 7; and
     * the spaces after host and spark */
    int fixed = 2 + 6 + 8 + 21 + 1 + 9 + (with_missed ? 8 : 0) + 7 + 2;
    int rest = w - fixed;
    c->host_w = rest / 3 < 8 ? 8 : rest / 3 > 24 ? 24 : rest / 3;
    c->spark_w = rest - c->host_w;
    if (c->spark_w > VW_SUM_HIST)
        c->spark_w = VW_SUM_HIST;
    c->mark = 0;
    c->rank = 2;
    c->host = c->rank + 6;
    c->pid = c->host + c->host_w + 1;
    c->busy = c->pid + 8;
    c->blk = c->busy + 7;
    c->idle = c->blk + 7;
    c->spark = c->idle + 7 + 1;
    c->evs = c->spark + c->spark_w + 1;
    c->missed = with_missed ? c->evs + 9 : -1;
    c->drops = c->evs + 9 + (with_missed ? 8 : 0);
}

static int visible_rows(int h) { return h - 3; }

static void sum_clamp(vw_sum_view *sv, size_t n, int h) {
    int rows = visible_rows(h);
    if (rows < 1)
        rows = 1;
    if (sv->sel >= (int)n)
        sv->sel = (int)n - 1;
    if (sv->sel < 0)
        sv->sel = 0;
    if (sv->scroll > sv->sel)
        sv->scroll = sv->sel;
    if (sv->sel >= sv->scroll + rows)
        sv->scroll = sv->sel - rows + 1;
    if (sv->scroll > (int)n - rows)
        sv->scroll = (int)n - rows;
    if (sv->scroll < 0)
        sv->scroll = 0;
}

static void draw_row(vw_grid *g, int y, const vw_sum_row *r, const sum_cols *c, int sel, int ascii) {
    int attr = sel ? VW_A_REVERSE : 0;
    fill_row(g, y, ROLE_DEFAULT, attr);
    put_ch(g, c->mark, y, r->open ? (ascii ? '-' : 0x25BE) : (ascii ? '+' : 0x25B8), ROLE_LANE, attr);
    char buf[96];
    if (r->rank >= 0)
        snprintf(buf, sizeof buf, "%5d", (int)r->rank);
    else
        snprintf(buf, sizeof buf, "%5s", "?");
    put_str(g, c->rank, y, buf, 5, ROLE_LANE, attr);
    char host[3 * sizeof r->host];
    tp_sanitize(host, sizeof host, r->host, strlen(r->host), NULL);
    put_str(g, c->host, y, host[0] ? host : "?", c->host_w, ROLE_DEFAULT, attr);
    snprintf(buf, sizeof buf, "%7u", r->pid);
    put_str(g, c->pid, y, buf, 7, ROLE_DIM, attr);
    snprintf(buf, sizeof buf, "%6.1f", r->busy);
    put_str(g, c->busy, y, buf, 6, ROLE_VALUE, attr);
    snprintf(buf, sizeof buf, "%6.1f", r->blocked);
    put_str(g, c->blk, y, buf, 6, ROLE_BLOCKED, attr);
    snprintf(buf, sizeof buf, "%6.1f", r->idle);
    put_str(g, c->idle, y, buf, 6, ROLE_BUBBLE, attr);
    static const char ascii_lv[] = "_.-:=+*#";
    int shown = r->n_hist < c->spark_w ? r->n_hist : c->spark_w;
    for (int i = 0; i < shown; i++) {
        float f = r->hist[r->n_hist - shown + i];
        int lv = (int)(f * 7.999f);
        lv = lv < 0 ? 0 : lv > 7 ? 7 : lv;
        put_ch(g, c->spark + c->spark_w - shown + i, y, ascii ? (uint32_t)ascii_lv[lv] : 0x2581u + (uint32_t)lv,
               ROLE_KERNEL, attr);
    }
    char rate[32];
    fmt_rate(rate, sizeof rate, r->events_per_s);
    snprintf(buf, sizeof buf, "%8s", rate);
    put_str(g, c->evs, y, buf, 8, ROLE_VALUE, attr);
    if (c->missed >= 0) {
        snprintf(buf, sizeof buf, "%7llu", (unsigned long long)r->missed);
        put_str(g, c->missed, y, buf, 7, r->missed ? ROLE_WARN : ROLE_DIM, attr);
    }
    snprintf(buf, sizeof buf, "%7llu", (unsigned long long)r->drops);
    put_str(g, c->drops, y, buf, 7, r->drops ? ROLE_WARN : ROLE_DIM, attr);
}

void vw_sum_render(const vw_sum_row *rows, size_t n, vw_sum_view *sv, vw_grid *g) {
    if (vw_grid_resize(g, g->w, g->h) != 0)
        return;
    for (int y = 0; y < g->h; y++)
        fill_row(g, y, ROLE_DEFAULT, 0);
    if (g->w < VW_MIN_W || g->h < VW_MIN_H) {
        char m[96];
        vw_too_small_text(g->w, g->h, m, sizeof m);
        put_str(g, 0, 0, m, g->w, ROLE_WARN, 0);
        return;
    }
    sum_clamp(sv, n, g->h);
    size_t open = 0;
    for (size_t i = 0; i < n; i++)
        open += rows[i].open != 0;
    char t[256];
    snprintf(t, sizeof t, " synctop  SUMMARY ONLY  %zu producer%s  %llu summaries  open %zu: %llu raw batches", n,
             n == 1 ? "" : "s", (unsigned long long)sv->summaries, open, (unsigned long long)sv->raw_batches);
    fill_row(g, 0, ROLE_TITLE, 0);
    put_str(g, 0, 0, t, g->w, ROLE_TITLE, 0);
    sum_cols c;
    sum_cols_compute(g->w, &c);
    fill_row(g, 1, ROLE_PANEL, 0);
    put_str(g, c.rank, 1, " rank", 5, ROLE_PANEL, 0);
    put_str(g, c.host, 1, "host", c.host_w, ROLE_PANEL, 0);
    put_str(g, c.pid, 1, "    pid", 7, ROLE_PANEL, 0);
    put_str(g, c.busy, 1, " busy%", 6, ROLE_PANEL, 0);
    put_str(g, c.blk, 1, "  blk%", 6, ROLE_PANEL, 0);
    put_str(g, c.idle, 1, " idle%", 6, ROLE_PANEL, 0);
    put_str(g, c.spark, 1, "busy, recent", c.spark_w, ROLE_PANEL, 0);
    put_str(g, c.evs, 1, "  ev/s", 8, ROLE_PANEL, 0);
    if (c.missed >= 0)
        put_str(g, c.missed, 1, " missed", 7, ROLE_PANEL, 0);
    put_str(g, c.drops, 1, "  drops", 7, ROLE_PANEL, 0);
    int vis = visible_rows(g->h);
    for (int i = 0; i < vis && (size_t)(sv->scroll + i) < n; i++)
        draw_row(g, 2 + i, &rows[sv->scroll + i], &c, sv->scroll + i == sv->sel, sv->ascii);
    if (n == 0)
        put_str(g, 2, 2, "no summary yet: is a relay listening there, and are there traced processes?", g->w - 2,
                ROLE_DIM, 0);
    int y = g->h - 1, x = 0;
    static const char *const bar[][2] = {{"Ent", "Open/Close"}, {"Tab", "Lanes"}, {"q", "Quit"}};
    for (size_t i = 0; i < sizeof bar / sizeof bar[0]; i++) {
        x += put_str(g, x, y, bar[i][0], g->w - x, ROLE_KEY, 0);
        x += put_str(g, x, y, " ", g->w - x, ROLE_KEYTEXT, 0);
        x += put_str(g, x, y, bar[i][1], g->w - x, ROLE_KEYTEXT, 0);
        x += put_str(g, x, y, "  ", g->w - x, ROLE_DEFAULT, 0);
    }
    int len = 0;
    if (n > 0) { /* which rows are shown, at the right end */
        char pos[64];
        int last = sv->scroll + vis < (int)n ? sv->scroll + vis : (int)n;
        len = snprintf(pos, sizeof pos, " rows %d-%d of %zu ", sv->scroll + 1, last, n);
        put_str(g, g->w - len, y, pos, len, ROLE_DIM, 0);
    }
    if (sv->message[0]) {
        char m[3 * sizeof sv->message];
        tp_sanitize(m, sizeof m, sv->message, strlen(sv->message), NULL);
        put_str(g, x + 1, y, m, g->w - x - 1 - len, ROLE_WARN, 0);
    }
}

int vw_sum_key(vw_sum_view *sv, size_t n, int h, int key) {
    int page = visible_rows(h) > 1 ? visible_rows(h) - 1 : 1;
    switch (key) {
    case VW_KEY_UP: case 'k': sv->sel--; break;
    case VW_KEY_DOWN: case 'j': sv->sel++; break;
    case VW_KEY_PGUP: sv->sel -= page; break;
    case VW_KEY_PGDN: sv->sel += page; break;
    case VW_KEY_HOME: case 'g': sv->sel = 0; break;
    case VW_KEY_END: case 'G': sv->sel = (int)n - 1; break;
    case VW_KEY_ENTER: case '\n': case '\r': case 'c':
        sum_clamp(sv, n, h);
        return n > 0 ? VW_SUM_TOGGLE : VW_SUM_NONE;
    case VW_KEY_TAB: return VW_SUM_LANES;
    case 'q': case VW_KEY_F10: return VW_SUM_QUIT;
    default: return VW_SUM_NONE;
    }
    sum_clamp(sv, n, h);
    return VW_SUM_REDRAW;
}
