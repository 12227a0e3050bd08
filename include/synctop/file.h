/*
 * Trace files: a 64-byte file header followed by the same batches as the wire (codec.h), their
 * payloads zstd-compressed, plus index blocks that let a reader seek by time.
 *
 * Appending is the only write. Every batch carries its own checksums, so a file cut short by a
 * crash or kill -9 opens fine and loses at most its last incomplete batch, and a damaged batch in
 * the middle is skipped and reported by offset while everything before and after it is read.
 *
 * Seeking: every TP_FILE_INDEX_EVERY batches the writer appends an index block (a batch with
 * TP_BF_INDEX whose payload lists the offset and time span of each batch since the previous index
 * block, and that block's offset); at close it appends a final index block and a footer that points
 * at it. A reader follows that chain backwards instead of reading the file; a file without a footer
 * (a crash) is indexed by hopping from batch header to batch header, never reading payloads. Batches
 * from several producers can share a file; the writer keeps each producer's strings and metadata and
 * writes a keyframe for each producer every TP_FILE_KEYFRAME_BYTES, so reading can start at any
 * keyframe without reading what came before it.
 *
 * Layout (all little-endian):
 *   file header, 64 bytes: magic[16], u16 version, u16 header size (64), u32 flags (0),
 *     u64 creation time (CLOCK_REALTIME ns), u32 batch version, u32 index interval,
 *     u64 keyframe interval, 12 reserved bytes (0), u32 CRC-32 of the 60 bytes before it.
 *   batches (codec.h), one after the other. A batch with TP_BF_INDEX is an index block: header
 *     producer 0, seq = number of the block, t_min/t_max = span of its entries; payload (zstd-
 *     compressed when that helps) = u64 offset of the previous index block (0: none), u32 entry
 *     count, u32 entry size (56), u64 entries before this block, then the entries, each laid out
 *     as tp_findex_entry.
 *   footer, 32 bytes, only after a clean close: "STFOOTER", u64 offset of the last index block,
 *     u64 entries in the whole chain, u32 index blocks, u32 CRC-32 of the 28 bytes before it.
 * Batches, index blocks and footer tile the file exactly; a reader checks that before trusting
 * the chain. A synthetic keyframe carries its producer's id and the seq of that producer's last
 * batch before it, and holds the state as of that batch.
 */
#ifndef SYNCTOP_FILE_H
#define SYNCTOP_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "synctop/codec.h"
#include "synctop/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TP_FILE_MAGIC "SYNCTOP\0TRACE\0\0\0" /* 16 bytes */
#define TP_FILE_VERSION 1
#define TP_FILE_HDR_SIZE 64
#define TP_FILE_INDEX_EVERY 256
#define TP_FILE_KEYFRAME_BYTES (16u << 20)

#define TP_FILE_ZSTD_LEVEL 1 /* default zstd level: smallest and fastest on the synth mix (bench_file) */
#define TP_FILE_BUFFER_BYTES (4u << 20) /* default write buffer */

/* ---- writer ---- */

typedef struct tp_fwriter tp_fwriter;

enum { TP_FW_OVERWRITE = 1 << 0 };

/* Creates a trace file. Refuses to replace an existing file unless TP_FW_OVERWRITE. */
tp_fwriter *tp_fwriter_open(const char *path, int flags, err_msg *err);

/* The same with every knob; a zero field takes its default. Tests use small intervals. */
typedef struct tp_fwriter_opts {
    int flags;               /* TP_FW_OVERWRITE */
    int zstd_level;          /* 0: TP_FILE_ZSTD_LEVEL */
    uint32_t index_every;    /* 0: TP_FILE_INDEX_EVERY */
    uint64_t keyframe_bytes; /* 0: TP_FILE_KEYFRAME_BYTES */
    size_t buffer_bytes;     /* 0: TP_FILE_BUFFER_BYTES */
} tp_fwriter_opts;
tp_fwriter *tp_fwriter_open_opts(const char *path, const tp_fwriter_opts *opts, err_msg *err);
/* Appends one batch as received from the wire or an encoder (raw or already compressed). The batch
 * is checked first: a malformed one is refused (ERR_MALFORMED) and nothing is written. */
int tp_fwriter_append(tp_fwriter *w, const void *batch, size_t len, err_msg *err);
/* Writes what is buffered to the file (the writer buffers at most a few MiB). */
int tp_fwriter_flush(tp_fwriter *w, err_msg *err);
/* Flushes, writes the final index and footer, closes. Returns the first error met, if any. */
int tp_fwriter_close(tp_fwriter **w, err_msg *err);

typedef struct tp_fwriter_stats {
    uint64_t batches, events, raw_bytes, file_bytes;
    uint64_t keyframes;       /* synthetic keyframes written */
    uint64_t index_blocks;
    uint64_t refused;         /* batches refused as malformed */
    uint64_t producers;
    uint64_t untracked;       /* producers past the writer's bounds: no more keyframes for them
                                 (all those beyond the 4096th count as one) */
    uint64_t dropped_records; /* sum of the latest TP_K_DROPS counters, over producers and sources */
    uint64_t dropped_batches;
    /* What the file holds, as far as writes succeeded (the fields above count what was appended,
     * buffered or not): the batches that are not synthetic (as `synctop info` counts them), their
     * events, and the file's size. A write that fails halfway (a full disk) leaves the file cut back
     * to the end of its last whole batch, and these count what is left. */
    uint64_t in_file_batches, in_file_events, in_file_bytes;
} tp_fwriter_stats;
void tp_fwriter_stats_get(const tp_fwriter *w, tp_fwriter_stats *out);
/* tp_fwriter_close, and *out (when not NULL) the stats as the file was left: its last index block
 * and footer in in_file_bytes after a clean close. */
int tp_fwriter_close_stats(tp_fwriter **w, tp_fwriter_stats *out, err_msg *err);

/* ---- recording what a subscriber receives ---- */

/* A trace file written from a subscription (`synctop record`, the viewer's --record, a recording
 * relay): batches appended as they come, the first failure ending the recording, and, last, the
 * clocks of the hosts the subscriber measured (tp_sub_clock_notes). One thread appends (and
 * flushes, adds the clocks, closes); any thread may ask tp_recorder_failed and, with a queue,
 * tp_recorder_stats_get (then the stats as of the last batch the writer's thread finished). */
typedef struct tp_recorder tp_recorder;
struct tp_sub;

/* Creates the file (flags: TP_FW_OVERWRITE); NULL with the reason in err. */
tp_recorder *tp_recorder_open(const char *path, int flags, err_msg *err);
/* The same with a queue: with queue_bytes > 0, appends copy the batch into a queue of at most that
 * many bytes (one larger batch is taken alone) and a thread of the recorder's writes them, so that
 * the caller goes back to receiving at once; the caller waits only while the queue is full. A batch
 * the writer then refuses as malformed is given to on_refused (may be NULL), on that thread. */
typedef struct tp_recorder_opts {
    int flags;          /* TP_FW_OVERWRITE */
    size_t queue_bytes; /* 0: no queue, every call writes */
    void (*on_refused)(void *ctx, const void *batch, size_t len, const err_msg *why);
    void *ctx;
} tp_recorder_opts;
tp_recorder *tp_recorder_open_opts(const char *path, const tp_recorder_opts *o, err_msg *err);
/* Appends one batch. 0; ERR_MALFORMED: the batch was refused and nothing written, the recording goes
 * on; another negative code: the recording stopped there, and this and every later call return it
 * without writing, err saying why. With a queue: 0 once the batch is queued (waiting for room as
 * long as it takes), or the code that stopped the recording; refusals go to on_refused. */
int tp_recorder_append(tp_recorder *r, const void *batch, size_t len, err_msg *err);
/* As tp_recorder_append, but with a queue it waits at most timeout_ms for room (0: not at all),
 * then returns ERR_AGAIN with nothing queued. */
int tp_recorder_offer(tp_recorder *r, const void *batch, size_t len, int timeout_ms, err_msg *err);
/* With a queue, waits until everything queued was written (or dropped, after a failure); then the
 * stats are those of all of it. Without one, returns at once. */
void tp_recorder_drain(tp_recorder *r);
/* Ends the recording here, as a failed append does, for the reason why. */
void tp_recorder_stop(tp_recorder *r, const err_msg *why);
/* Writes what is buffered; a failure ends the recording, as in tp_recorder_append. */
int tp_recorder_flush(tp_recorder *r, err_msg *err);
/* Whether the recording stopped on a failure. */
int tp_recorder_failed(const tp_recorder *r);
/* 0 while the recording goes on, else the code that stopped it, err saying why (any thread). */
int tp_recorder_error(const tp_recorder *r, err_msg *err);
void tp_recorder_stats_get(const tp_recorder *r, tp_fwriter_stats *out);
/* Appends the clocks of the hosts that sub measured as the file's last batch: how many hosts (0: none
 * answered, nothing written), or, when there are some, the negative code that stopped the recording
 * (now or before; err says why). */
int tp_recorder_add_clocks(tp_recorder *r, const struct tp_sub *sub, err_msg *err);
/* A note at the end of the file (TP_PRODUCER_NOTES, a TP_K_DROPS of TP_DROP_RECORDER) of the
 * batches, and their events, received and not written; nothing when batches is 0. Returns 0, or an
 * ERR_* code (the recording failed: err says why). */
int tp_recorder_add_unwritten(tp_recorder *r, uint64_t batches, uint64_t events, err_msg *err);
/* Closes the file and frees r; 0, or ERR_IO when the recording had stopped (err says why), or the
 * error that closing met. *r is NULL after; NULL does nothing. */
int tp_recorder_close(tp_recorder **r, err_msg *err);
/* The same, and *out (when not NULL) the writer's stats as the file was left (tp_fwriter_close_stats):
 * what the file holds, also after a failure. */
int tp_recorder_close_stats(tp_recorder **r, tp_fwriter_stats *out, err_msg *err);

/* ---- reader ---- */

typedef struct tp_freader tp_freader;

typedef struct tp_findex_entry {
    uint64_t offset; /* of the batch header in the file */
    uint64_t producer;
    uint64_t seq;
    uint64_t t_min, t_max;
    uint32_t size; /* header + stored payload */
    uint32_t n_events;
    uint32_t flags; /* the batch's flags (TP_BF_KEYFRAME...) */
    uint32_t pad0;
} tp_findex_entry;

/* Problems met while opening or reading: a damaged region, a cut-short tail. */
typedef struct tp_fproblem {
    uint64_t offset;
    uint64_t length; /* bytes skipped */
    char what[160];
} tp_fproblem;

/* Opens a trace file: checks the header, loads the index (footer chain, else a header scan).
 * Damaged regions found on the way are recorded (tp_freader_problems), not fatal. */
tp_freader *tp_freader_open(const char *path, err_msg *err);
enum { TP_FR_SCAN = 1 << 0 }; /* ignore the footer: index by hopping from header to header */
tp_freader *tp_freader_open_flags(const char *path, int flags, err_msg *err);
/* The same for a file already open at fd (named path in messages), which the reader takes: it is
 * closed with the reader, or at once when opening fails. */
tp_freader *tp_freader_open_fd(int fd, const char *path, int flags, err_msg *err);
void tp_freader_close(tp_freader **r);

/* 1 when the index came from the footer chain, 0 when the file was scanned. */
int tp_freader_indexed(const tp_freader *r);
uint64_t tp_freader_created(const tp_freader *r); /* CLOCK_REALTIME ns at creation */
uint64_t tp_freader_size(const tp_freader *r);    /* bytes in the file when opened */
size_t tp_freader_index_blocks(const tp_freader *r);

size_t tp_freader_count(const tp_freader *r); /* batches (index blocks excluded) */
const tp_findex_entry *tp_freader_entry(const tp_freader *r, size_t i);
/* Whether the file was closed cleanly (footer present and valid). */
int tp_freader_complete(const tp_freader *r);
size_t tp_freader_problem_count(const tp_freader *r);
const tp_fproblem *tp_freader_problem(const tp_freader *r, size_t i);

/* Reads batch i into out (header + stored payload, as written) and checks it. A batch damaged
 * since the index was made is reported (ERR_CHECKSUM/ERR_MALFORMED) and added to the problems. A
 * released reader opens its file again first (tp_freader_reacquire). */
int tp_freader_read(tp_freader *r, size_t i, tp_buf *out, err_msg *err);

/* Closes the reader's descriptor while it is not read from, so that a job's thousands of files
 * need not hold one each: 1 released (or already), 0 kept (a file named by /dev or /proc, such as
 * standard input, cannot be found again by name). */
int tp_freader_release(tp_freader *r);
/* Opens a released reader's file again by its path: 0, or ERR_LIMIT (no descriptor left) or
 * ERR_IO (it cannot be opened, or it is no longer the file that was opened: another device or
 * inode, or shorter) with a message naming it. */
int tp_freader_reacquire(tp_freader *r, err_msg *err);

/* First batch i holding events whose t_max >= t (tp_freader_count when none; O(log n)), and the
 * keyframe k <= i of the same
 * producer to start decoding from (or 0 when the producer has none before i; the count when i is).
 * keyframe may be NULL. */
size_t tp_freader_seek(const tp_freader *r, uint64_t t, size_t *keyframe);

/* ---- helpers ---- */

/* The identity of a metadata record within its producer (process: pid; device: device; stream:
 * device, context, stream; thread: pid, tid; call site: id; frame: call site, index): a later record
 * with the same key replaces an earlier one. Keys sort processes, devices, streams, threads, then
 * each call site just before its frames. */
void tp_fmeta_key(const tp_record *r, uint64_t *k1, uint64_t *k2);

#ifdef __cplusplus
}
#endif
#endif
