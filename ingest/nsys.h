/*
 * Nsight Systems import: reads the SQLite file that `nsys export --type sqlite` writes (told by the
 * 16-byte "SQLite format 3" header) with libsqlite3, read-only and held to bounds (nsys_db.h: a
 * table computed by SQL in the file is refused, a row over 8 MiB skipped and counted, the work and
 * SQLite's memory capped), and turns it into synctop records handed out as encoded batches, like
 * the Kineto importer (kineto.h), so that `synctop import` writes them and report/replay import in
 * memory.
 *
 * Every process with CUDA rows is one producer (pid = (globalTid >> 24) & 0xFFFFFF). What is imported:
 *   - CUPTI_ACTIVITY_KIND_KERNEL (named by StringIds: shortName, else demangledName), _MEMCPY
 *     (copyKind, srcKind, dstKind mapped to the event model's numbering), _MEMSET, _SYNCHRONIZATION
 *     (its type told by the runtime call with the same correlationId, never by syncType);
 *   - CUPTI_ACTIVITY_KIND_RUNTIME (runtime and driver calls) as TP_K_API, named without their
 *     version suffix, flagged by store/api.h's classifier as the other importers do; a call stored
 *     twice (two names of one call, one correlationId) is kept once, the wider of the two;
 *   - NVTX_EVENTS ranges (text, else textId) and markers (end NULL), on their threads;
 *   - call sites from CUDA API backtraces (nsys --cudabacktrace): CUDA_CALLCHAINS rows, named by a
 *     runtime row's callchainId, which exports count from 0 or from 1 while the chains' ids count
 *     from 1; of the two readings, the one under which more calls find their own name in their
 *     chain wins (from 0 on a tie). A site's frames are its chain's from the outermost frame named
 *     as the call outward (without one, from the first outside libcupti, libcuda, libnvidia-* and
 *     libToolsInjection), at most 64, TP_FRAME_NATIVE with function, module and pc 0 (the export
 *     has no load addresses); calls whose frames read the same share one site per process, sent
 *     before the process's events;
 *   - metadata: process names (PROCESSES), thread names (ThreadNames), GPU names and properties
 *     (TARGET_INFO_GPU), streams as used.
 * Any table may be missing. Rows with unusable fields (wrong types, NULLs, dangling string ids,
 * zero or negative times, a stackDepth outside [0, 1024), a second row at one chain's depth) are
 * skipped and counted, as are callchainIds that name no chain (the call is kept without a site); a
 * chain with a missing depth keeps its other frames, and a frame whose symbol or module id dangles
 * is named "". A file that is not SQLite, is corrupt, or is SQLite but not an Nsight Systems
 * export fails with a message naming the file.
 */
#ifndef SYNCTOP_NSYS_H
#define SYNCTOP_NSYS_H

#include <stddef.h>
#include <stdint.h>

#include "import.h"

#define NSYS_MAGIC "SQLite format 3"
#define NSYS_MAGIC_LEN 16 /* with its NUL */

/* Whether these first bytes of a file are an SQLite database's. */
int nsys_is_sqlite(const void *head, size_t n);

/* Rows read between two calls of import_opts.progress, which hears done and total 0 (an export's
 * reading is not told in bytes), and may stop the import as the Kineto importer's does. */
#define NSYS_PROGRESS_ROWS 65536

/* Imports the export at path. opts (batch_records, max_events, producer: the first process's id,
 * the others following, progress) and st may be NULL; st is filled as by the Kineto importer (pid:
 * the first process's; invalid/first_invalid: rows and chain references skipped; skipped: runtime
 * rows dropped as duplicates).
 * Returns 0 or a negative ERR_* code with a message in err that names the file. */
int nsys_import(const char *path, const import_opts *opts, import_emit_fn emit, void *ctx, import_stats *st,
                err_msg *err);

#endif
