/*
 * libFuzzer target for what a relay's summaries and notices take from the wire: any bytes go in as
 * a summary (tp_summary_decode), as a notice (net_notice.h) and as a batch into the relay's summer
 * (net_summary.h), which then flushes; nothing may crash, leak or read out of bounds, and whatever
 * decodes must hold what the decoder promises (a NUL-terminated printable host and text, t_min <=
 * t_max, a notice that encodes back to the same bytes). `fuzz_summary --write-seeds DIR` writes a
 * valid summary, notice and batch to start from.
 */
#include <stdlib.h>
#include <string.h>

#include "synctop/net.h"
#include "net_notice.h"
#include "net_summary.h"
#include "seeds.h"
#include "synth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *dir = fuzz_seed_dir(*argc, *argv);
    if (dir != NULL) {
        tp_summary s = {.producer = 7, .relay = 1, .interval_ns = 1000000000, .t_min = 10, .t_max = 5000,
                        .busy_ns = 4000, .blocked_ns = 100, .events = 60, .batches = 1, .pid = 42, .rank = 1,
                        .world = 2, .devices = 1, .host = "gpu-node-07"};
        uint8_t w[TP_SUMMARY_SIZE];
        tp_summary_encode(&s, w);
        fuzz_write_seed(dir, "summary", w, sizeof w);
        tp_sub_notice nt = {.relay = 3, .kind = TP_NOTICE_RECORDING_STOPPED, .host = "gpu-node-07",
                            .text = "recording to job.trace stopped: No space left on device"};
        uint8_t nw[NET_NOTICE_MAX];
        fuzz_write_seed(dir, "notice", nw, net_notice_encode(nw, &nt));
        tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 42});
        synth sy;
        synth_init(&sy, 42);
        tp_buf b = {0};
        synth_fill(&sy, enc, 120);
        tp_enc_finish(enc, &b);
        fuzz_write_seed(dir, "batch", b.data, b.len);
        tp_buf_free(&b);
        tp_enc_destroy(&enc);
        exit(0);
    }
    return 0;
}

static void emit(void *ctx, const tp_summary *s) {
    uint8_t w[TP_SUMMARY_SIZE];
    tp_summary back;
    tp_summary_encode(s, w);
    /* what a summer makes of a batch that decoded must decode again */
    if (tp_summary_decode(w, sizeof w, &back, NULL) != 0 || back.busy_ns != s->busy_ns)
        abort();
    (*(size_t *)ctx)++; /* one batch: at most one producer to summarise */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tp_summary s;
    if (tp_summary_decode(data, size, &s, NULL) == 0) {
        size_t hl = strnlen(s.host, sizeof s.host);
        if (hl == sizeof s.host || s.t_min > s.t_max)
            abort();
        for (size_t i = 0; i < hl; i++)
            if ((unsigned char)s.host[i] <= 0x20 || (unsigned char)s.host[i] >= 0x7f)
                abort();
    }
    tp_sub_notice nt;
    if (net_notice_decode(data, size, &nt)) {
        uint8_t again[NET_NOTICE_MAX];
        if (net_notice_encode(again, &nt) != size || memcmp(again, data, size) != 0)
            abort();
    }
    net_summer *m = net_summer_new(1);
    if (m == NULL)
        return 0;
    size_t n = 0;
    if (net_summer_add(m, data, size, NULL) == 0 && net_summer_flush(m, 0, 1000000000, emit, &n) > 1)
        abort();
    net_summer_destroy(&m);
    return 0;
}
