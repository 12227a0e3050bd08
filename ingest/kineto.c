/*
 * Kineto trace import (kineto.h): a scanner of its own over the JSON text that knows the few keys of
 * Kineto's schema, reads an event's keys directly and steps over everything else without building
 * anything, while checking the whole text as strictly as yajl 2 did (yajl's grammar, its error
 * messages and the places they name). Numbers keep their text, so timestamps are converted exactly.
 * The text comes from a plain or gzip source, read (and inflated) on a second thread for large
 * inputs: gzip by ISA-L (igzip), with zlib taking over from the start whenever ISA-L meets anything
 * unusual (a damaged or cut stream, an unusual header), so that what is read and every gzip error
 * stay zlib's. Events become records in memory; once the whole file is read, timestamps get
 * baseTimeNanoseconds, host calls get their device and blocking flag from the GPU operation with
 * the same correlation id, and everything is encoded in time order.
 *
 * This module owns the input source, the scanner and parser state and the records until they are
 * emitted.
 */
#include "kineto.h"
#include "api.h"
#include "decimal.h"
#include "emit.h"
#include "json_src.h"
#include "text.h"
#include "u64map.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <isa-l/crc64.h>

#include "synctop/codec.h"

#define KINETO_MAX_TOKEN (1u << 20)   /* strings are cut here (see lex_long) */
#define LONG_NUMBER      (64u << 10)  /* numbers longer than this are followed without their text */
#define MAX_SKIP_DEPTH   1000         /* nesting inside values the importer ignores */
#define YDEPTH           1100         /* open containers: the importer's few and MAX_SKIP_DEPTH */
#define MAX_DEVPROPS     256          /* deviceProperties entries kept */
#define NAME_KEEP        1024         /* bytes of a thread or device name kept */
#define STACK_KEEP       65535        /* bytes of an operator's "Call stack" kept */
#define DEC_TEXT_MAX     4096         /* longer numbers are not numbers we can use */

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

typedef struct kbuf {
    char *s;
    size_t len, cap;
} kbuf;

typedef struct kev {
    uint32_t have;
    char ph;
    size_t ph_len;
    int cat;
    char cat_text[IMPORT_CAT_MAX];
    size_t cat_len;
    const char *name_s; /* the name: in name_buf, or in the window while in_window */
    size_t name_len;
    int in_window;
    kbuf name_buf, mname;
    kbuf stack;         /* args."Call stack" (legacy traces recorded with_stack), when not yet known */
    uint64_t stack_key; /* its stack_ids key (a hash of its text) */
    uint32_t stack_id;  /* its index + 1 in stacks when already known (then stack is empty) */
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

/* An operator or a Python frame on a host thread: the context of the calls inside it. */
typedef struct kctx {
    uint64_t start, end;
    uint32_t tid, name; /* name: the operator's, or the Python frame's whole text */
    uint32_t file, line, func; /* a Python frame's parts, when its text gives them */
    uint32_t py;
    uint32_t stack; /* an operator's Python stack (legacy "Call stack"): index + 1 in kimp.stacks; 0 none */
    uint64_t seq;   /* its place in the file */
} kctx;

/* A key an object is expected to have next: as its text was the last two times (two shapes of
 * objects may alternate) at that place in an object of that kind (see pred_slot), from its opening
 * quote to its colon. */
#define PRED_POS  32 /* keys predicted per object */
#define PRED_KEEP 32 /* bytes of a key's text kept */
typedef struct kpred {
    uint8_t text[2][PRED_KEEP];
    uint32_t mask[2]; /* (1 << len) - 1 */
    uint8_t len[2], key[2];
    uint8_t older; /* which of the two to replace */
    uint8_t last;  /* the end of its row: nothing predicted */
} kpred;

/* A category's spelling met lately, and what it is (see cat_of). */
#define KCAT_SEEN 4
typedef struct kcatseen {
    char text[24];
    uint8_t len, cat; /* len 0: none yet */
} kcatseen;

/* A name the encoder has interned (see intern). */
typedef struct kname {
    uint64_t hash;
    uint32_t off, len; /* its text in kimp.names_text */
    uint32_t id;
} kname;

/* A Python frame of an operator's "Call stack". */
typedef struct kpyframe {
    uint32_t file, line, func;
} kpyframe;

#define KCALLSITE_FRAMES 48  /* innermost frames kept per call site (and per Call stack) */
#define KCALLSITE_LOOK   512 /* open rows looked at per call, innermost first */


typedef struct kimp {
    const char *name; /* for messages */
    const import_opts *opts;
    import_stats *st;
    err_msg *err;
    int fail; /* first error code, its message in err */
    tp_enc *enc;

    /* the text being scanned: [wbeg, wend), a 0 byte at wend */
    const uint8_t *wbeg, *wend, *wpos; /* wpos: where scanning goes on */
    uint64_t wbase;                    /* offset of wbeg in the text */
    const uint8_t *at;                 /* end of the token whose callback runs (for messages) */
    uint8_t *big;                      /* a long token and the piece after it, when JSRC_HEAD is short */
    size_t big_cap;

    /* lines, for messages: newlines before the scanning point, where the last two lines start,
     * and the bytes of cut strings' tails on them (not counted in columns) */
    uint64_t nl, line_at, line_prev, drop, drop_prev;

    /* the grammar: its state (enum ystate), and per open container the state after it */
    uint8_t ys;
    uint16_t depth;
    uint8_t ystk[YDEPTH];

    /* long tokens followed across pieces without their text */
    int tail;            /* in the dropped tail of a cut string: 1, 2 when its kept part has escapes */
    int tail_esc, tail_hex;
    kbuf kept;           /* the part of that string that is kept */
    uint64_t tok_at;     /* offset of that token's start */
    int lnum;            /* in a long number: the state of number_step + 1; 0 none */
    const dec_num *nv;      /* the parts of the number scalar() is given, when the scanner read them */
    uint64_t cuts;       /* strings cut */
    uint64_t feed0;      /* where the second of the pieces of feed_start starts */
    uint64_t cut_close;  /* offset of the last cut string's closing quote */
    kbuf dec;            /* a string with escapes, decoded */

    /* the schema */
    uint64_t kmask[C_DIMS + 1][32]; /* see key_masks */
    uint64_t kwords[64][2];         /* each key's first 16 bytes, zero-padded */
    uint8_t stack[8];
    kpred *pnext[8]; /* per level of stack under the top: the prediction of its object's next key */
    kpred *pcur;     /* the same for the top */
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
    kpred pred[C_DIMS + 1 + 16][PRED_POS + 1]; /* per context (args: per category) and place */
    kname *names;   /* string ids by name (see intern) */
    kcatseen cat_seen[KCAT_SEEN];
    unsigned cat_next;
    u64map api_class; /* string id of a host call's name -> its st_api_class */
    size_t n_names, n_names_cap;
    kbuf names_text;
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
    uint64_t last_stream, last_thread; /* the last key put in each, + 1; 0 none */
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

/* Offset in the text of a place in the window. */
static uint64_t off_of(const kimp *k, const uint8_t *p) {
    return k->wbase + (uint64_t)(p - k->wbeg);
}

/* Line and column (1-based) of text offset off, at or after the start of the line before the
 * scanning point's: newlines are counted as the scanner passes them (only whitespace holds them),
 * and a column counts the bytes the text has on its line, cut strings' tails left out. */
static void pos_at(const kimp *k, uint64_t off, uint64_t *line, uint64_t *col) {
    if (off >= k->line_at || k->nl == 0) {
        *line = k->nl + 1;
        *col = off - k->line_at - k->drop + 1;
    } else {
        *line = k->nl;
        *col = off - k->line_prev - k->drop_prev + 1;
    }
}

/* Records a fatal error at the end of the current token; returns 0 so a callback can stop the
 * scan. */
static int fail_here(kimp *k, int code, const char *what) {
    if (k->fail)
        return 0;
    uint64_t off = off_of(k, k->at), line, col;
    pos_at(k, off, &line, &col);
    k->fail = err_set(k->err, code, "%s: line %llu, column %llu (byte %llu): %s", k->name, (unsigned long long)line,
                      (unsigned long long)col, (unsigned long long)off, what);
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

/* The categories imported, as Kineto writes them now and as PyTorch 1.8/1.9 did (any case). */
static const struct {
    const char *name;
    uint8_t len, cat;
} k_cats[] = {
    {"kernel", 6, CAT_KERNEL},
    {"cuda_runtime", 12, CAT_RUNTIME},
    {"runtime", 7, CAT_RUNTIME},
    {"gpu_memcpy", 10, CAT_MEMCPY},
    {"memcpy", 6, CAT_MEMCPY},
    {"gpu_memset", 10, CAT_MEMSET},
    {"memset", 6, CAT_MEMSET},
    {"cuda_sync", 9, CAT_SYNC},
    {"cuda_driver", 11, CAT_DRIVER},
    {"driver", 6, CAT_DRIVER},
    {"user_annotation", 15, CAT_ANNOT},
    {"gpu_user_annotation", 19, CAT_GPU_ANNOT},
    {"cpu_op", 6, CAT_OP},
    {"operator", 8, CAT_OP},
    {"python_function", 15, CAT_PYFN},
};

/* An event's category: the spellings met last are remembered exactly (a trace uses a few), the
 * others looked up in k_cats. */
static int cat_of(kimp *k, const char *s, size_t n) {
    for (int i = 0; i < KCAT_SEEN; i++)
        if (k->cat_seen[i].len == n && memcmp(k->cat_seen[i].text, s, n) == 0)
            return k->cat_seen[i].cat;
    int cat = CAT_OTHER;
    for (size_t i = 0; i < sizeof k_cats / sizeof k_cats[0]; i++)
        if (k_cats[i].len == n && ieq(s, n, k_cats[i].name)) {
            cat = k_cats[i].cat;
            break;
        }
    if (n > 0 && n <= sizeof k->cat_seen[0].text) {
        kcatseen *c = &k->cat_seen[k->cat_next++ % KCAT_SEEN];
        memcpy(c->text, s, n);
        c->len = (uint8_t)n;
        c->cat = (uint8_t)cat;
    }
    return cat;
}

/* The st_api_class of a host call's name (id: its string id, 0 when it has none), worked out once
 * per name. */
static int api_class(kimp *k, uint32_t id, const char *s, size_t n) {
    int added;
    uint64_t *v = id ? u64map_get_or_add(&k->api_class, id, 0, &added) : NULL;
    if (v != NULL && !added)
        return (int)*v;
    int cls = (int)st_api_class_of(s, n);
    if (v != NULL)
        *v = (uint64_t)cls;
    return cls;
}

static int starts(const char *s, size_t n, const char *lit) {
    size_t m = strlen(lit);
    return n >= m && memcmp(s, lit, m) == 0;
}

static int equals(const char *s, size_t n, const char *lit) {
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

/* The memory kinds as copy and memset names spell them, in enum tp_mem_kind's order. */
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
    import_stats *st = k->st;
    st->skipped++;
    if (len >= IMPORT_CAT_MAX)
        len = IMPORT_CAT_MAX - 1;
    for (size_t i = 0; i < st->n_skip; i++) {
        if (strlen(st->skip[i].cat) == len && memcmp(st->skip[i].cat, cat, len) == 0) {
            st->skip[i].count++;
            return;
        }
    }
    if (st->n_skip == IMPORT_SKIP_SLOTS) {
        st->skip_other++;
        return;
    }
    import_skip *s = &st->skip[st->n_skip++];
    memcpy(s->cat, cat, len);
    s->cat[len] = '\0';
    s->count = 1;
}

/* An entry of an imported category that cannot be used: counted, the first one described. */
static int invalid(kimp *k, const kev *e, const char *why) {
    import_stats *st = k->st;
    if (st->invalid++ == 0) {
        uint64_t line, col;
        pos_at(k, off_of(k, k->at), &line, &col);
        static const char *const cats[] = {
            "?",           "?",          "kernel",        "memcpy", "memset", "cuda_sync", "runtime call",
            "driver call", "annotation", "gpu annotation"};
        snprintf(st->first_invalid, sizeof st->first_invalid,
                 "traceEvents entry %llu (ending line %llu): %s %s", (unsigned long long)(st->entries - 1),
                 (unsigned long long)line, cats[e->cat], why);
    }
    return 1;
}
/* The records and the operators grow to many megabytes: each lives in a mapping of its own, which
 * grows by moving its pages (mremap), never by copying them, and goes back to the kernel whole. */
static void *big_resize(void *p, size_t old_bytes, size_t new_bytes) {
    void *q = p == NULL ? mmap(NULL, new_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                        : mremap(p, old_bytes, new_bytes, MREMAP_MAYMOVE);
    return q == MAP_FAILED ? NULL : q;
}

static void big_free(void *p, size_t bytes) {
    if (p != NULL)
        munmap(p, bytes);
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
        tp_record *r = big_resize(k->rec, k->cap_rec * sizeof *r, cap * sizeof *r);
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

/* A hash of a name: 32 bytes at a time in four independent lanes, then eight. */
static uint64_t name_hash(const char *s, size_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    size_t i = 0;
    if (n >= 32) {
        uint64_t l[4] = {h, h ^ 0x243f6a8885a308d3ull, h ^ 0x13198a2e03707344ull, h ^ 0xa4093822299f31d0ull};
        for (; i + 32 <= n; i += 32)
            for (int j = 0; j < 4; j++) {
                uint64_t w;
                memcpy(&w, s + i + 8 * j, 8);
                l[j] = (l[j] ^ w) * 0xbf58476d1ce4e5b9ull;
                l[j] ^= l[j] >> 31;
            }
        h = ((l[0] * 0x94d049bb133111ebull) ^ l[1]) * 0x94d049bb133111ebull;
        h = ((h ^ l[2]) * 0x94d049bb133111ebull ^ l[3]) * 0xbf58476d1ce4e5b9ull;
    }
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
    }
    if (i < n) {
        uint64_t w = 0;
        memcpy(&w, s + i, n - i);
        h = (h ^ w) * 0x94d049bb133111ebull;
        h ^= h >> 29;
    }
    return h;
}

/* The string id of a name. The encoder interns it the first time; the ids it gave are kept here
 * too, behind a hash that is faster than the encoder's (an event's name is interned per event). */
static uint32_t intern(kimp *k, const char *s, size_t len) {
    if (s == NULL || len == 0 || len > UINT32_MAX)
        return tp_enc_intern(k->enc, s, len);
    uint64_t h = name_hash(s, len);
    size_t mask = k->n_names_cap - 1, j = (size_t)h & mask;
    for (; k->n_names_cap && k->names[j].id; j = (j + 1) & mask) {
        const kname *e = &k->names[j];
        if (e->hash == h && e->len == len && memcmp(k->names_text.s + e->off, s, len) == 0)
            return e->id;
    }
    uint32_t id = tp_enc_intern(k->enc, s, len);
    if (id == 0 || k->names_text.len + len > UINT32_MAX)
        return id;
    if (2 * (k->n_names + 1) > k->n_names_cap) { /* grow: half full at most */
        size_t cap = k->n_names_cap ? 2 * k->n_names_cap : 1024;
        kname *t = calloc(cap, sizeof *t);
        if (t == NULL)
            return id;
        for (size_t i = 0; i < k->n_names_cap; i++) {
            if (k->names[i].id == 0)
                continue;
            size_t at = (size_t)k->names[i].hash & (cap - 1);
            while (t[at].id)
                at = (at + 1) & (cap - 1);
            t[at] = k->names[i];
        }
        free(k->names);
        k->names = t;
        k->n_names_cap = cap;
        mask = cap - 1;
        for (j = (size_t)h & mask; t[j].id; j = (j + 1) & mask) {
        }
    }
    if (kbuf_append(&k->names_text, s, len) != 0)
        return id;
    k->names[j] = (kname){h, (uint32_t)(k->names_text.len - len), (uint32_t)len, id};
    k->n_names++;
    return id;
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

/* The streams and threads seen, each put in its map the first time; the last of each is
 * remembered, since rows of one stream or thread come in runs. */
static int note_stream(kimp *k, uint16_t dev, uint32_t stream, uint32_t context) {
    k->dev_used[dev / 8] |= (uint8_t)(1u << (dev % 8));
    uint64_t key = (uint64_t)dev << 32 | stream;
    if (stream == TP_NO_ID || (k->last_stream == key + 1))
        return 1;
    if (u64map_get_or_add(&k->streams, key, context, NULL) == NULL)
        return fail_nomem(k);
    k->last_stream = key + 1;
    return 1;
}

static int note_thread(kimp *k, uint32_t pid, uint32_t tid) {
    if (!k->have_pid) {
        k->have_pid = 1;
        k->pid = pid;
    }
    uint64_t key = (uint64_t)pid << 32 | tid;
    if (k->last_thread == key + 1)
        return 1;
    if (u64map_get_or_add(&k->threads, key, 1, NULL) == NULL)
        return fail_nomem(k);
    k->last_thread = key + 1;
    return 1;
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

static int event_gpu(kimp *k, kev *e) {
    uint16_t dev;
    uint32_t stream;
    uint64_t t0, t1;
    const char *why = span_of(e, &t0, &t1);
    if (why == NULL)
        why = gpu_where(e, e->cat == CAT_SYNC || e->cat == CAT_GPU_ANNOT, &dev, &stream);
    if (why)
        return invalid(k, e, why);
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
        x->name = intern(k, e->name_s, e->name_len);
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
        parse_memcpy_name(e->name_s, e->name_len, &x->copy_kind, &x->src_kind, &x->dst_kind);
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
        x->mem_kind = parse_memset_name(e->name_s, e->name_len);
        break;
    }
    case CAT_SYNC: {
        tp_sync *x = &r->sync;
        x->kind = TP_K_SYNC;
        x->correlation = corr;
        x->context = context;
        x->event = u32_or(e, H_EVENT, e->event, TP_NO_ID);
        x->sync_type = (uint8_t)(e->sync_kind ? e->sync_kind : sync_type_of(e->name_s, e->name_len));
        break;
    }
    default: { /* CAT_GPU_ANNOT */
        tp_nvtx *x = &r->nvtx;
        x->kind = TP_K_NVTX;
        x->flags = TP_NVTX_RANGE;
        x->tid = stream;
        x->name = intern(k, e->name_s, e->name_len);
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

static int event_host(kimp *k, kev *e) {
    uint64_t t0, t1;
    const char *why = span_of(e, &t0, &t1);
    if (why == NULL && !(e->have & H_TID))
        why = "without a numeric tid";
    if (why)
        return invalid(k, e, why);
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
        x->name = intern(k, e->name_s, e->name_len);
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
        x->name = intern(k, e->name_s, e->name_len);
        x->pad0 = (uint32_t)api_class(k, x->name, e->name_s, e->name_len); /* until resolve_apis */
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

/* The stack_ids key of a Call stack's text: a CRC-64 (ISA-L's, at several GB/s: the stacks of a legacy
 * trace are a third of its text), never 0. */
static uint64_t stack_key(const char *s, size_t n) {
    uint64_t h = crc64_ecma_refl(0, (const unsigned char *)s, n);
    return h ? h : 1;
}

/* The index + 1 of the operator's Call stack, "file.py(611): f;file.py(54): <module>" (innermost
 * first), parsed into frames once per distinct text (key: stack_key of it); 0 when out of memory. */
static uint32_t call_stack(kimp *k, const char *s, size_t n, uint64_t key) {
    int added;
    uint64_t *id = u64map_get_or_add(&k->stack_ids, key, 0, &added);
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
static int event_ctx(kimp *k, kev *e) {
    uint64_t t0, t1;
    if (span_of(e, &t0, &t1) != NULL || !(e->have & H_TID) || k->n_ctx >= k->max_events) {
        count_skip(k, e->cat_text, e->cat_len);
        return 1;
    }
    if (k->n_ctx == k->cap_ctx) {
        size_t cap = k->cap_ctx ? k->cap_ctx * 2 : 4096;
        kctx *c = big_resize(k->ctx, k->cap_ctx * sizeof *c, cap * sizeof *c);
        if (c == NULL)
            return fail_nomem(k);
        k->ctx = c;
        k->cap_ctx = cap;
    }
    kctx *c = &k->ctx[k->n_ctx++];
    *c = (kctx){t0, t1, (uint32_t)(uint64_t)e->tid, intern(k, e->name_s, e->name_len), 0, 0, 0, e->cat == CAT_PYFN,
                0, k->n_ctx - 1};
    k->st->contexts++;
    if (e->cat == CAT_OP && (e->have & H_STACK) && e->stack_id != 0 && k->n_stacks < k->max_events)
        c->stack = e->stack_id;
    else if (e->cat == CAT_OP && (e->have & H_STACK) && e->stack.len > 0 && k->n_stacks < k->max_events &&
             (c->stack = call_stack(k, e->stack.s, e->stack.len, e->stack_key)) == 0)
        return fail_nomem(k);
    size_t file_len, func_at;
    if (c->py && py_frame_parse(e->name_s, e->name_len, &file_len, &c->line, &func_at)) {
        c->file = intern(k, e->name_s, file_len);
        c->func = intern(k, e->name_s + func_at, e->name_len - func_at);
    }
    return 1;
}

static int event_meta(kimp *k, kev *e) {
    k->st->meta_rows++;
    if (!equals(e->name_s, e->name_len, "thread_name") || !(e->have & H_MNAME) || !(e->have & H_TID) ||
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

/* An entry of traceEvents, read: counted, and made records (or kept as context) when it is of use. */
static int event_end(kimp *k, kev *e) {
    k->st->entries++;
    if (e->ph_len == 1 && e->ph == 'M')
        return event_meta(k, e);
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
    case CAT_ANNOT: return event_host(k, e);
    case CAT_OP:
        if (e->name_len > 13 && memcmp(e->name_s, "ProfilerStep#", 13) == 0) {
            e->cat = CAT_ANNOT; /* legacy traces: a step, as newer ones write it */
            return event_host(k, e);
        }
        return event_ctx(k, e);
    case CAT_PYFN: return event_ctx(k, e);
    default: return event_gpu(k, e);
    }
}

static void event_reset(kev *e) {
    e->have = 0;
    e->ph_len = 0;
    e->cat = CAT_NONE;
    e->cat_len = 0;
    e->name_s = "";
    e->name_len = 0;
    e->in_window = 0;
    e->mname.len = 0;
    e->stack.len = 0;
    e->stack_id = 0;
    e->sync_kind = 0;
    e->dims = 0;
    e->n_grid = e->n_block = 0;
    memset(e->grid, 0, sizeof e->grid);
    memset(e->block, 0, sizeof e->block);
}

/* ------------------------------------------------------------------------------------------ */
/* The parser: what the scanner finds, read by the schema                                     */
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

/* Per context and key length (under KEY_LENS), the keys of k_fields that have them (bit i: key i). */
#define KEY_LENS 32
static void key_masks(kimp *k) {
    for (int c = 0; c < (int)(sizeof k_ctx_keys / sizeof k_ctx_keys[0]); c++)
        for (int i = k_ctx_keys[c].first; k_ctx_keys[c].first != K_NONE && i <= k_ctx_keys[c].last; i++)
            if (k_fields[i].len < KEY_LENS)
                k->kmask[c][k_fields[i].len] |= 1ull << i;
    for (int i = 0; i < (int)(sizeof k_fields / sizeof k_fields[0]); i++) {
        char pad[16] = {0};
        memcpy(pad, k_fields[i].key, k_fields[i].len < 16 ? k_fields[i].len : 16);
        memcpy(k->kwords[i], pad, 16);
    }
}
_Static_assert(K_A_STACK < 64, "a key mask holds every key");

/* The key s[0, len) names in context ctx, or K_NONE. s may be read up to 16 bytes past len
 * (the window's JSRC_PAD and kbufs of at least 256 bytes allow it). */
static int key_of(const kimp *k, int ctx, const char *s, size_t len) {
    if (len >= KEY_LENS)
        return K_NONE;
    uint64_t m = k->kmask[ctx][len];
    if (m == 0)
        return K_NONE;
    uint64_t a, b, ma = len >= 8 ? ~0ull : (1ull << (8 * len)) - 1;
    uint64_t mb = len >= 16 ? ~0ull : len <= 8 ? 0 : (1ull << (8 * (len - 8))) - 1;
    memcpy(&a, s, 8);
    memcpy(&b, s + 8, 8);
    a &= ma;
    b &= mb;
    for (; m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        if (k->kwords[i][0] == a && k->kwords[i][1] == b &&
            (len <= 16 || memcmp(k_fields[i].key + 16, s + 16, len - 16) == 0))
            return i;
    }
    return K_NONE;
}

static int push(kimp *k, int ctx) {
    if (k->sp + 1 >= (int)sizeof k->stack)
        return fail_here(k, ERR_MALFORMED, "nesting too deep");
    k->pnext[k->sp] = k->pcur;
    k->stack[++k->sp] = (uint8_t)ctx;
    k->pcur = k->pred[ctx == C_ARGS ? C_DIMS + 1 + k->ev.cat : ctx];
    k->key = K_NONE;
    return 1;
}

static int enter_skip(kimp *k) {
    if (++k->skip > MAX_SKIP_DEPTH)
        return fail_here(k, ERR_LIMIT, "JSON nested more than 1000 levels deep");
    return 1;
}


static int on_start_map(kimp *k) {
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


static int on_end_map(kimp *k) {
    if (k->skip) {
        k->skip--;
        return 1;
    }
    int was = k->stack[k->sp--];
    k->pcur = k->pnext[k->sp];
    if (was == C_EVENT)
        return event_end(k, &k->ev);
    if (was == C_DEVPROP)
        return devprop_end(k);
    return 1;
}

static int on_start_array(kimp *k) {
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

static int on_end_array(kimp *k) {
    if (k->skip) {
        k->skip--;
        return 1;
    }
    k->pcur = k->pnext[--k->sp];
    return 1;
}

/* Whether s[0, n) is a plain run of at most 20 digits. */
static int digits_only(const char *s, size_t n) {
    if (n == 0 || n > 20)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

/* The value of the number text num (see dec_parse), from the parts the scanner read when it has
 * them (k->nv). */
static int num_dec(const kimp *k, const char *num, size_t num_len, int scale, int exact, int64_t *out) {
    if (k->nv && k->nv->ok) {
        int rc = dec_parts(k->nv, scale, exact, out);
        if (rc != -2)
            return rc;
    }
    return dec_fast(num, num_len, scale, exact, out);
}

/* A scalar at the current place: number text, string, or neither (bool, null). */
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
        if (num && num_dec(k, num, num_len, 0, 1, (int64_t *)(void *)((char *)e + f->off)) == 0)
            e->have |= f->bit;
        /* legacy traces write a host pid or tid as a string of digits ("25738") */
        else if (str && (k->key == K_PID || k->key == K_TID) && digits_only(str, str_len) &&
                 dec_fast(str, str_len, 0, 1, (int64_t *)(void *)((char *)e + f->off)) == 0)
            e->have |= f->bit;
        return 1;
    }
    if (f->kind == F_DP_INT) {
        if (num && num_dec(k, num, num_len, 0, 1, &v) == 0)
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
                e->cat = cat_of(k, str, str_len);
                e->cat_len = str_len < IMPORT_CAT_MAX ? str_len : IMPORT_CAT_MAX - 1;
                memcpy(e->cat_text, str, e->cat_len);
            }
            return 1;
        case K_NAME:
            if (str == NULL)
                return 1;
            e->name_len = str_len < TP_STRING_MAX ? str_len : TP_STRING_MAX;
            e->in_window = (const uint8_t *)str >= k->wbeg && (const uint8_t *)str < k->wend;
            if (e->in_window) { /* copied only if the window moves on before the entry ends */
                e->name_s = str;
                return 1;
            }
            if (kbuf_set(&e->name_buf, str, str_len, TP_STRING_MAX) != 0)
                return fail_nomem(k);
            e->name_s = e->name_buf.s;
            return 1;
        case K_TS: e->have |= num && num_dec(k, num, num_len, 3, 0, &e->ts) == 0 ? H_TS : H_TS_BAD; return 1;
        case K_DUR:
            e->have |= num && num_dec(k, num, num_len, 3, 0, &e->dur) == 0 ? H_DUR : H_DUR_BAD;
            return 1;
        default: return 1;
        }
    case C_ARGS:
        if (k->key == K_A_SYNC_KIND && str) {
            e->sync_kind = sync_type_of(str, str_len);
        } else if (k->key == K_A_STACK && str) {
            /* a text seen before is known by its key; only a new one is kept until the entry ends */
            size_t len = str_len < STACK_KEEP ? str_len : STACK_KEEP;
            e->stack_key = stack_key(str, len);
            const uint64_t *id = len > 0 ? u64map_find(&k->stack_ids, e->stack_key) : NULL;
            e->stack_id = id ? (uint32_t)*id : 0;
            e->stack.len = 0;
            if (id == NULL && kbuf_set(&e->stack, str, len, STACK_KEEP) != 0)
                return fail_nomem(k);
            e->have |= H_STACK;
        } else if (k->key == K_A_NAME && str) {
            if (kbuf_set(&e->mname, str, str_len, NAME_KEEP) != 0)
                return fail_nomem(k);
            e->have |= H_MNAME;
        }
        return 1;
    case C_DIMS: {
        ok = num && num_dec(k, num, num_len, 0, 1, &v) == 0 && v >= 0 && v <= (int64_t)UINT32_MAX;
        uint32_t *dims = e->dims == K_A_GRID ? e->grid : e->block;
        int *n = e->dims == K_A_GRID ? &e->n_grid : &e->n_block;
        if (*n < 3)
            dims[*n] = ok ? (uint32_t)v : 0;
        (*n)++;
        return 1;
    }
    case C_TOP:
        if (k->key == K_BASE_TIME && num && num_dec(k, num, num_len, 0, 0, &v) == 0) {
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
        if (num && num_dec(k, num, num_len, 0, 1, &v) == 0 && v >= INT32_MIN && v <= INT32_MAX) {
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

/* ------------------------------------------------------------------------------------------ */
/* The scanner                                                                                */
/* ------------------------------------------------------------------------------------------ */

/* What the scanner accepts and rejects, and what it says then, follows yajl 2.1 (as Debian builds
 * it), whose messages these are: its grammar (whitespace is " \t\n\v\f\r"; control characters and
 * bad escapes in strings are errors, other bytes are taken as they are), its messages, and the
 * byte a message names (the one before where reading stopped, counted as if the text came in the
 * pieces of feed_start). The text ends as if one blank followed it: what is still open then is cut
 * short. The text is scanned a piece at a time; a token that a piece ends in is scanned again from
 * its start with the next piece after it, except the two that may be long, followed without their
 * text: a string's tail past KINETO_MAX_TOKEN bytes and a number of more than LONG_NUMBER bytes. */

enum ystate {
    Y_START, /* expecting a value: the text's, */
    Y_MAP_VAL,   /* a key's, */
    Y_ARR_START, /* an array's first (or its end), */
    Y_ARR_VAL,   /* or an array's next */
    Y_MAP_START, /* expecting a key or the end of an object */
    Y_MAP_KEY,   /* expecting a key */
    Y_MAP_SEP,   /* expecting ':' */
    Y_MAP_GOT,   /* expecting ',' or '}' */
    Y_ARR_GOT,   /* expecting ',' or ']' */
    Y_DONE       /* the value is complete */
};

/* The state after a value in each of the states that expect one. */
static const uint8_t y_after[] = {Y_DONE, Y_MAP_GOT, Y_ARR_GOT, Y_ARR_GOT};

/* What scan and the lexers return. */
enum { S_MORE, S_END, S_CUT };                             /* scan, besides a negative code */
enum { T_ERR = -1, T_MORE, T_TAIL, T_STR, T_NUM, T_LIT, T_PUNCT }; /* the lexers */

typedef struct ktok {
    const uint8_t *s;   /* T_STR: the string's content (what is kept of it), T_NUM: the text */
    size_t n;
    const uint8_t *end; /* just after the token; T_ERR: where reading stopped */
    const char *msg;    /* T_ERR: yajl's lexical error */
    int took;           /* T_ERR: the byte before end is the one in error (else end is) */
    int esc;            /* T_STR: the content has escapes */
    int in_esc;         /* T_MORE: the text ends inside an escape */
    int c;              /* T_LIT: 't', 'f' or 'n'; T_PUNCT: the character */
} ktok;

#define LEX_CHAR    "invalid char in json text."
#define LEX_WORD    "invalid string in json text."
#define LEX_COMMENT "probable comment found in input text, comments are not enabled."
#define LEX_STR     "invalid character inside string."
#define LEX_ESC     "inside a string, '\\' occurs before a character which it may not."
#define LEX_HEX     "invalid (non-hex) character occurs after '\\u' inside string."
#define LEX_MINUS   "malformed number, a digit is required after the minus sign."
#define LEX_DOT     "malformed number, a digit is required after the decimal point."
#define LEX_EXP     "malformed number, a digit is required after the exponent."

static int is_digit(uint8_t c) {
    return (unsigned)(c - '0') < 10;
}

static int is_hex(uint8_t c) {
    return is_digit(c) || (unsigned)((c | 0x20) - 'a') < 6;
}

/* The characters a backslash may escape other than u. */
static int is_esc(uint8_t c) {
    return c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't';
}

static void newline(kimp *k, const uint8_t *p) {
    k->nl++;
    k->line_prev = k->line_at;
    k->drop_prev = k->drop;
    k->line_at = off_of(k, p) + 1;
    k->drop = 0;
}

/* The first byte after the spaces at p[1..] (p: a space): a lone one at once, a run of them
 * (indentation) eight bytes at a time. p may be read 9 bytes past the spaces. */
static inline const uint8_t *skip_spaces(const uint8_t *p) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (p[1] != ' ')
        return p + 1;
    for (p += 2;; p += 8) {
        uint64_t x = dec_load8(p) ^ 0x2020202020202020ull; /* spaces become 0 */
        if (x)
            return p + (__builtin_ctzll(x) >> 3);
    }
#else
    while (*++p == ' ') {
    }
    return p;
#endif
}

static inline const uint8_t *skip_ws(kimp *k, const uint8_t *p) {
    for (;;) {
        uint8_t c = *p;
        if (c > ' ') {
            return p;
        } else if (c == ' ') {
            p = skip_spaces(p);
        } else if (c == '\n') {
            newline(k, p);
            p++;
        } else if (c == '\t' || c == '\r' || c == '\v' || c == '\f') {
            p++;
        } else {
            return p;
        }
    }
}

/* The first '"', backslash or control character at or after p: the 0 sentinel at the end of the
 * window stops it. Sixteen bytes at a time where SSE2 is, eight elsewhere. */
static inline const uint8_t *str_special(const uint8_t *p) {
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'), ctl = _mm_set1_epi8(0x1f);
    for (;;) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
                                 _mm_cmpeq_epi8(_mm_min_epu8(v, ctl), v));
        unsigned bits = (unsigned)_mm_movemask_epi8(m);
        if (bits)
            return p + __builtin_ctz(bits);
        p += 16;
    }
#else
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    for (;;) {
        uint64_t v, q, b;
        memcpy(&v, p, 8);
        q = v ^ (ones * '"');
        b = v ^ (ones * '\\');
        /* the lowest flagged byte of each test is exact: a false flag only sits above a true one */
        uint64_t z = (((q - ones) & ~q) | ((b - ones) & ~b) | ((v - ones * 0x20) & ~v)) & highs;
        if (z)
            return p + (__builtin_ctzll(z) >> 3);
        p += 8;
    }
#endif
}

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

/* The dropped tail of a cut string, from p to the end of the window: 1 at its closing quote (*q),
 * 0 when the window ends first. Escapes are followed as the cut always has: a backslash takes the
 * byte after it, and \u the four after that, whatever they are. */
static int tail_scan(kimp *k, const uint8_t *p, const uint8_t **q) {
    const uint8_t *end = k->wend;
    size_t i = 0, n = (size_t)(end - p);
    for (;;) {
        while (i < n && (k->tail_hex || k->tail_esc)) {
            if (k->tail_hex)
                k->tail_hex--;
            else
                k->tail_esc = 0, k->tail_hex = p[i] == 'u' ? 4 : 0;
            i++;
        }
        i = next_special(p, i, n);
        if (i == n) {
            k->drop += n;
            return 0;
        }
        if (p[i] == '"') {
            k->drop += i;
            *q = p + i;
            return 1;
        }
        k->tail_esc = 1;
        i++;
    }
}

/* A string whose content reaches KINETO_MAX_TOKEN bytes (s: its start, q: its quote). It is cut at
 * the first place past the bound that is not inside an escape (cut); only what is before is seen
 * (checked, decoded, handed on), and the rest up to the closing quote is dropped, as if the string
 * ended there. p: the first quote, backslash or control character at or after cut. */
static int lex_long(kimp *k, const uint8_t *q, const uint8_t *cut, const uint8_t *p, int final, int esc,
                    ktok *t) {
    const uint8_t *s = q + 1;
    if (cut == p) {
        if (*p == '"') { /* it ends at the bound, or just past it within an escape */
            if ((size_t)(p - s) > KINETO_MAX_TOKEN) {
                k->cuts++;
                k->cut_close = off_of(k, p);
            }
            t->s = s;
            t->n = (size_t)(p - s);
            t->end = p + 1;
            t->esc = esc;
            return T_STR;
        }
        if (p == k->wend && !final) {
            t->in_esc = 0;
            return T_MORE;
        }
    }
    if (p == k->wend && final && cut == p) {
        k->cuts += (size_t)(p - s) > KINETO_MAX_TOKEN;
        t->in_esc = 0;
        return T_MORE;
    }
    k->cuts++;
    k->tail_esc = k->tail_hex = 0;
    const uint8_t *close;
    if (tail_scan(k, cut, &close)) {
        k->cut_close = off_of(k, close);
        t->s = s;
        t->n = (size_t)(cut - s);
        t->end = close + 1;
        t->esc = esc;
        return T_STR;
    }
    if (final) {
        t->in_esc = 0;
        return T_MORE;
    }
    if (kbuf_set(&k->kept, s, (size_t)(cut - s), KINETO_MAX_TOKEN + 8) != 0)
        return fail_nomem(k), T_ERR;
    k->tail = 1 + esc;
    k->tok_at = off_of(k, q);
    return T_TAIL;
}

/* A string at q (its opening quote). */
static inline int lex_string(kimp *k, const uint8_t *q, int final, ktok *t) {
    const uint8_t *s = q + 1, *p = s;
    int esc = 0;
    for (;;) {
        const uint8_t *from = p;
        p = str_special(p);
        if ((size_t)(p - s) >= KINETO_MAX_TOKEN)
            return lex_long(k, q, (size_t)(from - s) > KINETO_MAX_TOKEN ? from : s + KINETO_MAX_TOKEN, p, final,
                            esc, t);
        uint8_t c = *p;
        if (c == '"') {
            t->s = s;
            t->n = (size_t)(p - s);
            t->end = p + 1;
            t->esc = esc;
            return T_STR;
        }
        if (c == '\\') {
            esc = 1;
            uint8_t e = p[1];
            if (e == 'u') {
                for (int i = 2; i < 6; i++) {
                    if (!is_hex(p[i])) {
                        if (p + i == k->wend) {
                            t->in_esc = 1;
                            return T_MORE;
                        }
                        t->end = p + i;
                        t->msg = LEX_HEX;
                        return T_ERR;
                    }
                }
                p += 6;
            } else if (is_esc(e)) {
                p += 2;
            } else {
                if (p + 1 == k->wend) {
                    t->in_esc = 1;
                    return T_MORE;
                }
                t->end = p + 1;
                t->msg = LEX_ESC;
                return T_ERR;
            }
        } else {
            if (p == k->wend) {
                t->in_esc = 0;
                return T_MORE;
            }
            t->end = p;
            t->msg = LEX_STR;
            return T_ERR;
        }
    }
}

/* The parts of a number, for following a long one a byte at a time. */
enum { N_START, N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP, N_END };

/* One byte of a number in state st: the next state, N_END when the number ended before c, or -1
 * when c is an error (*msg). */
static int number_step(int st, uint8_t c, const char **msg) {
    int d = is_digit(c);
    switch (st) {
    case N_START: return c == '-' ? N_MINUS : c == '0' ? N_ZERO : d ? N_INT : (*msg = LEX_MINUS, -1);
    case N_MINUS: return c == '0' ? N_ZERO : d ? N_INT : (*msg = LEX_MINUS, -1);
    case N_ZERO: return c == '.' ? N_DOT : (c == 'e' || c == 'E') ? N_E : N_END;
    case N_INT: return d ? N_INT : c == '.' ? N_DOT : (c == 'e' || c == 'E') ? N_E : N_END;
    case N_DOT: return d ? N_FRAC : (*msg = LEX_DOT, -1);
    case N_FRAC: return d ? N_FRAC : (c == 'e' || c == 'E') ? N_E : N_END;
    case N_E: return (c == '+' || c == '-') ? N_ESIGN : d ? N_EXP : (*msg = LEX_EXP, -1);
    case N_ESIGN: return d ? N_EXP : (*msg = LEX_EXP, -1);
    default: return d ? N_EXP : N_END;
    }
}

/* A number at q. */
static inline int lex_number(kimp *k, const uint8_t *q, int final, ktok *t) {
    const uint8_t *p = q;
    if (*p == '-')
        p++;
    if (*p == '0') {
        p++;
    } else if (is_digit(*p)) {
        do
            p++;
        while (is_digit(*p));
    } else {
        t->msg = LEX_MINUS;
        goto bad;
    }
    if (*p == '.') {
        p++;
        if (!is_digit(*p)) {
            t->msg = LEX_DOT;
            goto bad;
        }
        do
            p++;
        while (is_digit(*p));
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!is_digit(*p)) {
            t->msg = LEX_EXP;
            goto bad;
        }
        do
            p++;
        while (is_digit(*p));
    }
    if (p == k->wend && !final) { /* it may go on in the next piece */
        t->in_esc = 1;
        return T_MORE;
    }
    t->s = q;
    t->n = (size_t)(p - q);
    t->end = p;
    return T_NUM;
bad:
    if (p == k->wend) {
        t->in_esc = 1;
        return T_MORE;
    }
    t->end = p;
    return T_ERR;
}

/* The rest of a long number (k->lnum) from p. */
static int lex_long_number(kimp *k, const uint8_t *p, int final, ktok *t) {
    int st = k->lnum - 1;
    const char *msg = NULL;
    for (;; p++) {
        if (p == k->wend && !final) {
            k->lnum = st + 1;
            return T_TAIL;
        }
        int next = number_step(st, p == k->wend ? ' ' : *p, &msg);
        if (next == N_END)
            break;
        if (next < 0) {
            k->lnum = 0;
            if (p == k->wend) {
                t->in_esc = 1;
                return T_MORE;
            }
            t->end = p;
            t->msg = msg;
            return T_ERR;
        }
        st = next;
    }
    k->lnum = 0;
    t->s = p; /* the text is gone; its length says it is not a number the importer can use */
    t->n = DEC_TEXT_MAX + 1;
    t->end = p;
    return T_NUM;
}

/* true, false or null at q (c: its first letter). */
static int lex_word(kimp *k, const uint8_t *q, ktok *t) {
    const char *w = *q == 't' ? "true" : *q == 'f' ? "false" : "null";
    size_t i = 1;
    for (; w[i]; i++) {
        if (q[i] != (uint8_t)w[i]) {
            if (q + i == k->wend) {
                t->in_esc = 1;
                return T_MORE;
            }
            t->end = q + i;
            t->msg = LEX_WORD;
            return T_ERR;
        }
    }
    t->c = *q;
    t->end = q + i;
    return T_LIT;
}

/* Any token at q (not at the end of the window). */
static int lex_any(kimp *k, const uint8_t *q, int final, ktok *t) {
    switch (*q) {
    case '"': return lex_string(k, q, final, t);
    case '-':
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
    case '8':
    case '9': return lex_number(k, q, final, t);
    case 't':
    case 'f':
    case 'n': return lex_word(k, q, t);
    case '{':
    case '}':
    case '[':
    case ']':
    case ',':
    case ':':
        t->c = *q;
        t->end = q + 1;
        return T_PUNCT;
    case '/':
        t->end = q;
        t->msg = LEX_COMMENT;
        return T_ERR;
    default:
        t->end = q + 1;
        t->msg = LEX_CHAR;
        t->took = 1;
        return T_ERR;
    }
}

/* The four hex digits at h. */
static unsigned hex4(const uint8_t *h) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = h[i];
        v = v << 4 | (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return v;
}

/* Decodes the escapes of a string's content into k->dec as yajl does: \u escapes to UTF-8, a
 * high surrogate and the \u escape after it to one code point, a lone high surrogate to '?'. */
static int str_decode(kimp *k, const uint8_t *s, size_t n) {
    kbuf *d = &k->dec;
    d->len = 0;
    size_t beg = 0, end = 0;
    while (end < n) {
        if (s[end] != '\\') {
            end++;
            continue;
        }
        if (kbuf_append(d, s + beg, end - beg) != 0)
            return ERR_NOMEM;
        char buf[5];
        size_t len = 1;
        uint8_t c = s[++end];
        switch (c) {
        case 'r': buf[0] = '\r'; break;
        case 'n': buf[0] = '\n'; break;
        case 'f': buf[0] = '\f'; break;
        case 'b': buf[0] = '\b'; break;
        case 't': buf[0] = '\t'; break;
        case 'u': {
            unsigned cp = hex4(s + end + 1);
            end += 4;
            if ((cp & 0xFC00) == 0xD800) {
                if (end + 2 < n && s[end + 1] == '\\' && s[end + 2] == 'u') {
                    unsigned lo = hex4(s + end + 3);
                    cp = ((cp & 0x3F) << 10) | ((((cp >> 6) & 0xF) + 1) << 16) | (lo & 0x3FF);
                    end += 6;
                } else {
                    buf[0] = '?';
                    break;
                }
            }
            if (cp < 0x80) {
                buf[0] = (char)cp;
            } else if (cp < 0x800) {
                buf[0] = (char)(cp >> 6 | 0xC0);
                buf[1] = (char)((cp & 0x3F) | 0x80);
                len = 2;
            } else if (cp < 0x10000) {
                buf[0] = (char)(cp >> 12 | 0xE0);
                buf[1] = (char)(((cp >> 6) & 0x3F) | 0x80);
                buf[2] = (char)((cp & 0x3F) | 0x80);
                len = 3;
            } else if (cp < 0x200000) {
                buf[0] = (char)(cp >> 18 | 0xF0);
                buf[1] = (char)(((cp >> 12) & 0x3F) | 0x80);
                buf[2] = (char)(((cp >> 6) & 0x3F) | 0x80);
                buf[3] = (char)((cp & 0x3F) | 0x80);
                len = 4;
            } else {
                buf[0] = '?';
            }
            break;
        }
        default: buf[0] = (char)c; break; /* " \ / */
        }
        if (kbuf_append(d, buf, len) != 0)
            return ERR_NOMEM;
        beg = ++end;
    }
    return kbuf_append(d, s + beg, end - beg);
}

/* The start of the piece of text that holds offset x, in the pieces that error positions are
 * counted in (yajl's, when it was given the text): JSRC_CHUNK bytes after a first one of feed0, and a new
 * one from the closing quote of a cut string. */
static uint64_t feed_start(const kimp *k, uint64_t x) {
    uint64_t f = x < k->feed0 ? 0 : k->feed0 + (x - k->feed0) / JSRC_CHUNK * JSRC_CHUNK;
    return k->cut_close > f && k->cut_close <= x ? k->cut_close : f;
}

/* A JSON error where reading stopped (stop) in the piece that began at f: the message names the
 * byte before stop, or f when reading stopped at the start of its piece. */
static int json_error(kimp *k, uint64_t stop, uint64_t f, int lexical, const char *msg) {
    uint64_t off = stop > f ? stop - 1 : f, line, col;
    pos_at(k, off, &line, &col);
    return err_set(k->err, ERR_MALFORMED, "%s: line %llu, column %llu (byte %llu): invalid JSON: %s error: %s", k->name,
                   (unsigned long long)line, (unsigned long long)col, (unsigned long long)off,
                   lexical ? "lexical" : "parse", msg);
}

/* A string's content to the parser, decoded when it has escapes: a key, or a scalar. */
static int take_key(kimp *k, const ktok *t) {
    if (k->skip)
        return 1;
    if (!t->esc) {
        k->key = key_of(k, k->stack[k->sp], (const char *)t->s, t->n);
        return 1;
    }
    if (str_decode(k, t->s, t->n) != 0)
        return fail_nomem(k);
    k->key = key_of(k, k->stack[k->sp], k->dec.s, k->dec.len);
    return 1;
}

static int take_string(kimp *k, const ktok *t) {
    if (k->skip)
        return 1;
    k->at = t->end;
    if (!t->esc)
        return scalar(k, NULL, 0, (const char *)t->s, t->n);
    if (str_decode(k, t->s, t->n) != 0)
        return fail_nomem(k);
    return scalar(k, NULL, 0, k->dec.s, k->dec.len);
}

static int y_push(kimp *k, unsigned after) {
    if (k->depth == YDEPTH)
        return fail_here(k, ERR_LIMIT, "JSON nested more than 1000 levels deep");
    k->ystk[k->depth++] = (uint8_t)after;
    return 1;
}

/* A token (kind T_STR ... T_PUNCT) in state *ys: the parser's callbacks and the next state, or a
 * parse error (at: the token's offset). Returns 1, or 0 with k->fail or a code in *rc. */
static int take_token(kimp *k, unsigned *ys, int kind, const ktok *t, uint64_t at, int *rc) {
    unsigned y = *ys;
    const char *perr;
    uint64_t stop = off_of(k, t->end), f = feed_start(k, kind == T_NUM ? stop : stop - 1); /* its last byte read */
    k->at = t->end;
    switch (y) {
    case Y_START:
    case Y_MAP_VAL:
    case Y_ARR_START:
    case Y_ARR_VAL:
        if (kind == T_STR) {
            if (!take_string(k, t))
                return 0;
        } else if (kind == T_NUM) {
            if (!scalar(k, (const char *)t->s, t->n, NULL, 0))
                return 0;
        } else if (kind == T_LIT) {
            if (!scalar(k, NULL, 0, NULL, 0))
                return 0;
        } else if (t->c == '{') {
            if (!on_start_map(k) || !y_push(k, y_after[y]))
                return 0;
            *ys = Y_MAP_START;
            return 1;
        } else if (t->c == '[') {
            if (!on_start_array(k) || !y_push(k, y_after[y]))
                return 0;
            *ys = Y_ARR_START;
            return 1;
        } else if (t->c == ']' && y == Y_ARR_START) {
            if (!on_end_array(k))
                return 0;
            *ys = k->ystk[--k->depth];
            return 1;
        } else {
            perr = "unallowed token at this point in JSON text";
            break;
        }
        *ys = y_after[y];
        return 1;
    case Y_MAP_START:
    case Y_MAP_KEY:
        if (kind == T_STR) {
            if (!take_key(k, t))
                return 0;
            *ys = Y_MAP_SEP;
            return 1;
        }
        if (kind == T_PUNCT && t->c == '}' && y == Y_MAP_START) {
            if (!on_end_map(k))
                return 0;
            *ys = k->ystk[--k->depth];
            return 1;
        }
        perr = "invalid object key (must be a string)";
        break;
    case Y_MAP_SEP:
        if (kind == T_PUNCT && t->c == ':') {
            *ys = Y_MAP_VAL;
            return 1;
        }
        perr = "object key and value must be separated by a colon (':')";
        break;
    case Y_MAP_GOT:
        if (kind == T_PUNCT && t->c == '}') {
            if (!on_end_map(k))
                return 0;
            *ys = k->ystk[--k->depth];
            return 1;
        }
        if (kind == T_PUNCT && t->c == ',') {
            *ys = Y_MAP_KEY;
            return 1;
        }
        perr = "after key and value, inside map, I expect ',' or '}'";
        /* the error is placed before the token (a string: before its content), but not before
         * the start of its piece */
        uint64_t back = kind == T_STR ? t->n : stop - at;
        stop = stop - f > back ? stop - back : f;
        break;
    case Y_ARR_GOT:
        if (kind == T_PUNCT && t->c == ']') {
            if (!on_end_array(k))
                return 0;
            *ys = k->ystk[--k->depth];
            return 1;
        }
        if (kind == T_PUNCT && t->c == ',') {
            *ys = Y_ARR_VAL;
            return 1;
        }
        perr = "after array element, I expect ',' or ']'";
        break;
    default: perr = "trailing garbage"; break;
    }
    *rc = json_error(k, stop, f, 0, perr);
    return 0;
}

/* Steps over the value at p that the parser has no use for (the value of a key it does not know),
 * checking it as yajl would: returns its end, or NULL when that is not simple to do here (an error,
 * the end of the window, a long string, deep nesting), and the scanner then takes it token by
 * token instead. Newlines are counted only when it succeeds. */
static const uint8_t *skip_value(kimp *k, const uint8_t *p) {
    const uint8_t *const end = k->wend;
    const uint8_t *nl_last = NULL, *nl_prev = NULL; /* just after the last two newlines */
    uint64_t nl = 0;
    uint8_t stk[32]; /* the closers of the open containers */
    int depth = 0;
#define SKIP_WS()                                                                                                      \
    for (;;) {                                                                                                         \
        uint8_t c_ = *p;                                                                                               \
        if (c_ > ' ') {                                                                                                \
            break;                                                                                                     \
        } else if (c_ == ' ' || c_ == '\t' || c_ == '\r' || c_ == '\v' || c_ == '\f') {                                \
            p++;                                                                                                       \
        } else if (c_ == '\n') {                                                                                       \
            nl++;                                                                                                      \
            nl_prev = nl_last;                                                                                         \
            nl_last = ++p;                                                                                             \
        } else {                                                                                                       \
            break;                                                                                                     \
        }                                                                                                              \
    }
    for (;;) {
        /* a value */
        uint8_t c = *p;
        if (c == '"') {
        string:;
            const uint8_t *s = ++p;
            for (;;) {
                p = str_special(p);
                if (*p == '"')
                    break;
                if (*p != '\\')
                    return NULL; /* a control character, or the end of the window */
                if (p[1] == 'u') {
                    if (!is_hex(p[2]) || !is_hex(p[3]) || !is_hex(p[4]) || !is_hex(p[5]))
                        return NULL;
                    p += 6;
                } else if (is_esc(p[1])) {
                    p += 2;
                } else {
                    return NULL;
                }
            }
            if ((size_t)(p - s) >= KINETO_MAX_TOKEN)
                return NULL;
            p++;
            if (depth > 0 && stk[depth - 1] == ':') { /* that was a key */
                stk[depth - 1] = '}';
                SKIP_WS();
                if (*p++ != ':')
                    return NULL;
                SKIP_WS();
                continue;
            }
        } else if (is_digit(c) || c == '-') {
            p += c == '-';
            if (*p == '0')
                p++;
            else if (is_digit(*p))
                p = dec_skip_digits(p);
            else
                return NULL;
            if (*p == '.') {
                if (!is_digit(*++p))
                    return NULL;
                p = dec_skip_digits(p);
            }
            if (*p == 'e' || *p == 'E') {
                p += p[1] == '+' || p[1] == '-';
                if (!is_digit(*++p))
                    return NULL;
                p = dec_skip_digits(p);
            }
            if (p == end)
                return NULL; /* it may go on */
        } else if (c == '{' || c == '[') {
            if (depth == (int)sizeof stk)
                return NULL;
            p++;
            SKIP_WS();
            if (*p == (c == '{' ? '}' : ']')) {
                p++;
            } else {
                stk[depth++] = c == '{' ? ':' : ']';
                if (c == '{') {
                    if (*p != '"')
                        return NULL;
                    goto string;
                }
                continue;
            }
        } else if (c == 't' && memcmp(p, "true", 4) == 0) {
            p += 4;
        } else if (c == 'f' && memcmp(p, "false", 5) == 0) {
            p += 5;
        } else if (c == 'n' && memcmp(p, "null", 4) == 0) {
            p += 4;
        } else {
            return NULL;
        }
        /* after a value */
        for (;;) {
            if (depth == 0)
                goto done;
            SKIP_WS();
            if (*p == ',') {
                p++;
                SKIP_WS();
                if (stk[depth - 1] == '}') {
                    if (*p != '"')
                        return NULL;
                    stk[depth - 1] = ':';
                    goto string;
                }
                break;
            }
            if (*p != stk[depth - 1])
                return NULL;
            p++;
            depth--;
        }
    }
done:
#undef SKIP_WS
    if (nl) {
        k->nl += nl;
        if (nl >= 2) {
            k->line_prev = off_of(k, nl_prev);
            k->drop_prev = 0;
        } else {
            k->line_prev = k->line_at;
            k->drop_prev = k->drop;
        }
        k->line_at = off_of(k, nl_last);
        k->drop = 0;
    }
    return p;
}

/* Where the key at the scanning point is predicted: by its object's context (the arguments of an
 * event by its category; see push) and its place in it; NULL past PRED_POS. Counts the key. */
static kpred *pred_slot(kimp *k) {
    kpred *pr = k->pcur;
    if (pr->last)
        return NULL;
    k->pcur = pr + 1;
    return pr;
}

/* Whether the text at p starts with predicted key i of pr (p may be read PRED_KEEP bytes on). */
static inline int pred_match(const uint8_t *p, const kpred *pr, int i) {
    if (pr->len[i] == 0)
        return 0;
#ifdef __SSE2__
    __m128i a0 = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i a1 = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
    __m128i b0 = _mm_loadu_si128((const __m128i *)(const void *)pr->text[i]);
    __m128i b1 = _mm_loadu_si128((const __m128i *)(const void *)(pr->text[i] + 16));
    uint32_t eq = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(a0, b0)) |
                  (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(a1, b1)) << 16;
    return (eq & pr->mask[i]) == pr->mask[i];
#else
    return memcmp(p, pr->text[i], pr->len[i]) == 0;
#endif
}

/* Remembers the key text [q, e) (its quote to its colon) in pr, in place of the older one. */
static void pred_learn(kpred *pr, const uint8_t *q, const uint8_t *e, int key) {
    size_t len = (size_t)(e - q);
    int i = pr->older;
    if (len >= PRED_KEEP || memchr(q, '\n', len) != NULL) /* newlines are counted where they are */
        return;
    memset(pr->text[i], 0, sizeof pr->text[i]);
    memcpy(pr->text[i], q, len);
    pr->mask[i] = (uint32_t)((1ull << len) - 1);
    pr->len[i] = (uint8_t)len;
    pr->key[i] = (uint8_t)key;
    pr->older = (uint8_t)!i;
}

/* The contexts where a value of a key the schema does not know is of no use (see skip_value). */
#define IGNORED_VALUE_CTX (1u << C_TOP | 1u << C_EVENT | 1u << C_ARGS | 1u << C_DIST | 1u << C_DEVPROP)

/* Scans the window from k->wpos. final: the window ends the text. Returns S_MORE when the next
 * piece is needed (k->wpos: where to go on, the start of an unfinished token), S_END at the end of
 * a complete text, S_CUT when the text ends inside its value, or a negative code. The common
 * sequences (a key, its colon and its value; a comma and the next key) are taken in one go;
 * everything else, and whatever the window ends in, goes through lex_any and take_token. */
static int scan(kimp *k, int final) {
    const uint8_t *p = k->wpos;
    const uint8_t *const end = k->wend;
    unsigned ys = k->ys;
    ktok t = {0};
    int r, rc = 0;
    uint64_t at = 0;
    kpred *pr;
    for (;;) {
        const uint8_t *q;
        if (k->tail || k->lnum) {
            /* the rest of a long token */
            q = p;
            at = k->tok_at;
            if (k->lnum) {
                r = lex_long_number(k, p, final, &t);
            } else {
                const uint8_t *close;
                if (tail_scan(k, p, &close)) {
                    k->cut_close = off_of(k, close);
                    t.s = (const uint8_t *)k->kept.s;
                    t.n = k->kept.len;
                    t.esc = k->tail - 1;
                    t.end = close + 1;
                    k->tail = 0;
                    r = T_STR;
                } else {
                    t.in_esc = 0;
                    r = final ? T_MORE : T_TAIL;
                }
            }
            goto token;
        }
        p = skip_ws(k, p);
        q = p;
        switch (ys) {
        case Y_MAP_START:
        case Y_MAP_KEY:
        key:
            if (*p != '"')
                break;
            pr = k->skip ? NULL : pred_slot(k);
            if (pr && (pred_match(p, pr, r = 0) || pred_match(p, pr, r = 1))) {
                k->key = pr->key[r];
                p += pr->len[r];
                pr->older = (uint8_t)!r;
            } else {
                r = lex_string(k, p, final, &t);
                if (r != T_STR) {
                    at = off_of(k, q);
                    goto token;
                }
                take_key(k, &t);
                p = skip_ws(k, t.end);
                if (*p != ':') {
                    ys = Y_MAP_SEP;
                    continue;
                }
                p++;
                if (pr)
                    pred_learn(pr, q, p, k->key);
            }
            p = skip_ws(k, p);
            q = p;
            ys = Y_MAP_VAL;
            if (k->key == K_NONE && k->skip == 0 && (IGNORED_VALUE_CTX >> k->stack[k->sp] & 1)) {
                const uint8_t *e = skip_value(k, p);
                if (e) {
                    p = e;
                    ys = Y_MAP_GOT;
                    goto got;
                }
            }
            goto value;
        case Y_MAP_SEP:
            if (*p == ':') {
                p++;
                ys = Y_MAP_VAL;
                continue;
            }
            break;
        case Y_MAP_GOT:
        got:
            p = skip_ws(k, p);
            q = p;
            if (*p == ',') {
                p = skip_ws(k, p + 1);
                q = p;
                ys = Y_MAP_KEY;
                goto key;
            }
            if (*p == '}') {
                k->at = ++p;
                if (!on_end_map(k))
                    return k->fail;
                ys = k->ystk[--k->depth];
                if (ys == Y_MAP_GOT)
                    goto got;
                continue;
            }
            break;
        case Y_ARR_GOT:
            if (*p == ',') {
                p = skip_ws(k, p + 1);
                q = p;
                ys = Y_ARR_VAL;
                goto value;
            }
            if (*p == ']') {
                k->at = ++p;
                if (!on_end_array(k))
                    return k->fail;
                ys = k->ystk[--k->depth];
                if (ys == Y_MAP_GOT)
                    goto got;
                continue;
            }
            break;
        case Y_DONE: break;
        default: /* a value */
        value:
            if (*p == '"') {
                r = lex_string(k, p, final, &t);
                if (r != T_STR) {
                    at = off_of(k, q);
                    goto token;
                }
                if (!take_string(k, &t))
                    return k->fail;
                p = t.end;
                ys = y_after[ys];
                if (ys == Y_MAP_GOT)
                    goto got;
                continue;
            }
            if (is_digit(*p) || *p == '-') {
                /* [-]digits[.digits], read with its value; anything else (an exponent, a leading
                 * zero before a digit, the end of the window) goes through lex_number */
                dec_num nv;
                size_t n = dec_num_parts(p, &nv);
                const uint8_t *e = p + n;
                if (n == 0 || e >= end || *e == 'e' || *e == 'E' || (p[nv.neg] == '0' && nv.digits > 1)) {
                    r = lex_number(k, p, final, &t);
                    if (r != T_NUM || t.end == end) {
                        at = off_of(k, q);
                        goto token;
                    }
                    e = t.end;
                    nv.ok = 0;
                }
                const kfield *f = &k_fields[k->key];
                int64_t v;
                if (nv.ok && f->kind == F_EV_INT && f->ctx == k->stack[k->sp] && k->skip == 0 &&
                    (r = dec_parts(&nv, 0, 1, &v)) != -2) {
                    if (r == 0) { /* what scalar() does with it, sooner */
                        *(int64_t *)(void *)((char *)&k->ev + f->off) = v;
                        k->ev.have |= f->bit;
                    }
                } else {
                    k->at = e;
                    k->nv = &nv;
                    int ok = scalar(k, (const char *)p, (size_t)(e - p), NULL, 0);
                    k->nv = NULL;
                    if (!ok)
                        return k->fail;
                }
                p = e;
                ys = y_after[ys];
                if (ys == Y_MAP_GOT)
                    goto got;
                continue;
            }
            if (*p == '{') {
                k->at = ++p;
                if (!on_start_map(k) || !y_push(k, y_after[ys]))
                    return k->fail;
                ys = Y_MAP_START;
                p = skip_ws(k, p);
                q = p;
                goto key;
            }
            if (*p == '[') {
                k->at = ++p;
                if (!on_start_array(k) || !y_push(k, y_after[ys]))
                    return k->fail;
                ys = Y_ARR_START;
                continue;
            }
            break;
        }
        /* everything else, and the ends of the window */
        if (p == end) {
            k->wpos = p;
            k->ys = (uint8_t)ys;
            if (!final)
                return S_MORE;
            return ys == Y_DONE ? S_END : S_CUT;
        }
        at = off_of(k, q);
        r = lex_any(k, q, final, &t);
    token:
        if (r == T_MORE || r == T_TAIL) {
            k->ys = (uint8_t)ys;
            if (!final) {
                k->wpos = r == T_TAIL ? end : q;
                return S_MORE;
            }
            /* the text ends inside a token: after a complete value, a string left open is
             * taken as yajl took it; anything else is cut short */
            k->wpos = end;
            return ys == Y_DONE && !t.in_esc ? S_END : S_CUT;
        }
        if (r == T_ERR) {
            if (k->fail)
                return k->fail;
            uint64_t stop = off_of(k, t.end);
            return json_error(k, stop, feed_start(k, t.took ? stop - 1 : stop), ys != Y_DONE,
                              ys == Y_DONE ? "trailing garbage" : t.msg);
        }
        if (!take_token(k, &ys, r, &t, at, &rc)) {
            if (k->fail)
                return k->fail;
            /* an error found only with the blank after the text is the end's */
            return final && t.end == end && r == T_NUM ? S_CUT : rc;
        }
        p = t.end;
    }
}

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

/* A host call's st_api_class, kept in its pad0 since it was read (see event_host); pad0 is 0 again
 * once it is taken. */
static unsigned api_class_kept(void *arg, size_t i, tp_api *a) {
    unsigned cls = a->pad0;
    a->pad0 = 0;
    return cls;
}

/* Gives host calls their device and flags from the GPU operation with the same correlation id;
 * marks copies and memsets issued by an Async call TP_F_ASYNC. */
static int resolve_apis(kimp *k) {
    if (em_resolve(k->rec, k->n_rec, NULL, api_class_kept, NULL, k->st) != 0)
        return err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
    return 0;
}

/* A key and what it is the key of, for radix_sort. */
typedef struct kpair {
    uint64_t key, val;
} kpair;

/* Sorts a[0, n) by key, keeping the order of equal keys (LSD radix, eleven bits at a time, the
 * digits that all keys share skipped); tmp holds n more. Returns the sorted array (a or tmp), or
 * NULL when out of memory. */
#define RADIX_BITS 11
#define RADIX_PASSES ((64 + RADIX_BITS - 1) / RADIX_BITS)
static kpair *radix_sort(kpair *a, kpair *tmp, size_t n) {
    if (n < 2)
        return a;
    size_t(*count)[1 << RADIX_BITS] = calloc(RADIX_PASSES, sizeof *count);
    if (count == NULL)
        return NULL;
    const uint64_t mask = (1u << RADIX_BITS) - 1;
    for (size_t i = 0; i < n; i++) {
        uint64_t x = a[i].key;
        for (int b = 0; b < RADIX_PASSES; b++)
            count[b][(x >> (RADIX_BITS * b)) & mask]++;
    }
    for (int b = 0; b < RADIX_PASSES; b++) {
        if (count[b][(a[0].key >> (RADIX_BITS * b)) & mask] == n)
            continue;
        size_t at = 0;
        for (size_t v = 0; v <= mask; v++) {
            size_t c = count[b][v];
            count[b][v] = at;
            at += c;
        }
        for (size_t i = 0; i < n; i++)
            tmp[count[b][(a[i].key >> (RADIX_BITS * b)) & mask]++] = a[i];
        kpair *t = a;
        a = tmp;
        tmp = t;
    }
    free(count);
    return a;
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

static int ctx_index_cmp(const void *a, const void *b, void *arg) {
    const kctx *c = arg;
    return ctx_cmp(&c[*(const uint32_t *)a], &c[*(const uint32_t *)b]);
}

static int bits_of(uint64_t v) {
    return v ? 64 - __builtin_clzll(v) : 0;
}

/* The contexts the sweep of kineto_callsites reads, in ctx_cmp order, as indices into k->ctx
 * (*out, their count returned; -1 when out of memory): those of the threads with blocking calls
 * (calls, sorted by thread and start) that start no later than the thread's last one. Sorted by
 * thread and start with radix_sort, then each run of the same thread and start by the rest. */
static ssize_t ctx_order(kimp *k, const kcall *calls, size_t nb, uint32_t **out) {
    u64map rank = {0}; /* tid -> its index in last + 1 */
    uint64_t *last = malloc(nb * sizeof *last);
    kpair *a = NULL, *s = NULL;
    uint32_t *idx = NULL;
    size_t nt = 0, n = 0, m = 0;
    if (last == NULL || k->n_ctx > UINT32_MAX)
        goto nomem;
    for (size_t c = 0; c < nb; c++) {
        if (c + 1 < nb && calls[c + 1].tid == calls[c].tid)
            continue;
        if (u64map_put(&rank, calls[c].tid, nt + 1) != 0)
            goto nomem;
        last[nt++] = calls[c].start;
    }
    for (size_t i = 0; i < k->n_ctx; i++) {
        const uint64_t *r = u64map_find(&rank, k->ctx[i].tid);
        m += r != NULL && k->ctx[i].start <= last[*r - 1];
    }
    if ((a = malloc((2 * m + 1) * sizeof *a)) == NULL)
        goto nomem;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < k->n_ctx; i++) {
        const kctx *x = &k->ctx[i];
        const uint64_t *r = u64map_find(&rank, x->tid);
        if (r == NULL || x->start > last[*r - 1])
            continue;
        a[n++] = (kpair){x->start, (uint64_t)(*r - 1) << 32 | i}; /* in file order: ctx[i].seq == i */
        lo = x->start < lo ? x->start : lo;
        hi = x->start > hi ? x->start : hi;
    }
    int sbits = n ? bits_of(hi - lo) : 0;
    if (sbits + bits_of(nt) <= 64) { /* one key: thread, then start */
        for (size_t i = 0; i < n; i++)
            a[i].key = (a[i].val >> 32) << sbits | (a[i].key - lo);
        s = radix_sort(a, a + n, n);
    } else if ((s = radix_sort(a, a + n, n)) != NULL) { /* by start, then by thread */
        for (size_t i = 0; i < n; i++)
            s[i].key = s[i].val >> 32;
        s = radix_sort(s, s == a ? a + n : a, n);
    }
    if (s == NULL || (idx = malloc((n ? n : 1) * sizeof *idx)) == NULL)
        goto nomem;
    for (size_t i = 0; i < n; i++)
        idx[i] = (uint32_t)s[i].val;
    for (size_t i = 0, j; i < n; i = j) {
        const kctx *x = &k->ctx[idx[i]];
        for (j = i + 1; j < n && k->ctx[idx[j]].tid == x->tid && k->ctx[idx[j]].start == x->start; j++) {
        }
        if (j - i > 1)
            qsort_r(idx + i, j - i, sizeof *idx, ctx_index_cmp, k->ctx);
    }
    u64map_free(&rank);
    free(last);
    free(a);
    *out = idx;
    return (ssize_t)n;
nomem:
    u64map_free(&rank);
    free(last);
    free(a);
    return -1;
}

/* Frame i of a call site, from the array at arg. */
static void frame_copy(void *arg, uint32_t i, tp_frame *fr) {
    *fr = ((const tp_frame *)arg)[i];
}

/* Emits a call site for each distinct stack of operators and Python frames around a blocking call
 * (frames innermost first, as the tracer sends them) and sets the calls' call-site ids. One sweep
 * per thread over its contexts and calls in time order: a stack holds the contexts open at a call. */
static int kineto_callsites(kimp *k, em_out *o) {
    size_t nb = 0;
    for (size_t i = 0; i < k->n_rec; i++)
        nb += k->rec[i].head.kind == TP_K_API && (k->rec[i].api.flags & TP_F_BLOCKING);
    if (nb == 0 || k->n_ctx == 0)
        return 0;
    kcall *calls = malloc(nb * sizeof *calls);
    size_t *stack = malloc(k->n_ctx * sizeof *stack);
    uint32_t *ci = NULL; /* the contexts in order (ctx_order) */
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
    ssize_t n_ci = ctx_order(k, calls, nb, &ci);
    if (n_ci < 0) {
        rc = err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
        goto out;
    }
    size_t j = 0, depth = 0, n_ctx = (size_t)n_ci;
    uint32_t tid = UINT32_MAX;
    uint32_t next_id = 1;
    for (size_t c = 0; c < nb && rc == 0; c++) {
        tp_api *a = &k->rec[calls[c].index].api;
        if (a->tid != tid) { /* a new thread: its contexts */
            tid = a->tid;
            depth = 0;
            while (j < n_ctx && k->ctx[ci[j]].tid < tid)
                j++;
        }
        while (j < n_ctx && k->ctx[ci[j]].tid == tid && k->ctx[ci[j]].start <= a->start) {
            while (depth > 0 && k->ctx[stack[depth - 1]].end < k->ctx[ci[j]].start)
                depth--;
            stack[depth++] = ci[j++];
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
        rc = em_site(o, a->callsite, (uint32_t)nf, frame_copy, fr);
    }
out:
    free(calls);
    free(stack);
    free(ci);
    u64map_free(&ids);
    return rc;
}

/* Puts the events in time order, ties in file order (ord: room for 2 * n_rec), and finds their
 * span: apart from resolve_apis, which it may run beside (they read and write other fields). */
typedef struct korder {
    const kimp *k;
    kpair *ord, *sorted; /* sorted: NULL when out of memory */
    size_t n_ev;
    uint64_t t_min, t_max;
} korder;

static void *order_events(void *arg) {
    korder *o = arg;
    const kimp *k = o->k;
    uint64_t lo = 0, hi = 0;
    size_t n = 0;
    for (size_t i = 0; i < k->n_rec; i++) {
        const tp_kernel *r = &k->rec[i].kernel;
        if (r->kind == 0)
            continue;
        o->ord[n].key = r->start;
        o->ord[n].val = i;
        n++;
        if (lo == 0 && hi == 0) {
            lo = r->start;
            hi = r->end;
        }
        if (r->start < lo)
            lo = r->start;
        if (r->end > hi)
            hi = r->end;
    }
    o->n_ev = n;
    o->t_min = lo;
    o->t_max = hi;
    o->sorted = radix_sort(o->ord, o->ord + k->n_rec, n);
    return NULL;
}

/* A device's record from deviceProperties (the last entry with its id). */
static void device_describe(void *arg, tp_device *dv) {
    kimp *k = arg;
    for (size_t i = 0; i < k->n_devprops; i++) {
        const kdevprop *q = &k->devprops[i];
        if (q->id != (int64_t)dv->device)
            continue;
        dv->name = intern(k, q->name, q->name_len);
        dv->cc_major = q->major >= 0 && q->major < 256 ? (uint8_t)q->major : 0;
        dv->cc_minor = q->minor >= 0 && q->minor < 256 ? (uint8_t)q->minor : 0;
        dv->sm_count = q->sms >= 0 && q->sms <= (int64_t)UINT32_MAX ? (uint32_t)q->sms : 0;
        dv->memory_bytes = q->mem > 0 ? (uint64_t)q->mem : 0;
    }
}

/* A thread's name from its thread_name row (key pid << 32 | tid), 0 when it has none. */
static uint32_t thread_name(void *arg, uint64_t key) {
    kimp *k = arg;
    const uint64_t *nm = u64map_find(&k->tnames, key);
    return nm ? intern(k, k->tnames_text.s + (*nm >> 16), (size_t)(*nm & 0xffff)) : 0;
}

/* The metadata: the process, the devices used, streams and threads in id order, and the
 * device-wide pseudo-streams, whose records say how the trace spelled them (see kineto.h). */
static int emit_meta(kimp *k, em_out *o) {
    import_stats *st = k->st;
    st->rank = k->have_rank ? (int32_t)k->rank : -1;
    st->world = k->have_world ? (int32_t)k->world : -1;
    st->pid = k->pid;
    tp_process p = {
        .kind = TP_K_PROCESS, .device = TP_NO_DEVICE, .pid = k->pid, .rank = st->rank, .world = st->world};
    p.host = intern(k, k->host.s, k->host.len);
    p.cmdline = tp_enc_intern_cstr(k->enc, cm_base_name(k->name));
    int rc = em_add(o, &p, 1);
    if (rc == 0)
        rc = em_devices(o, k->dev_used, device_describe, k);
    if (rc == 0)
        rc = em_streams(o, &k->streams);
    if (rc == 0)
        rc = em_threads(o, &k->threads, thread_name, k);
    for (unsigned d = 0; d < TP_NO_DEVICE && rc == 0; d++) {
        if (k->wide[d] == 0)
            continue;
        tp_record r;
        memset(&r, 0, sizeof r);
        r.stream.kind = TP_K_STREAM;
        r.stream.device = (uint16_t)d;
        r.stream.stream = TP_NO_ID;
        r.stream.flags = k->wide[d];
        rc = em_add(o, &r, 1);
    }
    return rc;
}

static int emit_all(kimp *k, import_emit_fn emit, void *ctx) {
    import_stats *st = k->st;
    fix_times(k);

    /* events in time order (on a thread of its own for many, while the calls are resolved) */
    korder ko = {.k = k, .ord = malloc((k->n_rec ? k->n_rec : 1) * 2 * sizeof(kpair))};
    if (ko.ord == NULL)
        return err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
    pthread_t th;
    int threaded = k->n_rec >= (1u << 16) && pthread_create(&th, NULL, order_events, &ko) == 0;
    if (!threaded)
        order_events(&ko);
    int rc = resolve_apis(k);
    if (threaded)
        pthread_join(th, NULL);
    st->t_min = ko.t_min;
    st->t_max = ko.t_max;
    em_out o;
    em_out_init(&o, k->enc, k->opts, emit, ctx, k->name, k->err, st);
    if (rc == 0 && ko.sorted == NULL)
        rc = err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
    if (rc == 0)
        rc = emit_meta(k, &o);
    if (rc == 0)
        rc = kineto_callsites(k, &o);
    for (size_t i = 0; i < ko.n_ev && rc == 0; i++)
        rc = em_add(&o, &k->rec[ko.sorted[i].val], i + 1 < ko.n_ev);
    if (rc == 0)
        rc = em_end(&o);
    free(ko.ord);
    em_out_free(&o);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* The import                                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* Makes the window the unfinished token of the last one (from k->wpos) followed by the piece in
 * slot i (len bytes at data). */
static int window_next(kimp *k, uint8_t *data, size_t len) {
    kev *e = &k->ev;
    if (e->in_window) { /* the entry being read keeps its name */
        if (kbuf_set(&e->name_buf, e->name_s, e->name_len, TP_STRING_MAX) != 0)
            return err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
        e->name_s = e->name_buf.s;
        e->in_window = 0;
    }
    size_t carry = (size_t)(k->wend - k->wpos);
    uint64_t base = off_of(k, k->wpos);
    uint8_t *w;
    if (carry <= JSRC_HEAD) {
        w = data - carry;
        memmove(w, k->wpos, carry);
    } else {
        size_t need = carry + len + JSRC_PAD;
        if (need > k->big_cap) {
            size_t cap = k->big_cap ? k->big_cap : (1u << 20);
            while (cap < need)
                cap *= 2;
            uint8_t *b = malloc(cap);
            if (b == NULL)
                return err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
            memcpy(b, k->wpos, carry);
            free(k->big);
            k->big = b;
            k->big_cap = cap;
        } else {
            memmove(k->big, k->wpos, carry);
        }
        w = k->big;
        memcpy(w + carry, data, len);
        memset(w + carry + len, 0, JSRC_PAD);
    }
    k->wbeg = k->wpos = w;
    k->wend = w + carry + len;
    *(uint8_t *)(uintptr_t)k->wend = 0;
    k->wbase = base;
    return 0;
}

/* A number too long to carry from piece to piece is followed without its text from here on. */
static void long_number(kimp *k) {
    const uint8_t *p = k->wpos;
    const char *msg;
    int st = N_START;
    for (; p < k->wend; p++)
        st = number_step(st, *p, &msg);
    k->lnum = st + 1;
    k->tok_at = off_of(k, k->wpos);
    k->wpos = k->wend;
}

/* Scans the text piece by piece, then judges its end. */
static int parse_text(kimp *k, jsrc *s) {
    int rc;
    k->st->gzip = s->gz;
    k->feed0 = s->fd >= 0 && !s->gz ? s->head_len : JSRC_CHUNK;
    const import_opts *o = k->opts;
    static const uint8_t empty[JSRC_PAD];
    k->wbeg = k->wpos = k->wend = empty;
    int held = -1; /* the slot the window's carry comes from */
    for (;;) {
        int i = -1;
        rc = jsrc_next(s, &i, k->err);
        if (rc < 0)
            break;
        if (rc == 0) {
            rc = scan(k, 1);
            break;
        }
        rc = window_next(k, s->slot[i] + JSRC_HEAD, s->len[i]);
        if (held >= 0)
            jsrc_release(s, held);
        held = i;
        if (rc == 0)
            rc = scan(k, 0);
        if (rc < 0)
            break;
        if ((size_t)(k->wend - k->wpos) > LONG_NUMBER && (*k->wpos == '-' || is_digit(*k->wpos)))
            long_number(k);
        if (o && o->progress)
            o->progress(o->progress_ctx, s->done[i], s->total);
    }
    if (held >= 0)
        jsrc_release(s, held);
    if (rc < 0)
        return rc;
    k->st->input_bytes = s->read_bytes;
    k->st->strings_cut = k->cuts;
    k->st->json_bytes = off_of(k, k->wend);
    if (k->fail)
        return k->fail;
    if (rc == S_CUT)
        return err_set(k->err, ERR_TRUNCATED,
                       "%s: JSON text cut short: it ends at line %llu (byte %llu) inside a value", k->name,
                       (unsigned long long)k->nl + 1, (unsigned long long)k->st->json_bytes);
    if (!k->saw_events)
        return err_set(k->err, ERR_MALFORMED, "%s: not a Kineto trace: %s", k->name,
                       k->events_not_array ? "traceEvents is not an array" : "no traceEvents array");
    return 0;
}

static int parse_all(kimp *k, jsrc *s) {
    int rc = jsrc_start(s, k->err);
    return rc ? rc : parse_text(k, s);
}

static int import(jsrc *s, const char *name, const import_opts *opts, import_emit_fn emit, void *ctx,
                  import_stats *st_out, err_msg *err) {
    import_stats st_local;
    import_stats *st = em_stats_init(st_out, &st_local);
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
    k->max_events = em_max_events(opts);
    k->stack[0] = C_ROOT;
    k->ys = Y_START;
    key_masks(k);
    for (size_t r = 0; r < sizeof k->pred / sizeof k->pred[0]; r++)
        k->pred[r][PRED_POS].last = 1;
    k->pcur = k->pred[C_ROOT];
    k->ev.name_s = "";
    if (kbuf_set(&k->ev.name_buf, "", 0, 0) != 0 || kbuf_set(&k->ev.mname, "", 0, 0) != 0) {
        free(k->ev.name_buf.s);
        free(k);
        return err_set(err, ERR_NOMEM, "%s: out of memory", name);
    }
    k->enc = tp_enc_new(
        &(tp_enc_opts){.producer = opts ? opts->producer : 0, .max_string_bytes = IMPORT_MAX_STRING_BYTES});
    int rc;
    if (k->enc == NULL)
        rc = err_set(err, ERR_NOMEM, "%s: out of memory", name);
    else
        rc = parse_all(k, s);
    jsrc_close(s);
    if (rc == 0 && k->fail)
        rc = k->fail;
    if (rc == 0)
        rc = emit_all(k, emit, ctx);
    tp_enc_destroy(&k->enc);
    free(k->ev.name_buf.s);
    free(k->ev.mname.s);
    free(k->ev.stack.s);
    free(k->host.s);
    free(k->tnames_text.s);
    free(k->kept.s);
    free(k->dec.s);
    free(k->big);
    free(k->names);
    free(k->names_text.s);
    free(k->devprops);
    big_free(k->rec, k->cap_rec * sizeof *k->rec);
    big_free(k->ctx, k->cap_ctx * sizeof *k->ctx);
    free(k->pyfr);
    free(k->stacks);
    u64map_free(&k->stack_ids);
    u64map_free(&k->api_class);
    u64map_free(&k->streams);
    u64map_free(&k->threads);
    u64map_free(&k->tnames);
    free(k);
    return rc;
}

int kineto_import_mem(const void *data, size_t len, const char *name, const import_opts *opts,
                      import_emit_fn emit, void *ctx, import_stats *st, err_msg *err) {
    if (name == NULL)
        name = "(memory)";
    if (emit == NULL || (data == NULL && len > 0))
        return err_set(err, ERR_INVAL, "%s: invalid argument", name);
    jsrc s = {.name = name, .fd = -1, .mem = data, .mem_len = len, .total = len};
    int rc = import(&s, name, opts, emit, ctx, st, err);
    jsrc_close(&s);
    return rc;
}

int kineto_import_fd(int fd, const void *prefix, size_t prefix_len, const char *name, const import_opts *opts,
                     import_emit_fn emit, void *ctx, import_stats *st, err_msg *err) {
    if (fd < 0 || emit == NULL || prefix_len > JSRC_CHUNK || (prefix == NULL && prefix_len > 0))
        return err_set(err, ERR_INVAL, "kineto import: invalid argument");
    jsrc s = {.name = name, .fd = fd};
    struct stat sb;
    int rc = 0;
    if (fstat(fd, &sb) == 0) {
        if (S_ISDIR(sb.st_mode))
            rc = err_set(err, ERR_INVAL, "%s: is a directory", name);
        else if (S_ISREG(sb.st_mode))
            s.total = (uint64_t)sb.st_size;
    }
    if (rc == 0) {
        s.head = malloc(JSRC_CHUNK);
        if (s.head == NULL) {
            rc = err_set(err, ERR_NOMEM, "%s: out of memory", name);
        } else {
            if (prefix_len > 0)
                memcpy(s.head, prefix, prefix_len);
            s.head_len = prefix_len;
            rc = import(&s, name, opts, emit, ctx, st, err);
        }
    }
    jsrc_close(&s);
    return rc;
}

int kineto_import(const char *path, const import_opts *opts, import_emit_fn emit, void *ctx, import_stats *st,
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
