/*
 * The viewer's figures: the time to compute one 200x60 frame (vw_render: summaries of every lane,
 * bubbles, stalls, text) on synthetic traces of 1M and 10M events at every zoom from the whole trace
 * down to one nanosecond per column (the window's width divided by 8 each step): the median at the
 * middle of the trace, the worst of the medians at 16 places scrolled across it, and where a
 * frame's time goes (vw_state.timing: the mean per part of the frame); memory per stored event; and
 * the time from opening a 10M-event trace file to the first frame, through the same incremental
 * loader `synctop replay` uses.
 *
 * And a live job of 64 ranks (each its own process and lanes): the worst and mean frame.
 *
 * And the live viewer's worst latency at 4M events: with the analysis on the loop (as it was) a key
 * waited for a whole an_analyze; with it on its own thread (viewer_anjob), the loop goes on
 * rendering frames and answering keys meanwhile: the worst of those frame+key turns is reported.
 *
 * usage: bench_view [MILLIONS...]   (default: 1 10)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analysis.h"
#include "store.h"
#include "load.h"
#include "synctop/file.h"
#include "synth.h"
#include "screen.h"
#include "viewer.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Feeds n synthetic events in 4096-event batches to the store and, when w is not NULL, a file. */
static void feed(st_store *s, tp_fwriter *w, size_t n) {
    synth sy;
    synth_init(&sy, 42);
    tp_enc *enc = tp_enc_new(NULL);
    tp_buf out = {0};
    err_msg err;
    for (size_t done = 0; done < n; done += 4096) {
        synth_fill(&sy, enc, n - done < 4096 ? n - done : 4096);
        tp_enc_finish(enc, &out);
        tp_enc_delivered(enc, 1);
        if (s && st_store_add_batch(s, out.data, out.len, &err) != 0)
            fprintf(stderr, "refused: %s\n", err.msg);
        if (w && tp_fwriter_append(w, out.data, out.len, &err) != 0)
            fprintf(stderr, "write: %s\n", err.msg);
    }
    tp_buf_free(&out);
    tp_enc_destroy(&enc);
}

static double frame_max; /* the slowest frame median_frame_n has timed since it was last cleared */

static double median_frame_n(st_store *s, vw_state *v, vw_grid *g, uint64_t t0, uint64_t t1, int n) {
    double t[31];
    if (n > 31)
        n = 31;
    for (int i = 0; i < n; i++) {
        v->t0 = t0;
        v->t1 = t1;
        v->cursor = t0 + (t1 - t0) / 2;
        g->w = 200;
        g->h = 60;
        double a = now_s();
        vw_render(s, v, g);
        t[i] = now_s() - a;
    }
    qsort(t, (size_t)n, sizeof t[0], cmp_d);
    if (t[n - 1] > frame_max)
        frame_max = t[n - 1];
    return t[n / 2];
}

static double median_frame(st_store *s, vw_state *v, vw_grid *g, uint64_t t0, uint64_t t1) {
    return median_frame_n(s, v, g, t0, t1, 31);
}

static void fmt_width(char *out, size_t n, uint64_t ns) {
    if (ns >= 1000000000)
        snprintf(out, n, "%.3f s", (double)ns / 1e9);
    else if (ns >= 1000000)
        snprintf(out, n, "%.3f ms", (double)ns / 1e6);
    else if (ns >= 1000)
        snprintf(out, n, "%.3f us", (double)ns / 1e3);
    else
        snprintf(out, n, "%" PRIu64 " ns", ns);
}

/* Frames at every zoom, from the whole span [t0, t1) down to one nanosecond per column: per width
 * the median frame at the middle, the worst median over 16 places scrolled from start to end, the
 * slowest single frame of all those, and the mean time of each part of the frame. Returns the
 * worst frame median met. */
static double zoom_sweep(st_store *s, vw_state *v, vw_grid *g, uint64_t t0, uint64_t t1) {
    double worst_all = 0;
    printf("  window width    middle   scrolled    slowest  where a frame's time goes (mean ms per part)\n");
    for (uint64_t w = t1 - t0;; w /= 8) {
        if (w < 176)
            w = 176; /* 200 columns less the lane labels: about one nanosecond each */
        double parts[VW_PART_N_] = {0};
        frame_max = 0;
        v->timing = parts;
        double mid = median_frame(s, v, g, t0 + (t1 - t0 - w) / 2, t0 + (t1 - t0 - w) / 2 + w);
        v->timing = NULL;
        double scrolled = 0;
        for (int k = 0; k < 16; k++) {
            uint64_t a = t0 + (uint64_t)((double)(t1 - t0 - w) * k / 15.0);
            double m = median_frame_n(s, v, g, a, a + w, 11);
            if (m > scrolled)
                scrolled = m;
        }
        if (mid > worst_all)
            worst_all = mid;
        if (scrolled > worst_all)
            worst_all = scrolled;
        int order[VW_PART_N_];
        for (int i = 0; i < VW_PART_N_; i++)
            order[i] = i;
        for (int i = 0; i < VW_PART_N_; i++) /* the biggest parts first */
            for (int j = i + 1; j < VW_PART_N_; j++)
                if (parts[order[j]] > parts[order[i]]) {
                    int x = order[i];
                    order[i] = order[j];
                    order[j] = x;
                }
        char wt[32];
        fmt_width(wt, sizeof wt, w);
        printf("  %12s  %6.3f ms  %6.3f ms  %6.3f ms ", wt, mid * 1e3, scrolled * 1e3, frame_max * 1e3);
        for (int i = 0; i < 4; i++)
            printf(" %s %.3f%s", vw_part_names[order[i]], parts[order[i]] / 31 * 1e3, i < 3 ? "," : "");
        printf("\n");
        if (w == 176)
            break;
    }
    return worst_all;
}

/* The viewer's loop while an analysis runs on its thread, `rounds` analyses one after the other (at
 * least min_frames turns): each turn a key (keys, in turn) and a 200x60 frame, and with figs the
 * header's figures over the window, a budget's worth per turn as the loop does. Returns the turns;
 * the worst and summed frame times, and the worst figures' time, in seconds. */
static int frames_while_analysing(st_store *s, vw_state *v, vw_grid *g, int rounds, int min_frames, const char *keys,
                                  int figs, double *worst, double *sum, double *worst_figs) {
    err_msg err;
    int frames = 0;
    size_t nk = strlen(keys);
    for (int round = 0; round < rounds; round++) {
        viewer_anjob *j = viewer_anjob_start(s, NULL, &err);
        if (j == NULL)
            return frames;
        while (!viewer_anjob_done(j) || frames < min_frames) {
            double f0 = now_s();
            vw_key(v, s, 200, 60, keys[(size_t)frames % nk]);
            g->w = 200;
            g->h = 60;
            vw_render(s, v, g);
            double f1 = now_s();
            if (f1 - f0 > *worst)
                *worst = f1 - f0;
            *sum += f1 - f0;
            if (figs) {
                v->header.scope_window = 1;
                vw_figs_update(v, s, 100000);
                double f2 = now_s() - f1;
                if (f2 > *worst_figs)
                    *worst_figs = f2;
            }
            frames++;
        }
        an_result r;
        double took;
        if (viewer_anjob_finish(&j, &r, &took, &err) == 0)
            an_result_free(&r);
    }
    return frames;
}

/* At 4M events, a live store: the analysis inline versus on its thread, and the worst frame (with a
 * key applied) while it runs. */
static void live_latency(size_t n) {
    st_opts so = {.max_events = n};
    st_store *s = st_store_new(&so);
    feed(s, NULL, n);
    st_store_commit(s);
    err_msg err;
    an_result an;
    double a = now_s();
    if (an_analyze(s, NULL, &an, &err) != 0)
        return;
    double inline_s = now_s() - a;
    vw_state v;
    vw_state_init(&v, VW_LIVE, s);
    v.an = &an;
    vw_sites_update(&v);
    vw_grid g = {0};
    uint64_t t0, t1;
    st_store_span(s, &t0, &t1);
    double worst = 0, sum = 0, worst_figs = 0;
    int frames = frames_while_analysing(s, &v, &g, 3, 0, "hl", 1, &worst, &sum, &worst_figs);
    printf("%zuM events live: analysis %.3f s (inline, a key waited that long); on its thread: %d frames+keys "
           "meanwhile, worst %.2f ms, mean %.2f ms; header figures (window, 100k-event budget) worst %.2f ms\n",
           n / 1000000, inline_s, frames, worst * 1e3, frames ? sum / frames * 1e3 : 0, worst_figs * 1e3);
    vw_state_free(&v);
    vw_grid_free(&g);
    an_result_free(&an);
    st_store_destroy(&s);
}

/* A live job of `ranks` processes (each its own producer, rank and pid, its own GPU lanes and host
 * thread), `per_rank` events each in a bounded live store: the worst and mean frame (200x60, a key
 * applied each turn) while the analysis runs on its thread, as the viewer's loop does. */
static void live_ranks(int ranks, size_t per_rank) {
    st_opts so = {.max_events = (size_t)ranks * per_rank};
    st_store *s = st_store_new(&so);
    synth *sy = calloc((size_t)ranks, sizeof *sy);
    tp_enc **enc = calloc((size_t)ranks, sizeof *enc);
    tp_buf out = {0};
    err_msg err;
    if (sy == NULL || enc == NULL)
        return;
    for (int r = 0; r < ranks; r++) {
        synth_init(&sy[r], (uint64_t)r + 1);
        enc[r] = tp_enc_new(&(tp_enc_opts){.producer = (uint64_t)r + 1});
        synth_meta(&sy[r], enc[r]);
        sy[r].meta_done = 1;
        tp_process p = {.kind = TP_K_PROCESS, .device = TP_NO_DEVICE, .pid = 5000 + (uint32_t)r,
                        .host = tp_enc_intern_cstr(enc[r], "gpu-node"), .rank = r, .world = ranks};
        tp_enc_add(enc[r], &p);
    }
    for (size_t done = 0; done < per_rank; done += 4096)
        for (int r = 0; r < ranks; r++) {
            synth_fill(&sy[r], enc[r], per_rank - done < 4096 ? per_rank - done : 4096);
            tp_enc_finish(enc[r], &out);
            tp_enc_delivered(enc[r], 1);
            if (st_store_add_batch(s, out.data, out.len, &err) != 0)
                fprintf(stderr, "refused: %s\n", err.msg);
        }
    st_store_commit(s);
    an_result an;
    if (an_analyze(s, NULL, &an, &err) != 0)
        return;
    vw_state v;
    vw_state_init(&v, VW_LIVE, s);
    v.an = &an;
    vw_sites_update(&v);
    vw_grid g = {0};
    /* as it opens (every process folded into its row), then with every lane open (C) */
    for (int open = 0; open < 2; open++) {
        if (open)
            vw_key(&v, s, 200, 60, 'C');
        double worst = 0, sum = 0;
        int frames = frames_while_analysing(s, &v, &g, 1, 20, "jlh", 0, &worst, &sum, NULL);
        printf("%d ranks live, %zuk events each, %s: %d frames+keys while the analysis ran, worst %.2f ms, "
               "mean %.2f ms\n",
               ranks, per_rank / 1000, open ? "every lane open" : "each rank folded into its row", frames,
               worst * 1e3, frames ? sum / frames * 1e3 : 0);
    }
    vw_state_free(&v);
    vw_grid_free(&g);
    an_result_free(&an);
    for (int r = 0; r < ranks; r++)
        tp_enc_destroy(&enc[r]);
    free(enc);
    free(sy);
    tp_buf_free(&out);
    st_store_destroy(&s);
}

int main(int argc, char **argv) {
    size_t sizes[8] = {1, 10};
    int n_sizes = 2;
    if (argc > 1) {
        n_sizes = 0;
        for (int i = 1; i < argc && n_sizes < 8; i++)
            sizes[n_sizes++] = (size_t)atol(argv[i]);
    }
    printf("bench_view: frame 200x60, synthetic trace (samples/synth/synth.h)\n");
    for (int k = 0; k < n_sizes; k++) {
        size_t n = sizes[k] * 1000000;
        st_store *s = st_store_new(NULL);
        double a = now_s();
        feed(s, NULL, n);
        st_store_commit(s);
        st_store_shrink(s);
        double ingest = now_s() - a;
        an_result an;
        err_msg err;
        a = now_s();
        if (an_analyze(s, NULL, &an, &err) != 0) {
            fprintf(stderr, "analysis: %s\n", err.msg);
            return 1;
        }
        double ana = now_s() - a;
        vw_state v;
        vw_state_init(&v, VW_REPLAY, s);
        v.an = &an;
        vw_sites_update(&v);
        v.follow = 0;
        vw_grid g = {0};
        uint64_t t0, t1;
        st_store_span(s, &t0, &t1);
        printf("%3zuM events, %.3f s of trace: frame 200x60 by zoom\n", sizes[k], (double)(t1 - t0) / 1e9);
        double worst = zoom_sweep(s, &v, &g, t0, t1);
        double out = median_frame(s, &v, &g, t0, t1);
        uint64_t mid = t0 + (t1 - t0) / 2;
        double in = median_frame(s, &v, &g, mid, mid + 176); /* one nanosecond per column */
        printf("%3zuM events: frame zoomed out %.3f ms, all the way in %.3f ms, worst at any zoom or place %.3f ms | "
               "%.1f bytes/event | ingest %.2f s (%.1f M events/s) | analysis %.2f s\n",
               sizes[k], out * 1e3, in * 1e3, worst * 1e3, (double)st_store_memory(s) / (double)st_store_events(s),
               ingest, (double)n / ingest / 1e6, ana);
        vw_state_free(&v);
        vw_grid_free(&g);
        an_result_free(&an);
        st_store_destroy(&s);
    }
    live_latency(4u << 20);
    live_ranks(64, 65536);
    /* time to the first frame of a 10M-event trace file */
    size_t n = sizes[n_sizes - 1] * 1000000;
    char path[] = "/tmp/bench_view_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 1;
    close(fd);
    err_msg err;
    tp_fwriter *w = tp_fwriter_open(path, TP_FW_OVERWRITE, &err);
    if (w == NULL) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    feed(NULL, w, n);
    tp_fwriter_close(&w, &err);
    double a = now_s();
    st_store *s = st_store_new(NULL);
    ingest_loader *ld = ingest_open(s, path, NULL, NULL, &err);
    if (ld == NULL) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    ingest_step(ld, 0.015, &err);
    st_store_commit(s);
    vw_state v;
    vw_state_init(&v, VW_REPLAY, s);
    uint64_t t0, t1;
    ingest_span(ld, &t0, &t1);
    v.origin = v.t0 = v.now = t0;
    v.end = t1;
    v.t1 = t1;
    v.load_progress = ingest_progress(ld);
    vw_grid g = {.w = 200, .h = 60};
    vw_render(s, &v, &g);
    double first = now_s() - a;
    size_t first_events = st_store_events(s);
    while (ingest_step(ld, 0.015, &err) == 0)
        st_store_commit(s);
    st_store_commit(s);
    double all = now_s() - a;
    printf("%zuM-event trace file: first frame after %.3f s (%zu events loaded by then), whole file in %.2f s\n",
           n / 1000000, first, first_events, all);
    vw_state_free(&v);
    vw_grid_free(&g);
    ingest_close(&ld);
    st_store_destroy(&s);
    unlink(path);
    return 0;
}
