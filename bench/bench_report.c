/*
 * Report time on a large trace: a synthetic training-loop store (samples/synth/synth.h: launches and
 * kernels, per-step copies, a blocking cudaStreamSynchronize per step, memsets, NVTX steps) of N
 * events (default 10 million), then the analysis (an_analyze), the text report and the HTA
 * breakdowns, each timed. Prints events/s for each.
 *
 *   bench_report [MILLION_EVENTS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "analysis.h"
#include "hta.h"
#include "report.h"
#include "store.h"
#include "synth.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    double millions = argc > 1 ? atof(argv[1]) : 10.0;
    size_t total = (size_t)(millions * 1e6);
    st_store *s = st_store_new(NULL);
    tp_enc *enc = tp_enc_new(NULL);
    synth sy;
    synth_init(&sy, 42);
    tp_buf buf = {0};
    double t = now_s();
    for (size_t done = 0; done < total; done += 4096) {
        synth_fill(&sy, enc, 4096);
        if (tp_enc_finish(enc, &buf) != 0 || st_store_add_batch(s, buf.data, buf.len, NULL) != 0) {
            fprintf(stderr, "bench_report: cannot build the store\n");
            return 1;
        }
        tp_enc_delivered(enc, 1);
    }
    st_store_commit(s);
    double t_build = now_s() - t;
    size_t events = st_store_events(s);
    printf("store: %zu events, %.1f MB, built in %.2f s\n", events, (double)st_store_memory(s) / 1e6, t_build);

    an_result r;
    t = now_s();
    if (an_analyze(s, NULL, &r, NULL) != 0)
        return 1;
    double t_an = now_s() - t;
    printf("analysis:   %.3f s (%.1f M events/s): %zu blocking spans, %zu bubbles, %zu sites, %zu findings\n", t_an,
           (double)events / t_an / 1e6, r.n_blocks, r.n_bubbles, r.n_sites, r.n_findings);
    FILE *null = fopen("/dev/null", "w");
    rp_opts o = {.format = RP_TEXT, .source = "synthetic"};
    t = now_s();
    rp_write(null, s, &r, &o);
    o.format = RP_JSON;
    rp_write(null, s, &r, &o);
    double t_rp = now_s() - t;
    printf("render:     %.3f s (text + json)\n", t_rp);
    hta_result h;
    t = now_s();
    if (hta_analyze(s, NULL, &h, NULL) != 0)
        return 1;
    double t_hta = now_s() - t;
    printf("hta:        %.3f s (%.1f M events/s), %zu streams\n", t_hta, (double)events / t_hta / 1e6, h.n_streams);
    printf("report total (analysis + render): %.3f s for %zu events\n", t_an + t_rp, events);
    fclose(null);
    hta_result_free(&h);
    an_result_free(&r);
    tp_buf_free(&buf);
    tp_enc_destroy(&enc);
    st_store_destroy(&s);
    return 0;
}
