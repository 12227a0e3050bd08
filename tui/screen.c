/*
 * The view model (screen.h): layout, rendering into a cell grid, and the keys and clicks that move
 * the viewport. Pure: no terminal, no clock, no I/O. Every name that comes from a trace passes
 * through tp_sanitize before it reaches a cell.
 */
#include "screen.h"
#include "advice.h"
#include "busy.h"
#include "hta.h"
#include "steps.h"
#include "text.h"

#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <wchar.h>

#include "synctop/sanitize.h"

/* ---- grid ---- */

int vw_grid_resize(vw_grid *g, int w, int h) {
    if (w < 1)
        w = 1;
    if (h < 1)
        h = 1;
    size_t need = (size_t)w * (size_t)h;
    if (need > g->cap || g->cells == NULL) {
        vw_cell *c = realloc(g->cells, need * sizeof *c);
        if (c == NULL)
            return ERR_NOMEM;
        g->cells = c;
        g->cap = need;
    }
    g->w = w;
    g->h = h;
    for (int i = 0; i < w * h; i++)
        g->cells[i] = (vw_cell){' ', ROLE_DEFAULT, 0};
    return 0;
}

void vw_grid_free(vw_grid *g) {
    free(g->cells);
    memset(g, 0, sizeof *g);
}

static size_t utf8_put(char *o, uint32_t c) {
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | c >> 6);
        o[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | c >> 12);
        o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | c >> 18);
    o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

char *vw_grid_text(const vw_grid *g) {
    char *out = malloc((size_t)g->w * (size_t)g->h * 4 + (size_t)g->h + 1), *o = out;
    if (out == NULL)
        return NULL;
    for (int y = 0; y < g->h; y++) {
        for (int x = 0; x < g->w; x++)
            if (g->cells[y * g->w + x].ch != VW_CH_WIDE)
                o += utf8_put(o, g->cells[y * g->w + x].ch);
        *o++ = '\n';
    }
    *o = '\0';
    return out;
}

static const char role_letters[ROLE_N_ + 1] = ".THVWdRLDKMSYABNUCXPkthd";

char vw_role_letter(int role) { return role >= 0 && role < ROLE_N_ ? role_letters[role] : '?'; }

char *vw_grid_roles(const vw_grid *g) {
    char *out = malloc((size_t)g->w * (size_t)g->h + (size_t)g->h + 1), *o = out;
    if (out == NULL)
        return NULL;
    for (int y = 0; y < g->h; y++) {
        for (int x = 0; x < g->w; x++)
            *o++ = vw_role_letter(g->cells[y * g->w + x].role);
        *o++ = '\n';
    }
    *o = '\0';
    return out;
}

/* ---- the scheme: what each role looks like ---- */

static const vw_scheme scheme[ROLE_N_] = {
    [ROLE_DEFAULT] = {"default", VW_C_DEFAULT, VW_C_DEFAULT, 0, 0},
    [ROLE_TITLE] = {"title", VW_C_BLACK, VW_C_CYAN, 0, VW_A_REVERSE},
    [ROLE_LABEL] = {"label", VW_C_CYAN, VW_C_DEFAULT, 0, 0},
    [ROLE_VALUE] = {"value", VW_C_DEFAULT, VW_C_DEFAULT, VW_A_BOLD, VW_A_BOLD},
    [ROLE_WARN] = {"warn", VW_C_RED, VW_C_DEFAULT, VW_A_BOLD, VW_A_BOLD | VW_A_UNDERLINE},
    [ROLE_DIM] = {"dim", VW_C_BLUE, VW_C_DEFAULT, VW_A_BOLD, VW_A_DIM},
    [ROLE_RULER] = {"ruler", VW_C_CYAN, VW_C_DEFAULT, 0, 0},
    [ROLE_LANE] = {"lane", VW_C_DEFAULT, VW_C_DEFAULT, 0, 0},
    [ROLE_DEVICE] = {"device", VW_C_GREEN, VW_C_DEFAULT, VW_A_BOLD, VW_A_BOLD},
    [ROLE_KERNEL] = {"kernel", VW_C_GREEN, VW_C_DEFAULT, 0, 0},
    [ROLE_MEMCPY] = {"memcpy", VW_C_CYAN, VW_C_DEFAULT, 0, 0},
    [ROLE_MEMSET] = {"memset", VW_C_MAGENTA, VW_C_DEFAULT, 0, 0},
    [ROLE_SYNC] = {"sync", VW_C_WHITE, VW_C_DEFAULT, 0, 0},
    [ROLE_API] = {"api", VW_C_BLUE, VW_C_DEFAULT, VW_A_BOLD, 0},
    [ROLE_BLOCKED] = {"blocked", VW_C_RED, VW_C_DEFAULT, VW_A_BOLD, VW_A_REVERSE | VW_A_BOLD},
    [ROLE_NVTX] = {"nvtx", VW_C_MAGENTA, VW_C_DEFAULT, 0, VW_A_DIM},
    [ROLE_BUBBLE] = {"bubble", VW_C_YELLOW, VW_C_DEFAULT, VW_A_BOLD, VW_A_BOLD},
    [ROLE_SELECTION] = {"selection", VW_C_BLACK, VW_C_YELLOW, 0, VW_A_REVERSE | VW_A_BOLD | VW_A_UNDERLINE},
    [ROLE_CURSOR] = {"cursor", VW_C_YELLOW, VW_C_DEFAULT, VW_A_BOLD, VW_A_BOLD | VW_A_UNDERLINE},
    [ROLE_PANEL] = {"panel", VW_C_BLACK, VW_C_GREEN, 0, VW_A_REVERSE},
    [ROLE_KEY] = {"key", VW_C_WHITE, VW_C_BLACK, VW_A_BOLD, VW_A_BOLD},
    [ROLE_KEYTEXT] = {"keytext", VW_C_BLACK, VW_C_CYAN, 0, VW_A_REVERSE},
    [ROLE_HELP] = {"help", VW_C_WHITE, VW_C_BLUE, 0, 0},
};

const vw_scheme *vw_scheme_get(int role) { return role >= 0 && role < ROLE_N_ ? &scheme[role] : NULL; }

char *vw_grid_attrs(const vw_grid *g, int mono) {
    char *out = malloc((size_t)g->w * (size_t)g->h + (size_t)g->h + 1), *o = out;
    if (out == NULL)
        return NULL;
    for (int y = 0; y < g->h; y++) {
        for (int x = 0; x < g->w; x++) {
            const vw_cell *c = &g->cells[y * g->w + x];
            const vw_scheme *e = vw_scheme_get(c->role);
            int a = (e ? (mono ? e->mono : e->attr) : 0) | c->attr;
            *o++ = a == 0 ? '.' : "0123456789abcdef"[a & 15];
        }
        *o++ = '\n';
    }
    *o = '\0';
    return out;
}

/* ---- writing text into the grid ---- */

/* Columns of c when the locale cannot say (wcwidth -1 outside a UTF-8 locale): combining marks and
 * zero-width characters take none; East Asian wide and fullwidth forms and emoji take two. */
static int width_fallback(uint32_t c) {
    if ((c >= 0x0300 && c <= 0x036F) || (c >= 0x200B && c <= 0x200F) || (c >= 0xFE00 && c <= 0xFE0F) ||
        (c >= 0x20D0 && c <= 0x20FF))
        return 0;
    if ((c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0x303E) || (c >= 0x3041 && c <= 0xA4CF) ||
        (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0xF900 && c <= 0xFAFF) || (c >= 0xFE30 && c <= 0xFE4F) ||
        (c >= 0xFF00 && c <= 0xFF60) || (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x1F300 && c <= 0x1F64F) ||
        (c >= 0x1F900 && c <= 0x1F9FF) || (c >= 0x20000 && c <= 0x3FFFD))
        return 2;
    return 1;
}

int vw_char_width(uint32_t c) {
    if (c < 0x20 || c == 0x7F || (c >= 0x80 && c < 0xA0))
        return 0;
    if (c < 0x7F)
        return 1;
    int w = wcwidth((wchar_t)c);
    if (w < 0)
        return width_fallback(c);
    return w > 2 ? 2 : w;
}

/* Writes one cell, keeping wide characters whole: overwriting either half of one blanks the
 * other half. */
static void put_cell(vw_grid *g, int x, int y, uint32_t ch, int role, int attr) {
    if (x < 0 || y < 0 || x >= g->w || y >= g->h)
        return;
    vw_cell *c = &g->cells[y * g->w + x];
    if (c->ch == VW_CH_WIDE && x > 0)
        c[-1].ch = ' ';
    if (x + 1 < g->w && c[1].ch == VW_CH_WIDE)
        c[1].ch = ' ';
    *c = (vw_cell){ch, (uint8_t)role, (uint8_t)attr};
}

/* Writes sanitized UTF-8 text at (x, y), at most maxw columns; returns the columns used. Text
 * that does not fit ends in an ellipsis. */
static int put_str(vw_grid *g, const vw_state *v, int x, int y, int maxw, const char *s, int role, int attr) {
    int used = 0;
    const unsigned char *p = (const unsigned char *)s;
    while (*p && used < maxw) {
        uint32_t c = *p;
        int n = 1;
        if (c >= 0xF0) {
            c = ((c & 7u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
            n = 4;
        } else if (c >= 0xE0) {
            c = ((c & 15u) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
            n = 3;
        } else if (c >= 0xC0) {
            c = ((c & 31u) << 6) | (p[1] & 0x3Fu);
            n = 2;
        }
        if (c < 0x20 || c == 0x7F || (c >= 0x80 && c < 0xA0))
            c = '?'; /* text is sanitized before; a control character never gets through here either */
        int cw = c >= 0x80 && v->ascii ? 1 : vw_char_width(c);
        if (c >= 0x80 && v->ascii)
            c = '?';
        p += n;
        if (cw == 0)
            continue; /* a combining mark or zero-width character: the grid has no room to combine */
        if (used + cw > maxw - 1 && *p) {
            put_cell(g, x + used++, y, v->ascii ? '~' : 0x2026, role, attr);
            break;
        }
        if (used + cw > maxw || x + used + cw > g->w) {
            if (used < maxw)
                put_cell(g, x + used++, y, v->ascii ? '~' : 0x2026, role, attr);
            break;
        }
        put_cell(g, x + used, y, c, role, attr);
        if (cw == 2)
            put_cell(g, x + used + 1, y, VW_CH_WIDE, role, attr);
        used += cw;
    }
    return used;
}

static void fill(vw_grid *g, int x, int y, int w, int role, int attr) {
    for (int i = 0; i < w; i++)
        put_cell(g, x + i, y, ' ', role, attr);
}

/* A name from a trace, made safe for a terminal. */
static void sanitized(char *out, size_t n, const char *s) { tp_sanitize(out, n, s, strlen(s), NULL); }

/* Whether another producer has the same rank (two traces without distributedInfo both say 0). */
static int rank_shared(const st_store *s, uint32_t producer, int rank) {
    size_t n = st_producer_count(s);
    for (size_t i = 0; i < n && i < 4096; i++) {
        const st_producer_info *o = i != producer ? st_producer_get(s, (uint32_t)i) : NULL;
        if (o != NULL && o->rank == rank)
            return 1;
    }
    return 0;
}

/* How rows name their process when several are shown: "r3" (its rank), else "p4242" (its pid). */
static void producer_tag(const st_store *s, uint32_t producer, char *out, size_t n) {
    const st_producer_info *pi = st_producer_get(s, producer);
    if (pi != NULL && pi->rank >= 0 && !rank_shared(s, producer, pi->rank))
        snprintf(out, n, "r%d", pi->rank);
    else if (pi != NULL)
        snprintf(out, n, "p%u", pi->pid);
    else
        snprintf(out, n, "#%u", producer);
}

/* ---- text helpers ---- */

void vw_fmt_dur(char *out, size_t n, uint64_t ns, int ascii) {
    if (ns < 1000)
        snprintf(out, n, "%" PRIu64 "ns", ns);
    else if (ns < 1000000)
        snprintf(out, n, "%.1f%s", (double)ns / 1e3, ascii ? "us" : "\xc2\xb5s");
    else if (ns < 1000000000)
        snprintf(out, n, "%.2fms", (double)ns / 1e6);
    else if (ns < 100000000000ull)
        snprintf(out, n, "%.2fs", (double)ns / 1e9);
    else
        snprintf(out, n, "%.0fs", (double)ns / 1e9);
}

/* A ruler label: like vw_fmt_dur, with as many decimals as the tick step needs, so that ticks
 * 200 us apart at 30 s read 30.4312s, 30.4314s rather than 30.43s, 30.43s. */
static void fmt_tick(char *out, size_t n, uint64_t t, uint64_t step, int ascii) {
    double unit;
    const char *u;
    int dec;
    if (t < 1000) {
        vw_fmt_dur(out, n, t, ascii);
        return;
    } else if (t < 1000000) {
        unit = 1e3, u = ascii ? "us" : "\xc2\xb5s", dec = 1;
    } else if (t < 1000000000) {
        unit = 1e6, u = "ms", dec = 2;
    } else {
        unit = 1e9, u = "s", dec = t < 100000000000ull ? 2 : 0;
    }
    int need = 0;
    for (double su = (double)step / unit; su < 0.999999 && need < 9; su *= 10)
        need++;
    snprintf(out, n, "%.*f%s", need > dec ? need : dec, (double)t / unit, u);
}

static void fmt_count(char *out, size_t n, double x) {
    if (x < 1e4)
        snprintf(out, n, "%.0f", x);
    else if (x < 1e6)
        snprintf(out, n, "%.1fk", x / 1e3);
    else if (x < 1e9)
        snprintf(out, n, "%.1fM", x / 1e6);
    else
        snprintf(out, n, "%.1fG", x / 1e9);
}

static void fmt_bytes(char *out, size_t n, uint64_t b) {
    if (b < 1024)
        snprintf(out, n, "%" PRIu64 " B", b);
    else if (b < (1u << 20))
        snprintf(out, n, "%.1f KiB", (double)b / 1024);
    else if (b < (1u << 30))
        snprintf(out, n, "%.1f MiB", (double)b / (1 << 20));
    else
        snprintf(out, n, "%.2f GiB", (double)b / (1 << 30));
}

/* ---- layout ---- */

static int clampi(int x, int lo, int hi) { return x < lo ? lo : x > hi ? hi : x; }
static int mini(int a, int b) { return a < b ? a : b; }

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
        int spare = lanes - need, more = stalls > 0 && want > stalls ? mini(want - stalls, spare) : 0;
        stalls += more;
        detail += spare - more;
        lanes = need;
    }
    L->lanes.h = lanes;
    L->timeline.h = lanes;
    L->detail = (vw_rect){0, L->lanes.y + lanes, L->detail.w, detail};
    L->stalls = (vw_rect){0, L->detail.y + detail, L->stalls.w, stalls};
}

/* ---- rows: the GPU summary rows and the lanes, in display order ---- */

enum { ROW_DEVICE = 1, ROW_LANE = 2, ROW_PROCESS = 3 };
typedef struct vw_row {
    int type;
    size_t lane; /* ROW_LANE */
    uint32_t producer;
    uint16_t device;
} vw_row;

/* Folds: a process (all its rows but its own), a GPU (its streams; its row stays, the union of
 * them), a thread (its ranges lane). */
enum { FOLD_PROCESS = 1, FOLD_DEVICE = 2, FOLD_THREAD = 3 };
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
static size_t rows_walk(const st_store *s, const vw_state *v, vw_row *r, size_t *devices) {
    size_t nl = st_lane_count(s), n = 0, d = 0;
    int multi = st_producer_count(s) > 1;
    uint32_t last_p = UINT32_MAX;
    uint16_t last_d = TP_NO_DEVICE;
    for (size_t l = 0; l < nl; l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (multi && li->producer != last_p) {
            if (r)
                r[n] = (vw_row){ROW_PROCESS, SIZE_MAX, li->producer, TP_NO_DEVICE};
            n++;
        }
        int pfold = folded(v, fold_key(FOLD_PROCESS, li->producer, 0));
        if (li->device != TP_NO_DEVICE && (li->producer != last_p || li->device != last_d)) {
            if (r && !pfold)
                r[n] = (vw_row){ROW_DEVICE, SIZE_MAX, li->producer, li->device};
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
            r[n] = (vw_row){ROW_LANE, l, li->producer, li->device};
        n++;
    }
    if (devices)
        *devices = d;
    return n;
}

static vw_row *rows_build(const st_store *s, const vw_state *v, size_t *n_out) {
    vw_row *r = malloc((3 * st_lane_count(s) + 1) * sizeof *r);
    *n_out = r ? rows_walk(s, v, r, NULL) : 0;
    return r;
}

/* The breakdown pane's rows under its header: a row per GPU; then, when HTA's breakdown is
 * there, its header and a row per stream, else a line saying why it is not. */
static size_t breakdown_rows(const vw_state *v) {
    size_t n = v->an ? v->an->n_devices : 0;
    return n + 1 + (v->stalls.hta ? v->stalls.hta->n_streams : 0);
}

void vw_layout_for(const vw_state *v, const st_store *s, int w, int h, vw_layout *L) {
    size_t devices, rows = rows_walk(s, v, NULL, &devices);
    vw_layout_compute(w, h, devices > INT_MAX ? INT_MAX : (int)devices, v->detail, L);
    size_t panel = v->stalls.breakdown ? breakdown_rows(v) : v->stalls.n_sites;
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

static void row_label(const st_store *s, const vw_row *r, int multi_producer, char *out, size_t n) {
    char raw[256];
    char pfx[24] = "";
    if (multi_producer) {
        producer_tag(s, r->producer, pfx, sizeof pfx - 1);
        strcat(pfx, ":");
    }
    if (r->type == ROW_PROCESS) {
        producer_tag(s, r->producer, pfx, sizeof pfx);
        snprintf(raw, sizeof raw, "%s", pfx);
    } else if (r->type == ROW_DEVICE) {
        snprintf(raw, sizeof raw, "%sGPU%u", pfx, r->device);
    } else {
        const st_lane_info *li = st_lane_get(s, r->lane);
        if (li->kind == ST_LANE_STREAM) {
            if (li->id == TP_NO_ID)
                snprintf(raw, sizeof raw, " sync (device)");
            else
                snprintf(raw, sizeof raw, " stream %u%s", li->id, li->null_stream ? "*" : "");
        } else if (li->kind == ST_LANE_THREAD) {
            /* the tid once: profiler traces name threads "thread 783658 (python3)" */
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
            snprintf(raw, sizeof raw, "%sT%u%s%.*s", pfx, li->id, nl ? " " : "", (int)nl, nm);
        } else if (li->device != TP_NO_DEVICE) {
            snprintf(raw, sizeof raw, " ranges s%u", li->id);
        } else {
            snprintf(raw, sizeof raw, " ranges"); /* NVTX ranges, profiler annotations */
        }
    }
    sanitized(out, n, raw);
}

/* ---- glyphs ---- */

static const uint32_t eighths[9] = {' ', 0x2581, 0x2582, 0x2583, 0x2584, 0x2585, 0x2586, 0x2587, 0x2588};

static int cat_role(int cat) {
    static const int r[ST_CAT_N] = {ROLE_KERNEL, ROLE_MEMCPY, ROLE_MEMSET, ROLE_SYNC,
                                    ROLE_API, ROLE_BLOCKED, ROLE_NVTX};
    return r[cat];
}

/* The glyph of a cell that is busy frac (0..1] of its time, mostly with cat. */
static uint32_t cell_glyph(const vw_state *v, int cat, double frac) {
    int e = (int)(frac * 8 + 0.999);
    e = clampi(e, 1, 8);
    if (v->ascii) {
        static const char full[ST_CAT_N] = {'#', '=', '%', '|', '-', 'X', '~'};
        static const char part[ST_CAT_N] = {'+', ':', '%', '|', '.', 'x', '~'};
        return (uint32_t)(e >= 4 ? full[cat] : part[cat]);
    }
    switch (cat) {
    case ST_CAT_MEMCPY: return e >= 4 ? 0x2593 : 0x2592; /* dark / medium shade */
    case ST_CAT_MEMSET: return 0x2591;                    /* light shade */
    case ST_CAT_SYNC: return 0x259A;                      /* quadrants */
    default: return eighths[e];
    }
}

/* ---- bubbles and blocks in a window ---- */

/* The first bubble that may overlap time a or later: the first with start >= a - maxlen (no bubble
 * is longer). */
static size_t bubble_from(const an_result *an, uint64_t maxlen, uint64_t a) {
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

/* The rows whose bubbles a frame shows, and their bubbles' overlap with each column (see
 * bubble_columns). */
typedef struct bubble_rows {
    int *lane_slot;      /* per stream lane: its row's slot, -1 none */
    size_t n_lanes;
    uint64_t *dev_key;   /* device rows: producer << 16 | device, sorted */
    int *dev_slot;
    size_t n_dev;
    uint64_t *sum;       /* per slot, cols of them */
} bubble_rows;

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
    for (size_t i = bubble_from(an, an->bubble_max_ns, t0); i < an->n_bubbles && an->bubbles[i].start < stop; i++) {
        const an_bubble *x = &an->bubbles[i];
        if (x->end - x->start < gap)
            continue;
        int slot = x->lane == SIZE_MAX ? bubble_dev_slot(br, x->producer, x->device)
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

static void sites_free(vw_state *v) {
    an_stall_sites_free(v->stalls.sites, v->stalls.n_sites);
    v->stalls.sites = NULL;
    v->stalls.n_sites = 0;
}

/* ---- sites ---- */

void vw_sites_update(vw_state *v) {
    sites_free(v);
    an_stall_scope sc = {.now = v->now, .by_step = v->stalls.step, .steps = v->steps, .at = v->cursor};
    an_stall_sites(v->store, v->an, &sc, v->stalls.sort, &v->stalls.sites, &v->stalls.n_sites, &v->stalls.step_no);
    if (v->stalls.sel >= (int)v->stalls.n_sites)
        v->stalls.sel = v->stalls.n_sites ? (int)v->stalls.n_sites - 1 : 0;
}

/* ---- the header's GPU figures over a range: a resumable sweep ---- */

void vw_figs_range(const vw_state *v, uint64_t *a, uint64_t *b) {
    uint64_t shown = v->now < v->end ? v->now : v->end;
    if (v->header.scope_window || v->stalls.breakdown) {
        *a = v->t0 > v->origin ? v->t0 : v->origin;
        *b = v->t1 < shown ? v->t1 : shown;
        if (*b < *a)
            *b = *a;
        if (*b == *a) /* nothing shown: an empty range, not "the whole trace" */
            *b = *a + 1;
    } else if (v->now == UINT64_MAX || v->now >= v->end) {
        *a = *b = 0; /* everything: the analysis' own figures */
    } else {
        *a = v->origin;
        *b = shown > v->origin ? shown : v->origin + 1;
    }
}

int vw_figs_update(vw_state *v, const st_store *s, size_t budget) {
    uint64_t a, b;
    vw_figs_range(v, &a, &b);
    if (a == b) {
        an_sweep_free(&v->header.sweep);
        v->header.figs_ready = 0;
        return 1;
    }
    int fresh = !an_sweep_fits(v->header.sweep, s, v->an, a, b);
    if (!fresh && v->header.figs_ready && v->header.figs_a == a && v->header.figs_b == b)
        return 1;
    if (fresh) {
        an_sweep_free(&v->header.sweep);
        if ((v->header.sweep = an_sweep_new(s, v->an, a)) == NULL)
            return 1;
    }
    if (!an_sweep_to(v->header.sweep, b, budget))
        return 0;
    an_gpu_fig *f;
    size_t n;
    if (an_sweep_figures(v->header.sweep, b, &f, &n) != 0)
        return 1;
    free(v->header.figs);
    v->header.figs = f;
    v->header.n_figs = n;
    v->header.figs_a = a;
    v->header.figs_b = b;
    v->header.figs_ready = 1;
    return 1;
}

/* ---- state ---- */

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
    v->cursor = t0;
    v->follow = 1;
    v->speed = 1.0;
    v->load_progress = 1.0;
    v->stalls.worst_pos = -1;
    v->store = s;
}

void vw_state_free(vw_state *v) {
    if (v->stalls.hta) {
        hta_result_free(v->stalls.hta);
        free(v->stalls.hta);
        v->stalls.hta = NULL;
    }
    free(v->lanes.folds);
    v->lanes.folds = NULL;
    v->lanes.n_folds = 0;
    sites_free(v);
    free(v->header.figs);
    v->header.figs = NULL;
    v->header.n_figs = 0;
    v->header.figs_ready = 0;
    an_sweep_free(&v->header.sweep);
}

/* Many processes (ranks): each folded into its own row, busy and blocked at a glance; c opens one. */
#define VW_FOLD_ABOVE 4
static void fold_new_processes(vw_state *v, const st_store *s) {
    size_t np = st_producer_count(s);
    if (np <= VW_FOLD_ABOVE || v->lanes.procs_folded >= np)
        return;
    for (size_t p = v->lanes.procs_folded; p < np; p++)
        if (!folded(v, fold_key(FOLD_PROCESS, (uint32_t)p, 0)))
            fold_toggle(v, fold_key(FOLD_PROCESS, (uint32_t)p, 0));
    v->lanes.procs_folded = np;
}

void vw_state_settle(vw_state *v, const st_store *s, int w, int h) {
    fold_new_processes(v, s);
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
        v->t1 = v->end + width / 50;
        v->t0 = v->t1 > width ? v->t1 - width : 0;
    } else if (v->follow && v->mode == VW_REPLAY && v->now != UINT64_MAX && (shown > v->t1 || shown < v->t0)) {
        /* replay: the moving "now" pages the window forward, like a chart recorder */
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
    vw_row *r = rows_build(s, v, &nr);
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

/* ---- rendering ---- */

static int col_of(const vw_state *v, const vw_layout *L, uint64_t t) {
    if (t <= v->t0)
        return 0;
    uint64_t w = (v->t1 - v->t0) / (uint64_t)L->timeline.w;
    if (w == 0)
        w = 1;
    uint64_t c = (t - v->t0) / w;
    return c >= (uint64_t)L->timeline.w ? L->timeline.w - 1 : (int)c;
}

static uint64_t time_of(const vw_state *v, const vw_layout *L, int col) {
    uint64_t w = (v->t1 - v->t0) / (uint64_t)L->timeline.w;
    return v->t0 + (uint64_t)col * w;
}

static void render_title(const st_store *s, const vw_state *v, vw_grid *g, const vw_layout *L) {
    fill(g, 0, L->title.y, g->w, ROLE_TITLE, 0);
    char job[512] = "", raw[512];
    size_t np = st_producer_count(s);
    if (np == 0) {
        snprintf(job, sizeof job, "%s", v->mode == VW_LIVE ? "waiting for a traced process..." : "empty trace");
    } else {
        const st_producer_info *p = st_producer_get(s, 0);
        const char *cmd = st_str(s, p->cmdline), *host = st_str(s, p->host);
        snprintf(raw, sizeof raw, "%s", *cmd ? cmd : "?");
        sanitized(job, sizeof job, raw);
        size_t l = strlen(job);
        snprintf(job + l, sizeof job - l, " %s pid %u", v->ascii ? "|" : "\xe2\x94\x82", p->pid);
        if (*host) {
            char h[128];
            sanitized(h, sizeof h, host);
            l = strlen(job);
            snprintf(job + l, sizeof job - l, " %s %s", v->ascii ? "|" : "\xe2\x94\x82", h);
        }
        if (p->rank >= 0 && p->world > 1) {
            l = strlen(job);
            snprintf(job + l, sizeof job - l, " rank %d/%d", p->rank, p->world);
        }
        if (np > 1) {
            l = strlen(job);
            snprintf(job + l, sizeof job - l, " (+%zu more)", np - 1);
        }
    }
    /* right side: mode, time */
    char right[160], d1[32], d2[32];
    uint64_t shown = v->now < v->end ? v->now : v->end;
    vw_fmt_dur(d1, sizeof d1, shown > v->origin ? shown - v->origin : 0, v->ascii);
    vw_fmt_dur(d2, sizeof d2, v->end > v->origin ? v->end - v->origin : 0, v->ascii);
    if (v->mode == VW_REPLAY && st_store_events(s) == 0 && v->load_progress >= 1.0) {
        snprintf(right, sizeof right, " REPLAY  no events ");
    } else if (v->mode == VW_REPLAY) {
        char sp[16];
        snprintf(sp, sizeof sp, v->speed >= 1 ? "%.0fx" : "%.2gx", v->speed);
        snprintf(right, sizeof right, " REPLAY %s %s  %s / %s ",
                 v->paused ? (v->ascii ? "||" : "\xe2\x8f\xb8") : (v->ascii ? ">" : "\xe2\x96\xb6"), sp, d1, d2);
    } else {
        /* Every producer has sent its last batch: the job is over, what is shown is all there is. */
        size_t ended = 0;
        for (size_t i = 0; i < np; i++)
            ended += st_producer_get(s, i)->ended != 0;
        if (np > 0 && ended == np)
            snprintf(right, sizeof right, " ENDED  %s ", d2);
        else
            snprintf(right, sizeof right, " LIVE %s%s  %s ", v->paused ? "paused" : (v->ascii ? "*" : "\xe2\x97\x8f"),
                     v->follow && !v->paused ? " follow" : "", d2);
    }
    if (v->recording) {
        size_t l = strlen(right);
        snprintf(right + l, sizeof right - l, "%s", v->ascii ? "REC " : "\xe2\x97\x8f REC ");
    }
    if (v->load_progress < 1.0) {
        char lp[32];
        snprintf(lp, sizeof lp, " loading %.0f%% ", v->load_progress * 100);
        size_t l = strlen(right);
        snprintf(right + l, sizeof right - l, "%s", lp);
    }
    /* events, rate and drops, between the job and the mode */
    uint64_t missed = 0, dropped = 0;
    for (size_t i = 0; i < np; i++) {
        const st_producer_info *p = st_producer_get(s, i);
        missed += p->missed;
        for (int k = 0; k < TP_DROP_MAX_; k++)
            dropped += p->drop_records[k];
    }
    char ev[32], rate[32], mid[128], dr[64];
    fmt_count(ev, sizeof ev, (double)st_store_events(s));
    if (v->mode == VW_LIVE) {
        fmt_count(rate, sizeof rate, v->events_per_s);
        snprintf(mid, sizeof mid, " %s ev  %s ev/s  drops ", ev, rate);
    } else {
        snprintf(mid, sizeof mid, " %s ev  drops ", ev);
    }
    if (missed || dropped)
        snprintf(dr, sizeof dr, "%" PRIu64 " batches + %" PRIu64 " records", missed, dropped);
    else
        snprintf(dr, sizeof dr, "0");
    int rw = 0; /* columns, not bytes: the play glyph and the micro sign take one each */
    for (const char *const *p = (const char *const[]){right, mid, dr, NULL}; *p; p++)
        for (const unsigned char *c = (const unsigned char *)*p; *c; c++)
            rw += (*c & 0xC0) != 0x80;
    int x = put_str(g, v, 0, L->title.y, 8, " synctop", ROLE_TITLE, VW_A_BOLD);
    x += put_str(g, v, x, L->title.y, 1, " ", ROLE_TITLE, 0);
    int room = g->w - x - rw - 2; /* the job, then at least one space before the counts */
    if (room > 4)
        put_str(g, v, x + 1, L->title.y, room, job, ROLE_TITLE, 0);
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s", right);
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)tmp; *p; p++)
        n += (*p & 0xC0) != 0x80;
    put_str(g, v, g->w - n, L->title.y, n, tmp, ROLE_TITLE, VW_A_BOLD);
    int dl = (int)strlen(dr), ml = (int)strlen(mid);
    if (g->w - n - dl - ml > x + 12) {
        put_str(g, v, g->w - n - dl, L->title.y, dl, dr, missed || dropped ? ROLE_WARN : ROLE_TITLE, VW_A_BOLD);
        put_str(g, v, g->w - n - dl - ml, L->title.y, ml, mid, ROLE_TITLE, 0);
    }
}

static void render_gpus(const st_store *s, const vw_state *v, vw_grid *g, const vw_layout *L) {
    /* devices with streams, in row order */
    size_t nr;
    vw_row *rows = rows_build(s, NULL, &nr);
    int shown = 0, total = 0;
    for (size_t i = 0; i < nr; i++)
        total += rows[i].type == ROW_DEVICE;
    int meter = clampi(g->w / 6, 10, 32);
    for (size_t i = 0; i < nr && shown < L->gpus.h; i++) {
        if (rows[i].type != ROW_DEVICE)
            continue;
        int y = L->gpus.y + shown++;
        /* the figures for the range the header covers: the sweep's when it has them, the
         * analysis' own when the range is the whole trace */
        uint64_t fa, fb;
        vw_figs_range(v, &fa, &fb);
        an_gpu_fig fig, *dv = NULL;
        if (fa != fb) {
            for (size_t k = 0; v->header.figs_ready && k < v->header.n_figs; k++)
                if (v->header.figs[k].producer == rows[i].producer && v->header.figs[k].device == rows[i].device)
                    dv = &v->header.figs[k];
        } else {
            for (size_t k = 0; v->an && k < v->an->n_devices; k++) {
                const an_device *d = &v->an->devices[k];
                if (d->producer == rows[i].producer && d->device == rows[i].device) {
                    fig = (an_gpu_fig){d->producer, d->device, d->span_ns, d->busy_ns, d->idle_ns, d->blocked_ns};
                    dv = &fig;
                }
            }
        }
        char lab[48], tag[24] = "";
        if (st_producer_count(s) > 1) { /* which process's GPU: two ranks both have a GPU0 */
            producer_tag(s, rows[i].producer, tag, sizeof tag - 1);
            strcat(tag, ":");
        }
        snprintf(lab, sizeof lab, " %sGPU%u ", tag, rows[i].device);
        int x = put_str(g, v, 0, y, 16, lab, ROLE_DEVICE, VW_A_BOLD);
        double busy = dv && dv->span_ns ? (double)dv->busy_ns / (double)dv->span_ns : 0;
        put_cell(g, x++, y, '[', ROLE_DIM, 0);
        int inner = meter - 2;
        double fill_cols = busy * inner;
        for (int c = 0; c < inner; c++) {
            double f = fill_cols - c;
            uint32_t ch = ' ';
            if (f >= 1)
                ch = v->ascii ? '|' : 0x2588;
            else if (f > 0)
                ch = v->ascii ? (f >= 0.5 ? '|' : ' ') : (uint32_t[]){' ', 0x258F, 0x258E, 0x258D, 0x258C, 0x258B, 0x258A, 0x2589}[clampi((int)(f * 8), 0, 7)];
            put_cell(g, x + c, y, ch, ROLE_KERNEL, 0);
        }
        char pct[16];
        snprintf(pct, sizeof pct, "%.1f%%", busy * 100);
        put_str(g, v, x + inner - (int)strlen(pct), y, (int)strlen(pct), pct, ROLE_VALUE, VW_A_BOLD);
        x += inner;
        put_cell(g, x++, y, ']', ROLE_DIM, 0);
        char buf[256], d[32], d2[32];
        if (dv) {
            vw_fmt_dur(d, sizeof d, dv->blocked_ns, v->ascii);
            vw_fmt_dur(d2, sizeof d2, dv->idle_ns, v->ascii);
            x += 1;
            x += put_str(g, v, x, y, 6, "busy ", ROLE_LABEL, 0);
            snprintf(buf, sizeof buf, "%5.1f%%", busy * 100);
            x += put_str(g, v, x, y, 8, buf, ROLE_VALUE, 0);
            x += put_str(g, v, x, y, 7, "  idle ", ROLE_LABEL, 0);
            snprintf(buf, sizeof buf, "%5.1f%%", dv->span_ns ? 100.0 * (double)dv->idle_ns / (double)dv->span_ns : 0);
            x += put_str(g, v, x, y, 8, buf, ROLE_VALUE, 0);
            x += put_str(g, v, x, y, 16, "  host blocked ", ROLE_LABEL, 0);
            x += put_str(g, v, x, y, 12, d, dv->blocked_ns ? ROLE_BLOCKED : ROLE_VALUE, VW_A_BOLD);
            if (v->header.scope_window || v->stalls.breakdown)
                x += put_str(g, v, x, y, 10, "  in view", ROLE_LABEL, VW_A_BOLD);
        } else {
            x += put_str(g, v, x + 1, y, 20, v->an && (fa == fb || v->header.figs_ready) ? "no GPU work" : "analysing...",
                         ROLE_DIM, 0) + 1;
        }
        /* device name */
        for (size_t k = 0; k < st_device_count(s); k++) {
            const st_device_info *di = st_device_get(s, k);
            if (di->producer == rows[i].producer && di->device == rows[i].device) {
                char nm[128];
                sanitized(nm, sizeof nm, st_str(s, di->name));
                if (x + 3 < g->w - 16)
                    put_str(g, v, x + 2, y, g->w - 16 - x - 2, nm, ROLE_DIM, 0);
            }
        }
        if (shown == L->gpus.h && total > shown) { /* at the right end, after what the row holds */
            int n = snprintf(buf, sizeof buf, "  (+%d more)", total - shown);
            int at = g->w - n - 1;
            fill(g, at, y, g->w - at, ROLE_DEFAULT, 0);
            put_str(g, v, at, y, n, buf, ROLE_DIM, 0);
        }
    }
    if (total == 0)
        put_str(g, v, 1, L->gpus.y, 30, v->mode == VW_LIVE ? "no GPU activity yet" : "no GPU activity", ROLE_DIM, 0);
    free(rows);
}

static void render_ruler(const vw_state *v, vw_grid *g, const vw_layout *L) {
    int y = L->ruler.y;
    char lab[32];
    vw_fmt_dur(lab, sizeof lab, v->t1 - v->t0, v->ascii);
    char left[48];
    snprintf(left, sizeof left, " %s %s", v->ascii ? "<->" : "\xe2\x86\x94", lab);
    fill(g, 0, y, g->w, ROLE_RULER, 0);
    put_str(g, v, 0, y, L->label_w, left, ROLE_DIM, 0);
    put_cell(g, L->label_w, y, v->ascii ? '+' : 0x253C, ROLE_RULER, 0);
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
        put_cell(g, L->timeline.x + c, y, v->ascii ? '-' : 0x2500, ROLE_RULER, 0);
    uint64_t rel0 = v->t0 > v->origin ? v->t0 - v->origin : 0;
    uint64_t first = (rel0 + step - 1) / step * step;
    int last_end = -1;
    /* The cursor's mark goes on the ruler; a label it would cut in two is left out (its tick
     * stays), so every label shown reads whole. */
    int cur = v->cursor >= v->t0 && v->cursor < v->t1 ? col_of(v, L, v->cursor) : -1;
    int m0 = -1, m1 = -1; /* the marked span's columns */
    if (v->ruler.marked && v->ruler.mark1 > v->t0 && v->ruler.mark0 < v->t1) {
        m0 = v->ruler.mark0 > v->t0 ? col_of(v, L, v->ruler.mark0) : 0;
        m1 = v->ruler.mark1 < v->t1 ? col_of(v, L, v->ruler.mark1 - 1) : cols - 1;
    }
    for (uint64_t t = first; v->origin + t < v->t1; t += step) {
        int c = col_of(v, L, v->origin + t);
        if (c <= last_end)
            continue;
        char d[32];
        fmt_tick(d, sizeof d, t, step, v->ascii);
        put_cell(g, L->timeline.x + c, y, v->ascii ? '|' : 0x2534, ROLE_RULER, 0);
        int n = (int)strlen(d) - (!v->ascii && strstr(d, "\xc2\xb5") ? 1 : 0);
        if (c + 1 + n < cols && !(cur > c && cur <= c + n) && !(m0 >= 0 && m0 <= c + n + 1 && m1 >= c)) {
            put_str(g, v, L->timeline.x + c + 1, y, n, d, ROLE_RULER, 0);
            last_end = c + n + 1;
        }
    }
    if (m0 >= 0) {
        /* the marked span: a band on the ruler with its duration, inside when it fits */
        int c0 = m0, c1 = m1;
        for (int c = c0; c <= c1; c++)
            put_cell(g, L->timeline.x + c, y, v->ascii ? '=' : 0x2550, ROLE_SELECTION, 0);
        put_cell(g, L->timeline.x + c0, y, v->ascii ? '[' : 0x255E, ROLE_SELECTION, VW_A_BOLD);
        put_cell(g, L->timeline.x + c1, y, v->ascii ? ']' : 0x2561, ROLE_SELECTION, VW_A_BOLD);
        char d[40];
        vw_fmt_dur(lab, sizeof lab, v->ruler.mark1 - v->ruler.mark0, v->ascii);
        snprintf(d, sizeof d, " %s ", lab);
        int n = (int)strlen(d) - (!v->ascii && strstr(d, "\xc2\xb5") ? 1 : 0);
        int at = c1 - c0 + 1 >= n + 2 ? c0 + (c1 - c0 + 1 - n) / 2 : c1 + 1 + n <= cols ? c1 + 1 : c0 - n;
        if (at >= 0)
            put_str(g, v, L->timeline.x + at, y, n, d, ROLE_SELECTION, VW_A_BOLD);
    }
    if (cur >= 0)
        put_cell(g, L->timeline.x + cur, y, v->ascii ? 'v' : 0x25BC, ROLE_CURSOR, VW_A_BOLD);
}

/* The steps of the process on the cursor's row (else the first with steps): a segment per step
 * from its start, numbered where there is room; slow steps in red, marked "!". */
static void render_steps(const st_store *s, const vw_state *v, vw_grid *g, const vw_layout *L, uint32_t producer) {
    const an_steps *st = v->steps;
    if (L->steps.h == 0 || st == NULL)
        return;
    int y = L->steps.y, cols = L->timeline.w;
    fill(g, 0, y, g->w, ROLE_DEFAULT, 0);
    char lab[48];
    snprintf(lab, sizeof lab, " steps (%s)", st->source == AN_STEPS_HEARTBEAT ? "beat" : st->source == AN_STEPS_RANGE ? "range" : "prof");
    put_str(g, v, 0, y, L->label_w, lab, ROLE_LABEL, 0);
    put_cell(g, L->label_w, y, v->ascii ? '|' : 0x2502, ROLE_DIM, 0);
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
        int c0 = x->start > v->t0 ? col_of(v, L, x->start) : 0;
        int c1 = x->end < v->t1 ? col_of(v, L, x->end - 1) : cols - 1;
        int role = x->outlier ? ROLE_BLOCKED : ROLE_DIM;
        for (int c = c0; c <= c1; c++)
            put_cell(g, L->timeline.x + c, y, x->outlier ? (v->ascii ? '=' : 0x2501) : (v->ascii ? '-' : 0x2500), role, 0);
        put_cell(g, L->timeline.x + c0, y, v->ascii ? '|' : 0x251C, role, x->outlier ? VW_A_BOLD : 0);
        char num[32];
        int n = snprintf(num, sizeof num, "%" PRId64 "%s", x->number, x->outlier ? "!" : "");
        if (c0 + 1 > numbered_to && c1 - c0 - 1 >= n) {
            put_str(g, v, L->timeline.x + c0 + 1, y, n, num, role, VW_A_BOLD);
            numbered_to = c0 + n;
        }
    }
    (void)s;
}

typedef struct frame_ctx {
    const st_store *s;
    vw_state *v;
    vw_grid *g;
    const vw_layout *L;
    vw_row *rows;
    size_t n_rows;
    uint64_t bmax;
    st_bucket *buf; /* timeline.w buckets */
    st_bucket *dev; /* device sums */
    bubble_rows br; /* the shown rows' bubbles per column */
    uint8_t *bubble_col;
} frame_ctx;

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
        if (e->start > v->now || e->end <= e->start)
            continue;
        int c0 = e->start > v->t0 ? col_of(v, L, e->start) : 0;
        int c1 = e->end < v->t1 ? col_of(v, L, e->end - 1) : cols - 1;
        char raw[256], nm[256];
        if (e->kind == TP_K_MEMCPY)
            snprintf(raw, sizeof raw, "%s", tp_copy_kind_name(e->sub));
        else if (e->kind == TP_K_MEMSET)
            snprintf(raw, sizeof raw, "memset");
        else { /* a kernel's signature reads from its name: "void " before it says nothing */
            const char *name = st_str(f->s, e->name);
            snprintf(raw, sizeof raw, "%s", strncmp(name, "void ", 5) == 0 ? name + 5 : name);
        }
        sanitized(nm, sizeof nm, raw);
        /* inside the bar, a cell of margin each side; cut with an ellipsis past its width */
        int room = c1 - c0 - 1;
        if (nm[0] == '\0' || room < 8)
            continue;
        int x0 = L->timeline.x + c0 + 1, role = g->cells[y * g->w + x0].role;
        if (role == ROLE_DEFAULT || role == ROLE_BUBBLE || role == ROLE_DIM)
            continue;
        for (int x = x0; x < x0 + room; x++)
            put_cell(g, x, y, ' ', role, VW_A_REVERSE);
        put_str(g, v, x0, y, room, nm, role, VW_A_REVERSE);
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
    return li->kind == ST_LANE_THREAD && folded(v, fold_key(FOLD_THREAD, li->producer, li->id));
}

static void render_lane_row(frame_ctx *f, int y, const vw_row *r, int is_cursor_row, int multi) {
    const vw_state *v = f->v;
    vw_grid *g = f->g;
    const vw_layout *L = f->L;
    int cols = L->timeline.w;
    char lab[128], shown[160];
    row_label(f->s, r, multi, lab, sizeof lab);
    /* a folded group says so before its name; an open process says so too (it is a tree) */
    int fold = row_folded(v, f->s, r);
    const char *mark = fold ? (v->ascii ? ">" : "\xe2\x96\xb8") : r->type == ROW_PROCESS ? (v->ascii ? "v" : "\xe2\x96\xbe") : "";
    snprintf(shown, sizeof shown, "%s%s", mark, lab);
    int lrole = r->type == ROW_LANE ? ROLE_LANE : ROLE_DEVICE;
    int lattr = (r->type != ROW_LANE ? VW_A_BOLD : 0) | (is_cursor_row && v->focus == VW_FOCUS_TIMELINE ? VW_A_REVERSE : 0);
    fill(g, 0, y, L->label_w, lrole, lattr);
    put_str(g, v, 0, y, L->label_w, shown, lrole, lattr);
    put_cell(g, L->label_w, y, v->ascii ? '|' : 0x2502, ROLE_DIM, 0);
    if (r->type == ROW_PROCESS) { /* the process: where and what it runs */
        const st_producer_info *pi = st_producer_get(f->s, r->producer);
        char what[512], clean[512];
        fill(g, L->timeline.x, y, L->timeline.w, ROLE_DEFAULT, 0);
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
            if (pi->rank >= 0)
                n += snprintf(what + n, sizeof what - (size_t)n, "  rank %d/%d", pi->rank, pi->world);
            if (pi->host)
                n += snprintf(what + n, sizeof what - (size_t)n, "  on %.100s", st_str(f->s, pi->host));
            if (pi->clock_aligned) /* its host's clock, as measured: how well this row lines up with others */
                n += snprintf(what + n, sizeof what - (size_t)n, " (clock %+.3f ms %s %.3f ms)",
                              (double)pi->clock_shift_ns / 1e6, v->ascii ? "+-" : "\xc2\xb1",
                              (double)pi->clock_uncertainty_ns / 1e6);
            if (pi->cmdline)
                snprintf(what + n, sizeof what - (size_t)n, "  %.300s", st_str(f->s, pi->cmdline));
            sanitized(clean, sizeof clean, what);
            put_str(g, v, L->timeline.x, y, L->timeline.w, clean, ROLE_DIM, 0);
        }
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
            put_cell(g, x, y, ' ', ROLE_DEFAULT, 0);
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
                put_cell(g, x, y, v->ascii ? '.' : 0x00B7, ROLE_BUBBLE, 0);
            else if (b[c].count > 0) /* instants only */
                put_cell(g, x, y, v->ascii ? '\'' : 0x2575, kind == ST_LANE_NVTX ? ROLE_NVTX : ROLE_DIM, 0);
            continue;
        }
        double frac = (double)tot / (double)bw;
        if (frac > 1)
            frac = 1;
        int role = cat_role(cat);
        if (on_bubble && r->type == ROW_DEVICE)
            role = ROLE_BUBBLE;
        put_cell(g, x, y, cell_glyph(v, cat, frac), role, 0);
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

static void bubble_rows_free(bubble_rows *br) {
    free(br->lane_slot);
    free(br->dev_key);
    free(br->dev_slot);
    free(br->sum);
    memset(br, 0, sizeof *br);
}

static void render_lanes(frame_ctx *f) {
    const st_store *s = f->s;
    vw_state *v = f->v;
    vw_grid *g = f->g;
    const vw_layout *L = f->L;
    int multi = st_producer_count(s) > 1;
    int cols = L->timeline.w;
    if (bubble_rows_make(f) != 0)
        bubble_rows_free(&f->br);
    for (int i = 0; i < L->lanes.h; i++) {
        int ri = v->row_scroll + i;
        if (ri >= (int)f->n_rows)
            break;
        memset(f->bubble_col, 0, (size_t)cols);
        render_lane_row(f, L->lanes.y + i, &f->rows[ri], ri == v->cursor_row, multi);
    }
    /* the process the top row belongs to stays named while its rows scroll under it */
    if (multi && v->row_scroll > 0 && v->row_scroll < (int)f->n_rows && f->rows[v->row_scroll].type != ROW_PROCESS)
        for (int ri = v->row_scroll - 1; ri >= 0; ri--)
            if (f->rows[ri].type == ROW_PROCESS) {
                render_lane_row(f, L->lanes.y, &f->rows[ri], 0, multi);
                break;
            }
    if (f->n_rows == 0)
        put_str(g, v, L->timeline.x + 2, L->lanes.y + 1, cols - 4,
                v->mode == VW_LIVE ? "waiting for events..." : "no events", ROLE_DIM, 0);
    if (v->notice[0]) {
        char m[sizeof v->notice];
        sanitized(m, sizeof m, v->notice);
        put_str(g, v, L->timeline.x + 2, L->lanes.y + (f->n_rows == 0 ? 2 : 0), cols - 4, m, ROLE_WARN, VW_A_BOLD);
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
                int c0 = col_of(v, L, b->start), c1 = col_of(v, L, b->end > 0 ? b->end - 1 : 0);
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
        int c = col_of(v, L, v->cursor);
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
        put_cell(g, L->label_w, L->lanes.y, v->ascii ? '^' : 0x25B2, ROLE_DIM, 0);
    if (v->row_scroll + L->lanes.h < (int)f->n_rows)
        put_cell(g, L->label_w, L->lanes.y + L->lanes.h - 1, v->ascii ? 'v' : 0x25BC, ROLE_DIM, 0);
}

/* The event under the cursor: on the cursor row's lane, the event that covers the cursor time
 * (the longest, when several do), else the longest in the cursor's column. */
static const st_event *event_at_cursor(const frame_ctx *f, size_t *lane_out) {
    const vw_state *v = f->v;
    if (v->cursor_row < 0 || v->cursor_row >= (int)f->n_rows || f->rows[v->cursor_row].type != ROW_LANE)
        return NULL;
    size_t l = f->rows[v->cursor_row].lane, n;
    *lane_out = l;
    const st_event *e = st_lane_events(f->s, l, &n);
    uint64_t w = (v->t1 - v->t0) / (uint64_t)f->L->timeline.w;
    if (w == 0)
        w = 1;
    int c = col_of(v, f->L, v->cursor);
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
        if (x->end > v->cursor && (best == NULL || x->end - x->start < best->end - best->start))
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
    if (e->corr == 0 || e->kind == TP_K_SYNC || (li->kind != ST_LANE_STREAM && li->kind != ST_LANE_THREAD))
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
                if (x->corr == e->corr && x->kind == TP_K_API) {
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
                if (x->corr == e->corr && x->kind != TP_K_API && x->kind != TP_K_SYNC) {
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
    sanitized(nm, sizeof nm, st_str(s, p->name));
    if (p->kind == TP_K_API) {
        vw_fmt_dur(d, sizeof d, e->start > p->start ? e->start - p->start : 0, f->v->ascii);
        snprintf(out, n, " %s launched by %s on thread %u; %s from the call to the start", f->v->ascii ? "<-" : "\xe2\x86\x90",
                 nm, pi->id, d);
    } else {
        vw_fmt_dur(d, sizeof d, p->start > e->start ? p->start - e->start : 0, f->v->ascii);
        char what[200];
        if (p->kind == TP_K_MEMCPY)
            snprintf(what, sizeof what, "copy %s", tp_copy_kind_name(p->sub));
        else if (p->kind == TP_K_KERNEL && nm[0])
            snprintf(what, sizeof what, "kernel %s", nm);
        else
            snprintf(what, sizeof what, "%s", tp_kind_name(p->kind));
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
    int x = put_str(g, v, 0, y, g->w, " ", ROLE_DIM, 0);
    for (size_t i = 0; i < sizeof items / sizeof items[0] + 1 && x + 2 < g->w; i++) {
        int last = i == sizeof items / sizeof items[0];
        put_cell(g, x, y, last ? (v->ascii ? '.' : 0x00B7) : cell_glyph(v, items[i].cat, 1.0),
                 last ? ROLE_BUBBLE : cat_role(items[i].cat), last ? VW_A_BOLD : 0);
        x += 2 + put_str(g, v, x + 2, y, g->w - x - 2, last ? "GPU idle" : items[i].what, ROLE_DIM, 0);
        x += put_str(g, v, x, y, g->w - x, "  ", ROLE_DIM, 0);
    }
}

static void render_detail(frame_ctx *f) {
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
    size_t lane = 0;
    const st_event *e = event_at_cursor(f, &lane);
    char buf[1024], nm[512], d[32], st[32];
    if (e == NULL) {
        char cur[32];
        vw_fmt_dur(cur, sizeof cur, v->cursor > v->origin ? v->cursor - v->origin : 0, v->ascii);
        snprintf(buf, sizeof buf, " cursor +%s  (no event here: arrows move, +/- zoom, n next stall)", cur);
        put_str(g, v, 0, y, g->w, buf, ROLE_DIM, 0);
        return;
    }
    const st_lane_info *li = st_lane_get(s, lane);
    const char *kname = e->kind == TP_K_API ? ((e->flags & TP_F_BLOCKING) ? "BLOCKING call" : "call")
                                            : tp_kind_name(e->kind);
    sanitized(nm, sizeof nm, st_str(s, e->name));
    if (e->kind == TP_K_MEMCPY)
        snprintf(nm, sizeof nm, "%s %s", tp_copy_kind_name(e->sub), e->mem >> 4 == TP_MEM_PAGEABLE || (e->mem & 15) == TP_MEM_PAGEABLE ? "(pageable)" : "");
    else if (e->kind == TP_K_MEMSET)
        snprintf(nm, sizeof nm, "%s memory", tp_mem_kind_name(e->sub));
    else if (e->kind == TP_K_SYNC)
        snprintf(nm, sizeof nm, "%s", tp_sync_type_name(e->sub));
    int x = put_str(g, v, 0, y, 16, " ", ROLE_DEFAULT, 0);
    x += put_str(g, v, x, y, 16, kname, e->kind == TP_K_API && (e->flags & TP_F_BLOCKING) ? ROLE_BLOCKED
                                        : cat_role(st_event_cat(e)), VW_A_BOLD);
    x += put_str(g, v, x, y, 2, "  ", ROLE_DEFAULT, 0);
    put_str(g, v, x, y, g->w - x, nm, ROLE_DEFAULT, VW_A_BOLD);
    /* second line: where, when, how long, bytes, call site */
    y++;
    vw_fmt_dur(d, sizeof d, e->end - e->start, v->ascii);
    vw_fmt_dur(st, sizeof st, e->start > v->origin ? e->start - v->origin : 0, v->ascii);
    char where[96];
    if (li->kind == ST_LANE_STREAM)
        snprintf(where, sizeof where, "GPU%u stream %u", li->device, li->id);
    else
        snprintf(where, sizeof where, "thread %u", li->id);
    int n = snprintf(buf, sizeof buf, " %s  start +%s  dur %s", where, st, d);
    if (e->kind == TP_K_MEMCPY || e->kind == TP_K_MEMSET) {
        char by[32];
        fmt_bytes(by, sizeof by, e->value);
        n += snprintf(buf + n, sizeof buf - (size_t)n, "  %s", by);
        if (e->kind == TP_K_MEMCPY && e->end > e->start)
            n += snprintf(buf + n, sizeof buf - (size_t)n, " (%.1f GB/s)", (double)e->value / (double)(e->end - e->start));
    } else if (e->kind == TP_K_KERNEL && e->value) {
        n += snprintf(buf + n, sizeof buf - (size_t)n, "  %" PRIu64 " blocks x %u threads", e->value, e->aux);
    }
    if (e->corr)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "  corr %u", e->corr);
    int x2 = put_str(g, v, 0, y, g->w, buf, ROLE_DEFAULT, 0);
    if (e->kind == TP_K_API && e->value) {
        char site[512];
        an_site_label(s, e->value, e->name, site, sizeof site);
        x2 += put_str(g, v, x2, y, 4, v->ascii ? "  @ " : "  \xe2\x86\x90 ", ROLE_DIM, 0);
        put_str(g, v, x2, y, g->w - x2, site, ROLE_LABEL, VW_A_BOLD);
    }
    /* with room: the launch's other end, then (expanded, or rows the lanes leave) every frame of
     * the call site */
    if (rows > 2) {
        char flow[320];
        flow_text(f, lane, e, flow, sizeof flow);
        if (flow[0]) {
            put_str(g, v, 0, y + 1, g->w, flow, ROLE_LABEL, 0);
            y++;
            rows--;
        }
    }
    /* a blocking call: what to change there, as the report says it */
    if (rows > 2 && e->kind == TP_K_API && (e->flags & TP_F_BLOCKING) && v->an != NULL) {
        const st_lane_info *tl = st_lane_get(s, lane);
        for (size_t i = 0; i < v->an->n_sites; i++) {
            const an_site *site = &v->an->sites[i];
            if (site->producer != tl->producer || site->callsite != e->value || (!e->value && site->name != e->name))
                continue;
            an_advice a;
            an_advise(s, site, &a);
            if (a.fix != AN_FIX_NONE) {
                char fix[512];
                snprintf(fix, sizeof fix, " %s. Fix: %s.", a.cause, a.change);
                put_str(g, v, 0, y + 1, g->w, fix, ROLE_WARN, 0);
                y++;
                rows--;
            }
            break;
        }
    }
    if (rows > 2 && e->kind == TP_K_API && e->value) {
        size_t nf;
        const st_frame *fr = st_callsite_frames(s, e->value, &nf);
        const st_frame *named = st_site_frame(s, e->value);
        /* the frames from the innermost, moved on so that the one the site is named after (marked
         * '>') is in sight when they do not all fit */
        size_t room = (size_t)(rows - 2), first = 0, at = named != NULL ? (size_t)(named - fr) : 0;
        if (at >= room)
            first = at - room / 2;
        for (size_t i = first; i < nf && i - first < room; i++) {
            char raw[512], clean[512];
            const char *mark = &fr[i] == named ? " > " : "   ";
            if (fr[i].kind == TP_FRAME_PYTHON && fr[i].line == 0)
                snprintf(raw, sizeof raw, "%s#%zu py  %s", mark, i, st_str(s, fr[i].func));
            else if (fr[i].kind == TP_FRAME_PYTHON)
                snprintf(raw, sizeof raw, "%s#%zu py  %s:%u  %s", mark, i, st_str(s, fr[i].file), fr[i].line,
                         st_str(s, fr[i].func));
            else if (fr[i].kind == TP_FRAME_OP)
                snprintf(raw, sizeof raw, "%s#%zu op  %s", mark, i, st_str(s, fr[i].func));
            else if (fr[i].file && fr[i].line)
                snprintf(raw, sizeof raw, "%s#%zu     %s:%u  %s  (%s+0x%" PRIx64 ")", mark, i,
                         st_str(s, fr[i].file),
                         fr[i].line, st_str(s, fr[i].func), cm_base_name(st_str(s, fr[i].module)), fr[i].pc);
            else if (fr[i].pc == 0) /* an imported frame: a function and its module, no address */
                snprintf(raw, sizeof raw, "%s#%zu     %s  %s", mark, i, fr[i].func ? st_str(s, fr[i].func) : "??",
                         st_str(s, fr[i].module));
            else
                snprintf(raw, sizeof raw, "%s#%zu     %s  %s+0x%" PRIx64, mark, i, fr[i].func ? st_str(s, fr[i].func) : "??",
                         st_str(s, fr[i].module), fr[i].pc);
            sanitized(clean, sizeof clean, raw);
            put_str(g, v, 0, y + 1 + (int)(i - first), g->w, clean,
                    fr[i].kind == TP_FRAME_PYTHON ? ROLE_LABEL : ROLE_DEFAULT, 0);
        }
    } else if (v->detail && rows > 2) {
        put_str(g, v, 1, y + 1, g->w - 2, "(no call site for this event; enter closes the detail pane)", ROLE_DIM, 0);
    }
}

/* Bubbles of a device by cause over [a, b): out[cause] += their overlap. */
static void bubbles_by_cause(const an_result *an, uint64_t maxlen, uint32_t p, uint16_t d, uint64_t a, uint64_t b,
                             uint64_t gap, uint64_t out[AN_CAUSE_N_]) {
    for (size_t i = bubble_from(an, maxlen, a); i < an->n_bubbles && an->bubbles[i].start < b; i++) {
        const an_bubble *x = &an->bubbles[i];
        if (x->lane != SIZE_MAX || x->producer != p || x->device != d || x->end - x->start < gap ||
            x->cause <= 0 || x->cause >= AN_CAUSE_N_)
            continue;
        an_bubble_split(x, a, b, out);
    }
}

#define HOST_RANGES_X 104 /* the breakdown pane's column for the host's ranges, beside its tables */

/* The breakdown pane's rows of the host's own share of the whole run by the range it ran (the
 * report's "What to change" lists them), in columns x0 onwards from row y while it is under end;
 * returns the next row. */
static int render_host_ranges(frame_ctx *f, int x0, int y, int end) {
    const st_store *s = f->s;
    const vw_state *v = f->v;
    vw_grid *g = f->g;
    char line[512];
    int multi = st_producer_count(s) > 1;
    uint64_t host_all = 0;
    for (size_t i = 0; v->an && i < v->an->n_host_ranges; i++)
        host_all += v->an->host_ranges[i].idle_ns;
    if (host_all > 0 && y < end) {
        if (x0 == 0)
            fill(g, 0, y, g->w, ROLE_PANEL, 0);
        put_str(g, v, x0, y++, g->w - x0, " HOST ELSEWHERE, WHOLE RUN, BY THE RANGE IT RAN", ROLE_PANEL, VW_A_BOLD);
        for (size_t i = 0; i < v->an->n_host_ranges && i < 3 && y < end; i++, y++) {
            const an_host_range *h = &v->an->host_ranges[i];
            char d[32], nm[160];
            vw_fmt_dur(d, sizeof d, h->idle_ns, v->ascii);
            const char *raw = h->name ? st_str(s, h->name) : "(in no range)";
            size_t k = strlen(raw);
            while (h->numbered && k > 0 && raw[k - 1] >= '0' && raw[k - 1] <= '9')
                k--;
            sanitized(nm, sizeof nm - 1, raw);
            if (h->numbered && k < sizeof nm - 1) /* a profiler's numbered ranges: "ProfilerStep#N" */
                memcpy(nm + k, "N", 2);
            int len = (int)strlen(d) - (strstr(d, "\xc2\xb5") ? 1 : 0);
            snprintf(line, sizeof line, " %*s%s %6.1f%%  ", 14 - len > 0 ? 14 - len : 0, "", d,
                     100.0 * (double)h->idle_ns / (double)host_all);
            int x = x0 + put_str(g, v, x0, y, g->w - x0, line, ROLE_DEFAULT, 0);
            if (multi) {
                char tag[24];
                producer_tag(s, h->producer, tag, sizeof tag - 1);
                strcat(tag, " ");
                x += put_str(g, v, x, y, g->w - x, tag, ROLE_DIM, 0);
            }
            put_str(g, v, x, y, g->w - x, nm, ROLE_DEFAULT, 0);
        }
    }
    return y;
}

/* The idle breakdown pane: per GPU, for the window shown, busy and idle and the idle by cause
 * (blocked in a call, launch latency, host busy elsewhere, the rest: edges and short gaps); then
 * HTA's idle breakdown of the whole trace per stream (host_wait, kernel_wait, other). */
static void render_breakdown(frame_ctx *f) {
    const st_store *s = f->s;
    const vw_state *v = f->v;
    vw_grid *g = f->g;
    const vw_layout *L = f->L;
    int y = L->stalls.y, end = L->stalls.y + L->stalls.h;
    fill(g, 0, y, g->w, ROLE_PANEL, 0);
    char line[512];
    snprintf(line, sizeof line, " %-14s %7s %7s %13s %9s %14s %8s   (b: the stalls)", "GPU IDLE, VIEW", "BUSY", "IDLE",
             "BLOCKED CALL", "LAUNCH", "HOST ELSEWHERE", "REST");
    put_str(g, v, 0, y++, g->w, line, ROLE_PANEL, VW_A_BOLD);
    int wide = g->w >= HOST_RANGES_X + 60, top = y; /* wide: the host's ranges beside the tables */
    uint64_t a, b;
    vw_figs_range(v, &a, &b);
    int multi = st_producer_count(s) > 1;
    for (size_t i = 0; v->an && i < v->an->n_devices && y < end; i++, y++) {
        const an_device *dv = &v->an->devices[i];
        char tag[24] = "", name[48];
        if (multi) {
            producer_tag(s, dv->producer, tag, sizeof tag - 1);
            strcat(tag, ":");
        }
        snprintf(name, sizeof name, "%sGPU%u", tag, dv->device);
        const an_gpu_fig *fig = NULL;
        for (size_t k = 0; v->header.figs_ready && k < v->header.n_figs; k++)
            if (v->header.figs[k].producer == dv->producer && v->header.figs[k].device == dv->device)
                fig = &v->header.figs[k];
        if (fig == NULL || fig->span_ns == 0) {
            snprintf(line, sizeof line, " %-14s %s", name, "analysing...");
            put_str(g, v, 0, y, g->w, line, ROLE_DIM, 0);
            continue;
        }
        uint64_t cause[AN_CAUSE_N_] = {0}, caused = 0;
        bubbles_by_cause(v->an, f->bmax, dv->producer, dv->device, a, b, v->gap_ns, cause);
        for (int c = 1; c < AN_CAUSE_N_; c++)
            caused += cause[c];
        uint64_t rest = fig->idle_ns > caused ? fig->idle_ns - caused : 0;
        double span = (double)fig->span_ns;
        snprintf(line, sizeof line, " %-14s %6.1f%% %6.1f%% %12.1f%% %8.1f%% %13.1f%% %7.1f%%", name,
                 100.0 * (double)fig->busy_ns / span, 100.0 * (double)fig->idle_ns / span,
                 100.0 * (double)cause[AN_CAUSE_BLOCK] / span, 100.0 * (double)cause[AN_CAUSE_LAUNCH] / span,
                 100.0 * (double)cause[AN_CAUSE_HOST] / span, 100.0 * (double)rest / span);
        put_str(g, v, 0, y, g->w, line, ROLE_DEFAULT, 0);
        if (cause[AN_CAUSE_BLOCK]) { /* the share the stalls cost, in red: what this tool is about */
            char red[32];
            snprintf(red, sizeof red, " %12.1f%%", 100.0 * (double)cause[AN_CAUSE_BLOCK] / span);
            put_str(g, v, 31, y, 14, red, ROLE_BLOCKED, VW_A_BOLD);
        }
    }
    if (y >= end) {
        if (wide)
            render_host_ranges(f, HOST_RANGES_X, top, end);
        return;
    }
    if (v->stalls.hta == NULL) {
        put_str(g, v, 1, y, g->w - 2, v->stalls.hta_note[0] ? v->stalls.hta_note : "HTA's breakdown: replay only", ROLE_DIM, 0);
        render_host_ranges(f, wide ? HOST_RANGES_X : 0, wide ? top : y + 1, end);
        return;
    }
    snprintf(line, sizeof line, " %-14s %14s %14s %14s %10s", "HTA, WHOLE RUN", "HOST_WAIT", "KERNEL_WAIT", "OTHER", "OPS");
    fill(g, 0, y, g->w, ROLE_PANEL, 0);
    put_str(g, v, 0, y++, g->w, line, ROLE_PANEL, 0);
    for (size_t i = 0; i < v->stalls.hta->n_streams && y < end; i++, y++) {
        const hta_stream *hs = &v->stalls.hta->streams[i];
        char name[48], cell[HTA_IDLE_N_][32];
        snprintf(name, sizeof name, "r%d stream %lld", hs->rank, (long long)hs->stream);
        for (int c = 0; c < HTA_IDLE_N_; c++) {
            if (!hs->present[c]) {
                snprintf(cell[c], sizeof cell[c], "-");
                continue;
            }
            char d[32];
            uint64_t mag = hs->idle_ns[c] < 0 ? (uint64_t)-hs->idle_ns[c] : (uint64_t)hs->idle_ns[c];
            vw_fmt_dur(d, sizeof d, mag, v->ascii);
            snprintf(cell[c], sizeof cell[c], "%s%s", hs->idle_ns[c] < 0 ? "-" : "", d);
        }
        /* durations may carry a two-byte micro sign: pad by columns */
        int n = snprintf(line, sizeof line, " %-14s", name);
        for (int c = 0; c < HTA_IDLE_N_; c++) {
            int len = (int)strlen(cell[c]) - (strstr(cell[c], "\xc2\xb5") ? 1 : 0);
            n += snprintf(line + n, sizeof line - (size_t)n, " %*s%s", 14 - len > 0 ? 14 - len : 0, "", cell[c]);
        }
        snprintf(line + n, sizeof line - (size_t)n, " %10" PRIu64, hs->ops);
        put_str(g, v, 0, y, g->w, line, ROLE_DEFAULT, 0);
    }
    render_host_ranges(f, wide ? HOST_RANGES_X : 0, wide ? top : y, end);
}

/* The cause of a site's stalls in a word or two (advice.h), else the kind of block. */
static const char *site_cause(const st_store *s, const an_stall_site *site) {
    static const char *const words[AN_FIX_N_] = {
        [AN_FIX_ITEM] = ".item()",      [AN_FIX_IF_TENSOR] = "if tensor", [AN_FIX_TO_HOST] = "copy",
        [AN_FIX_NONZERO] = "nonzero",   [AN_FIX_DEVICE_SYNC] = "dev sync", [AN_FIX_EVENT_SYNC] = "evt sync",
        [AN_FIX_STREAM_SYNC] = "str sync", [AN_FIX_PAGEABLE] = "pageable", [AN_FIX_SYNC_COPY] = "sync copy",
        [AN_FIX_ALLOC] = "alloc",       [AN_FIX_QUERY] = "polling",       [AN_FIX_MEMSET] = "memset",
    };
    static const char *const kinds[] = {"?", "sync", "memcpy", "pageable", "memset", "alloc", "query", "other"};
    an_site as = {.producer = site->producer, .callsite = site->callsite, .name = site->name, .kind = site->kind,
                  .count = site->count, .total_ns = site->total_ns, .max_ns = site->max_ns,
                  .gpu_idle_ns = site->gpu_idle_ns};
    an_advice a;
    an_advise(s, &as, &a);
    if (a.fix > AN_FIX_NONE && a.fix < AN_FIX_N_ && words[a.fix] != NULL)
        return words[a.fix];
    return site->kind > 0 && site->kind < 8 ? kinds[site->kind] : "?";
}

static void render_stalls(frame_ctx *f) {
    const st_store *s = f->s;
    const vw_state *v = f->v;
    vw_grid *g = f->g;
    const vw_layout *L = f->L;
    if (L->stalls.h == 0)
        return;
    if (v->stalls.breakdown) {
        render_breakdown(f);
        return;
    }
    int y = L->stalls.y;
    int focus = v->focus == VW_FOCUS_STALLS;
    fill(g, 0, y, g->w, ROLE_PANEL, 0);
    /* the columns, right-aligned over the rows' figures; the one sorted by carries a mark */
    char head[256];
    int hn = snprintf(head, sizeof head, "%s", focus ? " TOP STALLS" : " top stalls");
    static const struct { const char *label; int width, sort; } cols[] = {
        {"COUNT", 6, AN_STALL_BY_COUNT}, {" TOTAL", 10, AN_STALL_BY_TOTAL}, {" MAX", 10, AN_STALL_BY_MAX},
        {" %WALL", 7, -1},           {" GPU IDLE", 10, AN_STALL_BY_IDLE},
    };
    int wide = g->w >= 140; /* else the call site keeps the room GPU idle would take */
    for (size_t c = 0; c < sizeof cols / sizeof cols[0] - (wide ? 0 : 1); c++) {
        int marked = cols[c].sort == (int)v->stalls.sort;
        int pad = cols[c].width - (int)strlen(cols[c].label) - marked;
        hn += snprintf(head + hn, sizeof head - (size_t)hn, "%*s%s%s", pad > 0 ? pad : 0, "", cols[c].label,
                       marked ? (v->ascii ? "v" : "\xe2\x96\xbc") : "");
    }
    hn += snprintf(head + hn, sizeof head - (size_t)hn, " %-9s %s", "CAUSE", "CALL SITE");
    if (v->stalls.step && v->stalls.step_no >= 0) /* t: only the step at the cursor */
        snprintf(head + hn, sizeof head - (size_t)hn, "  (step %" PRId64 " only; t: all)", v->stalls.step_no);
    put_str(g, v, 0, y, g->w, head, ROLE_PANEL, focus ? VW_A_BOLD : 0);
    int multi = st_producer_count(s) > 1;
    uint64_t shown = v->now < v->end ? v->now : v->end;
    uint64_t wall = shown > v->origin ? shown - v->origin : 1;
    if (v->stalls.n_sites == 0) {
        put_str(g, v, 2, y + 1, g->w - 4,
                v->an == NULL                                    ? "analysing..."
                : v->stalls.step && v->steps == NULL              ? "no steps found (t: all the run)"
                : v->stalls.step && v->stalls.step_no < 0          ? "the cursor is in no step (t: all the run)"
                : v->stalls.step                                  ? "no host-blocking calls in this step (t: all the run)"
                                                                 : "no host-blocking calls so far",
                ROLE_DIM, 0);
        return;
    }
    for (int i = 0; i + 1 < L->stalls.h; i++) {
        int k = v->stalls.scroll + i;
        if (k >= (int)v->stalls.n_sites)
            break;
        const an_stall_site *site = &v->stalls.sites[k];
        char tot[32], mx[32], idle[32], lab[512], row[768], who[24] = "";
        vw_fmt_dur(tot, sizeof tot, site->total_ns, v->ascii);
        vw_fmt_dur(mx, sizeof mx, site->max_ns, v->ascii);
        vw_fmt_dur(idle, sizeof idle, site->gpu_idle_ns, v->ascii);
        an_site_label(s, site->callsite, site->name, lab, sizeof lab);
        if (site->n_procs > 1) /* the same call in several processes */
            snprintf(who, sizeof who, "%s%u ", v->ascii ? "x" : "\xc3\x97", site->n_procs);
        else if (multi) { /* which process */
            producer_tag(s, site->producer, who, sizeof who - 1);
            strcat(who, " ");
        }
        int sel = k == v->stalls.sel;
        /* durations may carry a two-byte micro sign: pad by columns, not bytes */
        char tp[40], mp[40], ip[40];
        int tl = (int)strlen(tot) - (strstr(tot, "\xc2\xb5") ? 1 : 0), ml = (int)strlen(mx) - (strstr(mx, "\xc2\xb5") ? 1 : 0);
        int il = (int)strlen(idle) - (strstr(idle, "\xc2\xb5") ? 1 : 0);
        snprintf(tp, sizeof tp, "%*s%s", 9 - tl > 0 ? 9 - tl : 0, "", tot);
        snprintf(mp, sizeof mp, "%*s%s", 9 - ml > 0 ? 9 - ml : 0, "", mx);
        snprintf(ip, sizeof ip, "%*s%s", 9 - il > 0 ? 9 - il : 0, "", idle);
        snprintf(row, sizeof row, "%4d %12" PRIu64 " %s %s %5.1f%%%s%s %-9s %s%s", k + 1, site->count, tp, mp,
                 /* per process, for a row of several */
                 100.0 * (double)site->total_ns / (double)wall / (site->n_procs > 1 ? site->n_procs : 1), wide ? " " : "", wide ? ip : "", site_cause(s, site),
                 who, lab);
        int role = sel ? ROLE_SELECTION : ROLE_DEFAULT;
        int attr = sel && focus ? VW_A_BOLD : 0;
        if (sel)
            fill(g, 0, y + 1 + i, g->w, role, attr);
        put_str(g, v, 0, y + 1 + i, g->w, row, role, attr);
        if (!sel && v->stalls.sort != AN_STALL_BY_COUNT && (wide || v->stalls.sort != AN_STALL_BY_IDLE)) {
            /* the column the panel is sorted by, in red */
            int at = v->stalls.sort == AN_STALL_BY_TOTAL ? 18 : v->stalls.sort == AN_STALL_BY_MAX ? 28 : 45;
            const char *txt = v->stalls.sort == AN_STALL_BY_TOTAL ? tp : v->stalls.sort == AN_STALL_BY_MAX ? mp : ip;
            put_str(g, v, at, y + 1 + i, 9, txt, ROLE_BLOCKED, VW_A_BOLD);
        }
    }
}

static void render_keys(const vw_state *v, vw_grid *g, const vw_layout *L) {
    int y = L->keys.y;
    fill(g, 0, y, g->w, ROLE_KEYTEXT, 0);
    if (v->search.typing) {
        char b[128];
        snprintf(b, sizeof b, "/%s", v->search.term);
        int x = put_str(g, v, 0, y, g->w - 1, b, ROLE_DEFAULT, VW_A_BOLD);
        put_cell(g, x, y, '_', ROLE_CURSOR, VW_A_REVERSE);
        put_str(g, v, x + 2, y, g->w - x - 2, "(search names; enter finds the next, enter alone the last again, esc cancels)", ROLE_DIM, 0);
        return;
    }
    const char *keys[16], *labels[16];
    size_t n = vw_bar_items(v->mode == VW_LIVE, keys, labels, 16);
    int x = 0;
    int msg_w = v->message[0] ? (int)strlen(v->message) + 2 : 0;
    for (size_t i = 0; i < n; i++) {
        int need = (int)strlen(keys[i]) + (int)strlen(labels[i]) + 1;
        if (x + need > g->w - msg_w)
            break;
        x += put_str(g, v, x, y, 8, keys[i], ROLE_KEY, VW_A_BOLD);
        x += put_str(g, v, x, y, 12, labels[i], ROLE_KEYTEXT, 0);
        x += put_str(g, v, x, y, 1, " ", ROLE_KEYTEXT, 0);
    }
    if (v->message[0]) {
        char m[200];
        sanitized(m, sizeof m, v->message);
        int mw = (int)strlen(m);
        if (mw > g->w - x - 1)
            mw = g->w - x - 1;
        if (mw > 0)
            put_str(g, v, g->w - mw - 1, y, mw, m, ROLE_WARN, VW_A_BOLD);
    }
}

static void render_help(const vw_state *v, vw_grid *g) {
    /* the key table's lines, then what no key says; the title sits in the top border */
    char lines[40][96];
    int n = (int)vw_help_lines(lines, 37);
    if (n > 37)
        n = 37;
    snprintf(lines[n++], sizeof lines[0], "%-18s %s", "mouse", "click a lane or a stall row; the wheel zooms");
    snprintf(lines[n++], sizeof lines[0], "GPU rows: union of streams; %s GPU idle; %s host spans: blocked calls",
             v->ascii ? "." : "\xc2\xb7", v->mono ? "reversed" : "red");

    /* Every line fits an 80-column screen: the box is the longest line plus border and margin. */
    int bw = 0, bh = n + 2;
    for (int i = 0; i < n; i++) {
        int len = (int)strlen(lines[i]);
        if (len + 4 > bw)
            bw = len + 4;
    }
    if (bw > g->w - 2)
        bw = g->w - 2;
    if (bh > g->h) /* an overlay: on a small screen it may cover the title and the key bar */
        bh = g->h;
    int x0 = (g->w - bw) / 2, y0 = (g->h - bh) / 2;
    for (int y = 0; y < bh; y++)
        fill(g, x0, y0 + y, bw, ROLE_HELP, 0);
    for (int x = 0; x < bw; x++) {
        put_cell(g, x0 + x, y0, v->ascii ? '-' : 0x2500, ROLE_HELP, 0);
        put_cell(g, x0 + x, y0 + bh - 1, v->ascii ? '-' : 0x2500, ROLE_HELP, 0);
    }
    for (int y = 0; y < bh; y++) {
        put_cell(g, x0, y0 + y, v->ascii ? '|' : 0x2502, ROLE_HELP, 0);
        put_cell(g, x0 + bw - 1, y0 + y, v->ascii ? '|' : 0x2502, ROLE_HELP, 0);
    }
    if (!v->ascii) {
        put_cell(g, x0, y0, 0x250C, ROLE_HELP, 0);
        put_cell(g, x0 + bw - 1, y0, 0x2510, ROLE_HELP, 0);
        put_cell(g, x0, y0 + bh - 1, 0x2514, ROLE_HELP, 0);
        put_cell(g, x0 + bw - 1, y0 + bh - 1, 0x2518, ROLE_HELP, 0);
    }
    const char *title = " synctop help ";
    put_str(g, v, x0 + (bw - (int)strlen(title)) / 2, y0, bw - 4, title, ROLE_HELP, VW_A_BOLD);
    for (int i = 0; i < n && i + 1 < bh - 1; i++)
        put_str(g, v, x0 + 2, y0 + 1 + i, bw - 4, lines[i], ROLE_HELP, 0);
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

void vw_render(const st_store *s, vw_state *v, vw_grid *g) {
    struct timespec at = {0};
    if (v->timing)
        clock_gettime(CLOCK_MONOTONIC, &at);
    if (vw_grid_resize(g, g->w, g->h) != 0)
        return;
    fold_new_processes(v, s);
    vw_layout L;
    vw_layout_for(v, s, g->w, g->h, &L);
    if (L.too_small) {
        char m[96];
        snprintf(m, sizeof m, "terminal too small: %dx%d, synctop needs %dx%d", g->w, g->h, VW_MIN_W, VW_MIN_H);
        int n = (int)strlen(m);
        put_str(g, v, n < g->w ? (g->w - n) / 2 : 0, g->h / 2, g->w, m, ROLE_WARN, VW_A_BOLD);
        return;
    }
    vw_state_settle(v, s, g->w, g->h);
    frame_ctx f = {.s = s, .v = v, .g = g, .L = &L};
    f.rows = rows_build(s, v, &f.n_rows);
    f.buf = calloc((size_t)L.timeline.w, sizeof *f.buf);
    f.dev = calloc((size_t)L.timeline.w, sizeof *f.dev);
    f.bubble_col = calloc((size_t)L.timeline.w, 1);
    f.bmax = v->an ? v->an->bubble_max_ns : 0;
    if (f.buf && f.dev && f.bubble_col) {
        part_done(v, VW_PART_SETUP, &at);
        render_title(s, v, g, &L);
        part_done(v, VW_PART_TITLE, &at);
        render_gpus(s, v, g, &L);
        part_done(v, VW_PART_GPUS, &at);
        render_ruler(v, g, &L);
        part_done(v, VW_PART_RULER, &at);
        render_steps(s, v, g, &L, v->cursor_row < (int)f.n_rows ? f.rows[v->cursor_row].producer : 0);
        part_done(v, VW_PART_STEPS, &at);
        render_lanes(&f);
        part_done(v, VW_PART_LANES, &at);
        render_detail(&f);
        part_done(v, VW_PART_DETAIL, &at);
        render_stalls(&f);
        part_done(v, VW_PART_STALLS, &at);
        render_keys(v, g, &L);
        if (v->help)
            render_help(v, g);
        part_done(v, VW_PART_KEYS, &at);
    }
    free(f.rows);
    free(f.buf);
    free(f.dev);
    free(f.bubble_col);
    bubble_rows_free(&f.br);
}

/* ---- input ---- */

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

/* Brings [a, b) into view the way less brings a match onto the screen: nothing moves when it is
 * already well inside the window and at least a cell wide; otherwise it is centred, and zoomed so
 * that it spans a few cells when it was narrower than one, or fits when it was wider than most of
 * the window. */
static void reveal(vw_state *v, uint64_t a, uint64_t b, int cols) {
    uint64_t w = v->t1 - v->t0, d = b > a ? b - a : 1;
    uint64_t colw = w / (uint64_t)(cols > 0 ? cols : 1);
    if (colw == 0)
        colw = 1;
    if (d < colw) {
        w = d * (uint64_t)cols / 4; /* four cells */
    } else if (d > w - w / 5) {
        w = d + d / 4;
    } else if (a >= v->t0 + w / 10 && b <= v->t1 - w / 20) {
        return;
    }
    if (w < (uint64_t)cols)
        w = (uint64_t)cols;
    uint64_t mid = a + d / 2;
    v->t0 = mid > w / 2 ? mid - w / 2 : 0;
    if (v->t0 > a) /* rounding: the start stays on screen, where the cursor goes */
        v->t0 = a;
    v->t1 = v->t0 + w;
    v->follow = 0;
}

/* The row of a lane, unfolding what hides it (a jump lands on it); the first row when even so
 * it is not shown (an idle lane while idle lanes are hidden). */
static int row_of_lane(vw_state *v, const st_store *s, size_t lane) {
    const st_lane_info *li = st_lane_get(s, lane);
    uint64_t keys[] = {fold_key(FOLD_PROCESS, li->producer, 0), fold_key(FOLD_DEVICE, li->producer, li->device),
                       fold_key(FOLD_THREAD, li->producer, li->id)};
    for (size_t k = 0; k < 3; k++)
        if ((k != 1 || li->kind == ST_LANE_STREAM) && (k != 2 || li->kind == ST_LANE_NVTX) && folded(v, keys[k]))
            fold_toggle(v, keys[k]);
    size_t n;
    vw_row *r = rows_build(s, v, &n);
    int out = 0;
    for (size_t i = 0; r && i < n; i++)
        if (r[i].type == ROW_LANE && r[i].lane == lane)
            out = (int)i;
    free(r);
    return out;
}

static const an_block *block_at_site_next(const vw_state *v, const an_stall_site *site, uint64_t after, int dir) {
    const an_block *best = NULL;
    for (size_t k = 0; v->an && k < v->an->n_blocks; k++) {
        const an_block *b = &v->an->blocks[k];
        if (b->end > v->now || (site && !an_stall_site_has(site, b)))
            continue;
        if (dir > 0 && b->start > after && (best == NULL || b->start < best->start))
            best = b;
        if (dir < 0 && b->start < after && (best == NULL || b->start > best->start))
            best = b;
    }
    return best;
}

static void go_block(vw_state *v, const st_store *s, const an_block *b, int cols) {
    v->cursor = b->start;
    reveal(v, b->start, b->end, cols);
    v->cursor_row = row_of_lane(v, s, b->lane);
    for (size_t i = 0; i < v->stalls.n_sites; i++)
        if (an_stall_site_has(&v->stalls.sites[i], b))
            v->stalls.sel = (int)i;
    char d[32], site[200];
    vw_fmt_dur(d, sizeof d, b->end - b->start, v->ascii);
    an_site_label(s, b->callsite, b->name, site, sizeof site);
    snprintf(v->message, sizeof v->message, "stall %s at %.120s", d, site);
}

static int name_matches(const char *name, const char *term) {
    size_t n = strlen(term);
    if (n == 0)
        return 0;
    for (const char *p = name; *p; p++) {
        size_t i = 0;
        while (i < n && p[i] && tolower((unsigned char)p[i]) == tolower((unsigned char)term[i]))
            i++;
        if (i == n)
            return 1;
    }
    return 0;
}

/* Whether the event's name matches the term, each name decided once (names are few, events many). */
typedef struct name_cache {
    uint32_t ids[4096];
    uint8_t res[4096];
} name_cache;

static int event_matches(name_cache *c, const st_store *s, const st_event *e, const char *term) {
    uint32_t id = e->name, slot = id % 4096;
    if (id == 0)
        return 0;
    if (c->ids[slot] != id) {
        c->ids[slot] = id;
        c->res[slot] = (uint8_t)name_matches(st_str(s, id), term);
    }
    return c->res[slot];
}

/* The first match starting after t (up to now): its start, end and lane; 0 when there is none. */
static int first_match_after(name_cache *c, const vw_state *v, const st_store *s, uint64_t t, uint64_t *start,
                             uint64_t *end, size_t *lane) {
    uint64_t best_t = UINT64_MAX;
    for (size_t l = 0; l < st_lane_count(s); l++) {
        size_t n;
        const st_event *e = st_lane_events(s, l, &n);
        size_t i = t == UINT64_MAX ? n : st_lane_lower_bound(s, l, t + 1);
        for (; i < n && e[i].start < best_t && e[i].start <= v->now; i++)
            if (event_matches(c, s, &e[i], v->search.term)) {
                best_t = e[i].start;
                *end = e[i].end;
                *lane = l;
                break;
            }
    }
    *start = best_t;
    return best_t != UINT64_MAX;
}

/* The next match after the cursor, wrapping to the start as less does, and which of all the
 * matches it is ("3 of 41"). */
static void search_next(vw_state *v, const st_store *s, int cols) {
    if (v->search.term[0] == '\0')
        return;
    name_cache *c = calloc(1, sizeof *c);
    if (c == NULL)
        return;
    char term[80];
    sanitized(term, sizeof term, v->search.term);
    uint64_t start, end;
    size_t lane = 0;
    int wrapped = 0;
    if (!first_match_after(c, v, s, v->cursor, &start, &end, &lane)) {
        wrapped = 1;
        if (v->origin == 0 || !first_match_after(c, v, s, v->origin - 1, &start, &end, &lane)) {
            snprintf(v->message, sizeof v->message, "no \"%s\"", term);
            free(c);
            return;
        }
    }
    uint64_t total = 0, before = 0;
    for (size_t l = 0; l < st_lane_count(s); l++) {
        size_t n;
        const st_event *e = st_lane_events(s, l, &n);
        for (size_t i = 0; i < n && e[i].start <= v->now; i++)
            if (event_matches(c, s, &e[i], v->search.term)) {
                total++;
                before += e[i].start < start;
            }
    }
    free(c);
    v->cursor = start;
    reveal(v, start, end, cols);
    v->cursor_row = row_of_lane(v, s, lane);
    snprintf(v->message, sizeof v->message, "found \"%s\": %" PRIu64 " of %" PRIu64 "%s", term, before + 1, total,
             wrapped ? " (wrapped to the start)" : "");
}

/* A key while the search term is typed. */
static void search_key(vw_state *v, const st_store *s, int cols, int key) {
    size_t n = strlen(v->search.term);
    if (key == VW_KEY_ESC) {
        v->search.typing = 0;
    } else if (key == VW_KEY_ENTER || key == '\n' || key == '\r') {
        v->search.typing = 0;
        if (v->search.term[0] == '\0') /* "/" then enter: the last search again, as in less */
            snprintf(v->search.term, sizeof v->search.term, "%s", v->search.last);
        else
            snprintf(v->search.last, sizeof v->search.last, "%s", v->search.term);
        search_next(v, s, cols);
    } else if (key == VW_KEY_BACKSPACE || key == 127 || key == 8) {
        if (n > 0)
            v->search.term[n - 1] = '\0';
    } else if (key >= 0x20 && key < 0x7F && n + 1 < sizeof v->search.term) {
        v->search.term[n] = (char)key;
        v->search.term[n + 1] = '\0';
    }
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
            v->stalls.sel += d, v->stalls.worst_pos = -1;
        else
            v->cursor_row += d;
        break;
    }
    case VW_CMD_PAGE_UP:
    case VW_CMD_PAGE_DOWN: {
        int d = c == VW_CMD_PAGE_UP ? -1 : 1;
        if (stalls)
            v->stalls.sel += d * stall_page, v->stalls.worst_pos = -1;
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
        zoom(v, v->cursor, 0.5, (uint64_t)cols);
        if (v->mode == VW_REPLAY)
            v->follow = 0;
        break;
    case VW_CMD_ZOOM_OUT:
        zoom(v, v->cursor, 2.0, (uint64_t)cols);
        break;
    case VW_CMD_FIT:
        v->t0 = v->origin;
        v->t1 = v->end > v->origin ? v->end : v->origin + 1000000;
        break;
    case VW_CMD_BREAKDOWN:
        v->stalls.breakdown = !v->stalls.breakdown;
        snprintf(v->message, sizeof v->message, "%s", v->stalls.breakdown ? "GPU idle for the window shown, by cause" : "top stalls");
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

/* Time: play and pause, speed, start and end, following the newest events. */
static void time_cmd(vw_state *v, vw_cmd c) {
    uint64_t width = v->t1 - v->t0;
    switch (c) {
    case VW_CMD_PLAY:
        if (v->mode == VW_REPLAY && v->paused && v->now == UINT64_MAX)
            v->now = v->origin; /* everything is shown: play from the start */
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
        if (v->mode == VW_REPLAY)
            v->now = UINT64_MAX;
        v->t0 = v->end > width ? v->end - width + width / 50 : v->origin;
        if (v->t0 < v->origin)
            v->t0 = v->origin;
        v->t1 = v->t0 + (width ? width : 1);
        v->cursor = v->end > v->t0 ? v->end - 1 : v->t0;
        v->follow = 1;
        break;
    case VW_CMD_FOLLOW:
        v->follow = !v->follow;
        snprintf(v->message, sizeof v->message, "follow %s", v->follow ? "on" : "off");
        break;
    default:
        break;
    }
}

static int by_duration_desc(const void *a, const void *b) {
    const an_block *x = *(const an_block *const *)a, *y = *(const an_block *const *)b;
    uint64_t dx = x->end - x->start, dy = y->end - y->start;
    if (dx != dy)
        return dx > dy ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The selected call site's stalls, worst first: the next (dir 1) or previous one, with "i/N". */
static void worst_cmd(vw_state *v, const st_store *s, int dir, int cols) {
    if (v->stalls.n_sites == 0 || v->an == NULL) {
        snprintf(v->message, sizeof v->message, "no stalls so far");
        return;
    }
    const an_stall_site *site = &v->stalls.sites[v->stalls.sel];
    const an_block **list = malloc((v->an->n_blocks ? v->an->n_blocks : 1) * sizeof *list);
    if (list == NULL)
        return;
    size_t n = 0;
    for (size_t k = 0; k < v->an->n_blocks; k++)
        if (v->an->blocks[k].end <= v->now && an_stall_site_has(site, &v->an->blocks[k]))
            list[n++] = &v->an->blocks[k];
    if (n == 0) {
        free(list);
        return;
    }
    qsort(list, n, sizeof *list, by_duration_desc);
    if (v->stalls.worst_pos < 0 || v->stalls.worst_pos >= (int)n) /* the first i: the worst; I: the shortest */
        v->stalls.worst_pos = dir > 0 ? 0 : (int)n - 1;
    else
        v->stalls.worst_pos = (int)(((long)v->stalls.worst_pos + dir + (long)n) % (long)n);
    int sel = v->stalls.sel;
    go_block(v, s, list[v->stalls.worst_pos], cols);
    v->stalls.sel = sel; /* the same site, even when another matches the block too */
    v->stalls.show_site = 1;
    char d[32], label[200];
    vw_fmt_dur(d, sizeof d, list[v->stalls.worst_pos]->end - list[v->stalls.worst_pos]->start, v->ascii);
    an_site_label(s, list[v->stalls.worst_pos]->callsite, list[v->stalls.worst_pos]->name, label, sizeof label);
    snprintf(v->message, sizeof v->message, "stall %d/%zu by length: %s at %.100s", v->stalls.worst_pos + 1, n, d, label);
    free(list);
}

/* Stalls, search, the detail pane and the panels. */
static void stall_cmd(vw_state *v, const st_store *s, vw_cmd c, int cols) {
    int stalls = v->focus == VW_FOCUS_STALLS;
    switch (c) {
    case VW_CMD_NEXT_STALL:
    case VW_CMD_PREV_STALL: {
        int next = c == VW_CMD_NEXT_STALL;
        const an_block *b = block_at_site_next(v, NULL, v->cursor, next ? 1 : -1);
        if (b == NULL) {
            snprintf(v->message, sizeof v->message, "%s", next ? "no later stall" : "no earlier stall");
        } else {
            go_block(v, s, b, cols);
            v->stalls.show_site = 1;
            v->stalls.worst_pos = -1; /* i starts again from the worst */
        }
        break;
    }
    case VW_CMD_WORST_NEXT:
    case VW_CMD_WORST_PREV:
        worst_cmd(v, s, c == VW_CMD_WORST_NEXT ? 1 : -1, cols);
        break;
    case VW_CMD_SORT_NEXT:
    case VW_CMD_SORT_PREV: {
        static const char *const names[AN_STALL_BY_N_] = {"total time blocked", "longest stall", "count",
                                                      "GPU idle caused"};
        an_stall_site keep = v->stalls.n_sites ? v->stalls.sites[v->stalls.sel] : (an_stall_site){0};
        v->stalls.sort = (an_stall_order)(((int)v->stalls.sort + (c == VW_CMD_SORT_NEXT ? 1 : AN_STALL_BY_N_ - 1)) % AN_STALL_BY_N_);
        an_stall_sites_sort(v->stalls.sites, v->stalls.n_sites, v->stalls.sort);
        for (size_t i = 0; i < v->stalls.n_sites; i++) /* the selection stays on its call site */
            if (v->stalls.sites[i].producer == keep.producer && v->stalls.sites[i].callsite == keep.callsite &&
                v->stalls.sites[i].name == keep.name)
                v->stalls.sel = (int)i;
        snprintf(v->message, sizeof v->message, "stalls by %s", names[v->stalls.sort]);
        break;
    }
    case VW_CMD_STALL_STEP:
        v->stalls.step = !v->stalls.step;
        vw_sites_update(v);
        if (v->stalls.step && (v->steps == NULL || v->steps->n_steps == 0))
            snprintf(v->message, sizeof v->message, "no steps found: the stalls panel stays empty (t: all)");
        else if (v->stalls.step && v->stalls.step_no >= 0)
            snprintf(v->message, sizeof v->message, "stalls of step %" PRId64 " (t: all the run)", v->stalls.step_no);
        else if (v->stalls.step)
            snprintf(v->message, sizeof v->message, "stalls of the step at the cursor: it is in none");
        else
            snprintf(v->message, sizeof v->message, "stalls of the whole run");
        break;
    case VW_CMD_SEARCH:
        v->search.typing = 1;
        v->search.term[0] = '\0';
        break;
    case VW_CMD_ENTER:
        v->detail = !v->detail;
        break;
    case VW_CMD_PANEL:
        v->focus = stalls ? VW_FOCUS_TIMELINE : VW_FOCUS_STALLS;
        break;
    case VW_CMD_BACK:
        v->ruler.marked = 0;
        v->detail = 0;
        v->stalls.show_site = 0;
        v->stalls.worst_pos = -1;
        v->focus = VW_FOCUS_TIMELINE;
        break;
    default:
        break;
    }
}

/* The event under the cursor, as the detail pane names it; NULL when none. */
static const st_event *cursor_event(vw_state *v, const st_store *s, const vw_layout *L, size_t *lane) {
    frame_ctx f = {.s = s, .v = v, .L = L};
    f.rows = rows_build(s, v, &f.n_rows);
    const st_event *e = f.rows ? event_at_cursor(&f, lane) : NULL;
    free(f.rows);
    return e;
}

/* f and m: the event under the cursor fills the window, or is marked. */
static void select_cmd(vw_state *v, const st_store *s, const vw_layout *L, vw_cmd c) {
    size_t lane = 0;
    const st_event *e = L->too_small ? NULL : cursor_event(v, s, L, &lane);
    if (c == VW_CMD_MARK && v->ruler.marked && (e == NULL || (e->start == v->ruler.mark0 && e->end == v->ruler.mark1))) {
        v->ruler.marked = 0;
        snprintf(v->message, sizeof v->message, "mark removed");
        return;
    }
    if (e == NULL) {
        snprintf(v->message, sizeof v->message, "no event under the cursor");
        return;
    }
    uint64_t d = e->end > e->start ? e->end - e->start : 1;
    if (c == VW_CMD_FIT_SEL) {
        /* the event in the middle eight tenths of the window */
        uint64_t w = d + d / 4 > (uint64_t)L->timeline.w ? d + d / 4 : (uint64_t)L->timeline.w;
        v->t0 = e->start > (w - d) / 2 ? e->start - (w - d) / 2 : 0;
        if (v->t0 < v->origin && v->origin <= e->start)
            v->t0 = v->origin;
        v->t1 = v->t0 + w;
        v->cursor = e->start;
        v->follow = 0;
        return;
    }
    v->ruler.marked = 1;
    v->ruler.mark0 = e->start;
    v->ruler.mark1 = e->start + d;
    char dur[32], nm[96];
    vw_fmt_dur(dur, sizeof dur, d, v->ascii);
    sanitized(nm, sizeof nm, st_str(s, e->name));
    snprintf(v->message, sizeof v->message, "marked %s: %s", nm[0] ? nm : tp_kind_name(e->kind), dur);
}

/* c, C and e: fold the group under the cursor, unfold them all, hide the idle lanes. The cursor
 * stays on the group's own row. */
static void fold_cmd(vw_state *v, const st_store *s, vw_cmd c) {
    if (c == VW_CMD_UNFOLD_ALL) {
        snprintf(v->message, sizeof v->message, "%s", v->lanes.n_folds ? "every group unfolded" : "nothing is folded");
        v->lanes.n_folds = 0;
        return;
    }
    if (c == VW_CMD_HIDE_IDLE) {
        v->lanes.hide_idle = !v->lanes.hide_idle;
        snprintf(v->message, sizeof v->message, "%s", v->lanes.hide_idle ? "lanes with nothing in the window are hidden (e shows them)"
                                                                 : "every lane is shown");
        return;
    }
    size_t n;
    vw_row *rows = rows_build(s, v, &n);
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
            head = (vw_row){ROW_DEVICE, SIZE_MAX, li->producer, li->device};
        } else if (li->device == TP_NO_DEVICE) { /* a thread and its ranges */
            key = fold_key(FOLD_THREAD, li->producer, li->id);
            if (li->kind == ST_LANE_NVTX)
                for (size_t l = 0; l < st_lane_count(s); l++) {
                    const st_lane_info *t = st_lane_get(s, l);
                    if (t->kind == ST_LANE_THREAD && t->producer == li->producer && t->id == li->id)
                        head = (vw_row){ROW_LANE, l, t->producer, t->device};
                }
        } else {
            snprintf(v->message, sizeof v->message, "nothing to fold here");
            return;
        }
    }
    int now = fold_toggle(v, key);
    snprintf(v->message, sizeof v->message, "%s (c again: %s)", now ? "folded" : "unfolded", now ? "unfold" : "fold");
    rows = rows_build(s, v, &n);
    for (size_t i = 0; rows && i < n; i++)
        if (rows[i].type == head.type && rows[i].producer == head.producer &&
            (head.type != ROW_DEVICE || rows[i].device == head.device) && (head.type != ROW_LANE || rows[i].lane == head.lane))
            v->cursor_row = (int)i;
    free(rows);
}

int vw_hta_wanted(const vw_state *v) { return v->stalls.hta_pending && v->stalls.hta == NULL; }

void vw_hta_take(vw_state *v, hta_result *h, int rc, const err_msg *err) {
    v->stalls.hta_pending = 0;
    if (rc != 0 || h == NULL || v->stalls.hta != NULL) {
        if (v->stalls.hta == NULL)
            snprintf(v->stalls.hta_note, sizeof v->stalls.hta_note, "HTA's breakdown: %.70s", h ? err->msg : "out of memory");
        else if (rc == 0 && h != NULL)
            hta_result_free(h);
        free(h);
        return;
    }
    v->stalls.hta = h;
}

/* HTA's breakdown of a replayed trace, once it is loaded: made once, kept. With hta_async the
 * loop makes it on its analysis thread (a frame is not kept waiting), else it is made here. */
static void hta_ask(vw_state *v, const st_store *s) {
    if (v->stalls.hta != NULL || v->stalls.hta_pending)
        return;
    if (v->mode != VW_REPLAY) {
        snprintf(v->stalls.hta_note, sizeof v->stalls.hta_note, "HTA's breakdown: on a recorded run (synctop report --hta)");
        return;
    }
    if (v->load_progress < 1.0) {
        snprintf(v->stalls.hta_note, sizeof v->stalls.hta_note, "HTA's breakdown: once the file is loaded (b twice)");
        return;
    }
    v->stalls.hta_pending = 1;
    if (v->stalls.hta_async) {
        snprintf(v->stalls.hta_note, sizeof v->stalls.hta_note, "HTA's breakdown: computing...");
        return;
    }
    hta_result *h = calloc(1, sizeof *h);
    err_msg err = {{0}};
    int rc = h == NULL ? ERR_NOMEM : hta_analyze(s, NULL, h, &err);
    vw_hta_take(v, h, rc, &err);
}

/* { and }: the previous / next slow step after the cursor, fitted in the window. */
static void slow_step_cmd(vw_state *v, const vw_layout *L, vw_cmd c) {
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
        snprintf(v->message, sizeof v->message, "%s", st == NULL || st->n_steps == 0 ? "no steps found"
                                                      : c == VW_CMD_NEXT_SLOW ? "no slow step after the cursor"
                                                                              : "no slow step before the cursor");
        return;
    }
    uint64_t d = best->end - best->start, w = d + d / 4 > (uint64_t)L->timeline.w ? d + d / 4 : (uint64_t)L->timeline.w;
    v->t0 = best->start > (w - d) / 2 ? best->start - (w - d) / 2 : 0;
    v->t1 = v->t0 + w;
    v->cursor = best->start;
    v->follow = 0;
    char dw[32], dm[32];
    vw_fmt_dur(dw, sizeof dw, d, v->ascii);
    vw_fmt_dur(dm, sizeof dm, st->median_ns, v->ascii);
    snprintf(v->message, sizeof v->message, "step %" PRId64 ": %s, slow (median %s)", best->number, dw, dm);
}

int vw_key(vw_state *v, const st_store *s, int w, int h, int key) {
    vw_layout L;
    vw_layout_for(v, s, w, h, &L);
    int cols = L.too_small ? 80 : L.timeline.w;
    uint64_t colw = (v->t1 - v->t0) / (uint64_t)cols;
    if (colw == 0)
        colw = 1;
    if (v->search.typing) {
        search_key(v, s, cols, key);
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
    else if (c >= VW_CMD_ZOOM_IN && c <= VW_CMD_BREAKDOWN) {
        window_cmd(v, c, cols);
        if (c == VW_CMD_BREAKDOWN && v->stalls.breakdown)
            hta_ask(v, s);
    }
    else if (c == VW_CMD_FIT_SEL || c == VW_CMD_MARK)
        select_cmd(v, s, &L, c);
    else if (c >= VW_CMD_FOLD && c <= VW_CMD_HIDE_IDLE)
        fold_cmd(v, s, c);
    else if (c == VW_CMD_NEXT_SLOW || c == VW_CMD_PREV_SLOW)
        slow_step_cmd(v, &L, c);
    else if (c >= VW_CMD_NEXT_STALL && c <= VW_CMD_BACK)
        stall_cmd(v, s, c, cols);
    else
        time_cmd(v, c);
    vw_state_settle(v, s, w, h);
    return VW_ACT_REDRAW;
}

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
    if (kind == VW_MOUSE_WHEEL_UP || kind == VW_MOUSE_WHEEL_DOWN) {
        zoom(v, at, kind == VW_MOUSE_WHEEL_UP ? 0.5 : 2.0, (uint64_t)L.timeline.w);
        if (v->mode == VW_REPLAY && kind == VW_MOUSE_WHEEL_UP)
            v->follow = 0;
        vw_state_settle(v, s, w, h);
        return VW_ACT_REDRAW;
    }
    if (kind != VW_MOUSE_CLICK)
        return VW_ACT_NONE;
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
