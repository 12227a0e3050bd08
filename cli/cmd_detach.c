/*
 * `synctop detach PID`: what is left of synctop in a process once no viewer watches it. The tracer
 * cannot be taken out of a running process (its threads run its code, and it has no entry point
 * that stops them), so detach says what stays and how it behaves: a tracer that `synctop attach`
 * loaded collects only while a viewer is connected, so when the viewers have quit it is idle; one
 * the program loaded at start traces as its environment says until the program ends.
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
            "Says what stays of synctop in process PID now that no viewer needs to watch it. A tracer\n"
            "that `synctop attach` loaded into a running process collects only while a viewer is\n"
            "connected: once the last viewer has quit it is idle (its threads wake now and then,\n"
            "and what CUPTI still hands it is dropped). It cannot be unloaded. A tracer the program\n"
            "loaded at start (`synctop run`, CUDA_INJECTION64_PATH) traces as its SYNCTOP_MODE says\n"
            "until the program ends.\n");
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
    if (pid_s == NULL || strspn(pid_s, "0123456789") != strlen(pid_s) || *pid_s == '\0')
        return args_bad(&p, "detach needs the PID of a traced process");
    long pid = strtol(pid_s, NULL, 10);
    ij_probe_info info;
    err_msg err = {{0}};
    if (ij_probe(pid, &info, &err) != 0)
        return verb_error("detach", "%s", err.msg);
    char ep[TP_ENDPOINT_MAX];
    int live = tp_endpoint_for_pid(pid, ep, sizeof ep, &err) == 0 && tp_endpoint_is_live(ep) == 1;
    if (!info.tracer_loaded && !live) {
        verb_say("detach", "process %ld has no tracer: nothing to detach", pid);
        return 0;
    }
    if (info.tracer_at_init)
        verb_say("detach", "process %ld loaded the tracer at start (CUDA_INJECTION64_PATH): it stays loaded and "
                           "traces as its SYNCTOP_MODE says until the program ends", pid);
    else
        verb_say("detach", "the tracer stays loaded in process %ld (a running library cannot be unloaded, and "
                           "this tracer has no entry point to stop it); loaded by `synctop attach`, it collects "
                           "only while a viewer is connected, and is idle once the last one has quit", pid);
    return 0;
}

SYNCTOP_VERB(detach, .name = "detach", .fn = cmd_detach, .synopsis = "detach PID",
             .summary = "say what stays of the tracer in a process no viewer watches", .rank = 26)
