/*
 * The one hash of the synctop command and tracer: FNV-1a, 32- and 64-bit, over bytes or folded
 * over whole words. Hash tables index with its low bits, so cm_hash32_mix spreads the high bits
 * down where a table is probed by them alone.
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

/* A final mix for a 32-bit hash whose low bits index a table. */
static inline uint32_t cm_hash32_mix(uint32_t h) {
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    return h;
}

#endif
