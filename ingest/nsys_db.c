/* An Nsight Systems export opened with bounds (nsys_db.h). */
#include "nsys_db.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "clock.h"

#define NSDB_PERIOD 1024 /* virtual-machine steps between two looks at the budget */

static int on_progress(void *arg) {
    nsdb *d = arg;
    if (++d->steps > d->max_steps)
        d->over = 1;
    else if ((d->steps & 63) == 0 && cm_now_s() > d->deadline)
        d->over = 2;
    return d->over != 0;
}

/* Whether a non-empty file named path + suffix exists. */
static int beside(const char *path, const char *suffix) {
    char p[4096];
    struct stat sb;
    if ((size_t)snprintf(p, sizeof p, "%s%s", path, suffix) >= sizeof p)
        return 0;
    return stat(p, &sb) == 0 && sb.st_size > 0;
}

static void bound(sqlite3 *db) {
    sqlite3_limit(db, SQLITE_LIMIT_LENGTH, (int)NSDB_VALUE_MAX);
    sqlite3_limit(db, SQLITE_LIMIT_SQL_LENGTH, 1 << 20);
    sqlite3_limit(db, SQLITE_LIMIT_COLUMN, 512);
    sqlite3_limit(db, SQLITE_LIMIT_EXPR_DEPTH, 64);
    sqlite3_limit(db, SQLITE_LIMIT_COMPOUND_SELECT, 4);
    sqlite3_limit(db, SQLITE_LIMIT_VDBE_OP, 100000);
    sqlite3_limit(db, SQLITE_LIMIT_FUNCTION_ARG, 8);
    sqlite3_limit(db, SQLITE_LIMIT_ATTACHED, 0);
    sqlite3_limit(db, SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 64);
    sqlite3_limit(db, SQLITE_LIMIT_VARIABLE_NUMBER, 8);
    sqlite3_limit(db, SQLITE_LIMIT_TRIGGER_DEPTH, 1);
    sqlite3_limit(db, SQLITE_LIMIT_WORKER_THREADS, 0);
    sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)NULL);
    sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)NULL);
    sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_VIEW, 0, (int *)NULL);
    sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, (int *)NULL);
    sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, (int *)NULL);
}

int nsdb_open(nsdb *d, const char *path, uint64_t file_bytes, err_msg *err) {
    memset(d, 0, sizeof *d);
    d->name = path;
    /* Process-wide: SQLite in this process serves the importer alone. */
    sqlite3_hard_heap_limit64(NSDB_HEAP_MAX);
    int logged = beside(path, "-wal");
    char *uri = sqlite3_mprintf("file:%s?%s", path, logged ? "mode=ro" : "immutable=1");
    int rc;
    if (uri == NULL)
        return err_set(err, ERR_NOMEM, "%s: out of memory", path);
    if (strchr(path, '?') || strchr(path, '#') || strchr(path, '%')) /* not safe in a URI */
        rc = sqlite3_open_v2(path, &d->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
    else
        rc = sqlite3_open_v2(uri, &d->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
    sqlite3_free(uri);
    if (rc != SQLITE_OK) {
        rc = err_set(err, d->db ? ERR_IO : ERR_NOMEM, "%s: cannot open as SQLite: %s", path,
                     d->db ? sqlite3_errmsg(d->db) : "out of memory");
        nsdb_close(d);
        return rc;
    }
    bound(d->db);
    /* A -wal is read through a -shm file: fail here, naming why, when that cannot be. */
    if (logged && sqlite3_exec(d->db, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL) != SQLITE_OK) {
        rc = err_set(err, ERR_IO,
                     "%s: cannot open as SQLite: %s (a -wal file lies beside it, whose rows SQLite reads with "
                     "a -shm file it must be able to create there; copy both files to a writable directory)",
                     path, sqlite3_errmsg(d->db));
        nsdb_close(d);
        return rc;
    }
    d->max_steps = (NSDB_STEPS_BASE + NSDB_STEPS_PER_BYTE * file_bytes) / NSDB_PERIOD;
    d->deadline = cm_now_s() + NSDB_SECONDS_BASE + NSDB_SECONDS_PER_MB * (double)file_bytes / 1e6;
    sqlite3_progress_handler(d->db, NSDB_PERIOD, on_progress, d);
    return 0;
}

void nsdb_close(nsdb *d) {
    sqlite3_close(d->db);
    d->db = NULL;
}

/* 1 when the table has a column SQLite computes or hides (generated, or a virtual table's), 2 when
 * a column takes the rowid's name, with its name in col; 0 when none; an ERR_* code when the schema
 * cannot be read. */
static int odd_column(nsdb *d, const char *table, char *col, size_t len, err_msg *err) {
    char sql[256];
    snprintf(sql, sizeof sql, "PRAGMA table_xinfo(\"%s\")", table);
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(d->db, sql, -1, &s, NULL) != SQLITE_OK)
        return nsdb_fail(d, sqlite3_errcode(d->db), table, err);
    int rc, odd = 0;
    while (!odd && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *nm = (const char *)sqlite3_column_text(s, 1); /* cid, name, type, notnull, dflt, pk, hidden */
        if (nm == NULL || sqlite3_column_int(s, 6) != 0)
            odd = 1;
        else if (strcasecmp(nm, "rowid") == 0 || strcasecmp(nm, "oid") == 0 || strcasecmp(nm, "_rowid_") == 0)
            odd = 2;
        if (odd)
            snprintf(col, len, "%.64s", nm ? nm : "?");
    }
    if (!odd && rc != SQLITE_DONE)
        odd = nsdb_fail(d, rc, table, err);
    sqlite3_finalize(s);
    return odd;
}

int nsdb_check_table(nsdb *d, const char *table, const char *type, const char *sql, err_msg *err) {
    if (type == NULL || strcmp(type, "table") != 0)
        return err_set(err, ERR_UNSUPPORTED,
                       "%s: %s is a %s, not a table: an Nsight Systems export has no such thing, and reading it "
                       "would run the file's own SQL; refused",
                       d->name, table, type ? type : "?");
    if (sql != NULL && strncmp(sql, "CREATE VIRTUAL", 14) == 0)
        return err_set(err, ERR_UNSUPPORTED,
                       "%s: %s is a virtual table: an Nsight Systems export has none, and reading it would run "
                       "code the file chooses; refused",
                       d->name, table);
    char col[80];
    int rc = odd_column(d, table, col, sizeof col, err);
    if (rc == 1)
        return err_set(err, ERR_UNSUPPORTED,
                       "%s: column %s of %s is generated (computed by SQL in the file): an Nsight Systems "
                       "export has none, and reading it would run that SQL; refused",
                       d->name, col, table);
    if (rc == 2)
        return err_set(err, ERR_UNSUPPORTED,
                       "%s: %s has a column named %s, which hides the rowid the reader orders by: an Nsight "
                       "Systems export has none; refused",
                       d->name, table, col);
    if (rc < 0)
        return rc;
    char probe[256];
    snprintf(probe, sizeof probe, "SELECT rowid FROM \"%s\" LIMIT 0", table);
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(d->db, probe, -1, &s, NULL) != SQLITE_OK)
        return err_set(err, ERR_UNSUPPORTED,
                       "%s: %s is not a plain table (%s): an Nsight Systems export's is; refused", d->name, table,
                       sqlite3_errmsg(d->db));
    sqlite3_finalize(s);
    return 0;
}

int nsdb_fail(const nsdb *d, int rc, const char *table, err_msg *err) {
    if (d->over == 1)
        return err_set(err, ERR_LIMIT,
                       "%s: reading %s took more work than a file of this size can need (over %llu million "
                       "SQLite steps): the export runs SQL of its own; stopped",
                       d->name, table, (unsigned long long)(d->max_steps * NSDB_PERIOD / 1000000));
    if (d->over == 2)
        return err_set(err, ERR_LIMIT,
                       "%s: reading %s took longer than a file of this size can need: the export runs SQL of "
                       "its own or the disk is very slow; stopped",
                       d->name, table);
    if (rc == SQLITE_NOMEM)
        return err_set(err, ERR_NOMEM, "%s: cannot read table %s: SQLite needed more than its %lld MiB", d->name,
                       table, (long long)(NSDB_HEAP_MAX >> 20));
    if (rc == SQLITE_TOOBIG)
        return err_set(err, ERR_LIMIT, "%s: cannot read table %s: a value over %u MiB", d->name, table,
                       NSDB_VALUE_MAX >> 20);
    return err_set(err, ERR_MALFORMED, "%s: cannot read table %s: %s", d->name, table, sqlite3_errmsg(d->db));
}
