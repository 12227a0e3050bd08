/* Growable arrays (grow.h). */
#include "grow.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

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

void cm_big_free(void *p, size_t bytes) {
    if (p != NULL)
        munmap(p, bytes ? bytes : 1);
}
