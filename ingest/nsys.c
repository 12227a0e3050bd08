/*
 * Nsight Systems SQLite import (nsys.h): every table of interest is read with one SELECT that names
 * the columns it needs (NULL for those an export lacks), its rows become records in memory with the
 * pid of their process, then host calls get their device and flags from the GPU operation with the
 * same correlation id (store/api.h), sync rows their type from their call, and each process is
 * encoded as its own producer in time order, its call sites (one per distinct backtrace, built from
 * the CUDA_CALLCHAINS rows sorted by chain and depth) before its events.
 *
 * This module owns the database handle, the strings read from it, the call-chain rows and the
 * records until they are emitted.
 */
#include "nsys.h"
#include "api.h"
#include "nsys_db.h"
#include "emit.h"
#include "hash.h"
#include "radix.h"
#include "strpool.h"
#include "text.h"
#include "corrmap.h"
#include "u64map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "synctop/codec.h"

#define NSYS_MAX_COLS 16
#define NSYS_NAME_MAX (1u << 20) /* longer strings are cut here */
#define NSYS_NO_ID32  4294967295ll

#define NSYS_CHAIN_DEPTH    1024      /* stackDepth rows at or beyond this are skipped */
#define NSYS_CHAIN_ROWS_MAX (1u << 31) /* call-chain rows kept, whatever max_events says */
#define NSYS_SITE_FRAMES    64        /* frames kept per call site, the innermost */
#define NSYS_SITE_RECORDS   (1u << 19) /* call-site and frame records per process (the encoder logs 1M) */

enum { T_KERNEL, T_MEMCPY, T_MEMSET, T_SYNC, T_RUNTIME, T_NVTX, T_STRINGS, T_GPU, T_PROCESSES, T_THREADS, T_CHAINS,
       T_N_ };
static const char *const table_names[T_N_] = {
    "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "StringIds",
    "TARGET_INFO_GPU", "PROCESSES", "ThreadNames", "CUDA_CALLCHAINS"};

typedef struct ngpu {
    int64_t id;
    uint32_t name; /* local string + 1 */
    uint32_t sm_count;
    uint64_t memory;
    uint8_t major, minor;
} ngpu;

/* One CUDA_CALLCHAINS row: frame depth of chain, innermost 0. */
typedef struct nframe {
    int64_t chain;
    uint32_t depth;
    uint32_t seq;          /* row order: of two rows at one depth, the first read is kept */
    uint32_t func, module; /* local strings as frame_name gives them, 0 for none */
} nframe;

typedef struct nimp {
    const char *name;
    nsdb d;
    sqlite3 *db; /* d's */
    err_msg *err;
    import_stats *st;
    const import_opts *opts;
    uint64_t max_events;
    int fail; /* why rec_new failed */
    int have[T_N_];
    int any_cupti;
    cm_strpool strings; /* local ids, one per string added (rows of StringIds among them) */
    cm_u64map sids;    /* StringIds id -> local + 1 */
    cm_u64map rtnames; /* StringIds id -> local + 1 of the name without its version suffix */
    /* records, and the pid of each */
    tp_record *rec;
    uint32_t *rpid;
    size_t n_rec, cap_rec;
    cm_corrmap apis;  /* (pid, correlation) -> index of the call */
    cm_u64map pnames; /* pid -> local + 1 */
    cm_u64map tnames; /* pid << 32 | tid -> local + 1 */
    ngpu *gpus;
    size_t n_gpus;
    /* call chains: rows sorted by chain and depth, one per (chain, depth) */
    nframe *cf;
    size_t n_cf, cap_cf;
    cm_u64map chain_at; /* chain id -> index in cf of its innermost row */
    cm_u64map rchain;   /* index of a call in rec -> its callchainId */
    cm_u64map spans;    /* index in cf of a chain's first row -> the index just past it << 32 | its first
                           frame outside the tracer's and the driver's modules (chain_span) */
    cm_u64map named_at; /* index in cf << 32 | frame name -> 1 + index of the chain's outermost frame so named, or 0 */
    /* frame names: each local string's text read once, then compared by id (frame_name) */
    uint32_t *fname;       /* local string -> the local string standing for its text, 0 when not yet known */
    uint8_t *fname_tracer; /* such a local string -> 2 when it names the tracer's or the driver's module, 1 not,
                              0 not yet known */
    size_t n_fname;
    cm_u64map fname_by_text; /* keyed hash of a frame name's text -> the local string standing for it */
    uint64_t chain_off; /* callchainId + chain_off is the id of the call's chain: 0 or 1 */
    uint64_t rows;      /* rows read, of every table: opts->progress is called as they pass (rows_next) */
} nimp;

int nsys_is_sqlite(const void *head, size_t n) {
    return n >= NSYS_MAGIC_LEN && memcmp(head, NSYS_MAGIC, NSYS_MAGIC_LEN) == 0;
}

static int nomem(nimp *k) {
    return err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
}

/* Counts a skipped row; the first one is described for a warning. */
static void skip_row(nimp *k, int table, const char *why) {
    if (k->st->invalid++ == 0)
        snprintf(k->st->first_invalid, sizeof k->st->first_invalid, "a %s row %s", table_names[table], why);
}

/* ---- strings ---- */

/* A new local id for the n bytes at s (cut at NSYS_NAME_MAX), 0 when out of memory. */
static uint32_t str_add(nimp *k, const char *s, size_t n) {
    uint32_t id;
    return cm_strpool_add(&k->strings, s, n > NSYS_NAME_MAX ? NSYS_NAME_MAX : n, &id) == 0 ? id : 0;
}

static const char *str_of(const nimp *k, uint32_t id, size_t *n) {
    *n = cm_strpool_len(&k->strings, id);
    return cm_strpool_str(&k->strings, id);
}

/* Local ids in use: 1 to str_count. */
static uint32_t str_count(const nimp *k) { return cm_strpool_end(&k->strings) - 1; }

/* The local string of a StringIds id, 0 when it dangles. */
static uint32_t sid(const nimp *k, int64_t id) {
    const uint64_t *v = cm_u64map_find(&k->sids, (uint64_t)id);
    return v ? (uint32_t)*v : 0;
}

/* ---- records ---- */

static tp_record *rec_new(nimp *k, uint32_t pid) {
    if (k->n_rec == k->cap_rec) {
        if (k->n_rec >= k->max_events) {
            k->fail = err_set(k->err, ERR_LIMIT,
                              "%s: more than %llu events: over the import limit (a larger --max-events N reads it)",
                              k->name, (unsigned long long)k->max_events);
            return NULL;
        }
        size_t cap = k->cap_rec ? k->cap_rec * 2 : 4096;
        if (cap > k->max_events)
            cap = (size_t)k->max_events;
        tp_record *r = realloc(k->rec, cap * sizeof *r);
        if (r == NULL) {
            k->fail = nomem(k);
            return NULL;
        }
        k->rec = r;
        uint32_t *p = realloc(k->rpid, cap * sizeof *p);
        if (p == NULL) {
            k->fail = nomem(k);
            return NULL;
        }
        k->rpid = p;
        k->cap_rec = cap;
    }
    k->rpid[k->n_rec] = pid;
    tp_record *r = &k->rec[k->n_rec++];
    memset(r, 0, sizeof *r);
    return r;
}

/* ---- reading a table ---- */

typedef struct nrows {
    nimp *k;
    int table;
    int n_cols;        /* the rowid is read after them */
    int have_last;     /* a row was read (or skipped): last is its rowid */
    int64_t last;
    sqlite3_stmt *stmt;
} nrows;

/* Prepares SELECT cols, rowid FROM table in rowid order, a missing column read as NULL. Returns 1
 * when rows can be read, 0 when the table is missing or lacks a required column (the first
 * n_required), else an ERR_* code. */
static int rows_open(nrows *r, nimp *k, int table, const char *const *cols, int n_cols, int n_required) {
    memset(r, 0, sizeof *r);
    r->k = k;
    r->table = table;
    r->n_cols = n_cols;
    if (!k->have[table])
        return 0;
    char sql[1024];
    snprintf(sql, sizeof sql, "SELECT * FROM \"%s\" LIMIT 0", table_names[table]);
    sqlite3_stmt *probe;
    if (sqlite3_prepare_v2(k->db, sql, -1, &probe, NULL) != SQLITE_OK)
        return nsdb_fail(&k->d, sqlite3_errcode(k->db), table_names[table], k->err);
    int n_have = sqlite3_column_count(probe);
    size_t o = (size_t)snprintf(sql, sizeof sql, "SELECT ");
    for (int c = 0; c < n_cols; c++) {
        int found = 0;
        for (int i = 0; i < n_have && !found; i++) {
            const char *nm = sqlite3_column_name(probe, i);
            found = nm && strcmp(nm, cols[c]) == 0;
        }
        if (!found && c < n_required) {
            sqlite3_finalize(probe);
            char why[128];
            snprintf(why, sizeof why, "table without a %s column: not read", cols[c]);
            if (k->st->invalid == 0)
                snprintf(k->st->first_invalid, sizeof k->st->first_invalid, "%s: %s", table_names[table], why);
            k->st->invalid++;
            return 0;
        }
        o += (size_t)snprintf(sql + o, sizeof sql - o, found ? "%s\"%s\"" : "%sNULL", c ? ", " : "", cols[c]);
    }
    sqlite3_finalize(probe);
    snprintf(sql + o, sizeof sql - o, ", rowid FROM \"%s\" WHERE rowid >= ?1 ORDER BY rowid", table_names[table]);
    if (sqlite3_prepare_v2(k->db, sql, -1, &r->stmt, NULL) != SQLITE_OK)
        return nsdb_fail(&k->d, sqlite3_errcode(k->db), table_names[table], k->err);
    sqlite3_bind_int64(r->stmt, 1, INT64_MIN);
    return 1;
}

/* Steps past a row too long for SQLITE_LIMIT_LENGTH, counted as skipped: 1 when the scan goes on
 * after it, 0 when it was the last row, else an ERR_* code. */
static int rows_skip_long(nrows *r) {
    nimp *k = r->k;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT rowid FROM \"%s\" WHERE rowid %s ?1 ORDER BY rowid LIMIT 1",
             table_names[r->table], r->have_last ? ">" : ">=");
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(k->db, sql, -1, &s, NULL) != SQLITE_OK)
        return nsdb_fail(&k->d, sqlite3_errcode(k->db), table_names[r->table], k->err);
    sqlite3_bind_int64(s, 1, r->have_last ? r->last : INT64_MIN);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        r->last = sqlite3_column_int64(s, 0);
        r->have_last = 1;
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW)
        return nsdb_fail(&k->d, rc, table_names[r->table], k->err);
    char why[64];
    snprintf(why, sizeof why, "over %u MiB long", NSDB_VALUE_MAX >> 20);
    skip_row(k, r->table, why);
    if (r->last == INT64_MAX)
        return 0;
    sqlite3_reset(r->stmt);
    sqlite3_bind_int64(r->stmt, 1, r->last + 1);
    return 1;
}

/* 1: a row; 0: no more; negative: an error (the file is damaged, a bound was reached, or
 * opts->progress stopped the import). */
static int rows_next(nrows *r) {
    nimp *k = r->k;
    if ((++k->rows & (NSYS_PROGRESS_ROWS - 1)) == 0 && k->opts && k->opts->progress &&
        k->opts->progress(k->opts->progress_ctx, 0, 0) != 0)
        return err_set(k->err, ERR_EOF, "%s: import cancelled", k->name);
    for (;;) {
        int rc = sqlite3_step(r->stmt);
        if (rc == SQLITE_ROW) {
            r->last = sqlite3_column_int64(r->stmt, r->n_cols);
            r->have_last = 1;
            return 1;
        }
        if (rc == SQLITE_DONE)
            return 0;
        if (rc != SQLITE_TOOBIG || r->k->d.over)
            return nsdb_fail(&r->k->d, rc, table_names[r->table], r->k->err);
        if ((rc = rows_skip_long(r)) <= 0)
            return rc;
    }
}

static void rows_close(nrows *r) {
    sqlite3_finalize(r->stmt);
    r->stmt = NULL;
}

static int geti(const nrows *r, int c, int64_t *v) {
    if (sqlite3_column_type(r->stmt, c) != SQLITE_INTEGER)
        return 0;
    *v = sqlite3_column_int64(r->stmt, c);
    return 1;
}

static int64_t geti_or(const nrows *r, int c, int64_t dflt) {
    int64_t v;
    return geti(r, c, &v) ? v : dflt;
}

static uint32_t u32_or(const nrows *r, int c, uint32_t dflt) {
    int64_t v;
    return geti(r, c, &v) && v >= 0 && v <= (int64_t)UINT32_MAX ? (uint32_t)v : dflt;
}

/* The text of column c (NULL when not text). */
static const char *gets(const nrows *r, int c, size_t *n) {
    *n = 0;
    if (sqlite3_column_type(r->stmt, c) != SQLITE_TEXT)
        return NULL;
    const char *s = (const char *)sqlite3_column_text(r->stmt, c);
    *n = (size_t)sqlite3_column_bytes(r->stmt, c);
    return s;
}

/* Columns 0 and 1 are start and end: a positive start and an end not before it. */
static const char *span_of(const nrows *r, int allow_null_end, uint64_t *t0, uint64_t *t1) {
    int64_t s, e;
    if (!geti(r, 0, &s))
        return "without an integer start";
    if (s <= 0)
        return "with a start at or before 0";
    if (sqlite3_column_type(r->stmt, 1) == SQLITE_NULL && allow_null_end)
        e = s;
    else if (!geti(r, 1, &e))
        return "without an integer end";
    if (e < s)
        return "ending before it starts";
    *t0 = (uint64_t)s;
    *t1 = (uint64_t)e;
    return NULL;
}

/* The pid packed in a globalTid or globalPid. */
static int pid_of(const nrows *r, int c, uint32_t *pid, uint32_t *tid) {
    int64_t g;
    if (!geti(r, c, &g))
        return 0;
    *pid = (uint32_t)(((uint64_t)g >> 24) & 0xFFFFFF);
    if (tid)
        *tid = (uint32_t)((uint64_t)g & 0xFFFFFF);
    return 1;
}

/* ---- the tables ---- */

static int read_strings(nimp *k) {
    static const char *const cols[] = {"id", "value"};
    nrows r;
    int rc = rows_open(&r, k, T_STRINGS, cols, 2, 2);
    if (rc <= 0)
        return rc;
    while ((rc = rows_next(&r)) == 1) {
        int64_t id;
        size_t n;
        const char *s = gets(&r, 1, &n);
        if (!geti(&r, 0, &id) || s == NULL) {
            skip_row(k, T_STRINGS, "without an integer id and a text value");
            continue;
        }
        uint32_t l = str_add(k, s, n);
        if (l == 0 || cm_u64map_put(&k->sids, (uint64_t)id, l) != 0) {
            rc = nomem(k);
            break;
        }
    }
    rows_close(&r);
    return rc;
}

static int read_meta(nimp *k) {
    static const char *const gcols[] = {"id", "name", "smCount", "totalMemory", "computeMajor", "computeMinor"};
    nrows r;
    int rc = rows_open(&r, k, T_GPU, gcols, 6, 1);
    if (rc < 0)
        return rc;
    while (rc == 1 && (rc = rows_next(&r)) == 1) {
        int64_t id;
        if (!geti(&r, 0, &id) || id < 0 || id >= TP_NO_DEVICE) {
            skip_row(k, T_GPU, "without a usable id");
            continue;
        }
        ngpu *g = realloc(k->gpus, (k->n_gpus + 1) * sizeof *g);
        if (g == NULL) {
            rc = nomem(k);
            break;
        }
        k->gpus = g;
        g = &k->gpus[k->n_gpus++];
        memset(g, 0, sizeof *g);
        g->id = id;
        size_t n;
        const char *s = gets(&r, 1, &n);
        g->name = s ? str_add(k, s, n) : 0;
        g->sm_count = u32_or(&r, 2, 0);
        int64_t v = geti_or(&r, 3, 0);
        g->memory = v > 0 ? (uint64_t)v : 0;
        v = geti_or(&r, 4, 0);
        g->major = v > 0 && v < 256 ? (uint8_t)v : 0;
        v = geti_or(&r, 5, 0);
        g->minor = v > 0 && v < 256 ? (uint8_t)v : 0;
    }
    rows_close(&r);
    if (rc < 0)
        return rc;

    static const char *const pcols[] = {"pid", "name"};
    rc = rows_open(&r, k, T_PROCESSES, pcols, 2, 2);
    if (rc < 0)
        return rc;
    while (rc == 1 && (rc = rows_next(&r)) == 1) {
        int64_t pid;
        size_t n;
        const char *s = gets(&r, 1, &n);
        if (!geti(&r, 0, &pid) || pid < 0 || pid > 0xFFFFFF || s == NULL)
            continue; /* only names the processes with CUDA rows: not worth a warning */
        uint32_t l = str_add(k, s, n);
        if (l == 0 || cm_u64map_put(&k->pnames, (uint64_t)pid, l) != 0) {
            rc = nomem(k);
            break;
        }
    }
    rows_close(&r);
    if (rc < 0)
        return rc;

    static const char *const tcols[] = {"nameId", "globalTid"};
    rc = rows_open(&r, k, T_THREADS, tcols, 2, 2);
    if (rc < 0)
        return rc;
    while (rc == 1 && (rc = rows_next(&r)) == 1) {
        uint32_t pid, tid;
        int64_t nid;
        uint32_t l;
        if (!geti(&r, 0, &nid) || !pid_of(&r, 1, &pid, &tid) || (l = sid(k, nid)) == 0)
            continue;
        if (cm_u64map_put(&k->tnames, (uint64_t)pid << 32 | tid, l) != 0) {
            rc = nomem(k);
            break;
        }
    }
    rows_close(&r);
    return rc < 0 ? rc : 0;
}

static uint8_t copy_kind_of(int64_t v) {
    if (v >= 0 && v < TP_COPY_MAX_)
        return (uint8_t)v;
    switch (v) { /* unified memory copies, as their direction */
    case 11: return TP_COPY_HTOD;
    case 12: return TP_COPY_DTOH;
    case 13: return TP_COPY_DTOD;
    default: return TP_COPY_UNKNOWN;
    }
}

/* Nsight Systems numbers memory kinds from 0 = pageable to 6 = managed static, 7 = unknown
 * (ENUM_CUDA_MEM_KIND); CUPTI, and the event model, from 0 = unknown. */
static uint8_t mem_kind_of(int64_t v) {
    return v >= 0 && v < 7 ? (uint8_t)(v + 1) : TP_MEM_UNKNOWN;
}

/* Kernels, copies, memsets and syncs: columns 0-6 are start, end, deviceId, contextId, streamId,
 * correlationId, globalPid; the rest depend on the table. */
static int read_gpu(nimp *k, int table) {
    static const char *const kcols[] = {"start",  "end",   "deviceId", "contextId", "streamId",  "correlationId",
                                        "globalPid", "shortName", "demangledName", "gridX", "gridY", "gridZ",
                                        "blockX", "blockY", "blockZ"};
    static const char *const ccols[] = {"start",     "end",   "deviceId", "contextId", "streamId",
                                        "correlationId", "globalPid", "bytes", "copyKind", "srcKind",
                                        "dstKind",   "srcDeviceId", "dstDeviceId"};
    static const char *const mcols[] = {"start",         "end",       "deviceId", "contextId", "streamId",
                                        "correlationId", "globalPid", "bytes",    "value",     "memKind"};
    static const char *const scols[] = {"start",         "end",       "deviceId", "contextId", "streamId",
                                        "correlationId", "globalPid", "eventId"};
    const char *const *cols = table == T_KERNEL ? kcols : table == T_MEMCPY ? ccols : table == T_MEMSET ? mcols : scols;
    int n_cols = table == T_KERNEL ? 15 : table == T_MEMCPY ? 13 : table == T_MEMSET ? 10 : 8;
    nrows r;
    int rc = rows_open(&r, k, table, cols, n_cols, 7);
    while (rc == 1 && (rc = rows_next(&r)) == 1) {
        uint64_t t0, t1;
        int64_t dev, stream;
        uint32_t pid;
        const char *why = span_of(&r, 0, &t0, &t1);
        if (why == NULL && (!geti(&r, 2, &dev) || dev < 0 || dev >= TP_NO_DEVICE))
            why = "without a usable deviceId";
        if (why == NULL && (!geti(&r, 4, &stream) || stream < -1 || stream > NSYS_NO_ID32 ||
                            (table != T_SYNC && (stream == -1 || stream == NSYS_NO_ID32))))
            why = "without a usable streamId";
        if (why == NULL && !pid_of(&r, 6, &pid, NULL))
            why = "without a globalPid";
        uint32_t name = 0;
        if (why == NULL && table == T_KERNEL) {
            int64_t id;
            if (geti(&r, 7, &id))
                name = sid(k, id);
            if (name == 0 && geti(&r, 8, &id))
                name = sid(k, id);
            if (name == 0)
                why = "whose name is not in StringIds";
        }
        if (why) {
            skip_row(k, table, why);
            continue;
        }
        tp_record *x = rec_new(k, pid);
        if (x == NULL) {
            rc = k->fail;
            break;
        }
        x->kernel.device = (uint16_t)dev;
        x->kernel.stream = stream == -1 ? TP_NO_ID : (uint32_t)stream;
        x->kernel.start = t0;
        x->kernel.end = t1;
        uint32_t corr = u32_or(&r, 5, 0), context = u32_or(&r, 3, 0);
        switch (table) {
        case T_KERNEL:
            x->kernel.kind = TP_K_KERNEL;
            x->kernel.correlation = corr;
            x->kernel.context = context;
            x->kernel.name = name;
            for (int i = 0; i < 3; i++) {
                x->kernel.grid[i] = u32_or(&r, 9 + i, 0);
                x->kernel.block[i] = u32_or(&r, 12 + i, 0);
            }
            break;
        case T_MEMCPY:
            x->memcpy.kind = TP_K_MEMCPY;
            x->memcpy.correlation = corr;
            x->memcpy.context = context;
            x->memcpy.bytes = (uint64_t)(geti_or(&r, 7, 0) > 0 ? geti_or(&r, 7, 0) : 0);
            x->memcpy.copy_kind = copy_kind_of(geti_or(&r, 8, 0));
            x->memcpy.src_kind = mem_kind_of(geti_or(&r, 9, -1));
            x->memcpy.dst_kind = mem_kind_of(geti_or(&r, 10, -1));
            x->memcpy.src_device = x->memcpy.dst_device = TP_NO_DEVICE;
            if (x->memcpy.copy_kind == TP_COPY_PTOP) {
                int64_t s = geti_or(&r, 11, -1), d = geti_or(&r, 12, -1);
                x->memcpy.src_device = s >= 0 && s < TP_NO_DEVICE ? (uint16_t)s : TP_NO_DEVICE;
                x->memcpy.dst_device = d >= 0 && d < TP_NO_DEVICE ? (uint16_t)d : TP_NO_DEVICE;
            }
            break;
        case T_MEMSET:
            x->memset.kind = TP_K_MEMSET;
            x->memset.correlation = corr;
            x->memset.context = context;
            x->memset.bytes = (uint64_t)(geti_or(&r, 7, 0) > 0 ? geti_or(&r, 7, 0) : 0);
            x->memset.value = (uint32_t)geti_or(&r, 8, 0);
            x->memset.mem_kind = mem_kind_of(geti_or(&r, 9, -1));
            break;
        default:
            x->sync.kind = TP_K_SYNC;
            x->sync.correlation = corr;
            x->sync.context = context;
            x->sync.event = u32_or(&r, 7, TP_NO_ID);
            x->sync.sync_type = TP_SYNC_UNKNOWN; /* from its call, once all are read */
            break;
        }
    }
    rows_close(&r);
    return rc < 0 ? rc : 0;
}

static int read_runtime(nimp *k) {
    static const char *const cols[] = {"start",         "end",         "globalTid",  "nameId",
                                       "correlationId", "returnValue", "callchainId"};
    nrows r;
    int rc = rows_open(&r, k, T_RUNTIME, cols, 7, 4);
    while (rc == 1 && (rc = rows_next(&r)) == 1) {
        uint64_t t0, t1;
        uint32_t pid, tid, name = 0;
        int64_t nid;
        const char *why = span_of(&r, 0, &t0, &t1);
        if (why == NULL && !pid_of(&r, 2, &pid, &tid))
            why = "without a globalTid";
        if (why == NULL && (!geti(&r, 3, &nid) || sid(k, nid) == 0))
            why = "whose name is not in StringIds";
        if (why) {
            skip_row(k, T_RUNTIME, why);
            continue;
        }
        int added;
        uint64_t *v = cm_u64map_get_or_add(&k->rtnames, (uint64_t)nid, 0, &added);
        if (v == NULL) {
            rc = nomem(k);
            break;
        }
        if (added) {
            size_t n;
            const char *s = str_of(k, sid(k, nid), &n);
            if ((*v = str_add(k, s, st_api_strip_version(s, n))) == 0) {
                rc = nomem(k);
                break;
            }
        }
        name = (uint32_t)*v;
        int64_t chain = -1; /* none */
        if (sqlite3_column_type(r.stmt, 6) != SQLITE_NULL && (!geti(&r, 6, &chain) || chain < 0)) {
            skip_row(k, T_RUNTIME, "with an unusable callchainId (the call is kept, without a call site)");
            chain = -1;
        }
        uint32_t corr = u32_or(&r, 4, 0);
        if (corr) { /* the same call under a second name: keep the wider of the two */
            uint64_t at = 0;
            added = !cm_corrmap_find(&k->apis, pid, corr, &at);
            if (added && cm_corrmap_put(&k->apis, pid, corr, k->n_rec) != 0) {
                rc = nomem(k);
                break;
            }
            if (!added) {
                tp_api *a = &k->rec[at].api;
                size_t n1, n2;
                const char *s1 = str_of(k, a->name, &n1), *s2 = str_of(k, name, &n2);
                if (n1 == n2 && memcmp(s1, s2, n1) == 0 && a->tid == tid) {
                    if (t1 - t0 > a->end - a->start) {
                        a->start = t0;
                        a->end = t1;
                        a->ret = (int32_t)geti_or(&r, 5, 0);
                    }
                    /* the backtrace is stored with one of the two rows */
                    if (chain >= 0 && cm_u64map_get_or_add(&k->rchain, at, (uint64_t)chain, NULL) == NULL) {
                        rc = nomem(k);
                        break;
                    }
                    k->st->skipped++;
                    continue;
                }
            }
        }
        tp_record *x = rec_new(k, pid);
        if (x == NULL) {
            rc = k->fail;
            break;
        }
        size_t n;
        const char *s = str_of(k, name, &n);
        tp_api *a = &x->api;
        a->kind = TP_K_API;
        a->flags = n >= 2 && memcmp(s, "cu", 2) == 0 && !(n >= 4 && memcmp(s, "cuda", 4) == 0) ? TP_F_DRIVER : 0;
        a->device = TP_NO_DEVICE;
        a->tid = tid;
        a->start = t0;
        a->end = t1;
        a->correlation = corr;
        a->name = name;
        a->ret = (int32_t)geti_or(&r, 5, 0);
        if (chain >= 0 && cm_u64map_put(&k->rchain, k->n_rec - 1, (uint64_t)chain) != 0) {
            rc = nomem(k);
            break;
        }
    }
    rows_close(&r);
    return rc < 0 ? rc : 0;
}

/* NVTX event types (ENUM_NSYS_EVENT_TYPE) that are ranges or marks; the others (domain and
 * string registrations, thread names, ...) are metadata. */
static int nvtx_shape(int64_t type, int has_end) {
    switch (type) {
    case 34: /* NvtxMark */
    case 73: return TP_NVTX_INSTANT;
    case 59: /* NvtxPushPopRange */
    case 60: /* NvtxStartEndRange */
    case 70: /* NvtxtPushPopRange */
    case 71: return has_end ? TP_NVTX_RANGE : 0;
    default: return 0;
    }
}

static int read_nvtx(nimp *k) {
    static const char *const cols[] = {"start", "end", "globalTid", "eventType", "text", "textId"};
    nrows r;
    int rc = rows_open(&r, k, T_NVTX, cols, 6, 4);
    while (rc == 1 && (rc = rows_next(&r)) == 1) {
        int64_t type;
        if (!geti(&r, 3, &type)) {
            skip_row(k, T_NVTX, "without an integer eventType");
            continue;
        }
        int shape = nvtx_shape(type, sqlite3_column_type(r.stmt, 1) != SQLITE_NULL);
        if (shape == 0)
            continue;
        uint64_t t0 = 0, t1 = 0;
        uint32_t pid = 0, tid = 0, name = 0;
        const char *why = span_of(&r, shape == TP_NVTX_INSTANT, &t0, &t1);
        if (why == NULL && !pid_of(&r, 2, &pid, &tid))
            why = "without a globalTid";
        size_t n;
        const char *s = gets(&r, 4, &n);
        int64_t tx;
        if (why == NULL && s)
            name = str_add(k, s, n);
        else if (why == NULL && geti(&r, 5, &tx) && (name = sid(k, tx)) == 0)
            why = "whose textId is not in StringIds";
        if (why) {
            skip_row(k, T_NVTX, why);
            continue;
        }
        tp_record *x = rec_new(k, pid);
        if (x == NULL) {
            rc = k->fail;
            break;
        }
        x->nvtx.kind = TP_K_NVTX;
        x->nvtx.flags = (uint8_t)shape;
        x->nvtx.device = TP_NO_DEVICE;
        x->nvtx.tid = tid;
        x->nvtx.start = t0;
        x->nvtx.end = shape == TP_NVTX_INSTANT ? t0 : t1;
        x->nvtx.name = name;
    }
    rows_close(&r);
    return rc < 0 ? rc : 0;
}

/* ---- call chains (CUDA_CALLCHAINS, from nsys --cudabacktrace) ---- */

static int frame_cmp(const void *a, const void *b) {
    const nframe *x = a, *y = b;
    if (x->chain != y->chain)
        return x->chain < y->chain ? -1 : 1;
    if (x->depth != y->depth)
        return x->depth < y->depth ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Makes room in fname and fname_tracer for every local string. */
static int fname_room(nimp *k) {
    size_t n = (size_t)str_count(k) + 1;
    if (n <= k->n_fname)
        return 0;
    uint32_t *f = realloc(k->fname, n * sizeof *f);
    if (f != NULL)
        k->fname = f;
    uint8_t *t = f ? realloc(k->fname_tracer, n) : NULL;
    if (t == NULL)
        return nomem(k);
    k->fname_tracer = t;
    memset(k->fname + k->n_fname, 0, (n - k->n_fname) * sizeof *k->fname);
    memset(k->fname_tracer + k->n_fname, 0, n - k->n_fname);
    k->n_fname = n;
    return 0;
}

/* The local string that stands for local string id as a frame's (or a call's) name in the call
 * chains: the first one seen with its text cut at IMPORT_FRAME_NAME_MAX, a copy so cut where the text
 * is longer (*cut is set then; cut may be NULL); 0 for an empty or dangling name. Names then
 * compare by id, and each text is read once however many frames and calls share it. */
static int frame_name(nimp *k, uint32_t id, uint32_t *out, int *cut) {
    size_t n;
    const char *s = str_of(k, id, &n);
    *out = 0;
    if (n == 0)
        return 0;
    if (fname_room(k) != 0)
        return ERR_NOMEM;
    if (k->fname[id] != 0) {
        *out = k->fname[id];
        return 0;
    }
    size_t m = n < IMPORT_FRAME_NAME_MAX ? n : IMPORT_FRAME_NAME_MAX;
    uint64_t h = cm_hash_bytes(s, m);
    const uint64_t *seen = cm_u64map_find(&k->fname_by_text, h);
    uint32_t f = id;
    if (seen != NULL) {
        size_t sn;
        const char *ss = str_of(k, (uint32_t)*seen, &sn);
        /* two texts with one keyed hash (about 2^-64 a pair) stay apart, each itself */
        if (sn == m && memcmp(ss, s, m) == 0)
            f = (uint32_t)*seen;
    } else {
        if (m < n) {
            if ((f = str_add(k, s, m)) == 0 || fname_room(k) != 0)
                return nomem(k);
            k->fname[f] = f;
            if (cut)
                *cut = 1;
        }
        if (cm_u64map_put(&k->fname_by_text, h, f) != 0)
            return nomem(k);
    }
    k->fname[id] = f;
    *out = f;
    return 0;
}

/* Reads the frames of the chains, sorted by chain and depth; a chain with a missing depth keeps its
 * other frames in order. Read only when some call names a chain. */
static int read_callchains(nimp *k) {
    static const char *const cols[] = {"id", "stackDepth", "symbol", "module"};
    if (cm_u64map_count(&k->rchain) == 0)
        return 0;
    nrows r;
    int rc = rows_open(&r, k, T_CHAINS, cols, 4, 4);
    uint64_t cap = k->max_events < NSYS_CHAIN_ROWS_MAX ? k->max_events : NSYS_CHAIN_ROWS_MAX;
    while (rc == 1 && (rc = rows_next(&r)) == 1) {
        int64_t id, depth, sym, mod;
        const char *why = NULL;
        if (!geti(&r, 0, &id) || !geti(&r, 1, &depth))
            why = "without an integer id and stackDepth";
        else if (depth < 0 || depth >= NSYS_CHAIN_DEPTH)
            why = "with a stackDepth out of range";
        else if (!geti(&r, 2, &sym) || !geti(&r, 3, &mod))
            why = "without integer symbol and module ids";
        if (why) {
            skip_row(k, T_CHAINS, why);
            continue;
        }
        if (k->n_cf == k->cap_cf) {
            if (k->n_cf >= cap) {
                rc = err_set(k->err, ERR_LIMIT, "%s: more than %llu call-chain frames: over the import limit",
                             k->name, (unsigned long long)cap);
                break;
            }
            size_t c = k->cap_cf ? k->cap_cf * 2 : 1024;
            if (c > cap)
                c = (size_t)cap;
            nframe *f = realloc(k->cf, c * sizeof *f);
            if (f == NULL) {
                rc = nomem(k);
                break;
            }
            k->cf = f;
            k->cap_cf = c;
        }
        uint32_t func, module;
        int cut_func = 0, cut_module = 0;
        if (frame_name(k, sid(k, sym), &func, &cut_func) != 0 || frame_name(k, sid(k, mod), &module, &cut_module) != 0) {
            rc = ERR_NOMEM;
            break;
        }
        k->st->frame_names_cut += (uint64_t)(cut_func + cut_module);
        k->cf[k->n_cf] = (nframe){.chain = id, .depth = (uint32_t)depth, .seq = (uint32_t)k->n_cf,
                                  .func = func, .module = module};
        k->n_cf++;
    }
    rows_close(&r);
    if (rc < 0)
        return rc;
    if (k->n_cf > 1)
        qsort(k->cf, k->n_cf, sizeof *k->cf, frame_cmp);
    size_t w = 0;
    for (size_t i = 0; i < k->n_cf; i++) {
        if (w > 0 && k->cf[w - 1].chain == k->cf[i].chain && k->cf[w - 1].depth == k->cf[i].depth) {
            skip_row(k, T_CHAINS, "with the id and stackDepth of an earlier row");
            continue;
        }
        k->cf[w++] = k->cf[i];
    }
    k->n_cf = w;
    for (size_t i = 0; i < w; i++)
        if ((i == 0 || k->cf[i].chain != k->cf[i - 1].chain) && cm_u64map_put(&k->chain_at, (uint64_t)k->cf[i].chain, i))
            return nomem(k);
    return 0;
}

/* The index in cf of the first row of chain callchain + off (callchain is never negative), NULL
 * when there is no such chain. */
static const uint64_t *chain_start(const nimp *k, uint64_t callchain, uint64_t off) {
    return callchain + off <= (uint64_t)INT64_MAX ? cm_u64map_find(&k->chain_at, callchain + off) : NULL;
}

/* Whether a module (as frame_name gives it) is the tracer's or the driver's, whose frames come
 * before the program's: told from its text once. */
static int tracer_module(nimp *k, uint32_t module) {
    static const char *const prefixes[] = {"libcupti", "libcuda.", "libnvidia", "libToolsInjection"};
    if (module != 0 && module < k->n_fname && k->fname_tracer[module] != 0)
        return k->fname_tracer[module] == 2;
    size_t n;
    const char *s = str_of(k, module, &n);
    size_t base = n;
    while (base > 0 && s[base - 1] != '/')
        base--;
    s += base;
    n -= base;
    int yes = 0;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        size_t m = strlen(prefixes[i]);
        yes |= n >= m && memcmp(s, prefixes[i], m) == 0;
    }
    if (module != 0 && module < k->n_fname)
        k->fname_tracer[module] = (uint8_t)(yes ? 2 : 1);
    return yes;
}

/* The chain whose first row is at start, gone through once: *end gets the index in cf just past
 * it, *outside its first frame outside the tracer's and the driver's modules (*end when none). */
static int chain_span(nimp *k, size_t start, size_t *end, size_t *outside) {
    const uint64_t *v = cm_u64map_find(&k->spans, start);
    if (v != NULL) {
        *end = (size_t)(*v >> 32);
        *outside = (size_t)(uint32_t)*v;
        return 0;
    }
    size_t e = start, out = SIZE_MAX;
    for (; e < k->n_cf && k->cf[e].chain == k->cf[start].chain; e++)
        if (out == SIZE_MAX && !tracer_module(k, k->cf[e].module))
            out = e;
    *end = e;
    *outside = out == SIZE_MAX ? e : out;
    return cm_u64map_put(&k->spans, start, (uint64_t)*end << 32 | *outside) != 0 ? nomem(k) : 0;
}

/* The index in cf of the outermost frame named name (a call's local string) in the chain whose
 * first row is at start; *found says whether there is one. Remembered per chain and name: many
 * calls share a chain. Names compare by id (frame_name), and a chain holds at most
 * NSYS_CHAIN_DEPTH frames: a call costs a bounded count of compares, however long the names. */
static int chain_named(nimp *k, size_t start, uint32_t name, size_t *at, int *found) {
    size_t end, outside;
    uint32_t f;
    int added, rc = frame_name(k, name, &f, NULL);
    if (rc == 0)
        rc = chain_span(k, start, &end, &outside);
    if (rc != 0)
        return rc;
    uint64_t *v = cm_u64map_get_or_add(&k->named_at, (uint64_t)start << 32 | f, 0, &added);
    if (v == NULL)
        return nomem(k);
    if (added)
        for (size_t i = start; i < end; i++)
            if (k->cf[i].func == f)
                *v = i + 1;
    *found = *v != 0;
    *at = *found ? (size_t)*v - 1 : 0;
    return 0;
}

/* Decides what callchainId counts from: exports number the chains from 1 and the calls' references
 * from 0 or 1, so the offset (0 or 1) under which more calls find their own name in their chain wins,
 * 0 on a tie. Then counts the calls whose chain is missing. */
static int chains_resolve(nimp *k) {
    if (cm_u64map_count(&k->rchain) == 0)
        return 0;
    uint64_t hits[2] = {0, 0};
    for (size_t i = 0; i < k->n_rec; i++) {
        const uint64_t *c = k->rec[i].head.kind == TP_K_API ? cm_u64map_find(&k->rchain, i) : NULL;
        for (unsigned off = 0; c && off < 2; off++) {
            const uint64_t *at = chain_start(k, *c, off);
            size_t named;
            int found = 0, rc;
            if (at && (rc = chain_named(k, (size_t)*at, k->rec[i].api.name, &named, &found)) != 0)
                return rc;
            hits[off] += (uint64_t)found;
        }
    }
    k->chain_off = hits[1] > hits[0];
    for (size_t i = 0; i < k->n_rec; i++) {
        const uint64_t *c = k->rec[i].head.kind == TP_K_API ? cm_u64map_find(&k->rchain, i) : NULL;
        if (c && chain_start(k, *c, k->chain_off) == NULL)
            skip_row(k, T_RUNTIME,
                     "whose callchainId is not in CUDA_CALLCHAINS (the call is kept, without a call site)");
    }
    return 0;
}

/* A host call's st_api_class, told by its name. */
static unsigned api_class_of(void *arg, size_t i, tp_api *a) {
    size_t n;
    const char *s = str_of(arg, a->name, &n);
    return st_api_class_of(s, n);
}

/* Puts each sync row on the device its context's work ran on. CUPTI's synchronization record names
 * no device, and Nsight Systems writes 0 in every row's deviceId, also in a process whose kernels
 * all run on device 1: the device comes from the kernels, copies and memsets of the same process
 * and context, else of the same process and stream, else from the one device the process used. */
static int sync_devices(nimp *k) {
    cm_u64map ctxdev = {0}, streamdev = {0}, procdev = {0}; /* key -> device + 1 (0x10000: several) */
    int rc = 0;
    for (size_t i = 0; i < k->n_rec && rc == 0; i++) {
        const tp_record *x = &k->rec[i];
        if (x->head.kind != TP_K_KERNEL && x->head.kind != TP_K_MEMCPY && x->head.kind != TP_K_MEMSET)
            continue;
        uint32_t ctx = x->head.kind == TP_K_KERNEL   ? x->kernel.context
                       : x->head.kind == TP_K_MEMCPY ? x->memcpy.context
                                                     : x->memset.context;
        uint32_t stream = x->head.kind == TP_K_KERNEL   ? x->kernel.stream
                          : x->head.kind == TP_K_MEMCPY ? x->memcpy.stream
                                                        : x->memset.stream;
        uint64_t pid = k->rpid[i], dev = (uint64_t)x->head.device + 1;
        uint64_t keys[3] = {pid << 32 | ctx, pid << 32 | stream, pid};
        cm_u64map *maps[3] = {&ctxdev, &streamdev, &procdev};
        for (int m = 0; m < 3 && rc == 0; m++) {
            uint64_t *v = cm_u64map_get_or_add(maps[m], keys[m], dev, NULL);
            if (v == NULL)
                rc = nomem(k);
            else if (*v != dev)
                *v = 0x10000;
        }
    }
    for (size_t i = 0; i < k->n_rec && rc == 0; i++) {
        tp_record *x = &k->rec[i];
        if (x->head.kind != TP_K_SYNC)
            continue;
        uint64_t pid = k->rpid[i];
        const uint64_t *v = x->sync.context ? cm_u64map_find(&ctxdev, pid << 32 | x->sync.context) : NULL;
        if ((v == NULL || *v == 0x10000) && x->sync.stream != TP_NO_ID)
            v = cm_u64map_find(&streamdev, pid << 32 | x->sync.stream);
        if (v == NULL || *v == 0x10000)
            v = cm_u64map_find(&procdev, pid);
        if (v != NULL && *v != 0x10000 && *v - 1 != x->head.device) {
            x->head.device = (uint16_t)(*v - 1);
            k->st->syncs_moved++;
        }
    }
    cm_u64map_free(&ctxdev);
    cm_u64map_free(&streamdev);
    cm_u64map_free(&procdev);
    return rc;
}

/* Gives sync rows their device and type from their call, and host calls their device and flags
 * from the GPU operation with the same correlation id. */
static int resolve(nimp *k) {
    int rc = sync_devices(k);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < k->n_rec; i++) {
        const tp_sync *r = &k->rec[i].sync;
        if (r->kind != TP_K_SYNC || r->correlation == 0)
            continue;
        uint64_t at = 0;
        if (cm_corrmap_find(&k->apis, k->rpid[i], r->correlation, &at)) {
            size_t n;
            const char *s = str_of(k, k->rec[at].api.name, &n);
            k->rec[i].sync.sync_type = (uint8_t)st_api_sync_type(s, n);
        }
    }
    return em_resolve(k->rec, sizeof *k->rec, k->n_rec, k->rpid, api_class_of, k, k->st) != 0 ? nomem(k) : 0;
}

/* ---- output: one producer per process ---- */

/* A record's place in its process's output: by start, then by index (16 bytes: the start leads,
 * for the radix sort). */
typedef struct norder {
    uint64_t start;
    uint64_t index;
} norder;

/* Records of one start, by index. */
static int by_index(const void *a, const void *b, void *arg) {
    (void)arg;
    const norder *x = a, *y = b;
    return (x->index > y->index) - (x->index < y->index);
}

/* Sorts the n records of one process by start, then index: in place by start (radix), then each
 * run of equal starts by index. */
static void order_process(norder *o, size_t n) {
    cm_radix_sort_inplace_by(o, n, sizeof *o);
    cm_sort_runs(o, n, sizeof *o, by_index, NULL);
}

static int u32_cmp(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The index in pids (sorted, n of them) of pid, which is among them; *last: the one found before,
 * looked at first. */
static size_t pid_at(const uint32_t *pids, size_t n, uint32_t pid, size_t *last) {
    if (*last < n && pids[*last] == pid)
        return *last;
    size_t lo = 0, hi = n;
    while (lo + 1 < hi) {
        size_t m = lo + (hi - lo) / 2;
        if (pids[m] <= pid)
            lo = m;
        else
            hi = m;
    }
    return *last = lo;
}

/* A producer's batches, and the ids its encoder gave the local strings. */
typedef struct nout {
    em_out out;
    nimp *k;
    uint32_t *ids; /* local string -> the producer's id, 0 until interned */
} nout;

static uint32_t out_str(nout *o, uint32_t local) {
    if (local == 0 || local > str_count(o->k))
        return 0;
    if (o->ids[local - 1] == 0) {
        size_t n;
        const char *s = str_of(o->k, local, &n);
        o->ids[local - 1] = tp_enc_intern(o->out.enc, s, n);
    }
    return o->ids[local - 1];
}

/* ---- call sites ---- */

typedef struct nsite {
    size_t from; /* its frames: cf[from, from + n) */
    uint32_t n;
} nsite;

/* The frames a call's site keeps of the chain whose first row is at start: from the outermost frame
 * named as the call on (the tracer's and the driver's frames are inside it), else from the first
 * frame outside the tracer's and the driver's modules; the innermost NSYS_SITE_FRAMES of them. */
static int site_frames(nimp *k, size_t start, uint32_t name, size_t *from, uint32_t *n) {
    size_t named, end, outside;
    int found;
    int rc = chain_named(k, start, name, &named, &found);
    if (rc == 0)
        rc = chain_span(k, start, &end, &outside);
    if (rc)
        return rc;
    size_t f = found ? named : outside;
    *from = f;
    *n = (uint32_t)(end - f < NSYS_SITE_FRAMES ? end - f : NSYS_SITE_FRAMES);
    return 0;
}

/* A site's frames by their names' ids (frame_name: one id a text), under the process's key: a
 * file cannot choose frames whose sites share a hash. */
static uint64_t site_hash(const nimp *k, size_t from, uint32_t n) {
    uint32_t ids[2 * NSYS_SITE_FRAMES];
    for (uint32_t i = 0; i < n; i++) {
        ids[2 * i] = k->cf[from + i].func;
        ids[2 * i + 1] = k->cf[from + i].module;
    }
    return cm_hash_bytes(ids, n * 2 * sizeof ids[0]);
}

static int site_eq(const nimp *k, const nsite *a, size_t from, uint32_t n) {
    if (a->n != n)
        return 0;
    for (uint32_t i = 0; i < n; i++) {
        const nframe *x = &k->cf[a->from + i], *y = &k->cf[from + i];
        if (x->func != y->func || x->module != y->module)
            return 0;
    }
    return 1;
}

/* A call site's frames: the chain rows from, and the producer that interns their names. */
typedef struct nsiteframes {
    nout *o;
    const nframe *from;
} nsiteframes;

static void site_frame(void *arg, uint32_t i, tp_frame *fr) {
    const nsiteframes *sf = arg;
    fr->flags = TP_FRAME_NATIVE;
    fr->func = out_str(sf->o, sf->from[i].func);
    fr->module = out_str(sf->o, sf->from[i].module);
}

/* A call site and its frames, in one batch that is handed out when full. */
static int out_site(nout *o, uint32_t id, const nframe *f, uint32_t n) {
    int rc = em_site(&o->out, id, n, site_frame, &(nsiteframes){o, f});
    if (rc == 0 && tp_enc_pending(o->out.enc) >= o->out.batch_records)
        rc = em_flush(&o->out, 0);
    return rc;
}

/* Gives the calls among ord[0, n) that have a backtrace their call site, emitting each distinct one
 * (by its frames' text) once, with ids from 1. */
static int emit_sites(nimp *k, nout *o, const norder *ord, size_t n) {
    if (cm_u64map_count(&k->rchain) == 0)
        return 0;
    cm_u64map memo = {0};    /* index in cf << 32 | call name -> call-site id, 0 for none */
    cm_u64map by_hash = {0}; /* site_hash (probed on) -> index in sites + 1 */
    nsite *sites = NULL;
    size_t n_sites = 0, cap = 0, records = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        tp_api *a = &k->rec[ord[i].index].api;
        const uint64_t *c = a->kind == TP_K_API ? cm_u64map_find(&k->rchain, ord[i].index) : NULL;
        const uint64_t *at = c ? chain_start(k, *c, k->chain_off) : NULL;
        if (at == NULL)
            continue;
        uint64_t key = *at << 32 | a->name;
        const uint64_t *known = cm_u64map_find(&memo, key);
        if (known) {
            a->callsite = (uint32_t)*known;
            k->st->sited_calls += a->callsite != 0;
            continue;
        }
        size_t from;
        uint32_t nf, id = 0;
        if ((rc = site_frames(k, (size_t)*at, a->name, &from, &nf)) != 0)
            break;
        uint64_t h = site_hash(k, from, nf);
        const uint64_t *si = NULL;
        while (nf > 0 && (si = cm_u64map_find(&by_hash, h)) != NULL && !site_eq(k, &sites[*si - 1], from, nf))
            h++;
        if (nf > 0 && si != NULL) {
            id = (uint32_t)*si;
        } else if (nf > 0 && records + 1 + nf > NSYS_SITE_RECORDS) {
            skip_row(k, T_CHAINS, "beyond the bound on call sites per process (its calls keep none)");
        } else if (nf > 0) {
            if (n_sites == cap) {
                size_t c2 = cap ? cap * 2 : 64;
                nsite *p = realloc(sites, c2 * sizeof *p);
                if (p == NULL) {
                    rc = nomem(k);
                    break;
                }
                sites = p;
                cap = c2;
            }
            sites[n_sites++] = (nsite){.from = from, .n = nf};
            id = (uint32_t)n_sites;
            records += 1 + nf;
            if (cm_u64map_put(&by_hash, h, id) != 0) {
                rc = nomem(k);
                break;
            }
            if ((rc = out_site(o, id, &k->cf[from], nf)) != 0)
                break;
        }
        if (cm_u64map_put(&memo, key, id) != 0) {
            rc = nomem(k);
            break;
        }
        a->callsite = id;
        k->st->sited_calls += id != 0;
    }
    cm_u64map_free(&memo);
    cm_u64map_free(&by_hash);
    free(sites);
    return rc;
}

/* A device's record from TARGET_INFO_GPU (the first row with its id). */
static void gpu_describe(void *arg, tp_device *dv) {
    nout *o = arg;
    const nimp *k = o->k;
    for (size_t i = 0; i < k->n_gpus; i++) {
        const ngpu *g = &k->gpus[i];
        if (g->id != (int64_t)dv->device)
            continue;
        dv->name = out_str(o, g->name);
        dv->cc_major = g->major;
        dv->cc_minor = g->minor;
        dv->sm_count = g->sm_count;
        dv->memory_bytes = g->memory;
        break;
    }
}

/* A thread's name from ThreadNames (key pid << 32 | tid), 0 when it has none. */
static uint32_t thread_name(void *arg, uint64_t key) {
    nout *o = arg;
    const uint64_t *tn = cm_u64map_find(&o->k->tnames, key);
    return tn ? out_str(o, (uint32_t)*tn) : 0;
}

/* The metadata of the process whose events are ord[0, n): the process, the devices, streams and
 * threads its events use. */
static int emit_meta(nimp *k, nout *o, uint32_t pid, const norder *ord, size_t n) {
    cm_u64map streams = {0}, threads = {0};
    uint8_t *dev_used = calloc(TP_NO_DEVICE / 8 + 1, 1);
    int rc = dev_used ? 0 : nomem(k);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const tp_record *r = &k->rec[ord[i].index];
        int ok = 1;
        if (r->head.kind == TP_K_API || r->head.kind == TP_K_NVTX) {
            ok = cm_u64map_get_or_add(&threads, (uint64_t)pid << 32 | r->api.tid, 1, NULL) != NULL;
        } else {
            dev_used[r->head.device / 8] |= (uint8_t)(1u << (r->head.device % 8));
            if (r->kernel.stream != TP_NO_ID)
                ok = cm_u64map_get_or_add(&streams, (uint64_t)r->head.device << 32 | r->kernel.stream,
                                       r->head.kind == TP_K_KERNEL ? r->kernel.context : r->memcpy.context,
                                       NULL) != NULL;
        }
        if (!ok)
            rc = nomem(k);
    }
    const uint64_t *pn = cm_u64map_find(&k->pnames, pid);
    tp_process p = {.kind = TP_K_PROCESS, .device = TP_NO_DEVICE, .pid = pid, .rank = -1, .world = -1};
    if (rc == 0) {
        p.cmdline = pn ? out_str(o, (uint32_t)*pn) : tp_enc_intern_cstr(o->out.enc, cm_base_name(k->name));
        rc = em_add(&o->out, &p, 1);
    }
    if (rc == 0)
        rc = em_devices(&o->out, dev_used, gpu_describe, o);
    if (rc == 0)
        rc = em_streams(&o->out, &streams);
    if (rc == 0)
        rc = em_threads(&o->out, &threads, thread_name, o);
    cm_u64map_free(&streams);
    cm_u64map_free(&threads);
    free(dev_used);
    return rc;
}

/* Emits the process pid, whose events are ord[0, n). */
static int emit_process(nimp *k, nout *o, uint32_t pid, const norder *ord, size_t n) {
    int rc = emit_meta(k, o, pid, ord, n);
    if (rc == 0)
        rc = emit_sites(k, o, ord, n);
    for (size_t i = 0; i < n && rc == 0; i++) {
        tp_record r = k->rec[ord[i].index];
        switch (r.head.kind) {
        case TP_K_KERNEL: r.kernel.name = out_str(o, r.kernel.name); break;
        case TP_K_API: r.api.name = out_str(o, r.api.name); break;
        case TP_K_NVTX: r.nvtx.name = out_str(o, r.nvtx.name); break;
        default: break;
        }
        if (k->st->t_min == 0 && k->st->t_max == 0) {
            k->st->t_min = r.kernel.start;
            k->st->t_max = r.kernel.end;
        }
        if (r.kernel.start < k->st->t_min)
            k->st->t_min = r.kernel.start;
        if (r.kernel.end > k->st->t_max)
            k->st->t_max = r.kernel.end;
        rc = em_add(&o->out, &r, i + 1 < n);
    }
    return rc == 0 ? em_end(&o->out) : rc;
}

/* The records in order, a producer per process (by pid): the processes' records put apart by a
 * counting pass over the distinct pids, then each process's sorted in place (16 bytes a record). */
static int emit_all(nimp *k, import_emit_fn emit, void *ctx) {
    size_t n = k->n_rec, n_pids = 0;
    norder *ord = malloc((n ? n : 1) * sizeof *ord);
    uint32_t *ids = calloc(str_count(k) ? str_count(k) : 1, sizeof *ids);
    uint32_t *pids = malloc((n ? n : 1) * sizeof *pids);
    size_t *at = NULL;
    int rc = ord == NULL || ids == NULL || pids == NULL ? nomem(k) : 0;
    if (rc == 0) {
        if (n > 0) /* no records: no pids either (rpid is NULL) */
            memcpy(pids, k->rpid, n * sizeof *pids);
        qsort(pids, n, sizeof *pids, u32_cmp);
        for (size_t i = 0; i < n; i++)
            if (n_pids == 0 || pids[n_pids - 1] != pids[i])
                pids[n_pids++] = pids[i];
        if ((at = calloc(n_pids + 1, sizeof *at)) == NULL)
            rc = nomem(k);
    }
    if (rc == 0) {
        size_t last = 0;
        for (size_t i = 0; i < n; i++) /* each process's count, then where its records begin */
            at[pid_at(pids, n_pids, k->rpid[i], &last) + 1]++;
        for (size_t p = 0; p < n_pids; p++)
            at[p + 1] += at[p];
        for (size_t i = 0; i < n; i++)
            ord[at[pid_at(pids, n_pids, k->rpid[i], &last)]++] = (norder){k->rec[i].kernel.start, i};
        for (size_t p = n_pids; p > 0; p--) /* back to where each begins */
            at[p] = at[p - 1];
        at[0] = 0;
    }
    uint64_t producer = k->opts ? k->opts->producer : 0;
    for (size_t p = 0; rc == 0 && p < n_pids; p++) {
        size_t i = at[p], j = at[p + 1];
        order_process(ord + i, j - i);
        if (k->st->pid == 0)
            k->st->pid = pids[p];
        memset(ids, 0, str_count(k) * sizeof *ids);
        nout o = {.k = k, .ids = ids};
        tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = producer, .max_string_bytes = IMPORT_MAX_STRING_BYTES});
        em_out_init(&o.out, enc, k->opts, emit, ctx, k->name, k->err, k->st);
        if (producer)
            producer++;
        rc = enc ? emit_process(k, &o, pids[p], ord + i, j - i) : nomem(k);
        tp_enc_destroy(&enc);
        em_out_free(&o.out);
    }
    free(ord);
    free(ids);
    free(pids);
    free(at);
    return rc;
}

/* ---- the import ---- */

/* Which tables the file has; fails when it is not a readable SQLite database or not an export, and
 * refuses one whose tables of interest are not plain tables (nsys_db.h). */
static int read_schema(nimp *k) {
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(k->db, "SELECT type, name, sql FROM sqlite_master", -1, &s, NULL);
    int refused = 0;
    while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *type = (const char *)sqlite3_column_text(s, 0);
        const char *nm = (const char *)sqlite3_column_text(s, 1);
        const char *sql = (const char *)sqlite3_column_text(s, 2);
        rc = SQLITE_OK;
        if (nm == NULL || type == NULL)
            continue;
        for (int t = 0; t < T_N_ && refused == 0; t++)
            if (strcmp(nm, table_names[t]) == 0 && (refused = nsdb_check_table(&k->d, nm, type, sql, k->err)) == 0)
                k->have[t] = 1;
        if (refused != 0)
            break;
        if (strcmp(type, "table") == 0 && strncmp(nm, "CUPTI_ACTIVITY_KIND_", 20) == 0)
            k->any_cupti = 1;
    }
    if (refused == 0 && rc != SQLITE_DONE)
        refused = k->d.over ? nsdb_fail(&k->d, rc, "sqlite_master", k->err)
                            : err_set(k->err, rc == SQLITE_NOMEM ? ERR_NOMEM : ERR_MALFORMED,
                                      "%s: not a readable SQLite database (corrupt or cut short?): %s", k->name,
                                      sqlite3_errmsg(k->db));
    sqlite3_finalize(s);
    if (refused != 0)
        return refused;
    if (!k->have[T_STRINGS] && !k->any_cupti)
        return err_set(k->err, ERR_UNSUPPORTED,
                       "%s: an SQLite database, but not an Nsight Systems export (no StringIds and no "
                       "CUPTI_ACTIVITY_KIND_* table)",
                       k->name);
    return 0;
}

static int import_db(nimp *k, import_emit_fn emit, void *ctx) {
    int rc = read_schema(k);
    if (rc == 0)
        rc = read_strings(k);
    if (rc == 0)
        rc = read_meta(k);
    static const int gpu_tables[] = {T_KERNEL, T_MEMCPY, T_MEMSET, T_SYNC};
    for (size_t i = 0; rc == 0 && i < sizeof gpu_tables / sizeof gpu_tables[0]; i++)
        rc = read_gpu(k, gpu_tables[i]);
    if (rc == 0)
        rc = read_runtime(k);
    if (rc == 0)
        rc = read_callchains(k);
    if (rc == 0)
        rc = chains_resolve(k);
    if (rc == 0)
        rc = read_nvtx(k);
    if (rc == 0)
        rc = resolve(k);
    if (rc == 0)
        rc = emit_all(k, emit, ctx);
    return rc;
}

int nsys_import(const char *path, const import_opts *opts, import_emit_fn emit, void *ctx, import_stats *st_out,
                err_msg *err) {
    import_stats st_local;
    import_stats *st = em_stats_init(st_out, &st_local);
    err_msg err_local;
    if (err == NULL)
        err = &err_local;
    if (path == NULL || emit == NULL)
        return err_set(err, ERR_INVAL, "nsys import: invalid argument");
    struct stat sb;
    if (stat(path, &sb) != 0)
        return err_set(err, ERR_NOENT, "%s: cannot open", path);
    if (!S_ISREG(sb.st_mode))
        return err_set(err, ERR_INVAL, "%s: an Nsight Systems export must be a regular file", path);
    st->input_bytes = (uint64_t)sb.st_size;
    nimp *k = calloc(1, sizeof *k);
    if (k == NULL)
        return err_set(err, ERR_NOMEM, "%s: out of memory", path);
    k->name = path;
    k->err = err;
    k->st = st;
    k->opts = opts;
    k->max_events = em_max_events(opts, st->input_bytes);
    int rc = nsdb_open(&k->d, path, st->input_bytes, err);
    k->db = k->d.db;
    if (rc == 0)
        rc = import_db(k, emit, ctx);
    nsdb_close(&k->d);
    cm_strpool_free(&k->strings);
    free(k->rec);
    free(k->rpid);
    free(k->gpus);
    free(k->cf);
    cm_u64map_free(&k->chain_at);
    cm_u64map_free(&k->rchain);
    cm_u64map_free(&k->spans);
    cm_u64map_free(&k->named_at);
    cm_u64map_free(&k->fname_by_text);
    free(k->fname);
    free(k->fname_tracer);
    cm_u64map_free(&k->sids);
    cm_u64map_free(&k->rtnames);
    cm_corrmap_free(&k->apis);
    cm_u64map_free(&k->pnames);
    cm_u64map_free(&k->tnames);
    free(k);
    return rc;
}
