/*
 * `synctop report` end to end (the synctop binary on the real traces): the three formats, --fail-if
 * exit statuses and messages, and clear errors for damaged input. JSON output is checked with
 * python3 -m json.tool and with yajl; report.c's threshold parser is also tested directly.
 */
#include <ctype.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <yajl/yajl_tree.h>

#include "chrome.h"
#include "load.h"
#include "report.h"
#include "loop.h"
#include "task.h"

static char out_buf[1 << 20];
static void fits_80_columns(const char *what);

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

static const char *slurp(const char *path);

/* Writes text to the file name in the test's directory; its path into path (len bytes). */
static void put_text(const char *name, const char *text, char *path, size_t len) {
    snprintf(path, len, "%s", task_path(name));
    FILE *f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    fputs(text, f);
    ASSERT_EQ(fclose(f), 0);
}

#define ALEXNET "'" KINETO_TRACE_DIR "/alexnet_a100_sync_heavy.json.gz'"
#define SINGLE "'" KINETO_TRACE_DIR "/event_sync_single_stream.json.gz'"

TEST(report_text_names_top_stalls_and_rules) {
    ASSERT_EQ(synctop("report " ALEXNET), 0);
    /* the blocking calls' durations in the JSON: cudaStreamSynchronize 0.559 + cudaDeviceSynchronize
     * 0.938 + cudaFree 6553.827 + the pageable cudaMemcpyAsync 56.991 ms, 16 + 5 + 15 + 16 calls */
    ASSERT_STR_CONTAINS(out_buf, "host blocked 6612.315 ms in 52 calls");
    ASSERT_STR_CONTAINS(out_buf, "Top stalls by call site");
    /* the 3 cudaFree calls inside cuDNN's convolution (kineto_expected.py --sites), named by their ops,
     * 6533.728 ms in all; the longest, the trace's longest cudaFree (its "dur", in us):
     *   python3 -c 'import gzip,json; ev=json.load(gzip.open(F))["traceEvents"];
     *     print(max(e["dur"] for e in ev if e.get("cat")=="cuda_runtime" and e["name"]=="cudaFree"))'
     * 6008692; the share of the wall, 6533.728 ms over the 43425.365 ms from the first to the last
     * event's end of the kinds imported (kernel, gpu_memcpy, gpu_memset, cuda_sync, cuda_runtime,
     * user_annotation: 43458.523 ms with the operators, 15.0% either way); the GPU idle they cost:
     * cudaFree's 6533.733 ms (kineto_expected.py --idle) less the 0.005 ms of the one at
     * aten::linear > aten::addmm */
    ASSERT_STR_CONTAINS(out_buf, "6533.728      3   6008.692   15.0     6533.728  cudaFree (alloc)\n"
                                 "      at aten::conv2d > aten::convolution > aten::_convolution > aten::cudnn_");
    ASSERT_STR_CONTAINS(out_buf, "(pageable-memcpy)\n      at aten::to > aten::_to_copy > aten::copy_\n");
    ASSERT_STR_CONTAINS(out_buf, "GPU 0 NVIDIA A100");
    ASSERT_STR_CONTAINS(out_buf, "[sync-api / cuda_api_sync]");
    ASSERT_STR_CONTAINS(out_buf, "16 calls, 56.991 ms");
    ASSERT_STR_CONTAINS(out_buf, "[gpu-gaps / gpu_gaps]");
}

/* What to change, ranked by the GPU idle each site caused (kineto_expected.py --idle: cudaFree's,
 * less its 0.005 ms at aten::linear; cudaDeviceSynchronize's) and the host's own share in a range
 * (its bubble_costs): cudaFree's first, the host's work in the warm-up's forward pass (3149.091 ms,
 * 2637.705 of it in CUDA calls that did not wait, the longest a cudaMalloc of 764.486 ms: its "dur"),
 * four more ranges, then the device synchronize. */
TEST(report_says_what_to_change_by_gpu_time) {
    ASSERT_EQ(synctop("report " ALEXNET), 0);
    const char *adv = strstr(out_buf, "What to change, by the GPU time it gives back\n");
    ASSERT_NOT_NULL(adv);
    const char *one = strstr(adv, "  1. 6533.728 ms of GPU idle to gain (6533.728 ms blocked) at aten::conv2d >");
    const char *warm = strstr(adv, "  2. 3149.091 ms of GPU idle to gain (the host busy, not waiting in CUDA) in\n"
                                   "     [param|pytorch.model.alex_net|0|0|0|warmup|forward]\n"
                                   "     why: slow CUDA calls that do not wait for the GPU: the GPU had nothing\n"
                                   "       queued while the host was in this range, 84% of it in CUDA calls that did\n"
                                   "       not wait; the longest: cudaMalloc, 764.486 ms\n");
    const char *two = strstr(adv, "  7. 1.289 ms of GPU idle to gain (0.938 ms blocked)");
    ASSERT_NOT_NULL(one);
    ASSERT_NOT_NULL(warm);
    ASSERT_NOT_NULL(two);
    ASSERT(one < warm);
    ASSERT(warm < two);
    ASSERT_STR_CONTAINS(adv, "why: cudaFree / cudaMalloc in the loop: cudaFree blocked 3 times");
    /* the tenth: under its two-digit number, one column further in */
    ASSERT_STR_CONTAINS(adv, "  10. 0.000 ms of GPU idle to gain (56.991 ms blocked) at aten::to >\n"
                             "      aten::_to_copy > aten::copy_\n"
                             "      why: an \"async\" copy through pageable host memory: cudaMemcpyAsync inside\n"
                             "        aten::to blocked 16 times");
    fits_80_columns("report");
}

/* The GPU idle each wait cost, per API, the host's own share per range, and per step the host's share
 * and its range, on every Kineto trace of the samples, as kineto_expected.py counts them from the
 * JSON alone. */
TEST(report_gpu_idle_of_waits_and_host_ranges_matches_an_independent_count) {
    static const char *const traces[] = {"alexnet_a100_sync_heavy", "resnet_2080ti_two_threads", "sampled_rank-0",
                                         "sampled_rank-1", "event_sync_single_stream", "event_sync_multi_stream",
                                         "qwen_h100_with_stack", "qwen_mi300_rocm_with_stack",
                                         "resnet50_v100_legacy_2021"};
    for (size_t i = 0; i < sizeof traces / sizeof traces[0]; i++) {
        char args[2048], cmd[4096];
        snprintf(args, sizeof args, "report --steps --format json -o '%s' '%s/%s.json.gz'", task_path("r.json"),
                 KINETO_TRACE_DIR, traces[i]);
        ASSERT_EQ(synctop(args), 0);
        snprintf(cmd, sizeof cmd, "python3 '%s' --check-idle '%s/%s.json.gz' '%s' > '%s' 2>&1", KINETO_EXPECTED,
                 KINETO_TRACE_DIR, traces[i], task_path("r.json"), task_path("check.txt"));
        int rc = system(cmd);
        if (rc != 0)
            TASK_FAIL_("%s: %s", traces[i], slurp(task_path("check.txt")));
    }
}

/* For each collective, where the last rank's host kept its GPU waiting meanwhile, as
 * kineto_expected.py counts it from the two ranks' JSON alone. */
TEST(report_ranks_straggler_host_share_matches_an_independent_count) {
    char args[4096], cmd[8192];
    snprintf(args, sizeof args, "report --ranks --format json -o '%s' '%s/sampled_rank-0.json.gz' '%s/sampled_rank-1.json.gz'",
             task_path("rk.json"), KINETO_TRACE_DIR, KINETO_TRACE_DIR);
    ASSERT_EQ(synctop(args), 0);
    snprintf(cmd, sizeof cmd, "python3 '%s' --check-ranks '%s' '%s/sampled_rank-0.json.gz' '%s/sampled_rank-1.json.gz' > '%s' 2>&1",
             KINETO_EXPECTED, task_path("rk.json"), KINETO_TRACE_DIR, KINETO_TRACE_DIR, task_path("check.txt"));
    if (system(cmd) != 0)
        TASK_FAIL_("%s", slurp(task_path("check.txt")));
    ASSERT_STR_CONTAINS(slurp(task_path("check.txt")), "10 collectives");
}

/* Two ranks traced over different times: each GPU's busy and idle over its own trace's span
 * (rank 0's is 1230.289 ms, the two together 1238.785 ms), as kineto_expected.py counts them from
 * the JSON alone, and the text says so. */
TEST(report_of_several_traces_counts_each_gpu_over_its_own_trace) {
    char args[4096], cmd[8192];
    snprintf(args, sizeof args, "report --format json -o '%s' '%s/sampled_rank-0.json.gz' '%s/sampled_rank-1.json.gz'",
             task_path("dv.json"), KINETO_TRACE_DIR, KINETO_TRACE_DIR);
    ASSERT_EQ(synctop(args), 0);
    snprintf(cmd, sizeof cmd, "python3 '%s' --check-devices '%s' '%s/sampled_rank-0.json.gz' '%s/sampled_rank-1.json.gz' > '%s' 2>&1",
             KINETO_EXPECTED, task_path("dv.json"), KINETO_TRACE_DIR, KINETO_TRACE_DIR, task_path("check.txt"));
    if (system(cmd) != 0)
        TASK_FAIL_("%s", slurp(task_path("check.txt")));
    ASSERT_STR_CONTAINS(slurp(task_path("check.txt")), "2 GPUs");
    snprintf(args, sizeof args, "report '%s/sampled_rank-0.json.gz' '%s/sampled_rank-1.json.gz'", KINETO_TRACE_DIR,
             KINETO_TRACE_DIR);
    ASSERT_EQ(synctop(args), 0);
    ASSERT_STR_CONTAINS(out_buf, "  rank 0 GPU 0                      547.656     682.633   44.5            1.267\n");
    ASSERT_STR_CONTAINS(out_buf, "  Each GPU's busy and idle time is counted over the time its own process was\n"
                                 "  traced (between 1230.289 and 1238.593 ms long), not the 1238.785 ms all the\n");
}

/* Thresholds on the host's own share: the ResNet loop's DataLoader range holds 6659.997 ms of it and
 * the GPU 7831.075 ms in all, 48.43% of its 16169.170 ms span (kineto_expected.py's bubble_costs). */
TEST(report_fail_if_on_the_hosts_own_share_of_gpu_idle) {
    static const struct {
        const char *check;
        int status;
    } cases[] = {
        {"range:DataLoader>6659ms", 1}, {"range:DataLoader>6660ms", 0}, {"range:__next__>=6659.997ms", 1},
        {"host-idle>7831ms", 1},        {"host-idle>7832ms", 0},        {"host-idle>48.4%", 1},
        {"host-idle>48.5%", 0},         {"range:NoSuchRange>0ms", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[2048];
        snprintf(args, sizeof args, "report '%s/resnet_2080ti_two_threads.json.gz' --fail-if '%s'", KINETO_TRACE_DIR,
                 cases[i].check);
        int rc = synctop(args);
        if (rc != cases[i].status)
            TASK_FAIL_("--fail-if '%s': exit %d, want %d: %s", cases[i].check, rc, cases[i].status, out_buf);
    }
    ASSERT_EQ(synctop("report --fail-if 'range:>1ms' x.json"), 2); /* a range needs some text */
    /* a name that matches nothing (mistyped?) holds, and says so */
    char args[2048];
    snprintf(args, sizeof args, "report '%s/resnet_2080ti_two_threads.json.gz' --fail-if 'range:NoSuchRange>0ms' "
             "--fail-if 'api:cudaBogus>0ms' --fail-if 'api:cudaFree>0ms'", KINETO_TRACE_DIR);
    ASSERT_EQ(synctop(args), 1);
    ASSERT_STR_CONTAINS(out_buf, "range:NoSuchRange>0ms: GPU idle the host caused in ranges matching 'NoSuchRange' "
                                 "0.000 ms; threshold > 0.000 ms (no range the host kept the GPU waiting in matches it)");
    ASSERT_STR_CONTAINS(out_buf, "(no call of that name blocked in these sources)");
    /* the trace's 8 cudaFree calls last 1210.637 ms (kineto_expected.py's figures) */
    ASSERT_STR_CONTAINS(out_buf, "FAIL api:cudaFree>0ms: blocked in cudaFree 1210.637 ms; threshold > 0.000 ms\n");
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
    /* the four sites kineto_expected.py --sites finds, and the calls outside any operator by API:
     * cudaFree (11) and cudaDeviceSynchronize (5) */
    ASSERT_EQ(sites->u.array.len, 6);
    const char *ap[] = {"api", NULL}, *cp[] = {"count", NULL}, *wp[] = {"where", NULL}, *fp[] = {"frames", NULL};
    const char *kp[] = {"kind", NULL}, *fnp[] = {"function", NULL};
    yajl_val top = sites->u.array.values[0];
    ASSERT_STR_EQ(YAJL_GET_STRING(yajl_tree_get(top, ap, yajl_t_string)), "cudaFree");
    ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(top, cp, yajl_t_number)), 3);
    ASSERT_STR_EQ(YAJL_GET_STRING(yajl_tree_get(top, wp, yajl_t_string)),
                  "aten::conv2d > aten::convolution > aten::_convolution > aten::cudnn_convolution");
    yajl_val frames = yajl_tree_get(top, fp, yajl_t_array);
    ASSERT_NOT_NULL(frames);
    ASSERT_EQ(frames->u.array.len, 4);
    ASSERT_STR_EQ(YAJL_GET_STRING(yajl_tree_get(frames->u.array.values[0], kp, yajl_t_string)), "op");
    ASSERT_STR_EQ(YAJL_GET_STRING(yajl_tree_get(frames->u.array.values[0], fnp, yajl_t_string)),
                  "aten::cudnn_convolution");
    yajl_tree_free(v);
}

TEST(report_markdown_has_tables) {
    ASSERT_EQ(synctop("report --format markdown " SINGLE), 0);
    ASSERT_STR_CONTAINS(out_buf, "# synctop report:");
    ASSERT_STR_CONTAINS(out_buf, "| blocked ms | calls |");
    ASSERT_STR_CONTAINS(out_buf, "|---:|");
    ASSERT_STR_CONTAINS(out_buf, "### synchronization API calls that blocked the host (`cuda_api_sync`)");
}

/* "What to change" names a site by its file, line and function: markdown whole, text without the
 * directories when long, never cut inside the file's name. The site is the trace's Python frame
 * "transformers/modeling_attn_mask_utils.py(243): _ignore_causal_mask_sdpa". */
TEST(what_to_change_keeps_the_sites_file_and_line) {
    ASSERT_EQ(synctop("report --format markdown '" KINETO_TRACE_DIR "/qwen_h100_with_stack.json.gz'"), 0);
    const char *advice = strstr(out_buf, "## What to change");
    ASSERT_NOT_NULL(advice);
    /* markdown escapes an underscore that could mark emphasis, not one inside a word */
    ASSERT_STR_CONTAINS(advice, "at transformers/modeling_attn_mask_utils.py:243 \\_ignore_causal_mask_sdpa");
    ASSERT_EQ(synctop("report '" KINETO_TRACE_DIR "/qwen_h100_with_stack.json.gz'"), 0);
    advice = strstr(out_buf, "What to change");
    ASSERT_NOT_NULL(advice);
    ASSERT_STR_CONTAINS(advice, ".../modeling_attn_mask_utils.py:243 _ignore_causal_mask_sdpa");
}

/* Two call sites that read the same (profile.py:34 run_torch_profiler, both in cudaDeviceSynchronize)
 * are told apart by the frame where their Python stacks part: the trace's own frames
 * "torch/cuda/__init__.py(975): synchronize" and "torch/profiler/profiler.py(811): step". Every
 * row of the markdown table then names a different call site. */
TEST(sites_that_read_the_same_show_the_frame_that_tells_them_apart) {
    ASSERT_EQ(synctop("report --format markdown '" KINETO_TRACE_DIR "/qwen_h100_with_stack.json.gz'"), 0);
    ASSERT_STR_CONTAINS(out_buf, "profile.py:34 run_torch_profiler (via torch/cuda/\\_\\_init\\_\\_.py:975 synchronize) |");
    ASSERT_STR_CONTAINS(out_buf, "profile.py:34 run_torch_profiler (via torch/profiler/profiler.py:811 step) |");
    const char *table = strstr(out_buf, "## Top stalls by call site");
    ASSERT_NOT_NULL(table);
    char cells[32][512];
    size_t n = 0;
    for (const char *l = strchr(table, '\n'); l != NULL && n < 32; l = strchr(l + 1, '\n')) {
        if (l[1] != '|')
            continue;
        const char *end = strchr(l + 1, '\n');
        const char *last = end - 1; /* "| call site |": the cell before the last bar */
        while (last > l + 1 && *last != '|')
            last--;
        const char *first = last - 1;
        while (first > l + 1 && *first != '|')
            first--;
        snprintf(cells[n++], sizeof cells[0], "%.*s", (int)(last - first), first);
    }
    ASSERT_GT(n, 3);
    for (size_t i = 2; i < n; i++) /* past the header and its rule */
        for (size_t j = i + 1; j < n; j++)
            if (strcmp(cells[i], cells[j]) == 0)
                TASK_FAIL_("two rows name the same call site: %s", cells[i]);
}

/* A report below the line that names its source: from its "span" line on. The source's line wraps
 * at 80 columns when the path is long (a checkout deeper than /work/main), so it is not always one
 * line. */
static const char *below_source(const char *report) {
    const char *at = strstr(report, "\nspan ");
    ASSERT_NOT_NULL(at);
    return at;
}

/* "-" reads the trace from standard input: a file redirected there and a pipe give the report
 * the file's path gives, but for the line that names the source. */
TEST(report_reads_standard_input) {
    ASSERT_EQ(synctop("report " ALEXNET), 0);
    const char *by_path = below_source(out_buf);
    ASSERT_NOT_NULL(by_path);
    char *want = strdup(by_path);
    ASSERT_STR_CONTAINS(want, "host blocked 6612.315 ms in 52 calls");
    ASSERT_EQ(synctop("report - < " ALEXNET), 0);
    ASSERT_STR_CONTAINS(out_buf, "synctop report: -\n");
    ASSERT_STR_EQ(below_source(out_buf), want);
    ASSERT_EQ(synctop("report - < /dev/stdin < " ALEXNET), 0);
    ASSERT_STR_EQ(below_source(out_buf), want);
    ASSERT_EQ(synctop("report - < /dev/null"), 1);
    ASSERT_STR_CONTAINS(out_buf, "/dev/stdin");
    free(want);
}

/* Whether python3 finds a fact in a file: opened as `open` says (its value in a variable), then py
 * sets ok. The figures the tests below check come from the files this way, not from synctop. */
static int py_holds(const char *open, const char *path, const char *py) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "python3 -c \"import gzip, json, sqlite3, sys; %s; %s; sys.exit(0 if ok else 1)\" '%s'",
             open, py, path);
    return system(cmd) == 0;
}

/* In an Nsight export: py is given the connection c. */
static int sql_holds(const char *db, const char *py) { return py_holds("c = sqlite3.connect(sys.argv[1])", db, py); }

/* In a profiler trace (.json.gz): py is given its document d. */
static int json_holds(const char *path, const char *py) {
    return py_holds("d = json.load(gzip.open(sys.argv[1]))", path, py);
}

/* Calls without a call site say how to get one, by where they came from: an Nsight export whose
 * CUDA runtime rows carry no callchainId (cloverleaf: 3048 rows, 0 with one; saxpy_mpi: 38 of 95,
 * every blocking call among them, by SQL on the files), a profiler trace without stacks (resnet). */
TEST(report_says_how_to_record_call_sites_for_the_calls_without_one) {
    ASSERT_EQ(synctop("report '" NSYS_TRACE_DIR "/cloverleaf_a100_perlmutter.sqlite'"), 0);
    ASSERT_STR_CONTAINS(out_buf, "Nsight Systems export holds no backtrace of them: record with `nsys profile\n"
                                 "   --cudabacktrace=all --python-backtrace=cuda ...`)");
    ASSERT(strstr(out_buf, "with_stack=True") == NULL);
    ASSERT_EQ(synctop("report '" NSYS_TRACE_DIR "/saxpy_mpi_a100_rank0.sqlite'"), 0);
    ASSERT(strstr(out_buf, "no call site was taken") == NULL);
    ASSERT_EQ(synctop("report '" KINETO_TRACE_DIR "/resnet_2080ti_two_threads.json.gz'"), 0);
    ASSERT_STR_CONTAINS(out_buf, "(with_stack=True records the Python lines))");
    ASSERT(strstr(out_buf, "cudabacktrace") == NULL);
}

/* Advice names PyTorch's ways only where the trace shows PyTorch: the C MPI program's export holds
 * no string that names torch or an ATen operator (asked of the file's StringIds by SQL here), and
 * its advice names none; the AlexNet profiler trace is PyTorch's, and its cudaFree advice names
 * the caching allocator. */
TEST(report_advice_names_a_framework_only_where_the_trace_shows_it) {
    ASSERT(sql_holds(NSYS_TRACE_DIR "/saxpy_mpi_a100_rank0.sqlite",
                     "ok = c.execute('select count(*) from StringIds where value like ? or value like ?', "
                     "('%torch%', 'aten::%')).fetchone()[0] == 0"));
    ASSERT_EQ(synctop("report '" NSYS_TRACE_DIR "/saxpy_mpi_a100_rank0.sqlite'"), 0);
    ASSERT_STR_CONTAINS(out_buf, "change: Reuse buffers: allocate once, outside the loop");
    ASSERT_STR_CONTAINS(out_buf, "launch overhead shrinks with CUDA\n       graphs.\n");
    ASSERT(strstr(out_buf, "torch") == NULL);
    ASSERT(strstr(out_buf, "PyTorch") == NULL);
    ASSERT_EQ(synctop("report " ALEXNET), 0);
    ASSERT_STR_CONTAINS(out_buf, "torch.cuda.empty_cache() in the loop");
}

/* A range that repeats regularly but is no loop is not taken for steps: in the nvFuser export,
 * isResharding opens 2896 times, its starts a median of under 0.1 ms apart (asked of the file by
 * SQL here), and the GPU does nothing between most of them; asked for by name, its ranges are
 * steps all the same. */
TEST(report_steps_refuse_a_heartbeat_that_is_no_loop) {
    ASSERT(sql_holds(NSYS_TRACE_DIR "/nvfuser_h200_benchmark.sqlite",
                     "t = [r[0] for r in c.execute('select start from NVTX_EVENTS e left join StringIds s on "
                     "s.id = e.textId where coalesce(e.text, s.value) = ? order by 1', ('isResharding',))]; "
                     "g = sorted(b - a for a, b in zip(t, t[1:])); ok = len(t) == 2896 and g[len(g) // 2] < 100000"));
    ASSERT_EQ(synctop("report --steps '" NSYS_TRACE_DIR "/nvfuser_h200_benchmark.sqlite'"), 0);
    ASSERT_STR_CONTAINS(out_buf, "no steps found:");
    ASSERT(strstr(out_buf, "by heartbeat") == NULL);
    ASSERT_EQ(synctop("report --steps --step isResharding '" NSYS_TRACE_DIR "/nvfuser_h200_benchmark.sqlite'"), 0);
    ASSERT_STR_CONTAINS(out_buf, "2896 steps by range (isResharding)");
}

/* Too few ProfilerStep ranges for steps are counted in the answer: rank 0 of the sampled job has two
 * (ProfilerStep#551 and #552, asked of the JSON here), and no other range or wait repeats as a loop. */
TEST(report_steps_say_how_many_profiler_steps_were_too_few) {
    char args[2048];
    ASSERT(json_holds(KINETO_TRACE_DIR "/sampled_rank-0.json.gz",
                      "n = [e['name'] for e in d['traceEvents'] if str(e.get('name', '')).startswith('ProfilerStep#')]; "
                      "ok = sorted(n) == ['ProfilerStep#551', 'ProfilerStep#552']"));
    snprintf(args, sizeof args, "report --steps '%s/sampled_rank-0.json.gz'", KINETO_TRACE_DIR);
    ASSERT_EQ(synctop(args), 0);
    ASSERT_STR_CONTAINS(out_buf, "no steps found: 2 ProfilerStep ranges, fewer than the three steps need;");
    snprintf(args, sizeof args, "report --steps '%s/event_sync_single_stream.json.gz'", KINETO_TRACE_DIR);
    ASSERT_EQ(synctop(args), 0);
    ASSERT_STR_CONTAINS(out_buf, "no steps found: 1 ProfilerStep range, fewer than the three steps need;");
}

/* A numbered range met alone keeps its name: the single-stream trace has one ProfilerStep range
 * (#100, asked of the JSON here), which the host's share is named after as it is, not as
 * "ProfilerStep#N ... (each of them)". */
TEST(report_names_a_lone_numbered_range_as_it_is) {
    ASSERT(json_holds(KINETO_TRACE_DIR "/event_sync_single_stream.json.gz",
                      "ok = [e['name'] for e in d['traceEvents'] if str(e.get('name', '')).startswith('ProfilerStep#')] "
                      "== ['ProfilerStep#100']"));
    ASSERT_EQ(synctop("report " SINGLE), 0);
    ASSERT_STR_CONTAINS(out_buf, "(the host busy, not waiting in CUDA) in\n     ProfilerStep#100\n");
    ASSERT(strstr(out_buf, "ProfilerStep#N") == NULL);
    ASSERT(strstr(out_buf, "(each of them)") == NULL);
}

/* A low-utilisation window names a call site only when its waits cost at least half of the window's
 * idle. ResNet's windows idle mostly while the host waits for the DataLoader: in the window at
 * +6293.294 ms, 329.374 ms idle, every blocking call of the trace that overlaps it adds up to at most
 * 23.384 ms (asked of the JSON here), so none is named. AlexNet's one window holds the 6008.692 ms
 * cudaFree, more than half of its 12854.103 ms idle: named. */
TEST(report_low_util_windows_name_a_site_only_when_it_cost_most_of_the_idle) {
    char args[2048];
    ASSERT(json_holds(KINETO_TRACE_DIR "/resnet_2080ti_two_threads.json.gz",
                      "ev = d['traceEvents']; t0 = min(e['ts'] for e in ev if e.get('cat') in ('kernel', 'gpu_memcpy', 'cuda_sync', "
                      "'gpu_memset', 'cuda_runtime', 'cuda_driver', 'user_annotation') and 'ts' in e); "
                      "lo, hi = t0 + 6293294, t0 + 6777391; "
                      "w = sum(min(e['ts'] + e['dur'], hi) - max(e['ts'], lo) for e in ev if e.get('cat') == "
                      "'cuda_runtime' and e['name'] in ('cudaMemcpyAsync', 'cudaStreamSynchronize', 'cudaFree', "
                      "'cudaDeviceSynchronize') and e['ts'] < hi and e['ts'] + e['dur'] > lo); ok = 0 < w < 329374 / 2"));
    snprintf(args, sizeof args, "report '%s/resnet_2080ti_two_threads.json.gz'", KINETO_TRACE_DIR);
    ASSERT_EQ(synctop(args), 0);
    ASSERT_STR_CONTAINS(out_buf, "+6293.294..+6777.391 ms:");
    ASSERT(strstr(out_buf, "mostly after") == NULL);
    ASSERT_EQ(synctop("report " ALEXNET), 0);
    ASSERT_STR_CONTAINS(out_buf, "12854.103 ms idle in them\n      +30429.352..+43349.596 ms: 0.5% busy, mostly after\n"
                                 "        aten::conv2d > aten::convolution");
}

/* Files of unrelated times are put each at its own start, and the report says so; files that
 * overlap (two ranks of one job) are left as recorded. The first events of the two traces are
 * 11,581,983 s apart by their own JSON (min ts of each, read here by python3), so as recorded the
 * span covers that; put at their starts, it is the longer file's span alone. */
TEST(report_puts_files_of_unrelated_times_at_their_own_starts) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import gzip,json,sys; t=[min(e['ts'] for e in json.load(gzip.open(f))['traceEvents'] "
             "if 'ts' in e and e.get('ph')=='X') for f in sys.argv[1:]]; sys.exit(0 if 11581982e6 < t[1]-t[0] < "
             "11581984e6 else 1)\" %s %s",
             ALEXNET, SINGLE);
    ASSERT_EQ(system(cmd), 0);
    ASSERT_EQ(synctop("report " ALEXNET), 0);
    const char *one = strstr(out_buf, "\nspan ");
    ASSERT_NOT_NULL(one);
    char alone[64];
    snprintf(alone, sizeof alone, "%.*s", (int)strcspn(one + 1, ","), one + 1);
    ASSERT_EQ(synctop("report " ALEXNET " " SINGLE), 0);
    ASSERT_STR_CONTAINS(out_buf, "the sources do not overlap in time and share no known clock: each put at its own "
                                 "start");
    ASSERT_STR_CONTAINS(out_buf, alone);
    ASSERT_EQ(synctop("report --align clock " ALEXNET " " SINGLE), 0);
    ASSERT(strstr(out_buf, "each put at its own start") == NULL);
    ASSERT_STR_CONTAINS(out_buf, "\nspan 115819829");
    /* two ranks of one job overlap: as recorded */
    ASSERT_EQ(synctop("report '" KINETO_TRACE_DIR "/sampled_rank-0.json.gz' '" KINETO_TRACE_DIR
                      "/sampled_rank-1.json.gz'"),
              0);
    ASSERT(strstr(out_buf, "each put at its own start") == NULL);
    ASSERT_EQ(synctop("report --align sideways " ALEXNET), 2);
    ASSERT_STR_CONTAINS(out_buf, "unknown --align 'sideways' (auto, start, clock)");
}

/* A sync row's deviceId says 0 in every row of a real two-process torchrun export (nsys 2026.2),
 * also for process 145, whose 2017 kernels all ran on device 1 in context 2, as do its 188 syncs'
 * contexts (asked of the file by SQL here). Its syncs belong to GPU 1: no GPU 0 is shown for it. */
TEST(report_puts_an_nsys_sync_on_its_contexts_device) {
    ASSERT(sql_holds(NSYS_TRACE_DIR "/torchrun_2proc_2gpu_h100.sqlite",
                     "q = lambda t: c.execute('select deviceId, contextId, count(*) from ' + t + ' where "
                     "(globalPid >> 24) & 16777215 = 145 group by 1, 2').fetchall(); "
                     "ok = q('CUPTI_ACTIVITY_KIND_KERNEL') == [(1, 2, 2017)] and "
                     "q('CUPTI_ACTIVITY_KIND_SYNCHRONIZATION') == [(0, 2, 188)]"));
    ASSERT_EQ(synctop("info '" NSYS_TRACE_DIR "/torchrun_2proc_2gpu_h100.sqlite'"), 0);
    ASSERT_STR_CONTAINS(out_buf, "syncs: 188 put on the device their context's work ran on");
    ASSERT_EQ(synctop("report '" NSYS_TRACE_DIR "/torchrun_2proc_2gpu_h100.sqlite'"), 0);
    ASSERT_STR_CONTAINS(out_buf, "  pid 145 GPU 1 ");
    ASSERT(strstr(out_buf, "pid 145 GPU 0") == NULL);
}

/* Processes without a rank are named by pid, and the JSON lists each one's pid and command: the
 * nvFuser export's CUDA calls come from pids 50556 (pytest) and 50922 (python3), by SQL on the file. */
TEST(report_names_processes_by_pid) {
    static const char db[] = NSYS_TRACE_DIR "/nvfuser_h200_benchmark.sqlite";
    ASSERT(sql_holds(db, "pids = sorted(r[0] for r in c.execute('select distinct (globalTid >> 24) & 16777215 from "
                         "CUPTI_ACTIVITY_KIND_RUNTIME')); names = dict(c.execute('select pid, name from PROCESSES')."
                         "fetchall()); ok = pids == [50556, 50922] and names[50556] == 'pytest' and names[50922] == "
                         "'python3'"));
    ASSERT_EQ(synctop("report '" NSYS_TRACE_DIR "/nvfuser_h200_benchmark.sqlite'"), 0);
    ASSERT_STR_CONTAINS(out_buf, "cudaFree (alloc) [pid 50556]\n");
    ASSERT(strstr(out_buf, "[process ") == NULL);
    ASSERT_EQ(synctop("report --format json '" NSYS_TRACE_DIR "/nvfuser_h200_benchmark.sqlite'"), 0);
    ASSERT_STR_CONTAINS(out_buf, "\"processes\":[{\"producer\":0,\"pid\":50556,\"rank\":-1,\"world\":-1,\"host\":\"\","
                                 "\"cmdline\":\"pytest\"},{\"producer\":1,\"pid\":50922,");
    ASSERT_STR_CONTAINS(out_buf, "\"cmdline\":\"python3\"}]");
}

/* The torchrun export's two processes each run 33 ncclDevKernel_SendRecv, on streams they number
 * 7 and 15; paired in order, the 31st (from 0) is the one whose starts lie furthest apart, process
 * 145's the later (asked of the file by SQL here). The report matches the 33 across the processes
 * and names that one first, with its process as the last. */
TEST(report_ranks_match_collectives_across_processes_of_an_nsys_export) {
    ASSERT(sql_holds(NSYS_TRACE_DIR "/torchrun_2proc_2gpu_h100.sqlite",
                     "t = {p: [r[0] for r in c.execute('select k.start from CUPTI_ACTIVITY_KIND_KERNEL k join "
                     "StringIds s on s.id = k.shortName where s.value = ? and (k.globalPid >> 24) & 16777215 = ? "
                     "order by 1', ('ncclDevKernel_SendRecv', p))] for p in (144, 145)}; "
                     "d = max((abs(a - b), i, 145 if b > a else 144) for i, (a, b) in enumerate(zip(t[144], t[145]))); "
                     "ok = len(t[144]) == 33 and len(t[145]) == 33 and d[1:] == (31, 145)"));
    ASSERT_EQ(synctop("report --ranks '" NSYS_TRACE_DIR "/torchrun_2proc_2gpu_h100.sqlite'"), 0);
    ASSERT_STR_CONTAINS(out_buf, "  33 collectives matched;");
    ASSERT_STR_CONTAINS(out_buf, "    ncclDevKernel_SendRecv#31 on stream 7: pid 145 last,");
    ASSERT_STR_CONTAINS(out_buf, "\n  pid 145       267.276"); /* the ranks table names the process too */
    ASSERT(strstr(out_buf, "no collectives") == NULL);
}

/* Nsight Systems' own report files are not read, but named with the command that makes one that
 * is. */
TEST(report_names_the_export_an_nsight_report_needs) {
    static const char *const names[] = {"a.nsys-rep", "b.QDREP", "c.qdstrm"};
    static const char *const says[] = {("an Nsight Systems report, which synctop reads once exported to SQLite: "
                                        "nsys export --type sqlite "),
                                       "an Nsight Systems report", "never turned into a report"};
    for (size_t i = 0; i < 3; i++) {
        const char *path = task_path(names[i]);
        FILE *f = fopen(path, "wb");
        ASSERT_NOT_NULL(f);
        fputs("QDSTRM\x01\x02 not a format synctop reads", f);
        fclose(f);
        char args[1024];
        snprintf(args, sizeof args, "report '%s'", path);
        ASSERT_EQ(synctop(args), 1);
        ASSERT_STR_CONTAINS(out_buf, says[i]);
        snprintf(args, sizeof args, "info '%s'", path);
        ASSERT_EQ(synctop(args), 1);
        ASSERT_STR_CONTAINS(out_buf, says[i]);
    }
}

TEST(report_hta_output) {
    ASSERT_EQ(synctop("report --hta " SINGLE), 0);
    ASSERT_STR_CONTAINS(out_buf, "HTA idle time breakdown");
    ASSERT_STR_CONTAINS(out_buf, "212.000");
    ASSERT_STR_CONTAINS(out_buf, "HTA idle interval statistics");
    ASSERT_STR_CONTAINS(out_buf, "     0          7 host_wait        4       53.00       32.27       30.00\n");
    ASSERT_EQ(synctop("report --hta --format json " SINGLE), 0);
    ASSERT_STR_CONTAINS(out_buf, "\"host_wait\":212.000");
    ASSERT_STR_CONTAINS(out_buf, "\"interval_stats\":{\"host_wait\":{\"count\":4,\"mean\":53.00,\"std\":32.27,\"min\":30.00,"
                                 "\"25%\":33.00,\"50%\":41.00,\"75%\":61.00,\"max\":100.00}");
    ASSERT_STR_CONTAINS(out_buf, "\"other\":{\"count\":0,\"mean\":null,");
    ASSERT_EQ(synctop("report --hta --format markdown " SINGLE), 0);
    ASSERT_STR_CONTAINS(out_buf, "| 0 | 7 | host_wait | 4 | 53.00 | 32.27 | 30.00 | 33.00 | 41.00 | 61.00 | 100.00 |");
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

/* --gap-us and --gpu-gap-ms take 0 as a threshold of their own: every gap counts. Three kernels on
 * one stream, 5 us then 40 us apart: 2 bubbles at 0, 1 at the default 20 us, none at 50 us; the
 * gpu_gaps rule, which looks at the bubbles, finds the 40 us one at 0 ms, none at its 500 ms default. */
TEST(report_gap_thresholds_of_zero_count_every_gap) {
    const char *p = task_path("gaps.json");
    FILE *f = fopen(p, "w");
    ASSERT_NOT_NULL(f);
    fputs("{\"traceEvents\": [\n", f);
    static const int ts[] = {1000, 1015, 1065};
    for (int i = 0; i < 3; i++)
        fprintf(f,
                "%s{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k%d\", \"pid\": 0, \"tid\": 7, \"ts\": %d,"
                " \"dur\": 10, \"args\": {\"device\": 0, \"stream\": 7, \"correlation\": %d}}\n",
                i ? "," : "", i, ts[i], i + 1);
    fputs("]}\n", f);
    fclose(f);
    char args[2048];
    snprintf(args, sizeof args, "report '%s' --gap-us 0 --fail-if 'bubbles==2'", p);
    ASSERT_EQ(synctop(args), 1);
    snprintf(args, sizeof args, "report '%s' --fail-if 'bubbles==1'", p);
    ASSERT_EQ(synctop(args), 1);
    snprintf(args, sizeof args, "report '%s' --gap-us 50 --fail-if 'bubbles==0'", p);
    ASSERT_EQ(synctop(args), 1);
    snprintf(args, sizeof args, "report '%s' --gpu-gap-ms 0 --fail-if 'gpu-gaps==1'", p);
    ASSERT_EQ(synctop(args), 1);
    snprintf(args, sizeof args, "report '%s' --fail-if 'gpu-gaps==0'", p);
    ASSERT_EQ(synctop(args), 1);
    /* --top lists at least one site: 0 is refused, not read as the default */
    snprintf(args, sizeof args, "report '%s' --top 0", p);
    ASSERT_EQ(synctop(args), 2);
    ASSERT_STR_CONTAINS(out_buf, "--top");
}

/* --step NAME wins over the profiler's ProfilerStep#N ranges: four 10 ms ProfilerSteps, each holding
 * a 3 ms range "fwd" and a 2 ms kernel. Without --step the steps are the ProfilerSteps; with
 * --step fwd they are the fwd ranges; a name no range has falls back to the ProfilerSteps, and says
 * so. */
TEST(report_step_range_named_by_the_user_comes_before_profiler_steps) {
    const char *p = task_path("steps.json");
    FILE *f = fopen(p, "w");
    ASSERT_NOT_NULL(f);
    fputs("{\"traceEvents\": [\n", f);
    for (int i = 0; i < 4; i++) {
        int t = 1000 + i * 10000;
        fprintf(f,
                "%s{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#%d\", \"pid\": 1, "
                "\"tid\": 1, \"ts\": %d, \"dur\": 10000, \"args\": {}},\n"
                "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"fwd\", \"pid\": 1, \"tid\": 1, "
                "\"ts\": %d, \"dur\": 3000, \"args\": {}},\n"
                "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7, \"ts\": %d, "
                "\"dur\": 2000, \"args\": {\"device\": 0, \"stream\": 7, \"correlation\": %d}}\n",
                i ? "," : "", i + 1, t, t + 1000, t + 1500, i + 1);
    }
    fputs("]}\n", f);
    fclose(f);
    char args[2048];
    snprintf(args, sizeof args, "report --steps '%s'", p);
    ASSERT_EQ(synctop(args), 0);
    ASSERT_STR_CONTAINS(out_buf, "4 steps by ProfilerStep ranges (ProfilerStep#N), median 10.000 ms");
    snprintf(args, sizeof args, "report --steps --step fwd '%s'", p);
    ASSERT_EQ(synctop(args), 0);
    ASSERT_STR_CONTAINS(out_buf, "4 steps by range (fwd), median 3.000 ms");
    ASSERT(strstr(out_buf, "warning") == NULL);
    snprintf(args, sizeof args, "report --steps --step nosuch '%s'", p);
    ASSERT_EQ(synctop(args), 0);
    ASSERT_STR_CONTAINS(out_buf, "no range named \"nosuch\" marks three steps or more; steps follow the "
                                 "ProfilerStep#N ranges instead");
    ASSERT_STR_CONTAINS(out_buf, "median 10.000 ms");
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
    err_msg err;
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
#include "load.h"

static st_store *load(const char *path) {
    st_store *s = st_store_new(NULL);
    err_msg err = {{0}};
    if (ingest_file(s, path, NULL, NULL, &err) != 0)
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
/* A blocking call's frames, the same after the round trip: kind, function, file, line and module
 * (a profiler trace gives call sites to the calls that block). */
static void same_call_site(const st_store *a, uint64_t ca, const st_store *b, uint64_t cb) {
    size_t na = 0, nb = 0;
    const st_frame *fa = ca ? st_callsite_frames(a, ca, &na) : NULL, *fb = cb ? st_callsite_frames(b, cb, &nb) : NULL;
    if (fa == NULL)
        na = 0;
    if (fb == NULL)
        nb = 0;
    ASSERT_EQ(na, nb);
    for (size_t k = 0; k < na; k++) {
        ASSERT_EQ(fa[k].kind, fb[k].kind);
        ASSERT_STR_EQ(st_str(a, fa[k].func), st_str(b, fb[k].func));
        ASSERT_STR_EQ(st_str(a, fa[k].file), st_str(b, fb[k].file));
        ASSERT_EQ(fa[k].line, fb[k].line);
        ASSERT_STR_EQ(st_str(a, fa[k].module), st_str(b, fb[k].module));
    }
}

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
            ASSERT_UEQ(st_ev_end(a, &ea[i]), st_ev_end(b, &eb[i]));
            ASSERT_EQ(st_ev_kind(a, &ea[i]), st_ev_kind(b, &eb[i]));
            ASSERT_EQ(ea[i].corr, eb[i].corr);
            ASSERT_STR_EQ(st_str(a, st_ev_name(a, &ea[i])), st_str(b, st_ev_name(b, &eb[i])));
            ASSERT_EQ(st_ev_flags(a, &ea[i]) & TP_F_BLOCKING, st_ev_flags(b, &eb[i]) & TP_F_BLOCKING);
            if (st_ev_kind(a, &ea[i]) == TP_K_MEMCPY || st_ev_kind(a, &ea[i]) == TP_K_MEMSET) {
                ASSERT_UEQ(st_ev_value(a, &ea[i]), st_ev_value(b, &eb[i]));
                ASSERT_EQ(st_ev_sub(a, &ea[i]), st_ev_sub(b, &eb[i]));
                ASSERT_EQ(st_ev_mem(a, &ea[i]), st_ev_mem(b, &eb[i]));
            }
            if (st_ev_kind(a, &ea[i]) == TP_K_SYNC)
                ASSERT_EQ(st_ev_sub(a, &ea[i]), st_ev_sub(b, &eb[i]));
            if (st_ev_kind(a, &ea[i]) == TP_K_API && (st_ev_flags(a, &ea[i]) & TP_F_BLOCKING))
                same_call_site(a, st_ev_value(a, &ea[i]), b, st_ev_value(b, &eb[i]));
        }
    }
}

/* ---- several sources on several threads ---- */

/* The small profiler traces and the Nsight exports of the samples, and a synctop trace file made
 * from one of them, in an order that mixes the three kinds: ten sources. */
static size_t many_sources(const char **paths, char store[][1024]) {
    static const char *const kineto[] = {"alexnet_a100_sync_heavy.json.gz", "sampled_rank-0.json.gz",
                                         "event_sync_multi_stream.json.gz", "sampled_rank-1.json.gz",
                                         "event_sync_single_stream.json.gz"};
    static const char *const nsys[] = {"saxpy_mpi_a100_rank0.sqlite", "torchrun_2proc_2gpu_h100.sqlite",
                                       "cloverleaf_a100_perlmutter.sqlite", "nvfuser_h200_benchmark.sqlite"};
    char args[4096];
    const char *trace = task_path("many.trace");
    snprintf(args, sizeof args, "import -q --force '%s/%s' -o '%s'", KINETO_TRACE_DIR, kineto[1], trace);
    ASSERT_EQ(synctop(args), 0);
    size_t n = 0;
    for (size_t i = 0; i < sizeof kineto / sizeof kineto[0]; i++) {
        snprintf(store[n], 1024, "%s/%s", KINETO_TRACE_DIR, kineto[i]);
        paths[n] = store[n];
        n++;
        if (i < sizeof nsys / sizeof nsys[0]) {
            snprintf(store[n], 1024, "%s/%s", NSYS_TRACE_DIR, nsys[i]);
            paths[n] = store[n];
            n++;
        }
        if (i == 1) {
            snprintf(store[n], 1024, "%s", trace);
            paths[n] = store[n];
            n++;
        }
    }
    return n;
}

static int never_stop(void *ctx, uint64_t done, uint64_t total) {
    (void)done, (void)total;
    ++*(int *)ctx;
    return 0;
}

/* The sources loaded on this many threads (budget_s per step, as ingest_step takes it) and
 * written as Chrome trace JSON, in memory; *rc: what the last step returned, err its message. */
static char *load_many(const char *const *paths, size_t n, int threads, double budget_s, int *rc, err_msg *err,
                       size_t *len, size_t *events) {
    st_store *s = st_store_new(NULL);
    ingest_loader *ld = ingest_open_many(s, paths, n, 0, NULL, NULL, err);
    ASSERT_NOT_NULL(ld);
    ingest_set_threads(ld, threads);
    int heard = 0;
    ingest_on_progress(ld, never_stop, &heard);
    while ((*rc = ingest_step(ld, budget_s, err)) == 0)
        ;
    ingest_close(&ld);
    st_store_commit(s);
    *events = st_store_events(s);
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    ASSERT_NOT_NULL(f);
    ASSERT_OK(rp_write_chrome(f, s, 1, NULL, NULL));
    ASSERT_OK(fclose(f));
    st_store_destroy(&s);
    return text;
}

/* Profiler traces and Nsight exports are read several at a time on threads, each into its own list
 * of batches; the store still gets every source's batches in the order given, so the timeline
 * (every event, name, call site and flow, as `export` writes it) is the one a single thread makes,
 * whatever the threads, and holds each source's events as that source alone gives them. */
TEST(sources_read_on_threads_fill_the_store_as_one_thread_does) {
    const char *paths[20];
    char store[20][1024];
    size_t n = many_sources(paths, store);
    ASSERT_EQ(n, 10);
    size_t alone = 0;
    for (size_t i = 0; i < n; i++) {
        st_store *s = load(paths[i]);
        alone += st_store_events(s);
        st_store_destroy(&s);
    }
    int rc;
    err_msg err = {{0}};
    size_t len1, ev1;
    char *one = load_many(paths, n, 1, 0, &rc, &err, &len1, &ev1);
    ASSERT_EQ(rc, 1);
    ASSERT_UEQ(ev1, alone);
    ASSERT_GT(len1, 5000000);
    static const int threads[] = {3, 12};
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        size_t len, ev; /* 3 threads whole; 12, more than the sources, in steps as the viewer reads */
        char *many = load_many(paths, n, threads[t], t ? 1e-6 : 0, &rc, &err, &len, &ev);
        ASSERT_EQ(rc, 1);
        ASSERT_UEQ(ev, alone);
        ASSERT_UEQ(len, len1);
        if (memcmp(one, many, len) != 0)
            TASK_FAIL_("%d threads: the timeline differs from one thread's", threads[t]);
        free(many);
    }
    free(one);
}

/* A source that fails fails the load where it would on one thread, with the same message, whether
 * a worker read it ahead or not; the sources before it are in the store, and the workers still
 * reading the ones after it are stopped. */
TEST(a_source_read_ahead_that_fails_fails_where_one_thread_would) {
    const char *paths[20];
    char store[20][1024];
    size_t n = many_sources(paths, store);
    ASSERT_EQ(n, 10);
    const char *cut = task_path("cut.json.gz");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "head -c 300000 '%s/resnet_2080ti_two_threads.json.gz' > '%s'", KINETO_TRACE_DIR, cut);
    ASSERT_EQ(system(cmd), 0);
    const char *bad = task_path("bad.json");
    FILE *f = fopen(bad, "w");
    ASSERT_NOT_NULL(f);
    fputs("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"ts\":1,\"dur\":2}\n,{\"ph\":\"X\",]}", f);
    fclose(f);
    static const size_t at[] = {1, 6};
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
        for (int which = 0; which < 2; which++) {
            const char *keep = paths[at[k]];
            paths[at[k]] = which ? bad : cut;
            int rc1, rc;
            err_msg e1 = {{0}}, e = {{0}};
            size_t len1, ev1, len, ev;
            char *one = load_many(paths, n, 1, 0, &rc1, &e1, &len1, &ev1);
            ASSERT_LT(rc1, 0);
            ASSERT_STR_CONTAINS(e1.msg, which ? "bad.json" : "cut.json.gz");
            ASSERT_GT(ev1, 0);
            char *many = load_many(paths, n, 4, 0, &rc, &e, &len, &ev);
            ASSERT_EQ(rc, rc1);
            ASSERT_STR_EQ(e.msg, e1.msg);
            ASSERT_UEQ(ev, ev1);
            ASSERT(len == len1 && memcmp(one, many, len) == 0);
            free(many);
            free(one);
            paths[at[k]] = keep;
        }
    }
}

static int stop_at_once(void *ctx, uint64_t done, uint64_t total) {
    (void)done, (void)total;
    ++*(int *)ctx;
    return 1;
}

/* The loader's progress function stops a load on threads as it stops one on one thread: the load
 * fails as cancelled, and closing it ends the workers. */
TEST(a_load_on_threads_stops_when_its_progress_says_so) {
    const char *paths[20];
    char store[20][1024];
    size_t n = many_sources(paths, store);
    for (int threads = 1; threads <= 4; threads *= 2) {
        st_store *s = st_store_new(NULL);
        err_msg err = {{0}};
        ingest_loader *ld = ingest_open_many(s, paths, n, 0, NULL, NULL, &err);
        ASSERT_NOT_NULL(ld);
        ingest_set_threads(ld, threads);
        int heard = 0;
        ingest_on_progress(ld, stop_at_once, &heard);
        int rc;
        while ((rc = ingest_step(ld, 0, &err)) == 0)
            ;
        ASSERT_EQ(rc, ERR_EOF);
        ASSERT_STR_CONTAINS(err.msg, "import cancelled");
        ASSERT_GE(heard, 1);
        ingest_close(&ld);
        st_store_destroy(&s);
    }
}

/* A job of many ranks: 300 profiler traces (more than the descriptors the process may hold, 64
 * here) report together, each its own process, every kernel counted. */
/* The kernels `synctop report` counts in what it printed last. */
static unsigned long reported_kernels(void) {
    unsigned long kernels = 0;
    const char *k = strstr(out_buf, "kernels ");
    ASSERT_NOT_NULL(k);
    ASSERT_EQ(sscanf(k, "kernels %lu", &kernels), 1);
    ASSERT_GT(kernels, 0);
    return kernels;
}

/* `synctop report DIR/GLOB` under a limit of 64 descriptors: what it printed, which must be a
 * success. */
static const char *report_with_few_descriptors(const char *dir, const char *glob, const char *out) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "ulimit -n 64 && '%s' report '%s'/%s > '%s' 2>&1", task_synctop(), dir, glob,
             task_path(out));
    int rc = system(cmd);
    const char *said = slurp(task_path(out));
    if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 0)
        TASK_FAIL_("report of %s failed: %s", glob, said);
    return said;
}

TEST(report_reads_more_profiler_traces_than_it_may_hold_descriptors) {
    char dir[4096], cmd[8192];
    snprintf(dir, sizeof dir, "%s", task_path("ranks"));
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && for i in $(seq 1 300); do ln -sf %s '%s/rank'$i'.json.gz'; done", dir,
             SINGLE, dir);
    ASSERT_EQ(system(cmd), 0);
    ASSERT_EQ(synctop("report " SINGLE), 0);
    unsigned long kernels = reported_kernels();
    const char *said = report_with_few_descriptors(dir, "rank*.json.gz", "many.txt");
    ASSERT_STR_CONTAINS(said, "300 processes, 300 GPUs");
    char want[4200];
    snprintf(want, sizeof want, "kernels %lu,", kernels * 300);
    ASSERT_STR_CONTAINS(said, want);
    /* named as the shell would expand them back, not as 300 names cut at some length */
    snprintf(want, sizeof want, "synctop report: %s/rank{1..300}.json.gz", dir);
    ASSERT(strncmp(said, want, strlen(want)) == 0);
    ASSERT_STR_CONTAINS(said, "(300 files)");
    ASSERT(strstr(said, "rank17.json.gz") == NULL);
}

/* A job's synctop trace files, more than the descriptors report may hold: each is opened, its
 * index read and its descriptor let go, then opened again when its batches are read. */
TEST(report_reads_more_trace_files_than_it_may_hold_descriptors) {
    char dir[4096], cmd[8192], one[4200];
    snprintf(dir, sizeof dir, "%s", task_path("traces"));
    snprintf(one, sizeof one, "%s/one.trace", dir);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    ASSERT_EQ(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "import -o '%s' %s", one, SINGLE);
    ASSERT_EQ(synctop(cmd), 0);
    snprintf(cmd, sizeof cmd, "report '%s'", one);
    ASSERT_EQ(synctop(cmd), 0);
    unsigned long kernels = reported_kernels();
    snprintf(cmd, sizeof cmd, "cd '%s' && for i in $(seq 1 300); do ln -sf one.trace rank$i.trace; done", dir);
    ASSERT_EQ(system(cmd), 0);
    const char *said = report_with_few_descriptors(dir, "rank*.trace", "many-traces.txt");
    char want[64];
    snprintf(want, sizeof want, "kernels %lu,", kernels * 300);
    ASSERT_STR_CONTAINS(said, want);
    ASSERT_STR_CONTAINS(said, "(300 files)");
}

/* A few sources are named one by one; more, by what their names share: a {lo..hi} where they are
 * the numbers lo to hi each once, a * where they are not, the first and the last when they share
 * no more than a folder. */
TEST(report_names_many_sources_by_their_pattern) {
    char dir[4096], cmd[8192];
    snprintf(dir, sizeof dir, "%s", task_path("named"));
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s' && for i in 00 01 02 03 04 05 06 07 08 09 10 11; do ln -sf %s '%s/r'$i'.json.gz'; done && "
             "ln -sf %s '%s/other.json.gz' && ln -sf %s '%s/other.json' && "
             "for n in 日本 日曜 日月 日火 日水 日木 日金 日土 日日; do ln -sf %s '%s'/a$n.gz; done",
             dir, SINGLE, dir, SINGLE, dir, SINGLE, dir, SINGLE, dir);
    ASSERT_EQ(system(cmd), 0);
    const char *cases[][2] = {
        {"r00.json.gz r01.json.gz r02.json.gz", "synctop report: r00.json.gz r01.json.gz r02.json.gz\n"},
        {"r0*.json.gz r1*.json.gz", "synctop report: r{00..11}.json.gz (12 files)\n"},
        {"r00.json.gz r01.json.gz r02.json.gz r03.json.gz r04.json.gz r05.json.gz r06.json.gz r07.json.gz r09.json.gz",
         "synctop report: r*.json.gz (9 files)\n"},
        {"r*.json.gz other.json.gz", "synctop report: *.json.gz (13 files)\n"},
        {"r*.json.gz other.json", "synctop report: r00.json.gz ... other.json (13 files)\n"},
        {"a*.gz", "synctop report: a日*.gz (9 files)\n"}, /* not cut inside a character */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "cd '%s' && '%s' report %s > out.txt 2>&1", dir, task_synctop(), cases[i][0]);
        ASSERT_EQ(system(cmd), 0);
        snprintf(cmd, sizeof cmd, "%s/out.txt", dir);
        const char *said = slurp(cmd);
        if (strncmp(said, cases[i][1], strlen(cases[i][1])) != 0)
            TASK_FAIL_("report %s began: %.200s", cases[i][0], said);
    }
}

/* `synctop import` of several inputs on SYNCTOP_THREADS threads, to out: its exit status; what it
 * printed in out_buf. */
static int import_on(const char *const *paths, size_t n, const char *threads, const char *out) {
    char args[16384];
    size_t at = (size_t)snprintf(args, sizeof args, "import --force -v -o '%s'", out);
    for (size_t i = 0; i < n; i++)
        at += (size_t)snprintf(args + at, sizeof args - at, " '%s'", paths[i]);
    ASSERT(at < sizeof args);
    setenv("SYNCTOP_THREADS", threads, 1);
    int rc = synctop(args);
    unsetenv("SYNCTOP_THREADS");
    return rc;
}

/* `synctop import` reads several inputs at once as report does: the summary (with each input's
 * lines under -v) and the file's timeline are those of one thread, and an input that fails fails
 * the import with the same message, leaving no output. */
TEST(import_of_several_inputs_on_threads_writes_what_one_thread_writes) {
    const char *all[20], *paths[20];
    char store[20][1024];
    size_t n_all = many_sources(all, store), n = 0;
    for (size_t i = 0; i < n_all; i++)
        if (strstr(all[i], ".trace") == NULL) /* import reads foreign traces only */
            paths[n++] = all[i];
    ASSERT_EQ(n, 9);
    char said[2][1 << 14], timeline[2][4096], out[4096], cut[4096], none[4096];
    snprintf(out, sizeof out, "%s", task_path("several.trace"));
    snprintf(cut, sizeof cut, "%s", task_path("cut.json.gz"));
    snprintf(none, sizeof none, "%s", task_path("none.trace"));
    for (int k = 0; k < 2; k++) {
        ASSERT_EQ(import_on(paths, n, k ? "4" : "1", out), 0);
        ASSERT_STR_CONTAINS(out_buf, "imported 9 traces");
        snprintf(said[k], sizeof said[k], "%s", out_buf);
        /* the file's size is left out: each import draws its producers' ids, and the compressed
         * batches differ in a few bytes from one run to the next (the timelines are compared below) */
        char *size = strstr(said[k], " -> ");
        ASSERT_NOT_NULL(size);
        *size = '\0';
        snprintf(timeline[k], sizeof timeline[k], "%s", task_path(k ? "several4.json" : "several1.json"));
        char args[4096];
        snprintf(args, sizeof args, "export '%s' -o '%s' --force", out, timeline[k]);
        ASSERT_EQ(synctop(args), 0);
    }
    ASSERT_STR_EQ(said[0], said[1]);
    struct stat sb;
    ASSERT_OK(stat(timeline[0], &sb));
    ASSERT_GT(sb.st_size, 5000000);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", timeline[0], timeline[1]);
    if (system(cmd) != 0)
        TASK_FAIL_("the timelines imported on 1 and on 4 threads differ");

    snprintf(cmd, sizeof cmd, "head -c 9000 %s > '%s'", ALEXNET, cut);
    ASSERT_EQ(system(cmd), 0);
    paths[5] = cut;
    char msg[2][4096];
    for (int k = 0; k < 2; k++) {
        ASSERT_EQ(import_on(paths, n, k ? "4" : "1", none), 1);
        ASSERT_STR_CONTAINS(out_buf, "cut.json.gz");
        ASSERT(access(none, F_OK) != 0);
        snprintf(msg[k], sizeof msg[k], "%s", out_buf);
    }
    ASSERT_STR_EQ(msg[0], msg[1]);
}

/* The producer ids in info's text (drawn at random by each import) as X. */
static void mask_producer_ids(char *t) {
    for (char *p = t; (p = strstr(p, "producer ")) != NULL;) {
        p += strlen("producer ");
        for (int k = 0; k < 16 && isxdigit((unsigned char)p[k]); k++)
            p[k] = 'X';
    }
}

/* `synctop info` of several files reads the profiler traces and exports among them several at
 * once: what it prints of each, a damaged one in the middle included, is what one thread prints. */
/* info on profiler traces: the lane of device-wide synchronizations is named so, not by its id
 * (AlexNet has "Context Sync" rows: "cuda_sync" on stream 4294967295, as asked of the JSON here), and
 * a device the trace describes not at all (sampled_rank-0 has no deviceProperties) says so rather
 * than showing zeros. */
TEST(info_names_the_device_wide_lane_and_a_device_without_properties) {
    ASSERT(json_holds(KINETO_TRACE_DIR "/alexnet_a100_sync_heavy.json.gz",
                      "ok = any(e.get('cat') == 'cuda_sync' and e.get('args', {}).get('stream') == 4294967295 for e in "
                      "d['traceEvents'])"));
    ASSERT(json_holds(KINETO_TRACE_DIR "/sampled_rank-0.json.gz", "ok = not d.get('deviceProperties')"));
    ASSERT_EQ(synctop("info " ALEXNET), 0);
    ASSERT_STR_CONTAINS(out_buf, "compute capability 8.0, 108 SMs");
    ASSERT_STR_CONTAINS(out_buf, "      3 streams: device-wide, 7, 20\n");
    char args[1024];
    snprintf(args, sizeof args, "info '%s/sampled_rank-0.json.gz'", KINETO_TRACE_DIR);
    ASSERT_EQ(synctop(args), 0);
    ASSERT_STR_CONTAINS(out_buf, "device 0: -, its properties not in the trace\n");
    ASSERT(strstr(out_buf, "compute capability 0.0") == NULL);
}

TEST(info_of_several_files_on_threads_says_what_one_thread_says) {
    const char *paths[20];
    char store[20][1024], cut[4096], cmd[4096];
    size_t n = many_sources(paths, store);
    snprintf(cut, sizeof cut, "%s", task_path("cut.json.gz"));
    snprintf(cmd, sizeof cmd, "head -c 9000 %s > '%s'", ALEXNET, cut);
    ASSERT_EQ(system(cmd), 0);
    paths[n++] = paths[4];
    paths[4] = cut;
    static char said[2][1 << 16];
    for (int k = 0; k < 2; k++) {
        char args[16384];
        size_t at = (size_t)snprintf(args, sizeof args, "info");
        for (size_t i = 0; i < n; i++)
            at += (size_t)snprintf(args + at, sizeof args - at, " '%s'", paths[i]);
        setenv("SYNCTOP_THREADS", k ? "4" : "1", 1);
        int rc = synctop(args);
        unsetenv("SYNCTOP_THREADS");
        ASSERT_EQ(rc, 1); /* the cut file */
        ASSERT_STR_CONTAINS(out_buf, "cut.json.gz: gzip data cut short");
        ASSERT_STR_CONTAINS(out_buf, "Nsight Systems SQLite export");
        ASSERT_STR_CONTAINS(out_buf, "PyTorch profiler (Kineto) JSON");
        ASSERT(strlen(out_buf) < sizeof said[k] - 1);
        snprintf(said[k], sizeof said[k], "%s", out_buf);
        mask_producer_ids(said[k]);
    }
    ASSERT_STR_EQ(said[0], said[1]);
}

static void round_trip_path(const char *src) {
    char args[4096], cmd[4096];
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

static void round_trip(const char *name) {
    char src[1024];
    snprintf(src, sizeof src, "%s/%s", KINETO_TRACE_DIR, name);
    round_trip_path(src);
}

/* Call sites come back from `import` (and any reading of the export) as they went: Python frames
 * and operators (qwen, with_stack), a legacy Call stack's (resnet50 2021), native frames with
 * their modules (the MPI program's Nsight export). */
/* -o names where the output goes, and nothing else is lost to it: an input, a device (written in
 * place, as the shell would), a link (its target replaced, the link kept), a directory. */
TEST(output_files_never_take_what_is_not_theirs) {
    char args[4096], trace[1024], link[1024], target[1024];
    snprintf(trace, sizeof trace, "%s", task_path("a.trace"));
    snprintf(link, sizeof link, "%s", task_path("link.json"));

    snprintf(args, sizeof args, "import -q " SINGLE " -o '%s'", trace);
    ASSERT_EQ(synctop(args), 0);
    snprintf(args, sizeof args, "report '%s' -o '%s'", trace, trace);
    ASSERT_EQ(synctop(args), 2);
    ASSERT_STR_CONTAINS(out_buf, "is also a source: the report would write over it");
    snprintf(args, sizeof args, "cp " SINGLE " '%s'", task_path("s.json.gz"));
    ASSERT_EQ(system(args), 0);
    snprintf(args, sizeof args, "import '%s' -o '%s' --force", task_path("s.json.gz"), task_path("s.json.gz"));
    ASSERT_EQ(synctop(args), 1);
    ASSERT_STR_CONTAINS(out_buf, "that is also an input; it would be lost");
    snprintf(args, sizeof args, "info '%s'", task_path("s.json.gz")); /* still the profiler trace it was */
    ASSERT_EQ(synctop(args), 0);
    snprintf(args, sizeof args, "info '%s'", trace); /* still the trace it was */
    ASSERT_EQ(synctop(args), 0);
    snprintf(args, sizeof args, "report '%s' -o -", trace);
    ASSERT_EQ(synctop(args), 0);
    ASSERT_STR_CONTAINS(out_buf, "Top stalls by call site");
    snprintf(args, sizeof args, "export '%s' -o /dev/null", trace);
    ASSERT_EQ(synctop(args), 0);
    ASSERT_EQ(synctop("import -q " SINGLE " -o /dev/null"), 0);
    /* through a pipe: the trace whole on it, the summary on standard error */
    snprintf(args, sizeof args, "'%s' import -q " SINGLE " -o /dev/stdout 2>/dev/null | cat > '%s'", task_synctop(),
             task_path("piped.trace"));
    ASSERT_EQ(system(args), 0);
    snprintf(args, sizeof args, "info '%s'", task_path("piped.trace"));
    ASSERT_EQ(synctop(args), 0);
    ASSERT_STR_CONTAINS(out_buf, "kernel: 4");
    struct stat sb;
    ASSERT(stat("/dev/null", &sb) == 0 && S_ISCHR(sb.st_mode));
    snprintf(args, sizeof args, "export '%s' -o '%s' --force", trace, task_tmpdir());
    ASSERT_EQ(synctop(args), 1);
    ASSERT_STR_CONTAINS(out_buf, "that is a directory; name a file");
    put_text("target.json", "old\n", target, sizeof target);
    ASSERT_EQ(symlink(target, link), 0);
    snprintf(args, sizeof args, "export '%s' -o '%s'", trace, link);
    ASSERT_EQ(synctop(args), 1);
    ASSERT_STR_CONTAINS(out_buf, "exists (use --force to replace it)");
    snprintf(args, sizeof args, "export '%s' -o '%s' --force", trace, link);
    ASSERT_EQ(synctop(args), 0);
    ASSERT(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode));
    ASSERT_STR_CONTAINS(slurp(target), "\"traceEvents\"");
    snprintf(args, sizeof args, "import -q " SINGLE " -o -");
    ASSERT_EQ(synctop(args), 1);
    ASSERT_STR_CONTAINS(out_buf, "not to standard output; name a file");
}

/* Entries a profiler trace holds that cannot be used are said by report and export as import says
 * them (here one kernel of two, its dur negative; entries counted from 0), so a report of a damaged trace does not pass for
 * the report of a whole one. */
TEST(report_and_export_say_the_entries_they_skip) {
    char path[1024], args[4096];
    put_text("neg.json",
             "{\"traceEvents\": [\n"
             "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"a\",\"pid\":0,\"tid\":7,\"ts\":20,\"dur\":5,"
             "\"args\":{\"device\":0,\"stream\":7,\"correlation\":1}},\n"
             "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"b\",\"pid\":0,\"tid\":7,\"ts\":40,\"dur\":-5,"
             "\"args\":{\"device\":0,\"stream\":7,\"correlation\":2}}\n]}\n",
             path, sizeof path);
    snprintf(args, sizeof args, "report '%s'", path);
    ASSERT_EQ(synctop(args), 0);
    ASSERT_STR_CONTAINS(out_buf, "neg.json: skipped 1 unusable entry; the first: traceEvents entry 1 (ending line 3)");
    ASSERT_STR_CONTAINS(out_buf, "kernel with a negative dur");
    ASSERT_STR_CONTAINS(out_buf, "kernels 1,");
    snprintf(args, sizeof args, "report '%s' " SINGLE, path); /* one source of several */
    ASSERT_EQ(synctop(args), 0);
    ASSERT_STR_CONTAINS(out_buf, "neg.json: skipped 1 unusable entry");
    snprintf(args, sizeof args, "export '%s' -o /dev/null", path);
    ASSERT_EQ(synctop(args), 0);
    ASSERT_STR_CONTAINS(out_buf, "neg.json: skipped 1 unusable entry");
}

/* Markdown (for a pull request's comment) shows a trace's names as written, never as markup: an
 * operator named like HTML and emphasis, around a sync, in the stall table, the advice and the
 * findings. */
TEST(report_markdown_escapes_names_from_the_trace) {
    char path[1024], args[4096];
    put_text("html.json",
             "{\"traceEvents\": [\n"
             "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::<img src=x>*b*_u_\",\"pid\":1,\"tid\":1,"
             "\"ts\":0,\"dur\":100},\n"
             "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,\"ts\":2,"
             "\"dur\":2,\"args\":{\"correlation\":1}},\n"
             "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":5,\"dur\":40,"
             "\"args\":{\"device\":0,\"stream\":7,\"correlation\":1}},\n"
             "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaStreamSynchronize\",\"pid\":1,\"tid\":1,"
             "\"ts\":10,\"dur\":50,\"args\":{\"correlation\":2}},\n"
             "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,\"ts\":70,"
             "\"dur\":2,\"args\":{\"correlation\":3}},\n"
             "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":80,\"dur\":10,"
             "\"args\":{\"device\":0,\"stream\":7,\"correlation\":3}}\n]}\n",
             path, sizeof path);
    snprintf(args, sizeof args, "report --format markdown '%s'", path);
    ASSERT_EQ(synctop(args), 0);
    int escaped = 0;
    for (const char *at = out_buf; (at = strstr(at, "<img")) != NULL; at++, escaped++)
        ASSERT(at > out_buf && at[-1] == '\\'); /* every one escaped: no tag */
    ASSERT_EQ(escaped, 4);
    ASSERT(strstr(out_buf, "*b*") == NULL);
    ASSERT_STR_CONTAINS(out_buf, "| aten::\\<img src=x\\>\\*b\\*\\_u\\_ |"); /* the stall table's site */
    ASSERT_STR_CONTAINS(out_buf, "blocked) at aten::\\<img src=x\\>\\*b\\*\\_u\\_"); /* the advice */
    /* two processes with no rank: the table names each by its pid (the trace's host pid, 1), and
     * by its place, as they share it */
    snprintf(args, sizeof args, "cp '%s' '%s'", path, task_path("html2.json"));
    ASSERT_EQ(system(args), 0);
    snprintf(args, sizeof args, "report --format markdown '%s' '%s'", path, task_path("html2.json"));
    ASSERT_EQ(synctop(args), 0);
    ASSERT_STR_CONTAINS(out_buf, "| rank or process | blocked ms |");
    ASSERT_STR_CONTAINS(out_buf, "\n| pid 1 (process 0) | 0.050 | 1 |"); /* the same pid, no host: their places */
    ASSERT_STR_CONTAINS(out_buf, "\n| pid 1 (process 1) | 0.050 | 1 |");
    ASSERT(strstr(out_buf, "| -1 |") == NULL);
}

/* The HTA temporal breakdown in Markdown is one table, a row per rank (the nvFuser export's two
 * processes, the second with no GPU work), and the notes come under it, naming their rank. */
TEST(report_hta_markdown_keeps_its_table_whole) {
    ASSERT_EQ(synctop("report --hta --format markdown '" NSYS_TRACE_DIR "/nvfuser_h200_benchmark.sqlite'"), 0);
    const char *t = strstr(out_buf, "## HTA temporal breakdown (us)\n\n| rank |");
    ASSERT_NOT_NULL(t);
    t = strstr(t, "|---:|");
    ASSERT_NOT_NULL(t);
    int rows = 0;
    for (t = strchr(t, '\n') + 1; *t == '|'; t = strchr(t, '\n') + 1)
        rows++;
    ASSERT_EQ(rows, 2);
    ASSERT(strncmp(t, "\nRank 0: Float timestamps rounded to whole us, as HTA does", 58) == 0);
    ASSERT(strstr(t, "\n| ") == NULL); /* no row after the notes */
}

/* A file of no kind synctop reads is named with the kinds it reads, by info as by report (and in
 * info's JSON, an object that says so); a trace file given to import is read as it is; a source
 * with nothing in it is named. */
TEST(verbs_say_what_a_file_is_not) {
    char garbage[1024], empty_doc[1024], trace[1024], args[4096];
    snprintf(trace, sizeof trace, "%s", task_path("t.trace"));
    put_text("garbage.json", "hello, not a trace\n", garbage, sizeof garbage);
    put_text("empty.json", "[]\n", empty_doc, sizeof empty_doc);
    snprintf(args, sizeof args, "info '%s'", garbage);
    ASSERT_EQ(synctop(args), 1);
    ASSERT_STR_CONTAINS(out_buf, "garbage.json: neither a synctop trace file, an Nsight Systems SQLite export nor a "
                                 "PyTorch profiler (Kineto) JSON");
    snprintf(args, sizeof args, "info --json '%s' 2>/dev/null", garbage);
    ASSERT_EQ(synctop(args), 1);
    ASSERT_STR_CONTAINS(out_buf, "garbage.json\", \"error\": \"");
    snprintf(args, sizeof args, "import -q " SINGLE " -o '%s'", trace);
    ASSERT_EQ(synctop(args), 0);
    snprintf(args, sizeof args, "import '%s' -o '%s'", trace, task_path("again.trace"));
    ASSERT_EQ(synctop(args), 1);
    ASSERT_STR_CONTAINS(out_buf, "t.trace is a synctop trace file already");
    snprintf(args, sizeof args, "report '%s'", empty_doc);
    ASSERT_EQ(synctop(args), 1);
    ASSERT_STR_CONTAINS(out_buf, "no events to analyse: ");
    ASSERT_STR_CONTAINS(out_buf, "empty.json holds no GPU work, CUDA calls or ranges");
}

/* Options that cannot go together, or cannot do what they say, are usage errors (status 2), not a
 * report that fails or quietly does something else. */
TEST(report_refuses_options_that_cannot_work) {
    ASSERT_EQ(synctop("report " SINGLE " --fail-if 'new-sites>0'"), 2);
    ASSERT_STR_CONTAINS(out_buf, "--fail-if 'new-sites>0' compares with a baseline: give --baseline OLD");
    ASSERT(strstr(out_buf, "FAIL") == NULL);
    ASSERT_EQ(synctop("report " SINGLE " --fail-if 'blocked>+10%'"), 2);
    ASSERT_EQ(synctop("report - - < /dev/null"), 2);
    ASSERT_STR_CONTAINS(out_buf, "standard input (-) is given 2 times");
    ASSERT_EQ(synctop("report " SINGLE " --hta --hta-wide-sync-as-stream --hta-wide-sync-as-host"), 2);
    ASSERT_STR_CONTAINS(out_buf, "give one of them");
    ASSERT_EQ(synctop("report " SINGLE " --hta --hta-wide-sync-as-host --hta-wide-sync-as-host"), 0);
}

/* An export names each GPU once, and every thread with a name, also one that has only NVTX ranges:
 * in the nvFuser export, the threads with NVTX rows and no CUDA call are named pt_thread_pool (its
 * ThreadNames and StringIds tables, by SQL). */
TEST(export_names_each_gpu_once_and_every_named_thread) {
    static const char db[] = NSYS_TRACE_DIR "/nvfuser_h200_benchmark.sqlite";
    char args[2048];
    snprintf(args, sizeof args, "export '%s' -o '%s'", db, task_path("nv.json"));
    ASSERT_EQ(synctop(args), 0);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import json, sqlite3, sys, collections; c = sqlite3.connect(sys.argv[1]); "
             "nv = {r[0] & 16777215 for r in c.execute('select distinct globalTid from NVTX_EVENTS')}; "
             "cu = {r[0] & 16777215 for r in c.execute('select distinct globalTid from CUPTI_ACTIVITY_KIND_RUNTIME')}; "
             "nm = dict((t & 16777215, v) for t, v in c.execute('select t.globalTid, s.value from ThreadNames t "
             "join StringIds s on s.id = t.nameId')); only = sorted(nv - cu); "
             "d = json.load(open(sys.argv[2])); m = [e for e in d['traceEvents'] if e.get('ph') == 'M']; "
             "n = collections.Counter((e['name'], e['pid'], e['tid']) for e in m); "
             "names = {e['tid']: e['args']['name'] for e in m if e['name'] == 'thread_name'}; "
             "ok = len(only) > 0 and all(nm.get(t) == 'pt_thread_pool' == names.get(t) for t in only) and "
             "max(n.values()) == 1; sys.exit(0 if ok else 1)\" '%s' '%s'",
             db, task_path("nv.json"));
    ASSERT_EQ(system(cmd), 0);
}

TEST(export_round_trip_keeps_call_sites) {
    round_trip("qwen_h100_with_stack.json.gz");
    round_trip("resnet50_v100_legacy_2021.json.gz");
    round_trip_path(NSYS_TRACE_DIR "/saxpy_mpi_a100_rank0.sqlite");
    /* and the report reads the same, below its first line */
    char args[4096];
    const char *out = task_path("qwen.chrome.json");
    snprintf(args, sizeof args, "export '%s/qwen_h100_with_stack.json.gz' --format chrome -o '%s' --force",
             KINETO_TRACE_DIR, out);
    ASSERT_EQ(synctop(args), 0);
    ASSERT_EQ(synctop("report '" KINETO_TRACE_DIR "/qwen_h100_with_stack.json.gz'"), 0);
    char *want = strdup(below_source(out_buf));
    ASSERT_STR_CONTAINS(want, "modeling_attn_mask_utils.py:243 _ignore_causal_mask_sdpa");
    snprintf(args, sizeof args, "report '%s'", out);
    ASSERT_EQ(synctop(args), 0);
    ASSERT_STR_EQ(below_source(out_buf), want);
    free(want);
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
    snprintf(args, sizeof args, "export %s -f -o '%s'", SINGLE, out);
    ASSERT_EQ(synctop(args), 0); /* -f is --force */
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

/* Flow arrows join each call to the GPU work it queued, copies and memsets as well as kernels, and
 * none starts or ends in nothing: in the Qwen trace 1,198 of the 1,707 kernel, copy and memset rows
 * carry the correlation of a CUDA call in the file (the rest were queued before the profiler
 * started, or by calls it did not record), counted from the JSON here; in AlexNet all 98. */
TEST(export_flow_arrows_pair_each_call_with_its_gpu_work) {
    static const struct {
        const char *trace;
        int pairs;
    } cases[] = {{"qwen_h100_with_stack", 1198}, {"alexnet_a100_sync_heavy", 98}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[4096], py[1024];
        snprintf(py, sizeof py,
                 "ev = d['traceEvents']; calls = {e['args']['correlation'] for e in ev if e.get('cat') in "
                 "('cuda_runtime', 'cuda_driver') and 'correlation' in e.get('args', {})}; "
                 "ok = sum(1 for e in ev if e.get('ph') == 'X' and e.get('cat') in ('kernel', 'gpu_memcpy', "
                 "'gpu_memset') and e['args'].get('correlation') in calls) == %d", cases[i].pairs);
        char path[512];
        snprintf(path, sizeof path, "%s/%s.json.gz", KINETO_TRACE_DIR, cases[i].trace);
        ASSERT(json_holds(path, py));
        snprintf(args, sizeof args, "export '%s' -o '%s' --force", path, task_path("flows.json"));
        ASSERT_EQ(synctop(args), 0);
        snprintf(args, sizeof args,
                 "python3 -c \"import json, sys; ev = json.load(open(sys.argv[1]))['traceEvents']; "
                 "s = [e['id'] for e in ev if e.get('ph') == 's']; f = [e['id'] for e in ev if e.get('ph') == 'f']; "
                 "sys.exit(0 if len(s) == len(set(s)) == len(f) == len(set(f)) == %d and set(s) == set(f) else 1)\" '%s'",
                 cases[i].pairs, task_path("flows.json"));
        if (system(args) != 0)
            TASK_FAIL_("%s: the flow starts and ends do not pair up %d times", cases[i].trace, cases[i].pairs);
    }
}

/* Of several sources, one that cannot be read is left out, said why, and the rest are reported or
 * exported; the status says the whole was not read. The good trace's own counts (4 kernels and a
 * copy, by its "cat" rows) are what the report shows of it. */
TEST(report_and_export_keep_the_sources_that_can_be_read) {
    FILE *f = fopen(task_path("bad.json"), "w");
    ASSERT_NOT_NULL(f);
    fputs("{\"traceEvents\": [\n{\"ph\": \"X\", oops}\n]}\n", f);
    fclose(f);
    ASSERT(json_holds(KINETO_TRACE_DIR "/event_sync_single_stream.json.gz",
                      "c = [e.get('cat') for e in d['traceEvents']]; ok = c.count('kernel') == 4 and c.count('gpu_memcpy') == 1"));
    char args[4096];
    snprintf(args, sizeof args, "report %s '%s'", SINGLE, task_path("bad.json"));
    ASSERT_EQ(synctop(args), 1);
    ASSERT_STR_CONTAINS(out_buf, "warning: left out: ");
    ASSERT_STR_CONTAINS(out_buf, "bad.json: line 2, column");
    ASSERT_STR_CONTAINS(out_buf, "NOT IN THIS REPORT: 1 of the sources");
    ASSERT_STR_CONTAINS(out_buf, "kernels 4, copies 1,");
    snprintf(args, sizeof args, "report --format json -o '%s' '%s' %s", task_path("r.json"), task_path("nosuch.json"), SINGLE);
    ASSERT_EQ(synctop(args), 1);
    ASSERT_STR_CONTAINS(out_buf, "nosuch.json: cannot open");
    ASSERT_STR_CONTAINS(slurp(task_path("r.json")), "\"sources_left_out\":1,");
    snprintf(args, sizeof args, "report '%s' '%s'", task_path("nosuch.json"), task_path("bad.json"));
    ASSERT_EQ(synctop(args), 1);
    ASSERT_STR_CONTAINS(out_buf, "none of the 2 sources could be read");
    snprintf(args, sizeof args, "export %s '%s' -o '%s'", SINGLE, task_path("bad.json"), task_path("x.json"));
    ASSERT_EQ(synctop(args), 1);
    ASSERT_STR_CONTAINS(out_buf, "warning: left out: ");
    snprintf(args, sizeof args,
             "python3 -c \"import json, sys; ev = json.load(open(sys.argv[1]))['traceEvents']; "
             "c = [e.get('cat') for e in ev if e.get('ph') == 'X']; "
             "sys.exit(0 if c.count('kernel') == 4 and c.count('gpu_memcpy') == 1 else 1)\" '%s'",
             task_path("x.json"));
    ASSERT_EQ(system(args), 0);
}

/* ---- report on a live source (synctop-testpub standing in for a traced program) ---- */

#include <errno.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "analysis.h"
#include "synth.h"

static void sleep_s(double s) {
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Starts a process with stdout and stderr to files (NULL: /dev/null); returns its pid. */
static pid_t spawn(const char *const *argv, const char *out, const char *err) {
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        FILE *o = freopen(out ? out : "/dev/null", "w", stdout);
        FILE *e = freopen(err ? err : "/dev/null", "w", stderr);
        if (o == NULL || e == NULL)
            _exit(126);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* Waits up to limit_s for pid; returns its exit status, or -1 if it is still running. */
static int wait_for(pid_t pid, double limit_s) {
    for (double t = 0; t < limit_s; t += 0.05) {
        int st;
        pid_t w = waitpid(pid, &st, WNOHANG);
        ASSERT(w >= 0);
        if (w == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        sleep_s(0.05);
    }
    return -1;
}

static const char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    ASSERT_NOT_NULL(f);
    size_t n = fread(out_buf, 1, sizeof out_buf - 1, f);
    fclose(f);
    out_buf[n] = '\0';
    return out_buf;
}

static const char *testpub_path(void) {
    static char p[4096];
    snprintf(p, sizeof p, "%s/synctop-testpub", task_bindir());
    return p;
}

static long long json_int(yajl_val v, const char *a, const char *b) {
    const char *p[] = {a, b, NULL};
    yajl_val x = yajl_tree_get(v, p, yajl_t_number);
    if (x == NULL)
        TASK_FAIL_("no %s.%s in the report", a, b ? b : "");
    return YAJL_GET_INTEGER(x);
}

/* The producer's last batch (TP_BF_END) ends the recording by itself, and the report counts what
 * the producer sent: the same numbers as an analysis of the regenerated events. */
TEST(report_live_source_ends_with_the_producer) {
    char ep[512];
    snprintf(ep, sizeof ep, "ipc://%s/pub.ipc", task_tmpdir());
    const char *pub[] = {testpub_path(), "--endpoint", ep, "--events", "20000", "--batch", "1000",
                         "--wait-subscribers", "1", NULL};
    pid_t pp = spawn(pub, task_path("pub.out"), NULL);
    const char *json = task_path("live.json");
    const char *rep[] = {task_synctop(), "report", "--format", "json", "-o", json, ep, NULL};
    pid_t rp = spawn(rep, NULL, task_path("rep.err"));
    int rc = wait_for(rp, 60);
    if (rc < 0) {
        kill(rp, SIGKILL);
        kill(pp, SIGKILL);
        TASK_FAIL_("the report did not end when the producer did: %s", slurp(task_path("rep.err")));
    }
    ASSERT_EQ(wait_for(pp, 30), 0);
    ASSERT_EQ(rc, 0);
    slurp(task_path("rep.err"));
    ASSERT_STR_CONTAINS(out_buf, "recorded 20000 events in");
    ASSERT_STR_CONTAINS(out_buf, "stopped: every program finished");

    /* What the analysis of the same events says. */
    st_store *s = st_store_new(NULL);
    synth sy;
    synth_init(&sy, 1);
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 2});
    tp_buf b = {0};
    for (int i = 0; i < 20; i++) {
        synth_fill(&sy, enc, 1000);
        ASSERT_OK(tp_enc_finish(enc, &b));
        tp_enc_delivered(enc, 1);
        ASSERT_OK(st_store_add_batch(s, b.data, b.len, NULL));
    }
    tp_buf_free(&b);
    tp_enc_destroy(&enc);
    st_store_commit(s);
    an_result r;
    ASSERT_OK(an_analyze(s, NULL, &r, NULL));
    ASSERT_EQ(r.n_devices, 1);

    char errbuf[256];
    yajl_val v = yajl_tree_parse(slurp(json), errbuf, sizeof errbuf);
    if (v == NULL)
        TASK_FAIL_("json: %s", errbuf);
    ASSERT_EQ(json_int(v, "span_ns", NULL), (long long)(r.t1 - r.t0));
    ASSERT_EQ(json_int(v, "host", "blocked_ns"), (long long)r.blocked_ns);
    ASSERT_EQ(json_int(v, "host", "blocking_calls"), (long long)r.n_blocks);
    ASSERT_EQ(json_int(v, "host", "api_calls"), (long long)r.api_calls);
    ASSERT_GT(r.n_blocks, 0);
    const char *dp[] = {"devices", NULL};
    yajl_val devs = yajl_tree_get(v, dp, yajl_t_array);
    ASSERT_NOT_NULL(devs);
    ASSERT_EQ(devs->u.array.len, 1);
    yajl_val d = devs->u.array.values[0];
    ASSERT_EQ(json_int(d, "kernels", NULL), (long long)r.devices[0].kernels);
    ASSERT_EQ(json_int(d, "copies", NULL), (long long)r.devices[0].copies);
    ASSERT_EQ(json_int(d, "memsets", NULL), (long long)r.devices[0].memsets);
    ASSERT_EQ(json_int(d, "syncs", NULL), (long long)r.devices[0].syncs);
    ASSERT_EQ(json_int(d, "busy_ns", NULL), (long long)r.devices[0].busy_ns);
    ASSERT_LE(r.devices[0].kernels + r.devices[0].copies + r.devices[0].memsets + r.devices[0].syncs + r.api_calls,
              20000);
    yajl_tree_free(v);
    an_result_free(&r);
    st_store_destroy(&s);
}

/* A report on a producer that will not end soon, stopped by SIGINT (kill_pub 0) or by the producer
 * dying without its last batch (kill_pub 1). The stop must come after something was received, and
 * how soon that is depends on the machine: the delay doubles until the report got events. Leaves
 * the report's stdout in rep.out, its stderr in out_buf; returns the report's exit status. */
static int live_stop(int kill_pub) {
    int attempt = 0;
    for (double delay = 0.25; delay < 20; delay *= 2) {
        char ep[512];
        snprintf(ep, sizeof ep, "ipc://%s/slow%d.ipc", task_tmpdir(), attempt++);
        const char *pub[] = {testpub_path(), "--endpoint", ep, "--events", "100000000", "--batch", "500",
                             "--rate", "20000", "--wait-subscribers", "1", NULL};
        pid_t pp = spawn(pub, NULL, NULL);
        const char *rep[] = {task_synctop(), "report", ep, NULL};
        pid_t rp = spawn(rep, task_path("rep.out"), task_path("rep.err"));
        sleep_s(delay);
        kill(kill_pub ? pp : rp, kill_pub ? SIGKILL : SIGINT);
        int rc = wait_for(rp, kill_pub ? 10 : 30);
        if (rc < 0) { /* killed before anything came: the report still waits for its program */
            kill(rp, SIGINT);
            rc = wait_for(rp, 30);
        }
        kill(pp, SIGKILL);
        wait_for(pp, 30);
        ASSERT(rc >= 0);
        slurp(task_path("rep.err"));
        if (strstr(out_buf, "recorded 0 events") == NULL)
            return rc;
    }
    TASK_FAIL_("the report never received anything: %s", out_buf);
}

TEST(report_live_sigint_stops_recording_and_reports) {
    ASSERT_EQ(live_stop(0), 0);
    ASSERT_STR_CONTAINS(out_buf, "stopped: interrupted (SIGINT), before every program ended");
    long long events = 0;
    const char *p = strstr(out_buf, "recorded ");
    ASSERT_NOT_NULL(p);
    events = atoll(p + 9);
    ASSERT_GT(events, 0);
    ASSERT_LT(events, 100000000);
    slurp(task_path("rep.out"));
    ASSERT_STR_CONTAINS(out_buf, "synctop report:");
    ASSERT_STR_CONTAINS(out_buf, "slow");
    fits_80_columns("live report");
    ASSERT_STR_CONTAINS(out_buf, "Top stalls by call site");
    ASSERT_STR_CONTAINS(out_buf, "cudaStreamSynchronize");
    ASSERT_STR_CONTAINS(out_buf, "train.py:42");
}

TEST(report_live_stops_when_the_program_dies) {
    ASSERT_EQ(live_stop(1), 0);
    ASSERT_STR_CONTAINS(out_buf, "stopped: the program went away without its last batch");
    slurp(task_path("rep.out"));
    ASSERT_STR_CONTAINS(out_buf, "Top stalls by call site");
}

/* ---- the text report as a person reads it ---- */

/* Every line of out_buf fits in 80 columns. */
static void fits_80_columns(const char *what) {
    int line = 1;
    for (const char *p = out_buf; *p;) {
        size_t n = strcspn(p, "\n");
        if (n > 80)
            TASK_FAIL_("%s: line %d is %zu columns: %.*s", what, line, n, (int)n, p);
        p += n + (p[n] == '\n');
        line++;
    }
}

TEST(report_text_fits_80_columns_on_the_real_traces) {
    static const char *const runs[] = {
        ALEXNET, SINGLE, "'" KINETO_TRACE_DIR "/event_sync_multi_stream.json.gz'",
        "'" KINETO_TRACE_DIR "/sampled_rank-0.json.gz' '" KINETO_TRACE_DIR "/sampled_rank-1.json.gz'"};
    /* Whether some blocking call ran outside every operator (kineto_expected.py --sites counts
     * fewer sited calls than blocking ones in the first three; every call of the ranks is sited). */
    static const int untaken[] = {1, 1, 1, 0};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char args[4096];
        snprintf(args, sizeof args, "report %s", runs[i]);
        ASSERT_EQ(synctop(args), 0);
        fits_80_columns(runs[i]);
        /* A call outside every operator has no call site: the API is said once, with no filler,
         * and a note says why. */
        ASSERT(strstr(out_buf, "no call site taken)") == NULL);
        ASSERT_EQ(strstr(out_buf, "(no \"at\" line: no call site was taken") != NULL, untaken[i]);
        snprintf(args, sizeof args, "report --hta %s", runs[i]);
        ASSERT_EQ(synctop(args), 0);
        fits_80_columns(runs[i]);
        ASSERT_EQ(synctop("report --help"), 0);
        fits_80_columns("--help");
    }
    /* Steps whose longest stall has a long call site (an operator chain) keep to 80 columns too. */
    static const char *const stepped[] = {"resnet_2080ti_two_threads.json.gz", "resnet50_v100_legacy_2021.json.gz",
                                          "qwen_mi300_rocm_with_stack.json.gz", "qwen_h100_with_stack.json.gz"};
    for (size_t i = 0; i < sizeof stepped / sizeof stepped[0]; i++) {
        char args[4096];
        snprintf(args, sizeof args, "report --steps '%s/%s'", KINETO_TRACE_DIR, stepped[i]);
        ASSERT_EQ(synctop(args), 0);
        fits_80_columns(stepped[i]);
    }
    /* Several ranks: each line says whose it is. */
    ASSERT_EQ(synctop("report " "'" KINETO_TRACE_DIR "/sampled_rank-0.json.gz' '" KINETO_TRACE_DIR
                      "/sampled_rank-1.json.gz'"),
              0);
    ASSERT_STR_CONTAINS(out_buf, "cudaMemcpyAsync\n");
    ASSERT_STR_CONTAINS(out_buf, "(pageable-memcpy) [rank 0]\n");
    ASSERT_STR_CONTAINS(out_buf, "(pageable-memcpy) [rank 1]\n");
    /* rank 1's 16 copies inside aten::to alone (kineto_expected.py --sites: 16 calls, 176000 ns) */
    ASSERT_STR_CONTAINS(out_buf, "16 calls, 0.176 ms, longest 0.025 ms: cudaMemcpyAsync [rank 1] at\n"
                                 "      aten::to > aten::_to_copy > aten::copy_\n");
    /* Low-utilisation windows per GPU in time order, the worst named apart. */
    const char *a = strstr(out_buf, "+125.221..+288.267 ms"), *b = strstr(out_buf, "+329.029..+492.075 ms");
    ASSERT_NOT_NULL(a);
    ASSERT_NOT_NULL(b);
    ASSERT(a < b);
    ASSERT_STR_CONTAINS(out_buf, "rank 0 GPU 0: 6 windows, 587.419 ms idle in them\n");
    ASSERT_STR_CONTAINS(out_buf, "      worst: +818.167..+1062.737 ms, 206.666 ms idle\n");
    /* Markdown: "-" where no call site was taken, a rank column with several ranks. */
    ASSERT_EQ(synctop("report --format markdown " ALEXNET), 0);
    ASSERT_STR_CONTAINS(out_buf, "| alloc | cudaFree | - |\n");
    ASSERT(strstr(out_buf, "\n\n\n") == NULL);
}

/* Long frames are shortened where it keeps their meaning: a Python frame keeps the end of its path
 * (file, line, function), a native one the start of its name and its module. */
TEST(report_long_frames_are_shortened_sensibly) {
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 9});
    tp_process p = {.kind = TP_K_PROCESS, .device = TP_NO_DEVICE, .pid = 7, .rank = -1, .world = -1};
    ASSERT_OK(tp_enc_add(enc, &p));
    tp_callsite cs = {.kind = TP_K_CALLSITE, .device = TP_NO_DEVICE, .id = 3, .n_frames = 2};
    ASSERT_OK(tp_enc_add(enc, &cs));
    char fn[400];
    memset(fn, 'x', sizeof fn);
    memcpy(fn, "at::native::", 12);
    fn[sizeof fn - 1] = '\0';
    tp_frame f0 = {.kind = TP_K_FRAME, .flags = TP_FRAME_PYTHON, .index = 0, .callsite = 3, .line = 1501,
                   .file = tp_enc_intern_cstr(enc, "/home/someone/miniconda3/envs/training-env/lib/python3.11/"
                                                   "site-packages/torch/nn/modules/module.py"),
                   .func = tp_enc_intern_cstr(enc, "_call_impl")};
    tp_frame f1 = {.kind = TP_K_FRAME, .flags = TP_FRAME_NATIVE, .index = 1, .callsite = 3,
                   .func = tp_enc_intern_cstr(enc, fn), .module = tp_enc_intern_cstr(enc, "/usr/lib/libtorch_cuda.so"),
                   .pc = 0x1a2b3c};
    ASSERT_OK(tp_enc_add(enc, &f0));
    ASSERT_OK(tp_enc_add(enc, &f1));
    tp_api api = {.kind = TP_K_API, .flags = TP_F_BLOCKING, .device = 0, .tid = 100, .start = 1000, .end = 90000,
                  .correlation = 1, .callsite = 3, .name = tp_enc_intern_cstr(enc, "cudaStreamSynchronize")};
    ASSERT_OK(tp_enc_add(enc, &api));
    tp_kernel k = {.kind = TP_K_KERNEL, .device = 0, .stream = 7, .start = 500, .end = 80000, .correlation = 2,
                   .name = tp_enc_intern_cstr(enc, "gemm")};
    ASSERT_OK(tp_enc_add(enc, &k));
    tp_buf b = {0};
    ASSERT_OK(tp_enc_finish_flags(enc, TP_BF_END, &b));
    st_store *s = st_store_new(NULL);
    ASSERT_OK(st_store_add_batch(s, b.data, b.len, NULL));
    st_store_commit(s);
    tp_buf_free(&b);
    tp_enc_destroy(&enc);
    an_result r;
    ASSERT_OK(an_analyze(s, NULL, &r, NULL));
    FILE *out = fopen(task_path("frames.txt"), "w");
    ASSERT_NOT_NULL(out);
    rp_opts o = {.format = RP_TEXT, .source = "test"};
    ASSERT_OK(rp_write(out, s, &r, &o));
    fclose(out);
    slurp(task_path("frames.txt"));
    fits_80_columns("frames");
    ASSERT_STR_CONTAINS(out_buf, "      at ...");
    ASSERT_STR_CONTAINS(out_buf, "/torch/nn/modules/module.py:1501 _call_impl\n");
    ASSERT_STR_CONTAINS(out_buf, "         at::native::xxx");
    ASSERT_STR_CONTAINS(out_buf, "... (libtorch_cuda.so+0x1a2b3c)\n");
    /* The finding names the site whole, on one line. */
    ASSERT_STR_CONTAINS(out_buf, "module.py:1501 _call_impl\n");
    an_result_free(&r);
    st_store_destroy(&s);
}

/* HTA prints rank 0 for a trace with no distributedInfo; so does report --hta. */
TEST(report_hta_rank_is_zero_without_distributed_info) {
    const char *p = task_path("norank.json");
    FILE *f = fopen(p, "w");
    ASSERT_NOT_NULL(f);
    fputs("{\"traceEvents\":[\n"
          "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,\"ts\":10,"
          "\"dur\":2,\"args\":{\"correlation\":1}},\n"
          "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"pid\":0,\"tid\":7,\"ts\":20,\"dur\":5,"
          "\"args\":{\"device\":0,\"stream\":7,\"correlation\":1}},\n"
          "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"relu\",\"pid\":0,\"tid\":7,\"ts\":100,\"dur\":5,"
          "\"args\":{\"device\":0,\"stream\":7,\"correlation\":2}}\n]}\n",
          f);
    fclose(f);
    char args[2048];
    snprintf(args, sizeof args, "report --hta --format json '%s'", p);
    ASSERT_EQ(synctop(args), 0);
    ASSERT_STR_CONTAINS(out_buf, "\"rank\":0,\"stream\":7");
    ASSERT(strstr(out_buf, "\"rank\":-1") == NULL);
    snprintf(args, sizeof args, "report --hta '%s'", p);
    ASSERT_EQ(synctop(args), 0);
    ASSERT_STR_CONTAINS(out_buf, "      0          7       2");
}

/* Every --fail-if line names the threshold, the measured value and the unit of both. */
TEST(report_fail_if_lines_name_value_threshold_and_unit) {
    static const struct {
        const char *expr, *line;
    } c[] = {
        {"blocked>5%", "FAIL blocked>5%: host blocked 15.23% of wall time (6612.315 ms of 43425.365 ms); threshold > 5%"},
        {"blocked>2s", "FAIL blocked>2s: host blocked 6612.315 ms; threshold > 2000.000 ms"},
        {"idle>1s", "FAIL idle>1s: GPU idle (the idlest GPU) 43359.224 ms; threshold > 1000.000 ms"},
        {"stalls<100", "FAIL stalls<100: 52 blocking calls; threshold < 100 blocking calls"},
        {"findings>0", "FAIL findings>0: 5 findings; threshold > 0 findings"},
        {"sync-api>=21", "FAIL sync-api>=21: 21 sync-api calls; threshold >= 21 calls"},
        {"gpu-gaps>0", "FAIL gpu-gaps>0: 4 GPU gaps; threshold > 0 GPU gaps"},
        {"low-util>0", "FAIL low-util>0: 1 low-utilisation windows; threshold > 0 low-utilisation windows"},
        {"api:cudaFree>6s", "FAIL api:cudaFree>6s: blocked in cudaFree 6553.827 ms; threshold > 6000.000 ms"},
        {"stalls==0", "ok   stalls==0: 52 blocking calls; threshold == 0 blocking calls"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char args[1024];
        snprintf(args, sizeof args, "report " ALEXNET " -o /dev/null --fail-if '%s'", c[i].expr);
        ASSERT_EQ(synctop(args), strncmp(c[i].line, "FAIL", 4) == 0);
        ASSERT_STR_CONTAINS(out_buf, c[i].line);
    }
    ASSERT_EQ(synctop("report --help"), 0);
    ASSERT_STR_CONTAINS(out_buf, "--fail-if 'blocked>5%' --fail-if 'pageable-memcpy>0'");
}

/* The known loop (tests/lib/loop.h). */
static const char *loop_trace(void) {
    const char *path = task_path("loop.json");
    ASSERT_OK(loop_trace_write(path, NULL));
    return path;
}

TEST(report_steps_names_slow_steps_and_what_comes_every_nth) {
    const char *trace = loop_trace();
    char args[2048];
    snprintf(args, sizeof args, "report --steps '%s'", trace);
    ASSERT_EQ(synctop(args), 0);
    ASSERT_STR_CONTAINS(out_buf, "30 steps by ProfilerStep ranges (ProfilerStep#N), median 10.000 ms; 6 slow");
    ASSERT_STR_CONTAINS(out_buf, "every 5th step (6 times from step 4): cudaDeviceSynchronize");
    ASSERT_STR_CONTAINS(out_buf, "+30.000 ms a\n    time, 6.000 ms a step on average");
    ASSERT_STR_CONTAINS(out_buf, "        4     40.000       7.980     37.980      2  SLOW cudaDeviceSynchronize\n");
    fits_80_columns("report --steps");
    snprintf(args, sizeof args, "report --steps --format json -o '%s' '%s'", task_path("s.json"), trace);
    ASSERT_EQ(synctop(args), 0);
    FILE *f = fopen(task_path("s.json"), "r");
    ASSERT_NOT_NULL(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char err[256];
    yajl_val v = yajl_tree_parse(buf, err, sizeof err);
    if (v == NULL)
        TASK_FAIL_("json: %s", err);
    const char *sp[] = {"steps", "steps", NULL}, *pp[] = {"steps", "periodic", NULL};
    yajl_val steps = yajl_tree_get(v, sp, yajl_t_array), per = yajl_tree_get(v, pp, yajl_t_array);
    ASSERT_NOT_NULL(steps);
    ASSERT_NOT_NULL(per);
    ASSERT_EQ(steps->u.array.len, 30);
    for (size_t i = 0; i < 30; i++) {
        const char *wp[] = {"wall_ns", NULL}, *op[] = {"outlier", NULL}, *np[] = {"number", NULL}, *gp[] = {"gpu_busy_ns", NULL};
        yajl_val st = steps->u.array.values[i];
        ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(st, np, yajl_t_number)), (long long)i);
        ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(st, wp, yajl_t_number)), i % 5 == 4 ? 40000000ll : 10000000ll);
        ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(st, gp, yajl_t_number)), 7980000ll);
        ASSERT_EQ(YAJL_IS_TRUE(yajl_tree_get(st, op, yajl_t_any)), i % 5 == 4);
    }
    ASSERT_EQ(per->u.array.len, 1);
    const char *pe[] = {"period", NULL}, *ex[] = {"extra_ns", NULL}, *fs[] = {"first_step", NULL};
    ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(per->u.array.values[0], pe, yajl_t_number)), 5);
    ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(per->u.array.values[0], ex, yajl_t_number)), 30000000ll);
    ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(per->u.array.values[0], fs, yajl_t_number)), 4);
    yajl_tree_free(v);
    /* a trace without steps says so */
    ASSERT_EQ(synctop("report --steps " ALEXNET), 0);
    ASSERT_STR_CONTAINS(out_buf, "no steps found");
    /* --step names a range that is not there: said, and the heartbeat or nothing instead */
    ASSERT_EQ(synctop("report --step train " ALEXNET), 0);
    ASSERT_STR_CONTAINS(out_buf, "no range named \"train\" marks three steps or more");
}

/* Against a baseline: the known loop (tests/lib/loop.h), then runs where the periodic call comes
 * every 3rd step (the same site grew from 6 x 30 ms to 10 x 30 ms), or is another API (a new site
 * and a gone one). Blocked totals by construction: 30 x 7.98 ms + 6 x 30 ms = 419.4 ms, and
 * 239.4 + 300 = 539.4 ms (+28.6%). */
TEST(report_against_a_baseline_names_new_grown_and_gone_sites) {
    char old[1024], grew[1024], other[1024], args[4096];
    snprintf(old, sizeof old, "%s", task_path("old.json"));
    snprintf(grew, sizeof grew, "%s", task_path("grew.json"));
    snprintf(other, sizeof other, "%s", task_path("other.json"));
    ASSERT_OK(loop_trace_write(old, NULL));
    ASSERT_OK(loop_trace_write(grew, &(loop_opts){.period = 3}));
    ASSERT_OK(loop_trace_write(other, &(loop_opts){.api = "cudaEventSynchronize"}));
    snprintf(args, sizeof args, "report --baseline '%s' '%s' --fail-if 'blocked>+10%%' --fail-if 'new-sites>0'", old, grew);
    ASSERT_EQ(synctop(args), 1);
    ASSERT_STR_CONTAINS(out_buf, "host blocked 539.400 ms, baseline 419.400 ms (+28.6%)");
    ASSERT_STR_CONTAINS(out_buf, "0 new call sites, 1 grew, 0 shrank, 0 gone");
    ASSERT_STR_CONTAINS(out_buf, "grew: cudaDeviceSynchronize, 300.000 ms blocked, baseline 180.000 ms (+66.7%)");
    ASSERT_STR_CONTAINS(out_buf, "FAIL blocked>+10%: 539.400 ms, baseline 419.400 ms (+28.6%)\n");
    ASSERT_STR_CONTAINS(out_buf, "ok   new-sites>0: 0 call sites the baseline did not have");
    fits_80_columns("report --baseline");
    snprintf(args, sizeof args, "report --baseline '%s' '%s' --fail-if 'new-sites>0'", old, other);
    ASSERT_EQ(synctop(args), 1);
    ASSERT_STR_CONTAINS(out_buf, "new: cudaEventSynchronize, 180.000 ms blocked in 6 calls");
    ASSERT_STR_CONTAINS(out_buf, "gone: cudaDeviceSynchronize (was 180.000 ms)");
    ASSERT_STR_CONTAINS(out_buf, "FAIL new-sites>0: 1 call site the baseline did not have");
    /* the same run against itself: nothing new, nothing moved, the checks hold */
    snprintf(args, sizeof args, "report --baseline '%s' '%s' --fail-if 'blocked>+10%%' --fail-if 'new-sites>0' --format json",
             old, old);
    ASSERT_EQ(synctop(args), 0);
    ASSERT_STR_CONTAINS(out_buf, "\"new_sites\":0,\"grew\":0,\"shrank\":0,\"gone\":0");
    /* a name that matches nothing, on either side, says so */
    snprintf(args, sizeof args, "report --baseline '%s' '%s' --fail-if 'site:mistyped>+10%%'", old, old);
    ASSERT_EQ(synctop(args), 0);
    ASSERT_STR_CONTAINS(out_buf, "(no call site that blocked matches it in these sources)");
    /* a baseline-only check with no baseline: a usage error, said before any reading */
    snprintf(args, sizeof args, "report '%s' --fail-if 'new-sites>0'", old);
    ASSERT_EQ(synctop(args), 2);
    ASSERT_STR_CONTAINS(out_buf, "compares with a baseline: give --baseline OLD");
    /* a signed value is a change, and only in % */
    snprintf(args, sizeof args, "report '%s' --fail-if 'blocked>+10ms'", old);
    ASSERT_EQ(synctop(args), 2);
    ASSERT_STR_CONTAINS(out_buf, "a signed value is a change against the baseline");
}

/* --ranks on the two real ranks: the collectives, their stragglers and the waits equal what
 * tests/unit/ranks_expected.py finds in the JSON on its own:
 *   ranks_expected.py samples/traces/kineto/sampled_rank-0.json.gz samples/traces/kineto/sampled_rank-1.json.gz */
/* Generated by tests/unit/ranks_expected.py: do not edit by hand. */
static const struct { unsigned stream; unsigned ordinal; long long first, last; int straggler; long long wait; } k_colls[] = {
    {84, 0, 1682725898094377000LL, 1682725898129911000LL, 1, 35534000LL},
    {84, 1, 1682725898125052000LL, 1682725898234342000LL, 1, 109290000LL},
    {84, 2, 1682725898295662000LL, 1682725898298964000LL, 1, 3302000LL},
    {84, 3, 1682725898348496000LL, 1682725898512687000LL, 1, 164191000LL},
    {203, 0, 1682725898585321000LL, 1682725898585405000LL, 1, 84000LL},
    {84, 4, 1682725898701451000LL, 1682725898741096000LL, 0, 39645000LL},
    {84, 5, 1682725898854684000LL, 1682725898899992000LL, 1, 45308000LL},
    {84, 6, 1682725899038545000LL, 1682725899131066000LL, 0, 92521000LL},
    {84, 7, 1682725899146327000LL, 1682725899168655000LL, 1, 22328000LL},
    {203, 1, 1682725899185890000LL, 1682725899187182000LL, 1, 1292000LL},
};
static const struct { int rank; long long last, made_wait, waited, clock_offset, clock_spread, clock_n; } k_ranks[] = {
    {0, 2, 132166000LL, 381329000LL, -85000LL, 10669250LL, 10},
    {1, 8, 381329000LL, 132166000LL, 85000LL, 10669250LL, 10},
};

TEST(report_ranks_names_the_stragglers_at_collectives) {
    char args[2048];
    snprintf(args, sizeof args, "report --ranks --format json -o '%s' '%s/sampled_rank-0.json.gz' '%s/sampled_rank-1.json.gz'",
             task_path("rk.json"), KINETO_TRACE_DIR, KINETO_TRACE_DIR);
    ASSERT_EQ(synctop(args), 0);
    FILE *f = fopen(task_path("rk.json"), "r");
    ASSERT_NOT_NULL(f);
    static char buf[1 << 21];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char err[256];
    yajl_val v = yajl_tree_parse(buf, err, sizeof err);
    if (v == NULL)
        TASK_FAIL_("json: %s", err);
    const char *cp[] = {"ranks", "collectives", NULL}, *rp[] = {"ranks", "ranks", NULL};
    yajl_val colls = yajl_tree_get(v, cp, yajl_t_array), ranks = yajl_tree_get(v, rp, yajl_t_array);
    ASSERT_NOT_NULL(colls);
    ASSERT_NOT_NULL(ranks);
    ASSERT_EQ(colls->u.array.len, sizeof k_colls / sizeof k_colls[0]);
    for (size_t i = 0; i < colls->u.array.len; i++) {
        yajl_val c = colls->u.array.values[i];
        const char *st[] = {"stream", NULL}, *od[] = {"ordinal", NULL}, *fi[] = {"first", NULL}, *la[] = {"last", NULL},
                   *sr[] = {"straggler_rank", NULL}, *wa[] = {"wait_ns", NULL};
        ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(c, st, yajl_t_number)), k_colls[i].stream);
        ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(c, od, yajl_t_number)), k_colls[i].ordinal);
        ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(c, fi, yajl_t_number)), k_colls[i].first);
        ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(c, la, yajl_t_number)), k_colls[i].last);
        ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(c, sr, yajl_t_number)), k_colls[i].straggler);
        ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(c, wa, yajl_t_number)), k_colls[i].wait);
    }
    ASSERT_EQ(ranks->u.array.len, 2);
    for (size_t i = 0; i < 2; i++) {
        yajl_val x = ranks->u.array.values[i];
        const char *rk[] = {"rank", NULL}, *la[] = {"last", NULL}, *mw[] = {"made_wait_ns", NULL}, *wd[] = {"waited_ns", NULL};
        const char *co[] = {"clock_offset_ns", NULL}, *cs[] = {"clock_spread_ns", NULL}, *cn[] = {"clock_collectives", NULL};
        ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(x, rk, yajl_t_number)), k_ranks[i].rank);
        ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(x, la, yajl_t_number)), k_ranks[i].last);
        ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(x, mw, yajl_t_number)), k_ranks[i].made_wait);
        ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(x, wd, yajl_t_number)), k_ranks[i].waited);
        ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(x, co, yajl_t_number)), k_ranks[i].clock_offset);
        ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(x, cs, yajl_t_number)), k_ranks[i].clock_spread);
        ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(x, cn, yajl_t_number)), k_ranks[i].clock_n);
    }
    yajl_tree_free(v);
    /* the text: a line per rank, the worst collectives with what held the last rank */
    snprintf(args, sizeof args, "report --ranks '%s/sampled_rank-0.json.gz' '%s/sampled_rank-1.json.gz'", KINETO_TRACE_DIR,
             KINETO_TRACE_DIR);
    ASSERT_EQ(synctop(args), 0);
    ASSERT_STR_CONTAINS(out_buf, "10 collectives matched");
    /* the sampled ranks' SendRecv ends scatter by milliseconds: no offset is measured; the offsets,
     * spreads and the worst wait (stream 84's fourth SendRecv, ordinal 3) are ranks_expected.py's
     * figures above, in ms */
    char want[256];
    snprintf(want, sizeof want, "rank 0 %+.3f ms (spread %.3f); rank 1 %+.3f ms (spread\n    %.3f)",
             (double)k_ranks[0].clock_offset / 1e6, (double)k_ranks[0].clock_spread / 1e6,
             (double)k_ranks[1].clock_offset / 1e6, (double)k_ranks[1].clock_spread / 1e6);
    ASSERT_STR_CONTAINS(out_buf, want);
    ASSERT_STR_CONTAINS(out_buf, "No offset is measured");
    ASSERT_EQ(k_colls[3].ordinal, 3);
    snprintf(want, sizeof want, "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t#%u on stream %u: rank %d last,\n      %.3f ms",
             k_colls[3].ordinal, k_colls[3].stream, k_colls[3].straggler, (double)k_colls[3].wait / 1e6);
    ASSERT_STR_CONTAINS(out_buf, want);
    fits_80_columns("report --ranks");
    /* one rank: nothing to match */
    ASSERT_EQ(synctop("report --ranks " ALEXNET), 0);
    ASSERT_STR_CONTAINS(out_buf, "no collectives (NCCL kernels) seen on two ranks or more");
}

/* Three ranks whose all-reduces end at the same moment, rank 1's clock 5 ms ahead: by
 * construction its offset is +5 ms with no spread, and the others' 0. */
static void write_rank_trace(const char *path, int rank, long long skew_ns) {
    FILE *f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    fprintf(f, "{\"distributedInfo\": {\"rank\": %d, \"world_size\": 3}, \"traceEvents\": [\n", rank);
    for (int k = 0; k < 6; k++) {
        long long end = 1700000000000000000LL + (long long)k * 20000000LL + 10000000LL + skew_ns;
        long long start = end - 4000000LL + rank * 1000000LL; /* arrivals differ; the end is shared */
        fprintf(f,
                "%s{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclDevKernel_AllReduce_Sum_f32_RING_LL\", "
                "\"pid\": 0, \"tid\": 7, \"ts\": %lld.%03lld, \"dur\": %lld.%03lld, \"args\": {\"device\": 0, "
                "\"stream\": 7, \"correlation\": %d}}\n",
                k ? "," : "", start / 1000, start % 1000, (end - start) / 1000, (end - start) % 1000, k + 1);
    }
    fprintf(f, "]}\n");
    fclose(f);
}

TEST(report_ranks_measures_each_clock_from_the_collectives) {
    char paths[3][1024], args[4096];
    for (int r = 0; r < 3; r++) {
        char name[32];
        snprintf(name, sizeof name, "rank%d.json", r);
        snprintf(paths[r], sizeof paths[r], "%s", task_path(name));
        write_rank_trace(paths[r], r, r == 1 ? 5000000LL : 0);
    }
    snprintf(args, sizeof args, "report --ranks '%s' '%s' '%s'", paths[0], paths[1], paths[2]);
    ASSERT_EQ(synctop(args), 0);
    ASSERT_STR_CONTAINS(out_buf, "rank 0 +0.000 ms (spread 0.000); rank 1 +5.000 ms (spread\n    0.000); rank 2 +0.000 ms");
    ASSERT_STR_CONTAINS(out_buf, "offset (up to 5.000 ms) taken off");
    /* on the job's clock rank 2 arrives last (1 ms after rank 1, 2 ms after rank 0), not the
     * rank whose clock is ahead; each rank's GPU idle is over its own trace, from its first
     * kernel's start (6, 7, 8 ms in) to the last end (110 ms): 104 - 6 x 4, 103 - 6 x 3, 102 - 6 x 2 */
    ASSERT_STR_CONTAINS(out_buf, "  0              24.000    80.000      0.000      6     0       0.000");
    ASSERT_STR_CONTAINS(out_buf, "  1              18.000    85.000      0.000      6     0       0.000");
    ASSERT_STR_CONTAINS(out_buf, "  2              12.000    90.000      0.000      6     6      18.000");
    fits_80_columns("report --ranks, skewed");
}

/* --steps on the real ResNet trace (30 iterations, no ProfilerStep ranges): the data loader's
 * __next__ range is the heartbeat; the walls and the slow steps equal what
 * tests/unit/steps_expected.py finds in the JSON on its own:
 *   steps_expected.py samples/traces/kineto/resnet_2080ti_two_threads.json.gz \
 *       'enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__' */
/* Generated by tests/unit/steps_expected.py: do not edit by hand. */
static const long long k_step_median = 175798000LL;
static const struct { long long wall; int slow; } k_steps[] = {
    {4450612000LL, 1},
    {124228000LL, 0},
    {175798000LL, 0},
    {169228000LL, 0},
    {141430000LL, 0},
    {154006000LL, 0},
    {160412000LL, 0},
    {160211000LL, 0},
    {159290000LL, 0},
    {279782000LL, 0},
    {512400000LL, 1},
    {133486000LL, 0},
    {159308000LL, 0},
    {775045000LL, 1},
    {465483000LL, 1},
    {290866000LL, 0},
    {152806000LL, 0},
    {752777000LL, 1},
    {345558000LL, 0},
    {362426000LL, 0},
    {160630000LL, 0},
    {751539000LL, 1},
    {396857000LL, 0},
    {372641000LL, 0},
    {158721000LL, 0},
    {829409000LL, 1},
    {545705000LL, 1},
    {148120000LL, 0},
    {157107000LL, 0},
};

TEST(report_steps_of_the_real_resnet_loop) {
    char args[2048];
    snprintf(args, sizeof args, "report --steps --format json -o '%s' '%s/resnet_2080ti_two_threads.json.gz'",
             task_path("st.json"), KINETO_TRACE_DIR);
    ASSERT_EQ(synctop(args), 0);
    FILE *f = fopen(task_path("st.json"), "r");
    ASSERT_NOT_NULL(f);
    static char buf[1 << 22];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char err[256];
    yajl_val v = yajl_tree_parse(buf, err, sizeof err);
    if (v == NULL)
        TASK_FAIL_("json: %s", err);
    const char *src[] = {"steps", "source", NULL}, *by[] = {"steps", "by", NULL}, *md[] = {"steps", "median_ns", NULL},
               *sp[] = {"steps", "steps", NULL};
    ASSERT_STR_EQ(YAJL_GET_STRING(yajl_tree_get(v, src, yajl_t_string)), "heartbeat");
    ASSERT_STR_CONTAINS(YAJL_GET_STRING(yajl_tree_get(v, by, yajl_t_string)), "DataLoader");
    ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(v, md, yajl_t_number)), k_step_median);
    yajl_val steps = yajl_tree_get(v, sp, yajl_t_array);
    ASSERT_NOT_NULL(steps);
    ASSERT_EQ(steps->u.array.len, sizeof k_steps / sizeof k_steps[0]);
    for (size_t i = 0; i < steps->u.array.len; i++) {
        const char *wp[] = {"wall_ns", NULL}, *op[] = {"outlier", NULL};
        yajl_val st = steps->u.array.values[i];
        ASSERT_EQ(YAJL_GET_INTEGER(yajl_tree_get(st, wp, yajl_t_number)), k_steps[i].wall);
        ASSERT_EQ(YAJL_IS_TRUE(yajl_tree_get(st, op, yajl_t_any)), k_steps[i].slow);
    }
    yajl_tree_free(v);
}

/* ---- host clocks measured through relays ---- */

/* One rank on host, whose clock is skew_ns ahead of the reference: a GPU whose NCCL kernels (three
 * collectives) start at arrive[k] and end at end[k], both on the reference clock. */
static void add_nccl_rank(st_store *s, int rank, const char *host, int64_t skew_ns, const uint64_t arrive[3],
                          const uint64_t end[3]) {
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 0x5000 + (uint64_t)rank});
    ASSERT_NOT_NULL(enc);
    tp_process p = {.kind = TP_K_PROCESS, .device = TP_NO_DEVICE, .pid = 9000 + (uint32_t)rank,
                    .host = tp_enc_intern_cstr(enc, host), .cmdline = tp_enc_intern_cstr(enc, "train.py"),
                    .rank = rank, .world = 4};
    ASSERT_OK(tp_enc_add(enc, &p));
    tp_device d = {.kind = TP_K_DEVICE, .device = 0, .name = tp_enc_intern_cstr(enc, "GPU")};
    ASSERT_OK(tp_enc_add(enc, &d));
    tp_stream st = {.kind = TP_K_STREAM, .device = 0, .stream = 13, .context = 1};
    ASSERT_OK(tp_enc_add(enc, &st));
    for (int k = 0; k < 3; k++) {
        tp_kernel kr = {.kind = TP_K_KERNEL, .device = 0, .stream = 13, .start = (uint64_t)((int64_t)arrive[k] + skew_ns),
                        .end = (uint64_t)((int64_t)end[k] + skew_ns), .correlation = (uint32_t)k + 1,
                        .name = tp_enc_intern_cstr(enc, "ncclKernel_AllReduce_RING_LL_Sum_float")};
        ASSERT_OK(tp_enc_add(enc, &kr));
    }
    tp_buf b = {0};
    ASSERT_OK(tp_enc_finish_flags(enc, TP_BF_END, &b));
    ASSERT_OK(st_store_add_batch(s, b.data, b.len, NULL));
    tp_buf_free(&b);
    tp_enc_destroy(&enc);
}

/* The text report with --ranks, its lines joined (wrapping is not what is checked here). */
static const char *ranks_text(st_store *s) {
    st_store_commit(s);
    an_result r;
    an_ranks rk;
    ASSERT_OK(an_analyze(s, NULL, &r, NULL));
    ASSERT_OK(an_ranks_find(s, &r, &rk, NULL));
    FILE *out = fopen(task_path("ranks.txt"), "w");
    ASSERT_NOT_NULL(out);
    rp_opts o = {.format = RP_TEXT, .source = "test", .ranks = &rk};
    ASSERT_OK(rp_write(out, s, &r, &o));
    fclose(out);
    slurp(task_path("ranks.txt"));
    fits_80_columns("report --ranks, host clocks");
    size_t j = 0;
    for (size_t i = 0; out_buf[i]; i++) {
        if (out_buf[i] == '\n') {
            while (out_buf[i + 1] == ' ')
                i++;
            out_buf[j++] = ' ';
        } else {
            out_buf[j++] = out_buf[i];
        }
    }
    out_buf[j] = '\0';
    an_ranks_free(&rk);
    an_result_free(&r);
    return out_buf;
}

/* Four ranks on two hosts whose clocks are 2.5 s ahead and 1 ms behind, each measured: the report
 * names each host's offset and uncertainty with its ranks. Rank 2 arrives last at every collective,
 * 100 us after the others (each collective ends at one moment on every rank): with the hosts'
 * clocks known to 0.2 ms that lead is said to be uncertain, known to 0.01 ms it is not; a host not
 * measured is said to be on its own clock. */
TEST(report_ranks_states_each_hosts_clock_and_what_it_cannot_tell) {
    static const uint64_t t0 = 1700000000000000000ull;
    for (int round = 0; round < 3; round++) {
        st_store *s = st_store_new(NULL);
        ASSERT_NOT_NULL(s);
        for (int rank = 0; rank < 4; rank++) {
            uint64_t a[3], e[3];
            for (int k = 0; k < 3; k++) {
                a[k] = t0 + (uint64_t)k * 10000000ull + (rank == 2 ? 100000u : 0) + (uint64_t)rank * 10u;
                e[k] = t0 + (uint64_t)k * 10000000ull + 1000000u;
            }
            add_nccl_rank(s, rank, rank < 2 ? "node-a" : "node-b", rank < 2 ? 2500000000LL : -1000000LL, a, e);
        }
        uint64_t unc = round == 0 ? 200000 : 10000;
        ASSERT_GE(st_store_set_host_clock(s, "node-a", 2500000000LL, unc), 0);
        if (round != 2)
            ASSERT_GE(st_store_set_host_clock(s, "node-b", -1000000LL, unc), 0);
        const char *text = ranks_text(s);
        if (round == 2) {
            ASSERT_STR_CONTAINS(text, "node-a +2500.000 ms +/- 0.010 ms (rank 0, rank 1)");
            ASSERT_STR_CONTAINS(text, "node-b not measured, on its own clock (rank 2, rank 3)");
            ASSERT_STR_CONTAINS(text, "the others are not aligned with them");
        } else {
            ASSERT_STR_CONTAINS(text, round == 0 ? "node-a +2500.000 ms +/- 0.200 ms (rank 0, rank 1); node-b -1.000 "
                                                   "ms +/- 0.200 ms (rank 2, rank 3)"
                                                 : "node-a +2500.000 ms +/- 0.010 ms (rank 0, rank 1); node-b -1.000 "
                                                   "ms +/- 0.010 ms (rank 2, rank 3)");
            ASSERT_STR_CONTAINS(text, "Every rank's events are on this machine's clock within that");
            ASSERT_STR_CONTAINS(text, "rank 2 last, 0.100 ms after the first");
        }
        if (round == 0)
            ASSERT_STR_CONTAINS(text, "which rank came last is not certain");
        else
            ASSERT(strstr(text, "not certain") == NULL);
        st_store_destroy(&s);
    }
}
