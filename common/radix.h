/*
 * Radix sorts of elements that start with a 64-bit key, shared by the importers (the records' time
 * order, contexts, correlations) and the analysis, and the search of what they sorted. A header:
 * inlined for each element size.
 */
#ifndef SYNCTOP_RADIX_H
#define SYNCTOP_RADIX_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Sorts the n elements of size bytes at a by the bits from low up of the 64-bit key each starts
 * with, keeping the order of elements equal in those bits (LSD radix, eleven bits at a time, the
 * digits that all keys share skipped); tmp holds n more. Returns the sorted array (a or tmp), or
 * NULL when out of memory. Keys whose low bits number the elements in the order given are in
 * whole-key order with fewer passes. Inlined for each size. */
#define CM_RADIX_BITS 11
#define CM_RADIX_PASSES ((64 + CM_RADIX_BITS - 1) / CM_RADIX_BITS)
static inline __attribute__((always_inline)) void *cm_radix_sort_above_by(void *a, void *tmp, size_t n, size_t size,
                                                                          unsigned low) {
    if (n < 2 || low >= 64)
        return a;
    const int passes = (int)((64 - low + CM_RADIX_BITS - 1) / CM_RADIX_BITS);
    size_t(*count)[1 << CM_RADIX_BITS] = calloc((size_t)passes, sizeof *count);
    if (count == NULL)
        return NULL;
    const uint64_t mask = (1u << CM_RADIX_BITS) - 1;
    uint64_t x;
    for (size_t i = 0; i < n; i++) {
        memcpy(&x, (char *)a + i * size, sizeof x);
        x >>= low;
        for (int b = 0; b < passes; b++)
            count[b][(x >> (CM_RADIX_BITS * b)) & mask]++;
    }
    memcpy(&x, a, sizeof x);
    x >>= low;
    for (int b = 0; b < passes; b++) {
        if (count[b][(x >> (CM_RADIX_BITS * b)) & mask] == n)
            continue;
        size_t at = 0;
        for (size_t v = 0; v <= mask; v++) {
            size_t c = count[b][v];
            count[b][v] = at;
            at += c;
        }
        const unsigned shift = low + CM_RADIX_BITS * (unsigned)b;
        for (size_t i = 0; i < n; i++) {
            uint64_t y;
            memcpy(&y, (char *)a + i * size, sizeof y);
            memcpy((char *)tmp + count[b][(y >> shift) & mask]++ * size, (char *)a + i * size, size);
        }
        void *t = a;
        a = tmp;
        tmp = t;
    }
    free(count);
    return a;
}

/* One level of an in-place MSD radix sort of the n elements of size bytes (at most 64) at base, by
 * the byte at *shift of the 64-bit key each starts with; where all keys share that byte, by the
 * first byte below it where they differ (*shift set to it). Each element goes straight to its
 * bucket by swaps: those whose byte is b end from bounds[b] to bounds[b + 1]. 0 when all keys are
 * equal (nothing moved, bounds not set). */
static inline __attribute__((always_inline)) int cm_radix_level_by(char *base, size_t n, size_t size, int *shift,
                                                                   size_t bounds[257]) {
    size_t count[256], head[256];
    uint64_t k0;
    memcpy(&k0, base, sizeof k0);
    for (;;) {
        uint64_t diff = 0; /* the bits where some key differs from the first */
        memset(count, 0, sizeof count);
        for (size_t i = 0; i < n; i++) {
            uint64_t k;
            memcpy(&k, base + i * size, sizeof k);
            count[(k >> *shift) & 0xff]++;
            diff |= k ^ k0;
        }
        if (count[(k0 >> *shift) & 0xff] != n)
            break;
        if (diff == 0) /* the keys share every byte above this one too */
            return 0;
        *shift = (63 - __builtin_clzll(diff)) / 8 * 8;
    }
    for (size_t b = 0, at = 0; b < 256; b++) {
        bounds[b] = head[b] = at;
        at += count[b];
    }
    bounds[256] = n;
    char tmp[64];
    for (size_t b = 0; b < 256; b++) {
        while (head[b] < bounds[b + 1]) {
            uint64_t k;
            memcpy(&k, base + head[b] * size, sizeof k);
            size_t d = (k >> *shift) & 0xff;
            if (d == b) {
                head[b]++;
                continue;
            }
            memcpy(tmp, base + head[d] * size, size);
            memcpy(base + head[d] * size, base + head[b] * size, size);
            memcpy(base + head[b] * size, tmp, size);
            head[d]++;
        }
    }
    return 1;
}

/* Sorts the n elements of size bytes at a by the 64-bit key each starts with, in place (MSD radix,
 * a byte at a time, the bytes that all keys of a bucket share skipped, insertion sort below 32
 * elements): no room needed, but equal keys are left in no particular order. For sorts whose equal
 * keys are all treated alike; size at most 64. */
static inline __attribute__((always_inline)) void cm_radix_sort_inplace_by(void *a, size_t n, size_t size) {
    struct level {
        char *base;
        size_t n;
        int shift;
    } stack[8 * 255 + 1];
    int sp = 0;
    stack[sp++] = (struct level){(char *)a, n, 56};
    char tmp[64];
    while (sp > 0) {
        struct level L = stack[--sp];
        if (L.n < 32) { /* insertion sort on the whole key */
            for (size_t i = 1; i < L.n; i++) {
                uint64_t ki;
                memcpy(&ki, L.base + i * size, sizeof ki);
                memcpy(tmp, L.base + i * size, size);
                size_t j = i;
                for (; j > 0; j--) {
                    uint64_t kj;
                    memcpy(&kj, L.base + (j - 1) * size, sizeof kj);
                    if (kj <= ki)
                        break;
                    memcpy(L.base + j * size, L.base + (j - 1) * size, size);
                }
                memcpy(L.base + j * size, tmp, size);
            }
            continue;
        }
        size_t bounds[257];
        int shift = L.shift;
        if (!cm_radix_level_by(L.base, L.n, size, &shift, bounds) || shift == 0)
            continue;
        for (size_t b = 0; b < 256; b++)
            if (bounds[b + 1] - bounds[b] > 1)
                stack[sp++] = (struct level){L.base + bounds[b] * size, bounds[b + 1] - bounds[b], shift - 8};
    }
}

/* One level of cm_radix_sort_inplace_by over the n elements of size bytes (at most 64) at a: in
 * place, by the first byte from the top where their 64-bit keys differ, so that the elements whose
 * byte is b are those from bounds[b] to bounds[b + 1]; each such bucket then sorts apart from the
 * others (on threads of their own, say), and keys equal in whole share one. 0 when all keys are
 * equal (nothing to sort, bounds not set). */
static inline int cm_radix_partition_by(void *a, size_t n, size_t size, size_t bounds[257]) {
    int shift = 56;
    return n > 0 && cm_radix_level_by(a, n, size, &shift, bounds);
}

/* Puts each run of the n elements at a (size bytes each) that start with the same 64-bit
 * key, as a sort by that key leaves them, in the order cmp(x, y, arg) gives: the rest of a sort
 * whose key ties. Runs of a few (most are two or three) in line, longer ones by qsort_r. */
static inline void cm_sort_runs(void *a, size_t n, size_t size, int (*cmp)(const void *, const void *, void *),
                                void *arg) {
    char *b = a, x[64];
    for (size_t i = 0, j; i < n; i = j) {
        uint64_t ki, kj;
        memcpy(&ki, b + i * size, sizeof ki);
        for (j = i + 1; j < n; j++) {
            memcpy(&kj, b + j * size, sizeof kj);
            if (kj != ki)
                break;
        }
        if (j - i > 16 || size > sizeof x) {
            qsort_r(b + i * size, j - i, size, cmp, arg);
            continue;
        }
        for (size_t k = i + 1; k < j; k++) { /* insertion */
            size_t m = k;
            while (m > i && cmp(b + (m - 1) * size, b + k * size, arg) > 0)
                m--;
            if (m == k)
                continue;
            memcpy(x, b + k * size, size);
            memmove(b + (m + 1) * size, b + m * size, (k - m) * size);
            memcpy(b + m * size, x, size);
        }
    }
}

/* Keys alone, by their bits from low up (cm_radix_sort_above_by). */
static inline uint64_t *cm_radix_sort_u64_above(uint64_t *a, uint64_t *tmp, size_t n, unsigned low) {
    return cm_radix_sort_above_by(a, tmp, n, sizeof *a, low);
}

/* The first of n elements (stride bytes apart from base, each with a 64-bit key off bytes in,
 * sorted by it) whose key is not below key. When every key before from is below it (a thread's or
 * a stream's ids grow with time, a row's bubbles come in time order: the last search's answer is
 * where this one starts), a gallop forward from from: a key that is not there costs one look; else
 * a search of the whole. */
static inline size_t cm_seek_sorted(const void *base, size_t n, size_t stride, size_t off, size_t from, uint64_t key) {
#define CM_SEEK_KEY(i) (*(const uint64_t *)((const char *)base + (i) * stride + off))
    size_t lo = 0, hi = n;
    if (from <= n && (from == 0 || CM_SEEK_KEY(from - 1) < key)) {
        size_t step = 1;
        lo = from;
        while (lo + step <= n && CM_SEEK_KEY(lo + step - 1) < key) { /* keys up to lo + step - 1 are below key */
            lo += step;
            step *= 2;
        }
        hi = lo + step - 1 < n ? lo + step - 1 : n; /* the key at hi is not below key, where hi < n */
    }
    while (lo < hi) {
        size_t m = lo + (hi - lo) / 2;
        if (CM_SEEK_KEY(m) < key)
            lo = m + 1;
        else
            hi = m;
    }
    return lo;
#undef CM_SEEK_KEY
}

#endif
