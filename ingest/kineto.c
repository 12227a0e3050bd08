/*
 * Kineto trace import (kineto.h): a streaming JSON parse (yajl, which hands over the original text
 * of numbers, so timestamps are converted exactly) over a plain or gzip source (zlib), driven by a
 * small state machine that knows the few keys of Kineto's schema and skips everything else. Events
 * become records in memory; once the whole file is read, timestamps get baseTimeNanoseconds,
 * host calls get their device and blocking flag from the GPU operation with the same correlation id,
 * and everything is encoded in time order.
 *
 * This module owns the input source, the parser state and the records until they are emitted.
 */
#include "kineto.h"
#include "api.h"
#include "text.h"
#include "u64map.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yajl/yajl_parse.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <zlib.h>

#include "synctop/codec.h"

#define CHUNK          (256u << 10) /* bytes of JSON text per parse call */
#define KINETO_MAX_TOKEN (1u << 20) /* strings are cut here (see kclip) */
#define MAX_SKIP_DEPTH 1000         /* nesting inside values the importer ignores */
#define MAX_DEVPROPS   256          /* deviceProperties entries kept */
#define NAME_KEEP      1024         /* bytes of a thread or device name kept */
#define STACK_KEEP     65535        /* bytes of an operator's "Call stack" kept */
#define NUM_TEXT_MAX   4096         /* longer numbers are not numbers we can use */

/* ------------------------------------------------------------------------------------------ */
/* Exact decimal numbers                                                                      */
/* ------------------------------------------------------------------------------------------ */

/* Parses the text of a JSON number into value * 10^scale as an int64, rounding half away from zero
 * when digits are dropped (exact: refuse instead). Returns 0, or -1 when the text is not a number or
 * the result does not fit. No floating point is involved. */
static int dec_parse(const char *s, size_t n, int scale, int exact, int64_t *out) {
    if (n == 0 || n > NUM_TEXT_MAX)
        return -1;
    size_t i = 0;
    int neg = 0;
    if (s[i] == '-') {
        neg = 1;
        i++;
    }
    uint64_t mant = 0;
    long dexp = 0;   /* value = mant * 10^dexp (+ dropped digits) */
    int dropped = 0; /* significant digits that did not fit in mant were not all zero */
    int digits = 0;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (mant <= (UINT64_MAX - 9) / 10)
            mant = mant * 10 + d;
        else {
            dexp++;
            dropped |= d != 0;
        }
    }
    if (i < n && s[i] == '.') {
        i++;
        int fdigits = 0;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, fdigits++) {
            unsigned d = (unsigned)(s[i] - '0');
            if (mant <= (UINT64_MAX - 9) / 10) {
                mant = mant * 10 + d;
                dexp--;
            } else
                dropped |= d != 0;
        }
        if (fdigits == 0)
            return -1;
        digits += fdigits;
    }
    if (digits == 0)
        return -1;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        int eneg = 0;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            eneg = s[i++] == '-';
        long e = 0;
        int edigits = 0;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, edigits++)
            if (e < 100000)
                e = e * 10 + (s[i] - '0');
        if (edigits == 0)
            return -1;
        dexp += eneg ? -e : e;
    }
    if (i != n)
        return -1;
    long E = dexp + scale;
    uint64_t v;
    if (mant == 0) {
        v = 0;
    } else if (E >= 0) {
        if (dropped || E > 19)
            return -1;
        v = mant;
        for (long k = 0; k < E; k++) {
            if (v > UINT64_MAX / 10)
                return -1;
            v *= 10;
        }
    } else if (E < -19) {
        if (exact)
            return -1;
        v = 0; /* mant < 10^20 / 2: rounds to 0 */
    } else {
        uint64_t p = 1;
        for (long k = 0; k < -E; k++)
            p *= 10;
        v = mant / p;
        uint64_t r = mant % p;
        if (exact && (r != 0 || dropped))
            return -1;
        if (r >= p - r)
            v++;
    }
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1)
            return -1;
        *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    } else {
        if (v > (uint64_t)INT64_MAX)
            return -1;
        *out = (int64_t)v;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Input: plain or gzip, from a file descriptor or memory                                     */
/* ------------------------------------------------------------------------------------------ */

typedef struct ksrc {
    const char *name;
    int fd; /* -1: memory */
    const uint8_t *mem;
    size_t mem_len, mem_pos;
    uint8_t *in; /* file input buffer */
    size_t in_len, in_pos;
    int in_eof;
    int gz, z_init, z_end; /* gzip stream; z_end: a member ended */
    z_stream zs;
    uint8_t *out;        /* inflated text */
    uint64_t read_bytes; /* input bytes taken from the file or memory */
    uint64_t total;      /* input size, 0 when unknown */
} ksrc;

static int src_fill(ksrc *s, err_msg *err) {
    if (s->fd < 0 || s->in_eof || s->in_pos < s->in_len)
        return 0;
    ssize_t n;
    do
        n = read(s->fd, s->in, CHUNK);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return err_set(err, ERR_IO, "%s: read: %s", s->name, strerror(errno));
    s->in_pos = 0;
    s->in_len = (size_t)n;
    s->read_bytes += (uint64_t)n;
    if (n == 0)
        s->in_eof = 1;
    return 0;
}

/* Takes up to max input bytes: *p, *n (0 at the end of the input). */
static int src_take(ksrc *s, size_t max, const uint8_t **p, size_t *n, err_msg *err) {
    if (s->fd < 0) {
        size_t k = s->mem_len - s->mem_pos;
        if (k > max)
            k = max;
        *p = s->mem + s->mem_pos;
        *n = k;
        s->mem_pos += k;
        s->read_bytes = s->mem_pos;
        return 0;
    }
    int rc = src_fill(s, err);
    if (rc)
        return rc;
    size_t k = s->in_len - s->in_pos;
    if (k > max)
        k = max;
    *p = s->in + s->in_pos;
    *n = k;
    s->in_pos += k;
    return 0;
}

/* Decides plain or gzip from the first bytes. */
static int src_start(ksrc *s, err_msg *err) {
    const uint8_t *head;
    size_t avail;
    if (s->fd < 0) {
        head = s->mem;
        avail = s->mem_len;
    } else {
        int rc = src_fill(s, err);
        if (rc)
            return rc;
        /* a pipe may deliver one byte first */
        while (!s->in_eof && s->in_len < 2) {
            ssize_t n;
            do
                n = read(s->fd, s->in + s->in_len, CHUNK - s->in_len);
            while (n < 0 && errno == EINTR);
            if (n < 0)
                return err_set(err, ERR_IO, "%s: read: %s", s->name, strerror(errno));
            if (n == 0)
                s->in_eof = 1;
            s->in_len += (size_t)n;
            s->read_bytes += (uint64_t)n;
        }
        head = s->in;
        avail = s->in_len;
    }
    if (avail == 0)
        return err_set(err, ERR_MALFORMED, "%s: empty file", s->name);
    s->gz = avail >= 2 && head[0] == 0x1f && head[1] == 0x8b;
    if (s->gz) {
        if (inflateInit2(&s->zs, 16 + MAX_WBITS) != Z_OK)
            return err_set(err, ERR_NOMEM, "%s: cannot start gzip decoding", s->name);
        s->z_init = 1;
        s->out = malloc(CHUNK);
        if (s->out == NULL)
            return err_set(err, ERR_NOMEM, "%s: out of memory", s->name);
    }
    return 0;
}

/* Next piece of JSON text: returns 1 with *p, *n; 0 at the end; a negative code on error. */
static int src_next(ksrc *s, const uint8_t **p, size_t *n, err_msg *err) {
    if (!s->gz) {
        int rc = src_take(s, CHUNK, p, n, err);
        if (rc)
            return rc;
        return *n > 0;
    }
    s->zs.next_out = s->out;
    s->zs.avail_out = CHUNK;
    while (s->zs.avail_out > 0) {
        if (s->zs.avail_in == 0) {
            const uint8_t *ip;
            size_t in;
            int rc = src_take(s, 1u << 30, &ip, &in, err);
            if (rc)
                return rc;
            if (in == 0) {
                if (s->z_end)
                    break;
                if (s->zs.avail_out < CHUNK)
                    break; /* hand out what there is; the next call reports the cut */
                return err_set(err, ERR_TRUNCATED,
                                  "%s: gzip data cut short: the compressed stream ends after %llu "
                                  "bytes without its end marker",
                                  s->name, (unsigned long long)s->read_bytes);
            }
            s->zs.next_in = (Bytef *)(uintptr_t)ip;
            s->zs.avail_in = (uInt)in;
        }
        if (s->z_end) {
            /* Another gzip member may follow (as gzip -c a b > c makes); anything else after the
             * stream is ignored, as gzip does. */
            if (s->zs.next_in[0] != 0x1f) {
                s->zs.avail_in = 0;
                if (s->fd >= 0) {
                    s->in_pos = s->in_len;
                    s->in_eof = 1;
                } else
                    s->mem_pos = s->mem_len;
                break;
            }
            if (inflateReset(&s->zs) != Z_OK)
                return err_set(err, ERR_MALFORMED, "%s: bad gzip member", s->name);
            s->z_end = 0;
        }
        int zr = inflate(&s->zs, Z_NO_FLUSH);
        if (zr == Z_STREAM_END) {
            s->z_end = 1;
        } else if (zr == Z_BUF_ERROR && s->zs.avail_in == 0) {
            continue; /* needs more input */
        } else if (zr != Z_OK) {
            uint64_t at = s->read_bytes - s->zs.avail_in;
            if (zr == Z_MEM_ERROR)
                return err_set(err, ERR_NOMEM, "%s: out of memory while inflating", s->name);
            return err_set(err, ERR_MALFORMED, "%s: corrupt gzip data near compressed byte %llu: %s",
                              s->name, (unsigned long long)at, s->zs.msg ? s->zs.msg : "bad data");
        }
    }
    *p = s->out;
    *n = CHUNK - s->zs.avail_out;
    return *n > 0;
}

static uint64_t src_done(const ksrc *s) {
    uint64_t done = s->read_bytes;
    if (s->gz && done >= s->zs.avail_in)
        done -= s->zs.avail_in;
    return done;
}

static void src_close(ksrc *s) {
    if (s->z_init)
        inflateEnd(&s->zs);
    free(s->out);
    free(s->in);
    s->z_init = 0;
    s->out = s->in = NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Parser state                                                                               */
/* ------------------------------------------------------------------------------------------ */

enum ctx { C_ROOT, C_TOP, C_EVENTS, C_EVENT, C_ARGS, C_DEVPROPS, C_DEVPROP, C_DIST, C_DIMS };

enum key {
    K_NONE = 0,
    K_TRACE_EVENTS,
    K_DEVPROPS,
    K_DIST,
    K_BASE_TIME,
    K_HOSTNAME, /* top level */
    K_RANK,
    K_WORLD, /* distributedInfo */
    K_P_ID,
    K_P_NAME,
    K_P_MAJOR,
    K_P_MINOR,
    K_P_MEM,
    K_P_SMS, /* deviceProperties[] */
    K_PH,
    K_CAT,
    K_NAME,
    K_PID,
    K_TID,
    K_TS,
    K_DUR,
    K_ARGS, /* an event */
    K_A_DEVICE,
    K_A_STREAM,
    K_A_CORR,
    K_A_CBID,
    K_A_BYTES,
    K_A_CONTEXT,
    K_A_GRID,
    K_A_BLOCK,
    K_A_SYNC_KIND,
    K_A_EVENT,
    K_A_NAME,
    K_A_FROM_DEV,
    K_A_TO_DEV,
    K_A_GRAPH,
    K_A_STACK /* its args */
};

/* Fields an event has (bits of kev.have). */
enum {
    H_PID = 1 << 0,
    H_TID = 1 << 1,
    H_TS = 1 << 2,
    H_DUR = 1 << 3,
    H_DEVICE = 1 << 4,
    H_STREAM = 1 << 5,
    H_CORR = 1 << 6,
    H_CBID = 1 << 7,
    H_BYTES = 1 << 8,
    H_CONTEXT = 1 << 9,
    H_EVENT = 1 << 10,
    H_MNAME = 1 << 11,
    H_FROM_DEV = 1 << 12,
    H_TO_DEV = 1 << 13,
    H_GRAPH = 1 << 14,
    H_TS_BAD = 1 << 15,
    H_DUR_BAD = 1 << 16,
    H_STACK = 1 << 17
};

enum cat {
    CAT_NONE,
    CAT_OTHER,
    CAT_KERNEL,
    CAT_MEMCPY,
    CAT_MEMSET,
    CAT_SYNC,
    CAT_RUNTIME,
    CAT_DRIVER,
    CAT_ANNOT,
    CAT_GPU_ANNOT,
    CAT_OP,    /* cpu_op: a PyTorch operator on a host thread */
    CAT_PYFN   /* python_function: a Python frame (traces recorded with_stack=True) */
};

/* API classes, decided from the name; they decide the flags once correlations are known. */

typedef struct kbuf {
    char *s;
    size_t len, cap;
} kbuf;

typedef struct kev {
    uint32_t have;
    char ph;
    size_t ph_len;
    int cat;
    char cat_text[KINETO_CAT_MAX];
    size_t cat_len;
    kbuf name, mname;
    kbuf stack; /* args."Call stack" (legacy traces recorded with_stack) */
    int64_t pid, tid, ts, dur;
    int64_t device, stream, corr, cbid, bytes, context, event, from_dev, to_dev, graph;
    int64_t sync_kind;
    int dims; /* K_A_GRID or K_A_BLOCK while inside one */
    uint32_t grid[3], block[3];
    int n_grid, n_block;
} kev;

typedef struct kdevprop {
    int64_t id;
    char name[NAME_KEEP];
    size_t name_len;
    int64_t major, minor, mem, sms;
} kdevprop;

/* A string longer than KINETO_MAX_TOKEN bytes is cut there before yajl sees it (yajl re-reads
 * a token that spans chunks from its start at every chunk: time quadratic in its length). The cut
 * falls between two characters, never inside an escape, and the closing quote is kept, so the JSON
 * stays valid. Names are cut far shorter anyway (NAME_KEEP, TP_STRING_MAX). */
typedef struct kclip {
    int in_str;   /* inside a string (key or value), after its opening quote */
    int skipping; /* past the bound: dropped until the closing quote */
    int esc, hex; /* at the start of the next piece: after a backslash; \u hex digits left */
    uint64_t len; /* bytes of the current string before the next piece */
    uint64_t cuts; /* strings cut */
} kclip;

/* The first '"' or backslash in p[i, n), or n: sixteen bytes at a time where SSE2 is, eight
 * elsewhere. */
static size_t next_special(const uint8_t *p, size_t i, size_t n) {
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
    while (i + 16 <= n) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)));
        if (m)
            return i + (size_t)__builtin_ctz(m);
        i += 16;
    }
#else
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    while (i + 8 <= n) {
        uint64_t v, q, b;
        memcpy(&v, p + i, 8);
        q = v ^ (ones * '"');
        b = v ^ (ones * '\\');
        /* the lowest flagged byte of each is exact: a false flag only ever sits above a true one */
        uint64_t z = (((q - ones) & ~q) | ((b - ones) & ~b)) & highs;
        if (z)
            return i + (size_t)(__builtin_ctzll(z) >> 3);
        i += 8;
    }
#endif
    while (i < n && p[i] != '"' && p[i] != '\\')
        i++;
    return i;
}

/* One byte of a string's content, escapes followed exactly; 1 at its closing quote. */
static int clip_byte(kclip *c, uint8_t ch) {
    if (c->hex)
        c->hex--;
    else if (c->esc)
        c->esc = 0, c->hex = ch == 'u' ? 4 : 0;
    else if (ch == '"')
        return 1;
    else if (ch == '\\')
        c->esc = 1;
    return 0;
}

/* A string found longer than the bound: from seg (escape state esc/hex, len bytes before it) to the
 * first place past the bound between two characters, which is where it is cut. */
static size_t clip_cut(kclip *c, const uint8_t *p, size_t n, size_t seg, int esc, int hex, uint64_t len,
                       size_t *keep) {
    c->esc = esc;
    c->hex = hex;
    size_t i = seg;
    while (i < n && (len < KINETO_MAX_TOKEN || c->esc || c->hex)) {
        clip_byte(c, p[i++]);
        len++;
    }
    c->in_str = 1;
    c->skipping = 1;
    c->esc = c->hex = 0;
    c->cuts++;
    *keep = i;
    return i;
}

/* Takes p[0, n) from where the last call left off: returns how many bytes it consumed, of which
 * the first *keep go on to the parser and the rest are dropped (a long string's tail). Quotes and
 * backslashes are found eight bytes at a time; only a long string is followed byte by byte. */
static size_t clip_next(kclip *c, const uint8_t *p, size_t n, size_t *keep) {
    if (c->skipping) {
        size_t i = 0;
        while (i < n && !clip_byte(c, p[i]))
            i++;
        if (i < n) { /* the closing quote: the parser gets it next */
            c->skipping = 0;
            c->len = 0;
            c->esc = c->hex = 0;
        }
        *keep = 0;
        return i;
    }
    int in_str = c->in_str, esc0 = c->esc, hex0 = c->hex;
    uint64_t len0 = c->len;
    size_t i = in_str && esc0 ? 1 : 0, seg = 0, last_esc = SIZE_MAX;
    while (i < n) {
        size_t j = next_special(p, i, n);
        if (j == n)
            break;
        if (p[j] == '"') {
            if (in_str) {
                uint64_t before = seg == 0 ? len0 : 0;
                if (before + (j - seg) > KINETO_MAX_TOKEN)
                    return clip_cut(c, p, n, seg, seg == 0 ? esc0 : 0, seg == 0 ? hex0 : 0, before, keep);
                in_str = 0;
            } else {
                in_str = 1;
                seg = j + 1;
                last_esc = SIZE_MAX;
            }
            i = j + 1;
        } else if (in_str) {
            last_esc = j; /* the byte after it is content, whatever it is */
            i = j + 2;
        } else {
            i = j + 1;
        }
    }
    c->in_str = in_str;
    c->esc = c->hex = 0;
    if (in_str) {
        uint64_t before = seg == 0 ? len0 : 0;
        if (before + (n - seg) > KINETO_MAX_TOKEN)
            return clip_cut(c, p, n, seg, seg == 0 ? esc0 : 0, seg == 0 ? hex0 : 0, before, keep);
        c->len = before + (n - seg);
        if (last_esc == n - 1)
            c->esc = 1;
        else if (last_esc != SIZE_MAX && p[last_esc + 1] == 'u' && last_esc + 6 > n)
            c->hex = (int)(last_esc + 6 - n);
        else if (last_esc == SIZE_MAX && seg == 0 && hex0 > (int)n - (esc0 ? 1 : 0))
            c->hex = hex0 - (int)n; /* a piece shorter than the \u escape it is in */
    }
    *keep = n;
    return n;
}

/* An operator or a Python frame on a host thread: the context of the calls inside it. */
typedef struct kctx {
    uint64_t start, end;
    uint32_t tid, name; /* name: the operator's, or the Python frame's whole text */
    uint32_t file, line, func; /* a Python frame's parts, when its text gives them */
    uint32_t py;
    uint32_t stack; /* an operator's Python stack (legacy "Call stack"): index + 1 in kimp.stacks; 0 none */
    uint64_t seq;   /* its place in the file */
} kctx;

/* A Python frame of an operator's "Call stack". */
typedef struct kpyframe {
    uint32_t file, line, func;
} kpyframe;

#define KCALLSITE_FRAMES 48  /* innermost frames kept per call site (and per Call stack) */
#define KCALLSITE_LOOK   512 /* open rows looked at per call, innermost first */

typedef struct kimp {
    const char *name; /* for messages */
    const kineto_opts *opts;
    kineto_stats *st;
    err_msg *err;
    int fail; /* first error code, its message in err */
    yajl_handle h;
    tp_enc *enc;

    /* position */
    const uint8_t *chunk;
    uint64_t chunk_off; /* offset of chunk in the JSON text */
    uint64_t lines;     /* newlines before chunk */
    uint64_t col_base;  /* bytes since the last newline at chunk start */

    /* long strings cut before the parser sees them (clip_next) */
    kclip clip;

    /* parser */
    uint8_t stack[8];
    int sp;
    int skip;
    int key;
    int saw_events, events_not_array;
    kev ev;
    kdevprop dp;

    /* results of the parse */
    int have_base;
    int64_t base;
    int have_rank, have_world;
    int64_t rank, world;
    kbuf host;
    kdevprop *devprops;
    size_t n_devprops;
    int have_pid;
    uint32_t pid;
    uint32_t gpu_domain;
    tp_record *rec;
    size_t n_rec, cap_rec;
    kctx *ctx;      /* operators and Python frames: what blocking calls are called from */
    size_t n_ctx, cap_ctx;
    kpyframe *pyfr; /* the frames of the distinct Call stacks, innermost first */
    size_t n_pyfr, cap_pyfr;
    uint64_t *stacks; /* per distinct Call stack: its first frame in pyfr << 8 | its frame count */
    size_t n_stacks, cap_stacks;
    u64map stack_ids; /* hash of a Call stack's text -> index + 1 in stacks */
    uint64_t max_events;
    u64map streams; /* device << 32 | stream -> context */
    u64map threads; /* pid << 32 | tid -> 1 */
    u64map tnames;  /* pid << 32 | tid -> offset << 16 | len in tnames_text */
    kbuf tnames_text;
    uint8_t dev_used[(TP_NO_DEVICE + 1) / 8];
    uint8_t wide[TP_NO_DEVICE]; /* per device: TP_F_SYNC_ID_* spellings of its device-wide syncs */
} kimp;

static int kbuf_set(kbuf *b, const void *s, size_t len, size_t keep) {
    if (len > keep)
        len = keep;
    if (len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < len + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (p == NULL)
            return ERR_NOMEM;
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s, s, len);
    b->s[len] = '\0';
    b->len = len;
    return 0;
}

static int kbuf_append(kbuf *b, const void *s, size_t len) {
    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + len + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (p == NULL)
            return ERR_NOMEM;
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, len);
    b->len += len;
    b->s[b->len] = '\0';
    return 0;
}

/* Line and column (1-based) of byte off of the current chunk. */
static void pos_at(const kimp *k, size_t off, uint64_t *line, uint64_t *col) {
    uint64_t l = k->lines, c = k->col_base;
    for (size_t i = 0; i < off; i++) {
        if (k->chunk[i] == '\n') {
            l++;
            c = 0;
        } else
            c++;
    }
    *line = l + 1;
    *col = c + 1;
}

/* Records a fatal error at the parser's position; returns 0 so a callback can stop yajl. */
static int fail_here(kimp *k, int code, const char *what) {
    if (k->fail)
        return 0;
    /* at the end of the text yajl parses a blank of its own: no chunk of ours */
    size_t off = k->h && k->chunk ? yajl_get_bytes_consumed(k->h) : 0;
    uint64_t line, col;
    pos_at(k, off, &line, &col);
    k->fail = err_set(k->err, code, "%s: line %llu, column %llu (byte %llu): %s", k->name,
                         (unsigned long long)line, (unsigned long long)col,
                         (unsigned long long)(k->chunk_off + off), what);
    return 0;
}

static int fail_nomem(kimp *k) {
    return fail_here(k, ERR_NOMEM, "out of memory");
}

/* ------------------------------------------------------------------------------------------ */
/* Events to records                                                                          */
/* ------------------------------------------------------------------------------------------ */

static int ieq(const char *a, size_t n, const char *lit) {
    size_t m = strlen(lit);
    if (n != m)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = a[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != lit[i])
            return 0;
    }
    return 1;
}

static int cat_of(const char *s, size_t n) {
    if (ieq(s, n, "kernel"))
        return CAT_KERNEL;
    if (ieq(s, n, "cuda_runtime") || ieq(s, n, "runtime"))
        return CAT_RUNTIME;
    if (ieq(s, n, "gpu_memcpy") || ieq(s, n, "memcpy"))
        return CAT_MEMCPY;
    if (ieq(s, n, "gpu_memset") || ieq(s, n, "memset"))
        return CAT_MEMSET;
    if (ieq(s, n, "cuda_sync"))
        return CAT_SYNC;
    if (ieq(s, n, "cuda_driver") || ieq(s, n, "driver"))
        return CAT_DRIVER;
    if (ieq(s, n, "user_annotation"))
        return CAT_ANNOT;
    if (ieq(s, n, "gpu_user_annotation"))
        return CAT_GPU_ANNOT;
    if (ieq(s, n, "cpu_op") || ieq(s, n, "operator"))
        return CAT_OP;
    if (ieq(s, n, "python_function"))
        return CAT_PYFN;
    return CAT_OTHER;
}

static int starts(const char *s, size_t n, const char *lit) {
    size_t m = strlen(lit);
    return n >= m && memcmp(s, lit, m) == 0;
}

static int equals(const char *s, size_t n, const char *lit) {
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

/* The API name without CUPTI's version or per-thread suffix: cuMemcpyHtoD_v2, cudaMemcpy_ptds. */
static const char *const mem_kind_names[] = {"Unknown", "Pageable", "Pinned",        "Device",
                                             "Array",   "Managed",  "Device Static", "Managed Static"};

static int mem_kind_of(const char *s, size_t n) {
    for (int i = 1; i < TP_MEM_MAX_; i++)
        if (equals(s, n, mem_kind_names[i]))
            return i;
    return TP_MEM_UNKNOWN;
}

/* "Memcpy HtoD (Pageable -> Device)": copy kind and the two memory kinds. */
static void parse_memcpy_name(const char *s, size_t n, uint8_t *copy, uint8_t *src, uint8_t *dst) {
    static const char *const kinds[] = {NULL,   "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                        "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
    *copy = TP_COPY_UNKNOWN;
    *src = *dst = TP_MEM_UNKNOWN;
    if (!starts(s, n, "Memcpy ") || n < 11)
        return;
    for (int i = 1; i < TP_COPY_MAX_; i++)
        if (memcmp(s + 7, kinds[i], 4) == 0)
            *copy = (uint8_t)i;
    const char *open = memchr(s, '(', n);
    if (open == NULL)
        return;
    const char *end = s + n;
    const char *close = memchr(open, ')', (size_t)(end - open));
    if (close == NULL)
        return;
    const char *a = open + 1;
    for (const char *q = a; q + 4 <= close; q++) {
        if (memcmp(q, " -> ", 4) == 0) {
            *src = (uint8_t)mem_kind_of(a, (size_t)(q - a));
            *dst = (uint8_t)mem_kind_of(q + 4, (size_t)(close - q - 4));
            return;
        }
    }
}

/* "Memset (Device)": the memory kind. */
static uint8_t parse_memset_name(const char *s, size_t n) {
    if (n == 0)
        return TP_MEM_UNKNOWN;
    const char *open = memchr(s, '(', n);
    if (open == NULL)
        return TP_MEM_UNKNOWN;
    const char *close = memchr(open, ')', (size_t)(s + n - open));
    if (close == NULL)
        return TP_MEM_UNKNOWN;
    return (uint8_t)mem_kind_of(open + 1, (size_t)(close - open - 1));
}

static int sync_type_of(const char *s, size_t n) {
    if (equals(s, n, "Event Sync"))
        return TP_SYNC_EVENT;
    if (equals(s, n, "Stream Wait Event"))
        return TP_SYNC_STREAM_WAIT_EVENT;
    if (equals(s, n, "Stream Sync"))
        return TP_SYNC_STREAM;
    if (equals(s, n, "Context Sync"))
        return TP_SYNC_CONTEXT;
    return TP_SYNC_UNKNOWN;
}

static void count_skip(kimp *k, const char *cat, size_t len) {
    kineto_stats *st = k->st;
    st->skipped++;
    if (len >= KINETO_CAT_MAX)
        len = KINETO_CAT_MAX - 1;
    for (size_t i = 0; i < st->n_skip; i++) {
        if (strlen(st->skip[i].cat) == len && memcmp(st->skip[i].cat, cat, len) == 0) {
            st->skip[i].count++;
            return;
        }
    }
    if (st->n_skip == KINETO_SKIP_SLOTS) {
        st->skip_other++;
        return;
    }
    kineto_skip *s = &st->skip[st->n_skip++];
    memcpy(s->cat, cat, len);
    s->cat[len] = '\0';
    s->count = 1;
}

/* An entry of an imported category that cannot be used: counted, the first one described. */
static int invalid(kimp *k, const char *why) {
    kineto_stats *st = k->st;
    if (st->invalid++ == 0) {
        size_t off = k->h && k->chunk ? yajl_get_bytes_consumed(k->h) : 0;
        uint64_t line, col;
        pos_at(k, off, &line, &col);
        static const char *const cats[] = {
            "?",           "?",          "kernel",        "memcpy", "memset", "cuda_sync", "runtime call",
            "driver call", "annotation", "gpu annotation"};
        snprintf(st->first_invalid, sizeof st->first_invalid,
                 "traceEvents entry %llu (ending line %llu): %s %s", (unsigned long long)(st->entries - 1),
                 (unsigned long long)line, cats[k->ev.cat], why);
    }
    return 1;
}

static tp_record *rec_new(kimp *k) {
    if (k->n_rec == k->cap_rec) {
        if (k->n_rec >= k->max_events) {
            char what[128];
            snprintf(what, sizeof what, "more than %llu events: over the import limit",
                     (unsigned long long)k->max_events);
            fail_here(k, ERR_LIMIT, what);
            return NULL;
        }
        size_t cap = k->cap_rec ? k->cap_rec * 2 : 4096;
        if (cap > k->max_events)
            cap = (size_t)k->max_events;
        tp_record *r = realloc(k->rec, cap * sizeof *r);
        if (r == NULL) {
            fail_nomem(k);
            return NULL;
        }
        k->rec = r;
        k->cap_rec = cap;
    }
    tp_record *r = &k->rec[k->n_rec++];
    memset(r, 0, sizeof *r);
    return r;
}

static uint32_t intern(kimp *k, const char *s, size_t len) {
    return tp_enc_intern(k->enc, s, len);
}

/* Where a GPU row runs: device (args.device, else pid) and stream (args.stream, else a numeric
 * tid); a stream of -1 or 4294967295 is TP_NO_ID, which only syncs may have. */
static const char *gpu_where(const kev *e, int allow_no_stream, uint16_t *dev, uint32_t *stream) {
    int64_t d, s;
    if (e->have & H_DEVICE)
        d = e->device;
    else if (e->have & H_PID)
        d = e->pid;
    else
        return "without a device";
    if (d < 0 || d >= TP_NO_DEVICE)
        return "with a device out of range";
    if (e->have & H_STREAM)
        s = e->stream;
    else if (e->have & H_TID)
        s = e->tid;
    else
        return "without a stream";
    if (s == -1 || s == (int64_t)TP_NO_ID) {
        if (!allow_no_stream)
            return "without a stream";
        s = TP_NO_ID;
    } else if (s < 0 || s > (int64_t)TP_NO_ID) {
        return "with a stream out of range";
    }
    *dev = (uint16_t)d;
    *stream = (uint32_t)s;
    return NULL;
}

static uint32_t u32_or(const kev *e, uint32_t bit, int64_t v, uint32_t none) {
    return (e->have & bit) && v >= 0 && v <= (int64_t)UINT32_MAX ? (uint32_t)v : none;
}

static int note_stream(kimp *k, uint16_t dev, uint32_t stream, uint32_t context) {
    k->dev_used[dev / 8] |= (uint8_t)(1u << (dev % 8));
    if (stream == TP_NO_ID)
        return 1;
    uint64_t *v = u64map_get_or_add(&k->streams, (uint64_t)dev << 32 | stream, context, NULL);
    return v ? 1 : fail_nomem(k);
}

static int note_thread(kimp *k, uint32_t pid, uint32_t tid) {
    if (!k->have_pid) {
        k->have_pid = 1;
        k->pid = pid;
    }
    return u64map_get_or_add(&k->threads, (uint64_t)pid << 32 | tid, 1, NULL) ? 1 : fail_nomem(k);
}

/* Start and end (relative to baseTimeNanoseconds until the fix-up) of an X event. */
static const char *span_of(const kev *e, uint64_t *start, uint64_t *end) {
    if (e->have & H_TS_BAD)
        return "with an unusable ts";
    if (!(e->have & H_TS))
        return "without ts";
    if (e->have & H_DUR_BAD)
        return "with an unusable dur";
    int64_t dur = (e->have & H_DUR) ? e->dur : 0;
    if (dur < 0)
        return "with a negative dur";
    int64_t t1;
    if (__builtin_add_overflow(e->ts, dur, &t1))
        return "with ts + dur out of range";
    *start = (uint64_t)e->ts;
    *end = (uint64_t)t1;
    return NULL;
}

static int event_gpu(kimp *k) {
    kev *e = &k->ev;
    uint16_t dev;
    uint32_t stream;
    uint64_t t0, t1;
    const char *why = span_of(e, &t0, &t1);
    if (why == NULL)
        why = gpu_where(e, e->cat == CAT_SYNC || e->cat == CAT_GPU_ANNOT, &dev, &stream);
    if (why)
        return invalid(k, why);
    if (stream == TP_NO_ID && e->cat == CAT_SYNC) /* which spelling: HTA reads them differently */
        k->wide[dev] |= ((e->have & H_STREAM) ? e->stream : e->tid) == -1 ? TP_F_SYNC_ID_NEG : TP_F_SYNC_ID_U32;
    tp_record *r = rec_new(k);
    if (r == NULL)
        return 0;
    uint32_t corr = u32_or(e, H_CORR, e->corr, 0);
    uint32_t context = u32_or(e, H_CONTEXT, e->context, 0);
    switch (e->cat) {
    case CAT_KERNEL: {
        tp_kernel *x = &r->kernel;
        x->kind = TP_K_KERNEL;
        x->correlation = corr;
        x->context = context;
        x->name = intern(k, e->name.s, e->name.len);
        x->graph = u32_or(e, H_GRAPH, e->graph, 0);
        if (x->graph)
            x->flags = TP_F_GRAPH;
        memcpy(x->grid, e->grid, sizeof x->grid);
        memcpy(x->block, e->block, sizeof x->block);
        break;
    }
    case CAT_MEMCPY: {
        tp_memcpy *x = &r->memcpy;
        x->kind = TP_K_MEMCPY;
        x->correlation = corr;
        x->context = context;
        x->bytes = (e->have & H_BYTES) && e->bytes >= 0 ? (uint64_t)e->bytes : 0;
        parse_memcpy_name(e->name.s, e->name.len, &x->copy_kind, &x->src_kind, &x->dst_kind);
        x->src_device = x->dst_device = TP_NO_DEVICE;
        if (x->copy_kind == TP_COPY_PTOP) {
            x->src_device =
                (uint16_t)u32_or(e, H_FROM_DEV, e->from_dev < TP_NO_DEVICE ? e->from_dev : -1, TP_NO_DEVICE);
            x->dst_device =
                (uint16_t)u32_or(e, H_TO_DEV, e->to_dev < TP_NO_DEVICE ? e->to_dev : -1, TP_NO_DEVICE);
        }
        break;
    }
    case CAT_MEMSET: {
        tp_memset *x = &r->memset;
        x->kind = TP_K_MEMSET;
        x->correlation = corr;
        x->context = context;
        x->bytes = (e->have & H_BYTES) && e->bytes >= 0 ? (uint64_t)e->bytes : 0;
        x->mem_kind = parse_memset_name(e->name.s, e->name.len);
        break;
    }
    case CAT_SYNC: {
        tp_sync *x = &r->sync;
        x->kind = TP_K_SYNC;
        x->correlation = corr;
        x->context = context;
        x->event = u32_or(e, H_EVENT, e->event, TP_NO_ID);
        x->sync_type = (uint8_t)(e->sync_kind ? e->sync_kind : sync_type_of(e->name.s, e->name.len));
        break;
    }
    default: { /* CAT_GPU_ANNOT */
        tp_nvtx *x = &r->nvtx;
        x->kind = TP_K_NVTX;
        x->flags = TP_NVTX_RANGE;
        x->tid = stream;
        x->name = intern(k, e->name.s, e->name.len);
        if (k->gpu_domain == 0)
            k->gpu_domain = intern(k, "gpu_user_annotation", strlen("gpu_user_annotation"));
        x->domain = k->gpu_domain;
        break;
    }
    }
    /* every event record has the same head, stream/tid word and span */
    r->kernel.device = dev;
    if (e->cat != CAT_GPU_ANNOT)
        r->kernel.stream = stream;
    r->kernel.start = t0;
    r->kernel.end = t1;
    return note_stream(k, dev, stream, context);
}

static int event_host(kimp *k) {
    kev *e = &k->ev;
    uint64_t t0, t1;
    const char *why = span_of(e, &t0, &t1);
    if (why == NULL && !(e->have & H_TID))
        why = "without a numeric tid";
    if (why)
        return invalid(k, why);
    /* 64-bit thread ids (pthread_self in old traces) keep their low 32 bits */
    uint32_t tid = (uint32_t)(uint64_t)e->tid;
    uint32_t pid = (e->have & H_PID) ? (uint32_t)(uint64_t)e->pid : 0;
    tp_record *r = rec_new(k);
    if (r == NULL)
        return 0;
    if (e->cat == CAT_ANNOT) {
        tp_nvtx *x = &r->nvtx;
        x->kind = TP_K_NVTX;
        x->flags = TP_NVTX_RANGE;
        x->device = TP_NO_DEVICE;
        x->tid = tid;
        x->start = t0;
        x->end = t1;
        x->name = intern(k, e->name.s, e->name.len);
    } else {
        tp_api *x = &r->api;
        x->kind = TP_K_API;
        x->flags = e->cat == CAT_DRIVER ? TP_F_DRIVER : 0;
        x->device = TP_NO_DEVICE;
        x->tid = tid;
        x->start = t0;
        x->end = t1;
        x->correlation = u32_or(e, H_CORR, e->corr, 0);
        x->cbid = u32_or(e, H_CBID, e->cbid, 0);
        x->name = intern(k, e->name.s, e->name.len);
        x->pad0 = (uint32_t)st_api_class_of(e->name.s, e->name.len); /* until resolve_apis */
    }
    return note_thread(k, pid, tid);
}

/* A Python frame's name as the profiler writes it, "path/file.py(123): function" (s[0..n)). */
static int py_frame_parse(const char *s, size_t n, size_t *file_len, uint32_t *line, size_t *func_at) {
    size_t close = 0;
    while (close + 3 <= n && !(s[close] == ')' && s[close + 1] == ':' && s[close + 2] == ' '))
        close++;
    if (close + 3 > n)
        return 0;
    size_t open = close;
    while (open > 0 && s[open - 1] != '(')
        open--;
    if (open == 0 || open == close)
        return 0;
    uint32_t v = 0;
    for (size_t p = open; p < close; p++) {
        if (s[p] < '0' || s[p] > '9' || v > 100000000)
            return 0;
        v = v * 10 + (uint32_t)(s[p] - '0');
    }
    *file_len = open - 1;
    *line = v;
    *func_at = close + 3;
    return 1;
}

/* The index + 1 of the operator's Call stack, "file.py(611): f;file.py(54): <module>" (innermost
 * first), parsed into frames once per distinct text; 0 when out of memory. */
static uint32_t call_stack(kimp *k, const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    int added;
    uint64_t *id = u64map_get_or_add(&k->stack_ids, h ? h : 1, 0, &added);
    if (id == NULL)
        return 0;
    if (!added)
        return (uint32_t)*id;
    if (k->n_stacks == k->cap_stacks) {
        size_t cap = k->cap_stacks ? k->cap_stacks * 2 : 256;
        uint64_t *st = realloc(k->stacks, cap * sizeof *st);
        if (st == NULL)
            return 0;
        k->stacks = st;
        k->cap_stacks = cap;
    }
    if (k->cap_pyfr - k->n_pyfr < KCALLSITE_FRAMES) {
        size_t cap = k->cap_pyfr ? k->cap_pyfr * 2 : 2048;
        kpyframe *f = realloc(k->pyfr, cap * sizeof *f);
        if (f == NULL)
            return 0;
        k->pyfr = f;
        k->cap_pyfr = cap;
    }
    size_t first = k->n_pyfr, nf = 0;
    for (size_t at = 0; at < n && nf < KCALLSITE_FRAMES;) {
        size_t len = 0;
        while (at + len < n && s[at + len] != ';')
            len++;
        if (len > 0) {
            kpyframe *f = &k->pyfr[first + nf++];
            size_t file_len, func_at;
            if (py_frame_parse(s + at, len, &file_len, &f->line, &func_at)) {
                f->file = intern(k, s + at, file_len);
                f->func = intern(k, s + at + func_at, len - func_at);
            } else {
                *f = (kpyframe){0, 0, intern(k, s + at, len)};
            }
        }
        at += len + 1;
    }
    k->n_pyfr += nf;
    k->stacks[k->n_stacks++] = (uint64_t)first << 8 | nf;
    *id = k->n_stacks;
    return (uint32_t)*id;
}

/* An operator or a Python frame: kept (up to the event limit) to name the blocking calls in it. */
static int event_ctx(kimp *k) {
    kev *e = &k->ev;
    uint64_t t0, t1;
    if (span_of(e, &t0, &t1) != NULL || !(e->have & H_TID) || k->n_ctx >= k->max_events) {
        count_skip(k, e->cat_text, e->cat_len);
        return 1;
    }
    if (k->n_ctx == k->cap_ctx) {
        size_t cap = k->cap_ctx ? k->cap_ctx * 2 : 4096;
        kctx *c = realloc(k->ctx, cap * sizeof *c);
        if (c == NULL)
            return fail_nomem(k);
        k->ctx = c;
        k->cap_ctx = cap;
    }
    kctx *c = &k->ctx[k->n_ctx++];
    *c = (kctx){t0, t1, (uint32_t)(uint64_t)e->tid, intern(k, e->name.s, e->name.len), 0, 0, 0, e->cat == CAT_PYFN,
                0, k->n_ctx - 1};
    k->st->contexts++;
    if (e->cat == CAT_OP && (e->have & H_STACK) && e->stack.len > 0 && k->n_stacks < k->max_events &&
        (c->stack = call_stack(k, e->stack.s, e->stack.len)) == 0)
        return fail_nomem(k);
    size_t file_len, func_at;
    if (c->py && py_frame_parse(e->name.s, e->name.len, &file_len, &c->line, &func_at)) {
        c->file = intern(k, e->name.s, file_len);
        c->func = intern(k, e->name.s + func_at, e->name.len - func_at);
    }
    return 1;
}

static int event_meta(kimp *k) {
    kev *e = &k->ev;
    k->st->meta_rows++;
    if (!equals(e->name.s, e->name.len, "thread_name") || !(e->have & H_MNAME) || !(e->have & H_TID) ||
        !(e->have & H_PID))
        return 1;
    if (e->mname.len > NAME_KEEP)
        e->mname.len = NAME_KEEP;
    uint64_t key = (uint64_t)(uint32_t)(uint64_t)e->pid << 32 | (uint32_t)(uint64_t)e->tid;
    uint64_t *v = u64map_get_or_add(&k->tnames, key, 0, NULL);
    if (v == NULL || kbuf_append(&k->tnames_text, e->mname.s, e->mname.len) != 0)
        return fail_nomem(k);
    *v = (uint64_t)(k->tnames_text.len - e->mname.len) << 16 | e->mname.len;
    return 1;
}

static int event_end(kimp *k) {
    kev *e = &k->ev;
    k->st->entries++;
    if (e->ph_len == 1 && e->ph == 'M')
        return event_meta(k);
    if (e->cat < CAT_KERNEL || e->ph_len != 1 || e->ph != 'X') {
        if (e->cat == CAT_NONE)
            count_skip(k, "(none)", 6);
        else
            count_skip(k, e->cat_text, e->cat_len);
        return 1;
    }
    switch (e->cat) {
    case CAT_RUNTIME:
    case CAT_DRIVER:
    case CAT_ANNOT: return event_host(k);
    case CAT_OP:
        if (k->ev.name.len > 13 && memcmp(k->ev.name.s, "ProfilerStep#", 13) == 0) {
            k->ev.cat = CAT_ANNOT; /* legacy traces: a step, as newer ones write it */
            return event_host(k);
        }
        return event_ctx(k);
    case CAT_PYFN: return event_ctx(k);
    default: return event_gpu(k);
    }
}

static void event_reset(kev *e) {
    e->have = 0;
    e->ph_len = 0;
    e->cat = CAT_NONE;
    e->cat_len = 0;
    e->name.len = 0;
    if (e->name.s)
        e->name.s[0] = '\0';
    e->mname.len = 0;
    e->stack.len = 0;
    e->sync_kind = 0;
    e->dims = 0;
    e->n_grid = e->n_block = 0;
    memset(e->grid, 0, sizeof e->grid);
    memset(e->block, 0, sizeof e->block);
}

/* ------------------------------------------------------------------------------------------ */
/* yajl callbacks                                                                             */
/* ------------------------------------------------------------------------------------------ */

/* The schema: each key the importer reads, where it may appear, and for the plain numbers where
 * their value goes. key_of finds a key here; scalar stores the plain numbers from the table and
 * handles the rest (strings, the timestamps' error bits, the top level) by key. */
enum field_kind {
    F_OTHER,  /* scalar() handles it by key */
    F_EV_INT, /* an integer into the event (at off), setting bit in kev.have */
    F_DP_INT  /* an integer into the device properties (at off) */
};

typedef struct kfield {
    uint8_t ctx;  /* enum ctx */
    uint8_t kind; /* enum field_kind */
    uint8_t len;  /* strlen(key) */
    const char *key;
    size_t off;
    uint32_t bit;
} kfield;

#define KF(c, k, kind_, off_, bit_) {(c), (kind_), sizeof(k) - 1, (k), (off_), (bit_)}
#define EV_INT(c, k, field, bit_) KF(c, k, F_EV_INT, offsetof(kev, field), (bit_))
#define DP_INT(k, field) KF(C_DEVPROP, k, F_DP_INT, offsetof(kdevprop, field), 0)
#define OTHER(c, k) KF(c, k, F_OTHER, 0, 0)

static const kfield k_fields[] = {
    [K_NONE] = OTHER(C_ROOT, ""),
    [K_TRACE_EVENTS] = OTHER(C_TOP, "traceEvents"),
    [K_DEVPROPS] = OTHER(C_TOP, "deviceProperties"),
    [K_DIST] = OTHER(C_TOP, "distributedInfo"),
    [K_BASE_TIME] = OTHER(C_TOP, "baseTimeNanoseconds"),
    [K_HOSTNAME] = OTHER(C_TOP, "hostname"),
    [K_RANK] = OTHER(C_DIST, "rank"),
    [K_WORLD] = OTHER(C_DIST, "world_size"),
    [K_P_ID] = DP_INT("id", id),
    [K_P_NAME] = OTHER(C_DEVPROP, "name"),
    [K_P_MAJOR] = DP_INT("computeMajor", major),
    [K_P_MINOR] = DP_INT("computeMinor", minor),
    [K_P_MEM] = DP_INT("totalGlobalMem", mem),
    [K_P_SMS] = DP_INT("numSms", sms),
    [K_PH] = OTHER(C_EVENT, "ph"),
    [K_CAT] = OTHER(C_EVENT, "cat"),
    [K_NAME] = OTHER(C_EVENT, "name"),
    [K_PID] = EV_INT(C_EVENT, "pid", pid, H_PID),
    [K_TID] = EV_INT(C_EVENT, "tid", tid, H_TID),
    [K_TS] = OTHER(C_EVENT, "ts"),
    [K_DUR] = OTHER(C_EVENT, "dur"),
    [K_ARGS] = OTHER(C_EVENT, "args"),
    [K_A_DEVICE] = EV_INT(C_ARGS, "device", device, H_DEVICE),
    [K_A_STREAM] = EV_INT(C_ARGS, "stream", stream, H_STREAM),
    [K_A_CORR] = EV_INT(C_ARGS, "correlation", corr, H_CORR),
    [K_A_CBID] = EV_INT(C_ARGS, "cbid", cbid, H_CBID),
    [K_A_BYTES] = EV_INT(C_ARGS, "bytes", bytes, H_BYTES),
    [K_A_CONTEXT] = EV_INT(C_ARGS, "context", context, H_CONTEXT),
    [K_A_GRID] = OTHER(C_ARGS, "grid"),
    [K_A_BLOCK] = OTHER(C_ARGS, "block"),
    [K_A_SYNC_KIND] = OTHER(C_ARGS, "cuda_sync_kind"),
    [K_A_EVENT] = EV_INT(C_ARGS, "wait_on_cuda_event_id", event, H_EVENT),
    [K_A_NAME] = OTHER(C_ARGS, "name"),
    [K_A_FROM_DEV] = EV_INT(C_ARGS, "fromDevice", from_dev, H_FROM_DEV),
    [K_A_TO_DEV] = EV_INT(C_ARGS, "toDevice", to_dev, H_TO_DEV),
    [K_A_GRAPH] = EV_INT(C_ARGS, "graph id", graph, H_GRAPH),
    [K_A_STACK] = OTHER(C_ARGS, "Call stack"),
};

/* The keys of each context are consecutive in enum key: [first, last]. */
static const struct {
    uint8_t first, last;
} k_ctx_keys[] = {
    [C_TOP] = {K_TRACE_EVENTS, K_HOSTNAME}, [C_DIST] = {K_RANK, K_WORLD},  [C_DEVPROP] = {K_P_ID, K_P_SMS},
    [C_EVENT] = {K_PH, K_ARGS},             [C_ARGS] = {K_A_DEVICE, K_A_STACK},
};

static int key_of(int ctx, const char *s, size_t len) {
    if (ctx < 0 || (size_t)ctx >= sizeof k_ctx_keys / sizeof k_ctx_keys[0] || k_ctx_keys[ctx].first == K_NONE)
        return K_NONE;
    for (int i = k_ctx_keys[ctx].first; i <= k_ctx_keys[ctx].last; i++) {
        const kfield *f = &k_fields[i];
        if (f->len == len && f->key[0] == s[0] && memcmp(f->key, s, len) == 0)
            return i;
    }
    return K_NONE;
}

static int push(kimp *k, int ctx) {
    if (k->sp + 1 >= (int)sizeof k->stack)
        return fail_here(k, ERR_MALFORMED, "nesting too deep");
    k->stack[++k->sp] = (uint8_t)ctx;
    k->key = K_NONE;
    return 1;
}

static int enter_skip(kimp *k) {
    if (++k->skip > MAX_SKIP_DEPTH)
        return fail_here(k, ERR_LIMIT, "JSON nested more than 1000 levels deep");
    return 1;
}

static int cb_map_key(void *ctx, const unsigned char *s, size_t len) {
    kimp *k = ctx;
    if (k->skip == 0)
        k->key = key_of(k->stack[k->sp], (const char *)s, len);
    return 1;
}

static int cb_start_map(void *ctx) {
    kimp *k = ctx;
    if (k->skip)
        return enter_skip(k);
    switch (k->stack[k->sp]) {
    case C_ROOT: return push(k, C_TOP);
    case C_TOP:
        if (k->key == K_DIST)
            return push(k, C_DIST);
        if (k->key == K_TRACE_EVENTS)
            k->events_not_array = 1;
        return enter_skip(k);
    case C_EVENTS: event_reset(&k->ev); return push(k, C_EVENT);
    case C_DEVPROPS:
        memset(&k->dp, 0, sizeof k->dp);
        k->dp.id = -1;
        return push(k, C_DEVPROP);
    case C_EVENT:
        if (k->key == K_ARGS)
            return push(k, C_ARGS);
        return enter_skip(k);
    default: return enter_skip(k);
    }
}

static int devprop_end(kimp *k) {
    kdevprop *d = &k->dp;
    if (d->id < 0 || d->id >= TP_NO_DEVICE)
        return 1;
    for (size_t i = 0; i < k->n_devprops; i++)
        if (k->devprops[i].id == d->id)
            return 1;
    if (k->n_devprops == MAX_DEVPROPS)
        return 1;
    if (k->devprops == NULL) {
        k->devprops = malloc(MAX_DEVPROPS * sizeof *k->devprops);
        if (k->devprops == NULL)
            return fail_nomem(k);
    }
    k->devprops[k->n_devprops++] = *d;
    return 1;
}

static int cb_end_map(void *ctx) {
    kimp *k = ctx;
    if (k->skip) {
        k->skip--;
        return 1;
    }
    int was = k->stack[k->sp--];
    if (was == C_EVENT)
        return event_end(k);
    if (was == C_DEVPROP)
        return devprop_end(k);
    return 1;
}

static int cb_start_array(void *ctx) {
    kimp *k = ctx;
    if (k->skip)
        return enter_skip(k);
    switch (k->stack[k->sp]) {
    case C_ROOT: /* Chrome's JSON Array Format: the events alone */
        k->saw_events = 1;
        return push(k, C_EVENTS);
    case C_TOP:
        if (k->key == K_TRACE_EVENTS) {
            k->saw_events = 1;
            return push(k, C_EVENTS);
        }
        if (k->key == K_DEVPROPS)
            return push(k, C_DEVPROPS);
        return enter_skip(k);
    case C_ARGS:
        if (k->key == K_A_GRID || k->key == K_A_BLOCK) {
            k->ev.dims = k->key;
            return push(k, C_DIMS);
        }
        return enter_skip(k);
    default: return enter_skip(k);
    }
}

static int cb_end_array(void *ctx) {
    kimp *k = ctx;
    if (k->skip) {
        k->skip--;
        return 1;
    }
    k->sp--;
    return 1;
}

/* A scalar at the current place: number text, string, or neither (bool, null). */
static int digits_only(const char *s, size_t n) {
    if (n == 0 || n > 20)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

static int scalar(kimp *k, const char *num, size_t num_len, const char *str, size_t str_len) {
    if (k->skip)
        return 1;
    kev *e = &k->ev;
    int64_t v = 0;
    int ok;
    const kfield *f = &k_fields[k->key];
    if (f->ctx != k->stack[k->sp]) /* a value in an array after such a key: not that key's */
        f = &k_fields[K_NONE];
    if (f->kind == F_EV_INT) {
        if (num && dec_parse(num, num_len, 0, 1, (int64_t *)(void *)((char *)e + f->off)) == 0)
            e->have |= f->bit;
        /* legacy traces write a host pid or tid as a string of digits ("25738") */
        else if (str && (k->key == K_PID || k->key == K_TID) && digits_only(str, str_len) &&
                 dec_parse(str, str_len, 0, 1, (int64_t *)(void *)((char *)e + f->off)) == 0)
            e->have |= f->bit;
        return 1;
    }
    if (f->kind == F_DP_INT) {
        if (num && dec_parse(num, num_len, 0, 1, &v) == 0)
            *(int64_t *)(void *)((char *)&k->dp + f->off) = v;
        return 1;
    }
    switch (k->stack[k->sp]) {
    case C_ROOT: return fail_here(k, ERR_MALFORMED, "not a Kineto trace: the JSON text is not an object");
    case C_EVENTS:
        k->st->entries++;
        count_skip(k, "(not an object)", strlen("(not an object)"));
        return 1;
    case C_EVENT:
        switch (k->key) {
        case K_PH:
            if (str) {
                e->ph_len = str_len;
                e->ph = str_len ? str[0] : 0;
            }
            return 1;
        case K_CAT:
            if (str) {
                e->cat = cat_of(str, str_len);
                e->cat_len = str_len < KINETO_CAT_MAX ? str_len : KINETO_CAT_MAX - 1;
                memcpy(e->cat_text, str, e->cat_len);
            }
            return 1;
        case K_NAME:
            if (str && kbuf_set(&e->name, str, str_len, TP_STRING_MAX) != 0)
                return fail_nomem(k);
            return 1;
        case K_TS: e->have |= num && dec_parse(num, num_len, 3, 0, &e->ts) == 0 ? H_TS : H_TS_BAD; return 1;
        case K_DUR:
            e->have |= num && dec_parse(num, num_len, 3, 0, &e->dur) == 0 ? H_DUR : H_DUR_BAD;
            return 1;
        default: return 1;
        }
    case C_ARGS:
        if (k->key == K_A_SYNC_KIND && str) {
            e->sync_kind = sync_type_of(str, str_len);
        } else if (k->key == K_A_STACK && str) {
            if (kbuf_set(&e->stack, str, str_len, STACK_KEEP) != 0)
                return fail_nomem(k);
            e->have |= H_STACK;
        } else if (k->key == K_A_NAME && str) {
            if (kbuf_set(&e->mname, str, str_len, NAME_KEEP) != 0)
                return fail_nomem(k);
            e->have |= H_MNAME;
        }
        return 1;
    case C_DIMS: {
        ok = num && dec_parse(num, num_len, 0, 1, &v) == 0 && v >= 0 && v <= (int64_t)UINT32_MAX;
        uint32_t *dims = e->dims == K_A_GRID ? e->grid : e->block;
        int *n = e->dims == K_A_GRID ? &e->n_grid : &e->n_block;
        if (*n < 3)
            dims[*n] = ok ? (uint32_t)v : 0;
        (*n)++;
        return 1;
    }
    case C_TOP:
        if (k->key == K_BASE_TIME && num && dec_parse(num, num_len, 0, 0, &v) == 0) {
            k->have_base = 1;
            k->base = v;
        } else if (k->key == K_HOSTNAME && str) {
            if (kbuf_set(&k->host, str, str_len, NAME_KEEP) != 0)
                return fail_nomem(k);
        } else if (k->key == K_TRACE_EVENTS) {
            k->events_not_array = 1;
        }
        return 1;
    case C_DIST:
        if (num && dec_parse(num, num_len, 0, 1, &v) == 0 && v >= INT32_MIN && v <= INT32_MAX) {
            if (k->key == K_RANK) {
                k->have_rank = 1;
                k->rank = v;
            } else if (k->key == K_WORLD) {
                k->have_world = 1;
                k->world = v;
            }
        }
        return 1;
    case C_DEVPROP:
        if (k->key == K_P_NAME && str) {
            k->dp.name_len = str_len < NAME_KEEP ? str_len : NAME_KEEP;
            memcpy(k->dp.name, str, k->dp.name_len);
        }
        return 1;
    default: return 1;
    }
}

static int cb_null(void *ctx) {
    return scalar(ctx, NULL, 0, NULL, 0);
}
static int cb_bool(void *ctx, int b) {
    (void)b;
    return scalar(ctx, NULL, 0, NULL, 0);
}
static int cb_number(void *ctx, const char *s, size_t len) {
    return scalar(ctx, s, len, NULL, 0);
}
static int cb_string(void *ctx, const unsigned char *s, size_t len) {
    return scalar(ctx, NULL, 0, (const char *)s, len);
}

static const yajl_callbacks callbacks = {
    cb_null,      cb_bool,    NULL,       NULL,           cb_number,    cb_string,
    cb_start_map, cb_map_key, cb_end_map, cb_start_array, cb_end_array,
};

/* ------------------------------------------------------------------------------------------ */
/* After the parse: fix-ups, correlations, order, encoding                                    */
/* ------------------------------------------------------------------------------------------ */

/* Adds baseTimeNanoseconds; drops (kind 0) events that end up out of range. */
static void fix_times(kimp *k) {
    int64_t base = k->have_base ? k->base : 0;
    for (size_t i = 0; i < k->n_rec; i++) {
        tp_kernel *r = &k->rec[i].kernel; /* every event kind has start/end at the same place */
        int64_t s, e;
        if (__builtin_add_overflow((int64_t)r->start, base, &s) ||
            __builtin_add_overflow((int64_t)r->end, base, &e) || s < 0) {
            if (k->st->invalid++ == 0)
                snprintf(k->st->first_invalid, sizeof k->st->first_invalid,
                         "an event whose time is before 1970 or out of range");
            r->kind = 0;
            continue;
        }
        r->start = (uint64_t)s;
        r->end = (uint64_t)e;
    }
    for (size_t i = 0; i < k->n_ctx; i++) { /* operators and Python frames: on the same clock */
        int64_t s, e;
        if (__builtin_add_overflow((int64_t)k->ctx[i].start, base, &s) ||
            __builtin_add_overflow((int64_t)k->ctx[i].end, base, &e) || s < 0)
            s = e = 0; /* contains no call */
        k->ctx[i].start = (uint64_t)s;
        k->ctx[i].end = (uint64_t)e;
    }
}

/* Gives host calls their device and flags from the GPU operation with the same correlation id;
 * marks copies and memsets issued by an Async call TP_F_ASYNC. */
static int resolve_apis(kimp *k) {
    u64map ops = {0}; /* correlation -> record index; a copy or memset wins over other rows */
    for (size_t i = 0; i < k->n_rec; i++) {
        const tp_kernel *r = &k->rec[i].kernel;
        if (r->kind != TP_K_KERNEL && r->kind != TP_K_MEMCPY && r->kind != TP_K_MEMSET &&
            r->kind != TP_K_SYNC)
            continue;
        if (r->correlation == 0)
            continue;
        int added;
        uint64_t *v = u64map_get_or_add(&ops, r->correlation, i, &added);
        if (v == NULL) {
            u64map_free(&ops);
            return err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
        }
        if (!added && (r->kind == TP_K_MEMCPY || r->kind == TP_K_MEMSET)) {
            unsigned old = k->rec[*v].head.kind;
            if (old != TP_K_MEMCPY && old != TP_K_MEMSET)
                *v = i;
        }
    }
    for (size_t i = 0; i < k->n_rec; i++) {
        tp_api *a = &k->rec[i].api;
        if (a->kind != TP_K_API)
            continue;
        int cls = (int)a->pad0;
        a->pad0 = 0;
        tp_record *op = NULL;
        if (a->correlation) {
            const uint64_t *v = u64map_find(&ops, a->correlation);
            if (v)
                op = &k->rec[*v];
        }
        if (op)
            a->device = op->head.device;
        unsigned flags = st_api_resolve((st_api_class)cls, op);
        a->flags |= (uint8_t)flags;
        if (flags & TP_F_BLOCKING) {
            k->st->blocking_calls++;
            k->st->blocked_ns += a->end - a->start;
        }
    }
    u64map_free(&ops);
    return 0;
}

typedef struct korder {
    uint64_t start;
    uint64_t index;
} korder;

static int order_cmp(const void *a, const void *b) {
    const korder *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct kout {
    kimp *k;
    kineto_emit_fn emit;
    void *ctx;
    size_t batch_records;
    tp_buf buf;
    int first;
} kout;

static int out_flush(kout *o, uint32_t flags) {
    kimp *k = o->k;
    if (o->first) {
        tp_enc_keyframe(k->enc);
        o->first = 0;
    }
    int rc = tp_enc_finish_flags(k->enc, flags, &o->buf);
    if (rc)
        return err_set(k->err, rc, "%s: cannot encode a batch: %s", k->name, err_str(rc));
    rc = o->emit(o->ctx, o->buf.data, o->buf.len, k->err);
    if (rc)
        return rc < 0 ? rc : ERR_IO;
    tp_enc_delivered(k->enc, 1);
    k->st->batches++;
    k->st->batch_bytes += o->buf.len;
    return 0;
}

static int out_add(kout *o, const void *rec, int more) {
    kimp *k = o->k;
    int rc = tp_enc_add(k->enc, rec);
    if (rc)
        return err_set(k->err, rc, "%s: too many metadata records (threads, streams): %s", k->name,
                          err_str(rc));
    unsigned kind = ((const tp_head *)rec)->kind;
    k->st->records[kind]++;
    if (!TP_KIND_IS_META(kind))
        k->st->events++;
    if (more && tp_enc_pending(k->enc) >= o->batch_records)
        return out_flush(o, 0);
    return 0;
}

/* ---- call sites from operators and Python frames ---- */


static int ctx_cmp(const void *a, const void *b) {
    const kctx *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->end != y->end) /* the outer one first */
        return x->end > y->end ? -1 : 1;
    if (x->py != y->py) /* of one span, the Python frame calls the operator */
        return x->py ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq; /* else the earlier row holds the later */
}

typedef struct kcall {
    uint32_t tid;
    uint64_t start;
    size_t index;
} kcall;

static int call_cmp(const void *a, const void *b) {
    const kcall *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Emits a call site for each distinct stack of operators and Python frames around a blocking call
 * (frames innermost first, as the tracer sends them) and sets the calls' call-site ids. One sweep
 * per thread over its contexts and calls in time order: a stack holds the contexts open at a call. */
static int kineto_callsites(kimp *k, kout *o) {
    size_t nb = 0;
    for (size_t i = 0; i < k->n_rec; i++)
        nb += k->rec[i].head.kind == TP_K_API && (k->rec[i].api.flags & TP_F_BLOCKING);
    if (nb == 0 || k->n_ctx == 0)
        return 0;
    kcall *calls = malloc(nb * sizeof *calls);
    size_t *stack = malloc(k->n_ctx * sizeof *stack);
    u64map ids = {0};
    int rc = 0;
    if (calls == NULL || stack == NULL) {
        rc = err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
        goto out;
    }
    nb = 0;
    for (size_t i = 0; i < k->n_rec; i++)
        if (k->rec[i].head.kind == TP_K_API && (k->rec[i].api.flags & TP_F_BLOCKING))
            calls[nb++] = (kcall){k->rec[i].api.tid, k->rec[i].api.start, i};
    qsort(calls, nb, sizeof *calls, call_cmp);
    qsort(k->ctx, k->n_ctx, sizeof *k->ctx, ctx_cmp);
    size_t j = 0, depth = 0;
    uint32_t tid = UINT32_MAX;
    uint32_t next_id = 1;
    for (size_t c = 0; c < nb && rc == 0; c++) {
        tp_api *a = &k->rec[calls[c].index].api;
        if (a->tid != tid) { /* a new thread: its contexts */
            tid = a->tid;
            depth = 0;
            while (j < k->n_ctx && k->ctx[j].tid < tid)
                j++;
        }
        while (j < k->n_ctx && k->ctx[j].tid == tid && k->ctx[j].start <= a->start) {
            while (depth > 0 && k->ctx[stack[depth - 1]].end < k->ctx[j].start)
                depth--;
            stack[depth++] = j++;
        }
        while (depth > 0 && k->ctx[stack[depth - 1]].end < a->start)
            depth--;
        /* the contexts around the call, innermost first; an operator's Call stack (legacy traces)
         * holds the Python frames above it and the operators called from the same line */
        tp_frame fr[KCALLSITE_FRAMES];
        size_t nf = 0;
        uint32_t pystack = 0;
        /* rows that overlap without nesting can stay on the stack below open ones: look at a
         * bounded number of them per call */
        size_t floor = depth > KCALLSITE_LOOK ? depth - KCALLSITE_LOOK : 0;
        for (size_t d = depth; d > floor && nf < KCALLSITE_FRAMES; d--) {
            const kctx *x = &k->ctx[stack[d - 1]];
            if (x->end < a->end)
                continue;
            if (pystack != 0 && (x->py || (x->stack != 0 && x->stack != pystack)))
                break; /* called from elsewhere than the line the Call stack names */
            fr[nf++] = (tp_frame){.flags = x->py ? TP_FRAME_PYTHON : TP_FRAME_OP, .func = x->func ? x->func : x->name,
                                  .file = x->file, .line = x->line};
            if (pystack == 0)
                pystack = x->stack;
        }
        if (pystack != 0) {
            uint64_t at = k->stacks[pystack - 1];
            for (size_t f = 0; f < (at & 0xff) && nf < KCALLSITE_FRAMES; f++) {
                const kpyframe *p = &k->pyfr[(at >> 8) + f];
                fr[nf++] = (tp_frame){.flags = TP_FRAME_PYTHON, .func = p->func, .file = p->file, .line = p->line};
            }
        }
        if (nf == 0)
            continue;
        uint64_t h = (1469598103934665603ull ^ a->name) * 1099511628211ull; /* one site per API and frames */
        for (size_t f = 0; f < nf; f++)
            h = (((h ^ fr[f].flags) * 1099511628211ull ^ fr[f].func) * 1099511628211ull ^
                 ((uint64_t)fr[f].file << 32 | fr[f].line)) * 1099511628211ull;
        if (h == 0)
            h = 1;
        int added;
        uint64_t *id = u64map_get_or_add(&ids, h, next_id, &added);
        if (id == NULL) {
            rc = err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
            break;
        }
        a->callsite = (uint32_t)*id;
        k->st->sited_calls++;
        if (!added)
            continue;
        next_id++;
        tp_callsite cs = {.kind = TP_K_CALLSITE, .device = TP_NO_DEVICE, .id = a->callsite, .n_frames = (uint32_t)nf};
        if ((rc = out_add(o, &cs, 1)) != 0)
            break;
        for (size_t f = 0; f < nf && rc == 0; f++) {
            fr[f].kind = TP_K_FRAME;
            fr[f].index = (uint16_t)f;
            fr[f].callsite = a->callsite;
            rc = out_add(o, &fr[f], 1);
        }
    }
out:
    free(calls);
    free(stack);
    u64map_free(&ids);
    return rc;
}

static int emit_all(kimp *k, kineto_emit_fn emit, void *ctx) {
    kineto_stats *st = k->st;
    fix_times(k);
    int rc = resolve_apis(k);
    if (rc)
        return rc;

    /* events in time order, ties in file order */
    size_t n_ev = 0;
    korder *ord = malloc((k->n_rec ? k->n_rec : 1) * sizeof *ord);
    uint64_t *keys = NULL;
    kout o = {.k = k, .emit = emit, .ctx = ctx, .first = 1};
    o.batch_records = k->opts && k->opts->batch_records ? k->opts->batch_records : KINETO_BATCH_RECORDS;
    if (ord == NULL) {
        rc = err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
        goto out;
    }
    for (size_t i = 0; i < k->n_rec; i++) {
        if (k->rec[i].head.kind == 0)
            continue;
        ord[n_ev].start = k->rec[i].kernel.start;
        ord[n_ev].index = i;
        n_ev++;
        if (st->t_min == 0 && st->t_max == 0) {
            st->t_min = k->rec[i].kernel.start;
            st->t_max = k->rec[i].kernel.end;
        }
        if (k->rec[i].kernel.start < st->t_min)
            st->t_min = k->rec[i].kernel.start;
        if (k->rec[i].kernel.end > st->t_max)
            st->t_max = k->rec[i].kernel.end;
    }
    qsort(ord, n_ev, sizeof *ord, order_cmp);

    /* metadata: the process, the devices used, streams and threads in id order */
    st->rank = k->have_rank ? (int32_t)k->rank : -1;
    st->world = k->have_world ? (int32_t)k->world : -1;
    st->pid = k->pid;
    tp_process p = {
        .kind = TP_K_PROCESS, .device = TP_NO_DEVICE, .pid = k->pid, .rank = st->rank, .world = st->world};
    p.host = intern(k, k->host.s, k->host.len);
    p.cmdline = tp_enc_intern_cstr(k->enc, cm_base_name(k->name));
    if ((rc = out_add(&o, &p, 1)) != 0)
        goto out;
    for (unsigned d = 0; d < TP_NO_DEVICE; d++) {
        if (!(k->dev_used[d / 8] & (1u << (d % 8))))
            continue;
        tp_device dv = {.kind = TP_K_DEVICE, .device = (uint16_t)d};
        for (size_t i = 0; i < k->n_devprops; i++) {
            const kdevprop *q = &k->devprops[i];
            if (q->id != (int64_t)d)
                continue;
            dv.name = intern(k, q->name, q->name_len);
            dv.cc_major = q->major >= 0 && q->major < 256 ? (uint8_t)q->major : 0;
            dv.cc_minor = q->minor >= 0 && q->minor < 256 ? (uint8_t)q->minor : 0;
            dv.sm_count = q->sms >= 0 && q->sms <= (int64_t)UINT32_MAX ? (uint32_t)q->sms : 0;
            dv.memory_bytes = q->mem > 0 ? (uint64_t)q->mem : 0;
        }
        if ((rc = out_add(&o, &dv, 1)) != 0)
            goto out;
    }
    for (int pass = 0; pass < 2; pass++) {
        u64map *m = pass == 0 ? &k->streams : &k->threads;
        free(keys);
        keys = malloc((u64map_count(m) ? u64map_count(m) : 1) * sizeof *keys);
        if (keys == NULL) {
            rc = err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
            goto out;
        }
        size_t n = u64map_keys(m, keys);
        qsort(keys, n, sizeof *keys, u64_cmp);
        for (size_t i = 0; i < n; i++) {
            tp_record r;
            memset(&r, 0, sizeof r);
            if (pass == 0) {
                r.stream.kind = TP_K_STREAM;
                r.stream.device = (uint16_t)(keys[i] >> 32);
                r.stream.stream = (uint32_t)keys[i];
                r.stream.context = (uint32_t)*u64map_find(m, keys[i]);
            } else {
                r.thread.kind = TP_K_THREAD;
                r.thread.device = TP_NO_DEVICE;
                r.thread.pid = (uint32_t)(keys[i] >> 32);
                r.thread.tid = (uint32_t)keys[i];
                const uint64_t *nm = u64map_find(&k->tnames, keys[i]);
                if (nm)
                    r.thread.name = intern(k, k->tnames_text.s + (*nm >> 16), (size_t)(*nm & 0xffff));
            }
            if ((rc = out_add(&o, &r, 1)) != 0)
                goto out;
        }
    }
    /* The device-wide pseudo-stream's record says how the trace spelled it (see kineto.h). */
    for (unsigned d = 0; d < TP_NO_DEVICE; d++) {
        if (k->wide[d] == 0)
            continue;
        tp_record r;
        memset(&r, 0, sizeof r);
        r.stream.kind = TP_K_STREAM;
        r.stream.device = (uint16_t)d;
        r.stream.stream = TP_NO_ID;
        r.stream.flags = k->wide[d];
        if ((rc = out_add(&o, &r, 1)) != 0)
            goto out;
    }
    if ((rc = kineto_callsites(k, &o)) != 0)
        goto out;
    for (size_t i = 0; i < n_ev; i++)
        if ((rc = out_add(&o, &k->rec[ord[i].index], i + 1 < n_ev)) != 0)
            goto out;
    rc = out_flush(&o, TP_BF_END);
    if (rc == 0) {
        tp_enc_stats es;
        tp_enc_stats_get(k->enc, &es);
        st->strings_refused = es.strings_refused;
    }
out:
    free(ord);
    free(keys);
    tp_buf_free(&o.buf);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* The import                                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* Gives the parser one piece of JSON text. */
static int feed(kimp *k, const uint8_t *p, size_t n) {
    k->chunk = p;
    yajl_status ys = yajl_parse(k->h, p, n);
    if (ys != yajl_status_ok) {
        if (k->fail)
            return k->fail;
        unsigned char *msg = yajl_get_error(k->h, 0, NULL, 0);
        char what[256];
        snprintf(what, sizeof what, "invalid JSON: %s", msg ? (const char *)msg : "parse error");
        what[strcspn(what, "\n")] = '\0';
        if (msg)
            yajl_free_error(k->h, msg);
        size_t off = yajl_get_bytes_consumed(k->h);
        if (off > 0)
            off--; /* yajl has consumed the offending byte: point at it */
        uint64_t line, col;
        pos_at(k, off, &line, &col);
        return err_set(k->err, ERR_MALFORMED, "%s: line %llu, column %llu (byte %llu): %s", k->name,
                       (unsigned long long)line, (unsigned long long)col, (unsigned long long)(k->chunk_off + off),
                       what);
    }
    uint64_t nl = 0;
    const uint8_t *q = p, *end = p + n, *last = NULL;
    while ((q = memchr(q, '\n', (size_t)(end - q))) != NULL) {
        nl++;
        last = q++;
    }
    k->lines += nl;
    k->col_base = last ? (uint64_t)(end - last - 1) : k->col_base + n;
    k->chunk_off += n;
    return 0;
}

static int parse_all(kimp *k, ksrc *s) {
    int rc = src_start(s, k->err);
    if (rc)
        return rc;
    k->st->gzip = s->gz;
    k->h = yajl_alloc(&callbacks, NULL, k);
    if (k->h == NULL)
        return err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
    yajl_config(k->h, yajl_dont_validate_strings, 1); /* names are stored as they are */
    const kineto_opts *o = k->opts;
    for (;;) {
        const uint8_t *p = NULL;
        size_t n = 0;
        rc = src_next(s, &p, &n, k->err);
        if (rc < 0)
            return rc;
        if (rc == 0)
            break;
        for (size_t off = 0; off < n;) {
            size_t keep, used = clip_next(&k->clip, p + off, n - off, &keep);
            if (keep > 0 && (rc = feed(k, p + off, keep)) != 0)
                return rc;
            k->chunk_off += used - keep; /* a long string's dropped tail */
            off += used;
        }
        if (o && o->progress)
            o->progress(o->progress_ctx, src_done(s), s->total);
    }
    k->st->input_bytes = s->read_bytes;
    k->st->strings_cut = k->clip.cuts;
    k->st->json_bytes = k->chunk_off;
    k->chunk = NULL;
    yajl_status ys = yajl_complete_parse(k->h);
    if (ys != yajl_status_ok) {
        if (k->fail)
            return k->fail;
        return err_set(k->err, ERR_TRUNCATED,
                          "%s: JSON text cut short: it ends at line %llu (byte %llu) inside a value", k->name,
                          (unsigned long long)k->lines + 1, (unsigned long long)k->chunk_off);
    }
    if (!k->saw_events)
        return err_set(k->err, ERR_MALFORMED, "%s: not a Kineto trace: %s", k->name,
                          k->events_not_array ? "traceEvents is not an array" : "no traceEvents array");
    return 0;
}

static int import(ksrc *s, const char *name, const kineto_opts *opts, kineto_emit_fn emit, void *ctx,
                  kineto_stats *st_out, err_msg *err) {
    kineto_stats st_local;
    kineto_stats *st = st_out ? st_out : &st_local;
    memset(st, 0, sizeof *st);
    st->rank = st->world = -1;
    err_msg err_local;
    if (err == NULL)
        err = &err_local;
    kimp *k = calloc(1, sizeof *k);
    if (k == NULL)
        return err_set(err, ERR_NOMEM, "%s: out of memory", name);
    k->name = name;
    k->opts = opts;
    k->st = st;
    k->err = err;
    k->max_events = opts && opts->max_events ? opts->max_events : KINETO_MAX_EVENTS;
    k->stack[0] = C_ROOT;
    if (kbuf_set(&k->ev.name, "", 0, 0) != 0 || kbuf_set(&k->ev.mname, "", 0, 0) != 0) {
        free(k->ev.name.s);
        free(k);
        return err_set(err, ERR_NOMEM, "%s: out of memory", name);
    }
    k->enc = tp_enc_new(
        &(tp_enc_opts){.producer = opts ? opts->producer : 0, .max_string_bytes = KINETO_MAX_STRING_BYTES});
    int rc;
    if (k->enc == NULL)
        rc = err_set(err, ERR_NOMEM, "%s: out of memory", name);
    else
        rc = parse_all(k, s);
    if (rc == 0 && k->fail)
        rc = k->fail;
    if (rc == 0)
        rc = emit_all(k, emit, ctx);
    if (k->h)
        yajl_free(k->h);
    tp_enc_destroy(&k->enc);
    free(k->ev.name.s);
    free(k->ev.mname.s);
    free(k->ev.stack.s);
    free(k->host.s);
    free(k->tnames_text.s);
    free(k->devprops);
    free(k->rec);
    free(k->ctx);
    free(k->pyfr);
    free(k->stacks);
    u64map_free(&k->stack_ids);
    u64map_free(&k->streams);
    u64map_free(&k->threads);
    u64map_free(&k->tnames);
    free(k);
    return rc;
}

int kineto_import_mem(const void *data, size_t len, const char *name, const kineto_opts *opts,
                      kineto_emit_fn emit, void *ctx, kineto_stats *st, err_msg *err) {
    if (name == NULL)
        name = "(memory)";
    if (emit == NULL || (data == NULL && len > 0))
        return err_set(err, ERR_INVAL, "%s: invalid argument", name);
    ksrc s = {.name = name, .fd = -1, .mem = data, .mem_len = len, .total = len};
    int rc = import(&s, name, opts, emit, ctx, st, err);
    src_close(&s);
    return rc;
}

int kineto_import_fd(int fd, const void *prefix, size_t prefix_len, const char *name, const kineto_opts *opts,
                     kineto_emit_fn emit, void *ctx, kineto_stats *st, err_msg *err) {
    if (fd < 0 || emit == NULL || prefix_len > CHUNK || (prefix == NULL && prefix_len > 0))
        return err_set(err, ERR_INVAL, "kineto import: invalid argument");
    ksrc s = {.name = name, .fd = fd};
    struct stat sb;
    int rc = 0;
    if (fstat(fd, &sb) == 0) {
        if (S_ISDIR(sb.st_mode))
            rc = err_set(err, ERR_INVAL, "%s: is a directory", name);
        else if (S_ISREG(sb.st_mode))
            s.total = (uint64_t)sb.st_size;
    }
    if (rc == 0) {
        s.in = malloc(CHUNK);
        if (s.in == NULL) {
            rc = err_set(err, ERR_NOMEM, "%s: out of memory", name);
        } else {
            if (prefix_len > 0)
                memcpy(s.in, prefix, prefix_len);
            s.in_len = prefix_len;
            s.read_bytes = prefix_len;
            rc = import(&s, name, opts, emit, ctx, st, err);
        }
    }
    src_close(&s);
    return rc;
}

int kineto_import(const char *path, const kineto_opts *opts, kineto_emit_fn emit, void *ctx, kineto_stats *st,
                  err_msg *err) {
    if (path == NULL || emit == NULL)
        return err_set(err, ERR_INVAL, "kineto import: invalid argument");
    if (strcmp(path, "-") == 0)
        return kineto_import_fd(STDIN_FILENO, NULL, 0, "(stdin)", opts, emit, ctx, st, err);
    /* not blocking in open(): a FIFO nobody writes to then reads as empty */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        return err_set(err,
                       e == ENOENT   ? ERR_NOENT
                       : e == EACCES ? ERR_PERM
                                     : ERR_IO,
                       "%s: %s", path, strerror(e));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    int rc = kineto_import_fd(fd, NULL, 0, path, opts, emit, ctx, st, err);
    close(fd);
    return rc;
}
