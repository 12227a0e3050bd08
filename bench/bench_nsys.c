/*
 * Nsight Systems SQLite import speed. Makes a large export from a real one (the CloverLeaf export in
 * samples/traces/nsys: kernels, copies, GPU syncs and runtime calls), its CUPTI activity rows
 * repeated with shifted times and correlation ids (SQL over a copy in /tmp), then times the importer
 * on it, batches encoded but not kept. Prints rows of CUPTI activity per second and MB/s of the
 * SQLite file, and the peak RSS.
 *
 *   bench_nsys [COPIES]   (default 200: about 1.2 M rows, 70 MB)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "import.h"
#include "nsys.h"
#include "synctop/codec.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, const char *detail) {
    fprintf(stderr, "bench_nsys: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

static void exec_sql(sqlite3 *db, const char *sql) {
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        die(sql, msg);
}

/* The integer the query's first row has, 0 when none. */
static long long query_int(sqlite3 *db, const char *sql) {
    sqlite3_stmt *s;
    long long n = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
        n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return n;
}

static long long count_rows(sqlite3 *db, const char *table) {
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
    return query_int(db, sql);
}

static int discard(void *ctx, const void *batch, size_t len, err_msg *err) {
    (void)batch;
    (void)err;
    *(size_t *)ctx += len;
    return 0;
}

static const char *const tables[] = {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                                     "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "CUPTI_ACTIVITY_KIND_RUNTIME"};

int main(int argc, char **argv) {
    tp_crc32_use(import_crc32); /* as the command line computes the batches' checksums */
    int copies = argc > 1 ? atoi(argv[1]) : 200;
    if (copies < 1)
        copies = 1;
    char src[4096], path[] = "/tmp/bench_nsys_XXXXXX";
    snprintf(src, sizeof src, "%s/cloverleaf_a100_perlmutter.sqlite", NSYS_TRACE_DIR);
    int fd = mkstemp(path);
    if (fd < 0)
        die("cannot make a temporary file", NULL);
    close(fd);
    sqlite3 *in, *db;
    if (sqlite3_open_v2(src, &in, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        die("cannot open", src);
    if (sqlite3_open(path, &db) != SQLITE_OK)
        die("cannot open", path);
    sqlite3_backup *b = sqlite3_backup_init(db, "main", in, "main");
    if (b == NULL || sqlite3_backup_step(b, -1) != SQLITE_DONE)
        die("cannot copy", src);
    sqlite3_backup_finish(b);
    sqlite3_close(in);
    /* each copy shifted past the whole capture, correlation ids past the largest: numbered on, as
     * CUPTI numbers a longer run's calls */
    exec_sql(db, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN");
    long long ids = 0;
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
        char q[256];
        snprintf(q, sizeof q, "SELECT max(correlationId) FROM %s", tables[t]);
        long long m = query_int(db, q);
        ids = m > ids ? m : ids;
    }
    char sql[1024];
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
        /* the capture's own rows, once, then shifted copies of them */
        snprintf(sql, sizeof sql, "CREATE TEMP TABLE x AS SELECT * FROM %s", tables[t]);
        exec_sql(db, sql);
        for (int c = 1; c < copies; c++) {
            snprintf(sql, sizeof sql,
                     "INSERT INTO %s SELECT * FROM x; UPDATE %s SET start = start + %d * 700000000,"
                     " end = end + %d * 700000000, correlationId = correlationId + %d * %lld"
                     " WHERE rowid > (SELECT max(rowid) FROM %s) - (SELECT count(*) FROM x)",
                     tables[t], tables[t], c, c, c, ids, tables[t]);
            exec_sql(db, sql);
        }
        exec_sql(db, "DROP TABLE x");
    }
    exec_sql(db, "COMMIT");
    long long rows = 0;
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        rows += count_rows(db, tables[t]);
    sqlite3_close(db);
    struct stat sb;
    if (stat(path, &sb) != 0)
        die("cannot stat", path);
    double best = 1e9;
    size_t bytes = 0;
    import_stats st;
    for (int run = 0; run < 3; run++) {
        err_msg err = {{0}};
        bytes = 0;
        memset(&st, 0, sizeof st);
        double a = now_s();
        if (nsys_import(path, NULL, discard, &bytes, &st, &err) != 0)
            die("import", err.msg);
        double t = now_s() - a;
        if (t < best)
            best = t;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("nsys import: %lld CUPTI activity rows, %.1f MB of SQLite: %.3f s best of 3, %.2f M rows/s, %.0f MB/s;"
           " %llu events, %.1f MB of batches; peak RSS %.0f MiB\n",
           rows, (double)sb.st_size / 1e6, best, (double)rows / best / 1e6, (double)sb.st_size / 1e6 / best,
           (unsigned long long)st.events, (double)bytes / 1e6, (double)ru.ru_maxrss / 1024.0);
    unlink(path);
    return 0;
}
