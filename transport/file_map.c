/* The trace-file layer's hash map (file_format.h): linear probing, grown at half full, keyed
 * hashing (hash.h). */
#include <stdlib.h>

#include "file_format.h"

static tp__fmap_slot *fmap_find(const tp__fmap *m, uint64_t k1, uint64_t k2) {
    size_t from = (size_t)cm_hash_u64x2(&m->key, k1, k2) & (m->cap - 1), i = from;
    while (m->slots[i].used && !(m->slots[i].k1 == k1 && m->slots[i].k2 == k2))
        i = (i + 1) & (m->cap - 1);
    if (((i - from) & (m->cap - 1)) > CM_HASH_LONG_PROBE)
        cm_hash_long_probe_note();
    return &m->slots[i];
}

static int fmap_grow(tp__fmap *m) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    if (m->cap == 0)
        cm_hash_key_get(&m->key);
    tp__fmap_slot *old = m->slots;
    size_t old_cap = m->cap;
    m->slots = calloc(cap, sizeof *m->slots);
    if (m->slots == NULL) {
        m->slots = old;
        return ERR_NOMEM;
    }
    m->cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].used)
            *fmap_find(m, old[i].k1, old[i].k2) = old[i];
    free(old);
    return 0;
}

uint32_t *tp__fmap_put(tp__fmap *m, uint64_t k1, uint64_t k2, int *found) {
    if ((m->n + 1) * 2 > m->cap && fmap_grow(m) != 0)
        return NULL;
    tp__fmap_slot *s = fmap_find(m, k1, k2);
    *found = s->used != 0;
    if (!s->used) {
        s->used = 1;
        s->k1 = k1;
        s->k2 = k2;
        s->val = 0;
        m->n++;
    }
    return &s->val;
}

const uint32_t *tp__fmap_get(const tp__fmap *m, uint64_t k1, uint64_t k2) {
    if (m->cap == 0)
        return NULL;
    const tp__fmap_slot *s = fmap_find(m, k1, k2);
    return s->used ? &s->val : NULL;
}

void tp__fmap_free(tp__fmap *m) {
    free(m->slots);
    m->slots = NULL;
    m->cap = m->n = 0;
}
