/*
 * The key bar (the keys, htop style, the status message, the search prompt while a term is typed),
 * the help overlay, both read from the key table (keys.h), and the search the prompt runs.
 */
#include "screen_int.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vw__render_keys(const vw_state *v, vw_grid *g, const vw_layout *L) {
    int y = L->keys.y;
    vw__fill(g, 0, y, g->w, ROLE_KEYTEXT, 0);
    if (v->search.typing) {
        char b[128];
        snprintf(b, sizeof b, "/%s", v->search.term);
        int x = vw__put_str(g, v, 0, y, g->w - 1, b, ROLE_DEFAULT, VW_A_BOLD);
        vw__put_cell(g, x, y, '_', ROLE_CURSOR, VW_A_REVERSE);
        vw__put_str(g, v, x + 2, y, g->w - x - 2, "(search names; enter finds the next, enter alone the last again, esc cancels)", ROLE_DIM, 0);
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
        x += vw__put_str(g, v, x, y, 8, keys[i], ROLE_KEY, VW_A_BOLD);
        x += vw__put_str(g, v, x, y, 12, labels[i], ROLE_KEYTEXT, 0);
        x += vw__put_str(g, v, x, y, 1, " ", ROLE_KEYTEXT, 0);
    }
    if (v->message[0]) {
        char m[200];
        vw__sanitized(m, sizeof m, v->message);
        int mw = (int)strlen(m);
        if (mw > g->w - x - 1)
            mw = g->w - x - 1;
        if (mw > 0)
            vw__put_str(g, v, g->w - mw - 1, y, mw, m, ROLE_WARN, VW_A_BOLD);
    }
}

/* Columns a line of UTF-8 text takes (the help's text is narrow characters only). */
static int text_cols(const char *s, size_t n) {
    int c = 0;
    for (size_t i = 0; i < n && s[i]; i++)
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

/* Bytes of s that fit in cols columns, ending at a space when the rest does not fit (so a line
 * breaks between words), and never in the middle of a character. */
static size_t help_break(const char *s, int cols) {
    size_t len = strlen(s), i = 0;
    int c = 0;
    if (cols < 1)
        cols = 1;
    while (i < len && c < cols) {
        i++;
        while (i < len && ((unsigned char)s[i] & 0xC0) == 0x80)
            i++;
        c++;
    }
    if (i >= len)
        return len;
    for (size_t k = i; k > 0; k--)
        if (s[k] == ' ')
            return k;
    return i;
}

#define HELP_KEYS_W 19 /* the keys' column and its space: a wrapped line goes on after it */
#define HELP_MAX_ROWS 64

void vw__render_help(const vw_state *v, vw_grid *g) {
    /* the key table's lines, then what no key says; the title sits in the top border */
    char keys[37][96], lines[40][160];
    int n = (int)vw_help_lines(keys, 37);
    if (n > 37)
        n = 37;
    for (int i = 0; i < n; i++)
        snprintf(lines[i], sizeof lines[i], "%s", keys[i]);
    snprintf(lines[n++], sizeof lines[0], "%-18s %s", "mouse", "click: a lane, a stall row; drag: measure a span; wheel: scroll; ctrl+wheel: zoom");
    snprintf(lines[n++], sizeof lines[0], "GPU rows: union of streams; %s GPU idle; %s host spans: blocked calls",
             v->ascii ? "." : "\xc2\xb7", v->mono ? "reversed" : "red");

    /* The box is the longest line plus border and margin, as wide as the screen allows; a line
     * longer than that goes on in rows of its own under its text, so that every line is whole.
     * At 80x24 it takes the whole screen, down to its last row. */
    int text_w = 0;
    for (int i = 0; i < n; i++) {
        int len = text_cols(lines[i], sizeof lines[i]);
        if (len > text_w)
            text_w = len;
    }
    if (text_w > g->w - 4)
        text_w = g->w - 4;
    const char *row[HELP_MAX_ROWS];
    size_t row_len[HELP_MAX_ROWS];
    int indent[HELP_MAX_ROWS], rows = 0;
    for (int i = 0; i < n && rows < HELP_MAX_ROWS; i++) {
        const char *p = lines[i];
        int in = 0;
        do {
            size_t k = help_break(p, text_w - in);
            row[rows] = p;
            row_len[rows] = k;
            indent[rows++] = in;
            p += k;
            while (*p == ' ')
                p++;
            in = HELP_KEYS_W < text_w / 2 ? HELP_KEYS_W : 2;
        } while (*p && rows < HELP_MAX_ROWS);
    }
    int bw = text_w + 4, bh = rows + 2;
    if (bh > g->h) /* an overlay: on a small screen it may cover the title and the key bar */
        bh = g->h;
    int x0 = (g->w - bw) / 2, y0 = (g->h - bh) / 2;
    for (int y = 0; y < bh; y++)
        vw__fill(g, x0, y0 + y, bw, ROLE_HELP, 0);
    for (int x = 0; x < bw; x++) {
        vw__put_cell(g, x0 + x, y0, v->ascii ? '-' : 0x2500, ROLE_HELP, 0);
        vw__put_cell(g, x0 + x, y0 + bh - 1, v->ascii ? '-' : 0x2500, ROLE_HELP, 0);
    }
    for (int y = 0; y < bh; y++) {
        vw__put_cell(g, x0, y0 + y, v->ascii ? '|' : 0x2502, ROLE_HELP, 0);
        vw__put_cell(g, x0 + bw - 1, y0 + y, v->ascii ? '|' : 0x2502, ROLE_HELP, 0);
    }
    if (!v->ascii) {
        vw__put_cell(g, x0, y0, 0x250C, ROLE_HELP, 0);
        vw__put_cell(g, x0 + bw - 1, y0, 0x2510, ROLE_HELP, 0);
        vw__put_cell(g, x0, y0 + bh - 1, 0x2514, ROLE_HELP, 0);
        vw__put_cell(g, x0 + bw - 1, y0 + bh - 1, 0x2518, ROLE_HELP, 0);
    }
    const char *title = " synctop help ";
    vw__put_str(g, v, x0 + (bw - (int)strlen(title)) / 2, y0, bw - 4, title, ROLE_HELP, VW_A_BOLD);
    for (int i = 0; i < rows && i + 1 < bh - 1; i++) {
        char text[160];
        snprintf(text, sizeof text, "%.*s", (int)row_len[i], row[i]);
        vw__put_str(g, v, x0 + 2 + indent[i], y0 + 1 + i, bw - 4 - indent[i], text, ROLE_HELP, 0);
    }
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
    uint32_t id = st_ev_name(s, e), slot = id % 4096;
    if (id == 0)
        return 0;
    if (c->ids[slot] != id) {
        c->ids[slot] = id;
        c->res[slot] = (uint8_t)name_matches(st_str(s, id), term);
    }
    return c->res[slot];
}

/* The first match starting after t (up to now): its start, end, lane and depth (ranges lanes); 0
 * when there is none. */
static int first_match_after(name_cache *c, const vw_state *v, const st_store *s, uint64_t t, uint64_t *start,
                             uint64_t *end, size_t *lane, uint32_t *depth) {
    uint64_t best_t = UINT64_MAX;
    for (size_t l = 0; l < st_lane_count(s); l++) {
        size_t n;
        const st_event *e = st_lane_events(s, l, &n);
        size_t i = t == UINT64_MAX ? n : st_lane_lower_bound(s, l, t + 1);
        for (; i < n && e[i].start < best_t && e[i].start <= v->now; i++)
            if (event_matches(c, s, &e[i], v->search.term)) {
                best_t = e[i].start;
                *end = st_ev_end(s, &e[i]);
                *lane = l;
                *depth = st_ev_aux(s, &e[i]);
                break;
            }
    }
    *start = best_t;
    return best_t != UINT64_MAX;
}

/* The last match starting before t: its start, end, lane and depth; 0 when there is none. */
static int last_match_before(name_cache *c, const vw_state *v, const st_store *s, uint64_t t, uint64_t *start,
                             uint64_t *end, size_t *lane, uint32_t *depth) {
    uint64_t best_t = 0;
    int found = 0;
    for (size_t l = 0; l < st_lane_count(s); l++) {
        size_t n;
        const st_event *e = st_lane_events(s, l, &n);
        size_t i = st_lane_lower_bound(s, l, t);
        while (i > 0 && e[i - 1].start > v->now)
            i--;
        for (; i > 0 && (!found || e[i - 1].start > best_t); i--)
            if (event_matches(c, s, &e[i - 1], v->search.term)) {
                best_t = e[i - 1].start;
                *end = st_ev_end(s, &e[i - 1]);
                *lane = l;
                *depth = st_ev_aux(s, &e[i - 1]);
                found = 1;
                break;
            }
    }
    *start = best_t;
    return found;
}

/* The next match after the cursor (dir > 0) or the one before it, wrapping round as less does,
 * and which of all the matches it is ("3 of 41"). */
static void search_go(vw_state *v, const st_store *s, int cols, int dir) {
    if (v->search.term[0] == '\0')
        return;
    name_cache *c = calloc(1, sizeof *c);
    if (c == NULL)
        return;
    char term[80];
    vw__sanitized(term, sizeof term, v->search.term);
    uint64_t start, end;
    size_t lane = 0;
    uint32_t depth = 0;
    int wrapped = 0, found;
    if (dir > 0)
        found = first_match_after(c, v, s, v->cursor, &start, &end, &lane, &depth) ||
                (wrapped = 1, v->origin != 0 && first_match_after(c, v, s, v->origin - 1, &start, &end, &lane, &depth));
    else
        found = last_match_before(c, v, s, v->cursor, &start, &end, &lane, &depth) ||
                (wrapped = 1, last_match_before(c, v, s, UINT64_MAX, &start, &end, &lane, &depth));
    if (!found) {
        snprintf(v->message, sizeof v->message, "no \"%s\"", term);
        v->search.active = 0;
        free(c);
        return;
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
    vw__reveal(v, start, end, cols);
    v->cursor_row = vw__row_of_range(v, s, lane, depth);
    v->search.active = 1;
    snprintf(v->message, sizeof v->message, "found \"%s\": %" PRIu64 " of %" PRIu64 "%s; n/N: next/previous", term,
             before + 1, total, !wrapped ? "" : dir > 0 ? " (wrapped to the start)" : " (wrapped to the end)");
}

void vw__search_again(vw_state *v, const st_store *s, int cols, int dir) { search_go(v, s, cols, dir); }

/* A key while the search term is typed. */
void vw__search_key(vw_state *v, const st_store *s, int cols, int key) {
    size_t n = strlen(v->search.term);
    if (key == VW_KEY_ESC) {
        v->search.typing = 0;
    } else if (key == VW_KEY_ENTER || key == '\n' || key == '\r') {
        v->search.typing = 0;
        if (v->search.term[0] == '\0') /* "/" then enter: the last search again, as in less */
            snprintf(v->search.term, sizeof v->search.term, "%s", v->search.last);
        else
            snprintf(v->search.last, sizeof v->search.last, "%s", v->search.term);
        search_go(v, s, cols, 1);
    } else if (key == VW_KEY_BACKSPACE || key == 127 || key == 8) {
        if (n > 0)
            v->search.term[n - 1] = '\0';
    } else if (key >= 0x20 && key < 0x7F && n + 1 < sizeof v->search.term) {
        v->search.term[n] = (char)key;
        v->search.term[n + 1] = '\0';
    }
}

void vw__search_open(vw_state *v) {
    v->search.typing = 1;
    v->search.term[0] = '\0';
}
