/*
 * `synctop attach [PID|ENDPOINT...]`: the live viewer on running traced processes. With no
 * argument it attaches to every live traced process of this user (the ipc sockets in the private
 * endpoint directory, skipping those left by dead processes) and to those that start later.
 * With --record FILE everything received is also written to a trace file.
 *
 * A PID whose process has no tracer (nothing publishes on its endpoint, and its environment does
 * not have the driver load it) gets one, after the user said yes: inject.h loads
 * libsynctop-tracer.so into it with ptrace (or starts the one a detach stopped), in on-demand mode,
 * and stops it again when the viewer quits (unless --keep-tracing).
 */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "synctop/net.h"
#include "synctop/sanitize.h"
#include "args.h"
#include "inject.h"
#include "verb.h"
#include "viewer.h"

#define ATTACH_MAX 64

static void attach_usage(FILE *out) {
    fprintf(out,
            "usage: synctop attach [PID|ENDPOINT...] [--server-key KEY [--client-key FILE.key]]\n"
            "                      [--window-events N]\n"
            "                      [--record FILE [--force]] [--step NAME] [--from FILE] [--ascii]\n"
            "                      [--mono] [--yes] [--inject-only] [--keep-tracing] [--no-inject]\n"
            "       synctop attach --summary RELAY... [--server-key KEY] [--from FILE] [--window-events N]\n"
            "                      [--ascii] [--mono]\n\n"
            "Shows running traced processes live in the interactive timeline. A PID whose process\n"
            "has no tracer gets one first: synctop asks, then loads libsynctop-tracer.so into it with\n"
            "ptrace (x86-64 or aarch64; the process must be yours) and starts it. Its main thread pauses\n"
            "for about as long as loading a library takes; the tracer collects only while a viewer is\n"
            "connected, and when the viewer quits it is stopped again (`synctop detach`): its threads\n"
            "and socket go, the library stays loaded, idle. (aarch64 is built but not yet tried on an\n"
            "aarch64 machine.)\n\n"
            "  PID, ENDPOINT      a traced process's pid, HOST:PORT, tcp://..., ipc://...; none: every\n"
            "                     live traced process of this user, and those that start later\n"
            "  --from FILE        also the endpoints listed in FILE, one per line (# comments):\n"
            "                     a job's relays, say (each host's processes are then put on\n"
            "                     this machine's clock as its relay measured it, the offset and\n"
            "                     its uncertainty on their rows)\n"
            "  --server-key KEY   the publishers' CURVE public key (a .pub/.key file or the key)\n"
            "  --client-key FILE  our own CURVE key pair, for publishers that admit listed clients\n"
            "                     only (default: ~/.config/synctop/client.key when `synctop keygen\n"
            "                     --client` made it)\n"
            "  --window-events N  events kept in memory; older ones are dropped (default 4194304)\n"
            "  --record FILE      also write everything received to a trace file (nothing is lost\n"
            "                     when the window drops old events); --force (-f) replaces FILE\n"
            "  --step NAME        the loop's steps are the NVTX ranges named NAME (default:\n"
            "                     ProfilerStep#N, else a regular blocking call, as report finds them)\n"
            "  --ascii, --mono    ASCII glyphs, no colours\n"
            "  -y, --yes          load the tracer into a PID without one without asking (needed\n"
            "                     when standard input is not a terminal)\n"
            "  --inject-only      load and start the tracer where needed, then exit without the\n"
            "                     viewer (it keeps tracing until `synctop detach PID`)\n"
            "  --keep-tracing     leave the tracer started when the viewer quits\n"
            "  --no-inject        never load the tracer: wait for the process to publish\n"
            "  --summary          through relays (`synctop relay`), for jobs of many ranks: a row per\n"
            "                     rank from the relays' summaries alone (rank, host, pid, GPU busy,\n"
            "                     host blocked and idle %%, the busy share of the recent intervals,\n"
            "                     events/s, drops), sorted by rank; no raw event comes until a rank is\n"
            "                     opened (Enter): then its batches come and Tab shows its lanes as the\n"
            "                     live view does (S: back to the rows); Enter again closes it and\n"
            "                     stops them\n");
}

/* One endpoint the user named: checked, resolved and added (pids[*n]: its pid, or 0 when it was not
 * given as one); 0, or the verb's status with the reason said (EXIT_USAGE: not an endpoint). */
static int attach_endpoint(const char *a, char (*eps)[TP_ENDPOINT_MAX], const char **list, long *pids, size_t *n) {
    err_msg err = {{0}};
    if (*n == ATTACH_MAX)
        return verb_error("attach", "at most %d endpoints", ATTACH_MAX);
    /* a pid: the process must exist (a traced one that has not published yet is waited for) */
    if (strspn(a, "0123456789") == strlen(a) && kill((pid_t)strtol(a, NULL, 10), 0) != 0 && errno == ESRCH)
        return verb_error("attach", "no process %s (synctop attach with no argument finds the traced "
                                    "processes of this user)", a);
    if (tp_endpoint_resolve(a, eps[*n], TP_ENDPOINT_MAX, &err) != 0)
        return verb_error("attach", "%s", err.msg), EXIT_USAGE;
    if (tp_endpoint_host_found(eps[*n], &err) < 0)
        return verb_error("attach", "%s: %s", a, err.msg);
    pids[*n] = strspn(a, "0123456789") == strlen(a) ? strtol(a, NULL, 10) : 0;
    list[*n] = eps[*n];
    (*n)++;
    return 0;
}

/* How processes without a tracer are treated, and which got one. */
typedef struct inject_choice {
    int yes, only, never, keep;
    int started[ATTACH_MAX]; /* per endpoint: the tracer was started now (to stop at the end) */
} inject_choice;

/* Asks on the terminal whether to load the tracer into pid; 1 yes, 0 no (said why). */
static int confirm(long pid, const ij_probe_info *p, const char *tracer, int yes) {
    char what[1024];
    if (p->tracer_loaded)
        snprintf(what, sizeof what, "process %ld (%s) has the tracer, not running: start it with ptrace", pid,
                 p->cmdline[0] ? p->cmdline : p->name);
    else
        snprintf(what, sizeof what, "process %ld (%s) has no tracer: load %s into it with ptrace", pid,
                 p->cmdline[0] ? p->cmdline : p->name, tracer);
    if (p->seccomp_filters > 0) {
        size_t n = strlen(what);
        snprintf(what + n, sizeof what - n,
                 " (it runs under %d seccomp filter%s, as in a container: a system call they forbid makes the "
                 "load fail, or ends the process if the filter kills on it)",
                 p->seccomp_filters, p->seccomp_filters == 1 ? "" : "s");
    }
    if (yes) {
        verb_say("attach", "%s", what);
        return 1;
    }
    if (!isatty(STDIN_FILENO)) {
        verb_error("attach", "%s? Not without your confirmation: run on a terminal, or pass --yes (or start the "
                             "program under `synctop run`)", what);
        return 0;
    }
    fprintf(stderr, "synctop attach: ");
    tp_print_sanitized(stderr, what, (size_t)-1);
    fprintf(stderr, "? It collects only while a viewer is connected and is stopped when the viewer quits; the "
                    "program pauses for a moment. [y/N] ");
    fflush(stderr);
    char line[64];
    if (fgets(line, sizeof line, stdin) == NULL || tolower((unsigned char)line[0]) != 'y') {
        verb_say("attach", "nothing loaded into process %ld", pid);
        return 0;
    }
    return 1;
}

/* A pid given on the command line whose endpoint nobody listens on: waited for, or given the
 * tracer. 0, or 1 with the reason said. */
static int attach_prepare_pid(long pid, const char *endpoint, inject_choice *c, int *started) {
    ij_probe_info p;
    err_msg err = {{0}};
    if (ij_probe(pid, &p, &err) != 0)
        return verb_error("attach", "%s", err.msg);
    if ((p.tracer_at_init && !p.tracer_loaded) || c->never) {
        if (p.tracer_at_init && !p.tracer_loaded)
            verb_say("attach", "process %ld loads the tracer when it initialises CUDA (CUDA_INJECTION64_PATH): "
                               "waiting for it on %s", pid, endpoint);
        else
            verb_say("attach", "nobody publishes on %s yet; waiting for it", endpoint);
        return 0;
    }
    if (!ij_supported())
        return verb_error("attach", "process %ld has no tracer, and loading one into a running process is "
                                    "implemented for x86-64 and aarch64 only: start it under `synctop run`", pid);
    if (!p.cuda_loaded)
        return verb_error("attach", "process %ld has not loaded libcuda (the CUDA driver): it is not a CUDA program, "
                                    "or has not started CUDA yet, so there is nothing to trace; try again once it "
                                    "has (nothing was loaded into it)", pid);
    char tracer[4096];
    if (ij_find_tracer(tracer, sizeof tracer) != 0)
        return verb_error("attach", "process %ld has no tracer, and there is no libsynctop-tracer.so next to "
                                    "synctop to load (set SYNCTOP_TRACER=/path/to/libsynctop-tracer.so)", pid);
    if (!confirm(pid, &p, tracer, c->yes))
        return 1;
    ij_opts o = {.mode = "on-demand"};
    ij_report r;
    int rc = ij_inject(pid, tracer, &o, &r, &err);
    if (rc == IJ_PUBLISHING) { /* it started publishing meanwhile */
        verb_say("attach", "process %ld already has the tracer", pid);
        return 0;
    }
    if (rc != 0)
        return verb_error("attach", "%s", err.msg);
    verb_say("attach", "%s the tracer in process %ld (its main thread was held %.1f ms); it publishes on %s, "
                       "collecting only while a viewer is connected",
             r.loaded ? "loaded and started" : "started", pid, (double)r.longest_pause_ns / 1e6, r.endpoint);
    *started = 1;
    return 0;
}

/* Stops the tracers this attach started, now that the viewer has quit. */
static void stop_started(const inject_choice *c, const long *pids, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!c->started[i])
            continue;
        if (c->keep) {
            verb_say("attach", "the tracer keeps running in process %ld, idle while no viewer is connected "
                               "(`synctop attach %ld` shows it again, `synctop detach %ld` stops it)",
                     pids[i], pids[i], pids[i]);
            continue;
        }
        ij_report r;
        err_msg err = {{0}};
        ij_opts o = {0};
        int rc = ij_detach(pids[i], &o, &r, &err);
        if (rc == 0)
            verb_say("attach", "stopped the tracer in process %ld (its main thread was held %.1f ms); the library "
                               "stays loaded, idle",
                     pids[i], (double)r.longest_pause_ns / 1e6);
        else if (rc < 0)
            verb_warn("attach", "could not stop the tracer in process %ld: %s (it stays, collecting only while a "
                                "viewer is connected; `synctop detach %ld` tries again)",
                      pids[i], err.msg, pids[i]);
    }
}

static int cmd_attach(int argc, char **argv) {
    static char eps[ATTACH_MAX][TP_ENDPOINT_MAX];
    const char *list[ATTACH_MAX];
    long pids[ATTACH_MAX];
    size_t n = 0;
    char key[TP_KEY_Z85_LEN + 1];
    viewer_opts o = {.verb = "attach"};
    err_msg err = {{0}};
    inject_choice ic = {0};
    enum { O_KEY = 1, O_WINDOW, O_RECORD, O_FORCE, O_ASCII, O_MONO, O_STEP, O_FROM, O_YES, O_ONLY, O_NEVER, O_KEEP, O_SUMMARY,
           O_CLIENT_KEY };
    static const arg_opt opts[] = {
        {O_KEY, "--server-key", NULL, 1}, {O_WINDOW, "--window-events", NULL, 1}, {O_RECORD, "--record", NULL, 1},
        {O_FORCE, "--force", "-f", 0},    {O_ASCII, "--ascii", NULL, 0},          {O_MONO, "--mono", NULL, 0},
        {O_STEP, "--step", NULL, 1},     {O_FROM, "--from", NULL, 1},            {O_YES, "--yes", "-y", 0},
        {O_ONLY, "--inject-only", NULL, 0}, {O_NEVER, "--no-inject", NULL, 0}, {O_KEEP, "--keep-tracing", NULL, 0},
        {O_SUMMARY, "--summary", NULL, 0}, {O_CLIENT_KEY, "--client-key", NULL, 1},
    };
    const char *client_key = NULL;
    tp_keypair mine;
    args p;
    ARGS_INIT(&p, "attach", attach_usage, opts, argc, argv);
    uint64_t window;
    const char *a;
    for (int id; (id = args_next(&p, &a)) != ARGS_END;) {
        if (id == ARGS_HELP) {
            return 0;
        } else if (id == ARGS_BAD) {
            return EXIT_USAGE;
        } else if (id == O_KEY) {
            if (tp_public_key_resolve(a, key, &err) != 0)
                return verb_error("attach", "--server-key: %s", err.msg);
            o.server_key = key;
        } else if (id == O_CLIENT_KEY) {
            client_key = a;
        } else if (id == O_WINDOW) {
            if (args_u64(&p, "--window-events", a, 1000, 1ull << 32, &window))
                return EXIT_USAGE;
            o.window_events = (size_t)window;
        } else if (id == O_RECORD) {
            o.record = a;
        } else if (id == O_FORCE) {
            o.record_overwrite = 1;
        } else if (id == O_ASCII) {
            o.ascii = 1;
        } else if (id == O_MONO) {
            o.mono = 1;
        } else if (id == O_STEP) {
            o.step_name = a;
        } else if (id == O_YES) {
            ic.yes = 1;
        } else if (id == O_ONLY) {
            ic.only = 1;
        } else if (id == O_NEVER) {
            ic.never = 1;
        } else if (id == O_KEEP) {
            ic.keep = 1;
        } else if (id == O_SUMMARY) {
            o.summary = 1;
        } else if (id == O_FROM) {
            const char *lines[ATTACH_MAX];
            int k = args_file_lines(&p, "--from", a, lines, ATTACH_MAX);
            if (k < 0)
                return EXIT_USAGE;
            int bad = 0;
            for (int i = 0; i < k; i++) {
                if (bad == 0)
                    bad = attach_endpoint(lines[i], eps, list, pids, &n);
                free((char *)lines[i]); /* resolved into eps */
            }
            if (bad)
                return bad;
        } else {
            int bad = attach_endpoint(a, eps, list, pids, &n);
            if (bad)
                return bad;
        }
    }
    if (o.summary && n == 0)
        return args_bad(&p, "--summary needs the relays' endpoints (synctop relay prints them)");
    if (o.summary && (ic.only || o.record))
        return args_bad(&p, "--summary does not go with --record or --inject-only");
    if (ic.only && ic.never)
        return args_bad(&p, "--inject-only and --no-inject exclude each other");
    if (ic.only && n == 0)
        return args_bad(&p, "--inject-only needs the PID of the process to load the tracer into");
    int rc = verb_client_key("attach", client_key, o.server_key != NULL, &mine, &o.client_key);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < n && !o.summary; i++) { /* relays are waited for, never given a tracer */
        if (strncmp(eps[i], "ipc://", 6) != 0 || tp_endpoint_is_live(eps[i]) != 0) {
            if (ic.only && pids[i] > 0)
                verb_say("attach", "process %ld already has the tracer", pids[i]);
            continue;
        }
        if (pids[i] == 0)
            verb_say("attach", "nobody publishes on %s yet; waiting for it", eps[i]);
        else if (attach_prepare_pid(pids[i], eps[i], &ic, &ic.started[i]) != 0) {
            stop_started(&ic, pids, i);
            return 1;
        }
    }
    if (ic.only)
        return 0;
    if (n == 0) {
        char dir[TP_ENDPOINT_MAX];
        if (tp_endpoint_dir(dir, sizeof dir, &err) < 0)
            return verb_error("attach", "%s", err.msg);
        o.scan_endpoint_dir = 1;
    }
    viewer_result res;
    /* Ctrl-C (or SIGTERM) ends the view as q does: a recording finished, the terminal restored */
    o.stop = &verb_stop_signal;
    verb_signals saved;
    verb_signals_catch(&saved);
    rc = viewer_run_live(list, n, &o, &res);
    verb_signals_restore(&saved);
    explicit_bzero(&mine, sizeof mine);
    stop_started(&ic, pids, n);
    return verb_viewer_done("attach", rc, &res, o.record);
}

SYNCTOP_VERB(attach, .name = "attach", .fn = cmd_attach, .synopsis = "attach [PID|ENDPOINT...]",
             .summary = "show running traced processes live in the interactive timeline", .rank = 25)
