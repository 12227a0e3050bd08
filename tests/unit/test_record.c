/*
 * `synctop record` and `synctop info`, run as the user runs them: the real binary fed by
 * synctop-testpub over ZeroMQ, its output captured and checked, its file read back and compared
 * with the synthetic stream regenerated from the publisher's seed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "synctop/file.h"
#include "synctop/net.h"
#include "synth.h"
#include "task.h"

/* ---- processes ---- */

static char *slurp_text(const char *path) { return task_slurp(path); }

/* Runs synctop with the given arguments to the end; returns its status, stdout in *out. */
static int run_synctop(const char *const args[], char **out, char **err) { return task_run_synctop(args, out, err, 60); }

/* task_path() rotates over a few static buffers: a path kept across calls gets its own copy. */
#define KEEP_PATH(var, name)                                                         \
    char var[PATH_MAX];                                                              \
    snprintf(var, sizeof var, "%s", task_path(name))

static const char *testpub_path(void) {
    static char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/synctop-testpub", task_bindir());
    return p;
}

static const char *endpoint(const char *name) {
    static char ep[PATH_MAX];
    snprintf(ep, sizeof ep, "ipc://%s/%s", task_tmpdir(), name);
    return ep;
}

/* ---- the published stream, regenerated ---- */

typedef struct expect {
    synth s;
    tp_enc *enc;
    tp_strtab *names; /* the stream's strings, by id */
    uint64_t per_kind[TP_K_MAX_];
    uint64_t events;
} expect;

static void expect_init(expect *x, uint64_t seed) {
    memset(x, 0, sizeof *x);
    synth_init(&x->s, seed);
    x->enc = tp_enc_new(&(tp_enc_opts){.producer = seed + 1});
    synth_meta(&x->s, x->enc);
    tp_buf b = {0};
    ASSERT_OK(tp_enc_finish(x->enc, &b));
    tp_dec d = {0};
    ASSERT_OK(tp_dec_open(&d, b.data, b.len, NULL));
    x->names = tp_strtab_new();
    ASSERT_OK(tp_dec_load_strings(&d, x->names));
    tp_dec_free(&d);
    tp_buf_free(&b);
}

static void expect_free(expect *x) {
    tp_enc_destroy(&x->enc);
    tp_strtab_destroy(&x->names);
}

static void expect_next(expect *x, tp_record *r) {
    synth_next(&x->s, x->enc, r);
    x->per_kind[r->head.kind]++;
    x->events++;
}

static const char *event_name(const tp_record *r, const tp_strtab *t) {
    uint32_t id = r->head.kind == TP_K_KERNEL ? r->kernel.name
                  : r->head.kind == TP_K_API  ? r->api.name
                  : r->head.kind == TP_K_NVTX ? r->nvtx.name
                                              : 0;
    return id ? tp_strtab_get(t, id, NULL) : "";
}

typedef struct readback {
    uint64_t events, batches, keyframes, last_seq;
    int ended;
} readback;

/* Reads a recorded file and checks that its events are exactly the stream's, in order, with the
 * same names; the producer's batches must come in sequence with no gap. */
static readback check_recorded(const char *path, uint64_t seed, expect *x) {
    err_msg err = {{0}};
    tp_freader *r = tp_freader_open(path, &err);
    if (r == NULL)
        TASK_FAIL_("open %s: %s", path, err.msg);
    readback rb = {0};
    tp_buf buf = {0};
    tp_dec d = {0};
    tp_strtab *names = tp_strtab_new();
    for (size_t i = 0; i < tp_freader_count(r); i++) {
        const tp_findex_entry *e = tp_freader_entry(r, i);
        if (tp_freader_read(r, i, &buf, &err) != 0 || tp_dec_open(&d, buf.data, buf.len, &err) != 0)
            TASK_FAIL_("batch %zu: %s", i, err.msg);
        ASSERT_UEQ(d.hdr.producer, seed + 1);
        ASSERT_OK(tp_dec_load_strings(&d, names));
        if (e->flags & TP_BF_SYNTHETIC) {
            rb.keyframes++;
            continue;
        }
        ASSERT_UEQ(d.hdr.seq, rb.batches); /* no gap, nothing twice */
        rb.batches++;
        rb.last_seq = d.hdr.seq;
        rb.ended = (d.hdr.flags & TP_BF_END) != 0;
        const tp_record *rec;
        while ((rec = tp_dec_next_record(&d)) != NULL) {
            if (TP_KIND_IS_META(rec->head.kind))
                continue;
            tp_record want;
            expect_next(x, &want);
            ASSERT_EQ(rec->head.kind, want.head.kind);
            if (memcmp(rec, &want, tp_kind_size(rec->head.kind)) != 0)
                TASK_FAIL_("event %" PRIu64 " differs from the published one", rb.events);
            ASSERT_STR_EQ(event_name(rec, names), event_name(&want, x->names));
            rb.events++;
        }
    }
    tp_strtab_destroy(&names);
    tp_dec_free(&d);
    tp_buf_free(&buf);
    tp_freader_close(&r);
    return rb;
}

static void assert_kind_counts(const char *out, const expect *x) {
    char line[64];
    snprintf(line, sizeof line, "events: %" PRIu64 "\n", x->events);
    ASSERT_STR_CONTAINS(out, line);
    int kinds = 0;
    for (unsigned k = 0; k < TP_K_MAX_; k++) {
        if (!x->per_kind[k])
            continue;
        snprintf(line, sizeof line, "\n  %s: %" PRIu64 "\n", tp_kind_name(k), x->per_kind[k]);
        ASSERT_STR_CONTAINS(out, line);
        kinds++;
    }
    ASSERT_GE(kinds, 5);
}

/* ---- record ---- */

TEST(record_writes_exactly_what_was_published) {
    const char *ep = endpoint("pub.sock");
    KEEP_PATH(file, "rec.trace");
    const char *pub_argv[] = {testpub_path(), "--endpoint", ep, "--events", "60000", "--batch", "700",
                              "--seed", "5", "--wait-subscribers", "1", NULL};
    pid_t pub = task_spawn(pub_argv, task_path("pub.out"), task_path("pub.err"));
    const char *rec_argv[] = {task_synctop(), "record", ep, "-o", file, NULL};
    pid_t rec = task_spawn(rec_argv, task_path("rec.out"), task_path("rec.err"));
    ASSERT_EQ(task_wait_exit(pub, 60), 0);
    int st = task_wait_exit(rec, 30);
    if (st == -1)
        TASK_FAIL_("synctop record did not stop after the producer's END batch");
    char *rec_err = slurp_text(task_path("rec.err"));
    if (st != 0)
        TASK_FAIL_("synctop record exited %d: %s", st, rec_err);
    ASSERT_STR_CONTAINS(rec_err, "stopped: every producer finished");
    ASSERT_STR_CONTAINS(rec_err, "60000 events");
    ASSERT_NULL(strchr(rec_err, '\r')); /* not a terminal: no progress line */
    char *pub_out = slurp_text(task_path("pub.out"));
    unsigned long long sent = 0, dropped = 1, events = 0;
    const char *line = strstr(pub_out, "sent=");
    ASSERT_NOT_NULL(line);
    ASSERT_EQ(sscanf(line, "sent=%llu dropped=%llu events=%llu", &sent, &dropped, &events), 3);
    ASSERT_EQ(dropped, 0);
    ASSERT_EQ(events, 60000);

    expect x;
    expect_init(&x, 5);
    readback rb = check_recorded(file, 5, &x);
    ASSERT_UEQ(rb.events, 60000);
    ASSERT_UEQ(rb.batches, sent);
    ASSERT(rb.ended);

    char *out = NULL;
    const char *info[] = {"info", file, NULL};
    ASSERT_EQ(run_synctop(info, &out, NULL), 0);
    assert_kind_counts(out, &x);
    ASSERT_STR_CONTAINS(out, "closed cleanly: yes");
    ASSERT_STR_CONTAINS(out, "drops: none");
    ASSERT_STR_CONTAINS(out, "problems: none");
    ASSERT_STR_CONTAINS(out, "pid 4242, host gpu-node-07, rank 0 of 1");
    ASSERT_STR_CONTAINS(out, "command line: python train.py --epochs 3");
    ASSERT_STR_CONTAINS(out, "device 0: NVIDIA H100 80GB HBM3, compute capability 9.0");
    ASSERT_STR_CONTAINS(out, "2 streams: 7 (default), 8");
    ASSERT_STR_CONTAINS(out, "ended: yes");
    char want[64];
    snprintf(want, sizeof want, "batches: %llu (seq 0 to %llu)", sent, sent - 1);
    ASSERT_STR_CONTAINS(out, want);
    free(out);
    expect_free(&x);
    free(pub_out);
    free(rec_err);
}

TEST(record_killed_mid_stream_leaves_a_readable_file) {
    const char *ep = endpoint("kill.sock");
    KEEP_PATH(file, "killed.trace");
    const char *pub_argv[] = {testpub_path(), "--endpoint", ep, "--events", "100000000", "--batch", "500",
                              "--rate", "100000", "--seed", "9", "--wait-subscribers", "1", NULL};
    pid_t pub = task_spawn(pub_argv, task_path("pub.out"), task_path("pub.err"));
    const char *rec_argv[] = {task_synctop(), "record", ep, "-o", file, NULL};
    pid_t rec = task_spawn(rec_argv, task_path("rec.out"), task_path("rec.err"));
    struct stat sb = {0};
    for (int i = 0; i < 6000 && (stat(file, &sb) != 0 || sb.st_size < 200000); i++)
        task_sleep_ms(10);
    ASSERT_GE(sb.st_size, 200000);
    ASSERT_OK(kill(rec, SIGKILL));
    ASSERT_EQ(task_wait_exit(rec, 10), 128 + SIGKILL);
    kill(pub, SIGTERM);
    task_wait_exit(pub, 10);

    err_msg err = {{0}};
    tp_freader *r = tp_freader_open(file, &err);
    if (r == NULL)
        TASK_FAIL_("%s", err.msg);
    ASSERT(!tp_freader_complete(r));
    ASSERT_LE(tp_freader_problem_count(r), 1);
    if (tp_freader_problem_count(r) == 1) { /* only ever the cut-short tail */
        const tp_fproblem *p = tp_freader_problem(r, 0);
        ASSERT_UEQ(p->offset + p->length, tp_freader_size(r));
    }
    tp_freader_close(&r);
    expect x;
    expect_init(&x, 9);
    readback rb = check_recorded(file, 9, &x);
    ASSERT_GT(rb.events, 10000);
    ASSERT(!rb.ended);

    char *out = NULL;
    const char *info[] = {"info", file, NULL};
    ASSERT_EQ(run_synctop(info, &out, NULL), 0);
    ASSERT_STR_CONTAINS(out, "closed cleanly: no");
    assert_kind_counts(out, &x);
    free(out);
    expect_free(&x);
}

/* What a trace file holds, read back by the file reader: batches that are not synthetic, their
 * events (the batch headers'), its size, and the damage found. */
typedef struct file_counts {
    uint64_t batches, events, bytes;
    size_t problems;
} file_counts;

static file_counts count_file(const char *path) {
    err_msg err = {{0}};
    tp_freader *r = tp_freader_open(path, &err);
    if (r == NULL)
        TASK_FAIL_("open %s: %s", path, err.msg);
    file_counts c = {.bytes = tp_freader_size(r), .problems = tp_freader_problem_count(r)};
    for (size_t i = 0; i < tp_freader_count(r); i++) {
        const tp_findex_entry *e = tp_freader_entry(r, i);
        if (!(e->flags & TP_BF_SYNTHETIC)) {
            c.batches++;
            c.events += e->n_events;
        }
    }
    tp_freader_close(&r);
    return c;
}

/* record's final line, "wrote FILE: E events, B batches, M MB, drops: ...": its figures. */
static void parse_summary(const char *err_text, uint64_t *events, uint64_t *batches, double *mb) {
    const char *w = strstr(err_text, "synctop record: wrote ");
    if (w == NULL)
        TASK_FAIL_("no summary in: %s", err_text);
    const char *c = strstr(w + strlen("synctop record: wrote "), ": ");
    ASSERT_NOT_NULL(c);
    unsigned long long e = 0, b = 0;
    if (sscanf(c + 2, "%llu events, %llu batches, %lf MB", &e, &b, mb) != 3)
        TASK_FAIL_("unexpected summary: %s", w);
    *events = e;
    *batches = b;
}

/* A full disk (a file size limit here) stops the recording: the summary states what the file
 * holds, as its reader counts it, not what was received; and the file is cut back to its last
 * whole batch. */
TEST(record_on_a_full_disk_states_what_the_file_holds) {
    const char *ep = endpoint("full.sock");
    KEEP_PATH(file, "full.trace");
    const char *pub_argv[] = {testpub_path(), "--endpoint", ep, "--events", "100000000", "--batch", "1024",
                              "--seed", "13", "--wait-subscribers", "1", NULL};
    pid_t pub = task_spawn(pub_argv, task_path("pub.out"), task_path("pub.err"));
    struct rlimit old;
    ASSERT_OK(getrlimit(RLIMIT_FSIZE, &old));
    rlim_t limit = 3000000; /* a disk that fills at 3 MB, past several write-buffer drains */
    if (old.rlim_max != RLIM_INFINITY && old.rlim_max < limit)
        TASK_SKIP("the file size limit here is already below %llu bytes", (unsigned long long)limit);
    void (*old_xfsz)(int) = signal(SIGXFSZ, SIG_IGN); /* a write past it fails (EFBIG), as on a full disk */
    ASSERT_OK(setrlimit(RLIMIT_FSIZE, &(struct rlimit){limit, old.rlim_max}));
    const char *rec_argv[] = {task_synctop(), "record", ep, "-o", file, NULL};
    pid_t rec = task_spawn(rec_argv, task_path("rec.out"), task_path("rec.err"));
    ASSERT_OK(setrlimit(RLIMIT_FSIZE, &old));
    signal(SIGXFSZ, old_xfsz);
    int st = task_wait_exit(rec, 60);
    kill(pub, SIGTERM);
    task_wait_exit(pub, 10);
    char *text = slurp_text(task_path("rec.err"));
    if (st != 1)
        TASK_FAIL_("record on a full disk exited %d: %s", st, text);
    ASSERT_STR_CONTAINS(text, "cannot write");
    ASSERT_STR_CONTAINS(text, "stopped: error");
    uint64_t events = 0, batches = 0;
    double mb = 0;
    parse_summary(text, &events, &batches, &mb);
    file_counts fc = count_file(file);
    ASSERT_GT(fc.batches, 10);
    ASSERT_LE(fc.bytes, limit);
    ASSERT_UEQ(batches, fc.batches);
    ASSERT_UEQ(events, fc.events);
    char want[32], got[32];
    snprintf(want, sizeof want, "%.1f", (double)fc.bytes / 1e6);
    snprintf(got, sizeof got, "%.1f", mb);
    ASSERT_STR_EQ(got, want);
    ASSERT_EQ(fc.problems, 0); /* no half batch at its end */
    ASSERT_STR_CONTAINS(text, "received and not written");
    free(text);
}

/* ---- a recorder slower than its producer ---- */

/* A field of /proc/PID/status in KiB (VmRSS, VmHWM), 0 when it cannot be read. */
static long proc_kib(pid_t pid, const char *field) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kib = 0;
    size_t n = strlen(field);
    while (f != NULL && kib == 0 && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            kib = strtol(line + n + 1, NULL, 10);
    if (f != NULL)
        fclose(f);
    return kib;
}

/* Waits for pid to exit (timeout_s at most, then kills it), following its peak resident memory
 * (VmHWM) meanwhile, which must stay under limit_kib (else it is killed and the test fails); its
 * exit status as task_wait_exit's. */
static int wait_following_peak(pid_t pid, int timeout_s, long limit_kib, long *peak_kib) {
    for (int waited = 0; waited <= timeout_s * 50; waited++) {
        long hwm = proc_kib(pid, "VmHWM");
        if (hwm > *peak_kib)
            *peak_kib = hwm;
        if (*peak_kib > limit_kib) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            TASK_FAIL_("the recorder's resident memory reached %ld KiB, over %ld KiB", *peak_kib, limit_kib);
        }
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        ASSERT_NE(r, -1);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        task_sleep_ms(20);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* synctop record that stores batches slowly (lib/slowcompress.c: us_per_kib microseconds per KiB),
 * with a queue of buffer_mb, and ASan's quarantine small so that its memory is what it holds. */
static pid_t spawn_slow_recorder(const char *ep, const char *file, const char *buffer_mb, const char *us_per_kib) {
    const char *old_preload = getenv("LD_PRELOAD"), *old_asan = getenv("ASAN_OPTIONS");
    char *keep_preload = old_preload ? strdup(old_preload) : NULL, *keep_asan = old_asan ? strdup(old_asan) : NULL;
    char asan[512];
    snprintf(asan, sizeof asan, "%s%squarantine_size_mb=1", old_asan ? old_asan : "", old_asan ? ":" : "");
    setenv("LD_PRELOAD", SLOWCOMPRESS_SO, 1);
    setenv("SYNCTOP_TEST_SLOW_COMPRESS_US", us_per_kib, 1);
    setenv("ASAN_OPTIONS", asan, 1);
    const char *rec_argv[] = {task_synctop(), "record", ep, "-o", file, "--buffer", buffer_mb, NULL};
    pid_t rec = task_spawn(rec_argv, task_path("rec.out"), task_path("rec.err"));
    if (keep_preload)
        setenv("LD_PRELOAD", keep_preload, 1);
    else
        unsetenv("LD_PRELOAD");
    if (keep_asan)
        setenv("ASAN_OPTIONS", keep_asan, 1);
    else
        unsetenv("ASAN_OPTIONS");
    unsetenv("SYNCTOP_TEST_SLOW_COMPRESS_US");
    free(keep_preload);
    free(keep_asan);
    return rec;
}

/* A publisher in this process (holding at most sndhwm batches for a slow subscriber) and a slow
 * recorder subscribed to it (spawn_slow_recorder), and the synthetic stream it sends. */
typedef struct slow_rig {
    tp_pub *pub;
    pid_t rec;
    tp_enc *enc;
    synth s;
    tp_buf b;
} slow_rig;

static void rig_start(slow_rig *g, const char *ep, const char *file, int sndhwm, const char *buffer_mb,
                      const char *us_per_kib, uint64_t seed) {
    err_msg err = {{0}};
    memset(g, 0, sizeof *g);
    if ((g->pub = tp_pub_new(&(tp_pub_opts){.endpoint = ep, .sndhwm = sndhwm}, &err)) == NULL)
        TASK_FAIL_("%s", err.msg);
    g->rec = spawn_slow_recorder(ep, file, buffer_mb, us_per_kib);
    for (int i = 0; i < 1000 && tp_pub_poll(g->pub, NULL) < 1; i++)
        task_sleep_ms(10);
    ASSERT_EQ(tp_pub_poll(g->pub, NULL), 1);
    task_sleep_ms(200); /* its subscription arrived: nothing is lost before it */
    g->enc = tp_enc_new(&(tp_enc_opts){.producer = seed + 1});
    synth_init(&g->s, seed);
    synth_meta(&g->s, g->enc);
}

/* The next batch of the stream (2048 events, about 0.1 MB), in g->b. */
static void rig_next(slow_rig *g, uint32_t flags) {
    synth_fill(&g->s, g->enc, 2048);
    ASSERT_OK(tp_enc_finish_flags(g->enc, flags, &g->b));
    tp_enc_delivered(g->enc, 1);
}

static void rig_free(slow_rig *g) {
    tp_pub_destroy(&g->pub);
    tp_buf_free(&g->b);
    tp_enc_destroy(&g->enc);
}

/* After the recorder exited with status st: it said why it stopped, and its summary states what
 * the file holds as the reader counts it (*fc). Its stderr (to free). */
static char *rig_end(slow_rig *g, int st, const char *stopped, const char *file, file_counts *fc) {
    rig_free(g);
    char *text = slurp_text(task_path("rec.err"));
    if (st != 0)
        TASK_FAIL_("synctop record exited %d: %s", st, text);
    ASSERT_STR_CONTAINS(text, stopped);
    *fc = count_file(file);
    uint64_t events = 0, batches = 0;
    double mb = 0;
    parse_summary(text, &events, &batches, &mb);
    ASSERT_UEQ(batches, fc->batches);
    ASSERT_UEQ(events, fc->events);
    return text;
}

/* A number after a label in record's summary ("N missed batches", "N batches (E events) received
 * and not written"): 0 when the label is absent. */
static uint64_t summary_count(const char *text, const char *label) {
    const char *at = strstr(text, label);
    if (at == NULL)
        return 0;
    const char *p = at;
    while (p > text && p[-1] == ' ')
        p--;
    while (p > text && p[-1] >= '0' && p[-1] <= '9')
        p--;
    return strtoull(p, NULL, 10);
}

/* The gaps in the producer's sequence numbers in a file (its batches that are not synthetic, in
 * file order), and its last sequence number. */
static uint64_t file_gaps(const char *path, uint64_t *last_seq) {
    err_msg err = {{0}};
    tp_freader *r = tp_freader_open(path, &err);
    ASSERT_NOT_NULL(r);
    uint64_t gaps = 0, next = 0;
    for (size_t i = 0; i < tp_freader_count(r); i++) {
        const tp_findex_entry *e = tp_freader_entry(r, i);
        if (e->flags & TP_BF_SYNTHETIC)
            continue;
        ASSERT_GE(e->seq, next); /* in order, nothing twice */
        gaps += e->seq - next;
        next = e->seq + 1;
        *last_seq = e->seq;
    }
    tp_freader_close(&r);
    return gaps;
}

/* A producer at full rate and a recorder slower than it: the recorder's memory stays within its
 * queue (4 MB) and what ZeroMQ holds (16 batches of about 0.1 MB) plus its own working set, instead
 * of the whole backlog; the producer, which holds little for a slow subscriber (8 batches, as the
 * tracer does not hold much either), drops what the recorder cannot take, and every batch sent is
 * either in the file or counted missed, exactly, in the file and in the summary. */
TEST(record_slower_than_its_producer_holds_a_bounded_queue_and_counts_the_rest) {
    KEEP_PATH(file, "slow.trace");
    slow_rig g;
    rig_start(&g, endpoint("slow.sock"), file, 8, "4", "500", 19); /* it stores about 2 MB/s */
    long base = proc_kib(g.rec, "VmRSS"), peak = 0;
    ASSERT_GT(base, 0);
    /* the queue (4 MiB) + ZeroMQ's 16 batches + the file's 4 MiB write buffer and compression, with
     * room to spare: the whole stream is over 60 MB */
    long limit = base + 24 * 1024;
    uint64_t sent = 0;
    for (; sent < 600; sent++) { /* at full rate */
        rig_next(&g, 0);
        int rc = tp_pub_send(g.pub, g.b.data, g.b.len);
        ASSERT(rc == 0 || rc == ERR_AGAIN);
    }
    /* The last batch must come, so that every gap is seen. libzmq silently drops a batch for a
     * subscriber whose queue it took out of the delivery set (when a batch found it full), until that
     * subscriber has read enough: so it goes once the recorder has taken everything (its file no
     * longer grows), and again, as a new batch, should it not have come. */
    int st = -2;
    for (int attempt = 0; attempt < 5 && st == -2 && peak <= limit; attempt++) {
        off_t size = -1;
        struct stat fst;
        for (int quiet = 0, i = 0; quiet < 100 && i < 6000 && peak <= limit; i++) { /* 1 s still, 60 s at most */
            tp_pub_poll(g.pub, NULL);
            long hwm = proc_kib(g.rec, "VmHWM");
            peak = hwm > peak ? hwm : peak;
            off_t now = stat(file, &fst) == 0 ? fst.st_size : -1;
            quiet = now == size ? quiet + 1 : 0;
            size = now;
            task_sleep_ms(10);
        }
        if (peak > limit)
            break;
        rig_next(&g, TP_BF_END);
        ASSERT_OK(tp_pub_send_wait(g.pub, g.b.data, g.b.len, 60000));
        sent++;
        for (int i = 0; i < 3000 && st == -2; i++) { /* it ends within seconds of its last batch */
            tp_pub_poll(g.pub, NULL);
            long hwm = proc_kib(g.rec, "VmHWM");
            peak = hwm > peak ? hwm : peak;
            int ws;
            if (waitpid(g.rec, &ws, WNOHANG) == g.rec)
                st = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
            else
                task_sleep_ms(10);
        }
    }
    if (st == -2)
        st = wait_following_peak(g.rec, 10, limit, &peak);
    if (peak > limit)
        TASK_FAIL_("the recorder's resident memory reached %ld KiB, over %ld KiB", peak, limit);
    file_counts fc;
    char *text = rig_end(&g, st, "stopped: every producer finished", file, &fc);
    uint64_t last_seq = 0, gaps = file_gaps(file, &last_seq);
    ASSERT_UEQ(last_seq, sent - 1); /* its last batch came */
    ASSERT_GT(gaps, 0);             /* the producer was faster: it dropped batches */
    ASSERT_UEQ(fc.batches + gaps, sent);
    ASSERT_UEQ(summary_count(text, "missed batches"), gaps);
    ASSERT_UEQ(summary_count(text, "batches ("), 0); /* nothing received and not written */
    fprintf(stderr, "recorder: %ld KiB at start, %ld KiB at its peak; %" PRIu64 " batches sent, %" PRIu64
                    " written, %" PRIu64 " missed\n",
            base, peak, sent, fc.batches, gaps);
    free(text);
}

/* Stopped (Ctrl-C) while it has a backlog: what was received is written, what reached its socket
 * and found no room is counted as received and not written; with a producer that waits for room
 * (so that it never drops), the file and that count add up exactly to what was sent. */
TEST(record_stopped_with_a_backlog_writes_or_counts_all_it_received) {
    KEEP_PATH(file, "stop.trace");
    slow_rig g;
    rig_start(&g, endpoint("stop.sock"), file, 4, "2", "300", 22); /* it stores about 3 MB/s */
    const int sent = 80;
    for (int i = 0; i < sent; i++) {
        rig_next(&g, 0);
        ASSERT_OK(tp_pub_send_wait(g.pub, g.b.data, g.b.len, 60000)); /* waits for room: never dropped */
    }
    ASSERT_OK(kill(g.rec, SIGINT));
    int st = task_wait_exit(g.rec, 60);
    file_counts fc;
    char *text = rig_end(&g, st, "stopped: interrupted", file, &fc);
    uint64_t last_seq = 0;
    ASSERT_UEQ(file_gaps(file, &last_seq), 0);
    uint64_t not_written = summary_count(text, "batches (");
    fprintf(stderr, "sent %d, written %" PRIu64 ", received and not written %" PRIu64 "\n", sent, fc.batches,
            not_written);
    ASSERT_UEQ(fc.batches + not_written, (uint64_t)sent);
    if (not_written > 0)
        ASSERT_STR_CONTAINS(text, "received and not written");
    free(text);
    /* the file says it too: what was sent and is not in it */
    const char *info[] = {"info", "--json", file, NULL};
    char *out = NULL;
    ASSERT_EQ(run_synctop(info, &out, NULL), 0);
    char want[96];
    snprintf(want, sizeof want, "\"received_not_written\": {\"batches\": %" PRIu64 ", ", (uint64_t)sent - fc.batches);
    ASSERT_STR_CONTAINS(out, want);
    free(out);
}

/* A program killed outright never sends its last batch: the recorder sees its ipc socket go and
 * stops by itself, with what it received. */
TEST(record_stops_when_the_publisher_went_away) {
    const char *ep = endpoint("gone.sock");
    KEEP_PATH(file, "gone.trace");
    const char *pub_argv[] = {testpub_path(), "--endpoint", ep, "--events", "100000000", "--batch", "500",
                              "--rate", "50000", "--seed", "11", "--wait-subscribers", "1", NULL};
    pid_t pub = task_spawn(pub_argv, task_path("pub.out"), task_path("pub.err"));
    const char *rec_argv[] = {task_synctop(), "record", ep, "-o", file, NULL};
    pid_t rec = task_spawn(rec_argv, task_path("rec.out"), task_path("rec.err"));
    struct stat sb = {0};
    for (int i = 0; i < 6000 && (stat(file, &sb) != 0 || sb.st_size < 50000); i++)
        task_sleep_ms(10);
    ASSERT_GE(sb.st_size, 50000);
    ASSERT_OK(kill(pub, SIGKILL));
    ASSERT_EQ(task_wait_exit(pub, 10), 128 + SIGKILL);
    int st = task_wait_exit(rec, 30);
    if (st == -1)
        TASK_FAIL_("synctop record did not stop after its publisher was killed");
    char *rec_err = slurp_text(task_path("rec.err"));
    ASSERT_EQ(st, 0);
    ASSERT_STR_CONTAINS(rec_err, "stopped: the program went away without its last batch");
    free(rec_err);
    expect x;
    expect_init(&x, 11);
    readback rb = check_recorded(file, 11, &x);
    ASSERT_GT(rb.events, 1000);
    ASSERT(!rb.ended);
    expect_free(&x);
}

TEST(record_stops_cleanly_on_sigterm) {
    const char *ep = endpoint("term.sock");
    KEEP_PATH(file, "term.trace");
    const char *pub_argv[] = {testpub_path(), "--endpoint", ep, "--events", "100000000", "--batch", "500",
                              "--rate", "100000", "--seed", "17", "--wait-subscribers", "1", NULL};
    pid_t pub = task_spawn(pub_argv, task_path("pub.out"), task_path("pub.err"));
    const char *rec_argv[] = {task_synctop(), "record", ep, "-o", file, NULL};
    pid_t rec = task_spawn(rec_argv, task_path("rec.out"), task_path("rec.err"));
    struct stat sb = {0};
    for (int i = 0; i < 6000 && (stat(file, &sb) != 0 || sb.st_size < 100000); i++)
        task_sleep_ms(10);
    ASSERT_GE(sb.st_size, 100000);
    ASSERT_OK(kill(rec, SIGTERM));
    ASSERT_EQ(task_wait_exit(rec, 20), 0);
    kill(pub, SIGTERM);
    task_wait_exit(pub, 10);
    char *err = slurp_text(task_path("rec.err"));
    ASSERT_STR_CONTAINS(err, "stopped: interrupted");
    free(err);
    err_msg e = {{0}};
    tp_freader *r = tp_freader_open(file, &e);
    ASSERT_NOT_NULL(r);
    ASSERT(tp_freader_complete(r)); /* index and footer written on the way out */
    ASSERT(tp_freader_indexed(r));
    ASSERT_EQ(tp_freader_problem_count(r), 0);
    tp_freader_close(&r);
    expect x;
    expect_init(&x, 17);
    readback rb = check_recorded(file, 17, &x);
    ASSERT_GT(rb.events, 5000);
    expect_free(&x);
}

TEST(record_two_publishers_until_both_end) {
    char ep_a[PATH_MAX], ep_b[PATH_MAX];
    snprintf(ep_a, sizeof ep_a, "%s", endpoint("a.sock"));
    snprintf(ep_b, sizeof ep_b, "%s", endpoint("b.sock"));
    KEEP_PATH(file, "two.trace");
    /* The first runs longer, so both are seen before either ends. */
    const char *a_argv[] = {testpub_path(), "--endpoint", ep_a, "--events", "100000", "--batch", "1000",
                            "--rate", "100000", "--seed", "31", "--wait-subscribers", "1", NULL};
    const char *b_argv[] = {testpub_path(), "--endpoint", ep_b, "--events", "20000", "--batch", "1000",
                            "--rate", "100000", "--seed", "32", "--wait-subscribers", "1", NULL};
    pid_t a = task_spawn(a_argv, task_path("a.out"), task_path("a.err"));
    pid_t b = task_spawn(b_argv, task_path("b.out"), task_path("b.err"));
    const char *rec_argv[] = {task_synctop(), "record", ep_a, ep_b, "-o", file, NULL};
    pid_t rec = task_spawn(rec_argv, task_path("rec.out"), task_path("rec.err"));
    ASSERT_EQ(task_wait_exit(a, 60), 0);
    ASSERT_EQ(task_wait_exit(b, 60), 0);
    int st = task_wait_exit(rec, 30);
    ASSERT_EQ(st, 0);
    char *err = slurp_text(task_path("rec.err"));
    ASSERT_STR_CONTAINS(err, "120000 events");
    ASSERT_STR_CONTAINS(err, "2 producers; stopped: every producer finished");
    free(err);
    char *out = NULL;
    const char *info[] = {"info", file, NULL};
    ASSERT_EQ(run_synctop(info, &out, NULL), 0);
    ASSERT_STR_CONTAINS(out, "events: 120000\n");
    ASSERT_STR_CONTAINS(out, "producers: 2\n");
    ASSERT_STR_CONTAINS(out, "producer 0000000000000020:"); /* seed 31 + 1 */
    ASSERT_STR_CONTAINS(out, "producer 0000000000000021:");
    ASSERT_STR_CONTAINS(out, "batches: 100 (seq 0 to 99), synthetic keyframes 0, events 100000, ended: yes");
    ASSERT_STR_CONTAINS(out, "batches: 20 (seq 0 to 19), synthetic keyframes 0, events 20000, ended: yes");
    ASSERT_STR_CONTAINS(out, "drops: none");
    free(out);
}

TEST(record_ignores_malformed_messages) {
    const char *ep = endpoint("bad.sock");
    KEEP_PATH(file, "bad.trace");
    err_msg err = {{0}};
    tp_pub *pub = tp_pub_new(&(tp_pub_opts){.endpoint = ep}, &err);
    if (pub == NULL)
        TASK_FAIL_("%s", err.msg);
    tp_pub_set_linger(pub, 5000);
    const char *rec_argv[] = {task_synctop(), "record", ep, "-o", file, NULL};
    pid_t rec = task_spawn(rec_argv, task_path("rec.out"), task_path("rec.err"));
    for (int i = 0; i < 1000 && tp_pub_poll(pub, NULL) < 1; i++)
        task_sleep_ms(10);
    ASSERT_EQ(tp_pub_poll(pub, NULL), 1);
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 77});
    synth s;
    synth_init(&s, 77);
    tp_buf b = {0};
    synth_fill(&s, enc, 100);
    ASSERT_OK(tp_enc_finish(enc, &b));
    tp_enc_delivered(enc, 1);
    ASSERT_OK(tp_pub_send(pub, b.data, b.len));             /* seq 0: fine */
    ASSERT_OK(tp_pub_send(pub, "not a batch at all", 18)); /* refused by the subscriber */
    synth_fill(&s, enc, 100);
    ASSERT_OK(tp_enc_finish(enc, &b));
    tp_enc_delivered(enc, 1);
    b.data[b.len - 3] ^= 0x40; /* seq 1: its header holds, its payload does not */
    ASSERT_OK(tp_pub_send(pub, b.data, b.len));
    synth_fill(&s, enc, 100);
    ASSERT_OK(tp_enc_finish_flags(enc, TP_BF_END, &b));
    tp_enc_delivered(enc, 1);
    ASSERT_OK(tp_pub_send(pub, b.data, b.len)); /* seq 2: the end */
    int st = task_wait_exit(rec, 30);
    tp_pub_destroy(&pub);
    ASSERT_EQ(st, 0);
    char *text = slurp_text(task_path("rec.err"));
    ASSERT_STR_CONTAINS(text, "2 malformed messages ignored");
    ASSERT_STR_CONTAINS(text, "checksum");
    ASSERT_STR_CONTAINS(text, "stopped: every producer finished");
    free(text);
    tp_freader *r = tp_freader_open(file, &err);
    ASSERT_NOT_NULL(r);
    ASSERT_EQ(tp_freader_count(r), 2); /* seq 0 and 2: what was damaged was never written */
    ASSERT_UEQ(tp_freader_entry(r, 0)->seq, 0);
    ASSERT_UEQ(tp_freader_entry(r, 1)->seq, 2);
    tp_freader_close(&r);
    tp_buf_free(&b);
    tp_enc_destroy(&enc);
}

TEST(record_shows_progress_on_a_terminal) {
    const char *ep = endpoint("tty.sock");
    KEEP_PATH(file, "tty.trace");
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    ASSERT_GE(master, 0);
    ASSERT_OK(grantpt(master));
    ASSERT_OK(unlockpt(master));
    char slave[PATH_MAX];
    ASSERT_OK(ptsname_r(master, slave, sizeof slave));
    const char *pub_argv[] = {testpub_path(), "--endpoint", ep, "--events", "100000", "--batch", "1000",
                              "--rate", "100000", "--seed", "41", "--wait-subscribers", "1", NULL};
    pid_t pub = task_spawn(pub_argv, task_path("pub.out"), task_path("pub.err"));
    const char *rec_argv[] = {task_synctop(), "record", ep, "-o", file, NULL};
    pid_t rec = task_spawn(rec_argv, task_path("rec.out"), slave); /* stderr is the terminal */
    char *text = calloc(1, 1 << 16);
    size_t len = 0;
    int st = -1;
    for (int i = 0; i < 3000 && st < 0; i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
        int flags = fcntl(master, F_GETFL);
        fcntl(master, F_SETFL, flags | O_NONBLOCK);
        ssize_t n;
        while (len + 1 < (1 << 16) && (n = read(master, text + len, (1 << 16) - 1 - len)) > 0)
            len += (size_t)n;
        int ws;
        if (waitpid(rec, &ws, WNOHANG) == rec)
            st = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128;
    }
    ASSERT_EQ(st, 0);
    ssize_t n;
    while (len + 1 < (1 << 16) && (n = read(master, text + len, (1 << 16) - 1 - len)) > 0)
        len += (size_t)n;
    text[len] = '\0';
    ASSERT_EQ(task_wait_exit(pub, 30), 0);
    ASSERT_STR_CONTAINS(text, "\r"); /* the line is rewritten in place */
    ASSERT_STR_CONTAINS(text, " events/s, ");
    ASSERT_STR_CONTAINS(text, "stopped: every producer finished");
    close(master);
    free(text);
}

TEST(record_refuses_an_existing_file_without_force) {
    KEEP_PATH(file, "exists.trace");
    FILE *f = fopen(file, "wb");
    ASSERT_NOT_NULL(f);
    fputs("precious", f);
    fclose(f);
    char *err = NULL;
    const char *args[] = {"record", endpoint("nobody.sock"), "-o", file, NULL};
    ASSERT_EQ(run_synctop(args, NULL, &err), 1);
    ASSERT_STR_CONTAINS(err, "already exists");
    ASSERT_STR_CONTAINS(err, "--force");
    free(err);
    char *kept = slurp_text(file);
    ASSERT_STR_EQ(kept, "precious");
    free(kept);

    /* replaced, but nothing came in the time given: said, status 1, and no empty trace left */
    const char *forced[] = {"record", endpoint("nobody.sock"), "-o", file, "--force", "--duration", "0.3", NULL};
    ASSERT_EQ(run_synctop(forced, NULL, &err), 1);
    ASSERT_STR_CONTAINS(err, "stopped: duration reached");
    ASSERT_STR_CONTAINS(err, "nothing was recorded: no publisher sent a batch");
    free(err);
    struct stat sb;
    ASSERT(stat(file, &sb) != 0);
}

/* A pid that is no process is named at once; an endpoint where nothing answers is said after
 * --wait seconds; both exit 1 and leave no file. The same for a live report. */
TEST(record_and_report_say_when_nothing_is_there) {
    char *err = NULL;
    const char *out = task_path("none.trace");
    const char *dead[] = {"record", "999999999", "-o", out, NULL};
    ASSERT_EQ(run_synctop(dead, NULL, &err), 1);
    ASSERT_STR_CONTAINS(err, "no process 999999999");
    free(err);
    struct stat sb;
    ASSERT(stat(out, &sb) != 0);
    const char *quiet[] = {"record", endpoint("nobody.sock"), "-o", out, "--wait", "0.5", NULL};
    ASSERT_EQ(run_synctop(quiet, NULL, &err), 1);
    ASSERT_STR_CONTAINS(err, "nothing answered at ipc://");
    ASSERT_STR_CONTAINS(err, "in 0.5 s");
    ASSERT_STR_CONTAINS(err, "--wait SECONDS waits longer");
    free(err);
    ASSERT(stat(out, &sb) != 0);
    const char *report_dead[] = {"report", "999999999", NULL};
    ASSERT_EQ(run_synctop(report_dead, NULL, &err), 1);
    ASSERT_STR_CONTAINS(err, "no process 999999999");
    free(err);
    const char *report_quiet[] = {"report", endpoint("nobody.sock"), "--wait", "0.5", NULL};
    ASSERT_EQ(run_synctop(report_quiet, NULL, &err), 1);
    ASSERT_STR_CONTAINS(err, "nothing answered at ipc://");
    free(err);
}

/* A host name that does not exist (.invalid never does: RFC 6761) is said before any wait, by each
 * verb that connects, where libzmq alone would retry it quietly until --wait ran out ("nothing
 * answered"). Skipped where this machine's resolver cannot say so (no answer at all). */
TEST(verbs_say_a_host_name_that_does_not_exist) {
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int gai = getaddrinfo("no-such-node.invalid", NULL, &hints, &res);
    if (res != NULL)
        freeaddrinfo(res);
    if (gai != EAI_NONAME && gai != EAI_FAIL)
        TASK_SKIP("this machine's resolver does not answer for no-such-node.invalid (%s)", gai_strerror(gai));
    const char *out = task_path("nohost.trace");
    const char *record[] = {"record", "no-such-node.invalid:5555", "-o", out, "--wait", "30", NULL};
    const char *report[] = {"report", "tcp://no-such-node.invalid:5555", "--wait", "30", NULL};
    const char *attach[] = {"attach", "no-such-node.invalid:5555", NULL};
    const char *const *verbs[] = {record, report, attach};
    for (size_t i = 0; i < 3; i++) {
        char *err = NULL;
        ASSERT_EQ(run_synctop(verbs[i], NULL, &err), 1);
        ASSERT_STR_CONTAINS(err, "no host named 'no-such-node.invalid' is known to this machine");
        free(err);
    }
    struct stat sb;
    ASSERT(stat(out, &sb) != 0);
}

TEST(record_usage_errors) {
    char *out = NULL, *err = NULL;
    const char *help[] = {"record", "--help", NULL};
    ASSERT_EQ(run_synctop(help, &out, NULL), 0);
    ASSERT_STR_CONTAINS(out, "usage: synctop record ENDPOINT... -o FILE");
    free(out);
    const char *no_out[] = {"record", "1234", NULL};
    ASSERT_EQ(run_synctop(no_out, NULL, &err), 2);
    ASSERT_STR_CONTAINS(err, "no -o FILE");
    free(err);
    const char *no_ep[] = {"record", "-o", task_path("x.trace"), NULL};
    ASSERT_EQ(run_synctop(no_ep, NULL, &err), 2);
    ASSERT_STR_CONTAINS(err, "no endpoint");
    free(err);
    const char *bad_dur[] = {"record", "1234", "-o", task_path("x.trace"), "--duration", "-1", NULL};
    ASSERT_EQ(run_synctop(bad_dur, NULL, &err), 2);
    free(err);
    struct stat sb;
    ASSERT_NE(stat(task_path("x.trace"), &sb), 0); /* nothing was created */
}

/* ---- info ---- */

static void write_synth_file(const char *path, uint64_t seed, size_t batches, size_t per, expect *x) {
    err_msg err = {{0}};
    tp_fwriter *w = tp_fwriter_open(path, 0, &err);
    ASSERT_NOT_NULL(w);
    synth s;
    synth_init(&s, seed);
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = seed + 1});
    tp_buf b = {0};
    for (size_t i = 0; i < batches; i++) {
        synth_fill(&s, enc, per);
        ASSERT_OK(tp_enc_finish(enc, &b));
        tp_enc_delivered(enc, 1);
        ASSERT_OK(tp_fwriter_append(w, b.data, b.len, &err));
    }
    ASSERT_OK(tp_fwriter_close(&w, &err));
    if (x) {
        expect_init(x, seed);
        tp_record r;
        for (size_t i = 0; i < batches * per; i++)
            expect_next(x, &r);
    }
    tp_buf_free(&b);
    tp_enc_destroy(&enc);
}

/* A file of 100000 producers, each with one tiny batch: info itemizes the first 65536, counts the
 * rest, and its memory stays near the size of what it shows (it used to cost 32 KiB a producer). */
TEST(info_bounds_what_many_producers_cost) {
    KEEP_PATH(f, "many.trace");
    err_msg err = {{0}};
    tp_fwriter *w = tp_fwriter_open(f, 0, &err);
    ASSERT_NOT_NULL(w);
    tp_buf b = {0};
    for (uint64_t p = 1; p <= 100000; p++) {
        tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = p});
        tp_clock c = {.kind = TP_K_CLOCK, .device = TP_NO_DEVICE, .trace_ns = p, .realtime_ns = p, .monotonic_ns = p};
        ASSERT_OK(tp_enc_add(enc, &c));
        ASSERT_OK(tp_enc_finish(enc, &b));
        ASSERT_OK(tp_fwriter_append(w, b.data, b.len, &err));
        tp_enc_destroy(&enc);
    }
    ASSERT_OK(tp_fwriter_close(&w, &err));
    tp_buf_free(&b);
    char *out = NULL;
    const char *info[] = {"info", f, NULL};
    ASSERT_EQ(run_synctop(info, &out, NULL), 0);
    ASSERT_STR_CONTAINS(out, "producers: 65536\n");
    ASSERT_STR_CONTAINS(out, "(and 34464 batches of further producers, not itemized)");
    free(out);
    struct rusage ru;
    ASSERT_OK(getrusage(RUSAGE_CHILDREN, &ru));
    fprintf(stderr, "  info's peak memory: %ld MiB\n", ru.ru_maxrss / 1024);
    ASSERT_LT(ru.ru_maxrss, 1024 * 1024); /* KiB, with sanitizers; 100000 x 32 KiB was 3 GiB */
}

/* A file made to exhaust memory: each small batch inflates to many valid events (here 4 x 500000
 * identical kernels in a few KB). report, export and replay refuse it before reading, with the
 * reason and the flag that reads it anyway. */
TEST(a_compression_bomb_is_refused_before_it_is_read) {
    KEEP_PATH(f, "bomb.trace");
    err_msg err = {{0}};
    tp_fwriter *w = tp_fwriter_open(f, 0, &err);
    ASSERT_NOT_NULL(w);
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 3});
    tp_buf b = {0};
    tp_kernel k = {.kind = TP_K_KERNEL, .device = 0, .stream = 7, .start = 1000, .end = 2000, .correlation = 1};
    for (int batch = 0; batch < 4; batch++) {
        for (int i = 0; i < 500000; i++)
            ASSERT_OK(tp_enc_add(enc, &k));
        ASSERT_OK(tp_enc_finish_flags(enc, batch == 3 ? TP_BF_END : 0, &b));
        tp_enc_delivered(enc, 1);
        ASSERT_OK(tp_fwriter_append(w, b.data, b.len, &err));
    }
    ASSERT_OK(tp_fwriter_close(&w, &err));
    tp_buf_free(&b);
    tp_enc_destroy(&enc);
    struct stat st;
    ASSERT_OK(stat(f, &st));
    fprintf(stderr, "  2000000 events in %lld bytes\n", (long long)st.st_size);
    ASSERT_LT(st.st_size, 250000); /* 4 per byte + 2^20 < 2000000: the bound applies */
    char *out = NULL, *errs = NULL;
    const char *report[] = {"report", f, NULL};
    ASSERT_EQ(run_synctop(report, &out, &errs), 1);
    ASSERT_STR_CONTAINS(errs, "2000000 events in");
    ASSERT_STR_CONTAINS(errs, "--max-events N");
    free(out);
    free(errs);
    const char *exp[] = {"export", f, "-o", task_path("bomb.json"), NULL};
    ASSERT_EQ(run_synctop(exp, NULL, &errs), 1);
    ASSERT_STR_CONTAINS(errs, "looks made to exhaust memory");
    free(errs);
    /* asked for, it is read */
    const char *anyway[] = {"report", f, "--max-events", "2000000", "--format", "json", NULL};
    ASSERT_EQ(run_synctop(anyway, &out, &errs), 0);
    ASSERT_STR_CONTAINS(out, "\"kernels\":2000000");
    free(out);
    free(errs);
    const char *fewer[] = {"report", f, "--max-events", "1999999", NULL};
    ASSERT_EQ(run_synctop(fewer, NULL, &errs), 1);
    ASSERT_STR_CONTAINS(errs, "holds more than --max-events 1999999 events");
    free(errs);
}

/* --max-events bounds a profiler trace as it bounds a trace file, in every verb that reads one,
 * one source or several (read ahead on threads): 3000 kernels are refused under 2999, with the
 * flag that reads them, and read under 3000 (each of two files with all its kernels). */
TEST(max_events_bounds_a_profiler_trace_in_every_verb) {
    KEEP_PATH(f, "k3000.json");
    FILE *fp = fopen(f, "w");
    ASSERT_NOT_NULL(fp);
    fputs("{\"traceEvents\": [\n", fp);
    for (int i = 0; i < 3000; i++)
        fprintf(fp,
                "%s{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 1, \"tid\": 7, \"ts\": %d, \"dur\": 1, "
                "\"args\": {\"device\": 0, \"stream\": 7, \"correlation\": %d}}\n",
                i ? "," : "", 10 + 2 * i, i + 1);
    fputs("]}\n", fp);
    ASSERT_OK(fclose(fp));
    char *out = NULL, *errs = NULL;
    const char *one[] = {"report", f, "--max-events", "2999", NULL};
    ASSERT_EQ(run_synctop(one, NULL, &errs), 1);
    ASSERT_STR_CONTAINS(errs, "more than 2999 events: over the import limit (a larger --max-events N reads it)");
    free(errs);
    const char *two[] = {"report", f, f, "--max-events", "2999", NULL};
    ASSERT_EQ(run_synctop(two, NULL, &errs), 1);
    ASSERT_STR_CONTAINS(errs, "more than 2999 events");
    free(errs);
    const char *exp[] = {"export", f, "--max-events", "2999", "-o", task_path("k.json"), NULL};
    ASSERT_EQ(run_synctop(exp, NULL, &errs), 1);
    ASSERT_STR_CONTAINS(errs, "more than 2999 events");
    free(errs);
    const char *enough[] = {"report", f, f, "--max-events", "3000", "--format", "json", NULL};
    ASSERT_EQ(run_synctop(enough, &out, &errs), 0);
    const char *first = strstr(out, "\"kernels\":3000,"); /* each file its producer, each with all 3000 */
    ASSERT_NOT_NULL(first);
    ASSERT_NOT_NULL(strstr(first + 1, "\"kernels\":3000,"));
    free(out);
    free(errs);
}

/* Every verb parses its arguments the same way: --name VALUE or --name=VALUE, a reason on a
 * usage error (status 2), and untrusted text sanitized in the message. */
TEST(verbs_share_one_argument_parser) {
    static const struct {
        const char *args[8];
        const char *says;
    } cases[] = {
        {{"replay", "a.trace", "--play=yes"}, "synctop replay: --play takes no value"},
        {{"replay"}, "synctop replay: no trace file given"},
        {{"info", "--json=yes", "x"}, "synctop info: --json takes no value"},
        {{"record", "1234", "-o"}, "synctop record: --output needs a value"},
        {{"record", "1234", "-o", "x", "--duration", "soon"}, "--duration wants a number"},
        {{"report", "x.trace", "--top", "ten"}, "synctop report: --top wants a whole number"},
        {{"report", "x.trace", "--format=yaml"}, "synctop report: unknown format 'yaml'"},
        {{"report", "--gap-us", "-5", "x.trace"}, "--gap-us wants a number from 0"},
        {{"attach", "--window-events", "10"}, "--window-events wants a whole number from 1000"},
        {{"import", "--max-events", "0", "x.json", "-o", "y"}, "--max-events wants a whole number"},
        {{"export", "x.trace"}, "synctop export: no -o FILE given"},
        {{"keygen", "--frobnicate"}, "synctop keygen: unknown option '--frobnicate'"},
        {{"run", "--no-tui"}, "synctop run: no command given"},
        {{"info", "--\x1b]0;pwned\x07"}, "synctop info: unknown option '--"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *err = NULL;
        ASSERT_EQ(run_synctop(cases[i].args, NULL, &err), 2);
        if (strstr(err, cases[i].says) == NULL)
            TASK_FAIL_("synctop %s: stderr lacks \"%s\":\n%s", cases[i].args[0], cases[i].says, err);
        ASSERT_STR_CONTAINS(err, "usage: synctop ");
        ASSERT_NULL(strchr(err, '\x1b'));
        ASSERT_NULL(strchr(err, '\x07'));
        free(err);
    }
    /* a name with control characters, echoed back in an error, reaches the terminal sanitized */
    char evil[PATH_MAX];
    snprintf(evil, sizeof evil, "%s", task_path("a\x1b]0;x\x07\x1b[2Jb.json"));
    FILE *ef = fopen(evil, "w");
    ASSERT_NOT_NULL(ef);
    fclose(ef);
    KEEP_PATH(src, "evil-src.trace");
    write_synth_file(src, 4, 1, 10, NULL);
    char *err2 = NULL;
    const char *exists[] = {"export", src, "-o", evil, NULL};
    ASSERT_EQ(run_synctop(exists, NULL, &err2), 1);
    ASSERT_STR_CONTAINS(err2, "exists (use --force to replace it)");
    ASSERT_NULL(strchr(err2, '\x1b'));
    ASSERT_NULL(strchr(err2, '\x07'));
    free(err2);
    /* attach to a pid that does not exist: said at once */
    const char *nopid[] = {"attach", "999999999", NULL};
    ASSERT_EQ(run_synctop(nopid, NULL, &err2), 1);
    ASSERT_STR_CONTAINS(err2, "no process 999999999");
    free(err2);
    /* --name=VALUE is --name VALUE: the format given that way is used */
    KEEP_PATH(f, "args.trace");
    write_synth_file(f, 3, 2, 50, NULL);
    char *out = NULL;
    const char *json[] = {"report", f, "--format=json", "--top=1", NULL};
    ASSERT_EQ(run_synctop(json, &out, NULL), 0);
    ASSERT_EQ(out[0], '{');
    free(out);
    /* operands that start with '-' come after "--" */
    char *err = NULL;
    const char *dash[] = {"info", "--", "-not-an-option", NULL};
    ASSERT_EQ(run_synctop(dash, NULL, &err), 1);
    ASSERT_STR_CONTAINS(err, "-not-an-option");
    free(err);
}

/* run --listen on a non-loopback address without keys is refused before the command starts (the
 * tracer would refuse to publish, and the job would run untraced). */
TEST(run_refuses_a_clear_text_listen_beyond_the_machine_before_starting) {
    const char *marker = task_path("ran");
    char *err = NULL;
    const char *args[] = {"run", "--no-tui", "--listen", "tcp://0.0.0.0:5555", "--", "touch", marker, NULL};
    ASSERT_EQ(run_synctop(args, NULL, &err), 2);
    ASSERT_STR_CONTAINS(err, "--listen tcp://0.0.0.0:5555 is not a loopback address");
    ASSERT_STR_CONTAINS(err, "--key job.key");
    ASSERT_STR_CONTAINS(err, "--insecure");
    free(err);
    struct stat sb;
    ASSERT(stat(marker, &sb) != 0); /* the command never ran */
    /* on loopback, or with --insecure, it runs */
    const char *local[] = {"run", "--no-tui", "--listen", "tcp://127.0.0.1:0", "--", "touch", marker, NULL};
    char *out = NULL;
    ASSERT_EQ(run_synctop(local, &out, &err), 0);
    ASSERT_OK(stat(marker, &sb));
    free(out);
    free(err);
}

/* run --listen where something listens already is refused before the command starts: the tracer
 * could not publish there, and run would hear the other publisher. */
TEST(run_refuses_a_listen_endpoint_in_use_before_starting) {
    err_msg e = {{0}};
    tp_pub_opts o = {.endpoint = "tcp://127.0.0.1:0"};
    tp_pub *pub = tp_pub_new(&o, &e);
    ASSERT_NOT_NULL(pub);
    char ep[TP_ENDPOINT_MAX];
    snprintf(ep, sizeof ep, "%s", tp_pub_endpoint(pub));
    const char *marker = task_path("ran");
    char *err = NULL;
    const char *args[] = {"run", "--no-tui", "--listen", ep, "--", "touch", marker, NULL};
    ASSERT_EQ(run_synctop(args, NULL, &err), 1);
    ASSERT_STR_CONTAINS(err, "something is listening there already");
    free(err);
    struct stat sb;
    ASSERT(stat(marker, &sb) != 0);
    tp_pub_destroy(&pub);
}

/* --record and --log replace an existing file only with --force; the report of --no-tui goes to
 * standard error, the command's output stays alone on standard output. */
TEST(run_keeps_existing_files_and_the_commands_output_apart) {
    const char *keep = task_path("keep.trace");
    FILE *f = fopen(keep, "w");
    ASSERT_NOT_NULL(f);
    fputs("precious\n", f);
    fclose(f);
    char *out = NULL, *err = NULL;
    const char *args[] = {"run", "--no-tui", "--record", keep, "--", "echo", "a,b", NULL};
    ASSERT_EQ(run_synctop(args, &out, &err), 1);
    ASSERT_STR_CONTAINS(err, "the file exists (use --force to replace it)");
    ASSERT_STR_EQ(out, "");
    free(out);
    free(err);
    char buf[64] = {0};
    f = fopen(keep, "r");
    ASSERT_NOT_NULL(f);
    ASSERT(fgets(buf, sizeof buf, f) != NULL);
    fclose(f);
    ASSERT_STR_EQ(buf, "precious\n");
    const char *plain[] = {"run", "--no-tui", "--", "echo", "a,b", NULL};
    ASSERT_EQ(run_synctop(plain, &out, &err), 0);
    ASSERT_STR_EQ(out, "a,b\n");
    ASSERT_STR_CONTAINS(err, "synctop run: command exited with status 0");
    free(out);
    free(err);
}

/* An endpoint exported for the tracer is where the command publishes: run takes it as --listen
 * (and says so); "none" is left out of the command's environment, which run prints here. */
TEST(run_takes_an_exported_listen_endpoint_and_drops_none) {
    char *out = NULL, *err = NULL;
    setenv("SYNCTOP_LISTEN", "none", 1);
    const char *args[] = {"run", "--no-tui", "--", "sh", "-c", "echo \"[${SYNCTOP_LISTEN-unset}]\"", NULL};
    int rc = run_synctop(args, &out, &err);
    setenv("SYNCTOP_LISTEN", "tcp://127.0.0.1:0", 1);
    char *out2 = NULL, *err2 = NULL;
    const char *args2[] = {"run", "--no-tui", "--", "sh", "-c", "echo \"[$SYNCTOP_LISTEN]\"", NULL};
    int rc2 = run_synctop(args2, &out2, &err2);
    unsetenv("SYNCTOP_LISTEN");
    ASSERT_EQ(rc, 0);
    ASSERT_STR_EQ(out, "[unset]\n");
    ASSERT_STR_CONTAINS(err, "SYNCTOP_LISTEN=none in the environment is left out");
    ASSERT_EQ(rc2, 0);
    ASSERT_STR_EQ(out2, "[tcp://127.0.0.1:0]\n");
    ASSERT_STR_CONTAINS(err2, "publishing on tcp://127.0.0.1:0, as SYNCTOP_LISTEN in the environment says");
    free(out);
    free(err);
    free(out2);
    free(err2);
}

/* What is not an endpoint is a bad argument, exit status 2, whichever verb was given it. */
TEST(a_bad_endpoint_is_a_usage_error_for_every_verb) {
    static const char *const cases[][8] = {
        {"run", "--no-tui", "--listen", "tcp://nope:99999", "--", "true", NULL},
        {"demo", "--no-tui", "--listen", "tcp://nope:99999", NULL},
        {"record", "tcp://nope:99999", "-o", "x.trace", NULL},
        {"attach", "tcp://nope:99999", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *err = NULL;
        int rc = run_synctop((const char *const *)cases[i], NULL, &err);
        if (rc != 2 || strstr(err, "the port a number from 1 to 65535") == NULL)
            TASK_FAIL_("%s: exit %d: %s", cases[i][0], rc, err);
        free(err);
    }
    /* a number alone names a process's endpoint: no place to publish, and :PORT is likely meant */
    static const char *const bare[][8] = {
        {"run", "--no-tui", "--listen", "5573", "--", "true", NULL},
        {"demo", "--no-tui", "--listen", "5573", NULL},
        {"relay", "--listen", "5573", NULL},
    };
    for (size_t i = 0; i < sizeof bare / sizeof bare[0]; i++) {
        char *err = NULL;
        int rc = run_synctop((const char *const *)bare[i], NULL, &err);
        if (rc != 2 || strstr(err, "--listen 5573: a number alone names a process's endpoint") == NULL ||
            strstr(err, "write :5573") == NULL)
            TASK_FAIL_("%s: exit %d: %s", bare[i][0], rc, err);
        free(err);
    }
}

/* `synctop help VERB` is `synctop VERB --help`. */
TEST(help_verb_is_the_verbs_own_help) {
    char *a = NULL, *b = NULL;
    const char *help[] = {"help", "report", NULL};
    const char *own[] = {"report", "--help", NULL};
    ASSERT_EQ(run_synctop(help, &a, NULL), 0);
    ASSERT_EQ(run_synctop(own, &b, NULL), 0);
    ASSERT_STR_CONTAINS(a, "usage: synctop report");
    ASSERT_STR_EQ(a, b);
    free(a);
    free(b);
}

static size_t count_lines(const char *s) {
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* A usage error shows the verb's synopsis (its --help up to the first blank line) and where the
 * rest is, not the whole help; a misspelt option or verb is named. */
TEST(a_usage_error_says_what_was_likely_meant_and_shows_the_synopsis_only) {
    char *help = NULL, *err = NULL;
    const char *h[] = {"report", "--help", NULL};
    ASSERT_EQ(run_synctop(h, &help, NULL), 0);
    const char *blank = strstr(help, "\n\n");
    ASSERT_NOT_NULL(blank);
    size_t synopsis_lines = count_lines(help) - count_lines(blank + 1);
    const char *body = blank + 2; /* the first line of the description */
    char body_line[128];
    snprintf(body_line, sizeof body_line, "%.*s", (int)strcspn(body, "\n"), body);
    ASSERT(strlen(body_line) > 20);
    ASSERT(count_lines(help) > synopsis_lines + 20);
    static const struct {
        const char *args[4];
        const char *says;
    } typos[] = {
        {{"report", "--formt", "json"}, "unknown option '--formt' (did you mean --format?)"},
        {{"report", "--form=json"}, "unknown option '--form=json' (did you mean --format?)"},
        {{"report", "--tpo", "3"}, "unknown option '--tpo' (did you mean --top?)"},
        {{"report", "--hepl"}, "unknown option '--hepl' (did you mean --help?)"},
    };
    for (size_t i = 0; i < sizeof typos / sizeof typos[0]; i++) {
        ASSERT_EQ(run_synctop(typos[i].args, NULL, &err), 2);
        ASSERT_STR_CONTAINS(err, typos[i].says);
        ASSERT_STR_CONTAINS(err, "usage: synctop report SOURCE...");
        ASSERT_STR_CONTAINS(err, "See 'synctop report --help'");
        ASSERT_NULL(strstr(err, body_line));
        ASSERT_EQ(count_lines(err), 1 + synopsis_lines + 1);
        free(err);
    }
    free(help);
    /* nothing near: no guess */
    const char *far[] = {"keygen", "--frobnicate", NULL};
    ASSERT_EQ(run_synctop(far, NULL, &err), 2);
    ASSERT_NULL(strstr(err, "did you mean"));
    free(err);
    /* a misspelt verb: the verb meant, in two lines */
    const char *verb[] = {"reprot", "x.trace", NULL};
    ASSERT_EQ(run_synctop(verb, NULL, &err), 2);
    ASSERT_STR_CONTAINS(err, "unknown verb 'reprot' (did you mean report?)");
    ASSERT_EQ(count_lines(err), 2);
    free(err);
    const char *swap[] = {"recrod", NULL};
    ASSERT_EQ(run_synctop(swap, NULL, &err), 2);
    ASSERT_STR_CONTAINS(err, "(did you mean record?)");
    free(err);
    /* a word like none of them: the list of verbs */
    const char *none[] = {"xyzzy", NULL};
    ASSERT_EQ(run_synctop(none, NULL, &err), 2);
    ASSERT_NULL(strstr(err, "did you mean"));
    ASSERT_STR_CONTAINS(err, "verbs:");
    ASSERT_STR_CONTAINS(err, "  report ");
    free(err);
}

TEST(info_counts_and_json) {
    KEEP_PATH(file, "info.trace");
    expect x;
    write_synth_file(file, 13, 30, 400, &x);
    char *out = NULL;
    const char *text[] = {"info", file, NULL};
    ASSERT_EQ(run_synctop(text, &out, NULL), 0);
    assert_kind_counts(out, &x);
    ASSERT_STR_CONTAINS(out, "batches: 30 (seq 0 to 29)");
    ASSERT_STR_CONTAINS(out, "ended: no");
    ASSERT_STR_CONTAINS(out, "threads: 4242 python\n");
    free(out);
    const char *json[] = {"info", "--json", file, NULL};
    ASSERT_EQ(run_synctop(json, &out, NULL), 0);
    char want[64];
    snprintf(want, sizeof want, "\"events\": %" PRIu64 ",", x.events);
    ASSERT_STR_CONTAINS(out, want);
    snprintf(want, sizeof want, "\"kernel\": %" PRIu64, x.per_kind[TP_K_KERNEL]);
    ASSERT_STR_CONTAINS(out, want);
    ASSERT_STR_CONTAINS(out, "\"host\": \"gpu-node-07\"");
    ASSERT_STR_CONTAINS(out, "\"complete\": true");
    ASSERT_STR_CONTAINS(out, "\"problems\": []");
    ASSERT_EQ(out[0], '{');
    ASSERT_STR_EQ(out + strlen(out) - 2, "}\n");
    free(out);
    expect_free(&x);
}

TEST(info_cannot_read_exits_1) {
    KEEP_PATH(file, "junk.trace");
    FILE *f = fopen(file, "wb");
    ASSERT_NOT_NULL(f);
    for (int i = 0; i < 300; i++)
        fputc(i * 7, f);
    fclose(f);
    char *out = NULL, *err = NULL;
    const char *junk[] = {"info", file, NULL};
    ASSERT_EQ(run_synctop(junk, &out, &err), 1);
    ASSERT_STR_CONTAINS(err, "neither a synctop trace file");
    ASSERT_STR_EQ(out, "");
    free(out);
    free(err);
    const char *missing[] = {"info", task_path("missing.trace"), NULL};
    ASSERT_EQ(run_synctop(missing, NULL, &err), 1);
    ASSERT_STR_CONTAINS(err, "missing.trace");
    free(err);
    const char *usage[] = {"info", NULL};
    ASSERT_EQ(run_synctop(usage, NULL, NULL), 2);
}

TEST(info_refuses_a_newer_version) {
    KEEP_PATH(file, "v2.trace");
    write_synth_file(file, 14, 2, 50, NULL);
    int fd = open(file, O_WRONLY);
    uint16_t v = TP_FILE_VERSION + 1;
    ASSERT_EQ(pwrite(fd, &v, 2, 16), 2);
    close(fd);
    char *err = NULL;
    const char *args[] = {"info", file, NULL};
    ASSERT_EQ(run_synctop(args, NULL, &err), 1);
    char want[96];
    snprintf(want, sizeof want, "version %d is newer than this synctop understands (version %d)", TP_FILE_VERSION + 1,
             TP_FILE_VERSION);
    ASSERT_STR_CONTAINS(err, want);
    free(err);
}

TEST(info_lists_damage_and_exits_0) {
    KEEP_PATH(file, "damaged.trace");
    expect x;
    write_synth_file(file, 15, 20, 300, &x);
    err_msg e = {{0}};
    tp_freader *r = tp_freader_open(file, &e);
    ASSERT_NOT_NULL(r);
    tp_findex_entry bad = *tp_freader_entry(r, 7);
    tp_freader_close(&r);
    int fd = open(file, O_WRONLY);
    ASSERT_EQ(pwrite(fd, "\xde\xad\xbe\xef", 4, (off_t)(bad.offset + TP_BATCH_HDR_SIZE + 20)), 4);
    close(fd);
    char *out = NULL;
    const char *args[] = {"info", file, NULL};
    ASSERT_EQ(run_synctop(args, &out, NULL), 0);
    ASSERT_STR_CONTAINS(out, "problems: 1\n");
    char want[96];
    snprintf(want, sizeof want, "  offset %" PRIu64 " (%u bytes): damaged batch", bad.offset, bad.size);
    ASSERT_STR_CONTAINS(out, want);
    snprintf(want, sizeof want, "events: %" PRIu64 "\n", x.events - bad.n_events);
    ASSERT_STR_CONTAINS(out, want);
    ASSERT_STR_CONTAINS(out, "batches: 20 (seq 0 to 19)"); /* damaged, not missing: */
    ASSERT_STR_CONTAINS(out, "drops: none");
    free(out);
    expect_free(&x);
}

TEST(info_prints_untrusted_names_safely) {
    KEEP_PATH(file, "evil.trace");
    err_msg err = {{0}};
    tp_fwriter *w = tp_fwriter_open(file, 0, &err);
    ASSERT_NOT_NULL(w);
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 0xE71});
    tp_process p = {.kind = TP_K_PROCESS, .device = TP_NO_DEVICE, .pid = 66,
                    .host = tp_enc_intern_cstr(enc, "evil\x1b]0;pwned\x07host"),
                    .cmdline = tp_enc_intern_cstr(enc, "run \"quoted\" \\ \x9b" "31m red"), .rank = -1, .world = -1};
    tp_thread t = {.kind = TP_K_THREAD, .device = TP_NO_DEVICE, .tid = 1, .pid = 66,
                   .name = tp_enc_intern_cstr(enc, "\x1b[2Jclear")};
    ASSERT_OK(tp_enc_add(enc, &p));
    ASSERT_OK(tp_enc_add(enc, &t));
    tp_buf b = {0};
    ASSERT_OK(tp_enc_finish(enc, &b));
    ASSERT_OK(tp_fwriter_append(w, b.data, b.len, &err));
    ASSERT_OK(tp_fwriter_close(&w, &err));
    const char *modes[2][4] = {{"info", file, NULL}, {"info", "--json", file, NULL}};
    for (int m = 0; m < 2; m++) {
        char *out = NULL;
        ASSERT_EQ(run_synctop(modes[m], &out, NULL), 0);
        ASSERT_NULL(strchr(out, '\x1b'));
        ASSERT_NULL(strchr(out, '\x07'));
        ASSERT_NULL(strchr(out, (char)0x9b));
        ASSERT_STR_CONTAINS(out, "pwned");
        ASSERT_STR_CONTAINS(out, m ? "run \\\"quoted\\\" \\\\ " : "run \"quoted\" \\ ");
        free(out);
    }
    tp_buf_free(&b);
    tp_enc_destroy(&enc);
}
