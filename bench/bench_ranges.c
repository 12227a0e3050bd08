/*
 * What a profiler trace's operators cost the viewer: FILE (a Kineto JSON) loaded as report loads it
 * (operators only name the calls inside them) and as the viewer does (each operator also a range
 * on its thread's ranges lane, nested by depth). For each: the load (import and commit), the
 * analysis, the events held and the store's bytes; then the bytes per range the operators add,
 * and the time of a 200x60 frame with the ranges closed, then with every thread's opened by depth.
 *
 *   bench_ranges FILE
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analysis.h"
#include "load.h"
#include "screen.h"
#include "store.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static st_store *load(const char *path, int ops, double *t_load, double *t_an) {
    st_store *s = st_store_new(NULL);
    err_msg err = {{0}};
    double t = now_s();
    ingest_loader *ld = ingest_open(s, path, NULL, NULL, &err);
    if (ld == NULL) {
        fprintf(stderr, "bench_ranges: %s\n", err.msg);
        exit(1);
    }
    if (ops)
        ingest_keep_ops(ld);
    int rc;
    while ((rc = ingest_step(ld, 0, &err)) == 0)
        ;
    ingest_close(&ld);
    if (rc < 0) {
        fprintf(stderr, "bench_ranges: %s\n", err.msg);
        exit(1);
    }
    st_store_commit(s);
    st_store_shrink(s);
    *t_load = now_s() - t;
    an_result r;
    t = now_s();
    if (an_analyze(s, NULL, &r, NULL) != 0)
        exit(1);
    *t_an = now_s() - t;
    an_result_free(&r);
    return s;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: bench_ranges FILE\n");
        return 2;
    }
    double l0, a0, l1, a1;
    st_store *s0 = load(argv[1], 0, &l0, &a0);
    st_store *s1 = load(argv[1], 1, &l1, &a1);
    size_t e0 = st_store_events(s0), e1 = st_store_events(s1), m0 = st_store_memory(s0), m1 = st_store_memory(s1);
    printf("as report loads it: %zu events, %.1f MB, load %.2f s, analysis %.2f s\n", e0, (double)m0 / 1e6, l0, a0);
    printf("as the viewer does: %zu events, %.1f MB, load %.2f s, analysis %.2f s\n", e1, (double)m1 / 1e6, l1, a1);
    if (e1 > e0)
        printf("operators: %zu ranges, %.1f bytes each in the store\n", e1 - e0, (double)(m1 - m0) / (double)(e1 - e0));
    /* a frame with every thread's ranges open: o on each ranges lane's row */
    vw_state v;
    vw_state_init(&v, VW_REPLAY, s1);
    vw_grid g = {.w = 200, .h = 60};
    vw_render(s1, &v, &g);
    double t = now_s();
    int frames = 20;
    for (int i = 0; i < frames; i++)
        vw_render(s1, &v, &g);
    printf("a 200x60 frame, ranges closed: %.2f ms\n", (now_s() - t) / frames * 1e3);
    int opened = 0;
    for (int row = 0; row < 256; row++) {
        v.cursor_row = row;
        vw_key(&v, s1, 200, 60, 'o');
        if (strncmp(v.message, "ranges by depth", 15) == 0)
            opened++;
        else if (strncmp(v.message, "ranges in one row", 17) == 0) /* a row of one opened: open again */
            vw_key(&v, s1, 200, 60, 'o');
    }
    v.cursor_row = 0;
    t = now_s();
    for (int i = 0; i < frames; i++)
        vw_render(s1, &v, &g);
    printf("a 200x60 frame, %d threads' ranges open by depth: %.2f ms\n", opened, (now_s() - t) / frames * 1e3);
    vw_grid_free(&g);
    vw_state_free(&v);
    st_store_destroy(&s0);
    st_store_destroy(&s1);
    return 0;
}
