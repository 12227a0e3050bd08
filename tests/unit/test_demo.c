/*
 * `synctop demo`: a sample profiler trace published live, as a traced program publishes. What the
 * demo sends is recorded with `synctop record` (the real binary, over real sockets) and read back
 * with `synctop report`; the figures expected come from the sample's own JSON text, counted here.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include "task.h"

#define SAMPLE KINETO_TRACE_DIR "/resnet_2080ti_two_threads.json.gz"

#define KEEP_PATH(var, name)                                                         \
    char var[PATH_MAX];                                                              \
    snprintf(var, sizeof var, "%s", task_path(name))

static int run_synctop(const char *const args[], char **out, char **err) { return task_run_synctop(args, out, err, 90); }

/* Waits until the file holds needle (a process's stderr). */
static void wait_text(const char *path, const char *needle) {
    for (int i = 0; i < 1200; i++) {
        if (access(path, R_OK) != 0) {
            task_sleep_ms(50);
            continue;
        }
        char *t = task_slurp(path);
        int found = strstr(t, needle) != NULL;
        free(t);
        if (found)
            return;
        task_sleep_ms(50);
    }
    char *t = task_slurp(path);
    TASK_FAIL_("%s never said \"%s\": %s", path, needle, t);
}

/* The sample's JSON, inflated. */
static char *sample_json(void) {
    gzFile g = gzopen(SAMPLE, "rb");
    ASSERT_NOT_NULL(g);
    size_t cap = 32u << 20, n = 0;
    char *buf = malloc(cap);
    ASSERT_NOT_NULL(buf);
    for (int k; (k = gzread(g, buf + n, (unsigned)(cap - n - 1))) > 0;) {
        n += (size_t)k;
        if (n + 1 == cap) {
            buf = realloc(buf, cap *= 2);
            ASSERT_NOT_NULL(buf);
        }
    }
    gzclose(g);
    buf[n] = '\0';
    return buf;
}

/* What the sample's JSON holds, read line by line (each row's "cat" and "name" on one line, its
 * "ts" and "dur" on the next): the rows of each of three APIs, and the span of the GPU's work
 * (kernel, copy and memset rows), in ns. */
typedef struct sample_counts {
    uint64_t syncs, frees, devsyncs, gpu_span;
} sample_counts;

static void sample_count(sample_counts *c) {
    char *json = sample_json();
    uint64_t lo = UINT64_MAX, hi = 0;
    int gpu = 0;
    for (char *l = json; *l;) {
        char *e = l;
        while (*e && *e != '\n')
            e++;
        char was = *e;
        *e = '\0'; /* one line at a time: a search never runs over the whole text */
        c->syncs += strstr(l, "\"name\": \"cudaStreamSynchronize\"") != NULL;
        c->frees += strstr(l, "\"name\": \"cudaFree\"") != NULL;
        c->devsyncs += strstr(l, "\"name\": \"cudaDeviceSynchronize\"") != NULL;
        const char *ts = strstr(l, "\"ts\": "), *dur = strstr(l, "\"dur\": ");
        if (gpu && ts != NULL && dur != NULL) {
            uint64_t t = strtoull(ts + 6, NULL, 10), d = strtoull(dur + 7, NULL, 10);
            lo = t < lo ? t : lo;
            hi = t + d > hi ? t + d : hi;
            gpu = 0;
        }
        if (strstr(l, "\"cat\": \"kernel\"") || strstr(l, "\"cat\": \"gpu_memcpy\"") ||
            strstr(l, "\"cat\": \"gpu_memset\""))
            gpu = 1;
        *e = was;
        l = was ? e + 1 : e;
    }
    free(json);
    ASSERT(hi > lo);
    c->gpu_span = (hi - lo) * 1000;
}

/* The sum of the "count" of the report's call sites of one API (its JSON's "sites" list, which
 * ends where the next list of the report starts). */
static uint64_t report_calls(const char *json, const char *api) {
    char key[128];
    snprintf(key, sizeof key, "\"api\":\"%s\"", api);
    const char *sites = strstr(json, "\"sites\":[");
    ASSERT_NOT_NULL(sites);
    const char *end = sites + strlen(sites);
    static const char *after[] = {"\"findings\":[", "\"host_ranges\":[", "\"devices\":["};
    for (size_t i = 0; i < 3; i++) {
        const char *e = strstr(sites, after[i]);
        if (e != NULL && e < end)
            end = e;
    }
    uint64_t n = 0;
    for (const char *p = sites; (p = strstr(p, key)) != NULL && p < end; p++) {
        const char *c = strstr(p, "\"count\":");
        ASSERT(c != NULL && c < end);
        n += strtoull(c + 8, NULL, 10);
    }
    return n;
}

static uint64_t json_u64(const char *json, const char *key) {
    const char *p = strstr(json, key);
    ASSERT_NOT_NULL(p);
    return strtoull(p + strlen(key), NULL, 10);
}

static uint64_t realtime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* What a recording of `loops` loops of the sample holds, as report reads it: each loop's blocking
 * calls, as many as the sample's JSON has rows of them, on a timeline that goes on from now. */
static void check_recording(const char *trace, uint64_t loops, uint64_t started) {
    sample_counts sc = {0};
    sample_count(&sc);
    uint64_t syncs = sc.syncs, frees = sc.frees, devsyncs = sc.devsyncs, gpu_span = sc.gpu_span;
    ASSERT(syncs > 0 && frees > 0 && devsyncs > 0);
    char *out = NULL;
    const char *report[] = {"report", "--format", "json", trace, NULL};
    ASSERT_EQ(run_synctop(report, &out, NULL), 0);
    ASSERT_UEQ(report_calls(out, "cudaStreamSynchronize"), loops * syncs);
    ASSERT_UEQ(report_calls(out, "cudaFree"), loops * frees);
    ASSERT_UEQ(report_calls(out, "cudaDeviceSynchronize"), loops * devsyncs);
    /* the times are now's, and each loop comes after the one before: the GPU's work spans a loop
     * more than the sample's for each loop after the first (a loop is at least the GPU's span) */
    uint64_t first = json_u64(out, "\"first\":"), last = json_u64(out, "\"last\":");
    ASSERT(first >= started);
    ASSERT(last - first >= loops * gpu_span);
    free(out);
}

TEST(demo_recorded_holds_the_samples_stalls_once_per_loop) {
    KEEP_PATH(trace, "demo.trace");
    KEEP_PATH(err, "demo.err");
    uint64_t started = realtime_ns();
    const char *argv[] = {task_synctop(), "demo", "--no-tui", "--trace", SAMPLE, "--speed", "40", "--loops", "2", NULL};
    pid_t demo = task_spawn(argv, task_path("demo.out"), err);
    wait_text(err, "waiting for a viewer");
    char pid[32];
    snprintf(pid, sizeof pid, "%ld", (long)demo);
    /* record stops by itself: the demo ends after two loops, as a program ends */
    char *rec_err = NULL;
    const char *record[] = {"record", pid, "-o", trace, NULL};
    ASSERT_EQ(run_synctop(record, NULL, &rec_err), 0);
    ASSERT_STR_CONTAINS(rec_err, "every producer finished");
    ASSERT_STR_CONTAINS(rec_err, "drops: 0 missed batches + 0 records");
    free(rec_err);
    ASSERT_EQ(task_wait_exit(demo, 30), 0);
    char *said = task_slurp(err);
    ASSERT_STR_CONTAINS(said, "a viewer connected: playing");
    ASSERT_STR_CONTAINS(said, "2 whole loops played");
    free(said);
    check_recording(trace, 2, started);
    /* the process record says what it is */
    char *info = NULL;
    const char *inf[] = {"info", trace, NULL};
    ASSERT_EQ(run_synctop(inf, &info, NULL), 0);
    char want[128];
    snprintf(want, sizeof want, "pid %ld, host ", (long)demo);
    ASSERT_STR_CONTAINS(info, want);
    ASSERT_STR_CONTAINS(info, "command line: synctop demo: resnet_2080ti_two_threads.json.gz --no-tui --speed 40 "
                              "--loops 2\n");
    ASSERT_STR_CONTAINS(info, "device 0: NVIDIA GeForce RTX 2080 Ti");
    free(info);
}

TEST(demo_over_tcp_beyond_loopback_needs_a_key_and_is_read_with_it) {
    int port = task_free_port();
    if (port == 0)
        TASK_SKIP("no free loopback port");
    char ep[64], any[64];
    snprintf(any, sizeof any, "tcp://0.0.0.0:%d", port);
    /* in the clear beyond this machine: refused before anything is read or bound */
    char *err = NULL;
    const char *open[] = {"demo", "--no-tui", "--listen", any, NULL};
    ASSERT_EQ(run_synctop(open, NULL, &err), 2);
    ASSERT_STR_CONTAINS(err, "is not a loopback address");
    ASSERT_STR_CONTAINS(err, "--key demo.key");
    free(err);
    /* with keys: a viewer that has the public key records it */
    KEEP_PATH(base, "k");
    const char *into_dir[] = {"keygen", "-o", task_tmpdir(), NULL}; /* a directory is no name for keys */
    ASSERT_EQ(run_synctop(into_dir, NULL, &err), 2);
    ASSERT_STR_CONTAINS(err, "give the keys' name, not only a directory");
    free(err);
    const char *keygen[] = {"keygen", "-o", base, NULL};
    ASSERT_EQ(run_synctop(keygen, NULL, NULL), 0);
    char key[PATH_MAX + 8], pub[PATH_MAX + 8];
    snprintf(key, sizeof key, "%s.key", base);
    snprintf(pub, sizeof pub, "%s.pub", base);
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    KEEP_PATH(trace, "tcp.trace");
    KEEP_PATH(derr, "demo.err");
    uint64_t started = realtime_ns();
    const char *argv[] = {task_synctop(), "demo", "--no-tui", "--trace", SAMPLE, "--speed", "60", "--loops", "1",
                          "--listen", ep, "--key", key, NULL};
    pid_t demo = task_spawn(argv, task_path("demo.out"), derr);
    wait_text(derr, "waiting for a viewer");
    char *rec_err = NULL;
    const char *record[] = {"record", ep, "--server-key", pub, "-o", trace, NULL};
    ASSERT_EQ(run_synctop(record, NULL, &rec_err), 0);
    ASSERT_STR_CONTAINS(rec_err, "every producer finished");
    free(rec_err);
    ASSERT_EQ(task_wait_exit(demo, 30), 0);
    check_recording(trace, 1, started);
}

/* A relay finds the demo as it finds a traced process (its endpoint in the private directory), and
 * a recording through the relay holds the loop whole: the demo's clock waits for the first
 * subscription, which comes up through the relay from the recorder. */
TEST(demo_through_a_relay_is_recorded_whole) {
    int port = task_free_port();
    if (port == 0)
        TASK_SKIP("no free loopback port");
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    KEEP_PATH(rerr, "relay.err");
    KEEP_PATH(derr, "demo.err");
    KEEP_PATH(trace, "relayed.trace");
    const char *relay[] = {task_synctop(), "relay", "--listen", ep, NULL};
    pid_t rp = task_spawn(relay, task_path("relay.out"), rerr);
    wait_text(rerr, "relaying this user's traced processes here");
    uint64_t started = realtime_ns();
    const char *argv[] = {task_synctop(), "demo", "--no-tui", "--trace", SAMPLE, "--speed", "60", "--loops", "1", NULL};
    pid_t demo = task_spawn(argv, task_path("demo.out"), derr);
    char said[128];
    snprintf(said, sizeof said, "+ process %ld ", (long)demo);
    wait_text(rerr, said);
    char *rec_err = NULL;
    const char *record[] = {"record", ep, "-o", trace, NULL};
    ASSERT_EQ(run_synctop(record, NULL, &rec_err), 0);
    ASSERT_STR_CONTAINS(rec_err, "every producer finished");
    free(rec_err);
    ASSERT_EQ(task_wait_exit(demo, 30), 0);
    kill(rp, SIGINT);
    ASSERT_EQ(task_wait_exit(rp, 30), 0);
    check_recording(trace, 1, started);
}

TEST(demo_stops_cleanly_on_sigint_and_says_so) {
    KEEP_PATH(err, "demo.err");
    KEEP_PATH(trace, "int.trace");
    const char *argv[] = {task_synctop(), "demo", "--no-tui", "--trace", SAMPLE, NULL};
    pid_t demo = task_spawn(argv, task_path("demo.out"), err);
    wait_text(err, "waiting for a viewer");
    char pid[32];
    snprintf(pid, sizeof pid, "%ld", (long)demo);
    const char *rargv[] = {task_synctop(), "record", pid, "-o", trace, NULL};
    KEEP_PATH(rerr, "record.err");
    pid_t rec = task_spawn(rargv, task_path("record.out"), rerr);
    wait_text(err, "a viewer connected: playing");
    task_sleep_ms(500);
    kill(demo, SIGINT);
    ASSERT_EQ(task_wait_exit(demo, 30), 0);
    char *said = task_slurp(err);
    ASSERT_STR_CONTAINS(said, "synctop demo: ended: ");
    free(said);
    /* the last batch went out: the recording ends as a finished program's does */
    ASSERT_EQ(task_wait_exit(rec, 30), 0);
    said = task_slurp(rerr);
    ASSERT_STR_CONTAINS(said, "every producer finished");
    free(said);
}

TEST(demo_usage_errors) {
    static const struct {
        const char *args[8];
        int status;
        const char *says;
    } cases[] = {
        {{"demo", "--speed", "0"}, 2, "--speed wants a number from 0.01"},
        {{"demo", "--loops", "0"}, 2, "--loops wants a whole number from 1"},
        {{"demo", "--clients", "x", "--no-tui"}, 2, "--clients goes with --key"},
        {{"demo", "extra"}, 2, "unexpected argument 'extra'"},
        {{"demo", "--no-tui", "--trace", "/nonexistent/x.json"}, 1, "synctop demo: "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *err = NULL;
        ASSERT_EQ(run_synctop(cases[i].args, NULL, &err), cases[i].status);
        ASSERT_STR_CONTAINS(err, cases[i].says);
        free(err);
    }
    char *out = NULL;
    const char *help[] = {"demo", "--help", NULL};
    ASSERT_EQ(run_synctop(help, &out, NULL), 0);
    ASSERT_STR_CONTAINS(out, "usage: synctop demo");
    free(out);
}
