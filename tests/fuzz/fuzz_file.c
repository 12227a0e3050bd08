/*
 * libFuzzer target for the trace-file reader: the input is a whole file. Nothing may crash, leak or
 * read out of bounds; whatever opens must index, read, decode and seek without surprises, from its
 * footer chain and by a scan. `fuzz_file --write-seeds DIR` writes small valid files (index blocks,
 * keyframes, a footer; and one cut short) to start from, and hostile ones: an index that lies about
 * a batch with every checksum right, batches that inflate to many events, and producers whose ids
 * were chosen to collide in the reader's tables (hostile.h).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "synctop/file.h"
#include "hostile.h"
#include "lie.h"
#include "seeds.h"
#include "synth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static void write_seed(const char *dir, const char *name, size_t batches, size_t per, int cut) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tp_fwriter_opts o = {.flags = TP_FW_OVERWRITE, .index_every = 3, .keyframe_bytes = 600};
    tp_fwriter *w = tp_fwriter_open_opts(path, &o, NULL);
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 42});
    if (w == NULL || enc == NULL) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    synth s;
    synth_init(&s, 42);
    tp_buf b = {0};
    for (size_t i = 0; i < batches; i++) {
        synth_fill(&s, enc, per);
        tp_enc_finish_flags(enc, i + 1 == batches ? TP_BF_END : 0, &b);
        tp_enc_delivered(enc, 1);
        tp_fwriter_append(w, b.data, b.len, NULL);
    }
    tp_fwriter_close(&w, NULL);
    if (cut && truncate(path, 700) != 0)
        exit(1);
    tp_buf_free(&b);
    tp_enc_destroy(&enc);
}

static void lie_producer(tp_findex_entry *e) { e->producer ^= 0x5a5a; }

/* A file whose index entry names another producer than its batch: every checksum holds. */
static void write_lying_index_seed(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/honest.tmp", dir);
    static uint8_t file[1 << 20];
    uint8_t *out = NULL;
    size_t out_len = 0;
    /* the last index block must list a batch: some batch counts end on an empty one */
    for (size_t batches = 7; batches < 12 && out == NULL; batches++) {
        write_seed(dir, "honest.tmp", batches, 6, 0);
        FILE *f = fopen(path, "rb");
        size_t len = f ? fread(file, 1, sizeof file, f) : 0;
        if (f)
            fclose(f);
        out = trace_with_lying_index(file, len, lie_producer, &out_len);
    }
    unlink(path);
    if (out == NULL) {
        fprintf(stderr, "cannot make the lying-index seed\n");
        exit(1);
    }
    fuzz_write_seed(dir, "lying-index.trace", out, out_len);
    free(out);
}

/* A small file whose batches inflate to many events: two of 20000 identical kernels. */
static void write_bomb_seed(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/bomb.trace", dir);
    tp_fwriter *w = tp_fwriter_open(path, TP_FW_OVERWRITE, NULL);
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 5});
    if (w == NULL || enc == NULL)
        exit(1);
    tp_kernel k = {.kind = TP_K_KERNEL, .device = 0, .stream = 7, .start = 1000, .end = 2000, .correlation = 1};
    tp_buf b = {0};
    for (int batch = 0; batch < 2; batch++) {
        for (int i = 0; i < 20000; i++)
            tp_enc_add(enc, &k);
        tp_enc_finish_flags(enc, batch ? TP_BF_END : 0, &b);
        tp_enc_delivered(enc, 1);
        tp_fwriter_append(w, b.data, b.len, NULL);
    }
    tp_fwriter_close(&w, NULL);
    tp_buf_free(&b);
    tp_enc_destroy(&enc);
}

static int memfd = -1;
static char memfd_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *dir = fuzz_seed_dir(*argc, *argv);
    if (dir != NULL) {
        write_seed(dir, "small.trace", 8, 6, 0);
        write_seed(dir, "one.trace", 1, 3, 0);
        write_seed(dir, "cut.trace", 8, 6, 1);
        write_seed(dir, "empty.trace", 0, 0, 0);
        write_lying_index_seed(dir);
        write_bomb_seed(dir);
        char path[4096];
        snprintf(path, sizeof path, "%s/chosen-producers.trace", dir);
        if (hostile_trace(path, 300, 1, NULL) != 0)
            exit(1);
        exit(0);
    }
    memfd = memfd_create("fuzz_file", MFD_CLOEXEC);
    if (memfd < 0) {
        perror("memfd_create");
        exit(1);
    }
    snprintf(memfd_path, sizeof memfd_path, "/proc/self/fd/%d", memfd);
    return 0;
}

static void exercise(int flags) {
    err_msg err;
    tp_freader *r = tp_freader_open_flags(memfd_path, flags, &err);
    if (r == NULL)
        return;
    tp_buf buf = {0};
    tp_dec d = {0};
    tp_strtab *t = tp_strtab_new();
    size_t n = tp_freader_count(r);
    for (size_t i = 0; i < n; i++) {
        const tp_findex_entry *e = tp_freader_entry(r, i);
        if (e == NULL || e->size < TP_BATCH_HDR_SIZE)
            abort();
        if (tp_freader_read(r, i, &buf, &err) != 0)
            continue;
        if (buf.len != e->size)
            abort();
        if (tp_dec_open(&d, buf.data, buf.len, &err) != 0)
            continue;
        tp_dec_load_strings(&d, t);
        uint32_t records = 0;
        while (tp_dec_next_record(&d) != NULL)
            records++;
        if (records != d.hdr.n_records)
            abort();
    }
    uint64_t probes[] = {0, 1, UINT64_MAX};
    for (size_t p = 0; p < sizeof probes / sizeof probes[0]; p++) {
        size_t k = 0, i = tp_freader_seek(r, probes[p], &k);
        if (i > n || (i < n && k > i))
            abort();
    }
    if (n) {
        size_t k = 0, i = tp_freader_seek(r, tp_freader_entry(r, n / 2)->t_max, &k);
        if (i > n / 2 || k > i)
            abort();
    }
    for (size_t i = 0; i < tp_freader_problem_count(r); i++)
        if (memchr(tp_freader_problem(r, i)->what, '\0', sizeof tp_freader_problem(r, i)->what) == NULL)
            abort();
    tp_strtab_destroy(&t);
    tp_dec_free(&d);
    tp_buf_free(&buf);
    tp_freader_close(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (ftruncate(memfd, 0) != 0 || (size && pwrite(memfd, data, size, 0) != (ssize_t)size))
        abort();
    exercise(0);
    exercise(TP_FR_SCAN);
    return 0;
}
