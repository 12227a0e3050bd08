/*
 * The stack-scan fallback for native call sites (stackscan.h).
 */
#include "stackscan.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <unwind.h>

#define SCAN_BYTES (32u * 1024u) /* stack scanned above the stack pointer, at most */
#define MAX_RETIRED 16           /* replaced tables waiting for their last reader */

typedef struct range {
    uintptr_t lo, hi;
} range;

typedef struct table {
    unsigned n;
    range r[]; /* sorted by lo */
} table;

/* Libraries between the application and the wait (as callsite.c skips them), and the system's
 * runtime, whose return addresses a scan finds mostly stale (left by calls that returned). */
static const char *const skipped_libs[] = {
    "libsynctop-tracer", "libcupti", "libcuda.so", "libcudart.so", "libnvidia-", "linux-vdso",
    "libc.so", "libc-", "libm.so", "libpthread", "libdl.so", "librt.so", "ld-linux",
    "libstdc++", "libgcc_s"};

/* The unwinder (libgcc_s), looked up once: its walk also says where on the stack it stopped. */
static struct {
    _Unwind_Reason_Code (*trace)(_Unwind_Trace_Fn, void *);
    _Unwind_Ptr (*ip)(struct _Unwind_Context *);
    _Unwind_Word (*cfa)(struct _Unwind_Context *);
} uw;

static _Atomic(table *) cur;
static atomic_int readers;
/* Flush thread only. */
static table *retired[MAX_RETIRED];
static unsigned n_retired;
static unsigned long long seen_adds, seen_subs;
static int built;
static uintptr_t page_size = 4096;
static uintptr_t self_lo, self_hi; /* this library's code, learnt at the first refresh */

/* Per thread: its stack, learnt at the first scan (0 unknown, 1 known, -1 unknowable). */
static __thread struct {
    int known;
    uintptr_t lo, hi;
} stk;

typedef struct collect_arg {
    range *r;
    unsigned n, cap;
    uintptr_t self; /* an address inside this library */
    int failed;
} collect_arg;

static int collect(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    collect_arg *c = arg;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = (uintptr_t)(info->dlpi_addr + ph->p_vaddr);
        if (ph->p_type == PT_LOAD && c->self >= lo && c->self - lo < ph->p_memsz) {
            if (self_hi == 0) {
                self_lo = lo;
                self_hi = lo + ph->p_memsz;
            }
            return 0; /* the tracer itself */
        }
    }
    for (size_t i = 0; i < sizeof skipped_libs / sizeof skipped_libs[0]; i++)
        if (strncmp(base, skipped_libs[i], strlen(skipped_libs[i])) == 0)
            return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || ph->p_memsz == 0)
            continue;
        if (c->n == c->cap) {
            unsigned cap = c->cap ? c->cap * 2 : 64;
            range *r = realloc(c->r, cap * sizeof *r);
            if (r == NULL) {
                c->failed = 1;
                return 1;
            }
            c->r = r;
            c->cap = cap;
        }
        uintptr_t lo = (uintptr_t)(info->dlpi_addr + ph->p_vaddr);
        c->r[c->n++] = (range){lo, lo + ph->p_memsz};
    }
    return 0;
}

static int range_cmp(const void *a, const void *b) {
    uintptr_t x = ((const range *)a)->lo, y = ((const range *)b)->lo;
    return x < y ? -1 : x > y;
}

static int count_changes(struct dl_phdr_info *info, size_t size, void *arg) {
    unsigned long long *v = arg;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
        v[0] = info->dlpi_adds;
        v[1] = info->dlpi_subs;
    }
    return 1; /* the counters are the same in every entry: one is enough */
}

static void free_retired(void) {
    if (atomic_load(&readers) != 0)
        return;
    for (unsigned i = 0; i < n_retired; i++)
        free(retired[i]);
    n_retired = 0;
}

static void load_unwinder(void) {
    void *h = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        return;
    union {
        void *p;
        _Unwind_Reason_Code (*trace)(_Unwind_Trace_Fn, void *);
        _Unwind_Ptr (*ip)(struct _Unwind_Context *);
        _Unwind_Word (*cfa)(struct _Unwind_Context *);
    } t = {.p = dlsym(h, "_Unwind_Backtrace")}, i = {.p = dlsym(h, "_Unwind_GetIP")},
      c = {.p = dlsym(h, "_Unwind_GetCFA")};
    if (t.p == NULL || i.p == NULL || c.p == NULL)
        return; /* the handle stays: nothing else to do with it */
    uw.trace = t.trace;
    uw.ip = i.ip;
    uw.cfa = c.cfa;
}

void tr_scan_refresh(void) {
    if (!built) {
        load_unwinder();
        /* The unwinder's first walk loads what it needs (allocating): now, not in a callback. */
        void *prime[4];
        backtrace(prime, 4);
    }
    unsigned long long v[2] = {0, 0};
    dl_iterate_phdr(count_changes, v);
    free_retired();
    if (built && v[0] == seen_adds && v[1] == seen_subs)
        return;
    if (n_retired == MAX_RETIRED)
        return; /* readers keep the old ones: try again next round */
    long pg = sysconf(_SC_PAGESIZE);
    if (pg > 0)
        page_size = (uintptr_t)pg;
    collect_arg c = {.self = (uintptr_t)&tr_scan_refresh};
    dl_iterate_phdr(collect, &c);
    table *t = c.failed ? NULL : malloc(sizeof *t + c.n * sizeof t->r[0]);
    if (t == NULL) {
        free(c.r);
        return;
    }
    t->n = c.n;
    if (c.n > 0)
        memcpy(t->r, c.r, c.n * sizeof t->r[0]);
    free(c.r);
    qsort(t->r, t->n, sizeof t->r[0], range_cmp);
    table *old = atomic_exchange(&cur, t);
    if (old != NULL)
        retired[n_retired++] = old;
    free_retired();
    seen_adds = v[0];
    seen_subs = v[1];
    built = 1;
}

static int in_table(const table *t, uintptr_t pc) {
    unsigned lo = 0, hi = t->n;
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        if (pc < t->r[mid].lo)
            hi = mid;
        else if (pc >= t->r[mid].hi)
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

int tr_scan_is_self(uintptr_t pc) { return pc >= self_lo && pc < self_hi; }

int tr_scan_is_user(uintptr_t pc) {
    atomic_fetch_add(&readers, 1);
    const table *t = atomic_load(&cur);
    int user = t != NULL && in_table(t, pc);
    atomic_fetch_sub(&readers, 1);
    return user;
}

/* Whether the instruction that ends at ra is a call. */
static int after_call(uintptr_t ra) {
#if defined(__x86_64__)
    const uint8_t *p = (const uint8_t *)ra;
    if (p[-5] == 0xE8) /* call rel32 */
        return 1;
    /* call r/m64: FF /2, two to seven bytes with its ModRM, SIB and displacement */
    for (int len = 2; len <= 7; len++) {
        const uint8_t *q = p - len;
        if (q[0] != 0xFF || ((q[1] >> 3) & 7) != 2)
            continue;
        unsigned mod = q[1] >> 6, rm = q[1] & 7;
        int l = 2;
        if (mod != 3 && rm == 4) {
            l++;
            if (mod == 0 && (q[2] & 7) == 5)
                l += 4;
        }
        if (mod == 0 && rm == 5)
            l += 4;
        else if (mod == 1)
            l += 1;
        else if (mod == 2)
            l += 4;
        if (l == len)
            return 1;
    }
    return 0;
#elif defined(__aarch64__)
    uint32_t insn;
    memcpy(&insn, (const void *)(ra - 4), sizeof insn);
    return (insn & 0xFC000000u) == 0x94000000u || (insn & 0xFFFFFC1Fu) == 0xD63F0000u; /* bl, blr */
#else
    (void)ra;
    return 1;
#endif
}

/* Whether [lo, hi) (at most a page long) is mapped: a table may name an unloaded module until
 * the next refresh. */
static int mapped(uintptr_t lo, uintptr_t hi) {
    if (lo < 4096 || hi < lo)
        return 0;
    uintptr_t a = lo & ~(page_size - 1), b = (hi - 1) & ~(page_size - 1);
    unsigned char vec[2];
    return b - a <= page_size && mincore((void *)a, b - a + page_size, vec) == 0;
}

/* Whether the call that ends at ra leaves user code: an indirect call (its target is not known),
 * or a direct one to another module, through a PLT stub or not. The innermost frame of a call
 * into CUDA does; most stale return addresses do not. */
static int calls_out(const table *t, uintptr_t ra) {
#if defined(__x86_64__)
    const uint8_t *p = (const uint8_t *)ra;
    if (p[-5] != 0xE8)
        return 1;
    int32_t rel;
    memcpy(&rel, p - 4, sizeof rel);
    uintptr_t target = ra + (uintptr_t)(intptr_t)rel;
    if (!in_table(t, target))
        return 1;
    if (!mapped(target, target + 16))
        return 0;
    const uint8_t *q = (const uint8_t *)target;
    if (q[0] == 0xF3 && q[1] == 0x0F && q[2] == 0x1E && q[3] == 0xFA) /* endbr64 */
        q += 4;
    if (q[0] == 0xF2) /* bnd */
        q++;
    if (q[0] != 0xFF || q[1] != 0x25) /* jmp *GOT(%rip): a PLT stub */
        return 0;
    int32_t disp;
    memcpy(&disp, q + 2, sizeof disp);
    uintptr_t slot = (uintptr_t)(q + 6) + (uintptr_t)(intptr_t)disp;
    if (!mapped(slot, slot + sizeof(uintptr_t)))
        return 0;
    uintptr_t dest;
    memcpy(&dest, (const void *)slot, sizeof dest);
    return !in_table(t, dest);
#else
    (void)t;
    (void)ra;
    return 1;
#endif
}

static void learn_stack(void) {
    stk.known = -1;
    pthread_attr_t a;
    if (pthread_getattr_np(pthread_self(), &a) != 0)
        return;
    void *addr = NULL;
    size_t size = 0;
    if (pthread_attr_getstack(&a, &addr, &size) == 0 && addr != NULL && size > 0) {
        stk.lo = (uintptr_t)addr;
        stk.hi = stk.lo + size;
        stk.known = 1;
    }
    pthread_attr_destroy(&a);
}

/* Reads the stack of other frames, sanitizer redzones included: not instrumented. */
__attribute__((no_sanitize_address, noinline)) static unsigned scan(uintptr_t *out, unsigned max,
                                                                     uintptr_t from) {
    if (stk.known == 0)
        learn_stack();
    if (stk.known < 0)
        return 0;
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    if (from > sp)
        sp = from;
    if (sp < stk.lo || sp >= stk.hi)
        return 0; /* another stack (a signal's, a coroutine's): its extent is unknown */
    uintptr_t end = stk.hi - sp > SCAN_BYTES ? sp + SCAN_BYTES : stk.hi;
    unsigned n = 0;
    atomic_fetch_add(&readers, 1);
    const table *t = atomic_load(&cur);
    for (uintptr_t p = (sp + 7) & ~(uintptr_t)7; t != NULL && p + 8 <= end && n < max; p += 8) {
        uintptr_t w = *(const volatile uintptr_t *)p;
        if (!in_table(t, w) || !mapped(w - 8, w) || !after_call(w))
            continue;
        if (n == 0 && !calls_out(t, w))
            continue; /* the innermost frame is the one that called out of the program */
        if (n > 0 && out[n - 1] == w)
            continue;
        out[n++] = w;
    }
    atomic_fetch_sub(&readers, 1);
    return n;
}

typedef struct walk {
    uintptr_t *out;
    unsigned n, max;
    uintptr_t cfa; /* of the last frame reached */
} walk;

static _Unwind_Reason_Code step(struct _Unwind_Context *ctx, void *arg) {
    walk *w = arg;
    uintptr_t ip = (uintptr_t)uw.ip(ctx);
    if (ip == 0 || w->n >= w->max)
        return _URC_END_OF_STACK;
    w->out[w->n++] = ip;
    w->cfa = (uintptr_t)uw.cfa(ctx);
    return _URC_NO_REASON;
}

unsigned tr_scan_take(uintptr_t *out, unsigned max, uintptr_t from) {
    walk w = {.out = out, .max = max};
    if (uw.trace != NULL) {
        uw.trace(step, &w);
    } else {
        void *pcs[64];
        int n = backtrace(pcs, (int)(max < 64 ? max : 64));
        for (int i = 0; i < n; i++)
            out[i] = (uintptr_t)pcs[i];
        w.n = n > 0 ? (unsigned)n : 0;
    }
    /* Frames before the tracer's own are the unwinder's (libc, a sanitizer's interceptor). */
    unsigned i = 0;
    while (i < w.n && !tr_scan_is_self(out[i]))
        i++;
    if (i == w.n)
        i = 0;
    for (; i < w.n; i++)
        if (tr_scan_is_user(out[i]))
            return w.n;
    /* The walk never left CUPTI and the driver: scan from where it stopped. */
    uintptr_t tmp[64];
    unsigned m = scan(tmp, max < 64 ? max : 64, w.cfa > from ? w.cfa : from);
    if (m == 0)
        return w.n;
    memcpy(out, tmp, m * sizeof tmp[0]);
    return m;
}
