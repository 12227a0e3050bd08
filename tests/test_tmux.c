/*
 * The viewer end to end, the way a person sees it: `synctop replay` and `synctop attach` run in a
 * tmux pane on a private tmux server; keys are sent with send-keys and the screen is read with
 * capture-pane. No timing assertions: every check polls the screen until the expected text shows
 * up, with a generous timeout as the failure guard.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "synctop/file.h"
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

static void tmux_start(const char *cmdline, int w, int h) {
    snprintf(sock, sizeof sock, "synctop-test-%ld", (long)getpid());
    atexit(tmux_stop);
    const char *supp = task_path("lsan.supp");
    FILE *f = fopen(supp, "w");
    ASSERT_NOT_NULL(f);
    /* ncurses keeps its terminal description and screen buffers until exit, by design */
    fputs("leak:libncursesw\nleak:libtinfo\nleak:libncurses\n", f);
    fclose(f);
    const char *out = sh("tmux -L %s -f /dev/null new-session -d -x %d -y %d "
                         "\"env LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=screen-256color LSAN_OPTIONS=suppressions=%s "
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
    tp_err err = {{0}};
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

TEST(replay_in_tmux_zoom_stall_help_resize_quit) {
    if (!have_tmux()) {
        fprintf(stderr, "tmux is not installed: skipped\n");
        return;
    }
    const char *trace = synth_trace(20000);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s replay %s", task_synctop(), trace);
    tmux_start(cmd, 120, 40);
    const char *scr = wait_for("REPLAY");
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
    /* back to the whole trace, cursor to the left edge, next stall: the panel takes the focus and
     * names the call site */
    keys("0 Home n");
    scr = wait_for("TOP STALLS");
    wait_for("stall 251");
    wait_for("BLOCKING call");
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

TEST(attach_in_tmux_shows_a_live_publisher) {
    if (!have_tmux()) {
        fprintf(stderr, "tmux is not installed: skipped\n");
        return;
    }
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
    if (!have_tmux()) {
        fprintf(stderr, "tmux is not installed: skipped\n");
        return;
    }
    /* A program (the harness over the stand-in CUPTI) that blocks three times at one call site and
     * prints a line of its own: the view shows its waits, its output goes to the log. */
    const char *script = task_path("run.script");
    FILE *f = fopen(script, "w");
    ASSERT_NOT_NULL(f);
    fputs("context_create 1\n"
          "x3@0 call domain=rt cbid=131 wait=500000 site=1\n"
          "x20@1000 kernel name=k start=1000 end=1500 corr=1\n"
          "context_destroy 1\n",
          f);
    fclose(f);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "SYNCTOP_STANDIN=%s SYNCTOP_CUPTI=%s %s run -- %s %s", STANDIN_SO, STANDIN_SO,
             task_synctop(), HARNESS, script);
    tmux_start(cmd, 120, 40);
    const char *scr = wait_for("ENDED");
    scr = wait_for("host blocked 1.50ms");
    ASSERT_STR_CONTAINS(scr, "tracer_harness");
    ASSERT_STR_CONTAINS(scr, "harness_site_1");
    /* nothing the program printed reached the screen */
    ASSERT(strstr(scr, "harness: program done") == NULL);
    keys("q");
    scr = wait_for("EXITED");
    ASSERT_STR_CONTAINS(scr, "EXITED rc=0");
    char line[512];
    ASSERT_NOT_NULL(line_with(scr, "synctop run: the output of", line, sizeof line));
    const char *log = strstr(line, " is in ");
    ASSERT_NOT_NULL(log);
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
