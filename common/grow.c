/* Growable arrays (grow.h). */
#include "grow.h"

#include <stdint.h>
#include <malloc.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "synctop/error.h"

int cm_grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elem)
            return ERR_NOMEM;
        c += c / 2 + 16;
    }
    void *q = realloc(*p, c * elem);
    if (q == NULL)
        return ERR_NOMEM;
    *p = q;
    *cap = c;
    return 0;
}

void cm_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
    if (n > 1)
        qsort(base, n, size, cmp);
}

void *cm_big_alloc(size_t bytes) {
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void *cm_big_resize(void *p, size_t old_bytes, size_t new_bytes) {
    if (p == NULL)
        return cm_big_alloc(new_bytes);
    void *q = mremap(p, old_bytes ? old_bytes : 1, new_bytes ? new_bytes : 1, MREMAP_MAYMOVE);
    return q == MAP_FAILED ? NULL : q;
}

int cm_big_grow(void **p, size_t *bytes, size_t need) {
    if (need <= *bytes)
        return 0;
    size_t want = *bytes ? *bytes : (64u << 10);
    while (want < need)
        want = want > SIZE_MAX / 2 ? need : want * 2;
    void *q = cm_big_resize(*p, *bytes, want);
    if (q == NULL)
        return ERR_NOMEM;
    *p = q;
    *bytes = want;
    return 0;
}

void *cm_big_alloc_filled(size_t bytes) {
    void *p = cm_big_alloc(bytes);
    if (p != NULL)
        cm_big_populate(p, bytes);
    return p;
}

/* The whole pages of [from, to): their first byte in *a, the end in *b; 0 when there are none. */
static int whole_pages(const void *from, const void *to, uintptr_t *a, uintptr_t *b) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    *a = ((uintptr_t)from + page - 1) / page * page;
    *b = (uintptr_t)to / page * page;
    return *b > *a;
}

void cm_big_populate(void *p, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
    uintptr_t a, b;
    if (whole_pages(p, (char *)p + bytes, &a, &b))
        (void)madvise((void *)a, b - a, MADV_POPULATE_WRITE);
#else
    (void)p;
    (void)bytes;
#endif
}

size_t cm_big_give_back(const void *from, const void *to) {
    uintptr_t a, b;
    return whole_pages(from, to, &a, &b) && madvise((void *)a, b - a, MADV_DONTNEED) == 0 ? b - a : 0;
}

void cm_big_free(void *p, size_t bytes) {
    if (p != NULL)
        munmap(p, bytes ? bytes : 1);
}

void cm_malloc_for_batches(void) {
    /* A verb that imports a trace allocates and frees many megabytes in turn (records, the store's
     * lanes, batches): taken from the heap and kept there when freed, they are reused, where the
     * kernel's fresh pages for each large block would cost more than the work done in them (the
     * largest scratch arrays are mapped apart: cm_big_alloc). One heap for every thread: what the
     * importer's thread frees (its records) is then room for what the thread that hands out its
     * batches allocates (the store), not kept apart in a heap of that thread's own (7-9 MiB more
     * at the peak of 223 MB of JSON). */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_ARENA_MAX, 1);
}
