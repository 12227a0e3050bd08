/*
 * Trace files (file.h): exact round trips, cuts at every offset, damage in the middle, the footer
 * index against a scan, seeking from keyframes, versioning and the writer's refusals.
 *
 * The files are written from the synthetic stream (synth.h) and checked against the same stream
 * regenerated from its seed, batch by batch and record by record.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "synctop/file.h"
#include "synth.h"
#include "lie.h"
#include "task.h"

#define PRODUCER(seed) (0x5EED000000000000ull | (seed))

/* ---- helpers ---- */

typedef struct gen {
    synth s;
    tp_enc *enc;
    tp_buf buf;
    size_t i;
    size_t per; /* mean events per batch */
} gen;

static void gen_init(gen *g, uint64_t seed, size_t per) {
    memset(g, 0, sizeof *g);
    synth_init(&g->s, seed);
    g->enc = tp_enc_new(&(tp_enc_opts){.producer = PRODUCER(seed)});
    ASSERT_NOT_NULL(g->enc);
    g->per = per;
}

/* The next batch of the stream: sizes vary from batch to batch, deterministically. */
static const tp_buf *gen_next(gen *g) {
    size_t n = g->per / 2 + (g->i * 7919u) % (g->per + 1);
    g->i++;
    synth_fill(&g->s, g->enc, n);
    ASSERT_OK(tp_enc_finish(g->enc, &g->buf));
    tp_enc_delivered(g->enc, 1);
    return &g->buf;
}

static void gen_free(gen *g) {
    tp_enc_destroy(&g->enc);
    tp_buf_free(&g->buf);
}

static void write_file(const char *path, uint64_t seed, size_t n_batches, size_t per, const tp_fwriter_opts *o,
                       tp_fwriter_stats *stats) {
    err_msg err = {{0}};
    tp_fwriter *w = tp_fwriter_open_opts(path, o, &err);
    if (w == NULL)
        TASK_FAIL_("tp_fwriter_open_opts: %s", err.msg);
    gen g;
    gen_init(&g, seed, per);
    for (size_t i = 0; i < n_batches; i++) {
        const tp_buf *b = gen_next(&g);
        int rc = tp_fwriter_append(w, b->data, b->len, &err);
        if (rc)
            TASK_FAIL_("append %zu: %s", i, err.msg);
    }
    if (stats)
        tp_fwriter_stats_get(w, stats);
    gen_free(&g);
    int rc = tp_fwriter_close(&w, &err);
    if (rc)
        TASK_FAIL_("close: %s", err.msg);
    ASSERT_NULL(w);
}

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    ASSERT_NOT_NULL(f);
    ASSERT_OK(fseek(f, 0, SEEK_END));
    long n = ftell(f);
    ASSERT_GE(n, 0);
    rewind(f);
    uint8_t *p = malloc((size_t)n + 1);
    ASSERT_NOT_NULL(p);
    ASSERT_EQ(fread(p, 1, (size_t)n, f), n);
    fclose(f);
    *len = (size_t)n;
    return p;
}

static void spit(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    ASSERT_NOT_NULL(f);
    ASSERT_EQ(fwrite(data, 1, len, f), len);
    ASSERT_OK(fclose(f));
}

static tp_freader *open_ok(const char *path, int flags) {
    err_msg err = {{0}};
    tp_freader *r = tp_freader_open_flags(path, flags, &err);
    if (r == NULL)
        TASK_FAIL_("tp_freader_open: %s", err.msg);
    return r;
}

/* Where each batch and index block of a whole file ends, walking its headers (not the reader). */
static size_t unit_ends(const uint8_t *file, size_t len, uint64_t *ends, size_t max) {
    size_t n = 0;
    uint64_t off = TP_FILE_HDR_SIZE;
    ends[n++] = off;
    while (off + TP_BATCH_HDR_SIZE <= len) {
        tp_batch_hdr h;
        if (tp_batch_check_header(file + off, len - off, &h, NULL) != 0)
            break; /* the footer */
        off += tp_batch_size(&h);
        ASSERT_LT(n, max);
        ends[n++] = off;
    }
    return n;
}

static int entry_eq(const tp_findex_entry *a, const tp_findex_entry *b) {
    return a->offset == b->offset && a->producer == b->producer && a->seq == b->seq && a->t_min == b->t_min &&
           a->t_max == b->t_max && a->size == b->size && a->n_events == b->n_events && a->flags == b->flags;
}

static int has_problem_at(const tp_freader *r, uint64_t off) {
    for (size_t i = 0; i < tp_freader_problem_count(r); i++)
        if (tp_freader_problem(r, i)->offset == off)
            return 1;
    return 0;
}

/* The string ids a record refers to. */
static size_t names_of(const tp_record *r, uint32_t ids[3]) {
    switch (r->head.kind) {
    case TP_K_KERNEL: ids[0] = r->kernel.name; return 1;
    case TP_K_API: ids[0] = r->api.name; return 1;
    case TP_K_NVTX: ids[0] = r->nvtx.name; ids[1] = r->nvtx.domain; return 2;
    case TP_K_PROCESS: ids[0] = r->process.host; ids[1] = r->process.cmdline; return 2;
    case TP_K_DEVICE: ids[0] = r->device.name; return 1;
    case TP_K_THREAD: ids[0] = r->thread.name; return 1;
    case TP_K_FRAME: ids[0] = r->frame.file; ids[1] = r->frame.func; ids[2] = r->frame.module; return 3;
    default: return 0;
    }
}

static const char *name_or_null(const tp_strtab *t, uint32_t id) { return id ? tp_strtab_get(t, id, NULL) : ""; }

/* Reads every batch of r and checks it against the regenerated stream: headers, payloads, every
 * record, and every name resolved to the same text. Returns the producer batches seen. */
static size_t check_against_stream(tp_freader *r, uint64_t seed, size_t per) {
    err_msg err = {{0}};
    gen g;
    gen_init(&g, seed, per);
    tp_dec df = {0}, dg = {0};
    tp_strtab *sf = tp_strtab_new(), *sg = tp_strtab_new();
    tp_buf buf = {0};
    size_t seen = 0, names = 0;
    for (size_t i = 0; i < tp_freader_count(r); i++) {
        const tp_findex_entry *e = tp_freader_entry(r, i);
        if (tp_freader_read(r, i, &buf, &err) != 0)
            TASK_FAIL_("read %zu: %s", i, err.msg);
        if (tp_dec_open(&df, buf.data, buf.len, &err) != 0)
            TASK_FAIL_("decode %zu: %s", i, err.msg);
        ASSERT_UEQ(df.hdr.producer, PRODUCER(seed));
        if (e->flags & TP_BF_SYNTHETIC) {
            ASSERT(e->flags & TP_BF_KEYFRAME);
            ASSERT_EQ(df.hdr.n_events, 0);
            continue;
        }
        const tp_buf *b = gen_next(&g);
        seen++;
        ASSERT_OK(tp_dec_open(&dg, b->data, b->len, NULL));
        ASSERT_UEQ(df.hdr.seq, dg.hdr.seq);
        ASSERT_EQ(df.hdr.n_strings, dg.hdr.n_strings);
        ASSERT_EQ(df.hdr.n_records, dg.hdr.n_records);
        ASSERT_EQ(df.hdr.n_events, dg.hdr.n_events);
        ASSERT_UEQ(df.hdr.t_min, dg.hdr.t_min);
        ASSERT_UEQ(df.hdr.t_max, dg.hdr.t_max);
        ASSERT_EQ(df.hdr.flags & ~(uint32_t)TP_BF_ZSTD, dg.hdr.flags);
        ASSERT_EQ(df.payload_len, dg.payload_len);
        ASSERT_MEM_EQ(df.payload, dg.payload, df.payload_len);
        ASSERT_OK(tp_dec_load_strings(&df, sf));
        ASSERT_OK(tp_dec_load_strings(&dg, sg));
        const tp_record *x, *y;
        while ((x = tp_dec_next_record(&df)) != NULL) {
            y = tp_dec_next_record(&dg);
            ASSERT_NOT_NULL(y);
            ASSERT_EQ(x->head.kind, y->head.kind);
            ASSERT_MEM_EQ(x, y, tp_kind_size(x->head.kind));
            uint32_t ids[3];
            size_t n = names_of(x, ids);
            for (size_t k = 0; k < n; k++) {
                ASSERT_NOT_NULL(name_or_null(sf, ids[k]));
                ASSERT_STR_EQ(name_or_null(sf, ids[k]), name_or_null(sg, ids[k]));
                names += ids[k] != 0;
            }
        }
        ASSERT_NULL(tp_dec_next_record(&dg));
    }
    ASSERT_GT(names, 0);
    tp_buf_free(&buf);
    tp_dec_free(&df);
    tp_dec_free(&dg);
    tp_strtab_destroy(&sf);
    tp_strtab_destroy(&sg);
    gen_free(&g);
    return seen;
}

/* ---- round trip ---- */

TEST(roundtrip_exact_content) {
    const char *path = task_path("rt.trace");
    tp_fwriter_opts o = {.index_every = 8, .keyframe_bytes = 64 << 10};
    tp_fwriter_stats st;
    write_file(path, 11, 120, 500, &o, &st);
    ASSERT_EQ(st.batches, 120);
    ASSERT_GT(st.keyframes, 0);
    ASSERT_GE(st.index_blocks, 120 / 8);
    ASSERT_EQ(st.refused, 0);
    ASSERT_EQ(st.producers, 1);
    struct stat sb;
    ASSERT_OK(stat(path, &sb));
    ASSERT_LT(st.file_bytes, (uint64_t)sb.st_size); /* close added the last index block, the footer */
    ASSERT_LT(st.file_bytes * 2, st.raw_bytes);     /* it was compressed */

    tp_freader *r = open_ok(path, 0);
    ASSERT(tp_freader_complete(r));
    ASSERT(tp_freader_indexed(r));
    ASSERT_EQ(tp_freader_problem_count(r), 0);
    ASSERT_EQ(tp_freader_count(r), 120 + st.keyframes);
    ASSERT_EQ(tp_freader_index_blocks(r), st.index_blocks + 1);
    ASSERT_UEQ(tp_freader_size(r), (uint64_t)sb.st_size);
    ASSERT_GT(tp_freader_created(r), 1600000000ull * 1000000000ull);
    uint64_t events = 0;
    for (size_t i = 0; i < tp_freader_count(r); i++)
        events += tp_freader_entry(r, i)->n_events;
    ASSERT_UEQ(events, st.events);
    ASSERT_EQ(check_against_stream(r, 11, 500), 120);
    tp_freader_close(&r);
    ASSERT_NULL(r);
    tp_freader_close(&r); /* twice is fine */
}

/* A released reader holds no descriptor, reads on as before from the same file opened again by
 * path, and refuses a file put in its place since (another inode) or one gone, saying which. */
TEST(a_released_reader_opens_its_file_again_and_only_that_file) {
    const char *path = task_path("rel.trace"), *other = task_path("rel-other.trace");
    tp_fwriter_opts o = {.index_every = 8, .keyframe_bytes = 64 << 10};
    tp_fwriter_stats st;
    write_file(path, 11, 40, 500, &o, &st);
    write_file(other, 11, 40, 500, &o, &st);
    tp_freader *r = open_ok(path, 0);
    int fds_before = 0, fds_released = 0;
    for (int fd = 0; fd < 1024; fd++)
        fds_before += fcntl(fd, F_GETFD) != -1;
    ASSERT_EQ(tp_freader_release(r), 1);
    for (int fd = 0; fd < 1024; fd++)
        fds_released += fcntl(fd, F_GETFD) != -1;
    ASSERT_EQ(fds_released, fds_before - 1);
    ASSERT_EQ(check_against_stream(r, 11, 500), 40); /* opened again as it is read */
    ASSERT_EQ(tp_freader_release(r), 1);
    ASSERT_OK(rename(other, path)); /* the same name, another file */
    tp_buf b = {0};
    err_msg err = {{0}};
    ASSERT_EQ(tp_freader_read(r, 0, &b, &err), ERR_IO);
    ASSERT_STR_CONTAINS(err.msg, "rel.trace: replaced or cut short since it was opened");
    ASSERT_OK(unlink(path));
    ASSERT_EQ(tp_freader_reacquire(r, &err), ERR_IO);
    ASSERT_STR_CONTAINS(err.msg, "rel.trace: cannot open again");
    tp_buf_free(&b);
    tp_freader_close(&r);
    /* standard input is not found again by name: kept */
    write_file(path, 11, 4, 50, &o, &st);
    int fd = open(path, O_RDONLY);
    ASSERT(fd >= 0);
    tp_freader *in = tp_freader_open_fd(fd, "/dev/stdin", 0, &err);
    ASSERT_NOT_NULL(in);
    ASSERT_EQ(tp_freader_release(in), 0);
    ASSERT_OK(tp_freader_read(in, 0, &b, &err));
    tp_buf_free(&b);
    tp_freader_close(&in);
}

TEST(empty_trace_opens_complete) {
    const char *path = task_path("empty.trace");
    err_msg err = {{0}};
    tp_fwriter *w = tp_fwriter_open(path, 0, &err);
    ASSERT_NOT_NULL(w);
    ASSERT_OK(tp_fwriter_close(&w, &err));
    ASSERT_OK(tp_fwriter_close(&w, &err)); /* twice is fine */
    tp_freader *r = open_ok(path, 0);
    ASSERT_EQ(tp_freader_count(r), 0);
    ASSERT(tp_freader_complete(r));
    ASSERT(tp_freader_indexed(r));
    ASSERT_EQ(tp_freader_problem_count(r), 0);
    size_t k = 99;
    ASSERT_EQ(tp_freader_seek(r, 12345, &k), 0);
    ASSERT_EQ(k, 0);
    tp_buf buf = {0};
    ASSERT_EQ(tp_freader_read(r, 0, &buf, &err), ERR_INVAL);
    tp_freader_close(&r);
}

TEST(flush_makes_batches_readable_before_close) {
    const char *path = task_path("flush.trace");
    err_msg err = {{0}};
    tp_fwriter *w = tp_fwriter_open(path, 0, &err);
    ASSERT_NOT_NULL(w);
    gen g;
    gen_init(&g, 3, 100);
    for (int i = 0; i < 5; i++) {
        const tp_buf *b = gen_next(&g);
        ASSERT_OK(tp_fwriter_append(w, b->data, b->len, &err));
    }
    ASSERT_OK(tp_fwriter_flush(w, &err));
    tp_freader *r = open_ok(path, 0); /* as a crash would leave it */
    ASSERT_EQ(tp_freader_count(r), 5);
    ASSERT(!tp_freader_complete(r));
    ASSERT_EQ(tp_freader_problem_count(r), 0);
    tp_freader_close(&r);
    gen_free(&g);
    ASSERT_OK(tp_fwriter_close(&w, &err));
}

/* ---- cut short ---- */

/* Checks a file cut at `cut` against the whole one: the batches entirely before the cut are all
 * there, byte for byte, nothing else is, and a cut inside a batch is one problem at its start. */
static void check_cut(const char *path, size_t cut, const uint8_t *orig, size_t orig_len,
                      const tp_findex_entry *ents, size_t n_ents, const uint64_t *ends, size_t n_ends,
                      tp_buf *buf) {
    err_msg err = {{0}};
    tp_freader *r = tp_freader_open(path, &err);
    if (cut < TP_FILE_HDR_SIZE) {
        if (r != NULL)
            TASK_FAIL_("a file cut at %zu opened", cut);
        ASSERT_EQ(tp_freader_open(path, &err), NULL);
        ASSERT_STR_CONTAINS(err.msg, path);
        return;
    }
    if (r == NULL)
        TASK_FAIL_("cut at %zu: %s", cut, err.msg);
    size_t want = 0;
    while (want < n_ents && ents[want].offset + ents[want].size <= cut)
        want++;
    if (tp_freader_count(r) != want)
        TASK_FAIL_("cut at %zu: %zu batches, want %zu", cut, tp_freader_count(r), want);
    for (size_t i = 0; i < want; i++) {
        const tp_findex_entry *e = tp_freader_entry(r, i);
        if (!entry_eq(e, &ents[i]))
            TASK_FAIL_("cut at %zu: entry %zu differs", cut, i);
        if (tp_freader_read(r, i, buf, &err) != 0)
            TASK_FAIL_("cut at %zu: read %zu: %s", cut, i, err.msg);
        ASSERT_EQ(buf->len, e->size);
        ASSERT_MEM_EQ(buf->data, orig + e->offset, e->size);
    }
    ASSERT_EQ(tp_freader_complete(r), cut == orig_len);
    int boundary = cut == orig_len;
    uint64_t last = 0;
    for (size_t i = 0; i < n_ends; i++) {
        if (ends[i] <= cut)
            last = ends[i];
        boundary |= ends[i] == cut;
    }
    if (boundary) {
        if (tp_freader_problem_count(r) != 0)
            TASK_FAIL_("cut at %zu (a boundary): problem %s", cut, tp_freader_problem(r, 0)->what);
    } else {
        ASSERT_EQ(tp_freader_problem_count(r), 1);
        ASSERT_UEQ(tp_freader_problem(r, 0)->offset, last);
        ASSERT_UEQ(tp_freader_problem(r, 0)->length, cut - last);
    }
    tp_freader_close(&r);
}

static void cut_test(const char *name, uint64_t seed, size_t n_batches, size_t per, const tp_fwriter_opts *o,
                     size_t n_cuts) {
    const char *path = task_path(name);
    write_file(path, seed, n_batches, per, o, NULL);
    size_t len;
    uint8_t *orig = slurp(path, &len);
    tp_freader *r = open_ok(path, 0);
    ASSERT(tp_freader_indexed(r));
    size_t n_ents = tp_freader_count(r), n_blocks = tp_freader_index_blocks(r);
    ASSERT_GT(n_blocks, 2);
    tp_findex_entry *ents = malloc(n_ents * sizeof *ents);
    for (size_t i = 0; i < n_ents; i++)
        ents[i] = *tp_freader_entry(r, i);
    tp_freader_close(&r);
    uint64_t *ends = malloc((len / TP_BATCH_HDR_SIZE + 2) * sizeof *ends);
    size_t n_ends = unit_ends(orig, len, ends, len / TP_BATCH_HDR_SIZE + 2);
    ASSERT_EQ(n_ends, 1 + n_ents + n_blocks);
    ASSERT_UEQ(ends[n_ends - 1] + 32, len);

    /* Cut a copy shorter and shorter. */
    const char *cut_path = task_path("cut.trace");
    spit(cut_path, orig, len);
    int fd = open(cut_path, O_WRONLY);
    ASSERT_GE(fd, 0);
    tp_buf buf = {0};
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull;
    size_t cut = len;
    for (size_t k = 0; k <= n_cuts && cut > 0; k++) {
        ASSERT_OK(ftruncate(fd, (off_t)cut));
        check_cut(cut_path, cut, orig, len, ents, n_ents, ends, n_ends, &buf);
        if (n_cuts >= len) {
            cut--;
        } else {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            size_t step = 1 + (size_t)((rng >> 33) % (2 * len / n_cuts));
            cut = step < cut ? cut - step : 0;
        }
    }
    if (n_cuts >= len) {
        ASSERT_OK(ftruncate(fd, 0));
        check_cut(cut_path, 0, orig, len, ents, n_ents, ends, n_ends, &buf);
    }
    close(fd);
    tp_buf_free(&buf);
    free(ends);
    free(ents);
    free(orig);
}

TEST(cut_at_every_offset_of_small_file) {
    tp_fwriter_opts o = {.index_every = 3, .keyframe_bytes = 1024};
    cut_test("small.trace", 5, 14, 12, &o, SIZE_MAX);
}

TEST(cut_at_random_offsets_of_large_file) {
    tp_fwriter_opts o = {.index_every = 16, .keyframe_bytes = 256 << 10};
    const char *path = task_path("large-probe.trace");
    tp_fwriter_stats st;
    write_file(path, 21, 420, 1000, &o, &st);
    ASSERT_GT(st.file_bytes, 3u << 20); /* several MB, so the cuts below mean something */
    cut_test("large.trace", 21, 420, 1000, &o, 200);
}

TEST(header_cut_short_is_refused_clearly) {
    const char *path = task_path("hdr.trace");
    err_msg err = {{0}};
    char head[40] = TP_FILE_MAGIC; /* 16 bytes of magic, then zeros */
    spit(path, head, sizeof head);
    ASSERT_NULL(tp_freader_open(path, &err));
    ASSERT_EQ(tp_freader_open(path, &err), NULL);
    ASSERT_STR_CONTAINS(err.msg, "cut short");
    spit(path, "", 0);
    ASSERT_NULL(tp_freader_open(path, &err));
    ASSERT_STR_CONTAINS(err.msg, "empty file");
}

/* ---- damage in the middle ---- */

typedef struct damaged {
    const char *path;
    uint8_t *orig;
    size_t len;
    tp_findex_entry *ents;
    size_t n;
} damaged;

/* A file of 60 batches, and the index of two producer batches, side by side, in its middle. */
static size_t make_damageable(damaged *d, const char *name) {
    d->path = task_path(name);
    tp_fwriter_opts o = {.index_every = 8, .keyframe_bytes = 32 << 10};
    write_file(d->path, 31, 60, 300, &o, NULL);
    d->orig = slurp(d->path, &d->len);
    tp_freader *r = open_ok(d->path, 0);
    d->n = tp_freader_count(r);
    d->ents = malloc(d->n * sizeof *d->ents);
    for (size_t i = 0; i < d->n; i++)
        d->ents[i] = *tp_freader_entry(r, i);
    tp_freader_close(&r);
    for (size_t i = d->n / 2; i + 2 < d->n; i++)
        if (d->ents[i].offset + d->ents[i].size == d->ents[i + 1].offset &&
            d->ents[i + 1].offset + d->ents[i + 1].size == d->ents[i + 2].offset &&
            !(d->ents[i].flags & TP_BF_SYNTHETIC) && !(d->ents[i + 1].flags & TP_BF_SYNTHETIC))
            return i;
    TASK_FAIL_("no two adjacent batches");
}

/* Opens the damaged file (from its footer or by a scan) and checks that every batch but the
 * damaged ones reads back exactly and that each damaged one is a problem at its offset. Batches in
 * `gone` must be missing from the index (a scan skipped them); those in `bad` must fail to read. */
static void check_damaged(const damaged *d, int flags, const size_t *bad, size_t n_bad, const size_t *gone,
                          size_t n_gone) {
    tp_freader *r = open_ok(d->path, flags);
    ASSERT_EQ(tp_freader_indexed(r), !(flags & TP_FR_SCAN));
    ASSERT_EQ(tp_freader_count(r), d->n - n_gone);
    tp_buf buf = {0};
    err_msg err = {{0}};
    size_t j = 0, failed = 0;
    for (size_t i = 0; i < d->n; i++) {
        int is_gone = 0, is_bad = 0;
        for (size_t k = 0; k < n_gone; k++)
            is_gone |= gone[k] == i;
        for (size_t k = 0; k < n_bad; k++)
            is_bad |= bad[k] == i;
        if (is_gone) {
            ASSERT(has_problem_at(r, d->ents[i].offset));
            continue;
        }
        ASSERT(entry_eq(tp_freader_entry(r, j), &d->ents[i]));
        int rc = tp_freader_read(r, j, &buf, &err);
        if (is_bad) {
            ASSERT_NE(rc, 0);
            ASSERT(rc == ERR_CHECKSUM || rc == ERR_MALFORMED);
            char where[64];
            snprintf(where, sizeof where, "offset %llu", (unsigned long long)d->ents[i].offset);
            ASSERT_STR_CONTAINS(err.msg, where);
            ASSERT(has_problem_at(r, d->ents[i].offset));
            failed++;
        } else {
            if (rc != 0)
                TASK_FAIL_("batch %zu: %s", i, err.msg);
            ASSERT_MEM_EQ(buf.data, d->orig + d->ents[i].offset, buf.len);
        }
        j++;
    }
    ASSERT_EQ(failed, n_bad);
    ASSERT_EQ(tp_freader_problem_count(r), n_bad + n_gone);
    tp_buf_free(&buf);
    tp_freader_close(&r);
}

static void damaged_free(damaged *d) {
    free(d->orig);
    free(d->ents);
}

TEST(damaged_payload_is_reported_and_skipped) {
    damaged d;
    size_t i = make_damageable(&d, "payload.trace");
    uint8_t *copy = malloc(d.len);
    memcpy(copy, d.orig, d.len);
    copy[d.ents[i].offset + TP_BATCH_HDR_SIZE + (d.ents[i].size - TP_BATCH_HDR_SIZE) / 2] ^= 0x5A;
    spit(d.path, copy, d.len);
    check_damaged(&d, 0, &i, 1, NULL, 0);
    check_damaged(&d, TP_FR_SCAN, &i, 1, NULL, 0);
    free(copy);
    damaged_free(&d);
}

TEST(damaged_header_is_reported_and_skipped) {
    damaged d;
    size_t i = make_damageable(&d, "header.trace");
    uint8_t *copy = malloc(d.len);
    memcpy(copy, d.orig, d.len);
    copy[d.ents[i].offset + 40] ^= 0x01; /* the seq */
    spit(d.path, copy, d.len);
    check_damaged(&d, 0, &i, 1, NULL, 0);          /* the footer index still knows where it is */
    check_damaged(&d, TP_FR_SCAN, NULL, 0, &i, 1); /* a scan skips it and finds the next */
    tp_freader *r = open_ok(d.path, TP_FR_SCAN);
    ASSERT_EQ(tp_freader_problem_count(r), 1);
    ASSERT_UEQ(tp_freader_problem(r, 0)->offset, d.ents[i].offset);
    ASSERT_UEQ(tp_freader_problem(r, 0)->length, d.ents[i].size);
    ASSERT_STR_CONTAINS(tp_freader_problem(r, 0)->what, "checksum");
    tp_freader_close(&r);
    free(copy);
    damaged_free(&d);
}

TEST(damaged_stretch_over_two_batches_is_reported_and_skipped) {
    damaged d;
    size_t i = make_damageable(&d, "stretch.trace");
    uint8_t *copy = malloc(d.len);
    memcpy(copy, d.orig, d.len);
    uint64_t from = d.ents[i].offset + TP_BATCH_HDR_SIZE + 5;
    uint64_t to = d.ents[i + 1].offset + TP_BATCH_HDR_SIZE + 5; /* past the second header */
    memset(copy + from, 0xA5, to - from);
    spit(d.path, copy, d.len);
    size_t both[2] = {i, i + 1};
    check_damaged(&d, 0, both, 2, NULL, 0);
    size_t second = i + 1;
    check_damaged(&d, TP_FR_SCAN, &i, 1, &second, 1);
    free(copy);
    damaged_free(&d);
}

TEST(damaged_index_block_falls_back_to_a_scan) {
    damaged d;
    make_damageable(&d, "index.trace");
    uint64_t ends[4096];
    size_t n_ends = unit_ends(d.orig, d.len, ends, 4096);
    /* The first unit that is no entry is an index block: damage its payload. */
    size_t j = 0;
    uint64_t block = 0;
    for (size_t k = 0; k + 1 < n_ends; k++) {
        if (j < d.n && d.ents[j].offset == ends[k]) {
            j++;
            continue;
        }
        block = ends[k];
        break;
    }
    ASSERT_GT(block, 0);
    uint8_t *copy = malloc(d.len);
    memcpy(copy, d.orig, d.len);
    copy[block + TP_BATCH_HDR_SIZE + 3] ^= 0xFF;
    spit(d.path, copy, d.len);
    tp_freader *r = open_ok(d.path, 0);
    ASSERT(tp_freader_complete(r));
    ASSERT(!tp_freader_indexed(r));
    ASSERT_EQ(tp_freader_problem_count(r), 1);
    ASSERT_STR_CONTAINS(tp_freader_problem(r, 0)->what, "index damaged");
    ASSERT_EQ(tp_freader_count(r), d.n);
    for (size_t i = 0; i < d.n; i++)
        ASSERT(entry_eq(tp_freader_entry(r, i), &d.ents[i]));
    tp_freader_close(&r);
    free(copy);
    damaged_free(&d);
}

TEST(garbage_between_batches_is_skipped) {
    /* Garbage that holds a batch magic but no valid header: the scan must step over it. */
    const char *path = task_path("garbage.trace");
    tp_fwriter_opts o = {.index_every = 1000};
    write_file(path, 41, 6, 50, &o, NULL);
    size_t len;
    uint8_t *orig = slurp(path, &len);
    tp_freader *r = open_ok(path, 0);
    size_t n = tp_freader_count(r);
    ASSERT_EQ(n, 6);
    tp_findex_entry e3 = *tp_freader_entry(r, 3);
    tp_freader_close(&r);
    uint8_t junk[300];
    for (size_t k = 0; k < sizeof junk; k++)
        junk[k] = (uint8_t)(k * 37);
    memcpy(junk + 100, "STB1", 4);
    size_t cut = len - 32; /* no footer: the garbage follows the final index block */
    uint8_t *copy = malloc(e3.offset + sizeof junk + (cut - e3.offset));
    memcpy(copy, orig, e3.offset);
    memcpy(copy + e3.offset, junk, sizeof junk);
    memcpy(copy + e3.offset + sizeof junk, orig + e3.offset, cut - e3.offset);
    spit(path, copy, cut + sizeof junk);
    r = open_ok(path, 0);
    ASSERT(!tp_freader_complete(r));
    ASSERT_EQ(tp_freader_count(r), 6);
    ASSERT_EQ(tp_freader_problem_count(r), 1);
    ASSERT_UEQ(tp_freader_problem(r, 0)->offset, e3.offset);
    ASSERT_UEQ(tp_freader_problem(r, 0)->length, sizeof junk);
    tp_buf buf = {0};
    err_msg err;
    for (size_t i = 0; i < 6; i++)
        ASSERT_OK(tp_freader_read(r, i, &buf, &err));
    tp_buf_free(&buf);
    tp_freader_close(&r);
    free(copy);
    free(orig);
}

/* ---- index ---- */

TEST(footer_index_equals_scan_index) {
    const char *path = task_path("idx.trace");
    tp_fwriter_opts o = {.index_every = 7, .keyframe_bytes = 16 << 10};
    write_file(path, 51, 150, 200, &o, NULL);
    tp_freader *a = open_ok(path, 0), *b = open_ok(path, TP_FR_SCAN);
    ASSERT(tp_freader_indexed(a));
    ASSERT(!tp_freader_indexed(b));
    ASSERT(tp_freader_complete(a));
    ASSERT(tp_freader_complete(b)); /* the footer is seen, its chain not used */
    ASSERT_EQ(tp_freader_problem_count(a), 0);
    ASSERT_EQ(tp_freader_problem_count(b), 0);
    ASSERT_GT(tp_freader_count(a), 150);
    ASSERT_EQ(tp_freader_count(a), tp_freader_count(b));
    ASSERT_EQ(tp_freader_index_blocks(a), tp_freader_index_blocks(b));
    ASSERT_GE(tp_freader_index_blocks(a), 150 / 7);
    for (size_t i = 0; i < tp_freader_count(a); i++)
        if (!entry_eq(tp_freader_entry(a, i), tp_freader_entry(b, i)))
            TASK_FAIL_("entry %zu differs", i);
    tp_freader_close(&a);
    tp_freader_close(&b);
}

/* Rewrites the first entry of a file's last index block with lie(), checksums resealed, so that
 * only the entry's contents are wrong; then the reader must see it, scan instead, and read every
 * batch as the honest index listed it. */
static void index_lie_is_not_trusted(const char *name, void (*lie)(tp_findex_entry *)) {
    const char *path = task_path(name);
    tp_fwriter_opts o = {.index_every = 5};
    write_file(path, 53, 12, 100, &o, NULL);
    size_t len;
    uint8_t *b = slurp(path, &len);
    tp_freader *r = open_ok(path, 0);
    size_t n = tp_freader_count(r);
    tp_findex_entry *ents = malloc(n * sizeof *ents);
    for (size_t i = 0; i < n; i++)
        ents[i] = *tp_freader_entry(r, i);
    tp_freader_close(&r);
    size_t out_len;
    uint8_t *out = trace_with_lying_index(b, len, lie, &out_len);
    ASSERT_NOT_NULL(out);
    spit(path, out, out_len);
    r = open_ok(path, 0);
    ASSERT(tp_freader_complete(r));
    ASSERT(!tp_freader_indexed(r));
    ASSERT_EQ(tp_freader_problem_count(r), 1);
    ASSERT_STR_CONTAINS(tp_freader_problem(r, 0)->what, "index damaged");
    ASSERT_EQ(tp_freader_count(r), n);
    tp_buf buf = {0};
    err_msg err;
    for (size_t i = 0; i < n; i++) {
        ASSERT(entry_eq(tp_freader_entry(r, i), &ents[i]));
        ASSERT_OK(tp_freader_read(r, i, &buf, &err));
    }
    ASSERT_EQ(tp_freader_problem_count(r), 1); /* no batch was dropped */
    tp_buf_free(&buf);
    tp_freader_close(&r);
    free(out);
    free(ents);
    free(b);
}

static void lie_offset(tp_findex_entry *e) { e->offset += 1; }
static void lie_producer(tp_findex_entry *e) { e->producer ^= 0x5a5a; }
static void lie_time(tp_findex_entry *e) { e->t_max += 1000000000ull; }

/* An index block whose checksums hold but whose entry points one byte off: batches and blocks no
 * longer tile the file. */
TEST(index_that_lies_about_the_layout_is_not_trusted) {
    index_lie_is_not_trusted("lie.trace", lie_offset);
}

/* The layout holds but an entry names another producer, or another time span, than its batch's
 * own header: the headers are the truth. */
TEST(index_that_lies_about_a_batch_is_not_trusted) {
    index_lie_is_not_trusted("lie-producer.trace", lie_producer);
    index_lie_is_not_trusted("lie-time.trace", lie_time);
}

/* ---- seeking ---- */

TEST(seek_by_time_and_decode_from_keyframe) {
    const char *path = task_path("seek.trace");
    tp_fwriter_opts o = {.index_every = 8, .keyframe_bytes = 24 << 10};
    write_file(path, 61, 200, 300, &o, NULL);
    tp_freader *r = open_ok(path, 0);
    size_t n = tp_freader_count(r);
    uint64_t t0 = tp_freader_entry(r, 0)->t_min, t1 = 0;
    for (size_t i = 0; i < n; i++)
        if (tp_freader_entry(r, i)->t_max > t1)
            t1 = tp_freader_entry(r, i)->t_max;
    tp_buf buf = {0};
    tp_dec d = {0};
    err_msg err = {{0}};
    size_t from_keyframe = 0;
    for (int s = -1; s <= 61; s++) {
        uint64_t t = s < 0 ? 0 : s == 61 ? t1 + 1 : t0 + (t1 - t0) / 60 * (uint64_t)s;
        size_t k = 0, i = tp_freader_seek(r, t, &k);
        size_t want = 0;
        while (want < n && !(tp_freader_entry(r, want)->n_events && tp_freader_entry(r, want)->t_max >= t))
            want++;
        ASSERT_EQ(i, want);
        if (i == n) {
            ASSERT_EQ(s, 61);
            ASSERT_EQ(k, n);
            continue;
        }
        ASSERT_LE(k, i);
        const tp_findex_entry *ke = tp_freader_entry(r, k);
        ASSERT_UEQ(ke->producer, tp_freader_entry(r, i)->producer);
        if (k == 0)
            continue; /* from the start: nothing to prove */
        from_keyframe++;
        ASSERT(ke->flags & TP_BF_KEYFRAME);
        /* Decode from the keyframe only: every name in batch i must resolve. */
        tp_strtab *st = tp_strtab_new();
        int kinds[TP_K_MAX_] = {0};
        for (size_t j = k; j <= i; j++) {
            ASSERT_OK(tp_freader_read(r, j, &buf, &err));
            ASSERT_OK(tp_dec_open(&d, buf.data, buf.len, &err));
            ASSERT_OK(tp_dec_load_strings(&d, st));
            const tp_record *rec;
            size_t names = 0;
            while ((rec = tp_dec_next_record(&d)) != NULL) {
                if (j == k)
                    kinds[rec->head.kind]++;
                if (j != i)
                    continue;
                uint32_t ids[3];
                size_t nn = names_of(rec, ids);
                for (size_t q = 0; q < nn; q++) {
                    if (ids[q] == 0)
                        continue;
                    if (tp_strtab_get(st, ids[q], NULL) == NULL)
                        TASK_FAIL_("batch %zu from keyframe %zu: string %u unknown", i, k, ids[q]);
                    names++;
                }
            }
            if (j == i)
                ASSERT_GT(names, 0);
        }
        /* The keyframe carries the whole picture: one process, its device, streams, thread, and
         * both call sites with their frames. */
        ASSERT_EQ(kinds[TP_K_PROCESS], 1);
        ASSERT_EQ(kinds[TP_K_DEVICE], 1);
        ASSERT_EQ(kinds[TP_K_STREAM], 2);
        ASSERT_EQ(kinds[TP_K_THREAD], 1);
        ASSERT_EQ(kinds[TP_K_CALLSITE], 2);
        ASSERT_EQ(kinds[TP_K_FRAME], 4);
        tp_strtab_destroy(&st);
    }
    ASSERT_GT(from_keyframe, 40);
    /* Exactly at a batch's end and just after it. */
    for (size_t j = 0; j < n; j += 7) {
        for (uint64_t dt = 0; dt < 2; dt++) {
            uint64_t t = tp_freader_entry(r, j)->t_max + dt;
            size_t want = 0;
            while (want < n && !(tp_freader_entry(r, want)->n_events && tp_freader_entry(r, want)->t_max >= t))
                want++;
            ASSERT_EQ(tp_freader_seek(r, t, NULL), want);
        }
    }
    tp_dec_free(&d);
    tp_buf_free(&buf);
    tp_freader_close(&r);
}

/* A hand-made producer whose names and metadata change as it goes. */
static void append_custom(tp_fwriter *w, tp_enc *enc, int step, tp_buf *buf) {
    char name[64];
    snprintf(name, sizeof name, "kernel_of_step_%d", step);
    tp_kernel k = {.kind = TP_K_KERNEL, .stream = 1, .start = 1000u + (uint64_t)step * 10,
                   .end = 1005u + (uint64_t)step * 10, .name = tp_enc_intern_cstr(enc, name)};
    snprintf(name, sizeof name, "worker-%d", step);
    tp_thread t = {.kind = TP_K_THREAD, .device = TP_NO_DEVICE, .tid = 77, .pid = 7,
                   .name = tp_enc_intern_cstr(enc, name)};
    tp_drops dr = {.kind = TP_K_DROPS, .device = TP_NO_DEVICE, .source = TP_DROP_TRACER,
                   .ts = 1000u + (uint64_t)step * 10, .records = (uint64_t)step * 3, .batches = (uint64_t)step};
    ASSERT_OK(tp_enc_add(enc, &t));
    ASSERT_OK(tp_enc_add(enc, &k));
    ASSERT_OK(tp_enc_add(enc, &dr));
    ASSERT_OK(tp_enc_finish(enc, buf));
    tp_enc_delivered(enc, 1);
    err_msg err = {{0}};
    if (tp_fwriter_append(w, buf->data, buf->len, &err) != 0)
        TASK_FAIL_("append: %s", err.msg);
}

TEST(keyframes_per_producer_carry_latest_metadata) {
    const char *path = task_path("multi.trace");
    err_msg err = {{0}};
    tp_fwriter_opts o = {.keyframe_bytes = 4096, .index_every = 16};
    tp_fwriter *w = tp_fwriter_open_opts(path, &o, &err);
    ASSERT_NOT_NULL(w);
    gen g;
    gen_init(&g, 71, 100);
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 0xB0B});
    tp_buf buf = {0};
    for (int step = 0; step < 80; step++) {
        const tp_buf *b = gen_next(&g);
        ASSERT_OK(tp_fwriter_append(w, b->data, b->len, &err));
        append_custom(w, enc, step, &buf);
    }
    tp_fwriter_stats st;
    tp_fwriter_stats_get(w, &st);
    ASSERT_EQ(st.producers, 2);
    ASSERT_EQ(st.batches, 160);
    ASSERT_UEQ(st.dropped_records, 79 * 3); /* the latest cumulative counter, not a sum */
    ASSERT_UEQ(st.dropped_batches, 79);
    ASSERT_OK(tp_fwriter_close(&w, &err));

    tp_freader *r = open_ok(path, 0);
    tp_dec d = {0};
    size_t kf_b = 0, kf_a = 0;
    int step = -1; /* the custom producer's last step before each of its keyframes */
    for (size_t i = 0; i < tp_freader_count(r); i++) {
        const tp_findex_entry *e = tp_freader_entry(r, i);
        ASSERT_OK(tp_freader_read(r, i, &buf, &err));
        ASSERT_OK(tp_dec_open(&d, buf.data, buf.len, &err));
        if (e->producer == 0xB0B && !(e->flags & TP_BF_SYNTHETIC)) {
            step = (int)e->seq;
            continue;
        }
        if (!(e->flags & TP_BF_SYNTHETIC))
            continue;
        uint32_t id, len;
        const char *s;
        size_t n_str = 0;
        if (e->producer != 0xB0B) {
            kf_a++;
            while (tp_dec_next_string(&d, &id, &s, &len))
                ASSERT(strncmp(s, "worker-", 7) != 0 && strncmp(s, "kernel_of_step_", 15) != 0);
            continue;
        }
        kf_b++;
        ASSERT_UEQ(e->seq, (uint64_t)step); /* the state as of that producer's last batch */
        tp_strtab *t = tp_strtab_new();
        while (tp_dec_next_string(&d, &id, &s, &len)) {
            ASSERT_OK(tp_strtab_set(t, id, s, len));
            n_str++;
        }
        ASSERT_EQ(n_str, 2 * (step + 1)); /* every name so far */
        const tp_record *rec;
        size_t n_threads = 0;
        while ((rec = tp_dec_next_record(&d)) != NULL) {
            ASSERT_EQ(rec->head.kind, TP_K_THREAD); /* metadata only */
            n_threads++;
            char want[64];
            snprintf(want, sizeof want, "worker-%d", step);
            ASSERT_STR_EQ(tp_strtab_get(t, rec->thread.name, NULL), want); /* the latest, once */
        }
        ASSERT_EQ(n_threads, 1);
        tp_strtab_destroy(&t);
    }
    ASSERT_GT(kf_a, 3);
    ASSERT_GT(kf_b, 3);
    tp_dec_free(&d);
    tp_buf_free(&buf);
    tp_freader_close(&r);
    tp_enc_destroy(&enc);
    gen_free(&g);
}

/* ---- refusals ---- */

TEST(newer_version_is_refused_with_both_versions) {
    const char *path = task_path("v2.trace");
    write_file(path, 81, 3, 20, NULL, NULL);
    size_t len;
    uint8_t *b = slurp(path, &len);
    uint16_t v = TP_FILE_VERSION + 1;
    memcpy(b + 16, &v, 2);
    uint32_t crc = tp_crc32(0, b, 60);
    memcpy(b + 60, &crc, 4);
    spit(path, b, len);
    err_msg err = {{0}};
    ASSERT_NULL(tp_freader_open(path, &err));
    ASSERT_EQ(tp_freader_open(path, &err), NULL);
    char want[80];
    snprintf(want, sizeof want, "version %d is newer", TP_FILE_VERSION + 1);
    ASSERT_STR_CONTAINS(err.msg, want);
    snprintf(want, sizeof want, "(version %d)", TP_FILE_VERSION);
    ASSERT_STR_CONTAINS(err.msg, want);
    ASSERT_STR_CONTAINS(err.msg, path);
    /* Refused before its checksum is looked at: a newer format may cover other bytes. */
    b[60] ^= 0xFF;
    spit(path, b, len);
    ASSERT_NULL(tp_freader_open_flags(path, TP_FR_SCAN, &err));
    ASSERT_STR_CONTAINS(err.msg, "is newer than this synctop understands");
    free(b);
}

TEST(damaged_file_header_is_a_problem_not_a_refusal) {
    const char *path = task_path("hdrcrc.trace");
    write_file(path, 83, 4, 30, NULL, NULL);
    int fd = open(path, O_WRONLY);
    ASSERT_EQ(pwrite(fd, "\x01", 1, 50), 1); /* a reserved byte: the checksum no longer holds */
    close(fd);
    tp_freader *r = open_ok(path, 0);
    ASSERT_EQ(tp_freader_count(r), 4);
    ASSERT_EQ(tp_freader_problem_count(r), 1);
    ASSERT_UEQ(tp_freader_problem(r, 0)->offset, 0);
    ASSERT_STR_CONTAINS(tp_freader_problem(r, 0)->what, "file header checksum");
    tp_freader_close(&r);
}

TEST(garbage_is_not_a_trace_file) {
    const char *path = task_path("garbage.bin");
    char junk[500];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (char)(i * 131 + 7);
    spit(path, junk, sizeof junk);
    err_msg err = {{0}};
    ASSERT_NULL(tp_freader_open(path, &err));
    ASSERT_STR_CONTAINS(err.msg, "not a synctop trace file");
    spit(path, "hello\n", 6);
    ASSERT_NULL(tp_freader_open(path, &err));
    ASSERT_STR_CONTAINS(err.msg, "not a synctop trace file");
    ASSERT_NULL(tp_freader_open(task_tmpdir(), &err)); /* a directory */
    ASSERT_STR_CONTAINS(err.msg, "not a regular file");
    ASSERT_NULL(tp_freader_open(task_path("missing.trace"), &err));
    ASSERT_STR_CONTAINS(err.msg, "missing.trace");
}

TEST(writer_refuses_to_overwrite) {
    const char *path = task_path("exists.trace");
    spit(path, "keep me", 7);
    err_msg err = {{0}};
    tp_fwriter *w = tp_fwriter_open(path, 0, &err);
    ASSERT_NULL(w);
    ASSERT_STR_CONTAINS(err.msg, path);
    ASSERT_STR_CONTAINS(err.msg, "already exists");
    size_t len;
    uint8_t *b = slurp(path, &len);
    ASSERT_EQ(len, 7);
    ASSERT_MEM_EQ(b, "keep me", 7);
    free(b);
    w = tp_fwriter_open(path, TP_FW_OVERWRITE, &err);
    ASSERT_NOT_NULL(w);
    ASSERT_OK(tp_fwriter_close(&w, &err));
    tp_freader *r = open_ok(path, 0);
    ASSERT(tp_freader_complete(r));
    tp_freader_close(&r);
}

/* A write that fails halfway (a file size limit, as a full disk): the writer's in-file counts are
 * what a reader finds, and the file ends on a whole batch. Several buffer sizes put the failure
 * inside a buffered drain and inside a batch written straight through. */
TEST(writer_counts_what_the_file_holds_when_a_write_fails) {
    struct rlimit old;
    ASSERT_OK(getrlimit(RLIMIT_FSIZE, &old));
    void (*old_xfsz)(int) = signal(SIGXFSZ, SIG_IGN);
    const size_t buffers[] = {4096, 64 << 10, 1 << 20};
    for (size_t k = 0; k < sizeof buffers / sizeof buffers[0]; k++) {
        const char *path = task_path("limit.trace");
        unlink(path);
        rlim_t limit = 700000 + 12345 * k;
        if (old.rlim_max != RLIM_INFINITY && old.rlim_max < limit)
            TASK_SKIP("the file size limit here is already below %llu bytes", (unsigned long long)limit);
        err_msg err = {{0}};
        tp_fwriter *w = tp_fwriter_open_opts(path, &(tp_fwriter_opts){.buffer_bytes = buffers[k]}, &err);
        ASSERT_NOT_NULL(w);
        ASSERT_OK(setrlimit(RLIMIT_FSIZE, &(struct rlimit){limit, old.rlim_max}));
        gen g;
        gen_init(&g, 21, 900);
        uint64_t appended = 0, events = 0;
        int rc = 0;
        for (int i = 0; i < 100000 && rc == 0; i++) {
            const tp_buf *b = gen_next(&g);
            tp_batch_hdr h;
            memcpy(&h, b->data, sizeof h);
            if ((rc = tp_fwriter_append(w, b->data, b->len, &err)) == 0) {
                appended++;
                events += h.n_events;
            }
        }
        ASSERT_EQ(rc, ERR_IO);
        tp_fwriter_stats st;
        ASSERT_EQ(tp_fwriter_close_stats(&w, &st, &err), ERR_IO);
        ASSERT_OK(setrlimit(RLIMIT_FSIZE, &old));
        gen_free(&g);
        ASSERT_UEQ(st.batches, appended);
        ASSERT_LE(st.in_file_batches, appended);
        if (buffers[k] >= (1 << 20))
            ASSERT_LT(st.in_file_batches, appended); /* some were still in the buffer */
        tp_freader *r = open_ok(path, 0);
        uint64_t batches = 0, in_events = 0;
        for (size_t i = 0; i < tp_freader_count(r); i++) {
            const tp_findex_entry *e = tp_freader_entry(r, i);
            if (!(e->flags & TP_BF_SYNTHETIC)) {
                batches++;
                in_events += e->n_events;
            }
        }
        ASSERT_UEQ(st.in_file_batches, batches);
        ASSERT_UEQ(st.in_file_events, in_events);
        ASSERT_LE(in_events, events);
        ASSERT_UEQ(st.in_file_bytes, tp_freader_size(r));
        ASSERT_EQ(tp_freader_problem_count(r), 0);
        tp_freader_close(&r);
    }
    signal(SIGXFSZ, old_xfsz);
}

TEST(writer_refuses_malformed_batches) {
    const char *path = task_path("refuse.trace");
    err_msg err = {{0}};
    tp_fwriter *w = tp_fwriter_open(path, 0, &err);
    ASSERT_NOT_NULL(w);
    gen g;
    gen_init(&g, 91, 50);
    const tp_buf *b = gen_next(&g);
    ASSERT_OK(tp_fwriter_append(w, b->data, b->len, &err));
    b = gen_next(&g);
    uint8_t *bad = malloc(b->len + 8);
    memcpy(bad, b->data, b->len);
    bad[b->len - 1] ^= 1; /* payload checksum */
    ASSERT_EQ(tp_fwriter_append(w, bad, b->len, &err), ERR_MALFORMED);
    ASSERT_STR_CONTAINS(err.msg, "checksum");
    ASSERT_EQ(tp_fwriter_append(w, "garbage!", 8, &err), ERR_MALFORMED);
    memcpy(bad, b->data, b->len);
    ASSERT_EQ(tp_fwriter_append(w, bad, b->len + 8, &err), ERR_MALFORMED); /* bytes after it */
    ASSERT_EQ(tp_fwriter_append(w, bad, b->len - 1, &err), ERR_MALFORMED); /* cut short */
    tp_batch_hdr h;
    memcpy(&h, bad, sizeof h);
    h.flags |= TP_BF_INDEX;
    memcpy(bad, &h, sizeof h);
    tp_batch_seal_header(bad);
    ASSERT_EQ(tp_fwriter_append(w, bad, b->len, &err), ERR_MALFORMED);
    ASSERT_STR_CONTAINS(err.msg, "index block");
    ASSERT_OK(tp_fwriter_append(w, b->data, b->len, &err));
    tp_fwriter_stats st;
    tp_fwriter_stats_get(w, &st);
    ASSERT_EQ(st.refused, 5);
    ASSERT_EQ(st.batches, 2);
    ASSERT_OK(tp_fwriter_close(&w, &err));
    tp_freader *r = open_ok(path, 0);
    ASSERT_EQ(tp_freader_count(r), 2);
    ASSERT_EQ(tp_freader_problem_count(r), 0);
    ASSERT_UEQ(tp_freader_entry(r, 1)->seq, 1);
    tp_freader_close(&r);
    free(bad);
    gen_free(&g);
}

TEST(already_compressed_batches_are_stored_as_they_are) {
    const char *path = task_path("pre.trace");
    err_msg err = {{0}};
    tp_fwriter *w = tp_fwriter_open(path, 0, &err);
    ASSERT_NOT_NULL(w);
    gen g;
    gen_init(&g, 92, 400);
    const tp_buf *b = gen_next(&g);
    tp_buf z = {0};
    ASSERT_OK(tp_batch_compress(b->data, b->len, 1, &z, &err));
    ASSERT_OK(tp_fwriter_append(w, z.data, z.len, &err));
    ASSERT_OK(tp_fwriter_close(&w, &err));
    tp_freader *r = open_ok(path, 0);
    tp_buf out = {0};
    ASSERT_OK(tp_freader_read(r, 0, &out, &err));
    ASSERT_EQ(out.len, z.len);
    ASSERT_MEM_EQ(out.data, z.data, z.len);
    tp_buf_free(&out);
    tp_buf_free(&z);
    tp_freader_close(&r);
    gen_free(&g);
}

TEST(writer_memory_is_bounded_per_producer) {
    /* A producer whose strings pass the writer's bound: it is no longer tracked (no keyframes
     * that would lack names), and everything it sent is still written. */
    const char *path = task_path("big.trace");
    err_msg err = {{0}};
    tp_fwriter_opts o = {.keyframe_bytes = 1 << 20};
    tp_fwriter *w = tp_fwriter_open_opts(path, &o, &err);
    ASSERT_NOT_NULL(w);
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 0xB16});
    tp_buf buf = {0};
    char *s = malloc(60000);
    memset(s, 'x', 60000);
    int n_batches = 0;
    for (int b = 0; b < 14; b++) {
        for (int i = 0; i < 50; i++) {
            snprintf(s, 32, "%d.%d:", b, i);
            s[strlen(s)] = 'x';
            tp_kernel k = {.kind = TP_K_KERNEL, .start = 10, .end = 20, .name = tp_enc_intern(enc, s, 60000)};
            ASSERT_NE(k.name, 0);
            ASSERT_OK(tp_enc_add(enc, &k));
        }
        ASSERT_OK(tp_enc_finish(enc, &buf));
        tp_enc_delivered(enc, 1);
        ASSERT_OK(tp_fwriter_append(w, buf.data, buf.len, &err));
        n_batches++;
    }
    tp_fwriter_stats st;
    tp_fwriter_stats_get(w, &st);
    ASSERT_EQ(st.untracked, 1);
    uint64_t kf_before = st.keyframes;
    ASSERT_LE(kf_before, 11); /* 32 MiB of names: at most the batches before the bound */
    ASSERT_OK(tp_fwriter_close(&w, &err));
    tp_freader *r = open_ok(path, 0);
    size_t producer_batches = 0;
    for (size_t i = 0; i < tp_freader_count(r); i++)
        producer_batches += !(tp_freader_entry(r, i)->flags & TP_BF_SYNTHETIC);
    ASSERT_EQ(producer_batches, n_batches);
    tp_freader_close(&r);
    free(s);
    tp_buf_free(&buf);
    tp_enc_destroy(&enc);
}
