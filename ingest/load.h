/*
 * Filling a store from a file: a synctop trace file or a Kineto JSON (.json / .json.gz) trace, told
 * apart by their first bytes.
 */
#ifndef SYNCTOP_LOAD_H
#define SYNCTOP_LOAD_H

#include <stdint.h>

#include "import.h"
#include "store.h"
#include "synctop/error.h"

/* Called with a message for each damaged batch skipped. */
typedef void (*ingest_warn_fn)(void *ctx, const char *msg);

/* What a regular file is, told by its first bytes: a synctop trace file, a Kineto JSON (plain or
 * gzip) or an SQLite database (an Nsight Systems export); 0 when none of them, or unreadable. */
enum { INGEST_TRACE = 1, INGEST_KINETO, INGEST_NSYS };
int ingest_kind(const char *path);
/* Sets err to why path, of no kind synctop reads, is refused (Nsight Systems' own report files
 * are named with the command that exports them) and returns ERR_UNSUPPORTED. */
int ingest_unreadable(const char *path, err_msg *err);
/* The same for Nsight Systems' own report files only (.nsys-rep, .qdrep, .qdstrm, by name):
 * ERR_UNSUPPORTED with the reason, else 0. */
int ingest_nsight_report(const char *path, err_msg *err);

/* Loads a whole source, then commits and shrinks the store. Damaged batches of a trace file are
 * skipped (warn, if not NULL, is called for each). */
int ingest_file(st_store *s, const char *path, ingest_warn_fn warn, void *ctx, err_msg *err);

/* What a trace file may hold: a file whose events outnumber what its size allows (4 per byte, and
 * a million more; real traces have about one per 11 bytes) was made to exhaust memory, and is
 * refused with ERR_LIMIT before it is read. max_events, when not 0, is the caller's bound instead
 * (--max-events). The _max variants take it; the others use the file's size. */
uint64_t ingest_max_events(uint64_t file_bytes, uint64_t max_events);
int ingest_file_max(st_store *s, const char *path, uint64_t max_events, ingest_warn_fn warn, void *ctx, err_msg *err);
/* Loads n sources whole into s (ingest_open_many, placed on one time axis as align says,
 * INGEST_ALIGN_*; what aligning did goes to warn), then commits and shrinks the store. 0, or a
 * negative code with err set. */
int ingest_files(st_store *s, const char *const *paths, size_t n, uint64_t max_events, int align, ingest_warn_fn warn,
                 void *ctx, err_msg *err);
/* How far ingest_files_told has come: the source it reads (its place from 0, its name as given)
 * and how far its reading is (import_progress_fn's done and total). Nonzero stops the reading. */
typedef int (*ingest_reading_fn)(void *ctx, size_t index, const char *path, uint64_t done, uint64_t total);
/* ingest_files, telling reading (with reading_ctx) as it goes. */
int ingest_files_told(st_store *s, const char *const *paths, size_t n, uint64_t max_events, int align,
                      ingest_warn_fn warn, void *ctx, ingest_reading_fn reading, void *reading_ctx, err_msg *err);
/* ingest_files_told, where a source that cannot be read (not found, not a trace, a JSON error)
 * is left out, said through warn, and the others read; *left_out says how many were. Not out of
 * memory or cancelled: those end the reading. None read is an error. */
int ingest_files_kept(st_store *s, const char *const *paths, size_t n, uint64_t max_events, int align,
                      ingest_warn_fn warn, void *ctx, ingest_reading_fn reading, void *reading_ctx, size_t *left_out,
                      err_msg *err);
/* Imports the profiler trace (INGEST_KINETO) or Nsight Systems export (INGEST_NSYS) at path, its
 * batches to emit: kineto_import or nsys_import. */
int ingest_import_path(const char *path, int kind, const import_opts *o, import_emit_fn emit, void *ctx,
                       import_stats *st, err_msg *err);

/* Incremental loading, for a viewer that must show the first screen before the whole file is read:
 * ingest_step adds batches in file order for about budget_s seconds (0: until done) and returns 1
 * when everything was read, 0 when there is more, or a negative ERR_* code. Call st_store_commit
 * after a step before reading. A Kineto JSON is imported whole in its first step. The span of the
 * whole source is known at once for a trace file (from its index; 0, 0 for Kineto). */
typedef struct ingest_loader ingest_loader;
ingest_loader *ingest_open(st_store *s, const char *path, ingest_warn_fn warn, void *ctx, err_msg *err);
ingest_loader *ingest_open_max(st_store *s, const char *path, uint64_t max_events, ingest_warn_fn warn, void *ctx,
                               err_msg *err);
/* Several sources into one store, one after another (one per rank, say): one loader for them all,
 * whose span is the union of theirs. */
ingest_loader *ingest_open_many(st_store *s, const char *const *paths, size_t n, uint64_t max_events,
                                ingest_warn_fn warn, void *ctx, err_msg *err);
int ingest_step(ingest_loader *ld, double budget_s, err_msg *err);
/* How several sources share the time axis once all are read: INGEST_ALIGN_AUTO (the default) puts
 * each at its own start when no two of them overlap in time (two runs of different days, or a
 * profiler trace and an Nsight export, whose clocks say nothing of each other) and leaves them as
 * recorded when they do (the ranks of one job); START always, CLOCK never. ingest_align_note says
 * what was done, once everything is read ("" when nothing was moved). */
enum { INGEST_ALIGN_AUTO = 0, INGEST_ALIGN_START, INGEST_ALIGN_CLOCK };
void ingest_set_align(ingest_loader *ld, int mode);
const char *ingest_align_note(const ingest_loader *ld);
int ingest_align_parse(const char *word); /* "auto", "start", "clock"; -1 for anything else */
/* The threads the loader's imports use: 0 (the default) SYNCTOP_THREADS, else the cores the process
 * may use (import_threads). Given several sources, the profiler traces and Nsight Systems exports
 * among them are imported that many at once, each on its share of the threads (one each when
 * there are as many sources as threads), and added to the store in the order given: the store
 * is the same as from one thread. Call it before the first ingest_step. */
void ingest_set_threads(ingest_loader *ld, int threads);
/* A profiler trace is imported whole in one step: fn hears how far its reading has come, and may
 * stop it (import.h: it then fails with ERR_EOF). */
void ingest_on_progress(ingest_loader *ld, import_progress_fn fn, void *ctx);
/* A profiler trace's operators (cpu_op rows) become ranges on their threads' ranges lanes too, as
 * the viewer shows them (import_opts.ops); without, they only name the calls inside them. */
void ingest_keep_ops(ingest_loader *ld);
double ingest_progress(const ingest_loader *ld); /* 0..1 */
void ingest_span(const ingest_loader *ld, uint64_t *t0, uint64_t *t1);
void ingest_close(ingest_loader **ld);

#endif
