/*
 * Native call-site frames to function, file and line, off the traced program's hot path.
 *
 * The tracer publishes a native frame as the module's path and the offset of the call in it
 * (tracer/callsite.h). Here, in synctop, the module is read from disk with elfutils' libdwfl: the
 * function from the symbol table (demangled), file and line from the DWARF line table, in the
 * module itself or in /usr/lib/debug/.build-id. Nothing is fetched over the network (no
 * debuginfod). Module paths come from untrusted traces: only absolute paths to regular files are
 * opened, never a device, a FIFO or a directory.
 *
 * A module rebuilt since the trace was taken gives the new build's lines: the trace keeps no
 * build id to compare.
 */
#ifndef SYNCTOP_SYMBOLS_H
#define SYNCTOP_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "synctop/event.h"

typedef struct sy_cache sy_cache;

sy_cache *sy_new(void);
void sy_free(sy_cache **c);

/* What is known of one address. Strings belong to the cache and live as long as it. */
typedef struct sy_sym {
    const char *func; /* NULL when no symbol covers the address */
    const char *file; /* NULL when no line table covers it */
    uint32_t line;
} sy_sym;

/* The build id a module had where it ran (TP_K_MODULE). */
typedef struct sy_build_id {
    const uint8_t *id;
    size_t len; /* 0: it had none: nothing to compare */
} sy_build_id;

/* Looks up module + offset (as the tracer publishes them). With want, a file whose build id is
 * not that one is not used (it was rebuilt since: its lines would be wrong). Returns 0 when the
 * function or the line was found, -1 when neither was (missing, unreadable or changed module:
 * remembered, not retried). */
int sy_lookup(sy_cache *c, const char *module, const sy_build_id *want, uint64_t offset, sy_sym *out);

/* Modules that could not be read, and one of them. */
size_t sy_missing_modules(const sy_cache *c, const char **example);
/* Modules whose file has another build id than the one that ran, and one of them. */
size_t sy_stale_modules(const sy_cache *c, const char **example);

/* ---- symbolizing a store's call sites ----
 * The collecting half only reads the store, so it can run on the analysis thread while the view
 * draws; the applying half writes it, on the thread that owns the store. */

typedef struct sy_fix {
    uint64_t callsite;
    uint32_t index;
    uint32_t module; /* the frame's module and pc when collected: applied only if unchanged */
    uint64_t pc;
    sy_sym sym;
    int found;
} sy_fix;

typedef struct sy_fixes {
    sy_fix *v;
    size_t n, cap;
} sy_fixes;

/* Looks up native frames not yet symbolized, at most max_frames of them (0: all). Returns the
 * number of frames looked at, or -1 out of memory. */
long sy_collect(sy_cache *c, const st_store *s, size_t max_frames, sy_fixes *out);
/* Writes the fixes into the store and empties the list. */
void sy_apply(st_store *s, sy_fixes *f);
void sy_fixes_free(sy_fixes *f);

/* Both at once, for the verbs that load a whole trace (report, export, run). Returns how many
 * modules changed since the trace was taken (another build id: their frames stay module+offset);
 * the first one's path, sanitized, goes to changed (cap bytes; may be NULL). */
size_t sy_symbolize_store(st_store *s, char *changed, size_t cap);

#endif
