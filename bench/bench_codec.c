/*
 * Encode and decode cost per event on the realistic synthetic mix (samples/synth/synth.h), in batches of
 * 4096 events: encode = tp_enc_add for each event + tp_enc_finish (layout, CRC); decode =
 * tp_dec_open (CRC + validation of every record) + iterating every record. Also the cost of
 * compressing a batch for a trace file and of opening a compressed one.
 *
 * usage: bench_codec [EVENTS (default 20000000)]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "synctop/codec.h"
#include "synth.h"

#define BATCH 4096

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    size_t total = argc > 1 ? strtoull(argv[1], NULL, 10) : 20000000;
    size_t n_batches = (total + BATCH - 1) / BATCH;
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 1});
    synth s;
    synth_init(&s, 1);
    synth_meta(&s, enc);

    /* Pre-generate the events so that generation is not timed. */
    tp_record *events = malloc(BATCH * sizeof *events);
    tp_buf batch = {0}, z = {0};
    double t_enc = 0, t_dec = 0, t_z = 0, t_zdec = 0;
    size_t bytes = 0, zbytes = 0, events_done = 0;
    tp_dec d = {0}, dz = {0};
    err_msg err;
    uint64_t check = 0;
    for (size_t b = 0; b < n_batches; b++) {
        for (size_t i = 0; i < BATCH; i++)
            synth_next(&s, enc, &events[i]);
        double t0 = now_s();
        for (size_t i = 0; i < BATCH; i++)
            tp_enc_add(enc, &events[i]);
        tp_enc_finish(enc, &batch);
        tp_enc_delivered(enc, 1);
        double t1 = now_s();
        if (tp_dec_open(&d, batch.data, batch.len, &err) != 0) {
            fprintf(stderr, "decode failed: %s\n", err.msg);
            return 1;
        }
        const tp_record *r;
        while ((r = tp_dec_next_record(&d)) != NULL)
            check += r->head.kind;
        double t2 = now_s();
        t_enc += t1 - t0;
        t_dec += t2 - t1;
        bytes += batch.len;
        events_done += BATCH;
        if (b % 16 == 0) { /* compression is costlier: sample it */
            double t3 = now_s();
            tp_batch_compress(batch.data, batch.len, 1, &z, &err);
            double t4 = now_s();
            tp_dec_open(&dz, z.data, z.len, &err);
            double t5 = now_s();
            t_z += t4 - t3;
            t_zdec += t5 - t4;
            zbytes += z.len;
        }
    }
    size_t z_events = ((n_batches + 15) / 16) * BATCH;
    printf("codec: %zu events in batches of %d, %.1f raw bytes/event\n", events_done, BATCH,
           (double)bytes / (double)events_done);
    printf("encode: %.1f ns/event (%.1f Mevents/s)\n", t_enc * 1e9 / (double)events_done,
           (double)events_done / t_enc / 1e6);
    printf("decode: %.1f ns/event (%.1f Mevents/s)\n", t_dec * 1e9 / (double)events_done,
           (double)events_done / t_dec / 1e6);
    printf("zstd-1 compress: %.1f ns/event, %.1f bytes/event; open compressed: %.1f ns/event\n",
           t_z * 1e9 / (double)z_events, (double)zbytes / (double)z_events, t_zdec * 1e9 / (double)z_events);
    if (check == 0)
        printf("(no records?)\n");
    tp_dec_free(&d);
    tp_dec_free(&dz);
    tp_buf_free(&batch);
    tp_buf_free(&z);
    free(events);
    tp_enc_destroy(&enc);
    return 0;
}
