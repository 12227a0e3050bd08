/*
 * The viewer end to end, the way a person sees it: `synctop replay` and `synctop attach` run in a
 * tmux pane on a private tmux server; keys are sent with send-keys and the screen is read with
 * capture-pane. No timing assertions: every check polls the screen until the expected text shows
 * up, with a generous timeout as the failure guard.
 */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "synctop/file.h"
#include "synctop/net.h"
#include "synth.h"
#include "task.h"

#define WAIT_S 20.0

static char sock[64];

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs a shell command, returns its stdout (static buffer). */
static const char *sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *sh(const char *fmt, ...) {
    static char out[1 << 16];
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    FILE *p = popen(cmd, "r");
    ASSERT_NOT_NULL(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    pclose(p);
    return out;
}

static int have_tmux(void) { return system("tmux -V >/dev/null 2>&1") == 0; }

static void tmux_stop(void) {
    if (sock[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "tmux -L %s kill-server >/dev/null 2>&1", sock);
        if (system(cmd) != 0) {
            /* already gone */
        }
    }
}

static void on_abort(int sig);

static void tmux_start(const char *cmdline, int w, int h) {
    /* a server of its own per session: a second one never races the first one's shutdown */
    static int sessions;
    snprintf(sock, sizeof sock, "synctop-test-%ld-%d", (long)getpid(), sessions);
    if (sessions++ == 0) {
        atexit(tmux_stop);
        signal(SIGABRT, on_abort); /* a failed check aborts: no server is left behind */
    }
    const char *supp = task_path("lsan.supp");
    FILE *f = fopen(supp, "w");
    ASSERT_NOT_NULL(f);
    /* ncurses keeps its terminal description and screen buffers until exit, by design. libzmq
     * 4.3.4 (Debian 12) now and then loses a connection's metadata (its I/O thread's
     * stream_engine_base_t::mechanism_ready allocates it) when a socket with a monitor closes
     * under load; the viewer's own ZeroMQ use is checked by the in-process transport tests. */
    fputs("leak:libncursesw\nleak:libtinfo\nleak:libncurses\nleak:libzmq.so\n", f);
    fclose(f);
    const char *out = sh("tmux -L %s -f /dev/null new-session -d -x %d -y %d "
                         "\"env LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=screen-256color LSAN_OPTIONS=suppressions=%s:fast_unwind_on_malloc=0 "
                         "%s; echo EXITED rc=\\$?; sleep 60\" 2>&1 && echo started",
                         sock, w, h, supp, cmdline);
    ASSERT_STR_CONTAINS(out, "started");
}

static const char *capture(void) { return sh("tmux -L %s capture-pane -p 2>&1", sock); }

static void keys(const char *k) { sh("tmux -L %s send-keys %s", sock, k); }

/* Polls the pane until it shows needle; returns the screen. */
static const char *wait_for(const char *needle) {
    double t0 = now_s();
    const char *scr;
    while (strstr(scr = capture(), needle) == NULL) {
        if (now_s() - t0 > WAIT_S)
            TASK_FAIL_("waited %.0f s for \"%s\"; the pane shows:\n%s", WAIT_S, needle, scr);
        usleep(50000);
    }
    return scr;
}

static void wait_gone(const char *needle) {
    double t0 = now_s();
    const char *scr;
    while (strstr(scr = capture(), needle) != NULL) {
        if (now_s() - t0 > WAIT_S)
            TASK_FAIL_("waited %.0f s for \"%s\" to go; the pane shows:\n%s", WAIT_S, needle, scr);
        usleep(50000);
    }
}

static const char *line_with(const char *scr, const char *needle, char *buf, size_t n) {
    const char *p = strstr(scr, needle);
    if (p == NULL)
        return NULL;
    while (p > scr && p[-1] != '\n')
        p--;
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len >= n)
        len = n - 1;
    memcpy(buf, p, len);
    buf[len] = '\0';
    return buf;
}

static size_t utf8_len(const char *s) {
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static const char *synth_trace(size_t events) {
    const char *path = task_path("synth.trace");
    err_msg err = {{0}};
    tp_fwriter *w = tp_fwriter_open(path, TP_FW_OVERWRITE, &err);
    ASSERT_NOT_NULL(w);
    synth sy;
    synth_init(&sy, 11);
    tp_enc *enc = tp_enc_new(NULL);
    tp_buf out = {0};
    for (size_t done = 0; done < events; done += 1000) {
        synth_fill(&sy, enc, 1000);
        ASSERT_OK(tp_enc_finish(enc, &out));
        tp_enc_delivered(enc, 1);
        ASSERT_OK(tp_fwriter_append(w, out.data, out.len, &err));
    }
    ASSERT_OK(tp_fwriter_close(&w, &err));
    tp_buf_free(&out);
    tp_enc_destroy(&enc);
    return path;
}

/* Several profiler traces, one per rank, on one timeline: replay takes what report takes. */
TEST(replay_in_tmux_takes_several_ranks) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s replay %s/sampled_rank-0.json.gz %s/sampled_rank-1.json.gz", task_synctop(),
             KINETO_TRACE_DIR, KINETO_TRACE_DIR);
    tmux_start(cmd, 120, 40);
    const char *scr = wait_for("REPLAY");
    ASSERT_STR_CONTAINS(scr, "rank 0/128 (+1 more)");
    ASSERT_STR_CONTAINS(scr, "r1:GPU1"); /* the second rank's GPU has its own lanes, named by its rank */
    /* the cursor starts on rank 0's row: c folds it into that row, C opens it again */
    keys("c");
    scr = wait_for("\xe2\x96\xb8r0 ");
    /* folded: rank 1's row follows rank 0's at once, and none of rank 0's lanes is left (its GPU's
     * lane, not the header's "r0:GPU0 [", and its thread; both streams 7 and 203 are rank 1's too) */
    const char *r0 = strstr(scr, "\xe2\x96\xb8r0 "), *nl = r0 != NULL ? strchr(r0, '\n') : NULL;
    if (nl == NULL || strncmp(nl + 1, "\xe2\x96\xber1 ", 6) != 0 || strstr(scr, "r0:GPU0    ") != NULL ||
        strstr(scr, "r0:T4037") != NULL)
        TASK_FAIL_("rank 0's lanes are still shown after c:\n%s", scr);
    keys("C");
    wait_for("r0:T4037");
    /* b: the idle breakdown for the window, with HTA's per stream */
    keys("b");
    scr = wait_for("HTA, WHOLE RUN");
    ASSERT_STR_CONTAINS(scr, "GPU IDLE, VIEW");
    ASSERT_STR_CONTAINS(scr, "r1:GPU1");
    keys("q");
    scr = wait_for("EXITED");
    ASSERT_STR_CONTAINS(scr, "EXITED rc=0");
}

/* `report` on a terminal says how far it has read while it reads, and takes the line away before
 * the report: a profiler trace given through a pipe that stops twice (after 5 MB for two seconds,
 * after 6 MB for four), so the reading lasts past the half second before the bar shows, however
 * slowly the command starts; the first 5 MB are more than the importer's threads hold in flight
 * (2 MiB), so its reading has come past the first MB when the pipe stops. From a pipe the bar says
 * only how much it read: at least that first MB, at most the 6 MB written before the long pause. */
TEST(report_on_a_terminal_says_how_far_it_read_then_clears_the_line) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    char plain[PATH_MAX], out[PATH_MAX], direct[PATH_MAX], script[PATH_MAX];
    snprintf(plain, sizeof plain, "%s", task_path("resnet.json"));
    snprintf(out, sizeof out, "%s", task_path("report.txt"));
    snprintf(direct, sizeof direct, "%s", task_path("direct.txt"));
    snprintf(script, sizeof script, "%s", task_path("trickle.sh"));
    sh("zcat '%s/resnet_2080ti_two_threads.json.gz' > '%s'", KINETO_TRACE_DIR, plain);
    sh("'%s' report '%s' > '%s' 2>&1", task_synctop(), plain, direct);
    FILE *f = fopen(script, "w");
    ASSERT_NOT_NULL(f);
    fprintf(f,
            "{ head -c 5000000 '%s'; sleep 2; head -c 6000000 '%s' | tail -c 1000000; sleep 4; tail -c +6000001 '%s'; }"
            " | '%s' report - > '%s'\n",
            plain, plain, plain, task_synctop(), out);
    fclose(f);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "sh '%s'", script);
    tmux_start(cmd, 120, 10);
    const char *scr = wait_for("reading 1/1 ");
    char line[512];
    ASSERT_NOT_NULL(line_with(scr, "reading 1/1 ", line, sizeof line));
    double mb = 0;
    if (sscanf(strstr(line, "reading 1/1 ") + strlen("reading 1/1 "), "%lf MB -", &mb) != 1 || mb < 1.0 ||
        mb > 6.0 || strchr(line, '%') != NULL || strstr(line, " MB -") == NULL)
        TASK_FAIL_("the bar should say between 1.0 and 6.0 MB read from -, and no share: %s", line);
    scr = wait_for("EXITED");
    ASSERT_STR_CONTAINS(scr, "EXITED rc=0");
    if (strstr(scr, "reading") != NULL)
        TASK_FAIL_("the bar was left on the screen:\n%s", scr);
    /* the whole trace came through: the report is the one of the file read directly */
    char *piped = task_slurp(out), *whole = task_slurp(direct);
    const char *p = strchr(piped, '\n'), *w = strchr(whole, '\n');
    ASSERT_STR_CONTAINS(piped, "synctop report: -\n");
    ASSERT_NOT_NULL(p);
    ASSERT_NOT_NULL(w);
    ASSERT_STR_CONTAINS(w, "kernels ");
    if (strcmp(p, w) != 0)
        TASK_FAIL_("the piped report differs from the direct one:\n%s\n---\n%s", piped, whole);
    free(piped);
    free(whole);
}

/* export on a terminal: a bar says how far the writing has come and is taken off the screen at
 * the end; when the writing fails (its reader went away), the error is said on a line of its own,
 * with no bar left on the screen. The output goes to a pipe read slowly at first (100 KB every
 * 50 ms), so that the bar shows (from half a second) whatever the build's speed. */
TEST(export_on_a_terminal_says_how_far_it_wrote_and_its_error_on_a_line_of_its_own) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    const char *trace = synth_trace(100000);
    char script[PATH_MAX], cmd[PATH_MAX + 16];
    snprintf(script, sizeof script, "%s", task_path("slow.sh"));
    for (int fail = 0; fail <= 1; fail++) {
        FILE *f = fopen(script, "w");
        ASSERT_NOT_NULL(f);
        /* SIGPIPE ignored, as a shell script's caller may leave it: the write fails with EPIPE */
        fprintf(f,
                "trap '' PIPE\n'%s' export '%s' -o - | { for i in $(seq 30); do head -c 100000 >/dev/null; "
                "sleep 0.05; done; %s }\n",
                task_synctop(), trace, fail ? "" : "cat >/dev/null;");
        fclose(f);
        snprintf(cmd, sizeof cmd, "sh '%s'", script);
        tmux_start(cmd, 160, 10);
        char line[512];
        const char *scr = wait_for("writing 1/1 [");
        ASSERT_NOT_NULL(line_with(scr, "writing 1/1 [", line, sizeof line));
        ASSERT_STR_CONTAINS(line, "M events -");
        scr = wait_for("EXITED");
        ASSERT_STR_CONTAINS(scr, "EXITED rc=0"); /* the pipe's: its reader's */
        if (strstr(scr, "writing") != NULL)
            TASK_FAIL_("the bar was left on the screen:\n%s", scr);
        const char *said = "synctop export: cannot write -: Broken pipe";
        if (fail && (line_with(scr, said, line, sizeof line) == NULL || strncmp(line, said, strlen(said)) != 0))
            TASK_FAIL_("the error should be on a line of its own:\n%s", scr);
        if (!fail && strstr(scr, "synctop export:") != NULL)
            TASK_FAIL_("a whole export said something:\n%s", scr);
        tmux_stop();
    }
}

/* A real training loop (30 ResNet steps) and a real inference trace with Python stacks: the keys of
 * the stalls panel and the steps, typed as a user would. */
TEST(replay_in_tmux_real_traces_steps_sort_cause_and_frames) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s replay %s/resnet_2080ti_two_threads.json.gz", task_synctop(), KINETO_TRACE_DIR);
    tmux_start(cmd, 160, 48);
    const char *scr = wait_for("REPLAY");
    /* the causes, as report names them */
    wait_for("pageable  aten::to in cudaMemcpyAsync");
    ASSERT_STR_CONTAINS(scr = capture(), "alloc     aten::conv2d in cudaFree");
    /* > sorts by the longest stall */
    keys("'>'");
    wait_for("stalls by longest stall");
    /* } goes to the first slow step after the cursor; t narrows the panel to it */
    keys("g '}'");
    wait_for(", slow (median");
    keys("t");
    scr = wait_for(" only; t: all)");
    keys("t");
    wait_for("stalls of the whole run");
    /* search: counted */
    keys("/ c u d a F r e e Enter");
    wait_for(" of ");
    /* the steps found by their heartbeat (the DataLoader's __next__) */
    ASSERT_STR_CONTAINS(capture(), " steps (beat)");
    keys("q");
    scr = wait_for("EXITED");
    ASSERT_STR_CONTAINS(scr, "EXITED rc=0");
    sh("tmux -L %s kill-server", sock);
    /* --step names the range that marks the steps, as for report */
    snprintf(cmd, sizeof cmd, "%s replay --step Optimizer.step#SGD.step %s/resnet_2080ti_two_threads.json.gz",
             task_synctop(), KINETO_TRACE_DIR);
    tmux_start(cmd, 160, 48);
    wait_for(" steps (range)");
    keys("q");
    wait_for("EXITED rc=0");
    sh("tmux -L %s kill-server", sock);
    /* the hidden `if tensor:` in transformers, named by its line and op; Enter shows its frames */
    snprintf(cmd, sizeof cmd, "%s replay %s/qwen_h100_with_stack.json.gz", task_synctop(), KINETO_TRACE_DIR);
    tmux_start(cmd, 160, 48);
    wait_for("if tensor transformers/modeling_attn_mask_utils.py:243 _ignore_causal_mask_sdpa [aten::is_nonzero]");
    keys("Tab j j i Enter");
    scr = wait_for(" > #3 py  transformers/modeling_attn_mask_utils.py:243");
    ASSERT_STR_CONTAINS(scr, "#0 op  aten::_local_scalar_dense");
    keys("q");
    scr = wait_for("EXITED");
    ASSERT_STR_CONTAINS(scr, "EXITED rc=0");
}

/* What kineto_expected.py --ranges reads in a trace's JSON about its rows called name: the
 * (first) thread's count of ranges and depths, and the rows holding the first one ("a>b>name"). */
static void json_ranges(const char *trace, const char *name, unsigned long *count, unsigned long *depths,
                        unsigned long *matches, char *chain, size_t cap) {
    char cmd[4096], line[4096];
    snprintf(cmd, sizeof cmd, "python3 '%s' --ranges '%s' '%s/%s'", KINETO_EXPECTED, name, KINETO_TRACE_DIR, trace);
    FILE *p = popen(cmd, "r");
    ASSERT_NOT_NULL(p);
    unsigned long tid, d;
    *count = *depths = *matches = 0;
    chain[0] = '\0';
    while (fgets(line, sizeof line, p)) {
        if (*count == 0)
            sscanf(line, "thread %lu %lu depths %lu", &tid, count, depths);
        sscanf(line, "matches %lu", matches);
        if (sscanf(line, "depth %lu ", &d) == 1 && strchr(line, ' ') && strchr(strchr(line, ' ') + 1, ' ')) {
            snprintf(chain, cap, "%s", strchr(strchr(line, ' ') + 1, ' ') + 1);
            chain[strcspn(chain, "\n")] = '\0';
        }
    }
    ASSERT_EQ(pclose(p), 0);
    ASSERT(*count > 0 && *depths > 0 && *matches > 0 && chain[0]);
}

/* The profiler's operators under their thread: one row ("ranges") until o opens a row per depth,
 * as many as the JSON's rows nest (kineto_expected.py), the outermost row's name on depth 0; o
 * closes them again. */
TEST(replay_opens_a_threads_operators_by_depth) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    unsigned long count, depths, matches;
    char chain[4096], cmd[4096], want[256], buf[512];
    json_ranges("qwen_h100_with_stack.json.gz", "aten::item", &count, &depths, &matches, chain, sizeof chain);
    snprintf(cmd, sizeof cmd, "%s replay %s/qwen_h100_with_stack.json.gz", task_synctop(), KINETO_TRACE_DIR);
    tmux_start(cmd, 160, 60);
    const char *scr = wait_for("REPLAY");
    wait_for("top stall 1");
    ASSERT(strstr(capture(), "depth 0") == NULL);
    /* rows: GPU0, stream 7, its ranges, the thread, the thread's ranges */
    keys("j j j j o");
    snprintf(want, sizeof want, "ranges by depth: %lu rows (o closes)", depths);
    scr = wait_for(want);
    for (unsigned long d = 0; d < depths; d++) {
        snprintf(want, sizeof want, "   depth %lu ", d);
        ASSERT_STR_CONTAINS(scr, want);
    }
    snprintf(want, sizeof want, "   depth %lu ", depths);
    if (strstr(scr, want) != NULL)
        TASK_FAIL_("a row deeper than the JSON nests:\n%s", scr);
    /* depth 0 holds the outermost row of the chain around aten::item */
    chain[strcspn(chain, ">")] = '\0';
    ASSERT_NOT_NULL(line_with(scr, "   depth 0 ", buf, sizeof buf));
    ASSERT_STR_CONTAINS(buf, chain);
    /* / finds the operators, counted as the JSON counts them; the cursor's line names the one found */
    keys("/ 'aten::item' Enter");
    snprintf(want, sizeof want, "found \"aten::item\": 1 of %lu", matches);
    scr = wait_for(want);
    ASSERT_STR_CONTAINS(scr, "\n op  aten::item"); /* the cursor's line, not a frame */
    keys("o");
    wait_for("ranges in one row (o opens them by depth)");
    wait_gone("   depth 0 ");
    keys("q");
    wait_for("EXITED rc=0");
}

/* A stall's detail pane names the operator it sits in (the innermost row of the JSON that holds
 * the blocking call, as kineto_expected.py finds it) and its depth; r goes there, and again to the
 * row around that (aten::item's own row, at the depth the JSON nests it). */
TEST(replay_stall_detail_names_its_operator_and_r_goes_there) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    char cmd[4096], line[4096], op[512] = "", want[1024];
    unsigned long op_depth = 0, item_depth = 0;
    snprintf(cmd, sizeof cmd, "python3 '%s' --ranges aten::item '%s/qwen_h100_with_stack.json.gz'", KINETO_EXPECTED,
             KINETO_TRACE_DIR);
    FILE *p = popen(cmd, "r");
    ASSERT_NOT_NULL(p);
    while (fgets(line, sizeof line, p)) {
        sscanf(line, "call cudaStreamSynchronize %500s %lu", op, &op_depth);
        sscanf(line, "depth %lu", &item_depth);
    }
    ASSERT_EQ(pclose(p), 0);
    ASSERT(op[0] != '\0');
    snprintf(cmd, sizeof cmd, "%s replay %s/qwen_h100_with_stack.json.gz", task_synctop(), KINETO_TRACE_DIR);
    tmux_start(cmd, 160, 48);
    wait_for("if tensor transformers/modeling_attn_mask_utils.py:243 _ignore_causal_mask_sdpa [aten::is_nonzero]");
    keys("Tab j j i Enter");
    wait_for("BLOCKING call  cudaStreamSynchronize");
    snprintf(want, sizeof want, " in %s (depth %lu of the thread's ranges; r goes there)", op, op_depth);
    wait_for(want);
    keys("r");
    snprintf(want, sizeof want, "in %s, depth %lu (r again: the range around it)", op, op_depth);
    snprintf(line, sizeof line, "\n op  %s", op);
    ASSERT_STR_CONTAINS(wait_for(want), line);
    keys("r");
    snprintf(want, sizeof want, "in aten::item, depth %lu (r again", item_depth);
    wait_for(want);
    keys("q");
    wait_for("EXITED rc=0");
}

/* An Nsight Systems export's NVTX ranges the same way: / finds one (as many as the table holds),
 * the detail pane names the range it sits in and that one's depth, and o opens its thread's
 * ranges into as many rows as they nest (tests/tmux/nvtx_expected.py reads the table with SQL). */
TEST(replay_nsys_nvtx_ranges_nest_and_are_found) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    const char *name = "ReductionScheduler::schedule";
    char cmd[4096], line[1024], holder[512] = "", want[1024];
    unsigned long count = 0, holder_depth = 0, depths = 0;
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s/nvfuser_h200_benchmark.sqlite' '%s'", NVTX_EXPECTED, NSYS_TRACE_DIR,
             name);
    FILE *p = popen(cmd, "r");
    ASSERT_NOT_NULL(p);
    while (fgets(line, sizeof line, p)) {
        sscanf(line, "ranges %lu", &count);
        sscanf(line, "holder %500s %lu", holder, &holder_depth);
        sscanf(line, "depths %lu", &depths);
    }
    ASSERT_EQ(pclose(p), 0);
    ASSERT(count > 0 && holder[0] && depths > 1);
    snprintf(cmd, sizeof cmd, "%s replay %s/nvfuser_h200_benchmark.sqlite", task_synctop(), NSYS_TRACE_DIR);
    tmux_start(cmd, 200, 60);
    wait_for("REPLAY");
    snprintf(cmd, sizeof cmd, "/ '%s' Enter", name);
    keys(cmd);
    snprintf(want, sizeof want, "found \"%s\": 1 of %lu", name, count);
    const char *scr = wait_for(want);
    snprintf(want, sizeof want, "range  %s", name);
    ASSERT_STR_CONTAINS(scr, want);
    snprintf(want, sizeof want, " in %s (depth %lu of the thread's ranges; r goes there)", holder, holder_depth);
    ASSERT_STR_CONTAINS(scr, want);
    keys("o");
    snprintf(want, sizeof want, "ranges by depth: %lu rows", depths < 32 ? depths : 32);
    wait_for(want);
    keys("q");
    wait_for("EXITED rc=0");
}

/* A thread with NVTX ranges and no CUDA calls has no row of its own: its ranges row names it, where
 * a search for a range of its lands. */
TEST(replay_nsys_ranges_of_a_thread_without_calls_name_the_thread) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    char cmd[4096], line[1024];
    snprintf(cmd, sizeof cmd, "%s replay %s/nvfuser_h200_benchmark.sqlite", task_synctop(), NSYS_TRACE_DIR);
    tmux_start(cmd, 200, 50);
    wait_for("REPLAY");
    keys("/ 'ExecutorDispatch::compile2' Enter");
    const char *scr = wait_for("found \"ExecutorDispatch::compile2\"");
    ASSERT_STR_CONTAINS(scr, " thread 51306 ");
    ASSERT_NOT_NULL(line_with(scr, ":T51306 ranges ", line, sizeof line));
    ASSERT_NOT_NULL(line_with(scr, ":T51313 ranges ", line, sizeof line));
    keys("q");
    wait_for("EXITED rc=0");
}

/* Played to its end, a replay shows itself paused there. */
TEST(replay_played_to_its_end_shows_paused) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s replay %s/sampled_rank-0.json.gz", task_synctop(), KINETO_TRACE_DIR);
    tmux_start(cmd, 160, 40);
    wait_for("REPLAY \xe2\x8f\xb8 1x"); /* ⏸: it opens showing it all */
    keys("[ [ [ [ [ [");
    wait_for("REPLAY \xe2\x8f\xb8 0.016x");
    keys("Space"); /* slow enough to see it play */
    wait_for("REPLAY \xe2\x96\xb6 0.016x"); /* ▶ */
    keys("] ] ] ] ] ] ] ] ] ]");
    wait_for("REPLAY \xe2\x8f\xb8 16x");
    keys("q");
    wait_for("EXITED rc=0");
}

/* n and N walk the operators a search found, as in less, in the order and number of the JSON. */
TEST(replay_search_walks_the_profilers_operators) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    unsigned long count, depths, matches;
    char chain[4096], cmd[4096], want[256];
    json_ranges("resnet_2080ti_two_threads.json.gz", "aten::copy_", &count, &depths, &matches, chain, sizeof chain);
    ASSERT(matches >= 3);
    snprintf(cmd, sizeof cmd, "%s replay %s/resnet_2080ti_two_threads.json.gz", task_synctop(), KINETO_TRACE_DIR);
    tmux_start(cmd, 160, 48);
    wait_for("top stall 1");
    keys("g / 'aten::copy_' Enter");
    snprintf(want, sizeof want, "found \"aten::copy_\": 1 of %lu;", matches);
    ASSERT_STR_CONTAINS(wait_for(want), "\n op  aten::copy_");
    keys("n");
    snprintf(want, sizeof want, "found \"aten::copy_\": 2 of %lu;", matches);
    wait_for(want);
    keys("N N");
    snprintf(want, sizeof want, "found \"aten::copy_\": %lu of %lu (wrapped to the end)", matches, matches);
    wait_for(want);
    keys("q");
    wait_for("EXITED rc=0");
}

/* Two batches of a trace file damaged by hand: replay skips them, its title counts them beside the
 * drops, and the exit says so. */
TEST(replay_of_a_damaged_file_counts_the_damage_in_the_title_and_at_exit) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    const char *trace = synth_trace(20000);
    err_msg err = {{0}};
    tp_freader *r = tp_freader_open(trace, &err);
    ASSERT_NOT_NULL(r);
    ASSERT_EQ(tp_freader_count(r), 20);
    uint64_t at[2] = {tp_freader_entry(r, 5)->offset + tp_freader_entry(r, 5)->size / 2,
                      tp_freader_entry(r, 12)->offset + tp_freader_entry(r, 12)->size / 2};
    tp_freader_close(&r);
    int fd = open(trace, O_RDWR);
    ASSERT(fd >= 0);
    for (int i = 0; i < 2; i++) {
        unsigned char junk[16];
        ASSERT_EQ(pread(fd, junk, sizeof junk, (off_t)at[i]), (ssize_t)sizeof junk);
        for (size_t k = 0; k < sizeof junk; k++)
            junk[k] ^= 0x5a;
        ASSERT_EQ(pwrite(fd, junk, sizeof junk, (off_t)at[i]), (ssize_t)sizeof junk);
    }
    close(fd);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s replay %s", task_synctop(), trace);
    tmux_start(cmd, 160, 40);
    /* the two are also gaps in the producer's batch sequence: drops */
    const char *scr = wait_for("damaged 2 REPLAY");
    ASSERT_STR_CONTAINS(scr, "drops 2 batches + 0 records  damaged 2");
    keys("q");
    wait_for("EXITED");
    scr = sh("tmux -L %s capture-pane -p -J 2>&1", sock); /* the warning's wrapped lines joined */
    ASSERT_STR_CONTAINS(scr, "payload checksum mismatch (2 damaged batches in all;");
    ASSERT_STR_CONTAINS(scr, "EXITED rc=0");
}

TEST(replay_in_tmux_zoom_stall_help_resize_quit) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    const char *trace = synth_trace(20000);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s replay %s", task_synctop(), trace);
    tmux_start(cmd, 120, 40);
    wait_for("REPLAY");
    wait_gone(" loading "); /* the file is read in steps while the first screens show */
    const char *scr = capture();
    ASSERT_STR_CONTAINS(scr, "python train.py --epochs 3");
    ASSERT_STR_CONTAINS(scr, "stream 7");
    ASSERT_STR_CONTAINS(scr, "T4242 python");
    /* G reveals everything; the stalls panel fills in */
    keys("G");
    wait_for("train.py:42 train_step");
    /* zoom: the window width on the ruler shrinks */
    char before[512], after[512];
    scr = capture();
    ASSERT_NOT_NULL(line_with(scr, "\xe2\x86\x94", before, sizeof before));
    keys("+ +");
    double t0 = now_s();
    for (;;) {
        scr = capture();
        if (line_with(scr, "\xe2\x86\x94", after, sizeof after) && strcmp(before, after) != 0)
            break;
        if (now_s() - t0 > WAIT_S)
            TASK_FAIL_("zoom did not change the ruler:\n%s", scr);
        usleep(50000);
    }
    /* back to the whole trace, cursor to the left edge, next stall: the key bar names it, the detail
     * line shows the call; the focus stays on the timeline */
    keys("0 Home n");
    scr = wait_for("stall 251");
    wait_for("BLOCKING call");
    if (strstr(scr, "TOP STALLS") != NULL)
        TASK_FAIL_("n moved the focus to the stalls panel:\n%s", scr);
    /* the selected call site's stalls, worst first, counted */
    keys("i");
    wait_for("stall 1/");
    /* m marks the stall's span, f fits the window to it: the ruler carries its duration */
    keys("m");
    scr = wait_for("marked cudaStreamSynchronize: 251.0");
    keys("f");
    t0 = now_s();
    for (;;) {
        char ruler[512];
        scr = capture();
        if (line_with(scr, "\xe2\x86\x94", ruler, sizeof ruler) && strstr(ruler, " 251.0\xc2\xb5s ") &&
            strstr(ruler, "\xe2\x95\x90\xe2\x95\x90\xe2\x95\x90\xe2\x95\x90"))
            break;
        if (now_s() - t0 > WAIT_S)
            TASK_FAIL_("f and m did not show the marked stall on the ruler:\n%s", scr);
        usleep(50000);
    }
    /* help */
    keys("?");
    wait_for("synctop help");
    keys("Escape");
    wait_gone("synctop help");
    /* resize: the screen follows the new width */
    sh("tmux -L %s resize-window -x 90 -y 30", sock);
    t0 = now_s();
    for (;;) {
        scr = capture();
        char ruler[512];
        if (line_with(scr, "\xe2\x86\x94", ruler, sizeof ruler) && utf8_len(ruler) == 90 && strstr(scr, "Help"))
            break;
        if (now_s() - t0 > WAIT_S)
            TASK_FAIL_("no 90-column screen after the resize:\n%s", scr);
        usleep(50000);
    }
    sh("tmux -L %s resize-window -x 70 -y 20", sock);
    wait_for("terminal too small");
    sh("tmux -L %s resize-window -x 120 -y 40", sock);
    wait_for("REPLAY");
    /* quit: the process is gone, with a clean exit (sanitizers included) */
    keys("q");
    scr = wait_for("EXITED");
    ASSERT_STR_CONTAINS(scr, "EXITED rc=0");
}

#ifdef INJECT_TARGET
/* The names of the threads of process pid that are the tracer's ("synctop-..."): how many. */
static int tracer_threads(pid_t pid) {
    return atoi(sh("cat /proc/%d/task/*/comm 2>/dev/null | grep -c '^synctop-'", (int)pid));
}

/* `synctop attach PID` on a running program without a tracer, in the viewer: it asks nothing with
 * --yes, loads and starts the tracer, shows the program live, and when the viewer quits stops it
 * again: no thread of the tracer's is left, the program goes on. */
TEST(attach_pid_loads_the_tracer_and_quitting_stops_it) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    char stop[512], out[512], err[512];
    snprintf(stop, sizeof stop, "%s", task_path("target.stop"));
    snprintf(out, sizeof out, "%s", task_path("target.out"));
    snprintf(err, sizeof err, "%s", task_path("target.err"));
    setenv("SYNCTOP_STANDIN", STANDIN_SO, 1);
    setenv("SYNCTOP_CUPTI", STANDIN_SO, 1);
    setenv("SYNCTOP_STANDIN_DRIVER", DRIVER_SO, 1);
    setenv("SYNCTOP_FLUSH_MS", "5", 1);
    const char *argv[] = {INJECT_TARGET, "run", stop, NULL};
    pid_t target = task_spawn(argv, out, err);
    double t0 = now_s();
    while (strstr(sh("cat %s 2>/dev/null", out), "ready") == NULL) {
        if (now_s() - t0 > WAIT_S)
            TASK_FAIL_("the target did not start: %s", sh("cat %s", err));
        usleep(20000);
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s attach %d --yes", task_synctop(), (int)target);
    tmux_start(cmd, 120, 40);
    const char *scr = wait_for("LIVE");
    scr = wait_for("inject_target run");
    scr = wait_for("FakeH100"); /* its GPU, named by the driver: CUPTI's record came before the tracer */
    ASSERT(tracer_threads(target) >= 1);
    keys("q");
    scr = wait_for("EXITED");
    ASSERT_STR_CONTAINS(scr, "stopped the tracer in process");
    ASSERT_STR_CONTAINS(scr, "EXITED rc=0");
    ASSERT_EQ(tracer_threads(target), 0);
    int fd = open(stop, O_WRONLY | O_CREAT, 0600);
    ASSERT(fd >= 0);
    close(fd);
    ASSERT_EQ(task_wait_exit(target, 60), 0);
    ASSERT_STR_CONTAINS(sh("cat %s", out), "iterations=");
}
#endif

TEST(attach_in_tmux_shows_a_live_publisher) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    char ep[512];
    snprintf(ep, sizeof ep, "ipc://%s", task_path("pub.sock"));
    /* a publisher that keeps sending for a while */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "exec %s --endpoint %s --events 400000 --rate 20000 --batch 200 --wait-subscribers 1",
             TESTPUB, ep);
    pid_t pub = fork();
    ASSERT(pub >= 0);
    if (pub == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    snprintf(cmd, sizeof cmd, "%s attach %s", task_synctop(), ep);
    tmux_start(cmd, 120, 40);
    const char *scr = wait_for("LIVE");
    scr = wait_for("stream 7");
    ASSERT_STR_CONTAINS(scr, "python train.py --epochs 3");
    /* events keep arriving: the count in the title changes */
    char a[512], b[512];
    ASSERT_NOT_NULL(line_with(scr, " ev ", a, sizeof a));
    double t0 = now_s();
    for (;;) {
        scr = capture();
        if (line_with(scr, " ev ", b, sizeof b) && strcmp(a, b) != 0 && strstr(b, " 0 ev/s") == NULL)
            break;
        if (now_s() - t0 > WAIT_S)
            TASK_FAIL_("no new events shown:\n%s", scr);
        usleep(100000);
    }
    wait_for("train.py:");
    keys("q");
    scr = wait_for("EXITED");
    ASSERT_STR_CONTAINS(scr, "EXITED rc=0");
    kill(pub, SIGKILL);
    waitpid(pub, NULL, 0);
}

TEST(run_in_tmux_shows_the_program_live) {
#ifndef SYNCTOP_HAVE_TRACER
    TASK_FAIL_("built without the tracer: this case should have been disabled");
#else
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    /* A program (the harness over the stand-in CUPTI, built as CUDA programs usually are: PIE, no
     * exported symbols, the CUDA runtime's frames in the program) that blocks three times at one
     * call site and prints a line of its own: the view shows its waits, named after the source
     * line (looked up by the analysis thread), and its output goes to the log. */
    const char *script = task_path("run.script");
    FILE *f = fopen(script, "w");
    ASSERT_NOT_NULL(f);
    fputs("context_create 1\n"
          "x3@0 call domain=rt cbid=131 wait=500000 site=4\n"
          "x20@1000 kernel name=k start=1000 end=1500 corr=1\n"
          "context_destroy 1\n",
          f);
    fclose(f);
    char cmd[4096];
    const char *trace = task_path("run.trace");
    snprintf(cmd, sizeof cmd, "SYNCTOP_STANDIN=%s SYNCTOP_CUPTI=%s %s run --record %s -- %s %s", STANDIN_SO,
             STANDIN_SO, task_synctop(), trace, HARNESS_PLAIN, script);
    tmux_start(cmd, 120, 40);
    const char *scr = wait_for("ENDED");
    scr = wait_for("host blocked 1.50ms");
    /* the line of the harness that holds "// @site4" */
    FILE *src = fopen(HARNESS_SRC, "r");
    ASSERT_NOT_NULL(src);
    char text[512], want[128];
    int ln = 0, at = 0;
    while (at == 0 && fgets(text, sizeof text, src) != NULL)
        if (++ln > 0 && strstr(text, "// @site4\n") != NULL)
            at = ln;
    fclose(src);
    ASSERT(at > 0);
    snprintf(want, sizeof want, "tracer_harness.c:%d harness_site_4 in cudaStreamSynchronize", at);
    scr = wait_for(want);
    ASSERT_STR_CONTAINS(scr, want);
    /* nothing the program printed reached the screen */
    ASSERT(strstr(scr, "harness: program done") == NULL);
    keys("q");
    scr = wait_for("EXITED");
    ASSERT_STR_CONTAINS(scr, "EXITED rc=0");
    /* The line may be wider than the pane (the command's path is the checkout's): read it with
     * its wrapped rows joined. */
    char line[1024];
    scr = sh("tmux -L %s capture-pane -p -J 2>&1", sock);
    /* at the end: the command's status, the script's three waits of 0.5 ms at the harness's line,
     * and where the trace went */
    ASSERT_STR_CONTAINS(scr, " exited with status 0 after ");
    ASSERT_STR_CONTAINS(scr, "; 1 traced process\n");
    ASSERT_STR_CONTAINS(scr, "  host blocked 1.500 ms in 3 calls (");
    snprintf(want, sizeof want,
             "    1. 1.500 ms in 3 calls of cudaStreamSynchronize at tracer_harness.c:%d\n       harness_site_4\n", at);
    ASSERT_STR_CONTAINS(scr, want);
    char said[2048];
    snprintf(said, sizeof said, "synctop run: the trace is in %s; `synctop report %s` has the whole report", trace,
             trace);
    ASSERT_STR_CONTAINS(scr, said);
    struct stat tsb;
    ASSERT_OK(stat(trace, &tsb));
    ASSERT_NOT_NULL(line_with(scr, "synctop run: the output of", line, sizeof line));
    char *log = strstr(line, " is in ");
    ASSERT_NOT_NULL(log);
    for (char *e = log + strlen(log); e > log && (e[-1] == ' ' || e[-1] == '\n'); e--)
        e[-1] = '\0'; /* -J keeps trailing spaces */
    FILE *lf = fopen(log + 7, "r");
    ASSERT_NOT_NULL(lf);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, lf);
    buf[n] = '\0';
    fclose(lf);
    ASSERT_STR_CONTAINS(buf, "harness: program done");
    remove(log + 7);
#endif
}

/* Ctrl-C leaves replay as q does: the terminal given back, status 0. */
TEST(replay_in_tmux_ends_on_ctrl_c_as_on_q) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s replay '%s/event_sync_single_stream.json.gz'", task_synctop(), KINETO_TRACE_DIR);
    tmux_start(cmd, 120, 40);
    wait_for("cudaStreamSynchronize");
    keys("C-c");
    const char *scr = wait_for("EXITED");
    ASSERT_STR_CONTAINS(scr, "EXITED rc=0");
}

/* A command that is not traced (no CUDA in it) and ends: the view says so rather than waiting on,
 * and the status after q is the command's. */
TEST(run_in_tmux_says_when_the_command_ended_untraced) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s run -- sh -c 'exit 3'", task_synctop());
    tmux_start(cmd, 120, 40);
    const char *scr = wait_for("sh exited with status 3 after ");
    ASSERT_STR_CONTAINS(scr, "nothing was traced; q quits");
    ASSERT_STR_CONTAINS(scr, "nothing traced");
    ASSERT(strstr(scr, "waiting for a traced process") == NULL);
    keys("q");
    scr = wait_for("EXITED");
    ASSERT_STR_CONTAINS(scr, "EXITED rc=3");
    ASSERT_STR_CONTAINS(scr, "synctop run: sh exited with status 3 after");
}

/* ---- live sessions: recording, CURVE, discovery ---- */

static pid_t pub_pid;
static pid_t others[8]; /* processes task_spawn started: on_abort replaced its handler */
static size_t n_others;

/* A failed check aborts the test: the publisher must not outlive it. */
static void testpub_kill(void) {
    if (pub_pid > 0)
        kill(pub_pid, SIGKILL);
}

/* A failed check aborts, which runs no atexit handler: clean up here, then abort as asked. */
static void on_abort(int sig) {
    testpub_kill();
    for (size_t i = 0; i < n_others; i++)
        kill(others[i], SIGKILL);
    tmux_stop();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Starts synctop-testpub with args (sh words) and returns its pid; its stdout goes to out_path. */
static pid_t testpub_start(const char *env, const char *args, const char *out_path) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "exec env %s %s %s >%s 2>&1", env ? env : "", TESTPUB, args, out_path);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    pub_pid = pid;
    signal(SIGABRT, on_abort);
    atexit(testpub_kill);
    return pid;
}

/* Waits for a line KEY=VALUE in the file, returns VALUE (static). */
static const char *file_value(const char *path, const char *key) {
    static char val[512];
    double t0 = now_s();
    for (;;) {
        FILE *f = fopen(path, "r");
        char line[1024];
        size_t kl = strlen(key);
        while (f && fgets(line, sizeof line, f)) {
            if (strncmp(line, key, kl) == 0 && line[kl] == '=') {
                line[strcspn(line, "\n")] = '\0';
                snprintf(val, sizeof val, "%s", line + kl + 1);
                fclose(f);
                return val;
            }
        }
        if (f)
            fclose(f);
        if (now_s() - t0 > WAIT_S)
            TASK_FAIL_("no %s= line in %s", key, path);
        usleep(50000);
    }
}

static void testpub_stop(pid_t pid) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* The number before " ev " in the title: the events the viewer holds now. */
static double title_events(const char *scr) {
    char line[1024];
    ASSERT_NOT_NULL(line_with(scr, " ev ", line, sizeof line));
    const char *p = strstr(line, " ev ");
    while (p > line && p[-1] != ' ')
        p--;
    char *end;
    double x = strtod(p, &end);
    if (*end == 'k')
        x *= 1e3;
    else if (*end == 'M')
        x *= 1e6;
    return x;
}

TEST(attach_record_keeps_in_the_file_what_the_window_drops) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    char ep[512], args[1024];
    snprintf(ep, sizeof ep, "ipc://%s", task_path("rec.sock"));
    snprintf(args, sizeof args, "--endpoint %s --events 30000 --rate 15000 --batch 250 --wait-subscribers 1", ep);
    const char *pub_out = task_path("pub.out");
    pid_t pub = testpub_start(NULL, args, pub_out);
    char trace[512], cmd[2048];
    snprintf(trace, sizeof trace, "%s", task_path("recorded.trace"));
    snprintf(cmd, sizeof cmd, "%s attach %s --window-events 1000 --record %s", task_synctop(), ep, trace);
    tmux_start(cmd, 120, 40);
    const char *scr = wait_for("REC");
    /* the whole job arrives; the window keeps only the newest thousand or so events */
    scr = wait_for("ENDED");
    ASSERT_STR_CONTAINS(scr, "REC");
    double held = title_events(scr);
    if (!(held >= 500 && held <= 5000))
        TASK_FAIL_("the window holds %.0f events, not about 1000:\n%s", held, scr);
    keys("q");
    scr = wait_for("EXITED");
    ASSERT_STR_CONTAINS(scr, "EXITED rc=0");
    ASSERT_STR_CONTAINS(scr, "events) to ");
    waitpid(pub, NULL, 0);
    ASSERT_STR_CONTAINS(file_value(pub_out, "sent"), "dropped=0");
    /* every event sent is in the file, the ones that left the window included */
    err_msg err = {{0}};
    tp_freader *r = tp_freader_open(trace, &err);
    if (r == NULL)
        TASK_FAIL_("%s: %s", trace, err.msg);
    ASSERT(tp_freader_complete(r));
    uint64_t events = 0, t_min = UINT64_MAX;
    for (size_t i = 0; i < tp_freader_count(r); i++) {
        const tp_findex_entry *e = tp_freader_entry(r, i);
        events += e->n_events;
        if (e->n_events && e->t_min < t_min)
            t_min = e->t_min;
    }
    tp_freader_close(&r);
    ASSERT_UEQ(events, 30000);
    /* and the first of them, long gone from the window, is the first the publisher made */
    synth sy;
    synth_init(&sy, 1);
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 2});
    synth_fill(&sy, enc, 250);
    tp_buf b = {0};
    ASSERT_OK(tp_enc_finish(enc, &b));
    tp_batch_hdr h;
    ASSERT_OK(tp_batch_check_header(b.data, b.len, &h, &err));
    ASSERT_UEQ(t_min, h.t_min);
    tp_buf_free(&b);
    tp_enc_destroy(&enc);
}

/* A persistent kernel on a new stream that began before the oldest event the window keeps: its
 * lane is emptied by the bound before it is ever indexed, and the viewer goes on drawing. */
TEST(attach_window_survives_a_new_lane_older_than_the_window) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    char ep[512], args[1024], cmd[2048];
    snprintf(ep, sizeof ep, "ipc://%s", task_path("nccl.sock"));
    snprintf(args, sizeof args,
             "--endpoint %s --events 20000 --rate 20000 --batch 250 --wait-subscribers 1 --persistent-kernel", ep);
    const char *pub_out = task_path("pub.out");
    pid_t pub = testpub_start(NULL, args, pub_out);
    snprintf(cmd, sizeof cmd, "%s attach %s --window-events 1000", task_synctop(), ep);
    tmux_start(cmd, 120, 40);
    const char *scr = wait_for("ENDED");
    ASSERT(strstr(scr, "EXITED") == NULL);
    keys("q");
    scr = wait_for("EXITED");
    ASSERT_STR_CONTAINS(scr, "EXITED rc=0");
    waitpid(pub, NULL, 0);
    ASSERT_STR_CONTAINS(file_value(pub_out, "sent"), "dropped=0");
}

/* A testpub publishing for a long while on a loopback tcp port with the keys BASE.key and, when
 * clients is not NULL, admitting those clients only; its endpoint in ep. */
static pid_t curve_testpub(const char *base, const char *clients, char ep[512]) {
    char args[2048];
    snprintf(args, sizeof args,
             "--endpoint tcp://127.0.0.1:0 --curve-key %s.key%s%s --events 100000000 --rate 20000 --batch 200", base,
             clients != NULL ? " --clients " : "", clients != NULL ? clients : "");
    const char *pub_out = task_path("pub.out");
    pid_t pub = testpub_start(NULL, args, pub_out);
    snprintf(ep, 512, "%s", file_value(pub_out, "endpoint"));
    ASSERT_STR_CONTAINS(ep, "tcp://127.0.0.1:");
    return pub;
}

/* `synctop attach EP` with the refused options: a line that says what (says) and no events, and q
 * ends it well; with the shown options the events show, without that line. */
static void attach_refused_then_shown(const char *ep, const char *refused, const char *says, const char *shown) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s attach %s %s", task_synctop(), ep, refused);
    tmux_start(cmd, 120, 40);
    const char *scr = wait_for(says);
    ASSERT_STR_CONTAINS(scr, ep);
    ASSERT(strstr(scr, "stream 7") == NULL);
    keys("q");
    scr = wait_for("EXITED");
    ASSERT_STR_CONTAINS(scr, "EXITED rc=0");
    tmux_stop();
    snprintf(cmd, sizeof cmd, "%s attach %s %s", task_synctop(), ep, shown);
    tmux_start(cmd, 120, 40);
    /* A viewer that joins a running publisher can get a batch or two before the keyframe its
     * subscription asked for: the process record (its command line) comes with the keyframe. */
    scr = wait_for("python train.py --epochs 3");
    ASSERT_STR_CONTAINS(scr, "stream 7");
    ASSERT(strstr(scr, says) == NULL);
    keys("q");
    scr = wait_for("EXITED");
    ASSERT_STR_CONTAINS(scr, "EXITED rc=0");
}

TEST(attach_tcp_curve_right_key_shows_events_wrong_key_says_so) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    if (tp_curve_available(NULL) != 0)
        TASK_SKIP("this libzmq has no CURVE");
    char base[512], wrong[512];
    snprintf(base, sizeof base, "%s", task_path("server"));
    snprintf(wrong, sizeof wrong, "%s", task_path("other"));
    ASSERT_STR_CONTAINS(sh("%s keygen -o %s 2>&1 && echo ok", task_synctop(), base), "ok");
    ASSERT_STR_CONTAINS(sh("%s keygen -o %s 2>&1 && echo ok", task_synctop(), wrong), "ok");
    char ep[512];
    pid_t pub = curve_testpub(base, NULL, ep);
    /* the wrong key: no blank screen, but a line that says what is likely wrong; the right key:
     * the events show, and the warning does not */
    char refused[1024], shown[1024];
    snprintf(refused, sizeof refused, "--server-key %s.pub", wrong);
    snprintf(shown, sizeof shown, "--server-key %s.pub", base);
    attach_refused_then_shown(ep, refused, "wrong --server-key?", shown);
    testpub_stop(pub);
}

TEST(attach_tcp_curve_listed_client_key_shows_events_unlisted_says_so) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    if (tp_curve_available(NULL) != 0)
        TASK_SKIP("this libzmq has no CURVE");
    char base[512], alice[512], bob[512];
    snprintf(base, sizeof base, "%s", task_path("server"));
    snprintf(alice, sizeof alice, "%s", task_path("alice"));
    snprintf(bob, sizeof bob, "%s", task_path("bob"));
    ASSERT_STR_CONTAINS(sh("%s keygen -o %s 2>&1 && echo ok", task_synctop(), base), "ok");
    ASSERT_STR_CONTAINS(sh("%s keygen --client -o %s 2>&1 && echo ok", task_synctop(), alice), "ok");
    ASSERT_STR_CONTAINS(sh("%s keygen --client -o %s 2>&1 && echo ok", task_synctop(), bob), "ok");
    /* the list of clients: alice's .pub alone in a directory */
    ASSERT_STR_CONTAINS(sh("mkdir %s && cp %s.pub %s/ && echo ok", task_path("clients"), alice, task_path("clients")),
                        "ok");
    char ep[512];
    pid_t pub = curve_testpub(base, task_path("clients"), ep);
    /* the right server key, but a client key the publisher does not list: told so, nothing shown;
     * the listed client key: the events show, and no warning */
    char refused[1024], shown[1024];
    snprintf(refused, sizeof refused, "--server-key %s.pub --client-key %s.key", base, bob);
    snprintf(shown, sizeof shown, "--server-key %s.pub --client-key %s.key", base, alice);
    attach_refused_then_shown(ep, refused, "refused our client key: not on its --clients list", shown);
    testpub_stop(pub);
}

TEST(attach_without_argument_finds_a_publisher_on_its_default_endpoint) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    /* a private runtime directory, so only this test's publisher is there */
    const char *xdg = task_path("xdg");
    ASSERT_OK(mkdir(xdg, 0700));
    char env[600];
    snprintf(env, sizeof env, "XDG_RUNTIME_DIR=%s", xdg);
    const char *pub_out = task_path("pub.out");
    pid_t pub = testpub_start(env, "--events 100000000 --rate 20000 --batch 200", pub_out);
    char want[600];
    snprintf(want, sizeof want, "ipc://%s/synctop/", xdg);
    ASSERT_STR_CONTAINS(file_value(pub_out, "endpoint"), want);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s attach", env, task_synctop());
    tmux_start(cmd, 120, 40);
    /* joined a running publisher: the command line comes with the keyframe (see above) */
    const char *scr = wait_for("python train.py --epochs 3");
    ASSERT_STR_CONTAINS(scr, "stream 7");
    ASSERT_STR_CONTAINS(scr, "LIVE");
    keys("q");
    scr = wait_for("EXITED");
    ASSERT_STR_CONTAINS(scr, "EXITED rc=0");
    testpub_stop(pub);
}

/* The endpoint a `synctop relay` says it listens on, in its stderr at err_path (waited for). */
static void relay_endpoint(const char *err_path, char *ep, size_t len) {
    ep[0] = '\0';
    for (int i = 0; i < 2000 && ep[0] == '\0'; i++) {
        FILE *f = fopen(err_path, "r");
        char line[1024];
        while (f != NULL && fgets(line, sizeof line, f) != NULL) {
            const char *at = strstr(line, "listening on ");
            if (at != NULL)
                snprintf(ep, len, "%.*s", (int)strcspn(at + 13, " ;\n"), at + 13);
        }
        if (f != NULL)
            fclose(f);
        usleep(10000);
    }
    ASSERT(ep[0] != '\0');
}

/* The viewer behind a relay whose host's clock is 3 s ahead of the viewer's (the relay and the
 * processes of that host share the skew): each rank's row says the offset measured and its
 * uncertainty, and the skew given holds within it. */
TEST(attach_through_a_relay_states_each_hosts_measured_clock) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    static const double skew_ms = 3000.0;
    char node[1024];
    snprintf(node, sizeof node, "%s", task_path("node"));
    ASSERT_OK(mkdir(node, 0700));
    ASSERT_OK(setenv("XDG_RUNTIME_DIR", node, 1));
    ASSERT_OK(setenv("SYNCTOP_TEST_HOST", "sim-node-a", 1));
    ASSERT_OK(setenv("SYNCTOP_TEST_CLOCK_SKEW_NS", "3000000000", 1));
    const char *relay[] = {task_synctop(), "relay", "--listen", "tcp://127.0.0.1:0", NULL};
    pid_t rp = task_spawn(relay, task_path("relay.out"), task_path("relay.err"));
    others[n_others++] = rp;
    unsetenv("SYNCTOP_TEST_HOST");
    unsetenv("SYNCTOP_TEST_CLOCK_SKEW_NS");
    pid_t pubs[2];
    for (int i = 0; i < 2; i++) {
        const char *argv[] = {TESTPUB, "--events", "400000", "--rate", "20000", "--batch", "200",
                              "--wait-subscribers", "1", "--seed", i ? "81" : "80", "--host", "sim-node-a",
                              "--rank", i ? "1" : "0", "--clock-skew-ns", "3000000000", NULL};
        pubs[i] = task_spawn(argv, task_path(i ? "pub1.out" : "pub0.out"), task_path(i ? "pub1.err" : "pub0.err"));
        others[n_others++] = pubs[i];
    }
    char ep[512];
    relay_endpoint(task_path("relay.err"), ep, sizeof ep);
    char cmd[2048], trace[1024];
    snprintf(trace, sizeof trace, "%s", task_path("attach.trace"));
    snprintf(cmd, sizeof cmd, "%s attach %s --record %s", task_synctop(), ep, trace);
    tmux_start(cmd, 200, 60);
    const char *scr = wait_for("(clock +");
    char line[1024];
    ASSERT_NOT_NULL(line_with(scr, "(clock +", line, sizeof line));
    ASSERT_STR_CONTAINS(line, "on sim-node-a");
    const char *at = strstr(line, "(clock +") + strlen("(clock ");
    char *end;
    double off = strtod(at, &end), unc;
    ASSERT(end != at);
    ASSERT_NOT_NULL(strstr(end, " ms \xc2\xb1 "));
    unc = strtod(strstr(end, " ms \xc2\xb1 ") + strlen(" ms \xc2\xb1 "), NULL);
    /* the row prints milliseconds to three places: 0.001 ms of rounding */
    if (off - skew_ms > unc + 0.001 || skew_ms - off > unc + 0.001)
        TASK_FAIL_("the row says %.3f ms +- %.3f, but the host's clock is %.3f ms ahead:\n%s", off, unc, skew_ms, scr);
    ASSERT_LT(unc, 500.0); /* tells a host 3 s off from one on time */
    keys("q");
    scr = wait_for("EXITED");
    ASSERT_STR_CONTAINS(scr, "EXITED rc=0");
    for (int i = 0; i < 2; i++) {
        kill(pubs[i], SIGKILL);
        task_wait_exit(pubs[i], 20);
    }
    kill(rp, SIGINT);
    ASSERT_EQ(task_wait_exit(rp, 20), 0);
    /* the recording ends with the host's clock as measured, within its uncertainty of the skew */
    const char *info = sh("%s info --json %s", task_synctop(), trace);
    const char *h = strstr(info, "\"host_clocks\": [{\"host\": \"sim-node-a\", \"offset_ns\": ");
    if (h == NULL)
        TASK_FAIL_("no host clock for sim-node-a in the recording: %.400s", info);
    long long off_ns = strtoll(h + strlen("\"host_clocks\": [{\"host\": \"sim-node-a\", \"offset_ns\": "), NULL, 10);
    const char *u = strstr(h, "\"uncertainty_ns\": ");
    ASSERT_NOT_NULL(u);
    long long unc_ns = strtoll(u + strlen("\"uncertainty_ns\": "), NULL, 10);
    long long d = off_ns - 3000000000LL;
    if ((d < 0 ? -d : d) > unc_ns)
        TASK_FAIL_("the recording says %lld ns +- %lld, but the host's clock is 3 s ahead", off_ns, unc_ns);
}

/* ---- attach --summary: a row per rank from the relays' summaries ---- */

/* The number after "key" in the summary screen's title ("55 summaries", "open 1: 30 raw batches"). */
static unsigned long long title_number_before(const char *scr, const char *word) {
    char line[1024];
    ASSERT_NOT_NULL(line_with(scr, "SUMMARY ONLY", line, sizeof line));
    const char *at = strstr(line, word);
    ASSERT_NOT_NULL(at);
    while (at > line && at[-1] == ' ')
        at--;
    while (at > line && at[-1] >= '0' && at[-1] <= '9')
        at--;
    return strtoull(at, NULL, 10);
}

/* A rank's row: its fields split at spaces (the sparkline is one more field, or none). */
typedef struct sum_row_fields {
    int rank;
    char host[64];
    unsigned pid;
    double busy, blocked, idle, evs;
    unsigned long long drops;
    int line; /* its line on the screen */
} sum_row_fields;

static int sum_row_of(const char *scr, int rank, sum_row_fields *f) {
    int ln = 0;
    for (const char *p = scr; *p; ln++) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), p);
        char *tok[32];
        int n = 0;
        for (char *s = strtok(line, " "); s != NULL && n < 32; s = strtok(NULL, " "))
            tok[n++] = s;
        /* marker, rank, host, pid, busy, blocked, idle, [sparkline], ev/s, missed, drops */
        if (n >= 10 && strtol(tok[1], NULL, 10) == rank && strspn(tok[1], "0123456789") == strlen(tok[1]) &&
            strspn(tok[3], "0123456789") == strlen(tok[3])) {
            f->rank = rank;
            snprintf(f->host, sizeof f->host, "%s", tok[2]);
            f->pid = (unsigned)strtoul(tok[3], NULL, 10);
            f->busy = strtod(tok[4], NULL);
            f->blocked = strtod(tok[5], NULL);
            f->idle = strtod(tok[6], NULL);
            f->evs = strtod(tok[n - 3], NULL);
            f->drops = strtoull(tok[n - 1], NULL, 10);
            f->line = ln;
            return 1;
        }
        p = e ? e + 1 : p + len;
    }
    return 0;
}

/* A relay summarising four producers (testpub processes of ranks 5..8 on host node-s, 1000 events
 * a second each) for a viewer in summary mode: a row per rank in rank order with the
 * generator's identities and about its rate, and no raw batch; opening ranks 6 and 8 brings their
 * batches and lanes and no other rank's; closing them stops the batches while summaries go on. */
TEST(attach_summary_rows_per_rank_and_opening_a_rank_brings_only_its_lanes) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    char node[1024];
    snprintf(node, sizeof node, "%s", task_path("node"));
    ASSERT_OK(mkdir(node, 0700));
    ASSERT_OK(setenv("XDG_RUNTIME_DIR", node, 1));
    const char *relay[] = {task_synctop(), "relay", "--listen", "tcp://127.0.0.1:0", "--summary-ms", "250", NULL};
    pid_t rp = task_spawn(relay, task_path("relay.out"), task_path("relay.err"));
    others[n_others++] = rp;
    pid_t pubs[4];
    for (int k = 0; k < 4; k++) {
        char seed[16], rank[16], out[32], errp[32];
        snprintf(seed, sizeof seed, "%d", 30 + k);
        snprintf(rank, sizeof rank, "%d", 5 + k);
        snprintf(out, sizeof out, "pub%d.out", k);
        snprintf(errp, sizeof errp, "pub%d.err", k);
        const char *argv[] = {TESTPUB, "--events", "400000", "--rate", "1000", "--batch", "25", "--wait-subscribers",
                              "1", "--seed", seed, "--host", "node-s", "--rank", rank, NULL};
        pubs[k] = task_spawn(argv, task_path(out), task_path(errp));
        others[n_others++] = pubs[k];
    }
    char ep[512];
    relay_endpoint(task_path("relay.err"), ep, sizeof ep);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s attach --summary %s", task_synctop(), ep);
    tmux_start(cmd, 200, 60);
    const char *scr = wait_for("4 producers");
    /* every rank's row, in rank order, with the generator's identities, once its figures settle
     * near the generator's: 1000 events/s, the GPU busy part of the time, the host blocked some */
    double t0 = now_s();
    for (;;) {
        scr = capture();
        int ok = 1, last_line = -1;
        for (int k = 0; k < 4 && ok; k++) {
            sum_row_fields f = {0};
            ok = sum_row_of(scr, 5 + k, &f) && strcmp(f.host, "node-s") == 0 && f.pid == 4242 &&
                 f.line > last_line && f.busy > 0 && f.busy <= 100 && f.busy + f.idle > 99.85 &&
                 f.busy + f.idle < 100.15 && f.blocked > 0 && f.drops == 0 && f.evs > 700 && f.evs < 1300;
            last_line = f.line;
        }
        if (ok)
            break;
        if (now_s() - t0 > WAIT_S)
            TASK_FAIL_("no row per rank 5..8 in order, on node-s, pid 4242, about 1000 events/s; the pane shows:\n%s",
                       scr);
        usleep(100000);
    }
    /* summary only: no raw batch came */
    ASSERT_STR_CONTAINS(scr, "open 0: 0 raw batches");
    /* open rank 6 (the second row): its batches come, and Tab shows its lanes */
    keys("Down Enter");
    scr = wait_for("open 1:");
    for (t0 = now_s(); title_number_before(scr = capture(), "raw batches") == 0; usleep(100000))
        if (now_s() - t0 > WAIT_S)
            TASK_FAIL_("no raw batch after opening rank 6:\n%s", scr);
    keys("Tab");
    scr = wait_for("stream 7");
    /* open rank 8 as well: the lanes are those of ranks 6 and 8, no other's */
    keys("S");
    wait_for("SUMMARY ONLY");
    keys("Down Down Enter");
    wait_for("open 2:");
    keys("Tab");
    scr = wait_for("r8:GPU0");
    ASSERT_STR_CONTAINS(scr, "r6:GPU0");
    ASSERT(strstr(scr, "r5:") == NULL && strstr(scr, "r7:") == NULL);
    /* close both: the batches stop while the summaries go on */
    keys("S");
    wait_for("SUMMARY ONLY");
    keys("Enter Up Up Enter");
    scr = wait_for("open 0:");
    unsigned long long s0 = title_number_before(scr, "summaries");
    /* what was on its way may still come: two more rounds of summaries first */
    for (t0 = now_s(); title_number_before(scr = capture(), "summaries") < s0 + 8; usleep(100000))
        if (now_s() - t0 > WAIT_S)
            TASK_FAIL_("the summaries stopped:\n%s", scr);
    unsigned long long b1 = title_number_before(scr, "raw batches"), s1 = title_number_before(scr, "summaries");
    for (t0 = now_s(); title_number_before(scr = capture(), "summaries") < s1 + 16; usleep(100000))
        if (now_s() - t0 > WAIT_S)
            TASK_FAIL_("the summaries stopped:\n%s", scr);
    ASSERT_UEQ(title_number_before(scr, "raw batches"), b1);
    ASSERT(b1 > 0);
    keys("q");
    scr = wait_for("EXITED");
    ASSERT_STR_CONTAINS(scr, "EXITED rc=0");
    for (int k = 0; k < 4; k++) {
        kill(pubs[k], SIGKILL);
        task_wait_exit(pubs[k], 20);
    }
    kill(rp, SIGINT);
    ASSERT_EQ(task_wait_exit(rp, 20), 0);
}

/* ---- synctop demo: a sample trace published live ---- */

/* The count of the stalls panel's row whose call site ends with site ("aten::to in
 * cudaStreamSynchronize"): the number after its rank; 0 while there is no such row. */
static unsigned long long stall_row_count(const char *scr, const char *site) {
    for (const char *l = scr; *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), l);
        int rank;
        unsigned long long count;
        if (strstr(line, site) != NULL && sscanf(line, " %d %llu", &rank, &count) == 2)
            return count;
        l = e ? e + 1 : l + len;
    }
    return 0;
}

/* The demo's lanes (its GPU's streams, its two Python threads) show up, its title says what it
 * plays, and the stalls panel's count of a call site that blocks in every step grows. */
static void demo_screen_grows(void) {
    const char *scr = wait_for("LIVE");
    scr = wait_for("stream 7");
    scr = wait_for("T23656 python");
    ASSERT_STR_CONTAINS(scr, "stream 20");
    ASSERT_STR_CONTAINS(scr, "T23442 python");
    ASSERT_STR_CONTAINS(scr, "synctop demo: resnet_2080ti_two_threads.json.gz --");
    const char *site = "aten::to in cudaStreamSynchronize";
    unsigned long long first = 0, now = 0;
    double t0 = now_s();
    while ((first = stall_row_count(scr = capture(), site)) == 0) {
        if (now_s() - t0 > WAIT_S)
            TASK_FAIL_("no row for %s:\n%s", site, scr);
        usleep(100000);
    }
    for (t0 = now_s(); (now = stall_row_count(scr = capture(), site)) <= first; usleep(100000))
        if (now_s() - t0 > WAIT_S)
            TASK_FAIL_("the count of %s stayed at %llu:\n%s", site, first, scr);
}

TEST(demo_in_tmux_shows_live_lanes_and_stalls_that_grow) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s demo --trace %s/resnet_2080ti_two_threads.json.gz --speed 8", task_synctop(),
             KINETO_TRACE_DIR);
    tmux_start(cmd, 160, 45);
    demo_screen_grows();
    /* following, the window takes in what arrived until it spans the last five seconds */
    wait_for("\xe2\x86\x94 5.00s");
    /* Ctrl-C ends it as q does: the terminal restored, the last batch sent, what it played said */
    keys("C-c");
    const char *scr = wait_for("EXITED");
    ASSERT_STR_CONTAINS(scr, "synctop demo: ended: ");
    ASSERT_STR_CONTAINS(scr, "EXITED rc=0");
}

TEST(attach_to_a_demo_pid_shows_it_live) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    char trace[1024];
    snprintf(trace, sizeof trace, "%s/resnet_2080ti_two_threads.json.gz", KINETO_TRACE_DIR);
    const char *err_path = task_path("demo.err");
    char err_keep[1024];
    snprintf(err_keep, sizeof err_keep, "%s", err_path);
    const char *argv[] = {task_synctop(), "demo", "--no-tui", "--trace", trace, "--speed", "8", NULL};
    pid_t demo = task_spawn(argv, task_path("demo.out"), err_keep);
    others[n_others++] = demo;
    double t0 = now_s();
    for (;;) {
        FILE *f = fopen(err_keep, "r");
        char text[2048] = "";
        size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
        text[n] = '\0';
        if (f)
            fclose(f);
        if (strstr(text, "waiting for a viewer"))
            break;
        if (now_s() - t0 > WAIT_S)
            TASK_FAIL_("the demo did not start: %s", text);
        usleep(50000);
    }
    char cmd[2048], pid[64];
    snprintf(cmd, sizeof cmd, "%s attach %ld", task_synctop(), (long)demo);
    tmux_start(cmd, 160, 45);
    demo_screen_grows();
    snprintf(pid, sizeof pid, "pid %ld", (long)demo);
    ASSERT_STR_CONTAINS(capture(), pid);
    keys("q");
    const char *scr = wait_for("EXITED");
    ASSERT_STR_CONTAINS(scr, "EXITED rc=0");
    /* the viewer went; the demo goes on until it is told to stop, and then stops cleanly */
    ASSERT_EQ(kill(demo, 0), 0);
    kill(demo, SIGINT);
    ASSERT_EQ(task_wait_exit(demo, 20), 0);
}

/* The ruler's row (the third of the screen). */
static void ruler_row(const char *scr, char *out, size_t n) {
    const char *l = scr;
    for (int i = 0; i < 2 && l; i++) {
        l = strchr(l, '\n');
        l = l ? l + 1 : NULL;
    }
    ASSERT_NOT_NULL(l);
    const char *e = strchr(l, '\n');
    snprintf(out, n, "%.*s", (int)(e ? e - l : (long)strlen(l)), l);
}

TEST(replay_playing_follows_the_playhead_when_zoomed_in) {
    if (!have_tmux())
        TASK_SKIP("tmux is not installed");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s replay --play %s/resnet_2080ti_two_threads.json.gz", task_synctop(),
             KINETO_TRACE_DIR);
    tmux_start(cmd, 120, 40);
    wait_for("REPLAY");
    /* zoomed in to a sixteenth of the trace: the playhead leaves the window within a second or two,
     * and the window pages after it, again and again */
    keys("+ + + +");
    char a[1024], b[1024];
    const char *scr = wait_for("stream 7");
    ruler_row(scr, a, sizeof a);
    for (int pages = 0; pages < 2;) {
        double t0 = now_s();
        for (;;) {
            scr = capture();
            ruler_row(scr, b, sizeof b);
            if (strcmp(a, b) != 0)
                break;
            if (now_s() - t0 > WAIT_S)
                TASK_FAIL_("the window stayed where it was while the replay played on:\n%s", scr);
            usleep(100000);
        }
        snprintf(a, sizeof a, "%s", b);
        pages++;
    }
    /* paused, the window is the user's: it pans away from the playhead and stays there */
    keys("Space");
    wait_for("REPLAY \xe2\x8f\xb8"); /* ⏸ */
    ruler_row(capture(), a, sizeof a);
    keys("H H");
    for (double t0 = now_s(); ruler_row(capture(), b, sizeof b), strcmp(a, b) == 0; usleep(100000))
        if (now_s() - t0 > WAIT_S)
            TASK_FAIL_("H did not pan the paused replay:\n%s", capture());
    usleep(300000);
    ruler_row(capture(), a, sizeof a);
    usleep(1500000);
    ruler_row(capture(), b, sizeof b);
    ASSERT_STR_EQ(a, b);
    keys("q");
    scr = wait_for("EXITED");
    ASSERT_STR_CONTAINS(scr, "EXITED rc=0");
}
