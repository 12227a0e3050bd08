/*
 * The summary-only screen of `synctop attach --summary`: one row per rank from the relays'
 * summaries (tp_sub_summary), sorted by rank. Like screen.h it is pure: rows and a viewport in, a
 * grid of cells out, and the keys that move the selection; viewer.c feeds it and acts on what a
 * key asks (open or close a rank, show the lanes of the open ones).
 *
 * Screen, top to bottom: a title (summary-only, producers, summaries, the open ranks and the raw
 * batches received for them), the column names, the rows (rank, host, pid, busy / blocked / idle
 * as percentages of the summaries' spans, the busy share of the recent intervals as a sparkline,
 * events/s, missed batches and dropped records), and the key bar.
 */
#ifndef SYNCTOP_SUMVIEW_H
#define SYNCTOP_SUMVIEW_H

#include <stddef.h>
#include <stdint.h>

#include "screen.h"
#include "synctop/net.h"

#define VW_SUM_HIST 64 /* recent intervals a row keeps for its sparkline */

typedef struct vw_sum_row {
    uint64_t producer;
    int32_t rank;           /* -1: not known yet */
    uint32_t pid;
    char host[65];          /* as the wire says: sanitized when drawn */
    double busy, blocked, idle; /* percent, over every summary so far */
    double events_per_s;    /* over the relay's time from the first summary's start to the latest's end */
    uint64_t first_start;   /* the first summary's start (relay's clock) */
    uint64_t missed, drops;
    uint64_t summaries;     /* how many came (the history below is pushed once per summary) */
    float hist[VW_SUM_HIST]; /* busy share (0..1) of the latest intervals, oldest first */
    int n_hist;
    int open;               /* its raw batches are being taken */
} vw_sum_row;

typedef struct vw_sum_view {
    int sel, scroll;        /* the selected row and the first one shown, in rank order */
    int ascii;              /* ASCII glyphs (colours are term.c's, by role) */
    uint64_t summaries;     /* summaries taken so far, all producers */
    uint64_t raw_batches;   /* raw batches received (those of the open ranks) */
    char message[160];      /* one line in the key bar */
} vw_sum_view;

/* Fills a row's figures from what the subscriber holds of a producer, as `report --ranks
 * --summary` computes them (busy: share of the spans times the GPUs that worked; blocked: share
 * of the spans; idle: the rest of busy), events/s over the relay's time since the row's first
 * summary, and
 * pushes the latest interval's busy share onto the history when a summary came since the last
 * call. producer, open and the history are kept. */
void vw_sum_row_update(vw_sum_row *r, const tp_sub_summary *x);

/* Sorts rows by rank (unknown last), then host, then producer id. */
void vw_sum_sort(vw_sum_row *rows, size_t n);

/* Draws a frame of g->w x g->h (g resized as needed); below 80x24 it says the terminal is too
 * small. */
void vw_sum_render(const vw_sum_row *rows, size_t n, vw_sum_view *sv, vw_grid *g);

/* What a key asks of the viewer. */
enum { VW_SUM_NONE = 0, VW_SUM_REDRAW, VW_SUM_TOGGLE, VW_SUM_LANES, VW_SUM_QUIT };
/* Applies a key to the viewport of n rows on a screen h rows high; VW_SUM_TOGGLE means: open or
 * close the selected row (sv->sel). */
int vw_sum_key(vw_sum_view *sv, size_t n, int h, int key);

#endif
