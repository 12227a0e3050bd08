/*
 * What every panel of the view (screen.h) writes with: the cell grid and the scheme of colour roles,
 * sanitized text, durations and counts written into cells, the glyphs of the lanes, and the
 * viewport's time-to-column mapping. Every name that comes from a trace passes through
 * tp_sanitize (vw__sanitized, vw__put_str) before it reaches a cell.
 */
#include "screen_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "synctop/sanitize.h"

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
void vw__put_cell(vw_grid *g, int x, int y, uint32_t ch, int role, int attr) {
    if (x < 0 || y < 0 || x >= g->w || y >= g->h)
        return;
    vw_cell *c = &g->cells[y * g->w + x];
    if (c->ch == VW_CH_WIDE && x > 0)
        c[-1].ch = ' ';
    if (x + 1 < g->w && c[1].ch == VW_CH_WIDE)
        c[1].ch = ' ';
    *c = (vw_cell){ch, (uint8_t)role, (uint8_t)attr};
}

/* The character at p (UTF-8) into *c; returns its bytes. */
static size_t utf8_next(const unsigned char *p, uint32_t *c) {
    if (p[0] >= 0xF0) {
        *c = ((p[0] & 7u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
        return 4;
    }
    if (p[0] >= 0xE0) {
        *c = ((p[0] & 15u) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
        return 3;
    }
    if (p[0] >= 0xC0) {
        *c = ((p[0] & 31u) << 6) | (p[1] & 0x3Fu);
        return 2;
    }
    *c = p[0];
    return 1;
}

/* What character c is drawn as: a control character as '?' (text is sanitized before; none gets
 * through here either), and in ASCII mode anything beyond ASCII. */
static uint32_t shown_char(const vw_state *v, uint32_t c) {
    return c < 0x20 || c == 0x7F || (c >= 0x80 && c < 0xA0) || (c >= 0x80 && v->ascii) ? '?' : c;
}

/* Writes sanitized UTF-8 text at (x, y), at most maxw columns; returns the columns used. Text
 * that does not fit ends in an ellipsis. */
int vw__put_str(vw_grid *g, const vw_state *v, int x, int y, int maxw, const char *s, int role, int attr) {
    int used = 0;
    const unsigned char *p = (const unsigned char *)s;
    while (*p && used < maxw) {
        uint32_t c;
        p += utf8_next(p, &c);
        c = shown_char(v, c);
        int cw = vw_char_width(c);
        if (cw == 0)
            continue; /* a combining mark or zero-width character: the grid has no room to combine */
        if (used + cw > maxw - 1 && *p) {
            vw__put_cell(g, x + used++, y, v->ascii ? '~' : 0x2026, role, attr);
            break;
        }
        if (used + cw > maxw || x + used + cw > g->w) {
            if (used < maxw)
                vw__put_cell(g, x + used++, y, v->ascii ? '~' : 0x2026, role, attr);
            break;
        }
        vw__put_cell(g, x + used, y, c, role, attr);
        if (cw == 2)
            vw__put_cell(g, x + used + 1, y, VW_CH_WIDE, role, attr);
        used += cw;
    }
    return used;
}

/* The columns vw__put_str gives the first n bytes of s, when they all fit. */
static int str_cols(const vw_state *v, const char *s, size_t n) {
    int cols = 0;
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        uint32_t c;
        p += utf8_next(p, &c);
        cols += vw_char_width(shown_char(v, c));
    }
    return cols;
}

/* s in maxw columns, shortened in its middle when it does not fit: both ends stay in sight. */
static int put_middle(vw_grid *g, const vw_state *v, int x, int y, int maxw, const char *s, int role, int attr) {
    size_t n = strlen(s);
    int all = str_cols(v, s, n);
    if (all <= maxw || maxw < 3)
        return vw__put_str(g, v, x, y, maxw, s, role, attr);
    int used = vw__put_str(g, v, x, y, maxw / 2, s, role, attr); /* its last cell an ellipsis */
    size_t at = 0;
    while (at < n && all > maxw - used) { /* the longest end that fits in the rest */
        uint32_t c;
        size_t k = utf8_next((const unsigned char *)s + at, &c);
        all -= vw_char_width(shown_char(v, c));
        at += k;
    }
    return used + vw__put_str(g, v, x + used, y, maxw - used, s + at, role, attr);
}

#define TAIL_HEAD_MIN 6 /* columns the text before the tail keeps, when it has as many */

int vw__put_str_tail(vw_grid *g, const vw_state *v, int x, int y, int maxw, const char *s, size_t tail, int role,
                     int attr) {
    size_t n = strlen(s);
    char head[1024];
    if (tail >= n || tail >= sizeof head || str_cols(v, s, n) <= maxw)
        return vw__put_str(g, v, x, y, maxw, s, role, attr);
    int hw = str_cols(v, s, tail), tw = str_cols(v, s + tail, n - tail);
    int keep = hw < TAIL_HEAD_MIN ? hw : TAIL_HEAD_MIN;
    memcpy(head, s, tail);
    head[tail] = '\0';
    int used = vw__put_str(g, v, x, y, tw <= maxw - keep ? maxw - tw : keep, head, role, attr);
    return used + put_middle(g, v, x + used, y, maxw - used, s + tail, role, attr);
}

void vw__fill(vw_grid *g, int x, int y, int w, int role, int attr) {
    for (int i = 0; i < w; i++)
        vw__put_cell(g, x + i, y, ' ', role, attr);
}

/* A name from a trace, made safe for a terminal. */
void vw__sanitized(char *out, size_t n, const char *s) { tp_sanitize(out, n, s, strlen(s), NULL); }

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
void vw__producer_tag(const st_store *s, uint32_t producer, char *out, size_t n) {
    const st_producer_info *pi = st_producer_get(s, producer);
    if (pi != NULL && pi->rank >= 0 && !rank_shared(s, producer, pi->rank))
        snprintf(out, n, "r%d", pi->rank);
    else if (pi != NULL)
        snprintf(out, n, "p%u", pi->pid);
    else
        snprintf(out, n, "#%u", producer);
}

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
void vw__fmt_tick(char *out, size_t n, uint64_t t, uint64_t step, int ascii) {
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

void vw__fmt_count(char *out, size_t n, double x) {
    if (x < 1e4)
        snprintf(out, n, "%.0f", x);
    else if (x < 1e6)
        snprintf(out, n, "%.1fk", x / 1e3);
    else if (x < 1e9)
        snprintf(out, n, "%.1fM", x / 1e6);
    else
        snprintf(out, n, "%.1fG", x / 1e9);
}

void vw__fmt_bytes(char *out, size_t n, uint64_t b) {
    if (b < 1024)
        snprintf(out, n, "%" PRIu64 " B", b);
    else if (b < (1u << 20))
        snprintf(out, n, "%.1f KiB", (double)b / 1024);
    else if (b < (1u << 30))
        snprintf(out, n, "%.1f MiB", (double)b / (1 << 20));
    else
        snprintf(out, n, "%.2f GiB", (double)b / (1 << 30));
}

static const uint32_t eighths[9] = {' ', 0x2581, 0x2582, 0x2583, 0x2584, 0x2585, 0x2586, 0x2587, 0x2588};

int vw__cat_role(int cat) {
    static const int r[ST_CAT_N] = {ROLE_KERNEL, ROLE_MEMCPY, ROLE_MEMSET, ROLE_SYNC,
                                    ROLE_API, ROLE_BLOCKED, ROLE_NVTX};
    return r[cat];
}

/* The glyph of a cell that is busy frac (0..1] of its time, mostly with cat. */
uint32_t vw__cell_glyph(const vw_state *v, int cat, double frac) {
    int e = (int)(frac * 8 + 0.999);
    e = clampi(e, 1, 8);
    if (v->ascii) {
        static const char full[ST_CAT_N] = {'#', '=', '%', '|', '-', 'X', '~'};
        /* a short host call is ',': '.' is GPU idle's */
        static const char part[ST_CAT_N] = {'+', ':', '%', '|', ',', 'x', '~'};
        return (uint32_t)(e >= 4 ? full[cat] : part[cat]);
    }
    switch (cat) {
    case ST_CAT_MEMCPY: return e >= 4 ? 0x2593 : 0x2592; /* dark / medium shade */
    case ST_CAT_MEMSET: return 0x2591;                    /* light shade */
    case ST_CAT_SYNC: return 0x259A;                      /* quadrants */
    default: return eighths[e];
    }
}

/* ---- the viewport ---- */

int vw__col_of(const vw_state *v, const vw_layout *L, uint64_t t) {
    if (t <= v->t0)
        return 0;
    uint64_t w = (v->t1 - v->t0) / (uint64_t)L->timeline.w;
    if (w == 0)
        w = 1;
    uint64_t c = (t - v->t0) / w;
    return c >= (uint64_t)L->timeline.w ? L->timeline.w - 1 : (int)c;
}

/* Brings [a, b) into view the way less brings a match onto the screen: nothing moves when it is
 * already well inside the window and at least a cell wide; otherwise it is centred, and zoomed so
 * that it spans a few cells when it was narrower than one, or fits when it was wider than most of
 * the window. */
void vw__reveal(vw_state *v, uint64_t a, uint64_t b, int cols) {
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
    v->live_span = 0;
}
