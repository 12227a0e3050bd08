/*
 * LSD radix sort of elements that start with a 64-bit key, shared by the importers (the records'
 * time order, contexts, correlations). A header: inlined for each element size.
 */
#ifndef SYNCTOP_RADIX_H
#define SYNCTOP_RADIX_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Sorts the n elements of size bytes at a by the 64-bit key each starts with, keeping the order of
 * equal keys (LSD radix, eleven bits at a time, the digits that all keys share skipped); tmp holds
 * n more. Returns the sorted array (a or tmp), or NULL when out of memory. Inlined for each size. */
#define CM_RADIX_BITS 11
#define CM_RADIX_PASSES ((64 + CM_RADIX_BITS - 1) / CM_RADIX_BITS)
static inline __attribute__((always_inline)) void *cm_radix_sort_by(void *a, void *tmp, size_t n, size_t size) {
    if (n < 2)
        return a;
    size_t(*count)[1 << CM_RADIX_BITS] = calloc(CM_RADIX_PASSES, sizeof *count);
    if (count == NULL)
        return NULL;
    const uint64_t mask = (1u << CM_RADIX_BITS) - 1;
    uint64_t x;
    for (size_t i = 0; i < n; i++) {
        memcpy(&x, (char *)a + i * size, sizeof x);
        for (int b = 0; b < CM_RADIX_PASSES; b++)
            count[b][(x >> (CM_RADIX_BITS * b)) & mask]++;
    }
    memcpy(&x, a, sizeof x);
    for (int b = 0; b < CM_RADIX_PASSES; b++) {
        if (count[b][(x >> (CM_RADIX_BITS * b)) & mask] == n)
            continue;
        size_t at = 0;
        for (size_t v = 0; v <= mask; v++) {
            size_t c = count[b][v];
            count[b][v] = at;
            at += c;
        }
        for (size_t i = 0; i < n; i++) {
            uint64_t y;
            memcpy(&y, (char *)a + i * size, sizeof y);
            memcpy((char *)tmp + count[b][(y >> (CM_RADIX_BITS * b)) & mask]++ * size, (char *)a + i * size, size);
        }
        void *t = a;
        a = tmp;
        tmp = t;
    }
    free(count);
    return a;
}

/* The same for keys alone. */
static inline uint64_t *cm_radix_sort_u64(uint64_t *a, uint64_t *tmp, size_t n) {
    return cm_radix_sort_by(a, tmp, n, sizeof *a);
}

#endif
