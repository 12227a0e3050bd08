/*
 * A job of several ranks: per rank its GPU busy, host-blocked and idle time, and its collectives
 * (NCCL kernels: ncclKernel_*, ncclDevKernel_*) matched across ranks, so that the rank that arrived
 * last at each, and what it was doing meanwhile, can be named.
 *
 * Matching: the k-th NCCL kernel of each process on a stream with the same id and the same kernel
 * name is one collective (NCCL runs a communicator's collectives in order on its stream; processes
 * of one job create their communicators, and so their streams, in the same order). A collective
 * seen on one process only is not one. Arrival is the kernel's start; the last to arrive is the
 * straggler, and every other rank waited from its own arrival to the straggler's. What held the
 * straggler back is what its host was blocked in, or else the GPU work that ran on its device,
 * between the first arrival and its own. Times are each process's trace clock: traces of one job
 * recorded on one cluster share it to within NTP; nothing here corrects for skew, but each
 * process's clock is measured against the job's: a collective ends at about the same moment on
 * every rank, so a rank's offset is the median, over its collectives, of its kernel's end minus
 * the median end of that collective, and the median distance of those from it says how far the
 * estimate can be trusted. Where a rank's offset is larger than its spread (over three collectives
 * or more), its arrivals are taken on the job's clock (its start minus its offset).
 */
#ifndef SYNCTOP_RANKS_H
#define SYNCTOP_RANKS_H

#include <stddef.h>
#include <stdint.h>

#include "analysis.h"
#include "store.h"
#include "synctop/error.h"

typedef struct an_rank {
    uint32_t producer;
    int32_t rank;              /* the trace's rank; -1 when it has none */
    uint64_t span_ns, busy_ns, idle_ns, blocked_ns; /* over its GPUs (summed) and threads */
    uint64_t collectives;      /* NCCL kernels matched on it */
    uint64_t last_count;       /* collectives it arrived last at */
    uint64_t made_wait_ns;     /* the others' waiting at those, summed */
    uint64_t waited_ns;        /* its own waiting at collectives others arrived last at */
    int64_t clock_offset_ns;   /* its clock against the job's, from the collectives' ends */
    uint64_t clock_spread_ns;  /* the median distance of the ends from that offset */
    uint64_t clock_n;          /* collectives it was measured over (0: not measured) */
} an_rank;

typedef struct an_collective {
    uint32_t name;             /* the kernel name (store string) */
    uint32_t stream;
    size_t ordinal;            /* its order among the kernels of that name on that stream */
    size_t n_ranks;            /* processes it was seen on */
    uint64_t first, last;      /* earliest and latest arrival */
    uint32_t straggler;        /* the producer that arrived last */
    uint64_t wait_ns;          /* the others' waiting, summed */
    size_t block;              /* index in an_result.blocks of what blocked the straggler longest
                                  in [first, last); SIZE_MAX: none */
    uint64_t block_ns;         /* its overlap with [first, last) */
    uint64_t gpu_ns;           /* the straggler's GPU work in [first, last) (the union) */
    uint64_t host_ns;          /* the GPU idle its host caused in [first, last) outside waiting calls */
    uint32_t host_range;       /* the range most of that went to (an_host_in); 0: none */
    uint64_t host_range_ns;
} an_collective;

typedef struct an_ranks {
    an_rank *ranks;            /* by producer */
    size_t n_ranks;
    an_collective *colls;      /* by first arrival */
    size_t n_colls;
} an_ranks;

int an_ranks_find(const st_store *s, const an_result *r, an_ranks *out, err_msg *err);
/* Whether a rank's clock offset was measured: over three collectives or more, larger than its spread. */
int an_rank_clock_measured(const an_rank *rk);
void an_ranks_free(an_ranks *rk);

#endif
