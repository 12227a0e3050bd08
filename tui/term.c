/*
 * The terminal (term.h): ncurses, and nothing else of synctop includes it. Colours come from one
 * scheme table indexed by vw_role; without colour (NO_COLOR, or a terminal that has none) the same
 * table gives attributes, and the view's glyphs stay distinct per kind.
 */
#include "term.h"

#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>

#define NCURSES_WIDECHAR 1
#include <ncurses.h>

struct term {
    int ascii, mono;
    int w, h;
    vw_grid prev;
    int full;
    SCREEN *scr;
};

/* The scheme: per role, a foreground and background colour and the attributes to add in colour,
 * then the attributes that stand in for colour on a monochrome terminal. */
typedef struct scheme_entry {
    short fg, bg;
    attr_t attr;
    attr_t mono;
} scheme_entry;

static const scheme_entry scheme[ROLE_N_] = {
    [ROLE_DEFAULT] = {-1, -1, 0, 0},
    [ROLE_TITLE] = {COLOR_BLACK, COLOR_CYAN, 0, A_REVERSE},
    [ROLE_LABEL] = {COLOR_CYAN, -1, 0, 0},
    [ROLE_VALUE] = {-1, -1, A_BOLD, A_BOLD},
    [ROLE_WARN] = {COLOR_RED, -1, A_BOLD, A_BOLD | A_UNDERLINE},
    [ROLE_DIM] = {COLOR_BLUE, -1, A_BOLD, A_DIM},
    [ROLE_RULER] = {COLOR_CYAN, -1, 0, 0},
    [ROLE_LANE] = {-1, -1, 0, 0},
    [ROLE_DEVICE] = {COLOR_GREEN, -1, A_BOLD, A_BOLD},
    [ROLE_KERNEL] = {COLOR_GREEN, -1, 0, 0},
    [ROLE_MEMCPY] = {COLOR_CYAN, -1, 0, 0},
    [ROLE_MEMSET] = {COLOR_MAGENTA, -1, 0, 0},
    [ROLE_SYNC] = {COLOR_WHITE, -1, 0, 0},
    [ROLE_API] = {COLOR_BLUE, -1, A_BOLD, 0},
    [ROLE_BLOCKED] = {COLOR_RED, -1, A_BOLD, A_REVERSE | A_BOLD},
    [ROLE_NVTX] = {COLOR_MAGENTA, -1, 0, A_DIM},
    [ROLE_BUBBLE] = {COLOR_YELLOW, -1, A_BOLD, A_BOLD},
    [ROLE_SELECTION] = {COLOR_BLACK, COLOR_YELLOW, 0, A_REVERSE | A_BOLD},
    [ROLE_CURSOR] = {COLOR_YELLOW, -1, A_BOLD, A_BOLD},
    [ROLE_PANEL] = {COLOR_BLACK, COLOR_GREEN, 0, A_REVERSE},
    [ROLE_KEY] = {COLOR_WHITE, COLOR_BLACK, A_BOLD, A_BOLD},
    [ROLE_KEYTEXT] = {COLOR_BLACK, COLOR_CYAN, 0, A_REVERSE},
    [ROLE_HELP] = {COLOR_WHITE, COLOR_BLUE, 0, 0},
};

static int locale_is_utf8(void) {
    const char *cs = nl_langinfo(CODESET);
    return cs && (strcmp(cs, "UTF-8") == 0 || strcmp(cs, "utf8") == 0);
}

term *term_open(const term_opts *o, char *why, size_t why_len) {
    if (!isatty(0) || !isatty(1)) {
        snprintf(why, why_len, "the viewer needs a terminal (stdin and stdout are not both one)");
        return NULL;
    }
    setlocale(LC_ALL, "");
    term *t = calloc(1, sizeof *t);
    if (t == NULL) {
        snprintf(why, why_len, "out of memory");
        return NULL;
    }
    t->ascii = (o && o->ascii) || !locale_is_utf8();
    set_escdelay(25);
    if ((t->scr = newterm(NULL, stdout, stdin)) == NULL) {
        snprintf(why, why_len, "cannot start curses on TERM=%s", getenv("TERM") ? getenv("TERM") : "(unset)");
        free(t);
        return NULL;
    }
    const char *nc = getenv("NO_COLOR");
    t->mono = (o && o->mono) || (nc && *nc) || !has_colors();
    if (!t->mono) {
        start_color();
        use_default_colors();
        for (int r = 1; r < ROLE_N_; r++)
            init_pair((short)r, scheme[r].fg, scheme[r].bg);
    }
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    nodelay(stdscr, TRUE);
    curs_set(0);
    mousemask(BUTTON1_PRESSED | BUTTON1_CLICKED | BUTTON4_PRESSED | BUTTON5_PRESSED, NULL);
    mouseinterval(0);
    getmaxyx(stdscr, t->h, t->w);
    t->full = 1;
    return t;
}

void term_close(term **tp) {
    if (tp == NULL || *tp == NULL)
        return;
    endwin();
    delscreen((*tp)->scr);
    vw_grid_free(&(*tp)->prev);
    free(*tp);
    *tp = NULL;
}

int term_ascii(const term *t) { return t->ascii; }
int term_mono(const term *t) { return t->mono; }

void term_size(const term *t, int *w, int *h) {
    *w = t->w;
    *h = t->h;
}

void term_invalidate(term *t) { t->full = 1; }

static attr_t cell_attr(const term *t, const vw_cell *c) {
    const scheme_entry *e = &scheme[c->role < ROLE_N_ ? c->role : 0];
    attr_t a = t->mono ? e->mono : (e->attr | COLOR_PAIR(c->role));
    if (c->attr & VW_A_BOLD)
        a |= A_BOLD;
    if (c->attr & VW_A_REVERSE)
        a |= A_REVERSE;
    if (c->attr & VW_A_UNDERLINE)
        a |= A_UNDERLINE;
    return a;
}

void term_draw(term *t, const vw_grid *g) {
    int full = t->full || t->prev.w != g->w || t->prev.h != g->h;
    if (full) {
        clearok(stdscr, TRUE);
        erase();
    }
    for (int y = 0; y < g->h && y < t->h; y++) {
        for (int x = 0; x < g->w && x < t->w; x++) {
            const vw_cell *c = &g->cells[y * g->w + x];
            if (!full) {
                const vw_cell *p = &t->prev.cells[y * g->w + x];
                if (p->ch == c->ch && p->role == c->role && p->attr == c->attr)
                    continue;
            }
            /* the bottom-right cell: writing it would scroll on some terminals */
            if (y == t->h - 1 && x == t->w - 1)
                continue;
            wchar_t wc[2] = {(wchar_t)(c->ch < 0x20 ? '?' : c->ch), 0};
            if (t->ascii && c->ch >= 0x80)
                wc[0] = '?';
            cchar_t cc;
            attr_t a = cell_attr(t, c);
            setcchar(&cc, wc, a & ~A_COLOR, t->mono ? 0 : (short)PAIR_NUMBER(a), NULL);
            mvadd_wch(y, x, &cc);
        }
    }
    if (vw_grid_resize(&t->prev, g->w, g->h) == 0)
        memcpy(t->prev.cells, g->cells, (size_t)g->w * (size_t)g->h * sizeof *g->cells);
    t->full = 0;
    refresh();
}

int term_read(term *t, int *key, int *kind, int *x, int *y) {
    wint_t ch;
    int r = get_wch(&ch);
    if (r == ERR)
        return TERM_NONE;
    if (r == KEY_CODE_YES) {
        switch (ch) {
        case KEY_RESIZE:
            getmaxyx(stdscr, t->h, t->w);
            t->full = 1;
            return TERM_RESIZE;
        case KEY_MOUSE: {
            MEVENT me;
            if (getmouse(&me) != OK)
                return TERM_NONE;
            *x = me.x;
            *y = me.y;
            if (me.bstate & BUTTON4_PRESSED)
                *kind = VW_MOUSE_WHEEL_UP;
            else if (me.bstate & BUTTON5_PRESSED)
                *kind = VW_MOUSE_WHEEL_DOWN;
            else if (me.bstate & (BUTTON1_PRESSED | BUTTON1_CLICKED))
                *kind = VW_MOUSE_CLICK;
            else
                return TERM_NONE;
            return TERM_MOUSE;
        }
        case KEY_UP: *key = VW_KEY_UP; break;
        case KEY_DOWN: *key = VW_KEY_DOWN; break;
        case KEY_LEFT: *key = VW_KEY_LEFT; break;
        case KEY_RIGHT: *key = VW_KEY_RIGHT; break;
        case KEY_SLEFT: *key = VW_KEY_SLEFT; break;
        case KEY_SRIGHT: *key = VW_KEY_SRIGHT; break;
        case KEY_PPAGE: *key = VW_KEY_PGUP; break;
        case KEY_NPAGE: *key = VW_KEY_PGDN; break;
        case KEY_HOME: *key = VW_KEY_HOME; break;
        case KEY_END: *key = VW_KEY_END; break;
        case KEY_ENTER: *key = VW_KEY_ENTER; break;
        case KEY_BACKSPACE: *key = VW_KEY_BACKSPACE; break;
        case KEY_BTAB: *key = VW_KEY_TAB; break;
        case KEY_F(1): *key = VW_KEY_F1; break;
        case KEY_F(10): *key = VW_KEY_F10; break;
        default: return TERM_NONE;
        }
        return TERM_KEY;
    }
    switch (ch) {
    case '\r':
    case '\n': *key = VW_KEY_ENTER; break;
    case '\t': *key = VW_KEY_TAB; break;
    case 27: *key = VW_KEY_ESC; break;
    case 127:
    case 8: *key = VW_KEY_BACKSPACE; break;
    default: *key = (int)ch; break;
    }
    return TERM_KEY;
}
