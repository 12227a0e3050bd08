/* The batch codec: round trips of every record kind, the string and metadata delivery rules, and a
 * decoder that refuses whatever is not a whole, valid batch. */
#include "import.h"
#include "synctop/codec.h"
#include "synctop/sanitize.h"
#include "synth.h"
#include "task.h"

/* One record of every kind, with edge values in every field. */
static size_t every_kind(tp_record *out, uint32_t name) {
    size_t n = 0;
    memset(out, 0, 14 * sizeof *out);
    tp_kernel *k = &out[n++].kernel;
    *k = (tp_kernel){.kind = TP_K_KERNEL, .flags = TP_F_GRAPH, .device = 65534, .stream = UINT32_MAX,
                     .start = 0, .end = UINT64_MAX, .correlation = UINT32_MAX, .name = name,
                     .context = 7, .graph = 3, .grid = {UINT32_MAX, 1, 0}, .block = {1024, 1, 1}};
    tp_memcpy *m = &out[n++].memcpy;
    *m = (tp_memcpy){.kind = TP_K_MEMCPY, .flags = TP_F_ASYNC, .device = 1, .stream = 13,
                     .start = UINT64_MAX - 1, .end = UINT64_MAX, .correlation = 1, .context = 1,
                     .bytes = UINT64_MAX, .copy_kind = TP_COPY_PTOP, .src_kind = TP_MEM_MANAGED_STATIC,
                     .dst_kind = TP_MEM_PAGEABLE, .src_device = 0, .dst_device = 1};
    tp_memset *s = &out[n++].memset;
    *s = (tp_memset){.kind = TP_K_MEMSET, .device = 0, .stream = 0, .start = 5, .end = 5,
                     .correlation = 9, .bytes = 1, .mem_kind = TP_MEM_DEVICE, .value = 0xdeadbeef};
    tp_sync *y = &out[n++].sync;
    *y = (tp_sync){.kind = TP_K_SYNC, .device = 2, .stream = TP_NO_ID, .start = 10, .end = 20,
                   .correlation = 4, .context = 2, .event = 77, .sync_type = TP_SYNC_CONTEXT};
    tp_api *a = &out[n++].api;
    *a = (tp_api){.kind = TP_K_API, .flags = TP_F_BLOCKING | TP_F_DRIVER | TP_F_LAUNCH,
                  .device = TP_NO_DEVICE, .tid = UINT32_MAX, .start = 100, .end = 200,
                  .correlation = 5, .cbid = 131, .name = name, .callsite = 3, .ret = -1};
    tp_nvtx *v = &out[n++].nvtx;
    *v = (tp_nvtx){.kind = TP_K_NVTX, .flags = TP_NVTX_END, .device = TP_NO_DEVICE, .tid = 1,
                   .start = 300, .end = 300, .id = UINT64_MAX, .name = name, .domain = 0};
    tp_clock *c = &out[n++].clock;
    *c = (tp_clock){.kind = TP_K_CLOCK, .trace_ns = 400, .realtime_ns = UINT64_MAX, .monotonic_ns = 1};
    tp_drops *d = &out[n++].drops;
    *d = (tp_drops){.kind = TP_K_DROPS, .source = TP_DROP_PUBLISHER, .ts = 500, .records = 12,
                    .batches = UINT64_MAX};
    tp_process *p = &out[n++].process;
    *p = (tp_process){.kind = TP_K_PROCESS, .pid = 4194304, .host = name, .cmdline = 0, .rank = -1,
                      .world = INT32_MAX, .start_realtime_ns = 1};
    tp_device *dv = &out[n++].device;
    *dv = (tp_device){.kind = TP_K_DEVICE, .device = 7, .name = name, .cc_major = 10, .cc_minor = 3,
                      .sm_count = 148, .memory_bytes = UINT64_MAX};
    tp_stream *st = &out[n++].stream;
    *st = (tp_stream){.kind = TP_K_STREAM, .flags = TP_F_NULL_STREAM, .device = 7, .stream = 1,
                      .context = 1, .priority = INT32_MIN};
    tp_thread *t = &out[n++].thread;
    *t = (tp_thread){.kind = TP_K_THREAD, .tid = 99, .name = name, .pid = 98};
    tp_callsite *cs = &out[n++].callsite;
    *cs = (tp_callsite){.kind = TP_K_CALLSITE, .id = 3, .n_frames = 1};
    tp_frame *f = &out[n++].frame;
    *f = (tp_frame){.kind = TP_K_FRAME, .flags = TP_FRAME_PYTHON, .index = 0, .callsite = 3,
                    .line = UINT32_MAX, .file = name, .func = name, .module = 0, .pc = UINT64_MAX};
    return n;
}

static int open_ok(tp_dec *d, const tp_buf *b) {
    err_msg err = {{0}};
    int rc = tp_dec_open(d, b->data, b->len, &err);
    if (rc)
        fprintf(stderr, "decode: %s\n", err.msg);
    return rc;
}

TEST(every_kind_round_trips) {
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 0x1234});
    ASSERT_NOT_NULL(enc);
    uint32_t name = tp_enc_intern_cstr(enc, "sgemm");
    tp_record recs[14];
    size_t n = every_kind(recs, name);
    ASSERT_EQ(n, 14);
    for (size_t i = 0; i < n; i++)
        ASSERT_OK(tp_enc_add(enc, &recs[i]));
    tp_buf b = {0};
    ASSERT_OK(tp_enc_finish(enc, &b));
    tp_dec d = {0};
    ASSERT_OK(open_ok(&d, &b));
    ASSERT_UEQ(d.hdr.producer, 0x1234);
    ASSERT_UEQ(d.hdr.seq, 0);
    ASSERT_EQ(d.hdr.n_records, 14);
    ASSERT_EQ(d.hdr.n_events, 8);
    ASSERT_EQ(d.hdr.n_strings, 1);
    ASSERT_UEQ(d.hdr.t_min, 0);
    ASSERT_UEQ(d.hdr.t_max, UINT64_MAX);
    uint32_t id, len;
    const char *s;
    ASSERT_EQ(tp_dec_next_string(&d, &id, &s, &len), 1);
    ASSERT_EQ(id, name);
    ASSERT_EQ(len, 5);
    ASSERT_MEM_EQ(s, "sgemm", 5);
    ASSERT_EQ(tp_dec_next_string(&d, &id, &s, &len), 0);
    /* metadata first, in the order added, then events in the order added */
    size_t meta_i = 8, ev_i = 0;
    for (size_t i = 0; i < n; i++) {
        const tp_record *r = tp_dec_next_record(&d);
        ASSERT_NOT_NULL(r);
        const tp_record *want = i < 6 ? &recs[meta_i++] : &recs[ev_i++];
        ASSERT_EQ(r->head.kind, want->head.kind);
        ASSERT_MEM_EQ(r, want, tp_kind_size(want->head.kind));
    }
    ASSERT_NULL(tp_dec_next_record(&d));
    tp_dec_free(&d);
    tp_buf_free(&b);
    tp_enc_destroy(&enc);
    tp_enc_destroy(&enc); /* twice is fine */
    ASSERT_NULL(enc);
}

TEST(reversed_span_is_clamped_by_encoder) {
    tp_enc *enc = tp_enc_new(NULL);
    tp_kernel k = {.kind = TP_K_KERNEL, .start = 500, .end = 100};
    ASSERT_OK(tp_enc_add(enc, &k));
    tp_buf b = {0};
    ASSERT_OK(tp_enc_finish(enc, &b));
    tp_dec d = {0};
    ASSERT_OK(open_ok(&d, &b));
    const tp_record *r = tp_dec_next_record(&d);
    ASSERT_UEQ(r->kernel.start, 500);
    ASSERT_UEQ(r->kernel.end, 500);
    ASSERT_UEQ(d.hdr.t_min, 500);
    ASSERT_UEQ(d.hdr.t_max, 500);
    tp_dec_free(&d);
    tp_buf_free(&b);
    tp_enc_destroy(&enc);
}

TEST(unknown_kind_refused_by_encoder) {
    tp_enc *enc = tp_enc_new(NULL);
    tp_head h = {.kind = 99};
    uint8_t raw[64] = {0};
    memcpy(raw, &h, sizeof h);
    ASSERT_EQ(tp_enc_add(enc, raw), ERR_INVAL);
    ASSERT_EQ(tp_enc_pending(enc), 0);
    tp_enc_destroy(&enc);
}

TEST(strings_are_interned_once_and_sent_once) {
    tp_enc *enc = tp_enc_new(NULL);
    uint32_t a = tp_enc_intern_cstr(enc, "alpha");
    uint32_t b = tp_enc_intern_cstr(enc, "beta");
    ASSERT_EQ(a, 1);
    ASSERT_EQ(b, 2);
    ASSERT_EQ(tp_enc_intern_cstr(enc, "alpha"), 1);
    ASSERT_EQ(tp_enc_intern(enc, "alphabet", 5), 1);
    ASSERT_EQ(tp_enc_intern(enc, "", 0), 0);
    ASSERT_EQ(tp_enc_intern_cstr(enc, NULL), 0);
    tp_buf out = {0};
    tp_dec d = {0};
    ASSERT_OK(tp_enc_finish(enc, &out));
    tp_enc_delivered(enc, 1);
    ASSERT_OK(open_ok(&d, &out));
    ASSERT_EQ(d.hdr.n_strings, 2);
    /* delivered: the next batch carries only the new string */
    ASSERT_EQ(tp_enc_intern_cstr(enc, "gamma"), 3);
    ASSERT_OK(tp_enc_finish(enc, &out));
    ASSERT_OK(open_ok(&d, &out));
    ASSERT_EQ(d.hdr.n_strings, 1);
    ASSERT_UEQ(d.hdr.seq, 1);
    /* not delivered: the next batch carries it again, plus the new one */
    tp_enc_delivered(enc, 0);
    ASSERT_EQ(tp_enc_intern_cstr(enc, "delta"), 4);
    ASSERT_OK(tp_enc_finish(enc, &out));
    tp_enc_delivered(enc, 1);
    ASSERT_OK(open_ok(&d, &out));
    ASSERT_EQ(d.hdr.n_strings, 2);
    ASSERT_UEQ(d.hdr.seq, 2);
    tp_strtab *t = tp_strtab_new();
    ASSERT_OK(tp_dec_load_strings(&d, t));
    uint32_t len = 0;
    ASSERT_STR_EQ(tp_strtab_get(t, 3, &len), "gamma");
    ASSERT_STR_EQ(tp_strtab_get(t, 4, &len), "delta");
    ASSERT_NULL(tp_strtab_get(t, 1, &len));
    /* keyframe: everything */
    tp_enc_keyframe(enc);
    ASSERT_OK(tp_enc_finish(enc, &out));
    ASSERT_OK(open_ok(&d, &out));
    ASSERT(d.hdr.flags & TP_BF_KEYFRAME);
    ASSERT_EQ(d.hdr.n_strings, 4);
    ASSERT_OK(tp_dec_load_strings(&d, t));
    ASSERT_STR_EQ(tp_strtab_get(t, 1, &len), "alpha");
    ASSERT_EQ(tp_strtab_count(t), 4);
    /* and back to nothing new */
    tp_enc_delivered(enc, 1);
    ASSERT_OK(tp_enc_finish(enc, &out));
    ASSERT_OK(open_ok(&d, &out));
    ASSERT_EQ(d.hdr.n_strings, 0);
    ASSERT(!(d.hdr.flags & TP_BF_KEYFRAME));
    tp_strtab_destroy(&t);
    tp_dec_free(&d);
    tp_buf_free(&out);
    tp_enc_destroy(&enc);
}

TEST(metadata_resent_after_drop_and_in_keyframes) {
    tp_enc *enc = tp_enc_new(NULL);
    tp_device dv = {.kind = TP_K_DEVICE, .device = 0, .sm_count = 132};
    tp_stream st = {.kind = TP_K_STREAM, .device = 0, .stream = 7};
    ASSERT_OK(tp_enc_add(enc, &dv));
    tp_buf out = {0};
    tp_dec d = {0};
    ASSERT_OK(tp_enc_finish(enc, &out));
    tp_enc_delivered(enc, 0); /* dropped */
    ASSERT_OK(tp_enc_add(enc, &st));
    ASSERT_EQ(tp_enc_pending(enc), 2);
    ASSERT_OK(tp_enc_finish(enc, &out));
    tp_enc_delivered(enc, 1);
    ASSERT_OK(open_ok(&d, &out));
    ASSERT_EQ(d.hdr.n_records, 2);
    ASSERT_EQ(tp_dec_next_record(&d)->head.kind, TP_K_DEVICE);
    ASSERT_EQ(tp_dec_next_record(&d)->head.kind, TP_K_STREAM);
    ASSERT_EQ(tp_enc_pending(enc), 0);
    ASSERT_OK(tp_enc_finish(enc, &out));
    ASSERT_OK(open_ok(&d, &out));
    ASSERT_EQ(d.hdr.n_records, 0);
    tp_enc_keyframe(enc);
    ASSERT_OK(tp_enc_finish(enc, &out));
    ASSERT_OK(open_ok(&d, &out));
    ASSERT_EQ(d.hdr.n_records, 2);
    tp_dec_free(&d);
    tp_buf_free(&out);
    tp_enc_destroy(&enc);
}

TEST(metadata_log_is_bounded) {
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.max_meta_records = 3, .max_string_bytes = 10});
    tp_thread t = {.kind = TP_K_THREAD, .tid = 1};
    for (int i = 0; i < 3; i++)
        ASSERT_OK(tp_enc_add(enc, &t));
    ASSERT_EQ(tp_enc_add(enc, &t), ERR_LIMIT);
    ASSERT_EQ(tp_enc_intern_cstr(enc, "0123456789"), 1);
    ASSERT_EQ(tp_enc_intern_cstr(enc, "x"), 0);
    tp_enc_stats st;
    tp_enc_stats_get(enc, &st);
    ASSERT_UEQ(st.strings_refused, 1);
    ASSERT_UEQ(st.meta_records, 3);
    tp_enc_destroy(&enc);
}

TEST(end_flag_and_sequence) {
    tp_enc *enc = tp_enc_new(NULL);
    tp_buf out = {0};
    tp_dec d = {0};
    for (int i = 0; i < 3; i++)
        ASSERT_OK(tp_enc_finish(enc, &out));
    ASSERT_OK(tp_enc_finish_flags(enc, TP_BF_END, &out));
    ASSERT_OK(open_ok(&d, &out));
    ASSERT_UEQ(d.hdr.seq, 3);
    ASSERT(d.hdr.flags & TP_BF_END);
    ASSERT_EQ(tp_enc_finish_flags(enc, TP_BF_INDEX, &out), ERR_INVAL);
    tp_dec_free(&d);
    tp_buf_free(&out);
    tp_enc_destroy(&enc);
}

static void make_synth_batch(tp_buf *out, size_t n, uint64_t seed) {
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = seed});
    synth s;
    synth_init(&s, seed);
    synth_fill(&s, enc, n);
    ASSERT_OK(tp_enc_finish(enc, out));
    tp_enc_destroy(&enc);
}

TEST(synth_stream_round_trips_exactly) {
    tp_buf b = {0};
    make_synth_batch(&b, 10000, 7);
    tp_dec d = {0};
    ASSERT_OK(open_ok(&d, &b));
    ASSERT_EQ(d.hdr.n_events, 10000);
    /* regenerate and compare record by record */
    tp_enc *enc = tp_enc_new(NULL);
    synth s;
    synth_init(&s, 7);
    synth_meta(&s, enc);
    const tp_record *r;
    size_t meta = 0, ev = 0;
    while ((r = tp_dec_next_record(&d)) != NULL) {
        if (TP_KIND_IS_META(r->head.kind)) {
            meta++;
            continue;
        }
        tp_record want;
        synth_next(&s, enc, &want);
        ASSERT_MEM_EQ(r, &want, tp_kind_size(want.head.kind));
        ev++;
    }
    ASSERT_EQ(ev, 10000);
    ASSERT_EQ(meta, 12); /* process, device, 2 streams, thread, module, 2 x (call site + 2 frames) */
    tp_enc_destroy(&enc);
    tp_dec_free(&d);
    tp_buf_free(&b);
}

TEST(compressed_batch_decodes_the_same) {
    tp_buf raw = {0}, z = {0};
    make_synth_batch(&raw, 5000, 3);
    err_msg err = {{0}};
    ASSERT_OK(tp_batch_compress(raw.data, raw.len, 1, &z, &err));
    ASSERT_LT(z.len, raw.len / 3);
    tp_dec a = {0}, b = {0};
    ASSERT_OK(open_ok(&a, &raw));
    ASSERT_OK(open_ok(&b, &z));
    ASSERT(b.hdr.flags & TP_BF_ZSTD);
    ASSERT_EQ(a.payload_len, b.payload_len);
    ASSERT_MEM_EQ(a.payload, b.payload, a.payload_len);
    ASSERT_UEQ(a.hdr.t_min, b.hdr.t_min);
    /* compressing a compressed batch copies it */
    tp_buf zz = {0};
    ASSERT_OK(tp_batch_compress(z.data, z.len, 1, &zz, &err));
    ASSERT_EQ(zz.len, z.len);
    ASSERT_MEM_EQ(zz.data, z.data, z.len);
    tp_dec_free(&a);
    tp_dec_free(&b);
    tp_buf_free(&raw);
    tp_buf_free(&z);
    tp_buf_free(&zz);
}

TEST(unaligned_batch_is_read) {
    tp_buf b = {0};
    make_synth_batch(&b, 100, 5);
    uint8_t *shifted = malloc(b.len + 1);
    memcpy(shifted + 1, b.data, b.len);
    tp_dec d = {0};
    err_msg err = {{0}};
    ASSERT_OK(tp_dec_open(&d, shifted + 1, b.len, &err));
    size_t n = 0;
    while (tp_dec_next_record(&d))
        n++;
    ASSERT_EQ(n, 112);
    free(shifted);
    tp_dec_free(&d);
    tp_buf_free(&b);
}

TEST(newer_version_refused_by_name) {
    tp_buf b = {0};
    make_synth_batch(&b, 10, 1);
    tp_batch_hdr h;
    memcpy(&h, b.data, sizeof h);
    h.version = TP_BATCH_VERSION + 1;
    memcpy(b.data, &h, sizeof h);
    tp_batch_seal_header(b.data);
    tp_dec d = {0};
    err_msg err = {{0}};
    ASSERT_EQ(tp_dec_open(&d, b.data, b.len, &err), ERR_VERSION);
    ASSERT_STR_CONTAINS(err.msg, "newer");
    char want[64];
    snprintf(want, sizeof want, "version %d", TP_BATCH_VERSION + 1);
    ASSERT_STR_CONTAINS(err.msg, want);
    ASSERT_EQ(tp_dec_next_record(&d), NULL);
    tp_dec_free(&d);
    tp_buf_free(&b);
}

/* Batches of version 1 (before TP_K_MODULE) still decode: old traces stay readable. */
TEST(older_version_still_read) {
    tp_buf b = {0};
    make_synth_batch(&b, 10, 1);
    tp_batch_hdr h;
    memcpy(&h, b.data, sizeof h);
    h.version = 1;
    memcpy(b.data, &h, sizeof h);
    tp_batch_seal_header(b.data);
    tp_dec d = {0};
    err_msg err = {{0}};
    ASSERT_OK(tp_dec_open(&d, b.data, b.len, &err));
    ASSERT_EQ(d.hdr.version, 1);
    size_t n = 0;
    while (tp_dec_next_record(&d) != NULL)
        n++;
    ASSERT(n >= 10);
    tp_dec_free(&d);
    tp_buf_free(&b);
}

/* A module's build id travels whole; one longer than TP_BUILD_ID_MAX is refused. */
TEST(module_record_round_trip_and_bounds) {
    tp_enc *e = tp_enc_new(NULL);
    tp_module m = {.kind = TP_K_MODULE, .device = TP_NO_DEVICE, .path = tp_enc_intern_cstr(e, "/usr/lib/libx.so"),
                   .build_id_len = 20};
    for (int i = 0; i < 20; i++)
        m.build_id[i] = (uint8_t)(0xa0 + i);
    ASSERT_OK(tp_enc_add(e, &m));
    tp_buf b = {0};
    ASSERT_OK(tp_enc_finish(e, &b));
    tp_dec d = {0};
    err_msg err = {{0}};
    ASSERT_OK(tp_dec_open(&d, b.data, b.len, &err));
    const tp_record *r = tp_dec_next_record(&d);
    ASSERT_NOT_NULL(r);
    ASSERT_EQ(r->head.kind, TP_K_MODULE);
    ASSERT_EQ(r->module.build_id_len, 20);
    ASSERT(memcmp(r->module.build_id, m.build_id, 20) == 0);
    ASSERT_STR_EQ(tp_kind_name(TP_K_MODULE), "module");
    tp_dec_free(&d);

    m.build_id_len = TP_BUILD_ID_MAX + 1;
    ASSERT_OK(tp_enc_add(e, &m));
    ASSERT_OK(tp_enc_finish(e, &b));
    memset(&d, 0, sizeof d);
    ASSERT_EQ(tp_dec_open(&d, b.data, b.len, &err), ERR_MALFORMED);
    ASSERT_STR_CONTAINS(err.msg, "build id of 33 bytes");
    tp_dec_free(&d);
    tp_buf_free(&b);
    tp_enc_destroy(&e);
}

TEST(hostclock_record_round_trip_and_bounds) {
    tp_enc *e = tp_enc_new(&(tp_enc_opts){.producer = TP_PRODUCER_NOTES});
    tp_hostclock h = {.kind = TP_K_HOSTCLOCK, .device = TP_NO_DEVICE, .host = tp_enc_intern_cstr(e, "node-7"),
                      .offset_ns = -1234567890123LL, .uncertainty_ns = 42, .measured_ns = 1700000000000000000ull};
    ASSERT_OK(tp_enc_add(e, &h));
    tp_buf b = {0};
    ASSERT_OK(tp_enc_finish_flags(e, TP_BF_SYNTHETIC, &b));
    tp_dec d = {0};
    err_msg err = {{0}};
    ASSERT_OK(tp_dec_open(&d, b.data, b.len, &err));
    ASSERT_EQ(d.hdr.version, 3);
    ASSERT_UEQ(d.hdr.producer, TP_PRODUCER_NOTES);
    ASSERT_EQ(d.hdr.n_events, 0); /* notes, not events */
    const tp_record *r = tp_dec_next_record(&d);
    ASSERT_NOT_NULL(r);
    ASSERT_EQ(r->head.kind, TP_K_HOSTCLOCK);
    ASSERT_EQ(r->hostclock.offset_ns, -1234567890123LL);
    ASSERT_UEQ(r->hostclock.uncertainty_ns, 42);
    ASSERT_STR_EQ(tp_kind_name(TP_K_HOSTCLOCK), "hostclock");
    tp_dec_free(&d);

    h.host = 0;
    ASSERT_OK(tp_enc_add(e, &h));
    ASSERT_OK(tp_enc_finish(e, &b));
    memset(&d, 0, sizeof d);
    ASSERT_EQ(tp_dec_open(&d, b.data, b.len, &err), ERR_MALFORMED);
    ASSERT_STR_CONTAINS(err.msg, "host clock without a host");
    tp_dec_free(&d);
    tp_buf_free(&b);
    tp_enc_destroy(&e);
}

TEST(every_truncation_refused) {
    tp_buf b = {0};
    make_synth_batch(&b, 60, 2);
    tp_dec d = {0};
    err_msg err = {{0}};
    for (size_t cut = 0; cut < b.len; cut++) {
        int rc = tp_dec_open(&d, b.data, cut, &err);
        ASSERT(rc == ERR_TRUNCATED);
        ASSERT_NULL(tp_dec_next_record(&d));
    }
    ASSERT_OK(tp_dec_open(&d, b.data, b.len, &err));
    tp_dec_free(&d);
    tp_buf_free(&b);
}

TEST(every_bit_flip_refused) {
    /* Any single flipped bit is caught by a checksum or a field check; none crashes. */
    tp_buf b = {0};
    make_synth_batch(&b, 30, 4);
    tp_dec d = {0};
    err_msg err = {{0}};
    for (size_t i = 0; i < b.len * 8; i++) {
        b.data[i / 8] ^= (uint8_t)(1u << (i % 8));
        int rc = tp_dec_open(&d, b.data, b.len, &err);
        ASSERT(rc < 0);
        b.data[i / 8] ^= (uint8_t)(1u << (i % 8));
    }
    ASSERT_OK(tp_dec_open(&d, b.data, b.len, &err));
    tp_dec_free(&d);
    tp_buf_free(&b);
}

/* Re-seals a hand-edited payload so that the checks behind the checksums are what refuses it. */
static void reseal(tp_buf *b) {
    tp_batch_hdr h;
    memcpy(&h, b->data, sizeof h);
    h.payload_crc = tp_crc32(0, b->data + TP_BATCH_HDR_SIZE, h.stored_size);
    memcpy(b->data, &h, sizeof h);
    tp_batch_seal_header(b->data);
}

static int open_edited(tp_record *recs, size_t n, void (*edit)(tp_buf *), err_msg *err) {
    tp_enc *enc = tp_enc_new(NULL);
    for (size_t i = 0; i < n; i++)
        ASSERT_OK(tp_enc_add(enc, &recs[i]));
    tp_buf b = {0};
    ASSERT_OK(tp_enc_finish(enc, &b));
    edit(&b);
    reseal(&b);
    tp_dec d = {0};
    int rc = tp_dec_open(&d, b.data, b.len, err);
    tp_dec_free(&d);
    tp_buf_free(&b);
    tp_enc_destroy(&enc);
    return rc;
}

static void edit_kind(tp_buf *b) { b->data[TP_BATCH_HDR_SIZE] = 15; }
static void edit_copy_kind(tp_buf *b) { b->data[TP_BATCH_HDR_SIZE + offsetof(tp_memcpy, copy_kind)] = 11; }
static void edit_flags(tp_buf *b) { b->data[TP_BATCH_HDR_SIZE + 1] = 0x80; }
static void edit_reverse(tp_buf *b) {
    uint64_t end = 1;
    memcpy(b->data + TP_BATCH_HDR_SIZE + offsetof(tp_memcpy, end), &end, 8);
}
static void edit_count(tp_buf *b) {
    tp_batch_hdr h;
    memcpy(&h, b->data, sizeof h);
    h.n_events = 0;
    memcpy(b->data, &h, sizeof h);
}

TEST(invalid_fields_refused_with_reason) {
    tp_memcpy m = {.kind = TP_K_MEMCPY, .start = 10, .end = 20, .copy_kind = TP_COPY_DTOH,
                   .src_kind = TP_MEM_DEVICE, .dst_kind = TP_MEM_PAGEABLE};
    tp_record r;
    memset(&r, 0, sizeof r);
    memcpy(&r, &m, sizeof m);
    err_msg err = {{0}};
    ASSERT_EQ(open_edited(&r, 1, edit_kind, &err), ERR_MALFORMED);
    ASSERT_STR_CONTAINS(err.msg, "unknown kind 15");
    ASSERT_EQ(open_edited(&r, 1, edit_copy_kind, &err), ERR_MALFORMED);
    ASSERT_STR_CONTAINS(err.msg, "out of range");
    ASSERT_EQ(open_edited(&r, 1, edit_flags, &err), ERR_MALFORMED);
    ASSERT_STR_CONTAINS(err.msg, "unknown flags");
    ASSERT_EQ(open_edited(&r, 1, edit_reverse, &err), ERR_MALFORMED);
    ASSERT_STR_CONTAINS(err.msg, "ends before it starts");
    ASSERT_EQ(open_edited(&r, 1, edit_count, &err), ERR_MALFORMED);
}

TEST(garbage_is_not_a_batch) {
    uint8_t junk[200];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)(i * 37 + 11);
    tp_dec d = {0};
    err_msg err = {{0}};
    ASSERT_EQ(tp_dec_open(&d, junk, sizeof junk, &err), ERR_MALFORMED);
    ASSERT_STR_CONTAINS(err.msg, "not a synctop batch");
    ASSERT_EQ(tp_dec_open(&d, junk, 3, &err), ERR_TRUNCATED);
    ASSERT_EQ(tp_dec_open(&d, NULL, 0, &err), ERR_TRUNCATED);
    tp_dec_free(&d);
}

TEST(strtab_keeps_strings_and_refuses_bad_ids) {
    tp_strtab *t = tp_strtab_new();
    ASSERT_OK(tp_strtab_set(t, 1, "a", 1));
    ASSERT_OK(tp_strtab_set(t, (1u << 24) - 1, "last", 4));
    ASSERT_EQ(tp_strtab_set(t, 0, "zero", 4), ERR_INVAL);
    ASSERT_EQ(tp_strtab_set(t, 1u << 24, "over", 4), ERR_INVAL);
    ASSERT_OK(tp_strtab_set(t, 1, "a", 1));
    ASSERT_EQ(tp_strtab_count(t), 2);
    ASSERT_OK(tp_strtab_set(t, 1, "bb", 2)); /* a producer may reuse an id after a restart */
    uint32_t len;
    ASSERT_STR_EQ(tp_strtab_get(t, 1, &len), "bb");
    ASSERT_EQ(len, 2);
    ASSERT_EQ(tp_strtab_count(t), 2);
    ASSERT_NULL(tp_strtab_get(t, 2, &len));
    ASSERT_NULL(tp_strtab_get(t, UINT32_MAX, &len));
    tp_strtab_destroy(&t);
    tp_strtab_destroy(&t);
}

TEST(sanitize_removes_terminal_controls) {
    char out[64];
    const char evil[] = "k\x1b]0;pwned\x07\x9b" "2J\xe2\x80\xae" "x\xc3\xa9\xff\xc0\xaf\xe6\x97\xa5";
    size_t used = 0;
    size_t n = tp_sanitize(out, sizeof out, evil, sizeof evil - 1, &used);
    ASSERT_EQ(used, sizeof evil - 1);
    ASSERT_STR_EQ(out, "k?]0;pwned??2J?x\xc3\xa9???\xe6\x97\xa5");
    ASSERT_EQ(n, strlen(out));
    /* a full destination stops between characters */
    n = tp_sanitize(out, 4, "\xc3\xa9\xc3\xa9", 4, &used);
    ASSERT_EQ(n, 2);
    ASSERT_EQ(used, 2);
    ASSERT_STR_EQ(out, "\xc3\xa9");
}

TEST(strerror_names_every_code) {
    ASSERT_STR_EQ(err_str(0), "success");
    ASSERT_STR_EQ(err_str(ERR_VERSION), "format version newer than this synctop understands");
    ASSERT_STR_EQ(err_str(-999), "unknown error");
    for (int c = -1; c >= ERR_SECURITY; c--)
        ASSERT(strcmp(err_str(c), "unknown error") != 0);
}

/* The CRC-32 the command line hands the codec (ISA-L's) is zlib's: the standard check value, every
 * length and alignment against zlib's on the same bytes, continued in two parts, and batches sealed
 * with one open with the other. */
TEST(isal_crc32_is_zlibs_crc32) {
    static const char check[] = "123456789"; /* CRC-32's check value: 0xcbf43926 */
    tp_crc32_use(NULL);
    ASSERT_UEQ(tp_crc32(0, check, 9), 0xcbf43926u);
    ASSERT_UEQ(import_crc32(0, check, 9), 0xcbf43926u);
    ASSERT_UEQ(import_crc32(0, check, 0), 0);
    static uint8_t buf[70000];
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < sizeof buf; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
    for (size_t off = 0; off < 64; off++)
        for (size_t len = 0; len < 600; len += 1 + len / 8)
            ASSERT_UEQ(import_crc32(0, buf + off, len), tp_crc32(0, buf + off, len));
    ASSERT_UEQ(import_crc32(0, buf, sizeof buf), tp_crc32(0, buf, sizeof buf));
    ASSERT_UEQ(import_crc32(import_crc32(0, buf, 1001), buf + 1001, sizeof buf - 1001), tp_crc32(0, buf, sizeof buf));

    tp_record recs[14];
    for (int sealer = 0; sealer < 2; sealer++) {
        tp_crc32_use(sealer ? import_crc32 : NULL);
        tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 7});
        ASSERT_NOT_NULL(enc);
        size_t n = every_kind(recs, tp_enc_intern_cstr(enc, "sgemm"));
        for (size_t i = 0; i < n; i++)
            ASSERT_OK(tp_enc_add(enc, &recs[i]));
        tp_buf b = {0};
        ASSERT_OK(tp_enc_finish(enc, &b));
        tp_crc32_use(sealer ? NULL : import_crc32);
        tp_dec d = {0};
        ASSERT_OK(open_ok(&d, &b));
        ASSERT_EQ(d.hdr.n_records, (int64_t)n);
        tp_dec_free(&d);
        b.data[b.len - 1] ^= 1; /* a payload byte changed: refused by either */
        err_msg err = {{0}};
        ASSERT_EQ(tp_dec_open(&d, b.data, b.len, &err), ERR_CHECKSUM);
        tp_dec_free(&d);
        tp_buf_free(&b);
        tp_enc_destroy(&enc);
    }
    tp_crc32_use(NULL);
}
