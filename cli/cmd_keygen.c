/*
 * `synctop keygen`: makes the CURVE key pair a publisher needs to serve traces over TCP beyond
 * this machine, or a viewer's own pair that a publisher's list of clients names, and says which
 * half goes where.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "synctop/sanitize.h"
#include "synctop/net.h"
#include "args.h"
#include "verb.h"

static void keygen_usage(FILE *out) {
    fprintf(out,
            "usage: synctop keygen [-o BASE]\n"
            "       synctop keygen --client [-o BASE]\n\n"
            "Creates a CURVE key pair so that traces published over TCP are encrypted and only\n"
            "reach viewers that know the publisher's public key; with --client, a viewer's own\n"
            "pair, so that a publisher can tell which viewers may watch.\n\n"
            "  -o, --output BASE  write BASE.key and BASE.pub (default: ./synctop-server; with\n"
            "                     --client, ~/.config/synctop/client, which attach, record,\n"
            "                     report and relay then use by default)\n"
            "  --client           a viewer's pair rather than a publisher's\n\n"
            "BASE.key holds both keys (mode 0600): the side that uses it keeps it private.\n"
            "BASE.pub holds the public key only. A publisher's .pub goes to viewers, which check\n"
            "that they talk to the right publisher with it (--server-key). A viewer's .pub goes\n"
            "to the publishers it may watch: into the directory (or a line of the file) that\n"
            "they admit with --clients; without --clients, whoever has the publisher's .pub and\n"
            "can reach its port can watch. Existing files are never overwritten.\n\n"
            "On the GPU machine:  synctop run --listen tcp://0.0.0.0:5555 --key BASE.key \\\n"
            "                         --clients DIR -- CMD\n"
            "                     (or SYNCTOP_LISTEN, SYNCTOP_CURVE_KEY=BASE.key and\n"
            "                     SYNCTOP_CURVE_CLIENTS=DIR for the tracer)\n"
            "Elsewhere:           synctop keygen --client, then its client.pub into DIR there;\n"
            "                     synctop attach tcp://GPU-HOST:5555 --server-key BASE.pub\n");
}

/* Creates the directory of this user's client key (0700), and those above it when missing. */
static int make_parent(const char *base) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", base);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        return 0;
    *slash = '\0';
    for (char *p = dir + 1; *p != '\0'; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            return verb_error("keygen", "cannot create %s: %s", dir, strerror(errno));
        *p = '/';
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return verb_error("keygen", "cannot create %s: %s", dir, strerror(errno));
    return 0;
}

static int cmd_keygen(int argc, char **argv) {
    static const arg_opt opts[] = {{1, "--output", "-o", 1}, {2, "--client", NULL, 0}};
    const char *base = NULL, *val;
    int client = 0;
    args p;
    ARGS_INIT(&p, "keygen", keygen_usage, opts, argc, argv);
    for (int id; (id = args_next(&p, &val)) != ARGS_END;) {
        if (id == ARGS_HELP)
            return 0;
        if (id == ARGS_BAD)
            return EXIT_USAGE;
        if (id == 2)
            client = 1;
        else if (id == 1)
            base = val;
        else
            return args_bad(&p, "unexpected argument '%s'", val);
    }
    struct stat sb;
    if (base != NULL && (base[0] == '\0' || base[strlen(base) - 1] == '/' || (stat(base, &sb) == 0 && S_ISDIR(sb.st_mode))))
        return args_bad(&p, "-o %s: give the keys' name, not only a directory (-o %s%ssynctop-server writes "
                            "synctop-server.key and .pub there)",
                        base, base, base[0] && base[strlen(base) - 1] != '/' ? "/" : "");
    tp_keypair kp;
    err_msg err = {{0}};
    char def[PATH_MAX];
    if (base == NULL && !client)
        base = "./synctop-server";
    if (base == NULL) {
        if (tp_client_key_base(def, sizeof def, &err) != 0)
            return verb_error("keygen", "%s; give -o BASE", err.msg);
        if (make_parent(def) != 0)
            return 1;
        base = def;
    }
    if (tp_keypair_new(&kp, &err) < 0 ||
        (client ? tp_keypair_save_client(&kp, base, &err) : tp_keypair_save(&kp, base, &err)) < 0) {
        memset(&kp, 0, sizeof kp);
        return verb_error("keygen", "%s", err.msg);
    }
    printf("public key: %s\n", kp.public_key);
    if (client) {
        printf("wrote %s.key (public and secret key, mode 0600): this viewer's own; keep it private\n", base);
        printf("wrote %s.pub (public key): for the publishers this viewer may watch\n", base);
        printf("Admit:  copy %s.pub into the directory given as --clients to synctop run or relay\n"
               "        (or add its key as a line of the --clients file)\n",
               base);
        if (base != def)
            printf("View:   synctop attach tcp://HOST:5555 --server-key SERVER.pub --client-key %s.key\n", base);
    } else {
        printf("wrote %s.key (public and secret key, mode 0600): for the publisher; keep it private\n", base);
        printf("wrote %s.pub (public key): for viewers, to pin the publisher's identity\n", base);
        printf("Publish:  synctop run --listen tcp://0.0.0.0:5555 --key %s.key --clients DIR -- CMD\n"
               "View:     synctop attach tcp://THIS-HOST:5555 --server-key %s.pub\n",
               base, base);
    }
    memset(&kp, 0, sizeof kp);
    return 0;
}

SYNCTOP_VERB(keygen, .name = "keygen", .fn = cmd_keygen, .synopsis = "keygen [--client] [-o BASE]",
             .summary = "create a CURVE key pair for encrypted, authenticated TCP publishing", .rank = 80)
