/*
 * `synctop relay`, run as a user runs it: the real binary between synctop-testpub processes (the
 * tracer's stand-in on real ZeroMQ sockets) and a real subscriber, alone and behind a second relay
 * with CURVE. What arrives is checked against what each publisher says it sent and against the
 * number of events its seed makes; a viewer that arrives late must still be able to decode (its
 * subscription went up and the publishers answered with a keyframe). Clock offsets between hosts
 * are checked against skews the test gives the relays (SYNCTOP_TEST_CLOCK_SKEW_NS), never against
 * what synctop said before. The relays' summaries are checked against what the generator makes
 * (synth.h), recomputed here from its records.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "synctop/file.h"
#include "synctop/net.h"
#include "flood.h"
#include "synth.h"
#include "task.h"

/* ---- processes ---- */

static char *slurp(const char *path) {
    static char buf[1 << 16];
    buf[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return buf;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Waits until the file holds needle; returns the text from needle on. */
static const char *wait_text(const char *path, const char *needle, int timeout_s) {
    for (int i = 0; i < timeout_s * 100; i++) {
        const char *hit = strstr(slurp(path), needle);
        if (hit != NULL)
            return hit;
        task_sleep_ms(10);
    }
    TASK_FAIL_("waited %d s for \"%s\" in %s, which holds:\n%s", timeout_s, needle, path, slurp(path));
}

static const char *testpub_path(void) {
    static char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/synctop-testpub", task_bindir());
    return p;
}

/* A relay process; its endpoint, from the line it says when it listens. */
typedef struct relay_proc {
    pid_t pid;
    char err[PATH_MAX];
    char endpoint[TP_ENDPOINT_MAX];
} relay_proc;

/* The relay that argv starts (through a shell or not), its endpoint once it listens. */
static void relay_start_argv(relay_proc *r, const char *name, const char *const argv[]) {
    char out[PATH_MAX];
    snprintf(out, sizeof out, "%s", task_path(name));
    snprintf(r->err, sizeof r->err, "%s.err", out);
    r->pid = task_spawn(argv, out, r->err);
    const char *at = wait_text(r->err, "listening on ", 20) + strlen("listening on ");
    size_t len = strcspn(at, " ;\n");
    ASSERT_LT(len, sizeof r->endpoint);
    memcpy(r->endpoint, at, len);
    r->endpoint[len] = '\0';
}

static void relay_start(relay_proc *r, const char *name, const char *const extra[]) {
    const char *argv[24] = {task_synctop(), "relay", "--listen", "tcp://127.0.0.1:0"};
    int n = 4;
    for (; extra != NULL && extra[n - 4] != NULL; n++)
        argv[n] = extra[n - 4];
    argv[n] = NULL;
    relay_start_argv(r, name, argv);
}

/* Stops it as a user would (Ctrl-C): it must say what went through and exit 0. */
static const char *relay_stop(relay_proc *r) {
    kill(r->pid, SIGINT);
    ASSERT_EQ(task_wait_exit(r->pid, 20), 0);
    return slurp(r->err);
}

/* A testpub on its default endpoint (this test's private endpoint directory), seed seed. */
static pid_t testpub_start(int seed, int events, const char *out_name, const char *extra) {
    char s[16], e[16];
    snprintf(s, sizeof s, "%d", seed);
    snprintf(e, sizeof e, "%d", events);
    const char *argv[] = {testpub_path(), "--events", e, "--seed", s, "--wait-subscribers", "1", extra, NULL};
    char out[PATH_MAX];
    snprintf(out, sizeof out, "%s", task_path(out_name));
    char err[PATH_MAX + 8];
    snprintf(err, sizeof err, "%s.err", out);
    return task_spawn(argv, out, err);
}

/* ---- what a subscriber receives ---- */

typedef struct got {
    uint64_t producer[8], batches[8], events[8], keyframes[8];
    size_t n;
    uint64_t missed;
} got;

static size_t got_slot(got *g, uint64_t producer) {
    for (size_t i = 0; i < g->n; i++)
        if (g->producer[i] == producer)
            return i;
    ASSERT_LT(g->n, 8);
    g->producer[g->n] = producer;
    return g->n++;
}

/* Receives until every producer seen has ended and want producers were seen (or timeout_s). */
static void receive_all(tp_sub *sub, got *g, size_t want, int timeout_s) {
    memset(g, 0, sizeof *g);
    err_msg err = {{0}};
    tp_dec d;
    memset(&d, 0, sizeof d);
    time_t t0 = time(NULL);
    while (!(g->n >= want && tp_sub_all_ended(sub))) {
        if (time(NULL) - t0 > timeout_s)
            TASK_FAIL_("received from %zu of %zu producers in %d s", g->n, want, timeout_s);
        tp_sub_msg m;
        int rc = tp_sub_recv(sub, &m, 200, &err);
        if (rc <= 0)
            continue;
        size_t k = got_slot(g, m.hdr.producer);
        g->batches[k]++;
        g->keyframes[k] += (m.hdr.flags & TP_BF_KEYFRAME) != 0;
        g->missed += m.missed;
        ASSERT_OK(tp_dec_open(&d, m.data, m.len, &err));
        const tp_record *r;
        while ((r = tp_dec_next_record(&d)) != NULL)
            g->events[k] += !TP_KIND_IS_META(r->head.kind);
    }
    tp_dec_free(&d);
}

/* The "sent=N" a testpub says when it is done. */
static uint64_t sent_of(const char *out_name) {
    const char *at = wait_text(task_path(out_name), "sent=", 30);
    return strtoull(at + 5, NULL, 10);
}

static void private_endpoints(void) {
    /* this test's own endpoint directory: the relay finds these publishers and no others */
    ASSERT_OK(setenv("XDG_RUNTIME_DIR", task_tmpdir(), 1));
}

/* ---- tests ---- */

/* Two traced processes of the node, one relay, one viewer: every batch of each arrives once. */
TEST(relay_forwards_every_process_of_the_node) {
    private_endpoints();
    relay_proc r;
    relay_start(&r, "relay", NULL);
    pid_t p1 = testpub_start(3, 60000, "pub1.out", NULL), p2 = testpub_start(4, 30000, "pub2.out", NULL);
    err_msg err = {{0}};
    tp_sub *sub = tp_sub_new(NULL, &err);
    ASSERT_NOT_NULL(sub);
    ASSERT_OK(tp_sub_connect(sub, r.endpoint, &err));
    got g;
    receive_all(sub, &g, 2, 60);
    ASSERT_EQ(task_wait_exit(p1, 30), 0);
    ASSERT_EQ(task_wait_exit(p2, 30), 0);
    ASSERT_EQ(g.n, 2);
    ASSERT_UEQ(g.missed, 0);
    for (size_t k = 0; k < 2; k++) {
        /* testpub's producer id is its seed + 1 */
        int seed = g.producer[k] == 4 ? 3 : 4;
        ASSERT(g.producer[k] == 4 || g.producer[k] == 5);
        ASSERT_UEQ(g.events[k], seed == 3 ? 60000 : 30000);
        ASSERT_UEQ(g.batches[k], sent_of(seed == 3 ? "pub1.out" : "pub2.out"));
    }
    tp_sub_destroy(&sub);
    char want[64];
    for (int i = 0; i < 2; i++) { /* the relay says each one that ended */
        snprintf(want, sizeof want, "- process %ld ended", (long)(i ? p2 : p1));
        wait_text(r.err, want, 30);
    }
    const char *said = relay_stop(&r);
    snprintf(want, sizeof want, "+ process %ld", (long)p1);
    ASSERT_STR_CONTAINS(said, want);
    snprintf(want, sizeof want, "+ process %ld", (long)p2);
    ASSERT_STR_CONTAINS(said, want);
    ASSERT_STR_CONTAINS(said, "from 2 publishers");
}

/* A viewer that arrives while the processes publish gets a keyframe of each: its subscription
 * went up through the relay (the publisher sends keyframes only when asked, or after a loss). The
 * relay may pass it a batch or two before that keyframe, sent before the subscription arrived. */
TEST(a_late_viewer_gets_a_keyframe_through_the_relay) {
    private_endpoints();
    relay_proc r;
    relay_start(&r, "relay", NULL);
    const char *argv[] = {testpub_path(), "--events", "40000", "--seed", "7", "--wait-subscribers", "1",
                          "--rate", "20000", "--batch", "500", NULL};
    char out[PATH_MAX];
    snprintf(out, sizeof out, "%s", task_path("pub.out"));
    pid_t p = task_spawn(argv, out, task_path("pub.err"));
    err_msg err = {{0}};
    tp_sub *first = tp_sub_new(NULL, &err);
    ASSERT_NOT_NULL(first);
    ASSERT_OK(tp_sub_connect(first, r.endpoint, &err));
    tp_sub_msg m;
    int seen = 0;
    for (int i = 0; i < 100 && seen < 5; i++)
        seen += tp_sub_recv(first, &m, 100, &err) == 1;
    ASSERT_GE(seen, 5); /* it is publishing */
    tp_sub *late = tp_sub_new(NULL, &err);
    ASSERT_NOT_NULL(late);
    ASSERT_OK(tp_sub_connect(late, r.endpoint, &err));
    got g;
    receive_all(late, &g, 1, 60);
    ASSERT_EQ(task_wait_exit(p, 30), 0);
    ASSERT_GE(g.keyframes[0], 1);
    ASSERT_GT(g.events[0], 0);
    ASSERT_LT(g.events[0], 40000); /* it came in the middle */
    tp_sub_destroy(&first);
    tp_sub_destroy(&late);
    relay_stop(&r);
}

/* Receives through sub all that the testpub p of seed 5 sends (50000 events; its counts in pub.out). */
static void receive_seed5(tp_sub *sub, pid_t p) {
    got g;
    receive_all(sub, &g, 1, 60);
    ASSERT_EQ(task_wait_exit(p, 30), 0);
    ASSERT_UEQ(g.producer[0], 6);
    ASSERT_UEQ(g.events[0], 50000);
    ASSERT_UEQ(g.batches[0], sent_of("pub.out"));
    ASSERT_UEQ(g.missed, 0);
}

/* Waits (20 s at most) until the relay refused bad's handshake; nothing came meanwhile. */
static void wait_refused(tp_sub *bad) {
    err_msg err = {{0}};
    tp_sub_msg m;
    for (int i = 0; i < 200 && tp_sub_handshake_failed(bad) == NULL; i++)
        ASSERT_LE(tp_sub_recv(bad, &m, 100, &err), 0);
    tp_sub_stats bs;
    tp_sub_stats_get(bad, &bs);
    ASSERT_GT(bs.handshake_failures, 0);
    ASSERT_UEQ(bs.received, 0);
}

/* node relay -> a second relay with CURVE -> viewers: the right key receives it all, a wrong one
 * is refused in the handshake; the second relay records what went through. */
TEST(relays_chain_with_curve_and_record) {
    private_endpoints();
    err_msg err = {{0}};
    tp_keypair kp, other;
    ASSERT_OK(tp_keypair_new(&kp, &err));
    ASSERT_OK(tp_keypair_new(&other, &err));
    char base[PATH_MAX], key[PATH_MAX + 8], rec[PATH_MAX];
    snprintf(base, sizeof base, "%s", task_path("server"));
    snprintf(key, sizeof key, "%s.key", base);
    snprintf(rec, sizeof rec, "%s", task_path("relayed.trace"));
    ASSERT_OK(tp_keypair_save(&kp, base, &err));
    relay_proc node;
    relay_start(&node, "node", NULL);
    relay_proc top;
    const char *extra[] = {"--key", key, "--record", rec, node.endpoint, NULL};
    relay_start(&top, "top", extra);
    ASSERT_STR_CONTAINS(slurp(top.err), "(CURVE)");
    /* keys without a list of clients: said, since whoever has the .pub file can watch */
    ASSERT_STR_CONTAINS(slurp(top.err), "--key without --clients: whoever has the public key of");
    pid_t p = testpub_start(5, 50000, "pub.out", NULL);
    tp_sub_opts wrong = {.server_key = other.public_key};
    tp_sub *bad = tp_sub_new(&wrong, &err);
    ASSERT_NOT_NULL(bad);
    ASSERT_OK(tp_sub_connect(bad, top.endpoint, &err));
    tp_sub_opts right = {.server_key = kp.public_key};
    tp_sub *sub = tp_sub_new(&right, &err);
    ASSERT_NOT_NULL(sub);
    ASSERT_OK(tp_sub_connect(sub, top.endpoint, &err));
    receive_seed5(sub, p);
    /* the wrong key: refused, nothing received */
    wait_refused(bad);
    tp_sub_destroy(&bad);
    tp_sub_destroy(&sub);
    const char *said = relay_stop(&top);
    ASSERT_STR_CONTAINS(said, "recorded in");
    relay_stop(&node);
    /* the recording holds every event */
    char cmd[PATH_MAX * 2];
    snprintf(cmd, sizeof cmd, "'%s' info --json '%s' > '%s'", task_synctop(), rec, task_path("info.json"));
    ASSERT_EQ(system(cmd), 0);
    ASSERT_STR_CONTAINS(slurp(task_path("info.json")), "\"events\": 50000,");
}

/* Keys both ways through a relay: the publisher admits only the relay's client key (this user's
 * default one, which `synctop keygen --client` writes), the relay only the viewers its --clients
 * lists. A listed viewer gets every event; one that is not listed gets nothing and learns that its
 * client key was refused. */
TEST(relay_admits_listed_clients_and_is_admitted_upstream_with_its_own_key) {
    private_endpoints();
    err_msg err = {{0}};
    ASSERT_OK(setenv("XDG_CONFIG_HOME", task_path("config"), 1));
    char cmd[PATH_MAX * 3];
    snprintf(cmd, sizeof cmd, "'%s' keygen --client > '%s' 2>&1", task_synctop(), task_path("keygen.out"));
    ASSERT_EQ(system(cmd), 0);
    tp_keypair up, srv, alice, bob, relay_client;
    ASSERT_OK(tp_keypair_load(&relay_client, task_path("config/synctop/client.key"), &err));
    ASSERT_OK(tp_keypair_new(&up, &err));
    ASSERT_OK(tp_keypair_new(&srv, &err));
    ASSERT_OK(tp_keypair_new(&alice, &err));
    ASSERT_OK(tp_keypair_new(&bob, &err));
    ASSERT_OK(tp_keypair_save(&up, task_path("up"), &err));
    ASSERT_OK(tp_keypair_save(&srv, task_path("srv"), &err));
    /* the publisher's list: a file holding the relay's key; the relay's: a directory */
    FILE *f = fopen(task_path("up-clients.txt"), "w");
    ASSERT_NOT_NULL(f);
    fprintf(f, "# the node's relay\n%s relay@node\n", relay_client.public_key);
    fclose(f);
    ASSERT_OK(mkdir(task_path("down"), 0755));
    ASSERT_OK(tp_keypair_save_client(&alice, task_path("down/alice"), &err));
    enum { UP_KEY, UP_PUB, UP_CLIENTS, SRV_KEY, DOWN, N_PATHS };
    static const char *const names[N_PATHS] = {"up.key", "up.pub", "up-clients.txt", "srv.key", "down"};
    char path[N_PATHS][PATH_MAX];
    for (int i = 0; i < N_PATHS; i++)
        snprintf(path[i], sizeof path[i], "%s", task_path(names[i]));
    const char *pub_argv[] = {testpub_path(), "--events", "50000", "--seed", "5", "--wait-subscribers", "1",
                              "--curve-key", path[UP_KEY], "--clients", path[UP_CLIENTS], NULL};
    pid_t p = task_spawn(pub_argv, task_path("pub.out"), task_path("pub.out.err"));
    relay_proc top;
    const char *extra[] = {"--key", path[SRV_KEY], "--clients", path[DOWN], "--server-key", path[UP_PUB], NULL};
    relay_start(&top, "top", extra);
    ASSERT_STR_CONTAINS(slurp(top.err), "(CURVE, listed clients only)");
    ASSERT(strstr(slurp(top.err), "without --clients") == NULL);
    tp_sub *bad = tp_sub_new(&(tp_sub_opts){.server_key = srv.public_key, .client_key = &bob}, &err);
    ASSERT_NOT_NULL(bad);
    ASSERT_OK(tp_sub_connect(bad, top.endpoint, &err));
    tp_sub *sub = tp_sub_new(&(tp_sub_opts){.server_key = srv.public_key, .client_key = &alice}, &err);
    ASSERT_NOT_NULL(sub);
    ASSERT_OK(tp_sub_connect(sub, top.endpoint, &err));
    receive_seed5(sub, p);
    wait_refused(bad);
    ASSERT(tp_sub_client_refused(bad));
    tp_sub_destroy(&bad);
    tp_sub_destroy(&sub);
    relay_stop(&top);
}

/* record behind a relay: producers start when the recorder subscribes and may finish one by one,
 * so --producers N waits for all N. */
TEST(record_through_a_relay_waits_for_the_producers_asked_for) {
    private_endpoints();
    relay_proc r;
    relay_start(&r, "relay", NULL);
    pid_t p1 = testpub_start(3, 20000, "pub1.out", NULL);
    char out[PATH_MAX], rec[PATH_MAX];
    snprintf(rec, sizeof rec, "%s", task_path("job.trace"));
    snprintf(out, sizeof out, "%s", task_path("record.out"));
    const char *argv[] = {task_synctop(), "record", r.endpoint, "--producers", "2", "-o", rec, NULL};
    pid_t recorder = task_spawn(argv, out, task_path("record.err"));
    /* the second rank starts after the first has finished and the recorder has written all of it
     * (the file, read as it grows, holds its 20000 events): the recorder is then waiting for more */
    ASSERT_EQ(task_wait_exit(p1, 30), 0);
    char cmd[PATH_MAX * 2];
    snprintf(cmd, sizeof cmd, "'%s' info --json '%s' > '%s' 2>&1", task_synctop(), rec, task_path("info.json"));
    for (int i = 0;; i++) {
        if (system(cmd) == 0 && strstr(slurp(task_path("info.json")), "\"events\": 20000,") != NULL)
            break;
        if (i == 600)
            TASK_FAIL_("the recording never held the first rank's 20000 events: %s", slurp(task_path("info.json")));
        task_sleep_ms(50);
    }
    pid_t p2 = testpub_start(4, 10000, "pub2.out", NULL);
    ASSERT_EQ(task_wait_exit(p2, 30), 0);
    ASSERT_EQ(task_wait_exit(recorder, 30), 0);
    ASSERT_STR_CONTAINS(slurp(task_path("record.err")), "stopped: the producers asked for finished");
    ASSERT_EQ(system(cmd), 0);
    ASSERT_STR_CONTAINS(slurp(task_path("info.json")), "\"events\": 30000,");
    relay_stop(&r);
}

/* A relay that dies and starts again on the same port is found again by the viewer (ZeroMQ
 * reconnects), and the processes that start after it are picked up. */
TEST(a_restarted_relay_and_new_processes_are_picked_up) {
    private_endpoints();
    relay_proc r;
    int port = task_free_port();
    ASSERT_GT(port, 0);
    char fixed[64];
    snprintf(fixed, sizeof fixed, "tcp://127.0.0.1:%d", port);
    const char *first[] = {"--listen", fixed, NULL}; /* a later --listen wins */
    relay_start(&r, "relay1", first);
    err_msg err = {{0}};
    tp_sub *sub = tp_sub_new(NULL, &err);
    ASSERT_NOT_NULL(sub);
    ASSERT_OK(tp_sub_connect(sub, r.endpoint, &err));
    pid_t p1 = testpub_start(21, 20000, "pub1.out", NULL);
    got g;
    receive_all(sub, &g, 1, 60);
    ASSERT_EQ(task_wait_exit(p1, 30), 0);
    ASSERT_UEQ(g.events[0], 20000);
    /* the relay is killed; a new one binds the same port */
    kill(r.pid, SIGKILL);
    ASSERT_EQ(task_wait_exit(r.pid, 20), 128 + SIGKILL);
    char listen[TP_ENDPOINT_MAX];
    snprintf(listen, sizeof listen, "%s", r.endpoint);
    relay_proc again;
    const char *argv[] = {task_synctop(), "relay", "--listen", listen, NULL};
    snprintf(again.err, sizeof again.err, "%s", task_path("relay2.err"));
    again.pid = task_spawn(argv, task_path("relay2.out"), again.err);
    wait_text(again.err, "listening on", 20);
    /* a process that starts now: the new relay finds it, the old subscriber hears it */
    pid_t p2 = testpub_start(22, 10000, "pub2.out", NULL);
    got g2;
    receive_all(sub, &g2, 1, 60);
    ASSERT_EQ(task_wait_exit(p2, 30), 0);
    ASSERT_UEQ(g2.producer[0], 23);
    ASSERT_UEQ(g2.events[0], 10000);
    tp_sub_destroy(&sub);
    relay_stop(&again);
}

/* Two nodes (each its own endpoint directory), a relay each; record takes both from a file that
 * lists them, as a job's launcher would write it. */
TEST(record_takes_a_jobs_relays_from_a_file) {
    char node[2][PATH_MAX];
    relay_proc r[2];
    pid_t pub[2];
    for (int i = 0; i < 2; i++) {
        snprintf(node[i], sizeof node[i], "%s", task_path(i ? "node2" : "node1"));
        ASSERT_OK(mkdir(node[i], 0700));
        ASSERT_OK(setenv("XDG_RUNTIME_DIR", node[i], 1));
        relay_start(&r[i], i ? "relay2" : "relay1", NULL);
        pub[i] = testpub_start(10 + i, 20000 * (i + 1), i ? "pub2.out" : "pub1.out", NULL);
    }
    char list[PATH_MAX], rec[PATH_MAX];
    snprintf(list, sizeof list, "%s", task_path("relays.txt"));
    snprintf(rec, sizeof rec, "%s", task_path("job.trace"));
    FILE *f = fopen(list, "w");
    ASSERT_NOT_NULL(f);
    fprintf(f, "# the job's relays\n%s\n\n  %s  \n", r[0].endpoint, r[1].endpoint);
    fclose(f);
    const char *argv[] = {task_synctop(), "record", "--from", list, "--producers", "2", "-o", rec, NULL};
    pid_t recorder = task_spawn(argv, task_path("record.out"), task_path("record.err"));
    ASSERT_EQ(task_wait_exit(recorder, 60), 0);
    for (int i = 0; i < 2; i++)
        ASSERT_EQ(task_wait_exit(pub[i], 30), 0);
    char cmd[PATH_MAX * 2];
    snprintf(cmd, sizeof cmd, "'%s' info --json '%s' > '%s'", task_synctop(), rec, task_path("info.json"));
    ASSERT_EQ(system(cmd), 0);
    ASSERT_STR_CONTAINS(slurp(task_path("info.json")), "\"events\": 60000,");
    for (int i = 0; i < 2; i++)
        relay_stop(&r[i]);
    /* a missing list is a usage error that names it */
    const char *bad[] = {task_synctop(), "record", "--from", task_path("nope.txt"), "-o", rec, NULL};
    pid_t b = task_spawn(bad, task_path("bad.out"), task_path("bad.err"));
    ASSERT_EQ(task_wait_exit(b, 20), 2);
    ASSERT_STR_CONTAINS(slurp(task_path("bad.err")), "nope.txt: No such file or directory");
}

TEST(relay_refuses_what_it_must) {
    const char *argv[] = {task_synctop(), "relay", "--listen", "tcp://0.0.0.0:0", NULL};
    pid_t pid = task_spawn(argv, task_path("a.out"), task_path("a.err"));
    ASSERT_EQ(task_wait_exit(pid, 20), 2);
    ASSERT_STR_CONTAINS(slurp(task_path("a.err")), "--listen tcp://0.0.0.0:0 is not a loopback address");
    ASSERT_STR_CONTAINS(slurp(task_path("a.err")), "give --key node.key (viewers: --server-key node.pub)");
    const char *none[] = {task_synctop(), "relay", NULL};
    pid = task_spawn(none, task_path("b.out"), task_path("b.err"));
    ASSERT_EQ(task_wait_exit(pid, 20), 2);
    ASSERT_STR_CONTAINS(slurp(task_path("b.err")), "no --listen endpoint given");
    /* attach --from: a missing list, and a list with a bad entry, are said before any viewer */
    const char *nolist[] = {task_synctop(), "attach", "--from", task_path("none.txt"), NULL};
    pid = task_spawn(nolist, task_path("c.out"), task_path("c.err"));
    ASSERT_EQ(task_wait_exit(pid, 20), 2);
    ASSERT_STR_CONTAINS(slurp(task_path("c.err")), "none.txt: No such file or directory");
    FILE *f = fopen(task_path("list.txt"), "w");
    ASSERT_NOT_NULL(f);
    fputs("# relays\ntcp://nohost\n", f);
    fclose(f);
    const char *badlist[] = {task_synctop(), "attach", "--from", task_path("list.txt"), NULL};
    pid = task_spawn(badlist, task_path("d.out"), task_path("d.err"));
    ASSERT_EQ(task_wait_exit(pid, 20), 2); /* not an endpoint: a bad argument, as on the command line */
    ASSERT_STR_CONTAINS(slurp(task_path("d.err")), "tcp://nohost");
}

/* ---- clocks through relays ---- */

/* A relay that plays a host of its own: that name in its clock answers, its clock skewed by
 * skew_ns. */
static void relay_start_as(relay_proc *r, const char *name, const char *host, long long skew_ns,
                           const char *const extra[]) {
    char skew[32];
    snprintf(skew, sizeof skew, "%lld", skew_ns);
    ASSERT_OK(setenv("SYNCTOP_TEST_HOST", host, 1));
    ASSERT_OK(setenv("SYNCTOP_TEST_CLOCK_SKEW_NS", skew, 1));
    relay_start(r, name, extra);
    unsetenv("SYNCTOP_TEST_HOST");
    unsetenv("SYNCTOP_TEST_CLOCK_SKEW_NS");
}

/* Receives (batches or nothing) until want relays answered (or timeout_s); returns how many did. */
static size_t clocks_wait(tp_sub *sub, size_t want, int timeout_s) {
    err_msg err = {{0}};
    time_t t0 = time(NULL);
    while (tp_sub_clock_count(sub) < want && time(NULL) - t0 <= timeout_s) {
        tp_sub_msg m;
        tp_sub_recv(sub, &m, 50, &err);
    }
    return tp_sub_clock_count(sub);
}

/* The best answer of the relays of this host (the one of least uncertainty), or fails. */
static tp_sub_clock clock_of_host(tp_sub *sub, const char *host, uint64_t not_relay) {
    tp_sub_clock best;
    memset(&best, 0, sizeof best);
    int found = 0;
    for (size_t i = 0; i < tp_sub_clock_count(sub); i++) {
        tp_sub_clock c;
        ASSERT_OK(tp_sub_clock_get(sub, i, &c));
        if (strcmp(c.host, host) == 0 && c.relay != not_relay && (!found || c.uncertainty_ns < best.uncertainty_ns)) {
            best = c;
            found = 1;
        }
    }
    if (!found)
        TASK_FAIL_("no clock answer from host %s", host);
    return best;
}

/* The offset measured must hold the skew the relay was given, within the uncertainty stated; and
 * that uncertainty must be small enough to tell the hosts of the test apart: under half the
 * smallest difference of their skews (1.75 s, sim-top's 1.25 s against node a's 3 s). */
static void assert_offset(const tp_sub_clock *c, long long skew_ns) {
    long long off = (long long)c->offset_ns, d = off > skew_ns ? off - skew_ns : skew_ns - off;
    if ((unsigned long long)d > c->uncertainty_ns)
        TASK_FAIL_("host %s: measured %lld ns ± %llu, but its clock is %lld ns off", c->host, off,
                   (unsigned long long)c->uncertainty_ns, skew_ns);
    ASSERT_LT(c->uncertainty_ns, 875000000);
    ASSERT_GE(c->exchanges, 1);
}

/* The test's own clock, the one the subscriber stamps its clock requests and answers with. */
static uint64_t real_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A bound that owes nothing to the uncertainty the code states: every exchange behind c was asked
 * and answered between w0 and w1 on the test's own clock. The relay stamped its answer with our
 * clock plus its skew at some moment between the two, so the skew lies in [t2 - t3, t1 - t0] of
 * each exchange, an interval no wider than the window, and the offset measured, its middle, is
 * within half the window of the skew; so is the uncertainty stated (half the interval, aged by
 * 15 ppm of its age, under the window too). On loopback the window is the time the answers took
 * to come, milliseconds where the tolerance above allows 875 ms. */
static void assert_offset_in_window(const tp_sub_clock *c, long long skew_ns, uint64_t w0, uint64_t w1) {
    long long off = (long long)c->offset_ns, d = off > skew_ns ? off - skew_ns : skew_ns - off;
    uint64_t half = (w1 - w0) / 2 + 1, aged = half + (w1 - w0) / 66666 + 1;
    fprintf(stderr, "host %s: measured %lld ns off (its skew %lld) in a window of %.3f ms\n", c->host, off, skew_ns,
            (double)(w1 - w0) / 1e6);
    if ((uint64_t)d > half)
        TASK_FAIL_("host %s: measured %lld ns, %lld ns from its skew %lld, in a window of %" PRIu64 " ns", c->host, off,
                   d, skew_ns, w1 - w0);
    ASSERT(c->uncertainty_ns <= aged);
}

/* Two nodes, each a relay with its own clock and two processes, under a third relay on a third
 * clock; the viewer connects to the top one only. Each relay's offset is recovered within the
 * uncertainty stated, through one relay or two, while batches flow; a node relay that restarts on
 * a clock stepped meanwhile is measured again. */
TEST(clock_offsets_of_hosts_are_measured_through_two_relays) {
    static const long long skew_a = 3000000000LL, skew_b = -2000000000LL, skew_top = 1250000000LL,
                           skew_a2 = 7000000000LL;
    char node[2][PATH_MAX];
    relay_proc nr[2];
    pid_t pub[4];
    for (int i = 0; i < 2; i++) {
        snprintf(node[i], sizeof node[i], "%s", task_path(i ? "node-b" : "node-a"));
        ASSERT_OK(mkdir(node[i], 0700));
        ASSERT_OK(setenv("XDG_RUNTIME_DIR", node[i], 1));
        /* node a's relay restarts below on the same endpoint: an ipc path of this test's own, which
         * no other process can take in between as it could a tcp port */
        char listen[TP_ENDPOINT_MAX];
        snprintf(listen, sizeof listen, "ipc://%s", task_path("relay-a.sock"));
        const char *on_ipc[] = {"--listen", listen, NULL};
        relay_start_as(&nr[i], i ? "relay-b" : "relay-a", i ? "sim-node-b" : "sim-node-a", i ? skew_b : skew_a,
                       i ? NULL : on_ipc);
        pub[2 * i] = testpub_start(30 + 2 * i, 200000, i ? "pub-b1.out" : "pub-a1.out", NULL);
        pub[2 * i + 1] = testpub_start(31 + 2 * i, 200000, i ? "pub-b2.out" : "pub-a2.out", NULL);
    }
    relay_proc top;
    const char *extra[] = {nr[0].endpoint, nr[1].endpoint, NULL};
    relay_start_as(&top, "relay-top", "sim-top", skew_top, extra);
    err_msg err = {{0}};
    tp_sub *sub = tp_sub_new(NULL, &err);
    ASSERT_NOT_NULL(sub);
    uint64_t w0 = real_now_ns();
    ASSERT_OK(tp_sub_connect(sub, top.endpoint, &err));
    ASSERT_EQ(clocks_wait(sub, 3, 30), 3);
    {
        tp_sub_clock a = clock_of_host(sub, "sim-node-a", 0), b = clock_of_host(sub, "sim-node-b", 0),
                     t = clock_of_host(sub, "sim-top", 0);
        uint64_t w1 = real_now_ns();
        assert_offset_in_window(&a, skew_a, w0, w1);
        assert_offset_in_window(&b, skew_b, w0, w1);
        assert_offset_in_window(&t, skew_top, w0, w1);
    }
    /* a few more exchanges, batches flowing meanwhile */
    got g;
    receive_all(sub, &g, 4, 60);
    for (int i = 0; i < 4; i++)
        ASSERT_EQ(task_wait_exit(pub[i], 30), 0);
    ASSERT_EQ(g.n, 4);
    tp_sub_clock a = clock_of_host(sub, "sim-node-a", 0), b = clock_of_host(sub, "sim-node-b", 0),
                 t = clock_of_host(sub, "sim-top", 0);
    assert_offset(&a, skew_a);
    assert_offset(&b, skew_b);
    assert_offset(&t, skew_top);
    ASSERT_EQ(tp_sub_clock_count(sub), 3);

    /* node a's relay dies; one starts on the same port with the host's clock stepped: the top relay
     * reconnects to it and the viewer measures it anew (a new relay id on that host) */
    kill(nr[0].pid, SIGKILL);
    ASSERT_EQ(task_wait_exit(nr[0].pid, 20), 128 + SIGKILL);
    char ep[TP_ENDPOINT_MAX];
    snprintf(ep, sizeof ep, "%s", nr[0].endpoint);
    ASSERT_OK(setenv("XDG_RUNTIME_DIR", node[0], 1));
    ASSERT_OK(setenv("SYNCTOP_TEST_HOST", "sim-node-a", 1));
    char skew[32];
    snprintf(skew, sizeof skew, "%lld", skew_a2);
    ASSERT_OK(setenv("SYNCTOP_TEST_CLOCK_SKEW_NS", skew, 1));
    const char *argv[] = {task_synctop(), "relay", "--listen", ep, NULL};
    relay_proc again;
    snprintf(again.err, sizeof again.err, "%s", task_path("relay-a2.err"));
    w0 = real_now_ns(); /* the new relay answers nothing before it starts */
    again.pid = task_spawn(argv, task_path("relay-a2.out"), again.err);
    unsetenv("SYNCTOP_TEST_HOST");
    unsetenv("SYNCTOP_TEST_CLOCK_SKEW_NS");
    wait_text(again.err, "listening on", 20);
    ASSERT_EQ(clocks_wait(sub, 4, 30), 4);
    tp_sub_clock a2 = clock_of_host(sub, "sim-node-a", a.relay);
    assert_offset_in_window(&a2, skew_a2, w0, real_now_ns());
    ASSERT(a2.relay != a.relay);
    assert_offset(&a2, skew_a2);
    /* and a process that starts there now comes through the restarted relay */
    pid_t p = testpub_start(40, 20000, "pub-a3.out", NULL);
    got g2;
    receive_all(sub, &g2, 1, 60);
    ASSERT_EQ(task_wait_exit(p, 30), 0);
    ASSERT_UEQ(g2.producer[0], 41);
    ASSERT_UEQ(g2.events[0], 20000);
    tp_sub_destroy(&sub);
    ASSERT_STR_CONTAINS(relay_stop(&top), "clock requests answered");
    relay_stop(&again);
    relay_stop(&nr[1]);
}

/* Clock answers come from whoever is upstream, so they are checked: an answer to a request this
 * subscriber did not make, one that claims the relay held the request longer than the round trip
 * took, one with a host name that is not printable, and ones whose lengths disagree are ignored
 * (those that do not decode are counted as malformed); a sound one is taken. The "relay" here is a bare XPUB socket that answers by hand. */
TEST(forged_clock_answers_are_ignored) {
    err_msg err = {{0}};
    void *ctx = zmq_ctx_new();
    void *x = zmq_socket(ctx, ZMQ_XPUB);
    ASSERT_NOT_NULL(x);
    int one = 1, zero = 0;
    ASSERT_OK(zmq_setsockopt(x, ZMQ_XPUB_VERBOSE, &one, sizeof one));
    ASSERT_OK(zmq_setsockopt(x, ZMQ_LINGER, &zero, sizeof zero));
    ASSERT_OK(zmq_bind(x, "tcp://127.0.0.1:*"));
    char ep[TP_ENDPOINT_MAX];
    size_t eplen = sizeof ep;
    ASSERT_OK(zmq_getsockopt(x, ZMQ_LAST_ENDPOINT, ep, &eplen));
    tp_sub *sub = tp_sub_new(NULL, &err);
    ASSERT_NOT_NULL(sub);
    ASSERT_OK(tp_sub_connect(sub, ep, &err));
    /* the subscriber's first clock request, as it arrives upstream: 1, "synctop-clock?", nonce */
    uint8_t note[64];
    uint64_t nonce = 0;
    for (int i = 0; i < 200 && nonce == 0; i++) {
        tp_sub_msg m;
        tp_sub_recv(sub, &m, 10, &err);
        int n = zmq_recv(x, note, sizeof note, ZMQ_DONTWAIT);
        if (n == 23 && note[0] == 1 && memcmp(note + 1, "synctop-clock?", 14) == 0)
            for (int k = 0; k < 8; k++)
                nonce |= (uint64_t)note[15 + k] << (8 * k);
    }
    ASSERT_NE(nonce, 0);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t t = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
    /* answer: tag, nonce, t1, t2, relay id, host length, host */
    uint8_t msg[128];
    size_t len;
#define ANSWER(NONCE, T1, T2, RELAY, HOST, HLEN)                                                   \
    do {                                                                                           \
        uint64_t f_[4] = {(NONCE), (T1), (T2), (RELAY)};                                           \
        memcpy(msg, "synctop-clock!", 14);                                                         \
        for (int j_ = 0; j_ < 4; j_++)                                                             \
            for (int k_ = 0; k_ < 8; k_++)                                                         \
                msg[14 + 8 * j_ + k_] = (uint8_t)(f_[j_] >> (8 * k_));                             \
        msg[46] = (uint8_t)(HLEN);                                                                 \
        memcpy(msg + 47, (HOST), strlen(HOST));                                                    \
        len = 47 + strlen(HOST);                                                                   \
        ASSERT_EQ(zmq_send(x, "C", 1, ZMQ_SNDMORE), 1);                                            \
        ASSERT_EQ(zmq_send(x, msg, len, 0), (int)len);                                             \
    } while (0)
    ANSWER(nonce + 1000, t, t, 1, "wrong-nonce", 11);
    ANSWER(nonce, t, t + 60000000000ull, 2, "held-a-minute", 13); /* hold > round trip */
    ANSWER(nonce, t + 5, t, 3, "t2-before-t1", 12);
    ANSWER(nonce, t, t, 4, "bad\033host", 8);
    ANSWER(nonce, t, t, 5, "short", 9); /* says 9 bytes of host, carries 5 */
    ANSWER(nonce, t, t, 6, "", 0);
    ANSWER(nonce, t + 1000, t + 1000, 7, "sound", 5); /* the clock here, 1 us ahead of ours */
#undef ANSWER
    /* every one of them is taken by tp_sub_recv and none is a batch */
    for (int i = 0; i < 100 && tp_sub_clock_count(sub) == 0; i++) {
        tp_sub_msg m;
        ASSERT_LE(tp_sub_recv(sub, &m, 20, &err), 0);
    }
    tp_sub_msg m;
    for (int i = 0; i < 10; i++)
        ASSERT_LE(tp_sub_recv(sub, &m, 20, &err), 0);
    ASSERT_EQ(tp_sub_clock_count(sub), 1);
    tp_sub_clock c;
    ASSERT_OK(tp_sub_clock_get(sub, 0, &c));
    ASSERT_STR_EQ(c.host, "sound");
    ASSERT_UEQ(c.relay, 7);
    /* its clock was ours + 1000 ns when it answered, after we asked and before we received */
    long long d = (long long)c.offset_ns - 1000;
    ASSERT_LE(d < 0 ? -d : d, (long long)c.uncertainty_ns);
    ASSERT_NE(tp_sub_clock_get(sub, 1, &c), 0);
    /* that relay's clock is then stepped 5 s ahead: the next answer's bounds cannot hold together
     * with the kept ones, and only the new ones are true */
    uint64_t nonce2 = 0;
    for (int i = 0; i < 200 && nonce2 == 0; i++) {
        tp_sub_recv(sub, &m, 10, &err);
        int n = zmq_recv(x, note, sizeof note, ZMQ_DONTWAIT);
        uint64_t v = 0;
        if (n == 23 && note[0] == 1 && memcmp(note + 1, "synctop-clock?", 14) == 0) {
            for (int k = 0; k < 8; k++)
                v |= (uint64_t)note[15 + k] << (8 * k);
            if (v != nonce)
                nonce2 = v;
        }
    }
    ASSERT_NE(nonce2, 0);
    clock_gettime(CLOCK_REALTIME, &now);
    t = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec + 5000000000ull;
    {
        uint64_t f_[4] = {nonce2, t, t, 7};
        memcpy(msg, "synctop-clock!", 14);
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 8; k++)
                msg[14 + 8 * j + k] = (uint8_t)(f_[j] >> (8 * k));
        msg[46] = 5;
        memcpy(msg + 47, "sound", 5);
        ASSERT_EQ(zmq_send(x, "C", 1, ZMQ_SNDMORE), 1);
        ASSERT_EQ(zmq_send(x, msg, 52, 0), 52);
    }
    for (int i = 0; i < 100; i++) {
        tp_sub_recv(sub, &m, 20, &err);
        ASSERT_OK(tp_sub_clock_get(sub, 0, &c));
        if (c.exchanges >= 2)
            break;
    }
    ASSERT_UEQ(c.exchanges, 2);
    d = (long long)c.offset_ns - 5000000000LL;
    ASSERT_LE(d < 0 ? -d : d, (long long)c.uncertainty_ns);
    ASSERT_EQ(tp_sub_clock_count(sub), 1);
    tp_sub_stats st;
    tp_sub_stats_get(sub, &st);
    ASSERT_UEQ(st.malformed, 4); /* t2 before t1, the host, the lengths, no host: not answers at all */
    ASSERT_UEQ(st.received, 0);
    tp_sub_destroy(&sub);
    zmq_close(x);
    zmq_ctx_term(ctx);
}

/* The first GPU event of a testpub of this seed on an unskewed clock, from the generator itself. */
static uint64_t synth_first_gpu_event(uint64_t seed) {
    synth sy;
    synth_init(&sy, seed);
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = seed + 1});
    ASSERT_NOT_NULL(enc);
    synth_meta(&sy, enc);
    uint64_t first = UINT64_MAX;
    for (int i = 0; i < 1000; i++) {
        tp_record r;
        synth_next(&sy, enc, &r);
        uint64_t a, b;
        tp_record_span(&r, &a, &b);
        if (r.head.kind >= TP_K_KERNEL && r.head.kind <= TP_K_SYNC && a < first)
            first = a;
    }
    tp_enc_destroy(&enc);
    return first;
}

/* How many times needle occurs in text. */
static int count_of(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = strstr(text, needle); p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* The number after "key": in text, from at on; fails when there is none. */
static long long json_num_after(const char *at, const char *key) {
    const char *k = strstr(at, key);
    if (k == NULL)
        TASK_FAIL_("no %s in %.200s", key, at);
    return strtoll(k + strlen(key), NULL, 10);
}

/* report --ranks --format json of four ranks, ranks 0-1 on host[0] (clock skew[0] ahead), 2-3 on
 * host[1], rank r published by a testpub of seed seed0 + r: each rank's host clock offset holds its
 * host's skew within the uncertainty stated, and its first GPU event is where the generator put
 * it, within that uncertainty. */
static void check_ranks_json(const char *text, const char *const host[2], const long long skew[2], int seed0) {
    const char *devices = strstr(text, "\"devices\":["), *ranks = strstr(text, "\"ranks\":{\"ranks\":[");
    ASSERT_NOT_NULL(devices);
    ASSERT_NOT_NULL(ranks);
    for (int rank = 0; rank < 4; rank++) {
        char key[64];
        snprintf(key, sizeof key, "\"rank\":%d,\"span_ns\"", rank);
        const char *r = strstr(ranks, key);
        ASSERT_NOT_NULL(r);
        snprintf(key, sizeof key, "\"host\":\"%s\"", host[rank / 2]);
        const char *h = strstr(r, "\"host\":");
        ASSERT_NOT_NULL(h);
        ASSERT(strncmp(h, key, strlen(key)) == 0);
        long long off = json_num_after(r, "\"host_clock_offset_ns\":"),
                  unc = json_num_after(r, "\"host_clock_uncertainty_ns\":");
        ASSERT_GE(unc, 0);
        /* tells the hosts apart: under half the difference of their clocks (the exchange's round
         * trip, which sets the uncertainty, grows with the machine's load) */
        long long apart = skew[0] > skew[1] ? skew[0] - skew[1] : skew[1] - skew[0];
        ASSERT_LT(unc, apart / 2);
        long long d = off - skew[rank / 2];
        if ((d < 0 ? -d : d) > unc)
            TASK_FAIL_("rank %d: host clock offset %lld ± %lld, but its host's clock is %lld off", rank, off, unc,
                       skew[rank / 2]);
        snprintf(key, sizeof key, "\"rank\":%d,\"device\":0", rank);
        const char *dv = strstr(devices, key);
        ASSERT_NOT_NULL(dv);
        long long first = json_num_after(dv, "\"first\":"), want = (long long)synth_first_gpu_event((uint64_t)(seed0 + rank));
        d = first - want;
        if ((d < 0 ? -d : d) > unc)
            TASK_FAIL_("rank %d: first GPU event at %lld, %lld ns from where it happened (uncertainty %lld)", rank,
                       first, d, unc);
    }
}

/* Four ranks on two hosts whose clocks are seconds apart (the relays and the processes of a host
 * share its skew: skew[]), seeds 50 to 53, each node's relay having found its two, and a top relay
 * over both at +1.25 s, whose endpoint a viewer takes. */
typedef struct two_hosts {
    relay_proc node[2], top;
    pid_t pub[4];
} two_hosts;

static const long long two_hosts_skew[2] = {3000000000LL, -2000000000LL};
static const char *const two_hosts_name[2] = {"sim-node-a", "sim-node-b"};

/* more: further arguments of the top relay (NULL: none). */
static void two_hosts_start_with(two_hosts *t, const char *const more[]) {
    char node[2][PATH_MAX];
    for (int i = 0; i < 2; i++) {
        snprintf(node[i], sizeof node[i], "%s", task_path(i ? "node-b" : "node-a"));
        ASSERT_OK(mkdir(node[i], 0700));
        ASSERT_OK(setenv("XDG_RUNTIME_DIR", node[i], 1));
        relay_start_as(&t->node[i], i ? "relay-b" : "relay-a", two_hosts_name[i], two_hosts_skew[i], NULL);
        for (int k = 0; k < 2; k++) {
            int rank = 2 * i + k;
            char seed[16], rk[16], sk[32], out[32];
            snprintf(seed, sizeof seed, "%d", 50 + rank);
            snprintf(rk, sizeof rk, "%d", rank);
            snprintf(sk, sizeof sk, "%lld", two_hosts_skew[i]);
            snprintf(out, sizeof out, "pub%d.out", rank);
            const char *argv[] = {testpub_path(), "--events", "100000", "--seed", seed, "--wait-subscribers", "1",
                                  "--rate", "100000", "--batch", "2000", "--host", two_hosts_name[i], "--rank", rk,
                                  "--clock-skew-ns", sk, NULL};
            char o[PATH_MAX], e[PATH_MAX + 8];
            snprintf(o, sizeof o, "%s", task_path(out));
            snprintf(e, sizeof e, "%s.err", o);
            t->pub[rank] = task_spawn(argv, o, e);
        }
    }
    /* each node relay has found its two ranks (it looks once a second): the viewer must not see
     * three ranks end before the fourth is found */
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2000 && count_of(slurp(t->node[i].err), "+ process") < 2; k++)
            task_sleep_ms(10);
    for (int i = 0; i < 2; i++)
        ASSERT_EQ(count_of(slurp(t->node[i].err), "+ process"), 2);
    const char *extra[8] = {t->node[0].endpoint, t->node[1].endpoint};
    for (int i = 0; more != NULL && more[i] != NULL; i++) {
        ASSERT_LT(i, 5);
        extra[2 + i] = more[i];
    }
    relay_start_as(&t->top, "relay-top", "sim-top", 1250000000LL, extra);
}

static void two_hosts_start(two_hosts *t) { two_hosts_start_with(t, NULL); }

static void two_hosts_stop(two_hosts *t) {
    for (int i = 0; i < 4; i++)
        ASSERT_EQ(task_wait_exit(t->pub[i], 30), 0);
    relay_stop(&t->top);
    relay_stop(&t->node[0]);
    relay_stop(&t->node[1]);
}

/* `report --ranks` of a live job behind relays: four ranks on two hosts whose clocks are seconds
 * apart; each rank's host clock offset is stated within the uncertainty stated, and its events are
 * on the reporter's clock within it: a rank's first GPU event is where the generator put it on an
 * unskewed clock. */
TEST(report_ranks_puts_the_ranks_of_each_host_on_one_clock) {
    two_hosts t;
    two_hosts_start(&t);
    const char *argv[] = {task_synctop(), "report", "--ranks", "--format", "json", t.top.endpoint, NULL};
    char json[PATH_MAX];
    snprintf(json, sizeof json, "%s", task_path("report.json"));
    pid_t rep = task_spawn(argv, json, task_path("report.err"));
    ASSERT_EQ(task_wait_exit(rep, 60), 0);
    two_hosts_stop(&t);
    check_ranks_json(slurp(json), two_hosts_name, two_hosts_skew, 50);
}

/* The same job recorded through the relays: the file keeps the hosts' clocks the recorder measured,
 * and `report --ranks` of the file puts every rank on the recorder's clock as the live report
 * does. A file without them (the notes batch taken out: a recording from before) is on each
 * process's own clock, its hosts' offsets unknown. */
/* The "host_clocks" of `info --json` of a trace, after checking that each of the n hosts named is
 * there with its offset within the uncertainty stated of its skew. */
static const char *info_clocks(const char *trace, const char *const hosts[], const long long skews[], int n) {
    const char *info[] = {task_synctop(), "info", "--json", trace, NULL};
    char ij[PATH_MAX];
    snprintf(ij, sizeof ij, "%s", task_path("info.json"));
    ASSERT_EQ(task_wait_exit(task_spawn(info, ij, task_path("info.err")), 60), 0);
    const char *clocks = strstr(slurp(ij), "\"host_clocks\": [");
    ASSERT_NOT_NULL(clocks);
    for (int i = 0; i < n; i++) {
        char key[64];
        snprintf(key, sizeof key, "{\"host\": \"%s\"", hosts[i]);
        const char *h = strstr(clocks, key);
        ASSERT_NOT_NULL(h);
        long long off = json_num_after(h, "\"offset_ns\": "), unc = json_num_after(h, "\"uncertainty_ns\": ");
        long long d = off - skews[i];
        if ((d < 0 ? -d : d) > unc)
            TASK_FAIL_("info: %s's clock %lld +- %lld, but it is %lld off", hosts[i], off, unc, skews[i]);
    }
    return clocks;
}

TEST(a_recording_keeps_the_hosts_clocks) {
    two_hosts t;
    two_hosts_start(&t);
    char trace[PATH_MAX];
    snprintf(trace, sizeof trace, "%s", task_path("job.trace"));
    const char *rec[] = {task_synctop(), "record", t.top.endpoint, "-o", trace, "--producers", "4", NULL};
    pid_t r = task_spawn(rec, task_path("record.out"), task_path("record.err"));
    ASSERT_EQ(task_wait_exit(r, 60), 0);
    two_hosts_stop(&t);
    ASSERT_STR_CONTAINS(slurp(task_path("record.err")), "kept in the file");
    const char *argv[] = {task_synctop(), "report", "--ranks", "--format", "json", trace, NULL};
    char json[PATH_MAX];
    snprintf(json, sizeof json, "%s", task_path("report.json"));
    ASSERT_EQ(task_wait_exit(task_spawn(argv, json, task_path("report.err")), 60), 0);
    check_ranks_json(slurp(json), two_hosts_name, two_hosts_skew, 50);
    /* info lists them: every host that answered, its offset within the uncertainty of its skew */
    static const char *const hosts[3] = {"sim-node-a", "sim-node-b", "sim-top"};
    static const long long skews[3] = {3000000000LL, -2000000000LL, 1250000000LL};
    const char *clocks = info_clocks(trace, hosts, skews, 3);
    ASSERT_EQ(count_of(clocks, "{\"host\": "), 3);

    /* The last batch is the notes: a copy without it has no host clocks. */
    err_msg err = {{0}};
    tp_freader *fr = tp_freader_open(trace, &err);
    ASSERT_NOT_NULL(fr);
    size_t n = tp_freader_count(fr);
    ASSERT_GE(n, 2);
    const tp_findex_entry *last = tp_freader_entry(fr, n - 1);
    ASSERT(last->flags & TP_BF_SYNTHETIC);
    ASSERT_UEQ(last->producer, TP_PRODUCER_NOTES);
    char plain[PATH_MAX];
    snprintf(plain, sizeof plain, "%s", task_path("plain.trace"));
    tp_fwriter *w = tp_fwriter_open(plain, TP_FW_OVERWRITE, &err);
    ASSERT_NOT_NULL(w);
    tp_buf b = {0};
    for (size_t i = 0; i + 1 < n; i++) {
        ASSERT_OK(tp_freader_read(fr, i, &b, &err));
        ASSERT_OK(tp_fwriter_append(w, b.data, b.len, &err));
    }
    tp_buf_free(&b);
    ASSERT_OK(tp_fwriter_close(&w, &err));
    tp_freader_close(&fr);
    const char *argv2[] = {task_synctop(), "report", "--ranks", "--format", "json", plain, NULL};
    ASSERT_EQ(task_wait_exit(task_spawn(argv2, json, task_path("report2.err")), 60), 0);
    const char *text = slurp(json);
    ASSERT_EQ(count_of(text, "\"host_clock_offset_ns\":null"), 4); /* every rank's: unknown */
    ASSERT_EQ(count_of(text, "\"host_clock_offset_ns\":"), 4);
}

/* The top relay records what a viewer takes through it: its file keeps the clocks of the two
 * nodes, which it measured by asking their relays (not its own host's: its clock is the file's),
 * and the ranks' events are put on that clock. */
TEST(a_relay_recording_keeps_the_hosts_clocks) {
    two_hosts t;
    char trace[PATH_MAX];
    snprintf(trace, sizeof trace, "%s", task_path("relayed.trace"));
    two_hosts_start_with(&t, (const char *[]){"--record", trace, NULL});
    err_msg err = {{0}};
    tp_sub *sub = tp_sub_new(NULL, &err);
    ASSERT_NOT_NULL(sub);
    ASSERT_OK(tp_sub_connect(sub, t.top.endpoint, &err));
    got g;
    receive_all(sub, &g, 4, 60);
    ASSERT_UEQ(g.missed, 0);
    tp_sub_destroy(&sub);
    two_hosts_stop(&t);
    const char *said = slurp(t.top.err);
    ASSERT_STR_CONTAINS(said, "kept in the file");
    ASSERT_STR_CONTAINS(said, "recorded in");
    const char *clocks = info_clocks(trace, two_hosts_name, two_hosts_skew, 2);
    ASSERT_EQ(count_of(clocks, "{\"host\": "), 2);
    const char *argv[] = {task_synctop(), "report", "--ranks", "--format", "json", trace, NULL};
    char json[PATH_MAX];
    snprintf(json, sizeof json, "%s", task_path("report.json"));
    ASSERT_EQ(task_wait_exit(task_spawn(argv, json, task_path("report.err")), 60), 0);
    check_ranks_json(slurp(json), two_hosts_name, two_hosts_skew, 50);
}

/* A recording relay on a full disk (a file size limit, as the tracer's tests play it, its signal
 * ignored): the recording stops and the relay goes on. A record below it gets every event the
 * publisher sent, counts no drop (none of its own batches is missing), and says what the relay said:
 * its recording stopped. The relay says so once, and exits 1 at the end (the file it was asked for
 * is incomplete); that file opens, holding fewer events. */
TEST(a_relay_recording_on_a_full_disk_stops_the_recording_not_the_relay) {
    private_endpoints();
    char trace[PATH_MAX], below[PATH_MAX];
    snprintf(trace, sizeof trace, "%s", task_path("relayed.trace"));
    snprintf(below, sizeof below, "%s", task_path("below.trace"));
    /* 1024 blocks of 512 bytes: a few of the 100 batches, then EFBIG */
    const char *argv[] = {"/bin/sh", "-c", "trap '' XFSZ; ulimit -f 1024; exec \"$0\" \"$@\"", task_synctop(), "relay",
                          "--listen", "tcp://127.0.0.1:0", "--record", trace, NULL};
    relay_proc r;
    relay_start_argv(&r, "relay", argv);
    const char *rec_argv[] = {task_synctop(), "record", r.endpoint, "-o", below, NULL};
    pid_t recorder = task_spawn(rec_argv, task_path("record.out"), task_path("record.err"));
    /* the recorder's subscription is up (the relay passed it on) before the publisher starts */
    wait_text(r.err, "listening on", 20);
    task_sleep_ms(500);
    const char *pub[] = {testpub_path(), "--events", "409600", "--seed", "80", "--wait-subscribers", "1",
                         "--rate", "200000", NULL};
    pid_t p = task_spawn(pub, task_path("pub.out"), task_path("pub.err"));
    ASSERT_EQ(task_wait_exit(p, 60), 0);
    ASSERT_EQ(task_wait_exit(recorder, 60), 0);
    const char *rec_said = slurp(task_path("record.err"));
    ASSERT_STR_CONTAINS(rec_said, ": 409600 events, 100 batches");
    ASSERT_STR_CONTAINS(rec_said, "drops: 0 missed batches + 0 records reported");
    ASSERT_STR_CONTAINS(rec_said, "says: recording to ");
    ASSERT_STR_CONTAINS(rec_said, "relayed.trace stopped: ");
    ASSERT_EQ(count_of(rec_said, "says: "), 1);
    ASSERT_EQ(kill(r.pid, 0), 0); /* still relaying */
    kill(r.pid, SIGINT);
    ASSERT_EQ(task_wait_exit(r.pid, 20), 1);
    const char *said = slurp(r.err);
    ASSERT_EQ(count_of(said, "relayed.trace stopped: "), 2); /* when it stopped, and at the end */
    ASSERT_STR_CONTAINS(said, "relaying goes on");
    ASSERT_STR_CONTAINS(said, " 100 batches");
    char cmd[PATH_MAX * 2];
    snprintf(cmd, sizeof cmd, "'%s' info --json '%s' > '%s'", task_synctop(), trace, task_path("info.json"));
    ASSERT_EQ(system(cmd), 0);
    const char *ev = strstr(slurp(task_path("info.json")), "\"events\": ");
    ASSERT_NOT_NULL(ev);
    ASSERT_LT(strtoull(ev + 10, NULL, 10), 409600);
    snprintf(cmd, sizeof cmd, "'%s' info --json '%s' > '%s'", task_synctop(), below, task_path("below.json"));
    ASSERT_EQ(system(cmd), 0);
    ASSERT_STR_CONTAINS(slurp(task_path("below.json")), "\"events\": 409600,");
}

/* A relay listening on this test's ipc endpoint NAME.sock, relaying the endpoints given. */
static void relay_start_ipc(relay_proc *r, const char *name, const char *const ups[]) {
    char listen[PATH_MAX + 8];
    snprintf(listen, sizeof listen, "ipc://%s.sock", task_path(name));
    const char *argv[16] = {task_synctop(), "relay", "--listen", listen};
    int n = 4;
    for (; ups[n - 4] != NULL; n++)
        argv[n] = ups[n - 4];
    argv[n] = NULL;
    relay_start_argv(r, name, argv);
}

/* The events `synctop info` counts in a trace file. */
static uint64_t info_events(const char *trace) {
    char cmd[PATH_MAX * 2];
    snprintf(cmd, sizeof cmd, "'%s' info --json '%s' > '%s'", task_synctop(), trace, task_path("info.json"));
    ASSERT_EQ(system(cmd), 0);
    const char *ev = strstr(slurp(task_path("info.json")), "\"events\": ");
    ASSERT_NOT_NULL(ev);
    return strtoull(ev + 10, NULL, 10);
}

/* A publisher on an ipc endpoint of this test's, waiting for k subscribers, sending events at rate
 * a second in batches of batch; its endpoint in ep. */
static pid_t testpub_ipc_at(const char *name, int seed, int events, int k, const char *rate, const char *batch,
                            char ep[TP_ENDPOINT_MAX]) {
    snprintf(ep, TP_ENDPOINT_MAX, "ipc://%s.sock", task_path(name));
    char s[16], e[16], w[16], out[PATH_MAX], err[PATH_MAX + 8];
    snprintf(s, sizeof s, "%d", seed);
    snprintf(e, sizeof e, "%d", events);
    snprintf(w, sizeof w, "%d", k);
    snprintf(out, sizeof out, "%s.out", task_path(name));
    snprintf(err, sizeof err, "%s.err", task_path(name));
    const char *argv[] = {testpub_path(), "--endpoint", ep, "--events", e, "--seed", s, "--wait-subscribers", w,
                          "--rate", rate, "--batch", batch, NULL};
    return task_spawn(argv, out, err);
}

static pid_t testpub_ipc(const char *name, int seed, int events, int k, char ep[TP_ENDPOINT_MAX]) {
    return testpub_ipc_at(name, seed, events, k, "400000", "4096", ep);
}

/* `synctop record` of the endpoints given (at most 2) into NAME.trace until publisher p and every
 * producer it saw finish: it must hold exactly the 200000 events p sent, lose none, and say so
 * (what it said is returned). */
static const char *record_all_of(pid_t p, const char *name, const char *ep1, const char *ep2) {
    char trace[PATH_MAX];
    snprintf(trace, sizeof trace, "%s.trace", task_path(name));
    const char *rec[] = {task_synctop(), "record", "-o", trace, ep1, ep2, NULL};
    pid_t recorder = task_spawn(rec, task_path("record.out"), task_path("record.err"));
    ASSERT_EQ(task_wait_exit(p, 60), 0);
    ASSERT_EQ(task_wait_exit(recorder, 60), 0);
    ASSERT_UEQ(info_events(trace), 200000);
    const char *said = slurp(task_path("record.err"));
    ASSERT_STR_CONTAINS(said, ": 200000 events, ");
    ASSERT_STR_CONTAINS(said, "drops: 0 missed batches + 0 records reported");
    return said;
}

/* A diamond: one publisher, two relays on it, one record on both relays. Every batch reaches the
 * recorder twice; it writes each once (so exactly the events the publisher sent), counts no loss,
 * and says how many came twice. */
TEST(a_recorder_on_two_relays_of_one_publisher_writes_each_batch_once) {
    private_endpoints();
    char ep[TP_ENDPOINT_MAX];
    pid_t p = testpub_ipc("pub", 90, 200000, 2, ep);
    relay_proc r1, r2;
    relay_start_ipc(&r1, "r1", (const char *[]){ep, NULL});
    relay_start_ipc(&r2, "r2", (const char *[]){ep, NULL});
    const char *said = record_all_of(p, "diamond", r1.endpoint, r2.endpoint);
    ASSERT_STR_CONTAINS(said, "batches that came twice (through two relays) written once");
    relay_stop(&r1);
    relay_stop(&r2);
}

/* The number after key in text, where text has it. */
static uint64_t number_before(const char *text, const char *key) {
    const char *at = strstr(text, key);
    ASSERT_NOT_NULL(at);
    while (at > text && (at[-1] == ' ' || (at[-1] >= '0' && at[-1] <= '9')))
        at--;
    return strtoull(at, NULL, 10);
}

/* A loop: relay A takes the publisher and relay B, B takes A, a record takes B. Each batch reaches
 * the recorder once (what went round back to A is dropped there), so the file holds exactly the
 * events the publisher sent; A says once that it is in a loop, and so does the recorder, told by
 * A's notice. Nothing goes round for ever: a viewer that subscribes to a producer's batches and
 * at once unsubscribes leaves each relay with a bounded number of messages taken from below (the
 * subscription and the unsubscription chasing each other round the loop would make thousands a
 * second). */
TEST(relays_feeding_each_other_pass_each_batch_once_and_say_so) {
    private_endpoints();
    char ep[TP_ENDPOINT_MAX], a_ep[TP_ENDPOINT_MAX + 8], b_ep[TP_ENDPOINT_MAX + 8];
    snprintf(ep, sizeof ep, "ipc://%s.sock", task_path("pub"));
    snprintf(a_ep, sizeof a_ep, "ipc://%s.sock", task_path("a"));
    snprintf(b_ep, sizeof b_ep, "ipc://%s.sock", task_path("b"));
    relay_proc a, b;
    relay_start_ipc(&a, "a", (const char *[]){ep, b_ep, NULL});
    relay_start_ipc(&b, "b", (const char *[]){a_ep, NULL});
    /* the relays find the loop by themselves (they ask each other the time on connecting) */
    wait_text(a.err, "warning: in a loop of relays", 30);
    pid_t p = testpub_ipc("pub", 91, 200000, 1, ep);
    ASSERT_STR_CONTAINS(record_all_of(p, "loop", b.endpoint, NULL), "in a loop of relays");
    void *ctx = zmq_ctx_new();
    void *viewer = zmq_socket(ctx, ZMQ_SUB);
    uint8_t topic[9] = {'B', 0x39, 0x30};
    /* the viewer's connection is up (its handshake done, as its monitor says) before it subscribes
     * and unsubscribes: made before, the two would cancel out in the socket and never leave it */
    ASSERT_OK(zmq_socket_monitor(viewer, "inproc://viewer-monitor", ZMQ_EVENT_HANDSHAKE_SUCCEEDED));
    void *mon = zmq_socket(ctx, ZMQ_PAIR);
    ASSERT_OK(zmq_connect(mon, "inproc://viewer-monitor"));
    ASSERT_OK(zmq_setsockopt(mon, ZMQ_RCVTIMEO, &(int){20000}, sizeof(int)));
    ASSERT_OK(zmq_connect(viewer, b.endpoint));
    uint8_t ev[6];
    char ev_ep[TP_ENDPOINT_MAX];
    ASSERT_EQ(zmq_recv(mon, ev, sizeof ev, 0), 6);
    ASSERT_EQ(ev[0] | ev[1] << 8, ZMQ_EVENT_HANDSHAKE_SUCCEEDED);
    ASSERT_GT(zmq_recv(mon, ev_ep, sizeof ev_ep, 0), 0);
    zmq_close(mon);
    ASSERT_OK(zmq_setsockopt(viewer, ZMQ_SUBSCRIBE, topic, sizeof topic));
    ASSERT_OK(zmq_setsockopt(viewer, ZMQ_UNSUBSCRIBE, topic, sizeof topic));
    task_sleep_ms(2000);
    zmq_close(viewer);
    zmq_ctx_term(ctx);
    const char *a_said = relay_stop(&a);
    ASSERT_EQ(count_of(a_said, "warning: in a loop of relays"), 1);
    ASSERT_LT(number_before(a_said, " messages from below"), 500);
    ASSERT_LT(number_before(relay_stop(&b), " messages from below"), 500);
}

/* Two peers flood a relay with 300,000 distinct subscriptions each (4,000-byte topics; batches of
 * producers that do not exist), a third subscriber of it is healthy. The relay (its allocator keeping
 * nothing back) counts what went past each flooder's bound and shuts its connections, grows by no
 * more than its bounds allow, and passes up no more than the publisher above lets one peer hold: the
 * publisher cuts nobody off and does not grow either, and the healthy subscriber gets every event. */
TEST(a_peer_flooding_a_relay_is_cut_off_and_the_publisher_above_is_spared) {
    ASSERT_OK(setenv("ASAN_OPTIONS", "quarantine_size_mb=0:detect_leaks=0", 1));
    private_endpoints();
    char ep[TP_ENDPOINT_MAX];
    pid_t p = testpub_ipc_at("pub", 93, 160000, 1, "20000", "1000", ep);
    relay_proc r;
    relay_start_ipc(&r, "relay", (const char *[]){ep, NULL});
    err_msg err = {{0}};
    tp_sub *sub = tp_sub_new(NULL, &err);
    ASSERT_NOT_NULL(sub);
    ASSERT_OK(tp_sub_connect(sub, r.endpoint, &err));
    tp_sub_msg m;
    while (tp_sub_recv(sub, &m, 100, &err) != 1)
        ;
    pid_t watched[2] = {r.pid, p};
    long before[2] = {flood_rss_kib(r.pid), flood_rss_kib(p)}, peak[2] = {before[0], before[1]};
    int done[2];
    ASSERT_OK(pipe(done));
    ASSERT_OK(fcntl(done[0], F_SETFL, O_NONBLOCK));
    pid_t flooders[2] = {flood_start(r.endpoint, FLOOD_LONG, 300000, done[1]),
                         flood_start(r.endpoint, FLOOD_BATCHES, 300000, done[1])};
    uint64_t events = flood_receive(sub, watched, peak, 2, flooders, done[0]);
    ASSERT_EQ(task_wait_exit(p, 30), 0);
    const char *said = relay_stop(&r);
    fprintf(stderr, "relay: %ld KiB before the floods, %ld KiB at most; publisher: %ld KiB, %ld KiB at most\n%s",
            before[0], peak[0], before[1], peak[1], said);
    ASSERT_UEQ(events + 1000, 160000); /* the first batch came before the floods */
    tp_sub_stats st;
    tp_sub_stats_get(sub, &st);
    ASSERT_UEQ(st.missed, 0);
    ASSERT_GT(number_before(said, " subscriptions refused"), 0);
    ASSERT_GE(number_before(said, " connections shut for them"), 2);
    /* the relay's bounds allow a few MiB; sanitizers and a loaded machine (libzmq takes in what a
     * flooder sends faster than an instrumented relay reads it) cost many times that: without the
     * bounds it went past 1 GiB; under ASan it grows by about 265 MiB */
    ASSERT_LT(peak[0] - before[0], 768 * 1024);
    ASSERT_LT(peak[1] - before[1], 32 * 1024);
    ASSERT_STR_CONTAINS(slurp(task_path("pub.out")), " subs_dropped=0 peers_shut=0");
    close(done[0]);
    close(done[1]);
    tp_sub_destroy(&sub);
}

/* A publisher on a fixed endpoint, named to the relay, that stops and starts again (a rank
 * restarted by its launcher): the relay reconnects by itself and the viewer gets the new run whole.
 * The endpoint is an ipc path of this test's own: a tcp port, once free, could be taken by another
 * process before the restart. */
TEST(a_restarted_producer_is_picked_up_again_by_its_relay) {
    private_endpoints();
    char ep[TP_ENDPOINT_MAX];
    snprintf(ep, sizeof ep, "ipc://%s", task_path("rank.sock"));
    const char *first[] = {testpub_path(), "--endpoint", ep, "--events", "20000", "--seed", "61",
                           "--wait-subscribers", "1", NULL};
    pid_t p1 = task_spawn(first, task_path("pub1.out"), task_path("pub1.err"));
    wait_text(task_path("pub1.out"), "endpoint=", 20);
    relay_proc r;
    const char *extra[] = {ep, NULL};
    relay_start(&r, "relay", extra);
    err_msg err = {{0}};
    tp_sub *sub = tp_sub_new(NULL, &err);
    ASSERT_NOT_NULL(sub);
    ASSERT_OK(tp_sub_connect(sub, r.endpoint, &err));
    got g;
    receive_all(sub, &g, 1, 60);
    ASSERT_EQ(task_wait_exit(p1, 30), 0);
    ASSERT_UEQ(g.producer[0], 62);
    ASSERT_UEQ(g.events[0], 20000);
    /* the same endpoint, a new process (a new producer id, as a restarted tracer picks) */
    const char *again[] = {testpub_path(), "--endpoint", ep, "--events", "30000", "--seed", "62",
                           "--wait-subscribers", "1", NULL};
    pid_t p2 = task_spawn(again, task_path("pub2.out"), task_path("pub2.err"));
    got g2;
    receive_all(sub, &g2, 1, 60);
    ASSERT_EQ(task_wait_exit(p2, 30), 0);
    ASSERT_EQ(g2.n, 1);
    ASSERT_UEQ(g2.producer[0], 63);
    ASSERT_UEQ(g2.events[0], 30000);
    ASSERT_UEQ(g2.batches[0], sent_of("pub2.out"));
    tp_sub_destroy(&sub);
    relay_stop(&r);
}

/* A publisher with CURVE keys, two relays: the one given its public key relays everything, the one
 * given another key gets nothing through (the handshake fails), so its viewer receives nothing; it
 * says so once, as record does, while it keeps trying (the publisher is still up then). */
TEST(a_relay_with_the_wrong_upstream_key_gets_nothing) {
    private_endpoints();
    err_msg err = {{0}};
    tp_keypair kp, other;
    ASSERT_OK(tp_keypair_new(&kp, &err));
    ASSERT_OK(tp_keypair_new(&other, &err));
    char base[PATH_MAX], key[PATH_MAX + 8];
    snprintf(base, sizeof base, "%s", task_path("pub"));
    snprintf(key, sizeof key, "%s.key", base);
    ASSERT_OK(tp_keypair_save(&kp, base, &err));
    /* two subscribers (the relays) before it starts */
    const char *argv[] = {testpub_path(), "--endpoint", "tcp://127.0.0.1:0", "--curve-key", key, "--events", "20000",
                          "--seed", "70", "--wait-subscribers", "1", "--rate", "20000", NULL};
    pid_t p = task_spawn(argv, task_path("pub.out"), task_path("pub.err"));
    const char *at = wait_text(task_path("pub.out"), "endpoint=", 20) + strlen("endpoint=");
    char ep[TP_ENDPOINT_MAX];
    size_t len = strcspn(at, "\n");
    ASSERT_LT(len, sizeof ep);
    memcpy(ep, at, len);
    ep[len] = '\0';
    relay_proc good, bad;
    const char *right[] = {"--server-key", kp.public_key, ep, NULL}, *wrong[] = {"--server-key", other.public_key, ep, NULL};
    relay_start(&bad, "bad", wrong);
    wait_text(bad.err, "refused the encrypted handshake", 20);
    relay_start(&good, "good", right);
    tp_sub *sb = tp_sub_new(NULL, &err), *sg = tp_sub_new(NULL, &err);
    ASSERT_NOT_NULL(sb);
    ASSERT_NOT_NULL(sg);
    ASSERT_OK(tp_sub_connect(sb, bad.endpoint, &err));
    ASSERT_OK(tp_sub_connect(sg, good.endpoint, &err));
    got g;
    receive_all(sg, &g, 1, 60);
    ASSERT_EQ(task_wait_exit(p, 30), 0);
    ASSERT_UEQ(g.events[0], 20000);
    /* the publisher has finished: whatever the bad relay could have passed on has come by now */
    tp_sub_msg m;
    for (int i = 0; i < 10; i++)
        ASSERT_LE(tp_sub_recv(sb, &m, 50, &err), 0);
    tp_sub_stats st;
    tp_sub_stats_get(sb, &st);
    ASSERT_UEQ(st.received, 0);
    tp_sub_destroy(&sb);
    tp_sub_destroy(&sg);
    const char *bad_said = relay_stop(&bad);
    ASSERT_STR_CONTAINS(bad_said, "0 batches");
    ASSERT_EQ(count_of(bad_said, "refused the encrypted handshake"), 1);
    ASSERT_STR_CONTAINS(bad_said, ep);
    ASSERT(strstr(relay_stop(&good), "refused the encrypted handshake") == NULL);
}

/* Two hosts as two network namespaces joined by a veth pair (unshare -rn: a user namespace of our
 * own, no privilege needed), each a relay on its own address with CURVE and two ranks, its clock
 * skewed (CLOCK_REALTIME cannot be put in a namespace: the relays and ranks of a host share the
 * skew given here); `report --ranks` on host a takes both relays over the link. Skipped where
 * the machine does not allow the namespaces. */
TEST(clock_offsets_across_network_namespaces) {
    if (system("unshare -rn sh -c 'ip link add va type veth peer name vb' >/dev/null 2>&1") != 0)
        TASK_SKIP("unshare -rn or a veth pair is not allowed here");
    static const long long skew[2] = {3000000000LL, -2000000000LL};
    static const char *const host[2] = {"ns-node-a", "ns-node-b"};
    err_msg err = {{0}};
    tp_keypair kp;
    ASSERT_OK(tp_keypair_new(&kp, &err));
    char base[PATH_MAX], script[PATH_MAX];
    snprintf(base, sizeof base, "%s", task_path("job"));
    ASSERT_OK(tp_keypair_save(&kp, base, &err));
    snprintf(script, sizeof script, "%s", task_path("hosts.sh"));
    FILE *f = fopen(script, "w");
    ASSERT_NOT_NULL(f);
    fprintf(f,
            "set -eu\n"
            "S='%s'; P='%s'; D='%s'\n"
            "pids=\n" /* everything started here goes when the script ends, however it ends */
            "trap 'kill $pids 2>/dev/null || true' EXIT\n"
            "ip link set lo up\n"
            "ip link add va type veth peer name vb\n"
            "ip addr add 10.77.0.1/24 dev va\n"
            "ip link set va up\n"
            "unshare -n sleep 120 &\n" /* host b's namespace, held by this process */
            "B=$!; pids=\"$pids $B\"\n"
            "while [ \"$(readlink /proc/$B/ns/net)\" = \"$(readlink /proc/self/ns/net)\" ]; do sleep 0.01; done\n"
            "ip link set vb netns $B\n"
            "inb='nsenter -t '$B' -n --'\n" /* nsenter execs what it runs: $! is that process */
            "$inb ip link set lo up\n"
            "$inb ip addr add 10.77.0.2/24 dev vb\n"
            "$inb ip link set vb up\n"
            "mkdir -m 700 $D/a $D/b\n"
            "XDG_RUNTIME_DIR=$D/a SYNCTOP_TEST_HOST=%s SYNCTOP_TEST_CLOCK_SKEW_NS=%lld \\\n"
            "    $S relay --listen tcp://10.77.0.1:5555 --key $D/job.key 2>$D/relay-a.err &\n"
            "pids=\"$pids $!\"\n"
            "XDG_RUNTIME_DIR=$D/b SYNCTOP_TEST_HOST=%s SYNCTOP_TEST_CLOCK_SKEW_NS=%lld \\\n"
            "    $inb $S relay --listen tcp://10.77.0.2:5555 --key $D/job.key 2>$D/relay-b.err &\n"
            "pids=\"$pids $!\"\n"
            "for r in 0 1 2 3; do\n"
            "    if [ $r -lt 2 ]; then n=a; h=%s; k=%lld; x=; else n=b; h=%s; k=%lld; x=$inb; fi\n"
            "    XDG_RUNTIME_DIR=$D/$n $x $P --events 100000 --rate 100000 --batch 2000 --wait-subscribers 1 \\\n"
            "        --seed $((90 + r)) --host $h --rank $r --clock-skew-ns $k >$D/pub$r.out 2>&1 &\n"
            "    pids=\"$pids $!\"\n"
            "done\n"
            /* both relays have found their node's two ranks (they look once a second) */
            "for n in a b; do\n"
            "    i=0; until [ \"$(grep -c '+ process' $D/relay-$n.err)\" = 2 ]; do\n"
            "        i=$((i + 1)); [ $i -lt 2000 ]; sleep 0.01\n"
            "    done\n"
            "done\n"
            "$S report --ranks --format json --server-key $D/job.pub tcp://10.77.0.1:5555 tcp://10.77.0.2:5555 \\\n"
            "    >$D/report.json 2>$D/report.err\n",
            task_synctop(), testpub_path(), task_tmpdir(), host[0], skew[0], host[1], skew[1], host[0], skew[0],
            host[1], skew[1]);
    fclose(f);
    const char *argv[] = {"/usr/bin/unshare", "-rn", "/bin/sh", script, NULL};
    pid_t p = task_spawn(argv, task_path("hosts.out"), task_path("hosts.err"));
    int rc = task_wait_exit(p, 90);
    if (rc != 0)
        TASK_FAIL_("the two hosts' script ended with %d:\n%s\nreport: %s", rc, slurp(task_path("hosts.err")),
                   slurp(task_path("report.err")));
    check_ranks_json(slurp(task_path("report.json")), host, skew, 90);
}

/* ---- summaries ---- */

/* What a testpub producer of this seed sends in `events` events, from the generator itself: per
 * device the union of its kernels, copies and memsets, per thread the union of its blocking calls
 * (each merged after sorting by start). */
typedef struct expect {
    uint64_t busy_ns, blocked_ns, events;
} expect;

static int by_start(const void *a, const void *b) {
    const uint64_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1; /* key (device or thread) */
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

static uint64_t merged(uint64_t (*v)[3], size_t n) {
    qsort(v, n, sizeof *v, by_start);
    uint64_t total = 0, cs = 0, ce = 0, key = 0;
    int open = 0;
    for (size_t i = 0; i < n; i++) {
        if (open && v[i][0] == key && v[i][1] <= ce) {
            if (v[i][2] > ce)
                ce = v[i][2];
            continue;
        }
        if (open)
            total += ce - cs;
        key = v[i][0];
        cs = v[i][1];
        ce = v[i][2];
        open = 1;
    }
    return open ? total + ce - cs : total;
}

static expect expect_of(int seed, size_t events) {
    synth sy;
    synth_init(&sy, (uint64_t)seed);
    tp_enc *enc = tp_enc_new(NULL);
    ASSERT_NOT_NULL(enc);
    synth_meta(&sy, enc);
    uint64_t (*gpu)[3] = calloc(events, sizeof *gpu), (*blk)[3] = calloc(events, sizeof *blk);
    ASSERT(gpu != NULL && blk != NULL);
    size_t ng = 0, nb = 0;
    for (size_t i = 0; i < events; i++) {
        tp_record r;
        synth_next(&sy, enc, &r);
        if (r.head.kind == TP_K_KERNEL)
            memcpy(gpu[ng++], (uint64_t[3]){r.kernel.device, r.kernel.start, r.kernel.end}, sizeof *gpu);
        else if (r.head.kind == TP_K_MEMCPY)
            memcpy(gpu[ng++], (uint64_t[3]){r.memcpy.device, r.memcpy.start, r.memcpy.end}, sizeof *gpu);
        else if (r.head.kind == TP_K_MEMSET)
            memcpy(gpu[ng++], (uint64_t[3]){r.memset.device, r.memset.start, r.memset.end}, sizeof *gpu);
        else if (r.head.kind == TP_K_API && (r.api.flags & TP_F_BLOCKING))
            memcpy(blk[nb++], (uint64_t[3]){r.api.tid, r.api.start, r.api.end}, sizeof *blk);
    }
    expect e = {merged(gpu, ng), merged(blk, nb), events};
    free(gpu);
    free(blk);
    tp_enc_destroy(&enc);
    return e;
}

/* A testpub playing three producers (seeds 30, 31, 32: ids 31, 32, 33, ranks 5, 6, 7) at a rate
 * that keeps it publishing for about five seconds. Batches of 540 events are whole steps of the
 * generator (54 events), so no batch holds work that starts before the previous batch's. */
static pid_t three_producers(const char *out_name) {
    const char *argv[] = {testpub_path(), "--producers", "3", "--events", "5400", "--batch", "540", "--seed", "30",
                          "--rate", "3200", "--host", "node-s", "--rank", "5", "--wait-subscribers", "1", NULL};
    char err[PATH_MAX + 8];
    snprintf(err, sizeof err, "%s.err", task_path(out_name));
    return task_spawn(argv, task_path(out_name), err);
}

/* Sums the summaries a subscriber has until their events reach total (or 60 s from t0). */
static void summaries_until(tp_sub *sub, uint64_t total, time_t t0) {
    err_msg err = {{0}};
    for (;;) {
        ASSERT_LT(time(NULL) - t0, 60);
        tp_sub_msg m;
        ASSERT_LE(tp_sub_recv(sub, &m, 100, &err), 0);
        uint64_t sum = 0;
        for (size_t i = 0; i < tp_sub_summary_count(sub); i++) {
            tp_sub_summary x;
            ASSERT_OK(tp_sub_summary_get(sub, i, &x));
            sum += x.events;
        }
        if (sum >= total)
            return;
    }
}

/* A summary-only viewer through a relay gets a summary of every producer and no batch; their
 * busy and blocked times, events and identities add up to what the generator made. Then it
 * watches one producer: exactly that producer's batches come, and once it stops watching, none. */
TEST(summary_only_viewer_gets_every_producer_summarised_and_chosen_batches) {
    private_endpoints();
    relay_proc r;
    relay_start(&r, "relay", (const char *[]){"--summary-ms", "200", NULL});
    err_msg err = {{0}};
    tp_sub *sub = tp_sub_new(&(tp_sub_opts){.summaries = 1}, &err);
    ASSERT_NOT_NULL(sub);
    ASSERT_OK(tp_sub_connect(sub, r.endpoint, &err));
    pid_t p = three_producers("pub.out");
    /* phase 1: summaries of all three, and nothing else */
    time_t t0 = time(NULL);
    while (tp_sub_summary_count(sub) < 3) {
        ASSERT_LT(time(NULL) - t0, 30);
        tp_sub_msg m;
        ASSERT_LE(tp_sub_recv(sub, &m, 100, &err), 0);
    }
    /* phase 2: watch producer 32 until three of its batches came, then stop watching */
    ASSERT_OK(tp_sub_watch(sub, 32, 1, &err));
    uint64_t seen = 0, last_seq = 0;
    while (seen < 3) {
        ASSERT_LT(time(NULL) - t0, 30);
        tp_sub_msg m;
        int rc = tp_sub_recv(sub, &m, 100, &err);
        ASSERT_GE(rc, 0);
        if (rc == 1) {
            ASSERT_UEQ(m.hdr.producer, 32);
            if (seen > 0)
                ASSERT_UEQ(m.hdr.seq, last_seq + 1);
            last_seq = m.hdr.seq;
            seen++;
        }
    }
    ASSERT_OK(tp_sub_watch(sub, 32, 0, &err));
    /* what was on its way when it stopped may still come, within a moment */
    for (int i = 0; i < 5; i++) {
        tp_sub_msg m;
        if (tp_sub_recv(sub, &m, 100, &err) == 1)
            ASSERT_UEQ(m.hdr.producer, 32);
    }
    tp_sub_stats before;
    tp_sub_stats_get(sub, &before);
    tp_sub_summary s32;
    for (size_t i = 0; i < tp_sub_summary_count(sub); i++) {
        ASSERT_OK(tp_sub_summary_get(sub, i, &s32));
        if (s32.last.producer == 32)
            break;
    }
    uint64_t events_then = s32.events;
    /* phase 3: the rest of the run in summaries only, until every producer's events are in */
    const expect want[3] = {expect_of(30, 5400), expect_of(31, 5400), expect_of(32, 5400)};
    summaries_until(sub, 3 * 5400, t0);
    ASSERT_EQ(task_wait_exit(p, 30), 0);
    tp_sub_stats st;
    tp_sub_stats_get(sub, &st);
    ASSERT_UEQ(st.received, before.received); /* no batch after it stopped watching */
    ASSERT_UEQ(st.malformed, 0);
    ASSERT_EQ(tp_sub_summary_count(sub), 3);
    for (size_t i = 0; i < 3; i++) {
        tp_sub_summary x;
        ASSERT_OK(tp_sub_summary_get(sub, i, &x));
        ASSERT(x.last.producer >= 31 && x.last.producer <= 33);
        size_t k = (size_t)(x.last.producer - 31);
        ASSERT_UEQ(x.events, want[k].events);
        ASSERT_UEQ(x.busy_ns, want[k].busy_ns);
        ASSERT_UEQ(x.blocked_ns, want[k].blocked_ns);
        ASSERT_UEQ(x.missed, 0);
        ASSERT_UEQ(x.batches, 10);
        ASSERT_EQ(x.last.rank, 5 + (int)k);
        ASSERT_UEQ(x.last.pid, 4242);
        ASSERT_STR_EQ(x.last.host, "node-s");
        ASSERT_UEQ(x.last.interval_ns, 200000000);
        ASSERT_GE(x.summaries, 2); /* five seconds of publishing in 200 ms intervals */
        if (x.last.producer == 32)
            ASSERT_GT(x.events, events_then); /* it went on sending after the viewer stopped watching */
    }
    /* the GPU was busy a good part of the time: the comparison is not between zeros */
    ASSERT_GT(want[0].busy_ns, 1000000);
    ASSERT_GT(want[0].blocked_ns, 1000000);
    tp_sub_destroy(&sub);
    const char *said = relay_stop(&r);
    ASSERT_STR_CONTAINS(said, "0 malformed messages dropped");
    ASSERT(strstr(said, " 0 summaries published") == NULL);
}

/* A summary-only viewer at the top of a tree of relays: the node relay summarises the three
 * producers it reaches, the top relay passes its summaries down and summarises only the
 * publisher it reaches itself (a fourth producer, on an endpoint the node relay does not scan).
 * No batch leaves the node relay (the top one takes none of it for summaries), and the figures
 * are the generator's. */
TEST(a_tree_of_relays_moves_summaries_not_batches) {
    private_endpoints();
    relay_proc node, top;
    relay_start(&node, "node", (const char *[]){"--summary-ms", "200", NULL});
    /* the publisher the top relay reaches itself binds a port the kernel chooses (port 0), and the
     * top relay is given the one it got; it waits for its subscriber meanwhile */
    const char *argv[] = {testpub_path(), "--endpoint", "tcp://127.0.0.1:0", "--events", "5400", "--batch", "540",
                          "--seed", "40", "--rate", "3200", "--wait-subscribers", "1", NULL};
    char out[PATH_MAX], errf[PATH_MAX + 8];
    snprintf(out, sizeof out, "%s", task_path("direct.out"));
    snprintf(errf, sizeof errf, "%s.err", out);
    pid_t q = task_spawn(argv, out, errf);
    const char *at = wait_text(out, "endpoint=", 20) + strlen("endpoint=");
    for (int i = 0; strchr(at, '\n') == NULL; i++) { /* the whole line */
        ASSERT_LT(i, 2000);
        task_sleep_ms(10);
        at = wait_text(out, "endpoint=", 20) + strlen("endpoint=");
    }
    char direct[TP_ENDPOINT_MAX];
    size_t len = strcspn(at, "\n");
    ASSERT_LT(len, sizeof direct);
    memcpy(direct, at, len);
    direct[len] = '\0';
    relay_start(&top, "top", (const char *[]){"--summary-ms", "200", node.endpoint, direct, NULL});
    err_msg err = {{0}};
    tp_sub *sub = tp_sub_new(&(tp_sub_opts){.summaries = 1}, &err);
    ASSERT_NOT_NULL(sub);
    ASSERT_OK(tp_sub_connect(sub, top.endpoint, &err));
    time_t t0 = time(NULL);
    pid_t p = three_producers("pub.out");
    summaries_until(sub, 4 * 5400, t0);
    ASSERT_EQ(task_wait_exit(p, 30), 0);
    ASSERT_EQ(task_wait_exit(q, 30), 0);
    const expect want[4] = {expect_of(30, 5400), expect_of(31, 5400), expect_of(32, 5400), expect_of(40, 5400)};
    const uint64_t ids[4] = {31, 32, 33, 41};
    ASSERT_EQ(tp_sub_summary_count(sub), 4);
    uint64_t node_relay = 0;
    for (size_t i = 0; i < 4; i++) {
        tp_sub_summary x;
        ASSERT_OK(tp_sub_summary_get(sub, i, &x));
        size_t k = 0;
        while (k < 4 && ids[k] != x.last.producer)
            k++;
        ASSERT_LT(k, 4);
        ASSERT_UEQ(x.events, want[k].events);
        ASSERT_UEQ(x.busy_ns, want[k].busy_ns);
        ASSERT_UEQ(x.blocked_ns, want[k].blocked_ns);
        ASSERT_UEQ(x.missed, 0);
        if (k < 3) { /* the node's three: all from one relay */
            if (node_relay == 0)
                node_relay = x.last.relay;
            ASSERT_UEQ(x.last.relay, node_relay);
        }
    }
    tp_sub_destroy(&sub);
    const char *top_said = relay_stop(&top);
    ASSERT(strstr(top_said, " 0 summaries published") == NULL); /* the direct publisher's */
    ASSERT_STR_CONTAINS(top_said, "0 malformed messages dropped");
    const char *node_said = relay_stop(&node);
    ASSERT_STR_CONTAINS(node_said, " 0 batches (0.0 MB) went through");
    ASSERT(strstr(node_said, " 0 summaries published") == NULL);
}

/* A bare XPUB socket on this process's own endpoint (a private endpoint directory), which a relay
 * finds as it finds traced processes: receives time out after timeout_ms. */
static void *bare_process(void *ctx, int timeout_ms) {
    private_endpoints();
    char ep[TP_ENDPOINT_MAX];
    err_msg err = {{0}};
    ASSERT_OK(tp_endpoint_for_pid((long)getpid(), ep, sizeof ep, &err));
    void *x = zmq_socket(ctx, ZMQ_XPUB);
    ASSERT_NOT_NULL(x);
    int zero = 0;
    ASSERT_OK(zmq_setsockopt(x, ZMQ_LINGER, &zero, sizeof zero));
    ASSERT_OK(zmq_setsockopt(x, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms));
    ASSERT_OK(zmq_bind(x, ep));
    return x;
}

/* A publisher of the node that sends what is not [topic][batch] (a lone frame, a body that is no
 * batch, a batch under another producer's topic, three frames): the relay that summarises counts
 * each and drops it, and goes on summarising the sound batch among them. The publisher is a bare
 * XPUB socket on this process's own endpoint, which the relay finds as it finds traced processes. */
TEST(relay_drops_and_counts_bad_messages_from_upstream) {
    void *ctx = zmq_ctx_new();
    void *x = bare_process(ctx, 20000);
    err_msg err = {{0}};
    relay_proc r;
    relay_start(&r, "relay", (const char *[]){"--summary-ms", "100", NULL});
    tp_sub *sub = tp_sub_new(&(tp_sub_opts){.summaries = 1}, &err);
    ASSERT_NOT_NULL(sub);
    ASSERT_OK(tp_sub_connect(sub, r.endpoint, &err));
    /* the relay's summaries take every batch: its subscription to "B" comes up */
    uint8_t note[64];
    int n;
    while ((n = zmq_recv(x, note, sizeof note, 0)) != 2 || note[0] != 1 || note[1] != 'B') {
        ASSERT_GT(n, 0);
        tp_sub_msg m;
        tp_sub_recv(sub, &m, 0, &err);
    }
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 9});
    synth sy;
    synth_init(&sy, 9);
    synth_fill(&sy, enc, 540);
    tp_buf b = {0};
    ASSERT_OK(tp_enc_finish(enc, &b));
    uint8_t t9[9] = {'B', 9}, t5[9] = {'B', 5};
    ASSERT_EQ(zmq_send(x, t9, 9, 0), 9); /* a topic alone */
    ASSERT_EQ(zmq_send(x, t9, 9, ZMQ_SNDMORE), 9);
    ASSERT_EQ(zmq_send(x, "not a batch", 11, 0), 11);
    ASSERT_EQ(zmq_send(x, t5, 9, ZMQ_SNDMORE), 9); /* producer 9's batch under 5's topic */
    ASSERT_EQ(zmq_send(x, b.data, b.len, 0), (int)b.len);
    ASSERT_EQ(zmq_send(x, t9, 9, ZMQ_SNDMORE), 9);
    ASSERT_EQ(zmq_send(x, b.data, b.len, ZMQ_SNDMORE), (int)b.len);
    ASSERT_EQ(zmq_send(x, "x", 1, 0), 1);
    ASSERT_EQ(zmq_send(x, t9, 9, ZMQ_SNDMORE), 9); /* and a sound one */
    ASSERT_EQ(zmq_send(x, b.data, b.len, 0), (int)b.len);
    time_t t0 = time(NULL);
    tp_sub_summary s = {0};
    while (s.events < 540) {
        ASSERT_LT(time(NULL) - t0, 20);
        tp_sub_msg m;
        ASSERT_LE(tp_sub_recv(sub, &m, 100, &err), 0);
        if (tp_sub_summary_count(sub) > 0)
            ASSERT_OK(tp_sub_summary_get(sub, 0, &s));
    }
    ASSERT_EQ(tp_sub_summary_count(sub), 1);
    ASSERT_UEQ(s.last.producer, 9);
    ASSERT_UEQ(s.events, 540);
    ASSERT_UEQ(s.batches, 1);
    ASSERT_UEQ(s.busy_ns, expect_of(9, 540).busy_ns);
    tp_sub_destroy(&sub);
    ASSERT_STR_CONTAINS(relay_stop(&r), "; 4 malformed messages dropped");
    tp_buf_free(&b);
    tp_enc_destroy(&enc);
    zmq_close(x);
    zmq_ctx_term(ctx);
}

/* The number after "key": in the object of text that starts at from. */
static uint64_t json_u64(const char *from, const char *key) {
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *at = strstr(from, k), *end = strchr(from, '}');
    ASSERT(at != NULL && end != NULL && at < end);
    return strtoull(at + strlen(k), NULL, 10);
}

/* `synctop report --ranks --summary` through a relay, as a user runs it: one row per producer,
 * whose figures add up to what the generator made. */
TEST(report_summary_prints_each_rank_from_summaries_alone) {
    private_endpoints();
    relay_proc r;
    relay_start(&r, "relay", (const char *[]){"--summary-ms", "250", NULL});
    const char *argv[] = {task_synctop(), "report", "--ranks", "--summary", "--for", "12", "--format", "json",
                          r.endpoint, NULL};
    pid_t rep = task_spawn(argv, task_path("report.json"), task_path("report.err"));
    pid_t p = three_producers("pub.out");
    ASSERT_EQ(task_wait_exit(p, 30), 0);
    ASSERT_EQ(task_wait_exit(rep, 30), 0);
    char json[1 << 14];
    snprintf(json, sizeof json, "%s", slurp(task_path("report.json")));
    for (int k = 0; k < 3; k++) {
        char id[64];
        snprintf(id, sizeof id, "\"producer\":\"%016x\"", 31 + k);
        const char *at = strstr(json, id);
        if (at == NULL)
            TASK_FAIL_("no %s in %s", id, json);
        expect e = expect_of(30 + k, 5400);
        ASSERT_UEQ(json_u64(at, "events"), e.events);
        ASSERT_UEQ(json_u64(at, "busy_ns"), e.busy_ns);
        ASSERT_UEQ(json_u64(at, "blocked_ns"), e.blocked_ns);
        ASSERT_UEQ(json_u64(at, "rank"), 5 + (uint64_t)k);
        ASSERT_STR_CONTAINS(at, "\"host\":\"node-s\"");
    }
    ASSERT_STR_CONTAINS(json, "\"malformed\":0}");
    relay_stop(&r);
}

/* With nothing answering, `report --ranks --summary` says so and fails: an empty table is no
 * report. */
TEST(report_summary_with_nothing_answering_fails) {
    const char *argv[] = {task_synctop(), "report", "--ranks", "--summary", "--for", "1", "tcp://127.0.0.1:1", NULL};
    pid_t rep = task_spawn(argv, task_path("none.out"), task_path("none.err"));
    ASSERT_EQ(task_wait_exit(rep, 30), 1);
    ASSERT_STR_CONTAINS(slurp(task_path("none.err")), "no summary came in 1 s");
}

/* A relay takes its node's batches for summaries only while a subscriber below wants summaries:
 * before one comes and after it goes, no subscription to batches reaches the processes (an
 * on-demand tracer stays, or goes back, dormant). The process is a bare XPUB socket on this
 * process's endpoint, which sees every subscription and unsubscription that comes up. */
TEST(relay_takes_batches_for_summaries_only_while_someone_wants_them) {
    void *ctx = zmq_ctx_new();
    void *x = bare_process(ctx, 200);
    err_msg err = {{0}};
    relay_proc r;
    relay_start(&r, "relay", NULL);
    /* a summary viewer comes: its subscription goes up, and the relay's to every batch */
    tp_sub *sub = tp_sub_new(&(tp_sub_opts){.summaries = 1}, &err);
    ASSERT_NOT_NULL(sub);
    ASSERT_OK(tp_sub_connect(sub, r.endpoint, &err));
    uint8_t note[64];
    int seen_s = 0, seen_b = 0;
    time_t t0 = time(NULL);
    while (!(seen_s && seen_b)) {
        ASSERT_LT(time(NULL) - t0, 20);
        int n = zmq_recv(x, note, sizeof note, 0);
        seen_s |= n == 2 && note[0] == 1 && note[1] == 'S';
        if (n == 2 && note[0] == 1 && note[1] == 'B')
            seen_b = 1;
        ASSERT(!(n == 2 && note[0] == 0 && note[1] == 'B'));
    }
    /* it goes: the relay lets go of the batches */
    tp_sub_destroy(&sub);
    int gone_b = 0;
    while (!gone_b) {
        ASSERT_LT(time(NULL) - t0, 20);
        int n = zmq_recv(x, note, sizeof note, 0);
        gone_b = n == 2 && note[0] == 0 && note[1] == 'B';
    }
    /* a raw viewer does not make the relay summarise: only its own subscription to "B" comes */
    tp_sub *raw = tp_sub_new(NULL, &err);
    ASSERT_NOT_NULL(raw);
    ASSERT_OK(tp_sub_connect(raw, r.endpoint, &err));
    int subs_b = 0;
    time_t t1 = time(NULL);
    while (time(NULL) - t1 < 2) {
        int n = zmq_recv(x, note, sizeof note, 0);
        subs_b += n == 2 && note[0] == 1 && note[1] == 'B';
    }
    ASSERT_EQ(subs_b, 1);
    tp_sub_destroy(&raw);
    ASSERT_STR_CONTAINS(relay_stop(&r), " 0 summaries published");
    zmq_close(x);
    zmq_ctx_term(ctx);
}
