/*
 * libFuzzer target for what a relay takes from the wire: any bytes go in as a summary
 * (tp_summary_decode), as a notice (net_notice.h), as a batch into the relay's summer
 * (net_summary.h), which then flushes, as a subscription notice from below and, cut in two at the
 * length its first byte gives, as a [topic][body] from above into the relay's forwarding
 * (net_forward.h); nothing may crash, leak or read out of bounds, and whatever decodes must hold
 * what the decoder promises (a NUL-terminated printable host and text, t_min <= t_max, a notice
 * that encodes back to the same bytes, a topic passed on with one relay more in its trail).
 * `fuzz_summary --write-seeds DIR` writes a valid summary, notice, batch, topic and batch, and
 * requests with trails to start from.
 */
#include <stdlib.h>
#include <string.h>

#include "synctop/net.h"
#include "net_forward.h"
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
        /* [topic length][topic: 'B' + 42, one relay][batch] */
        uint8_t *tb = malloc(1 + 17 + b.len);
        if (tb != NULL) {
            tb[0] = 17;
            net_topic_encode(tb + 1, NET_TOPIC_BATCH, 42);
            net_trail_put(tb + 10, 7);
            memcpy(tb + 18, b.data, b.len);
            fuzz_write_seed(dir, "topic-batch", tb, 18 + b.len);
            free(tb);
        }
        uint8_t up[1 + NET_KEY_LEN + 16] = {1};
        net_key_encode(up + 1, 42);
        net_trail_put(up + 1 + NET_KEY_LEN, 7);
        net_trail_put(up + 1 + NET_KEY_LEN + 8, 8);
        fuzz_write_seed(dir, "key-request", up, sizeof up);
        uint8_t loss[1 + NET_LOSS_LEN + 8] = {1};
        net_loss_encode(loss + 1, 42, 3);
        net_trail_put(loss + 1 + NET_LOSS_LEN, 7);
        fuzz_write_seed(dir, "loss-report", loss, sizeof loss);
        /* a clock answer's topic back round a loop (this relay, 7, in its trail), and one whose
         * trail is full */
        uint8_t looped[1 + 1 + 16 + 8] = {17, NET_TOPIC_CLOCK};
        net_trail_put(looped + 2, 9);
        net_trail_put(looped + 10, 7);
        fuzz_write_seed(dir, "looped-topic", looped, sizeof looped);
        uint8_t full[1 + 1 + 8 * NET_HOPS_MAX + 4] = {1 + 8 * NET_HOPS_MAX, NET_TOPIC_NOTICE};
        for (int i = 0; i < NET_HOPS_MAX; i++)
            net_trail_put(full + 2 + 8 * i, 100 + (uint64_t)i);
        fuzz_write_seed(dir, "full-trail", full, sizeof full);
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
    net_fwd *f = net_fwd_new(7);
    if (f != NULL) {
        net_fwd_up up;
        if (net_fwd_up_take(f, data, size, &up) == NET_FWD_PASS)
            for (int i = 0; i < up.n; i++)
                if (up.len[i] > NET_FWD_UP_MAX || up.len[i] < 1)
                    abort();
        size_t tl = size > 0 ? data[0] : 0;
        uint8_t topic[NET_TOPIC_MAX];
        size_t out_len;
        if (size > 0 && tl <= size - 1 &&
            net_fwd_down(f, data + 1, tl, data + 1 + tl, size - 1 - tl, topic, &out_len) == NET_FWD_PASS &&
            (out_len != tl + 8 || memcmp(topic, data + 1, tl) != 0 || net_trail_get(topic + tl, 0) != 7))
            abort();
        net_fwd_destroy(&f);
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
