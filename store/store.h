/*
 * The store: every event of one or more traces, by lane, in time order, with a multi-resolution
 * summary per lane, so that a viewer frame and the analysis cost about the same at ten thousand or
 * ten million events. It is fed batch by batch from any source (a trace file, live subscribers, a
 * Kineto import) and owns what those batches describe: producers, devices, streams, threads, call
 * sites and names.
 *
 * Lanes: one per GPU stream (kernels, copies, memsets, GPU-side syncs), one per host thread (CUDA
 * calls; blocking ones flagged TP_F_BLOCKING), one per host thread for its ranges (NVTX, profiler
 * annotations and operators) when it has any.
 * Events in a lane are sorted by start (ties: by end); they may overlap (real traces overlap
 * consecutive kernels by a few microseconds). Times are integer nanoseconds on the producers' trace
 * clocks, which for CUPTI and Kineto are CLOCK_REALTIME, so several producers share one axis.
 *
 * Strings are interned store-wide (ids differ from the producers' ids). Names are untrusted: the
 * store keeps them as they came and the view sanitizes them.
 *
 * Memory: 20 bytes per event, its summaries about 2.6 more, and the shapes events share (a few
 * thousand in real traces; a live store forgets those its dropped events alone used). For live
 * sessions st_opts.max_events bounds the store: past it the oldest events are dropped (counted).
 */
#ifndef SYNCTOP_STORE_H
#define SYNCTOP_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "synctop/codec.h"
#include "synctop/error.h"
#include "synctop/event.h"

typedef enum st_lane_kind {
    ST_LANE_STREAM = 1, /* a GPU stream: id = stream id, device = the GPU */
    ST_LANE_THREAD = 2, /* a host thread's CUDA calls: id = tid */
    ST_LANE_NVTX = 3    /* a host thread's NVTX ranges: id = tid */
} st_lane_kind;

/* Summary categories: what a cell of the timeline can show. */
enum st_cat {
    ST_CAT_KERNEL, ST_CAT_MEMCPY, ST_CAT_MEMSET, ST_CAT_SYNC, /* GPU lanes */
    ST_CAT_API, ST_CAT_BLOCKED,                               /* host lanes */
    ST_CAT_NVTX,
    ST_CAT_N
};

/* One event in a lane (20 bytes): when it starts and how long it lasts, its correlation id, and
 * its shape, an id in the store's table of what events repeat (a kernel's name, grid and block; a
 * call's name, callback id, call site and device; a copy's bytes and kinds): the real traces have
 * some thousands of shapes for millions of events. Read it with the st_ev_* accessors below;
 * start may be read as it is, and corr on lanes other than ranges. */
typedef struct __attribute__((packed, aligned(4))) st_event {
    uint64_t start;
    uint32_t dur;   /* end - start; ST_DUR_LONG: 4.29 s or more, held in the shape */
    uint32_t corr;  /* correlation id, per producer (0: none); ranges: their depth (see st_ev_aux) */
    uint32_t shape; /* its category (enum st_cat) << 29 | its index in the store's shapes */
} st_event;
#define ST_DUR_LONG UINT32_MAX
#define ST_SHAPE_INDEX 0x1FFFFFFFu /* the index's bits of st_event.shape */

/* What an event shares with others: all of it but its start, duration and correlation. */
typedef struct st_shape {
    uint64_t value; /* memcpy/memset: bytes; api: store call-site id (0 none); kernel: grid size in blocks */
    uint64_t dur;   /* the duration of an event of ST_DUR_LONG (0 for others) */
    uint32_t name;  /* store string id: kernel, API or range name (0: none) */
    uint32_t aux;   /* api: cbid; sync: CUDA event id; kernel: threads per block */
    uint8_t kind;   /* enum tp_kind */
    uint8_t flags;  /* the record's flags (TP_F_BLOCKING, TP_F_ASYNC, ...) */
    uint8_t sub;    /* memcpy: copy kind; memset: memory kind; sync: sync type; nvtx: shape */
    uint8_t mem;    /* memcpy: src memory kind << 4 | dst memory kind */
} st_shape;

typedef struct st_store st_store;

/* The part of the store the accessors read: it begins every st_store. */
typedef struct st_store_head {
    const st_shape *shapes;
} st_store_head;

static inline const st_shape *st_ev_shape(const st_store *s, const st_event *e) {
    return &((const st_store_head *)(const void *)s)->shapes[e->shape & ST_SHAPE_INDEX];
}
static inline uint64_t st_ev_dur(const st_store *s, const st_event *e) {
    return e->dur != ST_DUR_LONG ? e->dur : st_ev_shape(s, e)->dur;
}
static inline uint64_t st_ev_end(const st_store *s, const st_event *e) { return e->start + st_ev_dur(s, e); }
/* The kind follows from the category the shape id holds: no shape is read. */
static inline unsigned st_ev_kind(const st_store *s, const st_event *e) {
    unsigned c = e->shape >> 29;
    (void)s;
    return c <= ST_CAT_SYNC ? c + TP_K_KERNEL : c <= ST_CAT_BLOCKED ? TP_K_API : TP_K_NVTX;
}
static inline unsigned st_ev_flags(const st_store *s, const st_event *e) { return st_ev_shape(s, e)->flags; }
static inline unsigned st_ev_sub(const st_store *s, const st_event *e) { return st_ev_shape(s, e)->sub; }
static inline unsigned st_ev_mem(const st_store *s, const st_event *e) { return st_ev_shape(s, e)->mem; }
static inline uint32_t st_ev_name(const st_store *s, const st_event *e) { return st_ev_shape(s, e)->name; }
static inline uint64_t st_ev_value(const st_store *s, const st_event *e) { return st_ev_shape(s, e)->value; }
/* A range's aux is its depth (see st_lane_depths); ranges have no correlation id. */
static inline uint32_t st_ev_aux(const st_store *s, const st_event *e) {
    return st_ev_kind(s, e) == TP_K_NVTX ? e->corr : st_ev_shape(s, e)->aux;
}
static inline uint32_t st_ev_corr(const st_store *s, const st_event *e) {
    return st_ev_kind(s, e) == TP_K_NVTX ? 0 : e->corr;
}

/* The flags of a range that is a profiler's operator (its record's domain is "cpu_op"): the
 * viewer shows it among the thread's ranges; the analysis leaves it out, as report, which does not
 * import operators, has none. */
#define ST_EV_OP 0x80

/* The category of an event. */
int st_event_cat(const st_store *s, const st_event *e);

/* What a time bucket of a lane holds: busy time per category (the union of overlapping events
 * is not taken: overlapping events both count), how many events touch it, and the longest one. */
typedef struct st_bucket {
    uint64_t busy[ST_CAT_N];
    uint32_t count;
    uint32_t longest; /* index in the lane of the longest event touching the bucket (UINT32_MAX: none) */
} st_bucket;

typedef struct st_lane_info {
    st_lane_kind kind;
    uint32_t producer; /* index in st_producer_get */
    uint16_t device;   /* TP_NO_DEVICE for host lanes */
    uint32_t id;       /* stream id or tid */
    uint32_t name;     /* store string: thread name, "" for streams */
    int priority;      /* streams */
    int null_stream;   /* streams: the context's default stream */
    unsigned stream_flags; /* streams: TP_F_* of the stream's record */
    size_t n_events;
} st_lane_info;

typedef struct st_producer_info {
    uint64_t producer; /* the producer id of its batches */
    uint32_t pid;
    uint32_t host, cmdline; /* store strings */
    int32_t rank, world;
    uint8_t flags;            /* its process record's: TP_F_TS_ABSOLUTE */
    uint64_t batches, missed; /* batches received, and missed (sequence gaps) */
    uint64_t drop_records[TP_DROP_MAX_], drop_batches[TP_DROP_MAX_]; /* latest TP_K_DROPS */
    int ended; /* nothing more of it will come: its TP_BF_END batch arrived, or the file it came
                  from was read to its end (st_store_producers_read) */
    int clock_aligned;             /* its host's clock was measured (st_store_set_host_clock) */
    int64_t clock_shift_ns;        /* taken off its events' times: its host's clock minus the reference */
    uint64_t clock_uncertainty_ns; /* its events are on the reference clock within ± this */
} st_producer_info;

typedef struct st_device_info {
    uint32_t producer;
    uint16_t device;
    uint32_t name; /* store string */
    uint8_t cc_major, cc_minor;
    uint32_t sm_count;
    uint64_t memory_bytes;
} st_device_info;

typedef struct st_frame {
    uint8_t kind;       /* enum tp_frame_kind */
    uint8_t symbolized; /* native: looked up on disk (symbols.h), whatever was found */
    uint32_t line;
    uint32_t file, func, module; /* store strings */
    uint64_t pc;
} st_frame;

typedef struct st_opts {
    size_t max_events; /* 0: unbounded (replay); live sessions bound it */
} st_opts;

st_store *st_store_new(const st_opts *opts); /* opts may be NULL */
void st_store_destroy(st_store **s);

/* Adds one batch (as on the wire or in a file, compressed or not). Strings and metadata are kept
 * per producer; events go to their lanes. A malformed batch is refused whole with a message. */
int st_store_add_batch(st_store *s, const void *batch, size_t len, err_msg *err);

/* Makes every lane sorted and its summary current; call after adding and before reading. Cheap
 * when nothing changed; after appends in time order it only extends what is there. */
void st_store_commit(st_store *s);

/* ---- reading (after st_store_commit) ---- */

size_t st_lane_count(const st_store *s);
/* Lanes come in display order: by producer, then per device its streams (null stream first, then
 * by id), then host threads, each followed by its NVTX lane. */
const st_lane_info *st_lane_get(const st_store *s, size_t lane);
const st_event *st_lane_events(const st_store *s, size_t lane, size_t *n);
/* Ranges lanes (ST_LANE_NVTX) nest their ranges as Perfetto's slice depth: a range's depth (its
 * event's aux) is, where ranges nest, how many ranges of the lane enclose it; one that starts inside
 * another and ends past it goes below every range still open when it starts, so that ranges of one
 * depth never overlap. These
 * give how many depths the lane has (0 for other lanes); the indices in st_lane_events of the
 * ranges at one depth, in time order; the first of those whose end is past t; and the innermost
 * range that holds [t0, t1] (its index, SIZE_MAX when none does). Memory: 4 bytes per range. */
size_t st_lane_depths(const st_store *s, size_t lane);
const uint32_t *st_lane_at_depth(const st_store *s, size_t lane, size_t depth, size_t *n);
size_t st_lane_depth_find(const st_store *s, size_t lane, size_t depth, uint64_t t);
size_t st_lane_range_at(const st_store *s, size_t lane, uint64_t t0, uint64_t t1);
/* Index of the first event of the lane whose start is >= t (n when none). Events that start
 * earlier may still cover t: st_lane_summary accounts for them. */
size_t st_lane_lower_bound(const st_store *s, size_t lane, uint64_t t);
/* Summarises [t0, t1) cut into n equal buckets (the last takes the remainder) into out[n]. Costs
 * O(n log events), whatever the zoom. */
int st_lane_summary(const st_store *s, size_t lane, uint64_t t0, uint64_t t1, size_t n, st_bucket *out);

/* First and last timestamps of all events; 0, 0 when empty. */
void st_store_span(const st_store *s, uint64_t *t0, uint64_t *t1);
size_t st_store_events(const st_store *s);  /* events held */
uint64_t st_store_dropped(const st_store *s); /* events dropped by max_events */
/* Names a bounded (live) store refused: past 128 MiB or 4M names, new ones read as a placeholder. */
uint64_t st_store_names_refused(const st_store *s);
size_t st_store_memory(const st_store *s);  /* bytes held, for the benchmark */
/* Where st_store_memory's bytes go: the events, their summaries (prefix sums and trees), the
 * ranges' depth index, the shapes, the strings, the call sites and their frames, and the rest
 * (maps, lanes, producers, devices). */
typedef struct st_memory {
    size_t events, summaries, depths, shapes, strings, callsites, other;
} st_memory;
void st_store_memory_parts(const st_store *s, st_memory *m);

/* A store string (NUL-terminated, untrusted); "" for 0 or unknown ids. */
const char *st_str(const st_store *s, uint32_t id);
/* Ids in use: every string is st_str(s, id) for id in [1, st_str_count(s)). */
size_t st_str_count(const st_store *s);
uint32_t st_intern(st_store *s, const char *str, size_t len);

/* Host clocks. A producer's trace clock is its host's CLOCK_REALTIME; producers of several hosts
 * share one axis only as well as those clocks agree. This says that host's clock is offset_ns ahead
 * of the reference (the clock of whoever measured it, through relays: tp_sub_clock) within
 * ± uncertainty_ns: the events of every producer whose process record names that host, those held
 * and those to come, are put on the reference clock (offset_ns taken off). A later measurement
 * moves them again only when it says the offset applied is off by more than its own uncertainty;
 * the uncertainty a producer states is then the distance from the offset applied to the one
 * measured plus the measurement's uncertainty, so it is never below what was measured. At most
 * 256 hosts; returns 1 when events moved, 0 when none did, or ERR_INVAL (no host), ERR_LIMIT,
 * ERR_NOMEM. */
int st_store_set_host_clock(st_store *s, const char *host, int64_t offset_ns, uint64_t uncertainty_ns);

size_t st_producer_count(const st_store *s);
/* The first start and last end of a producer's events (0, 0 when it has none). */
void st_producer_span(const st_store *s, uint32_t prod, uint64_t *t0, uint64_t *t1);
/* Takes shift_ns off the times of a producer's events, those held and those to come, in place of
 * what was taken off before (its clock_shift_ns): files recorded at unrelated times put side by
 * side. 1 when its events moved, 0 when not, ERR_INVAL for no such producer. */
int st_store_shift_producer(st_store *s, uint32_t prod, int64_t shift_ns);
/* The producers from index first on came from a file now read whole: they are over (ended), what
 * the file holds of them is all there is (a program killed, or a recording stopped, while it ran). */
void st_store_producers_read(st_store *s, uint32_t first);
const st_producer_info *st_producer_get(const st_store *s, size_t i);
size_t st_device_count(const st_store *s);
const st_device_info *st_device_get(const st_store *s, size_t i);
/* The frames of a store call-site id, innermost first; NULL (n = 0) when unknown. */
const st_frame *st_callsite_frames(const st_store *s, uint64_t callsite, size_t *n);
/* Call sites are numbered 1..st_callsite_count(). */
size_t st_callsite_count(const st_store *s);
/* The build id the call site's producer announced for a module (a store string that its frames
 * name): 1 and the id (len 0: the module had none), or 0 when the producer said nothing of it
 * (traces from before batch version 2). */
int st_module_build_id(const st_store *s, uint64_t callsite, uint32_t module, const uint8_t **id, size_t *len);
/* What symbols.h found for a native frame: func and file (NULL: unknown; func then keeps what
 * the tracer named) and line. Ignored unless the frame still has this module and pc (a call site
 * re-sent in between). Marks the frame symbolized. */
void st_frame_set_symbol(st_store *s, uint64_t callsite, size_t index, uint32_t module, uint64_t pc,
                         const char *func, const char *file, uint32_t line);

/* The device of an API event (kept in sub | mem << 8), TP_NO_DEVICE for other kinds or unknown. A
 * kernel's value holds its grid size in blocks, its aux the threads per block. */
uint16_t st_event_device(const st_store *s, const st_event *e);

/* Gives back the spare capacity of the lanes (after a whole source was loaded). */
void st_store_shrink(st_store *s);

/* Whether a function is the CUDA runtime's own (a statically linked libcudart puts its frames in
 * the program): cudaXxx (and HIP's hipXxx), __cudaXxx, cudart::..., libcudart_static_..., their
 * mangled forms, and the launch stubs nvcc writes for <<<>>> (__device_stub_...). A call site is
 * named after the first frame that is not. */
int st_is_runtime_function(const char *func);

/* Whether a Python file belongs to a library rather than to the program: PyTorch's own files
 * (torch/..., .../site-packages/torch/...), the standard library (a bare stdlib module name as
 * the profiler writes it, "threading.py", or a path under lib/pythonX.Y outside site-packages),
 * and pseudo-files ("<frozen runpy>", "<string>"). */
int st_is_library_file(const char *file);

/* The frame a call site is named after: its innermost Python frame in the program's own code
 * (st_is_library_file), else its innermost Python frame with a file, else its innermost native
 * frame outside the CUDA runtime, else the operator that made the call (st_site_op), else its
 * innermost frame; NULL when it has none. */
const st_frame *st_site_frame(const st_store *s, uint64_t callsite);

/* The operator that made the call, among those between the call and the frame the site is named
 * after: the outermost ATen operator (aten::is_nonzero around aten::item around
 * aten::_local_scalar_dense), else the outermost operator (a module's "forward"); NULL when there
 * is none. */
const st_frame *st_site_op(const st_store *s, uint64_t callsite);

#endif
