/*
 * The viewer's main loop (viewer.h). It owns the store, the analysis result and the source; the
 * view model decides what a frame shows, term.c draws it.
 */
#include "viewer.h"
#include "hta.h"
#include "steps.h"
#include "clock.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analysis.h"
#include "store.h"
#include "live.h"
#include "load.h"
#include "synctop/file.h"
#include "synctop/net.h"
#include "synctop/sanitize.h"
#include "symbols.h"
#include "term.h"

#include "screen.h"
#include "sumview.h"

#define VIEWER_MAX_ENDPOINTS 256
#define VIEWER_DEFAULT_WINDOW_EVENTS (4u << 20)
#define VIEWER_NO_DATA_S 3.0               /* live: say so when nothing arrived by then */
#define VIEWER_HELD_MAX (256u << 20)       /* bytes of batches held back while the analysis runs */
#define VIEWER_FIGS_BUDGET 100000          /* events per loop turn for the header's figures (about 2 ms) */

/* ---- the analysis on its own thread ---- */

struct viewer_anjob {
    pthread_t th;
    const st_store *s;
    an_opts opts;
    int has_opts;
    an_result r;
    int rc;
    err_msg err;
    double took;
    an_steps steps;   /* the loop's steps, found after the analysis (viewer jobs only) */
    int want_steps;
    const char *step_name; /* the user's step range, or NULL */
    sy_cache *sym;    /* when set, native call-site frames are looked up too, into fixes */
    sy_fixes *fixes;
    hta_result *hta;  /* set: the job makes HTA's breakdown into it instead of the analysis */
    atomic_int done;
};

#define VIEWER_SYM_FRAMES 20000 /* frames looked up per analysis, at most */


static void *anjob_main(void *arg) {
    viewer_anjob *j = arg;
    double t = cm_now_s();
    if (j->hta != NULL) {
        j->rc = hta_analyze(j->s, NULL, j->hta, &j->err);
        j->took = cm_now_s() - t;
        atomic_store(&j->done, 1);
        return NULL;
    }
    j->rc = an_analyze(j->s, j->has_opts ? &j->opts : NULL, &j->r, &j->err);
    err_msg serr = {{0}};
    if (j->rc == 0 && j->want_steps && an_steps_find(j->s, &j->r, j->step_name, &j->steps, &serr) != 0)
        memset(&j->steps, 0, sizeof j->steps); /* out of memory: no step strip, the rest stands */
    if (j->sym != NULL)
        sy_collect(j->sym, j->s, VIEWER_SYM_FRAMES, j->fixes);
    j->took = cm_now_s() - t;
    atomic_store(&j->done, 1);
    return NULL;
}

static viewer_anjob *anjob_start(const st_store *s, const an_opts *opts, int want_steps, const char *step_name,
                                 sy_cache *sym, sy_fixes *fixes, hta_result *hta, err_msg *err) {
    viewer_anjob *j = calloc(1, sizeof *j);
    if (j == NULL) {
        err_set(err, ERR_NOMEM, "analysis: out of memory");
        return NULL;
    }
    j->s = s;
    j->hta = hta;
    j->want_steps = want_steps;
    j->step_name = step_name;
    j->sym = sym;
    j->fixes = fixes;
    if (opts) {
        j->opts = *opts;
        j->has_opts = 1;
    }
    atomic_init(&j->done, 0);
    int e = pthread_create(&j->th, NULL, anjob_main, j);
    if (e != 0) {
        err_set(err, ERR_IO, "analysis: cannot start a thread: %s", strerror(e));
        free(j);
        return NULL;
    }
    return j;
}

viewer_anjob *viewer_anjob_start(const st_store *s, const an_opts *opts, err_msg *err) {
    return anjob_start(s, opts, 0, NULL, NULL, NULL, NULL, err);
}

int viewer_anjob_done(const viewer_anjob *j) { return atomic_load(&((viewer_anjob *)j)->done); }

/* viewer_anjob_finish, and the steps found with the analysis (when steps is not NULL). */
static int anjob_finish(viewer_anjob **jp, an_result *out, an_steps *steps, double *took_s, err_msg *err) {
    viewer_anjob *j = *jp;
    pthread_join(j->th, NULL);
    int rc = j->rc;
    if (j->hta != NULL) { /* an HTA job: no analysis to hand over */
        if (rc == 0)
            hta_result_free(j->hta);
        free(j->hta);
        rc = ERR_INVAL;
        err_set(err, rc, "analysis: the job made HTA's breakdown");
        free(j);
        *jp = NULL;
        return rc;
    }
    if (steps != NULL)
        *steps = j->steps;
    else
        an_steps_free(&j->steps);
    if (rc == 0)
        *out = j->r;
    else if (err)
        *err = j->err;
    if (took_s)
        *took_s = j->took;
    free(j);
    *jp = NULL;
    return rc;
}

int viewer_anjob_finish(viewer_anjob **jp, an_result *out, double *took_s, err_msg *err) {
    return anjob_finish(jp, out, NULL, took_s, err);
}

struct viewer;
/* A chore the loop runs every period seconds: fn gets the time and the seconds since it last ran,
 * and returns VIEWER_CHORE_* (LATER: not now, it is tried again at the next turn). */
enum { VIEWER_CHORE_LATER = -1, VIEWER_CHORE_DONE = 0, VIEWER_CHORE_REDRAW = 1 };
typedef struct viewer_timer {
    double period, last;
    int (*fn)(struct viewer *w, double t, double since);
} viewer_timer;
#define VIEWER_MAX_TIMERS 8

/* A batch received while the analysis reads the store: added when it is done. */
typedef struct held_batch {
    void *data;
    size_t len;
    uint32_t n_events;
} held_batch;

typedef struct viewer {
    const viewer_opts *o;
    int said_refused; /* a refused handshake was shown */
    int said_names;   /* names past the live bound were shown */
    size_t said_notices; /* relays' notices shown */
    st_store *s;
    vw_state v;
    vw_grid g;
    term *t;
    tp_sub *sub;
    ingest_loader *ld;
    int loading;
    an_result an;
    an_steps steps;
    int have_an;
    viewer_anjob *job;
    sy_cache *sym; /* native call sites, looked up by the analysis thread */
    sy_fixes sym_fixes;
    size_t stale_told; /* modules said to have changed since the trace */
    size_t job_events;
    double an_took; /* how long the last analysis took: the next waits at least a few times that */
    held_batch *held;
    size_t n_held, cap_held, held_bytes;
    tp_recorder *rec;
    uint64_t rec_batches, rec_events;
    uint64_t batches_in;
    double an_at;
    size_t an_events;
    uint64_t an_now;
    double sites_at;
    uint64_t sites_now, sites_cursor;
    const an_result *sites_an;
    int started; /* the view's window was placed over real data */
    uint64_t rate_events; /* events added since the rate was last measured */
    /* endpoints connected */
    char *eps[VIEWER_MAX_ENDPOINTS];
    size_t n_eps;
    viewer_timer timers[VIEWER_MAX_TIMERS]; /* the chores of a live session (viewer_timers_init) */
    size_t n_timers;
    /* summary mode (opts.summary): a row per producer, in the order of their first summary, and
     * the same sorted by rank for the screen; sum_lanes: the lanes of the open ranks are shown */
    vw_sum_row *sum_rows, *sum_sorted;
    size_t n_sum, cap_sum;
    uint64_t sum_seen; /* summaries taken when the rows were last brought up to date */
    vw_sum_view sv;
    int sum_lanes;
    uint64_t n_damaged; /* damaged batches a file load skipped, */
    char damage[256];   /* the first of them */
    char err[512];
} viewer;

/* A damaged batch skipped while a file loads: counted in the title, said in the key bar, and the
 * first kept to be said again at exit. */
static void viewer_warn(void *ctx, const char *msg) {
    viewer *w = ctx;
    if (w->n_damaged++ == 0)
        snprintf(w->damage, sizeof w->damage, "%s", msg);
    w->v.damaged = w->n_damaged;
    snprintf(w->v.message, sizeof w->v.message, "%s", msg);
}

static int viewer_connect(viewer *w, const char *ep) {
    for (size_t i = 0; i < w->n_eps; i++)
        if (strcmp(w->eps[i], ep) == 0)
            return 0;
    if (w->n_eps >= VIEWER_MAX_ENDPOINTS)
        return 0;
    err_msg err = {{0}};
    int rc = tp_sub_connect(w->sub, ep, &err);
    if (rc != 0) {
        snprintf(w->err, sizeof w->err, "%s: %s", ep, err.msg);
        return rc;
    }
    w->eps[w->n_eps++] = strdup(ep);
    return 0;
}

static void viewer_add(void *vw, const char *ep) { viewer_connect(vw, ep); }

static void viewer_found(void *vw, long pid, const char *ep) {
    (void)pid;
    if (tp_endpoint_is_live(ep) == 1)
        viewer_connect(vw, ep);
}

/* Attaches to the traced processes of this user that appeared since the last look. */
static void viewer_scan(viewer *w) {
    err_msg err;
    tp_endpoint_each(viewer_found, w, &err);
}

/* The window over real data, once there is some. */
static void viewer_place(viewer *w) {
    uint64_t t0, t1;
    st_store_span(w->s, &t0, &t1);
    if (w->ld) {
        uint64_t a, b;
        ingest_span(w->ld, &a, &b);
        if (b > t1)
            t1 = b;
        if (a && (t0 == 0 || a < t0))
            t0 = a;
    }
    if (t1 > w->v.end)
        w->v.end = t1;
    if (w->started || t1 == 0)
        return;
    w->started = 1;
    w->v.origin = t0;
    w->v.end = t1;
    if (w->v.mode == VW_LIVE) {
        w->v.t1 = t1;
        w->v.t0 = t1 > VW_LIVE_SPAN_NS ? t1 - VW_LIVE_SPAN_NS : 0;
        if (w->v.t0 < t0)
            w->v.t0 = t0;
        w->v.cursor = t1;
    } else {
        w->v.t0 = t0;
        w->v.t1 = t1 > t0 ? t1 + (t1 - t0) / 50 : t0 + 1000000;
        w->v.cursor = t0;
        /* A saved trace opens whole and paused; space (or --play) plays it from its start. */
        if (w->o->play) {
            w->v.now = t0;
            w->v.paused = 0;
        } else {
            w->v.now = UINT64_MAX;
            w->v.paused = 1;
        }
    }
}

static void viewer_take_analysis(viewer *w, double t) {
    an_result r;
    err_msg err = {{0}};
    double took = 0;
    an_steps steps;
    int rc = anjob_finish(&w->job, &r, &steps, &took, &err);
    /* one fix per frame looked up: at the budget, frames are left for another job soon */
    int more = w->sym_fixes.n >= VIEWER_SYM_FRAMES;
    sy_apply(w->s, &w->sym_fixes);
    const char *stale_path = NULL;
    size_t stale = w->sym ? sy_stale_modules(w->sym, &stale_path) : 0;
    if (stale > w->stale_told) {
        w->stale_told = stale;
        const char *base = strrchr(stale_path, '/');
        /* sanitized with the rest of the key bar (screen_help.c) */
        snprintf(w->v.message, sizeof w->v.message, "%s changed since the trace was taken: its frames are not named",
                 base ? base + 1 : stale_path);
    }
    if (rc != 0) {
        an_steps_free(&steps);
        snprintf(w->v.message, sizeof w->v.message, "analysis: %s", err.msg);
        w->an_at = t;
        return;
    }
    if (w->have_an)
        an_result_free(&w->an);
    w->an = r;
    w->have_an = 1;
    w->v.an = &w->an;
    an_steps_free(&w->steps);
    w->steps = steps;
    w->v.steps = &w->steps;
    w->an_at = t;
    w->an_took = took;
    w->an_events = more ? (size_t)-1 : w->job_events;
    w->sites_an = NULL; /* recompute the sites */
}

static int viewer_add_batch(viewer *w, const void *data, size_t len, uint32_t n_events) {
    err_msg err = {{0}};
    int rc = st_store_add_batch(w->s, data, len, &err);
    if (rc != 0)
        return rc;
    w->rate_events += n_events;
    return 0;
}

/* Adds the batches held back while the analysis read the store. */
static void viewer_release_held(viewer *w) {
    for (size_t i = 0; i < w->n_held; i++) {
        viewer_add_batch(w, w->held[i].data, w->held[i].len, w->held[i].n_events);
        free(w->held[i].data);
    }
    w->n_held = 0;
    w->held_bytes = 0;
}

/* Puts each host's producers on this machine's clock as the relays measured it (never while an
 * analysis reads the store); when events moved, the analysis is due again. */
static void viewer_clocks(viewer *w) {
    if (live_clocks_apply(w->sub, w->s) > 0)
        w->an_events = (size_t)-1;
}

/* HTA's breakdown, which key b asked the view for, made on the analysis thread; returns 1 when
 * the job started. */
static int viewer_start_hta(viewer *w) {
    err_msg err = {{0}};
    hta_result *h = calloc(1, sizeof *h);
    if (h == NULL || (w->job = anjob_start(w->s, NULL, 0, NULL, NULL, NULL, h, &err)) == NULL) {
        vw_hta_take(&w->v, NULL, ERR_NOMEM, &err);
        free(h);
        return 0;
    }
    return 1;
}

/* Hands the finished job's HTA breakdown to the view. */
static void viewer_take_hta(viewer *w) {
    viewer_anjob *j = w->job;
    pthread_join(j->th, NULL);
    vw_hta_take(&w->v, j->hta, j->rc, &j->err);
    free(j);
    w->job = NULL;
}

/* Takes what the finished job made: the analysis, or HTA's breakdown. */
static void viewer_take_job(viewer *w, double t) {
    if (w->job->hta != NULL)
        viewer_take_hta(w);
    else
        viewer_take_analysis(w, t);
}

/* Starts the analysis when one is due (or HTA's breakdown when the view asks for it), takes its
 * result when it is done. A live store grows all the time: the next analysis waits at least four
 * times as long as the last one took, so the thread is busy at most a fifth of the time. Returns 1
 * when a job is running. */
static int viewer_analyse(viewer *w, double t) {
    if (w->job) {
        if (!viewer_anjob_done(w->job))
            return 1;
        viewer_take_job(w, t);
        viewer_release_held(w);
        st_store_commit(w->s);
        return 0;
    }
    if (vw_hta_wanted(&w->v))
        return viewer_start_hta(w);
    size_t ev = st_store_events(w->s);
    int due;
    double every = 4 * w->an_took > 1.0 ? 4 * w->an_took : 1.0;
    if (w->v.mode == VW_REPLAY)
        due = !w->loading ? !w->have_an || ev != w->an_events : (ev < (2u << 20) && t - w->an_at >= every);
    else
        due = t - w->an_at >= every && ev != w->an_events;
    if (!due)
        return 0;
    err_msg err = {{0}};
    w->job_events = ev;
    w->an_at = t;
    if (w->sym == NULL)
        w->sym = sy_new();
    if ((w->job = anjob_start(w->s, NULL, 1, w->o->step_name, w->sym, &w->sym_fixes, NULL, &err)) == NULL) {
        snprintf(w->v.message, sizeof w->v.message, "%s", err.msg);
        return 0;
    }
    return 1;
}

/* What a frame needs done first (the store committed, the analysis, the figures); returns 1 when
 * some work was put off (another frame is due soon). */
static int viewer_frame_work(viewer *w, double t) {
    int again = 0;
    if (w->job == NULL)
        st_store_commit(w->s); /* a running analysis reads the store: it stays as it is till then */
    viewer_place(w);
    if (w->v.mode == VW_LIVE) {
        if (w->v.paused && w->v.now == UINT64_MAX)
            w->v.now = w->v.end;
        else if (!w->v.paused)
            w->v.now = UINT64_MAX;
    }
    if (viewer_analyse(w, t))
        again = 1; /* look again soon for its result */
    if (vw_figs_update(&w->v, w->s, VIEWER_FIGS_BUDGET) == 0)
        again = 1;
    if (w->sites_an != w->v.an || (w->v.now != w->sites_now && t - w->sites_at >= 0.25) ||
        (w->v.stalls.step && w->v.cursor != w->sites_cursor)) {
        vw_sites_update(&w->v);
        w->sites_an = w->v.an;
        w->sites_now = w->v.now;
        w->sites_cursor = w->v.cursor;
        w->sites_at = t;
    } else if (w->v.now != w->sites_now) {
        again = 1;
    }
    if (w->ld)
        w->v.load_progress = w->loading ? ingest_progress(w->ld) : 1.0;
    return again;
}

/* Draws a frame; returns 1 when some work was put off (another frame is due soon). */
static int viewer_frame(viewer *w, double t) {
    int again = viewer_frame_work(w, t);
    int cols, rows;
    term_size(w->t, &cols, &rows);
    w->g.w = cols;
    w->g.h = rows;
    vw_render(w->s, &w->v, &w->g);
    term_draw(w->t, &w->g);
    return again;
}

/* Brings the summary rows up to date with what the subscriber holds; returns 1 when a summary
 * came since the last call. */
static int viewer_sum_update(viewer *w) {
    tp_sub_stats ss;
    tp_sub_stats_get(w->sub, &ss);
    if (ss.summaries == w->sum_seen)
        return 0;
    w->sum_seen = ss.summaries;
    w->sv.summaries = ss.summaries;
    size_t n = tp_sub_summary_count(w->sub);
    if (n > w->cap_sum) {
        vw_sum_row *a = realloc(w->sum_rows, n * sizeof *a), *b;
        if (a == NULL)
            return 0;
        w->sum_rows = a;
        if ((b = realloc(w->sum_sorted, n * sizeof *b)) == NULL)
            return 0;
        w->sum_sorted = b;
        memset(w->sum_rows + w->cap_sum, 0, (n - w->cap_sum) * sizeof *a);
        w->cap_sum = n;
    }
    for (size_t i = 0; i < n; i++) {
        tp_sub_summary x;
        if (tp_sub_summary_get(w->sub, i, &x) == 0)
            vw_sum_row_update(&w->sum_rows[i], &x);
    }
    w->n_sum = n;
    return 1;
}

/* The rows in rank order, as the screen shows them and its selection counts them. */
static void viewer_sum_sorted(viewer *w) {
    if (w->n_sum > 0)
        memcpy(w->sum_sorted, w->sum_rows, w->n_sum * sizeof *w->sum_sorted);
    vw_sum_sort(w->sum_sorted, w->n_sum);
}

/* The summary screen. */
static void viewer_sum_frame(viewer *w) {
    viewer_sum_sorted(w);
    w->sv.raw_batches = w->batches_in;
    w->sv.ascii = w->v.ascii;
    int cols, rows;
    term_size(w->t, &cols, &rows);
    w->g.w = cols;
    w->g.h = rows;
    vw_sum_render(w->sum_sorted, w->n_sum, &w->sv, &w->g);
    term_draw(w->t, &w->g);
}

/* A key on the summary screen: opening a rank takes its raw batches (tp_sub_watch), closing it
 * stops them. Returns a VW_ACT_*. */
static int viewer_sum_key(viewer *w, int rows, int key) {
    int a = vw_sum_key(&w->sv, w->n_sum, rows, key);
    if (a == VW_SUM_QUIT)
        return VW_ACT_QUIT;
    if (a == VW_SUM_LANES) {
        w->sum_lanes = 1;
        snprintf(w->v.message, sizeof w->v.message, "S: back to the ranks' summaries");
        return VW_ACT_REDRAW;
    }
    if (a != VW_SUM_TOGGLE)
        return a == VW_SUM_NONE ? VW_ACT_NONE : VW_ACT_REDRAW;
    viewer_sum_sorted(w); /* rows may have come since the last frame */
    uint64_t producer = w->sum_sorted[w->sv.sel].producer;
    for (size_t i = 0; i < w->n_sum; i++) {
        vw_sum_row *r = &w->sum_rows[i];
        if (r->producer != producer)
            continue;
        err_msg err = {{0}};
        if (tp_sub_watch(w->sub, producer, !r->open, &err) != 0)
            snprintf(w->sv.message, sizeof w->sv.message, "%s", err.msg);
        else
            r->open = !r->open;
        w->sum_sorted[w->sv.sel].open = r->open;
    }
    return VW_ACT_REDRAW;
}

/* Writes a received batch to the trace file; on a write error, says so and stops recording. */
static void viewer_record(viewer *w, const tp_sub_msg *msg) {
    if (w->rec == NULL)
        return;
    err_msg err = {{0}};
    int rc = tp_recorder_append(w->rec, msg->data, msg->len, &err);
    if (rc == ERR_MALFORMED)
        return; /* refused whole, as the store refuses it: nothing to keep */
    if (rc != 0) {
        snprintf(w->v.message, sizeof w->v.message, "recording stopped: %s", err.msg);
        tp_recorder_close(&w->rec, NULL);
        w->v.recording = 0;
        return;
    }
    w->rec_batches++;
    w->rec_events += msg->hdr.n_events;
}

static int viewer_hold(viewer *w, const tp_sub_msg *msg) {
    if (w->held_bytes + msg->len > VIEWER_HELD_MAX)
        return ERR_LIMIT;
    if (w->n_held == w->cap_held) {
        size_t c = w->cap_held ? w->cap_held * 2 : 64;
        held_batch *h = realloc(w->held, c * sizeof *h);
        if (h == NULL)
            return ERR_NOMEM;
        w->held = h;
        w->cap_held = c;
    }
    void *copy = malloc(msg->len);
    if (copy == NULL)
        return ERR_NOMEM;
    memcpy(copy, msg->data, msg->len);
    w->held[w->n_held++] = (held_batch){copy, msg->len, msg->hdr.n_events};
    w->held_bytes += msg->len;
    return 0;
}

/* Nothing arrived yet: say where we listen and the likely reason, rather than a blank screen. */
static void viewer_no_data(viewer *w) {
    char *n = w->v.notice;
    size_t cap = sizeof w->v.notice;
    if (w->o->summary) {
        snprintf(n, cap, "no rank is open: S goes back to the summary rows, where enter opens one");
    } else if (w->n_eps == 0) {
        snprintf(n, cap, "no traced process of yours is publishing yet; still looking");
    } else if (w->n_eps > 1) {
        snprintf(n, cap, "no data from any of %zu endpoints yet%s", w->n_eps,
                 w->o->server_key ? ": wrong --server-key?" : "");
    } else if (strncmp(w->eps[0], "tcp://", 6) == 0) {
        snprintf(n, cap, "no data from %.100s: %s", w->eps[0],
                 w->o->server_key ? "wrong --server-key?" : "is it up? does it need --server-key?");
    } else {
        snprintf(n, cap, "no data from %.100s yet: is the traced process running?", w->eps[0]);
    }
}

/* ---- the loop's chores ---- */

static int chore_no_data(viewer *w, double t, double since) {
    (void)t;
    (void)since;
    if (w->batches_in > 0 || w->v.notice[0])
        return VIEWER_CHORE_DONE;
    viewer_no_data(w);
    return VIEWER_CHORE_REDRAW;
}

static int chore_clocks(viewer *w, double t, double since) {
    (void)t;
    (void)since;
    if (w->job != NULL)
        return VIEWER_CHORE_LATER; /* the analysis reads the store: events may not move */
    viewer_clocks(w);
    return VIEWER_CHORE_DONE;
}

static int chore_scan(viewer *w, double t, double since) {
    (void)t;
    (void)since;
    viewer_scan(w);
    return VIEWER_CHORE_DONE;
}

static int chore_discover(viewer *w, double t, double since) {
    (void)t;
    (void)since;
    w->o->discover(w->o->discover_ctx, viewer_add, w);
    const char *gone = w->o->ended != NULL && w->batches_in == 0 && !w->v.live_over ? w->o->ended(w->o->discover_ctx)
                                                                                     : NULL;
    if (gone == NULL)
        return VIEWER_CHORE_DONE;
    /* its processes' last batches come before it has ended: none came, none will */
    w->v.live_over = 1;
    snprintf(w->v.notice, sizeof w->v.notice, "%.80s, and nothing was traced; q quits", gone);
    return VIEWER_CHORE_REDRAW;
}

/* Events per second, smoothed. */
static int chore_rate(viewer *w, double t, double since) {
    (void)t;
    double r1 = (double)w->rate_events / since;
    w->v.events_per_s = w->v.events_per_s == 0 ? r1 : 0.5 * w->v.events_per_s + 0.5 * r1;
    w->rate_events = 0;
    return VIEWER_CHORE_REDRAW;
}

static void viewer_timer_add(viewer *w, double period, double last, int (*fn)(viewer *, double, double)) {
    if (w->n_timers < VIEWER_MAX_TIMERS)
        w->timers[w->n_timers++] = (viewer_timer){period, last, fn};
}

/* The chores of a session with subscribers, in the order they run at a turn; t is the start. */
static void viewer_timers_init(viewer *w, double t) {
    if (w->sub == NULL)
        return;
    viewer_timer_add(w, VIEWER_NO_DATA_S, t, chore_no_data);
    viewer_timer_add(w, 0.5, 0, chore_clocks);
    if (w->o->scan_endpoint_dir)
        viewer_timer_add(w, 2.0, 0, chore_scan);
    if (w->o->discover != NULL)
        viewer_timer_add(w, 0.25, 0, chore_discover);
    viewer_timer_add(w, 1.0, t, chore_rate);
}

/* Runs the chores that are due; returns 1 when the screen changed. */
static int viewer_chores(viewer *w, double t) {
    int dirty = 0;
    for (size_t i = 0; i < w->n_timers; i++) {
        viewer_timer *x = &w->timers[i];
        if (t - x->last < x->period)
            continue;
        int r = x->fn(w, t, t - x->last);
        if (r != VIEWER_CHORE_LATER)
            x->last = t;
        dirty |= r == VIEWER_CHORE_REDRAW;
    }
    return dirty;
}

/* ---- the loop ---- */

/* Replay: the moving "now" advances by the time since the last turn; returns 1 when it moved. */
static int viewer_replay_tick(viewer *w, double dt) {
    if (!w->started)
        return 0;
    return vw_replay_advance(&w->v, (uint64_t)(dt * w->v.speed * 1e9), w->loading);
}

/* How long to wait for input or batches: not at all while a file loads, till the next frame when
 * one is due, else a while (the chores run at least that often). */
static int viewer_timeout_ms(const viewer *w, int dirty, double next_frame, double t) {
    if (w->loading && w->job == NULL)
        return 0;
    if (dirty)
        return next_frame > t ? (int)((next_frame - t) * 1000) + 1 : 0;
    return w->v.mode == VW_LIVE ? 250 : 500;
}

/* One-line warnings said once: names refused past the store's bound, a refused handshake. Returns
 * 1 when one was said. */
static int viewer_say(viewer *w) {
    int said = 0;
    if (!w->said_names && st_store_names_refused(w->s) > 0) {
        w->said_names = 1;
        snprintf(w->v.message, sizeof w->v.message, "names past 128 MiB are shown as placeholders");
        said = 1;
    }
    tp_sub_stats ss;
    if (w->sub != NULL && !w->said_refused && (tp_sub_stats_get(w->sub, &ss), ss.received == 0) &&
        tp_sub_handshake_failed(w->sub) != NULL) {
        w->said_refused = 1;
        int own;
        tp_sub_client_key(w->sub, &own);
        if (!tp_sub_client_refused(w->sub))
            snprintf(w->v.message, sizeof w->v.message, "%.120s refused the handshake: wrong --server-key?",
                     tp_sub_handshake_failed(w->sub));
        else
            snprintf(w->v.message, sizeof w->v.message, "%.100s refused our client key: %s",
                     tp_sub_handshake_failed(w->sub),
                     own ? "not on its --clients list" : "none given (synctop keygen --client)");
        said = 1;
    }
    tp_sub_notice n;
    if (w->sub != NULL && w->said_notices < tp_sub_notice_count(w->sub) &&
        tp_sub_notice_get(w->sub, w->said_notices++, &n) == 0) {
        snprintf(w->v.message, sizeof w->v.message, "relay %.30s: %.120s", n.host, n.text);
        said = 1;
    }
    return said;
}

/* The keys and clicks waiting, to the summary screen or the view. Returns VW_ACT_QUIT at once,
 * else VW_ACT_REDRAW when any of them changed the screen. */
static int viewer_input(viewer *w) {
    int key = 0, kind = 0, mx = 0, my = 0, ev, out = VW_ACT_NONE;
    while ((ev = term_read(w->t, &key, &kind, &mx, &my)) != TERM_NONE) {
        int cols, rows;
        term_size(w->t, &cols, &rows);
        int act = VW_ACT_REDRAW;
        if (ev == TERM_KEY && w->o->summary && !w->sum_lanes)
            act = viewer_sum_key(w, rows, key);
        else if (ev == TERM_KEY && w->o->summary && key == 'S')
            w->sum_lanes = 0;
        else if (ev == TERM_KEY)
            act = vw_key(&w->v, w->s, cols, rows, key);
        else if (ev == TERM_MOUSE && w->o->summary && !w->sum_lanes)
            act = VW_ACT_NONE;
        else if (ev == TERM_MOUSE)
            act = vw_mouse(&w->v, w->s, cols, rows, kind, mx, my);
        if (act == VW_ACT_QUIT)
            return VW_ACT_QUIT;
        if (act != VW_ACT_NONE)
            out = VW_ACT_REDRAW;
    }
    return out;
}

/* The batches that arrived, for at most 10 ms: recorded, then added to the store (held back while
 * the analysis reads it); and the summaries. Returns 1 when the screen changed. */
static int viewer_receive(viewer *w) {
    int dirty = 0;
    double until = cm_now_s() + 0.010;
    tp_sub_msg msg;
    err_msg err = {{0}};
    int r;
    while ((r = tp_sub_recv(w->sub, &msg, 0, &err)) != 0) {
        if (r > 0) {
            viewer_record(w, &msg);
            w->batches_in++;
            if (w->v.notice[0])
                w->v.notice[0] = '\0';
            if (w->job == NULL) {
                viewer_add_batch(w, msg.data, msg.len, msg.hdr.n_events);
            } else if (viewer_hold(w, &msg) != 0) {
                /* too much held back: wait for the analysis rather than lose batches */
                viewer_take_job(w, cm_now_s());
                viewer_release_held(w);
                viewer_add_batch(w, msg.data, msg.len, msg.hdr.n_events);
            }
            dirty = 1;
        }
        if (cm_now_s() >= until)
            break;
    }
    if (w->o->summary && viewer_sum_update(w))
        dirty = 1;
    return dirty;
}

/* A file's next part, unless the analysis reads the store; returns 1 when there is something to
 * show or a job to poll. */
static int viewer_load(viewer *w) {
    if (w->loading && w->job == NULL) {
        err_msg err = {{0}};
        int r = ingest_step(w->ld, 0.015, &err);
        if (r != 0) {
            w->loading = 0;
            if (r < 0)
                snprintf(w->v.message, sizeof w->v.message, "%s", err.msg);
            else if (ingest_align_note(w->ld)[0])
                snprintf(w->v.message, sizeof w->v.message, "%s", ingest_align_note(w->ld));
            st_store_commit(w->s);
            st_store_shrink(w->s);
        }
        return 1;
    }
    return w->job != NULL; /* poll for its result */
}

/* A frame of the summary screen or the lanes; returns 1 when some work was put off. */
static int viewer_draw(viewer *w, double t) {
    if (w->o->summary && !w->sum_lanes) {
        /* the store and its analysis go on for the open ranks: their lanes are current when shown */
        int again = viewer_frame_work(w, t);
        viewer_sum_frame(w);
        return again;
    }
    return viewer_frame(w, t);
}

static int viewer_loop(viewer *w) {
    int fps = w->o->fps > 0 ? w->o->fps : 30;
    double frame_dt = 1.0 / fps, next_frame = 0, last_tick = cm_now_s();
    int dirty = 1;
    viewer_timers_init(w, last_tick);
    for (;;) {
        double t = cm_now_s();
        dirty |= viewer_replay_tick(w, t - last_tick);
        last_tick = t;
        err_msg werr = {{0}};
        if (tp_sub_wait(w->sub, STDIN_FILENO, viewer_timeout_ms(w, dirty, next_frame, t), &werr) < 0) {
            snprintf(w->err, sizeof w->err, "%s", werr.msg);
            return 1;
        }
        if (w->o->stop != NULL && *w->o->stop)
            return 0;
        dirty |= viewer_say(w);
        int act = viewer_input(w); /* input first: a key is never kept waiting behind a flood of batches */
        if (act == VW_ACT_QUIT)
            return 0;
        if (act != VW_ACT_NONE) {
            dirty = 1;
            next_frame = 0; /* answer input at once */
        }
        if (w->sub) {
            dirty |= viewer_receive(w);
            dirty |= viewer_chores(w, t);
        }
        dirty |= viewer_load(w);
        t = cm_now_s();
        if (dirty && t >= next_frame) {
            dirty = viewer_draw(w, t);
            next_frame = t + frame_dt;
        }
    }
}

static void viewer_free(viewer *w) {
    if (w->job) {
        an_result r;
        if (viewer_anjob_finish(&w->job, &r, NULL, NULL) == 0)
            an_result_free(&r);
    }
    for (size_t i = 0; i < w->n_held; i++)
        free(w->held[i].data);
    free(w->held);
    term_close(&w->t);
    /* the analysis thread is done with the store: the caller may read it (and commit it) */
    if (w->o != NULL && w->o->on_close != NULL && w->s != NULL)
        w->o->on_close(w->o->on_close_ctx, w->s);
    tp_sub_destroy(&w->sub);
    free(w->sum_rows);
    free(w->sum_sorted);
    ingest_close(&w->ld);
    if (w->have_an)
        an_result_free(&w->an);
    an_steps_free(&w->steps);
    vw_state_free(&w->v);
    vw_grid_free(&w->g);
    st_store_destroy(&w->s);
    sy_fixes_free(&w->sym_fixes);
    sy_free(&w->sym);
    for (size_t i = 0; i < w->n_eps; i++)
        free(w->eps[i]);
}

static int viewer_start_term(viewer *w) {
    term_opts to = {.ascii = w->o->ascii, .mono = w->o->mono};
    err_msg err = {{0}};
    if ((w->t = term_open(&to, &err)) == NULL) {
        snprintf(w->err, sizeof w->err, "%s", err.msg);
        return ERR_UNSUPPORTED;
    }
    w->v.ascii = term_ascii(w->t);
    w->v.mono = term_mono(w->t);
    return 0;
}

static int viewer_finish(viewer *w, int rc, viewer_result *res) {
    memset(res, 0, sizeof *res);
    if (rc != 0)
        snprintf(res->err.msg, sizeof res->err.msg, "%s", w->err);
    res->recorded = w->rec != NULL;
    res->rec_batches = w->rec_batches;
    res->rec_events = w->rec_events;
    res->damaged = w->n_damaged;
    snprintf(res->damage, sizeof res->damage, "%s", w->damage);
    /* The hosts' clocks the relays answered with end the recording, as `synctop record`'s do. */
    if (res->recorded && w->sub != NULL && tp_recorder_add_clocks(w->rec, w->sub, &res->record_err) < 0) {
        res->record_failed = 1;
        rc = 1;
    }
    if (res->recorded && tp_recorder_close(&w->rec, &res->record_err) != 0) {
        res->record_failed = 1;
        rc = 1;
    }
    viewer_free(w);
    return rc;
}

int viewer_run_live(const char *const *endpoints, size_t n, const viewer_opts *o, viewer_result *res) {
    viewer w;
    memset(&w, 0, sizeof w);
    w.o = o;
    st_opts so = {.max_events = o->window_events ? o->window_events : VIEWER_DEFAULT_WINDOW_EVENTS};
    w.s = st_store_new(&so);
    tp_sub_opts sopts = {.server_key = o->server_key, .client_key = o->client_key, .summaries = o->summary};
    err_msg err = {{0}};
    if (w.s == NULL || (w.sub = tp_sub_new(&sopts, &err)) == NULL) {
        snprintf(w.err, sizeof w.err, "%s", err.msg[0] ? err.msg : "out of memory");
        return viewer_finish(&w, 1, res);
    }
    for (size_t i = 0; i < n; i++)
        if (viewer_connect(&w, endpoints[i]) != 0)
            return viewer_finish(&w, 1, res);
    if (o->record) {
        w.rec = tp_recorder_open(o->record, o->record_overwrite ? TP_FW_OVERWRITE : 0, &err);
        if (w.rec == NULL) {
            snprintf(w.err, sizeof w.err, "--record %s: %s", o->record, err.msg);
            return viewer_finish(&w, 1, res);
        }
    }
    if (o->scan_endpoint_dir)
        viewer_scan(&w);
    vw_state_init(&w.v, VW_LIVE, w.s);
    w.v.recording = w.rec != NULL;
    if (viewer_start_term(&w) != 0)
        return viewer_finish(&w, 1, res);
    int rc = viewer_loop(&w);
    return viewer_finish(&w, rc, res);
}

/* The screen while a profiler trace is read whole (vw_render_loading), at most ten times a second;
 * q or esc stops the reading. */
typedef struct viewer_reading {
    viewer *w;
    const char *name;
    double last;
    int stop;
} viewer_reading;

static int viewer_reading_progress(void *ctx, uint64_t done, uint64_t total) {
    viewer_reading *r = ctx;
    viewer *w = r->w;
    int key = 0, kind = 0, x = 0, y = 0, ev;
    while ((ev = term_read(w->t, &key, &kind, &x, &y)) != TERM_NONE)
        if (ev == TERM_KEY && (key == 'q' || key == 'Q' || key == VW_KEY_ESC))
            r->stop = 1;
    double t = cm_now_s();
    if (r->last == 0 || t - r->last >= 0.1) {
        r->last = t;
        term_size(w->t, &w->g.w, &w->g.h);
        vw_render_loading(&w->v, &w->g, r->name, done, total);
        term_draw(w->t, &w->g);
    }
    return r->stop;
}

int viewer_run_replay(const char *const *paths, size_t n_paths, const viewer_opts *o, viewer_result *res) {
    viewer w;
    memset(&w, 0, sizeof w);
    w.o = o;
    w.s = st_store_new(NULL);
    err_msg err = {{0}};
    if (w.s == NULL || (w.ld = ingest_open_many(w.s, paths, n_paths, o->max_events, viewer_warn, &w, &err)) == NULL) {
        snprintf(w.err, sizeof w.err, "%s", err.msg[0] ? err.msg : "out of memory");
        return viewer_finish(&w, 1, res);
    }
    ingest_set_align(w.ld, o->align);
    ingest_keep_ops(w.ld); /* the operators' rows under each thread */
    vw_state_init(&w.v, VW_REPLAY, w.s);
    w.v.damaged = w.n_damaged;
    w.v.stalls.hta_async = 1; /* b: HTA's breakdown is made on the analysis thread */
    w.loading = 1;
    if (viewer_start_term(&w) != 0)
        return viewer_finish(&w, 1, res);
    /* a Kineto JSON is imported whole before anything can be shown (it has no index to seek); so
     * are several sources that are all Kineto JSON: meanwhile, how far the reading has come */
    uint64_t a, b;
    ingest_span(w.ld, &a, &b);
    if (b == 0) {
        char name[64];
        snprintf(name, sizeof name, "%zu files", n_paths);
        viewer_reading r = {.w = &w, .name = n_paths == 1 ? paths[0] : name};
        viewer_reading_progress(&r, 0, 0);
        ingest_on_progress(w.ld, viewer_reading_progress, &r);
        int rc = ingest_step(w.ld, 0, &err);
        if (r.stop) /* q: the user left before it was read */
            return viewer_finish(&w, 0, res);
        if (rc < 0) {
            snprintf(w.err, sizeof w.err, "%s", err.msg);
            return viewer_finish(&w, 1, res);
        }
        w.loading = 0;
        if (ingest_align_note(w.ld)[0])
            snprintf(w.v.message, sizeof w.v.message, "%s", ingest_align_note(w.ld));
        st_store_commit(w.s);
    }
    int rc = viewer_loop(&w);
    return viewer_finish(&w, rc, res);
}
