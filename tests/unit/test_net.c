/*
 * The ZeroMQ transport (net.h) with real sockets: exact delivery over ipc and tcp, many producers
 * into one subscriber, a stalled subscriber that never blocks the publisher and an exact drop
 * count, CURVE (right key, wrong key, no key; listed and unlisted client keys), the refusal to
 * publish unencrypted beyond loopback, reconnection after a publisher restart, the private socket
 * directory, stale socket files, key files, lists of clients and `synctop keygen`. Publishers run as separate processes (synctop-testpub) where that is
 * what is being proved. All traffic stays on this machine (ipc and 127.0.0.1); timeouts are
 * failure guards only.
 */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <net/if.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <zmq.h>

#include "synctop/codec.h"
#include "synctop/net.h"
#include "flood.h"
#include "synth.h"
#include "task.h"

/* ---- helpers ---- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* A synctop-testpub process: its stdout is read for the endpoint and the final counts. */
typedef struct pubproc {
    pid_t pid;
    FILE *out;
    char endpoint[TP_ENDPOINT_MAX];
    uint64_t sent, dropped, events;
    uint64_t subs_dropped, peers_shut; /* 0 from a publisher that does not say them */
} pubproc;

static void testpub_start(pubproc *p, const char *const *args) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/synctop-testpub", task_bindir());
    const char *argv[32] = {path};
    int n = 1;
    for (; args[n - 1] != NULL && n < 31; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    int fds[2];
    ASSERT_OK(pipe(fds));
    fflush(NULL);
    p->pid = fork();
    ASSERT(p->pid >= 0);
    if (p->pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execv(path, (char *const *)argv);
        fprintf(stderr, "exec %s: %s\n", path, strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    p->out = fdopen(fds[0], "r");
    ASSERT_NOT_NULL(p->out);
    char line[TP_ENDPOINT_MAX + 32];
    if (fgets(line, sizeof line, p->out) == NULL)
        TASK_FAIL_("synctop-testpub printed no endpoint (did it fail to start? see above)");
    line[strcspn(line, "\n")] = '\0';
    ASSERT(strncmp(line, "endpoint=", 9) == 0);
    snprintf(p->endpoint, sizeof p->endpoint, "%s", line + 9);
}

/* Reads the final counts and checks that the publisher exited with status 0. */
static void testpub_finish(pubproc *p) {
    char line[256];
    int got = 0;
    while (fgets(line, sizeof line, p->out) != NULL)
        if (sscanf(line, "sent=%" SCNu64 " dropped=%" SCNu64 " events=%" SCNu64 " subs_dropped=%" SCNu64
                   " peers_shut=%" SCNu64, &p->sent, &p->dropped, &p->events, &p->subs_dropped, &p->peers_shut) >= 3)
            got = 1;
    fclose(p->out);
    int status;
    ASSERT_EQ(waitpid(p->pid, &status, 0), p->pid);
    ASSERT(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);
    ASSERT(got);
}

/* Runs a command, capturing stdout and stderr together; returns its exit status. */
static int run_capture(const char *const *argv, char *out, size_t outlen) {
    int fds[2];
    ASSERT_OK(pipe(fds));
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0;
    ssize_t n;
    while ((n = read(fds[0], out + len, outlen - 1 - len)) > 0)
        len += (size_t)n;
    out[len] = '\0';
    close(fds[0]);
    int status;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* What one producer (a testpub with this seed) must have sent, regenerated from the seed. */
typedef struct expect {
    uint64_t producer;
    synth sy;
    tp_enc *enc; /* only to give synth the same string ids as the publisher's encoder */
    tp_strtab *strings;
    tp_dec dec;
    uint64_t events, batches, missed;
    int ended, new_producer_seen;
} expect;

static void expect_init(expect *x, uint64_t seed) {
    memset(x, 0, sizeof *x);
    x->producer = seed + 1;
    synth_init(&x->sy, seed);
    x->enc = tp_enc_new(NULL);
    ASSERT_NOT_NULL(x->enc);
    synth_meta(&x->sy, x->enc);
    x->strings = tp_strtab_new();
    ASSERT_NOT_NULL(x->strings);
}

static void expect_free(expect *x) {
    tp_enc_destroy(&x->enc);
    tp_strtab_destroy(&x->strings);
    tp_dec_free(&x->dec);
}

/* Decodes one received batch and compares every event with the regenerated stream. */
static void expect_batch(expect *x, const tp_sub_msg *m) {
    err_msg err = {{0}};
    ASSERT_UEQ(m->hdr.producer, x->producer);
    if (tp_dec_open(&x->dec, m->data, m->len, &err) != 0)
        TASK_FAIL_("received batch does not decode: %s", err.msg);
    ASSERT_OK(tp_dec_load_strings(&x->dec, x->strings));
    const tp_record *r;
    while ((r = tp_dec_next_record(&x->dec)) != NULL) {
        uint32_t len;
        if (TP_KIND_IS_META(r->head.kind)) {
            if (r->head.kind == TP_K_PROCESS) {
                const char *host = tp_strtab_get(x->strings, r->process.host, &len);
                ASSERT_NOT_NULL(host);
                ASSERT_STR_EQ(host, "gpu-node-07");
            }
            continue;
        }
        tp_record want;
        synth_next(&x->sy, x->enc, &want);
        ASSERT_EQ(r->head.kind, want.head.kind);
        if (memcmp(r, &want, tp_kind_size(r->head.kind)) != 0)
            TASK_FAIL_("producer %" PRIu64 " event %" PRIu64 " (%s) differs from the one sent",
                       x->producer, x->events, tp_kind_name(r->head.kind));
        if (r->head.kind == TP_K_KERNEL)
            ASSERT_NOT_NULL(tp_strtab_get(x->strings, r->kernel.name, &len));
        x->events++;
    }
    x->batches++;
    x->missed += m->missed;
    if (m->new_producer)
        x->new_producer_seen++;
    if (m->hdr.flags & TP_BF_END)
        x->ended = 1;
}

/* Receives until every expected producer sent its END batch (60 s guard). */
static void receive_all(tp_sub *sub, expect *xs, size_t nx) {
    double deadline = now_s() + 60;
    size_t ended = 0;
    while (ended < nx) {
        tp_sub_msg m;
        err_msg err = {{0}};
        int rc = tp_sub_recv(sub, &m, 500, &err);
        if (rc < 0)
            TASK_FAIL_("tp_sub_recv: %s (%s)", err_str(rc), err.msg);
        if (rc == 0) {
            if (now_s() > deadline)
                TASK_FAIL_("only %zu of %zu producers finished within 60 s", ended, nx);
            continue;
        }
        expect *x = NULL;
        for (size_t i = 0; i < nx; i++)
            if (xs[i].producer == m.hdr.producer)
                x = &xs[i];
        if (x == NULL)
            TASK_FAIL_("batch from unknown producer %" PRIu64, m.hdr.producer);
        ASSERT(!x->ended);
        expect_batch(x, &m);
        ended += (size_t)x->ended;
    }
}

static tp_sub *sub_new(const char *server_key) {
    err_msg err = {{0}};
    tp_sub *sub = tp_sub_new(&(tp_sub_opts){.server_key = server_key}, &err);
    if (sub == NULL)
        TASK_FAIL_("tp_sub_new: %s", err.msg);
    return sub;
}

static void sub_connect(tp_sub *sub, const char *endpoint) {
    err_msg err = {{0}};
    if (tp_sub_connect(sub, endpoint, &err) != 0)
        TASK_FAIL_("tp_sub_connect %s: %s", endpoint, err.msg);
}

static tp_pub *pub_new(const tp_pub_opts *o) {
    err_msg err = {{0}};
    tp_pub *pub = tp_pub_new(o, &err);
    if (pub == NULL)
        TASK_FAIL_("tp_pub_new: %s", err.msg);
    return pub;
}

static void wait_subscribers(tp_pub *pub, int n) {
    double deadline = now_s() + 20;
    while (tp_pub_poll(pub, NULL) < n) {
        if (now_s() > deadline)
            TASK_FAIL_("only %d of %d subscribers joined within 20 s", tp_pub_poll(pub, NULL), n);
        sleep_ms(5);
    }
}

static const char *ipc_endpoint(const char *name) {
    static char ep[TP_ENDPOINT_MAX];
    snprintf(ep, sizeof ep, "ipc://%s", task_path(name));
    return ep;
}

/* The test's own socket directory, through XDG_RUNTIME_DIR (inherited by children). */
static const char *use_private_runtime_dir(void) {
    static char xdg[PATH_MAX];
    snprintf(xdg, sizeof xdg, "%s", task_path("xdg"));
    ASSERT_OK(mkdir(xdg, 0700));
    ASSERT_OK(setenv("XDG_RUNTIME_DIR", xdg, 1));
    return xdg;
}

/* ---- pub/sub delivery ---- */

static void exact_delivery(const char *endpoint) {
    tp_sub *sub = sub_new(NULL);
    pubproc p;
    testpub_start(&p, (const char *[]){"--endpoint", endpoint, "--events", "100000", "--seed", "7",
                                       "--wait-subscribers", "1", NULL});
    sub_connect(sub, p.endpoint);
    expect x;
    expect_init(&x, 7);
    receive_all(sub, &x, 1);
    testpub_finish(&p);
    ASSERT_UEQ(x.events, 100000);
    ASSERT_UEQ(p.events, 100000);
    ASSERT_UEQ(p.dropped, 0);
    ASSERT_UEQ(x.batches, p.sent);
    ASSERT_UEQ(x.batches, (100000 + 4095) / 4096);
    ASSERT_UEQ(x.missed, 0);
    ASSERT_EQ(x.new_producer_seen, 1);
    tp_sub_stats st;
    tp_sub_stats_get(sub, &st);
    ASSERT_UEQ(st.received, p.sent);
    ASSERT_UEQ(st.malformed, 0);
    ASSERT_EQ(st.n_producers, 1);
    tp_sub_producer pr;
    ASSERT_OK(tp_sub_producer_get(sub, 0, &pr));
    ASSERT_UEQ(pr.producer, 8);
    ASSERT_UEQ(pr.received, p.sent);
    ASSERT_UEQ(pr.last_seq, p.sent - 1);
    ASSERT_EQ(tp_sub_producer_get(sub, 1, &pr), ERR_INVAL);
    expect_free(&x);
    tp_sub_destroy(&sub);
    tp_sub_destroy(&sub); /* twice is harmless */
    ASSERT_NULL(sub);
}

TEST(pubsub_ipc_exact_content) {
    exact_delivery(ipc_endpoint("pub.sock"));
    /* The publisher removed its socket file on exit. */
    struct stat st;
    ASSERT(stat(task_path("pub.sock"), &st) != 0);
}

TEST(pubsub_tcp_loopback_exact_content) { exact_delivery("tcp://127.0.0.1:*"); }

TEST(many_publishers_one_subscriber) {
    enum { N = 8 };
    tp_sub *sub = sub_new(NULL);
    pubproc p[N];
    expect x[N];
    for (int i = 0; i < N; i++) {
        char seed[16];
        snprintf(seed, sizeof seed, "%d", 100 + i);
        /* Half over tcp, half over ipc, small batches so that they interleave. */
        char ipc[64];
        snprintf(ipc, sizeof ipc, "p%d.sock", i);
        const char *ep = i % 2 ? "tcp://127.0.0.1:*" : ipc_endpoint(ipc);
        testpub_start(&p[i], (const char *[]){"--endpoint", ep, "--events", "30000", "--batch",
                                              "1000", "--seed", seed, "--wait-subscribers", "1",
                                              NULL});
        sub_connect(sub, p[i].endpoint);
        expect_init(&x[i], 100 + (uint64_t)i);
    }
    receive_all(sub, x, N);
    uint64_t total = 0;
    for (int i = 0; i < N; i++) {
        testpub_finish(&p[i]);
        ASSERT_UEQ(p[i].dropped, 0);
        ASSERT_UEQ(x[i].batches, p[i].sent);
        ASSERT_UEQ(x[i].events, 30000);
        ASSERT_UEQ(x[i].missed, 0);
        ASSERT_EQ(x[i].new_producer_seen, 1);
        total += x[i].batches;
        expect_free(&x[i]);
    }
    tp_sub_stats st;
    tp_sub_stats_get(sub, &st);
    ASSERT_EQ(st.n_producers, N);
    ASSERT_UEQ(st.received, total);
    ASSERT_UEQ(st.missed, 0);
    for (size_t i = 0; i < N; i++) {
        tp_sub_producer pr;
        ASSERT_OK(tp_sub_producer_get(sub, i, &pr));
        ASSERT(pr.producer >= 101 && pr.producer <= 100 + N);
        ASSERT_UEQ(pr.received, p[pr.producer - 101].sent);
    }
    tp_sub_destroy(&sub);
}

/* Polls the publisher until its drop count reaches want (the subscribers' reports have arrived);
 * returns whether a keyframe was asked for meanwhile. */
static int wait_reported(tp_pub *pub, uint64_t want) {
    double deadline = now_s() + 20;
    int any = 0;
    tp_pub_stats ps;
    for (;;) {
        int kf = 0;
        tp_pub_poll(pub, &kf);
        any |= kf;
        tp_pub_stats_get(pub, &ps);
        if (ps.dropped >= want)
            return any;
        if (now_s() > deadline)
            TASK_FAIL_("the publisher counts %" PRIu64 " dropped batches after 20 s, not %" PRIu64, ps.dropped, want);
        sleep_ms(2);
    }
}

/* A subscriber that is connected but never reads must not slow the publisher, and every batch it
 * could not take is counted: by itself (its sequence gaps) and, once it reports them, by the
 * publisher: dropped == sent - received. */
TEST(stalled_subscriber_never_blocks_and_drops_are_exact) {
    tp_pub *pub = pub_new(&(tp_pub_opts){.endpoint = ipc_endpoint("stall.sock"), .sndhwm = 4});
    err_msg err = {{0}};
    tp_sub *sub = tp_sub_new(&(tp_sub_opts){.rcvhwm = 4}, &err);
    ASSERT_NOT_NULL(sub);
    sub_connect(sub, tp_pub_endpoint(pub));
    wait_subscribers(pub, 1);

    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 77});
    synth sy;
    synth_init(&sy, 77);
    tp_buf b = {0};
    enum { N = 600 };
    double t0 = now_s();
    int full = 0;
    for (int i = 0; i < N; i++) {
        synth_fill(&sy, enc, 1024);
        ASSERT_OK(tp_enc_finish(enc, &b));
        int rc = tp_pub_send(pub, b.data, b.len);
        ASSERT(rc == 0 || rc == ERR_AGAIN);
        full += rc == ERR_AGAIN;
        tp_enc_delivered(enc, 1);
    }
    double took = now_s() - t0;
    tp_pub_stats ps;
    tp_pub_stats_get(pub, &ps);
    fprintf(stderr, "%d batches to a stalled subscriber in %.3f s (its queue found full %d times)\n", N, took, full);
    ASSERT_UEQ(ps.sent, N);
    ASSERT_GT(full, 0);
    ASSERT_UEQ(ps.dropped, 0); /* nobody has reported anything yet */

    /* Now read what was queued: a few batches (high-water marks of 4 plus socket buffers). */
    uint64_t received = 0, missed = 0;
    tp_sub_msg m;
    int rc;
    while ((rc = tp_sub_recv(sub, &m, 300, &err)) == 1) {
        received++;
        missed += m.missed;
    }
    ASSERT_EQ(rc, 0);
    ASSERT_LT(received, N / 2);
    /* One more batch, waiting until the queue has room, shows the gap of any drop at the end. */
    ASSERT_OK(tp_enc_finish(enc, &b));
    ASSERT_OK(tp_pub_send_wait(pub, b.data, b.len, 20000));
    ASSERT_EQ(tp_sub_recv(sub, &m, 20000, &err), 1);
    ASSERT_UEQ(m.hdr.seq, N);
    received++;
    missed += m.missed;
    ASSERT_UEQ(received + missed, N + 1);
    ASSERT_EQ(tp_sub_recv(sub, &m, 200, &err), 0); /* nothing else was queued */
    /* its reports reach the publisher, which then wants a keyframe for it */
    ASSERT_EQ(wait_reported(pub, missed), 1);
    tp_pub_stats_get(pub, &ps);
    ASSERT_UEQ(ps.sent, N + 1);
    ASSERT_UEQ(ps.dropped, missed);
    ASSERT_UEQ(ps.sent - ps.dropped, received);
    tp_sub_stats ss;
    tp_sub_stats_get(sub, &ss);
    ASSERT_UEQ(ss.missed, ps.dropped);
    ASSERT_UEQ(ss.received, received);
    tp_buf_free(&b);
    tp_enc_destroy(&enc);
    tp_sub_destroy(&sub);
    tp_pub_destroy(&pub);
    tp_pub_destroy(&pub);
    ASSERT_NULL(pub);
}

/* A subscriber that reads everything as it comes, on its own thread, until the END batch. */
typedef struct reader {
    tp_sub *sub;
    atomic_uint_fast64_t received, missed;
    atomic_int ended, stop;
} reader;

static void *reader_main(void *arg) {
    reader *r = arg;
    err_msg err = {{0}};
    while (!atomic_load(&r->ended) && !atomic_load(&r->stop)) {
        tp_sub_msg m;
        if (tp_sub_recv(r->sub, &m, 50, &err) != 1)
            continue;
        atomic_fetch_add(&r->missed, m.missed);
        atomic_fetch_add(&r->received, 1);
        if (m.hdr.flags & TP_BF_END)
            atomic_store(&r->ended, 1);
    }
    return NULL;
}

/* One subscriber stalls, another keeps up: only the stalled one loses batches. The healthy one gets
 * every batch and the end; the stalled one's sequence gaps, reported, are the publisher's drop
 * count; and it is sent a keyframe once it can take one again. */
TEST(stalled_subscriber_does_not_starve_a_healthy_one) {
    tp_pub *pub = pub_new(&(tp_pub_opts){.endpoint = ipc_endpoint("two.sock"), .sndhwm = 4});
    err_msg err = {{0}};
    tp_sub *stalled = tp_sub_new(&(tp_sub_opts){.rcvhwm = 4}, &err);
    ASSERT_NOT_NULL(stalled);
    reader h = {.sub = sub_new(NULL)};
    /* The healthy one first, alone: the publisher counts connections once any subscription has come,
     * so only with one connection does the count say that its subscription has arrived (a batch
     * sent before it would be lost to it, and the loop below waits for every batch). */
    sub_connect(h.sub, tp_pub_endpoint(pub));
    wait_subscribers(pub, 1);
    sub_connect(stalled, tp_pub_endpoint(pub));
    wait_subscribers(pub, 2);
    pthread_t th;
    ASSERT_OK(pthread_create(&th, NULL, reader_main, &h));

    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 78});
    synth sy;
    synth_init(&sy, 78);
    tp_buf b = {0};
    enum { N = 3000 };
    for (uint64_t i = 0; i < N; i++) {
        /* as the tracer does: read the notices (and libzmq's news of what was read) first */
        tp_pub_poll(pub, NULL);
        synth_fill(&sy, enc, 256);
        ASSERT_OK(tp_enc_finish_flags(enc, i + 1 == N ? TP_BF_END : 0, &b));
        int rc = tp_pub_send(pub, b.data, b.len);
        ASSERT(rc == 0 || rc == ERR_AGAIN);
        tp_enc_delivered(enc, 1);
        /* the healthy subscriber keeps up: its queue never fills */
        double deadline = now_s() + 20;
        while (atomic_load(&h.received) < i + 1) {
            if (now_s() > deadline) {
                atomic_store(&h.stop, 1);
                pthread_join(th, NULL);
                TASK_FAIL_("the healthy subscriber got %" PRIu64 " of %" PRIu64 " batches: the stalled one starved it",
                           (uint64_t)atomic_load(&h.received), i + 1);
            }
            sleep_ms(0);
            sched_yield();
        }
    }
    pthread_join(th, NULL);
    ASSERT_EQ(atomic_load(&h.ended), 1);
    ASSERT_UEQ(atomic_load(&h.received), N);
    ASSERT_UEQ(atomic_load(&h.missed), 0);
    tp_pub_stats ps;
    tp_pub_stats_get(pub, &ps);
    ASSERT_UEQ(ps.sent, N);

    /* The stalled subscriber reads what was queued for it... */
    uint64_t got = 0, missed = 0;
    tp_sub_msg m;
    int rc;
    while ((rc = tp_sub_recv(stalled, &m, 300, &err)) == 1) {
        got++;
        missed += m.missed;
    }
    ASSERT_EQ(rc, 0);
    ASSERT_LT(got, N / 2);
    /* ...the next batch shows it the rest of its gap, which it reports... */
    synth_fill(&sy, enc, 16);
    ASSERT_OK(tp_enc_finish(enc, &b));
    ASSERT_OK(tp_pub_send_wait(pub, b.data, b.len, 20000));
    tp_enc_delivered(enc, 1);
    ASSERT_EQ(tp_sub_recv(stalled, &m, 20000, &err), 1);
    ASSERT_UEQ(m.hdr.seq, N);
    got++;
    missed += m.missed;
    ASSERT_UEQ(got + missed, N + 1);
    fprintf(stderr, "%d batches: the stalled subscriber got %" PRIu64 " and lost %" PRIu64 "\n", N, got, missed);
    /* ...the publisher counts exactly that and asks for a keyframe, which reaches it. */
    ASSERT_EQ(wait_reported(pub, missed), 1);
    tp_pub_stats_get(pub, &ps);
    ASSERT_UEQ(ps.dropped, missed);
    tp_enc_keyframe(enc);
    synth_fill(&sy, enc, 16);
    ASSERT_OK(tp_enc_finish(enc, &b));
    ASSERT_OK(tp_pub_send_wait(pub, b.data, b.len, 20000));
    ASSERT_EQ(tp_sub_recv(stalled, &m, 20000, &err), 1);
    ASSERT(m.hdr.flags & TP_BF_KEYFRAME);
    ASSERT_UEQ(m.hdr.seq, N + 1);
    ASSERT_UEQ(m.missed, 0);
    tp_sub_stats ss;
    tp_sub_stats_get(stalled, &ss);
    ASSERT_UEQ(ss.missed, ps.dropped);
    /* the healthy one lost nothing and reported nothing: the count is the stalled one's alone */
    tp_sub_stats_get(h.sub, &ss);
    ASSERT_UEQ(ss.missed, 0);

    tp_buf_free(&b);
    tp_enc_destroy(&enc);
    tp_sub_destroy(&stalled);
    tp_sub_destroy(&h.sub);
    tp_pub_destroy(&pub);
}

/* tp_pub_poll follows arrivals and departures; *joined says when someone new came. */
/* The count comes from the connections, the join from the subscription, which may arrive before or
 * after its connection is counted: each wait below is for both. A subscriber's one join is said
 * once, and a subscriber leaving is no join. */
static int wait_count_and_join(tp_pub *pub, int want, double deadline) {
    int n = -1, joined = 0, any = 0;
    while ((n != want || !any) && now_s() < deadline) {
        n = tp_pub_poll(pub, &joined);
        any |= joined;
        if (n != want || !any)
            sleep_ms(2);
    }
    return n == want && any;
}

TEST(pub_counts_subscribers_and_reports_joins) {
    tp_pub *pub = pub_new(&(tp_pub_opts){.endpoint = ipc_endpoint("count.sock")});
    int joined = -1;
    ASSERT_EQ(tp_pub_poll(pub, &joined), 0);
    ASSERT_EQ(joined, 0);
    double deadline = now_s() + 20;
    tp_sub *a = sub_new(NULL), *b = sub_new(NULL);
    sub_connect(a, tp_pub_endpoint(pub));
    ASSERT(wait_count_and_join(pub, 1, deadline));
    ASSERT_EQ(tp_pub_poll(pub, &joined), 1);
    ASSERT_EQ(joined, 0); /* its join was said once */
    sub_connect(b, tp_pub_endpoint(pub));
    ASSERT(wait_count_and_join(pub, 2, deadline));
    tp_sub_destroy(&a);
    int n;
    while ((n = tp_pub_poll(pub, &joined)) != 1 && now_s() < deadline) {
        ASSERT_EQ(joined, 0); /* a leaving subscriber is no join */
        sleep_ms(2);
    }
    ASSERT_EQ(n, 1);
    tp_pub_stats st;
    tp_pub_stats_get(pub, &st);
    ASSERT_EQ(st.subscribers, 1);
    a = sub_new(NULL);
    sub_connect(a, tp_pub_endpoint(pub));
    ASSERT(wait_count_and_join(pub, 2, deadline));
    tp_sub_destroy(&a);
    tp_sub_destroy(&b);
    while ((n = tp_pub_poll(pub, NULL)) != 0 && now_s() < deadline)
        sleep_ms(2);
    ASSERT_EQ(n, 0);
    tp_pub_destroy(&pub);
}

/* Sequence gaps, batches a recorder made (ignored), a producer that ends and one that starts over. */
TEST(sub_counts_gaps_ignores_synthetic_and_sees_restarts) {
    tp_pub *pub = pub_new(&(tp_pub_opts){.endpoint = ipc_endpoint("gaps.sock")});
    tp_sub *sub = sub_new(NULL);
    sub_connect(sub, tp_pub_endpoint(pub));
    wait_subscribers(pub, 1);
    err_msg err = {{0}};
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 5});
    tp_buf b = {0};
    tp_sub_msg m;
#define SEND_AND_RECV()                                                                      \
    do {                                                                                     \
        ASSERT_OK(tp_pub_send(pub, b.data, b.len));                                          \
        ASSERT_EQ(tp_sub_recv(sub, &m, 10000, &err), 1);                                     \
    } while (0)
    ASSERT_OK(tp_enc_finish(enc, &b)); /* seq 0 */
    SEND_AND_RECV();
    ASSERT_EQ(m.new_producer, 1);
    ASSERT_UEQ(m.missed, 0);
    ASSERT_OK(tp_enc_finish(enc, &b)); /* seq 1, lost on the way */
    ASSERT_OK(tp_enc_finish(enc, &b)); /* seq 2, lost */
    ASSERT_OK(tp_enc_finish(enc, &b)); /* seq 3 */
    SEND_AND_RECV();
    ASSERT_EQ(m.new_producer, 0);
    ASSERT_UEQ(m.missed, 2);
    /* A recorder's synthetic batch with an unrelated sequence number is not a gap. */
    tp_batch_hdr h;
    memcpy(&h, b.data, sizeof h);
    h.flags |= TP_BF_SYNTHETIC;
    h.seq = 1000;
    memcpy(b.data, &h, sizeof h);
    tp_batch_seal_header(b.data);
    SEND_AND_RECV();
    ASSERT_UEQ(m.missed, 0);
    ASSERT(m.hdr.flags & TP_BF_SYNTHETIC);
    ASSERT_EQ(tp_sub_all_ended(sub), 0);
    ASSERT_OK(tp_enc_finish_flags(enc, TP_BF_END, &b)); /* seq 4: its last */
    SEND_AND_RECV();
    ASSERT_UEQ(m.hdr.seq, 4);
    ASSERT_UEQ(m.missed, 0);
    ASSERT_EQ(tp_sub_all_ended(sub), 1);
    /* The same producer id starting over at seq 0: a new life, not a gap, and not ended. Its batch
     * differs from the first one's (a byte-identical batch of the same seq would be a copy). */
    tp_enc_destroy(&enc);
    enc = tp_enc_new(&(tp_enc_opts){.producer = 5});
    tp_record rec;
    memset(&rec, 0, sizeof rec);
    rec.clock = (tp_clock){.kind = TP_K_CLOCK, .device = TP_NO_DEVICE, .trace_ns = 1, .realtime_ns = 1, .monotonic_ns = 1};
    ASSERT_OK(tp_enc_add(enc, &rec));
    ASSERT_OK(tp_enc_finish(enc, &b));
    SEND_AND_RECV();
    ASSERT_EQ(m.new_producer, 1);
    ASSERT_UEQ(m.missed, 0);
    ASSERT_EQ(tp_sub_all_ended(sub), 0);
#undef SEND_AND_RECV
    tp_sub_stats st;
    tp_sub_stats_get(sub, &st);
    ASSERT_UEQ(st.received, 5);
    ASSERT_UEQ(st.missed, 2);
    ASSERT_EQ(st.n_producers, 1);
    tp_sub_producer pr;
    ASSERT_OK(tp_sub_producer_get(sub, 0, &pr));
    ASSERT_UEQ(pr.producer, 5);
    ASSERT_UEQ(pr.missed, 2);
    ASSERT_UEQ(pr.received, 5);
    ASSERT_UEQ(pr.last_seq, 0);
    ASSERT_EQ(pr.ended, 0);
    ASSERT_EQ(st.n_ended, 0);
    tp_buf_free(&b);
    tp_enc_destroy(&enc);
    tp_sub_destroy(&sub);
    tp_pub_destroy(&pub);
}

/* A raw XPUB socket, so that the test sends exactly what it wants once the subscriber is in. */
static void *raw_xpub(void *ctx, const char *ep) {
    void *x = zmq_socket(ctx, ZMQ_XPUB);
    ASSERT_NOT_NULL(x);
    int v = 100000;
    ASSERT_OK(zmq_setsockopt(x, ZMQ_SNDHWM, &v, sizeof v));
    v = 0;
    ASSERT_OK(zmq_setsockopt(x, ZMQ_LINGER, &v, sizeof v));
    v = 10000;
    ASSERT_OK(zmq_setsockopt(x, ZMQ_RCVTIMEO, &v, sizeof v));
    ASSERT_OK(zmq_bind(x, ep));
    return x;
}

/* Waits for the subscriber's subscription to batches ("B"). */
static void raw_wait_subscription(void *x) {
    uint8_t note[32];
    int n;
    while ((n = zmq_recv(x, note, sizeof note, 0)) != 2 || note[1] != 'B')
        ASSERT_GT(n, 0);
    ASSERT_EQ(note[0], 1);
}

/* Sends one frame under the batch topic of producer. */
static void raw_send_topic(void *x, uint64_t producer) {
    uint8_t t[9] = {'B'};
    for (int k = 0; k < 8; k++)
        t[1 + k] = (uint8_t)(producer >> (8 * k));
    ASSERT_EQ(zmq_send(x, t, sizeof t, ZMQ_SNDMORE), (int)sizeof t);
}

TEST(malformed_messages_counted_and_skipped) {
    void *ctx = zmq_ctx_new();
    const char *ep = ipc_endpoint("raw.sock");
    void *x = raw_xpub(ctx, ep);
    tp_sub *sub = sub_new(NULL);
    sub_connect(sub, ep);
    raw_wait_subscription(x);

    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 9});
    tp_buf b = {0};
    synth sy;
    synth_init(&sy, 9);
    synth_fill(&sy, enc, 10);
    ASSERT_OK(tp_enc_finish(enc, &b));
    uint8_t bad[256];
    memcpy(bad, b.data, TP_BATCH_HDR_SIZE);
    bad[20] ^= 1; /* header checksum no longer matches */
    raw_send_topic(x, 9);
    ASSERT_EQ(zmq_send(x, "hello", 5, 0), 5);
    raw_send_topic(x, 9);
    ASSERT_EQ(zmq_send(x, bad, TP_BATCH_HDR_SIZE, 0), TP_BATCH_HDR_SIZE);
    raw_send_topic(x, 9);
    ASSERT_EQ(zmq_send(x, b.data, b.len, ZMQ_SNDMORE), (int)b.len);
    ASSERT_EQ(zmq_send(x, "x", 1, 0), 1);
    uint8_t lone[9] = {'B', 9}; /* a topic frame alone */
    ASSERT_EQ(zmq_send(x, lone, sizeof lone, 0), (int)sizeof lone);
    raw_send_topic(x, 9); /* a topic and a body too short for a batch */
    ASSERT_EQ(zmq_send(x, "B", 1, 0), 1);
    raw_send_topic(x, 10); /* the batch of producer 9 under producer 10's topic */
    ASSERT_EQ(zmq_send(x, b.data, b.len, 0), (int)b.len);
    ASSERT_OK(tp_buf_append(&b, "!", 1)); /* one byte more than the batch */
    raw_send_topic(x, 9);
    ASSERT_EQ(zmq_send(x, b.data, b.len, 0), (int)b.len);
    raw_send_topic(x, 9);
    ASSERT_EQ(zmq_send(x, b.data, b.len - 1, 0), (int)b.len - 1);

    tp_sub_msg m;
    for (int i = 0; i < 7; i++) {
        err_msg err = {{0}};
        ASSERT_EQ(tp_sub_recv(sub, &m, 10000, &err), ERR_MALFORMED);
        ASSERT_STR_CONTAINS(err.msg, "not a synctop batch");
        fprintf(stderr, "  %s\n", err.msg);
    }
    err_msg err = {{0}};
    ASSERT_EQ(tp_sub_recv(sub, &m, 10000, &err), 1);
    ASSERT_EQ(m.len, b.len - 1);
    ASSERT_UEQ(m.hdr.producer, 9);
    tp_dec d = {0};
    ASSERT_OK(tp_dec_open(&d, m.data, m.len, &err));
    tp_dec_free(&d);
    tp_sub_stats st;
    tp_sub_stats_get(sub, &st);
    ASSERT_UEQ(st.malformed, 7);
    ASSERT_UEQ(st.received, 1);
    tp_buf_free(&b);
    tp_enc_destroy(&enc);
    tp_sub_destroy(&sub);
    zmq_close(x);
    zmq_ctx_term(ctx);
}

/* A summary-only subscriber connected to a bare XPUB socket on a fresh ipc endpoint, once its
 * subscription to summaries ("S") has arrived there. */
static tp_sub *summary_sub_on(void *ctx, const char *name, void **xpub) {
    const char *ep = ipc_endpoint(name);
    void *x = raw_xpub(ctx, ep);
    err_msg err = {{0}};
    tp_sub *sub = tp_sub_new(&(tp_sub_opts){.summaries = 1}, &err);
    ASSERT_NOT_NULL(sub);
    sub_connect(sub, ep);
    uint8_t note[32];
    int n;
    while ((n = zmq_recv(x, note, sizeof note, 0)) != 2 || note[1] != 'S')
        ASSERT_GT(n, 0);
    *xpub = x;
    return sub;
}

/* Summaries come from whoever is upstream, so each is checked before it counts: one under another
 * producer's topic, a bad magic, a short one, a newer version, busy time longer than its span on
 * its one device, a host name that is not printable and one that is not NUL-padded are counted
 * as malformed and dropped; a sound one is taken whole. */
TEST(malformed_summaries_counted_and_dropped) {
    void *ctx = zmq_ctx_new(), *x;
    tp_sub *sub = summary_sub_on(ctx, "sums.sock", &x);
    err_msg err = {{0}};
    tp_summary good = {.producer = 77, .relay = 5, .start_ns = 1700000000000000000ull, .interval_ns = 1000000000,
                       .t_min = 1000, .t_max = 2000, .busy_ns = 600, .blocked_ns = 300, .events = 12, .batches = 2,
                       .missed = 1, .drops = 4, .pid = 99, .rank = 3, .world = 8, .devices = 1, .host = "node-a"};
    uint8_t w[TP_SUMMARY_SIZE + 1];
    uint8_t t77[9] = {'S', 77}, t78[9] = {'S', 78};
#define SEND(T, BODY, LEN)                                                                          \
    do {                                                                                           \
        ASSERT_EQ(zmq_send(x, (T), 9, ZMQ_SNDMORE), 9);                                            \
        ASSERT_EQ(zmq_send(x, (BODY), (LEN), 0), (int)(LEN));                                      \
    } while (0)
    tp_summary_encode(&good, w);
    SEND(t78, w, TP_SUMMARY_SIZE); /* another producer's topic */
    w[0] ^= 1;
    SEND(t77, w, TP_SUMMARY_SIZE); /* magic */
    w[0] ^= 1;
    SEND(t77, w, TP_SUMMARY_SIZE - 1); /* short */
    w[4] = 2;
    SEND(t77, w, TP_SUMMARY_SIZE); /* version 2 */
    w[4] = 1;
    tp_summary bad = good;
    bad.busy_ns = 1001;
    tp_summary_encode(&bad, w);
    SEND(t77, w, TP_SUMMARY_SIZE); /* busy beyond the span */
    tp_summary_encode(&good, w);
    w[8 + 96 + 16 + 2] = 0x07;
    SEND(t77, w, TP_SUMMARY_SIZE); /* host: a control byte */
    tp_summary_encode(&good, w);
    w[8 + 96 + 16 + 40] = 'x';
    SEND(t77, w, TP_SUMMARY_SIZE); /* host: not NUL-padded */
    tp_summary_encode(&good, w);
    SEND(t77, w, TP_SUMMARY_SIZE);
#undef SEND
    tp_sub_stats st = {0};
    for (int i = 0; i < 200 && st.summaries + st.malformed < 8; i++) {
        tp_sub_msg m;
        ASSERT_LE(tp_sub_recv(sub, &m, 50, &err), 0);
        tp_sub_stats_get(sub, &st);
    }
    ASSERT_UEQ(st.malformed, 7);
    ASSERT_UEQ(st.summaries, 1);
    ASSERT_UEQ(st.received, 0);
    ASSERT_EQ(tp_sub_summary_count(sub), 1);
    tp_sub_summary got;
    ASSERT_OK(tp_sub_summary_get(sub, 0, &got));
    ASSERT_NE(tp_sub_summary_get(sub, 1, &got), 0);
    ASSERT_OK(tp_sub_summary_get(sub, 0, &got));
    const uint64_t a[12] = {got.last.producer, got.last.relay, got.last.start_ns, got.last.interval_ns,
                            got.last.t_min, got.last.t_max, got.last.busy_ns, got.last.blocked_ns,
                            got.last.events, got.last.batches, got.last.missed, got.last.drops};
    const uint64_t b[12] = {77, 5, 1700000000000000000ull, 1000000000, 1000, 2000, 600, 300, 12, 2, 1, 4};
    for (int i = 0; i < 12; i++)
        ASSERT_UEQ(a[i], b[i]);
    ASSERT_UEQ(got.last.pid, 99);
    ASSERT_EQ(got.last.rank, 3);
    ASSERT_EQ(got.last.world, 8);
    ASSERT_UEQ(got.last.devices, 1);
    ASSERT_STR_EQ(got.last.host, "node-a");
    ASSERT_UEQ(got.summaries, 1);
    ASSERT_UEQ(got.busy_ns, 600);
    ASSERT_UEQ(got.span_ns, 1000);
    ASSERT_UEQ(got.missed, 1);
    tp_sub_destroy(&sub);
    zmq_close(x);
    zmq_ctx_term(ctx);
}

/* Two relays that summarise the same producer (a relay fed by a relay, both summarising): the
 * viewer takes one relay's summaries and not the other's, so nothing is counted twice. */
TEST(summaries_of_one_producer_are_taken_from_one_relay) {
    void *ctx = zmq_ctx_new(), *x;
    tp_sub *sub = summary_sub_on(ctx, "two-relays.sock", &x);
    err_msg err = {{0}};
    uint8_t t[9] = {'S', 12}, w[TP_SUMMARY_SIZE];
    for (int i = 0; i < 6; i++) {
        tp_summary s = {.producer = 12, .relay = 100 + (uint64_t)(i & 1), .interval_ns = 1000000000,
                        .t_min = 0, .t_max = 1000, .busy_ns = 10, .devices = 1, .events = 7};
        tp_summary_encode(&s, w);
        ASSERT_EQ(zmq_send(x, t, 9, ZMQ_SNDMORE), 9);
        ASSERT_EQ(zmq_send(x, w, sizeof w, 0), (int)sizeof w);
    }
    tp_sub_summary got = {0};
    for (int i = 0; i < 100 && tp_sub_summary_count(sub) == 0; i++) {
        tp_sub_msg m;
        ASSERT_LE(tp_sub_recv(sub, &m, 50, &err), 0);
    }
    for (int i = 0; i < 10; i++) {
        tp_sub_msg m;
        ASSERT_LE(tp_sub_recv(sub, &m, 20, &err), 0);
    }
    ASSERT_EQ(tp_sub_summary_count(sub), 1);
    ASSERT_OK(tp_sub_summary_get(sub, 0, &got));
    ASSERT_UEQ(got.summaries, 3);
    ASSERT_UEQ(got.last.relay, 100);
    ASSERT_UEQ(got.events, 21);
    ASSERT_UEQ(got.busy_ns, 30);
    tp_sub_stats st;
    tp_sub_stats_get(sub, &st);
    ASSERT_UEQ(st.summaries, 3);
    ASSERT_UEQ(st.malformed, 0);
    tp_sub_destroy(&sub);
    zmq_close(x);
    zmq_ctx_term(ctx);
}

TEST(sub_tracks_a_bounded_number_of_producers) {
    void *ctx = zmq_ctx_new();
    const char *ep = ipc_endpoint("many.sock");
    void *x = raw_xpub(ctx, ep);
    tp_sub *sub = sub_new(NULL);
    sub_connect(sub, ep);
    raw_wait_subscription(x);
    enum { N = 4100 };
    tp_buf b = {0};
    for (uint64_t i = 1; i <= N; i++) {
        tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = i});
        ASSERT_OK(tp_enc_finish(enc, &b));
        raw_send_topic(x, i);
        ASSERT_EQ(zmq_send(x, b.data, b.len, 0), (int)b.len);
        tp_enc_destroy(&enc);
    }
    int news = 0;
    for (int i = 0; i < N; i++) {
        tp_sub_msg m;
        err_msg err = {{0}};
        ASSERT_EQ(tp_sub_recv(sub, &m, 10000, &err), 1);
        news += m.new_producer;
    }
    tp_sub_stats st;
    tp_sub_stats_get(sub, &st);
    ASSERT_UEQ(st.received, N);
    ASSERT_EQ(st.n_producers, 4096);
    ASSERT_EQ(news, 4096);
    tp_sub_producer pr;
    ASSERT_OK(tp_sub_producer_get(sub, 4095, &pr));
    ASSERT_UEQ(pr.producer, 4096);
    ASSERT_UEQ(pr.received, 1);
    tp_buf_free(&b);
    tp_sub_destroy(&sub);
    zmq_close(x);
    zmq_ctx_term(ctx);
}

TEST(reconnects_after_publisher_restart_on_same_port) {
    tp_sub *sub = sub_new(NULL);
    pubproc p1, p2;
    char ep[64];
    int port = task_free_port();
    ASSERT_GT(port, 0);
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    testpub_start(&p1, (const char *[]){"--endpoint", ep, "--events", "20000",
                                        "--seed", "5", "--wait-subscribers", "1", NULL});
    sub_connect(sub, p1.endpoint);
    expect x;
    expect_init(&x, 5);
    receive_all(sub, &x, 1);
    testpub_finish(&p1);
    ASSERT_UEQ(x.events, 20000);
    expect_free(&x);

    /* Same port, same producer id (same seed): the subscriber is not told anything. Its batches
     * are cut otherwise, so they differ from the first life's (byte-identical batches of the same
     * producer and sequence numbers would be copies). */
    testpub_start(&p2, (const char *[]){"--endpoint", p1.endpoint, "--events", "20000", "--seed",
                                        "5", "--wait-subscribers", "1", "--batch", "3000", NULL});
    ASSERT_STR_EQ(p2.endpoint, p1.endpoint);
    expect_init(&x, 5);
    receive_all(sub, &x, 1);
    testpub_finish(&p2);
    ASSERT_UEQ(x.events, 20000);
    ASSERT_UEQ(x.batches, p2.sent);
    ASSERT_EQ(x.new_producer_seen, 1); /* the restart was seen as a new life */
    ASSERT_UEQ(x.missed, 0);
    expect_free(&x);
    tp_sub_stats st;
    tp_sub_stats_get(sub, &st);
    ASSERT_UEQ(st.received, p1.sent + p2.sent);
    ASSERT_UEQ(st.missed, 0);
    tp_sub_destroy(&sub);
}

/* ---- subscription floods ---- */

/* The memory a flooded publisher may grow by: its peers' bounds allow a few MiB (4096
 * subscriptions of at most ~100 bytes); sanitizers and a loaded machine cost many times that
 * (libzmq takes in what a flooder sends faster than an instrumented reader reads it). Without the
 * bounds the floods below took it past 1 GiB. */
#define FLOOD_GROWTH_MAX_KIB (256 * 1024)

/* Two peers flood a publisher with 300,000 distinct subscriptions each, one with 4,000-byte topics
 * (the message cap is 4 KB), one with subscriptions of the form synctop sends (batches of
 * producers that do not exist); a third subscriber is healthy. The publisher (its own process, its
 * allocator keeping nothing back, so that its resident memory is what it holds) counts and drops
 * what went past each flooder's bound and shuts its connections; its resident memory grows by no
 * more than its bounds allow, and the healthy subscriber gets every event. */
TEST(a_peer_flooding_subscriptions_is_cut_off_and_memory_stays_bounded) {
    ASSERT_OK(setenv("ASAN_OPTIONS", "quarantine_size_mb=0:detect_leaks=0", 1));
    tp_sub *sub = sub_new(NULL);
    pubproc p;
    testpub_start(&p, (const char *[]){"--endpoint", ipc_endpoint("flooded.sock"), "--events", "160000", "--batch",
                                       "1000", "--rate", "20000", "--wait-subscribers", "1", NULL});
    sub_connect(sub, p.endpoint);
    err_msg err = {{0}};
    tp_sub_msg m;
    while (tp_sub_recv(sub, &m, 100, &err) != 1)
        ;
    long before = flood_rss_kib(p.pid), peak = before;
    int done[2];
    ASSERT_OK(pipe(done));
    ASSERT_OK(fcntl(done[0], F_SETFL, O_NONBLOCK));
    pid_t flooders[2] = {flood_start(p.endpoint, FLOOD_LONG, 300000, done[1]),
                         flood_start(p.endpoint, FLOOD_BATCHES, 300000, done[1])};
    uint64_t events = flood_receive(sub, &p.pid, &peak, 1, flooders, done[0]);
    testpub_finish(&p);
    fprintf(stderr, "publisher: %ld KiB before the floods, %ld KiB at most; %" PRIu64 " subscriptions dropped, %" PRIu64
            " connections shut\n", before, peak, p.subs_dropped, p.peers_shut);
    ASSERT_UEQ(events + 1000, 160000); /* the first batch came before the floods */
    tp_sub_stats st;
    tp_sub_stats_get(sub, &st);
    ASSERT_UEQ(st.missed, 0);
    ASSERT_GT(p.subs_dropped, 0);
    ASSERT_GE(p.peers_shut, 2);
    ASSERT_LT(peak - before, FLOOD_GROWTH_MAX_KIB);
    close(done[0]);
    close(done[1]);
    tp_sub_destroy(&sub);
}

/* Subscribes sock to n producers' batches, from first on ('B' + id; on 0: unsubscribes). */
static void subscribe_producers(void *sock, uint64_t first, int n, int on) {
    for (int i = 0; i < n; i++) {
        uint8_t t[9] = {'B'};
        uint64_t id = first + (uint64_t)i;
        memcpy(t + 1, &id, 8);
        ASSERT_OK(zmq_setsockopt(sock, on ? ZMQ_SUBSCRIBE : ZMQ_UNSUBSCRIBE, t, sizeof t));
    }
}

/* Polls until the publisher counts want subscribers (a subscription or unsubscription to every
 * batch, "B", sent last: everything sent before it has been read). */
static void poll_until(tp_pub *pub, int want) {
    double t0 = now_s();
    while (tp_pub_poll(pub, NULL) != want) {
        ASSERT_LT(now_s() - t0, 20);
        sleep_ms(2);
    }
}

/* A SUB socket connected to pub whose own queue keeps every subscription (libzmq's default drops
 * past 1000 waiting). */
static void *sub_socket(void *ctx, tp_pub *pub) {
    void *s = zmq_socket(ctx, ZMQ_SUB);
    int unbounded = 0;
    ASSERT_NOT_NULL(s);
    ASSERT_OK(zmq_setsockopt(s, ZMQ_SNDHWM, &unbounded, sizeof unbounded));
    ASSERT_OK(zmq_connect(s, tp_pub_endpoint(pub)));
    return s;
}

/* What a peer may hold is what it holds now: a subscriber that subscribes to 1000 producers, lets
 * go of them, subscribes to 1000 others, leaves, and comes back with 1000 more (3000 in all, its
 * bound being 1024) is never cut off; one that holds 1100 at once is, and what went past its bound
 * is counted. */
TEST(a_peer_is_bounded_by_what_it_holds_not_what_it_ever_sent) {
    tp_pub *pub = pub_new(&(tp_pub_opts){.endpoint = ipc_endpoint("bound.sock")});
    void *ctx = zmq_ctx_new();
    void *s = sub_socket(ctx, pub);
    subscribe_producers(s, 1000, 1000, 1);
    ASSERT_OK(zmq_setsockopt(s, ZMQ_SUBSCRIBE, "B", 1));
    poll_until(pub, 1);
    subscribe_producers(s, 1000, 1000, 0);
    subscribe_producers(s, 2000, 1000, 1);
    ASSERT_OK(zmq_setsockopt(s, ZMQ_UNSUBSCRIBE, "B", 1));
    poll_until(pub, 0);
    ASSERT_OK(zmq_setsockopt(s, ZMQ_SUBSCRIBE, "B", 1));
    poll_until(pub, 1);
    zmq_close(s); /* it leaves: its "B" goes with it */
    poll_until(pub, 0);
    s = sub_socket(ctx, pub);
    subscribe_producers(s, 3000, 1000, 1);
    ASSERT_OK(zmq_setsockopt(s, ZMQ_SUBSCRIBE, "B", 1));
    poll_until(pub, 1);
    tp_pub_stats st;
    tp_pub_stats_get(pub, &st);
    ASSERT_UEQ(st.subs_dropped, 0);
    ASSERT_UEQ(st.peers_shut, 0);
    zmq_close(s);
    poll_until(pub, 0);
    /* 1100 held at once: the 1025th is one too many, and the peer is cut off */
    s = sub_socket(ctx, pub);
    subscribe_producers(s, 5000, 1100, 1);
    double t0 = now_s();
    while (tp_pub_stats_get(pub, &st), st.peers_shut == 0) {
        ASSERT_LT(now_s() - t0, 20);
        tp_pub_poll(pub, NULL);
        sleep_ms(2);
    }
    ASSERT_GE(st.subs_dropped, 1);
    ASSERT_LE(st.subs_dropped, 1100 - 1024);
    zmq_close(s);
    zmq_ctx_term(ctx);
    tp_pub_destroy(&pub);
}

/* ---- CURVE ---- */

static void make_keys(const char *base, tp_keypair *kp) {
    err_msg err = {{0}};
    if (tp_keypair_new(kp, &err) != 0)
        TASK_FAIL_("tp_keypair_new: %s", err.msg);
    ASSERT_OK(tp_keypair_save(kp, task_path(base), &err));
}

TEST(curve_subscriber_with_the_right_key_receives) {
    tp_keypair kp;
    make_keys("srv", &kp);
    char key[PATH_MAX], server_key[TP_KEY_Z85_LEN + 1];
    snprintf(key, sizeof key, "%s", task_path("srv.key"));
    err_msg err = {{0}};
    ASSERT_OK(tp_public_key_resolve(task_path("srv.pub"), server_key, &err));
    ASSERT_STR_EQ(server_key, kp.public_key);
    tp_sub *sub = sub_new(server_key);
    pubproc p;
    testpub_start(&p, (const char *[]){"--endpoint", "tcp://127.0.0.1:*", "--curve-key", key,
                                       "--events", "50000", "--seed", "3", "--wait-subscribers",
                                       "1", NULL});
    sub_connect(sub, p.endpoint);
    expect x;
    expect_init(&x, 3);
    receive_all(sub, &x, 1);
    testpub_finish(&p);
    ASSERT_UEQ(x.events, 50000);
    ASSERT_UEQ(x.batches, p.sent);
    expect_free(&x);
    tp_sub_destroy(&sub);
}

TEST(curve_wrong_key_and_plain_subscribers_receive_nothing) {
    tp_keypair kp, other;
    err_msg err = {{0}};
    make_keys("srv", &kp);
    ASSERT_OK(tp_keypair_new(&other, &err));
    tp_pub *pub = pub_new(&(tp_pub_opts){.endpoint = "tcp://127.0.0.1:*", .curve = &kp});
    tp_sub *good = sub_new(kp.public_key);
    tp_sub *wrong = sub_new(other.public_key);
    tp_sub *plain = sub_new(NULL);
    sub_connect(wrong, tp_pub_endpoint(pub));
    sub_connect(plain, tp_pub_endpoint(pub));
    sub_connect(good, tp_pub_endpoint(pub));
    wait_subscribers(pub, 1);

    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 11});
    synth sy;
    synth_init(&sy, 11);
    tp_buf b = {0};
    uint64_t got_good = 0, got_other = 0;
    tp_sub_msg m;
    /* About a second of traffic: the rejected subscribers keep retrying meanwhile. */
    for (int i = 0; i < 50; i++) {
        synth_fill(&sy, enc, 100);
        ASSERT_OK(tp_enc_finish_flags(enc, i == 49 ? TP_BF_END : 0, &b));
        ASSERT_OK(tp_pub_send(pub, b.data, b.len));
        tp_enc_delivered(enc, 1);
        sleep_ms(20);
        while (tp_sub_recv(good, &m, 0, &err) == 1)
            got_good++;
        got_other += (uint64_t)(tp_sub_recv(wrong, &m, 0, &err) == 1);
        got_other += (uint64_t)(tp_sub_recv(plain, &m, 0, &err) == 1);
    }
    double deadline = now_s() + 30;
    while (got_good < 50 && now_s() < deadline)
        got_good += (uint64_t)(tp_sub_recv(good, &m, 500, &err) == 1);
    ASSERT_UEQ(got_good, 50);
    ASSERT_EQ(tp_sub_recv(wrong, &m, 300, &err), 0);
    ASSERT_EQ(tp_sub_recv(plain, &m, 300, &err), 0);
    ASSERT_UEQ(got_other, 0);
    ASSERT_EQ(tp_pub_poll(pub, NULL), 1); /* only the right key got in */
    tp_buf_free(&b);
    tp_enc_destroy(&enc);
    tp_sub_destroy(&good);
    tp_sub_destroy(&wrong);
    tp_sub_destroy(&plain);
    tp_pub_destroy(&pub);
}

TEST(curve_refuses_bad_keys) {
    err_msg err = {{0}};
    /* A subscriber given something that is not a key. */
    ASSERT_NULL(tp_sub_new(&(tp_sub_opts){.server_key = "not a key"}, &err));
    ASSERT_STR_CONTAINS(err.msg, "Z85");
    /* A publisher given only the public half. */
    tp_keypair kp;
    ASSERT_OK(tp_keypair_new(&kp, &err));
    tp_keypair pub_only = kp;
    memset(pub_only.secret_key, 0, sizeof pub_only.secret_key);
    ASSERT_NULL(tp_pub_new(&(tp_pub_opts){.endpoint = "tcp://127.0.0.1:*", .curve = &pub_only},
                           &err));
    ASSERT_STR_CONTAINS(err.msg, "secret key");
    /* A publisher given a secret key that does not match its public key. */
    tp_keypair other;
    ASSERT_OK(tp_keypair_new(&other, &err));
    memcpy(kp.secret_key, other.secret_key, sizeof kp.secret_key);
    ASSERT_NULL(tp_pub_new(&(tp_pub_opts){.endpoint = "tcp://127.0.0.1:*", .curve = &kp}, &err));
    ASSERT_STR_CONTAINS(err.msg, "does not belong");
}

/* A subscriber with the wrong server key hears nothing, but it knows why: the publisher refused
 * its handshake. With the right key the handshake is counted as accepted. */
TEST(wrong_server_key_is_seen_as_a_refused_handshake) {
    err_msg err = {{0}};
    tp_keypair kp, other;
    ASSERT_OK(tp_keypair_new(&kp, &err));
    ASSERT_OK(tp_keypair_new(&other, &err));
    tp_pub *pub = pub_new(&(tp_pub_opts){.endpoint = "tcp://127.0.0.1:*", .curve = &kp});
    char ep[TP_ENDPOINT_MAX];
    snprintf(ep, sizeof ep, "%s", tp_pub_endpoint(pub));
    char wrong[TP_KEY_Z85_LEN + 1], right[TP_KEY_Z85_LEN + 1];
    memcpy(wrong, other.public_key, TP_KEY_Z85_LEN);
    wrong[TP_KEY_Z85_LEN] = '\0';
    memcpy(right, kp.public_key, TP_KEY_Z85_LEN);
    right[TP_KEY_Z85_LEN] = '\0';
    tp_sub *bad = sub_new(wrong), *good = sub_new(right);
    sub_connect(bad, ep);
    sub_connect(good, ep);
    tp_sub_stats sb = {0}, sg = {0};
    for (int i = 0; i < 100 && (sb.handshake_failures == 0 || sg.handshakes == 0); i++) {
        tp_sub_msg m;
        int keyframe;
        tp_pub_poll(pub, &keyframe);
        tp_sub_recv(bad, &m, 20, &err);
        tp_sub_recv(good, &m, 20, &err);
        tp_sub_stats_get(bad, &sb);
        tp_sub_stats_get(good, &sg);
    }
    ASSERT_GT(sb.handshake_failures, 0);
    ASSERT_EQ(sb.handshakes, 0);
    ASSERT_NOT_NULL(tp_sub_handshake_failed(bad));
    ASSERT_STR_EQ(tp_sub_handshake_failed(bad), ep);
    ASSERT(!tp_sub_client_refused(bad)); /* the server key, not ours */
    ASSERT_UEQ(sb.client_refusals, 0);
    ASSERT_GT(sg.handshakes, 0);
    ASSERT_EQ(sg.handshake_failures, 0);
    ASSERT_NULL(tp_sub_handshake_failed(good));
    tp_sub_destroy(&bad);
    tp_sub_destroy(&good);
    tp_pub_destroy(&pub);
}

/* Another peer cannot switch on-demand tracing off for the others by sending unsubscribe notices,
 * nor keep it on after it left by sending many subscribe notices: libzmq follows subscriptions per
 * connection, and the publisher counts connections. */
TEST(a_peer_cannot_unsubscribe_the_others) {
    tp_pub *pub = pub_new(&(tp_pub_opts){.endpoint = "tcp://127.0.0.1:*"});
    char ep[TP_ENDPOINT_MAX];
    snprintf(ep, sizeof ep, "%s", tp_pub_endpoint(pub));
    ASSERT_EQ(tp_pub_poll(pub, NULL), 0);
    tp_sub *good = sub_new(NULL);
    sub_connect(good, ep);
    wait_subscribers(pub, 1);
    /* a raw peer: subscribes a hundred times, unsubscribes a hundred times */
    void *ctx = zmq_ctx_new();
    void *x = zmq_socket(ctx, ZMQ_XSUB);
    ASSERT_NOT_NULL(x);
    ASSERT_OK(zmq_connect(x, ep));
    for (int i = 0; i < 100; i++)
        ASSERT_EQ(zmq_send(x, "\x01", 1, 0), 1);
    wait_subscribers(pub, 2); /* the raw peer, connected and subscribed, counts once */
    for (int i = 0; i < 300; i++)
        ASSERT_EQ(zmq_send(x, "\x00", 1, 0), 1);
    double until = now_s() + 0.5;
    while (now_s() < until) {
        ASSERT_GE(tp_pub_poll(pub, NULL), 1); /* the good subscriber is still there */
        sleep_ms(5);
    }
    /* the raw peer goes: one subscriber left, whatever it sent */
    zmq_close(x);
    zmq_ctx_term(ctx);
    until = now_s() + 10;
    while (tp_pub_poll(pub, NULL) != 1 && now_s() < until)
        sleep_ms(5);
    ASSERT_EQ(tp_pub_poll(pub, NULL), 1);
    /* and when the last one goes, nobody */
    tp_sub_destroy(&good);
    until = now_s() + 10;
    while (tp_pub_poll(pub, NULL) != 0 && now_s() < until)
        sleep_ms(5);
    ASSERT_EQ(tp_pub_poll(pub, NULL), 0);
    tp_pub_destroy(&pub);
}

/* Raw connections that never start the ZeroMQ handshake are dropped after 2 s, so a local user
 * cannot pile them up and exhaust the traced program's file descriptors; a real subscriber joins
 * once they are gone. */
TEST(connections_without_a_handshake_are_reaped) {
    tp_pub *pub = pub_new(&(tp_pub_opts){.endpoint = "tcp://127.0.0.1:*"});
    const char *ep = tp_pub_endpoint(pub);
    int port = atoi(strrchr(ep, ':') + 1);
    enum { RAW = 200 };
    int fds[RAW];
    for (int i = 0; i < RAW; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ASSERT_GE(fds[i], 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ASSERT_OK(connect(fds[i], (struct sockaddr *)&sa, sizeof sa));
    }
    /* within a few seconds the publisher has closed every raw connection: each reads EOF */
    int closed = 0;
    double until = now_s() + 60; /* 2 s each, but a loaded machine is slow to run the timers */
    while (closed < RAW && now_s() < until) {
        tp_pub_poll(pub, NULL);
        closed = 0;
        for (int i = 0; i < RAW; i++) {
            char b[64];
            ssize_t n = recv(fds[i], b, sizeof b, MSG_DONTWAIT);
            closed += n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
        }
        sleep_ms(50);
    }
    fprintf(stderr, "  %d of %d raw connections closed by the publisher\n", closed, RAW);
    ASSERT_EQ(closed, RAW);
    /* a real subscriber joins, and is the one counted once the closings' events are all read */
    tp_sub *good = sub_new(NULL);
    sub_connect(good, ep);
    wait_subscribers(pub, 1);
    until = now_s() + 10;
    while (tp_pub_poll(pub, NULL) != 1 && now_s() < until)
        sleep_ms(10);
    ASSERT_EQ(tp_pub_poll(pub, NULL), 1);
    for (int i = 0; i < RAW; i++)
        close(fds[i]);
    tp_sub_destroy(&good);
    tp_pub_destroy(&pub);
}

/* Greets a publisher over a raw connection as a ZeroMQ SUB socket does (ZMTP 3.0, the NULL
 * mechanism): the 64-byte greeting, then a READY command naming the socket type. Its handshake done,
 * libzmq keeps the connection however long it lasts: only the publisher's cap can shut it. */
static void zmtp_greet_as_sub(int fd) {
    uint8_t g[64 + 27] = {0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 3, 0, 'N', 'U', 'L', 'L'};
    static const uint8_t ready[27] = {0x04, 25, 5, 'R', 'E', 'A', 'D', 'Y', 11, 'S', 'o', 'c', 'k', 'e',
                                      't', '-', 'T', 'y', 'p', 'e', 0, 0, 0, 3, 'S', 'U', 'B'};
    memcpy(g + 64, ready, sizeof ready);
    ASSERT_EQ(send(fd, g, sizeof g, MSG_NOSIGNAL), (ssize_t)sizeof g);
}

/* Whether the publisher shut fd (its greeting and anything else it sent read first). */
static int raw_shut(int fd) {
    char b[256];
    ssize_t n;
    while ((n = recv(fd, b, sizeof b, MSG_DONTWAIT)) > 0)
        ;
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* Past 64 open tcp connections, new ones are shut down at once: the publisher, and so the traced
 * program, never holds more than that many. Each connection completes its handshake, so that
 * libzmq's handshake limit (2 s) closes none of them: what is shut, the cap shut, however long the
 * machine takes. The first 64 are kept, the 136 after them shut. */
TEST(tcp_connections_past_the_cap_are_shut) {
    tp_pub *pub = pub_new(&(tp_pub_opts){.endpoint = "tcp://127.0.0.1:*"});
    int port = atoi(strrchr(tp_pub_endpoint(pub), ':') + 1);
    enum { RAW = 200, CAP = 64 };
    int fds[RAW];
    for (int i = 0; i < RAW; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ASSERT_GE(fds[i], 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ASSERT_OK(connect(fds[i], (struct sockaddr *)&sa, sizeof sa));
        zmtp_greet_as_sub(fds[i]);
        tp_pub_poll(pub, NULL); /* as the tracer's flush thread does, often */
    }
    int closed = 0;
    for (int round = 0; closed < RAW - CAP; round++) {
        ASSERT_LT(round, 3000); /* a minute */
        tp_pub_poll(pub, NULL);
        sleep_ms(20);
        closed = 0;
        for (int i = 0; i < RAW; i++)
            closed += raw_shut(fds[i]);
    }
    /* a few more rounds: nothing else is shut, and the ones shut are the late ones */
    for (int round = 0; round < 10; round++) {
        tp_pub_poll(pub, NULL);
        sleep_ms(20);
    }
    int first_shut = 0;
    closed = 0;
    for (int i = 0; i < RAW; i++) {
        int shut = raw_shut(fds[i]);
        closed += shut;
        first_shut += shut && i < CAP;
    }
    fprintf(stderr, "  %d of %d raw connections shut by the cap, %d of the first %d\n", closed, RAW, first_shut, CAP);
    ASSERT_EQ(closed, RAW - CAP);
    ASSERT_EQ(first_shut, 0);
    for (int i = 0; i < RAW; i++)
        close(fds[i]);
    tp_pub_destroy(&pub);
}

/* ---- binding beyond loopback ---- */

/* A non-loopback IPv4 address of this machine, if it has one. */
static int local_address(char *out, size_t outlen) {
    struct ifaddrs *ifs, *i;
    if (getifaddrs(&ifs) != 0)
        return 0;
    int found = 0;
    for (i = ifs; i != NULL && !found; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET ||
            (i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP))
            continue;
        found = getnameinfo(i->ifa_addr, sizeof(struct sockaddr_in), out, (socklen_t)outlen, NULL,
                            0, NI_NUMERICHOST) == 0;
    }
    freeifaddrs(ifs);
    return found;
}

TEST(nonloopback_bind_needs_keys_or_insecure) {
    static const char *const refused[] = {"tcp://0.0.0.0:*", "tcp://*:*", "tcp://10.1.2.3:5555",
                                          "tcp://[::]:*", "tcp://example.com:5555", "eth0:5555"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        err_msg err = {{0}};
        ASSERT_NULL(tp_pub_new(&(tp_pub_opts){.endpoint = refused[i]}, &err));
        ASSERT_STR_CONTAINS(err.msg, "synctop keygen");
        ASSERT_STR_CONTAINS(err.msg, "--insecure");
    }
    err_msg err = {{0}};
    tp_pub *pub = tp_pub_new(&(tp_pub_opts){.endpoint = "tcp://0.0.0.0:*"}, &err);
    ASSERT_NULL(pub);
    fprintf(stderr, "  refusal: %s\n", err.msg);
    /* The same through synctop-testpub's flags. */
    char out[4096], testpub[PATH_MAX];
    snprintf(testpub, sizeof testpub, "%s/synctop-testpub", task_bindir());
    const char *argv_refused[] = {testpub, "--endpoint", "tcp://0.0.0.0:*", "--events", "1", NULL};
    ASSERT_EQ(run_capture(argv_refused, out, sizeof out), 1);
    ASSERT_STR_CONTAINS(out, "--insecure");
    /* Loopback needs nothing. */
    pub = pub_new(&(tp_pub_opts){.endpoint = ":0"});
    ASSERT(strncmp(tp_pub_endpoint(pub), "tcp://127.0.0.1:", 16) == 0);
    tp_pub_destroy(&pub);

    char addr[64], ep[128];
    if (!local_address(addr, sizeof addr)) {
        fprintf(stderr, "  this machine has no non-loopback IPv4 address: the allowed half "
                        "(--insecure, CURVE) is skipped\n");
        return;
    }
    /* Binding only: nothing is sent, so no traffic leaves the machine. */
    snprintf(ep, sizeof ep, "tcp://%s:*", addr);
    ASSERT_EQ(tp_endpoint_is_loopback(ep), 0);
    pub = pub_new(&(tp_pub_opts){.endpoint = ep, .insecure = 1});
    fprintf(stderr, "  bound %s with insecure\n", tp_pub_endpoint(pub));
    tp_pub_destroy(&pub);
    const char *argv_allowed[] = {testpub, "--endpoint", ep, "--insecure", "--events", "1", NULL};
    ASSERT_EQ(run_capture(argv_allowed, out, sizeof out), 0);
    ASSERT_STR_CONTAINS(out, "sent=1 dropped=0");
    tp_keypair kp;
    ASSERT_OK(tp_keypair_new(&kp, &err));
    pub = pub_new(&(tp_pub_opts){.endpoint = ep, .curve = &kp});
    tp_pub_destroy(&pub);
}

/* Only tcp (under the rules above) and ipc with a file path: the other transports libzmq knows
 * have none of those checks, and an abstract ipc socket has no permissions at all. */
TEST(publisher_allows_only_tcp_and_ipc_files) {
    static const char *const refused[] = {"ipc://@synctop-test", "pgm://eth0;239.192.1.1:5555",
                                          "epgm://eth0;239.192.1.1:5555", "norm://1,127.0.0.1:5555",
                                          "tipc://{5560,0,0}", "inproc://synctop", "vmci://1:5555"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        err_msg err = {{0}};
        tp_pub *pub = tp_pub_new(&(tp_pub_opts){.endpoint = refused[i]}, &err);
        if (pub != NULL)
            TASK_FAIL_("published on %s", refused[i]);
        ASSERT_STR_CONTAINS(err.msg, "refusing to publish");
    }
    char ep[PATH_MAX];
    snprintf(ep, sizeof ep, "ipc://%s/allowed.sock", task_tmpdir());
    tp_pub *pub = pub_new(&(tp_pub_opts){.endpoint = ep});
    struct stat st;
    ASSERT_OK(stat(ep + 6, &st));
    ASSERT_EQ(st.st_mode & 0777, 0600);
    tp_pub_destroy(&pub);
}

/* ---- endpoints ---- */

/* Whether something listens on an endpoint: a bound publisher's tcp and ipc endpoints say yes, the
 * same endpoints once it is gone say no. */
TEST(endpoint_in_use_sees_a_listener_and_its_absence) {
    use_private_runtime_dir();
    char ipc[PATH_MAX + 16];
    snprintf(ipc, sizeof ipc, "ipc://%s", task_path("inuse.sock"));
    static const char *const tcp = "tcp://127.0.0.1:0";
    const char *const eps[] = {tcp, ipc};
    for (size_t i = 0; i < 2; i++) {
        err_msg err = {{0}};
        tp_pub_opts o = {.endpoint = eps[i]};
        tp_pub *pub = tp_pub_new(&o, &err);
        ASSERT_NOT_NULL(pub);
        char bound[TP_ENDPOINT_MAX];
        snprintf(bound, sizeof bound, "%s", tp_pub_endpoint(pub));
        ASSERT_EQ(tp_endpoint_in_use(bound), 1);
        tp_pub_destroy(&pub);
        ASSERT_EQ(tp_endpoint_in_use(bound), 0);
    }
    ASSERT_EQ(tp_endpoint_in_use("tcp://127.0.0.1:*"), 0);
    ASSERT(tp_endpoint_in_use("nonsense") < 0);
}

TEST(endpoint_resolve_forms) {
    char out[TP_ENDPOINT_MAX];
    err_msg err = {{0}};
    ASSERT_OK(tp_endpoint_resolve(":5555", out, sizeof out, &err));
    ASSERT_STR_EQ(out, "tcp://127.0.0.1:5555");
    ASSERT_OK(tp_endpoint_resolve("tcp://:5555", out, sizeof out, &err));
    ASSERT_STR_EQ(out, "tcp://127.0.0.1:5555");
    ASSERT_OK(tp_endpoint_resolve("gpu-node-07:6000", out, sizeof out, &err));
    ASSERT_STR_EQ(out, "tcp://gpu-node-07:6000");
    ASSERT_OK(tp_endpoint_resolve("[::1]:6000", out, sizeof out, &err));
    ASSERT_STR_EQ(out, "tcp://[::1]:6000");
    ASSERT_OK(tp_endpoint_resolve("tcp://10.0.0.2:7", out, sizeof out, &err));
    ASSERT_STR_EQ(out, "tcp://10.0.0.2:7");
    /* libzmq binds addresses and interfaces, not host names: localhost is its address */
    ASSERT_OK(tp_endpoint_resolve("tcp://localhost:5571", out, sizeof out, &err));
    ASSERT_STR_EQ(out, "tcp://127.0.0.1:5571");
    ASSERT_OK(tp_endpoint_resolve("LocalHost:6000", out, sizeof out, &err));
    ASSERT_STR_EQ(out, "tcp://127.0.0.1:6000");
    ASSERT_OK(tp_endpoint_resolve("ipc:///run/x.sock", out, sizeof out, &err));
    ASSERT_STR_EQ(out, "ipc:///run/x.sock");
    ASSERT_OK(tp_endpoint_resolve("/run/x.sock", out, sizeof out, &err));
    ASSERT_STR_EQ(out, "ipc:///run/x.sock");

    const char *xdg = use_private_runtime_dir();
    char want[PATH_MAX + 64];
    ASSERT_OK(tp_endpoint_resolve("4242", out, sizeof out, &err));
    snprintf(want, sizeof want, "ipc://%s/synctop/4242.sock", xdg);
    ASSERT_STR_EQ(out, want);
    ASSERT_OK(tp_endpoint_for_pid(17, out, sizeof out, &err));
    snprintf(want, sizeof want, "ipc://%s/synctop/17.sock", xdg);
    ASSERT_STR_EQ(out, want);

    static const char *const bad[] = {"", "tcp://:", "tcp://host", "host:99999", "host:12a",
                                      "justaword", "0", "tcp://a;b:5", "[::1:5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = tp_endpoint_resolve(bad[i], out, sizeof out, &err);
        if (rc != ERR_INVAL)
            TASK_FAIL_("'%s' resolved (%d) to %s", bad[i], rc, out);
    }
    ASSERT_EQ(tp_endpoint_resolve(":5555", out, 10, &err), ERR_LIMIT);
}

TEST(endpoint_loopback_detection) {
    static const char *const yes[] = {"tcp://127.0.0.1:1", "tcp://127.9.8.7:*", "tcp://[::1]:5",
                                      "tcp://localhost:5", "tcp://LOCALHOST:5",
                                      "tcp://[::ffff:127.0.0.1]:5"};
    static const char *const no[] = {"tcp://0.0.0.0:1",  "tcp://*:1",       "tcp://10.0.0.1:1",
                                     "tcp://[::]:1",     "tcp://eth0:1",    "tcp://128.0.0.1:1",
                                     "tcp://[::ffff:10.0.0.1]:1", "tcp://localhost.evil.com:1"};
    static const char *const bad[] = {"ipc:///x.sock", "tcp://:1", "tcp://127.0.0.1", "udp://a:1",
                                      "tcp://127.0.0.1:65536", "tcp://[::1:5"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        if (tp_endpoint_is_loopback(yes[i]) != 1)
            TASK_FAIL_("%s should be loopback", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        if (tp_endpoint_is_loopback(no[i]) != 0)
            TASK_FAIL_("%s should not be loopback", no[i]);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (tp_endpoint_is_loopback(bad[i]) >= 0)
            TASK_FAIL_("%s should be refused", bad[i]);
}

TEST(endpoint_dir_is_created_private) {
    const char *xdg = use_private_runtime_dir();
    umask(022);
    char dir[PATH_MAX], want[PATH_MAX + 16];
    err_msg err = {{0}};
    ASSERT_OK(tp_endpoint_dir(dir, sizeof dir, &err));
    snprintf(want, sizeof want, "%s/synctop", xdg);
    ASSERT_STR_EQ(dir, want);
    struct stat st;
    ASSERT_OK(lstat(dir, &st));
    ASSERT(S_ISDIR(st.st_mode));
    ASSERT_EQ(st.st_mode & 07777, 0700);
    ASSERT_EQ(st.st_uid, geteuid());
    ASSERT_OK(tp_endpoint_dir(dir, sizeof dir, &err)); /* existing and private: fine */

    /* Without a usable XDG_RUNTIME_DIR: /tmp/synctop-UID. */
    ASSERT_OK(setenv("XDG_RUNTIME_DIR", "relative/dir", 1));
    ASSERT_OK(tp_endpoint_dir(dir, sizeof dir, &err));
    snprintf(want, sizeof want, "/tmp/synctop-%u", (unsigned)geteuid());
    ASSERT_STR_EQ(dir, want);
    ASSERT_OK(setenv("XDG_RUNTIME_DIR", task_path("missing"), 1));
    ASSERT_OK(tp_endpoint_dir(dir, sizeof dir, &err));
    ASSERT_STR_EQ(dir, want);
}

TEST(endpoint_dir_refuses_unsafe_directories) {
    const char *xdg = use_private_runtime_dir();
    char dir[PATH_MAX], path[PATH_MAX + 16];
    err_msg err = {{0}};
    snprintf(path, sizeof path, "%s/synctop", xdg);
    static const mode_t open_modes[] = {0750, 0705, 0770, 0777, 0701};
    ASSERT_OK(mkdir(path, 0700));
    for (size_t i = 0; i < sizeof open_modes / sizeof open_modes[0]; i++) {
        ASSERT_OK(chmod(path, open_modes[i]));
        ASSERT_EQ(tp_endpoint_dir(dir, sizeof dir, &err), ERR_SECURITY);
        ASSERT_STR_CONTAINS(err.msg, "chmod 700");
    }
    fprintf(stderr, "  %s\n", err.msg);
    /* The publisher's default endpoint refuses it too, and says why. */
    ASSERT_NULL(tp_pub_new(NULL, &err));
    ASSERT_STR_CONTAINS(err.msg, "group or others");
    ASSERT_OK(chmod(path, 0700));
    ASSERT_OK(tp_endpoint_dir(dir, sizeof dir, &err));

    /* A symlink to a private directory is still refused. */
    ASSERT_OK(rmdir(path));
    ASSERT_OK(mkdir(task_path("elsewhere"), 0700));
    ASSERT_OK(symlink(task_path("elsewhere"), path));
    ASSERT_EQ(tp_endpoint_dir(dir, sizeof dir, &err), ERR_SECURITY);
    ASSERT_STR_CONTAINS(err.msg, "symbolic link");
    ASSERT_OK(unlink(path));

    /* A plain file in its place. */
    int fd = open(path, O_CREAT | O_WRONLY, 0600);
    ASSERT(fd >= 0);
    close(fd);
    ASSERT_EQ(tp_endpoint_dir(dir, sizeof dir, &err), ERR_SECURITY);
    ASSERT_OK(unlink(path));

    /* Owned by someone else: only root can arrange that here. */
    if (geteuid() != 0) {
        fprintf(stderr, "  not root: the other-owner case is skipped\n");
        return;
    }
    ASSERT_OK(mkdir(path, 0700));
    ASSERT_OK(chown(path, 65534, 65534));
    ASSERT_EQ(tp_endpoint_dir(dir, sizeof dir, &err), ERR_SECURITY);
    ASSERT_STR_CONTAINS(err.msg, "belongs to uid 65534");
    ASSERT_OK(rmdir(path));
}

/* The shared temporary directory's entry, spoiled by someone else, is stepped around the same way
 * by every process of the user: the publisher and whoever attaches agree on the fallback. */
TEST(endpoint_dir_falls_back_to_home_when_tmp_is_spoiled) {
    char tmp[PATH_MAX], home[PATH_MAX], spoiled[PATH_MAX + 32], dir[PATH_MAX], again[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", task_path("tmp"));
    snprintf(home, sizeof home, "%s", task_path("home"));
    ASSERT_OK(mkdir(tmp, 0700));
    ASSERT_OK(mkdir(home, 0700));
    ASSERT_OK(setenv("XDG_RUNTIME_DIR", "", 1));
    ASSERT_OK(setenv("TMPDIR", tmp, 1));
    ASSERT_OK(setenv("HOME", home, 1));
    err_msg err = {{0}};
    snprintf(spoiled, sizeof spoiled, "%s/synctop-%u", tmp, (unsigned)geteuid());
    ASSERT_OK(tp_endpoint_dir(dir, sizeof dir, &err)); /* unspoiled: the temporary directory */
    ASSERT_STR_EQ(dir, spoiled);
    ASSERT_OK(chmod(spoiled, 0777));
    ASSERT_EQ(tp_endpoint_dir(dir, sizeof dir, &err), 1);
    ASSERT_STR_CONTAINS(err.msg, "accessible by group or others");
    char want[PATH_MAX + 32];
    snprintf(want, sizeof want, "%s/.cache/synctop/", home);
    ASSERT(strncmp(dir, want, strlen(want)) == 0);
    struct stat st;
    ASSERT_OK(lstat(dir, &st));
    ASSERT_EQ(st.st_mode & 07777, 0700);
    ASSERT_EQ(tp_endpoint_dir(again, sizeof again, &err), 1);
    ASSERT_STR_EQ(again, dir);
    /* a symbolic link in its place is stepped around too */
    ASSERT_OK(rmdir(spoiled));
    ASSERT_OK(symlink(home, spoiled));
    ASSERT_EQ(tp_endpoint_dir(again, sizeof again, &err), 1);
    ASSERT_STR_EQ(again, dir);
    /* the default endpoint is there */
    tp_pub *pub = pub_new(NULL);
    char ep[PATH_MAX + 64];
    snprintf(ep, sizeof ep, "ipc://%s/%ld.sock", dir, (long)getpid());
    ASSERT_STR_EQ(tp_pub_endpoint(pub), ep);
    tp_pub_destroy(&pub);
}

TEST(default_endpoint_is_pid_socket_removed_on_destroy) {
    const char *xdg = use_private_runtime_dir();
    tp_pub *pub = pub_new(NULL);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "ipc://%s/synctop/%ld.sock", xdg, (long)getpid());
    ASSERT_STR_EQ(tp_pub_endpoint(pub), want);
    struct stat st;
    ASSERT_OK(lstat(want + 6, &st));
    ASSERT(S_ISSOCK(st.st_mode));
    ASSERT_EQ(st.st_mode & 0777, 0600);
    ASSERT_EQ(tp_endpoint_is_live(want), 1);
    /* A second publisher in this process may not steal the endpoint. */
    err_msg err = {{0}};
    ASSERT_NULL(tp_pub_new(NULL, &err));
    ASSERT_STR_CONTAINS(err.msg, "already listening");
    /* `synctop attach PID` finds it. */
    char ep[TP_ENDPOINT_MAX], pid[32];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    ASSERT_OK(tp_endpoint_resolve(pid, ep, sizeof ep, &err));
    ASSERT_STR_EQ(ep, want);
    tp_pub_destroy(&pub);
    ASSERT(lstat(want + 6, &st) != 0);
    ASSERT_EQ(tp_endpoint_is_live(want), 0);
}

/* A traced program that forks (data-loader workers) and destroys its inherited publisher in the
 * child must neither hang nor take the parent's endpoint away. */
TEST(destroy_in_forked_child_leaves_parent_publishing) {
    use_private_runtime_dir();
    tp_pub *pub = pub_new(NULL);
    tp_sub *sub = sub_new(NULL);
    sub_connect(sub, tp_pub_endpoint(pub));
    wait_subscribers(pub, 1);
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        tp_pub_destroy(&pub);
        tp_sub_destroy(&sub);
        _exit(pub == NULL && sub == NULL ? 0 : 1);
    }
    int status = 0;
    double deadline = now_s() + 20;
    pid_t w;
    while ((w = waitpid(pid, &status, WNOHANG)) == 0 && now_s() < deadline)
        sleep_ms(5);
    if (w == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        TASK_FAIL_("tp_pub_destroy hung in a forked child");
    }
    ASSERT(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);
    ASSERT_EQ(tp_endpoint_is_live(tp_pub_endpoint(pub)), 1);
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 3});
    tp_buf b = {0};
    ASSERT_OK(tp_enc_finish(enc, &b));
    ASSERT_OK(tp_pub_send(pub, b.data, b.len));
    tp_sub_msg m;
    err_msg err = {{0}};
    ASSERT_EQ(tp_sub_recv(sub, &m, 10000, &err), 1);
    tp_buf_free(&b);
    tp_enc_destroy(&enc);
    tp_sub_destroy(&sub);
    tp_pub_destroy(&pub);
}

/* Leaves a socket file behind, as a process killed while bound does. */
static void make_stale_socket(const char *path) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    ASSERT_LT(strlen(path), sizeof sa.sun_path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT(fd >= 0);
    ASSERT_OK(bind(fd, (struct sockaddr *)&sa, sizeof sa));
    ASSERT_OK(listen(fd, 1));
    close(fd);
}

static pid_t dead_pid(void) {
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0)
        _exit(0);
    ASSERT_EQ(waitpid(pid, NULL, 0), pid);
    return pid;
}

TEST(stale_socket_of_killed_publisher_does_not_block_binding) {
    const char *xdg = use_private_runtime_dir();
    /* A publisher on its default endpoint, killed with SIGKILL: its socket file stays. */
    pubproc p;
    testpub_start(&p, (const char *[]){"--events", "10", "--wait-subscribers", "1", NULL});
    char killed[PATH_MAX + 32];
    snprintf(killed, sizeof killed, "%s/synctop/%ld.sock", xdg, (long)p.pid);
    ASSERT_STR_EQ(p.endpoint + 6, killed);
    ASSERT_OK(kill(p.pid, SIGKILL));
    int status;
    ASSERT_EQ(waitpid(p.pid, &status, 0), p.pid);
    fclose(p.out);
    struct stat st;
    ASSERT_OK(lstat(killed, &st));
    ASSERT_EQ(tp_endpoint_is_live(p.endpoint), 0);

    /* Other leftovers: a stale file at this very process's path, one of a pid that is alive
     * (pid 1: cannot tell, so kept), one of a dead pid somebody still listens on (kept), and a
     * file that is not ours to judge (kept). */
    char mine[PATH_MAX + 32], alive[PATH_MAX + 32], listened[PATH_MAX + 32], other[PATH_MAX + 32];
    snprintf(mine, sizeof mine, "%s/synctop/%ld.sock", xdg, (long)getpid());
    snprintf(alive, sizeof alive, "%s/synctop/1.sock", xdg);
    snprintf(listened, sizeof listened, "%s/synctop/%ld.sock", xdg, (long)dead_pid());
    snprintf(other, sizeof other, "%s/synctop/notes.txt", xdg);
    make_stale_socket(mine);
    make_stale_socket(alive);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, listened, strlen(listened) + 1);
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_OK(bind(lfd, (struct sockaddr *)&sa, sizeof sa));
    ASSERT_OK(listen(lfd, 4));
    int fd = open(other, O_CREAT | O_WRONLY, 0600);
    close(fd);

    tp_pub *pub = pub_new(NULL);
    ASSERT(lstat(killed, &st) != 0); /* removed */
    ASSERT_OK(lstat(alive, &st));
    ASSERT_OK(lstat(listened, &st));
    ASSERT_OK(lstat(other, &st));
    ASSERT_EQ(tp_endpoint_is_live(tp_pub_endpoint(pub)), 1);

    /* And it works: a subscriber hears it. */
    tp_sub *sub = sub_new(NULL);
    char pid[32];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    sub_connect(sub, pid);
    wait_subscribers(pub, 1);
    tp_pub_destroy(&pub);
    tp_sub_destroy(&sub);
    close(lfd);
    ASSERT(lstat(mine, &st) != 0);
    err_msg err = {{0}};
    ASSERT_EQ(tp_endpoint_remove_stale(&err), 1); /* the listener is gone now */
    ASSERT(lstat(listened, &st) != 0);
}

/* ---- keys ---- */

TEST(keypair_save_modes_no_overwrite_and_round_trip) {
    umask(0);
    tp_keypair kp, back;
    err_msg err = {{0}};
    make_keys("k", &kp);
    struct stat st;
    ASSERT_OK(stat(task_path("k.key"), &st));
    ASSERT_EQ(st.st_mode & 0777, 0600);
    ASSERT_OK(stat(task_path("k.pub"), &st));
    ASSERT_EQ(st.st_mode & 0777, 0644);

    ASSERT_OK(tp_keypair_load(&back, task_path("k.key"), &err));
    ASSERT_STR_EQ(back.public_key, kp.public_key);
    ASSERT_STR_EQ(back.secret_key, kp.secret_key);
    ASSERT_OK(tp_keypair_load(&back, task_path("k.pub"), &err));
    ASSERT_STR_EQ(back.public_key, kp.public_key);
    ASSERT_EQ(back.secret_key[0], '\0');

    /* Never overwritten, not even one of the two. */
    tp_keypair kp2;
    ASSERT_OK(tp_keypair_new(&kp2, &err));
    ASSERT_EQ(tp_keypair_save(&kp2, task_path("k"), &err), ERR_EXIST);
    ASSERT_STR_CONTAINS(err.msg, "refusing to overwrite");
    ASSERT_OK(tp_keypair_load(&back, task_path("k.key"), &err));
    ASSERT_STR_EQ(back.secret_key, kp.secret_key);
    ASSERT_OK(unlink(task_path("k.key")));
    ASSERT_EQ(tp_keypair_save(&kp2, task_path("k"), &err), ERR_EXIST); /* k.pub is there */
    ASSERT(stat(task_path("k.key"), &st) != 0);

    /* Public key resolution: file or inline. */
    char pk[TP_KEY_Z85_LEN + 1];
    ASSERT_OK(tp_public_key_resolve(task_path("k.pub"), pk, &err));
    ASSERT_STR_EQ(pk, kp.public_key);
    ASSERT_OK(tp_public_key_resolve(kp2.public_key, pk, &err));
    ASSERT_STR_EQ(pk, kp2.public_key);
    ASSERT_EQ(tp_public_key_resolve(task_path("nope.pub"), pk, &err), ERR_NOENT);
    ASSERT_EQ(tp_public_key_resolve("0123456789012345678901234567890123456789~", pk, &err),
              ERR_NOENT);
}

static void write_text(const char *path, const char *text, mode_t mode) {
    unlink(path);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, mode);
    ASSERT(fd >= 0);
    ASSERT_EQ(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    ASSERT_OK(fchmod(fd, mode));
    close(fd);
}

TEST(corrupted_key_files_give_clear_errors) {
    tp_keypair kp, other, back;
    err_msg err = {{0}};
    ASSERT_OK(tp_keypair_new(&kp, &err));
    ASSERT_OK(tp_keypair_new(&other, &err));
    const char *path = task_path("bad.key");
    char text[512];
    struct {
        const char *pub, *sec, *want;
        int code;
    } cases[] = {
        {kp.public_key, kp.secret_key, NULL, 0},
        {"~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~", kp.secret_key, "line 2: the public-key is not a valid key", ERR_MALFORMED},
        {kp.public_key, "short", "line 3: the secret-key is not a valid key", ERR_MALFORMED},
        {other.public_key, kp.secret_key, "does not match the secret key", ERR_MALFORMED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(text, sizeof text, "# test\npublic-key = %s\nsecret-key = %s\n", cases[i].pub,
                 cases[i].sec);
        write_text(path, text, 0600);
        err.msg[0] = '\0';
        ASSERT_EQ(tp_keypair_load(&back, path, &err), cases[i].code);
        if (cases[i].want != NULL) {
            ASSERT_STR_CONTAINS(err.msg, cases[i].want);
            ASSERT_STR_CONTAINS(err.msg, path);
            fprintf(stderr, "  %s\n", err.msg);
            ASSERT_EQ(back.public_key[0], '\0');
        }
    }
    /* One character changed inside a valid file. */
    snprintf(text, sizeof text, "public-key = %s\nsecret-key = %s\n", kp.public_key, kp.secret_key);
    text[13 + 40 + 1 + 13 + 5] ^= 0x01;
    write_text(path, text, 0600);
    ASSERT_EQ(tp_keypair_load(&back, path, &err), ERR_MALFORMED);
    fprintf(stderr, "  %s\n", err.msg);
    /* Not a key file at all, a duplicate field, an unknown field, empty. */
    write_text(path, "hello world\n", 0600);
    ASSERT_EQ(tp_keypair_load(&back, path, &err), ERR_MALFORMED);
    ASSERT_STR_CONTAINS(err.msg, "line 1");
    snprintf(text, sizeof text, "public-key = %s\npublic-key = %s\n", kp.public_key, kp.public_key);
    write_text(path, text, 0600);
    ASSERT_EQ(tp_keypair_load(&back, path, &err), ERR_MALFORMED);
    ASSERT_STR_CONTAINS(err.msg, "twice");
    write_text(path, "colour = blue\n", 0600);
    ASSERT_EQ(tp_keypair_load(&back, path, &err), ERR_MALFORMED);
    ASSERT_STR_CONTAINS(err.msg, "unknown field");
    write_text(path, "", 0600);
    ASSERT_EQ(tp_keypair_load(&back, path, &err), ERR_MALFORMED);
    ASSERT_STR_CONTAINS(err.msg, "no public-key");
    /* A secret key others can read is refused, like ssh does. */
    snprintf(text, sizeof text, "public-key = %s\nsecret-key = %s\n", kp.public_key, kp.secret_key);
    write_text(path, text, 0640);
    ASSERT_EQ(tp_keypair_load(&back, path, &err), ERR_SECURITY);
    ASSERT_STR_CONTAINS(err.msg, "chmod 600");
    ASSERT_EQ(tp_keypair_load(&back, task_path("absent.key"), &err), ERR_NOENT);
}

/* A subscriber with its own key pair (or none: a throwaway one). */
static tp_sub *sub_new_as(const char *server_key, const tp_keypair *client) {
    err_msg err = {{0}};
    tp_sub *sub = tp_sub_new(&(tp_sub_opts){.server_key = server_key, .client_key = client}, &err);
    if (sub == NULL)
        TASK_FAIL_("tp_sub_new: %s", err.msg);
    return sub;
}

/* A publisher given a list of clients (a directory of .pub files, as `synctop keygen --client`
 * writes them) sends to the listed clients and to the holder of its own key pair; a client with
 * a key of its own that is not listed, and one with a throwaway key, complete no handshake, and
 * each knows that its client key was refused (ZAP status 400), not the server key. */
TEST(curve_clients_only_listed_keys_receive_the_others_are_told_why) {
    tp_keypair srv, alice, bob;
    err_msg err = {{0}};
    make_keys("srv", &srv);
    ASSERT_OK(mkdir(task_path("clients"), 0755));
    ASSERT_OK(tp_keypair_new(&alice, &err));
    ASSERT_OK(tp_keypair_new(&bob, &err));
    /* alice.key lands in the directory too: only the .pub files are read */
    ASSERT_OK(tp_keypair_save_client(&alice, task_path("clients/alice"), &err));
    ASSERT_OK(tp_keypair_save_client(&bob, task_path("bob"), &err));
    tp_clients *list = tp_clients_load(task_path("clients"), &err);
    ASSERT_NOT_NULL(list);
    ASSERT_UEQ(tp_clients_count(list), 1);
    tp_pub *pub = pub_new(&(tp_pub_opts){.endpoint = "tcp://127.0.0.1:*", .curve = &srv, .clients = list});
    tp_clients_destroy(&list); /* the publisher keeps its own copy */
    char ep[TP_ENDPOINT_MAX];
    snprintf(ep, sizeof ep, "%s", tp_pub_endpoint(pub));
    tp_sub *listed = sub_new_as(srv.public_key, &alice), *self = sub_new_as(srv.public_key, &srv);
    tp_sub *unlisted = sub_new_as(srv.public_key, &bob), *anon = sub_new_as(srv.public_key, NULL);
    /* Both admitted ones must have subscribed before the first batch: the listed one alone first
     * (with one connection the count says its subscription came), then the server's own key pair,
     * whose subscription is the next join the publisher hears of. */
    sub_connect(listed, ep);
    wait_subscribers(pub, 1);
    sub_connect(self, ep);
    int n = 0, joined = 0;
    for (double end = now_s() + 20; !(joined && n == 2) && now_s() < end; sleep_ms(5)) {
        int j = 0;
        n = tp_pub_poll(pub, &j);
        joined |= j;
    }
    ASSERT(joined && n == 2);
    sub_connect(unlisted, ep);
    sub_connect(anon, ep);

    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 11});
    synth sy;
    synth_init(&sy, 11);
    tp_buf b = {0};
    tp_sub_msg m;
    uint64_t sent = 0, got_listed = 0, got_self = 0, got_other = 0;
    tp_sub_stats su = {0}, sa = {0};
    /* Batches go out until both others were refused (20 s at most), then the last one. */
    for (double end = now_s() + 20; sent < 1000; sent++) {
        int last = (su.handshake_failures > 0 && sa.handshake_failures > 0) || now_s() > end;
        synth_fill(&sy, enc, 100);
        ASSERT_OK(tp_enc_finish_flags(enc, last ? TP_BF_END : 0, &b));
        ASSERT_OK(tp_pub_send(pub, b.data, b.len));
        tp_enc_delivered(enc, 1);
        while (tp_sub_recv(listed, &m, 0, &err) == 1)
            got_listed++;
        while (tp_sub_recv(self, &m, 0, &err) == 1)
            got_self++;
        got_other += (uint64_t)(tp_sub_recv(unlisted, &m, 10, &err) == 1);
        got_other += (uint64_t)(tp_sub_recv(anon, &m, 10, &err) == 1);
        tp_sub_stats_get(unlisted, &su);
        tp_sub_stats_get(anon, &sa);
        if (last) {
            sent++;
            break;
        }
    }
    for (double end = now_s() + 30; (got_listed < sent || got_self < sent) && now_s() < end;) {
        got_listed += (uint64_t)(tp_sub_recv(listed, &m, 10, &err) == 1);
        got_self += (uint64_t)(tp_sub_recv(self, &m, 10, &err) == 1);
    }
    ASSERT_UEQ(got_listed, sent);
    ASSERT_UEQ(got_self, sent);
    ASSERT_UEQ(got_other, 0);
    tp_sub *refused[] = {unlisted, anon};
    for (int i = 0; i < 2; i++) {
        tp_sub_stats st;
        tp_sub_stats_get(refused[i], &st);
        ASSERT_UEQ(st.received, 0);
        ASSERT_EQ(st.handshakes, 0);
        ASSERT_GT(st.client_refusals, 0);
        ASSERT(tp_sub_client_refused(refused[i]));
        ASSERT_STR_EQ(tp_sub_handshake_failed(refused[i]), ep);
    }
    int own;
    ASSERT_STR_EQ(tp_sub_client_key(unlisted, &own), bob.public_key);
    ASSERT_EQ(own, 1);
    ASSERT_NOT_NULL(tp_sub_client_key(anon, &own));
    ASSERT_EQ(own, 0);
    ASSERT_NULL(tp_sub_handshake_failed(listed));
    /* only the two admitted stay connected (the others' ends are counted as they come) */
    for (double end = now_s() + 20; tp_pub_poll(pub, NULL) != 2 && now_s() < end;)
        sleep_ms(5);
    ASSERT_EQ(tp_pub_poll(pub, NULL), 2);
    tp_buf_free(&b);
    tp_enc_destroy(&enc);
    tp_sub_destroy(&listed);
    tp_sub_destroy(&self);
    tp_sub_destroy(&unlisted);
    tp_sub_destroy(&anon);
    tp_pub_destroy(&pub);
}

/* A list of clients is a publisher's authorized_keys: keys one per line with a comment, as
 * `public-key = ` lines, comments and blanks; anything else is refused with its file and line,
 * and so are a secret key, a list every user may write to and an empty one. */
TEST(client_lists_read_keys_and_refuse_what_is_not_one) {
    tp_keypair k[4];
    err_msg err = {{0}};
    for (int i = 0; i < 4; i++)
        ASSERT_OK(tp_keypair_new(&k[i], &err));
    const char *path = task_path("clients.txt");
    char text[2048];
    /* three keys, one of them twice: 3 distinct; k[3] not listed */
    snprintf(text, sizeof text,
             "# who may watch the training job\n\n  %s alice@laptop\npublic-key = %s\n%s\t# bob again\n%s\n",
             k[0].public_key, k[1].public_key, k[1].public_key, k[2].public_key);
    write_text(path, text, 0644);
    tp_clients *c = tp_clients_load(path, &err);
    ASSERT_NOT_NULL(c);
    ASSERT_UEQ(tp_clients_count(c), 3);
    uint8_t bin[32];
    for (int i = 0; i < 4; i++) {
        ASSERT_NOT_NULL(zmq_z85_decode(bin, k[i].public_key));
        ASSERT_EQ(tp_clients_has(c, bin), i < 3);
    }
    tp_clients_destroy(&c);
    tp_clients_destroy(&c);
    struct {
        const char *text, *says;
        int code;
    } bad[] = {
        {"# a comment\nnot a key at all\n", "line 2: not a client key", ERR_MALFORMED},
        {"public-key = short\n", "line 1: the public-key is not a valid key", ERR_MALFORMED},
        {"", "holds no client key", ERR_MALFORMED},
        {"# nobody\n", "holds no client key", ERR_MALFORMED},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text(path, bad[i].text, 0644);
        ASSERT_NULL(tp_clients_load(path, &err));
        ASSERT_STR_CONTAINS(err.msg, bad[i].says);
        ASSERT_STR_CONTAINS(err.msg, path);
    }
    snprintf(text, sizeof text, "%s\npublic-key = %s\nsecret-key = %s\n", k[0].public_key, k[1].public_key,
             k[1].secret_key);
    write_text(path, text, 0644);
    ASSERT_NULL(tp_clients_load(path, &err));
    ASSERT_STR_CONTAINS(err.msg, "line 3 holds a secret key");
    ASSERT(strstr(err.msg, k[1].secret_key) == NULL);
    /* every user may write to it: whoever could add a key */
    snprintf(text, sizeof text, "%s\n", k[0].public_key);
    write_text(path, text, 0644);
    ASSERT_OK(chmod(path, 0666));
    ASSERT_NULL(tp_clients_load(path, &err));
    ASSERT_STR_CONTAINS(err.msg, "chmod o-w");
    /* a directory: its .pub files, not the others; none is an error, and so is one open to all */
    const char *dir = task_path("clients");
    ASSERT_OK(mkdir(dir, 0755));
    ASSERT_NULL(tp_clients_load(dir, &err));
    ASSERT_STR_CONTAINS(err.msg, "holds no .pub file");
    write_text(task_path("clients/README"), "not keys\n", 0644);
    char f[PATH_MAX];
    for (int i = 0; i < 2; i++) {
        snprintf(f, sizeof f, "%s/user%d", dir, i);
        ASSERT_OK(tp_keypair_save_client(&k[i], f, &err));
    }
    ASSERT_NOT_NULL((c = tp_clients_load(dir, &err)));
    ASSERT_UEQ(tp_clients_count(c), 2);
    tp_clients_destroy(&c);
    ASSERT_OK(chmod(dir, 0777));
    ASSERT_NULL(tp_clients_load(dir, &err));
    ASSERT_STR_CONTAINS(err.msg, "chmod o-w");
    ASSERT_OK(chmod(dir, 0755));
    ASSERT_NULL(tp_clients_load(task_path("absent"), &err));
    /* bounded: TP_CLIENTS_MAX keys are taken, one more is refused */
    size_t cap = (size_t)(TP_CLIENTS_MAX + 1) * (TP_KEY_Z85_LEN + 1) + 1, len = 0;
    char *big = malloc(cap);
    ASSERT_NOT_NULL(big);
    uint8_t raw[32] = {0};
    char z[TP_KEY_Z85_LEN + 1];
    for (uint32_t i = 0; i <= TP_CLIENTS_MAX; i++) {
        memcpy(raw, &i, sizeof i);
        ASSERT_NOT_NULL(zmq_z85_encode(z, raw, 32));
        len += (size_t)snprintf(big + len, cap - len, "%s\n", z);
    }
    write_text(path, big, 0644);
    ASSERT_NULL(tp_clients_load(path, &err));
    ASSERT_STR_CONTAINS(err.msg, "more than 10000 client keys");
    big[len - TP_KEY_Z85_LEN - 1] = '\0';
    write_text(path, big, 0644);
    ASSERT_NOT_NULL((c = tp_clients_load(path, &err)));
    ASSERT_UEQ(tp_clients_count(c), TP_CLIENTS_MAX);
    tp_clients_destroy(&c);
    free(big);
}

/* Keys on the client side only make sense with the server's key. */
TEST(client_key_needs_a_server_key_and_its_secret_half) {
    tp_keypair me;
    err_msg err = {{0}};
    ASSERT_OK(tp_keypair_new(&me, &err));
    ASSERT_NULL(tp_sub_new(&(tp_sub_opts){.client_key = &me}, &err));
    ASSERT_STR_CONTAINS(err.msg, "server's public key");
    tp_keypair half = me;
    memset(half.secret_key, 0, sizeof half.secret_key);
    ASSERT_NULL(tp_sub_new(&(tp_sub_opts){.server_key = me.public_key, .client_key = &half}, &err));
    ASSERT_STR_CONTAINS(err.msg, "secret half");
    /* and a publisher's list of clients only with its own keys */
    write_text(task_path("c.txt"), me.public_key, 0644);
    tp_clients *c = tp_clients_load(task_path("c.txt"), &err);
    ASSERT_NOT_NULL(c);
    ASSERT_NULL(tp_pub_new(&(tp_pub_opts){.endpoint = "tcp://127.0.0.1:*", .clients = c}, &err));
    ASSERT_STR_CONTAINS(err.msg, "needs the server's CURVE keys");
    tp_clients_destroy(&c);
}

TEST(keygen_verb_writes_keys_and_refuses_to_overwrite) {
    char out[4096], base[PATH_MAX];
    snprintf(base, sizeof base, "%s", task_path("server"));
    const char *argv[] = {task_synctop(), "keygen", "-o", base, NULL};
    ASSERT_EQ(run_capture(argv, out, sizeof out), 0);
    fprintf(stderr, "%s", out);
    err_msg err = {{0}};
    tp_keypair kp;
    char path[PATH_MAX + 8];
    snprintf(path, sizeof path, "%s.key", base);
    ASSERT_OK(tp_keypair_load(&kp, path, &err));
    ASSERT_STR_CONTAINS(out, kp.public_key);
    struct stat st;
    ASSERT_OK(stat(path, &st));
    ASSERT_EQ(st.st_mode & 0777, 0600);
    snprintf(path, sizeof path, "%s.pub", base);
    ASSERT_OK(stat(path, &st));
    ASSERT_EQ(st.st_mode & 0777, 0644);

    ASSERT_EQ(run_capture(argv, out, sizeof out), 1);
    ASSERT_STR_CONTAINS(out, "refusing to overwrite");
    const char *help[] = {task_synctop(), "keygen", "--help", NULL};
    ASSERT_EQ(run_capture(help, out, sizeof out), 0);
    ASSERT_STR_CONTAINS(out, "usage: synctop keygen");
    const char *bad[] = {task_synctop(), "keygen", "--frobnicate", NULL};
    ASSERT_EQ(run_capture(bad, out, sizeof out), 2);
}

/* `synctop keygen --client` puts this user's pair where the viewing verbs look for it (the XDG
 * config directory, made private), as ssh-keygen does ~/.ssh/id_*; never over an existing one. */
TEST(keygen_client_writes_this_users_key_where_the_verbs_find_it) {
    char out[4096], path[PATH_MAX];
    ASSERT_OK(setenv("XDG_CONFIG_HOME", task_path("config"), 1));
    const char *argv[] = {task_synctop(), "keygen", "--client", NULL};
    ASSERT_EQ(run_capture(argv, out, sizeof out), 0);
    snprintf(path, sizeof path, "%s", task_path("config/synctop/client.key"));
    err_msg err = {{0}};
    tp_keypair kp;
    ASSERT_OK(tp_keypair_load(&kp, path, &err));
    ASSERT_NE(kp.secret_key[0], '\0');
    ASSERT_STR_CONTAINS(out, kp.public_key);
    char text[1024];
    FILE *f = fopen(path, "r");
    ASSERT_NOT_NULL(f);
    text[fread(text, 1, sizeof text - 1, f)] = '\0';
    fclose(f);
    ASSERT_STR_CONTAINS(text, "client key pair");
    struct stat st;
    ASSERT_OK(stat(task_path("config/synctop"), &st));
    ASSERT_EQ(st.st_mode & 0777, 0700);
    ASSERT_OK(stat(path, &st));
    ASSERT_EQ(st.st_mode & 0777, 0600);
    tp_keypair pub;
    ASSERT_OK(tp_keypair_load(&pub, task_path("config/synctop/client.pub"), &err));
    ASSERT_STR_EQ(pub.public_key, kp.public_key);
    ASSERT_EQ(run_capture(argv, out, sizeof out), 1);
    ASSERT_STR_CONTAINS(out, "refusing to overwrite");
    ASSERT_OK(tp_keypair_load(&pub, path, &err));
    ASSERT_STR_EQ(pub.secret_key, kp.secret_key);
}

/* `synctop record` against a publisher that admits listed clients: with a listed --client-key it
 * records everything; with a key that is not listed, or none (a throwaway one), it records
 * nothing and says which it is and what to do. */
TEST(record_with_a_client_key_the_publisher_lists_and_without) {
    tp_keypair srv, alice, bob;
    err_msg err = {{0}};
    make_keys("srv", &srv);
    ASSERT_OK(tp_keypair_new(&alice, &err));
    ASSERT_OK(tp_keypair_new(&bob, &err));
    ASSERT_OK(tp_keypair_save_client(&alice, task_path("alice"), &err));
    ASSERT_OK(tp_keypair_save_client(&bob, task_path("bob"), &err));
    char list[200];
    snprintf(list, sizeof list, "%s alice\n", alice.public_key);
    write_text(task_path("clients.txt"), list, 0644);
    ASSERT_OK(mkdir(task_path("config"), 0700)); /* no client key of this user's */
    ASSERT_OK(setenv("XDG_CONFIG_HOME", task_path("config"), 1));
    char key[PATH_MAX], pub[PATH_MAX], clients[PATH_MAX], alice_key[PATH_MAX], bob_key[PATH_MAX];
    char *const paths[] = {key, pub, clients, alice_key, bob_key};
    const char *const names[] = {"srv.key", "srv.pub", "clients.txt", "alice.key", "bob.key"};
    for (int i = 0; i < 5; i++)
        snprintf(paths[i], PATH_MAX, "%s", task_path(names[i]));
    pubproc p;
    testpub_start(&p, (const char *[]){"--endpoint", "tcp://127.0.0.1:*", "--curve-key", key, "--clients", clients,
                                       "--events", "30000", "--seed", "4", "--wait-subscribers", "1", NULL});
    char out[8192], path[PATH_MAX];
    const char *b[] = {task_synctop(), "record", p.endpoint, "-o", task_path("bob.trace"), "--server-key", pub,
                       "--client-key", bob_key, "--duration", "1", NULL};
    ASSERT_EQ(run_capture(b, out, sizeof out), 1); /* it recorded nothing */
    ASSERT_STR_CONTAINS(out, "refused our client key");
    ASSERT_STR_CONTAINS(out, bob.public_key);
    ASSERT_STR_CONTAINS(out, "nothing was recorded: no publisher sent a batch (stopped: duration reached); no file "
                             "written");
    ASSERT(strstr(out, "wrote ") == NULL);
    /* no --server-key at all: the publisher is encrypted, and that is what to give */
    const char *c[] = {task_synctop(), "record", p.endpoint, "-o", task_path("clear.trace"), "--duration", "1", NULL};
    ASSERT_EQ(run_capture(c, out, sizeof out), 1);
    ASSERT_STR_CONTAINS(out, "refused our handshake: it publishes encrypted (CURVE); give --server-key");
    const char *n[] = {task_synctop(), "record", p.endpoint, "-o", task_path("anon.trace"), "--server-key", pub,
                       "--duration", "1", NULL};
    ASSERT_EQ(run_capture(n, out, sizeof out), 1);
    ASSERT_STR_CONTAINS(out, "we have no client key: make one with `synctop keygen --client`");
    ASSERT_STR_CONTAINS(out, "nothing was recorded");
    snprintf(path, sizeof path, "%s", task_path("alice.trace"));
    const char *a[] = {task_synctop(), "record", p.endpoint, "-o", path, "--server-key", pub, "--client-key",
                       alice_key, "--producers", "1", NULL};
    ASSERT_EQ(run_capture(a, out, sizeof out), 0);
    ASSERT_STR_CONTAINS(out, "30000 events");
    ASSERT(strstr(out, "refused") == NULL);
    testpub_finish(&p);
    ASSERT_UEQ(p.events, 30000);
    /* a client key goes with a server key, and must hold the secret half */
    const char *lone[] = {task_synctop(), "record", p.endpoint, "-o", task_path("x.trace"), "--client-key", alice_key,
                          NULL};
    ASSERT_EQ(run_capture(lone, out, sizeof out), 2);
    ASSERT_STR_CONTAINS(out, "--client-key goes with --server-key");
    snprintf(path, sizeof path, "%s", task_path("alice.pub"));
    const char *half[] = {task_synctop(), "record", p.endpoint, "-o", task_path("x.trace"), "--server-key", pub,
                          "--client-key", path, NULL};
    ASSERT_EQ(run_capture(half, out, sizeof out), 1);
    ASSERT_STR_CONTAINS(out, "is a public key: a client needs its .key file");
}
