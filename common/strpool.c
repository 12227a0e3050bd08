/*
 * The interning string pool (strpool.h): strings one after another in one buffer, and an
 * open-addressing table of ids, kept at most half full, whose slots SipHash chooses under the
 * process's key (hash.h): the strings come from traces and peers, which must not be able to choose
 * strings that share a slot.
 */
#include "strpool.h"

#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "hash.h"
#include "synctop/error.h"

void cm_strpool_init(cm_strpool *p, size_t max_text, uint32_t max_ids) {
    memset(p, 0, sizeof *p);
    p->max_text = max_text;
    p->max_ids = max_ids;
}

static uint32_t hash_of(const cm_strpool *p, const char *s, size_t len) {
    return (uint32_t)cm_hash_bytes_k(&p->key, s, len);
}

/* Counts a walk from slot from to slot at when it was long (hash.h). */
static void walked(size_t from, size_t at, size_t n_slots) {
    if (((at - from) & (n_slots - 1)) > CM_HASH_LONG_PROBE)
        cm_hash_long_probe_note();
}

static int rehash(cm_strpool *p, size_t n_slots) {
    uint32_t *slot = calloc(n_slots, sizeof *slot);
    uint32_t *hash = malloc(n_slots * sizeof *hash);
    if (slot == NULL || hash == NULL) {
        free(slot);
        free(hash);
        return ERR_NOMEM;
    }
    if (p->n_slots == 0)
        cm_hash_key_get(&p->key);
    for (size_t i = 0; i < p->n_slots; i++) {
        if (p->slot[i] == 0)
            continue;
        size_t from = p->slot_hash[i] & (n_slots - 1), j = from;
        while (slot[j] != 0)
            j = (j + 1) & (n_slots - 1);
        walked(from, j, n_slots);
        slot[j] = p->slot[i];
        hash[j] = p->slot_hash[i];
    }
    free(p->slot);
    free(p->slot_hash);
    p->slot = slot;
    p->slot_hash = hash;
    p->n_slots = n_slots;
    return 0;
}

int cm_strpool_reserve(cm_strpool *p, size_t ids) {
    size_t n = p->n_slots ? p->n_slots : 256;
    while (n < ids * 2)
        n *= 2;
    return n > p->n_slots ? rehash(p, n) : 0;
}

/* Id 0, the empty string, on first use. */
static int hold_empty(cm_strpool *p) {
    if (p->n != 0)
        return 0;
    if (CM_GROW(p->off, p->off_cap, 1) || CM_GROW(p->len, p->len_cap, 1) || CM_GROW(p->data, p->cap, 1))
        return ERR_NOMEM;
    p->data[0] = '\0';
    p->used = 1;
    p->off[0] = 0;
    p->len[0] = 0;
    p->n = 1;
    return 0;
}

/* Stores the len bytes at s as the next id, within the pool's bounds. */
static int append(cm_strpool *p, const char *s, size_t len, uint32_t *id) {
    if ((p->max_text != 0 && p->text + len > p->max_text) || (p->max_ids != 0 && p->n >= p->max_ids) ||
        p->n >= UINT32_MAX - 1)
        return ERR_LIMIT;
    /* s may lie in the pool: found again by its offset once the pool has moved */
    uintptr_t at = (uintptr_t)s, base = (uintptr_t)p->data;
    int inside = s != NULL && at >= base && at < base + p->used;
    size_t s_off = inside ? (size_t)(at - base) : 0;
    if (CM_GROW(p->off, p->off_cap, p->n + 1) || CM_GROW(p->len, p->len_cap, p->n + 1) ||
        CM_GROW(p->data, p->cap, p->used + len + 1))
        return ERR_NOMEM;
    if (inside)
        s = p->data + s_off;
    uint32_t k = (uint32_t)p->n++;
    p->off[k] = p->used;
    p->len[k] = (uint32_t)len;
    if (len)
        memmove(p->data + p->used, s, len);
    p->data[p->used + len] = '\0';
    p->used += len + 1;
    p->text += len;
    *id = k;
    return 0;
}

int cm_strpool_intern(cm_strpool *p, const char *s, size_t len, uint32_t *id) {
    *id = 0;
    if (s == NULL || len == 0)
        return 0;
    if (len > UINT32_MAX)
        return ERR_LIMIT;
    if (hold_empty(p) != 0 || ((p->n + 1) * 2 > p->n_slots && rehash(p, p->n_slots ? p->n_slots * 2 : 256) != 0))
        return ERR_NOMEM;
    uint32_t h = hash_of(p, s, len);
    size_t from = h & (p->n_slots - 1), j = from;
    for (; p->slot[j] != 0; j = (j + 1) & (p->n_slots - 1)) {
        uint32_t k = p->slot[j];
        if (p->slot_hash[j] == h && p->len[k] == len && memcmp(p->data + p->off[k], s, len) == 0) {
            walked(from, j, p->n_slots);
            *id = k;
            return 0;
        }
    }
    walked(from, j, p->n_slots);
    int rc = append(p, s, len, id);
    if (rc == 0) {
        p->slot[j] = *id;
        p->slot_hash[j] = h;
    }
    return rc;
}

int cm_strpool_add(cm_strpool *p, const char *s, size_t len, uint32_t *id) {
    *id = 0;
    if (len > UINT32_MAX)
        return ERR_LIMIT;
    if (hold_empty(p) != 0)
        return ERR_NOMEM;
    return append(p, s, len, id);
}

size_t cm_strpool_text_from(const cm_strpool *p, uint32_t from) {
    if (from == 0)
        from = 1;
    if (from >= p->n)
        return 0;
    /* each string after from takes its bytes and a NUL */
    return (p->used - p->off[from]) - (p->n - from);
}

size_t cm_strpool_bytes(const cm_strpool *p) {
    return p->cap + p->off_cap * sizeof *p->off + p->len_cap * sizeof *p->len +
           p->n_slots * (sizeof *p->slot + sizeof *p->slot_hash);
}

void cm_strpool_free(cm_strpool *p) {
    free(p->data);
    free(p->off);
    free(p->len);
    free(p->slot);
    free(p->slot_hash);
    memset(p, 0, sizeof *p);
}
