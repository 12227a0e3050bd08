/*
 * Growable arrays, large scratch arrays that go back to the system when freed, the malloc settings
 * of a process that imports traces, and a qsort that may be given an empty (NULL) array: shared by
 * the store, the importers, the analysis and the HTA breakdown.
 */
#ifndef SYNCTOP_GROW_H
#define SYNCTOP_GROW_H

#include <stddef.h>

/* Makes room for need elements of elem bytes in *p (capacity *cap). Grows by half plus 16, which
 * keeps the slack of large arrays (the store's lanes) bounded. Returns 0 or ERR_NOMEM, leaving *p
 * as it was on failure. */
int cm_grow(void **p, size_t *cap, size_t need, size_t elem);
/* The same for an array and its capacity, the room checked in line (the call only to grow: the
 * store adds an event with it); cap and need are read twice. */
#define CM_GROW(arr, cap, need)                                                                                    \
    ((size_t)(need) <= (cap) ? 0 : cm_grow((void **)&(arr), &(cap), (need), sizeof *(arr)))

/* Large scratch arrays (sort buffers of millions of records) in pages of their own, which go back
 * to the system when freed, whatever the allocator keeps for reuse (the command line keeps freed
 * heap memory: cm_malloc_for_batches). NULL when out of memory; cm_big_free(NULL, ...) does nothing. */
void *cm_big_alloc(size_t bytes);
/* The same for an array about to be written whole: its pages made at once (cm_big_populate). */
void *cm_big_alloc_filled(size_t bytes);
void cm_big_free(void *p, size_t bytes);
/* The same array (p: from cm_big_alloc or this, or NULL) grown or shrunk from old_bytes to
 * new_bytes by moving its pages, never copying them; NULL when out of memory (p is left as it was). */
void *cm_big_resize(void *p, size_t old_bytes, size_t new_bytes);
/* Room for need bytes in the mapping at *p (NULL, or from these functions; *bytes: its size),
 * doubling from 64 KiB. 0, or ERR_NOMEM with *p and *bytes as they were. */
int cm_big_grow(void **p, size_t *bytes, size_t need);
/* Has the kernel make the pages of [p, p + bytes) of such an array, not yet written, in one call
 * (each page whole within it): cheaper than a fault for each as they are first written, for an
 * array filled in order. Does nothing where the kernel cannot (before Linux 5.14). */
void cm_big_populate(void *p, size_t bytes);
/* Gives back the whole pages of [from, to) in such an array (they read as zeros after): the bytes
 * given back, 0 when none (or the kernel refused). */
size_t cm_big_give_back(const void *from, const void *to);
/* For such an array of cap elements of elem bytes filled in order, n of them so far: at each
 * chunk-th element, the pages of the next chunk made at once. */
static inline void cm_big_populate_ahead(void *a, size_t n, size_t cap, size_t elem, size_t chunk) {
    if (n % chunk == 0 && n < cap)
        cm_big_populate((char *)a + n * elem, (cap - n < chunk ? cap - n : chunk) * elem);
}

/* Sets malloc up for a process that imports traces (the command line's batch verbs, and the
 * benchmarks that measure them): see grow.c. */
void cm_malloc_for_batches(void);

/* qsort, except that n may be 0 with a NULL base. */
void cm_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));

#endif
