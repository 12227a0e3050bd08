/*
 * The terminal: the one module that talks to ncurses. It owns the screen, maps the view's colour
 * roles to colour pairs (or, without colour, to attributes) through one scheme table, draws a
 * vw_grid by writing only the cells that changed since the last frame, and turns keys, mouse
 * events and resizes into the view's input codes.
 */
#ifndef SYNCTOP_TERM_H
#define SYNCTOP_TERM_H

#include "screen.h"

typedef struct term term;

typedef struct term_opts {
    int ascii; /* force ASCII glyphs (else: UTF-8 when the locale is) */
    int mono;  /* force monochrome (else: colour unless NO_COLOR or the terminal has none) */
} term_opts;

/* Starts curses on the controlling terminal; NULL with err filled when stdin/stdout is not one. */
term *term_open(const term_opts *o, err_msg *err);
void term_close(term **t);
int term_ascii(const term *t);
int term_mono(const term *t);
void term_size(const term *t, int *w, int *h);
/* Draws g (its size must be the screen's): only what changed since the last call. */
void term_draw(term *t, const vw_grid *g);
/* Forces the next term_draw to repaint everything (after a resize). */
void term_invalidate(term *t);

enum { TERM_NONE = 0, TERM_KEY = 1, TERM_MOUSE = 2, TERM_RESIZE = 3 };
/* Reads one input event without waiting. key gets a code point or VW_KEY_*; for the mouse, kind
 * (VW_MOUSE_*), x and y. */
int term_read(term *t, int *key, int *kind, int *x, int *y);

#endif
