/* The 64-bit hash map (u64map.h). */
#include "u64map.h"

#include <stdlib.h>
#include <string.h>

#include "synctop/error.h"

/* The slot where key's walk ends in a table of cap slots: key's own, or the empty slot it would
 * take. The walk is counted when it was long (hash.h). */
static size_t walk(const cm_hash_key *hk, const uint64_t *keys, size_t cap, uint64_t key) {
    size_t from = cm_hash_u64(hk, key) & (cap - 1), i = from;
    while (keys[i] != key && keys[i] != 0)
        i = (i + 1) & (cap - 1);
    if (((i - from) & (cap - 1)) > CM_HASH_LONG_PROBE)
        cm_hash_long_probe_note();
    return i;
}

uint64_t *cm_u64map_find(const cm_u64map *m, uint64_t key) {
    if (key == 0)
        return m->has_zero ? (uint64_t *)&m->zero_val : NULL;
    if (m->cap == 0)
        return NULL;
    size_t i = walk(&m->key, m->keys, m->cap, key);
    return m->keys[i] == key ? &m->vals[i] : NULL;
}

static int u64map_grow(cm_u64map *m) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    if (m->cap == 0)
        cm_hash_key_get(&m->key);
    uint64_t *k = calloc(cap, sizeof *k), *v = malloc(cap * sizeof *v);
    if (k == NULL || v == NULL) {
        free(k);
        free(v);
        return ERR_NOMEM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (m->keys[i] == 0)
            continue;
        size_t j = walk(&m->key, k, cap, m->keys[i]);
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

/* The value slot of a key not 0, added with value init when absent (*added says whether). */
static uint64_t *slot_of(cm_u64map *m, uint64_t key, uint64_t init, int *added) {
    size_t i = m->cap ? walk(&m->key, m->keys, m->cap, key) : 0;
    *added = m->cap == 0 || m->keys[i] == 0;
    if (!*added)
        return &m->vals[i];
    if ((m->n + 1) * 2 > m->cap) { /* a new key, and no room for it: the walk is made again */
        if (u64map_grow(m) != 0)
            return NULL;
        i = walk(&m->key, m->keys, m->cap, key);
    }
    m->keys[i] = key;
    m->vals[i] = init;
    m->n++;
    return &m->vals[i];
}

int cm_u64map_put(cm_u64map *m, uint64_t key, uint64_t val) {
    if (key == 0) {
        m->has_zero = 1;
        m->zero_val = val;
        return 0;
    }
    int added;
    uint64_t *v = slot_of(m, key, val, &added);
    if (v == NULL)
        return ERR_NOMEM;
    *v = val;
    return 0;
}

uint64_t *cm_u64map_get_or_add(cm_u64map *m, uint64_t key, uint64_t init, int *added) {
    int a;
    uint64_t *v;
    if (key == 0) {
        a = !m->has_zero;
        if (a)
            m->zero_val = init;
        m->has_zero = 1;
        v = &m->zero_val;
    } else if ((v = slot_of(m, key, init, &a)) == NULL) {
        return NULL;
    }
    if (added != NULL)
        *added = a;
    return v;
}

void cm_u64map_free(cm_u64map *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

size_t cm_u64map_bytes(const cm_u64map *m) { return m->cap * 16; }

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
