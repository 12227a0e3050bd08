/*
 * The batch codec (codec.h): encoder with string interner and metadata log, bounds-checked
 * decoder, per-producer string tables, and zstd compression of payloads for trace files.
 *
 * The encoder's hot path is tp_enc_add, a copy into a growing buffer; tp_enc_finish lays out
 * header, strings and records once per batch. The decoder validates a whole batch in tp_dec_open
 * so its iterators are plain pointer walks that cannot run off the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "synctop/codec.h"
#include "strpool.h"

#define STRING_ID_MAX (1u << 24) /* ids are dense; this bounds tables built from untrusted input */
#define HDR_CRC_SPAN 68          /* header bytes covered by hdr_crc */

/* ---- small helpers ---- */

static uint32_t crc32_zlib(uint32_t crc, const void *data, size_t len) {
    return (uint32_t)crc32_z(crc, (const Bytef *)data, len);
}

static tp_crc32_fn crc32_impl = crc32_zlib;

void tp_crc32_use(tp_crc32_fn fn) {
    crc32_impl = fn ? fn : crc32_zlib;
}

uint32_t tp_crc32(uint32_t crc, const void *data, size_t len) {
    return crc32_impl(crc, data, len);
}

int tp_buf_reserve(tp_buf *b, size_t extra) {
    if (b->cap - b->len >= extra)
        return 0;
    size_t need = b->len + extra;
    if (need < b->len)
        return ERR_NOMEM;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < need) {
        if (cap > SIZE_MAX / 2)
            return ERR_NOMEM;
        cap *= 2;
    }
    uint8_t *p = realloc(b->data, cap);
    if (p == NULL)
        return ERR_NOMEM;
    b->data = p;
    b->cap = cap;
    return 0;
}

int tp_buf_append(tp_buf *b, const void *data, size_t len) {
    int rc = tp_buf_reserve(b, len);
    if (rc)
        return rc;
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    return 0;
}

void tp_buf_free(tp_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

/* ---- header ---- */

void tp_batch_seal_header(void *buf) {
    uint8_t *p = buf;
    uint32_t crc = tp_crc32(0, p, HDR_CRC_SPAN);
    memcpy(p + HDR_CRC_SPAN, &crc, sizeof crc);
}

int tp_batch_check_header(const void *buf, size_t len, tp_batch_hdr *out, err_msg *err) {
    tp_batch_hdr h = {0};
    if (len < TP_BATCH_HDR_SIZE)
        return err_set(err, ERR_TRUNCATED, "batch of %zu bytes is shorter than its %d-byte header",
                          len, TP_BATCH_HDR_SIZE);
    memcpy(&h, buf, sizeof h);
    if (h.magic != TP_BATCH_MAGIC)
        return err_set(err, ERR_MALFORMED, "not a synctop batch (bad magic 0x%08x)", h.magic);
    if (h.version > TP_BATCH_VERSION)
        return err_set(err, ERR_VERSION,
                          "batch format version %u is newer than this synctop understands (%u): "
                          "upgrade synctop",
                          h.version, TP_BATCH_VERSION);
    if (h.version == 0 || h.hdr_size != TP_BATCH_HDR_SIZE)
        return err_set(err, ERR_MALFORMED, "bad batch header (version %u, header size %u)",
                          h.version, h.hdr_size);
    uint32_t crc = tp_crc32(0, buf, HDR_CRC_SPAN);
    if (crc != h.hdr_crc)
        return err_set(err, ERR_CHECKSUM, "batch header checksum mismatch");
    if (h.flags & ~(uint32_t)TP_BF_KNOWN_)
        return err_set(err, ERR_MALFORMED, "batch has unknown flags 0x%x", h.flags);
    if (h.stored_size > TP_BATCH_MAX_PAYLOAD || h.raw_size > TP_BATCH_MAX_PAYLOAD)
        return err_set(err, ERR_MALFORMED, "batch payload too large (%u stored, %u raw)",
                          h.stored_size, h.raw_size);
    if (!(h.flags & TP_BF_ZSTD) && h.raw_size != h.stored_size)
        return err_set(err, ERR_MALFORMED, "uncompressed batch with raw size %u != stored %u",
                          h.raw_size, h.stored_size);
    if (h.n_events > h.n_records || h.n_records > h.raw_size / 8 || h.n_strings > h.raw_size / 8)
        return err_set(err, ERR_MALFORMED, "batch counts do not fit its size (%u strings, %u records, "
                          "%u events in %u bytes)", h.n_strings, h.n_records, h.n_events, h.raw_size);
    if (h.t_min > h.t_max)
        return err_set(err, ERR_MALFORMED, "batch time span is reversed");
    if (out)
        *out = h;
    return 0;
}

/* ---- encoder ---- */

struct tp_enc {
    uint64_t producer;
    uint64_t seq;
    size_t max_string_bytes, max_meta_records;
    cm_strpool strings; /* id 0 is never sent */
    /* metadata log and pending events */
    tp_buf meta;
    size_t n_meta;
    tp_buf events;
    size_t n_events;
    uint64_t t_min, t_max;
    /* delivery: what the next batch must carry */
    uint32_t str_unsent;  /* first string id not known delivered */
    size_t meta_unsent;   /* first metadata byte not known delivered */
    size_t meta_unsent_n; /* ... and its record number */
    uint32_t str_in_last; /* string id end of the last finished batch */
    size_t meta_in_last;  /* metadata byte end of the last finished batch */
    size_t meta_in_last_n;
    int keyframe;
    tp_enc_stats stats;
};

static uint64_t random_id(void) {
    uint64_t v = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &v, sizeof v) != (ssize_t)sizeof v)
            v = 0;
        close(fd);
    }
    if (v == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = ((uint64_t)ts.tv_sec * 1000000007ull) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    }
    return v ? v : 1;
}

tp_enc *tp_enc_new(const tp_enc_opts *opts) {
    tp_enc *e = calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    e->producer = opts && opts->producer ? opts->producer : random_id();
    e->max_string_bytes = opts && opts->max_string_bytes ? opts->max_string_bytes : (64u << 20);
    e->max_meta_records = opts && opts->max_meta_records ? opts->max_meta_records : (1u << 20);
    cm_strpool_init(&e->strings, e->max_string_bytes, STRING_ID_MAX);
    if (cm_strpool_reserve(&e->strings, 512) != 0) {
        free(e);
        return NULL;
    }
    e->str_unsent = 1;
    e->str_in_last = 1;
    return e;
}

void tp_enc_destroy(tp_enc **ep) {
    tp_enc *e = ep ? *ep : NULL;
    if (e == NULL)
        return;
    cm_strpool_free(&e->strings);
    tp_buf_free(&e->meta);
    tp_buf_free(&e->events);
    free(e);
    *ep = NULL;
}

uint64_t tp_enc_producer(const tp_enc *e) { return e->producer; }

uint32_t tp_enc_intern(tp_enc *e, const char *s, size_t len) {
    if (len > TP_STRING_MAX)
        len = TP_STRING_MAX;
    uint32_t end = cm_strpool_end(&e->strings), id;
    int rc = cm_strpool_intern(&e->strings, s, len, &id);
    if (rc == ERR_LIMIT)
        e->stats.strings_refused++;
    if (rc != 0 || id < end)
        return id;
    e->stats.strings++;
    e->stats.string_bytes += len;
    return id;
}

uint32_t tp_enc_intern_cstr(tp_enc *e, const char *s) { return s ? tp_enc_intern(e, s, strlen(s)) : 0; }

int tp_enc_add(tp_enc *e, const void *record) {
    const tp_head *h = record;
    size_t size = tp_kind_size(h->kind);
    if (size == 0)
        return ERR_INVAL;
    if (TP_KIND_IS_META(h->kind)) {
        if (e->n_meta >= e->max_meta_records)
            return ERR_LIMIT;
        int rc = tp_buf_append(&e->meta, record, size);
        if (rc)
            return rc;
        e->n_meta++;
        e->stats.meta_records++;
        return 0;
    }
    if (e->events.cap - e->events.len < size && tp_buf_reserve(&e->events, size) != 0)
        return ERR_NOMEM;
    memcpy(e->events.data + e->events.len, record, size);
    e->events.len += size;
    /* A span that ends before it starts (a clock step, a producer bug) is clamped to an instant:
     * decoders reject reversed spans. */
    tp_record *r = (tp_record *)(void *)(e->events.data + e->events.len - size);
    uint64_t start, end;
    tp_record_span(r, &start, &end);
    if (end < start) {
        end = start;
        if (h->kind != TP_K_CLOCK && h->kind != TP_K_DROPS)
            r->kernel.end = start;
    }
    if (e->n_events == 0) {
        e->t_min = start;
        e->t_max = end;
    } else {
        if (start < e->t_min)
            e->t_min = start;
        if (end > e->t_max)
            e->t_max = end;
    }
    e->n_events++;
    return 0;
}


size_t tp_enc_pending(const tp_enc *e) { return e->n_events + (e->n_meta - e->meta_unsent_n); }

size_t tp_enc_pending_bytes(const tp_enc *e) {
    size_t str_bytes = 0;
    uint32_t end = cm_strpool_end(&e->strings);
    if (e->str_unsent < end)
        str_bytes = 8u * (end - e->str_unsent) + cm_strpool_text_from(&e->strings, e->str_unsent);
    return pad8(str_bytes) + (e->meta.len - e->meta_unsent) + e->events.len;
}

void tp_enc_keyframe(tp_enc *e) { e->keyframe = 1; }

int tp_enc_finish(tp_enc *e, tp_buf *out) { return tp_enc_finish_flags(e, 0, out); }

int tp_enc_finish_flags(tp_enc *e, uint32_t flags, tp_buf *out) {
    if (flags & ~(uint32_t)(TP_BF_END | TP_BF_SYNTHETIC))
        return ERR_INVAL;
    uint32_t s0 = e->keyframe ? 1 : e->str_unsent;
    size_t m0 = e->keyframe ? 0 : e->meta_unsent;
    size_t m0_n = e->keyframe ? 0 : e->meta_unsent_n;
    uint32_t end = cm_strpool_end(&e->strings);
    size_t n_str = end - s0;
    size_t str_bytes = 0;
    if (n_str)
        str_bytes = 8 * n_str + cm_strpool_text_from(&e->strings, s0);
    size_t payload = pad8(str_bytes) + (e->meta.len - m0) + e->events.len;
    size_t n_records = (e->n_meta - m0_n) + e->n_events;
    if (payload > TP_BATCH_MAX_PAYLOAD)
        return ERR_LIMIT;
    out->len = 0;
    int rc = tp_buf_reserve(out, TP_BATCH_HDR_SIZE + payload);
    if (rc)
        return rc;
    uint8_t *p = out->data + TP_BATCH_HDR_SIZE;
    for (uint32_t id = s0; id < end; id++) {
        uint32_t len = cm_strpool_len(&e->strings, id);
        memcpy(p, &id, 4);
        memcpy(p + 4, &len, 4);
        memcpy(p + 8, cm_strpool_str(&e->strings, id), len);
        p += 8 + len;
    }
    size_t pad = pad8(str_bytes) - str_bytes;
    memset(p, 0, pad);
    p += pad;
    if (e->meta.len > m0) {
        memcpy(p, e->meta.data + m0, e->meta.len - m0);
        p += e->meta.len - m0;
    }
    if (e->events.len)
        memcpy(p, e->events.data, e->events.len);

    tp_batch_hdr h = {
        .magic = TP_BATCH_MAGIC,
        .version = TP_BATCH_VERSION,
        .hdr_size = TP_BATCH_HDR_SIZE,
        .flags = flags | (e->keyframe ? TP_BF_KEYFRAME : 0),
        .stored_size = (uint32_t)payload,
        .raw_size = (uint32_t)payload,
        .n_strings = (uint32_t)n_str,
        .n_records = (uint32_t)n_records,
        .n_events = (uint32_t)e->n_events,
        .producer = e->producer,
        .seq = e->seq++,
        .t_min = e->n_events ? e->t_min : 0,
        .t_max = e->n_events ? e->t_max : 0,
        .payload_crc = tp_crc32(0, out->data + TP_BATCH_HDR_SIZE, payload),
    };
    memcpy(out->data, &h, sizeof h);
    tp_batch_seal_header(out->data);
    out->len = TP_BATCH_HDR_SIZE + payload;

    e->str_in_last = end;
    e->meta_in_last = e->meta.len;
    e->meta_in_last_n = e->n_meta;
    e->keyframe = 0;
    e->events.len = 0;
    e->n_events = 0;
    e->stats.batches++;
    e->stats.records += n_records;
    return 0;
}

void tp_enc_delivered(tp_enc *e, int delivered) {
    if (!delivered)
        return; /* the next batch starts from the same undelivered strings and metadata */
    e->str_unsent = e->str_in_last;
    e->meta_unsent = e->meta_in_last;
    e->meta_unsent_n = e->meta_in_last_n;
}

void tp_enc_stats_get(const tp_enc *e, tp_enc_stats *out) { *out = e->stats; }

/* ---- compression ---- */

int tp_batch_compress(const void *batch, size_t len, int level, tp_buf *out, err_msg *err) {
    tp_batch_hdr h = {0};
    int rc = tp_batch_check_header(batch, len, &h, err);
    if (rc)
        return rc;
    if (len < tp_batch_size(&h))
        return err_set(err, ERR_TRUNCATED, "batch cut short (%zu of %zu bytes)", len, tp_batch_size(&h));
    const uint8_t *payload = (const uint8_t *)batch + TP_BATCH_HDR_SIZE;
    out->len = 0;
    if ((h.flags & TP_BF_ZSTD) || h.stored_size < 64)
        return tp_buf_append(out, batch, tp_batch_size(&h));
    size_t bound = ZSTD_compressBound(h.stored_size);
    rc = tp_buf_reserve(out, TP_BATCH_HDR_SIZE + bound);
    if (rc)
        return rc;
    size_t n = ZSTD_compress(out->data + TP_BATCH_HDR_SIZE, bound, payload, h.stored_size, level);
    if (ZSTD_isError(n))
        return err_set(err, ERR_IO, "zstd: %s", ZSTD_getErrorName(n));
    if (n >= h.stored_size) {
        out->len = 0;
        return tp_buf_append(out, batch, tp_batch_size(&h));
    }
    h.flags |= TP_BF_ZSTD;
    h.stored_size = (uint32_t)n;
    h.payload_crc = tp_crc32(0, out->data + TP_BATCH_HDR_SIZE, n);
    memcpy(out->data, &h, sizeof h);
    tp_batch_seal_header(out->data);
    out->len = TP_BATCH_HDR_SIZE + n;
    return 0;
}

/* ---- string tables ---- */

#define STRTAB_PAGE 4096u

typedef struct strtab_ent {
    uint32_t off, len; /* len == UINT32_MAX: absent */
} strtab_ent;

struct tp_strtab {
    strtab_ent **pages; /* grown to the highest page used: a table costs what its ids need */
    size_t n_pages;
    tp_buf arena;       /* each string NUL-terminated */
    size_t count;
};

tp_strtab *tp_strtab_new(void) { return calloc(1, sizeof(tp_strtab)); }

void tp_strtab_destroy(tp_strtab **tp) {
    tp_strtab *t = tp ? *tp : NULL;
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->n_pages; i++)
        free(t->pages[i]);
    free(t->pages);
    tp_buf_free(&t->arena);
    free(t);
    *tp = NULL;
}

int tp_strtab_set(tp_strtab *t, uint32_t id, const char *s, uint32_t len) {
    if (id == 0 || id >= STRING_ID_MAX || len > TP_STRING_MAX)
        return ERR_INVAL;
    size_t pg = id / STRTAB_PAGE;
    if (pg >= t->n_pages) {
        size_t n = t->n_pages ? t->n_pages : 1;
        while (n <= pg)
            n *= 2;
        strtab_ent **np = realloc(t->pages, n * sizeof *np);
        if (np == NULL)
            return ERR_NOMEM;
        memset(np + t->n_pages, 0, (n - t->n_pages) * sizeof *np);
        t->pages = np;
        t->n_pages = n;
    }
    strtab_ent **page = &t->pages[pg];
    if (*page == NULL) {
        *page = malloc(STRTAB_PAGE * sizeof **page);
        if (*page == NULL)
            return ERR_NOMEM;
        for (uint32_t i = 0; i < STRTAB_PAGE; i++)
            (*page)[i].len = UINT32_MAX;
    }
    strtab_ent *ent = &(*page)[id % STRTAB_PAGE];
    /* Keyframes re-send strings: keep the stored copy when it is the same. */
    if (ent->len == len && memcmp(t->arena.data + ent->off, s, len) == 0)
        return 0;
    if (t->arena.len + len + 1 > UINT32_MAX)
        return ERR_LIMIT;
    int rc = tp_buf_reserve(&t->arena, (size_t)len + 1);
    if (rc)
        return rc;
    if (ent->len == UINT32_MAX)
        t->count++;
    ent->off = (uint32_t)t->arena.len;
    ent->len = len;
    memcpy(t->arena.data + t->arena.len, s, len);
    t->arena.data[t->arena.len + len] = '\0';
    t->arena.len += (size_t)len + 1;
    return 0;
}

const char *tp_strtab_get(const tp_strtab *t, uint32_t id, uint32_t *len) {
    if (id == 0 || id / STRTAB_PAGE >= t->n_pages || t->pages[id / STRTAB_PAGE] == NULL)
        return NULL;
    const strtab_ent *ent = &t->pages[id / STRTAB_PAGE][id % STRTAB_PAGE];
    if (ent->len == UINT32_MAX)
        return NULL;
    if (len)
        *len = ent->len;
    return (const char *)t->arena.data + ent->off;
}

size_t tp_strtab_count(const tp_strtab *t) { return t->count; }

/* ---- decoder ---- */

void tp_dec_free(tp_dec *d) {
    tp_buf_free(&d->scratch);
    if (d->zctx)
        ZSTD_freeDCtx(d->zctx);
    memset(d, 0, sizeof *d);
}

/* Checks one record's fields beyond its size. */
static int check_record(const tp_record *r, err_msg *err, uint32_t i) {
    unsigned k = r->head.kind, f = r->head.flags;
    unsigned allowed = 0;
    switch (k) {
    case TP_K_KERNEL:
        allowed = TP_F_GRAPH;
        break;
    case TP_K_MEMCPY:
        allowed = TP_F_ASYNC;
        if (r->memcpy.copy_kind >= TP_COPY_MAX_ || r->memcpy.src_kind >= TP_MEM_MAX_ ||
            r->memcpy.dst_kind >= TP_MEM_MAX_)
            return err_set(err, ERR_MALFORMED, "record %u: memcpy kinds out of range (%u, %u, %u)",
                              i, r->memcpy.copy_kind, r->memcpy.src_kind, r->memcpy.dst_kind);
        break;
    case TP_K_MEMSET:
        allowed = TP_F_ASYNC;
        if (r->memset.mem_kind >= TP_MEM_MAX_)
            return err_set(err, ERR_MALFORMED, "record %u: memset memory kind %u out of range", i,
                              r->memset.mem_kind);
        break;
    case TP_K_SYNC:
        if (r->sync.sync_type >= TP_SYNC_MAX_)
            return err_set(err, ERR_MALFORMED, "record %u: sync type %u out of range", i, r->sync.sync_type);
        break;
    case TP_K_API:
        allowed = TP_F_BLOCKING | TP_F_DRIVER | TP_F_LAUNCH;
        break;
    case TP_K_NVTX:
        if (f < TP_NVTX_INSTANT || f > TP_NVTX_END)
            return err_set(err, ERR_MALFORMED, "record %u: nvtx shape %u out of range", i, f);
        allowed = f;
        break;
    case TP_K_DROPS:
        if (r->drops.source == 0 || r->drops.source >= TP_DROP_MAX_)
            return err_set(err, ERR_MALFORMED, "record %u: drop source %u out of range", i, r->drops.source);
        break;
    case TP_K_STREAM:
        allowed = TP_F_NULL_STREAM | TP_F_SYNC_ID_NEG | TP_F_SYNC_ID_U32;
        break;
    case TP_K_PROCESS:
        allowed = TP_F_TS_ABSOLUTE;
        break;
    case TP_K_HOSTCLOCK:
        if (r->hostclock.host == 0)
            return err_set(err, ERR_MALFORMED, "record %u: host clock without a host", i);
        break;
    case TP_K_MODULE:
        if (r->module.build_id_len > TP_BUILD_ID_MAX)
            return err_set(err, ERR_MALFORMED, "record %u: build id of %u bytes (at most %d)", i,
                              r->module.build_id_len, TP_BUILD_ID_MAX);
        break;
    case TP_K_FRAME:
        if (f != TP_FRAME_NATIVE && f != TP_FRAME_PYTHON && f != TP_FRAME_OP)
            return err_set(err, ERR_MALFORMED, "record %u: frame kind %u out of range", i, f);
        allowed = f;
        break;
    default:
        break;
    }
    if (f & ~allowed)
        return err_set(err, ERR_MALFORMED, "record %u (%s): unknown flags 0x%x", i, tp_kind_name(k), f);
    return 0;
}

int tp_dec_open(tp_dec *d, const void *batch, size_t len, err_msg *err) {
    tp_batch_hdr h = {0};
    int rc = tp_batch_check_header(batch, len, &h, err);
    if (rc)
        return rc;
    d->payload = NULL;
    d->payload_len = 0;
    d->str_off = d->rec_off = 0;
    d->str_i = d->rec_i = 0;
    d->hdr = h;
    d->hdr.n_strings = d->hdr.n_records = d->hdr.n_events = 0; /* nothing to iterate until valid */
    if (len < tp_batch_size(&h))
        return err_set(err, ERR_TRUNCATED, "batch cut short: %zu of %zu bytes", len, tp_batch_size(&h));
    const uint8_t *stored = (const uint8_t *)batch + TP_BATCH_HDR_SIZE;
    if (tp_crc32(0, stored, h.stored_size) != h.payload_crc)
        return err_set(err, ERR_CHECKSUM, "batch payload checksum mismatch (producer %016llx, seq %llu)",
                          (unsigned long long)h.producer, (unsigned long long)h.seq);
    const uint8_t *p = stored;
    if (h.flags & TP_BF_ZSTD) {
        unsigned long long want = ZSTD_getFrameContentSize(stored, h.stored_size);
        if (want != h.raw_size)
            return err_set(err, ERR_MALFORMED, "compressed payload does not hold the %u bytes its header says",
                              h.raw_size);
        d->scratch.len = 0;
        if ((rc = tp_buf_reserve(&d->scratch, h.raw_size ? h.raw_size : 1)) != 0)
            return rc;
        if (d->zctx == NULL && (d->zctx = ZSTD_createDCtx()) == NULL)
            return ERR_NOMEM;
        size_t n = ZSTD_decompressDCtx(d->zctx, d->scratch.data, h.raw_size, stored, h.stored_size);
        if (ZSTD_isError(n) || n != h.raw_size)
            return err_set(err, ERR_MALFORMED, "compressed payload is damaged: %s",
                              ZSTD_isError(n) ? ZSTD_getErrorName(n) : "wrong size");
        p = d->scratch.data;
    } else if (((uintptr_t)stored & 7) != 0 && h.raw_size) {
        d->scratch.len = 0;
        if ((rc = tp_buf_append(&d->scratch, stored, h.raw_size)) != 0)
            return rc;
        p = d->scratch.data;
    }
    size_t plen = h.raw_size;
    if (h.flags & TP_BF_INDEX) {
        /* An index block's payload belongs to the file layer (file.h). */
        d->payload = p;
        d->payload_len = plen;
        return 0;
    }

    /* strings */
    size_t off = 0;
    for (uint32_t i = 0; i < h.n_strings; i++) {
        uint32_t id, slen;
        if (plen - off < 8)
            return err_set(err, ERR_MALFORMED, "string %u runs past the payload", i);
        memcpy(&id, p + off, 4);
        memcpy(&slen, p + off + 4, 4);
        if (id == 0 || id >= STRING_ID_MAX)
            return err_set(err, ERR_MALFORMED, "string %u has an invalid id %u", i, id);
        if (slen > TP_STRING_MAX || slen > plen - off - 8)
            return err_set(err, ERR_MALFORMED, "string %u (id %u) length %u runs past the payload", i, id, slen);
        off += 8 + (size_t)slen;
    }
    size_t rec_start = pad8(off);
    if (rec_start > plen)
        return err_set(err, ERR_MALFORMED, "string section runs past the payload");

    /* records */
    off = rec_start;
    uint32_t n_events = 0;
    uint64_t t_lo = UINT64_MAX, t_hi = 0;
    for (uint32_t i = 0; i < h.n_records; i++) {
        if (plen - off < sizeof(tp_head))
            return err_set(err, ERR_MALFORMED, "record %u runs past the payload", i);
        unsigned kind = p[off];
        size_t size = tp_kind_size(kind);
        if (size == 0)
            return err_set(err, ERR_MALFORMED, "record %u has unknown kind %u", i, kind);
        if (plen - off < size)
            return err_set(err, ERR_MALFORMED, "record %u (%s) runs past the payload", i, tp_kind_name(kind));
        const tp_record *r = (const tp_record *)(const void *)(p + off);
        if ((rc = check_record(r, err, i)) != 0)
            return rc;
        if (!TP_KIND_IS_META(kind)) {
            uint64_t s, e;
            tp_record_span(r, &s, &e);
            if (e < s)
                return err_set(err, ERR_MALFORMED, "record %u (%s) ends before it starts", i, tp_kind_name(kind));
            if (s < t_lo)
                t_lo = s;
            if (e > t_hi)
                t_hi = e;
            n_events++;
        }
        off += size;
    }
    if (off != plen)
        return err_set(err, ERR_MALFORMED, "%zu bytes after the last record", plen - off);
    if (n_events != h.n_events)
        return err_set(err, ERR_MALFORMED, "batch says %u events, holds %u", h.n_events, n_events);
    if (n_events && (t_lo < h.t_min || t_hi > h.t_max))
        return err_set(err, ERR_MALFORMED, "events fall outside the batch's time span");
    d->payload = p;
    d->payload_len = plen;
    d->rec_off = rec_start;
    d->hdr = h;
    return 0;
}

int tp_dec_next_string(tp_dec *d, uint32_t *id, const char **s, uint32_t *len) {
    if (d->str_i >= d->hdr.n_strings)
        return 0;
    memcpy(id, d->payload + d->str_off, 4);
    memcpy(len, d->payload + d->str_off + 4, 4);
    *s = (const char *)d->payload + d->str_off + 8;
    d->str_off += 8 + (size_t)*len;
    d->str_i++;
    return 1;
}

int tp_dec_string_copy(const tp_dec *d, uint32_t id, char *out, size_t outlen) {
    size_t off = 0;
    for (uint32_t i = 0; i < d->hdr.n_strings; i++) {
        uint32_t sid, len;
        memcpy(&sid, d->payload + off, 4);
        memcpy(&len, d->payload + off + 4, 4);
        if (sid == id) {
            if (len == 0 || len >= outlen)
                return -1;
            memcpy(out, d->payload + off + 8, len);
            out[len] = '\0';
            return (int)len;
        }
        off += 8 + (size_t)len;
    }
    return -1;
}

const tp_record *tp_dec_next_record(tp_dec *d) {
    if (d->rec_i >= d->hdr.n_records)
        return NULL;
    const tp_record *r = (const tp_record *)(const void *)(d->payload + d->rec_off);
    d->rec_off += tp_kind_size(r->head.kind);
    d->rec_i++;
    return r;
}

int tp_dec_load_strings(tp_dec *d, tp_strtab *t) {
    uint32_t id, len;
    const char *s;
    while (tp_dec_next_string(d, &id, &s, &len)) {
        int rc = tp_strtab_set(t, id, s, len);
        if (rc)
            return rc;
    }
    return 0;
}
