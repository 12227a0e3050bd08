/*
 * `synctop detach PID`: stops the tracer in a running process (inject.h): collection off, what is
 * left shipped to the viewers and the trace file, CUPTI unsubscribed, the tracer's threads and
 * socket gone. The library stays loaded, idle; `synctop attach PID` starts it again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synctop/net.h"
#include "args.h"
#include "inject.h"
#include "verb.h"

static void detach_usage(FILE *out) {
    fprintf(out,
            "usage: synctop detach PID\n\n"
            "Stops the tracer in process PID, whether `synctop attach` loaded it or the program started\n"
            "with it (`synctop run`, CUDA_INJECTION64_PATH): with ptrace (x86-64 or aarch64, the latter\n"
            "not yet tried on an aarch64 machine; the process must be yours), its main thread is held\n"
            "for well under a millisecond while the tracer is told to stop; then, within a flush period, the\n"
            "tracer turns CUPTI's collection off, sends what it still holds to the viewers and its\n"
            "trace file (which it closes), unsubscribes from CUPTI and ends its threads and socket. The\n"
            "library and CUPTI stay loaded, idle (they cannot be unloaded safely); `synctop attach PID`\n"
            "starts the tracer again.\n");
}

static int cmd_detach(int argc, char **argv) {
    args p;
    args_init(&p, "detach", detach_usage, NULL, 0, argc, argv);
    const char *a, *pid_s = NULL;
    for (int id; (id = args_next(&p, &a)) != ARGS_END;) {
        if (id == ARGS_HELP)
            return 0;
        if (id == ARGS_BAD)
            return EXIT_USAGE;
        if (pid_s != NULL)
            return args_bad(&p, "one PID at a time");
        pid_s = a;
    }
    if (pid_s == NULL)
        return args_bad(&p, "detach needs the PID of a traced process");
    if (strspn(pid_s, "0123456789") != strlen(pid_s) || *pid_s == '\0')
        return args_bad(&p, "'%s' is not a PID", pid_s);
    long pid = strtol(pid_s, NULL, 10);
    ij_probe_info info;
    err_msg err = {{0}};
    if (ij_probe(pid, &info, &err) != 0)
        return verb_error("detach", "%s", err.msg);
    if (!info.tracer_loaded) {
        verb_say("detach", "process %ld has no tracer%s: nothing to detach", pid,
                 info.tracer_at_init ? " yet (it loads one when it initialises CUDA)" : "");
        return 0;
    }
    ij_opts o = {0};
    ij_report r;
    int rc = ij_detach(pid, &o, &r, &err);
    if (rc == IJ_NOT_TRACING) {
        verb_say("detach", "the tracer in process %ld is not running: nothing to detach", pid);
        return 0;
    }
    if (rc != 0)
        return verb_error("detach", "%s", err.msg);
    verb_say("detach", "stopped the tracer in process %ld (its main thread was held %.1f ms); the library stays "
                       "loaded, idle (`synctop attach %ld` starts it again)",
             pid, (double)r.longest_pause_ns / 1e6, pid);
    return 0;
}

SYNCTOP_VERB(detach, .name = "detach", .fn = cmd_detach, .synopsis = "detach PID",
             .summary = "stop the tracer in a running process", .rank = 26)
