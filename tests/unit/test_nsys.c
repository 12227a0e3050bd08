/*
 * Nsight Systems SQLite import: the three real exports in samples/traces/nsys must import with the
 * counts and summed durations that plain SQL on the same file gives (read here with libsqlite3, not
 * through the importer), an export without its optional tables must still open, damaged rows are
 * skipped and counted, and a corrupt file or a foreign SQLite database fail with a message that
 * names the file. Every batch is decoded with the real decoder.
 */
#include <sqlite3.h>
#include <sys/stat.h>

#include "nsys.h"
#include "synctop/codec.h"
#include "task.h"

#ifndef NSYS_TRACE_DIR
#error "NSYS_TRACE_DIR must name samples/traces/nsys"
#endif

#define MAX_APIS 256

typedef struct api_sum {
    char name[128];
    uint64_t n, n_blocking, ns;
} api_sum;

typedef struct got {
    tp_strtab *strs;
    uint64_t producer;
    size_t producers, batches;
    uint64_t kinds[TP_K_MAX_];
    uint64_t sync_types[TP_SYNC_MAX_];
    uint32_t pids[8];
    char devices[4][128];
    size_t n_devices;
    api_sum apis[MAX_APIS];
    size_t n_apis;
} got;

static api_sum *api_at(api_sum *a, size_t *n, const char *name) {
    for (size_t i = 0; i < *n; i++)
        if (strcmp(a[i].name, name) == 0)
            return &a[i];
    ASSERT_LT(*n, MAX_APIS);
    api_sum *x = &a[(*n)++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    return x;
}

static void str_copy(const got *g, uint32_t id, char *out, size_t size) {
    uint32_t len = 0;
    const char *s = id ? tp_strtab_get(g->strs, id, &len) : NULL;
    if (s == NULL)
        len = 0;
    if (len >= size)
        len = (uint32_t)size - 1;
    memcpy(out, s ? s : "", len);
    out[len] = '\0';
}

static int collect(void *ctx, const void *batch, size_t len, err_msg *err) {
    (void)err;
    got *g = ctx;
    tp_dec d = {0};
    err_msg derr;
    if (tp_dec_open(&d, batch, len, &derr) != 0)
        TASK_FAIL_("emitted batch %zu does not decode: %s", g->batches, derr.msg);
    if (g->batches == 0 || d.hdr.producer != g->producer) { /* a new process: its own strings */
        ASSERT(d.hdr.flags & TP_BF_KEYFRAME);
        tp_strtab_destroy(&g->strs);
        g->strs = tp_strtab_new();
        ASSERT_NOT_NULL(g->strs);
        g->producer = d.hdr.producer;
        g->producers++;
    }
    ASSERT_OK(tp_dec_load_strings(&d, g->strs));
    const tp_record *r;
    while ((r = tp_dec_next_record(&d)) != NULL) {
        g->kinds[r->head.kind]++;
        char name[128];
        switch (r->head.kind) {
        case TP_K_PROCESS:
            ASSERT_LT(g->producers - 1, 8);
            g->pids[g->producers - 1] = r->process.pid;
            break;
        case TP_K_DEVICE:
            if (g->n_devices < 4)
                str_copy(g, r->device.name, g->devices[g->n_devices++], sizeof g->devices[0]);
            break;
        case TP_K_SYNC: g->sync_types[r->sync.sync_type < TP_SYNC_MAX_ ? r->sync.sync_type : 0]++; break;
        case TP_K_API: {
            str_copy(g, r->api.name, name, sizeof name);
            api_sum *a = api_at(g->apis, &g->n_apis, name);
            a->n++;
            a->ns += r->api.end - r->api.start;
            if (r->api.flags & TP_F_BLOCKING)
                a->n_blocking++;
            break;
        }
        default: break;
        }
    }
    tp_dec_free(&d);
    g->batches++;
    return 0;
}

static const char *sample(const char *file) {
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", NSYS_TRACE_DIR, file);
    struct stat sb;
    if (stat(path, &sb) != 0)
        TASK_FAIL_("missing export %s", path);
    return path;
}

static void import_ok(const char *path, got *g, kineto_stats *st) {
    memset(g, 0, sizeof *g);
    err_msg err = {{0}};
    int rc = nsys_import(path, NULL, collect, g, st, &err);
    if (rc != 0)
        TASK_FAIL_("import of %s failed: %s", path, err.msg);
    tp_strtab_destroy(&g->strs);
}

/* ---- what plain SQL says ---- */

static sqlite3 *db_open(const char *path, int writable) {
    sqlite3 *db = NULL;
    ASSERT_EQ(sqlite3_open_v2(path, &db, writable ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    return db;
}

static int64_t sql_int(sqlite3 *db, const char *sql) {
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK)
        TASK_FAIL_("%s: %s", sql, sqlite3_errmsg(db));
    ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

static void sql_exec(sqlite3 *db, const char *sql) {
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        TASK_FAIL_("%s: %s", sql, msg ? msg : "?");
}

/* The calls per name: one per (thread, correlationId), the longest of the rows that share them
 * (SQLite gives a bare column from the row where max() is), named without a _vNNNN suffix. */
static size_t sql_apis(sqlite3 *db, api_sum *out) {
    static const char *sql =
        "SELECT s.value, max(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
        "WHERE r.correlationId > 0 GROUP BY r.globalTid, r.correlationId "
        "UNION ALL SELECT s.value, r.end - r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s "
        "ON s.id = r.nameId WHERE r.correlationId IS NULL OR r.correlationId = 0";
    sqlite3_stmt *s;
    ASSERT_EQ(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    size_t n = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
        char name[128];
        snprintf(name, sizeof name, "%s", (const char *)sqlite3_column_text(s, 0));
        char *v = strrchr(name, '_');
        if (v && v[1] == 'v' && v[2] && strspn(v + 2, "0123456789") == strlen(v + 2))
            *v = '\0';
        api_sum *a = api_at(out, &n, name);
        a->n++;
        a->ns += (uint64_t)sqlite3_column_int64(s, 1);
    }
    sqlite3_finalize(s);
    return n;
}

static void check_against_sql(const char *path, const got *g) {
    sqlite3 *db = db_open(path, 0);
    ASSERT_EQ(g->kinds[TP_K_KERNEL], sql_int(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"));
    if (sql_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_MEMCPY'"))
        ASSERT_EQ(g->kinds[TP_K_MEMCPY], sql_int(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY"));
    if (sql_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_SYNCHRONIZATION'"))
        ASSERT_EQ(g->kinds[TP_K_SYNC], sql_int(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"));
    if (sql_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'NVTX_EVENTS'"))
        ASSERT_EQ(g->kinds[TP_K_NVTX], sql_int(db, "SELECT count(*) FROM NVTX_EVENTS WHERE \"end\" IS NOT NULL "
                                                   "AND eventType IN (59, 60)"));
    api_sum want[MAX_APIS];
    size_t n = sql_apis(db, want);
    ASSERT_EQ(g->n_apis, n);
    for (size_t i = 0; i < n; i++) {
        const api_sum *a = NULL;
        for (size_t j = 0; j < g->n_apis; j++)
            if (strcmp(g->apis[j].name, want[i].name) == 0)
                a = &g->apis[j];
        if (a == NULL)
            TASK_FAIL_("%s: no %s calls imported", path, want[i].name);
        if (a->n != want[i].n || a->ns != want[i].ns)
            TASK_FAIL_("%s: %s: %llu calls, %llu ns imported; SQL says %llu, %llu", path, want[i].name,
                       (unsigned long long)a->n, (unsigned long long)a->ns, (unsigned long long)want[i].n,
                       (unsigned long long)want[i].ns);
        if (strstr(a->name, "Synchronize"))
            ASSERT_UEQ(a->n_blocking, a->n);
    }
    sqlite3_close(db);
}

static const api_sum *api_named(const got *g, const char *name) {
    for (size_t i = 0; i < g->n_apis; i++)
        if (strcmp(g->apis[i].name, name) == 0)
            return &g->apis[i];
    TASK_FAIL_("no %s calls imported", name);
    return NULL;
}

TEST(cloverleaf_counts_match_sql) {
    const char *path = sample("cloverleaf_a100_perlmutter.sqlite");
    got g;
    kineto_stats st;
    import_ok(path, &g, &st);
    check_against_sql(path, &g);
    const api_sum *a = api_named(&g, "cudaDeviceSynchronize");
    ASSERT_UEQ(a->n, 1312);
    ASSERT_UEQ(a->n_blocking, 1312);
    /* syncType 1 (EVENT_SYNCHRONIZE in its enum) on every row: typed by the call instead */
    ASSERT_UEQ(g.sync_types[TP_SYNC_CONTEXT], 1312);
    ASSERT_UEQ(g.producers, 1);
    ASSERT_UEQ(g.n_devices, 1);
    ASSERT_STR_EQ(g.devices[0], "NVIDIA A100-SXM4-80GB");
    ASSERT_UEQ(st.invalid, 0);
}

TEST(saxpy_counts_each_call_once) {
    const char *path = sample("saxpy_mpi_a100_rank0.sqlite");
    got g;
    kineto_stats st;
    import_ok(path, &g, &st);
    check_against_sql(path, &g);
    sqlite3 *db = db_open(path, 0);
    int64_t calls = sql_int(db, "SELECT count(DISTINCT correlationId) FROM CUPTI_ACTIVITY_KIND_RUNTIME");
    int64_t rows = sql_int(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME");
    sqlite3_close(db);
    ASSERT_LT(calls, rows);
    ASSERT_EQ(g.kinds[TP_K_API], calls);
    ASSERT_EQ(st.skipped, rows - calls);
    const api_sum *m = api_named(&g, "cudaMemcpy");
    ASSERT_UEQ(m->n, 15);
    ASSERT_UEQ(m->n_blocking, 15);
    ASSERT_UEQ(g.kinds[TP_K_NVTX], 22);
}

TEST(nvfuser_two_processes_and_stream_syncs) {
    const char *path = sample("nvfuser_h200_benchmark.sqlite");
    got g;
    kineto_stats st;
    import_ok(path, &g, &st);
    check_against_sql(path, &g);
    ASSERT_UEQ(g.producers, 2);
    ASSERT_EQ(g.pids[0], 50556);
    ASSERT_EQ(g.pids[1], 50922);
    /* stored as syncType 2 (STREAM_WAIT_EVENT in its enum) */
    ASSERT_UEQ(g.sync_types[TP_SYNC_STREAM], 2);
    ASSERT_UEQ(g.sync_types[TP_SYNC_CONTEXT], 1);
    const api_sum *a = api_named(&g, "cudaMemcpyAsync");
    ASSERT_GE(a->n_blocking, 1); /* a pageable copy */
    ASSERT_STR_EQ(g.devices[0], "NVIDIA H200");
}

static const char *copy_sample(const char *file, const char *as) {
    const char *dst = task_path(as);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && chmod u+w '%s'", sample(file), dst, dst);
    ASSERT_OK(system(cmd));
    return dst;
}

TEST(export_without_optional_tables_opens) {
    const char *path = copy_sample("cloverleaf_a100_perlmutter.sqlite", "bare.sqlite");
    sqlite3 *db = db_open(path, 1);
    sql_exec(db, "DROP TABLE TARGET_INFO_GPU; DROP TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION; "
                 "DROP TABLE ThreadNames; DROP TABLE PROCESSES; DROP TABLE CUPTI_ACTIVITY_KIND_MEMCPY");
    sqlite3_close(db);
    got g;
    kineto_stats st;
    import_ok(path, &g, &st);
    check_against_sql(path, &g);
    ASSERT_UEQ(g.kinds[TP_K_SYNC], 0);
    ASSERT_UEQ(g.kinds[TP_K_MEMCPY], 0);
    ASSERT_UEQ(api_named(&g, "cudaDeviceSynchronize")->n_blocking, 1312);
    ASSERT_UEQ(st.invalid, 0);
}

TEST(unusable_rows_are_skipped_and_counted) {
    const char *path = copy_sample("cloverleaf_a100_perlmutter.sqlite", "damaged.sqlite");
    sqlite3 *db = db_open(path, 1);
    sql_exec(db, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 0 WHERE rowid = 1;"
                 "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = -5 WHERE rowid = 2;"
                 "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 'x' WHERE rowid = 3;"
                 "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET shortName = 999999999, demangledName = 999999998 "
                 "WHERE rowid = 4;"
                 "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = start - 1 WHERE rowid = 5;"
                 "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = 999999999 WHERE rowid = 1;"
                 "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = NULL WHERE rowid = 2;"
                 "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET \"end\" = 'late' WHERE rowid = 1;");
    sqlite3_close(db);
    got g;
    kineto_stats st;
    import_ok(path, &g, &st);
    ASSERT_UEQ(st.invalid, 8);
    ASSERT_UEQ(g.kinds[TP_K_KERNEL], 1312 - 5);
    ASSERT_UEQ(g.kinds[TP_K_MEMCPY], 279 - 1);
    ASSERT_STR_CONTAINS(st.first_invalid, "CUPTI_ACTIVITY_KIND_KERNEL");
}

static void expect_error(const char *path, int code, const char *needle) {
    got g;
    memset(&g, 0, sizeof g);
    err_msg err = {{0}};
    int rc = nsys_import(path, NULL, collect, &g, NULL, &err);
    if (rc != code)
        TASK_FAIL_("expected error %d, got %d (%s)", code, rc, err.msg);
    ASSERT_STR_CONTAINS(err.msg, path);
    ASSERT_STR_CONTAINS(err.msg, needle);
    ASSERT_UEQ(g.batches, 0);
    tp_strtab_destroy(&g.strs);
}

TEST(corrupt_file_fails_clearly) {
    const char *path = copy_sample("saxpy_mpi_a100_rank0.sqlite", "corrupt.sqlite");
    FILE *f = fopen(path, "r+b");
    ASSERT_NOT_NULL(f);
    ASSERT_OK(fseek(f, 100, SEEK_SET)); /* the first page's b-tree: the schema */
    for (int i = 0; i < 3000; i++)
        fputc(0xA5, f);
    ASSERT_OK(fclose(f));
    expect_error(path, ERR_MALFORMED, "not a readable SQLite database");
}

TEST(foreign_sqlite_file_fails_clearly) {
    const char *path = task_path("other.sqlite");
    sqlite3 *db = NULL;
    ASSERT_EQ(sqlite3_open(path, &db), SQLITE_OK);
    sql_exec(db, "CREATE TABLE birds (name TEXT, wings INTEGER); INSERT INTO birds VALUES ('kiwi', 2)");
    sqlite3_close(db);
    expect_error(path, ERR_UNSUPPORTED, "not an Nsight Systems export");
}

TEST(report_names_the_blocking_calls) {
    static const struct {
        const char *file, *call;
    } cases[] = {{"cloverleaf_a100_perlmutter.sqlite", "cudaDeviceSynchronize (sync)"},
                 {"saxpy_mpi_a100_rank0.sqlite", "cudaMemcpy (memcpy)"},
                 {"nvfuser_h200_benchmark.sqlite", "cudaMemcpyAsync"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "'%s' report '%s' 2>&1", task_synctop(), sample(cases[i].file));
        FILE *p = popen(cmd, "r");
        ASSERT_NOT_NULL(p);
        static char out[1 << 16];
        size_t n = fread(out, 1, sizeof out - 1, p);
        out[n] = '\0';
        ASSERT_OK(pclose(p));
        ASSERT_STR_CONTAINS(out, "Top stalls");
        ASSERT_STR_CONTAINS(out, cases[i].call);
    }
}
