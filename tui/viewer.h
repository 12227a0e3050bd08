/*
 * The interactive viewer's main loop: a source (live subscribers or a file), the store, the
 * analysis, the view model and the terminal, tied together. One thread: the loop waits on the
 * subscriber socket and stdin together (tp_sub_wait), takes in what arrived, and redraws at most
 * opts.fps times a second. Resizes arrive as KEY_RESIZE (ncurses' own SIGWINCH handling) and are
 * redrawn at once.
 *
 * Entry points:
 *   viewer_run_live(endpoints, n, opts)  subscribe to n endpoints (already resolved: ipc://...,
 *                                        tcp://...) and show what they publish until q. For
 *                                        `synctop attach` and `synctop run`.
 *   viewer_run_replay(paths, n, opts)    trace files (loaded incrementally: the first screen
 *                                        comes before they are read) or Kineto JSON, one or several
 *                                        (one per rank) on one timeline.
 * Both return 0, or 1 with the reason in the result; the viewer itself prints nothing outside the
 * terminal, so the verb says what happened once the terminal is restored.
 *
 * With opts.summary a live session subscribes to the relays' summaries only and shows a row per
 * rank (sumview.h); a rank opened there has its batches taken (tp_sub_watch) into the store, whose
 * lanes tab shows, until it is closed.
 *
 * Live sessions keep a bounded window of events (opts.window_events); with opts.record every batch
 * received also goes to a trace file, so what falls out of the window is not lost. The analysis
 * runs on a second thread (viewer_anjob) over a store that does not change meanwhile, so a key is
 * answered within a frame whatever the store's size.
 */
#ifndef SYNCTOP_VIEWER_H
#define SYNCTOP_VIEWER_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis.h"
#include "store.h"
#include "synctop/error.h"

/* Called about four times a second in a live session with a way to connect to one more endpoint,
 * so a caller can add publishers as they appear (`synctop run`: the command's processes). */
typedef void (*viewer_add_fn)(void *viewer, const char *endpoint);
typedef void (*viewer_discover_fn)(void *ctx, viewer_add_fn add, void *viewer);

struct tp_keypair;
typedef struct viewer_opts {
    int ascii;                /* ASCII glyphs */
    int mono;                 /* no colour */
    size_t window_events;     /* live: events kept (0: 4M) */
    const char *server_key;   /* live: the publishers' CURVE public key (Z85), or NULL */
    const struct tp_keypair *client_key; /* live, with server_key: our own pair, or NULL (throwaway) */
    int fps;                  /* 0: 30 */
    int scan_endpoint_dir;    /* live: also attach to traced processes that appear later */
    const char *verb;         /* for messages: "attach", "run", "replay" */
    int play;                 /* replay: play from the start (else show it all, paused) */
    viewer_discover_fn discover; /* live: see above, or NULL */
    void *discover_ctx;
    const char *record;       /* live: also write every batch received to this new trace file, so
                                 what leaves the window is kept (NULL: none) */
    int record_overwrite;     /* replace that file when it exists */
    uint64_t max_events;      /* replay: events a trace file may hold (0: bounded by its size) */
    int align;                /* replay: INGEST_ALIGN_* for several files */
    const char *step_name;    /* the range that marks the loop's steps (NULL: found as report finds them) */
    int summary;              /* live, through relays: a row per rank from the relays' summaries;
                                 the raw batches of a rank only while it is open (sumview.h) */
    /* Called once the view is closed and the terminal restored, with what the store holds (a
     * live session's window), before it is freed; or NULL. */
    void (*on_close)(void *ctx, st_store *s);
    void *on_close_ctx;
    /* When set (by a caught SIGINT or SIGTERM), the session ends as q ends it; or NULL, and ncurses'
     * own handler ends the process on Ctrl-C. */
    volatile sig_atomic_t *stop;
    /* live, with discover: what the caller watches has ended, in a few words ("ls exited with
     * status 127 after 0.4 s"), or NULL while it runs; asked with discover. When it has ended and
     * nothing came, the view says so instead of waiting on. Or NULL. */
    const char *(*ended)(void *ctx);
} viewer_opts;

/* What a viewer session ended with. */
typedef struct viewer_result {
    err_msg err;          /* why it failed, when it returns 1 */
    int recorded;         /* opts.record was written ... */
    int record_failed;    /* ... but is incomplete: record_err says why */
    err_msg record_err;
    uint64_t rec_batches, rec_events;
    uint64_t damaged;     /* replay: damaged batches skipped, the first described in damage */
    char damage[256];
} viewer_result;

int viewer_run_live(const char *const *endpoints, size_t n, const viewer_opts *o, viewer_result *res);
int viewer_run_replay(const char *const *paths, size_t n_paths, const viewer_opts *o, viewer_result *res);

/* The analysis on a thread of its own, so that keys and frames never wait for it: while a job runs
 * the store must not change (the loop holds incoming batches back), but it may be read (frames).
 * Exposed for bench_view, which measures the frame and key latency while a job runs. */
typedef struct viewer_anjob viewer_anjob;
viewer_anjob *viewer_anjob_start(const st_store *s, const an_opts *opts, err_msg *err);
int viewer_anjob_done(const viewer_anjob *j); /* 1 when finished (viewer_anjob_finish won't wait) */
/* Waits for the job, hands its result over (free it with an_result_free) and frees the job.
 * Returns an_analyze's status; took_s (may be NULL) gets the analysis' own time. */
int viewer_anjob_finish(viewer_anjob **j, an_result *out, double *took_s, err_msg *err);

#endif
