/*
 * libFuzzer target for the Nsight Systems importer. Random file bytes would stop at SQLite's own
 * checks, so the input is a program that fills a valid database instead: the tables an export has
 * (declared with their types but without constraints, as a hostile file may be), rows whose values
 * the input chooses (NULLs, text or reals in integer columns, huge and negative numbers, dangling
 * string and chain ids, long strings), some tables left out and some columns dropped. The database
 * is written to a temporary file and imported. Nothing may crash, leak or read out of bounds; an
 * import either fails with a message that names the file, or every batch it emits opens in the real
 * decoder with its events inside the batch's time span, each call site's frames follow it in its
 * batch, and every call names a call site already sent.
 *
 * Input: two bytes, the tables left out (bit i: table i); then operations until the input ends:
 * 0xFF, a table byte and a column byte drop that column; 0xFE, a table byte and a shape byte make
 * that table one whose reading would run the file's SQL (see reshape), which the import must
 * refuse; any other byte b inserts a row into table b % N_TABLES, one value per column, each a tag
 * byte and its bytes (see put_value).
 * `fuzz_nsys --write-seeds DIR` writes small exports that reach each table, call chains with and
 * without the runtime's offset, one of each reshaping, the rows of the sample export with CUDA
 * backtraces, and hostile ones: StringIds ids chosen to collide in the importer's tables
 * (hostile.h), and calls with long chains of long names.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "hostile.h"
#include "nsys.h"
#include "seeds.h"
#include "synctop/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define MAX_COLS     16
#define HUGE_UNIT    4200      /* a long string is a multiple of this: up to just over the importer's 1 MiB cut */
#define HUGE_BUDGET  (1100u << 10) /* long-string bytes per input: one of them */
#define OP_DROP      0xFF
#define OP_RESHAPE   0xFE

typedef struct table_spec {
    const char *name;
    const char *cols[MAX_COLS]; /* "name TYPE" */
} table_spec;

static const table_spec tables[] = {
    {"StringIds", {"id INTEGER", "value TEXT"}},
    {"CUPTI_ACTIVITY_KIND_RUNTIME",
     {"start INTEGER", "\"end\" INTEGER", "eventClass INTEGER", "globalTid INTEGER", "correlationId INTEGER",
      "nameId INTEGER", "returnValue INTEGER", "callchainId INTEGER"}},
    {"CUDA_CALLCHAINS",
     {"id INTEGER", "symbol INTEGER", "module INTEGER", "unresolved INTEGER", "originalIP INTEGER",
      "stackDepth INTEGER"}},
    {"CUPTI_ACTIVITY_KIND_KERNEL",
     {"start INTEGER", "\"end\" INTEGER", "deviceId INTEGER", "contextId INTEGER", "streamId INTEGER",
      "correlationId INTEGER", "globalPid INTEGER", "shortName INTEGER", "demangledName INTEGER", "gridX INTEGER",
      "gridY INTEGER", "gridZ INTEGER", "blockX INTEGER", "blockY INTEGER", "blockZ INTEGER"}},
    {"CUPTI_ACTIVITY_KIND_MEMCPY",
     {"start INTEGER", "\"end\" INTEGER", "deviceId INTEGER", "contextId INTEGER", "streamId INTEGER",
      "correlationId INTEGER", "globalPid INTEGER", "bytes INTEGER", "copyKind INTEGER", "srcKind INTEGER",
      "dstKind INTEGER", "srcDeviceId INTEGER", "dstDeviceId INTEGER"}},
    {"CUPTI_ACTIVITY_KIND_MEMSET",
     {"start INTEGER", "\"end\" INTEGER", "deviceId INTEGER", "contextId INTEGER", "streamId INTEGER",
      "correlationId INTEGER", "globalPid INTEGER", "bytes INTEGER", "value INTEGER", "memKind INTEGER"}},
    {"CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
     {"start INTEGER", "\"end\" INTEGER", "deviceId INTEGER", "contextId INTEGER", "streamId INTEGER",
      "correlationId INTEGER", "globalPid INTEGER", "syncType INTEGER", "eventId INTEGER"}},
    {"NVTX_EVENTS",
     {"start INTEGER", "\"end\" INTEGER", "eventType INTEGER", "text TEXT", "globalTid INTEGER", "textId INTEGER"}},
    {"TARGET_INFO_GPU",
     {"id INTEGER", "name TEXT", "smCount INTEGER", "totalMemory INTEGER", "computeMajor INTEGER",
      "computeMinor INTEGER"}},
    {"PROCESSES", {"globalPid INTEGER", "pid INTEGER", "name TEXT"}},
    {"ThreadNames", {"nameId INTEGER", "priority INTEGER", "globalTid INTEGER"}},
};
#define N_TABLES (sizeof tables / sizeof tables[0])
enum { T_STRINGS, T_RUNTIME, T_CHAINS, T_KERNEL, T_MEMCPY, T_MEMSET, T_SYNC, T_NVTX, T_GPU, T_PROCESSES, T_THREADS };

/* Numbers where the importer's checks change their answer. */
static const int64_t specials[] = {0,
                                   1,
                                   -1,
                                   2,
                                   3,
                                   INT64_MAX,
                                   INT64_MIN,
                                   4294967295ll,
                                   4294967296ll,
                                   0xFFFFFF,
                                   1ll << 24,
                                   (1ll << 24) | 1,
                                   1ll << 48,
                                   1023,
                                   1024,
                                   1000000,
                                   65535,
                                   65536,
                                   2147483647,
                                   -2147483648ll,
                                   1700000000000000000ll};
#define N_SPECIALS (sizeof specials / sizeof specials[0])

static size_t n_cols(const table_spec *t) {
    size_t n = 0;
    while (n < MAX_COLS && t->cols[n])
        n++;
    return n;
}

/* ---- the input as a program ---- */

typedef struct reader {
    const uint8_t *p;
    size_t n, at, huge;
} reader;

static uint8_t rd_byte(reader *r) { return r->at < r->n ? r->p[r->at++] : 0; }

static uint64_t rd_bytes(reader *r, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)rd_byte(r) << (8 * i);
    return v;
}

/* Binds parameter i of s to the value the next tag byte and its bytes say (only reads it when s is
 * NULL): 0 NULL, 1 an 8-bit integer, 2 a 16-bit one, 3 a 64-bit one, 4 a special number, 5 text (a
 * length byte and its bytes), 6 a long text (a byte times HUGE_UNIT bytes of one byte), 7 a real,
 * 8 a blob (as 5), 9 a timestamp near 1e9 ns. */
static void put_value(reader *r, sqlite3_stmt *s, int i) {
    uint8_t tag = rd_byte(r) % 10;
    if (s == NULL) {
        static const uint8_t size[10] = {0, 1, 2, 8, 1, 0, 2, 8, 0, 2};
        size_t n = tag == 5 || tag == 8 ? rd_byte(r) : size[tag];
        r->at = n < r->n - r->at ? r->at + n : r->n;
        return;
    }
    switch (tag) {
    case 1: sqlite3_bind_int64(s, i, (int8_t)rd_byte(r)); break;
    case 2: sqlite3_bind_int64(s, i, (int64_t)rd_bytes(r, 2)); break;
    case 3: sqlite3_bind_int64(s, i, (int64_t)rd_bytes(r, 8)); break;
    case 4: sqlite3_bind_int64(s, i, specials[rd_byte(r) % N_SPECIALS]); break;
    case 5:
    case 8: {
        size_t len = rd_byte(r);
        if (len > r->n - r->at)
            len = r->n - r->at;
        if (tag == 5)
            sqlite3_bind_text(s, i, (const char *)r->p + r->at, (int)len, SQLITE_TRANSIENT);
        else
            sqlite3_bind_blob(s, i, r->p + r->at, (int)len, SQLITE_TRANSIENT);
        r->at += len;
        break;
    }
    case 6: {
        size_t len = (size_t)rd_byte(r) * HUGE_UNIT;
        char fill = (char)rd_byte(r);
        if (r->huge + len > HUGE_BUDGET)
            len = 0;
        r->huge += len;
        char *text = malloc(len ? len : 1);
        if (text == NULL)
            abort();
        memset(text, fill, len);
        sqlite3_bind_text(s, i, text, (int)len, free);
        break;
    }
    case 7: {
        uint64_t bits = rd_bytes(r, 8);
        double d;
        memcpy(&d, &bits, sizeof d);
        sqlite3_bind_double(s, i, d);
        break;
    }
    case 9: sqlite3_bind_int64(s, i, 1000000000ll + (int64_t)rd_bytes(r, 2) * 1000); break;
    default: sqlite3_bind_null(s, i); break;
    }
}

static void exec(sqlite3 *db, const char *sql) {
    sqlite3_exec(db, sql, NULL, NULL, NULL); /* a failure (a column that cannot go) leaves it as it was */
}

/* Table t made one the importer must refuse: shape 0 adds a generated column (a costly one, should
 * it ever be read), 1 puts a view in its place, 2 adds a column that hides the rowid. Returns
 * whether SQLite made the change. */
static int reshape(sqlite3 *db, const char *t, uint8_t shape) {
    char sql[512];
    switch (shape % 3) {
    case 0:
        snprintf(sql, sizeof sql,
                 "ALTER TABLE %s ADD COLUMN g INTEGER GENERATED ALWAYS AS (length(printf('%%.*c', 300000, 'x'))) "
                 "VIRTUAL",
                 t);
        break;
    case 1: snprintf(sql, sizeof sql, "ALTER TABLE %s RENAME TO %s_; CREATE VIEW %s AS SELECT * FROM %s_", t, t, t, t); break;
    default: snprintf(sql, sizeof sql, "ALTER TABLE %s ADD COLUMN oid INTEGER", t); break;
    }
    return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK;
}

/* The empty database with every table, serialized once. */
static unsigned char *empty_db;
static sqlite3_int64 empty_len;

static void make_empty_db(void) {
    sqlite3 *db = NULL;
    char sql[2048];
    if (sqlite3_open(":memory:", &db) != SQLITE_OK)
        abort();
    exec(db, "BEGIN");
    for (size_t t = 0; t < N_TABLES; t++) {
        size_t o = (size_t)snprintf(sql, sizeof sql, "CREATE TABLE %s (", tables[t].name);
        for (size_t c = 0; c < n_cols(&tables[t]); c++)
            o += (size_t)snprintf(sql + o, sizeof sql - o, "%s%s", c ? ", " : "", tables[t].cols[c]);
        snprintf(sql + o, sizeof sql - o, ")");
        exec(db, sql);
    }
    exec(db, "COMMIT");
    empty_db = sqlite3_serialize(db, "main", &empty_len, 0);
    sqlite3_close(db);
    if (empty_db == NULL)
        abort();
}

/* The database the input describes, serialized (sqlite3_free it); NULL when SQLite runs out of
 * memory. *reshaped: whether a table was made one the importer must refuse. */
static unsigned char *build(const uint8_t *data, size_t size, sqlite3_int64 *len, int *reshaped) {
    sqlite3 *db = NULL;
    unsigned char *copy = sqlite3_malloc64((sqlite3_uint64)empty_len);
    if (copy == NULL || sqlite3_open(":memory:", &db) != SQLITE_OK) {
        sqlite3_free(copy);
        sqlite3_close(db);
        return NULL;
    }
    memcpy(copy, empty_db, (size_t)empty_len);
    if (sqlite3_deserialize(db, "main", copy, empty_len, empty_len,
                            SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_RESIZEABLE) != SQLITE_OK) {
        sqlite3_close(db);
        return NULL;
    }
    reader r = {.p = data, .n = size};
    unsigned left_out = (unsigned)rd_bytes(&r, 2);
    sqlite3_stmt *ins[N_TABLES] = {0};
    char sql[2048];
    exec(db, "BEGIN");
    for (size_t t = 0; t < N_TABLES; t++) {
        if (left_out & (1u << t)) {
            snprintf(sql, sizeof sql, "DROP TABLE %s", tables[t].name);
            exec(db, sql);
        }
    }
    while (r.at < r.n) {
        uint8_t op = rd_byte(&r);
        if (op == OP_RESHAPE) {
            const char *t = tables[rd_byte(&r) % N_TABLES].name;
            for (size_t i = 0; i < N_TABLES; i++) { /* prepared against the old table */
                sqlite3_finalize(ins[i]);
                ins[i] = NULL;
            }
            *reshaped |= reshape(db, t, rd_byte(&r));
            continue;
        }
        if (op == OP_DROP) {
            const table_spec *t = &tables[rd_byte(&r) % N_TABLES];
            const char *col = t->cols[rd_byte(&r) % n_cols(t)];
            snprintf(sql, sizeof sql, "ALTER TABLE %s DROP COLUMN %.*s", t->name, (int)strcspn(col, " "), col);
            for (size_t i = 0; i < N_TABLES; i++) { /* prepared against the old columns */
                sqlite3_finalize(ins[i]);
                ins[i] = NULL;
            }
            exec(db, sql);
            continue;
        }
        size_t t = op % N_TABLES;
        if (ins[t] == NULL) { /* the table's columns as they are now */
            snprintf(sql, sizeof sql, "SELECT * FROM %s", tables[t].name);
            sqlite3_stmt *probe = NULL;
            if (sqlite3_prepare_v2(db, sql, -1, &probe, NULL) != SQLITE_OK) {
                sqlite3_finalize(probe);
                for (size_t c = 0; c < n_cols(&tables[t]); c++)
                    put_value(&r, NULL, 0); /* the table was left out: its row is read all the same */
                continue;
            }
            int n = sqlite3_column_count(probe);
            sqlite3_finalize(probe);
            size_t o = (size_t)snprintf(sql, sizeof sql, "INSERT INTO %s VALUES (", tables[t].name);
            for (int c = 0; c < n; c++)
                o += (size_t)snprintf(sql + o, sizeof sql - o, "%s?", c ? ", " : "");
            snprintf(sql + o, sizeof sql - o, ")");
            if (sqlite3_prepare_v2(db, sql, -1, &ins[t], NULL) != SQLITE_OK) {
                sqlite3_finalize(ins[t]);
                ins[t] = NULL;
                continue;
            }
        }
        /* one value per column the table was declared with; those of dropped columns are read and
         * bound past the end, which SQLite refuses */
        for (size_t c = 0; c < n_cols(&tables[t]); c++)
            put_value(&r, ins[t], (int)c + 1);
        sqlite3_step(ins[t]);
        sqlite3_reset(ins[t]);
        sqlite3_clear_bindings(ins[t]);
    }
    for (size_t i = 0; i < N_TABLES; i++)
        sqlite3_finalize(ins[i]);
    exec(db, "COMMIT");
    unsigned char *bytes = sqlite3_serialize(db, "main", len, 0);
    sqlite3_close(db);
    return bytes;
}

/* ---- checking what the import emits ---- */

typedef struct checker {
    uint64_t producer;
    uint8_t *seen; /* call-site ids sent by this producer */
    size_t cap;
} checker;

static checker ck;

static int site_seen(uint32_t id) { return id < ck.cap && ck.seen[id]; }

static void site_mark(uint32_t id) {
    if (id >= ck.cap) {
        size_t cap = ck.cap ? ck.cap : 64;
        while (cap <= id)
            cap *= 2;
        uint8_t *p = realloc(ck.seen, cap);
        if (p == NULL)
            abort();
        memset(p + ck.cap, 0, cap - ck.cap);
        ck.seen = p;
        ck.cap = cap;
    }
    ck.seen[id] = 1;
}

static int check_batch(void *ctx, const void *batch, size_t len, err_msg *err) {
    (void)ctx;
    (void)err;
    tp_dec d = {0};
    err_msg derr;
    if (tp_dec_open(&d, batch, len, &derr) != 0) {
        fprintf(stderr, "emitted batch does not decode: %s\n", derr.msg);
        abort();
    }
    if (d.hdr.producer != ck.producer) { /* a new process: its own call-site ids */
        ck.producer = d.hdr.producer;
        if (ck.cap)
            memset(ck.seen, 0, ck.cap);
    }
    const tp_record *r;
    uint32_t site = 0, frames = 0, next = 0;
    while ((r = tp_dec_next_record(&d)) != NULL) {
        uint64_t a, b;
        tp_record_span(r, &a, &b);
        if (!TP_KIND_IS_META(r->head.kind) && (a < d.hdr.t_min || b > d.hdr.t_max || b < a))
            abort();
        if (r->head.kind != TP_K_FRAME && next != frames) {
            fprintf(stderr, "call site %u: %u of its %u frames follow it\n", site, next, frames);
            abort();
        }
        switch (r->head.kind) {
        case TP_K_CALLSITE:
            if (r->callsite.id == 0 || site_seen(r->callsite.id) || r->callsite.n_frames == 0) {
                fprintf(stderr, "call site %u (%u frames) sent twice, or empty\n", r->callsite.id,
                        r->callsite.n_frames);
                abort();
            }
            site_mark(r->callsite.id);
            site = r->callsite.id;
            frames = r->callsite.n_frames;
            next = 0;
            break;
        case TP_K_FRAME:
            if (site == 0 || r->frame.callsite != site || r->frame.index != next ||
                r->head.flags != TP_FRAME_NATIVE) {
                fprintf(stderr, "frame %u of call site %u out of place\n", r->frame.index, r->frame.callsite);
                abort();
            }
            next++;
            break;
        case TP_K_API:
            if (r->api.callsite != 0 && !site_seen(r->api.callsite)) {
                fprintf(stderr, "a call names call site %u, not sent\n", r->api.callsite);
                abort();
            }
            break;
        default: break;
        }
    }
    if (next != frames) {
        fprintf(stderr, "call site %u: %u of its %u frames in its batch\n", site, next, frames);
        abort();
    }
    tp_dec_free(&d);
    return 0;
}

/* ---- seeds ---- */

typedef struct prog {
    uint8_t *p;
    size_t n, cap;
} prog;

static void emit(prog *g, const void *bytes, size_t n) {
    if (g->n + n > g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 1024;
        while (cap < g->n + n)
            cap *= 2;
        uint8_t *p = realloc(g->p, cap);
        if (p == NULL)
            abort();
        g->p = p;
        g->cap = cap;
    }
    memcpy(g->p + g->n, bytes, n);
    g->n += n;
}

static void emit_byte(prog *g, uint8_t b) { emit(g, &b, 1); }

static void emit_int(prog *g, int64_t v) {
    emit_byte(g, 3);
    for (int i = 0; i < 8; i++)
        emit_byte(g, (uint8_t)((uint64_t)v >> (8 * i)));
}

static void emit_text(prog *g, const char *s, size_t n) {
    if (n > 255)
        n = 255;
    emit_byte(g, 5);
    emit_byte(g, (uint8_t)n);
    emit(g, s, n);
}

/* A row of integers (NUL: NULL), or the strings of text where it has one (MAX_COLS of them). */
#define NUL INT64_MIN
static void emit_row(prog *g, int table, const int64_t *v, const char *const *text) {
    emit_byte(g, (uint8_t)table);
    for (size_t c = 0; c < n_cols(&tables[table]); c++) {
        if (text && text[c])
            emit_text(g, text[c], strlen(text[c]));
        else if (v[c] == NUL)
            emit_byte(g, 0);
        else
            emit_int(g, v[c]);
    }
}

/* One process (pid 1, thread 1) whose copy waits, with a backtrace: the runtime entry, the
 * program's function and main, inside two frames of libcupti. The calls' callchainId is the chain's
 * id minus off. With named == 0 no frame has the call's name. */
static void small_export(prog *g, int off, int named) {
    static const char *const strs[] = {"cudaMemcpy_v3020", "cudaLaunchKernel_v7000",   "saxpy",
                                       "main",             "0x7f0000001000",           "/opt/nsys/libcupti.so.12",
                                       "/usr/lib/libcudart.so.12", "/home/u/app",      "pageable copy",
                                       "cudaMemcpy",       "cudaLaunchKernel"};
    const int64_t tid = (1ll << 24) | 1, pid = 1ll << 24;
    emit_byte(g, 0);
    emit_byte(g, 0);
    for (int i = 0; i < 11; i++) {
        int64_t v[] = {i + 1, NUL};
        const char *const t[MAX_COLS] = {NULL, strs[i]};
        emit_row(g, T_STRINGS, v, t);
    }
    /* cudaMemcpy (corr 7) and cudaLaunchKernel (corr 8), the copy stored twice */
    int64_t rt1[] = {1000, 5000, 1, tid, 7, 1, 0, 1 - off};
    int64_t rt2[] = {1000, 4900, 1, tid, 7, 1, 0, NUL};
    int64_t rt3[] = {6000, 6100, 1, tid, 8, 2, 0, 2 - off};
    emit_row(g, T_RUNTIME, rt1, NULL);
    emit_row(g, T_RUNTIME, rt2, NULL);
    emit_row(g, T_RUNTIME, rt3, NULL);
    for (int chain = 1; chain <= 2; chain++) {
        int64_t f0[] = {chain, 5, 6, 1, 139637976911872ll, 0};
        int64_t f1[] = {chain, 5, 6, 1, 139637976911900ll, 1};
        int64_t f2[] = {chain, named ? 9 + chain : 3, 7, NUL, 139637976912000ll, 2};
        int64_t f3[] = {chain, 4, 8, NUL, 4200186, 3};
        emit_row(g, T_CHAINS, f0, NULL);
        emit_row(g, T_CHAINS, f1, NULL);
        emit_row(g, T_CHAINS, f2, NULL);
        emit_row(g, T_CHAINS, f3, NULL);
    }
    int64_t mc[] = {2000, 4000, 0, 1, 7, 7, pid, 1 << 20, 1, 0, 2, NUL, NUL};
    emit_row(g, T_MEMCPY, mc, NULL);
    int64_t ms[] = {4100, 4200, 0, 1, 7, 9, pid, 4096, 0, 2};
    emit_row(g, T_MEMSET, ms, NULL);
    int64_t kn[] = {6200, 9000, 0, 1, 7, 8, pid, 3, 3, 4, 1, 1, 256, 1, 1};
    emit_row(g, T_KERNEL, kn, NULL);
    int64_t sy[] = {9000, 9100, 0, 1, 7, 10, pid, 3, 4294967295ll};
    emit_row(g, T_SYNC, sy, NULL);
    int64_t rt4[] = {8900, 9200, 1, tid, 10, 1, 0, NUL};
    emit_row(g, T_RUNTIME, rt4, NULL);
    int64_t nv[] = {900, 9500, 59, NUL, tid, 9};
    emit_row(g, T_NVTX, nv, NULL);
    int64_t gpu[] = {0, NUL, 108, 42949672960ll, 8, 0};
    const char *const gname[MAX_COLS] = {NULL, "NVIDIA A100-SXM4-40GB"};
    emit_row(g, T_GPU, gpu, gname);
    int64_t proc[] = {pid, 1, NUL};
    const char *const pname[MAX_COLS] = {NULL, NULL, "app"};
    emit_row(g, T_PROCESSES, proc, pname);
    int64_t th[] = {4, 0, tid};
    emit_row(g, T_THREADS, th, NULL);
}

/* The small export, and 600 strings more whose ids the old hash of the importer's id map sent to
 * one slot. */
static void chosen_ids_export(prog *g) {
    small_export(g, 1, 1);
    for (size_t i = 0; i < 600; i++) {
        int64_t v[] = {(int64_t)hostile_u64map_key(i), NUL};
        const char *const t[MAX_COLS] = {NULL, "s"};
        emit_row(g, T_STRINGS, v, t);
    }
}

/* A long text: units times HUGE_UNIT bytes of fill. */
static void emit_huge(prog *g, uint8_t units, char fill) {
    emit_byte(g, 6);
    emit_byte(g, units);
    emit_byte(g, (uint8_t)fill);
}

/* Four calls, each with a chain of its own of 100 frames; the calls and the frames named by texts
 * of two HUGE_UNITs (over the 4 KiB a frame's name keeps), the frames by two of them in turn. */
static void long_chains_export(prog *g) {
    const int64_t tid = (1ll << 24) | 1;
    emit_byte(g, 0);
    emit_byte(g, 0);
    for (int i = 0; i < 3; i++) {
        emit_byte(g, T_STRINGS);
        emit_int(g, i + 1);
        emit_huge(g, 2, (char)('A' + i % 2));
    }
    int64_t v[] = {4, NUL};
    const char *const t[MAX_COLS] = {NULL, "/home/u/libapp.so"};
    emit_row(g, T_STRINGS, v, t);
    for (int c = 0; c < 4; c++) {
        int64_t rt[] = {1000 + 10 * c, 1005 + 10 * c, 1, tid, 20 + c, 1, 0, c};
        emit_row(g, T_RUNTIME, rt, NULL);
        for (int d = 0; d < 100; d++) {
            int64_t f[] = {c + 1, 2 + d % 2, 4, NUL, NUL, d};
            emit_row(g, T_CHAINS, f, NULL);
        }
    }
}

#ifdef NSYS_TRACE_DIR
/* The sample export's rows of every table here, but only the strings, processes and threads its
 * CUDA rows name. */
static void real_export(prog *g, const char *file) {
    static const char *const where[N_TABLES] = {
        [T_STRINGS] = "WHERE id IN (SELECT symbol FROM CUDA_CALLCHAINS UNION SELECT module FROM CUDA_CALLCHAINS "
                      "UNION SELECT nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME UNION SELECT shortName FROM "
                      "CUPTI_ACTIVITY_KIND_KERNEL UNION SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL UNION "
                      "SELECT textId FROM NVTX_EVENTS UNION SELECT nameId FROM ThreadNames)",
        [T_PROCESSES] = "WHERE pid IN (SELECT (globalTid >> 24) & 16777215 FROM CUPTI_ACTIVITY_KIND_RUNTIME)",
        [T_THREADS] = "WHERE globalTid IN (SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME)",
    };
    char path[4096], sql[1024];
    snprintf(path, sizeof path, "%s/%s", NSYS_TRACE_DIR, file);
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return;
    }
    emit_byte(g, 0);
    emit_byte(g, 0);
    for (size_t t = 0; t < N_TABLES; t++) {
        snprintf(sql, sizeof sql, "SELECT * FROM %s %s", tables[t].name, where[t] ? where[t] : "");
        sqlite3_stmt *s = NULL;
        if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK) {
            sqlite3_finalize(s);
            continue;
        }
        int at[MAX_COLS]; /* our column c is its column at[c], -1 when it has none */
        for (size_t c = 0; c < n_cols(&tables[t]); c++) {
            const char *col = tables[t].cols[c];
            size_t n = strcspn(col, " ");
            if (*col == '"') {
                col++;
                n -= 2;
            }
            at[c] = -1;
            for (int i = 0; i < sqlite3_column_count(s); i++)
                if (strlen(sqlite3_column_name(s, i)) == n && strncmp(sqlite3_column_name(s, i), col, n) == 0)
                    at[c] = i;
        }
        while (sqlite3_step(s) == SQLITE_ROW) {
            emit_byte(g, (uint8_t)t);
            for (size_t c = 0; c < n_cols(&tables[t]); c++) {
                int i = at[c];
                int type = i < 0 ? SQLITE_NULL : sqlite3_column_type(s, i);
                if (type == SQLITE_INTEGER)
                    emit_int(g, sqlite3_column_int64(s, i));
                else if (type == SQLITE_TEXT)
                    emit_text(g, (const char *)sqlite3_column_text(s, i), (size_t)sqlite3_column_bytes(s, i));
                else
                    emit_byte(g, 0);
            }
        }
        sqlite3_finalize(s);
    }
    sqlite3_close(db);
}
#endif

static void write_seeds(const char *dir) {
    static const struct {
        const char *name;
        int off, named;
    } smalls[] = {{"offset1.bin", 1, 1}, {"offset0.bin", 0, 1}, {"unnamed.bin", 0, 0}};
    for (size_t i = 0; i < sizeof smalls / sizeof smalls[0]; i++) {
        prog g = {0};
        small_export(&g, smalls[i].off, smalls[i].named);
        fuzz_write_seed(dir, smalls[i].name, g.p, g.n);
        free(g.p);
    }
    for (uint8_t shape = 0; shape < 3; shape++) {
        prog g = {0};
        small_export(&g, 1, 1);
        emit_byte(&g, OP_RESHAPE);
        emit_byte(&g, shape == 1 ? T_STRINGS : T_KERNEL);
        emit_byte(&g, shape);
        char name[32];
        snprintf(name, sizeof name, "reshaped%u.bin", shape);
        fuzz_write_seed(dir, name, g.p, g.n);
        free(g.p);
    }
    static const struct {
        const char *name;
        void (*make)(prog *g);
    } hostile[] = {{"chosen-ids.bin", chosen_ids_export}, {"long-chains.bin", long_chains_export}};
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        prog g = {0};
        hostile[i].make(&g);
        fuzz_write_seed(dir, hostile[i].name, g.p, g.n);
        free(g.p);
    }
#ifdef NSYS_TRACE_DIR
    prog g = {0};
    real_export(&g, "saxpy_mpi_a100_rank0.sqlite");
    if (g.n > 2)
        fuzz_write_seed(dir, "saxpy.bin", g.p, g.n);
    free(g.p);
#endif
}

/* ---- the target ---- */

static char db_path[4096];

static void remove_db(void) {
    if (db_path[0])
        unlink(db_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *dir = fuzz_seed_dir(*argc, *argv);
    if (dir != NULL) {
        write_seeds(dir);
        exit(0);
    }
    make_empty_db();
    const char *tmp = getenv("TMPDIR");
    snprintf(db_path, sizeof db_path, "%s/fuzz_nsys-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(db_path);
    if (fd < 0) {
        perror(db_path);
        exit(1);
    }
    close(fd);
    atexit(remove_db);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sqlite3_int64 len = 0;
    int reshaped = 0;
    unsigned char *bytes = build(data, size, &len, &reshaped);
    if (bytes == NULL)
        return 0;
    FILE *f = fopen(db_path, "wb");
    if (f == NULL || fwrite(bytes, 1, (size_t)len, f) != (size_t)len || fclose(f) != 0)
        abort();
    sqlite3_free(bytes);
    ck.producer = 0;
    import_opts opts = {.producer = 1, .batch_records = 64, .max_events = 100000};
    import_stats st;
    err_msg err = {{0}};
    int rc = nsys_import(db_path, &opts, check_batch, NULL, &st, &err);
    if (rc != 0 && strstr(err.msg, db_path) == NULL) {
        fprintf(stderr, "error without the file's name: %s\n", err.msg);
        abort();
    }
    if (reshaped && rc == 0) {
        fprintf(stderr, "a table computed by the file's SQL was read\n");
        abort();
    }
    return 0;
}
