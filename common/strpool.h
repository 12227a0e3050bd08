/*
 * A string pool that interns: each distinct string gets a dense id, the same one every time it is
 * given again, in the order strings were first seen. Id 0 is the empty string. Strings are kept
 * NUL-terminated one after another in one buffer, so an id reads back as a C string at no cost.
 * A pool may be bounded (bytes of string, number of ids): past a bound it refuses new strings and
 * still finds the ones it holds. The batch encoder, the store and the Nsight importer intern
 * through it.
 */
#ifndef SYNCTOP_STRPOOL_H
#define SYNCTOP_STRPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "hash.h"

typedef struct cm_strpool {
    char *data;        /* string i at data + off[i], len[i] bytes and a NUL */
    size_t used, cap;  /* bytes of data in use (NULs included) and allocated */
    size_t text;       /* bytes of string held, NULs left out */
    uint64_t *off;
    uint32_t *len;
    size_t n, off_cap, len_cap; /* ids in use (id 0 included once anything is held) */
    uint32_t *slot;    /* open addressing: an id, 0 for empty */
    uint32_t *slot_hash;
    size_t n_slots;    /* a power of two, or 0 */
    size_t max_text;   /* bound on text, 0: none */
    uint32_t max_ids;  /* bound on ids, 0: none but 2^32 - 2 */
    cm_hash_key key;   /* the process's, taken when the table is first made */
} cm_strpool;

/* A pool bounded at max_text bytes of string and max_ids ids (0: unbounded). A zeroed
 * cm_strpool is an unbounded empty pool. */
void cm_strpool_init(cm_strpool *p, size_t max_text, uint32_t max_ids);

/* Makes room in the table for ids ids before any is added, so that the first strings interned do
 * not grow it. 0 or ERR_NOMEM. */
int cm_strpool_reserve(cm_strpool *p, size_t ids);

/* The id of the len bytes at s (which may lie in the pool itself), added if new; 0 for an empty
 * string. Returns 0 and sets *id, ERR_LIMIT when a bound refuses a new string, ERR_NOMEM. */
int cm_strpool_intern(cm_strpool *p, const char *s, size_t len, uint32_t *id);

/* A new id for the len bytes at s (which may lie in the pool itself), the empty string included,
 * without looking for them among the strings held: for a caller whose strings each need an id of
 * their own (rows of a table). Such a string is not found by cm_strpool_intern. Returns 0 and
 * sets *id, ERR_LIMIT or ERR_NOMEM. */
int cm_strpool_add(cm_strpool *p, const char *s, size_t len, uint32_t *id);

/* String id as a C string ("" for 0 or an id the pool does not hold), and its length. */
static inline const char *cm_strpool_str(const cm_strpool *p, uint32_t id) {
    return id != 0 && id < p->n ? p->data + p->off[id] : "";
}
static inline uint32_t cm_strpool_len(const cm_strpool *p, uint32_t id) {
    return id != 0 && id < p->n ? p->len[id] : 0;
}

/* The next id the pool will give (1 when empty): ids in [1, cm_strpool_end) are held. */
static inline uint32_t cm_strpool_end(const cm_strpool *p) { return p->n ? (uint32_t)p->n : 1; }

/* Bytes of string (NULs left out) of ids [from, cm_strpool_end). */
size_t cm_strpool_text_from(const cm_strpool *p, uint32_t from);

/* Bytes the pool has allocated. */
size_t cm_strpool_bytes(const cm_strpool *p);

void cm_strpool_free(cm_strpool *p);

#endif
