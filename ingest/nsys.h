/*
 * Nsight Systems import: reads the SQLite file that `nsys export --type sqlite` writes (told by the
 * 16-byte "SQLite format 3" header) with libsqlite3, read-only and immutable (nothing is created
 * next to it), and turns it into synctop records handed out as encoded batches, like the Kineto
 * importer (kineto.h), so that `synctop import` writes them and report/replay import in memory.
 *
 * Every process with CUDA rows is one producer (pid = (globalTid >> 24) & 0xFFFFFF). What is imported:
 *   - CUPTI_ACTIVITY_KIND_KERNEL (named by StringIds: shortName, else demangledName), _MEMCPY
 *     (copyKind, srcKind, dstKind mapped to the event model's numbering), _MEMSET, _SYNCHRONIZATION
 *     (its type told by the runtime call with the same correlationId, never by syncType);
 *   - CUPTI_ACTIVITY_KIND_RUNTIME (runtime and driver calls) as TP_K_API, named without their
 *     version suffix, flagged by store/api.h's classifier as the other importers do; a call stored
 *     twice (two names of one call, one correlationId) is kept once, the wider of the two;
 *   - NVTX_EVENTS ranges (text, else textId) and markers (end NULL), on their threads;
 *   - metadata: process names (PROCESSES), thread names (ThreadNames), GPU names and properties
 *     (TARGET_INFO_GPU), streams as used.
 * Any table may be missing. Rows with unusable fields (wrong types, NULLs, dangling string ids,
 * zero or negative times) are skipped and counted; a file that is not SQLite, is corrupt, or is
 * SQLite but not an Nsight Systems export fails with a message naming the file.
 */
#ifndef SYNCTOP_NSYS_H
#define SYNCTOP_NSYS_H

#include <stddef.h>
#include <stdint.h>

#include "kineto.h"

#define NSYS_MAGIC "SQLite format 3"
#define NSYS_MAGIC_LEN 16 /* with its NUL */

/* Whether these first bytes of a file are an SQLite database's. */
int nsys_is_sqlite(const void *head, size_t n);

/* Imports the export at path. opts (batch_records, max_events, producer: the first process's id,
 * the others following) and st may be NULL; st is filled as by the Kineto importer (pid: the first
 * process's; invalid/first_invalid: rows skipped; skipped: runtime rows dropped as duplicates).
 * Returns 0 or a negative ERR_* code with a message in err that names the file. */
int nsys_import(const char *path, const kineto_opts *opts, kineto_emit_fn emit, void *ctx, kineto_stats *st,
                err_msg *err);

#endif
