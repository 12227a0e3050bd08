/*
 * A map from (process, correlation id) to a value, for the importers' joins of host calls and GPU
 * work. CUPTI numbers a process's calls in turn, so each process's ids fall in a range: they are
 * kept in a table over that range (4 bytes an id, walked in the order the ids come, with no
 * hashing), grown while the ids fill at least a sixteenth of it. Ids that would leave a process's
 * table emptier than that (a foreign trace's, chosen to be sparse), and values of 2^32 - 1 or more,
 * go to a hash map (u64map.h), and that process's table keeps the range it had. Memory is bounded
 * by the ids held: at most 64 bytes an id and 4 KiB a process in the tables, and the hash map's.
 */
#ifndef SYNCTOP_CORRMAP_H
#define SYNCTOP_CORRMAP_H

#include <stddef.h>
#include <stdint.h>

#include "u64map.h"

typedef struct cm_corr_proc {
    uint32_t pid;
    uint32_t lo;    /* the first id of the table */
    size_t cap;     /* ids [lo, lo + cap) are in the table */
    size_t n;       /* ids held in it */
    int spilled;    /* some of its ids are in the hash map: the range stays as it is */
    uint32_t *vals; /* value + 1 of each id; 0: absent (then it may be in the hash map) */
} cm_corr_proc;

typedef struct cm_corrmap {
    cm_corr_proc *procs;
    size_t n_procs, cap_procs;
    size_t last;       /* the process of the last look-up */
    cm_u64map by_pid;  /* pid + 1 -> index in procs (read once there are more than a few) */
    cm_u64map sparse;  /* pid << 32 | id -> value, the ids no table takes */
} cm_corrmap;

/* The value of (pid, corr) in *val: 1 when there is one, else 0. */
int cm_corrmap_find(cm_corrmap *m, uint32_t pid, uint32_t corr, uint64_t *val);
/* Sets (pid, corr) to val. 0, or ERR_NOMEM (the map unchanged). */
int cm_corrmap_put(cm_corrmap *m, uint32_t pid, uint32_t corr, uint64_t val);
void cm_corrmap_free(cm_corrmap *m);

#endif
