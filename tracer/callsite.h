/*
 * Call sites: the flush thread's side of "where did the host wait". The callbacks only copy raw
 * return addresses (hostq.h); here, off the application's threads, they are filtered (frames
 * inside the tracer, CUPTI, the driver and libcudart are not the user's), cut to the innermost few,
 * interned (identical call sites get one id for the life of the process) and, on first sight,
 * described with TP_K_CALLSITE + TP_K_FRAME metadata. Native frames are named with dladdr only:
 * the module's absolute path (the main program's from /proc/self/exe, since dladdr gives argv[0]),
 * exported symbol if any, and the address as an offset into the module, pointing into the call
 * instruction (return address - 1), ready for `addr2line -e MODULE OFFSET`. Function, file and
 * line from the module's symbol table and debug info are left to synctop (ingest/symbols.c), off the
 * traced program.
 *
 * When the host is CPython, the calling thread's Python frames (pyframes.h: a descriptor of file and
 * function, a line and an instruction offset, taken by the callback) come first, innermost first,
 * as TP_FRAME_PYTHON frames (file, func, line; pc = the instruction's byte offset in the code
 * object), then the native frames. A call site is identified by both: the same Python line
 * reached through two native paths, or two Python lines through one, are different call sites.
 */
#ifndef SYNCTOP_TRACER_CALLSITE_H
#define SYNCTOP_TRACER_CALLSITE_H

#include <stdint.h>

#include "pyframes.h"
#include "synctop/codec.h"

typedef struct tr_sites tr_sites;

/* keep: frames kept per call site (innermost first); max_sites: bound on distinct call sites. */
tr_sites *tr_sites_new(unsigned keep, uint32_t max_sites);
void tr_sites_destroy(tr_sites **s);

/* The id (>= 1) of the call site made of these Python frames and return addresses (both innermost
 * first), adding its metadata to enc the first time. 0 when no frame is left after filtering, or
 * past the bounds. py may be NULL when n_py is 0. */
uint32_t tr_sites_intern(tr_sites *s, tp_enc *enc, const tr_pyframe *py, unsigned n_py,
                         const uintptr_t *pcs, unsigned n);

/* Call sites refused because the bound was reached. */
uint64_t tr_sites_refused(const tr_sites *s);

#endif
