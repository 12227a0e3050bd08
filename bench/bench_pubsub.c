/*
 * End-to-end throughput of the ZeroMQ transport: a publisher process generates the realistic
 * synthetic mix (samples/synth/synth.h), encodes it and publishes it (tp_pub_send, never blocking); a
 * subscriber process receives every batch (tp_sub_recv), opens it (tp_dec_open: checksums and
 * validation of every record), loads its strings and walks every record. The clock runs from the
 * publisher's first batch to the subscriber's END batch (CLOCK_MONOTONIC, one machine).
 *
 * Nothing is retried: a batch the subscriber could not take in time is dropped and reported, so
 * "dropped 0, missed 0" means the subscriber kept up. The publisher's high-water mark is sized to
 * about 256 MiB of batches so that scheduling hiccups do not turn into drops.
 *
 * usage: bench_pubsub [--events N] [--batch B] [--ipc] [--rate EVENTS_PER_S] [--pregen]
 *   default: 20M events for each batch size 4096, 16384 and 65536, over tcp loopback.
 *   --pregen: encode a set of batches before the clock starts and resend them (sequence numbers
 *   rewritten), to separate the transport and the decoder from event generation and encoding.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "synctop/codec.h"
#include "clock.h"
#include "synctop/net.h"
#include "synth.h"

static void sleep_s(double s) {
    if (s <= 0)
        return;
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

typedef struct config {
    uint64_t events;
    size_t batch;
    int ipc;
    uint64_t rate;
    int pregen;
} config;

/* What the publisher tells the subscriber at the end, through a pipe. */
typedef struct pub_report {
    double t_start;
    uint64_t sent, dropped, bytes;
    int failed;
} pub_report;

#define PREGEN_BATCHES 64

static void set_seq(tp_buf *b, uint64_t seq, uint32_t flags) {
    tp_batch_hdr h;
    memcpy(&h, b->data, sizeof h);
    h.seq = seq;
    h.flags = (h.flags & ~(uint32_t)TP_BF_END) | flags;
    memcpy(b->data, &h, sizeof h);
    tp_batch_seal_header(b->data);
}

static void publisher(const config *c, int ep_fd, int report_fd) {
    pub_report rep = {0};
    err_msg err = {{0}};
    size_t est_batch_bytes = c->batch * 56 + 4096;
    size_t hwm = (256u << 20) / est_batch_bytes;
    char ep[64];
    snprintf(ep, sizeof ep, c->ipc ? "ipc:///tmp/bench_pubsub-%ld.sock" : "tcp://127.0.0.1:*",
             (long)getpid());
    tp_pub *pub = tp_pub_new(&(tp_pub_opts){.endpoint = ep, .sndhwm = (int)(hwm < 16 ? 16 : hwm)},
                             &err);
    if (pub == NULL) {
        fprintf(stderr, "publisher: %s\n", err.msg);
        rep.failed = 1;
        if (write(report_fd, &rep, sizeof rep) < 0)
            _exit(1);
        _exit(1);
    }
    tp_pub_set_linger(pub, 30000);
    char line[TP_ENDPOINT_MAX];
    snprintf(line, sizeof line, "%s", tp_pub_endpoint(pub));
    if (write(ep_fd, line, sizeof line) != (ssize_t)sizeof line)
        _exit(1);
    double deadline = cm_now_s() + 10;
    while (tp_pub_poll(pub, NULL) < 1 && cm_now_s() < deadline)
        sleep_s(0.001);

    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 1});
    synth sy;
    synth_init(&sy, 1);
    tp_buf buf = {0};
    tp_buf pre[PREGEN_BATCHES];
    memset(pre, 0, sizeof pre);
    if (c->pregen) {
        /* The first batch carries the metadata and strings; the others only events. */
        for (int i = 0; i < PREGEN_BATCHES; i++) {
            synth_fill(&sy, enc, c->batch);
            tp_enc_finish(enc, &pre[i]);
            tp_enc_delivered(enc, 1);
        }
    }
    uint64_t left = c->events, seq = 0;
    rep.t_start = cm_now_s();
    while (left > 0) {
        size_t n = left < c->batch ? (size_t)left : c->batch;
        left -= n;
        uint32_t flags = left == 0 ? TP_BF_END : 0;
        tp_buf *b = &buf;
        if (c->pregen) {
            /* Batch 0 (metadata) once, then the event-only ones in turn. */
            b = &pre[seq == 0 ? 0 : 1 + (seq - 1) % (PREGEN_BATCHES - 1)];
            set_seq(b, seq, flags);
        } else {
            synth_fill(&sy, enc, n);
            tp_enc_finish_flags(enc, flags, b);
        }
        int rc = tp_pub_send(pub, b->data, b->len);
        if (!c->pregen)
            tp_enc_delivered(enc, rc == 0);
        seq++;
        while (flags && rc == ERR_AGAIN) { /* the END batch must arrive: a new batch each try */
            sleep_s(0.001);
            if (c->pregen) {
                set_seq(b, seq++, TP_BF_END);
            } else {
                tp_enc_finish_flags(enc, TP_BF_END, b);
            }
            rc = tp_pub_send(pub, b->data, b->len);
        }
        if (c->rate > 0)
            sleep_s(rep.t_start + (double)(c->events - left) / (double)c->rate - cm_now_s());
    }
    tp_pub_stats st;
    tp_pub_stats_get(pub, &st);
    rep.sent = st.sent;
    rep.dropped = st.dropped;
    rep.bytes = st.bytes;
    tp_pub_destroy(&pub); /* lingers until the subscriber has it all */
    if (write(report_fd, &rep, sizeof rep) != (ssize_t)sizeof rep)
        _exit(1);
    for (int i = 0; i < PREGEN_BATCHES; i++)
        tp_buf_free(&pre[i]);
    tp_buf_free(&buf);
    tp_enc_destroy(&enc);
    _exit(0);
}

static int run(const config *c) {
    int ep_pipe[2], rep_pipe[2];
    if (pipe(ep_pipe) != 0 || pipe(rep_pipe) != 0)
        return 1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        close(ep_pipe[0]);
        close(rep_pipe[0]);
        publisher(c, ep_pipe[1], rep_pipe[1]);
    }
    close(ep_pipe[1]);
    close(rep_pipe[1]);
    char ep[TP_ENDPOINT_MAX];
    if (read(ep_pipe[0], ep, sizeof ep) != (ssize_t)sizeof ep) {
        fprintf(stderr, "the publisher did not start\n");
        waitpid(pid, NULL, 0);
        return 1;
    }
    err_msg err = {{0}};
    tp_sub *sub = tp_sub_new(&(tp_sub_opts){.rcvhwm = 1000}, &err);
    if (sub == NULL || tp_sub_connect(sub, ep, &err) != 0) {
        fprintf(stderr, "subscriber: %s\n", err.msg);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return 1;
    }
    tp_dec d = {0};
    tp_strtab *strings = tp_strtab_new();
    uint64_t events = 0, batches = 0, bytes = 0, check = 0;
    double t_end = 0, t_last = cm_now_s();
    int status = 0;
    for (;;) {
        tp_sub_msg m;
        int rc = tp_sub_recv(sub, &m, 1000, &err);
        if (rc < 0) {
            fprintf(stderr, "subscriber: %s\n", err.msg);
            status = 1;
            break;
        }
        if (rc == 0) {
            if (cm_now_s() - t_last > 30) {
                fprintf(stderr, "subscriber: nothing for 30 s, giving up\n");
                status = 1;
                break;
            }
            continue;
        }
        t_last = cm_now_s();
        if (tp_dec_open(&d, m.data, m.len, &err) != 0) {
            fprintf(stderr, "subscriber: batch %" PRIu64 " does not decode: %s\n", batches,
                    err.msg);
            status = 1;
            break;
        }
        tp_dec_load_strings(&d, strings);
        const tp_record *r;
        while ((r = tp_dec_next_record(&d)) != NULL)
            check += r->head.kind;
        events += m.hdr.n_events;
        batches++;
        bytes += m.len;
        if (m.hdr.flags & TP_BF_END) {
            t_end = cm_now_s();
            break;
        }
    }
    tp_sub_stats ss;
    tp_sub_stats_get(sub, &ss);
    pub_report rep = {0};
    if (read(rep_pipe[0], &rep, sizeof rep) != (ssize_t)sizeof rep || rep.failed)
        status = 1;
    int wst;
    waitpid(pid, &wst, 0);
    if (status == 0) {
        double t = t_end - rep.t_start;
        printf("pubsub %s batch=%zu%s: %" PRIu64 " events in %.3f s = %.2f Mevents/s, %.0f MB/s, "
               "dropped %" PRIu64 ", missed %" PRIu64 " (%" PRIu64 " batches, %.1f bytes/event)\n",
               c->ipc ? "ipc" : "tcp", c->batch, c->pregen ? " pregen" : "", events, t,
               (double)events / t / 1e6, (double)bytes / t / 1e6, rep.dropped, ss.missed, batches,
               (double)bytes / (double)(events ? events : 1));
        if (rep.dropped > 0)
            printf("  the publisher outran the subscriber (queue of ~256 MiB full): the lossless "
                   "rate is lower; find it with --rate\n");
        fflush(stdout);
        if (check == 0)
            status = 1;
    }
    close(ep_pipe[0]);
    close(rep_pipe[0]);
    tp_dec_free(&d);
    tp_strtab_destroy(&strings);
    tp_sub_destroy(&sub);
    return status;
}

int main(int argc, char **argv) {
    config c = {.events = 20000000};
    size_t batch = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--events") == 0 && i + 1 < argc)
            c.events = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc)
            batch = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--rate") == 0 && i + 1 < argc)
            c.rate = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--ipc") == 0)
            c.ipc = 1;
        else if (strcmp(argv[i], "--pregen") == 0)
            c.pregen = 1;
        else {
            fprintf(stderr, "usage: bench_pubsub [--events N] [--batch B] [--ipc] [--rate R] "
                            "[--pregen]\n");
            return 2;
        }
    }
    if (c.events == 0)
        return 2;
    static const size_t sizes[] = {4096, 16384, 65536};
    int rc = 0;
    for (size_t i = 0; i < 3; i++) {
        c.batch = batch ? batch : sizes[i];
        rc |= run(&c);
        if (batch)
            break;
    }
    return rc;
}
