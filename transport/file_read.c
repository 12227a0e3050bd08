/*
 * The trace-file reader (file.h): checks the file header, loads the index from the footer chain
 * when the file was closed cleanly and the chain holds together, else by hopping from batch header
 * to batch header, and reads batches on demand with pread.
 *
 * Nothing in the file is trusted. The chain is used only when its entries and blocks tile the file
 * exactly; a header scan that meets a damaged header resynchronises on the next batch magic whose
 * header checksum holds. Either way, damage is recorded as a problem (offset, length, what) and
 * never stops the reader: only a file whose own header is missing, foreign or newer is refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_format.h"
#include "io.h"

#define FR_MAX_PROBLEMS 4096
#define FR_RESYNC_CHUNK (1u << 20)

struct tp_freader {
    char *path;
    int fd;      /* -1 while released */
    dev_t dev;   /* the file opened: opened again by path, it must be the same */
    ino_t ino;
    uint64_t size;
    uint64_t created;
    int complete, indexed;
    size_t n_index_blocks;
    tp_findex_entry *ents;
    size_t n, cap;
    uint8_t *bad;      /* per entry: already reported as a problem */
    uint64_t *tmax_pm; /* prefix maximum of t_max, for seeking */
    size_t *kf;        /* keyframe to start from, per entry */
    tp_fproblem *probs;
    size_t n_probs, cap_probs;
    tp_dec dec;
    tp_buf buf;
};

static void add_problem(tp_freader *r, uint64_t off, uint64_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void add_problem(tp_freader *r, uint64_t off, uint64_t len, const char *fmt, ...) {
    if (r->n_probs >= FR_MAX_PROBLEMS)
        return;
    if (r->n_probs == r->cap_probs) {
        size_t cap = r->cap_probs ? r->cap_probs * 2 : 8;
        tp_fproblem *p = realloc(r->probs, cap * sizeof *p);
        if (p == NULL)
            return;
        r->probs = p;
        r->cap_probs = cap;
    }
    tp_fproblem *p = &r->probs[r->n_probs++];
    p->offset = off;
    p->length = len;
    if (r->n_probs == FR_MAX_PROBLEMS) {
        snprintf(p->what, sizeof p->what, "too many problems: the rest are not listed");
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->what, sizeof p->what, fmt, ap);
    va_end(ap);
}

static int add_entry(tp_freader *r, const tp_findex_entry *e) {
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        tp_findex_entry *p = realloc(r->ents, cap * sizeof *p);
        if (p == NULL)
            return ERR_NOMEM;
        r->ents = p;
        r->cap = cap;
    }
    r->ents[r->n++] = *e;
    return 0;
}

static tp_findex_entry entry_of(const tp_batch_hdr *h, uint64_t off) {
    return (tp_findex_entry){.offset = off, .producer = h->producer, .seq = h->seq, .t_min = h->t_min,
                             .t_max = h->t_max, .size = (uint32_t)tp_batch_size(h), .n_events = h->n_events,
                             .flags = h->flags};
}

/* ---- file header ---- */

static int fr_header(tp_freader *r, err_msg *err) {
    uint8_t b[TP_FILE_HDR_SIZE];
    ssize_t n = cm_read_full(r->fd, b, sizeof b, 0);
    if (n < 0)
        return err_set(err, ERR_IO, "%s: cannot read: %s", r->path, strerror(errno));
    if (n == 0)
        return err_set(err, ERR_TRUNCATED, "%s: empty file: not a synctop trace file (or one cut short "
                          "before its header)", r->path);
    size_t cmp = (size_t)n < 16 ? (size_t)n : 16;
    if (memcmp(b, TP_FILE_MAGIC, cmp) != 0)
        return err_set(err, ERR_MALFORMED, "%s: not a synctop trace file", r->path);
    if ((size_t)n < sizeof b)
        return err_set(err, ERR_TRUNCATED, "%s: trace file header cut short (%zd of %d bytes)", r->path, n,
                          TP_FILE_HDR_SIZE);
    tp__fhdr h;
    memcpy(&h, b, sizeof h);
    /* The version before the checksum: a newer format may cover other bytes. */
    if (h.version > TP_FILE_VERSION)
        return err_set(err, ERR_VERSION,
                          "%s: trace file version %u is newer than this synctop understands (version %d): "
                          "use a newer synctop",
                          r->path, h.version, TP_FILE_VERSION);
    if (h.version == 0 || h.hdr_size != TP_FILE_HDR_SIZE)
        return err_set(err, ERR_MALFORMED, "%s: damaged trace file header (version %u, header size %u)",
                          r->path, h.version, h.hdr_size);
    if (tp_crc32(0, b, TP__FHDR_CRC_SPAN) != h.hdr_crc)
        add_problem(r, 0, TP_FILE_HDR_SIZE, "file header checksum mismatch (its creation time may be wrong)");
    r->created = h.created_ns;
    return 0;
}

/* ---- footer and index chain ---- */

typedef struct fr_block {
    uint64_t off, size;
} fr_block;

/* Loads the index chain that ends at f; returns 0, or ERR_* with the offset and reason in *at/why. */
/* Reads the index block at off (before limit) into ents[*pos - its entries, *pos) and says where
 * the block before it lies (*prev, 0 at the first). */
static int chain_block(tp_freader *r, uint64_t off, uint64_t limit, tp_findex_entry *ents, size_t *pos,
                       fr_block *block, uint64_t *prev, err_msg *why) {
    if (off < TP_FILE_HDR_SIZE || off >= limit || limit - off < TP_BATCH_HDR_SIZE)
        return err_set(why, ERR_MALFORMED, "index block offset out of range");
    uint8_t hb[TP_BATCH_HDR_SIZE];
    tp_batch_hdr h;
    int rc;
    if (cm_read_full(r->fd, hb, sizeof hb, (int64_t)off) != (ssize_t)sizeof hb)
        return err_set(why, ERR_IO, "cannot read the index block");
    if ((rc = tp_batch_check_header(hb, sizeof hb, &h, why)) != 0)
        return rc;
    uint64_t size = tp_batch_size(&h);
    if (!(h.flags & TP_BF_INDEX) || size > limit - off)
        return err_set(why, ERR_MALFORMED, "not an index block");
    r->buf.len = 0;
    if ((rc = tp_buf_reserve(&r->buf, size)) != 0 ||
        cm_read_full(r->fd, r->buf.data, size, (int64_t)off) != (ssize_t)size)
        return err_set(why, rc ? rc : ERR_IO, "cannot read the index block");
    if ((rc = tp_dec_open(&r->dec, r->buf.data, size, why)) != 0)
        return rc;
    tp__fidx_head ih;
    if (r->dec.payload_len < sizeof ih)
        return err_set(why, ERR_MALFORMED, "index block too short");
    memcpy(&ih, r->dec.payload, sizeof ih);
    if (ih.entry_size != sizeof(tp_findex_entry) || ih.n_entries > *pos ||
        r->dec.payload_len != sizeof ih + (size_t)ih.n_entries * sizeof(tp_findex_entry) ||
        ih.first != *pos - ih.n_entries || ih.prev >= off)
        return err_set(why, ERR_MALFORMED, "index block does not fit the chain");
    *pos -= ih.n_entries;
    if (ih.n_entries)
        memcpy(ents + *pos, r->dec.payload + sizeof ih, (size_t)ih.n_entries * sizeof(tp_findex_entry));
    *block = (fr_block){off, size};
    *prev = ih.prev;
    return 0;
}

/* Batches and index blocks must tile the file from its header to its footer. */
static int chain_tiles(const tp_findex_entry *ents, size_t n, const fr_block *blocks, uint32_t count,
                       uint64_t footer_off, uint64_t *at, err_msg *why) {
    uint64_t cur = TP_FILE_HDR_SIZE;
    size_t ei = 0;
    for (uint32_t b = 0; b < count; b++) {
        for (; ei < n && ents[ei].offset < blocks[b].off; ei++) {
            const tp_findex_entry *e = &ents[ei];
            if (e->offset != cur || e->size < TP_BATCH_HDR_SIZE ||
                e->size > TP_BATCH_HDR_SIZE + (uint64_t)TP_BATCH_MAX_PAYLOAD || (e->flags & TP_BF_INDEX) ||
                (e->flags & ~(uint32_t)TP_BF_KNOWN_) || e->t_min > e->t_max) {
                *at = e->offset;
                return err_set(why, ERR_MALFORMED, "index entry %zu does not match the file's layout", ei);
            }
            cur += e->size;
        }
        if (blocks[b].off != cur) {
            *at = blocks[b].off;
            return err_set(why, ERR_MALFORMED, "index entries do not match the file's layout");
        }
        cur += blocks[b].size;
    }
    if (ei != n || cur != footer_off)
        return err_set(why, ERR_MALFORMED, "index entries do not match the file's layout");
    return 0;
}

/* And each entry says what its batch's own header says: the headers are the truth. One small read
 * per batch, far less than reading the batches. */
static int chain_matches_headers(tp_freader *r, const tp_findex_entry *ents, size_t n, uint64_t *at,
                                 err_msg *why) {
    for (size_t i = 0; i < n; i++) {
        const tp_findex_entry *e = &ents[i];
        uint8_t hb[TP_BATCH_HDR_SIZE];
        tp_batch_hdr h;
        if (cm_read_full(r->fd, hb, sizeof hb, (int64_t)e->offset) != (ssize_t)sizeof hb ||
            tp_batch_check_header(hb, sizeof hb, &h, NULL) != 0)
            continue; /* a damaged batch: reading it says so */
        if (h.producer != e->producer || h.seq != e->seq || tp_batch_size(&h) != e->size || h.flags != e->flags ||
            h.n_events != e->n_events || h.t_min != e->t_min || h.t_max != e->t_max) {
            *at = e->offset;
            return err_set(why, ERR_MALFORMED, "index entry %zu does not match its batch's header", i);
        }
    }
    return 0;
}

static int fr_chain(tp_freader *r, const tp__ffooter *f, uint64_t footer_off, uint64_t *at, err_msg *why) {
    const uint64_t most = footer_off / TP_BATCH_HDR_SIZE; /* every batch takes at least a header */
    *at = footer_off;
    if (f->n_entries > most || f->n_index_blocks == 0 || f->n_index_blocks > most)
        return err_set(why, ERR_MALFORMED, "footer lists %llu batches and %u index blocks, more than the "
                          "file can hold", (unsigned long long)f->n_entries, f->n_index_blocks);
    size_t n = (size_t)f->n_entries, pos = n;
    tp_findex_entry *ents = malloc((n ? n : 1) * sizeof *ents);
    fr_block *blocks = malloc(f->n_index_blocks * sizeof *blocks);
    int rc = 0;
    if (ents == NULL || blocks == NULL) {
        rc = err_set(why, ERR_NOMEM, "out of memory for the index");
        goto out;
    }
    uint64_t off = f->index_offset, limit = footer_off;
    uint32_t count = 0;
    while (off != 0) {
        *at = off;
        if (count == f->n_index_blocks) {
            rc = err_set(why, ERR_MALFORMED, "more index blocks than the footer says");
            goto out;
        }
        uint64_t prev = 0;
        if ((rc = chain_block(r, off, limit, ents, &pos, &blocks[f->n_index_blocks - 1 - count], &prev, why)) != 0)
            goto out;
        count++;
        limit = off;
        off = prev;
    }
    if (count != f->n_index_blocks || pos != 0) {
        rc = err_set(why, ERR_MALFORMED, "the chain holds %u index blocks and %zu batches fewer than the "
                        "footer says", f->n_index_blocks - count, pos);
        goto out;
    }
    if ((rc = chain_tiles(ents, n, blocks, count, footer_off, at, why)) != 0 ||
        (rc = chain_matches_headers(r, ents, n, at, why)) != 0)
        goto out;
    free(r->ents);
    r->ents = ents;
    r->n = r->cap = n;
    ents = NULL;
    r->n_index_blocks = count;
out:
    free(ents);
    free(blocks);
    return rc;
}

/* Looks for a valid footer (*end gets where the batches end) and, unless told to scan, loads the
 * index from its chain; returns 1 when the index came from the chain. */
static int fr_footer(tp_freader *r, int use_chain, uint64_t *end) {
    tp__ffooter f;
    if (r->size < TP_FILE_HDR_SIZE + TP__FOOTER_SIZE ||
        cm_read_full(r->fd, &f, sizeof f, (int64_t)(r->size - sizeof f)) != (ssize_t)sizeof f ||
        memcmp(f.magic, TP__FOOTER_MAGIC, sizeof f.magic) != 0)
        return 0;
    uint64_t footer_off = r->size - sizeof f;
    *end = footer_off;
    if (tp_crc32(0, &f, TP__FOOTER_CRC_SPAN) != f.crc) {
        add_problem(r, footer_off, sizeof f, "footer checksum mismatch: the file was scanned instead");
        return 0;
    }
    r->complete = 1;
    if (!use_chain)
        return 0;
    uint64_t at;
    err_msg why;
    if (fr_chain(r, &f, footer_off, &at, &why) != 0) {
        add_problem(r, at, 0, "index damaged (%.80s): the file was scanned instead", why.msg);
        return 0;
    }
    r->indexed = 1;
    return 1;
}

/* ---- header scan ---- */

/* The offset of the next valid batch header in [from, end), or end. */
static uint64_t fr_resync(tp_freader *r, uint64_t from, uint64_t end) {
    static const uint8_t magic[4] = {'S', 'T', 'B', '1'};
    uint8_t hb[TP_BATCH_HDR_SIZE];
    r->buf.len = 0;
    if (tp_buf_reserve(&r->buf, FR_RESYNC_CHUNK) != 0)
        return end;
    uint64_t at = from;
    while (end - at >= TP_BATCH_HDR_SIZE) {
        size_t want = end - at < FR_RESYNC_CHUNK ? (size_t)(end - at) : FR_RESYNC_CHUNK;
        ssize_t got = cm_read_full(r->fd, r->buf.data, want, (int64_t)at);
        if (got < (ssize_t)sizeof magic)
            return end;
        const uint8_t *p = r->buf.data, *lim = p + got;
        while ((p = memmem(p, (size_t)(lim - p), magic, sizeof magic)) != NULL) {
            uint64_t cand = at + (uint64_t)(p - r->buf.data);
            if (end - cand < TP_BATCH_HDR_SIZE)
                return end;
            if (cm_read_full(r->fd, hb, sizeof hb, (int64_t)cand) == (ssize_t)sizeof hb &&
                tp_batch_check_header(hb, sizeof hb, NULL, NULL) == 0)
                return cand;
            p++;
        }
        at += (uint64_t)got - (sizeof magic - 1); /* a magic may straddle two chunks */
    }
    return end;
}

static int fr_scan(tp_freader *r, uint64_t off, uint64_t end, err_msg *err) {
    uint8_t hb[TP_BATCH_HDR_SIZE];
    while (off < end) {
        uint64_t avail = end - off;
        if (avail < TP_BATCH_HDR_SIZE) {
            add_problem(r, off, avail, "the last %llu bytes hold no whole batch (file cut short)",
                        (unsigned long long)avail);
            break;
        }
        if (cm_read_full(r->fd, hb, sizeof hb, (int64_t)off) != (ssize_t)sizeof hb)
            return err_set(err, ERR_IO, "%s: cannot read at offset %llu: %s", r->path,
                              (unsigned long long)off, strerror(errno));
        tp_batch_hdr h;
        err_msg why;
        if (tp_batch_check_header(hb, sizeof hb, &h, &why) == 0) {
            uint64_t size = tp_batch_size(&h);
            if (size > avail) {
                add_problem(r, off, avail, "batch cut short: %llu of %llu bytes (producer %016llx, seq %llu)",
                            (unsigned long long)avail, (unsigned long long)size,
                            (unsigned long long)h.producer, (unsigned long long)h.seq);
                break;
            }
            if (h.flags & TP_BF_INDEX) {
                r->n_index_blocks++;
            } else {
                tp_findex_entry e = entry_of(&h, off);
                if (add_entry(r, &e) != 0)
                    return err_set(err, ERR_NOMEM, "%s: out of memory for the index", r->path);
            }
            off += size;
            continue;
        }
        uint64_t next = fr_resync(r, off + 1, end);
        add_problem(r, off, next - off, "damaged data (%.60s): skipped %llu bytes to %s", why.msg,
                    (unsigned long long)(next - off), next < end ? "the next batch" : "the end");
        off = next;
    }
    return 0;
}

/* ---- seeking ---- */

static int fr_build_seek(tp_freader *r) {
    size_t n = r->n ? r->n : 1;
    r->tmax_pm = malloc(n * sizeof *r->tmax_pm);
    r->kf = malloc(n * sizeof *r->kf);
    r->bad = calloc(n, 1);
    if (r->tmax_pm == NULL || r->kf == NULL || r->bad == NULL)
        return ERR_NOMEM;
    tp__fmap last_kf = {0}; /* producer -> keyframe index + 1 */
    uint64_t pm = 0;
    int rc = 0;
    for (size_t i = 0; i < r->n; i++) {
        const tp_findex_entry *e = &r->ents[i];
        if (e->n_events && e->t_max > pm)
            pm = e->t_max;
        r->tmax_pm[i] = pm;
        int found;
        uint32_t *v = tp__fmap_put(&last_kf, e->producer, 0, &found);
        if (v == NULL) {
            rc = ERR_NOMEM;
            break;
        }
        if (e->flags & TP_BF_KEYFRAME)
            *v = (uint32_t)(i + 1);
        r->kf[i] = *v ? *v - 1 : 0;
    }
    tp__fmap_free(&last_kf);
    return rc;
}

/* ---- public ---- */

tp_freader *tp_freader_open(const char *path, err_msg *err) { return tp_freader_open_flags(path, 0, err); }

tp_freader *tp_freader_open_flags(const char *path, int flags, err_msg *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block us here */
    if (fd < 0) {
        int e = errno;
        err_set(err, e == ENOENT ? ERR_NOENT : e == EACCES ? ERR_PERM : ERR_IO, "%s: cannot open: %s", path,
                   strerror(e));
        return NULL;
    }
    return tp_freader_open_fd(fd, path, flags, err);
}

tp_freader *tp_freader_open_fd(int fd, const char *path, int flags, err_msg *err) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        err_set(err, ERR_INVAL, "%s: not a regular file (a trace file is read by offsets)", path);
        close(fd);
        return NULL;
    }
    tp_freader *r = calloc(1, sizeof *r);
    if (r == NULL || (r->path = strdup(path)) == NULL) {
        free(r);
        close(fd);
        err_set(err, ERR_NOMEM, "%s: out of memory", path);
        return NULL;
    }
    r->fd = fd;
    r->dev = st.st_dev;
    r->ino = st.st_ino;
    r->size = (uint64_t)st.st_size;
    int rc = fr_header(r, err);
    if (rc == 0) {
        uint64_t end = r->size;
        if (!fr_footer(r, !(flags & TP_FR_SCAN), &end))
            rc = fr_scan(r, TP_FILE_HDR_SIZE, end, err);
    }
    if (rc == 0 && fr_build_seek(r) != 0)
        rc = err_set(err, ERR_NOMEM, "%s: out of memory for the index", path);
    if (rc) {
        tp_freader_close(&r);
        return NULL;
    }
    return r;
}

void tp_freader_close(tp_freader **rp) {
    tp_freader *r = rp ? *rp : NULL;
    if (r == NULL)
        return;
    if (r->fd >= 0)
        close(r->fd);
    free(r->path);
    free(r->ents);
    free(r->bad);
    free(r->tmax_pm);
    free(r->kf);
    free(r->probs);
    tp_dec_free(&r->dec);
    tp_buf_free(&r->buf);
    free(r);
    *rp = NULL;
}

size_t tp_freader_count(const tp_freader *r) { return r->n; }

const tp_findex_entry *tp_freader_entry(const tp_freader *r, size_t i) { return i < r->n ? &r->ents[i] : NULL; }

int tp_freader_complete(const tp_freader *r) { return r->complete; }
int tp_freader_indexed(const tp_freader *r) { return r->indexed; }
uint64_t tp_freader_created(const tp_freader *r) { return r->created; }
uint64_t tp_freader_size(const tp_freader *r) { return r->size; }
size_t tp_freader_index_blocks(const tp_freader *r) { return r->n_index_blocks; }
size_t tp_freader_problem_count(const tp_freader *r) { return r->n_probs; }

const tp_fproblem *tp_freader_problem(const tp_freader *r, size_t i) {
    return i < r->n_probs ? &r->probs[i] : NULL;
}

int tp_freader_release(tp_freader *r) {
    if (r->fd < 0)
        return 1;
    if (strncmp(r->path, "/dev/", 5) == 0 || strncmp(r->path, "/proc/", 6) == 0)
        return 0; /* standard input, a descriptor: not to be found again by name */
    close(r->fd);
    r->fd = -1;
    return 1;
}

int tp_freader_reacquire(tp_freader *r, err_msg *err) {
    if (r->fd >= 0)
        return 0;
    int fd = open(r->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return err_set(err, errno == EMFILE || errno == ENFILE ? ERR_LIMIT : ERR_IO, "%s: cannot open again: %s",
                       r->path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_dev != r->dev || st.st_ino != r->ino || (uint64_t)st.st_size < r->size) {
        close(fd);
        return err_set(err, ERR_IO, "%s: replaced or cut short since it was opened: not read", r->path);
    }
    r->fd = fd;
    return 0;
}

int tp_freader_read(tp_freader *r, size_t i, tp_buf *out, err_msg *err) {
    if (i >= r->n)
        return err_set(err, ERR_INVAL, "%s: no batch %zu (the file holds %zu)", r->path, i, r->n);
    int rc0 = tp_freader_reacquire(r, err);
    if (rc0 != 0)
        return rc0;
    const tp_findex_entry *e = &r->ents[i];
    out->len = 0;
    int rc = tp_buf_reserve(out, e->size);
    if (rc)
        return err_set(err, rc, "%s: out of memory for a batch of %u bytes", r->path, e->size);
    ssize_t got = cm_read_full(r->fd, out->data, e->size, (int64_t)e->offset);
    if (got < 0)
        return err_set(err, ERR_IO, "%s: cannot read at offset %llu: %s", r->path,
                          (unsigned long long)e->offset, strerror(errno));
    err_msg why;
    tp_batch_hdr h;
    if ((size_t)got < e->size) {
        rc = err_set(&why, ERR_TRUNCATED, "cut short (%zd of %u bytes): the file shrank", got, e->size);
    } else if ((rc = tp_batch_check_header(out->data, (size_t)got, &h, &why)) != 0) {
        /* why says what */
    } else if (h.producer != e->producer || h.seq != e->seq || tp_batch_size(&h) != e->size ||
               h.flags != e->flags || h.n_events != e->n_events || h.t_min != e->t_min || h.t_max != e->t_max) {
        rc = err_set(&why, ERR_MALFORMED, "header does not match the index");
    } else if (tp_crc32(0, out->data + TP_BATCH_HDR_SIZE, h.stored_size) != h.payload_crc) {
        rc = err_set(&why, ERR_CHECKSUM, "payload checksum mismatch");
    }
    if (rc) {
        if (!r->bad[i]) {
            r->bad[i] = 1;
            add_problem(r, e->offset, e->size, "damaged batch: %.120s", why.msg);
        }
        return err_set(err, rc, "%s: batch at offset %llu: %s", r->path, (unsigned long long)e->offset,
                          why.msg);
    }
    out->len = e->size;
    return 0;
}

size_t tp_freader_seek(const tp_freader *r, uint64_t t, size_t *keyframe) {
    size_t lo = 0, hi = r->n; /* first i with tmax_pm[i] >= t */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->tmax_pm[mid] >= t)
            hi = mid;
        else
            lo = mid + 1;
    }
    if (keyframe)
        *keyframe = lo < r->n ? r->kf[lo] : r->n;
    return lo;
}
