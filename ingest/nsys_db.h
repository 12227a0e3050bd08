/*
 * An Nsight Systems export opened as the untrusted input it is. A `.sqlite` file carries SQL of its
 * own (generated columns, views, virtual tables) that SQLite would run while the importer reads, so
 * the handle is opened read-only and held to bounds: SQLite's limits (a value, a statement, columns,
 * expression depth; no attached databases, views or triggers; the schema untrusted), a ceiling on the
 * memory SQLite may hold in this process, and a budget of virtual-machine steps and seconds that
 * grows with the file's size. A table the importer reads must be a plain rowid table: one with a
 * generated or hidden column, a virtual table or a view in its place is refused.
 *
 * The file is opened immutable (no lock, nothing created beside it) unless a -wal file lies beside
 * it: then committed rows may still be in the -wal, and SQLite is left to read them (read-only: the
 * -wal is neither applied nor removed; SQLite may create the -shm file it needs to read it).
 */
#ifndef SYNCTOP_NSYS_DB_H
#define SYNCTOP_NSYS_DB_H

#include <stdint.h>

#include <sqlite3.h>

#include "synctop/error.h"

#define NSDB_VALUE_MAX       (8u << 20)  /* the longest row SQLite hands out; longer rows are skipped */
#define NSDB_HEAP_MAX        (256ll << 20) /* what SQLite may allocate in this process */
#define NSDB_STEPS_PER_BYTE  32          /* the step budget: this much per byte of the file, */
#define NSDB_STEPS_BASE      (64ull << 20) /* plus this */
#define NSDB_SECONDS_PER_MB  1.0         /* the time budget: this much per MB of the file, */
#define NSDB_SECONDS_BASE    30.0        /* plus this */

typedef struct nsdb {
    sqlite3 *db;
    const char *name;
    uint64_t steps, max_steps; /* virtual-machine steps taken, in units of the progress period */
    double deadline;           /* cm_now_s */
    int over;                  /* 1: steps, 2: time; the budget ended a statement */
} nsdb;

/* Opens the export at path (file_bytes long) read-only with every bound in place.
 * Returns 0, or ERR_IO / ERR_NOMEM with a message naming the file. */
int nsdb_open(nsdb *d, const char *path, uint64_t file_bytes, err_msg *err);
void nsdb_close(nsdb *d);

/* Whether table (present in sqlite_master with this type and sql) may be read: 0 when it is a plain
 * table, else ERR_UNSUPPORTED with a message that names the table and what is wrong with it. */
int nsdb_check_table(nsdb *d, const char *table, const char *type, const char *sql, err_msg *err);

/* The error of a statement that failed with SQLite's code rc while reading table: ERR_NOMEM,
 * ERR_LIMIT (a bound was reached: the message says which) or ERR_MALFORMED. */
int nsdb_fail(const nsdb *d, int rc, const char *table, err_msg *err);

#endif
