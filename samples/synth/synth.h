/*
 * A deterministic generator of realistic synctop events for tests and benchmarks: what the tracer
 * emits for a training loop (launch API + kernel pairs, per-step HtoD input copy, a DtoH scalar
 * copy with its blocking cudaStreamSynchronize, memsets, NVTX step ranges), with metadata first.
 * The same seed gives the same records, so a consumer can regenerate and compare exactly.
 */
#ifndef SYNCTOP_SYNTH_H
#define SYNCTOP_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "synctop/codec.h"

typedef struct synth {
    uint64_t rng;
    uint64_t now;      /* trace clock, ns */
    uint32_t corr;     /* next correlation id */
    uint64_t step;     /* training step */
    unsigned in_step;  /* position inside the step's pattern */
    uint32_t names[16];
    uint32_t api_names[8];
    uint32_t callsites[2];
    uint64_t events;   /* events generated */
    int meta_done;
    const char *host;  /* the process record's host; NULL: "gpu-node-07" (set before synth_meta) */
    int32_t rank;      /* the process record's rank (0) */
} synth;

void synth_init(synth *s, uint64_t seed);
/* Writes the metadata (process, device, streams, threads, call sites) into enc. */
void synth_meta(synth *s, tp_enc *enc);
/* Produces the next event into r (interning names through enc). */
void synth_next(synth *s, tp_enc *enc, tp_record *r);
/* Adds n events to enc (metadata first if not yet written). */
void synth_fill(synth *s, tp_enc *enc, size_t n);

#endif
