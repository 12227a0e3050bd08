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

/* The scheme table lives in the view (vw_scheme_get), in its own terms; these turn it into curses'. */
static attr_t vw_attr(int a) {
    return ((a & VW_A_BOLD) ? A_BOLD : 0) | ((a & VW_A_REVERSE) ? A_REVERSE : 0) |
           ((a & VW_A_UNDERLINE) ? A_UNDERLINE : 0) | ((a & VW_A_DIM) ? A_DIM : 0);
}

static short vw_color(int c) { return c < 0 ? -1 : (short)c; } /* VW_C_* are curses' COLOR_* numbers */

static int locale_is_utf8(void) {
    const char *cs = nl_langinfo(CODESET);
    return cs && (strcmp(cs, "UTF-8") == 0 || strcmp(cs, "utf8") == 0);
}

term *term_open(const term_opts *o, err_msg *err) {
    if (!isatty(0) || !isatty(1)) {
        err_set(err, ERR_UNSUPPORTED, "the viewer needs a terminal (stdin and stdout are not both one)");
        return NULL;
    }
    setlocale(LC_ALL, "");
    term *t = calloc(1, sizeof *t);
    if (t == NULL) {
        err_set(err, ERR_NOMEM, "out of memory");
        return NULL;
    }
    t->ascii = (o && o->ascii) || !locale_is_utf8();
    set_escdelay(25);
    if ((t->scr = newterm(NULL, stdout, stdin)) == NULL) {
        err_set(err, ERR_UNSUPPORTED, "cannot start curses on TERM=%s", getenv("TERM") ? getenv("TERM") : "(unset)");
        free(t);
        return NULL;
    }
    const char *nc = getenv("NO_COLOR");
    t->mono = (o && o->mono) || (nc && *nc) || !has_colors();
    if (!t->mono) {
        start_color();
        use_default_colors();
        for (int r = 1; r < ROLE_N_; r++)
            init_pair((short)r, vw_color(vw_scheme_get(r)->fg), vw_color(vw_scheme_get(r)->bg));
    }
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    nodelay(stdscr, TRUE);
    curs_set(0);
    mousemask(BUTTON1_PRESSED | BUTTON1_RELEASED | BUTTON1_CLICKED | BUTTON4_PRESSED | BUTTON5_PRESSED | BUTTON_CTRL, NULL);
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
    int role = c->role < ROLE_N_ ? c->role : 0;
    const vw_scheme *e = vw_scheme_get(role);
    attr_t a = t->mono ? vw_attr(e->mono) : (vw_attr(e->attr) | COLOR_PAIR(role));
    return a | vw_attr(c->attr);
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
            if (c->ch == VW_CH_WIDE)
                continue; /* the right half of a wide character, drawn with its left half */
            if (!full) {
                const vw_cell *p = &t->prev.cells[y * g->w + x];
                if (p->ch == c->ch && p->role == c->role && p->attr == c->attr)
                    continue;
            }
            /* the bottom-right cell: writing it would scroll on some terminals */
            if (y == t->h - 1 && x >= t->w - 1 - (x + 1 < g->w && g->cells[y * g->w + x + 1].ch == VW_CH_WIDE))
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
            else if (me.bstate & BUTTON1_RELEASED) /* the end of a drag */
                *kind = VW_MOUSE_RELEASE;
            else
                return TERM_NONE;
            if (me.bstate & BUTTON_CTRL)
                *kind |= VW_MOUSE_CTRL;
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
