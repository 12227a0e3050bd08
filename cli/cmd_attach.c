/*
 * `synctop attach [PID|ENDPOINT...]`: the live viewer on running traced processes. With no
 * argument it attaches to every live traced process of this user (the ipc sockets in the private
 * endpoint directory, skipping those left by dead processes) and to those that start later.
 * With --record FILE everything received is also written to a trace file.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synctop/net.h"
#include "args.h"
#include "verb.h"
#include "viewer.h"

#define ATTACH_MAX 64

static void attach_usage(FILE *out) {
    fprintf(out,
            "usage: synctop attach [PID|ENDPOINT...] [--server-key KEY] [--window-events N]\n"
            "                      [--record FILE [--force]] [--step NAME] [--from FILE] [--ascii]\n"
            "                      [--mono]\n\n"
            "Shows running traced processes live in the interactive timeline.\n\n"
            "  PID, ENDPOINT      a traced process's pid, HOST:PORT, tcp://..., ipc://...; none: every\n"
            "                     live traced process of this user, and those that start later\n"
            "  --from FILE        also the endpoints listed in FILE, one per line (# comments):\n"
            "                     a job's relays, say\n"
            "  --server-key KEY   the publishers' CURVE public key (a .pub/.key file or the key)\n"
            "  --window-events N  events kept in memory; older ones are dropped (default 4194304)\n"
            "  --record FILE      also write everything received to a trace file (nothing is lost\n"
            "                     when the window drops old events); --force replaces FILE\n"
            "  --step NAME        the loop's steps are the NVTX ranges named NAME (default:\n"
            "                     ProfilerStep#N, else a regular blocking call, as report finds them)\n"
            "  --ascii, --mono    ASCII glyphs, no colours\n");
}

/* One endpoint the user named: checked, resolved and added; 0, or 1 with the reason said. */
static int attach_endpoint(const char *a, char (*eps)[TP_ENDPOINT_MAX], const char **list, size_t *n) {
    err_msg err = {{0}};
    if (*n == ATTACH_MAX)
        return verb_error("attach", "at most %d endpoints", ATTACH_MAX);
    /* a pid: the process must exist (a traced one that has not published yet is waited for) */
    if (strspn(a, "0123456789") == strlen(a) && kill((pid_t)strtol(a, NULL, 10), 0) != 0 && errno == ESRCH)
        return verb_error("attach", "no process %s (synctop attach with no argument finds the traced "
                                    "processes of this user)", a);
    if (tp_endpoint_resolve(a, eps[*n], TP_ENDPOINT_MAX, &err) != 0)
        return verb_error("attach", "%s", err.msg);
    if (strncmp(eps[*n], "ipc://", 6) == 0 && tp_endpoint_is_live(eps[*n]) == 0)
        verb_say("attach", "nobody publishes on %s yet; waiting for it", eps[*n]);
    list[*n] = eps[*n];
    (*n)++;
    return 0;
}

static int cmd_attach(int argc, char **argv) {
    static char eps[ATTACH_MAX][TP_ENDPOINT_MAX];
    const char *list[ATTACH_MAX];
    size_t n = 0;
    char key[TP_KEY_Z85_LEN + 1];
    viewer_opts o = {.verb = "attach"};
    err_msg err = {{0}};
    enum { O_KEY = 1, O_WINDOW, O_RECORD, O_FORCE, O_ASCII, O_MONO, O_STEP, O_FROM };
    static const arg_opt opts[] = {
        {O_KEY, "--server-key", NULL, 1}, {O_WINDOW, "--window-events", NULL, 1}, {O_RECORD, "--record", NULL, 1},
        {O_FORCE, "--force", NULL, 0},    {O_ASCII, "--ascii", NULL, 0},          {O_MONO, "--mono", NULL, 0},
        {O_STEP, "--step", NULL, 1},     {O_FROM, "--from", NULL, 1},
    };
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
        } else if (id == O_FROM) {
            const char *lines[ATTACH_MAX];
            int k = args_file_lines(&p, "--from", a, lines, ATTACH_MAX);
            if (k < 0)
                return EXIT_USAGE;
            int bad = 0;
            for (int i = 0; i < k; i++) {
                bad = bad || attach_endpoint(lines[i], eps, list, &n) != 0;
                free((char *)lines[i]); /* resolved into eps */
            }
            if (bad)
                return 1;
        } else if (attach_endpoint(a, eps, list, &n) != 0) {
            return 1;
        }
    }
    if (n == 0) {

        char dir[TP_ENDPOINT_MAX];
        if (tp_endpoint_dir(dir, sizeof dir, &err) < 0)
            return verb_error("attach", "%s", err.msg);
        o.scan_endpoint_dir = 1;
    }
    viewer_result res;
    int rc = viewer_run_live(list, n, &o, &res);
    return verb_viewer_done("attach", rc, &res, o.record);
}

SYNCTOP_VERB(attach, .name = "attach", .fn = cmd_attach, .synopsis = "attach [PID|ENDPOINT...]",
             .summary = "show running traced processes live in the interactive timeline", .rank = 25)
