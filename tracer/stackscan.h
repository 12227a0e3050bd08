/*
 * Native call sites: the calling thread's return addresses, from inside a CUPTI callback. The
 * unwinder (libgcc_s, as backtrace() uses it) walks the stack through CUPTI and the driver: code
 * the program does not control, which may lack unwind information. When the frames it returns
 * reach no user module, the stack is scanned instead, from where the walk stopped: a bounded run
 * of words upward, within the thread's stack, keeping those that point into the executable code
 * of a user module just after a call instruction, i.e. the return addresses of the program's
 * frames (and, being a scan, sometimes a stale one a frame left behind).
 *
 * "User modules" are every loaded object but the tracer, CUPTI, the driver, the CUDA runtime and
 * NVIDIA's libraries (as callsite.c filters them), and the C and C++ runtimes (where stale return
 * addresses abound). Their code ranges are a table that the
 * flush thread (re)builds when the set of loaded objects changes and publishes for the callbacks,
 * which read it without a lock; a replaced table is freed only once no callback can be reading it
 * (the current one lives as long as the process).
 */
#ifndef SYNCTOP_TRACER_STACKSCAN_H
#define SYNCTOP_TRACER_STACKSCAN_H

#include <stdint.h>

/* Builds the table of user-module code ranges if the loaded objects changed since the last call
 * (the first call builds it). Flush thread (or injection) only. */
void tr_scan_refresh(void);

/* Whether a return address lies in a user module's code. Any thread; no lock, no allocation. */
int tr_scan_is_user(uintptr_t pc);
/* Whether it lies in the tracer's own code (known after the first refresh). */
int tr_scan_is_self(uintptr_t pc);

/* The calling thread's return addresses, innermost first, at most max (the unwinder's, or the
 * scan's when the unwinder reached no user module). `from`: the frame of the tracer's outermost
 * function on the stack (a scan starts above it and above where the unwinder stopped: the frames
 * below hold return addresses in their locals too). No lock; the first scan on a thread learns
 * its stack bounds (pthread_getattr_np). */
unsigned tr_scan_take(uintptr_t *out, unsigned max, uintptr_t from);

#endif
