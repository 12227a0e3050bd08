/*
 * The store (store/store.h): ingest of synthetic batches, trace files and real Kineto traces; lanes
 * and their order; out-of-order appends; lane summaries against a brute-force computation over
 * random windows (a property test); the live bound; malformed batches.
 */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "kineto.h"
#include "store.h"
#include "load.h"
#include "u64map.h"
#include "synctop/file.h"
#include "synth.h"
#include "task.h"

/* ---- helpers ---- */

typedef struct batches {
    tp_buf *b;
    size_t n;
} batches;

static void batches_add(batches *bs, const tp_buf *src) {
    bs->b = realloc(bs->b, (bs->n + 1) * sizeof *bs->b);
    ASSERT_NOT_NULL(bs->b);
    memset(&bs->b[bs->n], 0, sizeof bs->b[0]);
    ASSERT_OK(tp_buf_append(&bs->b[bs->n], src->data, src->len));
    bs->n++;
}

static void batches_free(batches *bs) {
    for (size_t i = 0; i < bs->n; i++)
        tp_buf_free(&bs->b[i]);
    free(bs->b);
    bs->b = NULL;
    bs->n = 0;
}

/* n_batches batches of per_batch synthetic events of a process on host (NULL: the generator's). */
static batches synth_host_batches(uint64_t seed, const char *host, size_t n_batches, size_t per_batch) {
    batches bs = {0};
    synth sy;
    synth_init(&sy, seed);
    if (host != NULL)
        sy.host = host;
    tp_enc_opts eo = {.producer = 0x1234 + seed};
    tp_enc *enc = tp_enc_new(&eo);
    ASSERT_NOT_NULL(enc);
    tp_buf out = {0};
    for (size_t i = 0; i < n_batches; i++) {
        synth_fill(&sy, enc, per_batch);
        ASSERT_OK(tp_enc_finish(enc, &out));
        tp_enc_delivered(enc, 1);
        batches_add(&bs, &out);
    }
    tp_buf_free(&out);
    tp_enc_destroy(&enc);
    return bs;
}

/* n_batches batches of per_batch synthetic events. */
static batches synth_batches(uint64_t seed, size_t n_batches, size_t per_batch) {
    return synth_host_batches(seed, NULL, n_batches, per_batch);
}

static void add_all(st_store *s, const batches *bs) {
    for (size_t i = 0; i < bs->n; i++) {
        err_msg err = {{0}};
        int rc = st_store_add_batch(s, bs->b[i].data, bs->b[i].len, &err);
        if (rc != 0)
            TASK_FAIL_("batch %zu refused: %s", i, err.msg);
    }
}

static void assert_lanes_sorted(const st_store *s) {
    for (size_t l = 0; l < st_lane_count(s); l++) {
        size_t n;
        const st_event *e = st_lane_events(s, l, &n);
        ASSERT_EQ(n, st_lane_get(s, l)->n_events);
        for (size_t i = 1; i < n; i++) {
            ASSERT(e[i - 1].start <= e[i].start);
            if (e[i - 1].start == e[i].start)
                ASSERT(st_ev_end(s, &e[i - 1]) <= st_ev_end(s, &e[i]));
        }
    }
}

static size_t lane_find(const st_store *s, st_lane_kind kind, uint32_t id) {
    for (size_t l = 0; l < st_lane_count(s); l++)
        if (st_lane_get(s, l)->kind == kind && st_lane_get(s, l)->id == id)
            return l;
    return SIZE_MAX;
}


/* ---- ingest ---- */

TEST(synth_batches_fill_lanes_in_display_order) {
    batches bs = synth_batches(1, 20, 550); /* 11000 events: 203 whole steps of 54 and a part */
    st_store *s = st_store_new(NULL);
    add_all(s, &bs);
    st_store_commit(s);
    ASSERT_EQ(st_store_events(s), 20 * 550);
    ASSERT_EQ(st_lane_count(s), 4);
    /* stream 7 (null stream) first, then stream 8, then the thread, then its NVTX lane */
    ASSERT_EQ(st_lane_get(s, 0)->kind, ST_LANE_STREAM);
    ASSERT_EQ(st_lane_get(s, 0)->id, 7);
    ASSERT(st_lane_get(s, 0)->null_stream);
    ASSERT_EQ(st_lane_get(s, 1)->id, 8);
    ASSERT_EQ(st_lane_get(s, 1)->priority, -1);
    ASSERT_EQ(st_lane_get(s, 2)->kind, ST_LANE_THREAD);
    ASSERT_EQ(st_lane_get(s, 2)->id, 4242);
    ASSERT_STR_EQ(st_str(s, st_lane_get(s, 2)->name), "python");
    ASSERT_EQ(st_lane_get(s, 3)->kind, ST_LANE_NVTX);
    ASSERT_EQ(st_lane_get(s, 3)->n_events, 204);
    assert_lanes_sorted(s);
    /* metadata */
    ASSERT_EQ(st_producer_count(s), 1);
    const st_producer_info *p = st_producer_get(s, 0);
    ASSERT_EQ(p->pid, 4242);
    ASSERT_STR_EQ(st_str(s, p->host), "gpu-node-07");
    ASSERT_STR_EQ(st_str(s, p->cmdline), "python train.py --epochs 3");
    ASSERT_EQ(p->batches, 20);
    ASSERT_EQ(p->missed, 0);
    ASSERT_EQ(st_device_count(s), 1);
    ASSERT_STR_EQ(st_str(s, st_device_get(s, 0)->name), "NVIDIA H100 80GB HBM3");
    /* the blocking syncs carry call sites with their frames */
    size_t th = lane_find(s, ST_LANE_THREAD, 4242), n, blocking = 0;
    const st_event *e = st_lane_events(s, th, &n);
    for (size_t i = 0; i < n; i++) {
        if (!(st_ev_flags(s, &e[i]) & TP_F_BLOCKING))
            continue;
        blocking++;
        ASSERT_STR_EQ(st_str(s, st_ev_name(s, &e[i])), "cudaStreamSynchronize");
        size_t nf;
        const st_frame *f = st_callsite_frames(s, st_ev_value(s, &e[i]), &nf);
        ASSERT_NOT_NULL(f);
        ASSERT_EQ(nf, 2);
        ASSERT_EQ(f[0].kind, TP_FRAME_PYTHON);
        ASSERT_STR_EQ(st_str(s, f[0].file), "train.py");
        ASSERT(f[0].line == 42 || f[0].line == 88);
        ASSERT_STR_EQ(st_str(s, f[1].module), "libtorch_cuda.so");
    }
    ASSERT_EQ(blocking, 203);
    /* span */
    uint64_t t0, t1;
    st_store_span(s, &t0, &t1);
    ASSERT(t0 > 0 && t1 > t0);
    uint64_t first = UINT64_MAX;
    for (size_t l = 0; l < st_lane_count(s); l++)
        if (st_lane_events(s, l, &n)[0].start < first)
            first = st_lane_events(s, l, &n)[0].start;
    ASSERT_UEQ(t0, first);
    ASSERT_LE(st_store_memory(s), 48 * st_store_events(s) + (1u << 20));
    st_store_destroy(&s);
    st_store_destroy(&s); /* twice is fine */
    batches_free(&bs);
}

/* ---- the compact event ---- */

/* One batch of producer 5 holding the records given, added to s. */
static void add_records(st_store *s, tp_enc *enc, const tp_record *r, size_t n) {
    tp_buf out = {0};
    for (size_t i = 0; i < n; i++)
        ASSERT_OK(tp_enc_add(enc, &r[i]));
    ASSERT_OK(tp_enc_finish(enc, &out));
    tp_enc_delivered(enc, 1);
    ASSERT_OK(st_store_add_batch(s, out.data, out.len, NULL));
    tp_buf_free(&out);
}

TEST(events_of_every_width_round_trip_exactly) {
    const uint64_t t = 1700000000000000000ull; /* 2023, as CUPTI's clock reads */
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 5});
    ASSERT_NOT_NULL(enc);
    st_store *s = st_store_new(NULL);
    /* four kernels that start together, longest first: 7 s, 4294967294 ns (the longest a
     * duration of 32 bits keeps: 2^32 - 2, as 2^32 - 1 marks the long ones), 2^32 - 1 ns and 5 s */
    static const uint64_t dur[4] = {7000000000ull, 4294967294ull, 4294967295ull, 5000000000ull};
    tp_record r[8];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 4; i++)
        r[i].kernel = (tp_kernel){.kind = TP_K_KERNEL, .device = 0, .stream = 7, .start = t, .end = t + dur[i],
                                  .correlation = 0xFFFFFFFEu - (uint32_t)i, .name = tp_enc_intern_cstr(enc, "k-long"),
                                  .grid = {65535, 65535, 65535 - (uint32_t)i}, .block = {1024, 1, 1}};
    r[4].memcpy = (tp_memcpy){.kind = TP_K_MEMCPY, .device = 0, .stream = 7, .start = t + 10,
                              .end = t + 10 + 1000000000000ull, .correlation = 77, .bytes = UINT64_MAX - 1,
                              .copy_kind = 1, .src_kind = 3, .dst_kind = 2};
    r[5].memset = (tp_memset){.kind = TP_K_MEMSET, .device = 0, .stream = 7, .start = t + 20, .end = t + 21,
                              .correlation = 78, .bytes = 1ull << 40, .mem_kind = 2};
    r[6].sync = (tp_sync){.kind = TP_K_SYNC, .device = 0, .stream = 7, .start = t + 30, .end = t + 4294967325ull,
                          .correlation = 79, .event = 0xFFFFFFF0u, .sync_type = 3};
    r[7].api = (tp_api){.kind = TP_K_API, .flags = TP_F_BLOCKING, .device = 3, .tid = 9, .start = t + 5,
                        .end = t + 6000000005ull, .correlation = 80, .cbid = 211,
                        .name = tp_enc_intern_cstr(enc, "cudaDeviceSynchronize")};
    /* the memset first: the kernels after it are sorted, not appended in order */
    tp_record first[8] = {r[5], r[0], r[1], r[2], r[3], r[4], r[6], r[7]};
    add_records(s, enc, first, 8);
    /* 5000 kernels of as many grids: as many shapes */
    for (uint32_t b = 0; b < 5; b++) {
        tp_record k[1000];
        memset(k, 0, sizeof k);
        for (uint32_t i = 0; i < 1000; i++) {
            uint32_t j = b * 1000 + i;
            k[i].kernel = (tp_kernel){.kind = TP_K_KERNEL, .device = 0, .stream = 8, .start = t + 100 * j,
                                      .end = t + 100 * j + 50, .correlation = j + 1,
                                      .name = tp_enc_intern_cstr(enc, "k-grid"), .grid = {j + 1, 1, 1},
                                      .block = {256, 1, 1}};
        }
        add_records(s, enc, k, 1000);
    }
    st_store_commit(s);
    ASSERT_EQ(sizeof(st_event), 20);
    ASSERT_UEQ(st_store_events(s), 5008);
    size_t l7 = lane_find(s, ST_LANE_STREAM, 7), l8 = lane_find(s, ST_LANE_STREAM, 8), lt = lane_find(s, ST_LANE_THREAD, 9);
    size_t n;
    const st_event *e = st_lane_events(s, l7, &n);
    ASSERT_EQ(n, 7);
    /* the kernels by end: 2^32 - 2, 2^32 - 1, 5 s, 7 s */
    static const int order[4] = {1, 2, 3, 0};
    for (int i = 0; i < 4; i++) {
        int k = order[i];
        ASSERT_UEQ(e[i].start, t);
        ASSERT_UEQ(st_ev_end(s, &e[i]), t + dur[k]);
        ASSERT_UEQ(st_ev_dur(s, &e[i]), dur[k]);
        ASSERT_EQ(st_ev_kind(s, &e[i]), TP_K_KERNEL);
        ASSERT_UEQ(st_ev_corr(s, &e[i]), 0xFFFFFFFEu - (uint32_t)k);
        ASSERT_UEQ(st_ev_value(s, &e[i]), 65535ull * 65535ull * (65535ull - (uint64_t)k));
        ASSERT_UEQ(st_ev_aux(s, &e[i]), 1024);
        ASSERT_STR_EQ(st_str(s, st_ev_name(s, &e[i])), "k-long");
    }
    ASSERT_UEQ(st_ev_dur(s, &e[4]), 1000000000000ull);
    ASSERT_EQ(st_ev_kind(s, &e[4]), TP_K_MEMCPY);
    ASSERT_UEQ(st_ev_value(s, &e[4]), UINT64_MAX - 1);
    ASSERT_EQ(st_ev_sub(s, &e[4]), 1);
    ASSERT_EQ(st_ev_mem(s, &e[4]), 3 << 4 | 2);
    ASSERT_UEQ(st_ev_corr(s, &e[4]), 77);
    ASSERT_EQ(st_ev_kind(s, &e[5]), TP_K_MEMSET);
    ASSERT_UEQ(st_ev_value(s, &e[5]), 1ull << 40);
    ASSERT_EQ(st_ev_sub(s, &e[5]), 2);
    ASSERT_UEQ(st_ev_dur(s, &e[5]), 1);
    ASSERT_EQ(st_ev_kind(s, &e[6]), TP_K_SYNC);
    ASSERT_UEQ(st_ev_aux(s, &e[6]), 0xFFFFFFF0u);
    ASSERT_EQ(st_ev_sub(s, &e[6]), 3);
    ASSERT_UEQ(st_ev_dur(s, &e[6]), 4294967295ull);
    e = st_lane_events(s, lt, &n);
    ASSERT_EQ(n, 1);
    ASSERT_UEQ(st_ev_dur(s, &e[0]), 6000000000ull);
    ASSERT_EQ(st_ev_flags(s, &e[0]), TP_F_BLOCKING);
    ASSERT_UEQ(st_ev_aux(s, &e[0]), 211);
    ASSERT_EQ(st_event_device(s, &e[0]), 3);
    ASSERT_STR_EQ(st_str(s, st_ev_name(s, &e[0])), "cudaDeviceSynchronize");
    e = st_lane_events(s, l8, &n);
    ASSERT_EQ(n, 5000);
    for (uint32_t j = 0; j < 5000; j++) {
        ASSERT_UEQ(e[j].start, t + 100 * j);
        ASSERT_UEQ(st_ev_end(s, &e[j]), t + 100 * j + 50);
        ASSERT_UEQ(st_ev_value(s, &e[j]), j + 1);
        ASSERT_UEQ(st_ev_corr(s, &e[j]), j + 1);
    }
    /* the summaries count the long ones whole: lane 7's kernels are busy 7 s + 5 s + 2 x 2^32 - 3 ns */
    st_bucket bk;
    ASSERT_OK(st_lane_summary(s, l7, t, t + 8000000000ull, 1, &bk));
    ASSERT_UEQ(bk.busy[ST_CAT_KERNEL], 12000000000ull + 8589934589ull);
    ASSERT_UEQ(bk.busy[ST_CAT_SYNC], 4294967295ull);
    ASSERT_EQ(bk.count, 7);
    ASSERT_UEQ(st_ev_dur(s, &st_lane_events(s, l7, &n)[bk.longest]), 1000000000000ull);
    uint64_t t0, t1;
    st_store_span(s, &t0, &t1);
    ASSERT_UEQ(t1, t + 10 + 1000000000000ull);
    /* moved to a clock 1 s behind, then clipped at 0 by one 6 s ahead: the 7 s kernel then lasts 1 s */
    ASSERT_EQ(st_store_shift_producer(s, 0, -1000000000ll), 1);
    st_store_commit(s);
    e = st_lane_events(s, l7, &n);
    ASSERT_UEQ(e[3].start, t + 1000000000ull);
    ASSERT_UEQ(st_ev_end(s, &e[3]), t + 8000000000ull);
    ASSERT_EQ(st_store_shift_producer(s, 0, (int64_t)(t + 6000000000ull)), 1);
    st_store_commit(s);
    e = st_lane_events(s, l7, &n);
    assert_lanes_sorted(s);
    ASSERT_UEQ(e[0].start, 0);
    ASSERT_UEQ(st_ev_end(s, &e[n - 1]), 994000000010ull); /* the copy: t + 10 + 1000 s, less t + 6 s */
    for (size_t i = 0; i < n; i++)
        if (st_ev_kind(s, &e[i]) == TP_K_KERNEL)
            ASSERT(st_ev_end(s, &e[i]) == 0 || st_ev_end(s, &e[i]) == 1000000000ull);
    st_store_destroy(&s);
    tp_enc_destroy(&enc);
}

/* What the store holds per event, all in but the strings, call sites and metadata (which grow with
 * what the trace names, not with its events). */
static double per_event_bytes(const st_store *s) {
    st_memory m;
    st_store_memory_parts(s, &m);
    return (double)(m.events + m.summaries + m.depths + m.shapes) / (double)st_store_events(s);
}

TEST(store_holds_at_most_24_bytes_per_event) {
    batches bs = synth_batches(11, 250, 4096); /* a million events of the synthetic training loop */
    st_store *s = st_store_new(NULL);
    add_all(s, &bs);
    st_store_commit(s);
    st_store_shrink(s);
    ASSERT_UEQ(st_store_events(s), 250 * 4096);
    ASSERT_LE(st_store_memory(s), 24 * st_store_events(s));
    st_store_destroy(&s);
    batches_free(&bs);
    static const char *const names[] = {"resnet_2080ti_two_threads.json.gz", "resnet50_v100_legacy_2021.json.gz",
                                        "v100_ns_resolution_hta.json.gz", "qwen_h100_with_stack.json.gz"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", KINETO_TRACE_DIR, names[k]);
        err_msg err = {{0}};
        s = st_store_new(NULL);
        ASSERT_OK(ingest_file(s, path, NULL, NULL, &err));
        ASSERT_GT(st_store_events(s), 3000);
        if (per_event_bytes(s) > 24)
            TASK_FAIL_("%s: %.2f bytes per event", names[k], per_event_bytes(s));
        st_store_destroy(&s);
    }
}

TEST(live_store_forgets_the_shapes_of_dropped_events) {
    /* 100000 copies of as many sizes through a store bounded at 4096 events */
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 5});
    ASSERT_NOT_NULL(enc);
    st_store *s = st_store_new(&(st_opts){.max_events = 4096});
    for (uint32_t b = 0; b < 100; b++) {
        tp_record r[1000];
        memset(r, 0, sizeof r);
        for (uint32_t i = 0; i < 1000; i++) {
            uint64_t j = (uint64_t)b * 1000 + i;
            r[i].memcpy = (tp_memcpy){.kind = TP_K_MEMCPY, .device = 0, .stream = 7, .start = 1000 + 10 * j,
                                      .end = 1005 + 10 * j, .correlation = (uint32_t)j + 1, .bytes = 3 * j + 1,
                                      .copy_kind = 1, .src_kind = 1, .dst_kind = 2};
        }
        add_records(s, enc, r, 1000);
        st_store_commit(s);
        /* the shapes of at most three times the bound: the held events', and the dropped ones'
         * until they outnumber those twice over (and 4096 more); 32 bytes each, 1.5 times that
         * allocated, and their table at most four slots of 4 bytes per shape */
        st_memory m;
        st_store_memory_parts(s, &m);
        ASSERT_LE(m.shapes, (3 * 4096 + 4096) * (48 + 16));
    }
    ASSERT_UEQ(st_store_events(s) + st_store_dropped(s), 100000);
    size_t n;
    const st_event *e = st_lane_events(s, lane_find(s, ST_LANE_STREAM, 7), &n);
    ASSERT_GT(n, 3000);
    for (size_t i = 0; i < n; i++) { /* each held copy still has its own size */
        uint64_t j = (e[i].start - 1000) / 10;
        ASSERT_UEQ(st_ev_value(s, &e[i]), 3 * j + 1);
        ASSERT_UEQ(st_ev_corr(s, &e[i]), j + 1);
        ASSERT_UEQ(st_ev_dur(s, &e[i]), 5);
    }
    st_store_destroy(&s);
    tp_enc_destroy(&enc);
}

TEST(sequence_gaps_are_counted_as_missed_batches) {
    batches bs = synth_batches(2, 10, 100);
    st_store *s = st_store_new(NULL);
    for (size_t i = 0; i < bs.n; i++)
        if (i != 3 && i != 4 && i != 7)
            ASSERT_OK(st_store_add_batch(s, bs.b[i].data, bs.b[i].len, NULL));
    st_store_commit(s);
    ASSERT_EQ(st_producer_get(s, 0)->batches, 7);
    ASSERT_EQ(st_producer_get(s, 0)->missed, 3);
    st_store_destroy(&s);
    batches_free(&bs);
}

TEST(out_of_order_batches_give_the_same_lanes) {
    batches bs = synth_batches(3, 40, 137);
    st_store *a = st_store_new(NULL), *b = st_store_new(NULL);
    add_all(a, &bs);
    st_store_commit(a);
    /* the first batch carries the strings and metadata; the rest arrive shuffled, committing
     * between some of them so the merge path runs on an indexed lane */
    ASSERT_OK(st_store_add_batch(b, bs.b[0].data, bs.b[0].len, NULL));
    size_t order[40];
    for (size_t i = 0; i < 40; i++)
        order[i] = i;
    uint64_t r = 99;
    for (size_t i = 39; i > 1; i--) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        size_t j = 1 + (size_t)(r >> 33) % i;
        size_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 1; i < 40; i++) {
        ASSERT_OK(st_store_add_batch(b, bs.b[order[i]].data, bs.b[order[i]].len, NULL));
        if (i % 7 == 0)
            st_store_commit(b);
    }
    st_store_commit(b);
    assert_lanes_sorted(b);
    ASSERT_EQ(st_lane_count(a), st_lane_count(b));
    for (size_t l = 0; l < st_lane_count(a); l++) {
        size_t na, nb;
        const st_event *ea = st_lane_events(a, l, &na), *eb = st_lane_events(b, l, &nb);
        ASSERT_EQ(na, nb);
        for (size_t i = 0; i < na; i++) {
            ASSERT_UEQ(ea[i].start, eb[i].start);
            ASSERT_UEQ(st_ev_end(a, &ea[i]), st_ev_end(b, &eb[i]));
        }
        /* and the summaries agree */
        uint64_t t0, t1;
        st_store_span(a, &t0, &t1);
        st_bucket ba[50], bb[50];
        ASSERT_OK(st_lane_summary(a, l, t0, t1, 50, ba));
        ASSERT_OK(st_lane_summary(b, l, t0, t1, 50, bb));
        for (int i = 0; i < 50; i++) {
            ASSERT_EQ(ba[i].count, bb[i].count);
            ASSERT_MEM_EQ(ba[i].busy, bb[i].busy, sizeof ba[i].busy);
        }
    }
    st_store_destroy(&a);
    st_store_destroy(&b);
    batches_free(&bs);
}

TEST(malformed_batch_is_refused_and_nothing_is_lost) {
    batches bs = synth_batches(4, 3, 200);
    st_store *s = st_store_new(NULL);
    ASSERT_OK(st_store_add_batch(s, bs.b[0].data, bs.b[0].len, NULL));
    st_store_commit(s);
    size_t before = st_store_events(s);
    /* a flipped payload byte: the checksum refuses it */
    bs.b[1].data[TP_BATCH_HDR_SIZE + 40] ^= 0x5a;
    err_msg err = {{0}};
    ASSERT(st_store_add_batch(s, bs.b[1].data, bs.b[1].len, &err) < 0);
    ASSERT(err.msg[0] != '\0');
    /* cut short */
    ASSERT(st_store_add_batch(s, bs.b[2].data, bs.b[2].len - 9, &err) < 0);
    ASSERT(st_store_add_batch(s, "garbage", 7, &err) < 0);
    st_store_commit(s);
    ASSERT_EQ(st_store_events(s), before);
    assert_lanes_sorted(s);
    /* the next whole batch is still taken */
    ASSERT_OK(st_store_add_batch(s, bs.b[2].data, bs.b[2].len, NULL));
    st_store_commit(s);
    ASSERT_EQ(st_store_events(s), before + 200);
    st_store_destroy(&s);
    batches_free(&bs);
}

TEST(live_bound_drops_the_oldest_and_counts_them) {
    batches bs = synth_batches(5, 100, 500);
    st_opts o = {.max_events = 8000};
    st_store *s = st_store_new(&o);
    uint64_t last_t1 = 0;
    for (size_t i = 0; i < bs.n; i++) {
        ASSERT_OK(st_store_add_batch(s, bs.b[i].data, bs.b[i].len, NULL));
        st_store_commit(s);
        ASSERT_LE(st_store_events(s), 8000);
        ASSERT_UEQ(st_store_events(s) + st_store_dropped(s), (i + 1) * 500);
        uint64_t t0, t1;
        st_store_span(s, &t0, &t1);
        ASSERT(t1 >= last_t1);
        last_t1 = t1;
    }
    ASSERT_GT(st_store_dropped(s), 40000);
    assert_lanes_sorted(s);
    /* what is kept is the newest: every kept event starts no earlier than every dropped one, so
     * the oldest kept start is after the 42000th event of an unbounded store */
    st_store *full = st_store_new(NULL);
    add_all(full, &bs);
    st_store_commit(full);
    uint64_t kept_min = UINT64_MAX;
    for (size_t l = 0; l < st_lane_count(s); l++) {
        size_t n;
        const st_event *e = st_lane_events(s, l, &n);
        if (n && e[0].start < kept_min)
            kept_min = e[0].start;
    }
    size_t older = 0;
    for (size_t l = 0; l < st_lane_count(full); l++)
        older += st_lane_lower_bound(full, l, kept_min);
    ASSERT_UEQ(older, st_store_dropped(s));
    /* the summaries of the kept window are still right: compare with the full store there */
    uint64_t t0, t1;
    st_store_span(s, &t0, &t1);
    for (size_t l = 0; l < st_lane_count(s); l++) {
        st_bucket a[10], b[10];
        size_t lf = lane_find(full, st_lane_get(s, l)->kind, st_lane_get(s, l)->id);
        /* a window starting after every kept event has started avoids the events that were
         * dropped but still running */
        uint64_t w0 = kept_min + (t1 - kept_min) / 2;
        ASSERT_OK(st_lane_summary(s, l, w0, t1, 10, a));
        ASSERT_OK(st_lane_summary(full, lf, w0, t1, 10, b));
        for (int i = 0; i < 10; i++)
            ASSERT_MEM_EQ(a[i].busy, b[i].busy, sizeof a[i].busy);
    }
    st_store_destroy(&s);
    st_store_destroy(&full);
    batches_free(&bs);
}

/* A stream whose only event is a long kernel that began before everything else the window keeps (a
 * persistent NCCL kernel seen for the first time): the bound drops it in the same commit that made
 * its lane, so the lane is never indexed with an event. Its summary is all idle, not a crash. */
TEST(lane_emptied_by_the_bound_before_its_first_index_reads_as_idle) {
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 31});
    ASSERT_NOT_NULL(enc);
    uint32_t kname = tp_enc_intern_cstr(enc, "k");
    uint64_t t = 1000000000;
    tp_record rec;
    for (int i = 0; i < 1200; i++) {
        memset(&rec, 0, sizeof rec);
        rec.kernel = (tp_kernel){.kind = TP_K_KERNEL, .device = 0, .stream = 7, .start = t + i * 1000u,
                                 .end = t + i * 1000u + 500, .name = kname, .grid = {1, 1, 1}, .block = {1, 1, 1}};
        ASSERT_OK(tp_enc_add(enc, &rec));
    }
    memset(&rec, 0, sizeof rec);
    rec.kernel = (tp_kernel){.kind = TP_K_KERNEL, .device = 0, .stream = 99, .start = t - 1000, .end = t + 5000000,
                             .name = kname, .grid = {1, 1, 1}, .block = {1, 1, 1}};
    ASSERT_OK(tp_enc_add(enc, &rec));
    tp_buf out = {0};
    ASSERT_OK(tp_enc_finish(enc, &out));
    st_store *s = st_store_new(&(st_opts){.max_events = 1000});
    ASSERT_OK(st_store_add_batch(s, out.data, out.len, NULL));
    st_store_commit(s);
    ASSERT_LE(st_store_events(s), 1000);
    ASSERT_UEQ(st_store_events(s) + st_store_dropped(s), 1201);
    size_t l99 = lane_find(s, ST_LANE_STREAM, 99);
    ASSERT(l99 != SIZE_MAX);
    size_t n;
    st_lane_events(s, l99, &n);
    ASSERT_EQ(n, 0);
    uint64_t t0, t1;
    st_store_span(s, &t0, &t1);
    ASSERT(t1 > t0);
    for (size_t l = 0; l < st_lane_count(s); l++) {
        st_bucket b[8];
        ASSERT_OK(st_lane_summary(s, l, t0, t1, 8, b));
        if (l != l99)
            continue;
        for (int i = 0; i < 8; i++) {
            for (int c = 0; c < ST_CAT_N; c++)
                ASSERT_UEQ(b[i].busy[c], 0);
            ASSERT_EQ(b[i].count, 0);
            ASSERT_UEQ(b[i].longest, UINT32_MAX);
        }
    }
    /* the next batch on that stream indexes the lane as usual */
    memset(&rec, 0, sizeof rec);
    rec.kernel = (tp_kernel){.kind = TP_K_KERNEL, .device = 0, .stream = 99, .start = t1, .end = t1 + 4000,
                             .name = kname, .grid = {1, 1, 1}, .block = {1, 1, 1}};
    ASSERT_OK(tp_enc_add(enc, &rec));
    ASSERT_OK(tp_enc_finish(enc, &out));
    ASSERT_OK(st_store_add_batch(s, out.data, out.len, NULL));
    st_store_commit(s);
    l99 = lane_find(s, ST_LANE_STREAM, 99);
    st_bucket one;
    ASSERT_OK(st_lane_summary(s, l99, t1, t1 + 4000, 1, &one));
    ASSERT_UEQ(one.busy[ST_CAT_KERNEL], 4000);
    tp_buf_free(&out);
    tp_enc_destroy(&enc);
    st_store_destroy(&s);
}

/* A live (bounded) store bounds its names too: a publisher sending ever new 60 KB names fills
 * 128 MiB at most; later new names read as a placeholder and are counted. A replay store keeps
 * them all. */
TEST(live_store_bounds_its_names) {
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 9, .max_string_bytes = 1u << 30});
    ASSERT_NOT_NULL(enc);
    st_store *live = st_store_new(&(st_opts){.max_events = 100000}), *replay = st_store_new(NULL);
    char *name = malloc(60000 + 1);
    ASSERT_NOT_NULL(name);
    tp_buf out = {0};
    for (int b = 0; b < 30; b++) {
        for (int i = 0; i < 100; i++) {
            memset(name, 'a' + (b + i) % 26, 60000);
            snprintf(name, 32, "kernel-%d-%d-", b, i);
            name[strlen(name)] = 'x';
            name[60000] = '\0';
            tp_kernel k = {.kind = TP_K_KERNEL, .device = 0, .stream = 7, .start = 1000 + (uint64_t)(b * 100 + i),
                           .end = 1001 + (uint64_t)(b * 100 + i), .name = tp_enc_intern_cstr(enc, name)};
            ASSERT_OK(tp_enc_add(enc, &k));
        }
        ASSERT_OK(tp_enc_finish(enc, &out));
        tp_enc_delivered(enc, 1);
        ASSERT_OK(st_store_add_batch(live, out.data, out.len, NULL));
        ASSERT_OK(st_store_add_batch(replay, out.data, out.len, NULL));
    }
    st_store_commit(live);
    st_store_commit(replay);
    /* 3000 names of 60 KB: 180 MB sent; the live store refused what passed 128 MiB */
    uint64_t kept = 3000 - st_store_names_refused(live);
    ASSERT_GT(st_store_names_refused(live), 0);
    ASSERT_LE(kept * 60001, 128ull << 20);
    ASSERT_GE(kept * 60001, (128ull << 20) - 2 * 60001);
    ASSERT_UEQ(st_store_names_refused(replay), 0);
    /* the last kernel's name reads as the placeholder live, as itself in the replay */
    size_t l = lane_find(live, ST_LANE_STREAM, 7), n;
    const st_event *ev = st_lane_events(live, l, &n);
    ASSERT_GT(n, 0);
    ASSERT_STR_CONTAINS(st_str(live, st_ev_name(live, &ev[n - 1])), "bound");
    l = lane_find(replay, ST_LANE_STREAM, 7);
    ev = st_lane_events(replay, l, &n);
    ASSERT(strncmp(st_str(replay, st_ev_name(replay, &ev[n - 1])), "kernel-29-99-", 13) == 0);
    free(name);
    tp_buf_free(&out);
    tp_enc_destroy(&enc);
    st_store_destroy(&live);
    st_store_destroy(&replay);
}

/* ---- summaries: property test against brute force ---- */

typedef struct rng {
    uint64_t s;
} rng;
static uint64_t rnd(rng *r) {
    r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
    return r->s >> 17;
}

static void brute(const st_store *s, const st_event *e, size_t n, uint64_t a, uint64_t b, st_bucket *o) {
    memset(o, 0, sizeof *o);
    o->longest = UINT32_MAX;
    uint64_t bd = 0;
    for (size_t j = 0; j < n; j++) {
        int touch = (e[j].start >= a && e[j].start < b) || (e[j].start < a && st_ev_end(s, &e[j]) > a);
        if (!touch)
            continue;
        o->count++;
        uint64_t lo = e[j].start > a ? e[j].start : a, hi = st_ev_end(s, &e[j]) < b ? st_ev_end(s, &e[j]) : b;
        if (hi > lo)
            o->busy[st_event_cat(s, &e[j])] += hi - lo;
        uint64_t d = st_ev_dur(s, &e[j]);
        if (o->longest == UINT32_MAX || d > bd) {
            o->longest = (uint32_t)j;
            bd = d;
        }
    }
}

/* A lane of n random events: mostly short, some long (NVTX-like), some overlapping, instants. */
static st_store *random_store(uint64_t seed, size_t n) {
    rng r = {seed};
    tp_enc_opts eo = {.producer = 77};
    tp_enc *enc = tp_enc_new(&eo);
    uint32_t kname = tp_enc_intern_cstr(enc, "k");
    tp_buf out = {0};
    st_store *s = st_store_new(NULL);
    uint64_t t = 1000000000;
    for (size_t i = 0; i < n; i++) {
        uint64_t x = rnd(&r);
        t += x % 3000;
        uint64_t dur;
        switch (x % 10) {
        case 0: dur = 0; break;                          /* instant */
        case 1: dur = (x >> 8) % 2000000; break;         /* long */
        default: dur = (x >> 8) % 4000; break;
        }
        tp_record rec;
        memset(&rec, 0, sizeof rec);
        if ((x >> 4) % 3 == 0) {
            rec.memcpy = (tp_memcpy){.kind = TP_K_MEMCPY, .device = 0, .stream = 1, .start = t, .end = t + dur,
                                     .bytes = 8, .copy_kind = TP_COPY_HTOD, .src_kind = TP_MEM_PINNED,
                                     .dst_kind = TP_MEM_DEVICE, .src_device = TP_NO_DEVICE, .dst_device = TP_NO_DEVICE};
        } else {
            rec.kernel = (tp_kernel){.kind = TP_K_KERNEL, .device = 0, .stream = 1, .start = t, .end = t + dur,
                                     .name = kname, .grid = {1, 1, 1}, .block = {1, 1, 1}};
        }
        ASSERT_OK(tp_enc_add(enc, &rec));
        /* a few batches, some out of time order with their neighbours */
        if (tp_enc_pending(enc) >= 97 || i + 1 == n) {
            ASSERT_OK(tp_enc_finish(enc, &out));
            tp_enc_delivered(enc, 1);
            ASSERT_OK(st_store_add_batch(s, out.data, out.len, NULL));
            if (x % 5 == 0)
                t -= 200000; /* the next batch goes back in time */
        }
    }
    tp_buf_free(&out);
    tp_enc_destroy(&enc);
    st_store_commit(s);
    return s;
}

static void check_summaries(st_store *s, uint64_t seed, int rounds) {
    rng r = {seed};
    uint64_t t0, t1;
    st_store_span(s, &t0, &t1);
    for (size_t l = 0; l < st_lane_count(s); l++) {
        size_t n;
        const st_event *e = st_lane_events(s, l, &n);
        for (int round = 0; round < rounds; round++) {
            uint64_t span = t1 - t0 + 4000000;
            uint64_t a = t0 - 2000000 + rnd(&r) % span, b = a + 1 + rnd(&r) % (span / (1 + rnd(&r) % 50));
            if (round % 5 == 0) {
                a = t0;
                b = t1;
            }
            size_t nb = 1 + rnd(&r) % 300;
            st_bucket *got = calloc(nb, sizeof *got);
            ASSERT_OK(st_lane_summary(s, l, a, b, nb, got));
            uint64_t w = (b - a) / nb;
            for (size_t i = 0; i < nb; i++) {
                uint64_t ba = a + i * w, bb = i + 1 == nb ? b : a + (i + 1) * w;
                st_bucket want;
                brute(s, e, n, ba, bb, &want);
                if (memcmp(want.busy, got[i].busy, sizeof want.busy) != 0 || want.count != got[i].count)
                    TASK_FAIL_("lane %zu window [%" PRIu64 ", %" PRIu64 ") / %zu bucket %zu: count %u vs %u, "
                               "kernel busy %" PRIu64 " vs %" PRIu64,
                               l, a, b, nb, i, got[i].count, want.count, got[i].busy[0], want.busy[0]);
                if (want.longest == UINT32_MAX) {
                    ASSERT_EQ(got[i].longest, UINT32_MAX);
                } else {
                    ASSERT(got[i].longest != UINT32_MAX);
                    ASSERT_UEQ(st_ev_end(s, &e[got[i].longest]) - e[got[i].longest].start,
                               st_ev_dur(s, &e[want.longest]));
                }
            }
            free(got);
        }
    }
}

TEST(summaries_equal_brute_force_on_random_lanes) {
    for (uint64_t seed = 1; seed <= 6; seed++) {
        st_store *s = random_store(seed, seed < 4 ? 300 * seed : 5000);
        assert_lanes_sorted(s);
        check_summaries(s, seed * 31, 40);
        st_store_destroy(&s);
    }
}

TEST(summaries_equal_brute_force_on_synth_lanes) {
    batches bs = synth_batches(6, 30, 1000);
    st_store *s = st_store_new(NULL);
    add_all(s, &bs);
    st_store_commit(s);
    check_summaries(s, 5, 30);
    /* a window past every event is empty; a one-bucket window of the whole trace holds all */
    uint64_t t0, t1;
    st_store_span(s, &t0, &t1);
    for (size_t l = 0; l < st_lane_count(s); l++) {
        st_bucket b;
        ASSERT_OK(st_lane_summary(s, l, t1 + 1, t1 + 1000, 1, &b));
        ASSERT_EQ(b.count, 0);
        ASSERT_EQ(b.longest, UINT32_MAX);
        ASSERT_OK(st_lane_summary(s, l, t0, t1 + 1, 1, &b));
        ASSERT_EQ(b.count, st_lane_get(s, l)->n_events);
    }
    st_store_destroy(&s);
    batches_free(&bs);
}

/* ---- files ---- */

TEST(trace_file_loads_whole_and_incrementally) {
    batches bs = synth_batches(7, 600, 200);
    const char *path = task_path("synth.trace");
    tp_fwriter_opts wo = {.index_every = 16};
    err_msg err = {{0}};
    tp_fwriter *w = tp_fwriter_open_opts(path, &wo, &err);
    ASSERT_NOT_NULL(w);
    for (size_t i = 0; i < bs.n; i++)
        ASSERT_OK(tp_fwriter_append(w, bs.b[i].data, bs.b[i].len, &err));
    ASSERT_OK(tp_fwriter_close(&w, &err));

    st_store *s = st_store_new(NULL);
    ASSERT_OK(ingest_file(s, path, NULL, NULL, &err));
    ASSERT_EQ(st_store_events(s), 600 * 200);
    ASSERT_EQ(st_producer_get(s, 0)->missed, 0);
    assert_lanes_sorted(s);

    /* incrementally: the span is known before anything is read, steps make progress */
    st_store *t = st_store_new(NULL);
    ingest_loader *ld = ingest_open(t, path, NULL, NULL, &err);
    ASSERT_NOT_NULL(ld);
    uint64_t a0, a1, b0, b1;
    ingest_span(ld, &a0, &a1);
    st_store_span(s, &b0, &b1);
    ASSERT_UEQ(a0, b0);
    ASSERT_UEQ(a1, b1);
    int rc, steps = 0;
    double last = 0;
    while ((rc = ingest_step(ld, 1e-6, &err)) == 0) {
        st_store_commit(t);
        ASSERT(ingest_progress(ld) > last);
        last = ingest_progress(ld);
        steps++;
    }
    ASSERT_EQ(rc, 1);
    ASSERT_GT(steps, 2);
    ingest_close(&ld);
    ingest_close(&ld);
    st_store_commit(t);
    ASSERT_EQ(st_store_events(t), st_store_events(s));
    st_store_destroy(&s);
    st_store_destroy(&t);
    batches_free(&bs);
}

TEST(missing_or_bad_file_fails_with_a_message) {
    st_store *s = st_store_new(NULL);
    err_msg err = {{0}};
    ASSERT(ingest_file(s, task_path("nope.trace"), NULL, NULL, &err) < 0);
    ASSERT(err.msg[0] != '\0');
    const char *bad = task_path("bad.json");
    FILE *f = fopen(bad, "w");
    fputs("{\"traceEvents\": [ {\"ph\": ", f);
    fclose(f);
    memset(&err, 0, sizeof err);
    ASSERT(ingest_file(s, bad, NULL, NULL, &err) < 0);
    ASSERT_STR_CONTAINS(err.msg, "bad.json");
    st_store_destroy(&s);
}

static int count_emit(void *ctx, const void *batch, size_t len, err_msg *err) {
    (void)batch;
    (void)len;
    (void)err;
    ++*(int *)ctx;
    return 0;
}

TEST(real_kineto_traces_load_with_their_blocking_calls) {
    static const char *const names[] = {"alexnet_a100_sync_heavy.json.gz", "event_sync_single_stream.json.gz",
                                        "event_sync_multi_stream.json.gz", "sampled_rank-0.json.gz",
                                        "sampled_rank-1.json.gz"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", KINETO_TRACE_DIR, names[k]);
        import_stats ks;
        int nb = 0;
        err_msg err = {{0}};
        ASSERT_OK(kineto_import(path, NULL, count_emit, &nb, &ks, &err));
        st_store *s = st_store_new(NULL);
        ASSERT_OK(ingest_file(s, path, NULL, NULL, &err));
        ASSERT_UEQ(st_store_events(s), ks.events);
        assert_lanes_sorted(s);
        uint64_t t0, t1;
        st_store_span(s, &t0, &t1);
        ASSERT_UEQ(t0, ks.t_min);
        ASSERT_UEQ(t1, ks.t_max);
        /* blocking calls: as many as the importer flagged, and their summed time per lane equals the
         * summary's BLOCKED busy time over the whole span */
        uint64_t blocking = 0, blocked_ns = 0;
        int streams = 0, threads = 0;
        for (size_t l = 0; l < st_lane_count(s); l++) {
            const st_lane_info *li = st_lane_get(s, l);
            streams += li->kind == ST_LANE_STREAM;
            threads += li->kind == ST_LANE_THREAD;
            size_t n;
            const st_event *e = st_lane_events(s, l, &n);
            uint64_t lane_blocked = 0;
            for (size_t i = 0; i < n; i++)
                if (st_ev_kind(s, &e[i]) == TP_K_API && (st_ev_flags(s, &e[i]) & TP_F_BLOCKING)) {
                    blocking++;
                    lane_blocked += st_ev_dur(s, &e[i]);
                }
            st_bucket b;
            ASSERT_OK(st_lane_summary(s, l, t0, t1 + 1, 1, &b));
            ASSERT_UEQ(b.busy[ST_CAT_BLOCKED], lane_blocked);
            blocked_ns += lane_blocked;
        }
        ASSERT_UEQ(blocking, ks.blocking_calls);
        ASSERT_UEQ(blocked_ns, ks.blocked_ns);
        ASSERT_GE(streams, 1);
        ASSERT_GE(threads, 1);
        ASSERT_GE(st_device_count(s), 1);
        check_summaries(s, k + 1, 8);
        st_store_destroy(&s);
    }
}

TEST(alexnet_trace_has_its_documented_shape) {
    char path[1024];
    snprintf(path, sizeof path, "%s/alexnet_a100_sync_heavy.json.gz", KINETO_TRACE_DIR);
    st_store *s = st_store_new(NULL);
    err_msg err = {{0}};
    ASSERT_OK(ingest_file(s, path, NULL, NULL, &err));
    /* 1 A100, 2 streams; 16 cudaStreamSynchronize and 5 cudaDeviceSynchronize that blocked */
    int streams = 0, ss = 0, ds = 0;
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        streams += li->kind == ST_LANE_STREAM && li->id != TP_NO_ID;
        size_t n;
        const st_event *e = st_lane_events(s, l, &n);
        for (size_t i = 0; i < n; i++) {
            if (st_ev_kind(s, &e[i]) != TP_K_API || !(st_ev_flags(s, &e[i]) & TP_F_BLOCKING))
                continue;
            ss += strcmp(st_str(s, st_ev_name(s, &e[i])), "cudaStreamSynchronize") == 0;
            ds += strcmp(st_str(s, st_ev_name(s, &e[i])), "cudaDeviceSynchronize") == 0;
        }
    }
    ASSERT_EQ(streams, 2);
    ASSERT_EQ(ss, 16);
    ASSERT_EQ(ds, 5);
    ASSERT_STR_CONTAINS(st_str(s, st_device_get(s, 0)->name), "A100");
    st_store_destroy(&s);
}

TEST(strings_are_interned_once_and_kept_as_they_came) {
    st_store *s = st_store_new(NULL);
    uint32_t a = st_intern(s, "kernel\x1b[31m", 11), b = st_intern(s, "kernel\x1b[31m", 11);
    ASSERT_EQ(a, b);
    ASSERT_NE(a, 0);
    ASSERT_STR_EQ(st_str(s, a), "kernel\x1b[31m");
    ASSERT_EQ(st_intern(s, "", 0), 0);
    ASSERT_STR_EQ(st_str(s, 0), "");
    ASSERT_STR_EQ(st_str(s, 12345), "");
    for (int i = 0; i < 5000; i++) {
        char buf[32];
        int n = snprintf(buf, sizeof buf, "name-%d", i);
        uint32_t id = st_intern(s, buf, (size_t)n);
        ASSERT_STR_EQ(st_str(s, id), buf);
    }
    ASSERT_EQ(st_intern(s, "name-17", 7), st_intern(s, "name-17", 7));
    st_store_destroy(&s);
}

TEST(u64map_takes_every_key) {
    /* Keys come from untrusted traces (a producer id may be 0 or all ones): none is reserved. */
    cm_u64map m = {0};
    const uint64_t keys[] = {0, UINT64_MAX, 1, 1ull << 63, 42};
    for (size_t i = 0; i < 5; i++)
        ASSERT_NULL(cm_u64map_find(&m, keys[i]));
    for (size_t i = 0; i < 5; i++)
        ASSERT_OK(cm_u64map_put(&m, keys[i], 100 + i));
    for (uint64_t k = 2; k < 5000; k++) /* several growths */
        ASSERT_OK(cm_u64map_put(&m, k * 7919, k));
    for (size_t i = 0; i < 5; i++) {
        uint64_t *v = cm_u64map_find(&m, keys[i]);
        ASSERT_NOT_NULL(v);
        ASSERT_UEQ(*v, 100 + i);
    }
    for (uint64_t k = 2; k < 5000; k++)
        ASSERT_UEQ(*cm_u64map_find(&m, k * 7919), k);
    ASSERT_NULL(cm_u64map_find(&m, 3));
    ASSERT_OK(cm_u64map_put(&m, 0, 7));
    ASSERT_UEQ(*cm_u64map_find(&m, 0), 7);
    cm_u64map_free(&m);
    ASSERT_NULL(cm_u64map_find(&m, 0));
}

/* The API classifier the importer and the analysis share: suffixes, exact frees, prefixes. */
TEST(api_names_are_classified_with_their_suffixes) {
    ASSERT_EQ(st_api_class_of("cudaStreamSynchronize", (size_t)-1), ST_API_SYNC);
    ASSERT_EQ(st_api_class_of("cuCtxSynchronize_v2", (size_t)-1), ST_API_SYNC);
    ASSERT_EQ(st_api_class_of("cudaEventQuery", (size_t)-1), ST_API_QUERY);
    ASSERT_EQ(st_api_class_of("cudaMemcpy", (size_t)-1), ST_API_COPY);
    ASSERT_EQ(st_api_class_of("cudaMemcpyAsync_ptsz", (size_t)-1), ST_API_COPY_ASYNC);
    ASSERT_EQ(st_api_class_of("cuMemcpyDtoHAsync_v2", (size_t)-1), ST_API_COPY_ASYNC);
    ASSERT_EQ(st_api_class_of("cuMemsetD32_v2", (size_t)-1), ST_API_SET);
    ASSERT_EQ(st_api_class_of("cudaMemsetAsync", (size_t)-1), ST_API_SET_ASYNC);
    ASSERT_EQ(st_api_class_of("cudaFree", (size_t)-1), ST_API_FREE);
    ASSERT_EQ(st_api_class_of("cuMemFree_v2", (size_t)-1), ST_API_FREE);
    ASSERT_EQ(st_api_class_of("cudaFreeAsync", (size_t)-1), ST_API_ALLOC);
    ASSERT_EQ(st_api_class_of("cudaMalloc", (size_t)-1), ST_API_ALLOC);
    ASSERT_EQ(st_api_class_of("cudaLaunchKernel", (size_t)-1), ST_API_LAUNCH);
    ASSERT_EQ(st_api_class_of("cuGraphLaunch", (size_t)-1), ST_API_LAUNCH);
    ASSERT_EQ(st_api_class_of("cudaStreamWaitEvent", (size_t)-1), ST_API_OTHER);
    ASSERT_EQ(st_api_class_of("cudaFreeXYZ_v2", 8), ST_API_FREE); /* only len bytes are read */
    ASSERT_EQ(st_api_class_of("", (size_t)-1), ST_API_OTHER);
    ASSERT_EQ(st_api_class_of(NULL, 0), ST_API_OTHER);
}

/* A name longer than any API's is no API's, whatever it holds, and is not read through: a file that
 * gives every call one 1 MiB name costs a bounded look per call, not a scan of the name. */
TEST(api_names_longer_than_any_api_are_other_unread) {
    char name[ST_API_NAME_MAX + 2];
    memset(name, 'x', sizeof name);
    memcpy(name, "cudaStreamSynchronize", strlen("cudaStreamSynchronize"));
    name[ST_API_NAME_MAX] = '\0';
    ASSERT_EQ(st_api_class_of(name, ST_API_NAME_MAX), ST_API_SYNC); /* at the bound: read */
    ASSERT_EQ(st_api_class_of(name, (size_t)-1), ST_API_SYNC);
    ASSERT_EQ(st_api_sync_type(name, ST_API_NAME_MAX), TP_SYNC_STREAM);
    name[ST_API_NAME_MAX] = 'x';
    name[ST_API_NAME_MAX + 1] = '\0';
    ASSERT_EQ(st_api_class_of(name, ST_API_NAME_MAX + 1), ST_API_OTHER);
    ASSERT_EQ(st_api_class_of(name, (size_t)-1), ST_API_OTHER);
    ASSERT_EQ(st_api_sync_type(name, ST_API_NAME_MAX + 1), TP_SYNC_UNKNOWN);
    /* 1 MiB ending in "Synchronize", as a hostile export names its calls */
    size_t big = 1u << 20;
    char *m = malloc(big);
    ASSERT_NOT_NULL(m);
    memset(m, 'y', big);
    memcpy(m + big - 11, "Synchronize", 11);
    ASSERT_EQ(st_api_class_of(m, big), ST_API_OTHER);
    ASSERT_EQ(st_api_sync_type(m, big), TP_SYNC_UNKNOWN);
    free(m);
}

/* HIP's runtime names (ROCm traces) as their CUDA twins; hipMemcpyWithStream copies, then waits. */
TEST(hip_names_are_classified_as_their_cuda_twins) {
    ASSERT_EQ(st_api_class_of("hipDeviceSynchronize", (size_t)-1), ST_API_SYNC);
    ASSERT_EQ(st_api_class_of("hipStreamSynchronize", (size_t)-1), ST_API_SYNC);
    ASSERT_EQ(st_api_class_of("hipEventQuery", (size_t)-1), ST_API_QUERY);
    ASSERT_EQ(st_api_class_of("hipMemcpy", (size_t)-1), ST_API_COPY);
    ASSERT_EQ(st_api_class_of("hipMemcpyDtoH", (size_t)-1), ST_API_COPY);
    ASSERT_EQ(st_api_class_of("hipMemcpyAsync", (size_t)-1), ST_API_COPY_ASYNC);
    ASSERT_EQ(st_api_class_of("hipMemcpyWithStream", (size_t)-1), ST_API_COPY_WAIT);
    ASSERT_EQ(st_api_class_of("hipMemsetAsync", (size_t)-1), ST_API_SET_ASYNC);
    ASSERT_EQ(st_api_class_of("hipFree", (size_t)-1), ST_API_FREE);
    ASSERT_EQ(st_api_class_of("hipHostFree", (size_t)-1), ST_API_FREE);
    ASSERT_EQ(st_api_class_of("hipHostMalloc", (size_t)-1), ST_API_ALLOC);
    ASSERT_EQ(st_api_class_of("hipLaunchKernel", (size_t)-1), ST_API_LAUNCH);
    ASSERT_EQ(st_api_class_of("hipExtModuleLaunchKernel", (size_t)-1), ST_API_LAUNCH);
    ASSERT_EQ(st_api_class_of("hipModuleLaunchKernel", (size_t)-1), ST_API_LAUNCH);
    ASSERT_EQ(st_api_class_of("hipGetDevicePropertiesR0600", (size_t)-1), ST_API_OTHER);
    ASSERT_EQ(st_api_class_of("hipster", (size_t)-1), ST_API_OTHER); /* "hip" then lower case: not HIP's */
    /* a copy that waits blocks whatever its GPU copy (here device to device, as on MI300) */
    tp_record op = {.memcpy = {.kind = TP_K_MEMCPY, .copy_kind = TP_COPY_DTOD}};
    ASSERT_EQ(st_api_resolve(ST_API_COPY_WAIT, &op), TP_F_BLOCKING);
    ASSERT_EQ(st_api_resolve(ST_API_COPY, &op), 0);
    ASSERT(st_is_runtime_function("hipMemcpyWithStream"));
    ASSERT(!st_is_runtime_function("hipster"));
}

/* Each lane of s holds the events of the same lane of ref, moved by shift[its producer]. */
static void assert_shifted(const st_store *s, const st_store *ref, const int64_t *shift) {
    ASSERT_EQ(st_lane_count(s), st_lane_count(ref));
    for (size_t l = 0; l < st_lane_count(s); l++) {
        size_t n, nr;
        const st_event *e = st_lane_events(s, l, &n), *er = st_lane_events(ref, l, &nr);
        ASSERT_EQ(n, nr);
        ASSERT_EQ(st_lane_get(s, l)->producer, st_lane_get(ref, l)->producer);
        int64_t d = shift[st_lane_get(s, l)->producer];
        for (size_t i = 0; i < n; i++) {
            ASSERT_UEQ(e[i].start, (uint64_t)((int64_t)er[i].start - d));
            ASSERT_UEQ(st_ev_end(s, &e[i]), (uint64_t)((int64_t)st_ev_end(ref, &er[i]) - d));
        }
    }
}

/* A host's measured clock moves the events of its producers onto the reference clock, whether the
 * measurement comes before their events or after; a later measurement moves them again only when
 * it says the offset applied is off by more than its own uncertainty, and the uncertainty stated
 * never drops below what was measured. Expected times: the same batches in a store without clocks,
 * moved by the offsets given here. */
TEST(host_clocks_put_each_hosts_producers_on_the_reference_clock) {
    batches a = synth_host_batches(1, "node-a", 6, 500), b = synth_host_batches(2, "node-b", 6, 500),
            c = synth_host_batches(3, "node-c", 2, 500);
    st_store *ref = st_store_new(NULL), *s = st_store_new(NULL);
    ASSERT_NOT_NULL(ref);
    ASSERT_NOT_NULL(s);
    add_all(ref, &a);
    add_all(ref, &b);
    add_all(ref, &c);
    st_store_commit(ref);
    /* node-a measured before anything came; node-b after half its batches */
    ASSERT_OK(st_store_set_host_clock(s, "node-a", 5000000000LL, 100)); /* no producer yet: none moved */
    add_all(s, &a);
    batches b1 = {b.b, 3}, b2 = {b.b + 3, 3};
    add_all(s, &b1);
    st_store_commit(s);
    ASSERT_EQ(st_store_set_host_clock(s, "node-b", -2000000000LL, 50), 1);
    add_all(s, &b2);
    add_all(s, &c);
    st_store_commit(s);
    int64_t shift[3] = {5000000000LL, -2000000000LL, 0};
    assert_shifted(s, ref, shift);
    assert_lanes_sorted(s);
    const st_producer_info *pa = st_producer_get(s, 0), *pb = st_producer_get(s, 1), *pc = st_producer_get(s, 2);
    ASSERT(pa->clock_aligned && pb->clock_aligned && !pc->clock_aligned);
    ASSERT_UEQ(pa->clock_uncertainty_ns, 100);
    ASSERT_UEQ(pb->clock_uncertainty_ns, 50);
    /* the span follows: node-a's events now come first (5 s earlier) */
    uint64_t t0, t1, r0, r1;
    st_store_span(s, &t0, &t1);
    st_store_span(ref, &r0, &r1);
    ASSERT_UEQ(t0, r0 - 5000000000ull);
    /* a better measurement that disagrees by more than its uncertainty moves them */
    ASSERT_EQ(st_store_set_host_clock(s, "node-a", 5000000060LL, 30), 1);
    st_store_commit(s);
    shift[0] = 5000000060LL;
    assert_shifted(s, ref, shift);
    ASSERT_UEQ(pa->clock_uncertainty_ns, 30);
    /* one within its uncertainty of the applied offset does not; the applied one is then known
     * within the distance between the two plus the new uncertainty */
    ASSERT_EQ(st_store_set_host_clock(s, "node-a", 5000000070LL, 20), 0);
    st_store_commit(s);
    assert_shifted(s, ref, shift);
    ASSERT_UEQ(st_producer_get(s, 0)->clock_uncertainty_ns, 30);
    ASSERT_EQ(st_producer_get(s, 0)->clock_shift_ns, 5000000060LL);
    /* summaries are those of the moved events: a lane's busy time over the whole span */
    for (size_t l = 0; l < st_lane_count(s); l++) {
        st_bucket bs, br;
        int64_t d = shift[st_lane_get(s, l)->producer];
        ASSERT_OK(st_lane_summary(s, l, (uint64_t)((int64_t)r0 - d), (uint64_t)((int64_t)r1 - d) + 1, 1, &bs));
        ASSERT_OK(st_lane_summary(ref, l, r0, r1 + 1, 1, &br));
        ASSERT_EQ(bs.count, br.count);
        for (int k = 0; k < ST_CAT_N; k++)
            ASSERT_UEQ(bs.busy[k], br.busy[k]);
    }
    ASSERT_EQ(st_store_set_host_clock(s, "", 1, 1), ERR_INVAL);
    st_store_destroy(&s);
    st_store_destroy(&ref);
    batches_free(&a);
    batches_free(&b);
    batches_free(&c);
}

/* A recorder's notes (a synthetic batch of TP_PRODUCER_NOTES holding TP_K_HOSTCLOCK records), as a
 * trace file ends with them: each host's producers move by its offset, and the notes are no
 * producer of their own. */
TEST(a_recorders_notes_set_the_hosts_clocks) {
    batches a = synth_host_batches(1, "node-a", 4, 500), b = synth_host_batches(2, "node-b", 4, 500);
    st_store *ref = st_store_new(NULL), *s = st_store_new(NULL);
    ASSERT_NOT_NULL(ref);
    ASSERT_NOT_NULL(s);
    add_all(ref, &a);
    add_all(ref, &b);
    st_store_commit(ref);
    add_all(s, &a);
    add_all(s, &b);
    tp_enc_opts eo = {.producer = TP_PRODUCER_NOTES};
    tp_enc *enc = tp_enc_new(&eo);
    ASSERT_NOT_NULL(enc);
    tp_hostclock h = {.kind = TP_K_HOSTCLOCK, .device = TP_NO_DEVICE, .host = tp_enc_intern_cstr(enc, "node-b"),
                      .offset_ns = -7000000000LL, .uncertainty_ns = 250000, .measured_ns = 1};
    ASSERT_OK(tp_enc_add(enc, &h));
    tp_hostclock unknown = h;
    unknown.host = tp_enc_intern_cstr(enc, "node-z"); /* no producer there: nothing moves */
    unknown.offset_ns = 9;
    ASSERT_OK(tp_enc_add(enc, &unknown));
    tp_buf notes = {0};
    ASSERT_OK(tp_enc_finish_flags(enc, TP_BF_SYNTHETIC, &notes));
    err_msg err = {{0}};
    ASSERT_OK(st_store_add_batch(s, notes.data, notes.len, &err));
    st_store_commit(s);
    ASSERT_EQ(st_producer_count(s), 2);
    int64_t shift[2] = {0, -7000000000LL};
    assert_shifted(s, ref, shift);
    ASSERT(!st_producer_get(s, 0)->clock_aligned);
    ASSERT(st_producer_get(s, 1)->clock_aligned);
    ASSERT_UEQ(st_producer_get(s, 1)->clock_uncertainty_ns, 250000);
    /* the same record from a producer of its own (not the notes) is not taken */
    tp_enc *other = tp_enc_new(NULL);
    ASSERT_NOT_NULL(other);
    h.host = tp_enc_intern_cstr(other, "node-a");
    ASSERT_OK(tp_enc_add(other, &h));
    ASSERT_OK(tp_enc_finish_flags(other, TP_BF_SYNTHETIC, &notes));
    ASSERT_OK(st_store_add_batch(s, notes.data, notes.len, &err));
    st_store_commit(s);
    ASSERT(!st_producer_get(s, 0)->clock_aligned);
    tp_buf_free(&notes);
    tp_enc_destroy(&enc);
    tp_enc_destroy(&other);
    st_store_destroy(&s);
    st_store_destroy(&ref);
    batches_free(&a);
    batches_free(&b);
}

/* A thread's ranges nest by depth, as Perfetto draws them: the depths below are counted by hand from
 * the spans (which range holds which), and the ranges arrive out of order, in two batches. */
TEST(ranges_nest_by_depth_per_thread) {
    static const struct { uint64_t start, end; const char *name; uint32_t depth; } r[] = {
        {100, 200, "step", 0},       /* holds everything up to 200 */
        {110, 150, "aten::item", 1}, /* in step */
        {110, 120, "aten::a", 2},    /* same start as aten::item, shorter: inside it */
        {120, 150, "aten::b", 2},    /* starts where aten::a ends: beside it, not in it */
        {130, 140, "aten::c", 3},    /* in aten::b */
        {160, 190, "aten::d", 1},    /* in step, after aten::item */
        {200, 300, "step2", 0},      /* starts as step ends */
        {250, 350, "cross", 1},      /* crosses step2's end: held at 1, never overlapping step2's row */
        {310, 320, "late", 2},       /* after step2 ended but inside cross */
    };
    size_t n = sizeof r / sizeof r[0];
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 5});
    tp_buf out = {0};
    st_store *s = st_store_new(NULL);
    for (size_t half = 0; half < 2; half++) { /* the later ranges first */
        for (size_t i = 0; i < n; i++) {
            if ((i < n / 2) == (half == 0))
                continue;
            tp_record rec;
            memset(&rec, 0, sizeof rec);
            rec.nvtx = (tp_nvtx){.kind = TP_K_NVTX, .flags = TP_NVTX_RANGE, .device = TP_NO_DEVICE, .tid = 9,
                                 .start = 1000000000 + r[i].start, .end = 1000000000 + r[i].end,
                                 .name = tp_enc_intern_cstr(enc, r[i].name)};
            ASSERT_OK(tp_enc_add(enc, &rec));
        }
        ASSERT_OK(tp_enc_finish(enc, &out));
        tp_enc_delivered(enc, 1);
        ASSERT_OK(st_store_add_batch(s, out.data, out.len, NULL));
        st_store_commit(s);
    }
    size_t lane = lane_find(s, ST_LANE_NVTX, 9), ne;
    ASSERT(lane != SIZE_MAX);
    const st_event *e = st_lane_events(s, lane, &ne);
    ASSERT_UEQ(ne, n);
    ASSERT_UEQ(st_lane_depths(s, lane), 4);
    for (size_t i = 0; i < n; i++) {
        int found = 0;
        for (size_t k = 0; k < ne; k++)
            if (strcmp(st_str(s, st_ev_name(s, &e[k])), r[i].name) == 0) {
                ASSERT_UEQ(st_ev_aux(s, &e[k]), r[i].depth);
                found = 1;
            }
        ASSERT(found);
    }
    /* each depth in time order, none overlapping, as many as the table has at that depth */
    size_t total = 0;
    for (size_t d = 0; d < st_lane_depths(s, lane); d++) {
        size_t m, want = 0;
        const uint32_t *idx = st_lane_at_depth(s, lane, d, &m);
        for (size_t i = 0; i < n; i++)
            want += r[i].depth == d;
        ASSERT_UEQ(m, want);
        for (size_t k = 0; k < m; k++) {
            ASSERT_UEQ(st_ev_aux(s, &e[idx[k]]), d);
            if (k > 0)
                ASSERT(st_ev_end(s, &e[idx[k - 1]]) <= e[idx[k]].start);
        }
        total += m;
    }
    ASSERT_UEQ(total, n);
    /* the innermost range holding a span */
    size_t in = st_lane_range_at(s, lane, 1000000000 + 132, 1000000000 + 138);
    ASSERT(in != SIZE_MAX);
    ASSERT_STR_EQ(st_str(s, st_ev_name(s, &e[in])), "aten::c");
    in = st_lane_range_at(s, lane, 1000000000 + 112, 1000000000 + 125); /* past aten::a: aten::item holds it */
    ASSERT(in != SIZE_MAX);
    ASSERT_STR_EQ(st_str(s, st_ev_name(s, &e[in])), "aten::item");
    ASSERT(st_lane_range_at(s, lane, 1000000000 + 50, 1000000000 + 60) == SIZE_MAX);
    /* shrunk, the index holds 4 bytes a range and 4 a depth (and two more), as st_lane_depths says */
    st_store_shrink(s);
    st_memory m;
    st_store_memory_parts(s, &m);
    ASSERT_UEQ(m.depths, 4 * n + 4 * (4 + 2));
    ASSERT_UEQ(st_lane_depths(s, lane), 4);
    tp_buf_free(&out);
    tp_enc_destroy(&enc);
    st_store_destroy(&s);
}

/* What a viewer loads of a profiler trace: each thread's operators and annotations as ranges, as
 * many and as deep as kineto_expected.py counts in the JSON, and the first operator called name at the depth,
 * and inside the rows, that the script finds holding it. */
static void ranges_as_the_json_nests_them(const char *trace, const char *name) {
    char path[1024], cmd[4096];
    snprintf(path, sizeof path, "%s/%s", KINETO_TRACE_DIR, trace);
    snprintf(cmd, sizeof cmd, "python3 '%s' --ranges '%s' '%s'", KINETO_EXPECTED, name, path);
    FILE *p = popen(cmd, "r");
    ASSERT_NOT_NULL(p);
    char line[4096], chain[4096] = "";
    unsigned long tids[16], counts[16], depths[16], matches = 0, depth = 0;
    size_t nt = 0;
    while (fgets(line, sizeof line, p)) {
        if (nt < 16 && sscanf(line, "thread %lu %lu depths %lu", &tids[nt], &counts[nt], &depths[nt]) == 3)
            nt++;
        sscanf(line, "matches %lu", &matches);
        sscanf(line, "depth %lu %4000s", &depth, chain);
    }
    ASSERT_EQ(pclose(p), 0);
    ASSERT_GE(nt, 1);
    ASSERT_GE(matches, 1);
    err_msg err = {{0}};
    st_store *s = st_store_new(NULL);
    ingest_loader *ld = ingest_open(s, path, NULL, NULL, &err);
    ASSERT_NOT_NULL(ld);
    ingest_keep_ops(ld);
    int rc;
    while ((rc = ingest_step(ld, 0, &err)) == 0)
        ;
    ASSERT_EQ(rc, 1);
    ingest_close(&ld);
    st_store_commit(s);
    unsigned long found = 0;
    const st_event *first = NULL;
    size_t first_lane = 0;
    for (size_t i = 0; i < nt; i++) {
        size_t lane = lane_find(s, ST_LANE_NVTX, (uint32_t)tids[i]), n;
        ASSERT(lane != SIZE_MAX);
        const st_event *e = st_lane_events(s, lane, &n);
        ASSERT_UEQ(n, counts[i]);
        ASSERT_UEQ(st_lane_depths(s, lane), depths[i]);
        for (size_t k = 0; k < n; k++)
            if (strcmp(st_str(s, st_ev_name(s, &e[k])), name) == 0) {
                found++;
                if (first == NULL || e[k].start < first->start) {
                    first = &e[k];
                    first_lane = lane;
                }
            }
    }
    ASSERT_UEQ(found, matches);
    ASSERT_UEQ(st_ev_aux(s, first), depth);
    /* the rows that hold it, one per depth above it */
    char got[4096] = "";
    for (size_t d = 0; d < st_ev_aux(s, first); d++) {
        size_t n, m;
        const uint32_t *idx = st_lane_at_depth(s, first_lane, d, &m);
        const st_event *e = st_lane_events(s, first_lane, &n);
        size_t k = st_lane_depth_find(s, first_lane, d, first->start);
        ASSERT(k < m && e[idx[k]].start <= first->start && st_ev_end(s, &e[idx[k]]) >= st_ev_end(s, first));
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s>", st_str(s, st_ev_name(s, &e[idx[k]])));
    }
    snprintf(got + strlen(got), sizeof got - strlen(got), "%s", name);
    ASSERT_STR_EQ(got, chain);
    st_store_destroy(&s);
}

TEST(profiler_operators_are_ranges_nested_as_the_json_nests_them) {
    ranges_as_the_json_nests_them("qwen_h100_with_stack.json.gz", "aten::item");
    ranges_as_the_json_nests_them("resnet_2080ti_two_threads.json.gz", "aten::copy_");
}

static int store_emit(void *ctx, const void *batch, size_t len, err_msg *err) {
    return st_store_add_batch(ctx, batch, len, err);
}

/* Operators made ranges have a budget of their own (max_events of them): a trace that imports
 * within the limit without them imports with them (the first max_events operators as ranges),
 * and one over the limit is still refused. Three calls and five operators, limit 3, by hand. */
TEST(operators_as_ranges_never_push_an_import_over_its_limit) {
    char json[4096] = "{\"traceEvents\": [";
    for (int i = 0; i < 5; i++)
        snprintf(json + strlen(json), sizeof json - strlen(json),
                 "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::op%d\", \"pid\": 1, \"tid\": 2, \"ts\": %d, "
                 "\"dur\": 5},", i, 10 * i);
    for (int i = 0; i < 3; i++)
        snprintf(json + strlen(json), sizeof json - strlen(json),
                 "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, \"tid\": 2, "
                 "\"ts\": %d, \"dur\": 1}%s", 10 * i + 1, i < 2 ? "," : "]}");
    import_opts o = {.max_events = 3, .ops = 1};
    err_msg err = {{0}};
    st_store *s = st_store_new(NULL);
    ASSERT_OK(kineto_import_mem(json, strlen(json), "ops.json", &o, store_emit, s, NULL, &err));
    st_store_commit(s);
    size_t calls = lane_find(s, ST_LANE_THREAD, 2), ranges = lane_find(s, ST_LANE_NVTX, 2);
    ASSERT(calls != SIZE_MAX && ranges != SIZE_MAX);
    ASSERT_UEQ(st_lane_get(s, calls)->n_events, 3);
    ASSERT_UEQ(st_lane_get(s, ranges)->n_events, 3);
    st_store_destroy(&s);
    /* a fourth call is over the limit, operators or not */
    char *end = strrchr(json, ']');
    snprintf(end, sizeof json - (size_t)(end - json),
             ",{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaMemcpy\", \"pid\": 1, \"tid\": 2, \"ts\": 41, "
             "\"dur\": 1}]}");
    s = st_store_new(NULL);
    ASSERT_EQ(kineto_import_mem(json, strlen(json), "ops.json", &o, store_emit, s, NULL, &err), ERR_LIMIT);
    st_store_destroy(&s);
}
