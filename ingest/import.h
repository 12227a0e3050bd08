/*
 * What the importers of other tools' traces (kineto.h: the PyTorch profiler's JSON; nsys.h: Nsight
 * Systems' SQLite export) take and give: their options, the function that receives the encoded
 * batches they make, and the figures of an import. Both fill the same statistics; which fields an
 * importer fills, and how it reads them, its own header says.
 */
#ifndef SYNCTOP_IMPORT_H
#define SYNCTOP_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "synctop/error.h"
#include "synctop/event.h"

#define IMPORT_BATCH_RECORDS    4096
#define IMPORT_MAX_EVENTS       (32u << 20) /* default bound on imported events, */
/* or one per this many bytes of a larger input of known size: plain JSON needs some 30 bytes an
 * entry, so the text itself bounds it; a gzip'd one is counted in compressed bytes, of which the
 * sample traces spend 14-31 on an entry (they compress 7-19x) */
#define IMPORT_BYTES_PER_EVENT  4
#define IMPORT_MAX_STRING_BYTES (32u << 20) /* bound on interned names */
#define IMPORT_SKIP_SLOTS       32          /* categories counted by name, the rest as "other" */
/* Profiler JSON of fewer MiB than this is parsed on one thread (see import_opts.piece_bytes): below
 * it the threads' start and the merge of their pieces cost about what they save (bench_import's
 * crossover), and the CPU time grows by a quarter. A gzip'd text is parsed on threads from
 * IMPORT_PAR_LEAST_GZ_MIB of compressed bytes (64 MiB of text and more, at the ratio of profiler
 * JSON): below it the inflate and two parsing threads share two cores for nothing. */
#define IMPORT_PAR_LEAST_MIB    16
#define IMPORT_PAR_LEAST_GZ_MIB 4
#define IMPORT_END_TWO_LEAST    (1u << 16)  /* records from which an import parsed on threads orders them on two, and
                                               moves them into order beside their emit */
#define IMPORT_CAT_MAX          32          /* bytes of a category name kept (cut) */
#define IMPORT_FRAME_NAME_MAX   4096        /* bytes of a call-chain frame's function or module name kept (cut) */

/* Receives one encoded batch (header + raw payload). Returns 0, or a negative ERR_* code (with a
 * message in err) to stop the import, which then returns that code. */
typedef int (*import_emit_fn)(void *ctx, const void *batch, size_t len, err_msg *err);
/* Reading progress: done of total input bytes (compressed bytes for .gz; total 0 when unknown).
 * Returns 0 to go on; anything else stops the import, which then fails with ERR_EOF ("cancelled"). */
typedef int (*import_progress_fn)(void *ctx, uint64_t done, uint64_t total);

typedef struct import_opts {
    uint64_t producer;    /* producer id of the batches; 0: a random one */
    size_t batch_records; /* records per batch; 0: IMPORT_BATCH_RECORDS */
    uint64_t max_events;  /* 0: IMPORT_MAX_EVENTS, or one per IMPORT_BYTES_PER_EVENT bytes of a larger
                           * input of known size (a file, memory; a gzip'd one's compressed bytes);
                           * more fails with ERR_LIMIT */
    import_progress_fn progress;
    void *progress_ctx;
    int ops; /* Kineto: each operator (cpu_op row) is also a range on its thread's ranges lane, as the
                viewer shows them; report and the other verbs leave them out and read faster */
    int threads;        /* Kineto: threads that parse; 0: SYNCTOP_THREADS, else the cores the process may use */
    size_t piece_bytes; /* Kineto: bytes of text a thread parses at a time; 0: the default. Set, texts
                           longer than one piece are parsed on threads (else IMPORT_PAR_LEAST_MIB and more) */
} import_opts;

typedef struct import_skip {
    char cat[IMPORT_CAT_MAX]; /* as in the trace (untrusted), NUL-terminated; "(none)" if absent */
    uint64_t count;
} import_skip;

typedef struct import_stats {
    int gzip;                    /* the input was gzip-compressed */
    uint64_t input_bytes;        /* bytes read from the input */
    uint64_t json_bytes;         /* bytes of JSON text parsed */
    uint64_t entries;            /* traceEvents entries read */
    uint64_t meta_rows;          /* of which ph:"M" rows */
    uint64_t records[TP_K_MAX_]; /* records emitted, by kind (metadata included) */
    uint64_t events;             /* event records emitted */
    uint64_t batches, batch_bytes;
    int parse_threads;        /* Kineto: the threads its text was parsed on (1 below IMPORT_PAR_LEAST_MIB) */
    uint64_t contexts;       /* operator and Python-frame rows kept to name the calls inside them */
    uint64_t sited_calls;    /* calls given a call site: blocking ones from the operator and Python-frame
                                rows around them (Kineto), any with a CUDA backtrace (nsys) */
    uint64_t blocking_calls; /* API records flagged TP_F_BLOCKING */
    uint64_t blocked_ns;     /* their summed durations */
    uint64_t t_min, t_max;   /* span of the events, ns (0, 0 when none) */
    uint32_t pid;            /* host pid (of the first host event) */
    int32_t rank, world;     /* -1 when unknown */
    uint64_t skipped;        /* entries not imported, other than ph:"M" rows */
    import_skip skip[IMPORT_SKIP_SLOTS];
    size_t n_skip;
    uint64_t skip_other;      /* skipped entries whose category did not fit the table */
    uint64_t invalid;         /* entries of imported categories with unusable fields */
    char first_invalid[192];  /* which and why, for a warning */
    uint64_t strings_refused; /* names dropped by the string bound */
    uint64_t strings_cut;     /* strings over 1 MiB, cut there before parsing */
    uint64_t frame_names_cut; /* call-chain names (functions, modules) over IMPORT_FRAME_NAME_MAX, cut there (nsys) */
    uint64_t importer_peak_bytes; /* the most bytes the Kineto importer held at once in its records, the
                                     contexts that name calls and the records' order */
    uint64_t syncs_moved;     /* sync rows put on the device their context's work ran on (nsys: the row said
                                 another, as Nsight Systems writes 0 for every one) */
} import_stats;

/* The threads an import uses when asked for this many (import_opts.threads): 0 means SYNCTOP_THREADS,
 * else the cores the process may use; at most 32. */
int import_threads(int asked);

/* The CRC-32 of tp_crc32 by ISA-L (what the importers' gzip reading links), for tp_crc32_use. */
uint32_t import_crc32(uint32_t crc, const void *data, size_t len);

#endif
