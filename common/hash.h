/*
 * The hashes of the synctop command and tracer. FNV-1a, 32- and 64-bit, over bytes or folded over
 * whole words: cheap names for call sites, never the slot of a key a file or a peer chooses (a
 * table hashes such a name again under its key). SipHash-1-3 under a key drawn once per process,
 * for every table whose keys a file or a peer chooses: without the
 * key, nobody can choose keys that land on one slot, so a table's probes stay short whatever the
 * input (an unkeyed mix can be inverted, and chosen keys then cost a probe per key already held).
 * Probe sequences longer than CM_HASH_LONG_PROBE are counted, for tests and benchmarks.
 */
#ifndef SYNCTOP_HASH_H
#define SYNCTOP_HASH_H

#include <stddef.h>
#include <stdint.h>

#define CM_FNV32_BASIS 2166136261u
#define CM_FNV64_BASIS 1469598103934665603ull
#define CM_FNV32_PRIME 16777619u
#define CM_FNV64_PRIME 1099511628211ull

/* h folded with n bytes at p; start from CM_FNV32_BASIS. */
static inline uint32_t cm_fnv32(uint32_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * CM_FNV32_PRIME;
    return h;
}

/* h folded with n bytes at p; start from CM_FNV64_BASIS. */
static inline uint64_t cm_fnv64(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * CM_FNV64_PRIME;
    return h;
}

/* h folded with a whole word v in one step: for keys made of ids and numbers. */
static inline uint64_t cm_fnv64_word(uint64_t h, uint64_t v) { return (h ^ v) * CM_FNV64_PRIME; }

/* A SipHash key: the process's (cm_hash_key_get), or a fixed one in tests. */
typedef struct cm_hash_key {
    uint64_t k0, k1;
} cm_hash_key;

/* The process's key, drawn from getrandom() the first time it is asked for (never blocking: where
 * the kernel's pool is not ready or the call is refused, from the kernel's AT_RANDOM bytes, the
 * clocks and the addresses the process was given). The same in every thread and for the life of
 * the process, so that tables built before a fork stay usable after it. */
void cm_hash_key_get(cm_hash_key *key);

/* SipHash with c rounds per word and d to finish (2 and 4 as the reference, 1 and 3 as tables
 * use it) of the n bytes at p under key. */
uint64_t cm_siphash(const cm_hash_key *key, int c, int d, const void *p, size_t n);

/* SipHash-1-3 of the n bytes at p under key: for text. */
static inline uint64_t cm_hash_bytes_k(const cm_hash_key *key, const void *p, size_t n) {
    return cm_siphash(key, 1, 3, p, n);
}

/* SipHash-1-3 of the n bytes at p under the process's key. */
uint64_t cm_hash_bytes(const void *p, size_t n);

#define CM_SIP_ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

/* SipHash's state, and its steps, in line for the tables' one- and two-word keys. */
typedef struct cm_sip {
    uint64_t v0, v1, v2, v3;
} cm_sip;

static inline cm_sip cm_sip_start(const cm_hash_key *key) {
    return (cm_sip){key->k0 ^ 0x736f6d6570736575ull, key->k1 ^ 0x646f72616e646f6dull, key->k0 ^ 0x6c7967656e657261ull,
                    key->k1 ^ 0x7465646279746573ull};
}

static inline void cm_sip_round(cm_sip *s) {
    s->v0 += s->v1;
    s->v1 = CM_SIP_ROTL(s->v1, 13);
    s->v1 ^= s->v0;
    s->v0 = CM_SIP_ROTL(s->v0, 32);
    s->v2 += s->v3;
    s->v3 = CM_SIP_ROTL(s->v3, 16);
    s->v3 ^= s->v2;
    s->v0 += s->v3;
    s->v3 = CM_SIP_ROTL(s->v3, 21);
    s->v3 ^= s->v0;
    s->v2 += s->v1;
    s->v1 = CM_SIP_ROTL(s->v1, 17);
    s->v1 ^= s->v2;
    s->v2 = CM_SIP_ROTL(s->v2, 32);
}

/* One word of input, with c rounds. */
static inline void cm_sip_word(cm_sip *s, uint64_t m, int c) {
    s->v3 ^= m;
    for (int i = 0; i < c; i++)
        cm_sip_round(s);
    s->v0 ^= m;
}

/* The last word (the input's last bytes under its length's low byte), c rounds, then d. */
static inline uint64_t cm_sip_end(cm_sip *s, uint64_t last, int c, int d) {
    cm_sip_word(s, last, c);
    s->v2 ^= 0xff;
    for (int i = 0; i < d; i++)
        cm_sip_round(s);
    return s->v0 ^ s->v1 ^ s->v2 ^ s->v3;
}

/* SipHash-1-3 of one 64-bit word (its 8 bytes, little-endian) under key: what cm_hash_bytes_k
 * gives for them, in line, for the tables keyed by numbers. */
static inline uint64_t cm_hash_u64(const cm_hash_key *key, uint64_t x) {
    cm_sip s = cm_sip_start(key);
    cm_sip_word(&s, x, 1);
    return cm_sip_end(&s, 8ull << 56, 1, 3);
}

/* SipHash-1-3 of two 64-bit words (16 bytes, a's first, little-endian) under key: what
 * cm_hash_bytes_k gives for them, in line, for tables keyed by pairs. */
static inline uint64_t cm_hash_u64x2(const cm_hash_key *key, uint64_t a, uint64_t b) {
    cm_sip s = cm_sip_start(key);
    cm_sip_word(&s, a, 1);
    cm_sip_word(&s, b, 1);
    return cm_sip_end(&s, 16ull << 56, 1, 3);
}

/* A lookup or insertion that walks more than this many slots of an open-addressing table is
 * counted. At most half full and with keyed hashing, one in about 10^20 walks that far: a count
 * above 0 means keys chosen to collide, or a hash that lets them. */
#define CM_HASH_LONG_PROBE 256

/* Counts one long probe sequence (a table calls it when a walk went past CM_HASH_LONG_PROBE). */
void cm_hash_long_probe_note(void);
/* How many long probe sequences the process's tables walked so far. */
uint64_t cm_hash_long_probes(void);

#endif
