/*
 * Several sources imported at once, their batches handed on in order: the profiler traces and
 * Nsight Systems exports of a load (load.c), of `synctop import` or of `synctop info` are read N
 * at once, N the threads given (or fewer sources), each import on the threads divided by N. The
 * caller goes through the sources in order; a source no worker has taken it imports itself, as
 * it would alone; a source a worker read ahead comes as the list of its encoded batches, which
 * ahead_take hands to the caller's emit function. The batches come in the same order as from one
 * thread. Only the 2N sources from the caller's on are read or held, so memory grows with the
 * threads, not with the sources. A source read ahead that fails fails when the caller comes to it.
 */
#ifndef SYNCTOP_AHEAD_H
#define SYNCTOP_AHEAD_H

#include <stddef.h>
#include <stdint.h>

#include "import.h"

typedef struct ing_ahead ing_ahead;

/* Imports source i: o holds the threads and the progress function it is to use (the other fields
 * 0); its batches go to emit, its figures to st. Returns what the importer returns. Called on the
 * workers, several at once for different sources. */
typedef int (*ahead_read_fn)(void *ctx, size_t i, const import_opts *o, import_emit_fn emit, void *emit_ctx,
                             import_stats *st, err_msg *err);

/* n sources, of which those with may[i] set may be read ahead (source 0 never is: the caller starts
 * on it), on threads threads in all. Returns NULL, with *nomem 0, when nothing is to be read ahead
 * (fewer than two such sources, or one thread), and NULL with *nomem 1 when out of memory. */
ing_ahead *ahead_start(size_t n, const uint8_t *may, int threads, ahead_read_fn read, void *ctx, int *nomem);
/* The threads one import uses (the caller's own imports too). */
int ahead_threads_each(const ing_ahead *a);

#define AHEAD_MINE 2
/* The caller comes to source i (in order: each source once, i growing): AHEAD_MINE when it is to
 * import it itself; else, once its worker is done, its batches handed to emit and its figures
 * copied to st (when not NULL): 1, or the import's (or emit's) negative code with err set. While
 * the source is being read, the caller imports a later one into its list, or waits; progress
 * (when not NULL) hears how far the source's reading has come, and stops the load by returning
 * non-zero (ERR_EOF, "import cancelled"). */
int ahead_take(ing_ahead *a, size_t i, import_emit_fn emit, void *emit_ctx, import_stats *st,
               import_progress_fn progress, void *progress_ctx, const char *name, err_msg *err);

/* Stops the workers (an import under way stops at its next progress call), joins them and frees
 * what they held. NULL does nothing. */
void ahead_end(ing_ahead **a);

#endif
