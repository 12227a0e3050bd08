/*
 * Inputs built to cost synctop the most, for the tests and bench_flood: keys chosen to collide
 * under the unkeyed hashes its tables used before they were keyed (an attacker inverts a public
 * mix, or searches for keys it sends to a few slots), and Nsight call chains of long names. Each
 * ordinary counterpart has the same shape and size with keys as real traces number them.
 */
#ifndef SYNCTOP_HOSTILE_H
#define SYNCTOP_HOSTILE_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "synctop/error.h"

/* The hashes the tables used: the 64-bit map's mix (murmur3's finalizer), the trace-file map's
 * hash of a key pair, and the string pool's (FNV-1a 32 and a final mix). A table of 2^k slots
 * probed from the hash's low k bits. */
uint64_t hostile_old_u64map_hash(uint64_t key);
uint64_t hostile_old_fmap_hash(uint64_t k1, uint64_t k2);
uint32_t hostile_old_strpool_hash(const void *s, size_t n);
/* and the Kineto importer's hash of a name (its table of interned names) */
uint64_t hostile_old_kineto_name_hash(const char *s, size_t n);

/* The i-th key (i >= 0; distinct, none 0) whose old hash has its low 20 bits 0: every key lands
 * on the first slot of every table of up to 2^20 slots. For the 64-bit map, and for the trace-file
 * map with a second key of 0 (producer ids). */
uint64_t hostile_u64map_key(size_t i);
uint64_t hostile_fmap_key(size_t i);

/* A producer id times the Fibonacci multiplier: the subscriber's old slot for the id was its 13
 * bits from bit 51, the relay summer's its 13 bits from bit 50. And the i-th id whose product
 * stays below 2^50: slot 0 in both. */
uint64_t hostile_old_producer_mix(uint64_t id);
uint64_t hostile_producer_key(size_t i);

/* n distinct 32-bit correlation ids (from 1 up) whose old 64-bit-map hash lands in the first 64
 * of 2^k slots (k <= 20): a table of 2^k slots holds them as one cluster. */
void hostile_corrs(uint32_t *out, size_t n, unsigned k);

/* The i-th of the names of HOSTILE_NAME_LEN letters and digits whose old Kineto name hash lands in
 * the first 64 of 2^16 slots (a table of up to 32,768 names holds them as one cluster), into
 * out (not NUL-terminated). */
#define HOSTILE_NAME_LEN 16
void hostile_kineto_name(size_t i, char out[HOSTILE_NAME_LEN]);

/* The old slot of a correlation id in HTA's table of 2^k links: the top k bits of a Fibonacci
 * multiply. And n distinct correlation ids (from 1 up) whose old slot is among the first 64. */
uint64_t hostile_old_hta_slot(uint32_t corr, unsigned k);
void hostile_hta_corrs(uint32_t *out, size_t n, unsigned k);

/* 2^k strings of 4k bytes each (k <= 20), one after another in out (4k << k bytes), all with one
 * old string-pool hash: k blocks, each one of two that take FNV-1a from one state to the same
 * next state (a Joux multicollision). */
void hostile_strings(char *out, unsigned k);

/* Adds n rows to the StringIds table of db ("s0", "s1"...) with ids hostile_u64map_key(i)
 * (chosen) or first_id + i (ordinary). Returns SQLITE_OK or sqlite's error code. */
int hostile_nsys_ids(sqlite3 *db, size_t n, int chosen, int64_t first_id);

/* Adds to db (an Nsight export with a CUPTI_ACTIVITY_KIND_RUNTIME row to copy) calls runtime
 * calls, each with a call chain of its own of depth frames; the calls are named by a string of
 * name_bytes bytes and every frame by another of the same length that differs in its last byte,
 * in a module "libapp.so". Returns SQLITE_OK or sqlite's error code. */
int hostile_nsys_chains(sqlite3 *db, size_t calls, size_t depth, size_t name_bytes);

/* A profiler (Kineto) JSON text of n kernels and n launches, paired by correlation ids chosen by
 * hostile_corrs (chosen & HOSTILE_CORRS) or hostile_hta_corrs (chosen & HOSTILE_HTA_CORRS) for a
 * table of 2^k slots, 2^k the first power of two at least 2n + 2, or numbered from 1; the kernels
 * named by hostile_kineto_name (chosen & HOSTILE_NAMES) or "kernel_<i>". NULL when out of memory;
 * *len its length. The caller frees it. */
enum { HOSTILE_CORRS = 1, HOSTILE_NAMES = 2, HOSTILE_HTA_CORRS = 4 };
char *hostile_kineto_json(size_t n, int chosen, size_t *len);

/* Writes a trace file at path holding one small batch from each of n producers whose ids are
 * chosen (half against the 64-bit map, half against the trace-file map) or ordinary (1 up).
 * Returns 0 or an ERR_* code with err set. */
int hostile_trace(const char *path, size_t n, int chosen, err_msg *err);

#endif
