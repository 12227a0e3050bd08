/*
 * `synctop demo`: a recorded trace played live, for whoever has no GPU at hand. It publishes one
 * of the sample profiler traces (or any trace synctop reads) as a traced program does: the same
 * publisher, wire format and endpoint (PID.sock in the private endpoint directory, or --listen's),
 * its own process record, clock beacons and keyframes for newcomers. So `synctop attach PID`,
 * `record`, `relay` and remote viewers all work against it as against a real job.
 *
 * The trace is read whole first, its events sorted by their end, and then sent at the trace's own
 * pace: an event goes out once the trace's clock, started at now when the first viewer connects,
 * has passed its end, as a tracer sends an activity once it completed. --speed runs that clock
 * faster (the durations stay the trace's). At the end it starts over, later on the same timeline
 * (correlation and range ids moved on, so each loop's calls find their own GPU work).
 *
 * Without --no-tui, on a terminal, the publisher runs on a thread of its own and the live viewer
 * on this one, subscribed to it, as `synctop run` shows a program.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "grow.h"
#include "kineto.h"
#include "load.h"
#include "nsys.h"
#include "synctop/codec.h"
#include "synctop/file.h"
#include "synctop/net.h"
#include "args.h"
#include "verb.h"
#include "viewer.h"

#define DEMO_TRACE "resnet_2080ti_two_threads.json.gz" /* 30 ResNet steps, 16 s, stalls of every kind */
#define DEMO_MAX_EVENTS (4u << 20)  /* events of the trace played (about 64 bytes each, kept whole) */
#define DEMO_MAX_STRINGS (4u << 20) /* string ids of the trace */
#define DEMO_ROUND_NS 50000000ull   /* a round of the publisher: what is due goes out */
#define DEMO_SHIP_BYTES (1u << 20)  /* a batch goes once it holds this much, as the tracer's */
#define DEMO_ROUND_MAX 200000       /* events a round at most: at a high speed the clock waits */
#define DEMO_CLOCK_EVERY_NS 1000000000ull
#define DEMO_LINGER_MS 1000

static void demo_usage(FILE *out) {
    fprintf(out,
            "usage: synctop demo [--trace FILE] [--speed X] [--loops N] [--no-tui]\n"
            "                    [--listen ENDPOINT [--key FILE.key [--clients DIR|FILE] | --insecure]]\n"
            "                    [--ascii] [--mono]\n\n"
            "Plays a recorded trace live, as a traced CUDA program publishes: no GPU needed. By\n"
            "default a sample PyTorch trace (" DEMO_TRACE ": 30 ResNet training\n"
            "steps on one GPU, with the stalls of a real job). On a terminal it opens the live\n"
            "viewer on it (q ends both); with --no-tui it only publishes, on this process's\n"
            "default endpoint, so that `synctop attach PID`, `synctop record PID -o FILE`,\n"
            "`synctop relay` and viewers elsewhere (with --listen) see it as they see a program.\n"
            "The trace's clock starts at now when the first viewer connects; events are sent\n"
            "once that clock passed their end, and at its end the trace starts over, later on\n"
            "the same timeline. Ctrl-C (or q in the viewer) ends it.\n\n"
            "  --trace FILE       the trace to play: a trace file, profiler (Kineto) JSON or an\n"
            "                     nsys export; its process with the most events is played\n"
            "  --speed X          run the trace's clock X times as fast (0.01 to 1000; default 1);\n"
            "                     durations stay the trace's own\n"
            "  --loops N          end after playing the trace N times (default: until stopped)\n"
            "  --no-tui, --no-view  only publish (also when standard input or output is not a\n"
            "                     terminal); the endpoint and pid are said on stderr\n"
            "  --listen ENDPOINT  publish on ENDPOINT (tcp://127.0.0.1:PORT, ipc://PATH) instead\n"
            "                     of this process's default ipc endpoint\n"
            "  --key FILE.key     encrypt what is published with CURVE (keys from `synctop\n"
            "                     keygen`); viewers elsewhere attach with --server-key FILE.pub\n"
            "  --clients DIR|FILE with --key, admit only the viewers whose client public key is\n"
            "                     listed (as `synctop run --clients`)\n"
            "  --insecure         allow a non-loopback --listen address without --key\n"
            "  --ascii, --mono    the live view in ASCII / without colours\n");
}

/* ---- the trace, read whole ---- */

typedef struct demo_trace {
    tp_record *ev; /* events, by end then start */
    size_t n_ev, cap_ev;
    tp_record *meta; /* the producer's metadata, in its order, strings renumbered */
    size_t n_meta, cap_meta;
    tp_process proc;    /* the trace's process record (its strings renumbered) */
    uint64_t t0, t1;    /* the events' span */
    uint32_t corr_max;  /* largest correlation id */
    uint64_t range_max; /* largest NVTX start/end pair id */
} demo_trace;

/* The batches of the source, as read or imported. */
typedef struct demo_batches {
    tp_buf *b;
    size_t n, cap;
} demo_batches;

static int demo_collect(void *ctx, const void *batch, size_t len, err_msg *err) {
    demo_batches *bs = ctx;
    if (CM_GROW(bs->b, bs->cap, bs->n + 1))
        return err_set(err, ERR_NOMEM, "out of memory");
    tp_buf *b = &bs->b[bs->n];
    memset(b, 0, sizeof *b);
    if (tp_buf_append(b, batch, len) != 0)
        return err_set(err, ERR_NOMEM, "out of memory");
    bs->n++;
    return 0;
}

static void demo_batches_free(demo_batches *bs) {
    for (size_t i = 0; i < bs->n; i++)
        tp_buf_free(&bs->b[i]);
    free(bs->b);
    memset(bs, 0, sizeof *bs);
}

/* Every batch of a source synctop reads, in its order. */
static int demo_read_batches(const char *path, demo_batches *bs, err_msg *err) {
    import_opts io = {.producer = 0, .max_events = DEMO_MAX_EVENTS};
    if (access(path, R_OK) != 0)
        return err_set(err, ERR_IO, "%s: %s", path, strerror(errno));
    switch (ingest_kind(path)) {
    case INGEST_KINETO: return kineto_import(path, &io, demo_collect, bs, NULL, err);
    case INGEST_NSYS: return nsys_import(path, &io, demo_collect, bs, NULL, err);
    case INGEST_TRACE: break;
    default: return ingest_unreadable(path, err);
    }
    tp_freader *r = tp_freader_open(path, err);
    if (r == NULL)
        return ERR_IO;
    int rc = 0;
    uint64_t events = 0;
    tp_buf b = {0};
    for (size_t i = 0; i < tp_freader_count(r) && rc == 0; i++) {
        err_msg e = {{0}};
        if (tp_freader_read(r, i, &b, &e) != 0)
            continue; /* a damaged batch is left out, as replay leaves it */
        events += tp_freader_entry(r, i)->n_events;
        if (events > DEMO_MAX_EVENTS)
            rc = err_set(err, ERR_LIMIT, "%s holds more than %u events: the demo plays traces up to that size", path,
                         DEMO_MAX_EVENTS);
        else
            rc = demo_collect(bs, b.data, b.len, err);
    }
    tp_buf_free(&b);
    tp_freader_close(&r);
    return rc;
}

static int demo_push(tp_record **arr, size_t *n, size_t *cap, const tp_record *r) {
    if (CM_GROW(*arr, *cap, *n + 1))
        return ERR_NOMEM;
    (*arr)[(*n)++] = *r;
    return 0;
}

/* The string fields of a record, for renumbering. */
static size_t demo_string_fields(tp_record *r, uint32_t **f) {
    switch (r->head.kind) {
    case TP_K_KERNEL: f[0] = &r->kernel.name; return 1;
    case TP_K_API: f[0] = &r->api.name; return 1;
    case TP_K_NVTX: f[0] = &r->nvtx.name; f[1] = &r->nvtx.domain; return 2;
    case TP_K_PROCESS: f[0] = &r->process.host; f[1] = &r->process.cmdline; return 2;
    case TP_K_DEVICE: f[0] = &r->device.name; return 1;
    case TP_K_THREAD: f[0] = &r->thread.name; return 1;
    case TP_K_FRAME: f[0] = &r->frame.file; f[1] = &r->frame.func; f[2] = &r->frame.module; return 3;
    case TP_K_MODULE: f[0] = &r->module.path; return 1;
    default: return 0;
    }
}

/* The strings a record names, as the encoder numbers them (interned here, in the order records
 * name them): map holds the encoder's id of each of the trace's ids seen so far (0: not yet). */
typedef struct demo_strings {
    tp_strtab *tab;
    uint32_t *map;
    size_t n_map;
} demo_strings;

static int demo_renumber(demo_strings *ds, tp_enc *enc, tp_record *r) {
    uint32_t *f[3];
    size_t n = demo_string_fields(r, f);
    for (size_t i = 0; i < n; i++) {
        uint32_t id = *f[i], len = 0;
        if (id == 0)
            continue;
        if (id >= ds->n_map) {
            if (id >= DEMO_MAX_STRINGS)
                return ERR_LIMIT;
            size_t nn = ds->n_map ? ds->n_map : 1024;
            while (nn <= id)
                nn *= 2;
            uint32_t *nm = realloc(ds->map, nn * sizeof *nm);
            if (nm == NULL)
                return ERR_NOMEM;
            memset(nm + ds->n_map, 0, (nn - ds->n_map) * sizeof *nm);
            ds->map = nm;
            ds->n_map = nn;
        }
        if (ds->map[id] == 0) {
            const char *s = tp_strtab_get(ds->tab, id, &len);
            ds->map[id] = s != NULL ? tp_enc_intern(enc, s, len) : 0; /* unknown: no name */
        }
        *f[i] = ds->map[id];
    }
    return 0;
}

static int by_end(const void *a, const void *b) {
    const tp_record *x = a, *y = b;
    uint64_t xs, xe, ys, ye;
    tp_record_span(x, &xs, &xe);
    tp_record_span(y, &ys, &ye);
    if (xe != ye)
        return xe < ye ? -1 : 1;
    return xs < ys ? -1 : xs > ys;
}

/* The producer with the most events (the notes of a recorder are none). */
static uint64_t demo_pick_producer(const demo_batches *bs, size_t *n_producers) {
    uint64_t ids[64] = {0}, counts[64] = {0};
    size_t n = 0;
    *n_producers = 0;
    for (size_t i = 0; i < bs->n; i++) {
        tp_batch_hdr h;
        err_msg e;
        if (tp_batch_check_header(bs->b[i].data, bs->b[i].len, &h, &e) != 0 || h.producer == TP_PRODUCER_NOTES ||
            (h.flags & TP_BF_INDEX))
            continue;
        size_t k = 0;
        while (k < n && ids[k] != h.producer)
            k++;
        if (k == n && n < 64)
            ids[n++] = h.producer;
        if (k < n)
            counts[k] += h.n_events;
    }
    size_t best = 0;
    for (size_t k = 1; k < n; k++)
        if (counts[k] > counts[best])
            best = k;
    *n_producers = n;
    return n ? ids[best] : 0;
}

/* Reads the trace whole into t: one producer's metadata and events, their strings interned in enc.
 * 0, or a negative code with the reason in err. */
static int demo_trace_load(const char *path, tp_enc *enc, demo_trace *t, err_msg *err) {
    demo_batches bs = {0};
    int rc = demo_read_batches(path, &bs, err);
    size_t n_prods = 0;
    uint64_t prod = rc == 0 ? demo_pick_producer(&bs, &n_prods) : 0;
    if (rc == 0 && n_prods > 1)
        verb_warn("demo", "%s holds %zu processes: the one with the most events is played", path, n_prods);
    demo_strings ds = {.tab = tp_strtab_new()};
    tp_dec d = {0};
    if (rc == 0 && ds.tab == NULL)
        rc = err_set(err, ERR_NOMEM, "out of memory");
    int have_proc = 0;
    for (size_t i = 0; i < bs.n && rc == 0; i++) {
        err_msg e = {{0}};
        if (tp_dec_open(&d, bs.b[i].data, bs.b[i].len, &e) != 0 || d.hdr.producer != prod)
            continue;
        uint32_t id, len;
        const char *s;
        while (tp_dec_next_string(&d, &id, &s, &len))
            if (tp_strtab_set(ds.tab, id, s, len) != 0)
                rc = err_set(err, ERR_NOMEM, "out of memory");
        if (d.hdr.flags & TP_BF_KEYFRAME)
            t->n_meta = 0; /* a keyframe carries all the metadata again */
        const tp_record *r;
        while (rc == 0 && (r = tp_dec_next_record(&d)) != NULL) {
            tp_record c = *r;
            unsigned k = c.head.kind;
            if (k == TP_K_CLOCK || k == TP_K_DROPS || k == TP_K_HOSTCLOCK)
                continue; /* the demo's own clock and drops are said instead */
            if ((rc = demo_renumber(&ds, enc, &c)) != 0) {
                err_set(err, rc, "%s: %s", path, rc == ERR_LIMIT ? "too many strings" : "out of memory");
                break;
            }
            if (k == TP_K_PROCESS) {
                t->proc = c.process;
                have_proc = 1;
            } else if (TP_KIND_IS_META(k)) {
                rc = demo_push(&t->meta, &t->n_meta, &t->cap_meta, &c);
            } else {
                uint64_t s0, s1;
                tp_record_span(&c, &s0, &s1);
                if (t->n_ev == 0 || s0 < t->t0)
                    t->t0 = s0;
                if (t->n_ev == 0 || s1 > t->t1)
                    t->t1 = s1;
                if (k == TP_K_NVTX && c.nvtx.id > t->range_max)
                    t->range_max = c.nvtx.id;
                else if (k != TP_K_NVTX && c.kernel.correlation > t->corr_max)
                    t->corr_max = c.kernel.correlation; /* at the same place in every event kind but NVTX */
                rc = demo_push(&t->ev, &t->n_ev, &t->cap_ev, &c);
            }
            if (rc == ERR_NOMEM)
                err_set(err, rc, "out of memory");
        }
    }
    tp_dec_free(&d);
    tp_strtab_destroy(&ds.tab);
    free(ds.map);
    demo_batches_free(&bs);
    if (rc == 0 && t->n_ev == 0)
        rc = err_set(err, ERR_NOENT, "%s holds no event to play", path);
    if (rc == 0 && !have_proc)
        t->proc = (tp_process){.kind = TP_K_PROCESS, .device = TP_NO_DEVICE, .rank = -1, .world = -1};
    if (rc == 0)
        qsort(t->ev, t->n_ev, sizeof *t->ev, by_end);
    return rc;
}

static void demo_trace_free(demo_trace *t) {
    free(t->ev);
    free(t->meta);
    memset(t, 0, sizeof *t);
}

/* ---- the publisher ---- */

typedef struct demo_player {
    tp_pub *pub;
    tp_enc *enc;
    demo_trace tr;
    tp_buf batch;
    double speed;
    uint64_t loops;        /* 0: for ever */
    atomic_int stop;       /* the viewer closed */
    int quiet;             /* the viewer owns the terminal: say nothing */
    uint64_t loop_ns;      /* a loop's length on the trace's clock */
    uint64_t start_real;   /* the trace's clock at the start: CLOCK_REALTIME then */
    uint64_t start_mono;
    uint64_t loop, next;   /* the next event: loop and index */
    uint64_t last_clock;   /* monotonic time of the last beacon */
    uint64_t drops_said;   /* the publisher's drops said so far */
    uint64_t sent_events, sent_batches;
} demo_player;

static uint64_t demo_clock(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The trace's clock now: real time when the play started, then X times as fast. */
static uint64_t demo_trace_now(const demo_player *p, uint64_t mono) {
    return p->start_real + (uint64_t)((double)(mono - p->start_mono) * p->speed);
}

static void demo_ship(demo_player *p, uint32_t flags, int wait_ms) {
    if (tp_enc_finish_flags(p->enc, flags, &p->batch) != 0) {
        tp_enc_delivered(p->enc, 0);
        return;
    }
    int rc = wait_ms > 0 ? tp_pub_send_wait(p->pub, p->batch.data, p->batch.len, wait_ms)
                         : tp_pub_send(p->pub, p->batch.data, p->batch.len);
    tp_enc_delivered(p->enc, rc == 0 || rc == ERR_AGAIN);
    p->sent_batches++;
}

static void demo_add_clock(demo_player *p) {
    uint64_t mono = demo_clock(CLOCK_MONOTONIC);
    tp_clock c = {.kind = TP_K_CLOCK, .device = TP_NO_DEVICE, .trace_ns = demo_trace_now(p, mono),
                  .realtime_ns = demo_clock(CLOCK_REALTIME), .monotonic_ns = mono};
    tp_enc_add(p->enc, &c);
    p->last_clock = mono;
}

/* Event i of loop k on the trace's clock now: moved to the play's start and k loops on, its
 * correlation and range ids k loops on. */
static void demo_shift(const demo_player *p, uint64_t k, const tp_record *src, tp_record *out) {
    const demo_trace *t = &p->tr;
    *out = *src;
    uint64_t base = p->start_real + k * p->loop_ns - t->t0;
    out->kernel.start += base; /* start and end are at the same place in every event kind */
    out->kernel.end += base;
    if (out->head.kind == TP_K_NVTX) {
        if (out->nvtx.id != 0)
            out->nvtx.id += k * (t->range_max + 1);
    } else if (out->kernel.correlation != 0) {
        out->kernel.correlation += (uint32_t)(k * ((uint64_t)t->corr_max + 1));
        if (out->kernel.correlation == 0)
            out->kernel.correlation = 1;
    }
}

/* One round: keyframes for newcomers, the beacon, the drops, and the events now due. Returns 1
 * when --loops is done. */
static int demo_round(demo_player *p) {
    int keyframe = 0;
    tp_pub_poll(p->pub, &keyframe);
    uint64_t mono = demo_clock(CLOCK_MONOTONIC);
    if (keyframe) {
        tp_enc_keyframe(p->enc);
        demo_add_clock(p);
    } else if (mono - p->last_clock >= DEMO_CLOCK_EVERY_NS) {
        demo_add_clock(p);
    }
    tp_pub_stats ps;
    tp_pub_stats_get(p->pub, &ps);
    if (ps.dropped != p->drops_said) {
        tp_drops dr = {.kind = TP_K_DROPS, .device = TP_NO_DEVICE, .source = TP_DROP_PUBLISHER,
                       .ts = demo_trace_now(p, mono), .batches = ps.dropped};
        tp_enc_add(p->enc, &dr);
        p->drops_said = ps.dropped;
    }
    uint64_t now = demo_trace_now(p, mono);
    const demo_trace *t = &p->tr;
    for (int n = 0; n < DEMO_ROUND_MAX; n++) {
        if (p->loops != 0 && p->loop >= p->loops)
            break;
        const tp_record *src = &t->ev[p->next];
        tp_record r;
        demo_shift(p, p->loop, src, &r);
        if (r.kernel.end > now)
            break;
        tp_enc_add(p->enc, &r);
        p->sent_events++;
        if (++p->next == t->n_ev) {
            p->next = 0;
            p->loop++;
        }
        if (tp_enc_pending_bytes(p->enc) >= DEMO_SHIP_BYTES)
            demo_ship(p, 0, 0);
    }
    if (tp_enc_pending(p->enc) > 0)
        demo_ship(p, 0, 0);
    return p->loops != 0 && p->loop >= p->loops;
}

/* The process record: this process, which trace it plays and its other arguments ("synctop demo:
 * resnet_2080ti_two_threads.json.gz --speed 8"), short enough for a viewer's title. */
static void demo_add_process(demo_player *p, int argc, char **argv, const char *trace) {
    char cmd[1024], host[256] = "";
    const char *base = strrchr(trace, '/');
    size_t len = (size_t)snprintf(cmd, sizeof cmd, "synctop demo: %s", base ? base + 1 : trace);
    for (int i = 1; i < argc && len < sizeof cmd; i++) {
        if (strcmp(argv[i], "--trace") == 0) {
            i++;
            continue;
        }
        if (strncmp(argv[i], "--trace=", 8) != 0)
            len += (size_t)snprintf(cmd + len, sizeof cmd - len, " %s", argv[i]);
    }
    gethostname(host, sizeof host - 1);
    tp_process pr = p->tr.proc;
    uint32_t traced = pr.pid;
    pr.pid = (uint32_t)getpid();
    pr.host = tp_enc_intern_cstr(p->enc, host);
    pr.cmdline = tp_enc_intern_cstr(p->enc, cmd);
    pr.start_realtime_ns = p->start_real;
    tp_enc_add(p->enc, &pr);
    for (size_t i = 0; i < p->tr.n_meta; i++) {
        tp_record m = p->tr.meta[i];
        if (m.head.kind == TP_K_THREAD && m.thread.pid == traced)
            m.thread.pid = pr.pid; /* its threads are this process's */
        tp_enc_add(p->enc, &m);
    }
}

/* Waits for the first viewer (or a stop), then starts the trace's clock at now. 0 when stopped. */
static int demo_wait_viewer(demo_player *p) {
    while (!atomic_load(&p->stop) && !verb_stop_signal) {
        if (tp_pub_poll(p->pub, NULL) > 0) {
            p->start_mono = demo_clock(CLOCK_MONOTONIC);
            p->start_real = demo_clock(CLOCK_REALTIME);
            return 1;
        }
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* Plays until stopped (p->stop, a signal) or --loops is done, then sends the last batch. */
static void demo_play(demo_player *p, int argc, char **argv, const char *trace) {
    if (!demo_wait_viewer(p))
        return;
    if (!p->quiet)
        verb_say("demo", "a viewer connected: playing%s", p->loops ? "" : " (Ctrl-C ends it)");
    demo_add_process(p, argc, argv, trace);
    tp_enc_keyframe(p->enc);
    demo_add_clock(p);
    while (!atomic_load(&p->stop) && !verb_stop_signal) {
        if (demo_round(p))
            break;
        uint64_t next = demo_clock(CLOCK_MONOTONIC) + DEMO_ROUND_NS;
        while (!atomic_load(&p->stop) && !verb_stop_signal && demo_clock(CLOCK_MONOTONIC) < next) {
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
    }
    demo_ship(p, TP_BF_END, DEMO_LINGER_MS);
}

typedef struct demo_thread_args {
    demo_player *p;
    int argc;
    char **argv;
    const char *trace;
} demo_thread_args;

static void *demo_thread(void *arg) {
    demo_thread_args *a = arg;
    demo_play(a->p, a->argc, a->argv, a->trace);
    return NULL;
}

/* ---- the verb ---- */

typedef struct demo_args {
    const char *trace, *listen, *key, *clients;
    double speed;
    uint64_t loops;
    int no_tui, ascii, mono, insecure;
} demo_args;

static int demo_parse(int argc, char **argv, demo_args *a) {
    enum { O_TRACE = 1, O_SPEED, O_LOOPS, O_NO_TUI, O_LISTEN, O_KEY, O_CLIENTS, O_INSECURE, O_ASCII, O_MONO };
    static const arg_opt opts[] = {
        {O_TRACE, "--trace", NULL, 1},   {O_SPEED, "--speed", NULL, 1},   {O_LOOPS, "--loops", NULL, 1},
        {O_NO_TUI, "--no-tui", NULL, 0}, {O_NO_TUI, "--no-view", NULL, 0}, {O_LISTEN, "--listen", NULL, 1},
        {O_KEY, "--key", NULL, 1},       {O_CLIENTS, "--clients", NULL, 1}, {O_INSECURE, "--insecure", NULL, 0},
        {O_ASCII, "--ascii", NULL, 0},   {O_MONO, "--mono", NULL, 0},
    };
    args p;
    ARGS_INIT(&p, "demo", demo_usage, opts, argc, argv);
    const char *val;
    a->speed = 1.0;
    for (int id; (id = args_next(&p, &val)) != ARGS_END;) {
        switch (id) {
        case ARGS_HELP: return 0;
        case ARGS_BAD: return EXIT_USAGE;
        case O_TRACE: a->trace = val; break;
        case O_SPEED:
            if (args_double(&p, "--speed", val, 0.01, 1000, &a->speed) != 0)
                return EXIT_USAGE;
            break;
        case O_LOOPS:
            if (args_u64(&p, "--loops", val, 1, 1000000, &a->loops) != 0)
                return EXIT_USAGE;
            break;
        case O_NO_TUI: a->no_tui = 1; break;
        case O_LISTEN: a->listen = val; break;
        case O_KEY: a->key = val; break;
        case O_CLIENTS: a->clients = val; break;
        case O_INSECURE: a->insecure = 1; break;
        case O_ASCII: a->ascii = 1; break;
        case O_MONO: a->mono = 1; break;
        default: return args_bad(&p, "unexpected argument '%s' (a trace is given with --trace FILE)", val);
        }
    }
    if (a->clients != NULL && a->key == NULL)
        return args_bad(&p, "--clients goes with --key: only CURVE clients have keys to check");
    return -1;
}

/* The sample trace: installed in the data directory (share/synctop/traces, found from the binary's
 * own directory), else the source tree's. */
static int demo_default_trace(char *out, size_t outlen) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash != NULL) {
            *slash = '\0';
            snprintf(out, outlen, "%s/%s/traces/%s", self, SYNCTOP_DATA_RELDIR, DEMO_TRACE);
            if (access(out, R_OK) == 0)
                return 0;
        }
    }
#ifdef SYNCTOP_SAMPLE_TRACES
    snprintf(out, outlen, "%s/%s", SYNCTOP_SAMPLE_TRACES, DEMO_TRACE);
    if (access(out, R_OK) == 0)
        return 0;
#endif
    return -1;
}

/* The publisher, as --listen, --key, --clients and --insecure ask; its keys in keys. 0, or the
 * verb's status with the reason said. */
static int demo_publisher(const demo_args *a, tp_keypair *keys, tp_pub **pub) {
    err_msg err = {{0}};
    char ep[TP_ENDPOINT_MAX] = "";
    int rc;
    if (a->listen != NULL && (rc = verb_listen_resolve("demo", a->listen, ep, sizeof ep)) != 0)
        return rc;
    if ((rc = verb_refuse_clear_listen("demo", ep, a->key != NULL, a->insecure, "synctop", "", "demo")) != 0)
        return rc;
    if (a->key != NULL) {
        if (tp_keypair_load(keys, a->key, &err) != 0)
            return verb_error("demo", "--key %s: %s", a->key, err.msg);
        if (keys->secret_key[0] == '\0')
            return verb_error("demo", "--key %s: this is a public key; publishing needs the .key file (both keys) "
                                      "that `synctop keygen` wrote", a->key);
    }
    tp_clients *clients = NULL;
    if (a->clients != NULL && (clients = tp_clients_load(a->clients, &err)) == NULL)
        return verb_error("demo", "--clients: %s", err.msg);
    if (a->key != NULL && a->clients == NULL && strncmp(ep, "tcp://", 6) == 0)
        verb_warn("demo", "--key without --clients: whoever has the public key of %s and can reach %s can watch; "
                          "--clients DIR admits only the viewers whose keys it lists", a->key, ep);
    tp_pub_opts po = {.endpoint = ep[0] ? ep : NULL, .curve = a->key ? keys : NULL, .insecure = a->insecure,
                      .clients = clients};
    *pub = tp_pub_new(&po, &err);
    tp_clients_destroy(&clients); /* the publisher keeps its own copy of what it admits */
    if (*pub == NULL)
        return verb_error("demo", "cannot publish: %s", err.msg);
    return 0;
}

static int cmd_demo(int argc, char **argv) {
    demo_args a = {0};
    int rc = demo_parse(argc, argv, &a);
    if (rc >= 0)
        return rc;
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        a.no_tui = 1;
    char def[PATH_MAX + 64];
    if (a.trace == NULL) {
        if (demo_default_trace(def, sizeof def) != 0)
            return verb_error("demo", "cannot find the sample trace %s (installed in share/synctop/traces); give "
                                      "one with --trace FILE", DEMO_TRACE);
        a.trace = def;
    }
    demo_player p = {.speed = a.speed, .loops = a.loops, .quiet = !a.no_tui};
    err_msg err = {{0}};
    if ((p.enc = tp_enc_new(NULL)) == NULL)
        return verb_error("demo", "out of memory");
    if (demo_trace_load(a.trace, p.enc, &p.tr, &err) != 0) {
        tp_enc_destroy(&p.enc);
        demo_trace_free(&p.tr);
        return verb_error("demo", "%s", err.msg);
    }
    uint64_t span = p.tr.t1 - p.tr.t0, gap = span / 50;
    gap = gap < 10000000ull ? 10000000ull : gap > 1000000000ull ? 1000000000ull : gap;
    p.loop_ns = span + gap;
    tp_keypair keys = {{0}, {0}};
    if ((rc = demo_publisher(&a, &keys, &p.pub)) != 0) {
        tp_enc_destroy(&p.enc);
        demo_trace_free(&p.tr);
        return rc;
    }
    const char *ep = tp_pub_endpoint(p.pub);
    if (a.no_tui) {
        char who[TP_ENDPOINT_MAX];
        if (a.listen == NULL)
            snprintf(who, sizeof who, "%ld", (long)getpid());
        else
            snprintf(who, sizeof who, "%s%s", ep, a.key ? " --server-key KEY.pub" : "");
        verb_say("demo", "publishing %s (%zu events, %.3f s a loop) on %s, pid %ld; waiting for a viewer "
                         "(`synctop attach %s`)", a.trace, p.tr.n_ev, (double)p.loop_ns / 1e9, ep, (long)getpid(), who);
        verb_signals saved;
        verb_signals_catch(&saved);
        demo_play(&p, argc, argv, a.trace);
        verb_signals_restore(&saved);
        rc = 0;
    } else {
        pthread_t th;
        demo_thread_args ta = {&p, argc, argv, a.trace};
        if (pthread_create(&th, NULL, demo_thread, &ta) != 0) {
            rc = verb_error("demo", "cannot start the publisher's thread: %s", strerror(errno));
        } else {
            const char *eps[1] = {ep};
            /* Ctrl-C ends the view as q does, so that the publisher sends its last batch. */
            viewer_opts vo = {.ascii = a.ascii, .mono = a.mono, .verb = "demo",
                              .server_key = a.key ? keys.public_key : NULL, .client_key = a.key ? &keys : NULL,
                              .stop = &verb_stop_signal};
            viewer_result vres;
            verb_signals saved;
            verb_signals_catch(&saved);
            rc = verb_viewer_done("demo", viewer_run_live(eps, 1, &vo, &vres), &vres, NULL);
            atomic_store(&p.stop, 1);
            pthread_join(th, NULL);
            verb_signals_restore(&saved);
        }
    }
    if (rc == 0)
        verb_say("demo", "ended: %" PRIu64 " events in %" PRIu64 " batches, %" PRIu64 " whole loop%s played",
                 p.sent_events, p.sent_batches, p.loop, p.loop == 1 ? "" : "s");
    tp_pub_set_linger(p.pub, DEMO_LINGER_MS);
    tp_pub_destroy(&p.pub);
    tp_buf_free(&p.batch);
    tp_enc_destroy(&p.enc);
    demo_trace_free(&p.tr);
    explicit_bzero(&keys, sizeof keys);
    return rc;
}

SYNCTOP_VERB(demo, .name = "demo", .fn = cmd_demo, .synopsis = "demo [--trace FILE] [--no-tui]",
             .summary = "play a sample trace live, as a traced program publishes: no GPU needed", .rank = 15)
