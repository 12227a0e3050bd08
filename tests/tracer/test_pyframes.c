/* Python call sites end to end, without a GPU: a real CPython runs tests/tracer/py/pyframes_sites.py,
 * which loads the stand-in libcupti and the real tracer through ctypes and makes blocking "CUDA
 * calls" from known lines with the GIL released (ctypes releases it, as PyTorch does around its
 * syncs). What the tracer recorded must name, for each call, the script's file, function and line
 * (the lines tagged "# @name" in the script), innermost first and before the native frames.
 *
 * The interpreter is $SYNCTOP_TEST_PYTHON (CMake registers these cases once per CPython it found,
 * 3.10 to 3.13), and $SYNCTOP_TEST_OLD_PYTHON for the case that an unsupported one is left alone. */
#include "task.h"

#ifdef SYNCTOP_HAVE_TRACER

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "synctop/codec.h"
#include "synctop/file.h"

typedef struct model {
    tp_record *recs;
    size_t n, cap;
    tp_strtab *strings;
    int ended;
} model;

static const char *str(const model *m, uint32_t id) {
    uint32_t len;
    const char *s = id ? tp_strtab_get(m->strings, id, &len) : NULL;
    return s ? s : "";
}

static void model_load(model *m, const char *path) {
    memset(m, 0, sizeof *m);
    m->strings = tp_strtab_new();
    err_msg err = {{0}};
    tp_freader *r = tp_freader_open(path, &err);
    if (r == NULL)
        TASK_FAIL_("cannot open %s: %s", path, err.msg);
    ASSERT_EQ(tp_freader_complete(r), 1);
    tp_buf b = {0};
    for (size_t i = 0; i < tp_freader_count(r); i++) {
        ASSERT_OK(tp_freader_read(r, i, &b, &err));
        tp_dec d;
        memset(&d, 0, sizeof d);
        ASSERT_OK(tp_dec_open(&d, b.data, b.len, &err));
        ASSERT_OK(tp_dec_load_strings(&d, m->strings));
        m->ended += (d.hdr.flags & TP_BF_END) != 0;
        const tp_record *x;
        while ((x = tp_dec_next_record(&d)) != NULL) {
            if (m->n == m->cap) {
                m->cap = m->cap ? m->cap * 2 : 256;
                m->recs = realloc(m->recs, m->cap * sizeof *m->recs);
            }
            memset(&m->recs[m->n], 0, sizeof m->recs[0]);
            memcpy(&m->recs[m->n++], x, tp_kind_size(x->head.kind));
        }
        tp_dec_free(&d);
    }
    tp_buf_free(&b);
    tp_freader_close(&r);
}

static void model_free(model *m) {
    free(m->recs);
    tp_strtab_destroy(&m->strings);
}

static const tp_api *find_api(const model *m, uint32_t cbid, uint32_t corr) {
    for (size_t i = 0; i < m->n; i++)
        if (m->recs[i].head.kind == TP_K_API && m->recs[i].api.cbid == cbid &&
            m->recs[i].api.correlation == corr)
            return &m->recs[i].api;
    return NULL;
}

static size_t count_kind(const model *m, unsigned kind) {
    size_t n = 0;
    for (size_t i = 0; i < m->n; i++)
        n += m->recs[i].head.kind == kind;
    return n;
}

static const tp_frame *frame_of(const model *m, uint32_t site, unsigned index) {
    for (size_t i = 0; i < m->n; i++)
        if (m->recs[i].head.kind == TP_K_FRAME && m->recs[i].frame.callsite == site &&
            m->recs[i].frame.index == index)
            return &m->recs[i].frame;
    return NULL;
}

static const tp_callsite *site_of(const model *m, uint32_t id) {
    for (size_t i = 0; i < m->n; i++)
        if (m->recs[i].head.kind == TP_K_CALLSITE && m->recs[i].callsite.id == id)
            return &m->recs[i].callsite;
    return NULL;
}

/* For a failing expectation: what the call site holds. */
static void dump_site(const model *m, uint32_t site) {
    const tp_frame *f;
    for (unsigned i = 0; (f = frame_of(m, site, i)) != NULL; i++)
        fprintf(stderr, "site %u frame %u: %s %s:%u %s %s+%#" PRIx64 "\n", site, i,
                f->flags == TP_FRAME_PYTHON ? "py" : "native", str(m, f->file), f->line,
                str(m, f->func), str(m, f->module), f->pc);
}

/* Python frames of a call site: how many lead, and that all the rest are native. */
static unsigned python_frames(const model *m, uint32_t site) {
    const tp_callsite *cs = site_of(m, site);
    ASSERT_NOT_NULL(cs);
    unsigned n_py = 0;
    for (unsigned i = 0; i < cs->n_frames; i++) {
        const tp_frame *f = frame_of(m, site, i);
        ASSERT_NOT_NULL(f);
        if (f->flags == TP_FRAME_PYTHON) {
            ASSERT_EQ(n_py, i); /* Python frames come first */
            n_py++;
        } else {
            ASSERT_EQ(f->flags, TP_FRAME_NATIVE);
        }
    }
    return n_py;
}

/* The line of the script that carries "# @tag" (exactly that tag). */
static int tag_line(const char *tag) {
    FILE *f = fopen(PY_SCRIPT, "r");
    ASSERT_NOT_NULL(f);
    char line[1024], want[128];
    snprintf(want, sizeof want, "# @%s", tag);
    int n = 0, found = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        n++;
        line[strcspn(line, "\n")] = '\0';
        const char *at = strstr(line, want);
        if (at != NULL && at[strlen(want)] == '\0') {
            ASSERT_EQ(found, 0); /* tags are unique */
            found = n;
        }
    }
    fclose(f);
    if (found == 0)
        TASK_FAIL_("no line tagged @%s in %s", tag, PY_SCRIPT);
    return found;
}

/* Frame `index` of a call site is the script's function at the tagged line. */
static void expect_frame(const model *m, uint32_t site, unsigned index, const char *func,
                         const char *tag) {
    const tp_frame *f = frame_of(m, site, index);
    if (f == NULL)
        TASK_FAIL_("call site %u has no frame %u", site, index);
    if (f->flags != TP_FRAME_PYTHON || strcmp(str(m, f->func), func) != 0 ||
        (int)f->line != tag_line(tag))
        dump_site(m, site);
    ASSERT_EQ(f->flags, TP_FRAME_PYTHON);
    ASSERT_STR_EQ(str(m, f->file), PY_SCRIPT);
    ASSERT_STR_EQ(str(m, f->func), func);
    ASSERT_EQ(f->line, tag_line(tag));
    ASSERT_EQ(f->module, 0);
    ASSERT_EQ(f->pc % 2, 0); /* a byte offset of a 2-byte code unit */
}

static const char *python(const char *var) {
    const char *p = getenv(var);
    if (p == NULL || *p == '\0')
        TASK_FAIL_("%s is not set (CMake sets it to the interpreter under test)", var);
    return p;
}

/* Starts the script under `py` (arg: its second argument, or NULL), recording to trace.trace;
 * stdout and stderr to out.txt, err.txt. */
static pid_t spawn_script(const char *py, const char *scenario, const char *arg) {
    char trace[4096], out[4096], err[4096];
    snprintf(trace, sizeof trace, "%s", task_path("trace.trace"));
    snprintf(out, sizeof out, "%s", task_path("out.txt"));
    snprintf(err, sizeof err, "%s", task_path("err.txt"));
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        setenv("SYNCTOP_STANDIN", STANDIN_SO, 1);
        setenv("SYNCTOP_STANDIN_DRIVER", DRIVER_SO, 1);
        setenv("SYNCTOP_CUPTI", STANDIN_SO, 1);
        setenv("SYNCTOP_TRACER", TRACER_SO, 1);
        setenv("SYNCTOP_RECORD", trace, 1);
        setenv("SYNCTOP_LISTEN", "none", 1);
        setenv("SYNCTOP_FLUSH_MS", "5", 1);
        unsetenv("PYTHONPATH");
        unsetenv("PYTHONHOME");
        if (ASAN_RT[0] != '\0') {
            /* The interpreter is not instrumented: the sanitizers' runtime must come first. */
            setenv("LD_PRELOAD", ASAN_RT, 1);
            setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
        }
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fo, 1);
        dup2(fe, 2);
        execl(py, py, "-S", PY_SCRIPT, scenario, arg, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Waits for the script to end; it must exit 0 and say nothing on stderr. */
static void wait_script(pid_t pid, const char *py, const char *scenario) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    FILE *f = fopen(task_path("err.txt"), "r");
    char text[8192] = "";
    if (f != NULL) {
        text[fread(text, 1, sizeof text - 1, f)] = '\0';
        fclose(f);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        TASK_FAIL_("%s %s failed (status %#x): %s", py, scenario, status, text);
    ASSERT_STR_EQ(text, ""); /* a working tracer says nothing */
}

/* Runs the script under `py` to its end. */
static void run_script(const char *py, const char *scenario) {
    wait_script(spawn_script(py, scenario, NULL), py, scenario);
}

TEST(pyframes_name_the_calling_lines) {
    run_script(python("SYNCTOP_TEST_PYTHON"), "main");
    model m;
    model_load(&m, task_path("trace.trace"));
    ASSERT_EQ(m.ended, 1);

    /* A function called from a function called from main, itself called by the module. */
    const tp_api *a = find_api(&m, 131, 1);
    ASSERT_NOT_NULL(a);
    ASSERT_EQ(a->flags, TP_F_BLOCKING);
    ASSERT_EQ(a->end - a->start, 500000);
    ASSERT_NE(a->callsite, 0);
    ASSERT_EQ(python_frames(&m, a->callsite), 4);
    expect_frame(&m, a->callsite, 0, "wait_in_function", "inner");
    expect_frame(&m, a->callsite, 1, "caller", "caller");
    expect_frame(&m, a->callsite, 2, "main", "module-caller");
    expect_frame(&m, a->callsite, 3, "<module>", "dispatch");
    ASSERT_NOT_NULL(frame_of(&m, a->callsite, 4)); /* native frames follow */

    /* A method, a generator, and a line far below the one before it. */
    const tp_api *method = find_api(&m, 31, 2);
    ASSERT_NOT_NULL(method);
    ASSERT_EQ(python_frames(&m, method->callsite), 3);
    expect_frame(&m, method->callsite, 0, "forward", "method");
    expect_frame(&m, method->callsite, 1, "main", "module-method");
    const tp_api *gen = find_api(&m, 165, 3);
    ASSERT_NOT_NULL(gen);
    ASSERT_EQ(python_frames(&m, gen->callsite), 3);
    expect_frame(&m, gen->callsite, 0, "generator", "generator");
    expect_frame(&m, gen->callsite, 1, "main", "module-generator");
    const tp_api *far = find_api(&m, 131, 4);
    ASSERT_NOT_NULL(far);
    expect_frame(&m, far->callsite, 0, "far", "far");
    expect_frame(&m, far->callsite, 1, "main", "module-far");

    /* The same line three times: one call site. */
    const tp_api *loop = find_api(&m, 131, 10);
    ASSERT_NOT_NULL(loop);
    expect_frame(&m, loop->callsite, 0, "main", "loop");
    for (uint32_t corr = 11; corr < 13; corr++) {
        const tp_api *again = find_api(&m, 131, corr);
        ASSERT_NOT_NULL(again);
        if (again->callsite != loop->callsite) {
            dump_site(&m, loop->callsite);
            dump_site(&m, again->callsite);
        }
        ASSERT_EQ(again->callsite, loop->callsite);
    }
    /* A call that did not wait has no call site. */
    const tp_api *quick = find_api(&m, 131, 20);
    ASSERT_NOT_NULL(quick);
    ASSERT_EQ(quick->flags, 0);
    ASSERT_EQ(quick->callsite, 0);
    /* A busy query loop is one wait, at the line of the loop. */
    const tp_api *poll = find_api(&m, 132, 79);
    ASSERT_NOT_NULL(poll);
    ASSERT_EQ(poll->flags, TP_F_BLOCKING);
    ASSERT_EQ(poll->end - poll->start, 500000);
    expect_frame(&m, poll->callsite, 0, "main", "poll");

    /* Six places, six call sites, each described once. */
    uint32_t ids[] = {a->callsite, method->callsite, gen->callsite, far->callsite,
                      loop->callsite, poll->callsite};
    for (size_t i = 0; i < 6; i++)
        for (size_t j = i + 1; j < 6; j++)
            ASSERT_NE(ids[i], ids[j]);
    ASSERT_EQ(count_kind(&m, TP_K_CALLSITE), 6);
    model_free(&m);
}

/* A file's text (at most 8 KiB), for messages. */
static const char *read_file_text(const char *path) {
    static char text[8192];
    text[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        text[fread(text, 1, sizeof text - 1, f)] = '\0';
        fclose(f);
    }
    return text;
}

/* Runs synctop with args (NULL-terminated), its stderr to err_path; its exit status. */
static int synctop_cli(const char *const *args, const char *err_path) {
    const char *argv[16];
    size_t n = 0;
    argv[n++] = task_synctop();
    for (size_t i = 0; args[i] != NULL && n < 15; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return task_wait_exit(task_spawn(argv, task_path("cli_out.txt"), err_path), 60);
}

/* A Python program that runs without a tracer, given one by `synctop attach` (ptrace, a sibling
 * process): the tracer finds the interpreter in the running process, not from its start, and the
 * calls it sees name the script's lines as they do for a tracer loaded at start. */
TEST(pyframes_after_a_late_attach) {
    FILE *yama = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    if (yama != NULL) {
        int scope = fgetc(yama);
        fclose(yama);
        if (scope != '0')
            TASK_SKIP("Yama's ptrace_scope lets only a parent trace its children");
    }
    const char *py = python("SYNCTOP_TEST_PYTHON");
    char stop[4096], pid_s[32], trace[4096], err[4096];
    snprintf(stop, sizeof stop, "%s", task_path("stop"));
    snprintf(trace, sizeof trace, "%s", task_path("late.trace"));
    snprintf(err, sizeof err, "%s", task_path("cli_err.txt"));
    pid_t pid = spawn_script(py, "late", stop);
    snprintf(pid_s, sizeof pid_s, "%d", (int)pid);
    for (int i = 0;; i++) {
        FILE *f = fopen(task_path("out.txt"), "r");
        char line[64] = "";
        if (f != NULL) {
            if (fgets(line, sizeof line, f) == NULL)
                line[0] = '\0';
            fclose(f);
        }
        if (strncmp(line, "ready", 5) == 0)
            break;
        if (i == 1000)
            TASK_FAIL_("the script did not start");
        task_sleep_ms(10);
    }
    const char *attach[] = {"attach", pid_s, "--yes", "--inject-only", NULL};
    if (synctop_cli(attach, err) != 0)
        TASK_FAIL_("synctop attach: %s", read_file_text(err));
    const char *record[] = {"record", pid_s, "-o", trace, "--duration", "1", NULL};
    if (synctop_cli(record, err) != 0)
        TASK_FAIL_("synctop record: %s", read_file_text(err));
    const char *detach[] = {"detach", pid_s, NULL};
    if (synctop_cli(detach, err) != 0)
        TASK_FAIL_("synctop detach: %s", read_file_text(err));
    int fd = open(stop, O_WRONLY | O_CREAT, 0600);
    ASSERT(fd >= 0);
    close(fd);
    wait_script(pid, py, "late");

    model m;
    model_load(&m, trace);
    const tp_api *a = NULL;
    for (size_t i = 0; i < m.n && a == NULL; i++)
        if (m.recs[i].head.kind == TP_K_API && m.recs[i].api.cbid == 131 && m.recs[i].api.callsite != 0)
            a = &m.recs[i].api;
    if (a == NULL)
        TASK_FAIL_("no blocking call with a call site among %zu records", m.n);
    ASSERT_EQ(a->flags, TP_F_BLOCKING);
    ASSERT_GE(python_frames(&m, a->callsite), 3);
    expect_frame(&m, a->callsite, 0, "late_loop", "late");
    expect_frame(&m, a->callsite, 1, "late", "late-caller");
    model_free(&m);
}

TEST(pyframes_threads_get_their_own_sites) {
    run_script(python("SYNCTOP_TEST_PYTHON"), "threads");
    model m;
    model_load(&m, task_path("trace.trace"));
    const tp_api *a = find_api(&m, 131, 40);
    const tp_api *b = find_api(&m, 131, 50);
    ASSERT_NOT_NULL(a);
    ASSERT_NOT_NULL(b);
    /* Both wait at once on the stand-in's one virtual clock: each waited its own time at least. */
    ASSERT_GE(a->end - a->start, 600000);
    ASSERT_GE(b->end - b->start, 700000);
    ASSERT_EQ(a->flags, TP_F_BLOCKING);
    ASSERT_EQ(b->flags, TP_F_BLOCKING);
    ASSERT_NE(a->tid, b->tid);
    ASSERT_NE(a->callsite, b->callsite);
    expect_frame(&m, a->callsite, 0, "worker", "thread-a");
    expect_frame(&m, b->callsite, 0, "worker", "thread-b");
    /* Below the worker: threading's Thread.run, each in its own thread. */
    for (int k = 0; k < 2; k++) {
        const tp_frame *f = frame_of(&m, (k ? b : a)->callsite, 1);
        ASSERT_NOT_NULL(f);
        ASSERT_EQ(f->flags, TP_FRAME_PYTHON);
        ASSERT_STR_EQ(str(&m, f->func), "run");
        const char *file = str(&m, f->file);
        ASSERT_STR_EQ(file + (strlen(file) > 12 ? strlen(file) - 12 : 0), "threading.py");
        ASSERT_GT(f->line, 0);
    }
    model_free(&m);
}

/* tests/gpu/run.sh checks the PyTorch samples' EXPECT-PY lines with synctop_check_trace: the same
 * checker, on this script's trace, with expectations appended to a copy of the script. */
TEST(pyframes_check_trace_counts_python_lines) {
    run_script(python("SYNCTOP_TEST_PYTHON"), "main");
    FILE *in = fopen(PY_SCRIPT, "r");
    ASSERT_NOT_NULL(in);
    FILE *out = fopen(task_path("pyframes_sites.py"), "w");
    ASSERT_NOT_NULL(out);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        ASSERT_EQ(fwrite(buf, 1, n, out), n);
    fclose(in);
    fputs("# EXPECT-PY: 3 x blocking at @loop\n"
          "# EXPECT-PY: 1 x blocking at @inner\n"
          "# EXPECT-PY: 1 x blocking at @module-caller\n"
          "# EXPECT-PY: 1 x blocking at @poll\n"
          "# EXPECT-PY: 0 x blocking at @quick\n",
          out);
    fclose(out);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' > '%s' 2>&1", CHECK_TRACE, task_path("trace.trace"),
             task_path("pyframes_sites.py"), task_path("check.txt"));
    int rc = system(cmd);
    FILE *f = fopen(task_path("check.txt"), "r");
    ASSERT_NOT_NULL(f);
    char text[4096] = "";
    text[fread(text, 1, sizeof text - 1, f)] = '\0';
    fclose(f);
    fprintf(stderr, "%s", text);
    ASSERT_EQ(rc, 0);
    char expect[1024];
    snprintf(expect, sizeof expect,
             "ok   pyframes_sites.py:%d 3 x Python call blocking (saw 3)\n"
             "ok   pyframes_sites.py:%d 1 x Python call blocking (saw 1)\n"
             "ok   pyframes_sites.py:%d 1 x Python call blocking (saw 1)\n"
             "ok   pyframes_sites.py:%d 1 x Python call blocking (saw 1)\n"
             "ok   pyframes_sites.py:%d 0 x Python call blocking (saw 0)\n",
             tag_line("loop"), tag_line("inner"), tag_line("module-caller"), tag_line("poll"),
             tag_line("quick"));
    ASSERT_STR_EQ(text, expect);
}

/* A Python the tracer does not know (3.9 here): native frames only, and no word about it. */
TEST(pyframes_unsupported_python_keeps_native_sites) {
    run_script(python("SYNCTOP_TEST_OLD_PYTHON"), "main");
    model m;
    model_load(&m, task_path("trace.trace"));
    ASSERT_EQ(m.ended, 1);
    const tp_api *a = find_api(&m, 131, 1);
    ASSERT_NOT_NULL(a);
    ASSERT_EQ(a->flags, TP_F_BLOCKING);
    ASSERT_NE(a->callsite, 0);
    ASSERT_EQ(python_frames(&m, a->callsite), 0);
    ASSERT_NOT_NULL(frame_of(&m, a->callsite, 0));
    model_free(&m);
}

#endif
