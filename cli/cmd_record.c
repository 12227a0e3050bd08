/*
 * `synctop record ENDPOINT... -o FILE`: subscribes to one or more publishers and appends what they
 * send to a trace file until Ctrl-C/SIGTERM, until every producer seen has sent its last batch
 * (TP_BF_END), until every ipc publisher went away without it (a program killed outright), or
 * until --duration passes. The file is flushed a few times a second, so a recorder
 * killed outright leaves a file that loses at most what it received in the last moments.
 *
 * On a terminal a progress line is refreshed about four times a second; otherwise only the final
 * summary is printed. Malformed messages are counted and reported, never written.
 *
 * Memory is bounded in bytes: received batches wait for the writer in the recorder's queue (at most
 * --buffer MB), and ZeroMQ holds at most RECORD_RCVHWM more per publisher. A recorder slower than
 * its producers waits when its queue is full; the publishers then drop what it cannot take, which
 * it sees as sequence gaps and counts. At a stop, what was received is written; what reaches the
 * socket within a moment after is taken too, written while the queue has room, else counted as
 * received and not written. The summary says what the file holds and what it lacks.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "synctop/sanitize.h"
#include "clock.h"
#include "live.h"
#include "synctop/file.h"
#include "synctop/net.h"
#include "args.h"
#include "verb.h"

#define RECORD_MAX_ENDPOINTS 64
#define RECORD_TICK_MS 250
#define RECORD_MAX_COMPLAINTS 5 /* malformed messages described on stderr; the rest only counted */
#define RECORD_BUFFER_MB 64     /* --buffer: received batches waiting for the writer, at most */
#define RECORD_WAIT_S 5         /* --wait: no publisher answering after this long is said, exit 1 */
#define RECORD_RCVHWM 16        /* batches ZeroMQ holds per publisher (its high-water mark counts
                                   messages, not bytes: the bytes are bounded by the queue) */
#define RECORD_DRAIN_QUIET_MS 200 /* at a stop: what comes within this of the last batch is taken */
#define RECORD_DRAIN_S 2.0        /* ... for this long at most (a producer at full rate goes on) */

static void record_usage(FILE *out) {
    fprintf(out,
            "usage: synctop record ENDPOINT... -o FILE [--from FILE] [--duration SEC] [--wait SEC] [--producers N]\n"
            "                      [--force] [--server-key KEY [--client-key FILE.key]] [--buffer MB]\n\n"
            "Records what one or more synctop publishers send into a trace file, until Ctrl-C,\n"
            "until every producer seen has finished, or until --duration passes.\n\n"
            "  ENDPOINT          a PID (its default ipc endpoint), HOST:PORT, tcp://..., ipc://...\n"
            "  -o, --output FILE the trace file to write\n"
            "  --from FILE       also the endpoints listed in FILE, one per line (# comments)\n"
            "  --duration SEC    stop after SEC seconds\n"
            "  --wait SEC        give up when no publisher has answered after SEC seconds (default\n"
            "                    %d; 0: wait for ever)\n"
            "  --producers N     stop once N producers have finished (a job of N ranks behind\n"
            "                    relays: the first to finish may come before the last starts)\n"
            "  -f, --force       replace FILE if it exists (otherwise it is never overwritten)\n"
            "  --server-key KEY  the publishers' CURVE public key (a .pub/.key file or the key)\n"
            "  --client-key FILE our own CURVE key pair, for publishers that admit listed clients\n"
            "                    only (default: ~/.config/synctop/client.key when `synctop keygen\n"
            "                    --client` made it)\n"
            "  --buffer MB       received batches waiting to be written, at most (default %d); when\n"
            "                    the disk is slower than the producers, they drop what does not fit,\n"
            "                    and the gaps are counted\n\n"
            "The last line says what the file holds (events, batches, size), the drops, and what was\n"
            "received and not written; a recording that got nothing exits with status 1. Inspect the\n"
            "result with `synctop info FILE`.\n",
            RECORD_WAIT_S, RECORD_BUFFER_MB);
}

/* What the loop keeps between batches. */
typedef struct recorder {
    tp_recorder *rec;
    tp_sub *sub;
    /* Batches received that are not synthetic (as the file counts them), their events, and those
     * of them the writer refused: what the file lacks of them was received and not written. The
     * writer's thread counts refusals, hence the atomics. */
    uint64_t received_batches, received_events;
    _Atomic uint64_t refused_batches, refused_events;
    _Atomic uint64_t malformed; /* refused by the writer; tp_sub counts what it refused itself */
    atomic_int complaints;
    double t0, duration, next_tick, last_t;
    uint64_t last_events;
    int tty;
    uint64_t producers; /* --producers: wait for this many to finish (0: every one seen) */
    double wait;        /* --wait */
} recorder;

/* The batches received and not in the file, nor refused by its writer: how many, and their events. */
static uint64_t unwritten(const recorder *rc, const tp_fwriter_stats *ws, uint64_t *events) {
    uint64_t kept = atomic_load(&rc->refused_batches) + ws->in_file_batches,
             kept_events = atomic_load(&rc->refused_events) + ws->in_file_events;
    *events = rc->received_events > kept_events ? rc->received_events - kept_events : 0;
    return rc->received_batches > kept ? rc->received_batches - kept : 0;
}

/* The progress line (without its leading "\r" and trailing clear) and the final summary: what the
 * file holds (not what was received), and what was received and is not in it. */
static void put_counts(FILE *out, const tp_fwriter_stats *ws, const tp_sub_stats *ss, const recorder *rc) {
    fprintf(out, "%" PRIu64 " events, %" PRIu64 " batches, %.1f MB, drops: %" PRIu64 " missed batches + %" PRIu64
                 " records reported",
            ws->in_file_events, ws->in_file_batches, (double)ws->in_file_bytes / 1e6, ss->missed,
            ws->dropped_records);
    if (ws->dropped_batches)
        fprintf(out, " (+ %" PRIu64 " batches)", ws->dropped_batches);
    uint64_t lost_events, lost = unwritten(rc, ws, &lost_events);
    if (lost)
        fprintf(out, ", %" PRIu64 " batches (%" PRIu64 " events) received and not written", lost, lost_events);
    uint64_t malformed = ss->malformed + atomic_load(&rc->malformed);
    if (malformed)
        fprintf(out, ", %" PRIu64 " malformed messages ignored", malformed);
    if (ss->duplicates)
        fprintf(out, ", %" PRIu64 " batches that came twice (through two relays) written once", ss->duplicates);
}

/* A batch the writer refused (on the writer's thread): counted and skipped. */
static void record_refused_batch(void *ctx, const void *batch, size_t len, const err_msg *why) {
    recorder *rc = ctx;
    tp_batch_hdr h; /* the subscriber checked the header; the writer refused what follows it */
    memset(&h, 0, sizeof h);
    memcpy(&h, batch, len < sizeof h ? len : sizeof h);
    if (!(h.flags & TP_BF_SYNTHETIC)) {
        atomic_fetch_add(&rc->refused_batches, 1);
        atomic_fetch_add(&rc->refused_events, h.n_events);
    }
    atomic_fetch_add(&rc->malformed, 1);
    if (atomic_fetch_add(&rc->complaints, 1) < RECORD_MAX_COMPLAINTS)
        verb_warn("record", "ignored a batch: %s", why->msg);
}

/* Each batch goes to the writer's queue as it came, waiting for room while the queue is full. */
static int record_batch(void *ctx, const tp_sub_msg *m, err_msg *err) {
    recorder *rc = ctx;
    int counted = !(m->hdr.flags & TP_BF_SYNTHETIC);
    rc->received_batches += counted;
    rc->received_events += counted ? m->hdr.n_events : 0;
    int ar = tp_recorder_append(rc->rec, m->data, m->len, err);
    return ar < 0 ? ar : 0;
}

static void record_malformed(void *ctx, const err_msg *err) {
    recorder *rc = ctx;
    if (atomic_fetch_add(&rc->complaints, 1) < RECORD_MAX_COMPLAINTS)
        verb_warn("record", "ignored a message: %s", err->msg);
}

/* After a stop (a signal, the duration): what ZeroMQ holds for each publisher and what is on its
 * way is taken too (a backlog left there would be lost without a count), queued while there is
 * room, else counted as received and not written; until a quiet moment, and since a producer may go
 * on sending, at most as many batches as ZeroMQ holds twice over, for RECORD_DRAIN_S at most. */
static void record_drain(recorder *rc, size_t n_endpoints) {
    double until = cm_now_s() + RECORD_DRAIN_S, last = cm_now_s();
    size_t left = 2 * RECORD_RCVHWM * (n_endpoints > 0 ? n_endpoints : 1);
    while (!tp_recorder_failed(rc->rec) && cm_now_s() < until && left > 0) {
        tp_sub_msg m;
        err_msg err = {{0}};
        int r = tp_sub_recv(rc->sub, &m, RECORD_DRAIN_QUIET_MS, &err);
        if (r == ERR_MALFORMED) {
            record_malformed(rc, &err);
        } else if (r < 0) {
            break;
        } else if (r == 0) {
            if (cm_now_s() - last >= RECORD_DRAIN_QUIET_MS / 1000.0)
                break; /* quiet: nothing more on its way */
            continue;  /* a relay's clock answer or summary */
        } else {
            int counted = !(m.hdr.flags & TP_BF_SYNTHETIC);
            rc->received_batches += counted;
            rc->received_events += counted ? m.hdr.n_events : 0;
            left--;
            if (tp_recorder_offer(rc->rec, m.data, m.len, 0, &err) != 0 && tp_recorder_failed(rc->rec))
                break;
        }
        last = cm_now_s();
    }
}

/* A few times a second: the file is flushed (which bounds what a kill -9 can lose) and, on a
 * terminal, the progress line redrawn; and the duration is checked. */
static int record_tick(void *ctx) {
    recorder *rc = ctx;
    double now = cm_now_s();
    if (rc->duration > 0 && now - rc->t0 >= rc->duration)
        return 1;
    if (rc->producers > 0) {
        tp_sub_stats ss;
        tp_sub_stats_get(rc->sub, &ss);
        if (ss.n_ended >= rc->producers)
            return 1;
    }
    if (now < rc->next_tick)
        return 0;
    err_msg err = {{0}};
    if (tp_recorder_flush(rc->rec, &err) != 0)
        return 1; /* the writer failed: record_follow says why */
    if (rc->tty) {
        tp_fwriter_stats ws;
        tp_sub_stats ss;
        tp_recorder_stats_get(rc->rec, &ws);
        tp_sub_stats_get(rc->sub, &ss);
        /* one line, cut to the terminal's width so that \r redraws it in place */
        char *line = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&line, &len);
        if (m != NULL) {
            fprintf(m, "%.0f events/s, ", (double)(ws.in_file_events - rc->last_events) / (now - rc->last_t));
            put_counts(m, &ws, &ss, rc);
            fclose(m);
            struct winsize w;
            size_t cols = ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 1 ? (size_t)w.ws_col - 1 : 79;
            fprintf(stderr, "\r%.*s\033[K", (int)(len < cols ? len : cols), line);
            fflush(stderr);
            free(line);
        }
        rc->last_events = ws.in_file_events;
        rc->last_t = now;
    }
    rc->next_tick = now + RECORD_TICK_MS / 1000.0;
    return 0;
}

typedef struct record_args {
    const char *out_path, *server_key, *client_key;
    const char *specs[RECORD_MAX_ENDPOINTS];
    int n_specs, force;
    double duration, wait;
    uint64_t producers, buffer_mb;
    int from_file[RECORD_MAX_ENDPOINTS]; /* specs[i] was read from a --from file (malloc'd) */
} record_args;

static void record_args_free(record_args *ra) {
    for (int i = 0; i < ra->n_specs; i++)
        if (ra->from_file[i])
            free((char *)ra->specs[i]);
    ra->n_specs = 0;
}

/* The command line; -1 to go on, else the verb's status. */
static int record_parse(int argc, char **argv, record_args *ra) {
    enum { O_OUT = 1, O_DURATION, O_FORCE, O_KEY, O_PRODUCERS, O_FROM, O_CLIENT_KEY, O_BUFFER, O_WAIT };
    static const arg_opt opts[] = {
        {O_OUT, "--output", "-o", 1},
        {O_FROM, "--from", NULL, 1},
        {O_DURATION, "--duration", NULL, 1},
        {O_WAIT, "--wait", NULL, 1},
        {O_PRODUCERS, "--producers", NULL, 1},
        {O_FORCE, "--force", "-f", 0},
        {O_KEY, "--server-key", NULL, 1},
        {O_CLIENT_KEY, "--client-key", NULL, 1},
        {O_BUFFER, "--buffer", NULL, 1},
    };
    ra->buffer_mb = RECORD_BUFFER_MB;
    ra->wait = RECORD_WAIT_S;
    args p;
    ARGS_INIT(&p, "record", record_usage, opts, argc, argv);
    const char *a;
    for (int id; (id = args_next(&p, &a)) != ARGS_END;) {
        switch (id) {
        case ARGS_HELP: return 0;
        case ARGS_BAD: return EXIT_USAGE;
        case O_OUT: ra->out_path = a; break;
        case O_DURATION:
            if (args_double(&p, "--duration", a, 1e-3, 1e9, &ra->duration))
                return EXIT_USAGE;
            break;
        case O_WAIT:
            if (args_double(&p, "--wait", a, 0, 1e9, &ra->wait))
                return EXIT_USAGE;
            break;
        case O_FORCE: ra->force = 1; break;
        case O_KEY: ra->server_key = a; break;
        case O_CLIENT_KEY: ra->client_key = a; break;
        case O_BUFFER:
            if (args_u64(&p, "--buffer", a, 1, 1u << 16, &ra->buffer_mb))
                return EXIT_USAGE;
            break;
        case O_PRODUCERS:
            if (args_u64(&p, "--producers", a, 1, 1u << 20, &ra->producers))
                return EXIT_USAGE;
            break;
        case O_FROM: {
            int k = args_file_lines(&p, "--from", a, ra->specs + ra->n_specs, RECORD_MAX_ENDPOINTS - ra->n_specs);
            if (k < 0)
                return EXIT_USAGE;
            for (int i = 0; i < k; i++)
                ra->from_file[ra->n_specs++] = 1;
            break;
        }
        default:
            if (ra->n_specs == RECORD_MAX_ENDPOINTS)
                return args_bad(&p, "at most %d endpoints", RECORD_MAX_ENDPOINTS);
            ra->specs[ra->n_specs++] = a;
            break;
        }
    }
    if (ra->n_specs == 0)
        return args_bad(&p, "no endpoint given");
    if (ra->out_path == NULL)
        return args_bad(&p, "no -o FILE given");
    return -1;
}

/* Subscribes to every endpoint, then creates the file: a bad endpoint or key leaves no file
 * behind. 0, or the verb's status with the reason said. */
static int record_open(const record_args *ra, char (*endpoints)[512], tp_sub **sub, tp_recorder **rec,
                       recorder *rc) {
    err_msg err = {{0}};
    for (int i = 0; i < ra->n_specs; i++) {
        if (verb_no_such_pid("record", ra->specs[i]))
            return 1;
        if (tp_endpoint_resolve(ra->specs[i], endpoints[i], sizeof endpoints[i], &err) < 0)
            return verb_error("record", "bad endpoint: %s", err.msg), EXIT_USAGE;
        if (tp_endpoint_host_found(endpoints[i], &err) < 0)
            return verb_error("record", "%s: %s", ra->specs[i], err.msg);
    }
    char key[TP_KEY_Z85_LEN + 1];
    if (ra->server_key != NULL && tp_public_key_resolve(ra->server_key, key, &err) < 0)
        return verb_error("record", "bad --server-key: %s", err.msg);
    tp_keypair mine;
    tp_sub_opts so = {.server_key = ra->server_key ? key : NULL, .rcvhwm = RECORD_RCVHWM};
    int krc = verb_client_key("record", ra->client_key, ra->server_key != NULL, &mine, &so.client_key);
    if (krc != 0)
        return krc;
    *sub = tp_sub_new(&so, &err);
    explicit_bzero(&mine, sizeof mine); /* the socket has it */
    if (*sub == NULL)
        return verb_error("record", "cannot subscribe: %s", err.msg);
    for (int i = 0; i < ra->n_specs; i++) {
        if (tp_sub_connect(*sub, endpoints[i], &err) < 0) {
            tp_sub_destroy(sub);
            return verb_error("record", "cannot connect: %s", err.msg);
        }
    }
    tp_recorder_opts ro = {.flags = ra->force ? TP_FW_OVERWRITE : 0, .queue_bytes = (size_t)ra->buffer_mb << 20,
                           .on_refused = record_refused_batch, .ctx = rc};
    if ((*rec = tp_recorder_open_opts(ra->out_path, &ro, &err)) == NULL) {
        tp_sub_destroy(sub);
        return verb_error("record", "%s%s", err.msg,
                          strstr(err.msg, "already exists") ? " (use --force to replace it)" : "");
    }
    return 0;
}

static void record_refused(void *ctx, const tp_sub *sub) {
    (void)ctx;
    verb_refused_cb("record", sub);
}

static void record_notice(void *ctx, const tp_sub_notice *n) {
    (void)ctx;
    verb_notice("record", n);
}

/* Receives until every producer has ended, the ipc publishers went away, the duration passed or
 * a signal came; returns why, in a few words, and sets *status on an error. */
static const char *record_follow(recorder *rc, const char *const *endpoints, size_t n, int *status) {
    verb_signals sig;
    verb_signals_catch(&sig);
    live_opts lo = {.poll_ms = 50, .stop = &verb_stop_signal, .on_batch = record_batch, .on_tick = record_tick,
                    .on_malformed = record_malformed, .ctx = rc, .endpoints = endpoints, .n_endpoints = n,
                    .on_refused = record_refused, .on_notice = record_notice, .keep_after_end = rc->producers > 0,
                    .wait_s = rc->wait};
    err_msg err = {{0}};
    live_end end = live_follow(rc->sub, &lo, &err);
    verb_signals_restore(&sig); /* a second Ctrl-C ends it at once; the file stays readable */
    if (end == LIVE_STOPPED || end == LIVE_DONE)
        record_drain(rc, n);
    tp_recorder_drain(rc->rec);
    if (rc->tty)
        fputs("\r\033[K", stderr);
    if (tp_recorder_failed(rc->rec)) {
        err_msg why = {{0}};
        tp_recorder_flush(rc->rec, &why); /* returns the failure that stopped it */
        verb_error("record", "cannot write: %s", why.msg);
        *status = 1;
    } else if (end == LIVE_FAILED) {
        verb_error("record", "cannot receive: %s", err.msg);
        *status = 1;
    } else if (end == LIVE_UNANSWERED) {
        verb_say_unanswered("record", endpoints, n, rc->wait);
        *status = 1;
    }
    return end != LIVE_DONE ? live_end_name(end) : rc->producers > 0 && (rc->duration <= 0 || cm_now_s() - rc->t0 < rc->duration)
                                                       ? "the producers asked for finished"
                                                       : "duration reached";
}

/* The hosts' clocks the relays answered with, against this machine's (the file keeps them too, as
 * its last batch: live.h). */
static int cmd_record(int argc, char **argv) {
    record_args ra = {0};
    int status = record_parse(argc, argv, &ra);
    if (status >= 0) {
        record_args_free(&ra);
        return status;
    }
    char endpoints[RECORD_MAX_ENDPOINTS][512];
    tp_sub *sub = NULL;
    tp_recorder *rec = NULL;
    int n_eps = ra.n_specs;
    recorder rc = {.tty = isatty(STDERR_FILENO), .duration = ra.duration, .producers = ra.producers, .wait = ra.wait};
    status = record_open(&ra, endpoints, &sub, &rec, &rc);
    record_args_free(&ra); /* resolved into endpoints */
    if (status != 0)
        return status;
    const char *eps[RECORD_MAX_ENDPOINTS];
    for (int i = 0; i < n_eps; i++)
        eps[i] = endpoints[i];
    rc.rec = rec;
    rc.sub = sub;
    rc.t0 = rc.last_t = cm_now_s();
    rc.next_tick = rc.t0 + RECORD_TICK_MS / 1000.0;
    const char *why = record_follow(&rc, eps, (size_t)n_eps, &status);

    tp_fwriter_stats ws;
    tp_sub_stats ss;
    tp_sub_stats_get(sub, &ss);
    err_msg err = {{0}};
    /* what was received and could not be written is said in the file too: counted once what the
     * writer holds is in the file */
    tp_recorder_flush(rec, &err);
    tp_recorder_drain(rec);
    tp_recorder_stats_get(rec, &ws);
    uint64_t lost_events, lost = unwritten(&rc, &ws, &lost_events);
    if (lost && !tp_recorder_failed(rec) && tp_recorder_add_unwritten(rec, lost, lost_events, &err) != 0)
        verb_warn("record", "cannot note what was not written: %s", err.msg);
    if (tp_recorder_add_clocks(rec, sub, &err) < 0) {
        verb_error("record", "cannot write the hosts' clocks: %s", err.msg);
        status = 1;
    }
    if (tp_recorder_close_stats(&rec, &ws, &err) != 0) {
        verb_error("record", "cannot finish the file: %s", err.msg);
        status = 1;
    }
    if (ws.in_file_batches == 0) { /* an empty trace helps nobody, and would stand in a later one's way */
        if (status == 0)
            verb_error("record", "nothing was recorded: no publisher sent a batch (stopped: %s); no file written",
                       why);
        status = 1;
        unlink(ra.out_path);
    } else {
        fputs("synctop record: wrote ", stderr);
        tp_print_sanitized(stderr, ra.out_path, (size_t)-1);
        fputs(": ", stderr);
        put_counts(stderr, &ws, &ss, &rc);
        fprintf(stderr, "; %zu producer%s; stopped: %s\n", ss.n_producers, ss.n_producers == 1 ? "" : "s",
                status ? "error" : why);
    }
    verb_say_clocks("record", sub);
    tp_sub_destroy(&sub);
    return status;
}

SYNCTOP_VERB(record, .name = "record", .fn = cmd_record,
             .synopsis = "record ENDPOINT... -o FILE", .summary = "record live traces into a trace file",
             .rank = 20)
