/*
 * `synctop run`: runs a command with the tracer injected, listens to every traced process it
 * starts, and, once the command has ended, sums up where its host threads waited for the GPU.
 *
 * The tracer is found next to this binary (build tree: ../tracer/, install: ../lib/synctop/) or
 * named by SYNCTOP_TRACER. Each traced process publishes on its own default endpoint
 * (PID.sock in the private endpoint directory); run finds those of the command's descendants as
 * they appear, so wrappers, launchers and several GPU processes are all heard. The tracer is told
 * to wait (bounded) for run to subscribe before the program goes on, so nothing is missed at the
 * start. The viewer is not there yet: run always prints the summary (--no-tui is implied).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "synctop/codec.h"
#include "synctop/net.h"
#include "verb.h"

#define RUN_MAX_PRODUCERS 64
#define RUN_MAX_SITES 4096
#define RUN_MAX_ENDPOINTS 256
#define RUN_SITE_TEXT 160

static void run_usage(FILE *out) {
    fprintf(out,
            "usage: synctop run [--record FILE] [--listen ENDPOINT] [--no-tui] -- CMD [ARGS...]\n\n"
            "Runs CMD with synctop's CUDA tracer injected (no change to the program) and, when\n"
            "it ends, prints where its host threads waited for the GPU: time blocked per call\n"
            "site, and event counts. The exit status is CMD's.\n\n"
            "  --record FILE      also write the trace to FILE (see `synctop info FILE`)\n"
            "  --listen ENDPOINT  publish on ENDPOINT (tcp://127.0.0.1:PORT, ipc://PATH) instead\n"
            "                     of each process's default ipc endpoint; one process only\n"
            "  --no-tui           print the summary only (the live viewer is not written yet:\n"
            "                     this is what run always does for now)\n\n"
            "Environment read by the tracer inside CMD (run sets the first three):\n"
            "  CUDA_INJECTION64_PATH       the tracer library (set by run)\n"
            "  NVTX_INJECTION64_PATH       libcupti, so NVTX ranges are recorded (set by run)\n"
            "  SYNCTOP_START_WAIT_MS       wait this long at CUDA init for a viewer (run: 5000)\n"
            "  SYNCTOP_LISTEN              endpoint to publish on (default: ipc, per process;\n"
            "                              \"none\": do not publish)\n"
            "  SYNCTOP_RECORD              trace file to write\n"
            "  SYNCTOP_MODE                always (default) | on-demand (dormant until a viewer\n"
            "                              subscribes, dormant again when the last one leaves)\n"
            "  SYNCTOP_BLOCK_THRESHOLD_US  a call waiting this long is a blocking span and its\n"
            "                              call site is taken (default 20)\n"
            "  SYNCTOP_FLUSH_MS            how often CUPTI's buffers are drained (default 100)\n"
            "  SYNCTOP_LINGER_MS           at exit, how long queued batches may take to leave\n"
            "                              (default 1000)\n"
            "  SYNCTOP_BUFFER_KB, SYNCTOP_MAX_BUFFERS   CUPTI activity buffers (1024 KB, 64)\n"
            "  SYNCTOP_QUEUE               host calls waiting for the flush thread (16384)\n"
            "  SYNCTOP_SNDHWM              batches queued per subscriber (1000)\n"
            "  SYNCTOP_FRAMES              call-site frames kept (8)\n"
            "  SYNCTOP_CUPTI               libcupti to load (default: searched)\n"
            "  SYNCTOP_QUIET               1: not even the one-line notice when tracing fails\n"
            "  SYNCTOP_DISABLE             1: the tracer does nothing\n"
            "  SYNCTOP_TRACER              (read by run) the tracer library to inject\n");
}

/* ---- what we heard ---- */

typedef struct site_sum {
    uint64_t producer;
    uint32_t id;
    uint32_t api_name_cbid;
    char api[64];
    char where[RUN_SITE_TEXT];
    uint64_t ns, calls;
} site_sum;

typedef struct producer {
    uint64_t id;
    tp_strtab *strings;
    int ended;
    uint32_t pid;
    uint64_t drops[TP_DROP_MAX_][2];
} producer;

static struct {
    producer prods[RUN_MAX_PRODUCERS];
    size_t n_prods;
    site_sum sites[RUN_MAX_SITES];
    size_t n_sites;
    uint64_t kinds[TP_K_MAX_];
    uint64_t blocked_ns, blocked_calls;
    uint64_t missed;
} R;

static producer *producer_get(uint64_t id) {
    for (size_t i = 0; i < R.n_prods; i++)
        if (R.prods[i].id == id)
            return &R.prods[i];
    if (R.n_prods == RUN_MAX_PRODUCERS)
        return NULL;
    producer *p = &R.prods[R.n_prods++];
    memset(p, 0, sizeof *p);
    p->id = id;
    p->strings = tp_strtab_new();
    return p->strings ? p : NULL;
}

static site_sum *site_get(uint64_t producer_id, uint32_t id) {
    for (size_t i = 0; i < R.n_sites; i++)
        if (R.sites[i].producer == producer_id && R.sites[i].id == id)
            return &R.sites[i];
    if (R.n_sites == RUN_MAX_SITES)
        return NULL;
    site_sum *s = &R.sites[R.n_sites++];
    memset(s, 0, sizeof *s);
    s->producer = producer_id;
    s->id = id;
    return s;
}

static const char *pstr(const producer *p, uint32_t id) {
    uint32_t len;
    const char *s = id ? tp_strtab_get(p->strings, id, &len) : NULL;
    return s ? s : "";
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* Frames arrive innermost first; the first three make the call site's description. */
static void note_frame(producer *p, const tp_frame *f) {
    if (f->index > 2)
        return;
    site_sum *s = site_get(p->id, f->callsite);
    if (s == NULL)
        return;
    size_t n = strlen(s->where);
    if (f->index == 0)
        n = 0;
    const char *func = pstr(p, f->func);
    snprintf(s->where + n, sizeof s->where - n, "%s%s%s(%s+%#" PRIx64 ")", n ? " <- " : "", func,
             *func ? " " : "", base_name(pstr(p, f->module)), f->pc);
}

static void take_batch(const tp_sub_msg *msg) {
    tp_dec d;
    memset(&d, 0, sizeof d);
    tp_err err;
    if (tp_dec_open(&d, msg->data, msg->len, &err) != 0) {
        tp_dec_free(&d);
        return;
    }
    producer *p = producer_get(d.hdr.producer);
    if (p == NULL) {
        tp_dec_free(&d);
        return;
    }
    R.missed += msg->missed;
    tp_dec_load_strings(&d, p->strings);
    const tp_record *r;
    while ((r = tp_dec_next_record(&d)) != NULL) {
        unsigned k = r->head.kind;
        if (!TP_KIND_IS_META(k))
            R.kinds[k]++;
        if (k == TP_K_PROCESS)
            p->pid = r->process.pid;
        else if (k == TP_K_FRAME)
            note_frame(p, &r->frame);
        else if (k == TP_K_DROPS && r->drops.source < TP_DROP_MAX_) {
            p->drops[r->drops.source][0] = r->drops.records;
            p->drops[r->drops.source][1] = r->drops.batches;
        } else if (k == TP_K_API && (r->api.flags & TP_F_BLOCKING)) {
            uint64_t ns = r->api.end - r->api.start;
            R.blocked_ns += ns;
            R.blocked_calls++;
            site_sum *s = site_get(p->id, r->api.callsite);
            if (s != NULL) {
                s->ns += ns;
                s->calls++;
                if (s->api[0] == '\0')
                    snprintf(s->api, sizeof s->api, "%s", pstr(p, r->api.name));
            }
        }
    }
    if (d.hdr.flags & TP_BF_END)
        p->ended = 1;
    tp_dec_free(&d);
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
    tp_err err;
    if (tp_sub_connect(sub, ep, &err) == 0)
        snprintf(known->list[known->n++], TP_ENDPOINT_MAX, "%s", ep);
}

/* Connects to the default endpoints of the child and of its descendants that have one. */
static void discover(tp_sub *sub, endpoints *known, long child) {
    char dir[PATH_MAX];
    tp_err err;
    if (tp_endpoint_dir(dir, sizeof dir, &err) < 0)
        return;
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (end == e->d_name || strcmp(end, ".sock") != 0 || !descends_from(pid, child))
            continue;
        char ep[TP_ENDPOINT_MAX];
        if (tp_endpoint_for_pid(pid, ep, sizeof ep, &err) == 0)
            connect_new(sub, known, ep);
    }
    closedir(d);
}

/* ---- the environment of the command ---- */

static int find_tracer(char *out, size_t outlen) {
    const char *env = getenv("SYNCTOP_TRACER");
    if (env != NULL && *env != '\0') {
        snprintf(out, outlen, "%s", env);
        return access(out, R_OK) == 0 ? 0 : -1;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return -1;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash == NULL)
        return -1;
    *slash = '\0';
    const char *rel[] = {"../tracer/libsynctop-tracer.so", "../lib/synctop/libsynctop-tracer.so",
                         "../lib64/synctop/libsynctop-tracer.so", "libsynctop-tracer.so"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/%s", self, rel[i]);
        if (access(path, R_OK) == 0 && realpath(path, out) != NULL)
            return 0;
    }
    return -1;
}

/* libcupti's path for NVTX_INJECTION64_PATH, as the tracer would find it. */
static int find_cupti(char *out, size_t outlen) {
    const char *env = getenv("SYNCTOP_CUPTI");
    if (env != NULL && *env != '\0') {
        snprintf(out, outlen, "%s", env);
        return 0;
    }
    const char *names[] = {"libcupti.so.13", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
                           "/usr/local/cuda/lib64/libcupti.so.13"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        /* RTLD_NOLOAD would miss it; a lazy load is harmless: CUPTI does nothing until called. */
        void *h = dlopen(names[i], RTLD_LAZY | RTLD_LOCAL);
        if (h == NULL)
            continue;
        void *sym = dlsym(h, "cuptiGetVersion");
        Dl_info info;
        int ok = sym != NULL && dladdr(sym, &info) != 0 && info.dli_fname != NULL;
        if (ok)
            snprintf(out, outlen, "%s", info.dli_fname);
        dlclose(h);
        if (ok)
            return 0;
    }
    return -1;
}

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

/* ---- summary ---- */

static int by_time(const void *a, const void *b) {
    const site_sum *x = a, *y = b;
    return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}

static void print_summary(FILE *out, int status_code, double seconds) {
    size_t ended = 0;
    uint64_t drops = 0;
    for (size_t i = 0; i < R.n_prods; i++) {
        ended += R.prods[i].ended;
        for (int s = 1; s < TP_DROP_MAX_; s++)
            drops += R.prods[i].drops[s][0] + R.prods[i].drops[s][1];
    }
    fprintf(out, "\nsynctop run: command exited with status %d after %.2f s; %zu traced process%s\n",
            status_code, seconds, R.n_prods, R.n_prods == 1 ? "" : "es");
    if (R.n_prods == 0) {
        fprintf(out, "  no tracer reported: not a CUDA program, CUDA never initialised, or the "
                     "tracer stepped aside (see its one-line notice above)\n");
        return;
    }
    fprintf(out, "events: kernel %" PRIu64 ", memcpy %" PRIu64 ", memset %" PRIu64 ", sync %" PRIu64
                 ", api %" PRIu64 ", nvtx %" PRIu64 "; dropped %" PRIu64 "%s%s\n",
            R.kinds[TP_K_KERNEL], R.kinds[TP_K_MEMCPY], R.kinds[TP_K_MEMSET], R.kinds[TP_K_SYNC],
            R.kinds[TP_K_API], R.kinds[TP_K_NVTX], drops + R.missed,
            ended < R.n_prods ? "; some processes did not finish their trace" : "",
            R.missed ? " (batches missed live)" : "");
    fprintf(out, "host blocked %.3f ms in %" PRIu64 " call%s\n", (double)R.blocked_ns / 1e6,
            R.blocked_calls, R.blocked_calls == 1 ? "" : "s");
    qsort(R.sites, R.n_sites, sizeof R.sites[0], by_time);
    int shown = 0;
    for (size_t i = 0; i < R.n_sites && shown < 15; i++) {
        const site_sum *s = &R.sites[i];
        if (s->calls == 0)
            continue;
        if (shown++ == 0)
            fprintf(out, "  %12s %8s  %-24s %s\n", "blocked ms", "calls", "api", "call site");
        fprintf(out, "  %12.3f %8" PRIu64 "  %-24.24s ", (double)s->ns / 1e6, s->calls,
                s->api[0] ? s->api : "?");
        verb_print_sanitized(out, s->id ? s->where : "(no call site taken)", (size_t)-1);
        fputc('\n', out);
    }
}

/* ---- the verb ---- */

static int cmd_run(int argc, char **argv) {
    const char *record = NULL, *listen = NULL;
    int i = 1;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            run_usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (strcmp(argv[i], "--record") == 0 && i + 1 < argc)
            record = argv[++i];
        else if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc)
            listen = argv[++i];
        else if (strcmp(argv[i], "--no-tui") == 0)
            continue;
        else if (argv[i][0] != '-')
            break; /* the command, without "--" */
        else {
            fprintf(stderr, "synctop run: unexpected argument '");
            verb_print_sanitized(stderr, argv[i], (size_t)-1);
            fprintf(stderr, "'\n");
            run_usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (i >= argc) {
        run_usage(stderr);
        return EXIT_USAGE;
    }
    char **cmd = argv + i;

    char tracer[PATH_MAX];
    if (find_tracer(tracer, sizeof tracer) != 0)
        return verb_error("run", "cannot find libsynctop-tracer.so next to synctop (set "
                                 "SYNCTOP_TRACER=/path/to/libsynctop-tracer.so)");
    char listen_ep[TP_ENDPOINT_MAX] = "";
    tp_err err = {{0}};
    if (listen != NULL && tp_endpoint_resolve(listen, listen_ep, sizeof listen_ep, &err) < 0)
        return verb_error("run", "--listen %s: %s", listen, err.msg);

    tp_sub *sub = tp_sub_new(NULL, &err);
    if (sub == NULL)
        return verb_error("run", "%s", err.msg);
    endpoints *known = calloc(1, sizeof *known);
    if (known == NULL) {
        tp_sub_destroy(&sub);
        return verb_error("run", "out of memory");
    }
    if (listen_ep[0] != '\0')
        connect_new(sub, known, listen_ep);

    setenv("CUDA_INJECTION64_PATH", tracer, 1);
    char cupti[PATH_MAX];
    if (find_cupti(cupti, sizeof cupti) == 0)
        set_default("NVTX_INJECTION64_PATH", cupti);
    set_default("SYNCTOP_MODE", "always");
    set_default("SYNCTOP_START_WAIT_MS", "5000");
    if (record != NULL)
        setenv("SYNCTOP_RECORD", record, 1);
    if (listen_ep[0] != '\0')
        setenv("SYNCTOP_LISTEN", listen_ep, 1);

    /* Ctrl-C goes to the whole foreground group: the command decides; we stay to sum up. */
    struct sigaction ign = {.sa_handler = SIG_IGN}, old_int, old_quit;
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    uint64_t t0 = now_ms();
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) {
        free(known);
        tp_sub_destroy(&sub);
        return verb_error("run", "fork: %s", strerror(errno));
    }
    if (child == 0) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGQUIT, &old_quit, NULL);
        execvp(cmd[0], cmd);
        fprintf(stderr, "synctop run: cannot run %s: %s\n", cmd[0], strerror(errno));
        _exit(127);
    }

    int status = 0, exited = 0;
    uint64_t quiet_since = 0;
    for (;;) {
        if (listen_ep[0] == '\0')
            discover(sub, known, (long)child);
        tp_sub_msg msg;
        int rc = tp_sub_recv(sub, &msg, 50, &err);
        if (rc == 1) {
            take_batch(&msg);
            quiet_since = now_ms();
        }
        if (!exited && waitpid(child, &status, WNOHANG) == child) {
            exited = 1;
            quiet_since = now_ms();
        }
        if (exited) {
            size_t ended = 0;
            for (size_t k = 0; k < R.n_prods; k++)
                ended += R.prods[k].ended;
            /* Done when every producer said goodbye, or after a quiet second. */
            if ((R.n_prods > 0 && ended == R.n_prods) || now_ms() - quiet_since > 1000)
                break;
        }
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    print_summary(stdout, code, (double)(now_ms() - t0) / 1000.0);
    for (size_t k = 0; k < R.n_prods; k++)
        tp_strtab_destroy(&R.prods[k].strings);
    free(known);
    tp_sub_destroy(&sub);
    return code;
}

SYNCTOP_VERB(run, .name = "run", .fn = cmd_run,
             .synopsis = "run [--record F] [--listen EP] -- CMD",
             .summary = "run a CUDA program with the tracer and sum up where it waited",
             .rank = 10)
