/*
 * The synctop event model: the fixed-size records that every part of synctop speaks.
 *
 * A record is a plain struct whose layout is the wire and file layout (little-endian, naturally
 * aligned, size a multiple of 8, checked by static asserts), so encoding is a copy and decoding is
 * a bounds-checked validation followed by a copy or a pointer into the batch. Every record starts
 * with the same four bytes (kind, flags, device). Timestamps are integer nanoseconds on the
 * producer's trace clock; a TP_K_CLOCK beacon relates that clock to CLOCK_REALTIME and
 * CLOCK_MONOTONIC. Names are ids of strings interned per producer (0 means "no name").
 *
 * Changing a record's layout means a new TP_BATCH_VERSION; adding a kind or a flag bit does too,
 * since older decoders reject what they do not know.
 */
#ifndef SYNCTOP_EVENT_H
#define SYNCTOP_EVENT_H

#include <stddef.h>
#include <stdint.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "synctop's records are little-endian and it is built only for little-endian hosts"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Record kinds. Events are time-stamped things that happened; metadata describes the producer
 * and is re-sent whenever a consumer needs the whole picture (a new subscriber, a keyframe). */
enum tp_kind {
    TP_K_KERNEL = 1,
    TP_K_MEMCPY = 2,
    TP_K_MEMSET = 3,
    TP_K_SYNC = 4,     /* GPU-side synchronization (CUPTI SYNCHRONIZATION) */
    TP_K_API = 5,      /* a host call into the CUDA runtime or driver */
    TP_K_NVTX = 6,     /* NVTX range or marker */
    TP_K_CLOCK = 7,    /* clock beacon */
    TP_K_DROPS = 8,    /* cumulative dropped-records counter */
    TP_K_PROCESS = 16, /* metadata from here on */
    TP_K_DEVICE = 17,
    TP_K_STREAM = 18,
    TP_K_THREAD = 19,
    TP_K_CALLSITE = 20,
    TP_K_FRAME = 21,
    TP_K_MODULE = 22,    /* since batch version 2 */
    TP_K_HOSTCLOCK = 23, /* since batch version 3 */
    TP_K_MAX_ = 24
};
#define TP_KIND_IS_META(k) ((k) >= TP_K_PROCESS)

/* Flag bits, per kind. */
enum {
    TP_F_ASYNC = 1 << 0,      /* memcpy/memset: issued with an async API */
    TP_F_BLOCKING = 1 << 0,   /* api: the calling thread waited for the device */
    TP_F_DRIVER = 1 << 1,     /* api: driver API (else runtime API) */
    TP_F_LAUNCH = 1 << 2,     /* api: the call launches work (kernel, graph) */
    TP_F_GRAPH = 1 << 0,      /* kernel: launched as part of a CUDA graph */
    TP_F_NULL_STREAM = 1 << 0, /* stream: the context's default (NULL) stream */
    TP_F_TS_ABSOLUTE = 1 << 0, /* process (imported): times written as absolute us, no base added
                                  (a Kineto trace without baseTimeNanoseconds) */
    /* stream TP_NO_ID (device-wide syncs of an imported trace): how the source spelled its id */
    TP_F_SYNC_ID_NEG = 1 << 1, /* as -1 (newer Kineto) */
    TP_F_SYNC_ID_U32 = 1 << 2  /* as 4294967295 (older Kineto) */
};

/* NVTX record shapes (kept in flags). */
enum tp_nvtx_shape { TP_NVTX_INSTANT = 1, TP_NVTX_RANGE = 2, TP_NVTX_START = 3, TP_NVTX_END = 4 };

/* Copy kinds, as CUPTI numbers them (CUpti_ActivityMemcpyKind). */
enum tp_copy_kind {
    TP_COPY_UNKNOWN = 0, TP_COPY_HTOD = 1, TP_COPY_DTOH = 2, TP_COPY_HTOA = 3, TP_COPY_ATOH = 4,
    TP_COPY_ATOA = 5, TP_COPY_ATOD = 6, TP_COPY_DTOA = 7, TP_COPY_DTOD = 8, TP_COPY_HTOH = 9,
    TP_COPY_PTOP = 10, TP_COPY_MAX_ = 11
};

/* Memory kinds, as CUPTI numbers them (CUpti_ActivityMemoryKind). */
enum tp_mem_kind {
    TP_MEM_UNKNOWN = 0, TP_MEM_PAGEABLE = 1, TP_MEM_PINNED = 2, TP_MEM_DEVICE = 3, TP_MEM_ARRAY = 4,
    TP_MEM_MANAGED = 5, TP_MEM_DEVICE_STATIC = 6, TP_MEM_MANAGED_STATIC = 7, TP_MEM_MAX_ = 8
};

/* Synchronization types, as CUPTI numbers them (CUpti_ActivitySynchronizationType). */
enum tp_sync_type {
    TP_SYNC_UNKNOWN = 0, TP_SYNC_EVENT = 1, TP_SYNC_STREAM_WAIT_EVENT = 2, TP_SYNC_STREAM = 3,
    TP_SYNC_CONTEXT = 4, TP_SYNC_MAX_ = 5
};

/* Sources of dropped records. */
enum tp_drop_source {
    TP_DROP_CUPTI = 1,     /* CUPTI's own dropped-records counter */
    TP_DROP_TRACER = 2,    /* the tracer's bounded queues were full */
    TP_DROP_PUBLISHER = 3, /* batches slow subscribers lost, as they reported them */
    TP_DROP_RECORDER = 4,  /* a recorder's note: batches (and their events, as records) it received and
                              could not write before it stopped */
    TP_DROP_MAX_ = 5
};

/* Frame kinds (kept in flags): a native frame (module + pc, symbolized later), a Python frame
 * (file, line, function), a framework operator around the call (func: "aten::item"; from imported
 * profiler traces, no file or module). */
enum tp_frame_kind { TP_FRAME_NATIVE = 1, TP_FRAME_PYTHON = 2, TP_FRAME_OP = 3 };

#define TP_NO_DEVICE 0xFFFFu
#define TP_NO_ID 0xFFFFFFFFu

typedef struct tp_head {
    uint8_t kind;
    uint8_t flags;
    uint16_t device;
} tp_head;

typedef struct tp_kernel {
    uint8_t kind, flags;
    uint16_t device;
    uint32_t stream;
    uint64_t start, end;
    uint32_t correlation;
    uint32_t name;
    uint32_t context;
    uint32_t graph; /* graph id, 0 when not a graph launch */
    uint32_t grid[3];
    uint32_t block[3];
} tp_kernel;

typedef struct tp_memcpy {
    uint8_t kind, flags;
    uint16_t device;
    uint32_t stream;
    uint64_t start, end;
    uint32_t correlation;
    uint32_t context;
    uint64_t bytes;
    uint8_t copy_kind; /* enum tp_copy_kind */
    uint8_t src_kind;  /* enum tp_mem_kind */
    uint8_t dst_kind;  /* enum tp_mem_kind */
    uint8_t pad0;
    uint16_t src_device, dst_device; /* peer copies; TP_NO_DEVICE otherwise */
} tp_memcpy;

typedef struct tp_memset {
    uint8_t kind, flags;
    uint16_t device;
    uint32_t stream;
    uint64_t start, end;
    uint32_t correlation;
    uint32_t context;
    uint64_t bytes;
    uint8_t mem_kind; /* enum tp_mem_kind */
    uint8_t pad0[3];
    uint32_t value;
} tp_memset;

typedef struct tp_sync {
    uint8_t kind, flags;
    uint16_t device;
    uint32_t stream; /* TP_NO_ID when the sync is not on a stream */
    uint64_t start, end;
    uint32_t correlation;
    uint32_t context;
    uint32_t event; /* CUDA event id, TP_NO_ID when none */
    uint8_t sync_type; /* enum tp_sync_type */
    uint8_t pad0[3];
} tp_sync;

typedef struct tp_api {
    uint8_t kind, flags; /* TP_F_BLOCKING, TP_F_DRIVER, TP_F_LAUNCH */
    uint16_t device;     /* current device, TP_NO_DEVICE when unknown */
    uint32_t tid;
    uint64_t start, end;
    uint32_t correlation;
    uint32_t cbid;     /* CUPTI callback id in its domain; 0 when unknown (imports) */
    uint32_t name;     /* API name */
    uint32_t callsite; /* call-site id, 0 when none was taken */
    int32_t ret;       /* return code */
    uint32_t pad0;
} tp_api;

typedef struct tp_nvtx {
    uint8_t kind, flags; /* flags = enum tp_nvtx_shape */
    uint16_t device;
    uint32_t tid;
    uint64_t start, end; /* equal for instants and for START/END halves */
    uint64_t id;         /* pairs START with END */
    uint32_t name;
    uint32_t domain;
} tp_nvtx;

typedef struct tp_clock {
    uint8_t kind, flags;
    uint16_t device;
    uint32_t pad0;
    uint64_t trace_ns;     /* the producer's trace clock */
    uint64_t realtime_ns;  /* CLOCK_REALTIME at the same instant */
    uint64_t monotonic_ns; /* CLOCK_MONOTONIC at the same instant */
} tp_clock;

typedef struct tp_drops {
    uint8_t kind, flags;
    uint16_t device;
    uint32_t source; /* enum tp_drop_source */
    uint64_t ts;
    uint64_t records; /* cumulative records lost at this source */
    uint64_t batches; /* cumulative batches lost at this source */
} tp_drops;

typedef struct tp_process {
    uint8_t kind, flags;
    uint16_t device;
    uint32_t pid;
    uint32_t host;    /* string */
    uint32_t cmdline; /* string */
    int32_t rank;     /* -1 when unknown */
    int32_t world;    /* -1 when unknown */
    uint64_t start_realtime_ns;
} tp_process;

typedef struct tp_device {
    uint8_t kind, flags;
    uint16_t device;
    uint32_t name; /* string */
    uint8_t cc_major, cc_minor;
    uint16_t pad0;
    uint32_t sm_count;
    uint64_t memory_bytes;
} tp_device;

typedef struct tp_stream {
    uint8_t kind, flags; /* TP_F_NULL_STREAM, TP_F_SYNC_ID_* */
    uint16_t device;
    uint32_t stream;
    uint32_t context;
    int32_t priority;
} tp_stream;

typedef struct tp_thread {
    uint8_t kind, flags;
    uint16_t device;
    uint32_t tid;
    uint32_t name; /* string */
    uint32_t pid;
} tp_thread;

/* A call site is an id and its frames, innermost first, sent as one TP_K_CALLSITE record followed
 * (in the same batch) by n_frames TP_K_FRAME records. */
typedef struct tp_callsite {
    uint8_t kind, flags;
    uint16_t device;
    uint32_t id;
    uint32_t n_frames;
    uint32_t pad0;
} tp_callsite;

typedef struct tp_frame {
    uint8_t kind, flags; /* flags = enum tp_frame_kind */
    uint16_t index;      /* 0 = innermost */
    uint32_t callsite;
    uint32_t line;   /* 0 when unknown */
    uint32_t file;   /* string */
    uint32_t func;   /* string */
    uint32_t module; /* string: shared object for native frames */
    uint64_t pc;     /* native: offset in module; python: instruction offset */
} tp_frame;

/* A native module that frames name (by the same path string), with its GNU build id as loaded in
 * the process, so that a reader can tell whether the file it finds at that path today is the one
 * that ran. Sent before the first frame that names the module. */
#define TP_BUILD_ID_MAX 32
typedef struct tp_module {
    uint8_t kind, flags;
    uint16_t device;          /* TP_NO_DEVICE */
    uint32_t path;            /* string: as TP_K_FRAME's module */
    uint8_t build_id_len;     /* 0: the module has no build id; at most TP_BUILD_ID_MAX */
    uint8_t pad0[7];
    uint8_t build_id[TP_BUILD_ID_MAX];
} tp_module;

/* A host's clock as a recorder measured it through the relays (NTP-style): that host's
 * CLOCK_REALTIME minus the recorder's, within +- uncertainty_ns, when the recorder measured it
 * (its CLOCK_REALTIME). Only in a recorder's own notes: a synthetic batch of producer
 * TP_PRODUCER_NOTES, which readers apply to the producers whose process record names that host and
 * never count as a producer. */
#define TP_PRODUCER_NOTES UINT64_MAX
typedef struct tp_hostclock {
    uint8_t kind, flags;
    uint16_t device; /* TP_NO_DEVICE */
    uint32_t host;   /* string: as TP_K_PROCESS's host */
    int64_t offset_ns;
    uint64_t uncertainty_ns;
    uint64_t measured_ns;
} tp_hostclock;

/* Any record. */
typedef union tp_record {
    tp_head head;
    tp_kernel kernel;
    tp_memcpy memcpy;
    tp_memset memset;
    tp_sync sync;
    tp_api api;
    tp_nvtx nvtx;
    tp_clock clock;
    tp_drops drops;
    tp_process process;
    tp_device device;
    tp_stream stream;
    tp_thread thread;
    tp_callsite callsite;
    tp_frame frame;
    tp_module module;
    tp_hostclock hostclock;
} tp_record;

/* Size in bytes of a record of this kind, 0 for an unknown kind. */
size_t tp_kind_size(unsigned kind);
/* Short lowercase name of a kind ("kernel", "memcpy", ...), "?" for an unknown kind. */
const char *tp_kind_name(unsigned kind);
const char *tp_copy_kind_name(unsigned copy_kind);
const char *tp_mem_kind_name(unsigned mem_kind);
const char *tp_sync_type_name(unsigned sync_type);

/* Start and end of a record that has them (events); 0 and 0 for metadata. Instants have start ==
 * end. */
void tp_record_span(const tp_record *r, uint64_t *start, uint64_t *end);

#ifdef __cplusplus
}
#endif
#endif
