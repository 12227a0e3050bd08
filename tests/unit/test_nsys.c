/*
 * Nsight Systems SQLite import: the three real exports in samples/traces/nsys must import with the
 * counts and summed durations that plain SQL on the same file gives (read here with libsqlite3, not
 * through the importer), an export without its optional tables must still open, damaged rows are
 * skipped and counted, and a corrupt file or a foreign SQLite database fail with a message that
 * names the file. Every batch is decoded with the real decoder. CUDA API backtraces
 * (CUDA_CALLCHAINS) become call sites whose frames are the chain's rows from the call's own frame
 * out, as SQL over the file gives them, and hostile chain rows are skipped and counted. A file that
 * would run SQL of its own while read (generated columns, views, virtual tables) is refused, a row
 * too long is skipped and counted, work beyond the file's size is stopped, and committed rows still
 * in a -wal file are read.
 */
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hostile.h"
#include "load.h"
#include "nsys.h"
#include "nsys_db.h"
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

/* Call sites as emitted, and the calls that name one: kept out of `got` (and off the stack) for size. */
#define MAX_SITES       64
#define MAX_SITE_FRAMES 16
#define MAX_SITED       256

typedef struct site_frame {
    char func[256], module[256];
    unsigned kind;
    uint64_t pc;
    int seen;
} site_frame;

typedef struct site {
    uint32_t id, n_frames;
    site_frame f[MAX_SITE_FRAMES];
} site;

typedef struct sited_call {
    uint32_t correlation, callsite;
    char name[64];
} sited_call;

static struct {
    site sites[MAX_SITES];
    size_t n_sites;
    sited_call calls[MAX_SITED]; /* the API records with a call site */
    size_t n_calls;
} S;

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

/* An emitted batch opened for reading; it must decode. */
static void batch_open(tp_dec *d, const void *batch, size_t len) {
    err_msg derr;
    memset(d, 0, sizeof *d);
    if (tp_dec_open(d, batch, len, &derr) != 0)
        TASK_FAIL_("an emitted batch does not decode: %s", derr.msg);
}

static int collect(void *ctx, const void *batch, size_t len, err_msg *err) {
    (void)err;
    got *g = ctx;
    tp_dec d;
    batch_open(&d, batch, len);
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
    site *cur = NULL; /* frames follow their call site in the same batch */
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
        case TP_K_CALLSITE:
            ASSERT_NE(r->callsite.id, 0);
            for (size_t i = 0; i < S.n_sites; i++)
                ASSERT_NE(S.sites[i].id, r->callsite.id);
            ASSERT_LT(S.n_sites, MAX_SITES);
            ASSERT_LE(r->callsite.n_frames, MAX_SITE_FRAMES);
            cur = &S.sites[S.n_sites++];
            cur->id = r->callsite.id;
            cur->n_frames = r->callsite.n_frames;
            break;
        case TP_K_FRAME: {
            ASSERT_NOT_NULL(cur);
            ASSERT_UEQ(r->frame.callsite, cur->id);
            ASSERT_LT(r->frame.index, cur->n_frames);
            site_frame *f = &cur->f[r->frame.index];
            ASSERT(!f->seen);
            f->seen = 1;
            f->kind = r->head.flags;
            f->pc = r->frame.pc;
            str_copy(g, r->frame.func, f->func, sizeof f->func);
            str_copy(g, r->frame.module, f->module, sizeof f->module);
            break;
        }
        case TP_K_API: {
            str_copy(g, r->api.name, name, sizeof name);
            if (r->api.callsite) {
                ASSERT_LT(S.n_calls, MAX_SITED);
                sited_call *c = &S.calls[S.n_calls++];
                c->correlation = r->api.correlation;
                c->callsite = r->api.callsite;
                snprintf(c->name, sizeof c->name, "%s", name);
            }
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

static void import_ok(const char *path, got *g, import_stats *st) {
    memset(g, 0, sizeof *g);
    memset(&S, 0, sizeof S);
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
    import_stats st;
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
    import_stats st;
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
    import_stats st;
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

/* The kernels of one producer as emitted: their correlation ids in order. */
typedef struct kernel_order {
    uint64_t producer;
    uint32_t pid;
    uint32_t corr[4096];
    size_t n;
    size_t producers;
    uint32_t want_pid;
} kernel_order;

static int collect_kernels(void *ctx, const void *batch, size_t len, err_msg *err) {
    (void)err;
    kernel_order *o = ctx;
    tp_dec d;
    batch_open(&d, batch, len);
    if (o->producers == 0 || d.hdr.producer != o->producer) {
        o->producer = d.hdr.producer;
        o->producers++;
        o->pid = 0;
    }
    const tp_record *r;
    while ((r = tp_dec_next_record(&d)) != NULL) {
        if (r->head.kind == TP_K_PROCESS)
            o->pid = r->process.pid;
        if (r->head.kind == TP_K_KERNEL && o->pid == o->want_pid) {
            ASSERT_LT(o->n, sizeof o->corr / sizeof o->corr[0]);
            o->corr[o->n++] = r->kernel.correlation;
        }
    }
    return 0;
}

/* Each process's records come by start, and those that start together in the order the export
 * lists them (its tables in turn, each by rowid): two processes' kernels made to start together
 * in the middle of the run, one in seven of one's (about 280, spread over the table) and three of
 * the other's, and 25 more of the other's a microsecond later, come out as SQL orders them. */
TEST(records_that_start_together_keep_the_exports_order) {
    const char *path = copy_sample("torchrun_2proc_2gpu_h100.sqlite", "ties.sqlite");
    sqlite3 *db = db_open(path, 1);
    int64_t mid = sql_int(db, "SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start LIMIT 1 OFFSET 2000");
    char upd[1024];
    snprintf(upd, sizeof upd,
             "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = %lld, end = max(end, %lld) "
             "WHERE ((globalPid >> 24) & 16777215 = 144 AND rowid %% 7 = 0) OR rowid IN (SELECT rowid FROM "
             "CUPTI_ACTIVITY_KIND_KERNEL WHERE (globalPid >> 24) & 16777215 = 145 ORDER BY rowid LIMIT 3)",
             (long long)mid, (long long)mid);
    sql_exec(db, upd);
    snprintf(upd, sizeof upd, /* and 25 more, all of one process, at another time */
             "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = %lld, end = max(end, %lld) WHERE rowid IN (SELECT rowid "
             "FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE (globalPid >> 24) & 16777215 = 145 AND rowid %% 97 = 5)",
             (long long)mid + 1000, (long long)mid + 1000);
    sql_exec(db, upd);
    uint32_t pids[2] = {144, 145};
    for (int p = 0; p < 2; p++) {
        static kernel_order o;
        memset(&o, 0, sizeof o);
        o.want_pid = pids[p];
        import_stats st;
        err_msg err = {{0}};
        ASSERT_OK(nsys_import(path, NULL, collect_kernels, &o, &st, &err));
        ASSERT_UEQ(o.producers, 2);
        char sql[512];
        snprintf(sql, sizeof sql,
                 "SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE (globalPid >> 24) & 16777215 = %u "
                 "ORDER BY start, rowid",
                 pids[p]);
        sqlite3_stmt *q;
        ASSERT_EQ(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
        size_t i = 0;
        while (sqlite3_step(q) == SQLITE_ROW) {
            ASSERT_LT(i, o.n);
            ASSERT_UEQ(o.corr[i], (uint32_t)sqlite3_column_int64(q, 0));
            i++;
        }
        sqlite3_finalize(q);
        ASSERT_UEQ(i, o.n);
        ASSERT_GT(o.n, 1000);
    }
    sqlite3_close(db);
}

TEST(export_without_optional_tables_opens) {
    const char *path = copy_sample("cloverleaf_a100_perlmutter.sqlite", "bare.sqlite");
    sqlite3 *db = db_open(path, 1);
    sql_exec(db, "DROP TABLE TARGET_INFO_GPU; DROP TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION; "
                 "DROP TABLE ThreadNames; DROP TABLE PROCESSES; DROP TABLE CUPTI_ACTIVITY_KIND_MEMCPY");
    sqlite3_close(db);
    got g;
    import_stats st;
    import_ok(path, &g, &st);
    check_against_sql(path, &g);
    ASSERT_UEQ(g.kinds[TP_K_SYNC], 0);
    ASSERT_UEQ(g.kinds[TP_K_MEMCPY], 0);
    ASSERT_UEQ(api_named(&g, "cudaDeviceSynchronize")->n_blocking, 1312);
    ASSERT_UEQ(st.invalid, 0);
}

/* An export whose activity tables are all empty imports to no events and no batch of events. */
TEST(an_export_with_no_activity_imports_to_nothing) {
    const char *path = copy_sample("cloverleaf_a100_perlmutter.sqlite", "empty.sqlite");
    sqlite3 *db = db_open(path, 1);
    sql_exec(db, "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL; DELETE FROM CUPTI_ACTIVITY_KIND_MEMCPY; "
                 "DELETE FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION; DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME");
    ASSERT_EQ(sql_int(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"), 0);
    sqlite3_close(db);
    got g;
    import_stats st;
    import_ok(path, &g, &st);
    ASSERT_UEQ(st.events, 0);
    ASSERT_UEQ(g.kinds[TP_K_KERNEL] + g.kinds[TP_K_MEMCPY] + g.kinds[TP_K_SYNC] + g.kinds[TP_K_API], 0);
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
    import_stats st;
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

/* What `synctop report PATH` prints (in a static buffer), checked to exit 0. */
static const char *report_of(const char *path) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' report '%s' 2>&1", task_synctop(), path);
    FILE *p = popen(cmd, "r");
    ASSERT_NOT_NULL(p);
    static char out[1 << 16];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    ASSERT_OK(pclose(p));
    return out;
}

TEST(report_names_the_blocking_calls) {
    static const struct {
        const char *file, *call;
    } cases[] = {{"cloverleaf_a100_perlmutter.sqlite", "cudaDeviceSynchronize (sync)"},
                 {"saxpy_mpi_a100_rank0.sqlite", "cudaMemcpy (memcpy)"},
                 {"nvfuser_h200_benchmark.sqlite", "cudaMemcpyAsync"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *out = report_of(sample(cases[i].file));
        ASSERT_STR_CONTAINS(out, "Top stalls");
        ASSERT_STR_CONTAINS(out, cases[i].call);
    }
}

/* import says what it read: the export's SQLite bytes (it has no JSON) */
TEST(import_summary_counts_the_sqlite_bytes) {
    char cmd[8192];
    const char *out_path = task_path("saxpy.trace");
    snprintf(cmd, sizeof cmd, "'%s' import -q -f '%s' -o '%s' 2>&1", task_synctop(), sample("saxpy_mpi_a100_rank0.sqlite"),
             out_path);
    FILE *p = popen(cmd, "r");
    ASSERT_NOT_NULL(p);
    char out[4096];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    ASSERT_OK(pclose(p));
    struct stat sb;
    ASSERT_OK(stat(sample("saxpy_mpi_a100_rank0.sqlite"), &sb));
    char want[64];
    snprintf(want, sizeof want, "; %.1f MB SQLite -> ", (double)sb.st_size / 1e6);
    ASSERT_STR_CONTAINS(out, want);
    ASSERT(strstr(out, "JSON") == NULL);
}

/* ---- call sites from CUDA API backtraces ---- */

/* The calls with a backtrace, one row each (the other row of a call stored twice has none): the
 * call's correlation, its name without a _vNNNN suffix, and its callchainId. */
#define SQL_CALLS                                                                                        \
    "WITH calls AS (SELECT r.correlationId AS corr, r.callchainId AS cc, CASE WHEN "                     \
    "length(rtrim(s.value, '0123456789')) < length(s.value) AND rtrim(s.value, '0123456789') GLOB '*_v' " \
    "THEN substr(s.value, 1, length(rtrim(s.value, '0123456789')) - 2) ELSE s.value END AS name "        \
    "FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId WHERE r.callchainId IS NOT NULL) "

/* The number of calls whose chain, taken as callchainId + off, has a frame named as the call. */
static int64_t sql_named_calls(sqlite3 *db, int off) {
    char sql[2048];
    snprintf(sql, sizeof sql,
             SQL_CALLS "SELECT count(*) FROM calls c WHERE EXISTS (SELECT 1 FROM CUDA_CALLCHAINS f JOIN StringIds s "
                       "ON s.id = f.symbol WHERE f.id = c.cc + %d AND s.value = c.name)",
             off);
    return sql_int(db, sql);
}

/* Each call's frames (chain callchainId + 1) from the outermost one named as the call on (every
 * chain of the sample has such a frame: checked below). */
#define SQL_TRIMMED_FROM                                                                                  \
    " FROM calls c JOIN CUDA_CALLCHAINS f ON f.id = c.cc + 1 JOIN StringIds fs ON fs.id = f.symbol "       \
    "JOIN StringIds fm ON fm.id = f.module WHERE f.stackDepth >= (SELECT max(g.stackDepth) FROM "          \
    "CUDA_CALLCHAINS g JOIN StringIds gs ON gs.id = g.symbol WHERE g.id = c.cc + 1 AND gs.value = c.name) "

static const sited_call *sited(uint32_t correlation) {
    for (size_t i = 0; i < S.n_calls; i++)
        if (S.calls[i].correlation == correlation)
            return &S.calls[i];
    return NULL;
}

static const site *site_of(uint32_t correlation) {
    const sited_call *c = sited(correlation);
    if (c == NULL)
        TASK_FAIL_("the call with correlation %u has no call site", correlation);
    for (size_t i = 0; i < S.n_sites; i++)
        if (S.sites[i].id == c->callsite)
            return &S.sites[i];
    TASK_FAIL_("call site %u of correlation %u was not emitted", c->callsite, correlation);
    return NULL;
}

static void expect_frames(uint32_t correlation, const char *const *funcs, size_t n) {
    const site *st = site_of(correlation);
    ASSERT_UEQ(st->n_frames, n);
    for (size_t i = 0; i < n; i++)
        ASSERT_STR_EQ(st->f[i].func, funcs[i]);
}

TEST(saxpy_backtraces_become_call_sites) {
    const char *path = sample("saxpy_mpi_a100_rank0.sqlite");
    got g;
    import_stats st;
    import_ok(path, &g, &st);
    ASSERT_UEQ(st.invalid, 0);
    sqlite3 *db = db_open(path, 0);
    int64_t calls = sql_int(db, SQL_CALLS "SELECT count(*) FROM calls");
    ASSERT_EQ(calls, 38);
    ASSERT_EQ(sql_int(db, SQL_CALLS "SELECT count(DISTINCT corr) FROM calls"), calls);
    ASSERT_UEQ(S.n_calls, calls);
    ASSERT_UEQ(st.sited_calls, calls); /* the import's count says the same */
    /* callchainId counts from 0 here while the chains' ids count from 1 */
    int64_t named0 = sql_named_calls(db, 0), named1 = sql_named_calls(db, 1);
    ASSERT_LT(named0, named1);
    ASSERT_EQ(named1, calls);

    /* every call's frames, row by row */
    sqlite3_stmt *q;
    ASSERT_EQ(sqlite3_prepare_v2(db,
                                 SQL_CALLS "SELECT c.corr, c.name, f.stackDepth, fs.value, fm.value" SQL_TRIMMED_FROM
                                           "ORDER BY c.corr, f.stackDepth",
                                 -1, &q, NULL),
              SQLITE_OK);
    uint32_t corr = 0;
    size_t at = 0, rows = 0, checked = 0;
    const site *cs = NULL;
    while (sqlite3_step(q) == SQLITE_ROW) {
        uint32_t c = (uint32_t)sqlite3_column_int64(q, 0);
        if (cs == NULL || c != corr) {
            if (cs != NULL)
                ASSERT_UEQ(at, cs->n_frames);
            corr = c;
            cs = site_of(c);
            ASSERT_STR_EQ(sited(c)->name, (const char *)sqlite3_column_text(q, 1));
            at = 0;
            checked++;
        }
        ASSERT_LT(at, cs->n_frames);
        const site_frame *f = &cs->f[at++];
        ASSERT(f->seen);
        ASSERT_UEQ(f->kind, TP_FRAME_NATIVE);
        ASSERT_UEQ(f->pc, 0);
        ASSERT_STR_EQ(f->func, (const char *)sqlite3_column_text(q, 3));
        ASSERT_STR_EQ(f->module, (const char *)sqlite3_column_text(q, 4));
        rows++;
    }
    ASSERT_NOT_NULL(cs);
    ASSERT_UEQ(at, cs->n_frames);
    sqlite3_finalize(q);
    ASSERT_UEQ(checked, calls);
    size_t frames = 0;
    for (size_t i = 0; i < S.n_sites; i++)
        frames += S.sites[i].n_frames;
    ASSERT_LT(frames, rows); /* shared */

    /* One call site per distinct stack of (function, module): 4, one each for cudaMalloc,
     * cudaMemcpy, cudaLaunchKernel and cudaFree, whose chains differ only in return addresses (a
     * site keeps none: pc 0). */
    int64_t distinct = sql_int(db, SQL_CALLS "SELECT count(DISTINCT stack) FROM (SELECT group_concat(fs.value || "
                                             "char(1) || fm.value, char(2)) OVER (PARTITION BY c.corr ORDER BY "
                                             "f.stackDepth ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED "
                                             "FOLLOWING) AS stack" SQL_TRIMMED_FROM ")");
    ASSERT_UEQ(S.n_sites, distinct);
    ASSERT_EQ(distinct, 4);
    /* the copies: the runtime's entry, then the program */
    uint32_t copy = (uint32_t)sql_int(db, SQL_CALLS "SELECT min(corr) FROM calls WHERE name = 'cudaMemcpy'");
    static const char *const copy_frames[] = {"cudaMemcpy", "main", "__libc_start_main", "_start"};
    expect_frames(copy, copy_frames, 4);
    sqlite3_close(db);
}

TEST(report_names_main_for_saxpy_call_sites) {
    const char *out = report_of(sample("saxpy_mpi_a100_rank0.sqlite"));
    /* the export gives functions and modules, no addresses: none is shown */
    ASSERT_STR_CONTAINS(out, "cudaMemcpy (memcpy)\n      at main (saxpy-mpi-cuda)\n");
    ASSERT_STR_CONTAINS(out, "cudaFree (alloc)\n      at main (saxpy-mpi-cuda)\n");
    ASSERT_STR_CONTAINS(out, "__libc_start_main (libc-2.31.so)\n");
    ASSERT(strstr(out, "libcupti") == NULL && strstr(out, "0x7fd9") == NULL);
}

/* The calls of a hostile export: each with a chain of its own of 1,023 frames, the calls named by
 * one 1 MiB name and every frame by another that differs from it in its last byte only (comparing
 * them read a MiB a frame, again for each call: 0.12 s a call). Each name is read once and kept to
 * its first 4 KiB, counted: so cut, the two names are one, and each call's site is the outermost
 * frame with its name. */
TEST(call_chains_of_long_names_are_cut_and_counted) {
    enum { CALLS = 12 };
    const char *path = copy_sample("saxpy_mpi_a100_rank0.sqlite", "long-names.sqlite");
    sqlite3 *db = db_open(path, 1);
    uint32_t first = (uint32_t)sql_int(db, "SELECT max(correlationId) + 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME");
    ASSERT_EQ(hostile_nsys_chains(db, CALLS, 1023, 1u << 20), SQLITE_OK);
    ASSERT_EQ(sql_int(db, "SELECT count(*) FROM CUDA_CALLCHAINS WHERE symbol IN "
                          "(SELECT id FROM StringIds WHERE length(value) = 1048576)"),
              CALLS * 1023);
    sqlite3_close(db);
    got g;
    import_stats st;
    import_ok(path, &g, &st);
    ASSERT_UEQ(st.frame_names_cut, 1); /* the frames' function name; their module's is short */
    /* the sample's calls count their chains from 0, these from 1: the last one's is missing */
    ASSERT_UEQ(st.invalid, 1);
    ASSERT_UEQ(S.n_calls, 38 + CALLS - 1);
    ASSERT_UEQ(S.n_sites, 4 + 1);
    const site *cs = site_of(first);
    for (uint32_t c = 1; c < CALLS - 1; c++)
        ASSERT(site_of(first + c) == cs);
    ASSERT_UEQ(cs->n_frames, 1);
    ASSERT_STR_EQ(cs->f[0].module, "libapp.so");
    ASSERT_UEQ(strspn(cs->f[0].func, "A"), sizeof cs->f[0].func - 1);
}

/* callchainId of the runtime call with this correlation (on the unmodified sample). */
static uint32_t corr_of_chain(sqlite3 *db, int chain) {
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE callchainId = %d", chain);
    return (uint32_t)sql_int(db, sql);
}

TEST(hostile_callchains_are_skipped_and_counted) {
    const char *path = copy_sample("saxpy_mpi_a100_rank0.sqlite", "chains.sqlite");
    sqlite3 *db = db_open(path, 1);
    /* the calls whose chains are damaged below (callchainId = chain id - 1) */
    uint32_t c1 = corr_of_chain(db, 0), c2 = corr_of_chain(db, 1), c5 = corr_of_chain(db, 4),
             c7 = corr_of_chain(db, 6), c10 = corr_of_chain(db, 9), c11 = corr_of_chain(db, 10),
             c12 = corr_of_chain(db, 11), c13 = corr_of_chain(db, 12), c14 = corr_of_chain(db, 13);
    /* the same table without its primary key, to hold repeated (id, stackDepth) and NULLs */
    sql_exec(db, "CREATE TABLE cc AS SELECT * FROM CUDA_CALLCHAINS; DROP TABLE CUDA_CALLCHAINS; "
                 "ALTER TABLE cc RENAME TO CUDA_CALLCHAINS;"
                 /* skipped and counted: 6 rows */
                 "UPDATE CUDA_CALLCHAINS SET symbol = NULL WHERE id = 1 AND stackDepth = 5;"
                 "UPDATE CUDA_CALLCHAINS SET module = 'libfoo.so' WHERE id = 2 AND stackDepth = 0;"
                 "UPDATE CUDA_CALLCHAINS SET stackDepth = -1 WHERE id = 3 AND stackDepth = 7;"
                 "UPDATE CUDA_CALLCHAINS SET stackDepth = 1000000 WHERE id = 4 AND stackDepth = 6;"
                 "UPDATE CUDA_CALLCHAINS SET id = 'six' WHERE id = 6 AND stackDepth = 0;"
                 "UPDATE CUDA_CALLCHAINS SET stackDepth = NULL WHERE id = 8 AND stackDepth = 7;"
                 /* a second row at (7, 3), read after the first: skipped and counted */
                 "INSERT INTO CUDA_CALLCHAINS SELECT id, (SELECT symbol FROM CUDA_CALLCHAINS WHERE id = 7 AND "
                 "stackDepth = 0), module, unresolved, originalIP, stackDepth FROM CUDA_CALLCHAINS WHERE id = 7 "
                 "AND stackDepth = 3;"
                 /* kept: a symbol not in StringIds (an empty name), a chain with a gap */
                 "UPDATE CUDA_CALLCHAINS SET symbol = 999999999 WHERE id = 5 AND stackDepth = 3;"
                 "DELETE FROM CUDA_CALLCHAINS WHERE id = 10 AND stackDepth = 4;"
                 /* unusable references: 4 calls keep no call site, counted */
                 "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET callchainId = 'x' WHERE callchainId = 10;"
                 "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET callchainId = -3 WHERE callchainId = 11;"
                 "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET callchainId = 5000 WHERE callchainId = 12;"
                 "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET callchainId = 9223372036854775807 WHERE callchainId = 13;");
    ASSERT_EQ(sql_int(db, "SELECT count(*) FROM CUDA_CALLCHAINS WHERE id = 7 AND stackDepth = 3"), 2);
    sqlite3_close(db);
    got g;
    import_stats st;
    import_ok(path, &g, &st);
    ASSERT_UEQ(st.invalid, 7 + 4);
    ASSERT_STR_CONTAINS(st.first_invalid, "callchainId");
    ASSERT_UEQ(S.n_calls, 38 - 4);
    ASSERT_NULL(sited(c11));
    ASSERT_NULL(sited(c12));
    ASSERT_NULL(sited(c13));
    ASSERT_NULL(sited(c14));
    /* chain 1 lost its main frame: the frames around the gap close up */
    static const char *const f1[] = {"cudaMalloc", "cudaError cudaMalloc<double>(double**, unsigned long)",
                                     "__libc_start_main", "_start"};
    expect_frames(c1, f1, 4);
    /* chain 2 lost a libcupti frame, outside the site: the site of the other allocations */
    static const char *const f2[] = {"cudaMalloc", "cudaError cudaMalloc<double>(double**, unsigned long)", "main",
                                     "__libc_start_main", "_start"};
    expect_frames(c2, f2, 5);
    /* chain 5's cudaMemcpy frame has no name: the frames outside libcupti and libcuda are kept */
    static const char *const f5[] = {"", "main", "__libc_start_main", "_start"};
    expect_frames(c5, f5, 4);
    ASSERT_STR_CONTAINS(site_of(c5)->f[0].module, "libcudart.so");
    /* chain 7 as it was: the first of its two rows at depth 3 */
    static const char *const f7[] = {"cudaMemcpy", "main", "__libc_start_main", "_start"};
    expect_frames(c7, f7, 4);
    /* chain 10 without its depth 4 */
    static const char *const f10[] = {"cudaMalloc", "main", "__libc_start_main", "_start"};
    expect_frames(c10, f10, 4);
    ASSERT_UEQ(g.kinds[TP_K_API], 57);
}


/* ---- a file is a program too ---- */

/* saxpy's export with one table replaced through sql; then the import must refuse it, naming what. */
static void expect_refused(const char *as, const char *sql, const char *needle) {
    const char *path = copy_sample("saxpy_mpi_a100_rank0.sqlite", as);
    sqlite3 *db = db_open(path, 1);
    sql_exec(db, sql);
    sqlite3_close(db);
    expect_error(path, ERR_UNSUPPORTED, needle);
}

TEST(tables_computed_by_the_file_are_refused) {
    /* a generated column, cheap here: the importer must refuse it without reading a row */
    expect_refused("gen_string.sqlite",
                   "CREATE TABLE s2 (id INTEGER PRIMARY KEY, value TEXT GENERATED ALWAYS AS ('name' || id) VIRTUAL);"
                   "INSERT INTO s2 (id) SELECT id FROM StringIds; DROP TABLE StringIds;"
                   "ALTER TABLE s2 RENAME TO StringIds",
                   "column value of StringIds is generated");
    expect_refused("gen_kernel.sqlite",
                   "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN later INTEGER GENERATED ALWAYS AS "
                   "(\"end\" + 1) VIRTUAL",
                   "column later of CUPTI_ACTIVITY_KIND_KERNEL is generated");
    expect_refused("stored.sqlite",
                   "ALTER TABLE StringIds RENAME TO s0;"
                   "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, v0 TEXT, value TEXT GENERATED ALWAYS AS "
                   "(upper(v0)) STORED); INSERT INTO StringIds (id, v0) SELECT id, value FROM s0",
                   "column value of StringIds is generated");
    expect_refused("view.sqlite",
                   "ALTER TABLE StringIds RENAME TO s0; CREATE VIEW StringIds AS SELECT id, value FROM s0",
                   "StringIds is a view, not a table");
    expect_refused("virtual.sqlite",
                   "ALTER TABLE StringIds RENAME TO s0; CREATE VIRTUAL TABLE StringIds USING fts4(id, value);"
                   "INSERT INTO StringIds SELECT id, value FROM s0",
                   "StringIds is a virtual table");
    expect_refused("rowid.sqlite",
                   "ALTER TABLE StringIds RENAME TO s0; CREATE TABLE StringIds (id INTEGER, value TEXT, oid INTEGER);"
                   "INSERT INTO StringIds SELECT id, value, 0 FROM s0",
                   "StringIds has a column named oid");
    expect_refused("norowid.sqlite",
                   "ALTER TABLE StringIds RENAME TO s0;"
                   "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT) WITHOUT ROWID;"
                   "INSERT INTO StringIds SELECT id, value FROM s0",
                   "StringIds is not a plain table");
}

TEST(a_row_too_long_is_skipped_and_counted) {
    const char *path = copy_sample("saxpy_mpi_a100_rank0.sqlite", "long.sqlite");
    got g0;
    import_stats st0;
    import_ok(path, &g0, &st0);
    sqlite3 *db = db_open(path, 1);
    /* two strings nothing names: one a byte over the bound, one at it (kept) */
    char sql[512];
    snprintf(sql, sizeof sql,
             "INSERT INTO StringIds VALUES (900000001, printf('%%.*c', %u, 'x'));"
             "INSERT INTO StringIds VALUES (900000002, printf('%%.*c', %u, 'y'))",
             NSDB_VALUE_MAX + 1, NSDB_VALUE_MAX - 64);
    sql_exec(db, sql);
    sqlite3_close(db);
    got g;
    import_stats st;
    import_ok(path, &g, &st);
    ASSERT_UEQ(st.invalid, st0.invalid + 1);
    ASSERT_STR_CONTAINS(st.first_invalid, "StringIds row over 8 MiB long");
    /* everything else as it was */
    for (int k = 0; k < TP_K_MAX_; k++)
        ASSERT_UEQ(g.kinds[k], g0.kinds[k]);
    check_against_sql(path, &g);
}

TEST(work_beyond_the_files_size_is_stopped) {
    const char *path = copy_sample("saxpy_mpi_a100_rank0.sqlite", "work.sqlite");
    nsdb d;
    err_msg err = {{0}};
    /* the budget of an empty file: NSDB_STEPS_BASE steps */
    ASSERT_OK(nsdb_open(&d, path, 0, &err));
    /* a query that costs far more steps than that (a billion rows, several steps each) */
    int rc = sqlite3_exec(d.db,
                          "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 1000000000) "
                          "SELECT count(*) FROM c",
                          NULL, NULL, NULL);
    ASSERT_EQ(rc, SQLITE_INTERRUPT);
    ASSERT_EQ(nsdb_fail(&d, rc, "c", &err), ERR_LIMIT);
    ASSERT_STR_CONTAINS(err.msg, "more work than a file of this size can need");
    nsdb_close(&d);
    /* a value over the bound is refused by SQLite itself */
    ASSERT_OK(nsdb_open(&d, path, 0, &err));
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT length(zeroblob(%u))", NSDB_VALUE_MAX + 1);
    rc = sqlite3_exec(d.db, sql, NULL, NULL, NULL);
    ASSERT_EQ(rc, SQLITE_TOOBIG);
    ASSERT_EQ(nsdb_fail(&d, rc, "c", &err), ERR_LIMIT);
    ASSERT_STR_CONTAINS(err.msg, "a value over 8 MiB");
    nsdb_close(&d);
    /* memory: 400 MB to sort, in memory, against SQLite's ceiling of 256 MiB */
    ASSERT_OK(nsdb_open(&d, path, 0, &err));
    rc = sqlite3_exec(d.db,
                      "PRAGMA temp_store = memory; WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
                      "LIMIT 400000) SELECT count(*) FROM (SELECT randomblob(1000) AS b FROM c ORDER BY b)",
                      NULL, NULL, NULL);
    ASSERT_EQ(rc, SQLITE_NOMEM);
    ASSERT_EQ(nsdb_fail(&d, rc, "c", &err), ERR_NOMEM);
    ASSERT_STR_CONTAINS(err.msg, "SQLite needed more than its 256 MiB");
    nsdb_close(&d);
}

TEST(rows_still_in_the_wal_are_read) {
    const char *path = copy_sample("saxpy_mpi_a100_rank0.sqlite", "wal.sqlite");
    sqlite3 *db = db_open(path, 0);
    int64_t kernels = sql_int(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL");
    sqlite3_close(db);
    /* a writer that commits 100 copies of the kernels into its -wal and dies before a checkpoint */
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        sqlite3 *w = NULL;
        int ok = sqlite3_open(path, &w) == SQLITE_OK &&
                 sqlite3_exec(w, "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0", NULL, NULL, NULL) ==
                     SQLITE_OK &&
                 sqlite3_exec(w, "CREATE TEMP TABLE k AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL", NULL, NULL,
                              NULL) == SQLITE_OK;
        for (int n = 1; ok && n <= 100; n++) {
            char sql[512];
            snprintf(sql, sizeof sql,
                     "UPDATE k SET start = start + 1000000, \"end\" = \"end\" + 1000000, "
                     "correlationId = correlationId + 100000; INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM k");
            ok = sqlite3_exec(w, sql, NULL, NULL, NULL) == SQLITE_OK;
        }
        _exit(ok ? 0 : 1);
    }
    int status;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char wal[4200];
    snprintf(wal, sizeof wal, "%s-wal", path);
    struct stat sb;
    ASSERT_OK(stat(wal, &sb));
    ASSERT(sb.st_size > 0);
    got g;
    import_stats st;
    import_ok(path, &g, &st);
    ASSERT_EQ((int64_t)g.kinds[TP_K_KERNEL], kernels * 101);
    /* as SQLite itself reads the file, and the -wal is left as it was */
    check_against_sql(path, &g);
    struct stat sb2;
    ASSERT_OK(stat(wal, &sb2));
    ASSERT_EQ(sb2.st_size, sb.st_size);
}

/* NVTX ranges nest by depth on their thread's ranges lane as the export nests them: per thread (of
 * those small enough for the quadratic query), as many ranges as the table holds, and as many
 * depths as the most ranges that hold one range (SQL's count of those around each, + 1). */
TEST(nvtx_ranges_nest_as_the_export_nests_them) {
    const char *path = sample("nvfuser_h200_benchmark.sqlite");
    st_store *s = st_store_new(NULL);
    err_msg err = {{0}};
    ASSERT_OK(ingest_file(s, path, NULL, NULL, &err));
    sqlite3 *db = db_open(path, 0);
    sqlite3_stmt *q;
    ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT globalTid, count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60, 70, 71) "
                                     "AND \"end\" IS NOT NULL GROUP BY globalTid HAVING count(*) <= 450", -1, &q, NULL),
              SQLITE_OK);
    int threads = 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
        int64_t gtid = sqlite3_column_int64(q, 0), count = sqlite3_column_int64(q, 1);
        char sql[1024];
        snprintf(sql, sizeof sql,
                 "SELECT max((SELECT count(*) FROM NVTX_EVENTS b WHERE b.globalTid = a.globalTid AND b.rowid != a.rowid "
                 "AND b.eventType IN (59, 60, 70, 71) AND b.\"end\" IS NOT NULL AND b.start <= a.start "
                 "AND b.\"end\" >= a.\"end\")) + 1 FROM NVTX_EVENTS a WHERE a.globalTid = %lld "
                 "AND a.eventType IN (59, 60, 70, 71) AND a.\"end\" IS NOT NULL", (long long)gtid);
        int64_t depths = sql_int(db, sql);
        uint32_t pid = (uint32_t)(((uint64_t)gtid >> 24) & 0xFFFFFF), tid = (uint32_t)((uint64_t)gtid & 0xFFFFFF);
        size_t lane = SIZE_MAX;
        for (size_t l = 0; l < st_lane_count(s); l++) {
            const st_lane_info *li = st_lane_get(s, l);
            if (li->kind == ST_LANE_NVTX && li->id == tid && st_producer_get(s, li->producer)->pid == pid)
                lane = l;
        }
        ASSERT(lane != SIZE_MAX);
        ASSERT_UEQ(st_lane_get(s, lane)->n_events, (uint64_t)count);
        ASSERT_UEQ(st_lane_depths(s, lane), (uint64_t)depths);
        threads++;
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    ASSERT_GE(threads, 5);
    st_store_destroy(&s);
}

/* A sync row whose context and stream no kernel, copy or memset names takes the one device its
 * process used; one whose context is unknown but whose stream is known takes that stream's. The
 * export's process ran everything on one device (SQL below): both rows, written as device 5, move
 * there, and only they. */
TEST(syncs_of_unknown_context_take_their_stream_or_process_device) {
    got g;
    import_stats st;
    const char *path = copy_sample("cloverleaf_a100_perlmutter.sqlite", "syncs.sqlite");
    sqlite3 *db = db_open(path, 1);
    ASSERT_EQ(sql_int(db, "SELECT count(DISTINCT deviceId) FROM CUPTI_ACTIVITY_KIND_KERNEL"), 1);
    ASSERT_EQ(sql_int(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION WHERE deviceId != "
                          "(SELECT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1)"), 0);
    sql_exec(db, "UPDATE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION SET contextId = 999, streamId = 999, deviceId = 5 "
                 "WHERE rowid = 1;"
                 "UPDATE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION SET contextId = 999, deviceId = 5, streamId = "
                 "(SELECT streamId FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1) WHERE rowid = 2;");
    sqlite3_close(db);
    import_ok(path, &g, &st);
    ASSERT_UEQ(st.syncs_moved, 2);
}
