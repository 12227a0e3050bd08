/*
 * The viewer's key bindings (keys.h): the table, and what reads it.
 */
#include "keys.h"

#include <stdio.h>
#include <string.h>

typedef struct binding {
    vw_cmd cmd;
    int keys[3];          /* the first is the one the help shows first; 0 ends the list */
    int joins;            /* 1: on the help line of the binding before it ("left/right") */
    const char *help;     /* the help line's text, on the first binding of a line */
    int bar;              /* its place in the key bar, from 1; 0: not there */
    const char *bar_key;  /* how the bar names the keys */
    const char *bar_replay, *bar_live; /* the bar's label in each mode; NULL: not in that mode */
} binding;

static const binding k_bindings[] = {
    {VW_CMD_LEFT, {VW_KEY_LEFT, 'h'}, 0, "move the cursor in time", 0, NULL, NULL, NULL},
    {VW_CMD_RIGHT, {VW_KEY_RIGHT, 'l'}, 1, NULL, 0, NULL, NULL, NULL},
    {VW_CMD_PAN_LEFT, {VW_KEY_SLEFT, 'H', 'a'}, 0, "pan half a screen", 0, NULL, NULL, NULL},
    {VW_CMD_PAN_RIGHT, {VW_KEY_SRIGHT, 'L', 'd'}, 1, NULL, 0, NULL, NULL, NULL},
    {VW_CMD_UP, {VW_KEY_UP, 'k'}, 0, "move between lanes (stall rows in the stalls panel)", 0, NULL, NULL, NULL},
    {VW_CMD_DOWN, {VW_KEY_DOWN, 'j'}, 1, NULL, 0, NULL, NULL, NULL},
    {VW_CMD_PAGE_UP, {VW_KEY_PGUP}, 0, "a page of lanes; the window's start / end", 0, NULL, NULL, NULL},
    {VW_CMD_PAGE_DOWN, {VW_KEY_PGDN}, 1, NULL, 0, NULL, NULL, NULL},
    {VW_CMD_HOME, {VW_KEY_HOME}, 1, NULL, 0, NULL, NULL, NULL},
    {VW_CMD_END, {VW_KEY_END}, 1, NULL, 0, NULL, NULL, NULL},
    {VW_CMD_ZOOM_IN, {'+', 'w', '='}, 0, "zoom in / out at the cursor (or ctrl+wheel); fit all", 3, "+-", "Zoom", "Zoom"},
    {VW_CMD_ZOOM_OUT, {'-', 's', '_'}, 1, NULL, 0, NULL, NULL, NULL},
    {VW_CMD_FIT, {'0'}, 1, NULL, 0, NULL, NULL, NULL},
    {VW_CMD_FIT_SEL, {'f'}, 0, "fit the event at the cursor / mark it / go to its range", 0, NULL, NULL, NULL},
    {VW_CMD_MARK, {'m'}, 1, NULL, 0, NULL, NULL, NULL},
    {VW_CMD_RANGE, {'r'}, 1, NULL, 0, NULL, NULL, NULL},
    {VW_CMD_FOLD, {'c'}, 0, "fold group / unfold all / idle lanes / ranges by depth", 0, NULL, NULL, NULL},
    {VW_CMD_UNFOLD_ALL, {'C'}, 1, NULL, 0, NULL, NULL, NULL},
    {VW_CMD_HIDE_IDLE, {'e'}, 1, NULL, 0, NULL, NULL, NULL},
    {VW_CMD_OPEN_RANGES, {'o'}, 1, NULL, 0, NULL, NULL, NULL},

    {VW_CMD_NEXT_STALL, {'n'}, 0, "next / previous blocking stall (after /: match)", 4, "n/N", "Stall", "Stall"},
    {VW_CMD_PREV_STALL, {'N'}, 1, NULL, 0, NULL, NULL, NULL},
    {VW_CMD_WORST_NEXT, {'i'}, 0, "the selected call site's stalls, worst first (\"2/75\")", 0, NULL, NULL, NULL},
    {VW_CMD_WORST_PREV, {'I'}, 1, NULL, 0, NULL, NULL, NULL},
    {VW_CMD_SORT_NEXT, {'>'}, 0, "sort the stalls: total, max, count, GPU idle; t: one step", 0, NULL, NULL, NULL},
    {VW_CMD_SORT_PREV, {'<'}, 1, NULL, 0, NULL, NULL, NULL},
    {VW_CMD_STALL_STEP, {'t'}, 1, NULL, 0, NULL, NULL, NULL},
    {VW_CMD_SEARCH, {'/'}, 0, "search names; / enter: the next match again, wrapping", 5, "/", "Search", "Search"},
    {VW_CMD_ENTER, {VW_KEY_ENTER, '\n', '\r'}, 0, "detail pane: the site's frames (a stall row: its stall)", 9, "Ent", "Detail", "Detail"},
    {VW_CMD_PANEL, {VW_KEY_TAB}, 0, "switch between the timeline and the top stalls panel", 6, "Tab", "Panel", "Panel"},
    {VW_CMD_BACK, {VW_KEY_ESC}, 0, "close the detail pane; unmark the site and the span", 0, NULL, NULL, NULL},
    {VW_CMD_PLAY, {' '}, 0, "replay: play / pause; live: freeze / go on; F: follow", 2, "Spc", "Play", "Pause"},
    {VW_CMD_FOLLOW, {'F'}, 1, NULL, 8, "F", NULL, "Follow"},
    {VW_CMD_SLOWER, {'['}, 0, "replay slower / faster", 8, "[]", "Speed", NULL},
    {VW_CMD_FASTER, {']'}, 1, NULL, 0, NULL, NULL, NULL},
    {VW_CMD_START, {'g'}, 0, "go to the start / end; the next / previous slow step", 10, "g/G", "Start/End", "Start/End"},
    {VW_CMD_FINISH, {'G'}, 1, NULL, 0, NULL, NULL, NULL},
    {VW_CMD_NEXT_SLOW, {'}'}, 1, NULL, 0, NULL, NULL, NULL},
    {VW_CMD_PREV_SLOW, {'{'}, 1, NULL, 0, NULL, NULL, NULL},
    {VW_CMD_SCOPE, {'v'}, 0, "GPU figures: the window / the run; idle breakdown pane", 0, NULL, NULL, NULL},
    {VW_CMD_BREAKDOWN, {'b'}, 1, NULL, 0, NULL, NULL, NULL},
    {VW_CMD_HELP, {'?', VW_KEY_F1}, 0, "this help (esc closes it) / quit", 1, "?", "Help", "Help"},
    {VW_CMD_QUIT, {'q', VW_KEY_F10}, 1, NULL, 7, "q", "Quit", "Quit"},
};
#define N_BINDINGS (sizeof k_bindings / sizeof k_bindings[0])

vw_cmd vw_cmd_of_key(int key) {
    if (key == 0)
        return VW_CMD_NONE;
    for (size_t i = 0; i < N_BINDINGS; i++)
        for (size_t k = 0; k < 3 && k_bindings[i].keys[k]; k++)
            if (k_bindings[i].keys[k] == key)
                return k_bindings[i].cmd;
    return VW_CMD_NONE;
}

const char *vw_key_name(int key) {
    static const struct { int key; const char *name; } named[] = {
        {VW_KEY_LEFT, "left"}, {VW_KEY_RIGHT, "right"}, {VW_KEY_UP, "up"}, {VW_KEY_DOWN, "down"},
        {VW_KEY_SLEFT, "S-left"}, {VW_KEY_SRIGHT, "S-right"}, {VW_KEY_PGUP, "pgup"}, {VW_KEY_PGDN, "pgdn"},
        {VW_KEY_HOME, "home"}, {VW_KEY_END, "end"}, {VW_KEY_ENTER, "enter"}, {VW_KEY_TAB, "tab"},
        {VW_KEY_ESC, "esc"}, {VW_KEY_F1, "F1"}, {VW_KEY_F10, "F10"}, {' ', "space"},
    };
    static char printable[128][2];
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (named[i].key == key)
            return named[i].name;
    if (key > 0x20 && key < 0x7F) {
        printable[key][0] = (char)key;
        printable[key][1] = '\0';
        return printable[key];
    }
    return NULL;
}

/* Appends to a line the names of key k of the bindings [i, j), "/"-separated; 0 when none has
 * one to show. */
static int put_keys(char *line, size_t cap, size_t i, size_t j, size_t k) {
    int any = 0;
    for (size_t b = i; b < j; b++) {
        const char *nm = vw_key_name(k_bindings[b].keys[k]);
        if (k_bindings[b].keys[k] == 0 || nm == NULL)
            continue;
        size_t len = strlen(line);
        snprintf(line + len, cap - len, "%s%s", any ? "/" : len ? " " : "", nm);
        any = 1;
    }
    return any;
}

size_t vw_help_lines(char (*out)[96], size_t max) {
    size_t n = 0;
    for (size_t i = 0; i < N_BINDINGS;) {
        size_t j = i + 1;
        while (j < N_BINDINGS && k_bindings[j].joins)
            j++;
        if (n < max) {
            char keys[64] = "";
            for (size_t k = 0; k < 3; k++)
                put_keys(keys, sizeof keys, i, j, k);
            snprintf(out[n], sizeof out[n], "%-18s %s", keys, k_bindings[i].help);
        }
        n++;
        i = j;
    }
    return n;
}

size_t vw_bar_items(int live, const char **keys, const char **labels, size_t max) {
    size_t n = 0;
    for (int place = 1; n < max; place++) {
        int found = 0;
        for (size_t i = 0; i < N_BINDINGS; i++) {
            const binding *b = &k_bindings[i];
            const char *label = live ? b->bar_live : b->bar_replay;
            if (b->bar != place)
                continue;
            found = 1;
            if (label == NULL)
                continue;
            keys[n] = b->bar_key;
            labels[n++] = label;
            break;
        }
        if (!found)
            break;
    }
    return n;
}
