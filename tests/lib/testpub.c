/*
 * synctop-testpub: a stand-in for the tracer in tests. It publishes a reproducible stream of
 * synthetic batches (synth.h) through the real publisher, so a test can regenerate the same events
 * from the seed and compare. The producer id is SEED + 1. With --producers N it plays N producers
 * on one socket (ids SEED + 1 .. SEED + N, producer i generated from seed SEED + i, rank RANK + i),
 * each sending its own N events, their batches in turn.
 *
 * stdout: a first line `endpoint=E` (the endpoint actually bound, once it is bound) and a final
 * line `sent=N dropped=M events=E subs_dropped=S peers_shut=P` (S subscriptions it dropped, P
 * connections it shut for them). Exit status 0, 1 on failure, 2 on bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "synctop/codec.h"
#include "clock.h"
#include "synctop/net.h"
#include "synth.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: synctop-testpub [--endpoint E] --events N [--batch EVENTS_PER_BATCH]\n"
            "       [--rate EVENTS_PER_SEC] [--seed S] [--wait-subscribers K]\n"
            "       [--curve-key FILE.key] [--insecure] [--sndhwm BATCHES] [--linger-ms MS]\n"
            "       [--persistent-kernel] [--host NAME] [--rank N] [--clock-skew-ns NS]\n"
            "       [--producers N] [--clients DIR|FILE]\n\n"
            "Publishes N synthetic events in batches (default 4096 events; the last batch is\n"
            "flagged END) on E (default: this process's ipc endpoint). --rate 0 (default): as\n"
            "fast as possible. --wait-subscribers K: wait up to 10 s for K subscribers first.\n"
            "--linger-ms: how long to wait at exit for queued batches (default 1000).\n"
            "--persistent-kernel: halfway through, a kernel on a new stream (99) that began\n"
            "with the first event and runs past the last (a persistent NCCL kernel).\n"
            "--host, --rank: what its process record says (default gpu-node-07, rank 0);\n"
            "--clock-skew-ns: every time it sends is that far off (a host whose clock is).\n"
            "The producer id is SEED + 1 (default seed 1). --producers N: N producers on this\n"
            "socket, ids SEED+1..SEED+N, ranks RANK..RANK+N-1, N events each.\n"
            "--clients: with --curve-key, admit only the client keys listed there.\n");
}

static void sleep_s(double s) {
    if (s <= 0)
        return;
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int parse_u64(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-')
        return -1;
    *out = v;
    return 0;
}

typedef struct tpub_args {
    const char *endpoint, *key_path, *host, *clients;
    uint64_t rank;
    long long skew;
    uint64_t events, batch, rate, seed, wait_subs, hwm, linger, n_prod;
    int insecure, persistent;
} tpub_args;

/* 0, 1 for --help, or 2 for a bad command line (usage printed). */
static int parse_args(int argc, char **argv, tpub_args *a) {
    static const struct option longopts[] = {
        {"endpoint", required_argument, NULL, 'e'}, {"events", required_argument, NULL, 'n'},
        {"batch", required_argument, NULL, 'b'},    {"rate", required_argument, NULL, 'r'},
        {"seed", required_argument, NULL, 's'},     {"wait-subscribers", required_argument, NULL, 'w'},
        {"curve-key", required_argument, NULL, 'k'}, {"insecure", no_argument, NULL, 'i'},
        {"sndhwm", required_argument, NULL, 'H'},   {"linger-ms", required_argument, NULL, 'l'},
        {"persistent-kernel", no_argument, NULL, 'P'}, {"help", no_argument, NULL, 'h'},
        {"host", required_argument, NULL, 'o'},      {"rank", required_argument, NULL, 'R'},
        {"clock-skew-ns", required_argument, NULL, 'S'}, {"producers", required_argument, NULL, 'N'},
        {"clients", required_argument, NULL, 'C'},  {NULL, 0, NULL, 0}};
    *a = (tpub_args){.events = UINT64_MAX, .batch = 4096, .seed = 1, .linger = 1000, .n_prod = 1};
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'e': a->endpoint = optarg; break;
        case 'n': bad = parse_u64(optarg, &a->events); break;
        case 'b': bad = parse_u64(optarg, &a->batch) || a->batch == 0 || a->batch > 1000000; break;
        case 'r': bad = parse_u64(optarg, &a->rate); break;
        case 's': bad = parse_u64(optarg, &a->seed); break;
        case 'w': bad = parse_u64(optarg, &a->wait_subs) || a->wait_subs > 100000; break;
        case 'k': a->key_path = optarg; break;
        case 'C': a->clients = optarg; break;
        case 'i': a->insecure = 1; break;
        case 'P': a->persistent = 1; break;
        case 'o': a->host = optarg; break;
        case 'R': bad = parse_u64(optarg, &a->rank) || a->rank > 1000000; break;
        case 'S': {
            char *end;
            errno = 0;
            a->skew = strtoll(optarg, &end, 10);
            bad = errno != 0 || end == optarg || *end != '\0' || a->skew > 1000000000000000LL ||
                  a->skew < -1000000000000000LL;
            break;
        }
        case 'H': bad = parse_u64(optarg, &a->hwm) || a->hwm > 100000000; break;
        case 'l': bad = parse_u64(optarg, &a->linger) || a->linger > 3600000; break;
        case 'N': bad = parse_u64(optarg, &a->n_prod) || a->n_prod == 0 || a->n_prod > 4096; break;
        case 'h': usage(stdout); return 1;
        default: bad = 1;
        }
        if (bad) {
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc || a->events == UINT64_MAX) {
        usage(stderr);
        return 2;
    }
    return 0;
}

static void wait_subscribers(tp_pub *pub, uint64_t wait_subs) {
    double deadline = cm_now_s() + 10.0;
    int n;
    while ((n = tp_pub_poll(pub, NULL)) < (int)wait_subs && cm_now_s() < deadline)
        sleep_s(0.005);
    if (n < (int)wait_subs)
        fprintf(stderr, "synctop-testpub: only %d of %" PRIu64 " subscribers after 10 s\n", n, wait_subs);
}

/* The producers, each sending a.events events in batches, round robin; 0 or 1. */
static int publish(tp_pub *pub, const tpub_args *a, tp_enc **encs, synth *sys, uint64_t *lefts) {
    uint64_t first_ts = sys[0].now;
    tp_buf buf = {0};
    uint64_t sent_events = 0, ended = 0;
    int status = 0;
    double t0 = cm_now_s();
    for (uint64_t i = 0; ended < a->n_prod; i = (i + 1) % a->n_prod) {
        if (lefts[i] == UINT64_MAX)
            continue; /* it sent its last batch */
        tp_enc *enc = encs[i];
        synth *sy = &sys[i];
        uint64_t left = lefts[i];
        int keyframe = 0;
        tp_pub_poll(pub, &keyframe);
        if (keyframe)
            for (uint64_t k = 0; k < a->n_prod; k++)
                tp_enc_keyframe(encs[k]);
        size_t n = left < a->batch ? (size_t)left : (size_t)a->batch;
        synth_fill(sy, enc, n);
        if (a->persistent && i == 0 && left > a->events / 2 && left - n <= a->events / 2) {
            tp_record rec;
            memset(&rec, 0, sizeof rec);
            rec.kernel = (tp_kernel){.kind = TP_K_KERNEL, .device = 0, .stream = 99, .start = first_ts,
                                     .end = sy->now + 3600000000000ull, .correlation = 0,
                                     .name = tp_enc_intern_cstr(enc, "ncclKernel_persistent"),
                                     .grid = {1, 1, 1}, .block = {1, 1, 1}};
            tp_enc_add(enc, &rec);
        }
        left -= n;
        int last = left == 0;
        lefts[i] = last ? UINT64_MAX : left;
        sent_events += n;
        ended += last;
        if (tp_enc_finish_flags(enc, last ? TP_BF_END : 0, &buf) < 0) {
            fprintf(stderr, "synctop-testpub: cannot encode a batch\n");
            status = 1;
            break;
        }
        /* The END batch should reach everyone: it waits up to the linger time for room. */
        int rc = last ? tp_pub_send_wait(pub, buf.data, buf.len, (int)a->linger) : tp_pub_send(pub, buf.data, buf.len);
        /* A subscriber too slow for it lost it; the others have it (and a keyframe follows). */
        tp_enc_delivered(enc, rc == 0 || rc == ERR_AGAIN);
        if (rc != 0 && rc != ERR_AGAIN) {
            fprintf(stderr, "synctop-testpub: send failed: %s\n", err_str(rc));
            status = 1;
            break;
        }
        if (a->rate > 0 && ended < a->n_prod)
            sleep_s(t0 + (double)sent_events / (double)a->rate - cm_now_s());
    }
    tp_buf_free(&buf);
    return status;
}

int main(int argc, char **argv) {
    tpub_args a;
    int pr = parse_args(argc, argv, &a);
    if (pr != 0)
        return pr == 1 ? 0 : 2;
    err_msg err = {{0}};
    tp_keypair kp;
    if (a.key_path != NULL && tp_keypair_load(&kp, a.key_path, &err) < 0) {
        fprintf(stderr, "synctop-testpub: %s\n", err.msg);
        return 1;
    }
    tp_clients *clients = NULL;
    if (a.clients != NULL && (clients = tp_clients_load(a.clients, &err)) == NULL) {
        fprintf(stderr, "synctop-testpub: %s\n", err.msg);
        return 1;
    }
    tp_pub_opts po = {.endpoint = a.endpoint, .sndhwm = (int)a.hwm, .curve = a.key_path != NULL ? &kp : NULL,
                      .insecure = a.insecure, .producer = a.seed + 1, .clients = clients};
    tp_pub *pub = tp_pub_new(&po, &err);
    tp_clients_destroy(&clients);
    if (pub == NULL) {
        fprintf(stderr, "synctop-testpub: %s\n", err.msg);
        return 1;
    }
    tp_pub_set_linger(pub, (int)a.linger);
    printf("endpoint=%s\n", tp_pub_endpoint(pub));
    fflush(stdout);
    if (a.wait_subs > 0)
        wait_subscribers(pub, a.wait_subs);

    tp_enc **encs = calloc(a.n_prod, sizeof *encs);
    synth *sys = calloc(a.n_prod, sizeof *sys);
    uint64_t *lefts = calloc(a.n_prod, sizeof *lefts);
    int status = encs == NULL || sys == NULL || lefts == NULL;
    for (uint64_t i = 0; i < a.n_prod && status == 0; i++) {
        if ((encs[i] = tp_enc_new(&(tp_enc_opts){.producer = a.seed + 1 + i})) == NULL)
            status = 1;
        synth_init(&sys[i], a.seed + i);
        sys[i].host = a.host;
        sys[i].rank = (int32_t)(a.rank + i);
        sys[i].now = (uint64_t)((int64_t)sys[i].now + a.skew);
        lefts[i] = a.events;
    }
    if (status != 0) {
        fprintf(stderr, "synctop-testpub: out of memory\n");
        tp_pub_destroy(&pub);
        return 1;
    }
    status = publish(pub, &a, encs, sys, lefts);
    tp_pub_stats st;
    tp_pub_stats_get(pub, &st);
    for (uint64_t i = 0; i < a.n_prod; i++)
        tp_enc_destroy(&encs[i]);
    free(encs);
    free(sys);
    free(lefts);
    tp_pub_destroy(&pub); /* waits up to --linger-ms for queued batches */
    printf("sent=%" PRIu64 " dropped=%" PRIu64 " events=%" PRIu64 " subs_dropped=%" PRIu64 " peers_shut=%" PRIu64 "\n",
           st.sent, st.dropped, a.events * a.n_prod, st.subs_dropped, st.peers_shut);
    return status;
}
