/*
 * `synctop report SOURCE... [--format text|json|markdown] [--hta] [--fail-if EXPR]...`: analyses
 * trace files, Kineto JSON traces (one per rank), or live publishers (recorded until every producer
 * has finished, or Ctrl-C), and prints the findings, the top stalls by call site and the per-GPU
 * utilisation. --fail-if thresholds make the exit status 1 when crossed, with one line per crossed
 * threshold on stderr, so that a CI job can catch a synchronization regression.
 */
#include <errno.h>
#include <inttypes.h>
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

#define REPORT_MAX_SOURCES 64
#define REPORT_MAX_CHECKS 32

static void report_usage(FILE *out) {
    fprintf(out,
            "usage: synctop report SOURCE... [--format text|json|markdown] [--hta]\n"
            "                      [--steps] [--step NAME] [--baseline OLD]... [--ranks]\n"
            "                      [--fail-if EXPR]... [--top N] [--gap-us N]\n"
            "                      [--gpu-gap-ms N] [-o FILE] [--server-key KEY]\n"
            "                      [--max-events N]\n"
            "       synctop report --ranks --summary [--for SECONDS] [--format text|json]\n"
            "                      [--server-key KEY] RELAY...\n"
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
            "                     program ends or Ctrl-C\n"
            "  --format F         text (default), json, markdown\n"
            "  --hta              Holistic Trace Analysis' idle time breakdown (host_wait,\n"
            "                     kernel_wait, other per stream, with the idle intervals'\n"
            "                     statistics) and temporal breakdown, computed as HTA 0.5.0\n"
            "                     does (times in us), instead of the report\n"
            "  --steps            the loop's steps: found by --step's range, else the\n"
            "                     profiler's ProfilerStep#N ranges, else the most regular\n"
            "                     repeated blocking call; per step wall, GPU busy and\n"
            "                     blocked time, the slow ones (above median + 3 MAD) and\n"
            "                     what blocked in them, and stalls that come every Nth step\n"
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
            "  -o, --output FILE  write the report to FILE instead of standard output\n"
            "  --server-key KEY   the publishers' CURVE public key, for a live source\n"
            "  --max-events N     read a trace file of up to N events even when that is\n"
            "                     more than its size makes plausible (4 per byte)\n"
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

static void report_refused(void *ctx, const char *endpoint) {
    (void)ctx;
    verb_refused_cb("report", endpoint);
}

/* A batch into the store; a bad one is dropped alone, with a warning. */
static int report_batch(void *ctx, const tp_sub_msg *m, err_msg *err) {
    if (st_store_add_batch(ctx, m->data, m->len, err) != 0)
        verb_warn("report", "%s", err->msg);
    return 0;
}

/* Records live sources into the store until every producer has finished (its TP_BF_END batch), the
 * ipc publishers went away, or SIGINT/SIGTERM; then says on stderr what was recorded and why it
 * stopped, so that a report cut short is never mistaken for a whole run. */
/* A subscriber connected to the live sources (their endpoints resolved into eps), taking batches or,
 * with summaries, the relays' summaries; NULL when it cannot be (said on stderr). */
static tp_sub *report_subscribe(char **specs, int n, const char *server_key, int summaries,
                                char eps[][512]) {
    err_msg err = {{0}};
    char key[TP_KEY_Z85_LEN + 1];
    if (server_key != NULL && tp_public_key_resolve(server_key, key, &err) < 0) {
        verb_error("report", "bad --server-key: %s", err.msg);
        return NULL;
    }
    tp_sub_opts so = {.server_key = server_key ? key : NULL, .summaries = summaries};
    tp_sub *sub = tp_sub_new(&so, &err);
    if (sub == NULL) {
        verb_error("report", "cannot subscribe: %s", err.msg);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (tp_endpoint_resolve(specs[i], eps[i], sizeof eps[i], &err) < 0 || tp_sub_connect(sub, eps[i], &err) < 0) {
            tp_sub_destroy(&sub);
            verb_error("report", "%s: %s", specs[i], err.msg);
            return NULL;
        }
    }
    return sub;
}

static int record_live(st_store *s, char **specs, int n, const char *server_key) {
    err_msg err = {{0}};
    static char eps[REPORT_MAX_SOURCES][512];
    tp_sub *sub = report_subscribe(specs, n, server_key, 0, eps);
    if (sub == NULL)
        return 1;
    verb_signals sig;
    verb_signals_catch(&sig);
    int status = 0;
    if (isatty(STDERR_FILENO))
        verb_say("report", "recording until the program ends (Ctrl-C to stop and report)");
    const char *ep_list[REPORT_MAX_SOURCES];
    for (int i = 0; i < n; i++)
        ep_list[i] = eps[i];
    live_opts lo = {.stop = &verb_stop_signal, .on_batch = report_batch, .ctx = s, .endpoints = ep_list,
                    .n_endpoints = (size_t)n, .on_refused = report_refused};
    live_end end = live_follow(sub, &lo, &err);
    /* the hosts' clocks as the relays answered them: each host's processes on this machine's clock */
    live_clocks_apply(sub, s);
    const char *why = live_end_name(end);
    if (end == LIVE_ENDED)
        why = "every program finished";
    if (end == LIVE_FAILED)
        status = verb_error("report", "cannot receive: %s", err.msg);
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
static int report_summaries(char **specs, int n, const char *server_key, double for_s, int format) {
    err_msg err = {{0}};
    static char eps[REPORT_MAX_SOURCES][512];
    tp_sub *sub = report_subscribe(specs, n, server_key, 1, eps);
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
        if (np == 0)
            printf("  (no summary came: is a relay listening there, and are there traced processes?)\n");
    }
    free(v);
    return 0;
}

static int cmd_report(int argc, char **argv) {
    char *sources[REPORT_MAX_SOURCES];
    int n_sources = 0;
    rp_check checks[REPORT_MAX_CHECKS];
    int n_checks = 0;
    rp_opts ro = {.format = RP_TEXT};
    an_opts ao = {0};
    hta_opts ho = {0};
    int hta = 0, steps = 0, ranks = 0, summary = 0;
    double for_s = 0;
    an_ranks rk = {0};
    const char *step_name = NULL, *base_src[REPORT_MAX_SOURCES];
    int n_base = 0;
    an_steps sp = {0};
    st_store *bs = NULL;
    an_result br = {0};
    an_diff diff = {0};
    const char *out_path = NULL, *server_key = NULL;
    err_msg err = {{0}};
    enum { O_FORMAT = 1, O_HTA, O_WIDE_STREAM, O_WIDE_HOST, O_FAIL_IF, O_TOP, O_GAP_US, O_GPU_GAP_MS, O_OUT, O_KEY,
           O_MAX_EVENTS, O_STEPS, O_STEP, O_BASELINE, O_RANKS, O_SUMMARY, O_FOR };
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
        {O_MAX_EVENTS, "--max-events", NULL, 1},
    };
    args p;
    ARGS_INIT(&p, "report", report_usage, opts, argc, argv);
    const char *val;
    uint64_t top, max_events = 0;
    double ms;
    for (int id; (id = args_next(&p, &val)) != ARGS_END;) {
        switch (id) {
        case ARGS_HELP: return 0;
        case ARGS_BAD: return EXIT_USAGE;
        case O_FORMAT:
            if ((ro.format = rp_format_parse(val)) < 0)
                return args_bad(&p, "unknown format '%s' (text, json, markdown)", val);
            break;
        case O_HTA: hta = 1; break;
        case O_STEPS: steps = 1; break;
        case O_RANKS: ranks = 1; break;
        case O_SUMMARY: summary = 1; break;
        case O_FOR:
            if (args_double(&p, "--for", val, 0.001, 1e9, &for_s))
                return EXIT_USAGE;
            break;
        case O_BASELINE:
            if (n_base == REPORT_MAX_SOURCES)
                return args_bad(&p, "at most %d baseline sources", REPORT_MAX_SOURCES);
            base_src[n_base++] = val;
            break;
        case O_STEP:
            steps = 1;
            step_name = val;
            break;
        case O_WIDE_STREAM: ho.wide_sync = HTA_WIDE_STREAM; break;
        case O_WIDE_HOST: ho.wide_sync = HTA_WIDE_HOST; break;
        case O_FAIL_IF:
            if (n_checks == REPORT_MAX_CHECKS)
                return args_bad(&p, "at most %d --fail-if", REPORT_MAX_CHECKS);
            if (rp_check_parse(val, &checks[n_checks], &err) != 0)
                return args_bad(&p, "--fail-if %s", err.msg);
            n_checks++;
            break;
        case O_TOP:
            if (args_u64(&p, "--top", val, 1, 1000000, &top))
                return EXIT_USAGE;
            ro.top = (size_t)top;
            break;
        case O_GAP_US:
            if (args_double(&p, "--gap-us", val, 0, 1e12, &ms))
                return EXIT_USAGE;
            ao.gap_ns = (uint64_t)(ms * 1e3);
            if (ao.gap_ns == 0) /* 0 is the analysis' "default"; under 1 ns, every bubble is one */
                ao.gap_ns = 1;
            break;
        case O_GPU_GAP_MS:
            if (args_double(&p, "--gpu-gap-ms", val, 0, 1e9, &ms))
                return EXIT_USAGE;
            ao.rule_gap_ns = (uint64_t)(ms * 1e6);
            if (ao.rule_gap_ns == 0)
                ao.rule_gap_ns = 1;
            break;
        case O_OUT: out_path = val; break;
        case O_KEY: server_key = val; break;
        case O_MAX_EVENTS:
            if (args_u64(&p, "--max-events", val, 1, UINT64_MAX, &max_events))
                return EXIT_USAGE;
            break;
        default:
            if (n_sources == REPORT_MAX_SOURCES)
                return args_bad(&p, "at most %d sources", REPORT_MAX_SOURCES);
            sources[n_sources++] = (char *)val;
            break;
        }
    }
    if (n_sources == 0)
        return args_bad(&p, "no source given (a trace file, a Kineto JSON or a live endpoint)");
    if (for_s > 0 && !summary)
        return args_bad(&p, "--for goes with --summary");
    if (summary) {
        if (!ranks || hta || steps || n_base > 0 || n_checks > 0 || out_path != NULL || ro.format == RP_MARKDOWN)
            return args_bad(&p, "--summary goes with --ranks (and --format text or json, --for, --server-key) only");
        for (int i = 0; i < n_sources; i++)
            if (is_file_source(sources[i]) || !looks_live(sources[i]))
                return args_bad(&p, "--summary takes live relays, and %s is not one", sources[i]);
        return report_summaries(sources, n_sources, server_key, for_s, ro.format);
    }

    st_store *s = st_store_new(NULL);
    if (s == NULL)
        return verb_error("report", "out of memory");
    char *live[REPORT_MAX_SOURCES];
    int n_live = 0, status = 0;
    for (int i = 0; i < n_sources && status == 0; i++) {
        if (!is_file_source(sources[i]) && looks_live(sources[i])) {
            live[n_live++] = sources[i];
            continue;
        }
        if (ingest_file_max(s, sources[i], max_events, verb_warn_cb, "report", &err) != 0) {
            verb_error("report", "%s", err.msg);
            status = 1;
        }
    }
    if (status == 0 && n_live > 0)
        status = record_live(s, live, n_live, server_key);
    if (status != 0) {
        st_store_destroy(&s);
        return status;
    }
    st_store_commit(s);
    verb_symbolize("report", s); /* native call sites to file:line */
    if (st_store_events(s) == 0) {
        st_store_destroy(&s);
        return verb_error("report", "no events to analyse");
    }

    an_result r = {0};
    if (hta && !steps && !ranks && n_base == 0 && n_checks == 0) {
        /* --hta alone prints HTA's breakdowns and the span (JSON t0, t1): no analysis needed. */
        st_store_span(s, &r.t0, &r.t1);
    } else if (an_analyze(s, &ao, &r, &err) != 0) {
        st_store_destroy(&s);
        return verb_error("report", "%s", err.msg);
    }
    if (steps) {
        if (an_steps_find(s, &r, step_name, &sp, &err) != 0) {
            an_result_free(&r);
            st_store_destroy(&s);
            return verb_error("report", "%s", err.msg);
        }
        if (step_name != NULL && sp.source != AN_STEPS_RANGE)
            verb_warn("report", "no range named \"%s\" marks three steps or more; %s", step_name,
                      sp.source == AN_STEPS_PROFILER    ? "steps follow the ProfilerStep#N ranges instead"
                      : sp.source == AN_STEPS_HEARTBEAT ? "steps follow the most regular blocking call instead"
                                                        : "no steps found");
        ro.steps = &sp;
    }
    if (ranks) {
        if (an_ranks_find(s, &r, &rk, &err) != 0) {
            an_steps_free(&sp);
            an_result_free(&r);
            st_store_destroy(&s);
            return verb_error("report", "%s", err.msg);
        }
        ro.ranks = &rk;
    }
    if (n_base > 0) { /* the baseline: files only (a live baseline would have nothing to compare) */
        bs = st_store_new(NULL);
        int bad = bs == NULL;
        for (int i = 0; i < n_base && !bad; i++)
            if (ingest_file_max(bs, base_src[i], max_events, verb_warn_cb, "report", &err) != 0) {
                verb_error("report", "baseline %s", err.msg);
                bad = 1;
            }
        if (!bad) {
            st_store_commit(bs);
            verb_symbolize("report", bs);
            if (an_analyze(bs, &ao, &br, &err) != 0 || an_compare(bs, &br, s, &r, &diff, &err) != 0) {
                verb_error("report", "baseline: %s", err.msg);
                bad = 1;
            }
        }
        if (bad) {
            an_result_free(&br);
            st_store_destroy(&bs);
            an_ranks_free(&rk);
            an_steps_free(&sp);
            an_result_free(&r);
            st_store_destroy(&s);
            return 1;
        }
        static char base_text[1024];
        base_text[0] = '\0';
        for (int i = 0; i < n_base; i++) {
            size_t n = strlen(base_text);
            snprintf(base_text + n, sizeof base_text - n, "%s%s", i ? " " : "", base_src[i]);
        }
        ro.diff = &diff;
        ro.baseline = base_text;
    }
    hta_result h = {0};
    if (hta) {
        if (hta_analyze(s, &ho, &h, &err) != 0) {
            status = verb_error("report", "%s", err.msg);
            goto done;
        }
        ro.hta = &h;
        ro.hta_only = 1;
    }
    char source[1024] = "";
    for (int i = 0; i < n_sources; i++) {
        size_t n = strlen(source);
        snprintf(source + n, sizeof source - n, "%s%s", i ? " " : "", sources[i]);
    }
    ro.source = source;
    FILE *out = stdout;
    if (out_path != NULL && (out = fopen(out_path, "w")) == NULL) {
        status = verb_error("report", "cannot write %s: %s", out_path, strerror(errno));
        out = NULL;
    }
    if (out != NULL && rp_write(out, s, &r, &ro) != 0)
        status = verb_error("report", "cannot write the report");
    if (out != NULL && out != stdout && fclose(out) != 0)
        status = verb_error("report", "cannot write %s: %s", out_path, strerror(errno));
    for (int i = 0; i < n_checks; i++) {
        char msg[512];
        int crossed = rp_check_eval_base(&checks[i], s, &r, bs, bs ? &br : NULL, bs ? &diff : NULL, msg, sizeof msg);
        verb_say("report", "%s %s", crossed ? "FAIL" : "ok  ", msg);
        if (crossed && status == 0)
            status = 1;
    }
done:
    hta_result_free(&h);
    an_ranks_free(&rk);
    an_diff_free(&diff);
    if (bs != NULL)
        an_result_free(&br);
    st_store_destroy(&bs);
    an_steps_free(&sp);
    an_result_free(&r);
    st_store_destroy(&s);
    return status;
}

SYNCTOP_VERB(report, .name = "report", .fn = cmd_report,
             .synopsis = "report SOURCE... [--format F] [--hta] [--fail-if EXPR]",
             .summary = "where the host waited for the GPU: top stalls, utilisation, rule checks",
             .rank = 30, .batch = 1)
