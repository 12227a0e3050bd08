/*
 * Python call sites: the file:line:function frames of a CPython thread that is waiting for the GPU,
 * read from the interpreter's memory without the GIL and without allocating.
 *
 * Why this is safe. The frames read are the calling thread's own, and that thread is inside a CUDA
 * callback: it cannot pop a frame, and each frame holds a strong reference to its code object,
 * which holds its file name, function name and line table. So everything read here is alive and
 * unchanging for as long as the capture runs, with or without the GIL (PyTorch releases it around
 * its syncs; ctypes around every foreign call). Nothing read here is kept as a pointer: the names
 * are copied, at capture time, into a bounded table of descriptors (file, function) that the
 * application threads fill without locks and the flush thread reads; a frame is then a descriptor
 * id and a line, computed at capture from the code object's line table. The flush thread never
 * touches Python memory (a code object may be freed by the time it runs), never takes the GIL and
 * never calls the interpreter.
 *
 * Finding the interpreter. No libpython is linked: the interpreter's exported symbols are looked up
 * in the process (dlsym RTLD_DEFAULT) once, at injection: Py_Version (3.11+) or Py_GetVersion
 * (3.10) for the version, PyGILState_GetThisThreadState for the calling thread's state (it reads a
 * thread-specific key: no lock, no allocation, and it still answers while the GIL is released),
 * Py_IsInitialized, and the code and str type objects to check what is read. Layouts are per minor
 * version, each supported explicitly (3.10, 3.11, 3.12, 3.13); 3.13's are checked against the
 * _Py_DebugOffsets that CPython publishes at the start of _PyRuntime. Any other version, a
 * free-threaded build, or a layout that does not check out: no Python frames, native ones only.
 */
#ifndef SYNCTOP_TRACER_PYFRAMES_H
#define SYNCTOP_TRACER_PYFRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "synctop/error.h"

/* One Python frame as captured: where its names are, and where in the code it was. */
typedef struct tr_pyframe {
    uint32_t desc;  /* descriptor id (>= 1): file and function, see tr_py_describe */
    uint32_t line;  /* 1-based source line, 0 when the code object has none for that instruction */
    uint32_t lasti; /* byte offset of the instruction in the code object's bytecode */
} tr_pyframe;

/* Looks for CPython in the process (once; later calls return the first answer). Returns the
 * supported minor version (10..13), 0 when there is no interpreter, or ERR_UNSUPPORTED when there
 * is one the tracer cannot read (version, build, or layout), with the reason in err (may be NULL). */
int tr_py_init(err_msg *err);

/* The calling thread's Python frames, innermost first, at most max. Returns how many (0 when the
 * thread runs no Python code, or no supported interpreter was found). Safe from any thread with or
 * without the GIL; no lock, no allocation, no system call. */
unsigned tr_py_capture(tr_pyframe *out, unsigned max);

/* The file and function of a descriptor (UTF-8, not NUL-terminated). Returns 0, or -1 for an id
 * not (yet) published. Any thread; the strings stay valid for the life of the process. */
int tr_py_describe(uint32_t desc, const char **file, uint32_t *file_len, const char **func,
                   uint32_t *func_len);

/* Where the interpreter's own code is loaded (libpython, or the python executable when it is
 * linked in): native frames there are the eval loop, already told by the Python frames. 0 when
 * there is no supported interpreter. */
uintptr_t tr_py_module_base(void);

/* Frames that could not be described (table or arena full, unreadable names). */
uint64_t tr_py_refused(void);

#endif
