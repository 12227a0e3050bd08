/* The store's shapes (shapes.h). */
#include "shapes.h"

#include <stdlib.h>
#include <string.h>

#include "grow.h"

/* SipHash-1-3 of the shape's four words, in line (cm_hash_bytes_k's figure for their 32 bytes). */
static uint64_t shape_hash(const cm_hash_key *key, const st_shape *k) {
    cm_sip h = cm_sip_start(key);
    cm_sip_word(&h, k->value, 1);
    cm_sip_word(&h, k->dur, 1);
    cm_sip_word(&h, (uint64_t)k->name << 32 | k->aux, 1);
    cm_sip_word(&h, (uint64_t)k->kind | (uint64_t)k->flags << 8 | (uint64_t)k->sub << 16 | (uint64_t)k->mem << 24, 1);
    return cm_sip_end(&h, 32ull << 56, 1, 3);
}

static int shape_eq(const st_shape *a, const st_shape *b) {
    return a->value == b->value && a->dur == b->dur && a->name == b->name && a->aux == b->aux && a->kind == b->kind &&
           a->flags == b->flags && a->sub == b->sub && a->mem == b->mem;
}

/* The slot where k's walk ends: its own, or the empty one it would take. */
static size_t walk(const st_shapes *t, const uint32_t *slot, size_t n_slots, const st_shape *k) {
    size_t i = shape_hash(&t->key, k) & (n_slots - 1);
    while (slot[i] != 0 && !shape_eq(&t->v[slot[i] - 1], k))
        i = (i + 1) & (n_slots - 1);
    return i;
}

static int slots_grow(st_shapes *t) {
    size_t n = t->n_slots ? t->n_slots * 2 : 256;
    if (t->n_slots == 0)
        cm_hash_key_get(&t->key);
    uint32_t *slot = calloc(n, sizeof *slot);
    if (slot == NULL)
        return -1;
    for (size_t i = 0; i < t->n; i++)
        slot[walk(t, slot, n, &t->v[i])] = (uint32_t)i + 1;
    free(t->slot);
    t->slot = slot;
    t->n_slots = n;
    return 0;
}

/* Where a shape is remembered: a batch's events repeat a few shapes, found again with a compare
 * and no hash, two ways a slot (the one met last first). A quick mix of every field: it only moves
 * a shape in the memo; what is found is compared whole. */
static size_t memo_slot(const st_shape *k) {
    uint64_t x = (k->value * 0x9e3779b97f4a7c15ull) ^ (k->dur * 0xc2b2ae3d27d4eb4full) ^
                 (((uint64_t)k->name << 32 | k->aux) * 0x165667b19e3779f9ull) ^
                 ((uint64_t)k->kind | (uint64_t)k->flags << 8 | (uint64_t)k->sub << 16 | (uint64_t)k->mem << 24);
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    return (size_t)(x >> (64 - ST_SHAPE_MEMO_BITS)) & ~(size_t)1;
}

uint32_t st_shapes_intern(st_shapes *t, const st_shape *k) {
    uint32_t *m = &t->memo[memo_slot(k)];
    if (m[0] != 0 && shape_eq(&t->v[m[0] - 1], k))
        return m[0] - 1;
    if (m[1] != 0 && shape_eq(&t->v[m[1] - 1], k)) {
        uint32_t id = m[1];
        m[1] = m[0];
        m[0] = id;
        return id - 1;
    }
    m[1] = m[0];
    m[0] = 0;
    size_t i = 0;
    if (t->n_slots != 0) {
        i = walk(t, t->slot, t->n_slots, k);
        if (t->slot[i] != 0) {
            m[0] = t->slot[i];
            return t->slot[i] - 1;
        }
    }
    if (t->n >= ST_SHAPE_INDEX || CM_GROW(t->v, t->cap, t->n + 1))
        return UINT32_MAX;
    if ((t->n + 1) * 2 > t->n_slots) {
        if (slots_grow(t) != 0)
            return UINT32_MAX;
        i = walk(t, t->slot, t->n_slots, k);
    }
    t->v[t->n] = *k;
    t->slot[i] = m[0] = (uint32_t)++t->n;
    return (uint32_t)(t->n - 1);
}

size_t st_shapes_bytes(const st_shapes *t) { return t->cap * sizeof *t->v + t->n_slots * sizeof *t->slot; }

void st_shapes_shrink(st_shapes *t) {
    if (t->n == 0 || t->n >= t->cap)
        return;
    st_shape *v = realloc(t->v, t->n * sizeof *v);
    if (v != NULL) {
        t->v = v;
        t->cap = t->n;
    }
}

void st_shapes_free(st_shapes *t) {
    free(t->v);
    free(t->slot);
    memset(t, 0, sizeof *t);
}
