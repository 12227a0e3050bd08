/*
 * `synctop run`: runs a command with the tracer injected, listens to every traced process it
 * starts, and, once the command has ended, sums up where its host threads waited for the GPU.
 *
 * The tracer is found relative to this binary (ij_find_tracer: installed, the directory the build
 * compiled in; build tree: tracer/) or named by SYNCTOP_TRACER. Each traced process publishes on its own default endpoint
 * (PID.sock in the private endpoint directory); run finds those of the command's descendants as
 * they appear, so wrappers, launchers and several GPU processes are all heard. The tracer is told
 * to wait (bounded) for run to subscribe before the program goes on, so nothing is missed at the
 * start.
 *
 * On a terminal run shows the live viewer while the command runs (its output goes to a log file
 * then, so it cannot scribble over the screen); with --no-tui, or when standard input or output is
 * not a terminal, it collects the trace into a store and prints the analysis's report (report.h)
 * when the command has ended.
 */
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fcntl.h>

#include "synctop/sanitize.h"
#include "analysis.h"
#include "report.h"
#include "symbols.h"
#include "store.h"
#include "synctop/codec.h"
#include "synctop/net.h"
#include "clock.h"
#include "live.h"
#include "args.h"
#include "inject.h"
#include "verb.h"
#include "viewer.h"

#define RUN_MAX_ENDPOINTS 256

static void run_usage(FILE *out) {
    fprintf(out,
            "usage: synctop run [--record FILE] [--listen ENDPOINT\n"
            "                   [--key FILE.key [--clients DIR|FILE] | --insecure]]\n"
            "                   [--no-tui] [--log FILE] [--ascii] [--mono] -- CMD [ARGS...]\n\n"
            "Runs CMD with synctop's CUDA tracer injected (no change to the program). On a\n"
            "terminal it shows the live timeline while CMD runs (q closes it; CMD goes on),\n"
            "and when CMD has ended says its status, what the view saw in brief (time\n"
            "blocked, the top call sites) and where the trace and CMD's output went;\n"
            "with --no-tui, or without a terminal, it prints a report when CMD has ended:\n"
            "time blocked per call site (Python file:line and native frames), GPU busy and\n"
            "idle time and what caused the idle time. The exit status is CMD's.\n\n"
            "  --record FILE      also write the trace to FILE (see `synctop info FILE`)\n"
            "  --listen ENDPOINT  publish on ENDPOINT (tcp://127.0.0.1:PORT, ipc://PATH) instead\n"
            "                     of each process's default ipc endpoint; one process only\n"
            "  --key FILE.key     encrypt what is published with CURVE (keys from `synctop\n"
            "                     keygen`); viewers elsewhere attach with --server-key FILE.pub\n"
            "  --clients DIR|FILE with --key, admit only the viewers whose client public key is\n"
            "                     listed: a directory of .pub files (`synctop keygen --client`\n"
            "                     writes them) or a file of keys, one per line; without it,\n"
            "                     whoever has FILE.pub and can reach the port can watch\n"
            "  --insecure         allow a non-loopback --listen address without --key\n"
            "  --no-tui           no live view: the report at the end, on standard error\n"
            "                     (CMD's own output stays where it was)\n"
            "  --log FILE         with the live view, CMD's output goes to FILE (default:\n"
            "                     synctop-run-PID.log in the private endpoint directory);\n"
            "                     CMD's standard input is then /dev/null\n"
            "  -f, --force        replace an existing --record or --log FILE\n"
            "  --ascii, --mono    the live view in ASCII / without colours\n\n"
            "Environment read by the tracer inside CMD (run sets CUDA_INJECTION64_PATH, and\n"
            "NVTX_INJECTION64_PATH, SYNCTOP_START_WAIT_MS and SYNCTOP_MODE where unset; an\n"
            "exported SYNCTOP_LISTEN or SYNCTOP_ENDPOINT is taken as --listen, \"none\" left out):\n"
            "  CUDA_INJECTION64_PATH       the tracer library (set by run)\n"
            "  NVTX_INJECTION64_PATH       the tracer too, so NVTX ranges are recorded (set by run)\n"
            "  SYNCTOP_START_WAIT_MS       wait this long at CUDA init for a viewer (run: 5000)\n"
            "  SYNCTOP_LISTEN              endpoint to publish on (default: ipc, per process;\n"
            "                              \"none\": do not publish)\n"
            "  SYNCTOP_RECORD              trace file to write\n"
            "  SYNCTOP_CURVE_KEY           CURVE key file (.key) to publish with (set by --key)\n"
            "  SYNCTOP_CURVE_CLIENTS       the clients admitted, as --clients (set by --clients)\n"
            "  SYNCTOP_INSECURE            1: a non-loopback tcp endpoint without a key is allowed\n"
            "  SYNCTOP_MODE                always (default) | on-demand (dormant until a viewer\n"
            "                              subscribes, dormant again when the last one leaves)\n"
            "  SYNCTOP_BLOCK_THRESHOLD_US  a call waiting this long is a blocking span and its\n"
            "                              call site is taken (default 20)\n"
            "  SYNCTOP_POLL_GAP_US         a cudaStreamQuery/cudaEventQuery loop is a wait only\n"
            "                              while its queries come less than this apart (1000)\n"
            "  SYNCTOP_FLUSH_MS            how often CUPTI's buffers are drained (default 100)\n"
            "  SYNCTOP_LINGER_MS           at exit, how long queued batches may take to leave\n"
            "                              (default 1000)\n"
            "  SYNCTOP_BUFFER_KB, SYNCTOP_MAX_BUFFERS   CUPTI activity buffers (1024 KB, 64)\n"
            "  SYNCTOP_QUEUE               host calls waiting for the flush thread (16384)\n"
            "  SYNCTOP_SNDHWM              batches queued per subscriber (1000)\n"
            "  SYNCTOP_FRAMES              call-site frames kept (12)\n"
            "  SYNCTOP_CUPTI               libcupti to load (default: searched)\n"
            "  SYNCTOP_QUIET               1: not even the one-line notice when tracing fails\n"
            "  SYNCTOP_VERBOSE             1: also say which libcupti, its version, what was seen\n"
            "  SYNCTOP_DISABLE             1: the tracer does nothing\n"
            "  SYNCTOP_TRACER              (read by run) the tracer library to inject\n");
}

/* ---- finding the traced processes ---- */

static long parent_of(long pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *close = strrchr(buf, ')'); /* the command name may hold anything */
    long ppid = -1;
    if (close == NULL || sscanf(close + 1, " %*c %ld", &ppid) != 1)
        return -1;
    return ppid;
}

static int descends_from(long pid, long ancestor) {
    for (int depth = 0; pid > 1 && depth < 64; depth++) {
        if (pid == ancestor)
            return 1;
        pid = parent_of(pid);
    }
    return 0;
}

typedef struct endpoints {
    char list[RUN_MAX_ENDPOINTS][TP_ENDPOINT_MAX];
    size_t n;
} endpoints;

static int endpoint_known(const endpoints *e, const char *ep) {
    for (size_t i = 0; i < e->n; i++)
        if (strcmp(e->list[i], ep) == 0)
            return 1;
    return 0;
}

static void connect_new(tp_sub *sub, endpoints *known, const char *ep) {
    if (known->n == RUN_MAX_ENDPOINTS || endpoint_known(known, ep))
        return;
    err_msg err;
    if (tp_sub_connect(sub, ep, &err) == 0)
        snprintf(known->list[known->n++], TP_ENDPOINT_MAX, "%s", ep);
}

typedef struct descendants {
    long child;
    void (*add)(void *ctx, const char *ep);
    void *ctx;
} descendants;

static void add_if_descendant(void *ctx, long pid, const char *ep) {
    descendants *d = ctx;
    if (descends_from(pid, d->child))
        d->add(d->ctx, ep);
}

/* Calls add for the default endpoints of the child and of its descendants that have one. */
static void discover(long child, void (*add)(void *ctx, const char *ep), void *ctx) {
    descendants d = {child, add, ctx};
    err_msg err;
    tp_endpoint_each(add_if_descendant, &d, &err);
}

typedef struct headless {
    tp_sub *sub;
    endpoints known;
} headless;

static void headless_add(void *ctx, const char *ep) {
    headless *h = ctx;
    connect_new(h->sub, &h->known, ep);
}

typedef struct live_discovery {
    long child;
    const char *cmd;
    uint64_t t0;  /* when it started (now_ms) */
    int reaped;   /* ended, its wait status in status */
    int status;
    char said[192];
} live_discovery;

typedef struct live_add_ctx {
    viewer_add_fn add;
    void *viewer;
} live_add_ctx;

static void live_add(void *ctx, const char *ep) {
    live_add_ctx *c = ctx;
    c->add(c->viewer, ep);
}

static void live_discover(void *ctx, viewer_add_fn add, void *viewer) {
    const live_discovery *ld = ctx;
    live_add_ctx c = {add, viewer};
    discover(ld->child, live_add, &c);
}

static uint64_t now_ms(void);

/* viewer_opts.ended: the command's end, once it has ended (its status kept for run_view). */
static const char *live_ended(void *ctx) {
    live_discovery *ld = ctx;
    if (!ld->reaped && waitpid((pid_t)ld->child, &ld->status, WNOHANG) == (pid_t)ld->child) {
        ld->reaped = 1;
        int code = WIFEXITED(ld->status) ? WEXITSTATUS(ld->status) : 128 + WTERMSIG(ld->status);
        snprintf(ld->said, sizeof ld->said, "%.60s exited with status %d after %.1f s", ld->cmd, code,
                 (double)(now_ms() - ld->t0) / 1000.0);
    }
    return ld->reaped ? ld->said : NULL;
}

/* What run follows without its viewer: batches into the store until the command has ended and its
 * producers have said goodbye (or a quiet second after it ended). */
typedef struct run_follow {
    headless *h;
    st_store *st;
    pid_t child;
    int *status;
    const char *listen_ep;
    int exited;
    double quiet_since, exited_at;
    uint64_t missed;
} run_follow;

#define RUN_AFTER_EXIT_S 10.0 /* the longest run hears batches once the command has ended */

static int run_batch(void *ctx, const tp_sub_msg *m, err_msg *err) {
    run_follow *f = ctx;
    f->missed += m->missed;
    st_store_add_batch(f->st, m->data, m->len, err); /* a bad batch is dropped alone */
    f->quiet_since = cm_now_s();
    return 0;
}

static int run_tick(void *ctx) {
    run_follow *f = ctx;
    if (f->listen_ep[0] == '\0')
        discover((long)f->child, headless_add, f->h);
    if (!f->exited && waitpid(f->child, f->status, WNOHANG) == f->child) {
        f->exited = 1;
        f->quiet_since = f->exited_at = cm_now_s();
    }
    /* its processes' last batches, until they said goodbye or a quiet second; bounded, as a
     * process that outlives the command may go on publishing */
    double quiet = cm_now_s() - f->quiet_since;
    return f->exited && (tp_sub_all_ended(f->h->sub) || quiet > 1.0 || cm_now_s() - f->exited_at > RUN_AFTER_EXIT_S ||
                         (st_producer_count(f->st) == 0 && quiet > 0.2)); /* a traced process is heard from
                                                                           * its start: none came */
}

/* ---- the environment of the command ---- */

static void set_default(const char *name, const char *value) {
    const char *cur = getenv(name);
    if (cur == NULL || *cur == '\0')
        setenv(name, value, 1);
}

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- the report at the end ---- */

static void print_report(FILE *out, st_store *st, const char *cmd, int status_code, double seconds,
                         uint64_t missed) {
    size_t n_prods = st_producer_count(st), ended = 0;
    uint64_t drops = missed;
    for (size_t i = 0; i < n_prods; i++) {
        const st_producer_info *p = st_producer_get(st, i);
        ended += p->ended != 0;
        for (int k = 1; k < TP_DROP_MAX_; k++)
            drops += p->drop_records[k] + p->drop_batches[k];
    }
    fprintf(out, "\nsynctop run: command exited with status %d after %.2f s; %zu traced process%s\n",
            status_code, seconds, n_prods, n_prods == 1 ? "" : "es");
    if (n_prods == 0 && status_code == 127) {
        fprintf(out, "  the command could not be run (see the reason above)\n");
        return;
    }
    if (n_prods == 0) {
        fprintf(out, "  no tracer reported: not a CUDA program, CUDA never initialised, or the "
                     "tracer stepped aside (when it does, it says why in one line above)\n");
        return;
    }
    if (drops || ended < n_prods)
        fprintf(out, "  incomplete: %" PRIu64 " records or batches lost%s\n", drops,
                ended < n_prods ? "; some processes did not finish their trace" : "");
    st_store_commit(st);
    verb_symbolize("run", st); /* native call sites to file:line */
    an_result r;
    err_msg err = {{0}};
    if (an_analyze(st, NULL, &r, &err) != 0) {
        fprintf(out, "  analysis failed: %s\n", err.msg);
        return;
    }
    rp_opts o = {.format = RP_TEXT, .source = cmd, .top = 15};
    rp_write(out, st, &r, &o);
    an_result_free(&r);
}

/* ---- the verb ---- */

typedef struct run_args {
    const char *record, *listen, *log, *key, *clients;
    int no_tui, ascii, mono, insecure, force;
    char **cmd;
} run_args;

/* The options, up to the command (after "--", or the first operand); 0 or EXIT_USAGE when the
 * verb is done, -1 to go on. */
static int parse_args(int argc, char **argv, run_args *a) {
    enum { O_RECORD = 1, O_LISTEN, O_LOG, O_KEY, O_INSECURE, O_NO_TUI, O_ASCII, O_MONO, O_CLIENTS, O_FORCE };
    static const arg_opt opts[] = {
        {O_RECORD, "--record", NULL, 1},     {O_LISTEN, "--listen", NULL, 1}, {O_LOG, "--log", NULL, 1},
        {O_KEY, "--key", NULL, 1},           {O_INSECURE, "--insecure", NULL, 0},
        {O_NO_TUI, "--no-tui", NULL, 0},     {O_ASCII, "--ascii", NULL, 0},   {O_MONO, "--mono", NULL, 0},
        {O_CLIENTS, "--clients", NULL, 1},   {O_FORCE, "--force", "-f", 0},
    };
    args p;
    ARGS_INIT(&p, "run", run_usage, opts, argc, argv);
    const char *val;
    for (int id; (id = args_next(&p, &val)) != ARGS_END;) {
        switch (id) {
        case ARGS_HELP: return 0;
        case ARGS_BAD: return EXIT_USAGE;
        case O_RECORD: a->record = val; break;
        case O_LISTEN: a->listen = val; break;
        case O_LOG: a->log = val; break;
        case O_KEY: a->key = val; break;
        case O_CLIENTS: a->clients = val; break;
        case O_INSECURE: a->insecure = 1; break;
        case O_NO_TUI: a->no_tui = 1; break;
        case O_ASCII: a->ascii = 1; break;
        case O_MONO: a->mono = 1; break;
        case O_FORCE: a->force = 1; break;
        default: a->cmd = args_from_operand(&p); return -1;
        }
    }
    return args_bad(&p, "no command given (synctop run [OPTIONS] -- COMMAND [ARGS...])");
}

/* The live view's log file for the command's output: private; --log's replaces an existing file
 * only when forced (the default one, in the private directory, is run's own). */
static int open_log(const char *path, int force, char *out, size_t outlen) {
    if (path != NULL) {
        snprintf(out, outlen, "%s", path);
        return open(out, O_WRONLY | O_CREAT | (force ? O_TRUNC : O_EXCL) | O_CLOEXEC | O_NOFOLLOW, 0600);
    } else {
        char dir[PATH_MAX];
        err_msg err;
        if (tp_endpoint_dir(dir, sizeof dir, &err) < 0)
            return -1;
        snprintf(out, outlen, "%s/synctop-run-%ld.log", dir, (long)getpid());
    }
    return open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
}

/* --key's pair: our own subscriber pins its public key and, as the holder of the server's pair,
 * is admitted by the tracer's check of its clients. 0, or the verb's status with the reason said. */
static int run_load_key(const char *key, char *key_path, tp_keypair *keys) {
    err_msg err = {{0}};
    if (realpath(key, key_path) == NULL)
        return verb_error("run", "--key %s: %s", key, strerror(errno));
    if (tp_keypair_load(keys, key_path, &err) != 0)
        return verb_error("run", "--key %s: %s", key, err.msg);
    if (keys->secret_key[0] == '\0')
        return verb_error("run", "--key %s: this is a public key; publishing needs the .key file "
                                 "(both keys) that `synctop keygen` wrote", key);
    return 0;
}

/* --clients, read here once so that a list the tracer would refuse is said before the command
 * starts; its absolute path in clients_path. 0, or the verb's status with the reason said. */
static int run_check_clients(const run_args *a, const char *listen_ep, char *clients_path) {
    err_msg err = {{0}};
    if (a->clients != NULL && a->key == NULL)
        return verb_error("run", "--clients goes with --key: only CURVE clients have keys to check"), EXIT_USAGE;
    if (a->clients == NULL) {
        if (a->key != NULL && strncmp(listen_ep, "tcp://", 6) == 0)
            verb_warn("run", "--key without --clients: whoever has the public key of %s and can reach %s can "
                             "watch; --clients DIR admits only the viewers whose keys it lists",
                      a->key, listen_ep);
        return 0;
    }
    if (realpath(a->clients, clients_path) == NULL)
        return verb_error("run", "--clients %s: %s", a->clients, strerror(errno));
    tp_clients *c = tp_clients_load(clients_path, &err);
    if (c == NULL)
        return verb_error("run", "--clients: %s", err.msg);
    tp_clients_destroy(&c);
    return 0;
}

/* Without the view: a subscriber (connected to --listen's endpoint when given) and a store. 0, or
 * the verb's status with the reason said. */
static int run_headless_new(const tp_keypair *keys, const char *listen_ep, headless **h, st_store **st) {
    err_msg err = {{0}};
    *h = calloc(1, sizeof **h);
    *st = st_store_new(NULL);
    tp_sub_opts so = {.server_key = keys ? keys->public_key : NULL, .client_key = keys};
    if (*h == NULL || *st == NULL || ((*h)->sub = tp_sub_new(&so, &err)) == NULL) {
        free(*h);
        *h = NULL;
        st_store_destroy(st);
        return verb_error("run", "%s", err.msg[0] ? err.msg : "out of memory");
    }
    if (listen_ep[0] != '\0')
        connect_new((*h)->sub, &(*h)->known, listen_ep);
    return 0;
}

/* The tracer and its settings, in the environment the command inherits. */
static void run_environment(const run_args *a, const char *tracer, const char *listen_ep, const char *key_path,
                            const char *clients_path) {
    setenv("CUDA_INJECTION64_PATH", tracer, 1);
    /* NVTX goes through the tracer to the CUPTI it traces with (the one the process loads, a
     * PyTorch wheel's for instance): naming a libcupti here would put a second one in. */
    set_default("NVTX_INJECTION64_PATH", tracer);
    set_default("SYNCTOP_MODE", "always");
    set_default("SYNCTOP_START_WAIT_MS", "5000");
    if (a->record != NULL)
        setenv("SYNCTOP_RECORD", a->record, 1);
    if (listen_ep[0] != '\0')
        setenv("SYNCTOP_LISTEN", listen_ep, 1);
    if (a->key != NULL)
        setenv("SYNCTOP_CURVE_KEY", key_path, 1);
    if (a->clients != NULL)
        setenv("SYNCTOP_CURVE_CLIENTS", clients_path, 1);
    if (a->insecure)
        setenv("SYNCTOP_INSECURE", "1", 1);
}

/* In the forked child: the command, with the signals it would have had. */
static _Noreturn void run_exec(const run_args *a, int log_fd, const struct sigaction *old_int,
                               const struct sigaction *old_quit) {
    sigaction(SIGINT, old_int, NULL);
    sigaction(SIGQUIT, old_quit, NULL);
    if (log_fd >= 0) {
        /* The live view owns the terminal: the command reads nothing and writes to the log. */
        int null_fd = open("/dev/null", O_RDONLY);
        if (null_fd >= 0)
            dup2(null_fd, STDIN_FILENO);
        dup2(log_fd, STDOUT_FILENO);
        dup2(log_fd, STDERR_FILENO);
    }
    execvp(a->cmd[0], a->cmd);
    fprintf(stderr, "synctop run: cannot run %s: %s\n", a->cmd[0], strerror(errno));
    _exit(127);
}

/* What the view held when it closed, in brief (rp_write_brief), kept to be said at the end. */
typedef struct run_brief {
    char *text; /* malloc'd; NULL when nothing was traced */
    size_t n_prods;
    uint64_t events, dropped; /* events the window held; events it let go to stay bounded */
} run_brief;

static void run_brief_make(void *ctx, st_store *s) {
    run_brief *b = ctx;
    st_store_commit(s);
    verb_symbolize("run", s); /* native call sites to file:line, as the report names them */
    b->n_prods = st_producer_count(s);
    b->events = st_store_events(s);
    b->dropped = st_store_dropped(s);
    if (b->n_prods == 0)
        return;
    an_result r;
    err_msg err = {{0}};
    if (an_analyze(s, NULL, &r, &err) != 0)
        return;
    size_t len = 0;
    FILE *m = open_memstream(&b->text, &len);
    if (m != NULL) {
        rp_write_brief(m, s, &r, 3);
        fclose(m);
    }
    an_result_free(&r);
}

/* Where the job's processes recorded (--record FILE): FILE, and the files its other processes
 * wrote beside it since the job started (FILE's name with .rankN or .pidN before its extension). */
static void say_recorded(const char *record, double since) {
    struct stat sb;
    if (stat(record, &sb) != 0 || (double)sb.st_mtim.tv_sec + (double)sb.st_mtim.tv_nsec * 1e-9 < since - 1.0) {
        verb_warn("run", "no trace was recorded to %s (see the tracer's notices in the command's output)", record);
        return;
    }
    char pattern[PATH_MAX], others[1024] = "";
    const char *base = strrchr(record, '/');
    const char *dot = strrchr(base ? base : record, '.');
    size_t stem = dot && dot != (base ? base + 1 : record) ? (size_t)(dot - record) : strlen(record);
    int n_others = 0;
    glob_t g;
    if (strpbrk(record, "*?[\\") == NULL &&
        snprintf(pattern, sizeof pattern, "%.*s.*%s", (int)stem, record, record + stem) < (int)sizeof pattern &&
        glob(pattern, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            const char *tag = g.gl_pathv[i] + stem + 1;
            if ((strncmp(tag, "rank", 4) != 0 && strncmp(tag, "pid", 3) != 0) || stat(g.gl_pathv[i], &sb) != 0 ||
                (double)sb.st_mtim.tv_sec + (double)sb.st_mtim.tv_nsec * 1e-9 < since - 1.0)
                continue;
            size_t l = strlen(others);
            if (n_others++ < 4)
                snprintf(others + l, sizeof others - l, "%s%s", l ? ", " : "", g.gl_pathv[i]);
        }
        globfree(&g);
    }
    if (n_others == 0)
        verb_say("run", "the trace is in %s; `synctop report %s` has the whole report", record, record);
    else
        verb_say("run", "the trace is in %s and, from the job's other processes, %s%s; `synctop report` of "
                        "them has the whole report",
                 record, others, n_others > 4 ? " and more" : "");
}

/* The live view of the command's processes until it is closed, then the command's end (Ctrl-C
 * then reaches it); its wait status in *status. Then what the view saw in brief, and where the
 * trace and the command's output went. */
static void run_view(const run_args *a, pid_t child, const char *listen_ep, const tp_keypair *keys,
                     const char *log_path, const struct sigaction *old_int, uint64_t t0, int *status) {
    live_discovery ld = {.child = (long)child, .cmd = a->cmd[0], .t0 = t0};
    const char *eps[1] = {listen_ep};
    struct timespec started; /* the files the job records are written after this */
    clock_gettime(CLOCK_REALTIME, &started);
    run_brief brief = {0};
    viewer_opts vo = {.ascii = a->ascii, .mono = a->mono, .verb = "run", .discover = live_discover,
                      .discover_ctx = &ld, .server_key = keys ? keys->public_key : NULL, .client_key = keys,
                      .on_close = run_brief_make, .on_close_ctx = &brief, .ended = live_ended};
    viewer_result vres;
    verb_viewer_done("run", viewer_run_live(eps, listen_ep[0] ? 1 : 0, &vo, &vres), &vres, vo.record);
    if (ld.reaped) {
        *status = ld.status;
    } else if (waitpid(child, status, WNOHANG) != child) {
        fprintf(stderr, "synctop run: the view is closed; waiting for %s (pid %ld) to end "
                        "(Ctrl-C interrupts it)\n", a->cmd[0], (long)child);
        sigaction(SIGINT, old_int, NULL);
        while (waitpid(child, status, 0) < 0 && errno == EINTR)
            ;
    }
    int code = WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
    fprintf(stderr, "synctop run: %s exited with status %d after %.2f s; %zu traced process%s\n", a->cmd[0], code,
            (double)(now_ms() - t0) / 1000.0, brief.n_prods, brief.n_prods == 1 ? "" : "es");
    if (brief.text != NULL) {
        fprintf(stderr, "  until the view closed%s:\n", brief.dropped ? " (its window: the latest events)" : "");
        fputs(brief.text, stderr);
    }
    free(brief.text);
    if (a->record != NULL)
        say_recorded(a->record, (double)started.tv_sec + (double)started.tv_nsec * 1e-9);
    fprintf(stderr, "synctop run: the output of %s is in %s\n", a->cmd[0], log_path);
}

/* Without the view: the command's batches into the store until it has ended, then the report;
 * its wait status in *status. */
static void run_headless(const run_args *a, headless *h, st_store *st, pid_t child, const char *listen_ep,
                         uint64_t t0, int *status) {
    struct timespec started; /* the files the job records are written after this */
    clock_gettime(CLOCK_REALTIME, &started);
    run_follow f = {.h = h, .st = st, .child = child, .status = status, .listen_ep = listen_ep};
    live_opts lo = {.poll_ms = 50, .on_batch = run_batch, .on_tick = run_tick, .ctx = &f, .keep_after_end = 1};
    err_msg err = {{0}};
    if (live_follow(h->sub, &lo, &err) == LIVE_FAILED)
        verb_error("run", "cannot receive: %s", err.msg);
    int code = WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
    print_report(stderr, st, a->cmd[0], code, (double)(now_ms() - t0) / 1000.0, f.missed);
    if (a->record != NULL)
        say_recorded(a->record, (double)started.tv_sec + (double)started.tv_nsec * 1e-9);
}

/* An endpoint the environment names for the tracer (SYNCTOP_LISTEN, else SYNCTOP_ENDPOINT) is where
 * the command's processes would publish, not their own endpoints run looks for: taken as --listen
 * when none is given, said in a line. "none" (publish nothing) would leave run with nothing to
 * show: dropped from the command's environment. */
static void run_inherited_listen(run_args *a) {
    static const char *const names[] = {"SYNCTOP_LISTEN", "SYNCTOP_ENDPOINT"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v == NULL || v[0] == '\0')
            continue;
        if (strcmp(v, "none") == 0) {
            verb_say("run", "%s=none in the environment is left out: run follows what the command publishes",
                     names[i]);
            unsetenv(names[i]);
            continue;
        }
        if (a->listen == NULL) {
            a->listen = v;
            verb_say("run", "publishing on %s, as %s in the environment says (as --listen)", v, names[i]);
        }
        return;
    }
}

static int cmd_run(int argc, char **argv) {
    run_args a = {0};
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        a.no_tui = 1;
    char tracer[PATH_MAX];
    if (ij_find_tracer(tracer, sizeof tracer) != 0)
        return verb_error("run", "cannot find libsynctop-tracer.so where synctop is installed (set "
                                 "SYNCTOP_TRACER=/path/to/libsynctop-tracer.so)");
    char listen_ep[TP_ENDPOINT_MAX] = "";
    run_inherited_listen(&a);
    if (a.listen != NULL && (rc = verb_listen_resolve("run", a.listen, listen_ep, sizeof listen_ep)) != 0)
        return rc;
    /* The tracer cannot publish where something listens already, and run would hear that instead. */
    if (listen_ep[0] != '\0' && tp_endpoint_in_use(listen_ep) == 1)
        return verb_error("run", "--listen %s: something is listening there already (another traced program, "
                                 "demo or relay?): choose another endpoint", listen_ep);
    if (!a.force && a.record != NULL && access(a.record, F_OK) == 0)
        return verb_error("run", "--record %s: the file exists (use --force to replace it)", a.record);
    /* The tracer refuses to publish beyond the machine in the clear: say so before the job starts,
     * not in its log after it ran untraced. */
    if ((rc = verb_refuse_clear_listen("run", listen_ep, a.key != NULL, a.insecure, "the tracer",
                                       ", and would trace nothing", "job")) != 0)
        return rc;
    tp_keypair keys = {{0}, {0}};
    char key_path[PATH_MAX] = "", clients_path[PATH_MAX] = "";
    if (a.key != NULL && (rc = run_load_key(a.key, key_path, &keys)) != 0)
        return rc;
    const tp_keypair *pair = a.key != NULL ? &keys : NULL;
    if ((rc = run_check_clients(&a, listen_ep, clients_path)) != 0)
        return rc;
    char log_path[PATH_MAX + 64] = "";
    int log_fd = -1;
    if (!a.no_tui && (log_fd = open_log(a.log, a.force, log_path, sizeof log_path)) < 0)
        return verb_error("run", "cannot create the log file %s: %s%s", log_path, strerror(errno),
                          errno == EEXIST ? " (use --force to replace it)" : "");
    headless *h = NULL;
    st_store *st = NULL;
    if (a.no_tui && (rc = run_headless_new(pair, listen_ep, &h, &st)) != 0)
        return rc;
    run_environment(&a, tracer, listen_ep, key_path, clients_path);

    /* Ctrl-C goes to the whole foreground group: the command decides; we stay to sum up. */
    struct sigaction ign = {.sa_handler = SIG_IGN}, old_int, old_quit;
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    uint64_t t0 = now_ms();
    fflush(NULL);
    pid_t child = fork();
    if (child == 0)
        run_exec(&a, log_fd, &old_int, &old_quit);
    if (child < 0) {
        rc = verb_error("run", "fork: %s", strerror(errno));
    } else {
        int status = 0;
        if (!a.no_tui)
            run_view(&a, child, listen_ep, pair, log_path, &old_int, t0, &status);
        else
            run_headless(&a, h, st, child, listen_ep, t0, &status);
        rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    if (log_fd >= 0)
        close(log_fd);
    if (h != NULL) {
        tp_sub_destroy(&h->sub);
        free(h);
    }
    st_store_destroy(&st);
    explicit_bzero(&keys, sizeof keys);
    return rc;
}

SYNCTOP_VERB(run, .name = "run", .fn = cmd_run,
             .synopsis = "run [--record F] [--no-tui] -- CMD",
             .summary = "run a CUDA program with the tracer: live view, or a report at exit",
             .rank = 10)
