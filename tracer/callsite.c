/*
 * Call-site interning and lazy symbolization (callsite.h). Flush thread only: nothing here is
 * shared with the callbacks.
 */
#include "callsite.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#define MOD_CACHE 64 /* modules remembered with their verdict (user code or not) */

typedef struct site {
    uint64_t hash;
    uint32_t id;
    uint32_t n;
    uintptr_t *pcs;
} site;

typedef struct mod {
    uintptr_t base;
    int skip;
} mod;

struct tr_sites {
    unsigned keep;
    uint32_t max_sites;
    uint32_t n_sites;
    size_t cap; /* slots in table (power of two) */
    site *table;
    uint64_t refused;
    mod mods[MOD_CACHE];
    unsigned n_mods, next_mod;
    uintptr_t self_base;
};

/* Libraries between the application and the wait: their frames say nothing about the caller. */
static const char *const skipped_libs[] = {"libsynctop-tracer", "libcupti", "libcuda.so",
                                           "libcudart.so", "libnvidia-"};

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

tr_sites *tr_sites_new(unsigned keep, uint32_t max_sites) {
    tr_sites *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->keep = keep ? keep : 8;
    s->max_sites = max_sites ? max_sites : 65536;
    s->cap = 256;
    s->table = calloc(s->cap, sizeof *s->table);
    if (s->table == NULL) {
        free(s);
        return NULL;
    }
    Dl_info info;
    if (dladdr((void *)(uintptr_t)&tr_sites_new, &info) != 0)
        s->self_base = (uintptr_t)info.dli_fbase;
    return s;
}

void tr_sites_destroy(tr_sites **sp) {
    if (sp == NULL || *sp == NULL)
        return;
    tr_sites *s = *sp;
    for (size_t i = 0; i < s->cap; i++)
        free(s->table[i].pcs);
    free(s->table);
    free(s);
    *sp = NULL;
}

uint64_t tr_sites_refused(const tr_sites *s) { return s->refused; }

/* Whether a return address belongs to code between the user and the wait. Unknown addresses
 * (JIT code, no module) are kept: they may well be the user's. */
static int pc_skipped(tr_sites *s, uintptr_t pc) {
    Dl_info info;
    if (dladdr((void *)pc, &info) == 0 || info.dli_fbase == NULL)
        return 0;
    uintptr_t base = (uintptr_t)info.dli_fbase;
    for (unsigned i = 0; i < s->n_mods; i++)
        if (s->mods[i].base == base)
            return s->mods[i].skip;
    int skip = base == s->self_base;
    if (!skip && info.dli_fname != NULL) {
        const char *name = base_name(info.dli_fname);
        for (size_t i = 0; i < sizeof skipped_libs / sizeof skipped_libs[0]; i++)
            if (strncmp(name, skipped_libs[i], strlen(skipped_libs[i])) == 0)
                skip = 1;
    }
    unsigned slot = s->n_mods < MOD_CACHE ? s->n_mods++ : s->next_mod++ % MOD_CACHE;
    s->mods[slot] = (mod){base, skip};
    return skip;
}

static int pc_is_self(const tr_sites *s, uintptr_t pc) {
    Dl_info info;
    return s->self_base != 0 && dladdr((void *)pc, &info) != 0 &&
           (uintptr_t)info.dli_fbase == s->self_base;
}

static uint64_t hash_pcs(const uintptr_t *pcs, unsigned n) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned i = 0; i < n; i++) {
        h ^= (uint64_t)pcs[i];
        h *= 1099511628211ull;
        h ^= h >> 29;
    }
    return h ? h : 1;
}

static int grow(tr_sites *s) {
    size_t cap = s->cap * 2;
    site *t = calloc(cap, sizeof *t);
    if (t == NULL)
        return -1;
    for (size_t i = 0; i < s->cap; i++) {
        if (s->table[i].id == 0)
            continue;
        size_t j = s->table[i].hash & (cap - 1);
        while (t[j].id != 0)
            j = (j + 1) & (cap - 1);
        t[j] = s->table[i];
    }
    free(s->table);
    s->table = t;
    s->cap = cap;
    return 0;
}

static void describe(tr_sites *s, tp_enc *enc, uint32_t id, const uintptr_t *pcs, unsigned n) {
    tp_callsite cs = {.kind = TP_K_CALLSITE, .device = TP_NO_DEVICE, .id = id, .n_frames = n};
    tp_enc_add(enc, &cs);
    for (unsigned i = 0; i < n; i++) {
        /* A return address points after the call; one byte back is inside it, which is the line a
         * symbolizer should name. */
        uintptr_t at = pcs[i] - 1;
        tp_frame f = {.kind = TP_K_FRAME, .flags = TP_FRAME_NATIVE, .index = (uint16_t)i,
                      .callsite = id, .pc = at};
        Dl_info info;
        if (dladdr((void *)at, &info) != 0) {
            if (info.dli_fname != NULL)
                f.module = tp_enc_intern_cstr(enc, info.dli_fname);
            if (info.dli_sname != NULL)
                f.func = tp_enc_intern_cstr(enc, info.dli_sname);
            f.pc = at - (uintptr_t)info.dli_fbase;
        }
        tp_enc_add(enc, &f);
    }
    (void)s;
}

uint32_t tr_sites_intern(tr_sites *s, tp_enc *enc, const uintptr_t *pcs, unsigned n) {
    uintptr_t kept[32];
    unsigned k = 0;
    unsigned i = 0;
    /* Frames inside backtrace() itself (libc, a sanitizer's interceptor) come before the
     * tracer's; drop them, then the run of tracer/CUPTI/driver/runtime frames; keep the rest. */
    while (i < n && !pc_is_self(s, pcs[i]))
        i++;
    if (i == n)
        i = 0;
    while (i < n && (pcs[i] == 0 || pc_skipped(s, pcs[i])))
        i++;
    for (; i < n && k < s->keep && k < 32; i++)
        if (pcs[i] != 0)
            kept[k++] = pcs[i];
    if (k == 0)
        return 0;
    uint64_t h = hash_pcs(kept, k);
    size_t j = h & (s->cap - 1);
    while (s->table[j].id != 0) {
        site *e = &s->table[j];
        if (e->hash == h && e->n == k && memcmp(e->pcs, kept, k * sizeof kept[0]) == 0)
            return e->id;
        j = (j + 1) & (s->cap - 1);
    }
    if (s->n_sites >= s->max_sites) {
        s->refused++;
        return 0;
    }
    if ((s->n_sites + 1) * 2 > s->cap) {
        if (grow(s) != 0) {
            s->refused++;
            return 0;
        }
        j = h & (s->cap - 1);
        while (s->table[j].id != 0)
            j = (j + 1) & (s->cap - 1);
    }
    uintptr_t *copy = malloc(k * sizeof *copy);
    if (copy == NULL) {
        s->refused++;
        return 0;
    }
    memcpy(copy, kept, k * sizeof *copy);
    uint32_t id = ++s->n_sites;
    s->table[j] = (site){h, id, k, copy};
    describe(s, enc, id, kept, k);
    return id;
}
