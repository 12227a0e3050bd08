/*
 * A hash map from 64-bit keys to 64-bit values (open addressing, linear probing, at most half
 * full), shared by the store (producers, lanes, call sites by key), the analysis and the importers
 * (correlations, streams, threads, string ids). Keys come from untrusted traces: every key value is
 * allowed (none is a reserved "empty" marker), and slots are chosen by SipHash under the process's
 * key (hash.h), so that keys chosen to collide cannot make long probe sequences.
 */
#ifndef SYNCTOP_U64MAP_H
#define SYNCTOP_U64MAP_H

#include <stddef.h>
#include <stdint.h>

#include "hash.h"

typedef struct cm_u64map {
    uint64_t *keys, *vals;
    size_t cap, n;       /* cap is a power of two or 0 */
    int has_zero;        /* key 0 marks empty slots, so it lives here */
    uint64_t zero_val;
    cm_hash_key key;     /* the process's, taken when the table is first made */
} cm_u64map;

/* The value slot of key, or NULL when absent. Valid until the next put. */
uint64_t *cm_u64map_find(const cm_u64map *m, uint64_t key);
/* Sets key to val. Returns 0 or ERR_NOMEM (the map is unchanged then). */
int cm_u64map_put(cm_u64map *m, uint64_t key, uint64_t val);
/* The value slot of key, added with value init when absent (*added, may be NULL, says whether it
 * was); NULL when out of memory. Valid until the next put. */
uint64_t *cm_u64map_get_or_add(cm_u64map *m, uint64_t key, uint64_t init, int *added);
/* How many keys it holds, and all of them (cm_u64map_count, in no order) written to out. */
size_t cm_u64map_count(const cm_u64map *m);
size_t cm_u64map_keys(const cm_u64map *m, uint64_t *out);
void cm_u64map_free(cm_u64map *m);
/* Bytes held, for memory accounting. */
size_t cm_u64map_bytes(const cm_u64map *m);

#endif
