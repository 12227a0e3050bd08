/*
 * The trace-file writer (file.h): appends checked, compressed batches through a buffer, writes an
 * index block every few batches and a footer at close, and keeps each producer's strings and
 * metadata so that it can write a synthetic keyframe for it every so many bytes.
 *
 * What it keeps per producer is bounded (FW_MAX_*): a producer past the bounds is no longer tracked
 * and gets no more keyframes (a keyframe that lacked names would be a lie); its batches are still
 * written. Within the bounds a keyframe always fits in one batch.
 *
 * The first write error is sticky: every later call returns it, and close reports it. What the file
 * holds is counted apart from what was appended: each batch counts once its last byte was written,
 * and a write that fails halfway leaves the file cut back to the end of its last whole batch, so
 * the counts say what a reader finds.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "file_format.h"
#include "grow.h"
#include "io.h"

#define FW_MAX_STRING_BYTES (32u << 20) /* per producer */
#define FW_MAX_STRINGS (1u << 20)       /* per producer */
#define FW_MAX_META (256u << 10)        /* metadata records per producer */
#define FW_MAX_PRODUCERS 4096u
#define FW_MAX_TRACKED_BYTES (256u << 20) /* all producers together */

typedef struct fw_string {
    uint32_t id, len;
    size_t off; /* in the producer's arena */
} fw_string;

typedef struct fw_meta {
    uint64_t k1, k2;
    tp_record rec;
} fw_meta;

typedef struct fw_producer {
    uint64_t id;
    uint64_t last_seq;
    uint64_t kf_off; /* where its last keyframe (or first batch) starts */
    uint64_t batches;
    int untracked;
    size_t tracked_bytes;
    tp_buf arena;
    fw_string *strs;
    size_t n_strs, cap_strs;
    tp__fmap str_map; /* id -> index in strs */
    fw_meta *meta;
    size_t n_meta, cap_meta;
    tp__fmap meta_map; /* key -> index in meta */
    uint64_t drop_records[TP_DROP_MAX_], drop_batches[TP_DROP_MAX_];
} fw_producer;

/* An appended batch still in the write buffer: where it ends in the file, its events. */
typedef struct fw_mark {
    uint64_t end;
    uint32_t events;
    uint32_t counted; /* not synthetic: counted as `synctop info` counts batches */
} fw_mark;

struct tp_fwriter {
    char *path;
    int fd;
    int level;
    uint32_t index_every;
    uint64_t keyframe_bytes;
    size_t buf_cap;
    tp_buf buf;   /* bytes not yet written to fd */
    uint64_t off; /* logical end of the file, buffered bytes included */
    int failed;   /* sticky first error */
    err_msg failed_err;
    /* what the file holds */
    uint64_t durable; /* bytes written, to the end of a whole piece */
    fw_mark *marks;   /* appended batches not yet written, in file order */
    size_t n_marks, cap_marks;
    uint64_t put_end; /* where the last batch put (fw_put_batch) ends */
    /* index */
    tp_findex_entry *pending;
    size_t n_pending, cap_pending;
    uint64_t last_index_off;
    uint64_t n_indexed;
    uint32_t n_index_blocks;
    /* producers */
    fw_producer **prods;
    size_t n_prods, cap_prods;
    tp__fmap prod_map;
    size_t tracked_bytes;
    int too_many;
    /* scratch */
    tp_dec dec, kdec;
    tp_buf cbuf, kbuf;
    tp_fwriter_stats stats;
};

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

/* Records the first I/O error (errno e while doing `action`); every later call returns it. */
static int fw_fail(tp_fwriter *w, err_msg *err, const char *action, int e) {
    w->failed = ERR_IO;
    err_set(&w->failed_err, ERR_IO, "%s: %s offset %llu: %s", w->path, action,
               (unsigned long long)w->off, strerror(e));
    return err_set(err, ERR_IO, "%s", w->failed_err.msg);
}

static int fw_sticky(const tp_fwriter *w, err_msg *err) {
    return err_set(err, w->failed, "%s", w->failed_err.msg);
}

/* The appended batches that end at or before `upto` are in the file: counted, and forgotten. */
static void fw_settle(tp_fwriter *w, uint64_t upto) {
    size_t k = 0;
    for (; k < w->n_marks && w->marks[k].end <= upto; k++) {
        w->stats.in_file_batches += w->marks[k].counted;
        w->stats.in_file_events += w->marks[k].events;
        if (w->marks[k].end > w->durable)
            w->durable = w->marks[k].end;
    }
    if (k > 0 && k < w->n_marks)
        memmove(w->marks, w->marks + k, (w->n_marks - k) * sizeof *w->marks);
    w->n_marks -= k;
}

/* A write that failed (errno e) partway (a full disk): the whole batches before where it stopped
 * (the file's position: it is only ever appended to) stay and count; the file is cut back to the
 * end of the last of them, so that it holds no half batch (best effort: a reader skips one anyway). */
static int fw_fail_at(tp_fwriter *w, err_msg *err, const char *action, int e) {
    off_t reached = lseek(w->fd, 0, SEEK_CUR);
    fw_settle(w, reached > 0 ? (uint64_t)reached : 0);
    w->n_marks = 0;
    if (ftruncate(w->fd, (off_t)w->durable) != 0) {
        /* the half batch stays; readers skip it as a cut-short tail */
    }
    return fw_fail(w, err, action, e);
}

static int fw_drain(tp_fwriter *w, err_msg *err) {
    if (w->failed)
        return fw_sticky(w, err);
    if (w->buf.len && cm_write_full(w->fd, w->buf.data, w->buf.len) != 0)
        return fw_fail_at(w, err, "cannot write up to", errno);
    w->buf.len = 0;
    fw_settle(w, w->off);
    w->durable = w->off;
    return 0;
}

static int fw_write(tp_fwriter *w, const void *data, size_t n, err_msg *err) {
    if (w->failed)
        return fw_sticky(w, err);
    if (w->buf.len + n > w->buf_cap) {
        int rc = fw_drain(w, err);
        if (rc)
            return rc;
    }
    if (n >= w->buf_cap) {
        if (cm_write_full(w->fd, data, n) != 0)
            return fw_fail_at(w, err, "cannot write at", errno);
        w->durable = w->off + n;
    } else {
        memcpy(w->buf.data + w->buf.len, data, n);
        w->buf.len += n;
    }
    w->off += n;
    return 0;
}

/* ---- index ---- */

static int fw_index_block(tp_fwriter *w, err_msg *err) {
    tp__fidx_head ih = {.prev = w->last_index_off, .n_entries = (uint32_t)w->n_pending,
                        .entry_size = sizeof(tp_findex_entry), .first = w->n_indexed};
    size_t payload = sizeof ih + w->n_pending * sizeof(tp_findex_entry);
    tp_batch_hdr h = {.magic = TP_BATCH_MAGIC, .version = TP_BATCH_VERSION, .hdr_size = TP_BATCH_HDR_SIZE,
                      .flags = TP_BF_INDEX, .stored_size = (uint32_t)payload, .raw_size = (uint32_t)payload,
                      .seq = w->n_index_blocks};
    int have_span = 0;
    for (size_t i = 0; i < w->n_pending; i++) {
        const tp_findex_entry *e = &w->pending[i];
        if (e->n_events == 0)
            continue;
        if (!have_span || e->t_min < h.t_min)
            h.t_min = e->t_min;
        if (!have_span || e->t_max > h.t_max)
            h.t_max = e->t_max;
        have_span = 1;
    }
    w->kbuf.len = 0;
    int rc = tp_buf_reserve(&w->kbuf, TP_BATCH_HDR_SIZE + payload);
    if (rc)
        return err_set(err, rc, "%s: out of memory for an index block", w->path);
    uint8_t *p = w->kbuf.data;
    memcpy(p + TP_BATCH_HDR_SIZE, &ih, sizeof ih);
    if (w->n_pending)
        memcpy(p + TP_BATCH_HDR_SIZE + sizeof ih, w->pending, w->n_pending * sizeof(tp_findex_entry));
    h.payload_crc = tp_crc32(0, p + TP_BATCH_HDR_SIZE, payload);
    memcpy(p, &h, sizeof h);
    tp_batch_seal_header(p);
    w->kbuf.len = TP_BATCH_HDR_SIZE + payload;
    if ((rc = tp_batch_compress(w->kbuf.data, w->kbuf.len, w->level, &w->cbuf, err)) != 0)
        return rc;
    uint64_t at = w->off;
    if ((rc = fw_write(w, w->cbuf.data, w->cbuf.len, err)) != 0)
        return rc;
    w->last_index_off = at;
    w->n_indexed += w->n_pending;
    w->n_pending = 0;
    w->n_index_blocks++;
    w->stats.index_blocks++;
    return 0;
}

/* Compresses (unless it already is) and writes one checked batch, and lists it in the index. */
static int fw_put_batch(tp_fwriter *w, const uint8_t *batch, size_t len, err_msg *err) {
    tp_batch_hdr h;
    memcpy(&h, batch, sizeof h);
    if (!(h.flags & TP_BF_ZSTD)) {
        int rc = tp_batch_compress(batch, len, w->level, &w->cbuf, err);
        if (rc)
            return rc;
        batch = w->cbuf.data;
        len = w->cbuf.len;
        memcpy(&h, batch, sizeof h);
    }
    if (w->n_pending == w->cap_pending) {
        size_t cap = w->cap_pending ? w->cap_pending * 2 : 64;
        tp_findex_entry *p = realloc(w->pending, cap * sizeof *p);
        if (p == NULL)
            return err_set(err, ERR_NOMEM, "%s: out of memory for the index", w->path);
        w->pending = p;
        w->cap_pending = cap;
    }
    tp_findex_entry e = {.offset = w->off, .producer = h.producer, .seq = h.seq, .t_min = h.t_min,
                         .t_max = h.t_max, .size = (uint32_t)len, .n_events = h.n_events, .flags = h.flags};
    int rc = fw_write(w, batch, len, err);
    if (rc)
        return rc;
    w->put_end = w->off;
    w->pending[w->n_pending++] = e;
    if (w->n_pending >= w->index_every)
        return fw_index_block(w, err);
    return 0;
}

/* ---- producers: what a keyframe needs ---- */

static void fw_untrack(tp_fwriter *w, fw_producer *p) {
    if (p->untracked)
        return;
    p->untracked = 1;
    w->stats.untracked++;
    w->tracked_bytes -= p->tracked_bytes;
    p->tracked_bytes = 0;
    tp_buf_free(&p->arena);
    free(p->strs);
    free(p->meta);
    p->strs = NULL;
    p->meta = NULL;
    p->n_strs = p->cap_strs = p->n_meta = p->cap_meta = 0;
    tp__fmap_free(&p->str_map);
    tp__fmap_free(&p->meta_map);
}

/* Accounts for more bytes kept for p; 0 when within the bounds. */
static int fw_account(tp_fwriter *w, fw_producer *p, size_t more) {
    if (w->tracked_bytes + more > FW_MAX_TRACKED_BYTES)
        return ERR_LIMIT;
    p->tracked_bytes += more;
    w->tracked_bytes += more;
    return 0;
}

static fw_producer *fw_producer_get(tp_fwriter *w, uint64_t id) {
    int found;
    const uint32_t *v = tp__fmap_get(&w->prod_map, id, 0);
    if (v)
        return w->prods[*v];
    if (w->n_prods >= FW_MAX_PRODUCERS)
        return NULL;
    if (w->n_prods == w->cap_prods) {
        size_t cap = w->cap_prods ? w->cap_prods * 2 : 8;
        fw_producer **pp = realloc(w->prods, cap * sizeof *pp);
        if (pp == NULL)
            return NULL;
        w->prods = pp;
        w->cap_prods = cap;
    }
    fw_producer *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    uint32_t *slot = tp__fmap_put(&w->prod_map, id, 0, &found);
    if (slot == NULL) {
        free(p);
        return NULL;
    }
    *slot = (uint32_t)w->n_prods;
    p->id = id;
    w->prods[w->n_prods++] = p;
    w->stats.producers++;
    return p;
}

static int fw_track_string(tp_fwriter *w, fw_producer *p, uint32_t id, const char *s, uint32_t len) {
    int found;
    const uint32_t *v = tp__fmap_get(&p->str_map, id, 0);
    if (v) {
        fw_string *e = &p->strs[*v];
        if (e->len == len && memcmp(p->arena.data + e->off, s, len) == 0)
            return 0; /* re-sent by a keyframe */
    } else if (p->n_strs >= FW_MAX_STRINGS) {
        return ERR_LIMIT;
    }
    if (p->arena.len + len > FW_MAX_STRING_BYTES || fw_account(w, p, len + (v ? 0 : sizeof(fw_string))) != 0)
        return ERR_LIMIT;
    if (tp_buf_append(&p->arena, s, len) != 0)
        return ERR_NOMEM;
    if (v) {
        p->strs[*v].off = p->arena.len - len;
        p->strs[*v].len = len;
        return 0;
    }
    if (p->n_strs == p->cap_strs) {
        size_t cap = p->cap_strs ? p->cap_strs * 2 : 64;
        fw_string *ns = realloc(p->strs, cap * sizeof *ns);
        if (ns == NULL)
            return ERR_NOMEM;
        p->strs = ns;
        p->cap_strs = cap;
    }
    uint32_t *slot = tp__fmap_put(&p->str_map, id, 0, &found);
    if (slot == NULL)
        return ERR_NOMEM;
    *slot = (uint32_t)p->n_strs;
    p->strs[p->n_strs++] = (fw_string){.id = id, .len = len, .off = p->arena.len - len};
    return 0;
}

void tp_fmeta_key(const tp_record *r, uint64_t *k1, uint64_t *k2) {
    uint32_t kind = r->head.kind, a = 0, b = 0, c = 0;
    switch (kind) {
    case TP_K_PROCESS:
        a = r->process.pid;
        break;
    case TP_K_DEVICE:
        a = r->head.device;
        break;
    case TP_K_STREAM:
        a = r->head.device;
        b = r->stream.context;
        c = r->stream.stream;
        break;
    case TP_K_THREAD:
        a = r->thread.pid;
        b = r->thread.tid;
        break;
    case TP_K_CALLSITE:
        a = r->callsite.id;
        break;
    case TP_K_FRAME:
        kind = TP_K_CALLSITE; /* sorts with its call site, after it */
        a = r->frame.callsite;
        b = (uint32_t)r->frame.index + 1;
        c = 1;
        break;
    default:
        break;
    }
    *k1 = (uint64_t)kind << 32 | a;
    *k2 = (uint64_t)b << 32 | c;
}

static int fw_track_meta(tp_fwriter *w, fw_producer *p, const tp_record *r) {
    uint64_t k1, k2;
    int found;
    tp_fmeta_key(r, &k1, &k2);
    const uint32_t *v = tp__fmap_get(&p->meta_map, k1, k2);
    if (v) {
        memcpy(&p->meta[*v].rec, r, tp_kind_size(r->head.kind));
        return 0;
    }
    if (p->n_meta >= FW_MAX_META || fw_account(w, p, sizeof(fw_meta)) != 0)
        return ERR_LIMIT;
    if (p->n_meta == p->cap_meta) {
        size_t cap = p->cap_meta ? p->cap_meta * 2 : 32;
        fw_meta *nm = realloc(p->meta, cap * sizeof *nm);
        if (nm == NULL)
            return ERR_NOMEM;
        p->meta = nm;
        p->cap_meta = cap;
    }
    uint32_t *slot = tp__fmap_put(&p->meta_map, k1, k2, &found);
    if (slot == NULL)
        return ERR_NOMEM;
    *slot = (uint32_t)p->n_meta;
    fw_meta *m = &p->meta[p->n_meta++];
    memset(m, 0, sizeof *m);
    m->k1 = k1;
    m->k2 = k2;
    memcpy(&m->rec, r, tp_kind_size(r->head.kind));
    return 0;
}

/* Takes in what an opened batch (w->dec) adds to its producer's state. */
static void fw_track(tp_fwriter *w, fw_producer *p) {
    uint32_t id, len;
    const char *s;
    const tp_record *r;
    while (tp_dec_next_string(&w->dec, &id, &s, &len))
        if (!p->untracked && fw_track_string(w, p, id, s, len) != 0)
            fw_untrack(w, p);
    while ((r = tp_dec_next_record(&w->dec)) != NULL) {
        unsigned k = r->head.kind;
        if (TP_KIND_IS_META(k)) {
            if (!p->untracked && fw_track_meta(w, p, r) != 0)
                fw_untrack(w, p);
        } else if (k == TP_K_DROPS) {
            unsigned src = r->drops.source; /* checked by the decoder */
            w->stats.dropped_records += r->drops.records - p->drop_records[src];
            w->stats.dropped_batches += r->drops.batches - p->drop_batches[src];
            p->drop_records[src] = r->drops.records;
            p->drop_batches[src] = r->drops.batches;
        }
    }
}

static int cmp_string(const void *a, const void *b) {
    uint32_t x = ((const fw_string *)a)->id, y = ((const fw_string *)b)->id;
    return x < y ? -1 : x > y;
}

/* Keyframe order: the keys' order (tp_fmeta_key). */
static int cmp_meta(const void *a, const void *b) {
    const fw_meta *x = *(const fw_meta *const *)a, *y = *(const fw_meta *const *)b;
    if (x->k1 != y->k1)
        return x->k1 < y->k1 ? -1 : 1;
    return x->k2 < y->k2 ? -1 : x->k2 > y->k2;
}

/* Writes a synthetic keyframe for p: all its strings and metadata, no events. */
static int fw_keyframe(tp_fwriter *w, fw_producer *p, err_msg *err) {
    size_t str_bytes = 0, meta_bytes = 0;
    for (size_t i = 0; i < p->n_strs; i++)
        str_bytes += 8 + (size_t)p->strs[i].len;
    for (size_t i = 0; i < p->n_meta; i++)
        meta_bytes += tp_kind_size(p->meta[i].rec.head.kind);
    size_t payload = pad8(str_bytes) + meta_bytes;
    fw_string *strs = malloc((p->n_strs ? p->n_strs : 1) * sizeof *strs);
    const fw_meta **meta = malloc((p->n_meta ? p->n_meta : 1) * sizeof *meta);
    int rc = (strs && meta) ? tp_buf_reserve(&w->kbuf, TP_BATCH_HDR_SIZE + payload) : ERR_NOMEM;
    if (rc) {
        free(strs);
        free(meta);
        return err_set(err, rc, "%s: out of memory for a keyframe", w->path);
    }
    memcpy(strs, p->strs, p->n_strs * sizeof *strs);
    qsort(strs, p->n_strs, sizeof *strs, cmp_string);
    for (size_t i = 0; i < p->n_meta; i++)
        meta[i] = &p->meta[i];
    qsort(meta, p->n_meta, sizeof *meta, cmp_meta);

    uint8_t *out = w->kbuf.data, *q = out + TP_BATCH_HDR_SIZE;
    for (size_t i = 0; i < p->n_strs; i++) {
        memcpy(q, &strs[i].id, 4);
        memcpy(q + 4, &strs[i].len, 4);
        memcpy(q + 8, p->arena.data + strs[i].off, strs[i].len);
        q += 8 + strs[i].len;
    }
    memset(q, 0, pad8(str_bytes) - str_bytes);
    q += pad8(str_bytes) - str_bytes;
    for (size_t i = 0; i < p->n_meta; i++) {
        size_t sz = tp_kind_size(meta[i]->rec.head.kind);
        memcpy(q, &meta[i]->rec, sz);
        q += sz;
    }
    tp_batch_hdr h = {.magic = TP_BATCH_MAGIC, .version = TP_BATCH_VERSION, .hdr_size = TP_BATCH_HDR_SIZE,
                      .flags = TP_BF_KEYFRAME | TP_BF_SYNTHETIC, .stored_size = (uint32_t)payload,
                      .raw_size = (uint32_t)payload, .n_strings = (uint32_t)p->n_strs,
                      .n_records = (uint32_t)p->n_meta, .producer = p->id, .seq = p->last_seq,
                      .payload_crc = tp_crc32(0, out + TP_BATCH_HDR_SIZE, payload)};
    memcpy(out, &h, sizeof h);
    tp_batch_seal_header(out);
    w->kbuf.len = TP_BATCH_HDR_SIZE + payload;
    free(strs);
    free(meta);
    /* Everything in it was checked on the way in; the decoder has the last word all the same, so
     * that a keyframe can never be the one malformed batch in a file. */
    if (tp_dec_open(&w->kdec, w->kbuf.data, w->kbuf.len, NULL) != 0) {
        fw_untrack(w, p);
        return 0;
    }
    uint64_t at = w->off;
    if ((rc = fw_put_batch(w, w->kbuf.data, w->kbuf.len, err)) != 0)
        return rc;
    p->kf_off = at;
    w->stats.keyframes++;
    return 0;
}

/* Makes a new directory entry durable too (best effort). */
static void sync_parent_dir(const char *path) {
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else if ((size_t)(slash - path) < sizeof dir)
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    else
        return;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
}

/* ---- public ---- */

tp_fwriter *tp_fwriter_open(const char *path, int flags, err_msg *err) {
    tp_fwriter_opts o = {.flags = flags};
    return tp_fwriter_open_opts(path, &o, err);
}

tp_fwriter *tp_fwriter_open_opts(const char *path, const tp_fwriter_opts *opts, err_msg *err) {
    tp_fwriter_opts o = opts ? *opts : (tp_fwriter_opts){0};
    if (path == NULL || *path == '\0') {
        err_set(err, ERR_INVAL, "no trace file name given");
        return NULL;
    }
    int oflags = O_WRONLY | O_CREAT | O_CLOEXEC | ((o.flags & TP_FW_OVERWRITE) ? O_TRUNC : O_EXCL);
    int fd = open(path, oflags, 0644);
    if (fd < 0) {
        int e = errno;
        int code = e == EEXIST ? ERR_EXIST : e == EACCES || e == EPERM ? ERR_PERM : e == ENOENT ? ERR_NOENT : ERR_IO;
        if (e == EEXIST)
            err_set(err, code, "%s already exists; not overwriting it", path);
        else
            err_set(err, code, "%s: cannot create: %s", path, strerror(e));
        return NULL;
    }
    tp_fwriter *w = calloc(1, sizeof *w);
    if (w == NULL || (w->path = strdup(path)) == NULL) {
        free(w);
        close(fd);
        err_set(err, ERR_NOMEM, "%s: out of memory", path);
        return NULL;
    }
    w->fd = fd;
    w->level = o.zstd_level ? o.zstd_level : TP_FILE_ZSTD_LEVEL;
    w->index_every = o.index_every ? o.index_every : TP_FILE_INDEX_EVERY;
    w->keyframe_bytes = o.keyframe_bytes ? o.keyframe_bytes : TP_FILE_KEYFRAME_BYTES;
    w->buf_cap = o.buffer_bytes ? o.buffer_bytes : TP_FILE_BUFFER_BYTES;
    if (w->buf_cap < 4096)
        w->buf_cap = 4096;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    tp__fhdr fh = {.version = TP_FILE_VERSION, .hdr_size = TP_FILE_HDR_SIZE,
                   .created_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec,
                   .batch_version = TP_BATCH_VERSION, .index_every = w->index_every,
                   .keyframe_bytes = w->keyframe_bytes};
    memcpy(fh.magic, TP_FILE_MAGIC, sizeof fh.magic);
    fh.hdr_crc = tp_crc32(0, &fh, TP__FHDR_CRC_SPAN);
    int rc = tp_buf_reserve(&w->buf, w->buf_cap);
    if (rc) {
        err_set(err, rc, "%s: out of memory for the write buffer", path);
    } else if ((rc = fw_write(w, &fh, sizeof fh, err)) == 0) {
        rc = fw_drain(w, err); /* a file that exists is at least recognisable */
    }
    if (rc) {
        w->failed = rc; /* close writes nothing more */
        tp_fwriter_close(&w, NULL);
        if (!(o.flags & TP_FW_OVERWRITE))
            unlink(path); /* ours, and holding nothing */
        return NULL;
    }
    return w;
}

/* Notes where the batch just put ends, to count it once it is in the file (at once when it was
 * written straight through). */
static int fw_mark_batch(tp_fwriter *w, const tp_batch_hdr *h, err_msg *err) {
    if (CM_GROW(w->marks, w->cap_marks, w->n_marks + 1) != 0)
        return err_set(err, ERR_NOMEM, "%s: out of memory", w->path);
    int synthetic = (h->flags & TP_BF_SYNTHETIC) != 0;
    w->marks[w->n_marks++] = (fw_mark){.end = w->put_end, .events = synthetic ? 0 : h->n_events, .counted = !synthetic};
    fw_settle(w, w->off - w->buf.len);
    return 0;
}

int tp_fwriter_append(tp_fwriter *w, const void *batch, size_t len, err_msg *err) {
    if (w->failed)
        return fw_sticky(w, err);
    err_msg derr;
    int rc = tp_dec_open(&w->dec, batch, len, &derr);
    if (rc == 0 && len != tp_batch_size(&w->dec.hdr)) {
        rc = ERR_MALFORMED;
        err_set(&derr, rc, "%zu bytes after the batch", len - tp_batch_size(&w->dec.hdr));
    }
    if (rc == 0 && (w->dec.hdr.flags & TP_BF_INDEX)) {
        rc = ERR_MALFORMED;
        err_set(&derr, rc, "an index block (only the file writer makes those)");
    }
    if (rc) {
        w->stats.refused++;
        return err_set(err, rc == ERR_NOMEM ? rc : ERR_MALFORMED, "%s: batch refused: %s", w->path, derr.msg);
    }
    tp_batch_hdr h = w->dec.hdr;
    fw_producer *p = fw_producer_get(w, h.producer);
    if (p == NULL && !w->too_many) {
        w->too_many = 1; /* past FW_MAX_PRODUCERS: written, not tracked, counted once */
        w->stats.untracked++;
    }
    if (p && p->batches == 0)
        p->kf_off = w->off;
    if (p && p->batches > 0 && !p->untracked && !(h.flags & TP_BF_KEYFRAME) &&
        w->off - p->kf_off >= w->keyframe_bytes) {
        if ((rc = fw_keyframe(w, p, err)) != 0)
            return rc;
    }
    if (p) {
        fw_track(w, p);
        if (h.flags & TP_BF_KEYFRAME)
            p->kf_off = w->off;
        if (!(h.flags & TP_BF_SYNTHETIC))
            p->last_seq = h.seq;
        p->batches++;
    }
    if ((rc = fw_put_batch(w, batch, len, err)) != 0)
        return rc;
    w->stats.batches++;
    w->stats.events += h.n_events;
    w->stats.raw_bytes += TP_BATCH_HDR_SIZE + (uint64_t)h.raw_size;
    return fw_mark_batch(w, &h, err);
}

int tp_fwriter_flush(tp_fwriter *w, err_msg *err) { return fw_drain(w, err); }

int tp_fwriter_close(tp_fwriter **wp, err_msg *err) { return tp_fwriter_close_stats(wp, NULL, err); }

int tp_fwriter_close_stats(tp_fwriter **wp, tp_fwriter_stats *out, err_msg *err) {
    tp_fwriter *w = wp ? *wp : NULL;
    if (w == NULL)
        return 0;
    int rc = w->failed ? fw_sticky(w, err) : 0;
    if (rc == 0)
        rc = fw_index_block(w, err);
    if (rc == 0) {
        tp__ffooter f = {.index_offset = w->last_index_off, .n_entries = w->n_indexed,
                         .n_index_blocks = w->n_index_blocks};
        memcpy(f.magic, TP__FOOTER_MAGIC, sizeof f.magic);
        f.crc = tp_crc32(0, &f, TP__FOOTER_CRC_SPAN);
        rc = fw_write(w, &f, sizeof f, err);
    }
    if (rc == 0)
        rc = fw_drain(w, err);
    struct stat sb;
    int regular = fstat(w->fd, &sb) == 0 && S_ISREG(sb.st_mode); /* a device or a pipe has no disk to sync */
    if (rc == 0 && regular && fsync(w->fd) != 0)
        rc = fw_fail(w, err, "cannot sync to disk at", errno);
    if (close(w->fd) != 0 && rc == 0)
        rc = err_set(err, ERR_IO, "%s: close: %s", w->path, strerror(errno));
    if (rc == 0 && regular)
        sync_parent_dir(w->path);
    if (out != NULL)
        tp_fwriter_stats_get(w, out);
    free(w->marks);
    for (size_t i = 0; i < w->n_prods; i++) {
        fw_producer *p = w->prods[i];
        tp_buf_free(&p->arena);
        free(p->strs);
        free(p->meta);
        tp__fmap_free(&p->str_map);
        tp__fmap_free(&p->meta_map);
        free(p);
    }
    free(w->prods);
    tp__fmap_free(&w->prod_map);
    free(w->pending);
    tp_dec_free(&w->dec);
    tp_dec_free(&w->kdec);
    tp_buf_free(&w->buf);
    tp_buf_free(&w->cbuf);
    tp_buf_free(&w->kbuf);
    free(w->path);
    free(w);
    *wp = NULL;
    return rc;
}

void tp_fwriter_stats_get(const tp_fwriter *w, tp_fwriter_stats *out) {
    *out = w->stats;
    out->file_bytes = w->off;
    out->in_file_bytes = w->durable;
}
