/* The tracer end to end without a GPU: the real libsynctop-tracer.so, loaded by a harness that
 * plays the driver's part, over a stand-in libcupti that replays scripted records and host calls.
 * What is checked is what the tracer publishes (on a real ZeroMQ socket and in a trace file), so
 * the same expectations hold for tests/gpu against the real CUPTI. Record conversion is also
 * checked through the real libcupti's cuptiActivityGetNextRecord over hand-built buffers. */
#include "task.h"

/* Without the CUDA toolkit there is no tracer: tests/CMakeLists.txt disables these cases. */
#ifdef SYNCTOP_HAVE_TRACER

#include <cupti.h>
#include <cupti_activity_deprecated.h>
#include <dlfcn.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cbids.h"
#include "convert.h"
#include "hostq.h"
#include "synctop/codec.h"
#include "synctop/file.h"
#include "synctop/net.h"
#include "tracer_fixture.h"

/* ---- tests ---- */

/* The driver's entry point, NVTX's, and the three of synctop/tracer.h, nothing else. */
TEST(tracer_exports_only_its_entry_points) {
    static const char *const want[] = {"InitializeInjection", "InitializeInjectionNvtx2", "synctop_tracer_start",
                                       "synctop_tracer_stop", "synctop_tracer_status"};
    enum { N_WANT = sizeof want / sizeof want[0] };
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s'", TRACER_SO);
    FILE *p = popen(cmd, "r");
    ASSERT_NOT_NULL(p);
    char line[512];
    int seen[N_WANT] = {0}, n = 0;
    while (fgets(line, sizeof line, p) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        const char *name = strrchr(line, ' ');
        name = name ? name + 1 : line;
        int k = 0;
        while (k < N_WANT && strcmp(name, want[k]) != 0)
            k++;
        if (k == N_WANT)
            TASK_FAIL_("exported symbol besides the entry points: %s", line);
        seen[k]++;
        n++;
    }
    ASSERT_OK(pclose(p));
    for (int k = 0; k < N_WANT; k++)
        ASSERT_EQ(seen[k], 1);
    ASSERT_EQ(n, N_WANT);
}

TEST(tracer_publishes_and_records_a_program) {
    char listen[512], record[512];
    snprintf(listen, sizeof listen, "SYNCTOP_LISTEN=ipc://%s", task_path("pub.sock"));
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {listen, record, "SYNCTOP_START_WAIT_MS=20000", "RANK=3", "WORLD_SIZE=8",
                         NULL};
    /* Connect first: ZeroMQ reconnects until the tracer binds, and the tracer waits for us. */
    tp_sub *sub = connect_sub(listen + strlen("SYNCTOP_LISTEN="), 0);
    pid_t pid = start_harness(step_script(), env);
    model live;
    model_init(&live);
    drain_sub(sub, &live, 20000);
    ASSERT_EQ(wait_harness(pid), 0);
    char *out = read_text(task_path("out.txt"));
    char *err = read_text(task_path("err.txt"));
    ASSERT_STR_CONTAINS(out, "harness: program done");
    ASSERT_STR_CONTAINS(out, "kernel_kind_enabled=0 concurrent_kernel=1");
    ASSERT_STR_EQ(err, ""); /* a working tracer says nothing */
    check_step_events(&live);
    check_step_meta(&live);

    model file;
    model_init(&file);
    model_from_file(&file, task_path("trace.trace"));
    check_step_events(&file);
    check_step_meta(&file);
    /* Both saw the same events. */
    for (unsigned k = TP_K_KERNEL; k < TP_K_CLOCK; k++)
        ASSERT_EQ(count_kind(&live, k), count_kind(&file, k));
    model_free(&live);
    model_free(&file);
    tp_sub_destroy(&sub);
    free(out);
    free(err);
}

/* A recording needs no socket: when publishing is refused, the tracer still records, and says so
 * in one line. */
TEST(tracer_records_when_it_cannot_publish) {
    char record[512];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {record, "SYNCTOP_LISTEN=ipc://@synctop-abstract", NULL};
    ASSERT_EQ(run_harness("context_create 1\ncall domain=rt cbid=131 wait=500000 site=1\n"
                          "kernel name=k start=2000000000 end=2000002000 dev=0 ctx=1 stream=13 corr=9\n"
                          "context_destroy 1\n",
                          env),
              0);
    char *err = read_text(task_path("err.txt"));
    ASSERT_STR_CONTAINS(err, "synctop: not publishing (refusing to publish on ipc://@synctop-abstract");
    ASSERT_STR_CONTAINS(err, "recording to ");
    ASSERT_EQ(strchr(err, '\n') - err + 1, (int64_t)strlen(err));
    model m;
    model_init(&m);
    model_from_file(&m, task_path("trace.trace"));
    ASSERT(m.ended);
    ASSERT_EQ(count_kind(&m, TP_K_API), 1);
    ASSERT_EQ(count_kind(&m, TP_K_KERNEL), 1);
    model_free(&m);
    free(err);
}

/* Another user who creates $TMPDIR/synctop-UID first (open to all) cannot switch tracing off: the
 * tracer publishes in $HOME/.cache/synctop/HOST instead, and says where. */
TEST(tracer_steps_aside_from_a_spoiled_socket_directory) {
    char tmp[600], home[600], spoiled[700];
    snprintf(tmp, sizeof tmp, "%s", task_path("tmp"));
    snprintf(home, sizeof home, "%s", task_path("home"));
    ASSERT_OK(mkdir(tmp, 0700));
    ASSERT_OK(mkdir(home, 0700));
    snprintf(spoiled, sizeof spoiled, "%s/synctop-%u", tmp, (unsigned)geteuid());
    ASSERT_OK(mkdir(spoiled, 0777));
    ASSERT_OK(chmod(spoiled, 0777));
    char tmpdir[700], homevar[700];
    snprintf(tmpdir, sizeof tmpdir, "TMPDIR=%s", tmp);
    snprintf(homevar, sizeof homevar, "HOME=%s", home);
    const char *env[] = {tmpdir, homevar, "XDG_RUNTIME_DIR=", "SYNCTOP_LISTEN=", NULL};
    ASSERT_EQ(run_harness("context_create 1\ncall domain=rt cbid=131 wait=500000 site=1\ncontext_destroy 1\n", env), 0);
    char *err = read_text(task_path("err.txt"));
    ASSERT_STR_CONTAINS(err, "accessible by group or others");
    char where[800];
    snprintf(where, sizeof where, "publishing on ipc://%s/.cache/synctop/", home);
    ASSERT_STR_CONTAINS(err, where);
    ASSERT_NULL(strstr(err, "not tracing"));
    free(err);
}

/* A recording that stops (here a file size limit, as a full disk would) is said once on stderr;
 * the program and the live subscribers go on, and the file keeps what was written, marked as not
 * closed cleanly. */
TEST(tracer_says_once_when_the_recording_stops) {
    char record[512];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {record, "SYNCTOP_LISTEN=none", NULL};
    char script[4096];
    snprintf(script, sizeof script,
             "context_create 1\n"
             "x400@1000 call domain=rt cbid=%d wait=1000 ctx=1 corr=1 site=1\n"
             "flush\nwait_flush\n"
             "x40000@1000 kernel name=k start=2000000000 end=2000000500 dev=0 ctx=1 stream=13 corr=2\n"
             "flush\nwait_flush\n"
             "x40000@1000 kernel name=k start=3000000000 end=3000000500 dev=0 ctx=1 stream=13 corr=3\n"
             "context_destroy 1\n",
             CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020);
    harness_fsize = 100000;
    int rc = run_harness(script, env);
    harness_fsize = RLIM_INFINITY;
    ASSERT_EQ(rc, 0);
    char *out = read_text(task_path("out.txt"));
    char *err = read_text(task_path("err.txt"));
    ASSERT_STR_CONTAINS(out, "harness: program done");
    ASSERT_STR_CONTAINS(err, "synctop: recording to ");
    ASSERT_STR_CONTAINS(err, "stopped: ");
    ASSERT_EQ(strchr(err, '\n') - err + 1, (int64_t)strlen(err)); /* one line */
    struct stat st;
    ASSERT_OK(stat(task_path("trace.trace"), &st));
    ASSERT_LE(st.st_size, 100000);
    err_msg e = {{0}};
    tp_freader *r = tp_freader_open(task_path("trace.trace"), &e);
    if (r == NULL)
        TASK_FAIL_("%s", e.msg);
    ASSERT(!tp_freader_complete(r));
    ASSERT_GT(tp_freader_count(r), 0);
    tp_freader_close(&r);
    free(out);
    free(err);
}

/* Plays the script with a recording asked for, and one more setting (NULL: none), and checks that
 * the tracer stepped aside: the program ran to its end, stderr is one line naming the cause, and
 * there is no trace file. */
static void check_steps_aside(const char *script, const char *setting, const char *cause) {
    char record[512];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {record, "SYNCTOP_LISTEN=none", setting, NULL};
    ASSERT_EQ(run_harness(script, env), 0);
    char *out = read_text(task_path("out.txt"));
    char *err = read_text(task_path("err.txt"));
    ASSERT_STR_CONTAINS(out, "harness: program done");
    ASSERT_STR_CONTAINS(err, "synctop: not tracing");
    ASSERT_STR_CONTAINS(err, cause);
    ASSERT_EQ(strchr(err, '\n') - err + 1, (int64_t)strlen(err));
    ASSERT(!file_exists(task_path("trace.trace")));
    free(out);
    free(err);
}

TEST(tracer_subscribe_failure_steps_aside) {
    check_steps_aside("fail subscribe\ncontext_create 1\n"
                      "call domain=rt cbid=131 wait=500000 site=1\ncontext_destroy 1\n",
                      NULL, "MULTIPLE_SUBSCRIBERS");
}

TEST(tracer_quiet_failure_prints_nothing) {
    const char *env[] = {"SYNCTOP_QUIET=1", "SYNCTOP_LISTEN=none", NULL};
    ASSERT_EQ(run_harness("fail subscribe\ncall domain=rt cbid=131 wait=500000 site=1\n", env), 0);
    char *out = read_text(task_path("out.txt"));
    char *err = read_text(task_path("err.txt"));
    ASSERT_STR_CONTAINS(out, "harness: program done");
    ASSERT_STR_EQ(err, "");
    free(out);
    free(err);
}

TEST(tracer_without_cupti_steps_aside) {
    const char *env[] = {"SYNCTOP_CUPTI=/nonexistent/libcupti.so.13", "SYNCTOP_LISTEN=none", NULL};
    ASSERT_EQ(run_harness("call domain=rt cbid=131 wait=500000 site=1\n", env), 0);
    char *out = read_text(task_path("out.txt"));
    char *err = read_text(task_path("err.txt"));
    ASSERT_STR_CONTAINS(out, "harness: program done");
    ASSERT_STR_CONTAINS(err, "synctop: not tracing: cannot load /nonexistent/libcupti.so.13");
    ASSERT_EQ(strchr(err, '\n') - err + 1, (int64_t)strlen(err));
    free(out);
    free(err);
}

/* A forked child exits through the sanitizer runtime's leak check, which waits for its allocator's
 * lock: when the fork came while another thread (the flush thread, running a round) held it, the
 * child would wait forever. glibc's malloc is fork-safe; this sanitizer allocator is not: the fork
 * tests run without the leak check. */
#define NO_LEAK_CHECK_IN_CHILD "ASAN_OPTIONS=detect_leaks=0"

TEST(tracer_forked_child_never_calls_cupti) {
    char record[512], log[512];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    snprintf(log, sizeof log, "SYNCTOP_STANDIN_CHILD_LOG=%s", task_path("child.log"));
    const char *env[] = {record, log, "SYNCTOP_LISTEN=none", NO_LEAK_CHECK_IN_CHILD, NULL};
    ASSERT_EQ(run_harness("context_create 1\n"
                          "call domain=rt cbid=131 wait=500000 corr=1 site=1\n"
                          "fork\n"
                          "call domain=rt cbid=131 wait=500000 corr=2 site=1\n"
                          "context_destroy 1\n",
                          env),
              0);
    char *out = read_text(task_path("out.txt"));
    ASSERT_STR_CONTAINS(out, "child=0"); /* the child ran and exited normally */
    char *log_text = read_text(task_path("child.log"));
    ASSERT_STR_EQ(log_text, ""); /* and made no CUPTI call */
    model m;
    model_init(&m);
    model_from_file(&m, task_path("trace.trace"));
    ASSERT_EQ(count_api(&m, 131), 2); /* the parent's two waits, not the child's */
    ASSERT_NOT_NULL(find_api(&m, 131, 1));
    ASSERT_NOT_NULL(find_api(&m, 131, 2));
    ASSERT_EQ(m.ended, 1);
    model_free(&m);
    free(out);
    free(log_text);
}

TEST(tracer_concurrent_buffer_callbacks_lose_nothing) {
    char record[512];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    /* Small buffers: each thread fills and hands over dozens, all threads at once. */
    const char *env[] = {record, "SYNCTOP_LISTEN=none", "SYNCTOP_BUFFER_KB=16",
                         "SYNCTOP_MAX_BUFFERS=4096", NULL};
    ASSERT_EQ(run_harness("context_create 1\n"
                          "threads 8\n"
                          "x500@1000 kernel name=k start=1000 end=1500 corr=1\n"
                          "x100@1000 memcpy copy=1 src=2 dst=3 bytes=64 start=1000 end=1100 corr=1\n"
                          "end\n"
                          "context_destroy 1\n",
                          env),
              0);
    model m;
    model_init(&m);
    model_from_file(&m, task_path("trace.trace"));
    ASSERT_EQ(count_kind(&m, TP_K_KERNEL), 8 * 500);
    ASSERT_EQ(count_kind(&m, TP_K_MEMCPY), 8 * 100);
    ASSERT_EQ(last_drops(&m, TP_DROP_CUPTI, 0, NULL), 0);
    model_free(&m);
}

/* Polls ready(arg) every millisecond for up to 20 s; fails when the harness ends first or time
 * runs out, saying what it waited for. */
static void wait_until(int (*ready)(const void *), const void *arg, pid_t harness, const char *what) {
    for (int i = 0; i < 20000; i++) {
        if (ready(arg))
            return;
        int status;
        if (waitpid(harness, &status, WNOHANG) == harness)
            TASK_FAIL_("harness ended before %s (status %#x): %s", what, status, read_text(task_path("err.txt")));
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    TASK_FAIL_("waited 20 s for %s", what);
}

static int path_exists(const void *path) {
    return file_exists(path);
}

static void wait_for_file(const char *path, pid_t harness) {
    wait_until(path_exists, path, harness, path);
}

/* A flock held on an inode by a process, as /proc/locks lists it. */
typedef struct flock_of {
    char pid[32], ino[32];
} flock_of;

static int flock_held(const void *arg) {
    const flock_of *w = arg;
    FILE *f = fopen("/proc/locks", "r");
    ASSERT_NOT_NULL(f);
    char line[256];
    int held = 0;
    while (!held && fgets(line, sizeof line, f) != NULL)
        held = strstr(line, "FLOCK") != NULL && strstr(line, w->pid) != NULL && strstr(line, w->ino) != NULL;
    fclose(f);
    return held;
}

/* Waits until the harness holds an flock on path (a tracer's claim on its trace file): the file is
 * created before it is locked, so its existence says nothing of the claim; the kernel's table of
 * locks (/proc/locks: "N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF") says who holds what,
 * without taking the lock, which would make the claim fail. The device as stat tells it may be an
 * overlay's: the pid and the inode are compared. */
static void wait_for_flock(const char *path, pid_t harness) {
    wait_for_file(path, harness);
    struct stat sb;
    ASSERT_OK(stat(path, &sb));
    flock_of w;
    snprintf(w.pid, sizeof w.pid, " %ld ", (long)harness);
    snprintf(w.ino, sizeof w.ino, ":%lu ", (unsigned long)sb.st_ino);
    wait_until(flock_held, &w, harness, "the harness's lock on its trace file");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Batches of this live model missing between its first and its last: the gaps it saw. */
static uint64_t live_missing(const model *m) {
    if (m->n_seqs == 0)
        return 0;
    uint64_t lo = m->seqs[0], hi = m->seqs[0];
    for (size_t i = 0; i < m->n_seqs; i++) {
        lo = m->seqs[i] < lo ? m->seqs[i] : lo;
        hi = m->seqs[i] > hi ? m->seqs[i] : hi;
    }
    return hi - lo + 1 - m->n_seqs;
}

/* A subscriber that reads nothing while 100 big batches go out loses most of them; once it reads
 * again it reports its gaps, the tracer publishes them as its drop count, and the count equals what
 * the subscriber is missing. */
TEST(tracer_stalled_subscriber_drops_are_counted) {
    char listen[512], record[512], script[2048];
    snprintf(listen, sizeof listen, "SYNCTOP_LISTEN=ipc://%s", task_path("pub.sock"));
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {listen, record, "SYNCTOP_START_WAIT_MS=20000", "SYNCTOP_SNDHWM=1",
                         "SYNCTOP_LINGER_MS=30000", NULL};
    tp_sub *sub = connect_sub(listen + strlen("SYNCTOP_LISTEN="), 1);
    /* 100 batches of ~170 KB that nobody reads while they are sent; then the program waits until
     * the test has seen the drop count. */
    snprintf(script, sizeof script,
             "context_create 1\n"
             "repeat 100\n"
             "x1000@1000 kernel name=k start=1000 end=1500 corr=1\n"
             "flush\n"
             "wait_flush\n"
             "end\n"
             "touch %s\n"
             "wait_file %s\n"
             "context_destroy 1\n",
             task_path("sent"), task_path("counted"));
    pid_t pid = start_harness(script, env);
    wait_for_file(task_path("sent"), pid);
    model live;
    model_init(&live);
    double deadline = now_s() + 30;
    uint64_t published = 0;
    for (;;) {
        tp_sub_msg msg;
        err_msg err = {{0}};
        int rc = tp_sub_recv(sub, &msg, 100, &err);
        if (rc < 0)
            TASK_FAIL_("tp_sub_recv: %s", err.msg);
        if (rc == 1) {
            model_add_batch(&live, msg.data, msg.len);
            published = last_drops(&live, TP_DROP_PUBLISHER, 1, NULL);
        }
        if (published > 0 && published == live_missing(&live))
            break;
        if (now_s() > deadline)
            TASK_FAIL_("after 30 s the tracer publishes %" PRIu64 " dropped batches; the subscriber misses %" PRIu64,
                       published, live_missing(&live));
    }
    write_text(task_path("counted"), "");
    drain_sub(sub, &live, 3000);
    ASSERT_EQ(live.ended, 1);
    ASSERT_EQ(wait_harness(pid), 0);
    model file;
    model_init(&file);
    model_from_file(&file, task_path("trace.trace"));
    ASSERT_EQ(count_kind(&file, TP_K_KERNEL), 100 * 1000);
    /* the file (which lost nothing) carries the same final count */
    uint64_t dropped = last_drops(&file, TP_DROP_PUBLISHER, 1, NULL);
    ASSERT_GT(dropped, 0);
    ASSERT_UEQ(dropped, live_missing(&live));
    tp_sub_stats ss;
    tp_sub_stats_get(sub, &ss);
    ASSERT_UEQ(ss.missed, dropped);
    ASSERT_LT(count_kind(&live, TP_K_KERNEL), 100 * 1000);
    model_free(&live);
    model_free(&file);
    tp_sub_destroy(&sub);
}

/* A program that forks workers (a DataLoader each epoch) pays no flush for it: the fork asks CUPTI
 * for nothing and waits for nothing (the flush thread is only woken), and the parent's records
 * still all come out. */
TEST(tracer_fork_neither_flushes_nor_waits) {
    char record[512];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {record, "SYNCTOP_LISTEN=none", "SYNCTOP_FLUSH_MS=60000",
                         NO_LEAK_CHECK_IN_CHILD, NULL};
    ASSERT_EQ(run_harness("context_create 1\n"
                          "kernel name=before_fork start=1000 end=2000 corr=1\n"
                          "call domain=rt cbid=131 wait=500000 corr=1 site=1\n"
                          "fork\n"
                          "report\n"
                          "context_destroy 1\n",
                          env),
              0);
    char *out = read_text(task_path("out.txt"));
    ASSERT_STR_CONTAINS(out, "child=0");
    ASSERT_STR_CONTAINS(out, " forced=0 "); /* no forced flush at the fork */
    model m;
    model_init(&m);
    model_from_file(&m, task_path("trace.trace"));
    ASSERT_EQ(count_kind(&m, TP_K_KERNEL), 1);
    ASSERT_NOT_NULL(find_api(&m, 131, 1));
    ASSERT_EQ(m.ended, 1);
    model_free(&m);
    free(out);
}

/* A program that forks and leaves at once with _exit (a daemon's parent) loses what any _exit
 * loses, at most a flush period: what the flush thread shipped before is in the file, cut short
 * (no END batch, no footer) and readable. */
TEST(tracer_fork_then_exit_keeps_what_was_shipped) {
    char record[512];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {record, "SYNCTOP_LISTEN=none", NULL};
    ASSERT_EQ(run_harness("context_create 1\n"
                          "kernel name=before_fork start=1000 end=2000 corr=1\n"
                          "call domain=rt cbid=131 wait=500000 corr=1 site=1\n"
                          "flush\n"
                          "wait_flush\n"
                          "fork_exit\n",
                          env),
              0);
    char *out = read_text(task_path("out.txt"));
    ASSERT(strstr(out, "harness: program done") == NULL); /* it did leave with _exit */
    err_msg err = {{0}};
    tp_freader *r = tp_freader_open(task_path("trace.trace"), &err);
    if (r == NULL)
        TASK_FAIL_("cannot open the trace: %s", err.msg);
    ASSERT_EQ(tp_freader_complete(r), 0); /* cut short: no footer */
    ASSERT_EQ(tp_freader_problem_count(r), 0);
    model m;
    model_init(&m);
    tp_buf b = {0};
    for (size_t i = 0; i < tp_freader_count(r); i++) {
        ASSERT_OK(tp_freader_read(r, i, &b, &err));
        model_add_batch(&m, b.data, b.len);
    }
    tp_buf_free(&b);
    tp_freader_close(&r);
    ASSERT_EQ(count_kind(&m, TP_K_KERNEL), 1);
    const tp_record *a = find_api(&m, 131, 1);
    ASSERT_NOT_NULL(a);
    ASSERT_EQ(a->api.flags, TP_F_BLOCKING);
    ASSERT_EQ(m.ended, 0);
    model_free(&m);
    free(out);
}

/* A program that never destroys its context and returns from main: the exit handler forces
 * CUPTI's buffers out (a kernel in an incomplete buffer), then the END batch follows. */
TEST(tracer_exit_without_context_destroy_loses_nothing) {
    char record[512];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {record, "SYNCTOP_LISTEN=none", "SYNCTOP_FLUSH_MS=60000", NULL};
    ASSERT_EQ(run_harness("context_create 1\n"
                          "x5@1000 kernel name=last_words start=1000 end=1500 corr=1\n"
                          "call domain=rt cbid=131 wait=500000 corr=9 site=1\n",
                          env),
              0);
    model m;
    model_init(&m);
    model_from_file(&m, task_path("trace.trace"));
    ASSERT_EQ(m.ended, 1);
    ASSERT_EQ(count_kind(&m, TP_K_KERNEL), 5);
    ASSERT_NOT_NULL(find_api(&m, 131, 9));
    model_free(&m);
}

/* ---- on demand ---- */

static void count_watched(void *arg, CUpti_CallbackDomain dom, uint32_t cbid,
                          enum tr_cb_class cls) {
    (void)dom;
    (void)cbid;
    int *n = arg;
    n[cls == TR_CB_LAUNCH]++;
}

static const tp_record *find_kernel(const model *m, const char *name) {
    for (size_t i = 0; i < m->n; i++)
        if (m->recs[i].head.kind == TP_K_KERNEL &&
            strcmp(str(m, m->recs[i].kernel.name), name) == 0)
            return &m->recs[i];
    return NULL;
}

/* SYNCTOP_MODE=on-demand: nothing is collected (only the metadata kinds stay enabled: device,
 * context and stream records, kept so that a viewer arriving later knows the devices) until a
 * viewer subscribes; everything is while one is there; and the tracer is dormant again once the
 * last one has left. The program's three phases each make the same calls; only the middle one's
 * may come out, live and in the trace file. */
TEST(tracer_on_demand_collects_only_while_watched) {
    char listen[512], record[512];
    snprintf(listen, sizeof listen, "SYNCTOP_LISTEN=ipc://%s", task_path("pub.sock"));
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {listen, record, "SYNCTOP_MODE=on-demand", NULL};
    char dormant[512], active[512], script[8192];
    snprintf(dormant, sizeof dormant, "%s", task_path("dormant"));
    snprintf(active, sizeof active, "%s", task_path("active"));
#define PHASE(n, kernel)                                                                   \
    "call domain=rt cbid=131 wait=500000 corr=" #n " site=1\n"                              \
    "kernel name=" kernel " start=" #n "000 end=" #n "500 corr=" #n "\n"                      \
    "memcpy copy=2 src=3 dst=1 bytes=4 start=" #n "600 end=" #n "700 corr=" #n "\n"           \
    "flush\n"
    const char *p1 = PHASE(1, "before_kernel"), *p2 = PHASE(2, "watched_kernel"),
               *p3 = PHASE(3, "after_kernel");
#undef PHASE
    snprintf(script, sizeof script,
             "context_create 1\n"
             "device id=0 name=FakeH100\n"
             "%s"
             "report\n"
             "wait_flush\n"
             "touch %s\n"
             "wait_kind %d 1\n" /* the tracer saw the viewer (the last thing it turns on) */
             "report\n"
             "%s"
             "wait_flush\n"
             "wait_file %s\n"
             "wait_kind %d 0\n" /* the tracer saw it leave (the last thing it turns off) */
             "report\n"
             "%s"
             "wait_flush\n"
             "context_destroy 1\n",
             p1, dormant, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, p2, active,
             CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, p3);
    pid_t pid = start_harness(script, env);
    wait_for_file(dormant, pid);

    /* Watch until the middle phase's three events have come, then leave. */
    tp_sub *sub = connect_sub(listen + strlen("SYNCTOP_LISTEN="), 0);
    model live;
    model_init(&live);
    for (int i = 0; i < 2000; i++) {
        tp_sub_msg msg;
        err_msg err = {{0}};
        int rc = tp_sub_recv(sub, &msg, 10, &err);
        if (rc < 0)
            TASK_FAIL_("tp_sub_recv: %s", err.msg);
        if (rc > 0)
            model_add_batch(&live, msg.data, msg.len);
        if (find_kernel(&live, "watched_kernel") && find_api(&live, 131, 2) &&
            count_kind(&live, TP_K_MEMCPY) > 0)
            break;
    }
    tp_sub_destroy(&sub);
    write_text(active, "");
    ASSERT_EQ(wait_harness(pid), 0);

    /* What the tracer asked of CUPTI in each phase. */
    int watched[2] = {0, 0};
    tr_cb_foreach(count_watched, watched);
    ASSERT_GT(watched[0], 0);
    ASSERT_GT(watched[1], 0);
    char dormant_kinds[128], active_kinds[1024];
    snprintf(dormant_kinds, sizeof dormant_kinds, "kinds=%d,%d,%d callbacks=0 api_records=0 ",
             CUPTI_ACTIVITY_KIND_DEVICE, CUPTI_ACTIVITY_KIND_CONTEXT, CUPTI_ACTIVITY_KIND_STREAM);
    snprintf(active_kinds, sizeof active_kinds,
             "kinds=%d,%d,%d,%d,%d,%d,%d,%d callbacks=%d api_records=%d ",
             CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_DEVICE,
             CUPTI_ACTIVITY_KIND_CONTEXT, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
             CUPTI_ACTIVITY_KIND_MARKER, CUPTI_ACTIVITY_KIND_STREAM,
             CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, watched[0], watched[1]);
    char *out = read_text(task_path("out.txt"));
    const char *want[3] = {dormant_kinds, active_kinds, dormant_kinds};
    const char *at = out;
    for (int i = 0; i < 3; i++) {
        at = strstr(at, "standin: report ");
        ASSERT_NOT_NULL(at);
        at += strlen("standin: report ");
        if (strncmp(at, want[i], strlen(want[i])) != 0)
            TASK_FAIL_("report %d: %.*s, not %s", i + 1, (int)strcspn(at, "\n"), at, want[i]);
    }
    ASSERT_STR_CONTAINS(out, "harness: program done");

    /* Live and recorded: the watched phase, and nothing of the others. */
    model file;
    model_init(&file);
    model_from_file(&file, task_path("trace.trace"));
    ASSERT_EQ(file.ended, 1);
    const model *both[2] = {&live, &file};
    for (int k = 0; k < 2; k++) {
        const model *m = both[k];
        ASSERT_EQ(count_kind(m, TP_K_KERNEL), 1);
        ASSERT_NOT_NULL(find_kernel(m, "watched_kernel"));
        ASSERT_EQ(count_kind(m, TP_K_MEMCPY), 1);
        ASSERT_EQ(count_kind(m, TP_K_API), 1);
        const tp_record *a = find_api(m, 131, 2);
        ASSERT_NOT_NULL(a);
        ASSERT_EQ(a->api.flags, TP_F_BLOCKING);
        ASSERT_NE(a->api.callsite, 0);
        ASSERT_EQ(a->api.device, 0);
        /* its record came while dormant, and is known all the same */
        ASSERT_GE(count_kind(m, TP_K_DEVICE), 1);
    }
    for (size_t i = 0; i < file.n; i++)
        if (file.recs[i].head.kind == TP_K_MEMCPY)
            ASSERT_EQ(file.recs[i].memcpy.correlation, 2);
    model_free(&live);
    model_free(&file);
    free(out);
}

/* ---- what the real CUPTI does that a tracer must expect ---- */

static int shell(const char *cmd, char **out);

static const tp_record *find_nvtx(const model *m, const char *prefix, size_t skip) {
    for (size_t i = 0; i < m->n; i++)
        if (m->recs[i].head.kind == TP_K_NVTX &&
            strncmp(str(m, m->recs[i].nvtx.name), prefix, strlen(prefix)) == 0 && skip-- == 0)
            return &m->recs[i];
    return NULL;
}

/* CUPTI's activity records carry pthread_self() unless told otherwise, the callbacks gettid(): the
 * tracer asks for system ids, so a thread's launches and NVTX ranges (records) and its waits
 * (callbacks) land on one lane, on every thread. */
TEST(tracer_records_and_callbacks_agree_on_thread_ids) {
    char record[512];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {record, "SYNCTOP_LISTEN=none", NULL};
    ASSERT_EQ(run_harness("context_create 1\n"
                          "threads 3\n"
                          "api domain=rt cbid=211 start=2000 end=3000 corr=7\n"
                          "marker flags=1 ts=2500 id=1 name=tick\n"
                          "call domain=rt cbid=131 wait=500000 corr=8 site=1\n"
                          "end\n"
                          "context_destroy 1\n",
                          env),
              0);
    model m;
    model_init(&m);
    model_from_file(&m, task_path("trace.trace"));
    size_t launches = 0, marks = 0, waits = 0;
    for (size_t i = 0; i < m.n; i++) {
        const tp_record *r = &m.recs[i];
        uint32_t tid = r->head.kind == TP_K_API ? r->api.tid : r->head.kind == TP_K_NVTX ? r->nvtx.tid : 0;
        if (tid == 0)
            continue;
        /* every lane is one of the three threads that waited */
        int waited = 0;
        for (size_t j = 0; j < m.n; j++)
            waited |= m.recs[j].head.kind == TP_K_API && m.recs[j].api.cbid == 131 &&
                      m.recs[j].api.tid == tid;
        if (!waited)
            TASK_FAIL_("%s record on thread %u, which made no call", tp_kind_name(r->head.kind), tid);
        launches += r->head.kind == TP_K_API && r->api.cbid == 211;
        waits += r->head.kind == TP_K_API && r->api.cbid == 131;
        marks += r->head.kind == TP_K_NVTX;
    }
    ASSERT_EQ(launches, 3);
    ASSERT_EQ(waits, 3);
    ASSERT_EQ(marks, 3);
    model_free(&m);
}

/* A forced flush (here the one at exit) hands out records of work still running, with times CUPTI
 * could not collect (0): none of them reaches the trace, which would start 55 years back. */
TEST(tracer_drops_records_without_times) {
    char record[512];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {record, "SYNCTOP_LISTEN=none", NULL};
    ASSERT_EQ(run_harness("context_create 1\n"
                          "kernel name=done start=2000000000 end=2000001000 corr=1\n"
                          "kernel name=still_running start=2000002000 end=2000003000 corr=2 running=1\n",
                          env),
              0);
    model m;
    model_init(&m);
    model_from_file(&m, task_path("trace.trace"));
    ASSERT_EQ(m.ended, 1);
    ASSERT_EQ(count_kind(&m, TP_K_KERNEL), 1);
    ASSERT_NOT_NULL(find_kernel(&m, "done"));
    for (size_t i = 0; i < m.n; i++) {
        uint64_t t0 = 0, t1 = 0;
        tp_record_span(&m.recs[i], &t0, &t1);
        if (!TP_KIND_IS_META(m.recs[i].head.kind) && m.recs[i].head.kind != TP_K_CLOCK &&
            m.recs[i].head.kind != TP_K_DROPS)
            ASSERT_GT(t0, 0);
    }
    model_free(&m);
}

/* The store leaves out what a producer sent with a time of 0 (an older tracer did send them): a
 * trace's span is its events', not 55 years. */
TEST(tracer_store_ignores_events_without_times) {
    tp_enc *enc = tp_enc_new(NULL);
    ASSERT_NOT_NULL(enc);
    /* CUPTI's clock is CLOCK_REALTIME */
    tp_kernel good = {.kind = TP_K_KERNEL, .device = 0, .stream = 7, .start = 1700000000000000000ull,
                      .end = 1700000000000500000ull, .correlation = 1,
                      .name = tp_enc_intern_cstr(enc, "k")};
    tp_kernel zero = good, no_start = good;
    zero.start = zero.end = 0;
    zero.correlation = 2;
    no_start.start = 0;
    no_start.correlation = 3;
    ASSERT_OK(tp_enc_add(enc, &good));
    ASSERT_OK(tp_enc_add(enc, &zero));
    ASSERT_OK(tp_enc_add(enc, &no_start));
    tp_buf b = {0};
    ASSERT_OK(tp_enc_finish_flags(enc, TP_BF_END, &b));
    err_msg err = {{0}};
    tp_fwriter *w = tp_fwriter_open(task_path("t.trace"), TP_FW_OVERWRITE, &err);
    ASSERT_NOT_NULL(w);
    ASSERT_OK(tp_fwriter_append(w, b.data, b.len, &err));
    ASSERT_OK(tp_fwriter_close(&w, &err));
    tp_buf_free(&b);
    tp_enc_destroy(&enc);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' report --format json '%s' 2>&1", task_synctop(), task_path("t.trace"));
    char *out = NULL;
    ASSERT_EQ(shell(cmd, &out), 0);
    ASSERT_STR_CONTAINS(out, "\"t0\":1700000000000000000,");
    ASSERT_STR_CONTAINS(out, "\"span_ns\":500000");
    free(out);
}

/* A query loop is a wait only while it polls: one query that finds work pending, 50 ms of
 * launches, then one that finds it done is no 50 ms wait. A dense loop still is (step_script). */
TEST(tracer_query_loop_with_a_gap_is_not_a_wait) {
    char record[512];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {record, "SYNCTOP_LISTEN=none", NULL};
    ASSERT_EQ(run_harness("context_create 1\n"
                          "call domain=rt cbid=132 wait=2000 ret=600 corr=10 site=1\n"
                          "advance 50000000\n"
                          "call domain=rt cbid=132 wait=2000 ret=0 corr=11 site=1\n"
                          "x30@0 call domain=rt cbid=132 wait=2000 ret=600 corr=20 site=2\n"
                          "call domain=rt cbid=132 wait=2000 ret=0 corr=50 site=2\n"
                          "context_destroy 1\n",
                          env),
              0);
    model m;
    model_init(&m);
    model_from_file(&m, task_path("trace.trace"));
    for (size_t i = 0; i < m.n; i++) {
        const tp_record *r = &m.recs[i];
        if (r->head.kind == TP_K_API && r->api.cbid == 132 && r->api.correlation <= 11)
            TASK_FAIL_("a %" PRIu64 " ns wait made of two queries 50 ms apart",
                       r->api.end - r->api.start);
    }
    const tp_record *dense = find_api(&m, 132, 50);
    ASSERT_NOT_NULL(dense);
    ASSERT_EQ(dense->api.flags, TP_F_BLOCKING);
    ASSERT_EQ(dense->api.end - dense->api.start, 31 * 2000);
    model_free(&m);
}

/* CUPTI 13 records every query as a SYNCHRONIZATION: the tracer turns that off where CUPTI lets
 * it, so only the query that found the work done is one. */
TEST(tracer_asks_for_no_records_of_pending_queries) {
    char record[512];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {record, "SYNCTOP_LISTEN=none", NULL};
    ASSERT_EQ(run_harness("context_create 1\n"
                          "report\n"
                          "poll domain=rt cbid=132 count=20 step=1000 corr=100 site=1\n"
                          "context_destroy 1\n",
                          env),
              0);
    char *out = read_text(task_path("out.txt"));
    ASSERT_STR_CONTAINS(out, " all_sync=0\n");
    model m;
    model_init(&m);
    model_from_file(&m, task_path("trace.trace"));
    ASSERT_EQ(count_kind(&m, TP_K_SYNC), 1);
    ASSERT_EQ(m.recs[0].head.kind == TP_K_SYNC ? 0 : 1, 1);
    model_free(&m);
    free(out);
}

/* Once exit handlers have run, CUPTI's destructors may run at any time: the flush thread calls no
 * CUPTI function from then on (the stand-in says on stderr when one is called after its teardown,
 * which takes a while here so that a periodic flush would fall into it). */
TEST(tracer_leaves_cupti_alone_once_exit_began) {
    char record[512];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {record, "SYNCTOP_LISTEN=none", "SYNCTOP_STANDIN_TEARDOWN_MS=300", NULL};
    ASSERT_EQ(run_harness("context_create 1\n"
                          "x5@1000 kernel name=k start=2000000000 end=2000000500 corr=1\n"
                          "call domain=rt cbid=131 wait=500000 corr=9 site=1\n",
                          env),
              0);
    char *err = read_text(task_path("err.txt"));
    ASSERT_STR_EQ(err, "");
    model m;
    model_init(&m);
    model_from_file(&m, task_path("trace.trace"));
    ASSERT_EQ(m.ended, 1);
    ASSERT_EQ(count_kind(&m, TP_K_KERNEL), 5);
    model_free(&m);
    free(err);
}

/* Without SYNCTOP_CUPTI the tracer takes the libcupti the process has loaded (here the stand-in,
 * which the program loaded first), and says which when asked. */
TEST(tracer_uses_the_libcupti_the_process_loaded) {
    char record[512];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {record, "SYNCTOP_LISTEN=none", "SYNCTOP_CUPTI=", "SYNCTOP_VERBOSE=1", NULL};
    ASSERT_EQ(run_harness("context_create 1\n"
                          "call domain=rt cbid=131 wait=500000 corr=1 site=1\n"
                          "context_destroy 1\n",
                          env),
              0);
    char *err = read_text(task_path("err.txt"));
    char want[1024];
    snprintf(want, sizeof want, "synctop: CUPTI %u from %s (the copy the process had loaded)\n",
             (unsigned)CUPTI_API_VERSION, STANDIN_SO);
    ASSERT_STR_CONTAINS(err, want);
    model m;
    model_init(&m);
    model_from_file(&m, task_path("trace.trace"));
    ASSERT_NOT_NULL(find_api(&m, 131, 1));
    model_free(&m);
    free(err);
}

/* A PyTorch process whose torch was loaded but not yet its CUDA wheel's libcupti, and NVTX used
 * before CUDA: the tracer loads the wheel's libcupti (next to torch: `wheel`, relative to
 * site-packages, a copy of the stand-in playing as `setting` and `also` say), NVTX goes to it, and
 * so do the records: one CUPTI in the process. */
static void check_wheel_next_to_torch(const char *wheel, const char *setting, const char *also,
                                      unsigned version) {
    char site[512], torch[700], cupti[900], cmd[4096];
    snprintf(site, sizeof site, "%s", task_path("venv/lib/python3/site-packages"));
    snprintf(torch, sizeof torch, "%s/torch/lib/libtorch_cuda.so", site);
    snprintf(cupti, sizeof cupti, "%s/%s", site, wheel);
    char *out = NULL;
    /* any shared object does as torch; the stand-in as the wheel's libcupti */
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/torch/lib' \"$(dirname '%s')\" && cp '%s' '%s' && cp '%s' '%s'",
             site, cupti, TRACER_SO, torch, STANDIN_SO, cupti);
    ASSERT_EQ(shell(cmd, &out), 0);
    free(out);
    char record[512], preload[800], standin[1000];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    snprintf(preload, sizeof preload, "HARNESS_PRELOAD=%s", torch);
    snprintf(standin, sizeof standin, "SYNCTOP_STANDIN=%s", cupti);
    const char *env[] = {record, "SYNCTOP_LISTEN=none", "SYNCTOP_CUPTI=", "SYNCTOP_VERBOSE=1",
                         preload, standin, "HARNESS_LATE_STANDIN=1", setting, also, NULL};
    ASSERT_EQ(run_harness("context_create 1\n"
                          "marker flags=1 ts=2000000000 id=1 name=from_nvtx\n"
                          "call domain=rt cbid=131 wait=500000 corr=1 site=1\n"
                          "context_destroy 1\n",
                          env),
              0);
    char *err = read_text(task_path("err.txt"));
    char want[1200];
    snprintf(want, sizeof want, "synctop: CUPTI %u from %s (the CUDA wheel next to torch)\n", version, cupti);
    ASSERT_STR_CONTAINS(err, want);
    char *hout = read_text(task_path("out.txt"));
    ASSERT(strstr(hout, "no NVTX injection") == NULL);
    model m;
    model_init(&m);
    model_from_file(&m, task_path("trace.trace"));
    ASSERT_NOT_NULL(find_api(&m, 131, 1));
    ASSERT_NOT_NULL(find_nvtx(&m, "from_nvtx", 0));
    model_free(&m);
    free(err);
    free(hout);
}

TEST(tracer_uses_the_cuda_wheel_next_to_torch) {
    check_wheel_next_to_torch("nvidia/cu13/lib/libcupti.so.13", NULL, NULL, (unsigned)CUPTI_API_VERSION);
}

/* A CUDA 12 torch (cu126, cu128 wheels): its nvidia-cuda-cupti-cu12 wheel's libcupti.so.12, a
 * CUPTI 12 numbered the old way (24: CUDA 12.6), is taken and read. */
TEST(tracer_uses_the_cuda_12_wheel_next_to_torch) {
    check_wheel_next_to_torch("nvidia/cuda_cupti/lib/libcupti.so.12", "SYNCTOP_STANDIN_CUPTI=12", NULL, 24);
}

/* CUPTI 12.0 and 12.1 number themselves 18, as CUDA 11.8's does, though their headers say 19 (the
 * libraries of the nvidia-cuda-cupti-cu12 12.0.146 and 12.1.105 wheels, a cu121 torch's): taken,
 * their records' sizes telling them from 11.8's. */
TEST(tracer_uses_the_cuda_12_1_wheel_whose_cupti_says_18) {
    check_wheel_next_to_torch("nvidia/cuda_cupti/lib/libcupti.so.12", "SYNCTOP_STANDIN_CUPTI=12",
                              "SYNCTOP_STANDIN_VERSION=18", 18);
}

/* NVTX used before CUDA starts on a machine without a CUDA driver (a CPU-only machine with a CUDA
 * 13.2 torch, the program under `synctop run`): the tracer loads no CUPTI for it, since CUPTI 13.2
 * loads the driver at its first call and dies where there is none (the stand-in playing 13.2
 * aborts there). The program runs to its end, NVTX a no-op. With the driver installed, the same
 * NVTX start loads CUPTI and hands NVTX to it. */
TEST(nvtx_before_cuda_without_a_driver_loads_no_cupti) {
    if (dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) != NULL)
        TASK_SKIP("a CUDA driver is installed here: a machine without one cannot be played");
    const char *script = "marker flags=1 ts=2000000000 id=1 name=before_cuda\n";
    harness_lib = ""; /* no CUDA start: there is no driver to start it */
    const char *bare[] = {"LD_LIBRARY_PATH=", "SYNCTOP_STANDIN_CUPTI=13.2", "SYNCTOP_VERBOSE=1",
                          "SYNCTOP_LISTEN=none", NULL};
    int rc = run_harness(script, bare);
    char *out = read_text(task_path("out.txt")), *err = read_text(task_path("err.txt"));
    ASSERT_EQ(rc, 0);
    ASSERT_STR_CONTAINS(out, "harness: no NVTX injection in ");
    ASSERT_STR_CONTAINS(out, "harness: program done\n");
    ASSERT_STR_CONTAINS(err, "synctop: NVTX started before CUDA, and no CUDA driver (libcuda.so.1) "
                             "can be loaded: no CUPTI loaded, NVTX ranges not recorded\n");
    ASSERT(strstr(err, "synctop: CUPTI ") == NULL);
    free(out);
    free(err);
    const char *installed[] = {"SYNCTOP_STANDIN_CUPTI=13.2", "SYNCTOP_VERBOSE=1", "SYNCTOP_LISTEN=none", NULL};
    rc = run_harness(script, installed);
    harness_lib = TRACER_SO;
    out = read_text(task_path("out.txt"));
    err = read_text(task_path("err.txt"));
    ASSERT_EQ(rc, 0);
    ASSERT(strstr(out, "no NVTX injection") == NULL);
    ASSERT_STR_CONTAINS(err, "synctop: CUPTI 130200 from ");
    free(out);
    free(err);
}

/* The launches of corr=1 (5 us) and corr=2 (5 ms) that the scripts below play: both launches,
 * the long one blocked its thread (a full launch queue). */
static void check_two_launches(const model *m) {
    const tp_record *quick = find_api(m, 211, 1), *slow = find_api(m, 211, 2);
    ASSERT_NOT_NULL(quick);
    ASSERT_NOT_NULL(slow);
    ASSERT_EQ(quick->api.flags, TP_F_LAUNCH);
    ASSERT_EQ(slow->api.flags, TP_F_LAUNCH | TP_F_BLOCKING);
}

/* CUPTI 12.0 to 12.4 have no per-API records (cuptiActivityEnableRuntimeApi came in 12.5): the
 * tracer turns the whole RUNTIME and DRIVER kinds on while collecting and keeps the launches'
 * records of them, as CUPTI 12.5 on would give it; the records of calls the callbacks measure are
 * twins, and those of calls it does not trace (cudaGetDevice) are left out, each counted. The
 * stand-in built as CUPTI 12.4 lacks those functions, and writes 12.4's CONTEXT record (Context2). */
TEST(tracer_takes_launches_from_the_whole_api_kinds_of_cupti_12_4) {
    char record[512], standin[600], cupti[600];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    snprintf(standin, sizeof standin, "SYNCTOP_STANDIN=%s", STANDIN_12_4_SO);
    snprintf(cupti, sizeof cupti, "SYNCTOP_CUPTI=%s", STANDIN_12_4_SO);
    const char *env[] = {record, "SYNCTOP_LISTEN=none", "SYNCTOP_VERBOSE=1", standin, cupti, NULL};
    ASSERT_EQ(run_harness("context_create 1\n"
                          "context id=4 device=2 nullstream=9\n"
                          "api domain=rt cbid=211 start=2000000000 end=2000005000 corr=1\n"
                          "api domain=rt cbid=211 start=2000010000 end=2005010000 corr=2\n"
                          "api domain=rt cbid=17 start=2006000000 end=2006001000 corr=3\n"
                          "kernel name=k124 start=2007000000 end=2007001000 dev=2 ctx=4 stream=9 corr=1\n"
                          "call domain=rt cbid=131 wait=500000 ctx=4 corr=5 site=1\n"
                          "context_destroy 1\n",
                          env),
              0);
    char *err = read_text(task_path("err.txt"));
    ASSERT_STR_CONTAINS(err, "synctop: CUPTI 22 from ");
    ASSERT_STR_CONTAINS(err, " 1 twins of calls the callbacks measured, 1 of calls it does not trace, ");
    model m;
    model_init(&m);
    model_from_file(&m, task_path("trace.trace"));
    check_two_launches(&m);
    ASSERT_EQ(count_api(&m, 17), 0);
    ASSERT_EQ(count_api(&m, 131), 1);
    const tp_record *wait = find_api(&m, 131, 5);
    ASSERT_NOT_NULL(wait);
    ASSERT_EQ(wait->api.flags, TP_F_BLOCKING);
    ASSERT_EQ(wait->api.end - wait->api.start, 500000);
    ASSERT_NE(wait->api.callsite, 0);
    ASSERT_EQ(wait->api.device, 2); /* its context's, from 12.4's CONTEXT record */
    ASSERT_EQ(count_kind(&m, TP_K_KERNEL), 1);
    model_free(&m);
    free(err);
}

/* A CUDA 12 program on a machine whose toolkit is CUDA 13 (its libcudart.so.12 loaded, no
 * libcupti yet, no torch): the search takes CUPTI 12 before the toolkit's CUPTI 13. Here
 * libcupti.so.12 is the stand-in playing CUPTI 12, found on LD_LIBRARY_PATH; a search in the
 * usual order would try the toolkit's libcupti.so.13 first. */
TEST(tracer_takes_cupti_12_for_a_cuda_12_runtime) {
    char dir[512], cudart[700], cupti[700], cmd[2048];
    snprintf(dir, sizeof dir, "%s", task_path("lib"));
    snprintf(cudart, sizeof cudart, "%s/libcudart.so.12", dir);
    snprintf(cupti, sizeof cupti, "%s/libcupti.so.12", dir);
    char *out = NULL;
    /* any shared object does as the CUDA runtime */
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s' '%s' && cp '%s' '%s'", dir, TRACER_SO, cudart,
             STANDIN_SO, cupti);
    ASSERT_EQ(shell(cmd, &out), 0);
    free(out);
    char record[512], preload[800], standin[800], path[800];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    snprintf(preload, sizeof preload, "HARNESS_PRELOAD=%s", cudart);
    snprintf(standin, sizeof standin, "SYNCTOP_STANDIN=%s", cupti);
    snprintf(path, sizeof path, "LD_LIBRARY_PATH=%s:%s", dir, INSTALLED_DRIVER_DIR);
    const char *env[] = {record, "SYNCTOP_LISTEN=none", "SYNCTOP_CUPTI=", "SYNCTOP_VERBOSE=1", preload,
                         standin, "HARNESS_LATE_STANDIN=1", "SYNCTOP_STANDIN_CUPTI=12", path, NULL};
    ASSERT_EQ(run_harness("context_create 1\n"
                          "kernel name=k12 start=2000000000 end=2000001000 corr=1\n"
                          "call domain=rt cbid=131 wait=500000 corr=2 site=1\n"
                          "context_destroy 1\n",
                          env),
              0);
    char *err = read_text(task_path("err.txt"));
    ASSERT_STR_CONTAINS(err, "synctop: CUPTI 24 from ");
    ASSERT_STR_CONTAINS(err, "/libcupti.so.12 (found on the library path or in the CUDA toolkit)\n");
    model m;
    model_init(&m);
    model_from_file(&m, task_path("trace.trace"));
    ASSERT_EQ(count_kind(&m, TP_K_KERNEL), 1);
    ASSERT_NOT_NULL(find_api(&m, 131, 2));
    model_free(&m);
    free(err);
}

/* torch.profiler inside a traced run registers its own buffer callbacks (the tracer's records go
 * to it) and turns its kinds off when it stops. The tracer notices the silence, says so in the
 * trace, and takes CUPTI back once the profiler has collected its records. */
TEST(tracer_outlives_another_cupti_client) {
    char record[512], script[4096];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {record, "SYNCTOP_LISTEN=none", NULL};
    snprintf(script, sizeof script,
             "context_create 1\n"
             "x3@1000 kernel name=before start=2000000000 end=2000000500 corr=1\n"
             "flush\n"
             "wait_flush\n"
             "profiler_start\n"
             "x300@1000 api domain=rt cbid=211 start=2100000000 end=2100000500 corr=1000\n"
             "x300@1000 kernel name=during start=2100000000 end=2100000500 corr=1000\n"
             "x1500@0 call domain=rt cbid=131 wait=1000 corr=10000 site=1\n"
             "flush\n"
             "wait_flush %d\n"
             "profiler_stop\n"
             "wait_kind %d 1\n"
             "x3@1000 kernel name=after start=2200000000 end=2200000500 corr=20000\n"
             "context_destroy 1\n",
             30, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
    ASSERT_EQ(run_harness(script, env), 0);
    char *out = read_text(task_path("out.txt"));
    ASSERT(strstr(out, "other_records=0 ") == NULL); /* the profiler had its records */
    model m;
    model_init(&m);
    model_from_file(&m, task_path("trace.trace"));
    size_t before = 0, during = 0, after = 0;
    for (size_t i = 0; i < m.n; i++)
        if (m.recs[i].head.kind == TP_K_KERNEL) {
            const char *k = str(&m, m.recs[i].kernel.name);
            before += strcmp(k, "before") == 0;
            during += strcmp(k, "during") == 0;
            after += strcmp(k, "after") == 0;
        }
    ASSERT_EQ(before, 3);
    ASSERT_EQ(during, 0);
    ASSERT_EQ(after, 3);
    const tp_record *gone = find_nvtx(&m, "synctop: no GPU activity reaches synctop", 0);
    const tp_record *back = find_nvtx(&m, "synctop: GPU activity recorded again", 0);
    ASSERT_NOT_NULL(gone);
    ASSERT_NOT_NULL(back);
    ASSERT_EQ(gone->nvtx.flags, TP_NVTX_INSTANT);
    ASSERT_STR_EQ(str(&m, gone->nvtx.domain), "synctop");
    ASSERT_LE(gone->nvtx.start, back->nvtx.start);
    ASSERT_GE(last_drops(&m, TP_DROP_CUPTI, 1, NULL), 1);
    model_free(&m);
    free(out);
    /* and the report says it */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' report '%s' 2>&1", task_synctop(), task_path("trace.trace"));
    ASSERT_EQ(shell(cmd, &out), 0);
    ASSERT_STR_CONTAINS(out, "note at +");
    ASSERT_STR_CONTAINS(out, "no GPU activity reaches synctop");
    ASSERT_STR_CONTAINS(out, "GPU activity recorded again");
    free(out);
}

/* Each time the profiler takes over, the buffer CUPTI was filling for the tracer goes to it. With
 * two buffers in all, the tracer must write those off rather than wait for them, or after two
 * sessions it has none left. */
TEST(tracer_buffers_survive_repeated_takeovers) {
    char record[512], script[4096];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {record, "SYNCTOP_LISTEN=none", "SYNCTOP_MAX_BUFFERS=2", NULL};
    snprintf(script, sizeof script,
             "context_create 1\n"
             "repeat 3\n"
             "kernel name=lost start=2000000000 end=2000000500 corr=1\n"
             "profiler_start\n"
             "kernel name=during start=2000001000 end=2000001500 corr=2\n"
             "profiler_stop\n"
             "wait_kind %d 1\n"
             "end\n"
             "x3@1000 kernel name=final start=2100000000 end=2100000500 corr=3\n"
             "context_destroy 1\n",
             CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
    ASSERT_EQ(run_harness(script, env), 0);
    model m;
    model_init(&m);
    model_from_file(&m, task_path("trace.trace"));
    size_t final = 0;
    for (size_t i = 0; i < m.n; i++)
        final += m.recs[i].head.kind == TP_K_KERNEL &&
                 strcmp(str(&m, m.recs[i].kernel.name), "final") == 0;
    ASSERT_EQ(final, 3);
    ASSERT_NOT_NULL(find_nvtx(&m, "synctop: another CUPTI client", 2));
    model_free(&m);
}

/* A wait and a GPU sync made before their context's CONTEXT record has come still have a device:
 * the context's creation told it. */
TEST(tracer_knows_a_contexts_device_from_its_creation) {
    char record[512];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {record, "SYNCTOP_LISTEN=none", NULL};
    ASSERT_EQ(run_harness("context_create 1 device=2\n"
                          "sync type=3 start=2000000000 end=2000300000 ctx=1 stream=13 corr=5\n"
                          "call domain=rt cbid=131 wait=500000 ctx=1 corr=6 site=1\n"
                          "flush\n"
                          "wait_flush\n"
                          "context id=1 device=2 nullstream=7\n"
                          "context_destroy 1\n",
                          env),
              0);
    model m;
    model_init(&m);
    model_from_file(&m, task_path("trace.trace"));
    const tp_record *sync = NULL;
    for (size_t i = 0; i < m.n; i++)
        if (m.recs[i].head.kind == TP_K_SYNC)
            sync = &m.recs[i];
    ASSERT_NOT_NULL(sync);
    ASSERT_EQ(sync->sync.device, 2);
    const tp_record *a = find_api(&m, 131, 6);
    ASSERT_NOT_NULL(a);
    ASSERT_EQ(a->api.device, 2);
    model_free(&m);
}

/* A launch that waits (a full launch queue) is a blocking span too, with no call site (launches
 * have no callbacks); a quick one is not. */
TEST(tracer_flags_a_launch_that_waited) {
    char record[512];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {record, "SYNCTOP_LISTEN=none", NULL};
    ASSERT_EQ(run_harness("context_create 1\n"
                          "api domain=rt cbid=211 start=2000000000 end=2000005000 corr=1\n"
                          "api domain=rt cbid=211 start=2000010000 end=2005010000 corr=2\n"
                          "context_destroy 1\n",
                          env),
              0);
    model m;
    model_init(&m);
    model_from_file(&m, task_path("trace.trace"));
    check_two_launches(&m);
    model_free(&m);
}

/* What the stand-in says CUPTI was asked for (kinds, callbacks, API records), from the harness's
 * report line; the test's directory holds out.txt and err.txt. */
static void cupti_asked(char *out, size_t len) {
    char *text = read_text(task_path("err.txt"));
    const char *r = strstr(text, "standin: report ");
    if (r == NULL) {
        free(text);
        text = read_text(task_path("out.txt"));
        r = strstr(text, "standin: report ");
    }
    if (r == NULL)
        TASK_FAIL_("no report line from the stand-in");
    const char *end = strstr(r, " forced=");
    ASSERT_NOT_NULL(end);
    snprintf(out, len, "%.*s", (int)(end - r), r);
    free(text);
}

/* bench/gpu/overhead.sh measures the tracer against CUPTI's own cost: an injection that asks CUPTI
 * for the same things and does nothing with them. The same things, here. */
TEST(tracer_cupti_floor_asks_what_the_tracer_asks) {
    const char *script = "context_create 1\n"
                         "device id=0 name=FloorGPU\n"
                         "x100@1000 kernel name=k start=2000000000 end=2000000500 dev=0 ctx=1 stream=7 corr=1\n"
                         "call domain=rt cbid=131 wait=50000 corr=5000\n"
                         "context_destroy 1\n"
                         "report\n";
    const char *env[] = {"SYNCTOP_LISTEN=none", NULL};
    char tracer[512], floor_[512];
    ASSERT_EQ(run_harness(script, env), 0);
    cupti_asked(tracer, sizeof tracer);
    harness_lib = CUPTI_FLOOR_SO;
    int rc = run_harness(script, env);
    harness_lib = TRACER_SO;
    ASSERT_EQ(rc, 0);
    cupti_asked(floor_, sizeof floor_);
    ASSERT_STR_CONTAINS(tracer, "callbacks=");
    ASSERT_STR_EQ(floor_, tracer);
}

/* PyTorch's first .item(): the caching host allocator pins a staging buffer (cudaHostAlloc, 0.8 ms
 * here) before the copy and the wait that .item() is. The pinning is recorded with its duration
 * but is not a wait for the GPU: the line has one blocking call, as it has at every later step. */
TEST(tracer_host_allocation_is_not_a_wait) {
    char record[512];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {record, "SYNCTOP_LISTEN=none", NULL};
    char script[1024];
    snprintf(script, sizeof script,
             "context_create 1\n"
             "call domain=rt cbid=%d wait=800000 corr=1 site=1\n"
             "call domain=rt cbid=%d wait=300000 corr=2 site=1\n"
             "call domain=drv cbid=%d wait=900000 corr=3 site=1\n"
             "call domain=rt cbid=%d wait=400000 corr=4 site=1\n"
             "context_destroy 1\n",
             CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
             CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2, CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020);
    ASSERT_EQ(run_harness(script, env), 0);
    model m;
    model_init(&m);
    model_from_file(&m, task_path("trace.trace"));
    const tp_record *pin = find_api(&m, CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020, 1);
    const tp_record *wait = find_api(&m, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, 2);
    const tp_record *reg = find_api(&m, CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2, 3);
    const tp_record *freed = find_api(&m, CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020, 4);
    ASSERT_NOT_NULL(pin);
    ASSERT_NOT_NULL(wait);
    ASSERT_NOT_NULL(reg);
    ASSERT_NOT_NULL(freed);
    ASSERT_EQ(pin->api.end - pin->api.start, 800000);
    ASSERT_EQ(pin->api.flags & TP_F_BLOCKING, 0);
    ASSERT_EQ(pin->api.callsite, 0);
    ASSERT_EQ(reg->api.end - reg->api.start, 900000);
    ASSERT_EQ(reg->api.flags & TP_F_BLOCKING, 0);
    ASSERT_EQ(wait->api.flags & TP_F_BLOCKING, TP_F_BLOCKING);
    ASSERT_NE(wait->api.callsite, 0);
    ASSERT_EQ(freed->api.flags & TP_F_BLOCKING, TP_F_BLOCKING); /* cudaFreeHost synchronizes */
    model_free(&m);
}

/* When backtrace() cannot unwind out of the driver (code without unwind information), the call
 * site is still the program's: found by scanning the stack. */
TEST(tracer_names_the_call_site_when_unwinding_stops_in_the_driver) {
    char record[512];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {record, "SYNCTOP_LISTEN=none", NULL};
    ASSERT_EQ(run_harness("context_create 1\n"
                          "unwind off\n"
                          "call domain=rt cbid=131 wait=500000 corr=1 site=1\n"
                          "call domain=rt cbid=131 wait=500000 corr=2 site=2\n"
                          "context_destroy 1\n",
                          env),
              0);
    model m;
    model_init(&m);
    model_from_file(&m, task_path("trace.trace"));
    const char *expect[2] = {"harness_site_1", "harness_site_2"};
    for (uint32_t corr = 1; corr <= 2; corr++) {
        const tp_record *a = find_api(&m, 131, corr);
        ASSERT_NOT_NULL(a);
        ASSERT_NE(a->api.callsite, 0);
        const tp_record *f = find_callsite_frame(&m, a->api.callsite, 0);
        ASSERT_NOT_NULL(f);
        if (strcmp(str(&m, f->frame.func), expect[corr - 1]) != 0)
            for (unsigned j = 0; (f = find_callsite_frame(&m, a->api.callsite, j)) != NULL; j++)
                fprintf(stderr, "frame %u: %s %s+%#" PRIx64 "\n", j, str(&m, f->frame.module),
                        str(&m, f->frame.func), f->frame.pc);
        f = find_callsite_frame(&m, a->api.callsite, 0);
        ASSERT_STR_EQ(str(&m, f->frame.func), expect[corr - 1]);
        ASSERT_STR_CONTAINS(str(&m, f->frame.module), "tracer_harness");
    }
    model_free(&m);
}

/* Processes of one job that inherit SYNCTOP_RECORD (torchrun's ranks, a launcher's children) each
 * record to a file of their own; none truncates another's, running or ended. %p is the pid. */
TEST(tracer_each_process_records_to_its_own_file) {
    char record[512], go[512], script[2048];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("job.trace"));
    snprintf(go, sizeof go, "%s", task_path("go"));
    /* rank 0 holds its file while rank 1 starts */
    snprintf(script, sizeof script,
             "context_create 1\n"
             "call domain=rt cbid=131 wait=500000 corr=100 site=1\n"
             "wait_file %s\n"
             "context_destroy 1\n",
             go);
    const char *env0[] = {record, "SYNCTOP_LISTEN=none", "RANK=0", NULL};
    pid_t first = start_harness(script, env0);
    const char *env1[] = {record, "SYNCTOP_LISTEN=none", "RANK=1", NULL};
    /* the first must have claimed its file: wait until it holds its lock */
    wait_for_flock(task_path("job.trace"), first);
    ASSERT_EQ(run_harness("context_create 1\n"
                          "call domain=rt cbid=131 wait=500000 corr=101 site=1\n"
                          "context_destroy 1\n",
                          env1),
              0);
    char *err1 = read_text(task_path("err.txt"));
    ASSERT_STR_CONTAINS(err1, "job.rank1.trace (");
    write_text(go, "");
    ASSERT_EQ(wait_harness(first), 0);
    /* a third process of the job, after both ended: neither file is its */
    const char *env2[] = {record, "SYNCTOP_LISTEN=none", NULL};
    ASSERT_EQ(run_harness("context_create 1\n"
                          "call domain=rt cbid=131 wait=500000 corr=102 site=1\n"
                          "context_destroy 1\n",
                          env2),
              0);
    char *err2 = read_text(task_path("err.txt"));
    char mine[600];
    snprintf(mine, sizeof mine, "%s", task_path("job.pid"));
    ASSERT_STR_CONTAINS(err2, mine);
    const char *paths[2] = {"job.trace", "job.rank1.trace"};
    for (int i = 0; i < 2; i++) {
        model m;
        model_init(&m);
        model_from_file(&m, task_path(paths[i]));
        ASSERT_EQ(count_api(&m, 131), 1);
        ASSERT_NOT_NULL(find_api(&m, 131, 100 + (uint32_t)i));
        model_free(&m);
    }
    /* %p: the process's own name */
    char pattern[600];
    snprintf(pattern, sizeof pattern, "SYNCTOP_RECORD=%s", task_path("own-%p.trace"));
    const char *env3[] = {pattern, "SYNCTOP_LISTEN=none", NULL};
    pid_t own = start_harness("context_create 1\ncall domain=rt cbid=131 wait=500000 corr=103 site=1\n"
                              "context_destroy 1\n",
                              env3);
    ASSERT_EQ(wait_harness(own), 0);
    char own_name[64];
    snprintf(own_name, sizeof own_name, "own-%d.trace", (int)own);
    model m;
    model_init(&m);
    model_from_file(&m, task_path(own_name));
    ASSERT_NOT_NULL(find_api(&m, 131, 103));
    model_free(&m);
    free(err1);
    free(err2);
}

/* A file left by an earlier job (older than this process's parent) is replaced, as asked. */
TEST(tracer_replaces_an_earlier_jobs_recording) {
    char record[512];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("old.trace"));
    write_text(task_path("old.trace"), "an earlier recording");
    struct timespec old[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
    ASSERT_OK(utimensat(AT_FDCWD, task_path("old.trace"), old, 0));
    const char *env[] = {record, "SYNCTOP_LISTEN=none", NULL};
    ASSERT_EQ(run_harness("context_create 1\ncall domain=rt cbid=131 wait=500000 corr=1 site=1\n"
                          "context_destroy 1\n",
                          env),
              0);
    char *err = read_text(task_path("err.txt"));
    ASSERT_STR_EQ(err, "");
    model m;
    model_init(&m);
    model_from_file(&m, task_path("old.trace"));
    ASSERT_NOT_NULL(find_api(&m, 131, 1));
    model_free(&m);
    free(err);
}

/* A call that entered before collecting began (on demand: before the viewer came) and returned
 * after has no start the tracer took: it is not measured (CUPTI's correlationData slot holds
 * whatever it held, not 0). */
TEST(tracer_does_not_measure_a_call_it_did_not_see_begin) {
    char listen[512], ready[512], script[2048];
    snprintf(listen, sizeof listen, "SYNCTOP_LISTEN=ipc://%s", task_path("pub.sock"));
    snprintf(ready, sizeof ready, "%s", task_path("ready"));
    const char *env[] = {listen, "SYNCTOP_MODE=on-demand", NULL};
    snprintf(script, sizeof script,
             "context_create 1\n"
             "touch %s\n"
             "call domain=rt cbid=131 wait=500000 corr=77 site=1 hold_kind=%d\n"
             "call domain=rt cbid=131 wait=500000 corr=78 site=1\n"
             "flush\n"
             "wait_flush\n"
             "context_destroy 1\n",
             ready, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
    pid_t pid = start_harness(script, env);
    wait_for_file(ready, pid);
    tp_sub *sub = connect_sub(listen + strlen("SYNCTOP_LISTEN="), 0);
    model live;
    model_init(&live);
    drain_sub(sub, &live, 20000);
    ASSERT_EQ(wait_harness(pid), 0);
    ASSERT_NOT_NULL(find_api(&live, 131, 78));
    ASSERT_NULL(find_api(&live, 131, 77));
    model_free(&live);
    tp_sub_destroy(&sub);
}

/* ---- the stand-in as the real CUPTI behaves ---- */

/* Plays the script recording to trace.trace, not publishing, with up to two more settings (NULL:
 * none; the second only after the first), and loads the recording into m (model_free it). */
static void record_script(const char *script, const char *setting, const char *more, model *m) {
    char record[512];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {record, "SYNCTOP_LISTEN=none", setting, more, NULL};
    ASSERT_EQ(run_harness(script, env), 0);
    model_init(m);
    model_from_file(m, task_path("trace.trace"));
}

/* The index of the kernel record of that name, or -1. */
static long kernel_index(const model *m, const char *name) {
    for (size_t i = 0; i < m->n; i++)
        if (m->recs[i].head.kind == TP_K_KERNEL && strcmp(str(m, m->recs[i].kernel.name), name) == 0)
            return (long)i;
    return -1;
}

/* CUPTI's worker thread hands over the records of device work when it has collected them, from a
 * thread of its own, after the synchronize that waited for that work has returned and been
 * shipped: the kernel still comes out, in a later batch, with its launch's correlation id. */
TEST(tracer_takes_records_cuptis_worker_hands_over_after_the_wait) {
    model m;
    record_script("context_create 1\n"
                  "worker on\n"
                  "api domain=rt cbid=211 start=2000000000 end=2000001000 corr=5\n"
                  "kernel name=late start=2000002000 end=2000900000 dev=0 ctx=1 stream=13 corr=5\n"
                  "call domain=rt cbid=131 wait=900000 corr=6 site=1\n"
                  "flush\n"
                  "wait_flush\n"
                  "collect\n"
                  "flush\n"
                  "wait_flush\n"
                  "context_destroy 1\n",
                  NULL, NULL, &m);
    char *out = read_text(task_path("out.txt"));
    ASSERT_STR_CONTAINS(out, " worker_buffers=1\n"); /* one buffer, from the worker's thread */
    ASSERT_EQ(m.ended, 1);
    long k = kernel_index(&m, "late");
    ASSERT_GE(k, 0);
    ASSERT_EQ(m.recs[k].kernel.correlation, 5);
    ASSERT_EQ(m.recs[k].kernel.end - m.recs[k].kernel.start, 898000);
    const tp_record *launch = find_api(&m, 211, 5), *wait = find_api(&m, 131, 6);
    ASSERT_NOT_NULL(launch);
    ASSERT_NOT_NULL(wait);
    ASSERT_EQ(wait->api.flags, TP_F_BLOCKING);
    /* the wait was shipped before the kernel's record came */
    ASSERT_LT(m.rec_seq[wait - m.recs], m.rec_seq[k]);
    ASSERT_EQ(count_kind(&m, TP_K_KERNEL), 1);
    model_free(&m);
    free(out);
}

/* Another client's RUNTIME and DRIVER kinds make an activity record of every call, those the
 * callbacks measure included (the same correlation id): each call is one event, the callbacks'
 * (with its wait and call site), and the twins are counted as left out. */
TEST(tracer_counts_a_call_once_when_an_activity_record_twins_it) {
    char script[2048];
    snprintf(script, sizeof script,
             "context_create 1\n"
             "other_enable %d\n"
             "other_enable %d\n"
             "call domain=rt cbid=%d wait=500000 corr=7 site=1 inner=%d\n"
             "call domain=drv cbid=%d wait=300000 corr=8 site=2\n"
             "context_destroy 1\n",
             CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
             CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
             CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize);
    model m;
    record_script(script, "SYNCTOP_VERBOSE=1", NULL, &m);
    char *err = read_text(task_path("err.txt"));
    /* the runtime call's, its nested driver call's, and the driver call's */
    ASSERT_STR_CONTAINS(err, " 3 twins of calls the callbacks measured");
    ASSERT_EQ(count_kind(&m, TP_K_API), 2);
    const tp_record *rt = find_api(&m, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, 7);
    const tp_record *drv = find_api(&m, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, 8);
    ASSERT_NOT_NULL(rt);
    ASSERT_NOT_NULL(drv);
    ASSERT_EQ(rt->api.flags, TP_F_BLOCKING);
    ASSERT_EQ(drv->api.flags, TP_F_BLOCKING | TP_F_DRIVER);
    ASSERT_EQ(rt->api.end - rt->api.start, 500000);
    ASSERT_EQ(drv->api.end - drv->api.start, 300000);
    ASSERT_NE(rt->api.callsite, 0);
    ASSERT_NE(drv->api.callsite, 0);
    model_free(&m);
    free(err);
}

/* Records of kinds the tracer never asked for, enabled by another client (Kineto enables
 * EXTERNAL_CORRELATION and OVERHEAD) or known only to a newer CUPTI, lie between the tracer's own:
 * CUPTI steps over them by their size, the tracer counts them as left out, and nothing after them
 * is lost. */
TEST(tracer_steps_over_record_kinds_it_does_not_read) {
    char script[4096];
    /* the stand-in's kind of a newer CUPTI (NEWER_KIND in standin.c) */
    int newer = CUPTI_ACTIVITY_KIND_COUNT + 8;
    snprintf(script, sizeof script,
             "context_create 1\n"
             "other_enable %d\n"
             "other_enable %d\n"
             "other_enable %d\n"
             "kernel name=k1 start=2000000000 end=2000001000 corr=1\n"
             "other kind=%d id=42 corr=2\n"
             "kernel name=k2 start=2000002000 end=2000003000 corr=2\n"
             "other kind=%d start=2000003000 end=2000004000 corr=3\n"
             "other kind=%d corr=3\n"
             "kernel name=k3 start=2000004000 end=2000005000 corr=3\n"
             "context_destroy 1\n",
             CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_OVERHEAD, newer,
             CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_OVERHEAD, newer);
    model m;
    record_script(script, "SYNCTOP_VERBOSE=1", NULL, &m);
    char *err = read_text(task_path("err.txt"));
    ASSERT_STR_CONTAINS(err, "left out: 3 of kinds synctop does not read");
    ASSERT_EQ(count_kind(&m, TP_K_KERNEL), 3);
    ASSERT_GE(kernel_index(&m, "k1"), 0);
    ASSERT_GE(kernel_index(&m, "k2"), 0);
    ASSERT_GE(kernel_index(&m, "k3"), 0);
    ASSERT_EQ(last_drops(&m, TP_DROP_CUPTI, 1, NULL), 0);
    model_free(&m);
    free(err);
}

/* A record CUPTI itself cannot step over (a kind it does not know) ends the walk of its buffer:
 * what came before it is kept, the rest of the buffer is lost, and the loss is counted (a lost
 * batch in CUPTI's drops), not silent. */
TEST(tracer_counts_a_buffer_cupti_cannot_walk_to_its_end) {
    model m;
    record_script("context_create 1\n"
                  "kernel name=before start=2000000000 end=2000001000 corr=1\n"
                  "junk\n"
                  "kernel name=after start=2000002000 end=2000003000 corr=2\n"
                  "context_destroy 1\n",
                  NULL, NULL, &m);
    ASSERT_GE(kernel_index(&m, "before"), 0);
    ASSERT_EQ(kernel_index(&m, "after"), -1);
    ASSERT_EQ(last_drops(&m, TP_DROP_CUPTI, 1, NULL), 1);
    model_free(&m);
}

/* A profiler that asks for callbacks while the tracer is subscribed is refused
 * (MULTIPLE_SUBSCRIBERS on CUDA 13.2 and older) and goes on without them, as Kineto does: the
 * tracer's callbacks are still the ones called, before, during and after the profiler's session. */
TEST(tracer_keeps_its_callbacks_when_a_profiler_subscribes_second) {
    char script[2048];
    snprintf(script, sizeof script,
             "context_create 1\n"
             "call domain=rt cbid=131 wait=500000 corr=1 site=1\n"
             "profiler_start subscribe\n"
             "call domain=rt cbid=131 wait=600000 corr=2 site=2\n"
             "profiler_stop\n"
             "wait_kind %d 1\n"
             "call domain=rt cbid=131 wait=700000 corr=3 site=3\n"
             "context_destroy 1\n",
             CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
    model m;
    record_script(script, NULL, NULL, &m);
    char *out = read_text(task_path("out.txt"));
    char want[64];
    snprintf(want, sizeof want, " other_subscribe=%d ", CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    ASSERT_STR_CONTAINS(out, want);
    ASSERT_NULL(strstr(out, "other_records=0 ")); /* the profiler had its records (the twin) */
    for (uint32_t corr = 1; corr <= 3; corr++) {
        const tp_record *a = find_api(&m, 131, corr);
        ASSERT_NOT_NULL(a);
        ASSERT_EQ(a->api.flags, TP_F_BLOCKING);
        ASSERT_EQ(a->api.end - a->api.start, 400000 + 100000 * corr);
        ASSERT_NE(a->api.callsite, 0);
    }
    ASSERT_EQ(count_api(&m, 131), 3);
    model_free(&m);
    free(out);
}

/* A libcupti whose records have a layout the tracer does not read (here kernels in 200 bytes,
 * CUPTI 11's Kernel8, where it reads CUPTI 13.0's Kernel10 of 216, CUPTI 12's Kernel9 of 208 and
 * 13.1 to 13.5's Kernel11 to 13) is refused before anything is read, in one line: its fields
 * would be misread. */
TEST(tracer_refuses_a_cupti_with_another_record_layout) {
    check_steps_aside("context_create 1\n"
                      "kernel name=k start=2000000000 end=2000001000 corr=1\n"
                      "call domain=rt cbid=131 wait=500000 corr=2 site=1\n"
                      "context_destroy 1\n",
                      "SYNCTOP_STANDIN_KERNEL_SIZE=200",
                      " lays out CONCURRENT_KERNEL records in 200 bytes, not the 216, 208, 224, "
                      "232 or 248 of the CUPTI 12 and 13 versions this tracer reads");
}

/* Calls CUDA 13.1 and 13.2 added, which the 13.0 headers the tracer is built with do not name:
 * cudaExecutionCtxSynchronize (runtime id 534) waits like cudaStreamSynchronize,
 * cudaMemcpyWithAttributesAsync (554) and cuMemcpyWithAttributesAsync (driver 837) copy like
 * cudaMemcpyAsync, cudaLaunchHostFunc_v2 (550) launches like cudaLaunchHostFunc. Under CUPTI 13.4
 * each is watched as its kind, and named. */
TEST(tracer_watches_the_calls_cuda_13_1_and_13_2_added) {
    model m;
    record_script("context_create 1\n"
                  "call domain=rt cbid=534 wait=500000 corr=1 site=1\n"
                  "call domain=rt cbid=554 wait=300000 corr=2 site=2\n"
                  "call domain=drv cbid=837 wait=200000 corr=3 site=3\n"
                  "api domain=rt cbid=550 start=2000000000 end=2000005000 corr=4\n"
                  "context_destroy 1\n",
                  "SYNCTOP_STANDIN_CUPTI=13.4", NULL, &m);
    const struct {
        uint32_t cbid, corr;
        const char *name;
        uint8_t flags;
        uint64_t ns;
    } want[] = {{534, 1, "cudaExecutionCtxSynchronize", TP_F_BLOCKING, 500000},
                {554, 2, "cudaMemcpyWithAttributesAsync", TP_F_BLOCKING, 300000},
                {837, 3, "cuMemcpyWithAttributesAsync", TP_F_BLOCKING | TP_F_DRIVER, 200000},
                {550, 4, "cudaLaunchHostFunc_v2", TP_F_LAUNCH, 5000}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const tp_record *a = find_api(&m, want[i].cbid, want[i].corr);
        ASSERT_NOT_NULL(a);
        ASSERT_STR_EQ(str(&m, a->api.name), want[i].name);
        ASSERT_EQ(a->api.flags, want[i].flags);
        ASSERT_EQ(a->api.end - a->api.start, want[i].ns);
        if (want[i].flags & TP_F_BLOCKING)
            ASSERT_NE(a->api.callsite, 0);
    }
    model_free(&m);
}

/* From CUPTI 13.2 a green context makes a GREEN_CONTEXT record and no CONTEXT record (in 13.2's
 * version and 13.4's, 152 and 304 bytes): a synchronization on it still gets its device. */
TEST(tracer_learns_a_green_contexts_device_from_its_record) {
    const char *plays[] = {"SYNCTOP_STANDIN_CUPTI=13.2", "SYNCTOP_STANDIN_CUPTI=13.4"};
    for (size_t v = 0; v < sizeof plays / sizeof plays[0]; v++) {
        model m;
        record_script("context_create 1\n"
                      "green_context id=21 device=2 parent=1\n"
                      "sync type=1 start=2000005000 end=2000006000 ctx=21 event=11 corr=4\n"
                      "context_destroy 1\n",
                      plays[v], NULL, &m);
        int syncs = 0;
        for (size_t i = 0; i < m.n; i++)
            if (m.recs[i].head.kind == TP_K_SYNC && m.recs[i].sync.correlation == 4) {
                syncs++;
                ASSERT_EQ(m.recs[i].sync.context, 21);
                ASSERT_EQ(m.recs[i].sync.device, 2);
            }
        ASSERT_EQ(syncs, 1);
        model_free(&m);
    }
}

/* CUPTI 12 writes earlier, shorter versions of some records (the stand-in's CUPTI 12.6 lays them
 * out with the structs of cupti_activity_deprecated.h: Kernel9, Memcpy5, Synchronization) and
 * numbers its version the old way (24: CUDA 12.6); CUPTI 13.2 and 13.4 write later, longer ones
 * (13.2: Kernel11, Context4, Device6; 13.4: Kernel13, Memcpy7, Memset5 too: fields appended).
 * Every field is read as from CUPTI 13.0's records: the values written in the script come out the
 * same in all four. */
TEST(tracer_reads_the_record_versions_of_cupti_12_and_of_later_13s) {
    const char *script = "context_create 1\n"
                         "device id=3 name=Dev12 cc_major=8 cc_minor=6 sms=84 mem=25769803776\n"
                         "context id=4 device=3 nullstream=9\n"
                         "kernel name=k12 start=2000000000 end=2000001000 dev=3 ctx=4 stream=9 corr=1 "
                         "grid=4,2,1 block=128,1,1 graph=5\n"
                         "memcpy copy=1 src=1 dst=3 bytes=4096 start=2000002000 end=2000003000 dev=3 "
                         "ctx=4 stream=9 corr=2 async=1\n"
                         "memset bytes=256 value=7 mem=3 start=2000004000 end=2000004500 dev=3 ctx=4 "
                         "stream=9 corr=3\n"
                         "sync type=1 start=2000005000 end=2000006000 ctx=4 event=11 corr=4\n"
                         "poll domain=rt cbid=132 count=5 step=10000 corr=100 site=1 ctx=4 stream=9\n"
                         "context_destroy 1\n";
    const struct {
        const char *play;
        unsigned version;
    } plays[] = {{NULL, CUPTI_API_VERSION},
                 {"SYNCTOP_STANDIN_CUPTI=12", 24},
                 {"SYNCTOP_STANDIN_CUPTI=13.2", 130200},
                 {"SYNCTOP_STANDIN_CUPTI=13.4", 130400}};
    for (size_t v = 0; v < sizeof plays / sizeof plays[0]; v++) {
        model m;
        record_script(script, "SYNCTOP_VERBOSE=1", plays[v].play, &m);
        char *err = read_text(task_path("err.txt"));
        char want[64];
        snprintf(want, sizeof want, "synctop: CUPTI %u from ", plays[v].version);
        ASSERT_STR_CONTAINS(err, want);
        long ki = kernel_index(&m, "k12");
        ASSERT_GE(ki, 0);
        const tp_kernel *k = &m.recs[ki].kernel;
        ASSERT_EQ(k->start, 2000000000);
        ASSERT_EQ(k->end, 2000001000);
        ASSERT_EQ(k->device, 3);
        ASSERT_EQ(k->context, 4);
        ASSERT_EQ(k->stream, 9);
        ASSERT_EQ(k->correlation, 1);
        ASSERT_EQ(k->graph, 5);
        ASSERT_EQ(k->flags, TP_F_GRAPH);
        ASSERT_EQ(k->grid[0], 4);
        ASSERT_EQ(k->grid[1], 2);
        ASSERT_EQ(k->grid[2], 1);
        ASSERT_EQ(k->block[0], 128);
        ASSERT_EQ(k->block[1], 1);
        ASSERT_EQ(k->block[2], 1);
        int copies = 0, sets = 0, syncs = 0, devices = 0, nulls = 0;
        for (size_t i = 0; i < m.n; i++) {
            const tp_record *r = &m.recs[i];
            if (r->head.kind == TP_K_MEMCPY) {
                copies++;
                ASSERT_EQ(r->memcpy.bytes, 4096);
                ASSERT_EQ(r->memcpy.copy_kind, 1);
                ASSERT_EQ(r->memcpy.src_kind, 1);
                ASSERT_EQ(r->memcpy.dst_kind, 3);
                ASSERT_EQ(r->memcpy.flags, TP_F_ASYNC);
                ASSERT_EQ(r->memcpy.start, 2000002000);
                ASSERT_EQ(r->memcpy.end, 2000003000);
                ASSERT_EQ(r->memcpy.device, 3);
                ASSERT_EQ(r->memcpy.context, 4);
                ASSERT_EQ(r->memcpy.stream, 9);
                ASSERT_EQ(r->memcpy.correlation, 2);
            } else if (r->head.kind == TP_K_MEMSET) {
                sets++;
                ASSERT_EQ(r->memset.bytes, 256);
                ASSERT_EQ(r->memset.value, 7);
                ASSERT_EQ(r->memset.mem_kind, 3);
                ASSERT_EQ(r->memset.flags, 0);
                ASSERT_EQ(r->memset.end - r->memset.start, 500);
                ASSERT_EQ(r->memset.correlation, 3);
            } else if (r->head.kind == TP_K_SYNC && r->sync.correlation == 4) {
                syncs++;
                ASSERT_EQ(r->sync.sync_type, 1);
                ASSERT_EQ(r->sync.event, 11);
                ASSERT_EQ(r->sync.device, 3); /* the context's, from its CONTEXT record */
                ASSERT_EQ(r->sync.end - r->sync.start, 1000);
            } else if (r->head.kind == TP_K_SYNC) {
                syncs++;
                ASSERT_EQ(r->sync.sync_type, 3); /* the query that found the stream done */
                ASSERT_EQ(r->sync.stream, 9);
            } else if (r->head.kind == TP_K_DEVICE && r->device.device == 3) {
                devices++;
                ASSERT_STR_EQ(str(&m, r->device.name), "Dev12");
                ASSERT_EQ(r->device.cc_major, 8);
                ASSERT_EQ(r->device.cc_minor, 6);
                ASSERT_EQ(r->device.sm_count, 84);
                ASSERT_EQ(r->device.memory_bytes, 25769803776ull);
            } else if (r->head.kind == TP_K_STREAM && (r->stream.flags & TP_F_NULL_STREAM) &&
                       r->stream.context == 4) {
                nulls++;
                ASSERT_EQ(r->stream.stream, 9);
                ASSERT_EQ(r->stream.device, 3);
            }
        }
        ASSERT_EQ(copies, 1);
        ASSERT_EQ(sets, 1);
        ASSERT_EQ(syncs, 2); /* the event's, and one of the five queries: four found work pending */
        ASSERT_GE(devices, 1);
        ASSERT_GE(nulls, 1);
        const tp_record *q = find_api(&m, 132, 104); /* the loop of five 10 us queries, one wait */
        ASSERT_NOT_NULL(q);
        ASSERT_EQ(q->api.flags, TP_F_BLOCKING);
        ASSERT_EQ(q->api.end - q->api.start, 5 * 10000);
        model_free(&m);
        free(err);
    }
}

/* At exit, CUPTI's worker still holds device records it had not collected: it hands them over
 * during CUPTI's own teardown, after the tracer's exit handler has flushed and stopped calling
 * CUPTI. The tracer still ships them before its last batch, and calls nothing in CUPTI then. */
TEST(tracer_keeps_what_cuptis_worker_hands_over_during_exit) {
    model m;
    record_script("context_create 1\n"
                  "worker on\n"
                  "kernel name=at_exit start=2000000000 end=2000400000 corr=1\n"
                  "call domain=rt cbid=131 wait=500000 corr=2 site=1\n",
                  NULL, NULL, &m);
    char *out = read_text(task_path("out.txt"));
    char *err = read_text(task_path("err.txt"));
    ASSERT_STR_CONTAINS(out, " worker_buffers=0\n"); /* nothing before exit */
    ASSERT_STR_CONTAINS(out, "standin: teardown handed over 1 buffers\n");
    ASSERT_STR_EQ(err, "");
    ASSERT_EQ(m.ended, 1);
    ASSERT_GE(kernel_index(&m, "at_exit"), 0);
    ASSERT_NOT_NULL(find_api(&m, 131, 2));
    model_free(&m);
    free(out);
    free(err);
}

/* How far a libcupti steps over one record of a kind (cuptiActivityGetNextRecord over a record of
 * that kind followed by small records at every 8 bytes), 0 when it refuses the kind. */
static size_t walk_step(CUptiResult (*next)(uint8_t *, size_t, CUpti_Activity **), uint32_t kind) {
    static uint64_t buf[256];
    for (size_t w = 0; w < 256; w++)
        buf[w] = CUPTI_ACTIVITY_KIND_CONTEXT; /* the kind, little-endian, then 4 bytes of 0 */
    buf[0] = kind;
    CUpti_Activity *rec = NULL;
    if (next((uint8_t *)buf, sizeof buf, &rec) != CUPTI_SUCCESS ||
        next((uint8_t *)buf, sizeof buf, &rec) != CUPTI_SUCCESS)
        return 0;
    return (size_t)((uint8_t *)rec - (uint8_t *)buf);
}

static CUptiResult (*next_record_of(void *h))(uint8_t *, size_t, CUpti_Activity **) {
    union {
        void *p;
        CUptiResult (*f)(uint8_t *, size_t, CUpti_Activity **);
    } u = {.p = dlsym(h, "cuptiActivityGetNextRecord")};
    return u.f;
}

/* The stand-in writes each kind in the size the real libcupti steps over (the records the tracer
 * reads, and those of other clients it must step over), and the real one's sizes are those of the
 * structs the converter reads (CUPTI 13's headers): layouts anchored in the library, not copied
 * from the headers twice. A kind neither knows (0, or past the last) is refused by both. */
TEST(tracer_standin_lays_out_records_as_the_real_cupti_does) {
    if (REAL_CUPTI[0] == '\0')
        TASK_SKIP("no real libcupti found at configure time");
    void *real = dlopen(REAL_CUPTI, RTLD_NOW | RTLD_LOCAL);
    if (real == NULL)
        TASK_FAIL_("cannot load %s: %s", REAL_CUPTI, dlerror());
    void *standin = dlopen(STANDIN_SO, RTLD_NOW | RTLD_LOCAL);
    if (standin == NULL)
        TASK_FAIL_("cannot load %s: %s", STANDIN_SO, dlerror());
    ASSERT(real != standin);
    CUptiResult (*rn)(uint8_t *, size_t, CUpti_Activity **) = next_record_of(real);
    CUptiResult (*sn)(uint8_t *, size_t, CUpti_Activity **) = next_record_of(standin);
    ASSERT_NOT_NULL(rn);
    ASSERT_NOT_NULL(sn);
    ASSERT(rn != sn);
    static const struct {
        uint32_t kind;
        size_t header;
    } kinds[] = {
        {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, sizeof(CUpti_ActivityKernel10)},
        {CUPTI_ACTIVITY_KIND_KERNEL, sizeof(CUpti_ActivityKernel10)},
        {CUPTI_ACTIVITY_KIND_MEMCPY, sizeof(CUpti_ActivityMemcpy6)},
        {CUPTI_ACTIVITY_KIND_MEMSET, sizeof(CUpti_ActivityMemset4)},
        {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, sizeof(CUpti_ActivitySynchronization2)},
        {CUPTI_ACTIVITY_KIND_RUNTIME, sizeof(CUpti_ActivityAPI)},
        {CUPTI_ACTIVITY_KIND_DRIVER, sizeof(CUpti_ActivityAPI)},
        {CUPTI_ACTIVITY_KIND_MARKER, sizeof(CUpti_ActivityMarker2)},
        {CUPTI_ACTIVITY_KIND_CONTEXT, sizeof(CUpti_ActivityContext3)},
        {CUPTI_ACTIVITY_KIND_STREAM, sizeof(CUpti_ActivityStream)},
        {CUPTI_ACTIVITY_KIND_DEVICE, sizeof(CUpti_ActivityDevice5)},
        {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, sizeof(CUpti_ActivityExternalCorrelation)},
        {CUPTI_ACTIVITY_KIND_OVERHEAD, sizeof(CUpti_ActivityOverhead3)},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        size_t r = walk_step(rn, kinds[i].kind), s = walk_step(sn, kinds[i].kind);
        if (r != kinds[i].header || s != r)
            TASK_FAIL_("kind %u: the real libcupti steps %zu bytes, the stand-in %zu, the header's "
                       "struct is %zu", kinds[i].kind, r, s, kinds[i].header);
    }
    ASSERT_EQ(walk_step(rn, 0), 0);
    ASSERT_EQ(walk_step(sn, 0), 0);
    ASSERT_EQ(walk_step(rn, 1000), 0);
    ASSERT_EQ(walk_step(sn, 1000), 0);
}

/* ---- units ---- */

TEST(tracer_cbid_tables) {
    char name[128];
    ASSERT_EQ(tr_cb_class_of(CUPTI_CB_DOMAIN_RUNTIME_API, 131), TR_CB_SYNC);
    ASSERT(tr_cb_name(CUPTI_CB_DOMAIN_RUNTIME_API, 131, name, sizeof name) > 0);
    ASSERT_STR_EQ(name, "cudaStreamSynchronize");
    ASSERT_EQ(tr_cb_class_of(CUPTI_CB_DOMAIN_RUNTIME_API, 211), TR_CB_LAUNCH);
    ASSERT_EQ(tr_cb_class_of(CUPTI_CB_DOMAIN_RUNTIME_API, 132), TR_CB_POLL);
    ASSERT_EQ(tr_cb_class_of(CUPTI_CB_DOMAIN_RUNTIME_API, 22), TR_CB_MEM); /* cudaFree */
    ASSERT_EQ(tr_cb_class_of(CUPTI_CB_DOMAIN_RUNTIME_API, 1), TR_CB_NONE);
    ASSERT_EQ(tr_cb_class_of(CUPTI_CB_DOMAIN_DRIVER_API, 126), TR_CB_SYNC);
    ASSERT_EQ(tr_cb_class_of(CUPTI_CB_DOMAIN_DRIVER_API, 800), TR_CB_SYNC);
    ASSERT_EQ(tr_cb_class_of(CUPTI_CB_DOMAIN_DRIVER_API, 278), TR_CB_COPY);
    ASSERT(tr_cb_name(CUPTI_CB_DOMAIN_DRIVER_API, 278, name, sizeof name) > 0);
    ASSERT_STR_EQ(name, "cuMemcpyDtoH_v2");
    ASSERT(tr_cb_name(CUPTI_CB_DOMAIN_RUNTIME_API, 215, name, sizeof name) > 0);
    ASSERT_STR_EQ(name, "cudaMemcpy_ptds");
    /* host allocations and pinning take long in the driver but never wait for the device;
     * releases may */
    ASSERT_EQ(tr_cb_class_of(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaHostRegister_v4000),
              TR_CB_HOSTMEM);
    ASSERT_EQ(tr_cb_class_of(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020),
              TR_CB_HOSTMEM);
    ASSERT_EQ(tr_cb_class_of(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020),
              TR_CB_HOSTMEM);
    ASSERT_EQ(tr_cb_class_of(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2),
              TR_CB_HOSTMEM);
    ASSERT_EQ(tr_cb_class_of(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc_v2),
              TR_CB_HOSTMEM);
    ASSERT_EQ(tr_cb_class_of(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020),
              TR_CB_MEM);
    ASSERT_EQ(tr_cb_class_of(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaHostUnregister_v4000),
              TR_CB_MEM);
    ASSERT(tr_cb_name(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaHostRegister_v4000, name,
                      sizeof name) > 0);
    ASSERT_STR_EQ(name, "cudaHostRegister");
    ASSERT_EQ(tr_cb_class_of(CUPTI_CB_DOMAIN_RESOURCE, 1), TR_CB_NONE);
    ASSERT_EQ(tr_cb_class_of(CUPTI_CB_DOMAIN_RUNTIME_API, 100000), TR_CB_NONE);
}

TEST(tracer_hostq_bounded) {
    tr_hostq *q = tr_hostq_new(8);
    ASSERT_NOT_NULL(q);
    ASSERT_NULL(tr_hostq_new(6));
    tr_hostev ev;
    memset(&ev, 0, sizeof ev);
    for (uint32_t i = 0; i < 8; i++) {
        ev.correlation = i;
        ev.n_frames = 2;
        ev.frames[0] = i;
        ev.frames[1] = i + 1;
        ASSERT_OK(tr_hostq_push(q, &ev));
    }
    ASSERT_EQ(tr_hostq_push(q, &ev), -1);
    ASSERT_EQ(tr_hostq_dropped(q), 1);
    tr_hostev out;
    for (uint32_t i = 0; i < 8; i++) {
        ASSERT_EQ(tr_hostq_pop(q, &out), 1);
        ASSERT_EQ(out.correlation, i);
        ASSERT_EQ(out.n_frames, 2);
        ASSERT_EQ(out.frames[1], i + 1);
    }
    ASSERT_EQ(tr_hostq_pop(q, &out), 0);
    tr_hostq_destroy(&q);
    tr_hostq_destroy(&q);
}

/* Records laid out as CUPTI lays them out in an activity buffer: a context, a device, a kernel, a
 * copy, an event synchronize, then what the converter must leave out, a driver launch and a marker.
 * Returns the bytes used. */
static size_t real_walk_fill(uint8_t *buf) {
    size_t used = 0;
#define PUT(rec) (memcpy(buf + used, &(rec), sizeof(rec)), used += sizeof(rec))
    CUpti_ActivityContext3 ctx = {.kind = CUPTI_ACTIVITY_KIND_CONTEXT, .contextId = 4,
                                  .deviceId = 2, .nullStreamId = 9};
    PUT(ctx);
    CUpti_ActivityDevice5 dev;
    memset(&dev, 0, sizeof dev);
    dev.kind = CUPTI_ACTIVITY_KIND_DEVICE;
    dev.id = 2;
    dev.name = "RealWalk GPU";
    dev.computeCapabilityMajor = 10;
    dev.numMultiprocessors = 148;
    dev.globalMemorySize = 1ull << 37;
    PUT(dev);
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = 100;
    k.end = 250;
    k.deviceId = 2;
    k.contextId = 4;
    k.streamId = 21;
    k.correlationId = 77;
    k.gridX = 8, k.gridY = 2, k.gridZ = 1, k.blockX = 256, k.blockY = 1, k.blockZ = 1;
    k.graphId = 5;
    k.name = "_Z6kernelPf";
    PUT(k);
    CUpti_ActivityMemcpy6 mc;
    memset(&mc, 0, sizeof mc);
    mc.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    mc.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    mc.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    mc.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    mc.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
    mc.bytes = 1 << 20;
    mc.start = 300;
    mc.end = 400;
    mc.deviceId = 2;
    mc.contextId = 4;
    mc.streamId = 21;
    mc.correlationId = 78;
    PUT(mc);
    CUpti_ActivitySynchronization2 sy;
    memset(&sy, 0, sizeof sy);
    sy.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    sy.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE;
    sy.start = 500;
    sy.end = 900;
    sy.correlationId = 79;
    sy.contextId = 4;
    sy.streamId = 0xFFFFFFFFu;
    sy.cudaEventId = 3;
    PUT(sy);
    /* what the converter must leave out: a query that found work pending, and a kernel still
     * running when a forced flush took its record (no times) */
    CUpti_ActivitySynchronization2 pending = sy;
    pending.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    pending.streamId = 21;
    pending.cudaEventId = 0xFFFFFFFFu;
    pending.returnValue = CUDA_ERROR_NOT_READY;
    PUT(pending);
    CUpti_ActivityKernel10 running = k;
    running.start = running.end = 0;
    PUT(running);
    CUpti_ActivityAPI api;
    memset(&api, 0, sizeof api);
    api.kind = CUPTI_ACTIVITY_KIND_DRIVER;
    api.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
    api.start = 90;
    api.end = 95;
    api.threadId = 1234;
    api.correlationId = 77;
    PUT(api);
    CUpti_ActivityMarker2 mk;
    memset(&mk, 0, sizeof mk);
    mk.kind = CUPTI_ACTIVITY_KIND_MARKER;
    mk.flags = CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS;
    mk.timestamp = 1000;
    mk.id = 42;
    mk.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    mk.objectId.pt.threadId = 1234;
    mk.name = "checkpoint";
    PUT(mk);
#undef PUT
    return used;
}

/* One converted record of real_walk_fill's buffer against what was laid out. */
static void real_walk_check(const model *m, const tp_record *x) {
    switch (x->head.kind) {
    case TP_K_STREAM:
        ASSERT_EQ(x->stream.flags, TP_F_NULL_STREAM);
        ASSERT_EQ(x->stream.stream, 9);
        ASSERT_EQ(x->stream.device, 2);
        break;
    case TP_K_DEVICE:
        ASSERT_STR_EQ(str(m, x->device.name), "RealWalk GPU");
        ASSERT_EQ(x->device.cc_major, 10);
        ASSERT_EQ(x->device.sm_count, 148);
        ASSERT_UEQ(x->device.memory_bytes, 1ull << 37);
        break;
    case TP_K_KERNEL:
        ASSERT_STR_EQ(str(m, x->kernel.name), "_Z6kernelPf");
        ASSERT_EQ(x->kernel.flags, TP_F_GRAPH);
        ASSERT_EQ(x->kernel.graph, 5);
        ASSERT_EQ(x->kernel.start, 100);
        ASSERT_EQ(x->kernel.end, 250);
        ASSERT_EQ(x->kernel.device, 2);
        ASSERT_EQ(x->kernel.stream, 21);
        ASSERT_EQ(x->kernel.grid[0], 8);
        ASSERT_EQ(x->kernel.grid[1], 2);
        ASSERT_EQ(x->kernel.block[0], 256);
        ASSERT_EQ(x->kernel.correlation, 77);
        break;
    case TP_K_MEMCPY:
        ASSERT_EQ(x->memcpy.copy_kind, TP_COPY_HTOD);
        ASSERT_EQ(x->memcpy.src_kind, TP_MEM_PINNED);
        ASSERT_EQ(x->memcpy.dst_kind, TP_MEM_DEVICE);
        ASSERT_EQ(x->memcpy.flags, TP_F_ASYNC);
        ASSERT_EQ(x->memcpy.bytes, 1 << 20);
        break;
    case TP_K_SYNC:
        ASSERT_EQ(x->sync.sync_type, TP_SYNC_EVENT);
        ASSERT_EQ(x->sync.device, 2);
        ASSERT_UEQ(x->sync.stream, TP_NO_ID);
        ASSERT_EQ(x->sync.event, 3);
        break;
    case TP_K_API:
        ASSERT_EQ(x->api.flags, TP_F_DRIVER | TP_F_LAUNCH);
        ASSERT_STR_EQ(str(m, x->api.name), "cuLaunchKernel");
        ASSERT_EQ(x->api.tid, 1234);
        break;
    case TP_K_NVTX:
        ASSERT_EQ(x->nvtx.flags, TP_NVTX_INSTANT);
        ASSERT_STR_EQ(str(m, x->nvtx.name), "checkpoint");
        ASSERT_EQ(x->nvtx.start, 1000);
        ASSERT_EQ(x->nvtx.tid, 1234);
        break;
    default:
        TASK_FAIL_("unexpected kind %u", x->head.kind);
    }
}

/* CUPTI 12.0-12.6's SYNCHRONIZATION record (40 bytes) ends before Synchronization2's returnValue
 * (at 48): told the size, the converter takes the record as a wait, whatever lies past it (here
 * the 600 of CUDA_ERROR_NOT_READY, as the next record's bytes could be); read as CUPTI 13's, the
 * same bytes would make it a pending query, left out. */
TEST(tracer_reads_a_cupti_12_sync_record_without_its_result) {
    static uint64_t buf[16];
    CUpti_ActivitySynchronization s;
    memset(&s, 0, sizeof s);
    s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    s.start = 1000;
    s.end = 5000;
    s.correlationId = 7;
    s.contextId = 1;
    s.streamId = 9;
    s.cudaEventId = 0xFFFFFFFFu;
    ASSERT_EQ(sizeof s, 40);
    memcpy(buf, &s, sizeof s);
    uint32_t past = CUDA_ERROR_NOT_READY;
    memcpy((uint8_t *)buf + offsetof(CUpti_ActivitySynchronization2, returnValue), &past, sizeof past);
    for (int told = 0; told < 2; told++) {
        tp_enc *enc = tp_enc_new(NULL);
        tr_conv *conv = tr_conv_new(enc);
        tr_conv_set_sync_size(conv, told ? sizeof s : 0);
        ASSERT_EQ(tr_conv_activity(conv, (const CUpti_Activity *)(const void *)buf), (told ? 1 : 0));
        tr_conv_stats cs;
        tr_conv_stats_get(conv, &cs);
        ASSERT_EQ(cs.converted, (told ? 1 : 0));
        ASSERT_EQ(cs.pending, (told ? 0 : 1));
        tr_conv_destroy(&conv);
        tp_enc_destroy(&enc);
    }
}

/* The real libcupti walks buffers laid out like the stand-in's and the converter reads them. */
TEST(tracer_real_cupti_walks_hand_built_records) {
    if (REAL_CUPTI[0] == '\0')
        TASK_SKIP("no real libcupti found at configure time");
    void *h = dlopen(REAL_CUPTI, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        TASK_FAIL_("cannot load %s: %s", REAL_CUPTI, dlerror());
    union {
        void *p;
        CUptiResult (*f)(uint8_t *, size_t, CUpti_Activity **);
    } next = {.p = dlsym(h, "cuptiActivityGetNextRecord")};
    ASSERT_NOT_NULL(next.p);

    static uint8_t buf[8192] __attribute__((aligned(8)));
    size_t used = real_walk_fill(buf);

    tp_enc *enc = tp_enc_new(NULL);
    tr_conv *conv = tr_conv_new(enc);
    CUpti_Activity *rec = NULL;
    int n = 0;
    CUptiResult r;
    int added = 0;
    while ((r = next.f(buf, used, &rec)) == CUPTI_SUCCESS) {
        added += tr_conv_activity(conv, rec);
        n++;
    }
    ASSERT_EQ(r, CUPTI_ERROR_MAX_LIMIT_REACHED);
    ASSERT_EQ(n, 9);
    ASSERT_EQ(added, 7);
    tr_conv_stats cs;
    tr_conv_stats_get(conv, &cs);
    ASSERT_EQ(cs.uncollected, 1);
    ASSERT_EQ(cs.pending, 1);
    ASSERT_EQ(cs.skipped, 0);
    tp_buf b = {0};
    ASSERT_OK(tp_enc_finish(enc, &b));
    model m;
    model_init(&m);
    model_add_batch(&m, b.data, b.len);
    for (size_t i = 0; i < m.n; i++)
        real_walk_check(&m, &m.recs[i]);
    ASSERT_EQ(m.n, 7);
    model_free(&m);
    tp_buf_free(&b);
    tr_conv_destroy(&conv);
    tp_enc_destroy(&enc);
}

/* Runs a shell command, returns its exit status and its output (stdout and stderr). */
static int shell(const char *cmd, char **out) {
    FILE *p = popen(cmd, "r");
    ASSERT_NOT_NULL(p);
    *out = calloc(1, 65536);
    size_t n = fread(*out, 1, 65535, p);
    (*out)[n] = '\0';
    int status = pclose(p);
    ASSERT(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* `synctop run` injects the tracer (CUDA_INJECTION64_PATH, which the harness honours as the driver
 * would), hears the process, sums up the waits by call site, and exits with the command's status. */
static int run_verb_with(const char *harness, const char *script, char **out) {
    const char *script_path = task_path("run-script.txt");
    write_text(script_path, script);
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "SYNCTOP_STANDIN='%s' SYNCTOP_CUPTI='%s' SYNCTOP_TRACER='%s' '%s' run --no-tui -- "
             "'%s' '%s' 2>&1",
             STANDIN_SO, STANDIN_SO, TRACER_SO, task_synctop(), harness, script_path);
    return shell(cmd, out);
}

static int run_verb(const char *script, char **out) { return run_verb_with(HARNESS, script, out); }

/* The line of `src` that holds "// @tag". */
static int tagged_line(const char *src, const char *tag) {
    char want[64];
    snprintf(want, sizeof want, "// %s\n", tag);
    const char *at = strstr(src, want);
    ASSERT_NOT_NULL(at);
    int line = 1;
    for (const char *p = src; p < at; p++)
        line += *p == '\n';
    return line;
}

/* A program as CUDA programs usually are (PIE, no exported symbols, the CUDA runtime linked in
 * statically): the tracer can name none of its functions, and synctop names each call site after
 * its source line, read from the program on disk, past the runtime's own frames. */
TEST(tracer_run_verb_names_source_lines) {
    char *out = NULL;
    int rc = run_verb_with(HARNESS_PLAIN,
                           "context_create 1\n"
                           "x2@0 call domain=rt cbid=131 wait=500000 site=1\n"
                           "call domain=rt cbid=131 wait=300000 site=4\n"
                           "context_destroy 1\n",
                           &out);
    if (rc != 0)
        fprintf(stderr, "%s", out);
    ASSERT_EQ(rc, 0);
    char *src = read_text(HARNESS_SRC);
    char want[128];
    int line1 = tagged_line(src, "@site1"), line4 = tagged_line(src, "@site4");
    /* the chain under each stall, and the findings */
    snprintf(want, sizeof want, "(sync)\n      at harness_site_1 (tracer_harness.c:%d)\n", line1);
    ASSERT_STR_CONTAINS(out, want);
    snprintf(want, sizeof want, "\n      tracer_harness.c:%d harness_site_1\n", line1);
    ASSERT_STR_CONTAINS(out, want);
    /* past cudaStreamSynchronize and cudart::cudaApiStreamSynchronize, in the program itself */
    snprintf(want, sizeof want, "(sync)\n      at harness_site_4 (tracer_harness.c:%d)\n", line4);
    ASSERT_STR_CONTAINS(out, want);
    snprintf(want, sizeof want, "\n      tracer_harness.c:%d harness_site_4\n", line4);
    ASSERT_STR_CONTAINS(out, want);
    ASSERT(strstr(out, "cudaStreamSynchronize (tracer_harness") == NULL);
    ASSERT(strstr(out, "cudart::") == NULL);
    free(src);
    free(out);
}

/* A trace keeps the build id of each module its frames name: after the program is rebuilt, a report
 * of the old trace does not name lines from the new file (they would be wrong), and says why. */
TEST(tracer_call_sites_not_named_from_a_rebuilt_program) {
    char app[512], trace[512], script[512], cmd[8192];
    snprintf(app, sizeof app, "%s", task_path("app"));
    snprintf(trace, sizeof trace, "%s", task_path("app.trace"));
    snprintf(script, sizeof script, "%s", task_path("app-script.txt"));
    write_text(script, "context_create 1\n"
                       "x2@0 call domain=rt cbid=131 wait=500000 site=1\n"
                       "context_destroy 1\n");
    char *src = read_text(HARNESS_SRC);
    char named[128];
    snprintf(named, sizeof named, "tracer_harness.c:%d harness_site_1", tagged_line(src, "@site1"));
    free(src);
    char *out = NULL;
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && chmod 755 '%s'", HARNESS_PLAIN, app, app);
    ASSERT_EQ(shell(cmd, &out), 0);
    free(out);
    snprintf(cmd, sizeof cmd,
             "SYNCTOP_STANDIN='%s' SYNCTOP_CUPTI='%s' SYNCTOP_TRACER='%s' '%s' run --no-tui --record '%s' -- "
             "'%s' '%s' 2>&1",
             STANDIN_SO, STANDIN_SO, TRACER_SO, task_synctop(), trace, app, script);
    int rc = shell(cmd, &out);
    if (rc != 0)
        fprintf(stderr, "%s", out);
    ASSERT_EQ(rc, 0);
    ASSERT_STR_CONTAINS(out, named); /* the program as it ran: named */
    char said[PATH_MAX + 64];
    snprintf(said, sizeof said, "synctop run: the trace is in %s;", trace); /* and where the trace went */
    ASSERT_STR_CONTAINS(out, said);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' report '%s' 2>&1", task_synctop(), trace);
    ASSERT_EQ(shell(cmd, &out), 0);
    ASSERT_STR_CONTAINS(out, named); /* still the same file: still named */
    free(out);
    /* "rebuilt": another program at the same path */
    snprintf(cmd, sizeof cmd, "cp '%s' '%s.new' && mv '%s.new' '%s'", HARNESS, app, app, app);
    ASSERT_EQ(shell(cmd, &out), 0);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' report '%s' 2>&1", task_synctop(), trace);
    ASSERT_EQ(shell(cmd, &out), 0);
    ASSERT(strstr(out, named) == NULL);
    ASSERT_STR_CONTAINS(out, "changed since the trace was taken (another build id)");
    ASSERT_STR_CONTAINS(out, "(app+0x");
    free(out);
}

static int free_port(void);

/* A server pair saved as BASE.key and BASE.pub (base: task_path("server")), and a client pair
 * whose .pub is alone in the list of clients dir (task_path("clients")). */
static void keys_and_clients(tp_keypair *server, tp_keypair *client, char base[512], char dir[512]) {
    err_msg err = {{0}};
    char client_base[600];
    ASSERT_OK(tp_keypair_new(server, &err));
    ASSERT_OK(tp_keypair_new(client, &err));
    snprintf(base, 512, "%s", task_path("server"));
    snprintf(dir, 512, "%s", task_path("clients"));
    ASSERT_OK(tp_keypair_save(server, base, &err));
    ASSERT_OK(mkdir(dir, 0755));
    snprintf(client_base, sizeof client_base, "%s/someone", dir);
    ASSERT_OK(tp_keypair_save_client(client, client_base, &err));
}

/* `synctop run --listen tcp://... --key K --clients DIR`: run's own subscriber holds the server's
 * pair, which the tracer's check of its clients admits, so run hears its process although DIR
 * lists nobody else; without --clients it warns that whoever has the .pub file can watch. */
TEST(tracer_run_verb_with_keys_and_clients_hears_its_process) {
    tp_keypair server, other;
    char base[512], dir[512], script[512], cmd[8192];
    keys_and_clients(&server, &other, base, dir);
    snprintf(script, sizeof script, "%s", task_path("run-script.txt"));
    write_text(script, "context_create 1\n"
                       "x20@1000 kernel name=k start=1000 end=1500 corr=1\n"
                       "context_destroy 1\n");
    const char *clients[] = {" --clients '", dir, "'"}, *none[] = {"", "", ""};
    for (int with = 1; with >= 0; with--) {
        const char **c = with ? clients : none;
        snprintf(cmd, sizeof cmd,
                 "SYNCTOP_STANDIN='%s' SYNCTOP_CUPTI='%s' SYNCTOP_TRACER='%s' '%s' run --no-tui --listen "
                 "tcp://127.0.0.1:%d --key '%s.key'%s%s%s -- '%s' '%s' 2>&1",
                 STANDIN_SO, STANDIN_SO, TRACER_SO, task_synctop(), free_port(), base, c[0], c[1], c[2], HARNESS,
                 script);
        char *out = NULL;
        int rc = shell(cmd, &out);
        if (rc != 0)
            fprintf(stderr, "%s", out);
        ASSERT_EQ(rc, 0);
        ASSERT_STR_CONTAINS(out, "1 traced process");
        ASSERT_STR_CONTAINS(out, "kernels 20,");
        if (with)
            ASSERT(strstr(out, "without --clients") == NULL);
        else
            ASSERT_STR_CONTAINS(out, "synctop run: warning: --key without --clients: whoever has the public key of");
        free(out);
    }
}

TEST(tracer_run_verb_sums_up_waits) {
    char *out = NULL;
    int rc = run_verb("context_create 1\n"
                      "x3@0 call domain=rt cbid=131 wait=500000 site=1\n"
                      "call domain=rt cbid=31 wait=300000 site=2\n"
                      "x20@1000 kernel name=k start=1000 end=1500 corr=1\n"
                      "context_destroy 1\n",
                      &out);
    if (rc != 0)
        fprintf(stderr, "%s", out);
    ASSERT_EQ(rc, 0);
    ASSERT_STR_CONTAINS(out, "1 traced process");
    /* the analysis's report: counts, blocked totals, and each call site with its totals */
    ASSERT_STR_CONTAINS(out, "kernels 20, copies 0, memsets 0, GPU syncs 0, CUDA calls 4");
    ASSERT_STR_CONTAINS(out, "host blocked 1.800 ms in 4 calls");
    ASSERT_STR_CONTAINS(out, "1.500      3      0.500");
    ASSERT_STR_CONTAINS(out, "cudaStreamSynchronize (sync)\n      at harness_site_1 (tracer_harness.c:");
    ASSERT_STR_CONTAINS(out, "0.300      1      0.300");
    ASSERT_STR_CONTAINS(out, "cudaMemcpy (memcpy)\n      at harness_site_2 (tracer_harness.c:");
    ASSERT_STR_CONTAINS(out, "[sync-api / cuda_api_sync]");
    ASSERT(strstr(out, "incomplete") == NULL);
    free(out);
    /* A failing command's status comes back. */
    ASSERT_EQ(run_verb("not a directive\n", &out), 3);
    free(out);
}

/* The call sites the tracer publishes are named after the program's file:line, past the CUDA
 * runtime's frames: what tests/gpu/run.sh relies on for the samples, checked here by the same
 * checker on the harness. */
TEST(tracer_call_sites_resolve_to_source_lines) {
    char record[512];
    snprintf(record, sizeof record, "SYNCTOP_RECORD=%s", task_path("trace.trace"));
    const char *env[] = {record, "SYNCTOP_LISTEN=none", NULL};
    ASSERT_EQ(run_harness("context_create 1\n"
                          "x3@0 call domain=rt cbid=131 wait=500000 site=1\n"
                          "call domain=rt cbid=131 wait=500000 site=2\n"
                          "call domain=rt cbid=131 wait=5 site=3\n"
                          "x2@0 call domain=rt cbid=131 wait=400000 site=4\n"
                          "context_destroy 1\n",
                          env),
              0);
    /* The harness's source with expectations appended, under its own name. */
    char *src = read_text(HARNESS_SRC);
    char *with = calloc(1, strlen(src) + 512);
    sprintf(with, "%s\n// EXPECT: 3 x cudaStreamSynchronize blocking at @site1\n"
                  "// EXPECT: 1 x cudaStreamSynchronize blocking at @site2\n"
                  "// EXPECT: 0 x cudaStreamSynchronize blocking at @site3\n"
                  "// EXPECT: 2 x cudaStreamSynchronize blocking at @site4\n", src);
    write_text(task_path("tracer_harness.c"), with);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' > '%s' 2>&1", CHECK_TRACE, task_path("trace.trace"),
             task_path("tracer_harness.c"), task_path("check.txt"));
    int rc = system(cmd);
    char *out = read_text(task_path("check.txt"));
    fprintf(stderr, "%s", out);
    ASSERT_EQ(rc, 0);
    ASSERT_STR_CONTAINS(out, "ok   tracer_harness.c:");
    ASSERT_STR_CONTAINS(out, "3 x cudaStreamSynchronize blocking (saw 3)");
    ASSERT_STR_CONTAINS(out, "1 x cudaStreamSynchronize blocking (saw 1)");
    ASSERT_STR_CONTAINS(out, "2 x cudaStreamSynchronize blocking (saw 2)");
    free(src);
    free(with);
    free(out);
}


/* A loopback TCP port that was free a moment ago. */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ASSERT_OK(bind(fd, (struct sockaddr *)&a, sizeof a));
    socklen_t len = sizeof a;
    ASSERT_OK(getsockname(fd, (struct sockaddr *)&a, &len));
    close(fd);
    return ntohs(a.sin_port);
}

/* Receives the step program through sub to its end and checks it whole; the program (pid) ends
 * well and says nothing on stderr. */
static void receive_whole_program(tp_sub *sub, pid_t pid) {
    model m;
    model_init(&m);
    drain_sub(sub, &m, 20000);
    ASSERT_EQ(wait_harness(pid), 0);
    char *errtxt = read_text(task_path("err.txt"));
    ASSERT_STR_EQ(errtxt, "");
    free(errtxt);
    ASSERT(m.ended);
    check_step_events(&m);
    model_free(&m);
}

TEST(tracer_publishes_over_tcp_with_curve) {
    /* The publisher's keys, as `synctop keygen` writes them; a viewer with the public key gets the
     * whole program, one with another key gets nothing. */
    tp_keypair server, other;
    err_msg err = {{0}};
    ASSERT_OK(tp_keypair_new(&server, &err));
    ASSERT_OK(tp_keypair_new(&other, &err));
    char base[512];
    snprintf(base, sizeof base, "%s", task_path("server"));
    ASSERT_OK(tp_keypair_save(&server, base, &err));
    char ep[128], listen[160], key[600];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", free_port());
    snprintf(listen, sizeof listen, "SYNCTOP_LISTEN=%s", ep);
    snprintf(key, sizeof key, "SYNCTOP_CURVE_KEY=%s.key", base);
    const char *env[] = {listen, key, "SYNCTOP_START_WAIT_MS=20000", NULL};

    tp_sub_opts wrong_o = {.server_key = other.public_key};
    tp_sub *wrong = tp_sub_new(&wrong_o, &err);
    ASSERT_NOT_NULL(wrong);
    ASSERT_OK(tp_sub_connect(wrong, ep, &err));
    tp_sub_opts right_o = {.server_key = server.public_key};
    tp_sub *right = tp_sub_new(&right_o, &err);
    ASSERT_NOT_NULL(right);
    ASSERT_OK(tp_sub_connect(right, ep, &err));

    receive_whole_program(right, start_harness(step_script(), env));
    /* the wrong key completed no handshake: not one batch */
    tp_sub_msg msg;
    ASSERT_EQ(tp_sub_recv(wrong, &msg, 300, &err), 0);
    tp_sub_stats st;
    tp_sub_stats_get(wrong, &st);
    ASSERT_UEQ(st.received, 0);
    tp_sub_destroy(&right);
    tp_sub_destroy(&wrong);
}

/* Receives from sub until its handshake was refused (20 s guard); how many batches came meanwhile. */
static uint64_t wait_refused(tp_sub *sub) {
    tp_sub_stats st = {0};
    err_msg err = {{0}};
    for (double end = now_s() + 20; st.handshake_failures == 0 && now_s() < end; tp_sub_stats_get(sub, &st)) {
        tp_sub_msg msg;
        ASSERT(tp_sub_recv(sub, &msg, 20, &err) >= 0);
    }
    ASSERT_GT(st.handshake_failures, 0);
    return st.received;
}

/* A subscriber to ep that pins the server key and presents the client pair (NULL: a throwaway). */
static tp_sub *curve_sub(const char *ep, const char *server, const tp_keypair *client) {
    err_msg err = {{0}};
    tp_sub *sub = tp_sub_new(&(tp_sub_opts){.server_key = server, .client_key = client}, &err);
    if (sub == NULL || tp_sub_connect(sub, ep, &err) != 0)
        TASK_FAIL_("subscribing to %s: %s", ep, err.msg);
    return sub;
}

TEST(tracer_admits_only_the_listed_clients) {
    /* SYNCTOP_CURVE_CLIENTS: a directory of client .pub files. While the program waits for a
     * viewer at start, a client whose key is not listed and one with a throwaway key are refused
     * (and told it was their client key), and the program goes on waiting: neither counts as a
     * viewer. A listed client then gets the whole program, and the program's stderr stays empty. */
    tp_keypair server, alice, bob;
    err_msg err = {{0}};
    ASSERT_OK(tp_keypair_new(&bob, &err));
    char base[512], dir[512];
    keys_and_clients(&server, &alice, base, dir);
    char ep[128], listen[160], key[600], clients[600];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", free_port());
    snprintf(listen, sizeof listen, "SYNCTOP_LISTEN=%s", ep);
    snprintf(key, sizeof key, "SYNCTOP_CURVE_KEY=%s.key", base);
    snprintf(clients, sizeof clients, "SYNCTOP_CURVE_CLIENTS=%s", dir);
    const char *env[] = {listen, key, clients, "SYNCTOP_START_WAIT_MS=20000", NULL};

    tp_sub *unlisted = curve_sub(ep, server.public_key, &bob), *anon = curve_sub(ep, server.public_key, NULL);
    pid_t pid = start_harness(step_script(), env);
    ASSERT_UEQ(wait_refused(unlisted), 0);
    ASSERT_UEQ(wait_refused(anon), 0);
    ASSERT(tp_sub_client_refused(unlisted));
    ASSERT(tp_sub_client_refused(anon));
    tp_sub *listed = curve_sub(ep, server.public_key, &alice);
    receive_whole_program(listed, pid);
    tp_sub_stats st;
    tp_sub_stats_get(unlisted, &st);
    ASSERT_UEQ(st.received, 0);
    tp_sub_destroy(&listed);
    tp_sub_destroy(&unlisted);
    tp_sub_destroy(&anon);

    /* A list that cannot be read admits nobody: one line, and no tracing. */
    snprintf(clients, sizeof clients, "SYNCTOP_CURVE_CLIENTS=%s", task_path("no-such-list"));
    ASSERT_EQ(run_harness("context_create 1\ncontext_destroy 1\n", env), 0);
    char *errtxt = read_text(task_path("err.txt"));
    ASSERT_STR_CONTAINS(errtxt, "synctop: not tracing: SYNCTOP_CURVE_CLIENTS:");
    ASSERT_STR_CONTAINS(errtxt, "no-such-list");
    ASSERT_EQ(strchr(errtxt, '\n') - errtxt + 1, (int64_t)strlen(errtxt));
    free(errtxt);
}

TEST(tracer_refuses_to_publish_beyond_this_machine_in_the_clear) {
    /* A non-loopback address without keys: one line saying why and what to do; the program runs
     * on untraced. A public key alone is not enough to publish either. */
    char listen[160];
    snprintf(listen, sizeof listen, "SYNCTOP_LISTEN=tcp://0.0.0.0:%d", free_port());
    const char *env[] = {listen, NULL};
    ASSERT_EQ(run_harness("context_create 1\ncall domain=rt cbid=131 wait=500000 site=1\n"
                          "context_destroy 1\n",
                          env),
              0);
    char *out = read_text(task_path("out.txt"));
    char *err = read_text(task_path("err.txt"));
    ASSERT_STR_CONTAINS(out, "harness: program done");
    ASSERT_STR_CONTAINS(err, "synctop: not tracing");
    ASSERT_STR_CONTAINS(err, "synctop keygen");
    ASSERT_EQ(strchr(err, '\n') - err + 1, (int64_t)strlen(err));
    free(out);
    free(err);

    tp_keypair kp;
    err_msg e = {{0}};
    ASSERT_OK(tp_keypair_new(&kp, &e));
    char base[512], key[600];
    snprintf(base, sizeof base, "%s", task_path("pubonly"));
    ASSERT_OK(tp_keypair_save(&kp, base, &e));
    snprintf(key, sizeof key, "SYNCTOP_CURVE_KEY=%s.pub", base);
    const char *env2[] = {listen, key, NULL};
    ASSERT_EQ(run_harness("context_create 1\ncontext_destroy 1\n", env2), 0);
    err = read_text(task_path("err.txt"));
    ASSERT_STR_CONTAINS(err, "synctop: not tracing");
    ASSERT_STR_CONTAINS(err, "secret key");
    free(err);
}

#endif
