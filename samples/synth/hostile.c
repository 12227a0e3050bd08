/* Inputs built to cost synctop the most (hostile.h). */
#include "hostile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synctop/codec.h"
#include "synctop/event.h"
#include "synctop/file.h"

#define FNV32_BASIS 2166136261u
#define FNV32_PRIME 16777619u

/* The multiplicative inverse of an odd a modulo 2^64 (Newton's iteration: each step doubles the
 * correct low bits, from 3). */
static uint64_t inverse_of(uint64_t a) {
    uint64_t x = a;
    for (int i = 0; i < 5; i++)
        x *= 2 - a * x;
    return x;
}

uint64_t hostile_old_u64map_hash(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* The key whose old 64-bit-map hash is h: each step undone (a shift of 33 undoes itself). */
static uint64_t old_u64map_unhash(uint64_t h) {
    h ^= h >> 33;
    h *= inverse_of(0xc4ceb9fe1a85ec53ull);
    h ^= h >> 33;
    h *= inverse_of(0xff51afd7ed558ccdull);
    return h ^ (h >> 33);
}

uint64_t hostile_old_fmap_hash(uint64_t k1, uint64_t k2) {
    uint64_t h = k1 * 0x9E3779B97F4A7C15ull ^ (k2 + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return h;
}

/* The k1 whose old trace-file-map hash, with k2 = 0, is h. */
static uint64_t old_fmap_unhash(uint64_t h) {
    h ^= h >> 32;
    h *= inverse_of(0xBF58476D1CE4E5B9ull);
    h ^= (h >> 29) ^ (h >> 58);
    return (h ^ 0x632BE59BD9B4E019ull * 0xC2B2AE3D27D4EB4Full) * inverse_of(0x9E3779B97F4A7C15ull);
}

static uint32_t fnv32(uint32_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * FNV32_PRIME;
    return h;
}

uint32_t hostile_old_strpool_hash(const void *s, size_t n) {
    uint32_t h = fnv32(FNV32_BASIS, s, n);
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    return h;
}

uint64_t hostile_old_kineto_name_hash(const char *s, size_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    size_t i = 0;
    if (n >= 32) {
        uint64_t l[4] = {h, h ^ 0x243f6a8885a308d3ull, h ^ 0x13198a2e03707344ull, h ^ 0xa4093822299f31d0ull};
        for (; i + 32 <= n; i += 32)
            for (int j = 0; j < 4; j++) {
                uint64_t w;
                memcpy(&w, s + i + 8 * j, 8);
                l[j] = (l[j] ^ w) * 0xbf58476d1ce4e5b9ull;
                l[j] ^= l[j] >> 31;
            }
        h = ((l[0] * 0x94d049bb133111ebull) ^ l[1]) * 0x94d049bb133111ebull;
        h = ((h ^ l[2]) * 0x94d049bb133111ebull ^ l[3]) * 0xbf58476d1ce4e5b9ull;
    }
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
    }
    if (i < n) {
        uint64_t w = 0;
        memcpy(&w, s + i, n - i);
        h = (h ^ w) * 0x94d049bb133111ebull;
        h ^= h >> 29;
    }
    return h;
}

/* 64 characters that need no escape in JSON or SQL, 6 bits each. */
static const char letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";

/* Hashes with low 20 bits 0, one per i, none 0 once undone (i + 1 keeps the high bits apart). */
uint64_t hostile_u64map_key(size_t i) { return old_u64map_unhash((uint64_t)(i + 1) << 20); }
uint64_t hostile_fmap_key(size_t i) { return old_fmap_unhash((uint64_t)(i + 1) << 20); }

uint64_t hostile_old_producer_mix(uint64_t id) { return id * 0x9E3779B97F4A7C15ull; }

/* The id whose product with the multiplier is i + 1. */
uint64_t hostile_producer_key(size_t i) { return (uint64_t)(i + 1) * inverse_of(0x9E3779B97F4A7C15ull); }

void hostile_kineto_name(size_t i, char out[HOSTILE_NAME_LEN]) {
    /* the first half says i, the second is searched for */
    for (int j = 0; j < HOSTILE_NAME_LEN / 2; j++)
        out[j] = letters[(i >> (6 * j)) & 63];
    for (uint64_t c = 0;; c++) {
        for (int j = 0; j < HOSTILE_NAME_LEN / 2; j++)
            out[HOSTILE_NAME_LEN / 2 + j] = letters[(c >> (6 * j)) & 63];
        if ((hostile_old_kineto_name_hash(out, HOSTILE_NAME_LEN) & 0xFFFF) < 64)
            return;
    }
}

void hostile_corrs(uint32_t *out, size_t n, unsigned k) {
    uint64_t mask = ((uint64_t)1 << k) - 1;
    uint32_t c = 1;
    for (size_t i = 0; i < n; c++)
        if ((hostile_old_u64map_hash(c) & mask) < 64)
            out[i++] = c;
}

uint64_t hostile_old_hta_slot(uint32_t corr, unsigned k) { return ((uint64_t)corr * 0x9E3779B97F4A7C15u) >> (64 - k); }

void hostile_hta_corrs(uint32_t *out, size_t n, unsigned k) {
    uint32_t c = 1;
    for (size_t i = 0; i < n; c++)
        if (hostile_old_hta_slot(c, k) < 64)
            out[i++] = c;
}

/* Block c of 4 letters: c's low 24 bits, spread by an odd multiplier (one to one on them), 6 a
 * letter. Blocks counted up plainly share too much with their neighbours to collide early. */
static void block_of(uint32_t c, char blk[4]) {
    uint32_t v = c * 0x9E3779B1u;
    for (int i = 0; i < 4; i++)
        blk[i] = letters[(v >> (6 * i)) & 63];
}

/* Two different blocks that take FNV-1a from state h to one state (a birthday search: some 10^5
 * blocks for a 32-bit state). */
static void block_pair(uint32_t h, char a[4], char b[4]) {
    enum { SLOTS = 1 << 21 };
    uint64_t *seen = calloc(SLOTS, sizeof *seen); /* state << 32 | block number + 1 */
    if (seen == NULL)
        abort();
    for (uint32_t c = 0; c < SLOTS / 2; c++) {
        block_of(c, b);
        uint32_t s = fnv32(h, b, 4);
        size_t j = s & (SLOTS - 1);
        for (; seen[j] != 0 && (uint32_t)(seen[j] >> 32) != s; j = (j + 1) & (SLOTS - 1)) {
        }
        if (seen[j] != 0) {
            block_of((uint32_t)seen[j] - 1, a);
            free(seen);
            return;
        }
        seen[j] = (uint64_t)s << 32 | (c + 1);
    }
    abort();
}

void hostile_strings(char *out, unsigned k) {
    char (*pairs)[2][4] = malloc(k * sizeof *pairs);
    if (pairs == NULL)
        abort();
    uint32_t h = FNV32_BASIS;
    for (unsigned j = 0; j < k; j++) {
        block_pair(h, pairs[j][0], pairs[j][1]);
        h = fnv32(h, pairs[j][0], 4);
    }
    for (size_t m = 0; m < (size_t)1 << k; m++)
        for (unsigned j = 0; j < k; j++)
            memcpy(out + (m * k + j) * 4, pairs[j][(m >> j) & 1], 4);
    free(pairs);
}

int hostile_nsys_ids(sqlite3 *db, size_t n, int chosen, int64_t first_id) {
    sqlite3_stmt *q;
    int rc = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, "INSERT INTO StringIds (id, value) VALUES (?, ?)", -1, &q, NULL);
    if (rc != SQLITE_OK)
        return rc;
    for (size_t i = 0; i < n && rc == SQLITE_OK; i++) {
        char v[32];
        snprintf(v, sizeof v, "s%zu", i);
        sqlite3_bind_int64(q, 1, chosen ? (int64_t)hostile_u64map_key(i) : first_id + (int64_t)i);
        sqlite3_bind_text(q, 2, v, -1, SQLITE_TRANSIENT);
        rc = sqlite3_step(q) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
        sqlite3_reset(q);
    }
    sqlite3_finalize(q);
    return sqlite3_exec(db, rc == SQLITE_OK ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK ? rc : sqlite3_errcode(db);
}

/* Runs sql with its ?1 to ?4 bound to a, b, c, d. */
static int exec4(sqlite3 *db, const char *sql, int64_t a, int64_t b, int64_t c, int64_t d) {
    sqlite3_stmt *q;
    int rc = sqlite3_prepare_v2(db, sql, -1, &q, NULL);
    if (rc != SQLITE_OK)
        return rc;
    int64_t v[4] = {a, b, c, d};
    for (int i = 0; i < 4 && i < sqlite3_bind_parameter_count(q); i++)
        sqlite3_bind_int64(q, i + 1, v[i]);
    rc = sqlite3_step(q);
    sqlite3_finalize(q);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/* The first integer of sql's first row (0 when it has none). */
static int64_t query1(sqlite3 *db, const char *sql) {
    sqlite3_stmt *q;
    int64_t v = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
        v = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return v;
}

int hostile_nsys_chains(sqlite3 *db, size_t calls, size_t depth, size_t name_bytes) {
    int64_t sid = query1(db, "SELECT coalesce(max(id), 0) + 1 FROM StringIds");
    int64_t chain = query1(db, "SELECT coalesce(max(id), 0) + 1 FROM CUDA_CALLCHAINS");
    int64_t corr = query1(db, "SELECT coalesce(max(correlationId), 0) + 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME");
    char *name = malloc(name_bytes + 1);
    if (name == NULL || name_bytes == 0) {
        free(name);
        return SQLITE_NOMEM;
    }
    memset(name, 'A', name_bytes);
    name[name_bytes] = '\0';
    int rc = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    sqlite3_stmt *q = NULL;
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, "INSERT INTO StringIds (id, value) VALUES (?, ?)", -1, &q, NULL);
    for (int i = 0; i < 3 && rc == SQLITE_OK; i++) {
        name[name_bytes - 1] = (char)('1' + i);
        sqlite3_bind_int64(q, 1, sid + i);
        sqlite3_bind_text(q, 2, i == 2 ? "libapp.so" : name, -1, SQLITE_STATIC);
        rc = sqlite3_step(q) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
        sqlite3_reset(q);
    }
    sqlite3_finalize(q);
    free(name);
    for (size_t c = 0; c < calls && rc == SQLITE_OK; c++) {
        rc = exec4(db,
                   "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId, "
                   "returnValue, callchainId) SELECT start + ?1, start + ?1 + 1, eventClass, globalTid, ?2, ?3, returnValue, "
                   "?4 FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY start LIMIT 1",
                   (int64_t)c, corr + (int64_t)c, sid, chain + (int64_t)c);
        for (size_t d = 0; d < depth && rc == SQLITE_OK; d++)
            rc = exec4(db,
                       "INSERT INTO CUDA_CALLCHAINS (id, symbol, module, unresolved, originalIP, stackDepth) "
                       "VALUES (?1, ?2, ?3, 0, 0, ?4)",
                       chain + (int64_t)c, sid + 1, sid + 2, (int64_t)d);
    }
    return sqlite3_exec(db, rc == SQLITE_OK ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK ? rc : sqlite3_errcode(db);
}

char *hostile_kineto_json(size_t n, int chosen, size_t *len) {
    uint32_t *corr = malloc((n ? n : 1) * sizeof *corr);
    size_t cap = 256 + n * 320;
    char *j = malloc(cap);
    if (corr == NULL || j == NULL) {
        free(corr);
        free(j);
        return NULL;
    }
    unsigned k = 6;
    while (((size_t)1 << k) < 2 * n + 2)
        k++;
    if (chosen & HOSTILE_HTA_CORRS)
        hostile_hta_corrs(corr, n, k);
    else if (chosen & HOSTILE_CORRS)
        hostile_corrs(corr, n, k);
    else
        for (size_t i = 0; i < n; i++)
            corr[i] = (uint32_t)i + 1;
    size_t at = (size_t)snprintf(j, cap, "{\"traceEvents\": [\n");
    for (size_t i = 0; i < n; i++) {
        char name[32];
        if (chosen & HOSTILE_NAMES) {
            hostile_kineto_name(i, name);
            name[HOSTILE_NAME_LEN] = '\0';
        } else {
            snprintf(name, sizeof name, "kernel_%zu", i);
        }
        at += (size_t)snprintf(j + at, cap - at,
                               "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, "
                               "\"tid\": 1, \"ts\": %zu, \"dur\": 1, \"args\": {\"correlation\": %u}},\n"
                               "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, \"tid\": 7, \"ts\": %zu, "
                               "\"dur\": 1, \"args\": {\"device\": 0, \"stream\": 7, \"correlation\": %u}}%s\n",
                               10 + 4 * i, corr[i], name, 12 + 4 * i, corr[i], i + 1 < n ? "," : "");
    }
    at += (size_t)snprintf(j + at, cap - at, "]}\n");
    free(corr);
    *len = at;
    return j;
}

/* splitmix64: ids as the tracer draws them, for the ordinary trace. */
static uint64_t spread(uint64_t x) {
    uint64_t z = x * 0x9E3779B97F4A7C15ull + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int hostile_trace(const char *path, size_t n, int chosen, err_msg *err) {
    tp_fwriter *w = tp_fwriter_open(path, TP_FW_OVERWRITE, err);
    if (w == NULL)
        return ERR_IO;
    tp_buf b = {0};
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        uint64_t id = !chosen ? spread(i) | 1 : i % 2 ? hostile_fmap_key(i / 2) : hostile_u64map_key(i / 2);
        tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = id});
        tp_thread t = {.kind = TP_K_THREAD, .device = TP_NO_DEVICE, .tid = (uint32_t)i + 1, .pid = 1};
        if (enc == NULL || tp_enc_add(enc, &t) != 0 || tp_enc_finish(enc, &b) != 0)
            rc = err_set(err, ERR_NOMEM, "out of memory");
        else
            rc = tp_fwriter_append(w, b.data, b.len, err);
        tp_enc_destroy(&enc);
    }
    tp_buf_free(&b);
    int crc = tp_fwriter_close(&w, rc == 0 ? err : NULL);
    return rc ? rc : crc;
}
