/*
 * libFuzzer target for the batch decoder: any bytes go in, nothing may crash, leak or read out of
 * bounds, and whatever opens must iterate to its declared counts. `fuzz_decode --write-seeds DIR`
 * writes a corpus of valid batches (raw, compressed, keyframe) to start from.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synctop/codec.h"
#include "synctop/sanitize.h"
#include "seeds.h"
#include "synth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *dir = fuzz_seed_dir(*argc, *argv);
    if (dir != NULL) {
        tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 42});
        synth s;
        synth_init(&s, 42);
        tp_buf b = {0}, z = {0};
        synth_fill(&s, enc, 60);
        tp_enc_finish(enc, &b);
        tp_enc_delivered(enc, 1);
        fuzz_write_seed(dir, "raw", b.data, b.len);
        tp_batch_compress(b.data, b.len, 1, &z, NULL);
        fuzz_write_seed(dir, "zstd", z.data, z.len);
        synth_fill(&s, enc, 5);
        tp_enc_keyframe(enc);
        tp_enc_finish_flags(enc, TP_BF_END, &b);
        fuzz_write_seed(dir, "keyframe", b.data, b.len);
        tp_buf_free(&b);
        tp_buf_free(&z);
        tp_enc_destroy(&enc);
        exit(0);
    }
    return 0;
}

static void decode(const uint8_t *data, size_t size) {
    tp_dec d = {0};
    err_msg err;
    if (tp_dec_open(&d, data, size, &err) == 0) {
        tp_strtab *t = tp_strtab_new();
        uint32_t id, len, n = 0;
        const char *s;
        char clean[256];
        while (tp_dec_next_string(&d, &id, &s, &len)) {
            tp_strtab_set(t, id, s, len);
            tp_sanitize(clean, sizeof clean, s, len, NULL);
            n++;
        }
        if (n != d.hdr.n_strings)
            abort();
        const tp_record *r;
        uint32_t recs = 0;
        uint64_t sum = 0;
        while ((r = tp_dec_next_record(&d)) != NULL) {
            uint64_t a, b;
            tp_record_span(r, &a, &b);
            if (b < a && !TP_KIND_IS_META(r->head.kind))
                abort();
            sum += r->head.kind;
            recs++;
        }
        if (recs != d.hdr.n_records || (sum == 0 && recs != 0))
            abort();
        tp_buf z = {0};
        if (!(d.hdr.flags & TP_BF_ZSTD))
            tp_batch_compress(data, size, 1, &z, &err);
        tp_buf_free(&z);
        tp_strtab_destroy(&t);
    }
    tp_dec_free(&d);
}

/* Decodes the input as it is, then again with its checksums made right, so that the fuzzer reaches
 * the field checks behind them. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    decode(data, size);
    if (size >= TP_BATCH_HDR_SIZE) {
        uint8_t *copy = malloc(size);
        memcpy(copy, data, size);
        tp_batch_hdr h;
        memcpy(&h, copy, sizeof h);
        if (h.stored_size <= size - TP_BATCH_HDR_SIZE)
            h.payload_crc = tp_crc32(0, copy + TP_BATCH_HDR_SIZE, h.stored_size);
        memcpy(copy, &h, sizeof h);
        tp_batch_seal_header(copy);
        decode(copy, size);
        free(copy);
    }
    return 0;
}
