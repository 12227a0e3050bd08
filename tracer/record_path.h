/*
 * Which file this process records to (SYNCTOP_RECORD), when several processes of one job inherit
 * the same setting: torchrun's ranks, a launcher's children, spawned workers. Each process gets a
 * file of its own and none truncates another's.
 *
 * "%p" in the setting becomes the process id, "%r" the rank (RANK, OMPI_COMM_WORLD_RANK or
 * LOCAL_RANK; the process id when none is set), "%%" a percent sign: such a name is the process's
 * own. Otherwise the first process of the job to start tracing takes the name as given, and a
 * later one records beside it, with its rank (trace.rank1.trace) or else its process id
 * (trace.pid4242.trace) before the extension. A process holds a lock on the file it records to
 * (flock, released when it exits); a name is another's when its file is locked, or was written
 * since this process's parent started (a sibling that already ended). A file older than that is a
 * previous job's, and is replaced, as before.
 */
#ifndef SYNCTOP_TRACER_RECORD_PATH_H
#define SYNCTOP_TRACER_RECORD_PATH_H

#include <stddef.h>

/* Chooses and claims the file. rank: -1 when unknown. Returns 0 with the path in out and the
 * locked descriptor in *lock_fd (kept open for the life of the process), or ERR_IO with errno set
 * (the directory is not writable, the name too long...). */
int tr_record_claim(const char *spec, int rank, char *out, size_t outlen, int *lock_fd);

#endif
