/*
 * `synctop report SOURCE... [--format text|json|markdown] [--hta] [--fail-if EXPR]...`: analyses
 * trace files, Kineto JSON traces (one per rank), or live publishers (recorded until every producer
 * has finished, or Ctrl-C), and prints the findings, the top stalls by call site and the per-GPU
 * utilisation. --fail-if thresholds make the exit status 1 when crossed, with one line per crossed
 * threshold on stderr, so that a CI job can catch a synchronization regression.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "analysis.h"
#include "hta.h"
#include "report.h"
#include "store.h"
#include "synctop/net.h"
#include "verb.h"

#define REPORT_MAX_SOURCES 64
#define REPORT_MAX_CHECKS 32

static volatile sig_atomic_t report_stop;
static void report_on_signal(int sig) { report_stop = sig; }

static void report_usage(FILE *out) {
    fprintf(out,
            "usage: synctop report SOURCE... [--format text|json|markdown] [--hta] [--fail-if EXPR]...\n"
            "                      [--top N] [--gap-us N] [-o FILE] [--server-key KEY]\n\n"
            "Analyses where the host waited for the GPU and what it cost: the top stalls by call\n"
            "site (with their Python and native frames), GPU utilisation and idle time by cause,\n"
            "and the checks of Nsight Systems' expert rules (cuda_api_sync, cuda_memcpy_sync,\n"
            "cuda_memcpy_async, cuda_memset_sync, gpu_gaps, gpu_time_util).\n\n"
            "  SOURCE             a synctop trace file, a Kineto (PyTorch profiler) .json[.gz] trace\n"
            "                     (several: one per rank), or a live publisher (PID, HOST:PORT,\n"
            "                     tcp://..., ipc://...) recorded until its program ends or Ctrl-C\n"
            "  --format F         text (default), json, markdown\n"
            "  --hta              Holistic Trace Analysis' idle time breakdown (host_wait,\n"
            "                     kernel_wait, other per stream) and temporal breakdown, computed to\n"
            "                     HTA's definitions (times in us), instead of the report\n"
            "  --hta-wide-sync-as-stream  count device-wide cuda_sync rows as HTA does for stream\n"
            "                     4294967295 (older Kineto) rather than -1 (newer)\n"
            "  --fail-if EXPR     exit with status 1 when EXPR holds, e.g. 'blocked>5%%', 'idle>40%%',\n"
            "                     'stalls>100', 'sync-api>0', 'site:train.py:42>10ms',\n"
            "                     'api:cudaStreamSynchronize>50ms' (repeatable; see below)\n"
            "  --top N            call sites listed (default 15)\n"
            "  --gap-us N         GPU bubbles shorter than N us are not reported (default 20)\n"
            "  --gpu-gap-ms N     the gpu_gaps rule's threshold (default 500)\n"
            "  -o FILE            write the report to FILE instead of standard output\n"
            "  --server-key KEY   the publishers' CURVE public key, for a live source\n\n"
            "--fail-if metrics: blocked (host time blocked in CUDA calls; %% of wall time or a time\n"
            "such as 2s), idle (GPU idle of the idlest GPU; %% or time), stalls (blocking calls),\n"
            "bubbles (GPU idle bubbles), findings, a rule (sync-api, sync-memcpy, pageable-memcpy,\n"
            "sync-memset, gpu-gaps, low-util: its instances), site:TEXT (blocked time at call sites\n"
            "whose description holds TEXT), api:NAME. Operators: > >= < <= ==.\n"
            "Exit status: 0, 1 when a threshold was crossed or the source could not be read, 2 usage.\n");
}

static void report_warn(void *ctx, const char *msg) {
    (void)ctx;
    fputs("synctop report: warning: ", stderr);
    verb_print_sanitized(stderr, msg, (size_t)-1);
    fputc('\n', stderr);
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

/* Records live sources into the store until every producer has finished or a signal comes. */
static int record_live(st_store *s, char **specs, int n, const char *server_key) {
    tp_err err = {{0}};
    char key[TP_KEY_Z85_LEN + 1];
    if (server_key != NULL && tp_public_key_resolve(server_key, key, &err) < 0)
        return verb_error("report", "bad --server-key: %s", err.msg);
    tp_sub_opts so = {.server_key = server_key ? key : NULL};
    tp_sub *sub = tp_sub_new(&so, &err);
    if (sub == NULL)
        return verb_error("report", "cannot subscribe: %s", err.msg);
    for (int i = 0; i < n; i++) {
        char ep[512];
        if (tp_endpoint_resolve(specs[i], ep, sizeof ep, &err) < 0 || tp_sub_connect(sub, ep, &err) < 0) {
            tp_sub_destroy(&sub);
            return verb_error("report", "%s: %s", specs[i], err.msg);
        }
    }
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = report_on_signal;
    sigemptyset(&sa.sa_mask);
    report_stop = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    int tty = isatty(STDERR_FILENO), status = 0;
    if (tty)
        fprintf(stderr, "synctop report: recording until the program ends (Ctrl-C to stop and report)\n");
    uint64_t ids[256];
    int ended[256];
    size_t n_ids = 0, n_ended = 0;
    while (!report_stop) {
        tp_sub_msg m;
        int r = tp_sub_recv(sub, &m, 250, &err);
        if (r == 0)
            continue;
        if (r == TP_EMALFORMED)
            continue;
        if (r < 0) {
            if (report_stop)
                break;
            status = verb_error("report", "cannot receive: %s", err.msg);
            break;
        }
        if (st_store_add_batch(s, m.data, m.len, &err) != 0)
            report_warn(NULL, err.msg);
        size_t k = 0;
        while (k < n_ids && ids[k] != m.hdr.producer)
            k++;
        if (k == n_ids && n_ids < 256) {
            ids[n_ids] = m.hdr.producer;
            ended[n_ids++] = 0;
        }
        if (k < n_ids && (m.hdr.flags & TP_BF_END) && !(m.hdr.flags & TP_BF_SYNTHETIC) && !ended[k]) {
            ended[k] = 1;
            n_ended++;
        }
        if (n_ids > 0 && n_ended == n_ids)
            break;
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    tp_sub_destroy(&sub);
    return status;
}

static int cmd_report(int argc, char **argv) {
    char *sources[REPORT_MAX_SOURCES];
    int n_sources = 0;
    rp_check checks[REPORT_MAX_CHECKS];
    int n_checks = 0;
    rp_opts ro = {.format = RP_TEXT};
    an_opts ao = {0};
    hta_opts ho = {0};
    int hta = 0;
    const char *out_path = NULL, *server_key = NULL;
    tp_err err = {{0}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            report_usage(stdout);
            return 0;
        } else if (strcmp(a, "--format") == 0 && val) {
            ro.format = rp_format_parse(val);
            if (ro.format < 0) {
                fprintf(stderr, "synctop report: unknown format '");
                verb_print_sanitized(stderr, val, (size_t)-1);
                fprintf(stderr, "' (text, json, markdown)\n");
                return EXIT_USAGE;
            }
            i++;
        } else if (strcmp(a, "--hta") == 0) {
            hta = 1;
        } else if (strcmp(a, "--hta-wide-sync-as-stream") == 0) {
            ho.wide_sync_as_stream = 1;
        } else if (strcmp(a, "--fail-if") == 0 && val) {
            if (n_checks == REPORT_MAX_CHECKS)
                return verb_error("report", "too many --fail-if"), EXIT_USAGE;
            if (rp_check_parse(val, &checks[n_checks], &err) != 0) {
                fprintf(stderr, "synctop report: --fail-if ");
                verb_print_sanitized(stderr, err.msg, (size_t)-1);
                fputc('\n', stderr);
                return EXIT_USAGE;
            }
            n_checks++;
            i++;
        } else if (strcmp(a, "--top") == 0 && val) {
            ro.top = (size_t)strtoul(val, NULL, 10);
            i++;
        } else if (strcmp(a, "--gap-us") == 0 && val) {
            ao.gap_ns = (uint64_t)(strtod(val, NULL) * 1e3);
            i++;
        } else if (strcmp(a, "--gpu-gap-ms") == 0 && val) {
            ao.rule_gap_ns = (uint64_t)(strtod(val, NULL) * 1e6);
            i++;
        } else if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && val) {
            out_path = val;
            i++;
        } else if (strcmp(a, "--server-key") == 0 && val) {
            server_key = val;
            i++;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "synctop report: unexpected argument '");
            verb_print_sanitized(stderr, a, (size_t)-1);
            fprintf(stderr, "'\n");
            report_usage(stderr);
            return EXIT_USAGE;
        } else if (n_sources < REPORT_MAX_SOURCES) {
            sources[n_sources++] = argv[i];
        }
    }
    if (n_sources == 0) {
        report_usage(stderr);
        return EXIT_USAGE;
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
        if (st_store_load(s, sources[i], report_warn, NULL, &err) != 0) {
            fprintf(stderr, "synctop report: ");
            verb_print_sanitized(stderr, err.msg, (size_t)-1);
            fputc('\n', stderr);
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
    if (st_store_events(s) == 0) {
        st_store_destroy(&s);
        return verb_error("report", "no events to analyse");
    }

    an_result r;
    if (an_analyze(s, &ao, &r, &err) != 0) {
        st_store_destroy(&s);
        return verb_error("report", "%s", err.msg);
    }
    hta_result h = {0};
    if (hta) {
        if (hta_analyze(s, &ho, &h, &err) != 0) {
            an_result_free(&r);
            st_store_destroy(&s);
            return verb_error("report", "%s", err.msg);
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
        int crossed = rp_check_eval(&checks[i], s, &r, msg, sizeof msg);
        fprintf(stderr, "synctop report: %s ", crossed ? "FAIL" : "ok  ");
        verb_print_sanitized(stderr, msg, (size_t)-1);
        fputc('\n', stderr);
        if (crossed && status == 0)
            status = 1;
    }
    hta_result_free(&h);
    an_result_free(&r);
    st_store_destroy(&s);
    return status;
}

SYNCTOP_VERB(report, .name = "report", .fn = cmd_report,
             .synopsis = "report SOURCE... [--format F] [--hta] [--fail-if EXPR]",
             .summary = "where the host waited for the GPU: top stalls, utilisation, rule checks",
             .rank = 30)
