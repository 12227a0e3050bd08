/*
 * `synctop report SOURCE... [--format text|json|markdown] [--hta] [--fail-if EXPR]...`: analyses
 * trace files, Kineto JSON traces (one per rank), or live publishers (recorded until every producer
 * has finished, or Ctrl-C), and prints the findings, the top stalls by call site and the per-GPU
 * utilisation. --fail-if thresholds make the exit status 1 when crossed, with one line per crossed
 * threshold on stderr, so that a CI job can catch a synchronization regression.
 */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "synctop/sanitize.h"
#include "analysis.h"
#include "hta.h"
#include "report.h"
#include "symbols.h"
#include "store.h"
#include "load.h"
#include "synctop/net.h"
#include "live.h"
#include "args.h"
#include "verb.h"

#define REPORT_MAX_SOURCES 4096 /* files: one per rank of a large job */
#define REPORT_MAX_LIVE 64       /* live endpoints */
#define REPORT_WAIT_S 5 /* --wait: a live source nobody answers at is said after this long, exit 1 */
#define REPORT_MAX_CHECKS 32

static void report_usage(FILE *out) {
    fprintf(out,
            "usage: synctop report SOURCE... [--format text|json|markdown] [--hta]\n"
            "                      [--hta-wide-sync-as-stream|--hta-wide-sync-as-host]\n"
            "                      [--steps] [--step NAME] [--baseline OLD]... [--ranks]\n"
            "                      [--fail-if EXPR]... [--top N] [--gap-us N]\n"
            "                      [--gpu-gap-ms N] [-o FILE] [--server-key KEY]\n"
            "                      [--client-key FILE.key] [--max-events N] [--wait SEC]\n"
            "                      [--align auto|start|clock]\n"
            "       synctop report --ranks --summary [--for SECONDS] [--format text|json]\n"
            "                      [--server-key KEY [--client-key FILE.key]] RELAY...\n"
            "\n"
            "Analyses where the host waited for the GPU and what it cost: the top stalls by\n"
            "call site (with their Python and native frames), GPU utilisation and idle time\n"
            "by cause, and the checks of Nsight Systems' expert rules (cuda_api_sync,\n"
            "cuda_memcpy_sync, cuda_memcpy_async, cuda_memset_sync, gpu_gaps,\n"
            "gpu_time_util).\n"
            "\n"
            "  SOURCE             a synctop trace file, a Kineto (PyTorch profiler)\n"
            "                     .json[.gz] trace (several: one per rank), an Nsight\n"
            "                     Systems SQLite export, or a live publisher (PID,\n"
            "                     HOST:PORT, tcp://..., ipc://...) recorded until its\n"
            "                     program ends or Ctrl-C; - reads standard input. Up\n"
            "                     to 4096 files (64 live); more than eight are named\n"
            "                     by their pattern: rank{0..63}.json.gz (64 files).\n"
            "                     On a terminal, stderr says how far the reading is\n"
            "  --format F         text (default), json, markdown\n"
            "  --hta              Holistic Trace Analysis' idle time breakdown (host_wait,\n"
            "                     kernel_wait, other per stream, with the idle intervals'\n"
            "                     statistics) and temporal breakdown, computed as HTA 0.5.0\n"
            "                     does (times in us), instead of the report\n"
            "  --steps            the loop's steps: found by --step's range, else the\n"
            "                     profiler's ProfilerStep#N ranges, else the most regular\n"
            "                     repeated range or blocking call (0.1 ms or more apart,\n"
            "                     with GPU work between); per step wall, GPU busy and\n"
            "                     blocked time, the slow ones (above median + 3 x 1.4826\n"
            "                     MAD, and 10%% above the median) and what blocked in them,\n"
            "                     and stalls that come every Nth step\n"
            "  --step NAME        steps are the NVTX or profiler ranges named NAME\n"
            "  --ranks            per rank GPU busy, idle and blocked time, and at NCCL\n"
            "                     collectives the rank that arrived last, what the others\n"
            "                     waited for it, and what held it back; live through\n"
            "                     relays, each host's clock as its relay answered it\n"
            "                     (offset and uncertainty) and its ranks put on this\n"
            "                     machine's clock\n"
            "  --summary          live, through relays: per rank GPU busy, host blocked\n"
            "                     and GPU idle shares of the time its events span, and\n"
            "                     events/s, from the relays' once-a-second summaries alone\n"
            "                     (no event travels; relays compute them while asked),\n"
            "                     until Ctrl-C or --for\n"
            "  --for SECONDS      with --summary: stop after that long\n"
            "  --baseline OLD     compare with an earlier run (a trace file or a profiler\n"
            "                     trace; repeat for several ranks): call sites that are\n"
            "                     new, grew, shrank or went, matched by file and function\n"
            "                     (not line); --fail-if 'new-sites>0', 'blocked>+10%%'\n"
            "  --hta-wide-sync-as-stream, --hta-wide-sync-as-host\n"
            "                     read device-wide cuda_sync rows as HTA reads stream\n"
            "                     4294967295 (a GPU stream) or -1 (host rows), whatever the\n"
            "                     trace wrote (default: as the trace wrote them)\n"
            "  --fail-if EXPR     exit with status 1 when EXPR holds, e.g. 'blocked>5%%',\n"
            "                     'idle>40%%', 'stalls>100', 'sync-api>0',\n"
            "                     'site:train.py:42>10ms', 'api:cudaStreamSynchronize>50ms'\n"
            "                     (repeatable; see below)\n"
            "  --top N            call sites listed, 1 or more (default 15)\n"
            "  --gap-us N         GPU bubbles shorter than N us are not reported (default\n"
            "                     20; 0: every gap is one)\n"
            "  --gpu-gap-ms N     the gpu_gaps rule's threshold, over the bubbles (default\n"
            "                     500)\n"
            "  -o, --output FILE  write the report to FILE (\"-\": standard output)\n"
            "  --server-key KEY   the publishers' CURVE public key, for a live source\n"
            "  --client-key FILE  our own CURVE key pair, for publishers that admit listed\n"
            "                     clients only (default: ~/.config/synctop/client.key when\n"
            "                     `synctop keygen --client` made it)\n"
            "  --wait SEC         a live source: give up when no publisher has answered after\n"
            "                     SEC seconds (default 5; 0: wait for ever)\n"
            "  --max-events N     a source of more than N events is refused, not cut: by\n"
            "                     default a trace file up to 4 per byte, a profiler trace\n"
            "                     or export up to 33554432 (one per 4 bytes of a larger\n"
            "                     file). Profiler JSON of 16 MiB or more is parsed on the\n"
            "                     cores the process may use, and several files are read\n"
            "                     that many at once (SYNCTOP_THREADS=N sets how many)\n"
            "  --align A          several files on one time axis: auto (default: each at\n"
            "                     its own start when no two overlap in time, as recorded\n"
            "                     when they do), start (always at their starts), clock\n"
            "                     (always as recorded)\n"
            "\n"
            "--fail-if metrics: blocked (host time blocked in CUDA calls; %% of wall time or\n"
            "a time such as 2s), idle (GPU idle of the idlest GPU; %% or a time),\n"
            "host-idle (GPU idle the host caused outside waiting calls, on the GPU it kept\n"
            "waiting most; %% of its span or a time), range:TEXT (that idle in the ranges\n"
            "whose name holds TEXT, such as DataLoader; %% of wall time or a time), stalls\n"
            "(blocking calls), bubbles (GPU idle bubbles), findings, a rule (sync-api,\n"
            "sync-memcpy, pageable-memcpy, sync-memset: its calls; gpu-gaps: its gaps;\n"
            "low-util: its windows; or the rule's nsys name, such as cuda_api_sync),\n"
            "site:TEXT (blocked time at call sites whose description, \"API at where\",\n"
            "holds TEXT), api:NAME (blocked time in that API); with --baseline, new-sites\n"
            "(call sites the baseline did not have). Operators: > >= < <= ==. Times take\n"
            "ns, us, ms or s; shares take %%; a signed share (+10%%) is the change against\n"
            "the baseline (blocked, idle, host-idle, stalls, site:, api:, range:). Each\n"
            "threshold prints one line on stderr, FAIL or ok, with the measured value and\n"
            "the threshold, both with their unit.\n"
            "\n"
            "Example, a CI step that fails when a training step starts waiting for the GPU:\n"
            "  python train.py --profile-steps 20     # writes trace.json.gz (torch.profiler)\n"
            "  synctop report trace.json.gz --format markdown -o sync-report.md \\\n"
            "      --fail-if 'blocked>5%%' --fail-if 'pageable-memcpy>0' \\\n"
            "      --fail-if 'api:cudaStreamSynchronize>50ms'\n"
            "  # stderr: synctop report: FAIL blocked>5%%: host blocked 15.23%% of wall time\n"
            "  #   (6612.315 ms of 43425.365 ms); threshold > 5%%\n\n"
            "Exit status: 0; 1 when a threshold was crossed or the source could not be read;\n"
            "2 on bad usage.\n");
}

static int is_file_source(const char *spec) {
    struct stat st;
    return strcmp(spec, "-") == 0 || stat(spec, &st) == 0;
}

static int looks_live(const char *spec) {
    if (strncmp(spec, "tcp://", 6) == 0 || strncmp(spec, "ipc://", 6) == 0)
        return 1;
    size_t i = 0;
    while (spec[i] >= '0' && spec[i] <= '9')
        i++;
    if (i > 0 && spec[i] == '\0')
        return 1; /* a pid */
    const char *colon = strrchr(spec, ':');
    return colon != NULL && colon[1] >= '0' && colon[1] <= '9' && strchr(spec, '/') == NULL;
}

static void report_refused(void *ctx, const tp_sub *sub) {
    (void)ctx;
    verb_refused_cb("report", sub);
}

/* A batch into the store; a bad one is dropped alone, with a warning. */
static int report_batch(void *ctx, const tp_sub_msg *m, err_msg *err) {
    if (st_store_add_batch(ctx, m->data, m->len, err) != 0)
        verb_warn("report", "%s", err->msg);
    return 0;
}

/* A subscriber connected to the live sources (their endpoints resolved into eps), taking batches or,
 * with summaries, the relays' summaries; NULL when it cannot be (said on stderr). */
static tp_sub *report_subscribe(char **specs, int n, const char *server_key, const char *client_key,
                                int summaries, char eps[][512]) {
    err_msg err = {{0}};
    char key[TP_KEY_Z85_LEN + 1];
    if (server_key != NULL && tp_public_key_resolve(server_key, key, &err) < 0) {
        verb_error("report", "bad --server-key: %s", err.msg);
        return NULL;
    }
    tp_keypair mine;
    tp_sub_opts so = {.server_key = server_key ? key : NULL, .summaries = summaries};
    if (verb_client_key("report", client_key, server_key != NULL, &mine, &so.client_key) != 0)
        return NULL;
    tp_sub *sub = tp_sub_new(&so, &err);
    explicit_bzero(&mine, sizeof mine); /* the socket has it */
    if (sub == NULL) {
        verb_error("report", "cannot subscribe: %s", err.msg);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (verb_no_such_pid("report", specs[i])) {
            tp_sub_destroy(&sub);
            return NULL;
        }
        if (tp_endpoint_resolve(specs[i], eps[i], sizeof eps[i], &err) < 0 || tp_endpoint_host_found(eps[i], &err) < 0 ||
            tp_sub_connect(sub, eps[i], &err) < 0) {
            tp_sub_destroy(&sub);
            verb_error("report", "%s: %s", specs[i], err.msg);
            return NULL;
        }
    }
    return sub;
}

/* Records live sources into the store until every producer has finished (its TP_BF_END batch), the
 * ipc publishers went away, or SIGINT/SIGTERM; then says on stderr what was recorded and why it
 * stopped, so that a report cut short is never mistaken for a whole run. */
static int record_live(st_store *s, char **specs, int n, const char *server_key, const char *client_key,
                       double wait_s) {
    err_msg err = {{0}};
    char eps[REPORT_MAX_LIVE][512];
    tp_sub *sub = report_subscribe(specs, n, server_key, client_key, 0, eps);
    if (sub == NULL)
        return 1;
    verb_signals sig;
    verb_signals_catch(&sig);
    int status = 0;
    if (isatty(STDERR_FILENO))
        verb_say("report", "recording until the program ends (Ctrl-C to stop and report)");
    const char *ep_list[REPORT_MAX_LIVE];
    for (int i = 0; i < n; i++)
        ep_list[i] = eps[i];
    live_opts lo = {.stop = &verb_stop_signal, .on_batch = report_batch, .ctx = s, .endpoints = ep_list,
                    .n_endpoints = (size_t)n, .on_refused = report_refused, .wait_s = wait_s};
    live_end end = live_follow(sub, &lo, &err);
    /* the hosts' clocks as the relays answered them: each host's processes on this machine's clock */
    live_clocks_apply(sub, s);
    const char *why = live_end_name(end);
    if (end == LIVE_ENDED)
        why = "every program finished";
    if (end == LIVE_FAILED)
        status = verb_error("report", "cannot receive: %s", err.msg);
    if (end == LIVE_UNANSWERED) {
        verb_say_unanswered("report", ep_list, (size_t)n, wait_s);
        status = 1;
    }
    tp_sub_stats ss;
    tp_sub_stats_get(sub, &ss);
    if (verb_stop_signal)
        why = verb_stop_signal == SIGINT ? "interrupted (SIGINT)" : "interrupted (SIGTERM)";
    verb_signals_restore(&sig);
    if (status == 0) {
        uint64_t missed = 0;
        st_store_commit(s);
        for (size_t i = 0; i < st_producer_count(s); i++)
            missed += st_producer_get(s, i)->missed;
        fprintf(stderr, "synctop report: recorded %zu events in %" PRIu64 " batches from %zu producer%s",
                st_store_events(s), ss.received, ss.n_producers, ss.n_producers == 1 ? "" : "s");
        if (missed)
            fprintf(stderr, " (%" PRIu64 " batches lost on the way: counts are low)", missed);
        fprintf(stderr, "; stopped: %s%s\n", why,
                verb_stop_signal && !tp_sub_all_ended(sub) ? ", before every program ended" : "");
    }
    tp_sub_destroy(&sub);
    return status;
}

/* Sorts summaries by rank (unknown last), then host, then producer id. */
static int by_rank(const void *a, const void *b) {
    const tp_sub_summary *x = a, *y = b;
    unsigned rx = (unsigned)x->last.rank, ry = (unsigned)y->last.rank; /* -1: last */
    if (rx != ry)
        return rx < ry ? -1 : 1;
    int c = strcmp(x->last.host, y->last.host);
    if (c != 0)
        return c;
    return x->last.producer < y->last.producer ? -1 : x->last.producer > y->last.producer;
}

static double pct(uint64_t part, double whole) { return whole > 0 ? 100.0 * (double)part / whole : 0; }

/* `report --ranks --summary`: subscribes to the relays' summaries only, until SIGINT/SIGTERM or
 * for_s seconds, then prints per producer (rank) what they add up to. As `report --ranks` measures
 * against each GPU's span, busy is the share of the summaries' spans (each t_max - t_min, summed)
 * times the GPUs that worked; blocked the share of the spans (host threads summed, so several
 * blocked threads can pass 100%); idle the rest of busy; events/s per second of the relay's
 * intervals in which the producer sent. */
static int report_summaries(char **specs, int n, const char *server_key, const char *client_key, double for_s,
                            int format) {
    err_msg err = {{0}};
    char eps[REPORT_MAX_LIVE][512];
    tp_sub *sub = report_subscribe(specs, n, server_key, client_key, 1, eps);
    if (sub == NULL)
        return 1;
    verb_signals sig;
    verb_signals_catch(&sig);
    if (isatty(STDERR_FILENO))
        verb_say("report", "taking the relays' summaries (Ctrl-C to stop and report)");
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double t0 = (double)ts.tv_sec + ts.tv_nsec * 1e-9, now = t0;
    int status = 0;
    while (!verb_stop_signal && (for_s <= 0 || now - t0 < for_s)) {
        tp_sub_msg m;
        int rc = tp_sub_recv(sub, &m, 100, &err);
        if (rc < 0 && rc != ERR_MALFORMED) {
            status = verb_error("report", "cannot receive: %s", err.msg);
            break;
        }
        if (rc == ERR_MALFORMED)
            verb_warn("report", "%s", err.msg);
        clock_gettime(CLOCK_MONOTONIC, &ts);
        now = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
    }
    verb_signals_restore(&sig);
    size_t np = tp_sub_summary_count(sub);
    tp_sub_summary *v = calloc(np ? np : 1, sizeof *v);
    if (v == NULL) {
        tp_sub_destroy(&sub);
        return verb_error("report", "out of memory");
    }
    for (size_t i = 0; i < np; i++)
        tp_sub_summary_get(sub, i, &v[i]);
    qsort(v, np, sizeof *v, by_rank);
    tp_sub_stats ss;
    tp_sub_stats_get(sub, &ss);
    tp_sub_destroy(&sub);
    if (status != 0) {
        free(v);
        return status;
    }
    if (format == RP_JSON) {
        printf("{\"summary\":{\"producers\":[");
        for (size_t i = 0; i < np; i++) {
            const tp_sub_summary *x = &v[i];
            printf("%s{\"producer\":\"%016" PRIx64 "\",\"rank\":%d,\"host\":", i ? "," : "", x->last.producer,
                   x->last.rank);
            tp_print_json_string(stdout, x->last.host, (size_t)-1);
            printf(",\"pid\":%u,\"summaries\":%" PRIu64
                   ",\"interval_ns\":%" PRIu64 ",\"span_ns\":%" PRIu64 ",\"devices\":%u,\"busy_ns\":%" PRIu64 ",\"blocked_ns\":%" PRIu64
                   ",\"events\":%" PRIu64 ",\"batches\":%" PRIu64 ",\"missed\":%" PRIu64 ",\"drops\":%" PRIu64 "}",
                   x->last.pid, x->summaries, x->interval_ns, x->span_ns,
                   x->last.devices, x->busy_ns, x->blocked_ns, x->events, x->batches, x->missed, x->last.drops);
        }
        printf("],\"summaries\":%" PRIu64 ",\"malformed\":%" PRIu64 "}}\n", ss.summaries, ss.malformed);
    } else {
        printf("Per rank, from the relays' summaries (%zu producer%s, %" PRIu64 " summaries)\n", np, np == 1 ? "" : "s",
               ss.summaries);
        printf("  %5s  %-20s %8s %7s %8s %7s %10s %7s %7s\n", "rank", "host", "pid", "busy%", "blocked%", "idle%",
               "events/s", "missed", "drops");
        for (size_t i = 0; i < np; i++) {
            const tp_sub_summary *x = &v[i];
            unsigned gpus = x->last.devices > 0 ? x->last.devices : 1;
            double wall = (double)x->interval_ns, span = (double)x->span_ns, busy = pct(x->busy_ns, span * gpus);
            char rank[16], host[3 * sizeof x->last.host];
            if (x->last.rank >= 0)
                snprintf(rank, sizeof rank, "%d", x->last.rank);
            else
                snprintf(rank, sizeof rank, "?");
            tp_sanitize(host, sizeof host, x->last.host, strlen(x->last.host), NULL);
            printf("  %5s  %-20.20s %8u %7.1f %8.1f %7.1f %10.0f %7" PRIu64 " %7" PRIu64 "\n", rank,
                   host[0] ? host : "?", x->last.pid, busy, pct(x->blocked_ns, span), busy > 100 ? 0.0 : 100.0 - busy,
                   wall > 0 ? (double)x->events / (wall * 1e-9) : 0.0, x->missed, x->last.drops);
        }
    }
    free(v);
    if (np == 0) /* the sources could not be read: nothing answered */
        return verb_error("report", "no summary came in %.0f s: is a relay listening there, and are there traced "
                                    "processes?", for_s);
    return 0;
}

enum { O_FORMAT = 1, O_HTA, O_WIDE_STREAM, O_WIDE_HOST, O_FAIL_IF, O_TOP, O_GAP_US, O_GPU_GAP_MS, O_OUT, O_KEY,
       O_MAX_EVENTS, O_STEPS, O_STEP, O_BASELINE, O_RANKS, O_SUMMARY, O_FOR, O_CLIENT_KEY, O_WAIT, O_ALIGN };

/* One run of the verb: what the command line asked for, then what each phase made; report_free
 * frees it whichever phase stopped. */
typedef struct report_run {
    char *sources[REPORT_MAX_SOURCES];
    int n_sources;
    const char *base_src[REPORT_MAX_SOURCES];
    int n_base;
    rp_check checks[REPORT_MAX_CHECKS];
    int n_checks;
    int hta, steps, ranks, summary;
    int wide_both;        /* --hta-wide-sync-as-stream and -as-host both given */
    size_t left_out;      /* sources that could not be read: the report is of the others, the status 1 */
    double for_s, wait_s; /* --for; --wait (a live source that never answers) */
    uint64_t max_events;
    int align; /* INGEST_ALIGN_* */
    const char *step_name, *out_path, *server_key, *client_key;
    rp_opts ro;
    an_opts ao;
    hta_opts ho;
    st_store *s; /* the sources */
    an_result r;
    an_steps sp;
    an_ranks rk;
    st_store *bs; /* the baseline; NULL without one */
    an_result br;
    an_diff diff;
    hta_result h;
    char source[1024], baseline[1024]; /* their names, as the report shows them */
    err_msg err;
} report_run;

/* One option or operand of the command line; -1 to go on, else the verb's status. */
static int report_option(report_run *run, args *p, int id, const char *val) {
    uint64_t top;
    double ms;
    switch (id) {
    case ARGS_HELP: return 0;
    case ARGS_BAD: return EXIT_USAGE;
    case O_FORMAT:
        if ((run->ro.format = rp_format_parse(val)) < 0)
            return args_bad(p, "unknown format '%s' (text, json, markdown)", val);
        break;
    case O_HTA: run->hta = 1; break;
    case O_STEPS: run->steps = 1; break;
    case O_RANKS: run->ranks = 1; break;
    case O_SUMMARY: run->summary = 1; break;
    case O_FOR:
        if (args_double(p, "--for", val, 0.001, 1e9, &run->for_s))
            return EXIT_USAGE;
        break;
    case O_BASELINE:
        if (run->n_base == REPORT_MAX_SOURCES)
            return args_bad(p, "at most %d baseline sources", REPORT_MAX_SOURCES);
        run->base_src[run->n_base++] = val;
        break;
    case O_STEP:
        run->steps = 1;
        run->step_name = val;
        break;
    case O_WIDE_STREAM:
    case O_WIDE_HOST:
        run->wide_both |= run->ho.wide_sync != HTA_WIDE_AUTO &&
                          run->ho.wide_sync != (id == O_WIDE_STREAM ? HTA_WIDE_STREAM : HTA_WIDE_HOST);
        run->ho.wide_sync = id == O_WIDE_STREAM ? HTA_WIDE_STREAM : HTA_WIDE_HOST;
        break;
    case O_FAIL_IF:
        if (run->n_checks == REPORT_MAX_CHECKS)
            return args_bad(p, "at most %d --fail-if", REPORT_MAX_CHECKS);
        if (rp_check_parse(val, &run->checks[run->n_checks], &run->err) != 0)
            return args_bad(p, "--fail-if %s", run->err.msg);
        run->n_checks++;
        break;
    case O_TOP:
        if (args_u64(p, "--top", val, 1, 1000000, &top))
            return EXIT_USAGE;
        run->ro.top = (size_t)top;
        break;
    case O_GAP_US:
        if (args_double(p, "--gap-us", val, 0, 1e12, &ms))
            return EXIT_USAGE;
        run->ao.gap_ns = (uint64_t)(ms * 1e3);
        if (run->ao.gap_ns == 0) /* 0 is the analysis' "default"; under 1 ns, every bubble is one */
            run->ao.gap_ns = 1;
        break;
    case O_GPU_GAP_MS:
        if (args_double(p, "--gpu-gap-ms", val, 0, 1e9, &ms))
            return EXIT_USAGE;
        run->ao.rule_gap_ns = (uint64_t)(ms * 1e6);
        if (run->ao.rule_gap_ns == 0)
            run->ao.rule_gap_ns = 1;
        break;
    case O_OUT: run->out_path = val; break;
    case O_KEY: run->server_key = val; break;
    case O_CLIENT_KEY: run->client_key = val; break;
    case O_MAX_EVENTS:
        if (args_u64(p, "--max-events", val, 1, UINT64_MAX, &run->max_events))
            return EXIT_USAGE;
        break;
    case O_WAIT:
        if (args_double(p, "--wait", val, 0, 1e9, &run->wait_s))
            return EXIT_USAGE;
        break;
    case O_ALIGN:
        if ((run->align = ingest_align_parse(val)) < 0)
            return args_bad(p, "unknown --align '%s' (auto, start, clock)", val);
        break;
    default:
        if (run->n_sources == REPORT_MAX_SOURCES)
            return args_bad(p, "at most %d sources", REPORT_MAX_SOURCES);
        run->sources[run->n_sources++] = (char *)val;
        break;
    }
    return -1;
}

/* The command line and what goes with what; -1 to go on, else the verb's status. */
static int report_parse(int argc, char **argv, report_run *run) {
    static const arg_opt opts[] = {
        {O_FORMAT, "--format", NULL, 1},
        {O_HTA, "--hta", NULL, 0},
        {O_STEPS, "--steps", NULL, 0},
        {O_STEP, "--step", NULL, 1},
        {O_BASELINE, "--baseline", NULL, 1},
        {O_RANKS, "--ranks", NULL, 0},
        {O_SUMMARY, "--summary", NULL, 0},
        {O_FOR, "--for", NULL, 1},
        {O_WIDE_STREAM, "--hta-wide-sync-as-stream", NULL, 0},
        {O_WIDE_HOST, "--hta-wide-sync-as-host", NULL, 0},
        {O_FAIL_IF, "--fail-if", NULL, 1},
        {O_TOP, "--top", NULL, 1},
        {O_GAP_US, "--gap-us", NULL, 1},
        {O_GPU_GAP_MS, "--gpu-gap-ms", NULL, 1},
        {O_OUT, "--output", "-o", 1},
        {O_KEY, "--server-key", NULL, 1},
        {O_CLIENT_KEY, "--client-key", NULL, 1},
        {O_MAX_EVENTS, "--max-events", NULL, 1},
        {O_WAIT, "--wait", NULL, 1},
        {O_ALIGN, "--align", NULL, 1},
    };
    args p;
    ARGS_INIT(&p, "report", report_usage, opts, argc, argv);
    const char *val;
    for (int id; (id = args_next(&p, &val)) != ARGS_END;) {
        int status = report_option(run, &p, id, val);
        if (status >= 0)
            return status;
    }
    if (run->n_sources == 0)
        return args_bad(&p, "no source given (a trace file, a Kineto JSON or a live endpoint)");
    if (run->wide_both)
        return args_bad(&p, "--hta-wide-sync-as-stream and --hta-wide-sync-as-host: give one of them");
    for (int i = 0; i < run->n_checks; i++)
        if (run->n_base == 0 && rp_check_needs_baseline(&run->checks[i]))
            return args_bad(&p, "--fail-if '%s' compares with a baseline: give --baseline OLD", run->checks[i].text);
    int n_stdin = 0;
    for (int i = 0; i < run->n_sources; i++)
        n_stdin += strcmp(run->sources[i], "-") == 0;
    if (n_stdin > 1)
        return args_bad(&p, "standard input (-) is given %d times; it can be read once", n_stdin);
    if (run->out_path != NULL && strcmp(run->out_path, "-") == 0)
        run->out_path = NULL; /* standard output */
    else if (run->out_path != NULL && run->out_path[0] == '\0')
        return args_bad(&p, "-o: an empty file name");
    for (int i = 0; run->out_path != NULL && i < run->n_sources + run->n_base; i++) {
        const char *src = i < run->n_sources ? run->sources[i] : run->base_src[i - run->n_sources];
        if (verb_same_file(src, run->out_path))
            return args_bad(&p, "-o %s is also a source: the report would write over it", run->out_path);
    }
    int n_live = 0;
    for (int i = 0; i < run->n_sources; i++)
        n_live += !is_file_source(run->sources[i]) && looks_live(run->sources[i]);
    if (n_live > REPORT_MAX_LIVE)
        return args_bad(&p, "at most %d live sources", REPORT_MAX_LIVE);
    if (run->for_s > 0 && !run->summary)
        return args_bad(&p, "--for goes with --summary");
    if (!run->summary)
        return -1;
    if (!run->ranks || run->hta || run->steps || run->n_base > 0 || run->n_checks > 0 || run->out_path != NULL ||
        run->ro.format == RP_MARKDOWN)
        return args_bad(&p, "--summary goes with --ranks (and --format text or json, --for, --server-key, --client-key) only");
    for (int i = 0; i < run->n_sources; i++)
        if (is_file_source(run->sources[i]) || !looks_live(run->sources[i]))
            return args_bad(&p, "--summary takes live relays, and %s is not one", run->sources[i]);
    return -1;
}

/* The kind of a file source, as the report speaks of it (RP_SRC_*). Standard input that is a
 * regular file is looked at again from its start; a pipe can only be a profiler trace. */
static unsigned source_kind(const char *spec) {
    struct stat st;
    if (strcmp(spec, "-") == 0 && (fstat(STDIN_FILENO, &st) != 0 || !S_ISREG(st.st_mode)))
        return RP_SRC_KINETO;
    switch (ingest_kind(strcmp(spec, "-") == 0 ? "/dev/stdin" : spec)) {
    case INGEST_KINETO: return RP_SRC_KINETO;
    case INGEST_NSYS: return RP_SRC_NSYS;
    default: return RP_SRC_TRACER;
    }
}

/* The sources into one store: the files read, then the live sources recorded; the store committed
 * and its native call sites put to file:line. 0, or the verb's status with the reason said. */
static int report_load(report_run *run) {
    if ((run->s = st_store_new(NULL)) == NULL)
        return verb_error("report", "out of memory");
    char *live[REPORT_MAX_LIVE];
    const char *files[REPORT_MAX_SOURCES];
    int n_live = 0, n_files = 0;
    for (int i = 0; i < run->n_sources; i++) {
        if (!is_file_source(run->sources[i]) && looks_live(run->sources[i])) {
            live[n_live++] = run->sources[i];
            continue;
        }
        run->ro.sources |= source_kind(run->sources[i]);
        files[n_files++] = run->sources[i];
    }
    if (n_files > 0) {
        if (verb_read_files("report", run->s, files, (size_t)n_files, run->max_events, run->align, &run->left_out,
                            &run->err) != 0)
            return verb_error("report", "%s", run->err.msg);
        run->ro.left_out = run->left_out;
        /* what the import freed goes back to the system before the analysis takes its own (the
         * batch verbs keep freed memory for reuse: cm_malloc_for_batches) */
        malloc_trim(0);
    }
    if (n_live > 0)
        run->ro.sources |= RP_SRC_TRACER;
    int status = n_live > 0 ? record_live(run->s, live, n_live, run->server_key, run->client_key, run->wait_s) : 0;
    if (status != 0)
        return status;
    st_store_commit(run->s);
    verb_symbolize("report", run->s);
    if (st_store_events(run->s) == 0)
        return verb_error("report", "no events to analyse: %s holds no GPU work, CUDA calls or ranges",
                          run->n_sources == 1 ? run->sources[0] : "none of the sources");
    return 0;
}

/* The analysis, and the steps and ranks when asked for. */
static int report_analyse(report_run *run) {
    if (run->hta && !run->steps && !run->ranks && run->n_base == 0 && run->n_checks == 0) {
        /* --hta alone prints HTA's breakdowns and the span (JSON t0, t1): no analysis needed. */
        st_store_span(run->s, &run->r.t0, &run->r.t1);
    } else if (an_analyze(run->s, &run->ao, &run->r, &run->err) != 0) {
        return verb_error("report", "%s", run->err.msg);
    }
    if (run->steps) {
        if (an_steps_find(run->s, &run->r, run->step_name, &run->sp, &run->err) != 0)
            return verb_error("report", "%s", run->err.msg);
        if (run->step_name != NULL && run->sp.source != AN_STEPS_RANGE)
            verb_warn("report", "no range named \"%s\" marks three steps or more; %s", run->step_name,
                      run->sp.source == AN_STEPS_PROFILER    ? "steps follow the ProfilerStep#N ranges instead"
                      : run->sp.source == AN_STEPS_HEARTBEAT ? "steps follow the most regular range or blocking call instead"
                                                             : "no steps found");
        run->ro.steps = &run->sp;
    }
    if (run->ranks) {
        if (an_ranks_find(run->s, &run->r, &run->rk, &run->err) != 0)
            return verb_error("report", "%s", run->err.msg);
        run->ro.ranks = &run->rk;
    }
    return 0;
}

#define REPORT_NAMES_LISTED 8 /* more sources than this are named by their pattern */

static int all_digits(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return 0;
    return n > 0;
}

static int by_number(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Whether the n middles (names[i] + pre, mid[i] bytes each) are the numbers lo..hi, each once,
 * written alike (all of one width, or none with a leading zero); *lo, *hi their indexes. */
static int numbered(const char *const *names, size_t pre, const size_t *mid, int n, int *lo, int *hi) {
    uint64_t *v = malloc((size_t)n * sizeof *v);
    if (v == NULL)
        return 0;
    int ok = 1;
    *lo = *hi = 0;
    for (int i = 0; i < n && ok; i++) {
        const char *m = names[i] + pre;
        ok = all_digits(m, mid[i]) && mid[i] <= 18 && (mid[i] == mid[0] || m[0] != '0');
        v[i] = 0;
        for (size_t k = 0; ok && k < mid[i]; k++)
            v[i] = v[i] * 10 + (uint64_t)(m[k] - '0');
    }
    for (int i = 0; i < n && ok; i++) {
        *lo = v[i] < v[*lo] ? i : *lo;
        *hi = v[i] > v[*hi] ? i : *hi;
    }
    if (ok) {
        qsort(v, (size_t)n, sizeof *v, by_number);
        for (int i = 1; i < n && ok; i++)
            ok = v[i] == v[i - 1] + 1;
    }
    free(v);
    return ok;
}

/* How the report names its sources: each, separated by spaces, when there are a few; else what
 * they have in common, with a {lo..hi} or * where they differ, and how many there are (a job's
 * hundreds of rank files: "/data/job/rank{0..255}.json.gz (256 files)"). Cut at out's size. */
static void report_join(char *out, size_t len, const char *const *names, int n) {
    out[0] = '\0';
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += strlen(names[i]) + 1;
    if (n == 1 || (n <= REPORT_NAMES_LISTED && total <= len)) {
        for (int i = 0; i < n; i++) {
            size_t used = strlen(out);
            snprintf(out + used, len - used, "%s%s", i ? " " : "", names[i]);
        }
        return;
    }
    size_t pre = strlen(names[0]), suf = pre, shortest = pre;
    for (int i = 1; i < n; i++) {
        size_t k = 0, ln = strlen(names[i]), l0 = strlen(names[0]);
        while (k < pre && names[i][k] == names[0][k])
            k++;
        pre = k;
        for (k = 0; k < suf && k < ln && k < l0 && names[i][ln - 1 - k] == names[0][l0 - 1 - k];)
            k++;
        suf = k;
        shortest = ln < shortest ? ln : shortest;
    }
    if (pre + suf > shortest)
        suf = shortest - pre;
    /* a number, or a character of several bytes, is told whole: the common parts do not end or
     * begin inside one */
    while (pre > 0 && ((names[0][pre - 1] >= '0' && names[0][pre - 1] <= '9') || (names[0][pre] & 0xC0) == 0x80))
        pre--;
    const char *tail0 = names[0] + strlen(names[0]) - suf;
    while (suf > 0 && ((tail0[0] >= '0' && tail0[0] <= '9') || (tail0[0] & 0xC0) == 0x80))
        tail0++, suf--;
    if (suf == 0 && (pre == 0 || names[0][pre - 1] == '/')) { /* no more in common than a folder */
        snprintf(out, len, "%s ... %s (%d files)", names[0], names[n - 1], n);
        return;
    }
    size_t *mid = malloc((size_t)n * sizeof *mid);
    int lo = 0, hi = 0, range = 0;
    if (mid != NULL) {
        for (int i = 0; i < n; i++)
            mid[i] = strlen(names[i]) - pre - suf;
        range = numbered(names, pre, mid, n, &lo, &hi);
    }
    if (range)
        snprintf(out, len, "%.*s{%.*s..%.*s}%s (%d files)", (int)pre, names[0], (int)mid[lo], names[lo] + pre,
                 (int)mid[hi], names[hi] + pre, tail0, n);
    else
        snprintf(out, len, "%.*s*%s (%d files)", (int)pre, names[0], tail0, n);
    free(mid);
}

/* The baseline, when given: files only (a live baseline would have nothing to compare), analysed
 * and compared with the run. */
static int report_baseline(report_run *run) {
    if (run->n_base == 0)
        return 0;
    if ((run->bs = st_store_new(NULL)) == NULL)
        return 1;
    /* read several at a time, as the run's files, each where its clock puts it */
    if (verb_read_files("report", run->bs, (const char *const *)run->base_src, (size_t)run->n_base, run->max_events,
                        INGEST_ALIGN_CLOCK, NULL, &run->err) != 0)
        return verb_error("report", "baseline %s", run->err.msg);
    verb_symbolize("report", run->bs);
    if (an_analyze(run->bs, &run->ao, &run->br, &run->err) != 0 ||
        an_compare(run->bs, &run->br, run->s, &run->r, &run->diff, &run->err) != 0)
        return verb_error("report", "baseline: %s", run->err.msg);
    report_join(run->baseline, sizeof run->baseline, run->base_src, run->n_base);
    run->ro.diff = &run->diff;
    run->ro.baseline = run->baseline;
    return 0;
}

/* HTA's breakdowns, which then make the report, when asked for. */
static int report_hta(report_run *run) {
    if (!run->hta)
        return 0;
    if (hta_analyze(run->s, &run->ho, &run->h, &run->err) != 0)
        return verb_error("report", "%s", run->err.msg);
    run->ro.hta = &run->h;
    run->ro.hta_only = 1;
    return 0;
}

/* The report, to standard output or -o's file. */
static int report_output(report_run *run) {
    report_join(run->source, sizeof run->source, (const char *const *)run->sources, run->n_sources);
    run->ro.source = run->source;
    FILE *out = stdout;
    if (run->out_path != NULL && (out = fopen(run->out_path, "w")) == NULL)
        return verb_error("report", "cannot write %s: %s", run->out_path, strerror(errno));
    int status = 0;
    if (rp_write(out, run->s, &run->r, &run->ro) != 0)
        status = verb_error("report", "cannot write the report");
    if (out != stdout && fclose(out) != 0)
        status = verb_error("report", "cannot write %s: %s", run->out_path, strerror(errno));
    return status;
}

/* The --fail-if thresholds, one line each on stderr, whether the report could be written or not;
 * status, or 1 when it was 0 and a threshold was crossed. */
static int report_checks(const report_run *run, int status) {
    for (int i = 0; i < run->n_checks; i++) {
        char msg[512];
        int crossed = rp_check_eval_base(&run->checks[i], run->s, &run->r, run->bs, run->bs ? &run->br : NULL,
                                         run->bs ? &run->diff : NULL, msg, sizeof msg);
        verb_say("report", "%s %s", crossed ? "FAIL" : "ok  ", msg);
        if (crossed && status == 0)
            status = 1;
    }
    return status;
}

static void report_free(report_run *run) {
    hta_result_free(&run->h);
    an_ranks_free(&run->rk);
    an_diff_free(&run->diff);
    an_result_free(&run->br);
    st_store_destroy(&run->bs);
    an_steps_free(&run->sp);
    an_result_free(&run->r);
    st_store_destroy(&run->s);
}

static int cmd_report(int argc, char **argv) {
    report_run run = {.ro = {.format = RP_TEXT}, .wait_s = REPORT_WAIT_S};
    int status = report_parse(argc, argv, &run);
    if (status >= 0)
        return status;
    if (run.summary)
        return report_summaries(run.sources, run.n_sources, run.server_key, run.client_key, run.for_s,
                                run.ro.format);
    status = report_load(&run);
    if (status == 0)
        status = report_analyse(&run);
    if (status == 0)
        status = report_baseline(&run);
    if (status == 0)
        status = report_hta(&run);
    if (status == 0)
        status = report_checks(&run, report_output(&run));
    if (status == 0 && run.left_out > 0) /* the report is of the sources that could be read */
        status = 1;
    report_free(&run);
    return status;
}

SYNCTOP_VERB(report, .name = "report", .fn = cmd_report,
             .synopsis = "report SOURCE... [--format F] [--hta] [--fail-if EXPR]",
             .summary = "where the host waited for the GPU: top stalls, utilisation, rule checks",
             .rank = 30, .batch = 1)
