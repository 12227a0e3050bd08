/*
 * The batch codec: the unit synctop sends on the wire and stores in trace files.
 *
 * A batch is a 72-byte header followed by a payload. The payload holds the strings this batch
 * introduces (id, length, bytes; the section padded to 8 bytes) and then fixed-size records
 * (event.h), metadata first. On the wire the payload is raw; in trace files it is usually
 * zstd-compressed (TP_BF_ZSTD) and the same decoder reads both. The header carries a checksum of
 * itself and one of the stored payload, so a reader can tell a whole batch from a damaged one and
 * resynchronise on the next magic.
 *
 * The encoder (tp_enc) owns a producer's string interner and metadata log, so any batch can be made
 * a keyframe that carries everything a consumer needs to start from it. Strings get dense ids in
 * order; a batch carries the strings from the first one not yet delivered, so a batch that was
 * dropped (tp_enc_delivered(enc, 0)) has its strings re-sent with the next one.
 *
 * The decoder (tp_dec) trusts nothing: every length and count is bounds-checked, unknown kinds,
 * flags and enum values are rejected with a message, and a newer version is refused by name.
 */
#ifndef SYNCTOP_CODEC_H
#define SYNCTOP_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "synctop/error.h"
#include "synctop/event.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TP_BATCH_MAGIC 0x31425453u /* "STB1" as bytes */
#define TP_BATCH_VERSION 3 /* 2: TP_K_MODULE; 3: TP_K_HOSTCLOCK */
#define TP_BATCH_HDR_SIZE 72
#define TP_BATCH_MAX_PAYLOAD (64u << 20) /* 64 MiB, stored or raw */
#define TP_STRING_MAX 65535u             /* longest string in bytes */

/* Batch flags. */
enum {
    TP_BF_ZSTD = 1 << 0,     /* payload is zstd-compressed; raw_size is its inflated size */
    TP_BF_KEYFRAME = 1 << 1, /* carries all of the producer's strings and metadata */
    TP_BF_INDEX = 1 << 2,    /* a trace-file index block, not records (file.h) */
    TP_BF_SYNTHETIC = 1 << 3, /* made by a recorder, not the producer: not counted in sequence gaps */
    TP_BF_END = 1 << 4        /* the producer's last batch: it is shutting down */
};
#define TP_BF_KNOWN_ (TP_BF_ZSTD | TP_BF_KEYFRAME | TP_BF_INDEX | TP_BF_SYNTHETIC | TP_BF_END)

typedef struct tp_batch_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t hdr_size; /* TP_BATCH_HDR_SIZE */
    uint32_t flags;
    uint32_t stored_size; /* payload bytes following the header */
    uint32_t raw_size;    /* payload bytes once inflated (== stored_size when not compressed) */
    uint32_t n_strings;
    uint32_t n_records; /* metadata + events */
    uint32_t n_events;  /* records of event kinds */
    uint64_t producer;  /* random id chosen by the producer at start */
    uint64_t seq;       /* 0, 1, 2, ... per producer */
    uint64_t t_min, t_max; /* span of the events' timestamps; 0, 0 when there are none */
    uint32_t payload_crc;  /* CRC-32 of the stored payload */
    uint32_t hdr_crc;      /* CRC-32 of the 68 bytes before it */
} tp_batch_hdr;

/* Checks a batch header at buf (len bytes available, at least TP_BATCH_HDR_SIZE): magic, version,
 * sizes and header checksum. Does not look at the payload. Returns 0, ERR_TRUNCATED, ERR_VERSION
 * or ERR_MALFORMED/ERR_CHECKSUM with a message. */
int tp_batch_check_header(const void *buf, size_t len, tp_batch_hdr *out, err_msg *err);

/* Total size of the batch whose checked header is h. */
static inline size_t tp_batch_size(const tp_batch_hdr *h) {
    return (size_t)TP_BATCH_HDR_SIZE + h->stored_size;
}

/* Rewrites the checksum of a header in place (after a caller changed a field). */
void tp_batch_seal_header(void *buf);

/* CRC-32 (zlib's polynomial) over len bytes, continuing from crc (0 to start). */
uint32_t tp_crc32(uint32_t crc, const void *data, size_t len);

/* What tp_crc32 computes it with: zlib's crc32_z unless a program hands it another function that
 * gives the same CRC-32 (the command line hands it ISA-L's, several times faster, which the injected
 * tracer does not link). Called once, before any thread uses tp_crc32; NULL goes back to zlib's. */
typedef uint32_t (*tp_crc32_fn)(uint32_t crc, const void *data, size_t len);
void tp_crc32_use(tp_crc32_fn fn);

/* ---- growable byte buffer ---- */
typedef struct tp_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
} tp_buf;

int tp_buf_reserve(tp_buf *b, size_t extra); /* room for extra more bytes */
int tp_buf_append(tp_buf *b, const void *data, size_t len);
void tp_buf_free(tp_buf *b);

/* ---- encoder ---- */
typedef struct tp_enc tp_enc;

typedef struct tp_enc_opts {
    uint64_t producer;       /* 0: a random id */
    size_t max_string_bytes; /* bound on interned strings; 0: 64 MiB */
    size_t max_meta_records; /* bound on the metadata log; 0: 1M */
} tp_enc_opts;

tp_enc *tp_enc_new(const tp_enc_opts *opts); /* opts may be NULL */
void tp_enc_destroy(tp_enc **enc);
uint64_t tp_enc_producer(const tp_enc *enc);

/* Interns a string (len bytes, need not be NUL-terminated) and returns its id (>= 1). Returns 0 for
 * an empty string and, once the bound on string bytes is reached, for any new string (counted in
 * tp_enc_stats). Strings longer than TP_STRING_MAX are cut. */
uint32_t tp_enc_intern(tp_enc *enc, const char *s, size_t len);
uint32_t tp_enc_intern_cstr(tp_enc *enc, const char *s);

/* Adds a record to the batch being built (its kind decides its size). Metadata records are also
 * kept in the encoder's log for keyframes. Returns 0, ERR_INVAL for an unknown kind, or ERR_LIMIT
 * when the metadata log is full. */
int tp_enc_add(tp_enc *enc, const void *record);

/* Records in the batch being built, and its payload size so far. */
size_t tp_enc_pending(const tp_enc *enc);
size_t tp_enc_pending_bytes(const tp_enc *enc);

/* Makes the next batch a keyframe: all strings and all logged metadata. */
void tp_enc_keyframe(tp_enc *enc);

/* Builds the batch (header + raw payload) into out (replacing its content) with the next sequence
 * number, even when no record is pending. The encoder then waits for tp_enc_delivered. */
int tp_enc_finish(tp_enc *enc, tp_buf *out);
/* The same, with extra batch flags (TP_BF_END for the last batch). */
int tp_enc_finish_flags(tp_enc *enc, uint32_t flags, tp_buf *out);

/* Tells the encoder whether the last finished batch reached its consumers. When it did not, its
 * strings and metadata are carried by the next batch. */
void tp_enc_delivered(tp_enc *enc, int delivered);

typedef struct tp_enc_stats {
    uint64_t batches, records, strings, string_bytes, strings_refused, meta_records;
} tp_enc_stats;
void tp_enc_stats_get(const tp_enc *enc, tp_enc_stats *out);

/* ---- compression (trace files) ---- */

/* Makes a compressed copy of a raw batch into out (header rewritten: TP_BF_ZSTD, sizes, checksums).
 * A batch that would not shrink is copied as is. level: zstd level (1 is fast). */
int tp_batch_compress(const void *batch, size_t len, int level, tp_buf *out, err_msg *err);

/* ---- decoder ---- */

/* Strings of one producer, id -> bytes. A consumer keeps one per producer. */
typedef struct tp_strtab tp_strtab;
tp_strtab *tp_strtab_new(void);
void tp_strtab_destroy(tp_strtab **t);
int tp_strtab_set(tp_strtab *t, uint32_t id, const char *s, uint32_t len);
/* The string with that id, or NULL when unknown; *len gets its length. Not NUL-terminated by
 * contract (it is, in fact, terminated); names are untrusted: sanitize before display. */
const char *tp_strtab_get(const tp_strtab *t, uint32_t id, uint32_t *len);
size_t tp_strtab_count(const tp_strtab *t);

typedef struct tp_dec {
    tp_batch_hdr hdr;
    const uint8_t *payload; /* raw payload (inflated when it was compressed) */
    size_t payload_len;
    size_t str_off, rec_off; /* cursors */
    uint32_t str_i, rec_i;
    tp_buf scratch; /* inflated or realigned payload */
    void *zctx;     /* zstd decompression context, made on first use */
} tp_dec;

/* tp_dec must be zeroed before first use and released with tp_dec_free. */
void tp_dec_free(tp_dec *d);

/* Opens a whole batch (header + stored payload, exactly len bytes or more: the rest is ignored):
 * checks header and payload checksums, inflates a compressed payload, and validates every string
 * and record (sizes, kinds, flags, enum values, start <= end), so that the iterators below cannot
 * fail. Index blocks (TP_BF_INDEX) open with no records. Returns 0 or a negative ERR_* code with a
 * message in err. */
int tp_dec_open(tp_dec *d, const void *batch, size_t len, err_msg *err);

/* Next string of the open batch: returns 1 and fills id/s/len, or 0 at the end. */
int tp_dec_next_string(tp_dec *d, uint32_t *id, const char **s, uint32_t *len);
/* Copies the batch's string `id` into out as a C string, wherever the cursors are: its length, or
 * -1 when the batch has no such string, it is empty, or it does not fit outlen with its NUL. */
int tp_dec_string_copy(const tp_dec *d, uint32_t id, char *out, size_t outlen);
/* Next record: returns a pointer valid until the next tp_dec_open/tp_dec_free, or NULL at the end.
 * Strings come first: calling this skips any not yet read. */
const tp_record *tp_dec_next_record(tp_dec *d);

/* Convenience: store every string of the open batch in t. */
int tp_dec_load_strings(tp_dec *d, tp_strtab *t);

#ifdef __cplusplus
}
#endif
#endif
