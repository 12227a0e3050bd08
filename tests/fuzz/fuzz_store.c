/*
 * libFuzzer target for everything behind the decoder: batches that decode (their checksums are
 * made right, as fuzz_decode does) but whose content is hostile — unknown stream and thread ids,
 * frames of call sites never announced, reversed or huge times, names full of escapes — go into a
 * store, through the analysis, and onto the screen at two sizes with a few keys pressed. Nothing
 * may crash, leak or read out of bounds, and no cell may hold a control character.
 *
 * The input is split into batches at every "STB1" magic, so one input can hold several batches
 * (metadata in one, events in the next). `fuzz_store --write-seeds DIR` writes realistic seeds,
 * among them one whose new lane the live bound empties before its first index, and one of long
 * events and more shapes than the bound keeps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "store.h"
#include "symbols.h"
#include "synctop/codec.h"
#include "seeds.h"
#include "synth.h"
#include "screen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *dir = fuzz_seed_dir(*argc, *argv);
    if (dir != NULL) {
        tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 7});
        synth s;
        synth_init(&s, 7);
        tp_buf one = {0}, two = {0};
        synth_fill(&s, enc, 120); /* metadata and two steps */
        tp_enc_finish(enc, &one);
        tp_enc_delivered(enc, 1);
        fuzz_write_seed(dir, "one-batch", one.data, one.len);
        synth_fill(&s, enc, 60);
        tp_enc_finish_flags(enc, TP_BF_END, &two);
        tp_buf_append(&one, two.data, two.len);
        fuzz_write_seed(dir, "two-batches", one.data, one.len);
        /* a stream whose only event, a long kernel, began before everything the bound keeps */
        uint32_t kname = tp_enc_intern_cstr(enc, "persistent");
        tp_record rec;
        for (int k = 0; k <= 600; k++) {
            memset(&rec, 0, sizeof rec);
            uint64_t t = 2000000000u + (uint64_t)k * 1000u;
            rec.kernel = (tp_kernel){.kind = TP_K_KERNEL, .device = 0, .stream = k < 600 ? 7 : 99,
                                     .start = k < 600 ? t : 1999999000u, .end = k < 600 ? t + 500 : 2100000000u,
                                     .name = kname, .grid = {1, 1, 1}, .block = {1, 1, 1}};
            tp_enc_add(enc, &rec);
        }
        tp_enc_finish(enc, &two);
        fuzz_write_seed(dir, "window-drops-a-new-lane", two.data, two.len);
        /* kernels of 4.29 s and more starting together (their durations held in their shapes), then
         * more shapes (a grid each) than the bound's events hold twice over: the live store makes
         * its shapes again from those its events use */
        for (uint32_t k = 0; k < 6000; k++) {
            memset(&rec, 0, sizeof rec);
            uint64_t t = 3000000000u + (uint64_t)k * 100u;
            rec.kernel = (tp_kernel){.kind = TP_K_KERNEL, .device = 0, .stream = 7, .start = k < 4 ? t - k * 100u : t,
                                     .end = k < 4 ? t - k * 100u + 4294967294u + k * 3000000000ull : t + 50,
                                     .name = kname, .grid = {k + 1, 1, 1}, .block = {1, 1, 1}};
            tp_enc_add(enc, &rec);
        }
        tp_enc_finish(enc, &two);
        fuzz_write_seed(dir, "long-events-and-many-shapes", two.data, two.len);
        tp_buf_free(&one);
        tp_buf_free(&two);
        tp_enc_destroy(&enc);
        exit(0);
    }
    return 0;
}

/* Re-seals a batch's checksums in place, when its header says how long it is. */
static void reseal(uint8_t *p, size_t len) {
    if (len < TP_BATCH_HDR_SIZE)
        return;
    tp_batch_hdr h;
    memcpy(&h, p, sizeof h);
    if (h.stored_size <= len - TP_BATCH_HDR_SIZE)
        h.payload_crc = tp_crc32(0, p + TP_BATCH_HDR_SIZE, h.stored_size);
    memcpy(p, &h, sizeof h);
    tp_batch_seal_header(p);
}

static void check_cells(const vw_grid *g) {
    for (int i = 0; i < g->w * g->h; i++) {
        uint32_t c = g->cells[i].ch;
        if ((c != 0 && c < 0x20) || c == 0x7F || (c >= 0x80 && c < 0xA0))
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20))
        return 0;
    uint8_t *copy = malloc(size ? size : 1);
    memcpy(copy, data, size);
    st_store *s = st_store_new(&(st_opts){.max_events = 512});
    /* batches start at each magic */
    size_t start = 0;
    for (size_t i = 1; i <= size; i++) {
        if (i < size && !(i + 4 <= size && memcmp(copy + i, "STB1", 4) == 0))
            continue;
        reseal(copy + start, i - start);
        err_msg err;
        st_store_add_batch(s, copy + start, i - start, &err);
        start = i;
    }
    st_store_commit(s);
    sy_symbolize_store(s, NULL, 0); /* hostile module paths and offsets: refused or looked up, never trusted */
    an_result r;
    err_msg err;
    int have_an = an_analyze(s, NULL, &r, &err) == 0;
    vw_state v;
    vw_state_init(&v, VW_REPLAY, s);
    if (have_an) {
        v.an = &r;
        vw_sites_update(&v);
    }
    vw_grid g = {0};
    static const int keys[] = {'n', '+', '+', 'N', 'j', 'o', 'j', 'o', 'r', 'r', '\t', 'j', '\n', '0', '-', 'G'};
    for (int round = 0; round < 2; round++) {
        g.w = round ? 200 : 80;
        g.h = round ? 60 : 24;
        vw_render(s, &v, &g);
        check_cells(&g);
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            vw_key(&v, s, g.w, g.h, keys[k]);
            vw_render(s, &v, &g);
            check_cells(&g);
        }
    }
    vw_state_free(&v);
    vw_grid_free(&g);
    if (have_an)
        an_result_free(&r);
    st_store_destroy(&s);
    free(copy);
    return 0;
}
