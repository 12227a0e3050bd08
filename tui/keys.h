/*
 * The viewer's key bindings. One table says which keys run which command, what the help screen
 * says of them and what the key bar shows; the key handler (screen_input.c vw_key), the key bar and
 * the help screen all read it.
 */
#ifndef SYNCTOP_KEYS_H
#define SYNCTOP_KEYS_H

#include <stddef.h>

/* Keys beyond Unicode code points, as term.c delivers them. */
enum {
    VW_KEY_UP = 0x110000, VW_KEY_DOWN, VW_KEY_LEFT, VW_KEY_RIGHT, VW_KEY_PGUP, VW_KEY_PGDN,
    VW_KEY_HOME, VW_KEY_END, VW_KEY_ENTER, VW_KEY_TAB, VW_KEY_ESC, VW_KEY_BACKSPACE,
    VW_KEY_SLEFT, VW_KEY_SRIGHT, VW_KEY_F1, VW_KEY_F10
};

typedef enum vw_cmd {
    VW_CMD_NONE = 0,
    VW_CMD_LEFT, VW_CMD_RIGHT,           /* cursor a column back / forward in time */
    VW_CMD_PAN_LEFT, VW_CMD_PAN_RIGHT,   /* the window half a screen */
    VW_CMD_UP, VW_CMD_DOWN,              /* a lane, or a stall row in the stalls panel */
    VW_CMD_PAGE_UP, VW_CMD_PAGE_DOWN,
    VW_CMD_HOME, VW_CMD_END,             /* cursor to the window's start / end */
    VW_CMD_ZOOM_IN, VW_CMD_ZOOM_OUT, VW_CMD_FIT,
    VW_CMD_SCOPE,                        /* the header's GPU figures: window or whole run */
    VW_CMD_BREAKDOWN,                    /* the idle breakdown pane / the stalls panel */
    VW_CMD_FIT_SEL,                      /* fit the window to the event under the cursor */
    VW_CMD_MARK,                         /* mark the event under the cursor: its span and duration */
    VW_CMD_RANGE,                        /* the range (operator) the event under the cursor sits in */
    VW_CMD_FOLD, VW_CMD_UNFOLD_ALL,      /* fold the group under the cursor; unfold every group */
    VW_CMD_HIDE_IDLE,                    /* leave out lanes with nothing in the window */
    VW_CMD_OPEN_RANGES,                  /* a thread's ranges: one row, or a row per depth */
    VW_CMD_NEXT_SLOW, VW_CMD_PREV_SLOW,  /* the next / previous slow step */
    VW_CMD_NEXT_STALL, VW_CMD_PREV_STALL, /* every stall in time order, whatever the focus */
    VW_CMD_WORST_NEXT, VW_CMD_WORST_PREV, /* the selected call site's stalls, worst first */
    VW_CMD_SORT_NEXT, VW_CMD_SORT_PREV,  /* the stalls panel's column: total, max, count, GPU idle */
    VW_CMD_STALL_STEP,                   /* the stalls panel: the whole run / the step at the cursor */
    VW_CMD_SEARCH,
    VW_CMD_ENTER,                        /* detail pane, or the selected stall */
    VW_CMD_PANEL,                        /* timeline <-> stalls panel */
    VW_CMD_BACK,                         /* close the detail pane, back to the timeline */
    VW_CMD_PLAY,                         /* replay: play / pause; live: freeze / go on */
    VW_CMD_SLOWER, VW_CMD_FASTER,
    VW_CMD_START, VW_CMD_FINISH,
    VW_CMD_FOLLOW,
    VW_CMD_HELP,
    VW_CMD_QUIT,
    VW_CMD_N_
} vw_cmd;

/* The command a key (a code point or VW_KEY_*) runs; VW_CMD_NONE when none. */
vw_cmd vw_cmd_of_key(int key);

/* The help screen's lines about keys, each "KEYS  WHAT", in the table's order; returns how many
 * there are (at most max are written). */
size_t vw_help_lines(char (*out)[96], size_t max);

/* The key bar for a mode (0: replay, 1: live), in order: at most max entries of key and label. */
size_t vw_bar_items(int live, const char **keys, const char **labels, size_t max);

/* How the help screen names a key ("left", "F1", "h"); NULL for keys it does not show. */
const char *vw_key_name(int key);

#endif
