/*
 * Native frames to function, file and line with libdwfl (symbols.h).
 */
#include "symbols.h"

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "grow.h"
#include "hash.h"
#include "synctop/sanitize.h"
#include "u64map.h"

#define SY_MAX_MODULES 512 /* modules opened at most (paths come from untrusted traces) */

/* From libstdc++ (C++ ABI): program frames of a .cu file are C++ functions. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

/* An address range of a compile unit, for modules without .debug_aranges (clang does not write
 * it, and libdw before 0.191 then finds no line): built once per module, on first need. */
typedef struct cu_range {
    Dwarf_Addr lo, hi;
    Dwarf_Off die;
} cu_range;

typedef struct sy_mod {
    char *path;
    Dwfl *dwfl; /* NULL: the module could not be read */
    Dwfl_Module *mod;
    Dwarf_Addr start; /* where offset 0 of the module lies in dwfl's addresses */
    cu_range *ranges;
    size_t n_ranges, cap_ranges;
    int ranges_built;
    uint8_t build_id[TP_BUILD_ID_MAX]; /* of the file on disk */
    int build_id_len;                  /* 0: it has none */
    int stale_seen;                    /* counted in c->stale */
} sy_mod;

typedef struct sy_res {
    uint32_t mod;
    uint64_t offset;
    sy_sym sym;
    int found;
} sy_res;

struct sy_cache {
    sy_mod *mods;
    size_t n_mods, cap_mods;
    cm_u64map mod_by_hash; /* path hash -> index + 1 (collisions fall back to a scan) */
    sy_res *res;
    size_t n_res, cap_res;
    cm_u64map res_by_key; /* (module, offset) -> index + 1 */
    char **owned;      /* demangled names */
    size_t n_owned, cap_owned;
    size_t missing, stale;
    const char *missing_example, *stale_example;
};

sy_cache *sy_new(void) { return calloc(1, sizeof(sy_cache)); }

void sy_free(sy_cache **cp) {
    if (cp == NULL || *cp == NULL)
        return;
    sy_cache *c = *cp;
    for (size_t i = 0; i < c->n_mods; i++) {
        if (c->mods[i].dwfl != NULL)
            dwfl_end(c->mods[i].dwfl);
        free(c->mods[i].path);
        free(c->mods[i].ranges);
    }
    for (size_t i = 0; i < c->n_owned; i++)
        free(c->owned[i]);
    free(c->owned);
    free(c->mods);
    free(c->res);
    cm_u64map_free(&c->mod_by_hash);
    cm_u64map_free(&c->res_by_key);
    free(c);
    *cp = NULL;
}

size_t sy_missing_modules(const sy_cache *c, const char **example) {
    if (example)
        *example = c->missing_example;
    return c->missing;
}

size_t sy_stale_modules(const sy_cache *c, const char **example) {
    if (example)
        *example = c->stale_example;
    return c->stale;
}

/* Separate debug info, from local files only: /usr/lib/debug/.build-id/xx/yyyy.debug. The
 * standard callback may ask debuginfod servers over the network; a trace must not make us. */
static int find_debuginfo_local(Dwfl_Module *mod, void **userdata, const char *modname,
                                Dwarf_Addr base, const char *file_name, const char *debuglink_file,
                                GElf_Word debuglink_crc, char **debuginfo_file_name) {
    (void)userdata, (void)modname, (void)base, (void)file_name, (void)debuglink_file, (void)debuglink_crc;
    const unsigned char *bits;
    GElf_Addr vaddr;
    int len = dwfl_module_build_id(mod, &bits, &vaddr);
    if (len < 2 || len > 64)
        return -1;
    char path[64 + 2 * 64 + 16];
    int at = snprintf(path, sizeof path, "/usr/lib/debug/.build-id/%02x/", bits[0]);
    for (int i = 1; i < len; i++)
        at += snprintf(path + at, sizeof path - (size_t)at, "%02x", bits[i]);
    snprintf(path + at, sizeof path - (size_t)at, ".debug");
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -1;
    }
    *debuginfo_file_name = strdup(path);
    return fd;
}

static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = find_debuginfo_local,
    .section_address = dwfl_offline_section_address,
};

static void note_missing(sy_cache *c, sy_mod *m) {
    c->missing++;
    c->missing_example = m->path;
}

/* Opens one module: an absolute path to a regular ELF file. */
static void open_module(sy_cache *c, sy_mod *m) {
    if (m->path[0] != '/') {
        note_missing(c, m);
        return;
    }
    /* O_NONBLOCK: a FIFO named by a hostile trace must not hang the open. */
    int fd = open(m->path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 64) {
        if (fd >= 0)
            close(fd);
        note_missing(c, m);
        return;
    }
    Dwfl *d = dwfl_begin(&callbacks);
    if (d == NULL) {
        close(fd);
        note_missing(c, m);
        return;
    }
    dwfl_report_begin(d);
    /* At base 0: a shared object's offset 0 is then its first segment, like the loader's. */
    Dwfl_Module *mod = dwfl_report_elf(d, m->path, m->path, fd, 0, false);
    dwfl_report_end(d, NULL, NULL);
    if (mod == NULL) {
        close(fd); /* the module takes the descriptor only on success */
        dwfl_end(d);
        note_missing(c, m);
        return;
    }
    Dwarf_Addr start = 0;
    dwfl_module_info(mod, NULL, &start, NULL, NULL, NULL, NULL, NULL);
    const unsigned char *bits;
    GElf_Addr vaddr;
    int len = dwfl_module_build_id(mod, &bits, &vaddr);
    if (len > 0 && len <= TP_BUILD_ID_MAX) {
        memcpy(m->build_id, bits, (size_t)len);
        m->build_id_len = len;
    }
    m->dwfl = d;
    m->mod = mod;
    m->start = start;
}

/* Keyed (hash.h): paths come from traces, and paths chosen to share a hash would each cost a scan. */
static uint64_t hash_str(const char *s) { return cm_hash_bytes(s, strlen(s)); }

/* The module's index, opening it the first time; -1 when the table is full or out of memory. */
static long module_index(sy_cache *c, const char *path) {
    uint64_t h = hash_str(path);
    uint64_t *v = cm_u64map_find(&c->mod_by_hash, h);
    if (v != NULL && strcmp(c->mods[*v - 1].path, path) == 0)
        return (long)(*v - 1);
    if (v != NULL) /* a hash collision: look through them all */
        for (size_t i = 0; i < c->n_mods; i++)
            if (strcmp(c->mods[i].path, path) == 0)
                return (long)i;
    if (c->n_mods >= SY_MAX_MODULES || CM_GROW(c->mods, c->cap_mods, c->n_mods + 1) != 0)
        return -1;
    sy_mod *m = &c->mods[c->n_mods];
    memset(m, 0, sizeof *m);
    m->path = strdup(path);
    if (m->path == NULL)
        return -1;
    if (v == NULL && cm_u64map_put(&c->mod_by_hash, h, c->n_mods + 1) != 0) {
        free(m->path);
        return -1;
    }
    open_module(c, m);
    return (long)c->n_mods++;
}

static const char *keep_name(sy_cache *c, const char *name) {
    if (name == NULL)
        return NULL;
    if (strncmp(name, "_Z", 2) != 0)
        return name;
    int status = 0;
    char *d = __cxa_demangle(name, NULL, NULL, &status);
    if (d == NULL || status != 0) {
        free(d);
        return name;
    }
    if (CM_GROW(c->owned, c->cap_owned, c->n_owned + 1) != 0) {
        free(d);
        return name;
    }
    c->owned[c->n_owned++] = d;
    return d;
}

static int cmp_range(const void *a, const void *b) {
    const cu_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

#define SY_MAX_RANGES (1u << 22) /* CU ranges kept per module */

static void build_ranges(sy_mod *m, Dwarf *dw) {
    m->ranges_built = 1;
    Dwarf_Off off = 0, next;
    size_t hsize;
    while (dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
        Dwarf_Die cu;
        if (dwarf_offdie(dw, off + hsize, &cu) != NULL) {
            Dwarf_Addr base, lo, hi;
            ptrdiff_t it = 0;
            while ((it = dwarf_ranges(&cu, it, &base, &lo, &hi)) > 0) {
                if (hi <= lo || m->n_ranges >= SY_MAX_RANGES ||
                    CM_GROW(m->ranges, m->cap_ranges, m->n_ranges + 1) != 0)
                    continue;
                m->ranges[m->n_ranges++] = (cu_range){lo, hi, off + hsize};
            }
        }
        off = next;
    }
    cm_sort(m->ranges, m->n_ranges, sizeof *m->ranges, cmp_range);
}

/* The line of addr (in the module's own addresses) through the CU ranges. */
static Dwarf_Line *line_by_ranges(sy_mod *m, Dwarf_Addr addr) {
    Dwarf_Addr bias = 0;
    Dwarf *dw = dwfl_module_getdwarf(m->mod, &bias);
    if (dw == NULL)
        return NULL;
    if (!m->ranges_built)
        build_ranges(m, dw);
    Dwarf_Addr a = addr - bias;
    /* the last range starting at or before a; ranges may nest or overlap: look back a little */
    size_t lo = 0, hi = m->n_ranges;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->ranges[mid].lo <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo, k = 0; i > 0 && k < 16; i--, k++) {
        const cu_range *r = &m->ranges[i - 1];
        Dwarf_Die cu;
        if (a < r->hi && dwarf_offdie(dw, r->die, &cu) != NULL) {
            Dwarf_Line *l = dwarf_getsrc_die(&cu, a);
            if (l != NULL)
                return l;
        }
    }
    return NULL;
}

static int resolve(sy_cache *c, sy_mod *m, uint64_t offset, sy_sym *out) {
    memset(out, 0, sizeof *out);
    if (m->dwfl == NULL)
        return -1;
    Dwarf_Addr addr = m->start + offset;
    GElf_Off off;
    GElf_Sym sym;
    out->func = keep_name(c, dwfl_module_addrinfo(m->mod, addr, &off, &sym, NULL, NULL, NULL));
    Dwfl_Line *l = dwfl_module_getsrc(m->mod, addr);
    int line = 0;
    const char *file = NULL;
    if (l != NULL) {
        file = dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL);
    } else {
        Dwarf_Line *dl = line_by_ranges(m, addr);
        if (dl != NULL && dwarf_lineno(dl, &line) == 0)
            file = dwarf_linesrc(dl, NULL, NULL);
    }
    if (file != NULL && line > 0) {
        out->file = file;
        out->line = (uint32_t)line;
    }
    return out->func != NULL || out->file != NULL ? 0 : -1;
}

int sy_lookup(sy_cache *c, const char *module, const sy_build_id *want, uint64_t offset, sy_sym *out) {
    memset(out, 0, sizeof *out);
    if (module == NULL || *module == '\0')
        return -1;
    long mi = module_index(c, module);
    if (mi < 0)
        return -1;
    sy_mod *m = &c->mods[mi];
    /* The file at that path today is not the one that ran: its lines would be wrong. */
    if (want != NULL && want->len > 0 && m->dwfl != NULL &&
        ((size_t)m->build_id_len != want->len || memcmp(m->build_id, want->id, want->len) != 0)) {
        if (!m->stale_seen) {
            m->stale_seen = 1;
            c->stale++;
            c->stale_example = m->path;
        }
        return -1;
    }
    /* Offsets beyond 2^48 are not in any module; they are looked up (and fail) uncached. */
    if (offset >> 48)
        return resolve(c, &c->mods[mi], offset, out);
    uint64_t key = ((uint64_t)(mi + 1) << 48) | offset;
    uint64_t *v = cm_u64map_find(&c->res_by_key, key);
    if (v != NULL) {
        *out = c->res[*v - 1].sym;
        return c->res[*v - 1].found ? 0 : -1;
    }
    int rc = resolve(c, &c->mods[mi], offset, out);
    if (CM_GROW(c->res, c->cap_res, c->n_res + 1) == 0 &&
        cm_u64map_put(&c->res_by_key, key, c->n_res + 1) == 0)
        c->res[c->n_res++] = (sy_res){.mod = (uint32_t)mi, .offset = offset, .sym = *out, .found = rc == 0};
    return rc;
}

long sy_collect(sy_cache *c, const st_store *s, size_t max_frames, sy_fixes *out) {
    long looked = 0;
    size_t n_cs = st_callsite_count(s);
    for (uint64_t cs = 1; cs <= n_cs; cs++) {
        size_t n;
        const st_frame *f = st_callsite_frames(s, cs, &n);
        for (size_t i = 0; i < n; i++) {
            if (f[i].kind != TP_FRAME_NATIVE || f[i].symbolized)
                continue;
            if (max_frames != 0 && (size_t)looked >= max_frames)
                return looked;
            if (CM_GROW(out->v, out->cap, out->n + 1) != 0)
                return -1;
            sy_fix *x = &out->v[out->n++];
            memset(x, 0, sizeof *x);
            x->callsite = cs;
            x->index = (uint32_t)i;
            x->module = f[i].module;
            x->pc = f[i].pc;
            sy_build_id want = {0};
            int known = st_module_build_id(s, cs, f[i].module, &want.id, &want.len);
            x->found = sy_lookup(c, st_str(s, f[i].module), known ? &want : NULL, f[i].pc, &x->sym) == 0;
            looked++;
        }
    }
    return looked;
}

void sy_apply(st_store *s, sy_fixes *f) {
    for (size_t i = 0; i < f->n; i++) {
        const sy_fix *x = &f->v[i];
        st_frame_set_symbol(s, x->callsite, x->index, x->module, x->pc, x->found ? x->sym.func : NULL,
                            x->found ? x->sym.file : NULL, x->found ? x->sym.line : 0);
    }
    f->n = 0;
}

void sy_fixes_free(sy_fixes *f) {
    free(f->v);
    memset(f, 0, sizeof *f);
}

size_t sy_symbolize_store(st_store *s, char *changed, size_t cap) {
    sy_cache *c = sy_new();
    if (c == NULL)
        return 0;
    sy_fixes f = {0};
    if (sy_collect(c, s, 0, &f) >= 0)
        sy_apply(s, &f);
    sy_fixes_free(&f);
    const char *example = NULL;
    size_t stale = sy_stale_modules(c, &example);
    if (changed != NULL && cap > 0)
        changed[0] = '\0';
    if (changed != NULL && cap > 0 && stale > 0)
        tp_sanitize(changed, cap, example, strlen(example), NULL);
    sy_free(&c);
    return stale;
}
