/*
 * `synctop relay --listen ENDPOINT`: one endpoint for a whole node. It subscribes to every traced
 * process of this user on the machine (the ipc sockets in the private endpoint directory, and
 * those that start later), or to the publishers and relays named, and republishes their batches
 * on ENDPOINT (tcp with CURVE keys beyond this machine), through a proxy (transport's
 * tp_relay). Viewers, recorders and other relays connect to it as to a traced process.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synctop/net.h"
#include "args.h"
#include "u64map.h"
#include "verb.h"

#define RELAY_TICK_MS 1000 /* how often new traced processes are looked for */

static void relay_usage(FILE *out) {
    fprintf(out,
            "usage: synctop relay --listen ENDPOINT [--key FILE.key [--clients DIR|FILE] | --insecure]\n"
            "                     [--server-key KEY [--client-key FILE.key]] [--record FILE [--force]]\n"
            "                     [--summary-ms MS] [--quiet] [ENDPOINT...]\n\n"
            "Republishes the traces of this node on one endpoint: viewers (synctop attach), record\n"
            "and other relays connect to it as to a traced process. Subscriptions go up to every\n"
            "process (each answers a new viewer with a keyframe) and so do the losses viewers see;\n"
            "it answers the viewers' clock requests with this host's clock (offsets between hosts).\n\n"
            "  --listen ENDPOINT  where to publish: tcp://HOST:PORT (port 0: any), HOST:PORT, or\n"
            "                     ipc:///PATH; beyond loopback it needs --key (or --insecure)\n"
            "  --key FILE.key     encrypt and authenticate with CURVE (`synctop keygen` keys);\n"
            "                     viewers then give the .pub file as --server-key\n"
            "  --clients DIR|FILE with --key, admit only the viewers whose client public key is\n"
            "                     listed: a directory of .pub files (`synctop keygen --client`\n"
            "                     writes them) or a file of keys, one per line; without it,\n"
            "                     whoever has the .pub file and can reach the port can watch\n"
            "  --insecure         allow a non-loopback --listen address without --key\n"
            "  --server-key KEY   the CURVE public key of the upstream ENDPOINTs (other relays);\n"
            "                     an upstream that refuses the handshake is said once\n"
            "  --client-key FILE  its own CURVE key pair as their client, for upstreams that admit\n"
            "                     listed clients only (default: ~/.config/synctop/client.key\n"
            "                     when `synctop keygen --client` made it)\n"
            "  --record FILE      also write every batch that goes through to a trace file,\n"
            "                     and at the end the clocks of the hosts above, measured by\n"
            "                     asking their relays; --force (-f) replaces FILE. A recording\n"
            "                     that fails (a full disk) stops alone: relaying goes on, the\n"
            "                     subscribers below are told, and the relay exits 1 at the end\n"
            "  --summary-ms MS    while a viewer wants summaries (`synctop report --summary`),\n"
            "                     publish one per process every MS milliseconds (default\n"
            "                     1000): GPU busy, host blocked, events, drops; 0: never.\n"
            "                     Upstream relays summarise their own processes: their\n"
            "                     summaries pass down, their batches are not taken\n"
            "  -q, --quiet        no line per process found or ended\n"
            "  ENDPOINT...        relay these publishers or relays (a pid, HOST:PORT, tcp://...,\n"
            "                     ipc://...); none: every traced process of this user here,\n"
            "                     including those that start later\n\n"
            "A batch that comes twice (two relays on one publisher) goes on once; what comes\n"
            "back round a loop of relays is dropped, and the loop is said once (and to the\n"
            "subscribers below). Runs until interrupted (Ctrl-C, SIGTERM), then says what went\n"
            "through.\n");
}

typedef struct scan {
    tp_relay *r;
    cm_u64map *seen; /* pid -> SEEN_* */
    int quiet;
} scan;

enum { SEEN_RUNNING = 1, SEEN_ENDED = 2 };

/* Connects to a traced process of this user not seen yet. A pid seen to end that publishes again
 * is a new process: the connection to its endpoint reconnects by itself. */
static void scan_one(void *ctx, long pid, const char *endpoint) {
    scan *sc = ctx;
    uint64_t *state = cm_u64map_find(sc->seen, (uint64_t)pid);
    if ((state != NULL && *state == SEEN_RUNNING) || tp_endpoint_is_live(endpoint) != 1)
        return;
    if (state != NULL) {
        *state = SEEN_RUNNING;
    } else {
        err_msg err = {{0}};
        if (tp_relay_connect(sc->r, endpoint, &err) != 0) {
            verb_warn("relay", "%s", err.msg);
            return;
        }
        if (cm_u64map_get_or_add(sc->seen, (uint64_t)pid, SEEN_RUNNING, NULL) == NULL)
            return;
    }
    if (!sc->quiet)
        verb_say("relay", "+ process %ld (%s)", pid, endpoint);
}

/* Says which of the processes found have ended since. */
static void scan_ended(scan *sc) {
    size_t n = cm_u64map_count(sc->seen);
    uint64_t *pids = n ? malloc(n * sizeof *pids) : NULL;
    if (pids == NULL)
        return;
    cm_u64map_keys(sc->seen, pids);
    for (size_t i = 0; i < n; i++) {
        uint64_t *state = cm_u64map_find(sc->seen, pids[i]);
        if (*state != SEEN_RUNNING || kill((pid_t)pids[i], 0) == 0 || errno != ESRCH)
            continue;
        *state = SEEN_ENDED;
        if (!sc->quiet)
            verb_say("relay", "- process %" PRIu64 " ended", pids[i]);
    }
    free(pids);
}

static int cmd_relay(int argc, char **argv) {
    enum { O_LISTEN = 1, O_KEY, O_INSECURE, O_SERVER_KEY, O_RECORD, O_FORCE, O_QUIET, O_SUMMARY_MS, O_CLIENTS,
           O_CLIENT_KEY };
    static const arg_opt opts[] = {
        {O_LISTEN, "--listen", NULL, 1}, {O_KEY, "--key", NULL, 1},       {O_INSECURE, "--insecure", NULL, 0},
        {O_SERVER_KEY, "--server-key", NULL, 1}, {O_RECORD, "--record", NULL, 1}, {O_FORCE, "--force", "-f", 0},
        {O_QUIET, "--quiet", "-q", 0},           {O_SUMMARY_MS, "--summary-ms", NULL, 1},
        {O_CLIENTS, "--clients", NULL, 1},       {O_CLIENT_KEY, "--client-key", NULL, 1},
    };
    uint64_t summary_ms;
    const char *upstream[64], *val, *key_path = NULL, *clients_path = NULL, *client_key = NULL;
    size_t n_up = 0;
    char server_key[TP_KEY_Z85_LEN + 1];
    tp_keypair keys, mine;
    tp_relay_opts o = {0};
    err_msg err = {{0}};
    int quiet = 0;
    args p;
    ARGS_INIT(&p, "relay", relay_usage, opts, argc, argv);
    for (int id; (id = args_next(&p, &val)) != ARGS_END;) {
        switch (id) {
        case ARGS_HELP: return 0;
        case ARGS_BAD: return EXIT_USAGE;
        case O_LISTEN: o.listen = val; break;
        case O_KEY: key_path = val; break;
        case O_INSECURE: o.insecure = 1; break;
        case O_SERVER_KEY:
            if (tp_public_key_resolve(val, server_key, &err) != 0)
                return verb_error("relay", "--server-key: %s", err.msg);
            o.upstream_key = server_key;
            break;
        case O_CLIENTS: clients_path = val; break;
        case O_CLIENT_KEY: client_key = val; break;
        case O_RECORD: o.record = val; break;
        case O_FORCE: o.record_overwrite = 1; break;
        case O_QUIET: quiet = 1; break;
        case O_SUMMARY_MS:
            if (args_u64(&p, "--summary-ms", val, 0, 3600000, &summary_ms))
                return EXIT_USAGE;
            o.summary_ms = summary_ms == 0 ? -1 : (int)summary_ms;
            break;
        default:
            if (n_up == sizeof upstream / sizeof upstream[0])
                return args_bad(&p, "at most %zu upstream endpoints", n_up);
            upstream[n_up++] = val;
            break;
        }
    }
    if (o.listen == NULL)
        return args_bad(&p, "no --listen endpoint given");
    char listen_ep[TP_ENDPOINT_MAX];
    int bad = verb_listen_resolve("relay", o.listen, listen_ep, sizeof listen_ep);
    if (bad != 0)
        return bad;
    o.listen = listen_ep;
    if ((bad = verb_refuse_clear_listen("relay", listen_ep, key_path != NULL, o.insecure, "synctop", "", "node")) != 0)
        return bad;
    if (key_path != NULL) {
        if (tp_keypair_load(&keys, key_path, &err) != 0)
            return verb_error("relay", "--key %s: %s", key_path, err.msg);
        if (keys.secret_key[0] == '\0')
            return verb_error("relay", "--key %s: this is a public key; listening needs the .key file (both "
                                       "keys) that `synctop keygen` wrote",
                              key_path);
        o.curve = &keys;
    }
    /* For tests only: one machine playing several hosts, each with its own name and clock. */
    o.host = getenv("SYNCTOP_TEST_HOST");
    const char *skew = getenv("SYNCTOP_TEST_CLOCK_SKEW_NS");
    if (skew != NULL) {
        char *end;
        errno = 0;
        long long v = strtoll(skew, &end, 10);
        if (errno != 0 || end == skew || *end != '\0')
            return verb_error("relay", "SYNCTOP_TEST_CLOCK_SKEW_NS: not a number of nanoseconds: %s", skew);
        o.clock_skew_ns = v;
    }
    if (clients_path != NULL && key_path == NULL)
        return args_bad(&p, "--clients goes with --key: only CURVE clients have keys to check");
    tp_clients *clients = NULL;
    if (clients_path != NULL && (clients = tp_clients_load(clients_path, &err)) == NULL)
        return verb_error("relay", "--clients: %s", err.msg);
    o.clients = clients;
    int rc = verb_client_key("relay", client_key, o.upstream_key != NULL, &mine, &o.upstream_client);
    if (rc != 0) {
        tp_clients_destroy(&clients);
        return rc;
    }
    int own_key = o.upstream_client != NULL;
    char mine_pub[TP_KEY_Z85_LEN + 1] = "";
    if (own_key) /* said when an upstream refuses it */
        memcpy(mine_pub, mine.public_key, sizeof mine_pub);
    tp_relay *r = tp_relay_new(&o, &err);
    if (key_path != NULL)
        explicit_bzero(&keys, sizeof keys);
    explicit_bzero(&mine, sizeof mine); /* the relay keeps its own copy */
    tp_clients_destroy(&clients);       /* and so does its check of the clients */
    if (r == NULL)
        return verb_error("relay", "%s", err.msg);
    for (size_t i = 0; i < n_up; i++)
        if (tp_relay_connect(r, upstream[i], &err) != 0) {
            tp_relay_destroy(&r, NULL);
            return verb_error("relay", "%s", err.msg);
        }
    verb_say("relay", "listening on %s%s; %s", tp_relay_endpoint(r),
             clients_path != NULL ? " (CURVE, listed clients only)" : key_path ? " (CURVE)" : "",
             n_up ? "relaying the endpoints given" : "relaying this user's traced processes here");
    if (key_path != NULL && clients_path == NULL && strncmp(tp_relay_endpoint(r), "tcp://", 6) == 0)
        verb_warn("relay", "--key without --clients: whoever has the public key of %s and can reach %s can watch; "
                           "--clients DIR admits only the viewers whose keys it lists",
                  key_path, tp_relay_endpoint(r));

    verb_signals sig;
    verb_signals_catch(&sig);
    cm_u64map seen = {0};
    scan sc = {.r = r, .seen = &seen, .quiet = quiet};
    int status = 0, said_refused = 0, said_record = 0, said_loop = 0;
    while (!verb_stop_signal) {
        if (n_up == 0 && tp_endpoint_each(scan_one, &sc, &err) < 0) {
            verb_error("relay", "%s", err.msg);
            status = 1;
            break;
        }
        scan_ended(&sc);
        if (tp_relay_run(r, RELAY_TICK_MS, &err) != 0) {
            verb_error("relay", "%s", err.msg);
            status = 1;
            break;
        }
        if (!said_refused && tp_relay_handshake_failed(r) != NULL) {
            said_refused = 1;
            verb_refused("relay", tp_relay_handshake_failed(r), tp_relay_client_refused(r), mine_pub, own_key);
        }
        /* A recording that stops (a full disk) stops alone: the viewers below keep their live
         * stream, and the relay tells them. */
        tp_relay_stats st;
        tp_relay_stats_get(r, &st);
        if (!said_loop && st.looped > 0) {
            said_loop = 1;
            verb_warn("relay", "in a loop of relays: what this relay passes on comes back to it through relay %016" PRIx64
                               "; it drops what went round (and what comes twice), and tells the subscribers below",
                      st.loop_via);
        }
        if (!said_record && tp_relay_record_error(r, &err) != 0) {
            said_record = 1;
            verb_warn("relay", "recording to %s stopped: %s; relaying goes on, and the subscribers below are told",
                      o.record, err.msg);
        }
    }
    verb_signals_restore(&sig);
    tp_relay_stop(r);
    tp_relay_stats st;
    tp_relay_stats_get(r, &st);
    cm_u64map_free(&seen);
    if (st.host_clocks > 0)
        verb_say_clocks("relay", tp_relay_clocks(r));
    if (tp_relay_destroy(&r, &err) != 0) {
        verb_error("relay", "recording to %s stopped: %s", o.record, err.msg);
        status = 1;
    }
    verb_say("relay", "%" PRIu64 " batches (%.1f MB) went through from %zu publisher%s; %" PRIu64
             " subscription%s went up (of %" PRIu64 " messages from below); %" PRIu64 " clock requests answered; %" PRIu64 " summaries published; %" PRIu64
             " malformed messages dropped; %" PRIu64 " batches that came twice and %" PRIu64
             " messages that went round a loop dropped; %" PRIu64 " subscriptions refused (%" PRIu64
             " connections shut for them)%s%s",
             st.batches, (double)st.bytes / 1e6, st.upstreams, st.upstreams == 1 ? "" : "s", st.subscribes,
             st.subscribes == 1 ? "" : "s", st.from_below, st.clock_answers, st.summaries, st.malformed, st.duplicates, st.looped, st.refused, st.peers_shut,
             o.record && status == 0 ? "; recorded in " : "", o.record && status == 0 ? o.record : "");
    return status;
}

SYNCTOP_VERB(relay, .name = "relay", .fn = cmd_relay, .synopsis = "relay --listen ENDPOINT [ENDPOINT...]",
             .summary = "republish a node's traces on one endpoint for viewers and other relays", .rank = 27)
