/*
 * A summary of a trace file, computed by reading every batch: who produced it (processes, devices,
 * streams, threads), when, how much of what, what was lost and what is damaged. `synctop info`
 * prints it; it holds no terminal code so tests can check it directly.
 *
 * Names in it come from the file and are untrusted: print them through tp_print_sanitized.
 */
#ifndef SYNCTOP_TRACEINFO_H
#define SYNCTOP_TRACEINFO_H

#include <stddef.h>
#include <stdint.h>

#include "synctop/sanitize.h"
#include "synctop/codec.h"
#include "synctop/error.h"
#include "u64map.h"
#include "synctop/event.h"

typedef struct ti_producer {
    uint64_t id;
    tp_strtab *strings;
    uint64_t batches;   /* the producer's own (synthetic keyframes not counted) */
    uint64_t keyframes; /* synthetic keyframes the recorder wrote for it */
    uint64_t events;
    uint64_t first_seq, last_seq, missed, restarts;
    int seq_known, ended;
    uint64_t drop_records[TP_DROP_MAX_], drop_batches[TP_DROP_MAX_];
    int drops_seen[TP_DROP_MAX_];
    tp_record *meta; /* latest record per key (tp_fmeta_key), in key order after traceinfo_load */
    size_t n_meta, cap_meta;
} ti_producer;

typedef struct ti_problem {
    uint64_t offset, length;
    char what[200];
} ti_problem;

/* A host's clock as the recorder measured it (its notes: TP_K_HOSTCLOCK). */
#define TI_MAX_HOSTCLOCKS 256
typedef struct ti_hostclock {
    char host[65];
    int64_t offset_ns;
    uint64_t uncertainty_ns;
} ti_hostclock;

typedef struct traceinfo {
    uint64_t file_bytes, created_ns;
    int complete, indexed;
    size_t index_blocks;
    uint64_t batches, keyframes; /* producer batches, synthetic keyframes */
    uint64_t stored_bytes, raw_bytes;
    uint64_t events, per_kind[TP_K_MAX_];
    uint64_t t_first, t_last; /* of the events, on the producers' trace clocks */
    ti_producer *prods;
    size_t n_prods, cap_prods;
    cm_u64map prod_index; /* producer id -> index in prods + 1 */
    uint64_t batches_beyond; /* batches of producers past TI_MAX_PRODUCERS: counted, not itemized */
    ti_problem *probs;
    size_t n_probs;
    uint64_t unreadable; /* batches that could not be read or decoded */
    ti_hostclock hostclocks[TI_MAX_HOSTCLOCKS]; /* the recorder's notes: not a producer */
    size_t n_hostclocks;
    uint64_t unwritten_batches, unwritten_events; /* the recorder's note of what it received and
                                                     could not write (TP_DROP_RECORDER) */
} traceinfo;

/* Reads the whole file. Returns 0, or a negative ERR_* code when the file cannot be read at all
 * (err says why); damage inside the file is listed in probs, not an error. */
int traceinfo_load(traceinfo *ti, const char *path, err_msg *err);
void traceinfo_free(traceinfo *ti);

/* The string id of a producer, or NULL when the file never said. */
const char *traceinfo_string(const ti_producer *p, uint32_t id, uint32_t *len);

#endif
