/*
 * CPython frames without the GIL (pyframes.h). The per-version layouts below were taken from each
 * minor version's own headers (offsetof over Include/internal, Py_BUILD_CORE) and agree with what
 * py-spy and austin read; 3.13's are also checked at run time against _Py_DebugOffsets.
 */
#include "pyframes.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

#define MAX_WALK 1024            /* frames walked before giving up (a cycle would be a bug) */
#define MAX_LINETABLE (1u << 20) /* bytes of line table decoded, at most */
#define FILE_MAX 1024            /* bytes of a file name kept (longer ones are cut) */
#define FUNC_MAX 256             /* bytes of a function name kept */
#define DESC_SLOTS 4096          /* distinct (file, function) pairs, a power of two */
#define DESC_PROBES 64
#define ARENA_BYTES (1u << 20) /* their names, all together */

enum { OWNED_BY_GENERATOR = 1, OWNED_BY_CSTACK = 3 };

/* Where things are in one minor version. Frame "instr" is f_lasti (an int, in code units) in 3.10,
 * prev_instr in 3.11/3.12 (the last instruction run), instr_ptr in 3.13 (the one running); all
 * three name the CALL a blocked frame is in. */
typedef struct layout {
    int minor;
    size_t ts_frame;       /* 3.10 frame, 3.11/3.12 cframe, 3.13 current_frame */
    size_t cframe_current; /* 3.11/3.12: _PyCFrame.current_frame */
    size_t fr_previous, fr_code, fr_instr, fr_owner;
    size_t co_filename, co_name, co_firstlineno, co_linetable, co_code_adaptive, co_firsttraceable;
    size_t ascii_size, compact_size; /* sizeof PyASCIIObject, PyCompactUnicodeObject */
} layout;

static const layout layouts[] = {
    {.minor = 10, .ts_frame = 24, .fr_previous = 24, .fr_code = 32, .fr_instr = 96,
     .co_filename = 104, .co_name = 112, .co_firstlineno = 40, .co_linetable = 120,
     .ascii_size = 48, .compact_size = 72},
    {.minor = 11, .ts_frame = 56, .cframe_current = 8, .fr_previous = 48, .fr_code = 32,
     .fr_instr = 56, .fr_owner = 69, .co_filename = 112, .co_name = 120, .co_firstlineno = 72,
     .co_linetable = 136, .co_code_adaptive = 184, .co_firsttraceable = 168, .ascii_size = 48,
     .compact_size = 72},
    {.minor = 12, .ts_frame = 56, .cframe_current = 0, .fr_previous = 8, .fr_code = 0,
     .fr_instr = 56, .fr_owner = 70, .co_filename = 112, .co_name = 120, .co_firstlineno = 68,
     .co_linetable = 136, .co_code_adaptive = 192, .co_firsttraceable = 176, .ascii_size = 40,
     .compact_size = 56},
    {.minor = 13, .ts_frame = 72, .fr_previous = 8, .fr_code = 0, .fr_instr = 56, .fr_owner = 70,
     .co_filename = 112, .co_name = 120, .co_firstlineno = 68, .co_linetable = 136,
     .co_code_adaptive = 200, .co_firsttraceable = 184, .ascii_size = 40, .compact_size = 56},
};

/* The same in every supported version. */
#define OB_TYPE 8
#define VAR_SIZE 16   /* PyVarObject.ob_size */
#define BYTES_DATA 32 /* PyBytesObject.ob_sval */
#define STR_LENGTH 16 /* PyASCIIObject.length */
#define STR_STATE 32  /* PyASCIIObject.state: kind bits 2-4, compact bit 5, ascii bit 6 */

/* A descriptor: a (file, function) pair, its bytes in the arena. state: 0 free, 1 being written,
 * 2 published (release), 3 abandoned (arena full). */
typedef struct desc {
    atomic_uint state;
    uint32_t hash, off;
    uint16_t file_len, func_len;
} desc;

static struct {
    atomic_int ready; /* 1 once a supported interpreter was found (release) */
    int answer;
    err_msg why;
    layout L;
    void *(*get_tstate)(void);
    int (*is_initialized)(void);
    const void *code_type, *str_type, *bytes_type;
    uintptr_t module_base;
    atomic_uint_fast64_t refused;
    atomic_uint arena_used;
    desc descs[DESC_SLOTS];
    char arena[ARENA_BYTES];
} P;

/* ---- reading the interpreter's memory ---- */

static const char *load_ptr(const char *at) {
    const char *p;
    memcpy(&p, at, sizeof p);
    return p;
}

static int plausible(const char *p) { return p != NULL && ((uintptr_t)p & 7) == 0; }

static int has_type(const char *obj, const void *type) {
    return plausible(obj) && load_ptr(obj + OB_TYPE) == (const char *)type;
}

static uint32_t load_u32(const char *at) {
    uint32_t v;
    memcpy(&v, at, sizeof v);
    return v;
}

static int64_t load_i64(const char *at) {
    int64_t v;
    memcpy(&v, at, sizeof v);
    return v;
}

static size_t put_utf8(char *out, size_t cap, size_t n, uint32_t cp) {
    char b[4];
    size_t k;
    if (cp >= 0xD800 && cp <= 0xDFFF)
        cp = '?'; /* a lone surrogate (surrogateescape'd bytes): not UTF-8 */
    if (cp < 0x80) {
        b[0] = (char)cp;
        k = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xC0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3F));
        k = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xE0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F));
        k = 3;
    } else {
        b[0] = (char)(0xF0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[3] = (char)(0x80 | (cp & 0x3F));
        k = 4;
    }
    if (n + k > cap)
        return n;
    memcpy(out + n, b, k);
    return n + k;
}

/* Copies a str object as UTF-8 (cut at cap, on a character boundary); -1 when it is not one. */
static long read_str(const char *s, char *out, size_t cap) {
    if (!has_type(s, P.str_type))
        return -1;
    int64_t len = load_i64(s + STR_LENGTH);
    uint32_t state = load_u32(s + STR_STATE);
    unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (len < 0 || (kind != 1 && kind != 2 && kind != 4))
        return -1;
    const char *data;
    if (compact && ascii)
        data = s + P.L.ascii_size;
    else if (compact)
        data = s + P.L.compact_size;
    else
        data = load_ptr(s + P.L.compact_size); /* PyUnicodeObject.data.any */
    if (data == NULL)
        return -1;
    if (ascii) {
        size_t n = (size_t)len < cap ? (size_t)len : cap;
        memcpy(out, data, n);
        return (long)n;
    }
    size_t n = 0;
    for (int64_t i = 0; i < len && n < cap; i++) {
        uint32_t cp;
        if (kind == 1)
            cp = (uint8_t)data[i];
        else if (kind == 2) {
            uint16_t u;
            memcpy(&u, data + 2 * i, 2);
            cp = u;
        } else
            memcpy(&cp, data + 4 * i, 4);
        size_t m = put_utf8(out, cap, n, cp);
        if (m == n)
            break;
        n = m;
    }
    return (long)n;
}

/* ---- line tables ---- */

/* 3.10 (PEP 626): byte pairs (bytecode bytes advanced, signed line delta; -128: no line). */
static int line_310(const uint8_t *t, size_t len, int first, long addr) {
    long end = 0;
    int line = first;
    for (size_t i = 0; i + 1 < len; i += 2) {
        long start = end;
        end += t[i];
        int8_t dl = (int8_t)t[i + 1];
        int here = -1;
        if (dl != -128) {
            line += dl;
            here = line;
        }
        if (addr >= start && addr < end)
            return here;
    }
    return -1;
}

static size_t varint(const uint8_t *t, size_t len, size_t i, unsigned *out) {
    unsigned v = 0, shift = 0;
    while (i < len) {
        uint8_t b = t[i++];
        if (shift < 32)
            v |= (unsigned)(b & 63) << shift;
        shift += 6;
        if (!(b & 64))
            break;
    }
    *out = v;
    return i;
}

/* 3.11+ (Objects/locations.md): entries start with a byte whose top bit is set; bits 3-6 are the
 * form, bits 0-2 the length in code units minus one. Forms 13 and 14 carry a signed varint line
 * delta, 10-12 a delta of 0-2, 15 means no line, the short forms 0-9 keep the line. */
static int line_311(const uint8_t *t, size_t len, int first, long addr) {
    long end = 0;
    int line = first;
    size_t i = 0;
    while (i < len) {
        uint8_t b = t[i];
        if (!(b & 128))
            return -1; /* not at an entry: a layout we do not understand */
        unsigned form = (b >> 3) & 15;
        int delta = 0;
        if (form == 13 || form == 14) {
            unsigned u;
            varint(t, len, i + 1, &u);
            delta = (u & 1) ? -(int)(u >> 1) : (int)(u >> 1);
        } else if (form >= 10 && form <= 12) {
            delta = (int)form - 10;
        }
        line += delta;
        long start = end;
        end += ((b & 7) + 1) * 2;
        if (addr >= start && addr < end)
            return form == 15 ? -1 : line;
        i++;
        while (i < len && !(t[i] & 128))
            i++;
    }
    return -1;
}

/* PyCode_Addr2Line, from the code object's memory. addr: byte offset, < 0 before the first. */
static uint32_t addr2line(const char *co, long addr) {
    int first = (int)load_u32(co + P.L.co_firstlineno);
    if (addr < 0)
        return first > 0 ? (uint32_t)first : 0;
    const char *lt = load_ptr(co + P.L.co_linetable);
    if (!has_type(lt, P.bytes_type))
        return 0;
    int64_t len = load_i64(lt + VAR_SIZE);
    if (len <= 0)
        return 0;
    size_t n = len < (int64_t)MAX_LINETABLE ? (size_t)len : MAX_LINETABLE;
    const uint8_t *t = (const uint8_t *)lt + BYTES_DATA;
    int line = P.L.minor == 10 ? line_310(t, n, first, addr) : line_311(t, n, first, addr);
    return line > 0 ? (uint32_t)line : 0;
}

/* ---- descriptors ---- */

/* The id of the (file, function) pair in buf (file_len bytes, then func_len bytes), published
 * on first sight. 0 when the table or the arena is full. Lock-free; duplicates are possible when
 * two threads add the same pair at the same moment, and harmless (ids are resolved by content). */
static uint32_t desc_id(const char *buf, size_t file_len, size_t func_len) {
    size_t n = file_len + func_len;
    uint32_t h = cm_fnv32(CM_FNV32_BASIS, buf, n) ^ (uint32_t)file_len;
    for (unsigned i = 0; i < DESC_PROBES; i++) {
        unsigned slot = (h + i) & (DESC_SLOTS - 1);
        desc *d = &P.descs[slot];
        unsigned st = atomic_load_explicit(&d->state, memory_order_acquire);
        /* A failed exchange leaves the slot's current state in st: compare against it below. */
        if (st == 0 && atomic_compare_exchange_strong_explicit(&d->state, &st, 1,
                                                               memory_order_acq_rel,
                                                               memory_order_acquire)) {
            unsigned off = atomic_load_explicit(&P.arena_used, memory_order_relaxed);
            do {
                if (off + n > ARENA_BYTES) {
                    atomic_store_explicit(&d->state, 3, memory_order_release);
                    return 0;
                }
            } while (!atomic_compare_exchange_weak_explicit(&P.arena_used, &off, off + (unsigned)n,
                                                            memory_order_relaxed,
                                                            memory_order_relaxed));
            memcpy(P.arena + off, buf, n);
            d->hash = h;
            d->off = off;
            d->file_len = (uint16_t)file_len;
            d->func_len = (uint16_t)func_len;
            atomic_store_explicit(&d->state, 2, memory_order_release);
            return slot + 1;
        }
        if (st == 2 && d->hash == h && d->file_len == file_len && d->func_len == func_len &&
            memcmp(P.arena + d->off, buf, n) == 0)
            return slot + 1;
    }
    return 0;
}

int tr_py_describe(uint32_t id, const char **file, uint32_t *file_len, const char **func,
                   uint32_t *func_len) {
    if (id == 0 || id > DESC_SLOTS)
        return -1;
    const desc *d = &P.descs[id - 1];
    if (atomic_load_explicit(&((desc *)d)->state, memory_order_acquire) != 2)
        return -1;
    *file = P.arena + d->off;
    *file_len = d->file_len;
    *func = P.arena + d->off + d->file_len;
    *func_len = d->func_len;
    return 0;
}

uintptr_t tr_py_module_base(void) {
    return atomic_load_explicit(&P.ready, memory_order_acquire) ? P.module_base : 0;
}

uint64_t tr_py_refused(void) { return atomic_load_explicit(&P.refused, memory_order_relaxed); }

/* ---- the walk ---- */

/* The descriptor of a code object's names; 0 when they cannot be read or kept. */
static uint32_t describe_code(const char *co) {
    char buf[FILE_MAX + FUNC_MAX];
    long fl = read_str(load_ptr(co + P.L.co_filename), buf, FILE_MAX);
    if (fl < 0)
        return 0;
    long nl = read_str(load_ptr(co + P.L.co_name), buf + fl, FUNC_MAX);
    if (nl < 0)
        return 0;
    return desc_id(buf, (size_t)fl, (size_t)nl);
}

unsigned tr_py_capture(tr_pyframe *out, unsigned max) {
    if (max == 0 || !atomic_load_explicit(&P.ready, memory_order_acquire))
        return 0;
    const layout *L = &P.L;
    if (!P.is_initialized())
        return 0;
    const char *ts = P.get_tstate();
    if (!plausible(ts))
        return 0;
    const char *f = load_ptr(ts + L->ts_frame);
    if (L->minor == 11 || L->minor == 12)
        f = plausible(f) ? load_ptr(f + L->cframe_current) : NULL;
    unsigned n = 0;
    for (unsigned depth = 0; plausible(f) && n < max && depth < MAX_WALK;
         depth++, f = load_ptr(f + L->fr_previous)) {
        const char *co = load_ptr(f + L->fr_code);
        if (!has_type(co, P.code_type))
            continue; /* 3.13: f_executable may be None */
        long addr;
        if (L->minor == 10) {
            int lasti;
            memcpy(&lasti, f + L->fr_instr, sizeof lasti);
            addr = lasti < 0 ? -1 : (long)lasti * 2;
        } else {
            uint8_t owner = (uint8_t)f[L->fr_owner];
            if (owner == OWNED_BY_CSTACK)
                continue; /* a shim frame between C and the interpreter (3.12+) */
            uintptr_t instr = (uintptr_t)load_ptr(f + L->fr_instr);
            long units = (long)(intptr_t)(instr - ((uintptr_t)co + L->co_code_adaptive)) / 2;
            int first_traceable = (int)load_u32(co + L->co_firsttraceable);
            if (owner != OWNED_BY_GENERATOR && units < first_traceable)
                continue; /* not started yet: CPython hides these frames too */
            addr = units * 2;
        }
        uint32_t d = describe_code(co);
        if (d == 0) {
            atomic_fetch_add_explicit(&P.refused, 1, memory_order_relaxed);
            continue;
        }
        out[n++] = (tr_pyframe){.desc = d, .line = addr2line(co, addr),
                                .lasti = addr < 0 ? 0 : (uint32_t)addr};
    }
    return n;
}

/* ---- finding the interpreter ---- */

static void *sym(const char *name) { return dlsym(RTLD_DEFAULT, name); }

/* The start of 3.13's _Py_DebugOffsets (Include/internal/pycore_runtime.h at v3.13.0), up to the
 * unicode offsets: what out-of-process debuggers read, and what 3.13 promises to keep. */
typedef struct debug_offsets_313 {
    char cookie[8];
    uint64_t version, free_threaded;
    uint64_t runtime_state[3];
    uint64_t interpreter_state[13];
    struct {
        uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id,
            datastack_chunk, status;
    } thread_state;
    struct {
        uint64_t size, previous, executable, instr_ptr, localsplus, owner;
    } interpreter_frame;
    struct {
        uint64_t size, filename, name, qualname, linetable, firstlineno, argcount,
            localsplusnames, localspluskinds, co_code_adaptive;
    } code_object;
    struct {
        uint64_t size, ob_type;
    } pyobject;
    uint64_t type_object[4], tuple_object[3], list_object[3], dict_object[3], float_object[2],
        long_object[3];
    struct {
        uint64_t size, ob_size, ob_sval;
    } bytes_object;
    struct {
        uint64_t size, state, length, asciiobject_size;
    } unicode_object;
} debug_offsets_313;

static int check_313(const layout *L, err_msg *err) {
    const debug_offsets_313 *d = sym("_PyRuntime");
    if (d == NULL) {
        return err_set(err, ERR_UNSUPPORTED, "Python 3.13 without _PyRuntime");
    }
    if (memcmp(d->cookie, "xdebugpy", 8) != 0 || ((d->version >> 16) & 0xFFFF) != 0x030D) {
        return err_set(err, ERR_UNSUPPORTED, "Python 3.13 with unexpected debug offsets");
    }
    if (d->free_threaded) {
        return err_set(err, ERR_UNSUPPORTED, "free-threaded Python is not supported");
    }
    int same = d->thread_state.current_frame == L->ts_frame &&
               d->interpreter_frame.previous == L->fr_previous &&
               d->interpreter_frame.executable == L->fr_code &&
               d->interpreter_frame.instr_ptr == L->fr_instr &&
               d->interpreter_frame.owner == L->fr_owner &&
               d->code_object.filename == L->co_filename && d->code_object.name == L->co_name &&
               d->code_object.linetable == L->co_linetable &&
               d->code_object.firstlineno == L->co_firstlineno &&
               d->code_object.co_code_adaptive == L->co_code_adaptive &&
               d->pyobject.ob_type == OB_TYPE && d->bytes_object.ob_size == VAR_SIZE &&
               d->bytes_object.ob_sval == BYTES_DATA && d->unicode_object.state == STR_STATE &&
               d->unicode_object.length == STR_LENGTH &&
               d->unicode_object.asciiobject_size == L->ascii_size;
    if (!same) {
        return err_set(err, ERR_UNSUPPORTED,
                       "Python 3.13 layout differs from the one the tracer knows");
    }
    return 0;
}

static int find(err_msg *err) {
    int major = 0, minor = -1;
    const unsigned long *hex = sym("Py_Version"); /* 3.11+ */
    if (hex != NULL) {
        major = (int)((*hex >> 24) & 0xFF);
        minor = (int)((*hex >> 16) & 0xFF);
    } else {
        union {
            void *p;
            const char *(*f)(void);
        } gv = {.p = sym("Py_GetVersion")};
        if (gv.p == NULL)
            return 0; /* not a Python process */
        if (sscanf(gv.f(), "%d.%d", &major, &minor) != 2)
            major = 0;
    }
    const layout *L = NULL;
    for (size_t i = 0; major == 3 && i < sizeof layouts / sizeof layouts[0]; i++)
        if (layouts[i].minor == minor)
            L = &layouts[i];
    if (L == NULL) {
        return err_set(err, ERR_UNSUPPORTED, "Python %d.%d is not supported (3.10 to 3.13 are)",
                       major, minor);
    }
    union {
        void *p;
        void *(*f)(void);
    } ts = {.p = sym("PyGILState_GetThisThreadState")};
    union {
        void *p;
        int (*f)(void);
    } init = {.p = sym("Py_IsInitialized")};
    P.code_type = sym("PyCode_Type");
    P.str_type = sym("PyUnicode_Type");
    P.bytes_type = sym("PyBytes_Type");
    if (ts.p == NULL || init.p == NULL || !P.code_type || !P.str_type || !P.bytes_type) {
        return err_set(err, ERR_UNSUPPORTED, "Python 3.%d without the symbols the tracer reads",
                       minor);
    }
    int rc = minor == 13 ? check_313(L, err) : 0;
    if (rc != 0)
        return rc;
    Dl_info info;
    if (dladdr(init.p, &info) != 0)
        P.module_base = (uintptr_t)info.dli_fbase;
    P.L = *L;
    P.get_tstate = ts.f;
    P.is_initialized = init.f;
    return minor;
}

int tr_py_init(err_msg *err) {
    static atomic_flag once = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&once)) {
        P.answer = find(&P.why);
        if (P.answer > 0)
            atomic_store_explicit(&P.ready, 1, memory_order_release);
    }
    if (err != NULL)
        *err = P.why;
    return P.answer;
}
