/*
 * The analysis (analysis/analysis.c) on the five real Kineto traces in samples/traces/kineto and on small
 * hand-built timelines whose bubbles and causes are known exactly.
 *
 * Expected figures for the real traces come from the JSON itself, summed with Python:
 *   python3 -c 'import gzip,json; ev=json.load(gzip.open(F))["traceEvents"];
 *     print(sum(round(e["dur"]*1000) for e in ev if e.get("cat")=="cuda_runtime" and e["name"]==API))'
 * (cudaMemcpyAsync: only the calls whose gpu_memcpy, by correlation, names Pageable memory), and the
 * busy time as the union of the kernel/gpu_memcpy/gpu_memset intervals.
 */
#include <dirent.h>
#include <string.h>

#include "analysis.h"
#include "busy.h"
#include "steps.h"
#include "advice.h"
#include "compare.h"
#include "stalls.h"
#include "hta.h"
#include "store.h"
#include "load.h"
#include "synctop/codec.h"
#include "synctop/file.h"
#include "task.h"

static st_store *load_sample(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", KINETO_TRACE_DIR, name);
    st_store *s = st_store_new(NULL);
    ASSERT_NOT_NULL(s);
    err_msg err = {{0}};
    int rc = ingest_file(s, path, NULL, NULL, &err);
    if (rc != 0)
        fprintf(stderr, "%s\n", err.msg);
    ASSERT_OK(rc);
    st_store_commit(s);
    return s;
}

/* The two ranks of samples/traces/kineto in one store: two processes, each with its GPU. */
static st_store *load_ranks(void) {
    st_store *s = st_store_new(NULL);
    ASSERT_NOT_NULL(s);
    for (int k = 0; k < 2; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/sampled_rank-%d.json.gz", KINETO_TRACE_DIR, k);
        ASSERT_OK(ingest_file(s, path, NULL, NULL, NULL));
    }
    st_store_commit(s);
    return s;
}

static const an_site *site_by_api(const st_store *s, const an_result *r, const char *api) {
    for (size_t i = 0; i < r->n_sites; i++)
        if (strcmp(st_str(s, r->sites[i].name), api) == 0)
            return &r->sites[i];
    return NULL;
}

static uint64_t rule_count(const an_result *r, int rule) {
    uint64_t n = 0;
    for (size_t i = 0; i < r->n_findings; i++)
        if (r->findings[i].rule == rule)
            n += r->findings[i].count;
    return n;
}

/* The sites of one API (one per call site) together: their count, total and kind. */
static void check_site(const st_store *s, const an_result *r, const char *api, uint64_t count, uint64_t total_ns, int kind) {
    uint64_t n = 0, total = 0;
    size_t sites = 0;
    for (size_t i = 0; i < r->n_sites; i++)
        if (strcmp(st_str(s, r->sites[i].name), api) == 0) {
            n += r->sites[i].count;
            total += r->sites[i].total_ns;
            ASSERT_EQ(r->sites[i].kind, kind);
            sites++;
        }
    if (sites == 0)
        TASK_FAIL_("no site for %s", api);
    ASSERT_UEQ(n, count);
    ASSERT_UEQ(total, total_ns);
}

/* Per-stream counts of GPU records, from the store's lanes. */
static uint64_t stream_count(const st_store *s, uint32_t stream, int kind) {
    uint64_t n = 0;
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (li->kind != ST_LANE_STREAM || li->id != stream)
            continue;
        size_t ne;
        const st_event *ev = st_lane_events(s, l, &ne);
        for (size_t i = 0; i < ne; i++)
            n += (int)st_ev_kind(s, &ev[i]) == kind;
    }
    return n;
}

TEST(analysis_alexnet_blocked_totals_match_the_trace) {
    st_store *s = load_sample("alexnet_a100_sync_heavy.json.gz");
    an_result r;
    ASSERT_OK(an_analyze(s, NULL, &r, NULL));
    /* 52 blocking calls, 6.612315 s in all, per API as the trace's own durations sum. */
    ASSERT_EQ(r.n_blocks, 52);
    ASSERT_UEQ(r.blocked_ns, 559000ull + 938000ull + 6553827000ull + 56991000ull);
    check_site(s, &r, "cudaStreamSynchronize", 16, 559000, AN_BLOCK_SYNC);
    check_site(s, &r, "cudaDeviceSynchronize", 5, 938000, AN_BLOCK_SYNC);
    check_site(s, &r, "cudaFree", 15, 6553827000ull, AN_BLOCK_ALLOC);
    check_site(s, &r, "cudaMemcpyAsync", 16, 56991000, AN_BLOCK_PAGEABLE);
    /* Sites come largest first. */
    for (size_t i = 1; i < r.n_sites; i++)
        ASSERT(r.sites[i - 1].total_ns >= r.sites[i].total_ns);
    /* Counts per stream: kernels 73 + 6, copies 16 on stream 7, memsets 2 + 1, syncs 32 + 4 (+5 device-wide). */
    ASSERT_EQ(stream_count(s, 7, TP_K_KERNEL), 73);
    ASSERT_EQ(stream_count(s, 20, TP_K_KERNEL), 6);
    ASSERT_EQ(stream_count(s, 7, TP_K_MEMCPY), 16);
    ASSERT_EQ(stream_count(s, 7, TP_K_MEMSET), 2);
    ASSERT_EQ(stream_count(s, 20, TP_K_MEMSET), 1);
    ASSERT_EQ(stream_count(s, 7, TP_K_SYNC), 32);
    ASSERT_EQ(stream_count(s, 20, TP_K_SYNC), 4);
    ASSERT_EQ(stream_count(s, TP_NO_ID, TP_K_SYNC), 5);
    /* One A100; busy = the union of its kernels, copies and memsets. */
    ASSERT_EQ(r.n_devices, 1);
    const an_device *d = &r.devices[0];
    ASSERT_UEQ(d->kernels, 79);
    ASSERT_UEQ(d->copies, 16);
    ASSERT_UEQ(d->memsets, 3);
    ASSERT_UEQ(d->syncs, 41);
    ASSERT_UEQ(d->busy_ns, 66141000ull);
    ASSERT_UEQ(d->busy_ns + d->idle_ns, r.t1 - r.t0);
    uint64_t by_cause = 0;
    for (int c = 0; c < AN_CAUSE_N_; c++)
        by_cause += d->idle_by_cause[c];
    ASSERT_UEQ(by_cause, d->idle_ns);
    ASSERT_UEQ(d->blocked_ns, r.blocked_ns);
    /* The rules: 21 synchronization calls, 16 pageable async copies, long GPU gaps (the 6 s
     * cudaFree stalls are far above 500 ms), and the gap names the call that caused it. */
    ASSERT_UEQ(rule_count(&r, AN_RULE_SYNC_API), 21);
    ASSERT_UEQ(rule_count(&r, AN_RULE_PAGEABLE_MEMCPY), 16);
    ASSERT_UEQ(rule_count(&r, AN_RULE_SYNC_MEMCPY), 0);
    ASSERT(rule_count(&r, AN_RULE_GPU_GAPS) >= 1);
    for (size_t i = 0; i < r.n_findings; i++)
        if (r.findings[i].rule == AN_RULE_GPU_GAPS) {
            ASSERT(r.findings[i].max_ns >= 500000000ull);
            ASSERT_STR_EQ(st_str(s, r.findings[i].name), "cudaFree");
        }
    /* Bubbles: sorted, inside the trace, each blocked one pointing at a span that touches it: the
     * wait ended inside the bubble (a wait that ended before it began did not keep the host from
     * ending it; one charged must have ended before the host submitted the work that ended the
     * bubble, which comes before that work starts) and began before the bubble ended. */
    ASSERT(r.n_bubbles > 0);
    for (size_t i = 0; i < r.n_bubbles; i++) {
        const an_bubble *b = &r.bubbles[i];
        ASSERT(b->end > b->start);
        ASSERT(b->start >= r.t0 && b->end <= r.t1);
        if (i)
            ASSERT(r.bubbles[i - 1].start <= b->start);
        if (b->cause == AN_CAUSE_BLOCK) {
            ASSERT(b->block < r.n_blocks);
            ASSERT(r.blocks[b->block].end >= b->start && r.blocks[b->block].end <= b->end);
            ASSERT(r.blocks[b->block].start < b->end);
        } else
            ASSERT_UEQ(b->block, AN_NONE);
    }
    an_result_free(&r);
    st_store_destroy(&s);
}

TEST(analysis_single_stream_trace) {
    st_store *s = load_sample("event_sync_single_stream.json.gz");
    an_result r;
    ASSERT_OK(an_analyze(s, NULL, &r, NULL));
    ASSERT_EQ(r.n_blocks, 4);
    check_site(s, &r, "cudaStreamSynchronize", 1, 6000, AN_BLOCK_SYNC);
    check_site(s, &r, "cudaEventSynchronize", 1, 34000, AN_BLOCK_SYNC);
    check_site(s, &r, "cudaDeviceSynchronize", 1, 8000, AN_BLOCK_SYNC);
    check_site(s, &r, "cudaMemcpyAsync", 1, 29000, AN_BLOCK_PAGEABLE);
    ASSERT_EQ(r.n_devices, 1);
    ASSERT_UEQ(r.devices[0].busy_ns, 51000);
    ASSERT_UEQ(r.devices[0].kernels, 4);
    ASSERT_UEQ(r.devices[0].copies, 1);
    ASSERT_UEQ(rule_count(&r, AN_RULE_SYNC_API), 3);
    ASSERT_UEQ(rule_count(&r, AN_RULE_PAGEABLE_MEMCPY), 1);
    /* By hand from the JSON (us, the trace's own integer timestamps): the GPU's work stops with the
     * pageable copy's end (270 + 2 = 272) and starts again with spin_kernel at 372, launched at 362: a
     * 100 us bubble. The waits that end in it before that launch are the pageable cudaMemcpyAsync
     * (252..281) and cudaStreamSynchronize (282..288); the latest to end, the sync, is charged, the
     * chain of waits having begun at 252. Its share: the 15 us the waits cover of the bubble
     * (272..281 and 282..288), then, of the host's 1 us between them (281..282) and the 84 us after
     * the sync, the GPU time the chain held the host back for: from the end of the bubble before
     * (236..270; later than 252) to 272, 2 us. 17 us in all, from the bubble's start to 289; then
     * the host's own (289..362) and launch latency (362..372). */
    const an_bubble *big = NULL;
    for (size_t i = 0; i < r.n_bubbles; i++)
        if (r.bubbles[i].lane == AN_DEVICE_LANE && r.bubbles[i].end - r.bubbles[i].start == 100000)
            big = &r.bubbles[i];
    ASSERT_NOT_NULL(big);
    ASSERT_EQ(big->cause, AN_CAUSE_BLOCK);
    ASSERT_STR_EQ(st_str(s, r.blocks[big->block].name), "cudaStreamSynchronize");
    ASSERT_UEQ(r.blocks[big->block].end - r.blocks[big->block].start, 6000);
    an_wait_split bw = an_bubble_parts(&r, big);
    ASSERT_UEQ(bw.block_from, big->start);
    ASSERT_UEQ(bw.block_to - bw.block_from, 17000);
    ASSERT_UEQ(bw.launch_from - big->start, 90000);
    const an_site *st = site_by_api(s, &r, "cudaStreamSynchronize");
    ASSERT_UEQ(st->gpu_idle_ns, 17000);
    an_result_free(&r);
    st_store_destroy(&s);
}

TEST(analysis_sampled_ranks_each_on_its_gpu) {
    st_store *s = load_ranks();
    an_result r;
    ASSERT_OK(an_analyze(s, NULL, &r, NULL));
    ASSERT_EQ(r.n_devices, 2);
    uint64_t busy0 = 0, k = 0;
    for (size_t i = 0; i < r.n_devices; i++) {
        k += r.devices[i].kernels;
        if (r.devices[i].device == 0)
            busy0 = r.devices[i].busy_ns;
    }
    ASSERT_UEQ(k, 1154 + 1104);
    ASSERT_UEQ(busy0, 547656000ull);
    /* One site per rank for the 24 pageable copies each. */
    uint64_t copies = 0;
    for (size_t i = 0; i < r.n_sites; i++)
        if (strcmp(st_str(s, r.sites[i].name), "cudaMemcpyAsync") == 0)
            copies += r.sites[i].count;
    ASSERT_UEQ(copies, 48);
    ASSERT_UEQ(rule_count(&r, AN_RULE_PAGEABLE_MEMCPY), 48);
    an_result_free(&r);
    st_store_destroy(&s);
}

/* ---- hand-built timelines ---- */

typedef struct tl {
    tp_enc *enc;
    st_store *s;
    uint32_t corr;
} tl;

/* A process (producer id) whose batch goes into store s (a new store when NULL). */
static void tl_init_in(tl *t, uint64_t producer, st_store *s) {
    tp_enc_opts eo = {.producer = producer};
    t->enc = tp_enc_new(&eo);
    t->s = s != NULL ? s : st_store_new(NULL);
    t->corr = 1;
    tp_process p = {.kind = TP_K_PROCESS, .device = TP_NO_DEVICE, .pid = 7, .rank = -1, .world = -1,
                    .host = tp_enc_intern_cstr(t->enc, "host"), .cmdline = tp_enc_intern_cstr(t->enc, "train.py")};
    ASSERT_OK(tp_enc_add(t->enc, &p));
    tp_device d = {.kind = TP_K_DEVICE, .device = 0, .name = tp_enc_intern_cstr(t->enc, "Test GPU")};
    ASSERT_OK(tp_enc_add(t->enc, &d));
    tp_stream st = {.kind = TP_K_STREAM, .device = 0, .stream = 7};
    ASSERT_OK(tp_enc_add(t->enc, &st));
    /* Call site 5: a Python frame over a native one. */
    tp_callsite cs = {.kind = TP_K_CALLSITE, .device = TP_NO_DEVICE, .id = 5, .n_frames = 2};
    ASSERT_OK(tp_enc_add(t->enc, &cs));
    tp_frame f0 = {.kind = TP_K_FRAME, .flags = TP_FRAME_NATIVE, .index = 0, .callsite = 5,
                   .func = tp_enc_intern_cstr(t->enc, "cudaStreamSynchronize"),
                   .module = tp_enc_intern_cstr(t->enc, "/usr/lib/libcudart.so.12"), .pc = 0x1234};
    tp_frame f1 = {.kind = TP_K_FRAME, .flags = TP_FRAME_PYTHON, .index = 1, .callsite = 5, .line = 42,
                   .file = tp_enc_intern_cstr(t->enc, "train.py"), .func = tp_enc_intern_cstr(t->enc, "step")};
    ASSERT_OK(tp_enc_add(t->enc, &f0));
    ASSERT_OK(tp_enc_add(t->enc, &f1));
}

static void tl_init(tl *t) {
    tl_init_in(t, 77, NULL);
}

/* A launch call at [a, a+2us) and its kernel at [ks, ke), in us. */
static void tl_kernel(tl *t, uint64_t a, uint64_t ks, uint64_t ke) {
    uint32_t c = t->corr++;
    tp_api api = {.kind = TP_K_API, .flags = TP_F_LAUNCH, .device = 0, .tid = 100, .start = a * 1000,
                  .end = a * 1000 + 2000, .correlation = c, .name = tp_enc_intern_cstr(t->enc, "cudaLaunchKernel")};
    tp_kernel k = {.kind = TP_K_KERNEL, .device = 0, .stream = 7, .start = ks * 1000, .end = ke * 1000,
                   .correlation = c, .name = tp_enc_intern_cstr(t->enc, "gemm")};
    ASSERT_OK(tp_enc_add(t->enc, &api));
    ASSERT_OK(tp_enc_add(t->enc, &k));
}

static void tl_sync(tl *t, uint64_t a, uint64_t b, uint32_t site) {
    tp_api api = {.kind = TP_K_API, .flags = TP_F_BLOCKING, .device = 0, .tid = 100, .start = a * 1000,
                  .end = b * 1000, .correlation = t->corr++, .callsite = site,
                  .name = tp_enc_intern_cstr(t->enc, "cudaStreamSynchronize")};
    ASSERT_OK(tp_enc_add(t->enc, &api));
}

/* The process's batch into the store, not yet committed (another process may follow); its last
 * (TP_BF_END) when ended, else the process is still running. */
static void tl_add_ended(tl *t, int ended) {
    tp_buf out = {0};
    ASSERT_OK(tp_enc_finish_flags(t->enc, ended ? TP_BF_END : 0, &out));
    err_msg err = {{0}};
    int rc = st_store_add_batch(t->s, out.data, out.len, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    ASSERT_OK(rc);
    tp_buf_free(&out);
    tp_enc_destroy(&t->enc);
}

static void tl_add(tl *t) {
    tl_add_ended(t, 1);
}

static void tl_done(tl *t) {
    tl_add(t);
    st_store_commit(t->s);
}

static const an_bubble *device_bubble_at(const an_result *r, uint64_t start_us) {
    for (size_t i = 0; i < r->n_bubbles; i++)
        if (r->bubbles[i].lane == AN_DEVICE_LANE && r->bubbles[i].start == start_us * 1000)
            return &r->bubbles[i];
    return NULL;
}

static void tl_range(tl *t, uint64_t a, uint64_t b, const char *name, uint64_t id);

/* A synchronous copy through pageable memory holds the host while the driver stages the data; the
 * GPU, idle, starts the transfer only then. By hand, in us: kernel A 10..100; cudaMemcpy 150..400,
 * its transfer 300..390; kernel B launched at 402, run 405..600 (15 us after the transfer: no
 * bubble); cudaMemcpy 500..700, its transfer behind B, 640..680. The bubble 100..300: the host's
 * before the call (100..150), the call's after it (150..300); the bubble 600..640 is wholly the
 * second call's: 150 + 40 us of GPU idle the copies cost. */
TEST(analysis_charges_a_blocking_copy_the_idle_before_its_transfer) {
    tl t;
    tl_init(&t);
    tl_kernel(&t, 0, 10, 100);
    static const struct {
        uint64_t a, b, cs, ce;
    } copies[] = {{150, 400, 300, 390}, {500, 700, 640, 680}};
    for (size_t i = 0; i < 2; i++) {
        if (i == 1)
            tl_kernel(&t, 402, 405, 600);
        uint32_t c = t.corr++;
        tp_api api = {.kind = TP_K_API, .flags = TP_F_BLOCKING, .device = 0, .tid = 100, .start = copies[i].a * 1000,
                      .end = copies[i].b * 1000, .correlation = c, .name = tp_enc_intern_cstr(t.enc, "cudaMemcpy")};
        tp_memcpy m = {.kind = TP_K_MEMCPY, .device = 0, .stream = 7, .start = copies[i].cs * 1000,
                       .end = copies[i].ce * 1000, .correlation = c, .bytes = 1 << 20, .copy_kind = TP_COPY_HTOD,
                       .src_kind = TP_MEM_PAGEABLE, .dst_kind = TP_MEM_DEVICE, .src_device = TP_NO_DEVICE,
                       .dst_device = TP_NO_DEVICE};
        ASSERT_OK(tp_enc_add(t.enc, &api));
        ASSERT_OK(tp_enc_add(t.enc, &m));
    }
    tl_done(&t);
    an_result r;
    ASSERT_OK(an_analyze(t.s, NULL, &r, NULL));
    size_t device_bubbles = 0;
    for (size_t i = 0; i < r.n_bubbles; i++)
        device_bubbles += r.bubbles[i].lane == AN_DEVICE_LANE;
    ASSERT_EQ(device_bubbles, 2);
    const an_bubble *first = device_bubble_at(&r, 100), *second = device_bubble_at(&r, 600);
    ASSERT_NOT_NULL(first);
    ASSERT_NOT_NULL(second);
    ASSERT_EQ(first->cause, AN_CAUSE_BLOCK);
    ASSERT_EQ(second->cause, AN_CAUSE_BLOCK);
    uint64_t cause[AN_CAUSE_N_] = {0};
    an_bubble_split(&r, first, 0, UINT64_MAX, cause);
    ASSERT_UEQ(cause[AN_CAUSE_HOST], 50000);
    ASSERT_UEQ(cause[AN_CAUSE_BLOCK], 150000);
    ASSERT_UEQ(cause[AN_CAUSE_LAUNCH], 0);
    const an_site *st = site_by_api(t.s, &r, "cudaMemcpy");
    ASSERT_NOT_NULL(st);
    ASSERT_UEQ(st->gpu_idle_ns, 150000 + 40000);
    an_result_free(&r);
    st_store_destroy(&t.s);
}

/* The process's batch into a trace file at path (its last, TP_BF_END, when ended). */
static void tl_write(tl *t, const char *path, int ended) {
    tp_buf out = {0};
    err_msg err = {{0}};
    ASSERT_OK(tp_enc_finish_flags(t->enc, ended ? TP_BF_END : 0, &out));
    tp_fwriter *w = tp_fwriter_open(path, TP_FW_OVERWRITE, &err);
    ASSERT_NOT_NULL(w);
    ASSERT_OK(tp_fwriter_append(w, out.data, out.len, &err));
    ASSERT_OK(tp_fwriter_close(&w, &err));
    tp_buf_free(&out);
    tp_enc_destroy(&t->enc);
}

/* A process in a file is over where the file ends, whether its last batch came (77) or not (78:
 * killed, or its recording stopped while it ran): read together, 78's GPU is counted from its
 * first event to its last (300..350 us), not to 77's end (600). */
TEST(analysis_counts_a_process_read_from_a_file_to_its_last_event) {
    char p77[1024], p78[1024];
    snprintf(p77, sizeof p77, "%s", task_path("77.trace"));
    snprintf(p78, sizeof p78, "%s", task_path("78.trace"));
    tl a, b;
    tl_init_in(&a, 77, NULL);
    tl_kernel(&a, 100, 110, 200);
    tl_kernel(&a, 500, 510, 600);
    tl_write(&a, p77, 1);
    tl_init_in(&b, 78, a.s);
    tl_kernel(&b, 300, 310, 350);
    tl_write(&b, p78, 0);
    st_store_destroy(&a.s);
    st_store *s = st_store_new(NULL);
    const char *paths[] = {p77, p78};
    err_msg err = {{0}};
    ASSERT_OK(ingest_files(s, paths, 2, 0, INGEST_ALIGN_CLOCK, NULL, NULL, &err));
    st_store_commit(s);
    an_result r;
    ASSERT_OK(an_analyze(s, NULL, &r, NULL));
    ASSERT_EQ(r.n_devices, 2);
    for (size_t k = 0; k < r.n_devices; k++) {
        uint64_t pid = st_producer_get(s, r.devices[k].producer)->producer;
        ASSERT(st_producer_get(s, r.devices[k].producer)->ended);
        ASSERT_UEQ(r.devices[k].span_ns, (pid == 77 ? 500 : 50) * 1000);
    }
    an_result_free(&r);
    st_store_destroy(&s);
}

/* Two processes traced over different times: each one's GPU is counted from its first event, to its
 * last when it has ended, else to the range's end (it is still traced; its GPU is seen idle). By
 * hand, in us: process 77 (ended) has events over 100..600 and kernels 110..200 and 510..600; 78
 * (running) a launch at 300 and a kernel 310..350; the store spans 100..600. */
TEST(analysis_counts_each_process_gpu_over_its_own_trace) {
    tl a, b;
    tl_init_in(&a, 77, NULL);
    tl_kernel(&a, 100, 110, 200);
    tl_kernel(&a, 500, 510, 600);
    tl_add_ended(&a, 1);
    tl_init_in(&b, 78, a.s);
    tl_kernel(&b, 300, 310, 350);
    tl_add_ended(&b, 0);
    st_store_commit(a.s);
    static const struct {
        uint64_t t0, t1; /* us; 0, 0: the whole store */
        uint64_t span77, span78;
    } cases[] = {{0, 0, 500, 300}, {0, 1000, 500, 700}, {150, 400, 250, 100}, {320, 1000, 280, 680}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        an_opts o = {.t0 = cases[i].t0 * 1000, .t1 = cases[i].t1 * 1000};
        an_result r;
        ASSERT_OK(an_analyze(a.s, &o, &r, NULL));
        ASSERT_EQ(r.n_devices, 2);
        for (size_t k = 0; k < r.n_devices; k++) {
            const an_device *d = &r.devices[k];
            uint64_t pid = st_producer_get(a.s, d->producer)->producer;
            ASSERT_UEQ(d->span_ns, (pid == 77 ? cases[i].span77 : cases[i].span78) * 1000);
            ASSERT_UEQ(d->busy_ns + d->idle_ns, d->span_ns);
        }
        an_result_free(&r);
    }
    st_store_destroy(&a.s);
}

/* The host's share of the GPU idle goes to the innermost range the submitting thread was in, the
 * numbered steps as one. */
TEST(analysis_host_idle_goes_to_the_innermost_range) {
    tl t;
    tl_init(&t);
    tl_range(&t, 0, 1000, "step#1", 1);
    tl_range(&t, 150, 260, "load", 2); /* inside step#1 */
    tl_range(&t, 1000, 2000, "step#2", 3);
    tl_kernel(&t, 0, 10, 100);       /* A */
    tl_kernel(&t, 300, 310, 320);    /* B, submitted at 300: the bubble 100..310 is the host's */
    tl_kernel(&t, 1000, 1010, 1100); /* C */
    tl_sync(&t, 1020, 1101, 5);      /* waits for C */
    tl_kernel(&t, 1300, 1310, 1320); /* D, submitted at 1300: the bubble 1100..1310 follows the wait */
    tl_done(&t);
    an_result r;
    ASSERT_OK(an_analyze(t.s, NULL, &r, NULL));
    /* Bubble 100..310, the host's: 100..150 and 260..310 in step#1, 150..260 in load.
     * Bubble 320..1010, the host's (C submitted at 1000): 320..1000 in step#1, 1000..1010 in step#2.
     * Bubble 1100..1310: the wait's 1100..1181 (1 us overlapped, then the 80 us of C it held the
     * host back for, from its start at 1020), the host's 1181..1300 in step#2, launch 1300..1310. */
    ASSERT_EQ(r.n_host_ranges, 2);
    ASSERT_STR_EQ(st_str(t.s, r.host_ranges[0].name), "step#1");
    ASSERT_EQ(r.host_ranges[0].numbered, 1);
    ASSERT_UEQ(r.host_ranges[0].idle_ns, (50 + 50 + 680 + 10 + 119) * 1000ull);
    ASSERT_STR_EQ(st_str(t.s, r.host_ranges[1].name), "load");
    ASSERT_EQ(r.host_ranges[1].numbered, 0);
    ASSERT_UEQ(r.host_ranges[1].idle_ns, 110000);
    const an_device *d = &r.devices[0];
    ASSERT_UEQ(d->idle_by_cause[AN_CAUSE_HOST], (210 + 690 + 119) * 1000ull);
    ASSERT_UEQ(d->idle_by_cause[AN_CAUSE_BLOCK], 81000);
    ASSERT_UEQ(d->idle_by_cause[AN_CAUSE_LAUNCH], 10000);
    an_result_free(&r);
    st_store_destroy(&t.s);
}

TEST(analysis_bubbles_get_their_causes) {
    tl t;
    tl_init(&t);
    tl_kernel(&t, 0, 10, 100);   /* A runs 10..100 */
    tl_sync(&t, 5, 101, 5);      /* the host waits for A at train.py:42 */
    tl_kernel(&t, 300, 310, 320); /* B: submitted after the wait ended, 200 us later */
    tl_kernel(&t, 400, 600, 650); /* C: submitted at 400 while the GPU was idle since 320: host */
    tl_kernel(&t, 610, 700, 710); /* D: submitted at 610, queued while C ran, starts late: launch */
    tl_kernel(&t, 712, 715, 720); /* E: a 5 us gap, below the 20 us threshold: no bubble */
    tl_done(&t);
    an_result r;
    ASSERT_OK(an_analyze(t.s, NULL, &r, NULL));
    ASSERT_EQ(r.n_blocks, 1);
    ASSERT_UEQ(r.blocks[0].start, 5000);
    ASSERT_UEQ(r.blocks[0].device, 0);
    const an_bubble *b1 = device_bubble_at(&r, 100), *b2 = device_bubble_at(&r, 320), *b3 = device_bubble_at(&r, 650);
    ASSERT_NOT_NULL(b1);
    ASSERT_NOT_NULL(b2);
    ASSERT_NOT_NULL(b3);
    ASSERT_UEQ(b1->end, 310000);
    ASSERT_EQ(b1->cause, AN_CAUSE_BLOCK);
    ASSERT_UEQ(b1->block, 0);
    ASSERT_EQ(b2->cause, AN_CAUSE_HOST);
    ASSERT_EQ(b3->cause, AN_CAUSE_LAUNCH);
    ASSERT_NULL(device_bubble_at(&r, 710));
    /* Stream bubbles exist too (one stream here: the same three). */
    size_t stream_bubbles = 0;
    for (size_t i = 0; i < r.n_bubbles; i++)
        stream_bubbles += r.bubbles[i].lane != AN_DEVICE_LANE;
    ASSERT_EQ(stream_bubbles, 3);
    /* The wait cost the GPU 96 us of its 210 us bubble (100..310): the 1 us it overlapped
     * (100..101) and, of the 209 us after it, the 95 us of work it held the host back for (from
     * its start at 5 to the bubble); the rest is the host's (196..300) and launch latency
     * (300..310). The site says so, with its frames. */
    ASSERT_UEQ(r.blocks[0].gpu_idle_ns, 96000);
    ASSERT_UEQ(an_bubble_parts(&r, b1).block_from, 100000);
    ASSERT_UEQ(an_bubble_parts(&r, b1).block_to, 196000);
    ASSERT_UEQ(an_bubble_parts(&r, b1).launch_from, 300000);
    ASSERT_EQ(r.n_sites, 1);
    ASSERT_UEQ(r.sites[0].gpu_idle_ns, 96000);
    ASSERT_UEQ(r.sites[0].total_ns, 96000);
    size_t nf = 0;
    const st_frame *f = st_callsite_frames(t.s, r.sites[0].callsite, &nf);
    ASSERT_EQ(nf, 2);
    ASSERT_STR_EQ(st_str(t.s, f[1].file), "train.py");
    ASSERT_EQ(f[1].line, 42);
    const an_device *d = &r.devices[0];
    ASSERT_UEQ(d->busy_ns, (90 + 10 + 50 + 10 + 5) * 1000ull);
    ASSERT_UEQ(d->idle_by_cause[AN_CAUSE_BLOCK], 96000);
    ASSERT_UEQ(d->idle_by_cause[AN_CAUSE_HOST], 280000 + 104000);
    ASSERT_UEQ(d->idle_by_cause[AN_CAUSE_LAUNCH], 50000 + 10000);
    /* A sync-api finding at that site; no GPU gap above 500 ms. */
    ASSERT_UEQ(rule_count(&r, AN_RULE_SYNC_API), 1);
    ASSERT_UEQ(rule_count(&r, AN_RULE_GPU_GAPS), 0);
    for (size_t i = 0; i < r.n_findings; i++)
        if (r.findings[i].rule == AN_RULE_SYNC_API)
            ASSERT_UEQ(r.findings[i].callsite, r.sites[0].callsite);
    an_result_free(&r);

    /* With a lower gaps threshold the rule fires, and names the wait behind the worst gap. */
    an_opts o = {.rule_gap_ns = 100000};
    ASSERT_OK(an_analyze(t.s, &o, &r, NULL));
    ASSERT_UEQ(rule_count(&r, AN_RULE_GPU_GAPS), 2);
    for (size_t i = 0; i < r.n_findings; i++)
        if (r.findings[i].rule == AN_RULE_GPU_GAPS) {
            ASSERT_UEQ(r.findings[i].max_ns, 280000);
            ASSERT_UEQ(r.findings[i].callsite, 0); /* the worst gap was the host's, not a wait */
        }
    an_result_free(&r);
    /* A range: only what is inside counts. */
    an_opts o2 = {.t0 = 300000, .t1 = 700000};
    ASSERT_OK(an_analyze(t.s, &o2, &r, NULL));
    ASSERT_EQ(r.n_blocks, 0);
    ASSERT_UEQ(r.devices[0].busy_ns, (10 + 50) * 1000ull);
    an_result_free(&r);
    st_store_destroy(&t.s);
}

/* A kernel on stream 8, [ks, ke) in us. */
static void tl_kernel8(tl *t, uint64_t ks, uint64_t ke) {
    tp_kernel k = {.kind = TP_K_KERNEL, .device = 0, .stream = 8, .start = ks * 1000, .end = ke * 1000,
                   .correlation = t->corr++, .name = tp_enc_intern_cstr(t->enc, "copy_kernel")};
    ASSERT_OK(tp_enc_add(t->enc, &k));
}

/* Busy time over [a, b) of a fresh merge, stepped budget events at a time (0: all at once);
 * the gaps it found go to gaps[] (start, end in us). */
static uint64_t merged_busy(const st_store *s, uint64_t a, uint64_t b, size_t budget, uint64_t *gaps, size_t *n_gaps) {
    an_busy m;
    ASSERT_OK(an_busy_init(&m, s, 0, 0, a * 1000, 64)); /* the store's first producer, GPU 0 */
    an_busy_gap g;
    size_t left = budget;
    *n_gaps = 0;
    for (;;) {
        int rc = an_busy_step(&m, b * 1000, budget ? &left : NULL, &g);
        if (rc == AN_BUSY_DONE)
            break;
        if (rc == AN_BUSY_MORE) {
            left = budget;
            continue;
        }
        gaps[2 * *n_gaps] = g.start / 1000;
        gaps[2 * *n_gaps + 1] = g.end / 1000;
        ++*n_gaps;
    }
    uint64_t busy = an_busy_total(&m, b * 1000);
    an_busy_free(&m);
    return busy;
}

TEST(busy_merge_is_the_union_over_streams_and_resumes) {
    tl t;
    tl_init(&t);
    tp_stream st8 = {.kind = TP_K_STREAM, .device = 0, .stream = 8};
    ASSERT_OK(tp_enc_add(t.enc, &st8));
    tl_kernel(&t, 0, 10, 100);
    tl_kernel8(&t, 50, 150);
    tl_kernel(&t, 300, 310, 320);
    tl_kernel(&t, 590, 600, 650);
    tl_kernel8(&t, 640, 700);
    tl_done(&t);
    /* By hand: [10,150) + [310,320) + [600,700) = 140 + 10 + 100 us, idle at [150,310) and [320,600). */
    uint64_t gaps[16];
    size_t ng;
    for (size_t budget = 0; budget < 4; budget++) {
        ASSERT_UEQ(merged_busy(t.s, 0, UINT64_MAX / 1000, budget, gaps, &ng), 250000);
        ASSERT_EQ(ng, 2);
        ASSERT_UEQ(gaps[0], 150);
        ASSERT_UEQ(gaps[1], 310);
        ASSERT_UEQ(gaps[2], 320);
        ASSERT_UEQ(gaps[3], 600);
    }
    /* From 60: the kernels running at 60 count from there: [60,150) + 10 + 100. */
    ASSERT_UEQ(merged_busy(t.s, 60, UINT64_MAX / 1000, 1, gaps, &ng), 200000);
    /* Up to 640: the stream-8 kernel starting at 640 is outside; [600,650) is clipped to 640. */
    ASSERT_UEQ(merged_busy(t.s, 0, 640, 0, gaps, &ng), 190000);
    /* The analysis counts the same union. */
    an_result r;
    ASSERT_OK(an_analyze(t.s, NULL, &r, NULL));
    ASSERT_EQ(r.n_devices, 1);
    ASSERT_UEQ(r.devices[0].busy_ns, 250000);
    an_result_free(&r);
    /* A merge resumed to a later bound ends where a fresh one to that bound does. */
    an_busy m;
    ASSERT_OK(an_busy_init(&m, t.s, 0, 0, 0, 64));
    an_busy_gap g;
    while (an_busy_step(&m, 315000, NULL, &g) == AN_BUSY_GAP)
        ;
    ASSERT_UEQ(an_busy_total(&m, 315000), 145000);
    while (an_busy_step(&m, 640000, NULL, &g) == AN_BUSY_GAP)
        ;
    ASSERT_UEQ(an_busy_total(&m, 640000), 190000);
    an_busy_free(&m);
    st_store_destroy(&t.s);
}

/* A trace whose events span nearly 2^64 ns (a hostile or broken clock) is analysed, not refused
 * as "out of memory": the utilisation windows are computed without overflow. */
TEST(analysis_survives_a_span_of_2_to_the_64) {
    tl t;
    tl_init(&t);
    tp_kernel k1 = {.kind = TP_K_KERNEL, .device = 0, .stream = 7, .start = 1000, .end = 2000, .correlation = 900,
                    .name = tp_enc_intern_cstr(t.enc, "early")};
    tp_kernel k2 = {.kind = TP_K_KERNEL, .device = 0, .stream = 7, .start = UINT64_MAX - 5000, .end = UINT64_MAX - 10,
                    .correlation = 901, .name = tp_enc_intern_cstr(t.enc, "late")};
    ASSERT_OK(tp_enc_add(t.enc, &k1));
    ASSERT_OK(tp_enc_add(t.enc, &k2));
    tl_done(&t);
    an_result r;
    err_msg err = {{0}};
    int rc = an_analyze(t.s, NULL, &r, &err);
    if (rc != 0)
        TASK_FAIL_("an_analyze: %s", err.msg);
    ASSERT_EQ(r.n_devices, 1);
    ASSERT_UEQ(r.devices[0].busy_ns, 1000 + 4990);
    /* one low-utilisation window: the 30 chunks of the span, all nearly idle, merged */
    ASSERT_UEQ(rule_count(&r, AN_RULE_LOW_UTIL), 30);
    an_result_free(&r);
    /* a window far too small for that span is widened, not allocated */
    an_opts o = {.low_util_window_ns = 1000};
    ASSERT_OK(an_analyze(t.s, &o, &r, &err));
    ASSERT_UEQ(r.devices[0].busy_ns, 5990);
    an_result_free(&r);
    st_store_destroy(&t.s);
}

TEST(analysis_empty_store) {
    st_store *s = st_store_new(NULL);
    st_store_commit(s);
    an_result r;
    ASSERT_OK(an_analyze(s, NULL, &r, NULL));
    ASSERT_EQ(r.n_blocks + r.n_bubbles + r.n_sites + r.n_findings + r.n_devices, 0);
    an_result_free(&r);
    an_result_free(&r); /* twice is fine */
    st_store_destroy(&s);
}

TEST(analysis_block_kinds_by_name) {
    ASSERT_EQ(an_block_kind_of_name("cudaStreamSynchronize"), AN_BLOCK_SYNC);
    ASSERT_EQ(an_block_kind_of_name("cuCtxSynchronize"), AN_BLOCK_SYNC);
    ASSERT_EQ(an_block_kind_of_name("cudaMemcpy"), AN_BLOCK_MEMCPY);
    ASSERT_EQ(an_block_kind_of_name("cudaMemcpyAsync_ptsz"), AN_BLOCK_PAGEABLE);
    ASSERT_EQ(an_block_kind_of_name("cuMemcpyDtoHAsync_v2"), AN_BLOCK_PAGEABLE);
    ASSERT_EQ(an_block_kind_of_name("cudaMemset"), AN_BLOCK_MEMSET);
    ASSERT_EQ(an_block_kind_of_name("cudaFree"), AN_BLOCK_ALLOC);
    ASSERT_EQ(an_block_kind_of_name("cudaEventQuery"), AN_BLOCK_QUERY);
    ASSERT_EQ(an_block_kind_of_name("cudaLaunchKernel"), 0);
    ASSERT_EQ(an_block_kind_of_name(""), 0);
}

/* Low-utilisation windows: adjacent low chunks make one window; windows come per GPU in time
 * order (not worst first), and a busy chunk between two low ones keeps them apart. */
TEST(analysis_low_util_windows_merge_and_come_in_time_order) {
    tl t;
    tl_init(&t);
    tl_kernel(&t, 0, 0, 900);       /* chunk 0..1000: 90% busy */
    tl_kernel(&t, 1400, 1500, 1510); /* chunk 1000..2000: 1% */
    tl_kernel(&t, 1990, 2000, 2900); /* chunk 2000..3000: 90% */
    tl_kernel(&t, 3100, 3200, 3210); /* chunk 3000..4000: 1% */
    tl_kernel(&t, 4900, 4990, 5000); /* chunk 4000..5000: 1% */
    tl_done(&t);
    an_opts o = {.util_chunks = 5};
    an_result r;
    ASSERT_OK(an_analyze(t.s, &o, &r, NULL));
    const an_finding *w[4];
    size_t n = 0;
    for (size_t i = 0; i < r.n_findings; i++)
        if (r.findings[i].rule == AN_RULE_LOW_UTIL && n < 4)
            w[n++] = &r.findings[i];
    ASSERT_EQ(n, 2);
    ASSERT_UEQ(w[0]->start, 1000000);
    ASSERT_UEQ(w[0]->end, 2000000);
    ASSERT_UEQ(w[0]->max_ns, 10000);    /* busy in the window */
    ASSERT_UEQ(w[0]->total_ns, 990000); /* idle in it */
    ASSERT_UEQ(w[1]->start, 3000000);   /* the two low chunks 3000..5000 are one window */
    ASSERT_UEQ(w[1]->end, 5000000);
    ASSERT_EQ(w[1]->count, 2);
    ASSERT_UEQ(w[1]->total_ns, 1980000);
    an_result_free(&r);
    st_store_destroy(&t.s);
}

/* On the real two-rank trace: per device, windows in time order and never touching. */
TEST(analysis_low_util_windows_of_sampled_ranks_are_ordered) {
    st_store *s = load_ranks();
    an_result r;
    ASSERT_OK(an_analyze(s, NULL, &r, NULL));
    const an_finding *prev = NULL;
    size_t n = 0;
    for (size_t i = 0; i < r.n_findings; i++) {
        const an_finding *f = &r.findings[i];
        if (f->rule != AN_RULE_LOW_UTIL)
            continue;
        n++;
        if (prev && prev->producer == f->producer && prev->device == f->device)
            ASSERT_LT(prev->end, f->start);
        else if (prev)
            ASSERT(prev->producer < f->producer || (prev->producer == f->producer && prev->device < f->device));
        prev = f;
    }
    ASSERT_GE(n, 4);
    an_result_free(&r);
    st_store_destroy(&s);
}

TEST(analysis_nested_blocking_calls_count_once) {
    /* A runtime sync [100, 300) us with a driver sync nested in it [150, 250), then an overlapping
     * one [280, 400) and a separate one [500, 520): the thread was blocked 300 + 20 us, not the
     * 440 us the spans add up to. Per call site, every span still counts whole. */
    tl t;
    tl_init(&t);
    tl_kernel(&t, 10, 20, 90);
    tl_sync(&t, 100, 300, 5);
    tl_sync(&t, 150, 250, 5);
    tl_sync(&t, 280, 400, 5);
    tl_sync(&t, 500, 520, 0);
    tl_done(&t);
    an_result r;
    err_msg err = {{0}};
    ASSERT_OK(an_analyze(t.s, NULL, &r, &err));
    ASSERT_EQ(r.n_blocks, 4);
    ASSERT_UEQ(r.blocked_ns, 320000);
    uint64_t own = 0, whole = 0;
    for (size_t i = 0; i < r.n_blocks; i++) {
        own += r.blocks[i].own_ns;
        whole += r.blocks[i].end - r.blocks[i].start;
    }
    ASSERT_UEQ(own, 320000);
    ASSERT_UEQ(whole, 440000);
    ASSERT_EQ(r.n_devices, 1);
    ASSERT_UEQ(r.devices[0].blocked_ns, 320000);
    const an_site *site = NULL;
    for (size_t i = 0; i < r.n_sites; i++)
        if (r.sites[i].callsite != 0)
            site = &r.sites[i];
    ASSERT_NOT_NULL(site);
    ASSERT_UEQ(site->count, 3);
    ASSERT_UEQ(site->total_ns, 420000);
    an_result_free(&r);
    st_store_destroy(&t.s);
}

/* ---- steps ---- */

static void tl_block(tl *t, uint64_t a, uint64_t b, const char *api, uint32_t site) {
    tp_api x = {.kind = TP_K_API, .flags = TP_F_BLOCKING, .device = 0, .tid = 100, .start = a * 1000,
                .end = b * 1000, .correlation = t->corr++, .callsite = site, .name = tp_enc_intern_cstr(t->enc, api)};
    ASSERT_OK(tp_enc_add(t->enc, &x));
}

static void tl_range(tl *t, uint64_t a, uint64_t b, const char *name, uint64_t id) {
    tp_nvtx n = {.kind = TP_K_NVTX, .flags = TP_NVTX_RANGE, .device = TP_NO_DEVICE, .tid = 100, .start = a * 1000,
                 .end = b * 1000, .id = id, .name = tp_enc_intern_cstr(t->enc, name)};
    ASSERT_OK(tp_enc_add(t->enc, &n));
}

/* Thirty steps of 10 ms (a kernel, then a sync at call site 5 waiting for it); every 5th step a
 * 30 ms blocking cudaMemcpy more (40 ms); step 17 a 50 ms cudaFree more (60 ms). named: the
 * ranges' name, or NULL for ProfilerStep#100.. */
static st_store *loop_store(const char *named) {
    tl t;
    tl_init(&t);
    uint64_t at = 1000;
    for (int i = 0; i < 30; i++) {
        uint64_t len = i % 5 == 4 ? 40000 : i == 17 ? 60000 : 10000;
        char nm[32];
        snprintf(nm, sizeof nm, "ProfilerStep#%d", 100 + i);
        tl_range(&t, at, at + len, named ? named : nm, (uint64_t)i + 1);
        tl_kernel(&t, at + 10, at + 20, at + 8000);
        tl_sync(&t, at + 30, at + 8010, 5);
        if (i % 5 == 4)
            tl_block(&t, at + 8100, at + 38100, "cudaMemcpy", 0);
        if (i == 17)
            tl_block(&t, at + 8100, at + 58100, "cudaFree", 0);
        at += len;
    }
    tl_done(&t);
    return t.s;
}

/* The figures below are the construction's own: walls of 10, 40 and 60 ms, 7.98 ms of kernel and of
 * sync per step, the copy's 30 ms every 5th step. */
static void check_loop_steps(const st_store *s, const an_result *r, const an_steps *st, int64_t first_number) {
    ASSERT_EQ(st->n_steps, 30);
    ASSERT_UEQ(st->median_ns, 10000000);
    int slow = 0;
    for (size_t i = 0; i < 30; i++) {
        const an_step *x = &st->steps[i];
        uint64_t wall = i % 5 == 4 ? 40000000 : i == 17 ? 60000000 : 10000000;
        ASSERT_EQ(x->number, first_number + (int64_t)i);
        ASSERT_UEQ(x->end - x->start, wall);
        ASSERT_UEQ(x->gpu_busy_ns, 7980000);
        ASSERT_UEQ(x->blocked_ns, 7980000 + (i % 5 == 4 ? 30000000 : i == 17 ? 50000000 : 0));
        ASSERT_EQ(x->stalls, 1 + (i % 5 == 4 || i == 17));
        ASSERT_EQ(x->outlier, i % 5 == 4 || i == 17);
        slow += x->outlier;
        /* what blocked longest: the copy or the free in the slow steps, the sync elsewhere */
        ASSERT(x->top_site < r->n_sites);
        const char *api = st_str(s, r->sites[x->top_site].name);
        ASSERT_STR_EQ(api, i % 5 == 4 ? "cudaMemcpy" : i == 17 ? "cudaFree" : "cudaStreamSynchronize");
    }
    ASSERT_EQ(slow, 7);
    /* the copy every 5th step, from step 4, six times, 30 ms more each; nothing else is periodic */
    ASSERT_EQ(st->n_periodic, 1);
    const an_periodic *p = &st->periodic[0];
    ASSERT_STR_EQ(st_str(s, r->sites[p->site].name), "cudaMemcpy");
    ASSERT_EQ(p->period, 5);
    ASSERT_EQ(p->first, 4);
    ASSERT_EQ(p->hits, 6);
    ASSERT_UEQ(p->extra_ns, 30000000);
}

TEST(steps_from_profiler_ranges_find_outliers_and_a_periodic_stall) {
    st_store *s = loop_store(NULL);
    an_result r;
    err_msg err = {{0}};
    ASSERT_OK(an_analyze(s, NULL, &r, &err));
    an_steps st;
    ASSERT_OK(an_steps_find(s, &r, NULL, &st, &err));
    ASSERT_EQ(st.source, AN_STEPS_PROFILER);
    check_loop_steps(s, &r, &st, 100);
    an_steps_free(&st);
    an_result_free(&r);
    st_store_destroy(&s);
}

TEST(steps_from_a_named_range) {
    st_store *s = loop_store("train_step");
    an_result r;
    err_msg err = {{0}};
    ASSERT_OK(an_analyze(s, NULL, &r, &err));
    an_steps st;
    /* not asked for by name: the sync every step is the heartbeat (its ends mostly 10 ms apart,
     * the outlier steps do not spoil that), and a step runs from one sync's end to the next: the
     * same walls as the ranges' but for the last step, which no sync closes */
    ASSERT_OK(an_steps_find(s, &r, NULL, &st, &err));
    ASSERT_EQ(st.source, AN_STEPS_HEARTBEAT);
    ASSERT_EQ(st.n_steps, 29);
    for (size_t i = 0; i < 29; i++) {
        ASSERT_UEQ(st.steps[i].end - st.steps[i].start, i % 5 == 4 ? 40000000 : i == 17 ? 60000000 : 10000000);
        ASSERT_EQ(st.steps[i].outlier, i % 5 == 4 || i == 17);
    }
    ASSERT_EQ(st.n_periodic, 1);
    ASSERT_EQ(st.periodic[0].period, 5);
    ASSERT_EQ(st.periodic[0].hits, 5);
    ASSERT_UEQ(st.periodic[0].extra_ns, 30000000);
    an_steps_free(&st);
    ASSERT_OK(an_steps_find(s, &r, "train_step", &st, &err));
    ASSERT_EQ(st.source, AN_STEPS_RANGE);
    ASSERT_STR_EQ(st.what, "train_step");
    check_loop_steps(s, &r, &st, 0);
    an_steps_free(&st);
    an_result_free(&r);
    st_store_destroy(&s);
}

/* The timeline into its store, analysed, and its steps found as the report finds them. */
static void tl_steps(tl *t, an_result *r, an_steps *st) {
    tl_done(t);
    err_msg err = {{0}};
    ASSERT_OK(an_analyze(t->s, NULL, r, &err));
    ASSERT_OK(an_steps_find(t->s, r, NULL, st, &err));
}

/* No ranges, a sync at one call site every 10 ms: it is the heartbeat; a step runs from the end of
 * one sync to the end of the next. */
TEST(steps_from_a_regular_blocking_call) {
    tl t;
    tl_init(&t);
    for (uint64_t i = 0; i < 12; i++) {
        uint64_t at = 1000 + i * 10000;
        tl_kernel(&t, at, at + 10, at + 6000);
        tl_sync(&t, at + 20, at + 6010, 5);
    }
    an_result r;
    an_steps st;
    tl_steps(&t, &r, &st);
    ASSERT_EQ(st.source, AN_STEPS_HEARTBEAT);
    ASSERT_STR_CONTAINS(st.what, "train.py:42");
    ASSERT_EQ(st.n_steps, 11);
    for (size_t i = 0; i < st.n_steps; i++) {
        ASSERT_UEQ(st.steps[i].start, (1000 + i * 10000 + 6010) * 1000);
        ASSERT_UEQ(st.steps[i].end - st.steps[i].start, 10000000);
        ASSERT_UEQ(st.steps[i].gpu_busy_ns, 5990000);
        ASSERT_EQ(st.steps[i].outlier, 0);
    }
    ASSERT_EQ(st.n_periodic, 0);
    an_steps_free(&st);
    an_result_free(&r);
    st_store_destroy(&t.s);
}

/* ---- advice ---- */

static void tl_site(tl *t, uint32_t id, const char *const *funcs, size_t n) {
    tp_callsite cs = {.kind = TP_K_CALLSITE, .device = TP_NO_DEVICE, .id = id, .n_frames = (uint16_t)(n + 1)};
    ASSERT_OK(tp_enc_add(t->enc, &cs));
    for (size_t i = 0; i < n; i++) {
        tp_frame f = {.kind = TP_K_FRAME, .flags = TP_FRAME_NATIVE, .index = (uint16_t)i, .callsite = id,
                      .func = tp_enc_intern_cstr(t->enc, funcs[i]), .module = tp_enc_intern_cstr(t->enc, "libtorch.so")};
        ASSERT_OK(tp_enc_add(t->enc, &f));
    }
    tp_frame py = {.kind = TP_K_FRAME, .flags = TP_FRAME_PYTHON, .index = (uint16_t)n, .callsite = id, .line = 7,
                   .file = tp_enc_intern_cstr(t->enc, "model.py"), .func = tp_enc_intern_cstr(t->enc, "forward")};
    ASSERT_OK(tp_enc_add(t->enc, &py));
}

/* The site whose call site's second frame is func (the store numbers call sites its own way), or
 * with no call site, whose API is api. */
static const an_site *site_at(const an_result *r, const char *func, const st_store *s, const char *api) {
    for (size_t i = 0; i < r->n_sites; i++) {
        size_t nf = 0;
        const st_frame *f = r->sites[i].callsite ? st_callsite_frames(s, r->sites[i].callsite, &nf) : NULL;
        if (func ? nf > 1 && strcmp(st_str(s, f[1].func), func) == 0
                 : r->sites[i].callsite == 0 && strcmp(st_str(s, r->sites[i].name), api) == 0)
            return &r->sites[i];
    }
    TASK_FAIL_("no site %s %s", func ? func : "", api ? api : "");
    return NULL;
}

/* The cause is told by the outermost op in the frames (what the program asked for), else by the
 * call; each suggestion carries the GPU idle the analysis gave the site. */
TEST(advice_names_the_cause_from_the_ops_then_the_call) {
    tl t;
    tl_init(&t);
    static const char *const if_tensor[] = {"cudaStreamSynchronize", "aten::_local_scalar_dense", "aten::item", "aten::is_nonzero"};
    static const char *const item[] = {"cudaStreamSynchronize", "at::native::_local_scalar_dense_cuda"};
    static const char *const masked[] = {"cudaMemcpyAsync", "aten::nonzero", "aten::index"};
    static const char *const cpu[] = {"cudaMemcpyAsync", "aten::copy_", "aten::_to_copy", "aten::to"};
    tl_site(&t, 11, if_tensor, 4);
    tl_site(&t, 12, item, 2);
    tl_site(&t, 13, masked, 3);
    tl_site(&t, 14, cpu, 4);
    uint64_t at = 100;
    for (uint32_t site = 11; site <= 14; site++, at += 1000) {
        tl_kernel(&t, at, at + 10, at + 400);
        tl_sync(&t, at + 20, at + 410, site);
    }
    tl_block(&t, at, at + 100, "cudaEventSynchronize", 0);
    tl_block(&t, at + 200, at + 300, "cudaFree", 0);
    tl_sync(&t, at + 400, at + 500, 5); /* call site 5: a Python line, no op: by the call */
    tl_done(&t);
    an_result r;
    err_msg err = {{0}};
    ASSERT_OK(an_analyze(t.s, NULL, &r, &err));
    static const struct { const char *func, *api; int fix; } want[] = {
        {"aten::_local_scalar_dense", NULL, AN_FIX_IF_TENSOR}, {"at::native::_local_scalar_dense_cuda", NULL, AN_FIX_ITEM},
        {"aten::nonzero", NULL, AN_FIX_NONZERO}, {"aten::copy_", NULL, AN_FIX_TO_HOST},
        {NULL, "cudaEventSynchronize", AN_FIX_EVENT_SYNC}, {NULL, "cudaFree", AN_FIX_ALLOC},
        {"step", NULL, AN_FIX_STREAM_SYNC},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const an_site *st = site_at(&r, want[i].func, t.s, want[i].api);
        an_advice a;
        an_advise(t.s, st, &a);
        if (a.fix != want[i].fix)
            TASK_FAIL_("site %zu: fix %s, want %s", i, an_fix_name(a.fix), an_fix_name(want[i].fix));
        ASSERT_UEQ(a.gpu_ns, st->gpu_idle_ns);
        ASSERT(a.change[0] != '\0' && a.why[0] != '\0');
    }
    an_advice a;
    an_advise(t.s, site_at(&r, "aten::_local_scalar_dense", t.s, NULL), &a);
    ASSERT_STR_CONTAINS(a.why, "aten::is_nonzero");
    an_result_free(&r);
    st_store_destroy(&t.s);
}

/* ---- the charging rules against hand-computed figures ---- */

/* A device with one stream. */
static void tl_device(tl *t, uint16_t dev, uint32_t stream) {
    tp_device d = {.kind = TP_K_DEVICE, .device = dev, .name = tp_enc_intern_cstr(t->enc, "Test GPU")};
    tp_stream st = {.kind = TP_K_STREAM, .device = dev, .stream = stream};
    ASSERT_OK(tp_enc_add(t->enc, &d));
    ASSERT_OK(tp_enc_add(t->enc, &st));
}

/* A launch call on thread 100 at [a, a+2us) and its kernel on (dev, stream) at [ks, ke), in us. */
static void tl_kernel_on(tl *t, uint16_t dev, uint32_t stream, uint64_t a, uint64_t ks, uint64_t ke) {
    uint32_t c = t->corr++;
    tp_api api = {.kind = TP_K_API, .flags = TP_F_LAUNCH, .device = dev, .tid = 100, .start = a * 1000,
                  .end = a * 1000 + 2000, .correlation = c, .name = tp_enc_intern_cstr(t->enc, "cudaLaunchKernel")};
    tp_kernel k = {.kind = TP_K_KERNEL, .device = dev, .stream = stream, .start = ks * 1000, .end = ke * 1000,
                   .correlation = c, .name = tp_enc_intern_cstr(t->enc, "gemm")};
    ASSERT_OK(tp_enc_add(t->enc, &api));
    ASSERT_OK(tp_enc_add(t->enc, &k));
}

/* A cudaStreamSynchronize on thread 100 at [a, b) whose call names no device (as CUPTI's callback
 * record does not), and the GPU-side sync record CUPTI gives it, with its correlation, on (dev,
 * stream) at [b-1us, b): the record says which device the host waited on. */
static void tl_sync_for(tl *t, uint64_t a, uint64_t b, uint32_t site, uint16_t dev, uint32_t stream) {
    uint32_t c = t->corr++;
    tp_api api = {.kind = TP_K_API, .flags = TP_F_BLOCKING, .device = TP_NO_DEVICE, .tid = 100, .start = a * 1000,
                  .end = b * 1000, .correlation = c, .callsite = site,
                  .name = tp_enc_intern_cstr(t->enc, "cudaStreamSynchronize")};
    tp_sync y = {.kind = TP_K_SYNC, .device = dev, .stream = stream, .start = (b - 1) * 1000, .end = b * 1000,
                 .correlation = c, .event = TP_NO_ID, .sync_type = TP_SYNC_STREAM};
    ASSERT_OK(tp_enc_add(t->enc, &api));
    ASSERT_OK(tp_enc_add(t->enc, &y));
}

static const an_bubble *device_bubble_on(const an_result *r, uint32_t producer, uint16_t dev, uint64_t start_us) {
    for (size_t i = 0; i < r->n_bubbles; i++)
        if (r->bubbles[i].lane == AN_DEVICE_LANE && r->bubbles[i].producer == producer && r->bubbles[i].device == dev &&
            r->bubbles[i].start == start_us * 1000)
            return &r->bubbles[i];
    return NULL;
}

static const an_device *device_of(const an_result *r, uint32_t producer, uint16_t dev) {
    for (size_t i = 0; i < r->n_devices; i++)
        if (r->devices[i].producer == producer && r->devices[i].device == dev)
            return &r->devices[i];
    TASK_FAIL_("no device %u of producer %u", dev, producer);
    return NULL;
}

/* The first stalled process of the two-GPU and two-process timelines: on its GPU 0 (stream 7),
 * kernel A runs 10..100 (launched at 0) and B 310..320 (launched at 300); the host waits for A at
 * 5..101 (call site 5). */
static void tl_waiter(tl *t) {
    tl_kernel_on(t, 0, 7, 0, 10, 100);
    tl_sync_for(t, 5, 101, 5, 0, 7);
    tl_kernel_on(t, 0, 7, 300, 310, 320);
}

/* What the wait costs its own GPU, by hand (the figures of analysis_bubbles_get_their_causes):
 * bubble 100..310; the wait overlaps it 100..101, and of the 209 us after, it holds the 95 us of A
 * the GPU ran after the wait began (5..100): its share is 100..196, 96 us; the host's 196..300,
 * 104 us; launch latency 300..310, 10 us. */
static void check_waiter(const an_result *r, uint32_t producer) {
    const an_bubble *b = device_bubble_on(r, producer, 0, 100);
    ASSERT_NOT_NULL(b);
    ASSERT_UEQ(b->end, 310000);
    ASSERT_EQ(b->cause, AN_CAUSE_BLOCK);
    ASSERT_UEQ(an_bubble_parts(r, b).block_from, 100000);
    ASSERT_UEQ(an_bubble_parts(r, b).block_to, 196000);
    ASSERT_UEQ(an_bubble_parts(r, b).launch_from, 300000);
    const an_device *d = device_of(r, producer, 0);
    ASSERT_UEQ(d->idle_by_cause[AN_CAUSE_BLOCK], 96000);
    ASSERT_UEQ(d->idle_by_cause[AN_CAUSE_HOST], 104000);
    ASSERT_UEQ(d->idle_by_cause[AN_CAUSE_LAUNCH], 10000);
}

/* The other GPU's work: P runs 15..30 (launched at 2), Q 160..170 (launched at 150). Its bubble
 * 30..160 overlaps the wait above (5..101), which waited on GPU 0, not on this one: nothing
 * blocked this GPU's submitter for it, and it submitted Q at 150 > 30, so the whole 130 us is the
 * host's (were the wait charged, its share would be 30..126: 96 us more on the wait). */
static void tl_other(tl *t, uint16_t dev, uint32_t stream) {
    tl_kernel_on(t, dev, stream, 2, 15, 30);
    tl_kernel_on(t, dev, stream, 150, 160, 170);
}

static void check_other(const an_result *r, uint32_t producer, uint16_t dev) {
    const an_bubble *b = device_bubble_on(r, producer, dev, 30);
    ASSERT_NOT_NULL(b);
    ASSERT_UEQ(b->end, 160000);
    ASSERT_EQ(b->cause, AN_CAUSE_HOST);
    ASSERT_UEQ(b->block, AN_NONE);
    const an_device *d = device_of(r, producer, dev);
    ASSERT_UEQ(d->idle_by_cause[AN_CAUSE_BLOCK], 0);
    ASSERT_UEQ(d->idle_by_cause[AN_CAUSE_HOST], 130000);
    ASSERT_UEQ(d->idle_by_cause[AN_CAUSE_LAUNCH], 0);
    ASSERT_UEQ(d->busy_ns, (15 + 10) * 1000ull);
}

/* The waiter's GPU 0 and the other GPU (of the waiter's process or another's) analysed: each
 * with its own figures, the wait charged its 96 us only. */
static void check_waiter_and_other(const st_store *s) {
    an_result r;
    ASSERT_OK(an_analyze(s, NULL, &r, NULL));
    ASSERT_EQ(r.n_devices, 2);
    ASSERT_EQ(r.n_blocks, 1);
    ASSERT_UEQ(r.blocks[0].device, 0); /* by its GPU-side record: the call named none */
    uint32_t waiter = r.blocks[0].producer;
    const an_device *other = &r.devices[r.devices[0].producer == waiter && r.devices[0].device == 0 ? 1 : 0];
    check_waiter(&r, waiter);
    check_other(&r, other->producer, other->device);
    ASSERT_UEQ(r.blocks[0].gpu_idle_ns, 96000);
    ASSERT_EQ(r.n_sites, 1);
    ASSERT_UEQ(r.sites[0].gpu_idle_ns, 96000);
    an_result_free(&r);
}

/* One process, two GPUs: the idle of GPU 1 is not charged to a wait on GPU 0. */
TEST(analysis_idle_on_one_gpu_is_not_charged_to_a_wait_on_another) {
    tl t;
    tl_init(&t);
    tl_device(&t, 1, 9);
    tl_waiter(&t);
    tl_other(&t, 1, 9);
    tl_done(&t);
    check_waiter_and_other(t.s);
    st_store_destroy(&t.s);
}

/* Two processes, each with its GPU 0 (two ranks on one machine, as CUDA_VISIBLE_DEVICES numbers
 * them): the idle of the second's GPU is not charged to the first's wait. */
TEST(analysis_idle_of_one_process_is_not_charged_to_another_process_wait) {
    tl a, b;
    tl_init_in(&a, 77, NULL);
    tl_waiter(&a);
    tl_add(&a);
    tl_init_in(&b, 78, a.s);
    tl_other(&b, 0, 7);
    tl_done(&b);
    check_waiter_and_other(a.s);
    st_store_destroy(&a.s);
}

/* The index in r->devices of (producer, device). */
static size_t device_at(const an_result *r, uint32_t producer, uint16_t device) {
    for (size_t i = 0; i < r->n_devices; i++)
        if (r->devices[i].producer == producer && r->devices[i].device == device)
            return i;
    return SIZE_MAX;
}

/* Bubbles come by start; those that start together by lane, a stream lane's before the whole
 * devices', and those of devices in the order of r->devices. */
static void check_bubble_order(const an_result *r) {
    for (size_t i = 1; i < r->n_bubbles; i++) {
        const an_bubble *a = &r->bubbles[i - 1], *b = &r->bubbles[i];
        ASSERT(a->start <= b->start);
        if (a->start != b->start)
            continue;
        ASSERT(a->lane <= b->lane);
        if (a->lane == AN_DEVICE_LANE && b->lane == AN_DEVICE_LANE)
            ASSERT_LT(device_at(r, a->producer, a->device), device_at(r, b->producer, b->device));
    }
}

/* Two processes with three GPUs of two streams each, every stream idle over [200, 300) us: the
 * twelve stream bubbles and six device bubbles all start at once, and still come in one order. */
TEST(analysis_bubbles_that_start_together_come_in_lane_then_device_order) {
    tl t[2];
    static const uint16_t devs[3] = {2, 0, 1};
    for (int p = 0; p < 2; p++) {
        tl_init_in(&t[p], 77 + (uint64_t)p, p ? t[0].s : NULL);
        for (int d = 0; d < 3; d++)
            for (uint32_t st = 1; st <= 2; st++) {
                tl_device(&t[p], devs[d], st);
                tl_kernel_on(&t[p], devs[d], st, 50, 100, 200);
                tl_kernel_on(&t[p], devs[d], st, 60, 300, 400);
            }
        if (p == 0)
            tl_add(&t[p]);
        else
            tl_done(&t[p]);
    }
    an_result r;
    ASSERT_OK(an_analyze(t[0].s, NULL, &r, NULL));
    size_t at_200 = 0, device_ones = 0;
    for (size_t i = 0; i < r.n_bubbles; i++)
        if (r.bubbles[i].start == 200000) {
            at_200++;
            device_ones += r.bubbles[i].lane == AN_DEVICE_LANE;
        }
    ASSERT_UEQ(at_200, 18);
    ASSERT_UEQ(device_ones, 6);
    check_bubble_order(&r);
    an_result_free(&r);
    st_store_destroy(&t[0].s);
}

/* Two processes with three GPUs of two streams each, every stream idle 61 us after each of its 4000
 * kernels at once: 72,000 bubbles (twelve stream and six device ones at each gap), more than
 * AN_SORT_TWO_LEAST, so that where the process may use two threads the analysis sorts them on two.
 * They come in the order check_bubble_order says, and the same bubbles in the same order as on one
 * thread: from time 0, and from just before 2^32 ns, where 95% of the starts share their first
 * differing byte (the cut near the middle is then found a byte further down). */
TEST(analysis_bubbles_sorted_on_two_threads_come_as_on_one) {
    static const uint16_t devs[3] = {2, 0, 1};
    const uint64_t kernels = 4000, bases_us[2] = {0, 4294967 - 380000};
    const char *was = getenv("SYNCTOP_THREADS");
    char *saved = was ? strdup(was) : NULL;
    for (int z = 0; z < 2; z++) {
        tl t[2];
        uint64_t base = bases_us[z];
        for (int p = 0; p < 2; p++) {
            tl_init_in(&t[p], 77 + (uint64_t)p, p ? t[0].s : NULL);
            for (int d = 0; d < 3; d++)
                for (uint32_t st = 1; st <= 2; st++)
                    tl_device(&t[p], devs[d], st);
            for (uint64_t i = 0; i < kernels; i++) {
                for (int d = 0; d < 3; d++)
                    for (uint32_t st = 1; st <= 2; st++)
                        tl_kernel_on(&t[p], devs[d], st, base + i * 100, base + i * 100 + 1, base + i * 100 + 40);
                if (i % 500 == 499) { /* a batch of some thousands of records */
                    tp_buf out = {0};
                    ASSERT_OK(tp_enc_finish_flags(t[p].enc, 0, &out));
                    ASSERT_OK(st_store_add_batch(t[p].s, out.data, out.len, NULL));
                    tp_buf_free(&out);
                }
            }
            if (p == 0)
                tl_add(&t[p]);
            else
                tl_done(&t[p]);
        }
        an_result r[2];
        int rc[2];
        for (int w = 0; w < 2; w++) {
            setenv("SYNCTOP_THREADS", w ? "2" : "1", 1);
            rc[w] = an_analyze(t[0].s, NULL, &r[w], NULL);
        }
        if (saved)
            setenv("SYNCTOP_THREADS", saved, 1);
        else
            unsetenv("SYNCTOP_THREADS");
        ASSERT_OK(rc[0]);
        ASSERT_OK(rc[1]);
        ASSERT_UEQ(r[0].n_bubbles, 2 * (kernels - 1) * 9);
        ASSERT_GE(r[1].n_bubbles, AN_SORT_TWO_LEAST);
        ASSERT_UEQ(r[1].n_bubbles, r[0].n_bubbles);
        check_bubble_order(&r[1]);
        for (size_t i = 0; i < r[0].n_bubbles; i++) {
            const an_bubble *a = &r[0].bubbles[i], *b = &r[1].bubbles[i];
            if (a->start != b->start || a->end != b->end || a->producer != b->producer || a->lane != b->lane ||
                a->device != b->device)
                TASK_FAIL_("from %llu us, bubble %zu: %llu..%llu lane %u device %u of %u on two threads, %llu..%llu "
                           "lane %u device %u of %u on one",
                           (unsigned long long)base, i, (unsigned long long)b->start, (unsigned long long)b->end,
                           b->lane, b->device, b->producer, (unsigned long long)a->start,
                           (unsigned long long)a->end, a->lane, a->device, a->producer);
        }
        an_result_free(&r[0]);
        an_result_free(&r[1]);
        st_store_destroy(&t[0].s);
    }
    free(saved);
}

/* The same order on the real traces' bubbles. */
TEST(analysis_bubbles_of_real_traces_come_in_time_then_lane_order) {
    static const char *const names[] = {"resnet_2080ti_two_threads.json.gz", "qwen_h100_with_stack.json.gz",
                                        "sampled_rank-0.json.gz", "v100_ns_resolution_hta.json.gz"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        st_store *s = load_sample(names[k]);
        an_result r;
        ASSERT_OK(an_analyze(s, NULL, &r, NULL));
        ASSERT_GT(r.n_bubbles, 10);
        check_bubble_order(&r);
        an_result_free(&r);
        st_store_destroy(&s);
    }
}

/* Two call sites of the same API: each is charged the idle its own wait caused, by hand. */
TEST(analysis_idle_goes_to_the_site_whose_wait_caused_it) {
    tl t;
    tl_init(&t);
    static const char *const other_line[] = {"cudaStreamSynchronize", "aten::item"};
    tl_site(&t, 6, other_line, 2);
    tl_waiter(&t);                        /* site 5: bubble 100..310, 96 us its (check_waiter) */
    tl_kernel_on(&t, 0, 7, 400, 410, 900); /* C */
    tl_sync_for(&t, 420, 901, 6, 0, 7);   /* site 6 waits for C */
    tl_kernel_on(&t, 0, 7, 1000, 1010, 1020); /* D, submitted at 1000 */
    tl_done(&t);
    an_result r;
    ASSERT_OK(an_analyze(t.s, NULL, &r, NULL));
    /* Bubble 320..410: no wait overlaps it, C was submitted at 400: the host's 90 us.
     * Bubble 900..1010: the wait at site 6 (420..901) overlaps it 900..901; of the 109 us after, it
     * holds up to the 480 us of C the GPU ran since the wait began (420, after the bubble before
     * ended at 410 so from 420 on): all 109. D's submission at 1000 falls inside that share, so no
     * launch latency is left: the whole 110 us is site 6's. Site 5 keeps its 96 us. */
    const an_bubble *mid = device_bubble_on(&r, r.blocks[0].producer, 0, 320);
    ASSERT_NOT_NULL(mid);
    ASSERT_EQ(mid->cause, AN_CAUSE_HOST);
    const an_bubble *last = device_bubble_on(&r, r.blocks[0].producer, 0, 900);
    ASSERT_NOT_NULL(last);
    ASSERT_EQ(last->cause, AN_CAUSE_BLOCK);
    ASSERT_UEQ(an_bubble_parts(&r, last).block_from, 900000);
    ASSERT_UEQ(an_bubble_parts(&r, last).block_to, 1010000);
    ASSERT_EQ(r.n_sites, 2);
    const an_site *s5 = site_at(&r, "step", t.s, NULL), *s6 = site_at(&r, "aten::item", t.s, NULL);
    ASSERT_STR_EQ(st_str(t.s, s5->name), "cudaStreamSynchronize");
    ASSERT_STR_EQ(st_str(t.s, s6->name), "cudaStreamSynchronize");
    ASSERT_UEQ(s5->gpu_idle_ns, 96000);
    ASSERT_UEQ(s6->gpu_idle_ns, 110000);
    for (size_t i = 0; i < r.n_blocks; i++)
        ASSERT_UEQ(r.blocks[i].gpu_idle_ns, r.blocks[i].start == 5000 ? 96000 : 110000);
    const an_device *d = device_of(&r, r.blocks[0].producer, 0);
    ASSERT_UEQ(d->idle_by_cause[AN_CAUSE_BLOCK], 96000 + 110000);
    ASSERT_UEQ(d->idle_by_cause[AN_CAUSE_HOST], 104000 + 90000);
    an_result_free(&r);
    st_store_destroy(&t.s);
}

/* ---- invariants on every real trace ---- */

/* What holds whatever the rules: per device, busy and idle make its span (the whole range when the
 * store holds one process, else no more than that and no less than its work's first to last) and the
 * causes make the idle; a wait is charged only for bubbles of its own process and GPU (or any GPU of its process
 * when the wait's GPU is unknown) that it touches, and never more of one than lies between the
 * bubble's ends; what a wait or a site is charged is what the bubbles say; a thread's blocked time
 * never exceeds its wall time. Returns the number of bubbles charged to a wait. */
static size_t check_invariants(const char *what, const st_store *s) {
    an_result r;
    err_msg err = {{0}};
    if (an_analyze(s, NULL, &r, &err) != 0)
        TASK_FAIL_("%s: %s", what, err.msg);
    ASSERT_GT(r.n_devices, 0);
    for (size_t i = 0; i < r.n_devices; i++) {
        const an_device *d = &r.devices[i];
        uint64_t causes = 0;
        for (int c = 0; c < AN_CAUSE_N_; c++)
            causes += d->idle_by_cause[c];
        ASSERT_UEQ(d->busy_ns + d->idle_ns, d->span_ns);
        ASSERT(d->span_ns <= r.t1 - r.t0);
        if (st_producer_count(s) == 1)
            ASSERT_UEQ(d->span_ns, r.t1 - r.t0);
        ASSERT(d->first == 0 || d->last - d->first <= d->span_ns);
        ASSERT_UEQ(causes, d->idle_ns);
    }
    uint64_t *charged = calloc(r.n_blocks + 1, sizeof *charged), *touched = calloc(r.n_blocks + 1, sizeof *touched);
    uint64_t *dev_charged = calloc(r.n_devices + 1, sizeof *dev_charged);
    ASSERT(charged != NULL && touched != NULL && dev_charged != NULL);
    size_t n_charged = 0;
    for (size_t k = 0; k < r.n_bubbles; k++) {
        const an_bubble *b = &r.bubbles[k];
        ASSERT(b->start < b->end && b->start >= r.t0 && b->end <= r.t1);
        if (b->cause != AN_CAUSE_BLOCK) {
            ASSERT_UEQ(b->block, AN_NONE);
            ASSERT_UEQ(b->split, AN_NONE);
            continue;
        }
        ASSERT(b->block < r.n_blocks);
        const an_block *bl = &r.blocks[b->block];
        /* the wait's share lies inside its bubble */
        an_wait_split w = an_bubble_parts(&r, b);
        ASSERT(b->split < r.n_splits);
        ASSERT(b->start <= w.block_from && w.block_from <= w.block_to && w.block_to <= w.launch_from &&
               w.launch_from <= b->end);
        /* its own process, its own GPU, a bubble it touches */
        ASSERT_EQ(bl->producer, b->producer);
        if (bl->device != TP_NO_DEVICE && bl->device != b->device)
            TASK_FAIL_("%s: idle of GPU %u charged to a wait on GPU %u", what, b->device, bl->device);
        ASSERT(bl->end >= b->start && bl->start < b->end);
        if (b->lane != AN_DEVICE_LANE)
            continue;
        n_charged++;
        charged[b->block] += w.block_to - w.block_from;
        touched[b->block] += b->end - b->start;
        for (size_t i = 0; i < r.n_devices; i++)
            if (r.devices[i].producer == b->producer && r.devices[i].device == b->device)
                dev_charged[i] += w.block_to - w.block_from;
    }
    uint64_t blocked = 0, idle = 0;
    for (size_t i = 0; i < r.n_blocks; i++) {
        const an_block *bl = &r.blocks[i];
        ASSERT_UEQ(bl->gpu_idle_ns, charged[i]);
        ASSERT(bl->gpu_idle_ns <= touched[i]);
        ASSERT(bl->own_ns <= bl->end - bl->start);
        blocked += bl->own_ns;
        idle += bl->gpu_idle_ns;
    }
    ASSERT_UEQ(blocked, r.blocked_ns);
    for (size_t i = 0; i < r.n_devices; i++)
        ASSERT_UEQ(r.devices[i].idle_by_cause[AN_CAUSE_BLOCK], dev_charged[i]);
    uint64_t site_idle = 0, site_count = 0;
    for (size_t i = 0; i < r.n_sites; i++) {
        site_idle += r.sites[i].gpu_idle_ns;
        site_count += r.sites[i].count;
    }
    ASSERT_UEQ(site_idle, idle);
    ASSERT_UEQ(site_count, r.n_blocks);
    /* per thread: its blocked time within its wall, from its first call's start to its last's end */
    for (size_t l = 0; l < st_lane_count(s); l++) {
        if (st_lane_get(s, l)->kind != ST_LANE_THREAD)
            continue;
        size_t n;
        const st_event *ev = st_lane_events(s, l, &n);
        uint64_t first = UINT64_MAX, last = 0, own = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t a = ev[i].start < r.t0 ? r.t0 : ev[i].start, b = st_ev_end(s, &ev[i]) > r.t1 ? r.t1 : st_ev_end(s, &ev[i]);
            if (b <= a)
                continue;
            first = a < first ? a : first;
            last = b > last ? b : last;
        }
        for (size_t i = 0; i < r.n_blocks; i++)
            if (r.blocks[i].lane == l)
                own += r.blocks[i].own_ns;
        if (own > 0)
            ASSERT(first < last && own <= last - first);
    }
    fprintf(stderr, "%s: %zu devices, %zu waits, %zu bubbles (%zu device bubbles charged to a wait)\n", what,
            r.n_devices, r.n_blocks, r.n_bubbles, n_charged);
    free(charged);
    free(touched);
    free(dev_charged);
    an_result_free(&r);
    return n_charged;
}

/* Every trace in a directory whose name ends in suffix; the number checked. */
static size_t check_invariants_in(const char *dir, const char *suffix, size_t *n_charged) {
    DIR *d = opendir(dir);
    if (d == NULL)
        TASK_FAIL_("cannot list %s", dir);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name), sl = strlen(suffix);
        if (len <= sl || strcmp(e->d_name + len - sl, suffix) != 0)
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        st_store *s = st_store_new(NULL);
        ASSERT_NOT_NULL(s);
        err_msg err = {{0}};
        if (ingest_file(s, path, NULL, NULL, &err) != 0)
            TASK_FAIL_("%s: %s", path, err.msg);
        *n_charged += check_invariants(e->d_name, s);
        st_store_destroy(&s);
        n++;
    }
    closedir(d);
    return n;
}

TEST(analysis_invariants_hold_on_every_real_trace) {
    size_t charged = 0;
    /* every profiler trace and Nsight export of samples/traces, nine and three at least (shared/traces
     * holds copies of some of them) */
    ASSERT_GE(check_invariants_in(KINETO_TRACE_DIR, ".json.gz", &charged), 9);
    ASSERT_GE(check_invariants_in(NSYS_TRACE_DIR, ".sqlite", &charged), 3);
    /* two ranks in one store: two processes, each with its GPU */
    st_store *s = load_ranks();
    charged += check_invariants("sampled_rank-0 + sampled_rank-1", s);
    st_store_destroy(&s);
    ASSERT_GT(charged, 0); /* the waits' rules were exercised, not only the others */
}

/* ---- the step thresholds, at their edge ---- */

/* Ten profiler steps whose walls (ms) put one step just under the slow bound and one just over, by
 * hand: walls 10, 12, 8, 11, 9, 10, 13, 7, 19.39, 19.40; sorted, the middle two are 10 and 11, so
 * the median is 10.5; the distances from it, sorted, are 0.5 0.5 0.5 1.5 1.5 2.5 2.5 3.5 8.89 8.90,
 * whose median (the MAD) is (1.5 + 2.5) / 2 = 2; the bound is 10.5 + 3 x 1.4826 x 2 = 19.3956 ms
 * (and 1.1 x 10.5 = 11.55 ms): 19.40 is slow, 19.39 and 13 are not. */
TEST(steps_are_slow_just_above_median_plus_three_scaled_mads) {
    static const uint64_t wall_us[10] = {10000, 12000, 8000, 11000, 9000, 10000, 13000, 7000, 19390, 19400};
    tl t;
    tl_init(&t);
    uint64_t at = 1000;
    for (int i = 0; i < 10; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "ProfilerStep#%d", 100 + i);
        tl_range(&t, at, at + wall_us[i], nm, (uint64_t)i + 1);
        tl_kernel(&t, at + 10, at + 20, at + 5000);
        at += wall_us[i];
    }
    an_result r;
    an_steps st;
    tl_steps(&t, &r, &st);
    ASSERT_EQ(st.source, AN_STEPS_PROFILER);
    ASSERT_EQ(st.n_steps, 10);
    ASSERT_UEQ(st.median_ns, 10500000);
    for (size_t i = 0; i < 10; i++) {
        ASSERT_UEQ(st.steps[i].end - st.steps[i].start, wall_us[i] * 1000);
        if (st.steps[i].outlier != (i == 9))
            TASK_FAIL_("step %zu (%" PRIu64 " us): outlier %d", i, wall_us[i], st.steps[i].outlier);
    }
    an_steps_free(&st);
    an_result_free(&r);
    st_store_destroy(&t.s);
}

/* ---- what the mutation run (bench/mutate) found no test for ---- */

/* The timeline into its store, analysed with the default options. */
static void tl_analysed(tl *t, an_result *r) {
    tl_done(t);
    ASSERT_OK(an_analyze(t->s, NULL, r, NULL));
}

static void tl_free(tl *t, an_result *r) {
    an_result_free(r);
    st_store_destroy(&t->s);
}

/* A call site of Python frames over the native call: frames[i] in files[i] (NULL: native). */
static void tl_py_site(tl *t, uint32_t id, const char *const *funcs, const char *const *files, size_t n) {
    tp_callsite cs = {.kind = TP_K_CALLSITE, .device = TP_NO_DEVICE, .id = id, .n_frames = (uint16_t)n};
    ASSERT_OK(tp_enc_add(t->enc, &cs));
    for (size_t i = 0; i < n; i++) {
        tp_frame f = {.kind = TP_K_FRAME, .flags = files[i] ? TP_FRAME_PYTHON : TP_FRAME_NATIVE, .index = (uint16_t)i,
                      .callsite = id, .line = files[i] ? 10 : 0, .func = tp_enc_intern_cstr(t->enc, funcs[i]),
                      .file = files[i] ? tp_enc_intern_cstr(t->enc, files[i]) : 0,
                      .module = files[i] ? 0 : tp_enc_intern_cstr(t->enc, "/usr/lib/libcudart.so.12")};
        ASSERT_OK(tp_enc_add(t->enc, &f));
    }
}

/* torch.cuda.synchronize() is told by its Python frame (named synchronize, in torch/cuda), and the
 * advice names it; another torch/cuda frame (a stream's wait) is not a device synchronize. */
TEST(advice_tells_torch_cuda_synchronize_by_its_frame) {
    tl t;
    tl_init(&t);
    static const char *const sync_f[] = {"cudaDeviceSynchronize", "synchronize", "train"};
    static const char *const sync_file[] = {NULL, "/opt/venv/lib/python3.11/site-packages/torch/cuda/__init__.py",
                                            "train.py"};
    static const char *const wait_f[] = {"cudaStreamSynchronize", "synchronize_stream", "train"};
    static const char *const wait_file[] = {NULL, "/opt/venv/lib/python3.11/site-packages/torch/cuda/streams.py",
                                            "train.py"};
    tl_py_site(&t, 21, sync_f, sync_file, 3);
    tl_py_site(&t, 22, wait_f, wait_file, 3);
    tl_block(&t, 100, 200, "cudaDeviceSynchronize", 21);
    tl_block(&t, 300, 400, "cudaStreamSynchronize", 22);
    an_result r;
    tl_analysed(&t, &r);
    an_advice a;
    an_advise(t.s, site_at(&r, "synchronize", t.s, NULL), &a);
    ASSERT_EQ(a.fix, AN_FIX_DEVICE_SYNC);
    ASSERT_STR_EQ(a.why, "cudaDeviceSynchronize inside synchronize blocked 1 time");
    an_advise(t.s, site_at(&r, "synchronize_stream", t.s, NULL), &a);
    ASSERT_EQ(a.fix, AN_FIX_STREAM_SYNC);
    ASSERT_STR_EQ(a.why, "cudaStreamSynchronize blocked 1 time (sync)");
    tl_free(&t, &r);
}

/* A store shows PyTorch by any one of its names (an operator's name alone will do), and each store
 * is judged on its own strings, however many the store asked before had. */
TEST(advice_tells_a_pytorch_trace_by_its_own_names) {
    tl a, b;
    tl_init(&a); /* no PyTorch name, and more strings than b */
    for (int i = 0; i < 40; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "kernel_%d", i);
        tl_range(&a, (uint64_t)i * 10, (uint64_t)i * 10 + 5, nm, (uint64_t)i + 1);
    }
    tl_done(&a);
    tl_init(&b);
    tl_range(&b, 0, 10, "aten::mm", 1);
    tl_done(&b);
    ASSERT_EQ(an_trace_uses_pytorch(a.s), 0);
    ASSERT_EQ(an_trace_uses_pytorch(b.s), 1);
    ASSERT_EQ(an_trace_uses_pytorch(a.s), 0);
    st_store_destroy(&a.s);
    st_store_destroy(&b.s);
}

/* The host's own idle: a DataLoader's range is the input pipeline, any other range the host's work,
 * and time in no range says that no range names it. */
TEST(advice_for_host_idle_says_which_range_or_none) {
    tl t;
    tl_init(&t);
    tl_done(&t);
    an_host_range h = {.producer = 0, .name = 0, .numbered = 0, .idle_ns = 5000};
    an_advice a;
    an_advise_host(t.s, &h, "", &a);
    ASSERT_EQ(a.fix, AN_FIX_HOST);
    ASSERT_UEQ(a.gpu_ns, 5000);
    ASSERT_STR_CONTAINS(a.why, "in no range the trace names");
    an_advise_host(t.s, &h, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", &a);
    ASSERT_EQ(a.fix, AN_FIX_INPUT);
    ASSERT_STR_EQ(a.why, "the GPU had nothing queued while the host was in this range, in no CUDA call that waited");
    h.numbered = 1;
    an_advise_host(t.s, &h, "ProfilerStep#3", &a);
    ASSERT_EQ(a.fix, AN_FIX_HOST);
    ASSERT_STR_CONTAINS(a.why, "in this range (each of them)");
    st_store_destroy(&t.s);
}

/* The names of causes and rules, and "?" for what is none of them. */
TEST(analysis_names_say_what_is_out_of_range) {
    ASSERT_STR_EQ(an_cause_name(AN_CAUSE_BLOCK), "blocked");
    ASSERT_STR_EQ(an_cause_name(AN_CAUSE_HOST), "host");
    ASSERT_STR_EQ(an_cause_name(AN_CAUSE_N_), "?");
    ASSERT_STR_EQ(an_cause_name(-1), "?");
    ASSERT_STR_EQ(an_rule_name(AN_RULE_LOW_UTIL), "low-util");
    ASSERT_STR_EQ(an_rule_name(AN_RULE_N_), "?");
    ASSERT_STR_EQ(an_rule_name(0), "?");
    ASSERT_STR_EQ(an_block_kind_name(AN_BLOCK_OTHER), "other");
    ASSERT_STR_EQ(an_block_kind_name(AN_BLOCK_KIND_N_), "?");
}

/* A bubble's idle by cause within a window (what the viewer's stall pane sums), by hand on the
 * waiter's bubble: 100..310 us, the wait's share 100..196, the host's 196..300, launch 300..310. */
TEST(analysis_bubble_split_cuts_each_cause_at_the_window) {
    tl t;
    tl_init(&t);
    tl_waiter(&t);
    an_result r;
    tl_analysed(&t, &r);
    const an_bubble *b = device_bubble_on(&r, r.blocks[0].producer, 0, 100);
    ASSERT_NOT_NULL(b);
    uint64_t all[AN_CAUSE_N_] = {0}, part[AN_CAUSE_N_] = {0}, none[AN_CAUSE_N_] = {0};
    an_bubble_split(&r, b, 0, UINT64_MAX, all);
    ASSERT_UEQ(all[AN_CAUSE_BLOCK], 96000);
    ASSERT_UEQ(all[AN_CAUSE_HOST], 104000);
    ASSERT_UEQ(all[AN_CAUSE_LAUNCH], 10000);
    ASSERT_UEQ(all[0], 0);
    an_bubble_split(&r, b, 150000, 305000, part); /* 150..196 blocked, 196..300 host, 300..305 launch */
    ASSERT_UEQ(part[AN_CAUSE_BLOCK], 46000);
    ASSERT_UEQ(part[AN_CAUSE_HOST], 104000);
    ASSERT_UEQ(part[AN_CAUSE_LAUNCH], 5000);
    an_bubble_split(&r, b, 320000, 400000, none); /* after the bubble */
    ASSERT_UEQ(none[AN_CAUSE_BLOCK] + none[AN_CAUSE_HOST] + none[AN_CAUSE_LAUNCH], 0);
    tl_free(&t, &r);
}

/* The longest bubble is found wherever it lies, the first in time order too: stream 7 idles
 * 10..1000 us (990), while stream 8's one kernel keeps the GPU busy to 50, so the GPU's bubble is
 * 50..1000 (950). */
TEST(analysis_longest_bubble_may_be_the_first) {
    tl t;
    tl_init(&t);
    tp_stream st = {.kind = TP_K_STREAM, .device = 0, .stream = 8};
    ASSERT_OK(tp_enc_add(t.enc, &st));
    tl_kernel_on(&t, 0, 7, 0, 0, 10);
    tl_kernel_on(&t, 0, 8, 0, 0, 50);
    tl_kernel_on(&t, 0, 7, 900, 1000, 1010);
    an_result r;
    tl_analysed(&t, &r);
    ASSERT_EQ(r.n_bubbles, 2);
    ASSERT_UEQ(r.bubbles[0].start, 10000);
    ASSERT_UEQ(r.bubble_max_ns, 990000);
    /* each GPU counts its own records */
    ASSERT_UEQ(device_of(&r, r.bubbles[0].producer, 0)->kernels, 3);
    tl_free(&t, &r);
}

/* A blocking call on (dev) at [a, b) us, at call site site. */
static void tl_block_on(tl *t, uint16_t dev, uint64_t a, uint64_t b, const char *api, uint32_t site) {
    tp_api x = {.kind = TP_K_API, .flags = TP_F_BLOCKING, .device = dev, .tid = 100, .start = a * 1000,
                .end = b * 1000, .correlation = t->corr++, .callsite = site, .name = tp_enc_intern_cstr(t->enc, api)};
    ASSERT_OK(tp_enc_add(t->enc, &x));
}

static const an_finding *finding_of(const an_result *r, int rule, uint64_t start_us) {
    for (size_t i = 0; i < r->n_findings; i++)
        if (r->findings[i].rule == rule && r->findings[i].start == start_us * 1000)
            return &r->findings[i];
    TASK_FAIL_("no finding of rule %d at %" PRIu64 " us", rule, start_us);
    return NULL;
}

/* A call rule's finding per call site: its worst call, and its GPU when all of the site's calls
 * waited on that one (two GPUs of one process; sites 5 and 6 call on one GPU each, site 7 on
 * both). A call no rule names blocks as "other". Each GPU counts its own kernels. */
TEST(analysis_call_findings_are_per_site_with_their_gpu) {
    tl t;
    tl_init(&t);
    tl_device(&t, 1, 9);
    static const char *const six[] = {"cudaStreamSynchronize", "aten::item"};
    static const char *const seven[] = {"cudaStreamSynchronize", "aten::is_nonzero"};
    tl_site(&t, 6, six, 2);
    tl_site(&t, 7, seven, 2);
    tl_kernel_on(&t, 0, 7, 0, 1, 2);
    tl_kernel_on(&t, 1, 9, 0, 1, 2);
    tl_block_on(&t, 0, 100, 130, "cudaStreamSynchronize", 5); /* 30 us, site 5's worst */
    tl_block_on(&t, 0, 200, 210, "cudaStreamSynchronize", 5);
    tl_block_on(&t, 1, 300, 330, "cudaStreamSynchronize", 6); /* 30 us, site 6's worst */
    tl_block_on(&t, 0, 400, 410, "cudaStreamSynchronize", 7);
    tl_block_on(&t, 1, 500, 540, "cudaStreamSynchronize", 7); /* 40 us */
    tl_block_on(&t, 0, 600, 605, "cudaUnheardOfWait", 0);
    an_result r;
    tl_analysed(&t, &r);
    const an_finding *f5 = finding_of(&r, AN_RULE_SYNC_API, 100), *f6 = finding_of(&r, AN_RULE_SYNC_API, 300),
                     *f7 = finding_of(&r, AN_RULE_SYNC_API, 500);
    ASSERT_UEQ(f5->end, 130000);
    ASSERT_UEQ(f5->count, 2);
    ASSERT_EQ(f5->device, 0);
    ASSERT_UEQ(f6->end, 330000);
    ASSERT_UEQ(f6->count, 1);
    ASSERT_EQ(f6->device, 1);
    ASSERT_UEQ(f7->count, 2);
    ASSERT_EQ(f7->device, TP_NO_DEVICE);
    int other = 0;
    for (size_t i = 0; i < r.n_blocks; i++)
        if (strcmp(st_str(t.s, r.blocks[i].name), "cudaUnheardOfWait") == 0) {
            ASSERT_EQ(r.blocks[i].kind, AN_BLOCK_OTHER);
            other++;
        }
    ASSERT_EQ(other, 1);
    ASSERT_UEQ(device_of(&r, r.blocks[0].producer, 0)->kernels, 1);
    ASSERT_UEQ(device_of(&r, r.blocks[0].producer, 1)->kernels, 1);
    tl_free(&t, &r);
}

/* Two processes, each with its GPU 0 (stream 7): the first runs 2 kernels, 10..50 and 70..100 us,
 * the second 3, 1000..1100, 2000..2100 and 2995..3000 us. */
static st_store *two_process_store(void) {
    tl a, b;
    tl_init_in(&a, 77, NULL);
    tl_kernel_on(&a, 0, 7, 0, 10, 50);
    tl_kernel_on(&a, 0, 7, 60, 70, 100);
    tl_add(&a);
    tl_init_in(&b, 78, a.s);
    tl_kernel_on(&b, 0, 7, 990, 1000, 1100);
    tl_kernel_on(&b, 0, 7, 1990, 2000, 2100);
    tl_kernel_on(&b, 0, 7, 2990, 2995, 3000);
    tl_done(&b);
    return a.s;
}

/* Two processes, each with its GPU 0: each GPU counts the records of its own process only (2 and
 * 3 kernels, as built), and its span is its own work's (10..100 us and 1000..3000 us). */
TEST(analysis_each_process_gpu_counts_its_own_records) {
    st_store *s = two_process_store();
    an_result r;
    ASSERT_OK(an_analyze(s, NULL, &r, NULL));
    ASSERT_EQ(r.n_devices, 2);
    for (size_t i = 0; i < 2; i++) {
        const an_device *d = &r.devices[i];
        int first = d->kernels == 2;
        ASSERT_UEQ(d->kernels, first ? 2 : 3);
        ASSERT_UEQ(d->first, first ? 10000 : 1000000);
        ASSERT_UEQ(d->last, first ? 100000 : 3000000);
    }
    ASSERT(r.devices[0].producer != r.devices[1].producer);
    an_result_free(&r);
    st_store_destroy(&s);
}

/* The GPU-gaps rule and the low-utilisation rule name the wait that cost most of the gap, by hand: kernel A runs 10..100
 * us (launched at 0), the host waits at 5..250 (call site 5), the next kernel is launched at 260 and
 * runs 270..280. The bubble 100..270 is the wait's from 100 to 250, and the 20 us after it too
 * (the wait held the host back for the 95 us A ran after it began): 170 of 170 us, so the gap
 * (over a 100 us rule) names the wait, and so does the low-utilisation window around it. */
TEST(analysis_gpu_gap_names_the_wait_that_cost_it) {
    tl t;
    tl_init(&t);
    tl_kernel_on(&t, 0, 7, 0, 10, 100);
    tl_sync(&t, 5, 250, 5);
    tl_kernel_on(&t, 0, 7, 260, 270, 280);
    tl_done(&t);
    an_opts o = {.rule_gap_ns = 100000};
    an_result r;
    ASSERT_OK(an_analyze(t.s, &o, &r, NULL));
    ASSERT_EQ(r.n_blocks, 1);
    ASSERT(r.blocks[0].callsite != 0);
    const an_finding *f = finding_of(&r, AN_RULE_GPU_GAPS, 100);
    ASSERT_UEQ(f->count, 1);
    ASSERT_UEQ(f->callsite, r.blocks[0].callsite);
    ASSERT_STR_EQ(st_str(t.s, f->name), "cudaStreamSynchronize");
    const an_bubble *b = device_bubble_at(&r, 100);
    ASSERT_NOT_NULL(b);
    ASSERT_UEQ(an_bubble_parts(&r, b).block_from, 100000);
    ASSERT_UEQ(an_bubble_parts(&r, b).block_to, 270000);
    an_result_free(&r);
    /* Under the default 500 ms rule there is no gap finding: the low-utilisation window over the
     * bubble (the GPU's first finding then) names the wait. */
    ASSERT_OK(an_analyze(t.s, NULL, &r, NULL));
    size_t low = 0;
    for (size_t i = 0; i < r.n_findings; i++)
        if (r.findings[i].rule == AN_RULE_LOW_UTIL) {
            ASSERT(r.findings[i].start <= 100000 && r.findings[i].end >= 270000);
            ASSERT_UEQ(r.findings[i].callsite, r.blocks[0].callsite);
            low++;
        }
    ASSERT_EQ(low, 1);
    tl_free(&t, &r);
}

/* A wait that begins at the trace's time 0 holds the host back for all the GPU ran after it: A runs
 * 10..100 us, the wait 0..101, the next kernel 310..320 (launched at 300): of the bubble 100..310
 * the wait's share is 100..101 and the 100 us of A after it began, to 201. */
TEST(analysis_wait_from_time_zero_holds_back_all_it_waited_for) {
    tl t;
    tl_init(&t);
    tl_kernel_on(&t, 0, 7, 0, 10, 100);
    tl_sync_for(&t, 0, 101, 5, 0, 7);
    tl_kernel_on(&t, 0, 7, 300, 310, 320);
    an_result r;
    tl_analysed(&t, &r);
    const an_bubble *b = device_bubble_at(&r, 100);
    ASSERT_NOT_NULL(b);
    ASSERT_EQ(b->cause, AN_CAUSE_BLOCK);
    ASSERT_UEQ(an_bubble_parts(&r, b).block_from, 100000);
    ASSERT_UEQ(an_bubble_parts(&r, b).block_to, 201000);
    tl_free(&t, &r);
}

/* A utilisation window too small for the span is widened to keep under 2^20 windows a GPU: a
 * 1 ns window over a span of (2^20 - 1) x 1049000 ns (1100 s) becomes span / (2^20 - 1) + 1 =
 * 1049001 ns. The GPU works 0..20 ms and in the span's last 10 us: windows 0..18 are busy, window 19
 * (from 19 x 1049001 = 19931019 ns) is busy 68981 ns of its 1049001, the first low one. */
TEST(analysis_low_util_windows_widen_to_a_bounded_count) {
    const uint64_t span_us = ((1u << 20) - 1) * 1049ull;
    tl t;
    tl_init(&t);
    tl_kernel_on(&t, 0, 7, 0, 0, 20000);
    tl_kernel_on(&t, 0, 7, span_us - 20, span_us - 10, span_us);
    tl_done(&t);
    an_opts o = {.low_util_window_ns = 1};
    an_result r;
    ASSERT_OK(an_analyze(t.s, &o, &r, NULL));
    size_t low = 0;
    for (size_t i = 0; i < r.n_findings; i++)
        if (r.findings[i].rule == AN_RULE_LOW_UTIL) {
            ASSERT_UEQ(r.findings[i].start, 19931019);
            low++;
        }
    ASSERT_EQ(low, 1);
    tl_free(&t, &r);
}

/* The host's idle in a window and the range most of it went to, by hand on the timeline of
 * analysis_host_idle_goes_to_the_innermost_range: in [100, 330) us, step#1 holds 100..150, 260..310
 * and 320..330 (110 us), load 150..260 (110 us): a tie, which goes to the range met first. */
TEST(analysis_host_in_a_window_names_the_range_met_first_on_a_tie) {
    tl t;
    tl_init(&t);
    tl_range(&t, 0, 1000, "step#1", 1);
    tl_range(&t, 150, 260, "load", 2);
    tl_kernel(&t, 0, 10, 100);
    tl_kernel(&t, 300, 310, 320);
    tl_kernel(&t, 1000, 1010, 1100);
    an_result r;
    tl_analysed(&t, &r);
    uint64_t ns = 0, range_ns = 0;
    uint32_t range = 0;
    an_host_in(&r, r.devices[0].producer, 100000, 330000, &ns, &range, &range_ns);
    ASSERT_UEQ(ns, 220000);
    ASSERT_UEQ(range_ns, 110000);
    ASSERT_STR_EQ(st_str(t.s, range), "step#1");
    an_host_in(&r, r.devices[0].producer, 100000, 300000, &ns, &range, &range_ns); /* step#1 90, load 110 */
    ASSERT_UEQ(ns, 200000);
    ASSERT_STR_EQ(st_str(t.s, range), "load");
    tl_free(&t, &r);
}

/* The trace's first correlation id (1) is matched like any other: a wait that names no GPU, with
 * correlation 1, is put on the GPU its sync record names (GPU 1 of two). */
TEST(analysis_the_first_correlation_finds_its_gpu_record) {
    tl t;
    tl_init(&t);
    tl_device(&t, 1, 9);
    ASSERT_EQ(t.corr, 1);
    tl_sync_for(&t, 5, 20, 5, 1, 9); /* correlation 1 */
    tl_kernel_on(&t, 1, 9, 30, 40, 50);
    tl_kernel_on(&t, 0, 7, 30, 40, 50);
    an_result r;
    tl_analysed(&t, &r);
    ASSERT_EQ(r.n_blocks, 1);
    ASSERT_EQ(r.blocks[0].device, 1);
    tl_free(&t, &r);
}

/* Two threads of one process launch onto three streams of two GPUs, drawn from a fixed seed, and
 * now and then wait for one of them (a cudaStreamSynchronize naming no device, and the GPU-side
 * record that names it). Correlation ids are handed out in the order drawn, through map. What
 * was drawn is kept: each wait's GPU, and which thread launched the kernel that starts at each
 * time on each stream. */
enum { DRAW_STEPS = 1500, DRAW_STREAMS = 3 };
typedef struct drawn {
    uint64_t wait_start[DRAW_STEPS];
    uint32_t wait_corr[DRAW_STEPS];
    uint16_t wait_dev[DRAW_STEPS];
    size_t n_waits;
    uint64_t kernel_start[DRAW_STEPS];
    uint32_t kernel_stream[DRAW_STEPS], kernel_tid[DRAW_STEPS];
    size_t n_kernels;
} drawn;

static void tl_draw(tl *t, uint32_t (*map)(uint32_t), drawn *d) {
    static const uint16_t dev[DRAW_STREAMS] = {0, 0, 1};
    static const uint32_t stream[DRAW_STREAMS] = {7, 8, 9};
    for (int i = 0; i < DRAW_STREAMS; i++) {
        tp_stream st = {.kind = TP_K_STREAM, .device = dev[i], .stream = stream[i]};
        if (i != 1)
            tl_device(t, dev[i], stream[i]);
        else
            ASSERT_OK(tp_enc_add(t->enc, &st));
    }
    memset(d, 0, sizeof *d);
    uint64_t x = 0x9E3779B97F4A7C15ull, host[2] = {0, 0}, free_at[DRAW_STREAMS] = {0, 0, 0};
    uint32_t seq = 1;
    for (int step = 0; step < DRAW_STEPS; step++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int th = (int)(x % 2), q = (int)(x / 2 % DRAW_STREAMS);
        uint64_t a = host[th] + x / 8 % 30 + 1;
        uint32_t tid = 100 + 100 * (uint32_t)th, c = map(seq++);
        if (x / 256 % 6 == 0) { /* a wait for stream q, done 1 us after its work */
            uint64_t end = (free_at[q] > a ? free_at[q] : a) + 1;
            tp_api api = {.kind = TP_K_API, .flags = TP_F_BLOCKING, .device = TP_NO_DEVICE, .tid = tid,
                          .start = a * 1000, .end = end * 1000, .correlation = c,
                          .name = tp_enc_intern_cstr(t->enc, "cudaStreamSynchronize")};
            tp_sync y = {.kind = TP_K_SYNC, .device = dev[q], .stream = stream[q], .start = (end - 1) * 1000,
                         .end = end * 1000, .correlation = c, .event = TP_NO_ID, .sync_type = TP_SYNC_STREAM};
            ASSERT_OK(tp_enc_add(t->enc, &api));
            ASSERT_OK(tp_enc_add(t->enc, &y));
            d->wait_start[d->n_waits] = a * 1000;
            d->wait_corr[d->n_waits] = c;
            d->wait_dev[d->n_waits++] = dev[q];
            free_at[q] = end;
            host[th] = end;
        } else { /* a launch, its kernel after the stream's work, sometimes after a gap */
            uint64_t ks = (free_at[q] > a + 3 ? free_at[q] : a + 3) + x / 4096 % 50, ke = ks + 5 + x / 65536 % 40;
            tp_api api = {.kind = TP_K_API, .flags = TP_F_LAUNCH, .device = dev[q], .tid = tid, .start = a * 1000,
                          .end = (a + 2) * 1000, .correlation = c,
                          .name = tp_enc_intern_cstr(t->enc, "cudaLaunchKernel")};
            tp_kernel k = {.kind = TP_K_KERNEL, .device = dev[q], .stream = stream[q], .start = ks * 1000,
                           .end = ke * 1000, .correlation = c, .name = tp_enc_intern_cstr(t->enc, "gemm")};
            ASSERT_OK(tp_enc_add(t->enc, &api));
            ASSERT_OK(tp_enc_add(t->enc, &k));
            d->kernel_start[d->n_kernels] = ks * 1000;
            d->kernel_stream[d->n_kernels] = stream[q];
            d->kernel_tid[d->n_kernels++] = tid;
            free_at[q] = ke;
            host[th] = a + 2;
        }
    }
}

static uint32_t corr_in_order(uint32_t i) {
    return i;
}

/* Every id still its own, none 0, but in no order: odd multiples wrap around 2^32. */
static uint32_t corr_scrambled(uint32_t i) {
    return i * 2654435761u;
}

/* The drawn timeline analysed: each wait on the GPU drawn for it, each bubble's submission from
 * the thread drawn for the kernel that ended it, and all three causes met. */
static void check_drawn(const st_store *s, const an_result *r, const drawn *d) {
    ASSERT_EQ(r->n_blocks, d->n_waits);
    for (size_t i = 0; i < r->n_blocks; i++) {
        size_t n, j = 0;
        uint32_t corr = st_lane_events(s, r->blocks[i].lane, &n)[r->blocks[i].index].corr;
        while (j < d->n_waits && d->wait_corr[j] != corr)
            j++;
        ASSERT_LT(j, d->n_waits);
        ASSERT_EQ(r->blocks[i].start, d->wait_start[j]);
        ASSERT_EQ(r->blocks[i].device, d->wait_dev[j]);
    }
    size_t causes[AN_CAUSE_N_] = {0}, stream_bubbles = 0;
    for (size_t i = 0; i < r->n_bubbles; i++) {
        const an_bubble *b = &r->bubbles[i];
        causes[b->cause]++;
        if (b->lane == AN_DEVICE_LANE)
            continue;
        stream_bubbles++;
        uint32_t st = st_lane_get(s, b->lane)->id;
        size_t j = 0;
        while (j < d->n_kernels && !(d->kernel_stream[j] == st && d->kernel_start[j] == b->end))
            j++;
        ASSERT_LT(j, d->n_kernels);
        ASSERT(b->launch_lane != AN_NONE);
        ASSERT_EQ(st_lane_get(s, b->launch_lane)->kind, ST_LANE_THREAD);
        ASSERT_EQ(st_lane_get(s, b->launch_lane)->id, d->kernel_tid[j]);
    }
    ASSERT_GT(stream_bubbles, 100);
    ASSERT_GT(causes[AN_CAUSE_BLOCK], 10);
    ASSERT_GT(causes[AN_CAUSE_LAUNCH], 10);
    ASSERT_GT(causes[AN_CAUSE_HOST], 10);
}

/* Correlation ids only name things: the analysis finds each wait's GPU and each bubble's launch
 * by them whether they grow with time (as CUPTI's do on a thread and, mostly, on a stream) or come
 * in no order at all (a foreign trace's), and gives the same answers both ways. */
TEST(analysis_finds_waits_and_launches_whatever_the_order_of_correlation_ids) {
    static drawn d1, d2;
    tl a, b;
    tl_init(&a);
    tl_draw(&a, corr_in_order, &d1);
    tl_init(&b);
    tl_draw(&b, corr_scrambled, &d2);
    an_result ra, rb;
    tl_analysed(&a, &ra);
    tl_analysed(&b, &rb);
    check_drawn(a.s, &ra, &d1);
    check_drawn(b.s, &rb, &d2);
    ASSERT_EQ(ra.n_bubbles, rb.n_bubbles);
    for (size_t i = 0; i < ra.n_bubbles; i++) {
        const an_bubble *x = &ra.bubbles[i], *y = &rb.bubbles[i];
        ASSERT_EQ(x->start, y->start);
        ASSERT_EQ(x->end, y->end);
        ASSERT_EQ(x->lane, y->lane);
        ASSERT_EQ(x->cause, y->cause);
        ASSERT_EQ(x->block, y->block);
        ASSERT_EQ(x->launch_lane, y->launch_lane);
    }
    for (size_t i = 0; i < ra.n_blocks; i++)
        ASSERT_EQ(ra.blocks[i].gpu_idle_ns, rb.blocks[i].gpu_idle_ns);
    tl_free(&a, &ra);
    tl_free(&b, &rb);
}

/* A gap of exactly the bubble threshold (20 us by default) is a bubble, on the stream and on the
 * GPU: kernels 0..10 and 30..40 us on one stream. */
TEST(analysis_a_gap_of_exactly_the_threshold_is_a_bubble) {
    tl t;
    tl_init(&t);
    tl_kernel_on(&t, 0, 7, 0, 0, 10);
    tl_kernel_on(&t, 0, 7, 20, 30, 40);
    an_result r;
    tl_analysed(&t, &r);
    ASSERT_EQ(r.n_bubbles, 2); /* the GPU's and the stream's */
    for (size_t i = 0; i < r.n_bubbles; i++) {
        ASSERT_UEQ(r.bubbles[i].start, 10000);
        ASSERT_UEQ(r.bubbles[i].end, 30000);
    }
    ASSERT(r.bubbles[0].lane != r.bubbles[1].lane);
    tl_free(&t, &r);
}

/* The viewer's sweep has a figure per GPU of each process, two processes' GPU 0 apart: on
 * two_process_store's timeline, busy 40 + 30 us and 100 + 100 + 5 us. */
TEST(sweep_keeps_each_process_gpu_apart) {
    st_store *s = two_process_store();
    an_result r;
    ASSERT_OK(an_analyze(s, NULL, &r, NULL));
    an_sweep *w = an_sweep_new(s, &r, 0);
    ASSERT_NOT_NULL(w);
    ASSERT_EQ(an_sweep_to(w, 4000000, 0), 1);
    an_gpu_fig *f = NULL;
    size_t n = 0;
    ASSERT_OK(an_sweep_figures(w, 4000000, &f, &n));
    ASSERT_EQ(n, 2);
    uint64_t busy[2] = {f[0].busy_ns, f[1].busy_ns};
    ASSERT(f[0].producer != f[1].producer);
    ASSERT_UEQ(busy[0] < busy[1] ? busy[0] : busy[1], 70000);
    ASSERT_UEQ(busy[0] < busy[1] ? busy[1] : busy[0], 205000);
    free(f);
    an_sweep_free(&w);
    an_result_free(&r);
    st_store_destroy(&s);
}

/* Stall rows before any analysis: none, and no failure. */
TEST(stall_sites_without_an_analysis_are_none) {
    tl t;
    tl_init(&t);
    tl_block(&t, 100, 200, "cudaDeviceSynchronize", 0);
    tl_done(&t);
    an_stall_scope sc = {.now = UINT64_MAX};
    an_stall_site *rows = NULL;
    size_t n = 1;
    int64_t step = 0;
    ASSERT_OK(an_stall_sites(t.s, NULL, &sc, AN_STALL_BY_TOTAL, &rows, &n, &step));
    ASSERT_EQ(n, 0);
    an_stall_sites_free(rows, n);
    st_store_destroy(&t.s);
}

/* A run against a baseline: a new site comes first, whatever another grew by; a native frame's
 * site is known by its function and its module's file name. Old: site 5 (frames
 * cudaStreamSynchronize, foo in /usr/lib/libcudart.so.12) 100 us. New: the same 300 us (grew by
 * 200), and cudaDeviceSynchronize with no call site, 50 us (new). */
TEST(compare_puts_new_sites_first_and_keys_native_frames_by_module_file) {
    static const char *const funcs[] = {"cudaStreamSynchronize", "foo"};
    static const char *const files[] = {NULL, NULL};
    tl o, n;
    tl_init(&o);
    tl_py_site(&o, 21, funcs, files, 2);
    tl_block(&o, 100, 200, "cudaStreamSynchronize", 21);
    tl_done(&o);
    tl_init(&n);
    tl_py_site(&n, 21, funcs, files, 2);
    tl_block(&n, 100, 400, "cudaStreamSynchronize", 21);
    tl_block(&n, 500, 550, "cudaDeviceSynchronize", 0);
    tl_done(&n);
    an_result ro, rn;
    ASSERT_OK(an_analyze(o.s, NULL, &ro, NULL));
    ASSERT_OK(an_analyze(n.s, NULL, &rn, NULL));
    an_diff d;
    ASSERT_OK(an_compare(o.s, &ro, n.s, &rn, &d, NULL));
    ASSERT_EQ(d.n_sites, 2);
    ASSERT_EQ(d.sites[0].kind, AN_DELTA_NEW);
    ASSERT_STR_EQ(d.sites[0].key, "cudaDeviceSynchronize");
    ASSERT_UEQ(d.sites[0].new_ns, 50000);
    ASSERT_EQ(d.sites[1].kind, AN_DELTA_GREW);
    ASSERT_STR_EQ(d.sites[1].key, "cudaStreamSynchronize at foo (libcudart.so.12)");
    ASSERT_UEQ(d.sites[1].old_ns, 100000);
    ASSERT_UEQ(d.sites[1].new_ns, 300000);
    ASSERT_STR_EQ(an_delta_name(AN_DELTA_SHRANK), "shrank");
    ASSERT_STR_EQ(an_delta_name(AN_DELTA_SHRANK + 1), "?");
    ASSERT_STR_EQ(an_delta_name(-1), "?");
    an_diff_free(&d);
    an_result_free(&ro);
    an_result_free(&rn);
    st_store_destroy(&o.s);
    st_store_destroy(&n.s);
}

/* A heartbeat makes steps when the GPU works between most of its beats, not only when it works
 * between all: the loop of steps_from_a_regular_blocking_call with no kernel in the 6th step (10
 * of its 11 steps hold GPU work). */
TEST(steps_from_a_heartbeat_with_gpu_work_in_most_steps) {
    tl t;
    tl_init(&t);
    for (uint64_t i = 0; i < 12; i++) {
        uint64_t at = 1000 + i * 10000;
        if (i != 5)
            tl_kernel(&t, at, at + 10, at + 6000);
        tl_sync(&t, at + 20, at + 6010, 5);
    }
    an_result r;
    an_steps st;
    tl_steps(&t, &r, &st);
    ASSERT_EQ(st.source, AN_STEPS_HEARTBEAT);
    ASSERT_EQ(st.n_steps, 11);
    for (size_t i = 0; i < st.n_steps; i++)
        ASSERT_UEQ(st.steps[i].gpu_busy_ns, i == 4 ? 0 : 5990000);
    an_steps_free(&st);
    tl_free(&t, &r);
}

/* A loop of 12 steps every 10 ms: "phase" opens at +100 us inside "iteration", which opens at +0
 * ("phase" is named first, so it is met first); "iteration" has ended `iterations` times. The steps
 * are iteration's: one fewer than its ranges, each from one's start to the next's. */
static void steps_of_the_first_range(size_t iterations) {
    tl t;
    tl_init(&t);
    for (uint64_t i = 0; i < 12; i++) {
        uint64_t at = 1000 + i * 10000;
        tl_range(&t, at + 100, at + 5000, "phase", 100 + i);
        if (i < iterations)
            tl_range(&t, at, at + 9000, "iteration", 200 + i);
        tl_kernel(&t, at + 200, at + 210, at + 6000);
    }
    an_result r;
    an_steps st;
    tl_steps(&t, &r, &st);
    ASSERT_STR_CONTAINS(st.what, "iteration");
    ASSERT_EQ(st.n_steps, iterations - 1);
    for (size_t i = 0; i < st.n_steps; i++)
        ASSERT_UEQ(st.steps[i].start, (1000 + i * 10000) * 1000);
    an_steps_free(&st);
    tl_free(&t, &r);
}

/* Of two ranges that come as often and as regularly, the one that comes first in the loop marks
 * the steps. */
TEST(steps_from_the_range_that_comes_first_in_the_loop) { steps_of_the_first_range(12); }

/* The loop's first range wins also when its last one has not ended yet (a live view holds only the
 * ranges that ended) or was cut off: 11 of "iteration" against 12 of "phase" inside it. */
TEST(steps_from_the_range_that_comes_first_with_its_last_one_missing) { steps_of_the_first_range(11); }

/* A process's heartbeat is one of its own call sites: a second process whose GPU works all along,
 * with no call of its own, has no steps (the first's 11 steps are all the first's). */
TEST(steps_of_a_process_come_from_its_own_calls) {
    tl a, b;
    tl_init_in(&a, 77, NULL);
    for (uint64_t i = 0; i < 12; i++) {
        uint64_t at = 1000 + i * 10000;
        tl_kernel(&a, at, at + 10, at + 6000);
        tl_sync(&a, at + 20, at + 6010, 5);
    }
    tl_add(&a);
    tl_init_in(&b, 78, a.s);
    for (uint64_t i = 0; i < 24; i++)
        tl_kernel(&b, i * 5000, i * 5000 + 10, i * 5000 + 4000);
    an_result r;
    an_steps st;
    tl_steps(&b, &r, &st);
    ASSERT_EQ(st.n_steps, 11);
    for (size_t i = 0; i < st.n_steps; i++)
        ASSERT_EQ(st.steps[i].producer, st.steps[0].producer);
    ASSERT_EQ(r.n_blocks, 12); /* the first process's syncs */
    ASSERT_EQ(st.steps[0].producer, r.blocks[0].producer);
    an_steps_free(&st);
    an_result_free(&r);
    st_store_destroy(&a.s);
}

/* HTA's figures are rounded as HTA rounds float timestamps when any event of the process has a
 * fraction of a microsecond, the first of its lane too: here only the first kernel, 10.5..100 us. */
TEST(hta_rounds_a_process_whose_only_fraction_is_its_first_kernel) {
    tl t;
    tl_init(&t);
    uint32_t c = t.corr++;
    tp_api api = {.kind = TP_K_API, .flags = TP_F_LAUNCH, .device = 0, .tid = 100, .start = 0, .end = 2000,
                  .correlation = c, .name = tp_enc_intern_cstr(t.enc, "cudaLaunchKernel")};
    tp_kernel k = {.kind = TP_K_KERNEL, .device = 0, .stream = 7, .start = 10500, .end = 100000, .correlation = c,
                   .name = tp_enc_intern_cstr(t.enc, "gemm")};
    ASSERT_OK(tp_enc_add(t.enc, &api));
    ASSERT_OK(tp_enc_add(t.enc, &k));
    tl_kernel_on(&t, 0, 7, 300, 310, 320);
    tl_done(&t);
    hta_result h;
    ASSERT_OK(hta_analyze(t.s, NULL, &h, NULL));
    ASSERT_EQ(h.n_ranks, 1);
    ASSERT_EQ(h.ranks[0].rounded, 1);
    hta_result_free(&h);
    st_store_destroy(&t.s);
}

/* Bubbles that start together on two GPUs keep the GPUs' order (a tie is no reason to swap them):
 * both GPUs run 0..10 and 40..50 us. */
TEST(analysis_bubbles_that_start_together_keep_the_gpus_order) {
    tl t;
    tl_init(&t);
    tl_device(&t, 1, 9);
    for (uint16_t dev = 0; dev < 2; dev++) {
        tl_kernel_on(&t, dev, dev ? 9 : 7, 0, 0, 10);
        tl_kernel_on(&t, dev, dev ? 9 : 7, 30, 40, 50);
    }
    an_result r;
    tl_analysed(&t, &r);
    ASSERT_EQ(r.n_devices, 2);
    size_t seen = 0;
    for (size_t i = 0; i < r.n_bubbles; i++)
        if (r.bubbles[i].lane == AN_DEVICE_LANE) {
            ASSERT_UEQ(r.bubbles[i].start, 10000);
            ASSERT_EQ(r.bubbles[i].device, r.devices[seen].device);
            seen++;
        }
    ASSERT_EQ(seen, 2);
    tl_free(&t, &r);
}
