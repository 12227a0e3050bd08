/*
 * `synctop keygen`: makes the CURVE key pair a publisher needs to serve traces over TCP beyond
 * this machine, and says which half goes where.
 */
#include <stdio.h>
#include <string.h>

#include "synctop/sanitize.h"
#include "synctop/net.h"
#include "args.h"
#include "verb.h"

static void keygen_usage(FILE *out) {
    fprintf(out,
            "usage: synctop keygen [-o BASE]\n\n"
            "Creates a CURVE key pair so that traces published over TCP are encrypted and only\n"
            "reach viewers that know the publisher's public key.\n\n"
            "  -o, --output BASE  write BASE.key and BASE.pub (default: ./synctop-server)\n\n"
            "BASE.key holds both keys (mode 0600): the publishing side uses it; keep it private.\n"
            "BASE.pub holds the public key only: viewers use it (or the key itself, printed\n"
            "here) to check that they talk to the right publisher. Anyone who has it and can\n"
            "reach the port can subscribe, so give it only to those who may see the traces.\n"
            "Existing files are never overwritten.\n\n"
            "On the GPU machine:  synctop run --listen tcp://0.0.0.0:5555 --key BASE.key -- CMD\n"
            "                     (or SYNCTOP_LISTEN and SYNCTOP_CURVE_KEY=BASE.key for the tracer)\n"
            "Elsewhere:           synctop attach tcp://GPU-HOST:5555 --server-key BASE.pub\n");
}

static int cmd_keygen(int argc, char **argv) {
    static const arg_opt opts[] = {{1, "--output", "-o", 1}};
    const char *base = "./synctop-server", *val;
    args p;
    ARGS_INIT(&p, "keygen", keygen_usage, opts, argc, argv);
    for (int id; (id = args_next(&p, &val)) != ARGS_END;) {
        if (id == ARGS_HELP)
            return 0;
        if (id == ARGS_BAD)
            return EXIT_USAGE;
        if (id != 1)
            return args_bad(&p, "unexpected argument '%s'", val);
        base = val;
    }
    tp_keypair kp;
    err_msg err = {{0}};
    if (tp_keypair_new(&kp, &err) < 0 || tp_keypair_save(&kp, base, &err) < 0) {
        memset(&kp, 0, sizeof kp);
        return verb_error("keygen", "%s", err.msg);
    }
    printf("public key: %s\n", kp.public_key);
    printf("wrote %s.key (public and secret key, mode 0600): for the publisher; keep it private\n",
           base);
    printf("wrote %s.pub (public key): for viewers, to pin the publisher's identity\n", base);
    printf("Publish:  synctop run --listen tcp://0.0.0.0:5555 --key %s.key -- CMD\n"
           "View:     synctop attach tcp://THIS-HOST:5555 --server-key %s.pub\n",
           base, base);
    memset(&kp, 0, sizeof kp);
    return 0;
}

SYNCTOP_VERB(keygen, .name = "keygen", .fn = cmd_keygen, .synopsis = "keygen [-o BASE]",
             .summary = "create a CURVE key pair for encrypted TCP publishing", .rank = 80)
