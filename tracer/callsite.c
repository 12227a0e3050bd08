/*
 * Call-site interning and lazy symbolization (callsite.h). Flush thread only: nothing here is
 * shared with the callbacks.
 */
#include "callsite.h"
#include "hash.h"
#include "synctop/error.h"
#include "text.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#define MOD_CACHE 64      /* modules remembered with their verdict (user code or not) */
#define MAX_ANNOUNCED 1024 /* modules described with TP_K_MODULE, at most */

/* A Python frame as the flush thread keys it: by the encoder's ids of its strings (so that two
 * descriptors of the same names are one), its line and instruction offset. */
typedef struct pykey {
    uint32_t file, func, line, lasti;
} pykey;

typedef struct site {
    uint64_t hash;
    uint32_t id;
    uint32_t n, n_py;
    uintptr_t *pcs;
    pykey *py;
} site;

typedef struct mod {
    uintptr_t base;
    int skip;
} mod;

struct tr_sites {
    unsigned keep;
    uint32_t max_sites;
    uint32_t n_sites;
    size_t cap; /* slots in table (power of two) */
    site *table;
    uint64_t refused;
    mod mods[MOD_CACHE];
    unsigned n_mods, next_mod;
    uintptr_t self_base;
    uintptr_t announced[MAX_ANNOUNCED]; /* bases of the modules described so far */
    unsigned n_announced;
    uintptr_t exe_base;    /* the main program's, whose dladdr name is argv[0], maybe relative */
    char exe_path[4096];   /* its absolute path, from /proc/self/exe ("" when unknown) */
};

/* Libraries between the application and the wait: their frames say nothing about the caller. */
static const char *const skipped_libs[] = {"libsynctop-tracer", "libcupti", "libcuda.so",
                                           "libcudart.so", "libnvidia-"};

tr_sites *tr_sites_new(unsigned keep, uint32_t max_sites) {
    tr_sites *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->keep = keep ? keep : 8;
    s->max_sites = max_sites ? max_sites : 65536;
    s->cap = 256;
    s->table = calloc(s->cap, sizeof *s->table);
    if (s->table == NULL) {
        free(s);
        return NULL;
    }
    Dl_info info;
    if (dladdr((void *)(uintptr_t)&tr_sites_new, &info) != 0)
        s->self_base = (uintptr_t)info.dli_fbase;
    /* The program headers lie in the main program's first segment. */
    unsigned long phdr = getauxval(AT_PHDR);
    if (phdr != 0 && dladdr((void *)phdr, &info) != 0)
        s->exe_base = (uintptr_t)info.dli_fbase;
    ssize_t n = readlink("/proc/self/exe", s->exe_path, sizeof s->exe_path - 1);
    s->exe_path[n > 0 ? n : 0] = '\0';
    return s;
}

void tr_sites_destroy(tr_sites **sp) {
    if (sp == NULL || *sp == NULL)
        return;
    tr_sites *s = *sp;
    for (size_t i = 0; i < s->cap; i++) {
        free(s->table[i].pcs);
        free(s->table[i].py);
    }
    free(s->table);
    free(s);
    *sp = NULL;
}

uint64_t tr_sites_refused(const tr_sites *s) { return s->refused; }

/* Whether a sanitizer's runtime (an instrumented program links it in) names this function: its
 * interceptors and helpers are never the user's line, and a stack scan finds their stale return
 * addresses among the live ones. */
static int sanitizer_name(const char *name) {
    static const char *const prefixes[] = {"__asan_", "__interceptor_", "___interceptor_", "__sanitizer",
                                           "__ubsan_", "__lsan_", "__msan_", "__tsan_", "__hwasan_"};
    for (size_t i = 0; name != NULL && i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

/* Whether a return address belongs to code between the user and the wait: a skipped module (by
 * module, remembered) or a sanitizer's runtime (by function), found with one dladdr. Unknown
 * addresses (JIT code, no module) are kept: they may well be the user's. */
static int pc_skipped(tr_sites *s, uintptr_t pc) {
    Dl_info info;
    if (dladdr((void *)(pc - 1), &info) == 0 || info.dli_fbase == NULL)
        return 0;
    uintptr_t base = (uintptr_t)info.dli_fbase;
    for (unsigned i = 0; i < s->n_mods; i++)
        if (s->mods[i].base == base)
            return s->mods[i].skip || sanitizer_name(info.dli_sname);
    int skip = base == s->self_base;
    if (!skip && info.dli_fname != NULL) {
        const char *name = cm_base_name(info.dli_fname);
        for (size_t i = 0; i < sizeof skipped_libs / sizeof skipped_libs[0]; i++)
            if (strncmp(name, skipped_libs[i], strlen(skipped_libs[i])) == 0)
                skip = 1;
    }
    unsigned slot = s->n_mods < MOD_CACHE ? s->n_mods++ : s->next_mod++ % MOD_CACHE;
    s->mods[slot] = (mod){base, skip};
    return skip || sanitizer_name(info.dli_sname);
}

static uintptr_t module_base(uintptr_t pc) {
    Dl_info info;
    return dladdr((void *)pc, &info) != 0 ? (uintptr_t)info.dli_fbase : 0;
}

static int pc_is_self(const tr_sites *s, uintptr_t pc) {
    Dl_info info;
    return s->self_base != 0 && dladdr((void *)pc, &info) != 0 &&
           (uintptr_t)info.dli_fbase == s->self_base;
}

static uint64_t mix(uint64_t h, uint64_t v) {
    h = cm_fnv64_word(h, v);
    return h ^ (h >> 29);
}

static uint64_t hash_site(const pykey *py, unsigned n_py, const uintptr_t *pcs, unsigned n) {
    uint64_t h = CM_FNV64_BASIS;
    for (unsigned i = 0; i < n_py; i++) {
        h = mix(h, ((uint64_t)py[i].file << 32) | py[i].func);
        h = mix(h, ((uint64_t)py[i].line << 32) | py[i].lasti);
    }
    h = mix(h, n_py);
    for (unsigned i = 0; i < n; i++)
        h = mix(h, (uint64_t)pcs[i]);
    return h ? h : 1;
}

static int grow(tr_sites *s) {
    size_t cap = s->cap * 2;
    site *t = calloc(cap, sizeof *t);
    if (t == NULL)
        return ERR_NOMEM;
    for (size_t i = 0; i < s->cap; i++) {
        if (s->table[i].id == 0)
            continue;
        size_t j = s->table[i].hash & (cap - 1);
        while (t[j].id != 0)
            j = (j + 1) & (cap - 1);
        t[j] = s->table[i];
    }
    free(s->table);
    s->table = t;
    s->cap = cap;
    return 0;
}

/* The GNU build id of the loaded object whose first segment's mapping starts at base (dladdr's
 * dli_fbase), from its PT_NOTE segments in memory. */
typedef struct bid_search {
    uintptr_t base, page;
    uint8_t id[TP_BUILD_ID_MAX];
    unsigned len;
} bid_search;

static int find_build_id(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    bid_search *b = arg;
    /* base lies in the first page of the first loaded segment, whatever the page size */
    int mine = 0;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD) {
            uintptr_t at = (uintptr_t)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
            mine = b->base <= at && at - b->base < b->page;
            break;
        }
    if (!mine)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)(const void *)p;
            size_t name = (n->n_namesz + 3) & ~(size_t)3, desc = (n->n_descsz + 3) & ~(size_t)3;
            const uint8_t *nm = p + sizeof *n;
            if ((size_t)(end - nm) < name + desc)
                break;
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && memcmp(nm, "GNU", 4) == 0 &&
                n->n_descsz > 0 && n->n_descsz <= TP_BUILD_ID_MAX) {
                memcpy(b->id, nm + name, n->n_descsz);
                b->len = n->n_descsz;
                return 1;
            }
            p = nm + name + desc;
        }
    }
    return 1;
}

/* Describes a module with TP_K_MODULE the first time a frame names it. */
static void announce(tr_sites *s, tp_enc *enc, uintptr_t base, uint32_t path) {
    for (unsigned i = 0; i < s->n_announced; i++)
        if (s->announced[i] == base)
            return;
    if (s->n_announced == MAX_ANNOUNCED)
        return;
    s->announced[s->n_announced++] = base;
    long page = sysconf(_SC_PAGESIZE);
    bid_search b = {.base = base, .page = page > 0 ? (uintptr_t)page : 4096};
    dl_iterate_phdr(find_build_id, &b);
    tp_module m = {.kind = TP_K_MODULE, .device = TP_NO_DEVICE, .path = path, .build_id_len = (uint8_t)b.len};
    memcpy(m.build_id, b.id, b.len);
    tp_enc_add(enc, &m);
}

static void describe(tr_sites *s, tp_enc *enc, uint32_t id, const pykey *py, unsigned n_py,
                     const uintptr_t *pcs, unsigned n) {
    /* The native frames first, so that their modules are announced before the call site: its
     * frames must follow it without anything in between. */
    tp_frame nat[32];
    for (unsigned i = 0; i < n && i < 32; i++) {
        /* A return address points after the call; one byte back is inside it, which is the line a
         * symbolizer should name. */
        uintptr_t at = pcs[i] - 1;
        tp_frame f = {.kind = TP_K_FRAME, .flags = TP_FRAME_NATIVE,
                      .index = (uint16_t)(n_py + i), .callsite = id, .pc = at};
        Dl_info info;
        if (dladdr((void *)at, &info) != 0) {
            /* An absolute path, so that synctop can read the module from any directory. */
            if ((uintptr_t)info.dli_fbase == s->exe_base && s->exe_path[0] == '/')
                f.module = tp_enc_intern_cstr(enc, s->exe_path);
            else if (info.dli_fname != NULL)
                f.module = tp_enc_intern_cstr(enc, info.dli_fname);
            if (f.module != 0)
                announce(s, enc, (uintptr_t)info.dli_fbase, f.module);
            if (info.dli_sname != NULL)
                f.func = tp_enc_intern_cstr(enc, info.dli_sname);
            f.pc = at - (uintptr_t)info.dli_fbase;
        }
        nat[i] = f;
    }
    tp_callsite cs = {.kind = TP_K_CALLSITE, .device = TP_NO_DEVICE, .id = id,
                      .n_frames = n_py + n};
    tp_enc_add(enc, &cs);
    for (unsigned i = 0; i < n_py; i++) {
        tp_frame f = {.kind = TP_K_FRAME, .flags = TP_FRAME_PYTHON, .index = (uint16_t)i,
                      .callsite = id, .line = py[i].line, .file = py[i].file, .func = py[i].func,
                      .pc = py[i].lasti};
        tp_enc_add(enc, &f);
    }
    for (unsigned i = 0; i < n && i < 32; i++)
        tp_enc_add(enc, &nat[i]);
}

/* The flush thread's key of captured Python frames; frames whose descriptor is not readable
 * are left out. */
static unsigned py_keys(tr_sites *s, tp_enc *enc, const tr_pyframe *py, unsigned n_py,
                        pykey *out) {
    unsigned k = 0;
    for (unsigned i = 0; i < n_py && k < s->keep && k < 32; i++) {
        const char *file, *func;
        uint32_t file_len, func_len;
        if (tr_py_describe(py[i].desc, &file, &file_len, &func, &func_len) != 0)
            continue;
        out[k++] = (pykey){.file = tp_enc_intern(enc, file, file_len),
                           .func = tp_enc_intern(enc, func, func_len), .line = py[i].line,
                           .lasti = py[i].lasti};
    }
    return k;
}

uint32_t tr_sites_intern(tr_sites *s, tp_enc *enc, const tr_pyframe *py, unsigned n_py,
                         const uintptr_t *pcs, unsigned n) {
    pykey pk[32];
    unsigned kp = py != NULL ? py_keys(s, enc, py, n_py, pk) : 0;
    uintptr_t kept[32];
    unsigned k = 0;
    unsigned i = 0;
    /* Frames inside backtrace() itself (libc, a sanitizer's interceptor) come before the
     * tracer's; drop them, then the run of tracer/CUPTI/driver/runtime frames and of a
     * sanitizer's runtime; keep the rest. */
    while (i < n && !pc_is_self(s, pcs[i]))
        i++;
    if (i == n)
        i = 0;
    while (i < n && (pcs[i] == 0 || pc_skipped(s, pcs[i])))
        i++;
    /* Below Python frames, the native ones end where the interpreter's begin: the eval loop's
     * return addresses change as it specializes the calling instruction, and say nothing the
     * Python frames do not. */
    uintptr_t py_base = kp > 0 ? tr_py_module_base() : 0;
    for (; i < n && k < s->keep && k < 32; i++) {
        if (pcs[i] == 0)
            continue;
        if (py_base != 0 && module_base(pcs[i]) == py_base)
            break;
        kept[k++] = pcs[i];
    }
    if (k == 0 && kp == 0)
        return 0;
    uint64_t h = hash_site(pk, kp, kept, k);
    size_t j = h & (s->cap - 1);
    while (s->table[j].id != 0) {
        site *e = &s->table[j];
        if (e->hash == h && e->n == k && e->n_py == kp &&
            memcmp(e->pcs, kept, k * sizeof kept[0]) == 0 &&
            (kp == 0 || memcmp(e->py, pk, kp * sizeof pk[0]) == 0))
            return e->id;
        j = (j + 1) & (s->cap - 1);
    }
    if (s->n_sites >= s->max_sites) {
        s->refused++;
        return 0;
    }
    if ((s->n_sites + 1) * 2 > s->cap) {
        if (grow(s) != 0) {
            s->refused++;
            return 0;
        }
        j = h & (s->cap - 1);
        while (s->table[j].id != 0)
            j = (j + 1) & (s->cap - 1);
    }
    /* One allocation more than needed rather than malloc(0), whose result may be NULL. */
    uintptr_t *copy = malloc((k + 1) * sizeof *copy);
    pykey *pcopy = malloc((kp + 1) * sizeof *pcopy);
    if (copy == NULL || pcopy == NULL) {
        free(copy);
        free(pcopy);
        s->refused++;
        return 0;
    }
    memcpy(copy, kept, k * sizeof *copy);
    memcpy(pcopy, pk, kp * sizeof *pcopy);
    uint32_t id = ++s->n_sites;
    s->table[j] = (site){.hash = h, .id = id, .n = k, .n_py = kp, .pcs = copy, .py = pcopy};
    describe(s, enc, id, pk, kp, kept, k);
    return id;
}
