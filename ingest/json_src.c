/*
 * The Kineto importer's input (json_src.h). The text reaches the scanner in pieces of up to
 * JSRC_CHUNK bytes, each in a slot with JSRC_HEAD bytes of room before it (where the scanner puts an
 * unfinished token of the piece before) and JSRC_PAD bytes after it (its 0 sentinel). A producer
 * fills the slots: memcpy or read(2) for plain text, ISA-L or zlib for gzip, on a thread of its own
 * for compressed inputs of THREAD_MIN bytes or more and gzip from a pipe (unless the reader's thread
 * is to inflate them: inline_gz), and plain ones of 4 pieces or more (unless the reader reads plain
 * text of that length itself: plain_here).
 *
 * zlib is the reference: whatever it does (which bytes of a damaged stream become text before the
 * error, the error's text and place, how many input bytes were taken) is what the importer does,
 * zlib reading as jsrc_zin says. ISA-L inflates the ordinary case several times faster; a piece it
 * inflated is handed out only once the next one is inflated too, and whenever ISA-L stops short
 * (damaged or cut data, a header it does not take, a failed check), zlib inflates again from the
 * start, quietly up to the text already handed out, and goes on from there. A pipe cannot be read
 * twice: zlib inflates it.
 */
#include "json_src.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <isa-l/crc.h>
#include <isa-l/igzip_lib.h>

#include "import.h"
#include "io.h"

#define SLOT       (JSRC_HEAD + JSRC_CHUNK + JSRC_PAD)
#define SLOT_WAKE  2           /* a waiting producer goes on once this many slots are free */
#define THREAD_MIN (64u << 10) /* compressed inputs from this size are inflated on a thread */
#define ISAL_IN    JSRC_CHUNK  /* compressed bytes read at a time for ISA-L (at least JSRC_CHUNK: head fits) */

enum { ENG_PLAIN, ENG_ISAL, ENG_ZLIB };
#define KTAKEOVER (-1000) /* from isal_fill: zlib must go on */
#define GIB       (1u << 30)

/* ---- zlib, reading as the importer always has ---- */

static int zin_fill(jsrc *s, err_msg *err) {
    jsrc_zin *z = &s->z;
    if (s->fd < 0 || z->in_eof || z->in_pos < z->in_len)
        return 0;
    ssize_t n = cm_read_some(s->fd, z->in, JSRC_CHUNK);
    if (n < 0)
        return err_set(err, ERR_IO, "%s: read: %s", s->name, strerror(errno));
    z->in_pos = 0;
    z->in_len = (size_t)n;
    z->read_bytes += (uint64_t)n;
    if (n == 0)
        z->in_eof = 1;
    return 0;
}

/* Takes up to max input bytes: *p, *n (0 at the end of the input). */
static int zin_take(jsrc *s, size_t max, const uint8_t **p, size_t *n, err_msg *err) {
    jsrc_zin *z = &s->z;
    if (s->fd < 0) {
        size_t k = s->mem_len - z->mem_pos;
        if (k > max)
            k = max;
        *p = s->mem + z->mem_pos;
        *n = k;
        z->mem_pos += k;
        z->read_bytes = z->mem_pos;
        return 0;
    }
    int rc = zin_fill(s, err);
    if (rc)
        return rc;
    size_t k = z->in_len - z->in_pos;
    if (k > max)
        k = max;
    *p = z->in + z->in_pos;
    *n = k;
    z->in_pos += k;
    return 0;
}

/* zlib from the start of the input. */
static int zlib_start(jsrc *s, err_msg *err) {
    jsrc_zin *z = &s->z;
    if (z->z_init)
        inflateEnd(&z->zs);
    uint8_t *in = z->in;
    memset(z, 0, sizeof *z);
    z->in = in;
    if (s->fd >= 0) {
        if (z->in == NULL && (z->in = malloc(JSRC_CHUNK)) == NULL)
            return err_set(err, ERR_NOMEM, "%s: out of memory", s->name);
        if (s->regular && lseek(s->fd, s->fd_at, SEEK_SET) < 0)
            return err_set(err, ERR_IO, "%s: seek: %s", s->name, strerror(errno));
        memcpy(z->in, s->head, s->head_len);
        z->in_len = s->head_len;
        z->in_eof = s->head_eof;
        z->read_bytes = s->head_len;
    }
    if (inflateInit2(&z->zs, 16 + MAX_WBITS) != Z_OK)
        return err_set(err, ERR_NOMEM, "%s: cannot start gzip decoding", s->name);
    z->z_init = 1;
    return 0;
}

/* The next piece of text into out (JSRC_CHUNK bytes): its length, 0 at the end, or a negative code. */
static int zlib_fill(jsrc *s, uint8_t *out, err_msg *err) {
    jsrc_zin *z = &s->z;
    z->zs.next_out = out;
    z->zs.avail_out = JSRC_CHUNK;
    while (z->zs.avail_out > 0) {
        if (z->zs.avail_in == 0) {
            const uint8_t *ip;
            size_t in;
            int rc = zin_take(s, GIB, &ip, &in, err);
            if (rc)
                return rc;
            if (in == 0) {
                if (z->z_end)
                    break;
                if (z->zs.avail_out < JSRC_CHUNK)
                    break; /* hand out what there is; the next call reports the cut */
                return err_set(err, ERR_TRUNCATED,
                               "%s: gzip data cut short: the compressed stream ends after %llu "
                               "bytes without its end marker",
                               s->name, (unsigned long long)z->read_bytes);
            }
            z->zs.next_in = (Bytef *)(uintptr_t)ip;
            z->zs.avail_in = (uInt)in;
        }
        if (z->z_end) {
            /* Another gzip member may follow (as gzip -c a b > c makes); anything else after the
             * stream is ignored, as gzip does. */
            if (z->zs.next_in[0] != 0x1f) {
                z->zs.avail_in = 0;
                if (s->fd >= 0) {
                    z->in_pos = z->in_len;
                    z->in_eof = 1;
                } else
                    z->mem_pos = s->mem_len;
                break;
            }
            if (inflateReset(&z->zs) != Z_OK)
                return err_set(err, ERR_MALFORMED, "%s: bad gzip member", s->name);
            z->z_end = 0;
        }
        int zr = inflate(&z->zs, Z_NO_FLUSH);
        if (zr == Z_STREAM_END) {
            z->z_end = 1;
        } else if (zr == Z_BUF_ERROR && z->zs.avail_in == 0) {
            continue; /* needs more input */
        } else if (zr != Z_OK) {
            uint64_t at = z->read_bytes - z->zs.avail_in;
            if (zr == Z_MEM_ERROR)
                return err_set(err, ERR_NOMEM, "%s: out of memory while inflating", s->name);
            return err_set(err, ERR_MALFORMED, "%s: corrupt gzip data near compressed byte %llu: %s", s->name,
                           (unsigned long long)at, z->zs.msg ? z->zs.msg : "bad data");
        }
    }
    s->read_bytes = z->read_bytes;
    return (int)(JSRC_CHUNK - z->zs.avail_out);
}

static uint64_t zlib_done(const jsrc *s) {
    uint64_t done = s->z.read_bytes;
    if (done >= s->z.zs.avail_in)
        done -= s->z.zs.avail_in;
    return done;
}

/* ---- ISA-L ---- */

/* Length of a gzip member header as gzip writes it (no header CRC, no reserved flags, all of it in
 * h[0, n)); 0 for anything else, which zlib then judges. */
static size_t gz_header_len(const uint8_t *h, size_t n) {
    if (n < 10 || h[0] != 0x1f || h[1] != 0x8b || h[2] != 8 || (h[3] & 0xe2))
        return 0;
    size_t i = 10;
    if (h[3] & 4) { /* FEXTRA */
        if (i + 2 > n)
            return 0;
        i += 2 + (size_t)(h[i] | h[i + 1] << 8);
        if (i > n)
            return 0;
    }
    for (unsigned bit = 8; bit <= 16; bit <<= 1) { /* FNAME, FCOMMENT */
        if (!(h[3] & bit))
            continue;
        while (i < n && h[i])
            i++;
        if (i++ >= n)
            return 0;
    }
    return i;
}

/* Makes at least want input bytes available to ISA-L when the input has them. */
static int isal_input(jsrc *s, size_t want, err_msg *err) {
    if (s->fd < 0 || s->ieof || s->iin_len - s->iin_pos >= want)
        return 0;
    size_t keep = s->iin_len - s->iin_pos;
    memmove(s->ibuf, s->ibuf + s->iin_pos, keep);
    s->iin_at += s->iin_pos;
    s->iin_pos = 0;
    s->iin_len = keep;
    if (s->iin_len < ISAL_IN) {
        ssize_t n = cm_read_full(s->fd, s->ibuf + s->iin_len, ISAL_IN - s->iin_len, -1);
        if (n < 0)
            return err_set(err, ERR_IO, "%s: read: %s", s->name, strerror(errno));
        s->ieof = (size_t)n < ISAL_IN - s->iin_len;
        s->iin_len += (size_t)n;
    }
    s->iin = s->ibuf;
    return 0;
}

/* Input bytes zlib would have taken when the stream ends at offset e: up to the end of the piece
 * it read that byte in (see jsrc_zin), or all of them. */
static uint64_t isal_read_bytes(const jsrc *s, uint64_t e) {
    uint64_t total = s->fd < 0 ? s->mem_len : s->fd_size;
    if (e >= total)
        return total;
    uint64_t piece_end;
    if (s->fd < 0)
        piece_end = (e / GIB + 1) * GIB;
    else if (s->head_len >= 2)
        piece_end = e < s->head_len ? s->head_len : s->head_len + ((e - s->head_len) / JSRC_CHUNK + 1) * JSRC_CHUNK;
    else
        piece_end = (e / JSRC_CHUNK + 1) * JSRC_CHUNK;
    return piece_end < total ? piece_end : total;
}

/* The next piece of text into out: JSRC_CHUNK bytes, fewer at the end of the stream, or KTAKEOVER. */
static int isal_fill(jsrc *s, uint8_t *out, err_msg *err) {
    struct inflate_state *is = s->is;
    size_t n = 0;
    while (n < JSRC_CHUNK) {
        int rc;
        if (!s->member) {
            /* Between members: another one, or the end (what follows the stream is ignored). */
            if ((rc = isal_input(s, ISAL_IN / 2, err)) != 0)
                return rc;
            const uint8_t *h = s->iin + s->iin_pos;
            size_t avail = s->iin_len - s->iin_pos;
            if (avail == 0 || h[0] != 0x1f) {
                s->read_bytes = isal_read_bytes(s, s->iin_at + s->iin_pos);
                return (int)n;
            }
            size_t hl = gz_header_len(h, avail);
            if (hl == 0)
                return KTAKEOVER;
            s->iin_pos += hl;
            isal_inflate_reset(is);
            is->crc_flag = ISAL_GZIP_NO_HDR_VER;
            s->member = 1;
        }
        if (s->iin_pos == s->iin_len) {
            if ((rc = isal_input(s, 1, err)) != 0)
                return rc;
            if (s->iin_pos == s->iin_len)
                return KTAKEOVER; /* cut: zlib says how */
        }
        size_t avail = s->iin_len - s->iin_pos;
        if (avail > GIB)
            avail = GIB;
        is->next_in = (uint8_t *)(uintptr_t)(s->iin + s->iin_pos);
        is->avail_in = (uint32_t)avail;
        is->next_out = out + n;
        is->avail_out = (uint32_t)(JSRC_CHUNK - n);
        int ir = isal_inflate(is);
        n = JSRC_CHUNK - is->avail_out;
        s->iin_pos += avail - is->avail_in;
        if (ir != ISAL_DECOMP_OK)
            return KTAKEOVER;
        if (is->block_state == ISAL_BLOCK_FINISH)
            s->member = 0;
    }
    return (int)n;
}

/* ---- plain text ---- */

static int plain_fill(jsrc *s, uint8_t *out, err_msg *err) {
    if (s->fd < 0) {
        size_t n = s->mem_len - s->pos;
        if (n > JSRC_CHUNK)
            n = JSRC_CHUNK;
        memcpy(out, s->mem + s->pos, n);
        s->pos += n;
        s->read_bytes = s->pos;
        return (int)n;
    }
    size_t n = 0;
    if (s->pos < s->head_len) {
        n = s->head_len - s->pos;
        memcpy(out, s->head + s->pos, n);
        s->pos += n;
    }
    if (n < JSRC_CHUNK && !s->eof) {
        ssize_t r = cm_read_full(s->fd, out + n, JSRC_CHUNK - n, -1);
        if (r < 0)
            return err_set(err, ERR_IO, "%s: read: %s", s->name, strerror(errno));
        s->eof = (size_t)r < JSRC_CHUNK - n;
        n += (size_t)r;
        s->read_bytes += (uint64_t)r;
    }
    return (int)n;
}

/* ---- the producer ---- */

static void q_lock(jsrc *s) {
    if (s->threaded)
        pthread_mutex_lock(&s->mu);
}

static void q_unlock(jsrc *s) {
    if (s->threaded)
        pthread_mutex_unlock(&s->mu);
}

/* A free slot for the producer; -1 when cancelled. A producer that has to wait waits for SLOT_WAKE,
 * so that the two threads do not wake each other for every piece, while the scanner still has the
 * text of most slots to go on with as the producer's thread comes back to run. */
static int slot_take(jsrc *s) {
    q_lock(s);
    if (s->n_free == 0 && s->threaded) {
        s->wait_free = 1;
        while (s->n_free < SLOT_WAKE && !s->cancel)
            pthread_cond_wait(&s->cv_free, &s->mu);
        s->wait_free = 0;
    }
    int i = s->cancel || s->n_free == 0 ? -1 : s->freel[--s->n_free];
    q_unlock(s);
    return i;
}

void jsrc_release(jsrc *s, int i) {
    q_lock(s);
    s->freel[s->n_free++] = i;
    if (s->wait_free && s->n_free >= SLOT_WAKE)
        pthread_cond_signal(&s->cv_free);
    q_unlock(s);
}

static void slot_publish(jsrc *s, int i) {
    q_lock(s);
    s->published += s->len[i];
    s->queue[(s->q_head + s->q_n++) % JSRC_NSLOT] = i;
    if (s->wait_ready)
        pthread_cond_signal(&s->cv_ready);
    q_unlock(s);
}

static void produce_end(jsrc *s, int status) {
    q_lock(s);
    s->finished = 1;
    s->status = status;
    if (s->wait_ready)
        pthread_cond_signal(&s->cv_ready);
    q_unlock(s);
}

/* zlib from the start, quietly up to the text already handed out (out is scratch). */
static int zlib_takeover(jsrc *s, uint8_t *out, err_msg *err) {
    s->engine = ENG_ZLIB;
    int rc = zlib_start(s, err);
    for (uint64_t skip = s->published; rc == 0 && skip > 0;) {
        rc = zlib_fill(s, out, err);
        if (rc == 0)
            return err_set(err, ERR_MALFORMED, "%s: corrupt gzip data", s->name);
        if (rc > 0) {
            skip -= (uint64_t)rc < skip ? (uint64_t)rc : skip;
            rc = 0;
        }
    }
    return rc;
}

/* Fills one slot and hands out what may be handed out: 0 while there is more, 1 when done. */
static int produce(jsrc *s) {
    int i = slot_take(s);
    if (i < 0)
        return 1;
    uint8_t *out = s->slot[i] + JSRC_HEAD;
    int r;
    for (;;) {
        r = s->engine == ENG_PLAIN  ? plain_fill(s, out, &s->perr)
            : s->engine == ENG_ISAL ? isal_fill(s, out, &s->perr)
                                    : zlib_fill(s, out, &s->perr);
        if (r != KTAKEOVER)
            break;
        if (s->pending >= 0) {
            jsrc_release(s, s->pending);
            s->pending = -1;
        }
        if ((r = zlib_takeover(s, out, &s->perr)) != 0)
            break;
    }
    if (r > 0) {
        s->len[i] = (size_t)r;
        s->done[i] = s->engine == ENG_ZLIB   ? zlib_done(s)
                     : s->engine == ENG_ISAL ? s->iin_at + s->iin_pos
                                             : s->read_bytes;
        if (s->engine == ENG_ISAL) { /* handed out once the next one is inflated too */
            if (s->pending >= 0)
                slot_publish(s, s->pending);
            s->pending = i;
        } else {
            slot_publish(s, i);
        }
        return 0;
    }
    jsrc_release(s, i);
    if (s->pending >= 0 && r == 0)
        slot_publish(s, s->pending);
    s->pending = -1;
    produce_end(s, r);
    return 1;
}

static void *producer_main(void *arg) {
    jsrc *s = arg;
    while (!produce(s)) {
    }
    return NULL;
}

/* ---- the scanner's side ---- */

int jsrc_start(jsrc *s, err_msg *err) {
    const uint8_t *first;
    size_t avail;
    if (s->fd < 0) {
        first = s->mem;
        avail = s->mem_len;
    } else {
        while (!s->head_eof && s->head_len < 2) {
            ssize_t n = cm_read_some(s->fd, s->head + s->head_len, JSRC_CHUNK - s->head_len);
            if (n < 0)
                return err_set(err, ERR_IO, "%s: read: %s", s->name, strerror(errno));
            if (n == 0)
                s->head_eof = 1;
            s->head_len += (size_t)n;
        }
        struct stat sb;
        if (fstat(s->fd, &sb) == 0 && S_ISREG(sb.st_mode) && (s->fd_at = lseek(s->fd, 0, SEEK_CUR)) >= 0) {
            s->regular = 1;
            s->fd_size = s->head_len + (sb.st_size > s->fd_at ? (uint64_t)(sb.st_size - s->fd_at) : 0);
        }
        first = s->head;
        avail = s->head_len;
        s->read_bytes = s->head_len;
        s->eof = s->head_eof;
    }
    if (avail == 0)
        return err_set(err, ERR_MALFORMED, "%s: empty file", s->name);
    s->gz = avail >= 2 && first[0] == 0x1f && first[1] == 0x8b;
    for (int i = 0; i < JSRC_NSLOT; i++) {
        if ((s->slot[i] = malloc(SLOT)) == NULL)
            return err_set(err, ERR_NOMEM, "%s: out of memory", s->name);
        memset(s->slot[i] + JSRC_HEAD + JSRC_CHUNK, 0, JSRC_PAD);
        s->freel[s->n_free++] = i;
    }
    s->pending = -1;
    s->engine = ENG_PLAIN;
    uint64_t size = s->fd < 0 ? s->mem_len : s->regular ? s->fd_size : THREAD_MIN;
    if (s->gz) {
        if (s->fd < 0 || s->regular) {
            s->engine = ENG_ISAL;
            s->is = malloc(sizeof *s->is);
            if (s->is == NULL)
                return err_set(err, ERR_NOMEM, "%s: out of memory", s->name);
            isal_inflate_init(s->is);
            if (s->fd < 0) {
                s->iin = s->mem;
                s->iin_len = s->mem_len;
                s->ieof = 1;
            } else {
                if ((s->ibuf = malloc(ISAL_IN)) == NULL)
                    return err_set(err, ERR_NOMEM, "%s: out of memory", s->name);
                memcpy(s->ibuf, s->head, s->head_len);
                s->iin = s->ibuf;
                s->iin_len = s->head_len;
                s->ieof = s->head_eof;
            }
        } else {
            s->engine = ENG_ZLIB;
            int rc = zlib_start(s, err);
            if (rc)
                return rc;
        }
    }
    /* the producer goes on a thread of its own when there is enough to do (a pipe: there may be) */
    if (size >= (s->gz ? THREAD_MIN : 4 * JSRC_CHUNK) && (s->gz || !s->plain_here || size <= s->plain_here) &&
        !(s->gz && s->inline_gz)) {
        if (pthread_mutex_init(&s->mu, NULL) != 0)
            return err_set(err, ERR_NOMEM, "%s: cannot start a thread", s->name);
        pthread_cond_init(&s->cv_ready, NULL);
        pthread_cond_init(&s->cv_free, NULL);
        s->threaded = 1; /* before the thread starts: it reads it */
        if (pthread_create(&s->th, NULL, producer_main, s) != 0) {
            s->threaded = 0;
            pthread_cond_destroy(&s->cv_ready);
            pthread_cond_destroy(&s->cv_free);
            pthread_mutex_destroy(&s->mu);
        } else {
            s->joinable = 1;
        }
    }
    return 0;
}

int jsrc_next(jsrc *s, int *slot, err_msg *err) {
    q_lock(s);
    for (;;) {
        if (s->q_n > 0) {
            *slot = s->queue[s->q_head];
            s->q_head = (s->q_head + 1) % JSRC_NSLOT;
            s->q_n--;
            q_unlock(s);
            return 1;
        }
        if (s->finished) {
            int rc = s->status;
            q_unlock(s);
            if (rc < 0 && err)
                *err = s->perr;
            return rc;
        }
        if (s->threaded) {
            s->wait_ready = 1;
            pthread_cond_wait(&s->cv_ready, &s->mu);
            s->wait_ready = 0;
        } else {
            q_unlock(s);
            produce(s);
            q_lock(s);
        }
    }
}

void jsrc_close(jsrc *s) {
    if (s->threaded) {
        pthread_mutex_lock(&s->mu);
        s->cancel = 1;
        pthread_cond_broadcast(&s->cv_free);
        pthread_mutex_unlock(&s->mu);
        if (s->joinable)
            pthread_join(s->th, NULL);
        s->joinable = 0;
        pthread_cond_destroy(&s->cv_ready);
        pthread_cond_destroy(&s->cv_free);
        pthread_mutex_destroy(&s->mu);
        s->threaded = 0;
    }
    if (s->z.z_init)
        inflateEnd(&s->z.zs);
    s->z.z_init = 0;
    free(s->z.in);
    free(s->is);
    free(s->ibuf);
    free(s->head);
    for (int i = 0; i < JSRC_NSLOT; i++)
        free(s->slot[i]);
    memset(s->slot, 0, sizeof s->slot);
    s->z.in = s->ibuf = s->head = NULL;
    s->is = NULL;
}

uint32_t import_crc32(uint32_t crc, const void *data, size_t len) {
    return crc32_gzip_refl(crc, data, len);
}
