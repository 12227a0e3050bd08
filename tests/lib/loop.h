/*
 * A PyTorch-profiler (Kineto) trace of a training loop whose steps are known by construction:
 * thirty 10 ms steps (ProfilerStep#0..29), each a kernel of 7.98 ms and a cudaStreamSynchronize
 * waiting for it; every 5th step (4, 9, ... 29) a 30 ms cudaDeviceSynchronize more, as a logging
 * step would, so those steps take 40 ms. Options change that call's API and its period (a run to
 * compare with the first).
 */
#ifndef SYNCTOP_TEST_LOOP_H
#define SYNCTOP_TEST_LOOP_H

typedef struct loop_opts {
    const char *api; /* the periodic call (NULL: cudaDeviceSynchronize) */
    int period;      /* every period-th step (0: 5) */
} loop_opts;

/* Writes the trace to path (o may be NULL); returns 0, or -1 when it cannot be written. */
int loop_trace_write(const char *path, const loop_opts *o);

#endif
