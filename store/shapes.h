/*
 * The store's shapes (store.h's st_shape): what events share, each kept once. A shape is found
 * again by a hash of its fields under the process's key, since traces and peers choose them.
 */
#ifndef SYNCTOP_SHAPES_H
#define SYNCTOP_SHAPES_H

#include <stddef.h>
#include <stdint.h>

#include "hash.h"
#include "store.h"

#define ST_SHAPE_MEMO_BITS 10
typedef struct st_shapes {
    st_shape *v; /* by id */
    size_t n, cap;
    uint32_t *slot; /* open addressing, linear probing, at most half full: id + 1, 0 empty */
    size_t n_slots; /* a power of two, or 0 */
    cm_hash_key key;
    uint32_t memo[1u << ST_SHAPE_MEMO_BITS]; /* ids + 1 of shapes found lately, by a mix of their fields (memo_slot) */
} st_shapes;

/* The id of a shape, added when new; UINT32_MAX when out of memory or past ST_SHAPE_INDEX shapes. */
uint32_t st_shapes_intern(st_shapes *t, const st_shape *k);
size_t st_shapes_bytes(const st_shapes *t);
/* Gives back the spare capacity of the table of shapes. */
void st_shapes_shrink(st_shapes *t);
void st_shapes_free(st_shapes *t);

#endif
