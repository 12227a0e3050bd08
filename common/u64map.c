/* The 64-bit hash map (u64map.h). */
#include "u64map.h"

#include <stdlib.h>
#include <string.h>

#include "synctop/error.h"

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

uint64_t *cm_u64map_find(const cm_u64map *m, uint64_t key) {
    if (key == 0)
        return m->has_zero ? (uint64_t *)&m->zero_val : NULL;
    if (m->cap == 0)
        return NULL;
    for (size_t i = mix64(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key)
            return &m->vals[i];
        if (m->keys[i] == 0)
            return NULL;
    }
}

static int u64map_grow(cm_u64map *m) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    uint64_t *k = calloc(cap, sizeof *k), *v = malloc(cap * sizeof *v);
    if (k == NULL || v == NULL) {
        free(k);
        free(v);
        return ERR_NOMEM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (m->keys[i] == 0)
            continue;
        size_t j = mix64(m->keys[i]) & (cap - 1);
        while (k[j] != 0)
            j = (j + 1) & (cap - 1);
        k[j] = m->keys[i];
        v[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = k;
    m->vals = v;
    m->cap = cap;
    return 0;
}

int cm_u64map_put(cm_u64map *m, uint64_t key, uint64_t val) {
    if (key == 0) {
        m->has_zero = 1;
        m->zero_val = val;
        return 0;
    }
    if ((m->n + 1) * 2 > m->cap && u64map_grow(m) != 0)
        return ERR_NOMEM;
    size_t i = mix64(key) & (m->cap - 1);
    while (m->keys[i] != 0 && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    if (m->keys[i] == 0)
        m->n++;
    m->keys[i] = key;
    m->vals[i] = val;
    return 0;
}

void cm_u64map_free(cm_u64map *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

size_t cm_u64map_bytes(const cm_u64map *m) { return m->cap * 16; }

uint64_t *cm_u64map_get_or_add(cm_u64map *m, uint64_t key, uint64_t init, int *added) {
    uint64_t *v = cm_u64map_find(m, key);
    if (added != NULL)
        *added = v == NULL;
    if (v != NULL)
        return v;
    if (cm_u64map_put(m, key, init) != 0)
        return NULL;
    return cm_u64map_find(m, key);
}

size_t cm_u64map_count(const cm_u64map *m) { return m->n + (m->has_zero ? 1 : 0); }

size_t cm_u64map_keys(const cm_u64map *m, uint64_t *out) {
    size_t n = 0;
    if (m->has_zero)
        out[n++] = 0;
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i] != 0)
            out[n++] = m->keys[i];
    return n;
}
