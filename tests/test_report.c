/*
 * `synctop report` end to end (the synctop binary on the real traces): the three formats, --fail-if
 * exit statuses and messages, and clear errors for damaged input. JSON output is checked with
 * python3 -m json.tool and with yajl; report.c's threshold parser is also tested directly.
 */
#include <string.h>
#include <sys/wait.h>
#include <yajl/yajl_tree.h>

#include "report.h"
#include "task.h"

static char out_buf[1 << 20];

/* Runs synctop with args (shell words); stdout+stderr in out_buf; returns the exit status. */
static int synctop(const char *args) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s > '%s' 2>&1", task_synctop(), args, task_path("out.txt"));
    int rc = system(cmd);
    FILE *f = fopen(task_path("out.txt"), "r");
    ASSERT_NOT_NULL(f);
    size_t n = fread(out_buf, 1, sizeof out_buf - 1, f);
    fclose(f);
    out_buf[n] = '\0';
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

#define ALEXNET "'" KINETO_TRACE_DIR "/alexnet_a100_sync_heavy.json.gz'"
#define SINGLE "'" KINETO_TRACE_DIR "/event_sync_single_stream.json.gz'"

TEST(report_text_names_top_stalls_and_rules) {
    ASSERT_EQ(synctop("report " ALEXNET), 0);
    ASSERT_STR_CONTAINS(out_buf, "host blocked 6612.315 ms in 52 calls");
    ASSERT_STR_CONTAINS(out_buf, "Top stalls by call site");
    ASSERT_STR_CONTAINS(out_buf, "6553.827      15");
    ASSERT_STR_CONTAINS(out_buf, "cudaFree");
    ASSERT_STR_CONTAINS(out_buf, "GPU 0 NVIDIA A100");
    ASSERT_STR_CONTAINS(out_buf, "[sync-api / cuda_api_sync]");
    ASSERT_STR_CONTAINS(out_buf, "16 calls, 56.991 ms");
    ASSERT_STR_CONTAINS(out_buf, "[gpu-gaps / gpu_gaps]");
}

TEST(report_json_parses_and_carries_the_numbers) {
    ASSERT_EQ(synctop("report --format json"), 2); /* no source */
    char args[2048];
    snprintf(args, sizeof args, "report --format json -o '%s' %s", task_path("r.json"), ALEXNET);
    ASSERT_EQ(synctop(args), 0);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "python3 -m json.tool '%s' > /dev/null", task_path("r.json"));
    ASSERT_EQ(system(cmd), 0);
    FILE *f = fopen(task_path("r.json"), "r");
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char err[256];
    yajl_val v = yajl_tree_parse(buf, err, sizeof err);
    if (v == NULL)
        TASK_FAIL_("json: %s", err);
    const char *bp[] = {"host", "blocked_ns", NULL};
    ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(v, bp, yajl_t_number)), 6612315000ll);
    const char *sp[] = {"sites", NULL};
    yajl_val sites = yajl_tree_get(v, sp, yajl_t_array);
    ASSERT_NOT_NULL(sites);
    ASSERT_EQ(sites->u.array.len, 4);
    const char *ap[] = {"api", NULL}, *cp[] = {"count", NULL};
    ASSERT_STR_EQ(YAJL_GET_STRING(yajl_tree_get(sites->u.array.values[0], ap, yajl_t_string)), "cudaFree");
    ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(sites->u.array.values[0], cp, yajl_t_number)), 15);
    yajl_tree_free(v);
}

TEST(report_markdown_has_tables) {
    ASSERT_EQ(synctop("report --format markdown " SINGLE), 0);
    ASSERT_STR_CONTAINS(out_buf, "# synctop report:");
    ASSERT_STR_CONTAINS(out_buf, "| blocked ms | calls |");
    ASSERT_STR_CONTAINS(out_buf, "|---:|");
    ASSERT_STR_CONTAINS(out_buf, "### synchronization API calls that blocked the host (`cuda_api_sync`)");
}

TEST(report_hta_output) {
    ASSERT_EQ(synctop("report --hta " SINGLE), 0);
    ASSERT_STR_CONTAINS(out_buf, "HTA idle time breakdown");
    ASSERT_STR_CONTAINS(out_buf, "207.000");
    ASSERT_EQ(synctop("report --hta --format json " SINGLE), 0);
    ASSERT_STR_CONTAINS(out_buf, "\"host_wait\":207.000");
}

TEST(report_fail_if_sets_the_exit_status) {
    /* AlexNet: blocked 15.2% of wall time, 52 blocking calls, 21 sync API calls. */
    ASSERT_EQ(synctop("report " ALEXNET " --fail-if 'blocked>5%'"), 1);
    ASSERT_STR_CONTAINS(out_buf, "FAIL blocked>5%: host blocked 15.23%");
    ASSERT_EQ(synctop("report " ALEXNET " --fail-if 'blocked>20%' --fail-if 'stalls>100'"), 0);
    ASSERT_STR_CONTAINS(out_buf, "ok   blocked>20%");
    ASSERT_EQ(synctop("report " ALEXNET " --fail-if 'stalls<100'"), 1);
    ASSERT_EQ(synctop("report " ALEXNET " --fail-if 'sync-api>=21'"), 1);
    ASSERT_EQ(synctop("report " ALEXNET " --fail-if 'sync-api>21'"), 0);
    ASSERT_EQ(synctop("report " ALEXNET " --fail-if 'api:cudaFree>6s'"), 1);
    ASSERT_EQ(synctop("report " ALEXNET " --fail-if 'api:cudaFree>7s'"), 0);
    ASSERT_EQ(synctop("report " ALEXNET " --fail-if 'site:cudaMemcpyAsync>56ms'"), 1);
    ASSERT_EQ(synctop("report " ALEXNET " --fail-if 'site:cudaMemcpyAsync>57ms'"), 0);
    ASSERT_EQ(synctop("report " ALEXNET " --fail-if 'idle>99%'"), 1);
    /* Usage errors are status 2, with a line saying why. */
    ASSERT_EQ(synctop("report " ALEXNET " --fail-if 'blocked>5'"), 2);
    ASSERT_STR_CONTAINS(out_buf, "give blocked a unit");
    ASSERT_EQ(synctop("report " ALEXNET " --fail-if 'nonsense>5'"), 2);
    ASSERT_STR_CONTAINS(out_buf, "unknown metric");
    ASSERT_EQ(synctop("report " ALEXNET " --format yaml"), 2);
}

TEST(report_damaged_inputs_fail_clearly) {
    const char *p = task_path("bad.json");
    FILE *f = fopen(p, "w");
    fputs("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",", f);
    fclose(f);
    char args[2048];
    snprintf(args, sizeof args, "report '%s'", p);
    ASSERT_EQ(synctop(args), 1);
    ASSERT_STR_CONTAINS(out_buf, "synctop report: ");
    ASSERT_STR_CONTAINS(out_buf, "bad.json");
    /* A gzip stream cut in the middle. */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "head -c 5000 %s > '%s'", ALEXNET, task_path("cut.json.gz"));
    ASSERT_EQ(system(cmd), 0);
    snprintf(args, sizeof args, "report '%s'", task_path("cut.json.gz"));
    ASSERT_EQ(synctop(args), 1);
    ASSERT_STR_CONTAINS(out_buf, "cut.json.gz");
    /* Not there, and empty. */
    ASSERT_EQ(synctop("report /nonexistent/trace.json"), 1);
    f = fopen(task_path("empty.json"), "w");
    fclose(f);
    snprintf(args, sizeof args, "report '%s'", task_path("empty.json"));
    ASSERT_EQ(synctop(args), 1);
}

TEST(report_check_parser) {
    rp_check c;
    tp_err err;
    ASSERT_OK(rp_check_parse("blocked>5%", &c, &err));
    ASSERT_EQ(c.unit, 1);
    ASSERT(c.value == 5.0);
    ASSERT_OK(rp_check_parse("site:a>b.py:42>=10ms", &c, &err));
    ASSERT_STR_EQ(c.arg, "a>b.py:42");
    ASSERT(c.value == 1e7);
    ASSERT_OK(rp_check_parse("stalls==0", &c, &err));
    ASSERT(rp_check_parse("stalls>1ms", &c, &err) < 0);
    ASSERT(rp_check_parse("blocked", &c, &err) < 0);
    ASSERT(rp_check_parse("blocked>x", &c, &err) < 0);
    ASSERT(rp_check_parse("blocked>5parsecs", &c, &err) < 0);
}

/* ---- export: Chrome trace JSON, and back through the importer ---- */

#include "store.h"

static st_store *load(const char *path) {
    st_store *s = st_store_new(NULL);
    tp_err err = {{0}};
    if (st_store_load(s, path, NULL, NULL, &err) != 0)
        TASK_FAIL_("%s", err.msg);
    st_store_commit(s);
    return s;
}

static size_t find_lane(const st_store *s, const st_lane_info *want) {
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (li->kind == want->kind && li->device == want->device && li->id == want->id)
            return l;
    }
    return SIZE_MAX;
}

/* The same events per lane, with the same times, names, bytes, kinds and correlations. */
static void same_timeline(const st_store *a, const st_store *b) {
    ASSERT_EQ(st_lane_count(a), st_lane_count(b));
    ASSERT_EQ(st_store_events(a), st_store_events(b));
    for (size_t l = 0; l < st_lane_count(a); l++) {
        const st_lane_info *la = st_lane_get(a, l);
        size_t lb = find_lane(b, la);
        if (lb == SIZE_MAX)
            TASK_FAIL_("lane kind %d device %u id %u is missing after the round trip", la->kind, la->device, la->id);
        size_t na, nb;
        const st_event *ea = st_lane_events(a, l, &na), *eb = st_lane_events(b, lb, &nb);
        ASSERT_EQ(na, nb);
        for (size_t i = 0; i < na; i++) {
            ASSERT_UEQ(ea[i].start, eb[i].start);
            ASSERT_UEQ(ea[i].end, eb[i].end);
            ASSERT_EQ(ea[i].kind, eb[i].kind);
            ASSERT_EQ(ea[i].corr, eb[i].corr);
            ASSERT_STR_EQ(st_str(a, ea[i].name), st_str(b, eb[i].name));
            ASSERT_EQ(ea[i].flags & TP_F_BLOCKING, eb[i].flags & TP_F_BLOCKING);
            if (ea[i].kind == TP_K_MEMCPY || ea[i].kind == TP_K_MEMSET) {
                ASSERT_UEQ(ea[i].value, eb[i].value);
                ASSERT_EQ(ea[i].sub, eb[i].sub);
                ASSERT_EQ(ea[i].mem, eb[i].mem);
            }
            if (ea[i].kind == TP_K_SYNC)
                ASSERT_EQ(ea[i].sub, eb[i].sub);
        }
    }
}

static void round_trip(const char *name) {
    char src[1024], args[4096], cmd[4096];
    snprintf(src, sizeof src, "%s/%s", KINETO_TRACE_DIR, name);
    const char *out = task_path("out.chrome.json");
    snprintf(args, sizeof args, "export '%s' --format chrome -o '%s' --force", src, out);
    ASSERT_EQ(synctop(args), 0);
    snprintf(cmd, sizeof cmd, "python3 -m json.tool '%s' > /dev/null", out);
    ASSERT_EQ(system(cmd), 0);
    st_store *a = load(src), *b = load(out);
    same_timeline(a, b);
    st_store_destroy(&a);
    st_store_destroy(&b);
}

TEST(export_round_trip_alexnet) {
    round_trip("alexnet_a100_sync_heavy.json.gz");
}
TEST(export_round_trip_event_sync) {
    round_trip("event_sync_single_stream.json.gz");
    round_trip("event_sync_multi_stream.json.gz");
}
TEST(export_round_trip_sampled_rank) {
    round_trip("sampled_rank-1.json.gz");
}

TEST(export_marks_blocking_calls_and_names_lanes) {
    char args[4096];
    const char *out = task_path("single.json");
    snprintf(args, sizeof args, "export %s --format chrome -o '%s'", SINGLE, out);
    ASSERT_EQ(synctop(args), 0);
    ASSERT_EQ(synctop(args), 1); /* exists: not replaced without --force */
    ASSERT_STR_CONTAINS(out_buf, "--force");
    FILE *f = fopen(out, "r");
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    ASSERT_STR_CONTAINS(buf, "\"cat\":\"blocking\"");
    ASSERT_STR_CONTAINS(buf, "\"name\":\"blocked: cudaStreamSynchronize\"");
    ASSERT_STR_CONTAINS(buf, "\"blocking\":true,\"call site\":");
    ASSERT_STR_CONTAINS(buf, "\"name\":\"thread_name\"");
    ASSERT_STR_CONTAINS(buf, "\"name\":\"stream 7\"");
    ASSERT_STR_CONTAINS(buf, "\"ph\":\"s\",\"cat\":\"ac2g\"");
    snprintf(args, sizeof args, "export %s --format svg -o '%s' --force", SINGLE, out);
    ASSERT_EQ(synctop(args), 2);
}
