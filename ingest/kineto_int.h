/*
 * The Kineto importer's private parts, shared by its files: the parser's state (kimp), what an
 * entry of traceEvents is read into (kev), the contexts and call stacks that name blocking calls,
 * and the functions one file of the importer calls in another. kineto.c owns the state: the schema,
 * the parser and the scan; kineto_event.c makes records of the entries; kineto_emit.c orders and
 * emits them; json_lex.c and keypredict.c are the scanner's lexer and key predictor.
 */
#ifndef SYNCTOP_KINETO_INT_H
#define SYNCTOP_KINETO_INT_H

#include <stddef.h>
#include <stdint.h>

#include "cores.h"
#include "decimal.h"
#include "import.h"
#include "hash.h"
#include "keypredict.h"
#include "u64map.h"

#include "synctop/codec.h"

#define KINETO_MAX_TOKEN (1u << 20)   /* strings are cut here (see jl_lex_long) */
#define LONG_NUMBER      (64u << 10)  /* numbers longer than this are followed without their text */
#define MAX_SKIP_DEPTH   1000         /* nesting inside values the importer ignores */
#define YDEPTH           1100         /* open containers: the importer's few and MAX_SKIP_DEPTH */
#define MAX_DEVPROPS     256          /* deviceProperties entries kept */
#define NAME_KEEP        1024         /* bytes of a thread or device name kept */
#define STACK_KEEP       65535        /* bytes of an operator's "Call stack" kept */


enum ctx { C_ROOT, C_TOP, C_EVENTS, C_EVENT, C_ARGS, C_DEVPROPS, C_DEVPROP, C_DIST, C_DIMS };

/* The grammar's state (the scanner's lexical rules are in json_lex.h). */
enum ystate {
    Y_START,     /* expecting a value: the text's, */
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

/* What kt_scan returns, besides a negative code. */
enum { S_MORE, S_END, S_CUT };

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
    K_A_MODULE,
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
    H_STACK = 1 << 17,
    H_MODULE = 1 << 18
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
    kbuf module;        /* args."synctop module": the frame row is a native frame of this module */
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

/* What an operator or a Python frame row names, and the thread it runs on: kept once however many
 * rows name it. */
typedef struct kframe {
    uint32_t tid;
    uint32_t name; /* the operator's, or the Python frame's whole text */
    uint32_t file, line, func; /* a Python frame's parts, when its text gives them */
    uint32_t py;
    uint32_t stack; /* an operator's Python stack (legacy "Call stack"): index + 1 in kimp.stacks; 0 none */
    uint32_t module; /* a native frame's module (synctop's export writes them as python_function rows) */
} kframe;

/* An operator or a Python frame on a host thread: the context of the calls inside it, in 16 bytes
 * (a trace with Python stacks has about one per event). Its place in kimp.ctx is its place in the
 * file. */
#define KCTX_LONG UINT32_MAX /* dur of a context of 2^32 - 1 ns or more: its length is in ctx_long */
typedef struct kctx {
    uint64_t start;
    uint32_t dur;
    uint32_t frame; /* index in kimp.frames: what it names, and its thread */
} kctx;

/* A kernel as the importer holds it: tp_kernel's fields, but its launch shape (grid and block) is
 * an index in kimp.shapes, as a trace launches its kernels in a few shapes. */
typedef struct kkernel {
    uint8_t kind, flags;
    uint16_t device;
    uint32_t stream;
    uint64_t start, end;
    uint32_t correlation;
    uint32_t name;
    uint32_t context;
    uint32_t graph;
    uint32_t shape;
    uint32_t pad0;
} kkernel;

/* A record as the importer holds it until it is emitted: a tp_record in 48 bytes (a kernel as a
 * kkernel), so that a trace's records take three quarters of the room. */
typedef union krec {
    tp_head head;
    kkernel kernel;
    tp_memcpy memcpy;
    tp_memset memset;
    tp_sync sync;
    tp_api api;
    tp_nvtx nvtx;
} krec;

#define KT_POPULATE 4096 /* records or contexts whose pages are made at once, ahead of them */

/* A launch shape. */
typedef struct kshape {
    uint32_t grid[3], block[3];
} kshape;

/* A category's spelling met lately, and what it is (see kt_cat_of). */
#define KCAT_SEEN 4
typedef struct kcatseen {
    char text[24];
    uint8_t len, cat; /* len 0: none yet */
} kcatseen;

/* A name the encoder has interned (see kt_intern). */
#define KNAME_MEMO_BITS 10
#define KFRAME_MEMO_BITS 10 /* and the frames', in front of frame_ids */
#define KFRAME_MEMO (1u << KFRAME_MEMO_BITS)
#define KNAME_MEMO (1u << KNAME_MEMO_BITS)
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


struct kpiece;

typedef struct kimp {
    const char *name; /* for messages */
    const import_opts *opts;
    import_stats *st;
    err_msg *err;
    int fail; /* first error code, its message in err */
    int on_threads; /* the text is parsed on several threads (kt_par_parse) */
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
    int lnum;            /* in a long number: the state of jl_number_step + 1; 0 none */
    const dec_num *nv;      /* the parts of the number scalar() is given, when the scanner read them */
    uint64_t cuts;       /* strings cut */
    uint64_t feed0;      /* where the second of the pieces of jl_feed_start starts */
    uint64_t cut_close;  /* offset of the last cut string's closing quote */
    kbuf dec;            /* a string with escapes, decoded */

    /* parsing pieces of traceEvents on other threads (kineto_par.c) */
    struct kpiece *capt; /* a worker's: the piece whose entries are kept, not made records */
    int capt_sp;         /* a worker's: the depth of traceEvents in the grammar's stack */
    const uint8_t *rp_text; /* replaying a piece: its text, the offset it starts at, and up to */
    uint64_t rp_base, rp_lines; /* where the lines of messages are counted (see kt_pos_at) */

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
    uint32_t op_domain; /* "cpu_op": the domain of the ranges operators become (import_opts.ops) */
    kpred pred[C_DIMS + 1 + 16][PRED_POS + 1]; /* per context (args: per category) and place */
    kname *names;   /* string ids by name (see kt_intern) */
    cm_hash_key name_key; /* the process's: traces choose the names, not where they land in names */
    kname name_memo[KNAME_MEMO]; /* names last interned, found again with a compare and no hash */
    kcatseen cat_seen[KCAT_SEEN];
    unsigned cat_next;
    uint8_t *api_class;  /* by string id of a host call's name: its st_api_class + 1, 0 not yet known */
    size_t api_class_cap, api_class_known; /* allocated, and zeroed */
    size_t n_names, n_names_cap;
    kbuf names_text;
    krec *rec;
    size_t n_rec, cap_rec;
    kshape *shapes; /* kernels' launch shapes, each once (kkernel.shape) */
    size_t n_shapes, cap_shapes;
    cm_u64map shape_ids; /* a hash of a shape -> its index + 1 in shapes */
    uint32_t last_shape; /* the shape looked up last, + 1; 0 none */
    uint64_t n_ops; /* of those, ranges made of operators (import_opts.ops): a budget of max_events of
                       their own, so that they never make an import fail that would pass without */
    size_t held, held_peak; /* bytes of records, contexts and their order held now, and at most */
    kctx *ctx;      /* operators and Python frames: what blocking calls are called from */
    size_t n_ctx, cap_ctx;
    cm_u64map ctx_long; /* index in ctx -> length, of those KCTX_LONG or longer */
    kframe *frames; /* what they name, each once */
    size_t n_frames, cap_frames;
    cm_u64map frame_ids; /* a hash of a frame -> its index + 1 in frames */
    uint32_t frame_memo[KFRAME_MEMO]; /* indices + 1 of frames met lately, by their hash, two ways a slot */
    kpyframe *pyfr; /* the frames of the distinct Call stacks, innermost first */
    size_t n_pyfr, cap_pyfr;
    uint64_t *stacks; /* per distinct Call stack: its first frame in pyfr << 8 | its frame count */
    size_t n_stacks, cap_stacks;
    cm_u64map stack_ids; /* hash of a Call stack's text -> index + 1 in stacks */
    uint64_t max_events;
    cm_u64map streams; /* device << 32 | stream -> context */
    cm_u64map threads; /* pid << 32 | tid -> 1 */
    uint64_t last_stream, last_thread; /* the last key put in each, + 1; 0 none */
    cm_u64map tnames;  /* pid << 32 | tid -> offset << 16 | len in tnames_text */
    kbuf tnames_text;
    uint8_t dev_used[(TP_NO_DEVICE + 1) / 8];
    uint8_t wide[TP_NO_DEVICE]; /* per device: TP_F_SYNC_ID_* spellings of its device-wide syncs */
} kimp;

/* Offset in the text of a place in the window. */
static inline uint64_t off_of(const kimp *k, const uint8_t *p) {
    return k->wbase + (uint64_t)(p - k->wbeg);
}

/* Counts bytes of records, contexts or order taken (d > 0) or given back (import_stats.importer_peak_bytes). */
static inline void kt_held(kimp *k, int64_t d) {
    k->held += (size_t)d;
    if (k->held > k->held_peak)
        k->held_peak = k->held;
}

/* A context's thread and end. */
static inline uint32_t kt_ctx_tid(const kimp *k, const kctx *x) {
    return k->frames[x->frame].tid;
}
static inline uint64_t kt_ctx_end(const kimp *k, const kctx *x) {
    if (x->dur != KCTX_LONG)
        return x->start + x->dur;
    const uint64_t *d = cm_u64map_find(&k->ctx_long, (uint64_t)(x - k->ctx));
    return x->start + (d != NULL ? *d : KCTX_LONG);
}

/* Text buffers: set to s[0, min(len, keep)), or s appended; 0 or ERR_NOMEM. */
int kt_buf_set(kbuf *b, const void *s, size_t len, size_t keep);
int kt_buf_append(kbuf *b, const void *s, size_t len);

/* Line and column (1-based) of text offset off, at or after the start of the line before the
 * scanning point's: newlines are counted as the scanner passes them (only whitespace holds them),
 * and a column counts the bytes the text has on its line, cut strings' tails left out. */
void kt_pos_at(kimp *k, uint64_t off, uint64_t *line, uint64_t *col);
/* Records a fatal error at the end of the current token; returns 0 so a callback can stop the
 * scan. */
int kt_fail_here(kimp *k, int code, const char *what);
int kt_fail_nomem(kimp *k);

/* Entries to records (kineto_event.c). */

/* An event's category: the spellings met last are remembered exactly (a trace uses a few), the
 * others looked up in k_cats. */
int kt_cat_of(kimp *k, const char *s, size_t n);
/* A sync row's enum tp_sync_type, from its name or its args.cuda_sync_kind. */
int kt_sync_type_of(const char *s, size_t n);
/* Counts an entry skipped, by its category. */
void kt_count_skip(kimp *k, const char *cat, size_t len);
/* The index in kimp.shapes of a kernel's launch shape, added when it is new; 0 or ERR_NOMEM. */
int kt_shape(kimp *k, const uint32_t grid[3], const uint32_t block[3], uint32_t *id);
/* Record r as the tp_record it stands for. */
void kt_rec_out(const kimp *k, const krec *r, tp_record *out);
/* The string id of a name. The encoder interns it the first time; the ids it gave are kept here
 * too, behind a hash that is faster than the encoder's (an event's name is interned per event). */
uint32_t kt_intern(kimp *k, const char *s, size_t len);
/* The same for an entry's name. */
uint32_t kt_intern_ev(kimp *k, const kev *e);
/* The stack_ids key of a Call stack's text: a CRC-64 (ISA-L's, at several GB/s: the stacks of a legacy
 * trace are a third of its text), never 0. */
uint64_t kt_stack_key(const char *s, size_t n);
/* An entry of traceEvents, read: counted, and made records (or kept as context) when it is of use. */
int kt_event_end(kimp *k, kev *e);
/* Makes e an entry with nothing read yet. */
static inline void kt_event_reset(kev *e) {
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

/* The scanner (kineto.c). */

/* Sets up the parser's state of a kimp that k points to (zeroed), as the importer and its workers
 * need it; kt_release frees what it holds. 0 or ERR_NOMEM. */
int kt_setup(kimp *k);
void kt_release(kimp *k);
/* Scans the window from k->wpos (final: it ends the text): S_MORE, S_END, S_CUT or a negative code. */
int kt_scan(kimp *k, int final);
/* Makes the window the unfinished token of the last one followed by len bytes at data (which has
 * JSRC_HEAD bytes of room before it and JSRC_PAD after). 0 or a negative code. */
int kt_window_next(kimp *k, uint8_t *data, size_t len);
/* The same, then scans it (not the end of the text): 0 or a negative code. */
int kt_scan_piece(kimp *k, uint8_t *data, size_t len);

/* traceEvents parsed a piece at a time on several threads (kineto_par.c): the pieces of the text
 * are cut where an entry seems to end, scanned on worker threads from the state between entries,
 * and taken in order by k: a piece that began where an entry really ended and ended so too has its
 * entries made records as if k had read them; any other is scanned again by k. Returns what the
 * scan of the text's end returns (S_END, S_CUT) or a negative code. */
struct jsrc;
int kt_par_parse(kimp *k, struct jsrc *s, int threads, size_t piece);
/* A worker's entry (kt_event_end) or other value of traceEvents (not_object), kept in its piece. */
int kt_par_keep(kimp *k, const kev *e, int not_object);
/* The threads an import uses: import_opts.threads, else SYNCTOP_THREADS, else the cores the
 * process may run on, at most KT_MAX_THREADS. */
#define KT_MAX_THREADS CM_MAX_THREADS
#define KT_PIECE       (1u << 20) /* bytes of text a thread parses at a time, at most */
#define KT_PIECE_MIN   (128u << 10) /* and at least */
#define KT_IN_FLIGHT   (2u << 20) /* bytes of text in the pieces in flight (2 a thread and 3), at most,
                                     unless that makes pieces under KT_PIECE_MIN */
#define KT_PAR_LEAST   ((size_t)IMPORT_PAR_LEAST_MIB << 20)
#define KT_PAR_LEAST_GZ ((size_t)IMPORT_PAR_LEAST_GZ_MIB << 20) /* of compressed bytes */
int kt_threads(const import_opts *o);

/* Once the whole text is read: fix-ups, correlations, order, and the batches (kineto_emit.c). */
int kt_emit_all(kimp *k, import_emit_fn emit, void *ctx);

#endif
