/*
 * The importers' back end: what turns the records an importer has read (kineto.c, nsys.c, and any
 * reader that comes) into the batches it hands out. It owns the batch output of one producer (the
 * encoder's batches, the first a keyframe, the last TP_BF_END, the import's counts of records and
 * batches), the metadata records every producer starts with (devices, streams and threads in id
 * order), call sites with their frames in one batch, and the correlation pass that gives each host
 * call its device and flags from the GPU operation with its correlation id.
 *
 * What stays the importer's: reading its format, its records until they are emitted, their order,
 * and the strings it interns (the order in which names are interned is part of the output).
 */
#ifndef SYNCTOP_EMIT_H
#define SYNCTOP_EMIT_H

#include <stddef.h>
#include <stdint.h>

#include "import.h"
#include "u64map.h"

#include "synctop/codec.h"

/* The batches of one producer, as they are made. */
typedef struct em_out {
    tp_enc *enc;
    import_emit_fn emit;
    void *ctx;
    size_t batch_records; /* records a batch */
    const char *name;     /* the input, for messages */
    err_msg *err;
    import_stats *st;
    tp_buf buf;
    int first;               /* no batch out yet: the next is a keyframe */
    struct em_async *async;  /* batches handed out on a thread of their own (em_out_async), or NULL */
} em_out;

/* The statistics of an import: st, or local when the caller gives none, cleared (rank and world
 * unknown). */
import_stats *em_stats_init(import_stats *st, import_stats *local);
/* The records a batch and the bound on events that opts (may be NULL) asks for; unasked, the bound
 * for an input of input_bytes (0: not known). */
size_t em_batch_records(const import_opts *opts);
uint64_t em_max_events(const import_opts *opts, uint64_t input_bytes);

/* Starts the batches of enc's producer. */
void em_out_init(em_out *o, tp_enc *enc, const import_opts *opts, import_emit_fn emit, void *ctx, const char *name,
                 err_msg *err, import_stats *st);
void em_out_free(em_out *o);
/* From now on, hands each batch out on a thread of its own while the next one is made: the emit
 * function is called from that thread, one batch at a time and in order, as before. A batch it
 * refuses stops the batches after it, and its error comes back from the next em_add, em_flush or
 * em_end. 0, or ERR_NOMEM when no thread could be started (batches are then handed out as before). */
int em_out_async(em_out *o);

/* Adds a record (any kind); more: more records follow, so a full batch is handed out now. Returns 0
 * or a negative ERR_* code with its message in o->err. */
int em_add(em_out *o, const void *rec, int more);
/* Hands out the records added so far as one batch with these TP_BF_* flags. */
int em_flush(em_out *o, uint32_t flags);
/* Hands out the last batch (TP_BF_END) and counts the names the encoder refused. */
int em_end(em_out *o);

/* The devices whose bit is set in used (bit d % 8 of byte d / 8, for d below TP_NO_DEVICE), each
 * a TP_K_DEVICE record that describe(arg, dv) fills (dv->device set, the rest zero). */
int em_devices(em_out *o, const uint8_t *used, void (*describe)(void *arg, tp_device *dv), void *arg);
/* The streams in streams (key device << 32 | stream, value its context) in key order, each a
 * TP_K_STREAM record. */
int em_streams(em_out *o, const cm_u64map *streams);
/* The threads in threads (key pid << 32 | tid) in key order, each a TP_K_THREAD record named by
 * name(arg, key) (0: none). */
int em_threads(em_out *o, const cm_u64map *threads, uint32_t (*name)(void *arg, uint64_t key), void *arg);

/* A call site id and its n frames, all in one batch (the reader attaches frames to the call site
 * before them in the same batch): the batch so far is handed out first when they would not fit.
 * frame(arg, i, fr) fills frame i (innermost first) from zero; kind, index and call site are set
 * here. */
int em_site(em_out *o, uint32_t id, uint32_t n, void (*frame)(void *arg, uint32_t i, tp_frame *fr), void *arg);

/* Gives each host call (TP_K_API) among the n records at rec, stride bytes apart, its device and
 * its flags (store/api.h) from the GPU operation with the same correlation id (a copy or memset
 * wins over other rows with it), and counts the blocking ones in st. A record is a tp_record's
 * fields up to stride bytes (at least 48: a kernel's launch shape may be cut off, nothing this
 * reads). Correlation ids are per process: pid[i] is record i's (pid NULL: one process).
 * class_of(arg, i, api) says the call's st_api_class. Returns 0 or ERR_NOMEM. */
int em_resolve(void *rec, size_t stride, size_t n, const uint32_t *pid, unsigned (*class_of)(void *arg, size_t i, tp_api *a),
               void *arg, import_stats *st);

#endif
