/*
 * `synctop attach [PID|ENDPOINT...]`: the live viewer on running traced processes. With no
 * argument it attaches to every live traced process of this user (the ipc sockets in the private
 * endpoint directory, skipping those left by dead processes) and to those that start later.
 * With --record FILE everything received is also written to a trace file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synctop/net.h"
#include "verb.h"
#include "viewer.h"

#define ATTACH_MAX 64

static void attach_usage(FILE *out) {
    fprintf(out,
            "usage: synctop attach [PID|ENDPOINT...] [--server-key KEY] [--window-events N]\n"
            "                      [--record FILE [--force]] [--ascii] [--mono]\n\n"
            "Shows running traced processes live in the interactive timeline.\n\n"
            "  PID, ENDPOINT      a traced process's pid, HOST:PORT, tcp://..., ipc://...; none: every\n"
            "                     live traced process of this user, and those that start later\n"
            "  --server-key KEY   the publishers' CURVE public key (a .pub/.key file or the key)\n"
            "  --window-events N  events kept in memory; older ones are dropped (default 4194304)\n"
            "  --record FILE      also write everything received to a trace file (nothing is lost\n"
            "                     when the window drops old events); --force replaces FILE\n"
            "  --ascii, --mono    ASCII glyphs, no colours\n");
}

static int cmd_attach(int argc, char **argv) {
    static char eps[ATTACH_MAX][TP_ENDPOINT_MAX];
    const char *list[ATTACH_MAX];
    size_t n = 0;
    char key[TP_KEY_Z85_LEN + 1];
    viewer_opts o = {.verb = "attach"};
    tp_err err = {{0}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            attach_usage(stdout);
            return 0;
        } else if (strcmp(a, "--server-key") == 0 && i + 1 < argc) {
            if (tp_public_key_resolve(argv[++i], key, &err) != 0)
                return verb_error("attach", "--server-key: %s", err.msg);
            o.server_key = key;
        } else if (strcmp(a, "--window-events") == 0 && i + 1 < argc) {
            char *end;
            unsigned long long v = strtoull(argv[++i], &end, 10);
            if (*end != '\0' || v < 1000 || v > (1ull << 32)) {
                fputs("synctop attach: --window-events wants a number from 1000 to 4294967296\n", stderr);
                return EXIT_USAGE;
            }
            o.window_events = (size_t)v;
        } else if (strcmp(a, "--record") == 0 && i + 1 < argc) {
            o.record = argv[++i];
        } else if (strcmp(a, "--force") == 0) {
            o.record_overwrite = 1;
        } else if (strcmp(a, "--ascii") == 0) {
            o.ascii = 1;
        } else if (strcmp(a, "--mono") == 0) {
            o.mono = 1;
        } else if (a[0] == '-' && a[1] != '\0') {
            attach_usage(stderr);
            return EXIT_USAGE;
        } else {
            if (n == ATTACH_MAX)
                return verb_error("attach", "at most %d endpoints", ATTACH_MAX);
            if (tp_endpoint_resolve(a, eps[n], sizeof eps[n], &err) != 0)
                return verb_error("attach", "%s", err.msg);
            if (strncmp(eps[n], "ipc://", 6) == 0 && tp_endpoint_is_live(eps[n]) == 0)
                fprintf(stderr, "synctop attach: nobody publishes on %s yet; waiting for it\n", eps[n]);
            list[n] = eps[n];
            n++;
        }
    }
    if (n == 0) {
        char dir[TP_ENDPOINT_MAX];
        if (tp_endpoint_dir(dir, sizeof dir, &err) != 0)
            return verb_error("attach", "%s", err.msg);
        o.scan_endpoint_dir = 1;
    }
    return viewer_run_live(list, n, &o);
}

SYNCTOP_VERB(attach, .name = "attach", .fn = cmd_attach, .synopsis = "attach [PID|ENDPOINT...]",
             .summary = "show running traced processes live in the interactive timeline", .rank = 25)
