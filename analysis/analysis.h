/*
 * Analysis: turns a store (store.h) into answers: the host-blocking spans and their kinds, the GPU
 * idle bubbles and what caused each one, totals per call site, the checks Nsight Systems' expert
 * rules make, and Holistic Trace Analysis' idle-time breakdown. One module serves the viewer (top
 * stalls panel, stall highlighting, n/N) and the headless verbs (report, run --no-tui).
 *
 * Pure computation over a committed store: no I/O, no terminal. Results own their memory.
 */
#ifndef SYNCTOP_ANALYSIS_H
#define SYNCTOP_ANALYSIS_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "synctop/error.h"

/* Why a host thread waited. */
typedef enum an_block_kind {
    AN_BLOCK_SYNC = 1,     /* explicit: stream/event/device/context synchronize */
    AN_BLOCK_MEMCPY = 2,   /* a synchronous copy */
    AN_BLOCK_PAGEABLE = 3, /* an "async" copy through pageable memory */
    AN_BLOCK_MEMSET = 4,   /* a synchronous memset */
    AN_BLOCK_ALLOC = 5,    /* cudaFree/cudaMalloc variants that synchronize */
    AN_BLOCK_QUERY = 6,    /* a busy cudaStreamQuery/cudaEventQuery loop */
    AN_BLOCK_OTHER = 7,
    AN_BLOCK_KIND_N_
} an_block_kind;
const char *an_block_kind_name(int kind);

/* A host-blocking span: a CUDA call during which its thread waited for the device. */
typedef struct an_block {
    size_t lane, index; /* the API event in the store */
    uint64_t start, end;
    int kind;           /* an_block_kind */
    uint64_t callsite;  /* store call-site id, 0 when none was taken */
    uint32_t name;      /* API name (store string) */
    uint32_t producer;
    uint16_t device;    /* TP_NO_DEVICE when unknown */
    uint64_t gpu_idle_ns; /* GPU idle time attributed to this span */
    uint64_t own_ns;      /* its time not already covered by an earlier blocking call of the same
                           * thread (a driver call inside a runtime call): what totals add up */
} an_block;

/* Why a GPU (or stream) sat idle. */
typedef enum an_cause {
    AN_CAUSE_BLOCK = 1,  /* the host was blocked in a CUDA call (see block) */
    AN_CAUSE_LAUNCH = 2, /* launch latency: the next work was submitted but not yet started */
    AN_CAUSE_HOST = 3,   /* the host was busy elsewhere and submitted nothing */
    AN_CAUSE_N_
} an_cause;
const char *an_cause_name(int cause);

#define AN_DEVICE_LANE UINT32_MAX /* an_bubble.lane of a whole-device bubble */
#define AN_NONE        UINT32_MAX /* an_bubble.block, .split, .launch_lane: none */
#define AN_SORT_TWO_LEAST (1u << 16) /* bubbles from which the analysis sorts them on two threads, where
                                        the process may use two (SYNCTOP_THREADS, else its cores) */

/* A GPU idle bubble: 40 bytes, as a trace has about one per kernel. */
typedef struct an_bubble {
    uint64_t start, end;
    uint32_t producer;
    uint32_t lane;        /* the stream lane, or AN_DEVICE_LANE for a whole-device bubble */
    uint32_t block;       /* index in an_result.blocks when cause is AN_CAUSE_BLOCK, else AN_NONE */
    uint32_t split;       /* index in an_result.splits when cause is AN_CAUSE_BLOCK, else AN_NONE */
    uint32_t launch_lane; /* the thread lane that submitted the work that ended it; AN_NONE: unknown */
    uint16_t device;
    uint8_t cause;        /* an_cause */
} an_bubble;

/* How a bubble with cause AN_CAUSE_BLOCK divides, in time order: [start, block_from) the host busy
 * elsewhere before it began to wait; [block_from, block_to) the stall's share (see
 * an_bubble_split); [block_to, launch_from) the host busy elsewhere; [launch_from, end) launch
 * latency. A bubble of another cause is wholly that cause's (all three are its end). */
typedef struct an_wait_split {
    uint64_t block_from, block_to, launch_from;
} an_wait_split;

struct an_result;
/* A bubble's split (see an_wait_split). */
an_wait_split an_bubble_parts(const struct an_result *r, const an_bubble *x);
/* The time of a bubble [start, end) per cause (out[AN_CAUSE_*], added to) within [a, b). */
void an_bubble_split(const struct an_result *r, const an_bubble *x, uint64_t a, uint64_t b,
                     uint64_t out[AN_CAUSE_N_]);

/* Totals per call site (per API name when no call site was taken), sorted by total blocked time. */
typedef struct an_site {
    uint32_t producer;
    uint64_t callsite; /* 0: no call site; then name tells the API */
    uint32_t name;     /* the API most often blocking here */
    int kind;          /* an_block_kind of most of its spans */
    uint64_t count, total_ns, max_ns, gpu_idle_ns;
    double wall_share; /* total_ns / the trace's wall time */
} an_site;

/* The checks of Nsight Systems' expert rules, computed from the same data. */
typedef enum an_rule {
    AN_RULE_SYNC_API = 1,      /* synchronizing API calls */
    AN_RULE_SYNC_MEMCPY = 2,   /* synchronous memcpy */
    AN_RULE_PAGEABLE_MEMCPY = 3, /* async memcpy through pageable memory */
    AN_RULE_SYNC_MEMSET = 4,   /* synchronous memset */
    AN_RULE_GPU_GAPS = 5,      /* GPU gaps above a threshold */
    AN_RULE_LOW_UTIL = 6,      /* low-utilization windows */
    AN_RULE_N_
} an_rule;
const char *an_rule_name(int rule);

typedef struct an_finding {
    int rule;            /* an_rule */
    int kind;            /* an_block_kind of the calls, 0 for the GPU rules */
    uint64_t callsite;   /* where, when the rule is about calls */
    uint32_t name;       /* API or kernel name, when relevant */
    uint32_t producer;
    uint16_t device;
    uint64_t count, total_ns, max_ns;
    uint64_t start, end; /* of the worst instance (or the window) */
} an_finding;

typedef struct an_device {
    uint32_t producer;
    uint16_t device;
    uint64_t span_ns;    /* the analysed wall time: an_result t1 - t0, or where the store holds several
                            processes, the part of it the device's process's own events cover */
    uint64_t busy_ns;    /* union of GPU work (kernels, copies, memsets) on all its streams */
    uint64_t idle_ns;    /* span_ns - busy_ns */
    /* idle_ns by cause; [0] holds idle that is in no bubble: before the first and after the last
     * GPU operation, and gaps shorter than an_opts.gap_ns */
    uint64_t idle_by_cause[AN_CAUSE_N_];
    uint64_t blocked_ns; /* host time blocked in calls on this device */
    uint64_t first, last; /* first start and last end of its GPU work (0, 0: none) */
    uint64_t kernels, copies, memsets, syncs; /* GPU records in range */
} an_device;

typedef struct an_opts {
    uint64_t t0, t1;            /* range to analyse; 0, 0: everything */
    uint64_t gap_ns;            /* bubbles shorter than this are ignored; 0: 20 us */
    uint64_t rule_gap_ns;       /* the GPU gaps rule's threshold; 0: 500 ms (nsys gpu_gaps) */
    uint64_t low_util_window_ns; /* low-utilization window; 0: the device's span / util_chunks */
    unsigned util_chunks;       /* 0: 30 (nsys gpu_time_util) */
    double low_util_threshold;  /* 0: 0.5 (nsys gpu_time_util: 50%) */
} an_opts;

/* GPU idle while the host was busy elsewhere (in no CUDA call that waited): per process and the
 * innermost range (NVTX, a profiler's annotation) the thread that then submitted the work was in. */
typedef struct an_host_range {
    uint32_t producer;
    uint32_t name;     /* store string; 0: in no range */
    int numbered;      /* the names of two ranges or more that differ only in a "#<number>" ending
                          (ProfilerStep#12): name is one of them; 0 for a name alone */
    uint64_t idle_ns;
    uint64_t api_ns;     /* of idle_ns, the time that thread spent in CUDA calls that did not wait */
    uint32_t api_name;   /* the call that took the most of it in one go (store string; 0: none) */
    uint64_t api_max_ns; /* and how much */
} an_host_range;

/* One stretch of a device bubble the host spent elsewhere, and the innermost range it ran then. */
typedef struct an_host_piece {
    uint32_t producer;
    uint32_t name; /* store string; 0: in no range */
    uint64_t a, b;
} an_host_piece;

typedef struct an_result {
    uint64_t t0, t1;
    uint64_t blocked_ns;  /* all blocking spans, summed over threads */
    uint64_t api_calls;   /* host CUDA calls in range */
    an_block *blocks;   /* sorted by start */
    size_t n_blocks;
    an_bubble *bubbles; /* sorted by start; mapped apart (cm_big_alloc), freed by an_result_free */
    size_t n_bubbles;
    size_t bubbles_room; /* the bytes mapped for them */
    an_wait_split *splits; /* of the bubbles a wait caused (an_bubble.split) */
    size_t n_splits;
    uint64_t bubble_max_ns; /* the longest bubble's length */
    an_site *sites;     /* sorted by total_ns, largest first */
    size_t n_sites;
    an_finding *findings; /* by rule: calls and gaps worst first; low-util windows per device in
                             time order, each a run of adjacent low chunks merged into one */
    size_t n_findings;
    an_device *devices;
    size_t n_devices;
    an_host_range *host_ranges; /* sorted by idle_ns, largest first */
    size_t n_host_ranges;
    an_host_piece *host_pieces; /* what host_ranges sums, by producer then start */
    size_t n_host_pieces;
    uint64_t host_piece_max_ns; /* the longest piece */
} an_result;

/* A short description of a rule (what Nsight Systems' rule of that name checks) and its nsys name. */
const char *an_rule_title(int rule);
const char *an_rule_nsys(int rule);

/* The kind of wait an API name implies, by name only (0 when it is not a call that can block). */
int an_block_kind_of_name(const char *api);

/* The host's own share of the GPU idle of one process in [a, b) (its an_host_piece time there),
 * and the range most of it went to (0: none, or in no range) with its time. */
void an_host_in(const an_result *r, uint32_t producer, uint64_t a, uint64_t b, uint64_t *ns, uint32_t *range,
                uint64_t *range_ns);

/* Analyses a committed store. opts may be NULL. */
int an_analyze(const st_store *s, const an_opts *opts, an_result *out, err_msg *err);
void an_result_free(an_result *r);

#endif
