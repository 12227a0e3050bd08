/*
 * Finding libcupti, dlopen of it and dlsym of the functions the tracer calls (cupti_load.h). The
 * library is never closed: CUPTI keeps callbacks into the tracer and the driver keeps callbacks
 * into CUPTI.
 */
#include "cupti_load.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cupti_newer.h"

/* Where CUPTI usually lives when no copy is loaded yet: CUPTI 13's, then CUPTI 12's. */
static const char *const default_paths[] = {
    "libcupti.so.13",
    "libcupti.so",
    "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
    "/usr/local/cuda/lib64/libcupti.so.13",
    "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13",
    "/usr/local/cuda/targets/sbsa-linux/lib/libcupti.so.13",
    "libcupti.so.12",
    "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.12",
    "/usr/local/cuda/lib64/libcupti.so.12",
    "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.12",
    "/usr/local/cuda/targets/sbsa-linux/lib/libcupti.so.12",
};

/* The CUDA wheels' libcupti, relative to site-packages: a CUDA 13 torch has the first ones, a
 * CUDA 12 torch the last (nvidia-cuda-cupti-cu12). */
static const char *const wheel_paths[] = {
    "nvidia/cu13/lib/libcupti.so.13",
    "nvidia/cuda_cupti/lib/libcupti.so.13",
    "nvidia/cuda_cupti/lib/libcupti.so.12",
};

/* Loaded torch libraries: any of them puts site-packages three directories up. */
static const char *const torch_libs[] = {"/torch/lib/libtorch_cuda.so", "/torch/lib/libc10_cuda.so",
                                         "/torch/lib/libtorch_python.so", "/torch/lib/libtorch.so"};

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

typedef struct scan {
    char cupti[4][512]; /* loaded libcupti files (at most 4) */
    unsigned n_cupti;
    char torch[512];    /* a loaded torch library */
    char cudart[16];    /* ".so.12" when the process loaded libcudart.so.12[.x.y] ("" when none) */
} scan;

static int scan_one(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    scan *s = arg;
    const char *name = info->dlpi_name;
    if (name == NULL || name[0] != '/')
        return 0;
    if (strncmp(base_name(name), "libcupti.so", 11) == 0 && s->n_cupti < 4 &&
        strlen(name) < sizeof s->cupti[0])
        snprintf(s->cupti[s->n_cupti++], sizeof s->cupti[0], "%s", name);
    const char *rt = base_name(name);
    size_t major = strncmp(rt, "libcudart.so.", 13) == 0 ? strspn(rt + 13, "0123456789") : 0;
    if (major > 0 && major < 8 && s->cudart[0] == '\0') /* .so.12 of libcudart.so.12.8.90 */
        snprintf(s->cudart, sizeof s->cudart, ".so.%.*s", (int)major, rt + 13);
    size_t n = strlen(name);
    for (size_t i = 0; s->torch[0] == '\0' && i < sizeof torch_libs / sizeof torch_libs[0]; i++) {
        size_t t = strlen(torch_libs[i]);
        if (n > t && n - t < sizeof s->torch && strcmp(name + n - t, torch_libs[i]) == 0)
            snprintf(s->torch, sizeof s->torch, "%.*s", (int)(n - t), name);
    }
    return 0;
}

/* Binds every symbol; 0, or ERR_UNSUPPORTED with the reason (the handle is left open: never
 * closed). */
static int bind(tr_cupti *c, err_msg *err) {
    /* dlsym returns void *; going through a union keeps the conversion to a function pointer
     * well-defined as far as the compiler is concerned. */
#define TR_CUPTI_SYM_(name, args)                                                     \
    {                                                                                 \
        union {                                                                       \
            void *p;                                                                  \
            CUptiResult(*f) args;                                                     \
        } u_;                                                                         \
        u_.p = dlsym(c->handle, #name);                                               \
        if (u_.p == NULL) {                                                           \
            return err_set(err, ERR_UNSUPPORTED, "%s has no %s (CUPTI too old?)",      \
                           c->path, #name);                                           \
        }                                                                             \
        c->name = u_.f;                                                               \
    }
    TR_CUPTI_FUNCS(TR_CUPTI_SYM_)
#undef TR_CUPTI_SYM_
#define TR_CUPTI_OPT_(name, args)                                                     \
    {                                                                                 \
        union {                                                                       \
            void *p;                                                                  \
            CUptiResult(*f) args;                                                     \
        } u_;                                                                         \
        u_.p = dlsym(c->handle, #name);                                               \
        c->name = u_.f;                                                               \
    }
    TR_CUPTI_OPTIONAL(TR_CUPTI_OPT_)
#undef TR_CUPTI_OPT_
    union {
        void *p;
        int (*f)(const void *(*)(uint32_t));
    } nvtx = {.p = dlsym(c->handle, "InitializeInjectionNvtx2")};
    c->nvtx_init = nvtx.f;
    CUptiResult vr = c->cuptiGetVersion(&c->version);
    if (vr != CUPTI_SUCCESS)
        return err_set(err, ERR_UNSUPPORTED,
                       "%s fails its first call (cuptiGetVersion: CUPTI error %d), as CUPTI 13.3 "
                       "and later do where they find no CUDA driver",
                       c->path, (int)vr);
    return 0;
}

/* The records the converter reads (convert.c), and the sizes a CUPTI may lay each out in: CUPTI
 * 13.0's struct (the headers the tracer is built with) first, then the earlier versions CUPTI 12
 * writes, whose fields the converter reads lie at the same offsets (convert.c asserts it against
 * the structs of cupti_activity_deprecated.h), then the later versions of CUPTI 13.1 to 13.5,
 * which append fields (cupti_newer.h). Which version each release writes, by the newest its own
 * headers define and by what each release's library steps over (the nvidia-cuda-cupti wheels):
 * Kernel9 throughout 12, Kernel11 from 13.1, Kernel12 from 13.3, Kernel13 from 13.4; Memcpy5 and
 * Synchronization to 12.6, Memcpy6 and Synchronization2 from 12.8, Memcpy7 from 13.4; Memset4,
 * Memset5 from 13.4; Device4 to 12.1, Device5 from 12.2, Device6 from 13.2; Context to 12.3,
 * Context2 in 12.4, Context3 from 12.5, Context4 from 13.1. Only Synchronization lacks a field
 * read (returnValue). A library that lays a record out in any other size has a version whose
 * fields the converter would misread (CUPTI 11's Kernel8 is 200 bytes): it is refused, whatever
 * its version number says. */
#define LAYOUT_SIZES 5
static const struct {
    CUpti_ActivityKind kind;
    size_t sizes[LAYOUT_SIZES]; /* 0 after the last */
    const char *name;
} layouts[] = {
#define KERNEL_SIZES                                                                                                \
    {sizeof(CUpti_ActivityKernel10), sizeof(CUpti_ActivityKernel9), sizeof(tr_cupti_kernel11),                     \
     sizeof(tr_cupti_kernel12), sizeof(tr_cupti_kernel13)}
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, KERNEL_SIZES, "CONCURRENT_KERNEL"},
    {CUPTI_ACTIVITY_KIND_KERNEL, KERNEL_SIZES, "KERNEL"},
#undef KERNEL_SIZES
    {CUPTI_ACTIVITY_KIND_MEMCPY,
     {sizeof(CUpti_ActivityMemcpy6), sizeof(CUpti_ActivityMemcpy5), sizeof(tr_cupti_memcpy7)}, "MEMCPY"},
    {CUPTI_ACTIVITY_KIND_MEMSET, {sizeof(CUpti_ActivityMemset4), sizeof(tr_cupti_memset5)}, "MEMSET"},
    {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
     {sizeof(CUpti_ActivitySynchronization2), sizeof(CUpti_ActivitySynchronization)}, "SYNCHRONIZATION"},
    {CUPTI_ACTIVITY_KIND_RUNTIME, {sizeof(CUpti_ActivityAPI)}, "RUNTIME"},
    {CUPTI_ACTIVITY_KIND_DRIVER, {sizeof(CUpti_ActivityAPI)}, "DRIVER"},
    {CUPTI_ACTIVITY_KIND_MARKER, {sizeof(CUpti_ActivityMarker2)}, "MARKER"},
    {CUPTI_ACTIVITY_KIND_CONTEXT,
     {sizeof(CUpti_ActivityContext3), sizeof(CUpti_ActivityContext2), sizeof(CUpti_ActivityContext),
      sizeof(tr_cupti_context4)},
     "CONTEXT"},
    {CUPTI_ACTIVITY_KIND_STREAM, {sizeof(CUpti_ActivityStream)}, "STREAM"},
    {CUPTI_ACTIVITY_KIND_DEVICE,
     {sizeof(CUpti_ActivityDevice5), sizeof(CUpti_ActivityDevice4), sizeof(tr_cupti_device6)}, "DEVICE"},
};

/* The sizes of layouts[i] as text: "216, 208 or 224". */
static void sizes_text(size_t i, char *out, size_t cap) {
    size_t n = 0, count = 0;
    out[0] = '\0';
    while (count < LAYOUT_SIZES && layouts[i].sizes[count] != 0)
        count++;
    for (size_t j = 0; j < count && n < cap; j++) {
        const char *sep = j == 0 ? "" : j + 1 == count ? " or " : ", ";
        int w = snprintf(out + n, cap - n, "%s%zu", sep, layouts[i].sizes[j]);
        if (w < 0)
            break;
        n += (size_t)w;
    }
}

/* Asks the library how far it steps over one record of each kind the converter reads: a record of
 * that kind, then records of a small kind at every 8 bytes after it; the second record
 * cuptiActivityGetNextRecord returns starts where the library thinks the first ends. It reads
 * only the buffer it is given, once the library has initialized against the driver (CUPTI 12 to
 * 13.1 need none: they answer without a GPU; 13.2 to 13.5 answer nothing, cuptiGetVersion
 * included, where no driver loads, and 13.2 dies there: tracer.c). 0 with the SYNCHRONIZATION
 * records' size in c->sync_size, or ERR_UNSUPPORTED with the reason. */
static int check_layouts(tr_cupti *c, err_msg *err) {
    uint64_t buf[128];
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        memset(buf, 0, sizeof buf);
        for (size_t w = 0; w < sizeof buf / sizeof buf[0]; w++)
            memcpy(&buf[w], &(CUpti_ActivityKind){CUPTI_ACTIVITY_KIND_CONTEXT}, sizeof(CUpti_ActivityKind));
        memcpy(&buf[0], &layouts[i].kind, sizeof layouts[i].kind);
        CUpti_Activity *rec = NULL;
        CUptiResult r = c->cuptiActivityGetNextRecord((uint8_t *)buf, sizeof buf, &rec);
        if (r == CUPTI_SUCCESS)
            r = c->cuptiActivityGetNextRecord((uint8_t *)buf, sizeof buf, &rec);
        size_t step = r == CUPTI_SUCCESS ? (size_t)((uint8_t *)rec - (uint8_t *)buf) : 0;
        int known = 0;
        for (size_t j = 0; j < LAYOUT_SIZES && layouts[i].sizes[j] != 0; j++)
            known |= step == layouts[i].sizes[j];
        if (!known) {
            if (step == 0)
                return err_set(err, ERR_UNSUPPORTED,
                               "%s does not walk %s records (CUPTI error %d): not a CUPTI 12 or 13",
                               c->path, layouts[i].name, (int)r);
            char sizes[64];
            sizes_text(i, sizes, sizeof sizes);
            return err_set(err, ERR_UNSUPPORTED,
                           "%s lays out %s records in %zu bytes, not the %s of the CUPTI 12 and "
                           "13 versions this tracer reads (another version of the record)",
                           c->path, layouts[i].name, step, sizes);
        }
        if (layouts[i].kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)
            c->sync_size = step;
    }
    return 0;
}

/* Whether cuptiGetVersion's number is a CUPTI the tracer reads: 13 (xxyyzz, as the headers'), or
 * 12 in the numbering before 13: 18 (CUDA 12.0 and 12.1 say 18, though their headers say 19; so
 * does CUDA 11.8, whose kernel records check_layouts refuses) to 28 (CUDA 12.9 Update 1). */
static int version_read(uint32_t v) {
    return v / 10000 == CUPTI_API_VERSION / 10000 || (v >= 18 && v < 10000);
}

/* Opens path and binds it. With `known_version`, a CUPTI whose version number is not 12's or 13's
 * is refused. */
static int try_open(tr_cupti *c, const char *path, enum tr_cupti_source src, int known_version,
                    err_msg *err) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *e = dlerror();
        return err_set(err, ERR_NOENT, "cannot load %s: %s", path, e ? e : "unknown error");
    }
    tr_cupti t;
    memset(&t, 0, sizeof t);
    t.handle = h;
    t.source = src;
    /* The file dlopen found (a bare name resolves through the loader's search). */
    union {
        void *p;
        CUptiResult (*f)(uint32_t *);
    } v = {.p = dlsym(h, "cuptiGetVersion")};
    Dl_info info;
    if (v.p != NULL && dladdr(v.p, &info) != 0 && info.dli_fname != NULL && info.dli_fname[0] == '/')
        snprintf(t.path, sizeof t.path, "%s", info.dli_fname);
    else
        snprintf(t.path, sizeof t.path, "%s", path);
    int rc = bind(&t, err);
    if (rc != 0) {
        dlclose(h);
        return rc;
    }
    if (known_version && !version_read(t.version)) {
        err_set(err, ERR_UNSUPPORTED, "%s is CUPTI API version %u, not CUPTI 12 (18 to 28) or 13 (%u on)",
                t.path, t.version, CUPTI_API_VERSION / 10000 * 10000);
        dlclose(h);
        return ERR_UNSUPPORTED;
    }
    rc = check_layouts(&t, err);
    if (rc != 0) {
        dlclose(h);
        return rc;
    }
    *c = t;
    return 0;
}

int tr_cupti_load(tr_cupti *c, const char *path, err_msg *err) {
    memset(c, 0, sizeof *c);
    if (path != NULL && *path != '\0')
        return try_open(c, path, TR_CUPTI_NAMED, 0, err);
    scan s;
    memset(&s, 0, sizeof s);
    dl_iterate_phdr(scan_one, &s);
    for (unsigned i = 0; i < s.n_cupti; i++)
        if (try_open(c, s.cupti[i], TR_CUPTI_LOADED, 1, err) == 0)
            return 0;
    if (s.torch[0] != '\0') {
        /* .../site-packages/torch/lib/libX.so: the wheels lie beside torch. */
        for (size_t i = 0; i < sizeof wheel_paths / sizeof wheel_paths[0]; i++) {
            char p[1100];
            snprintf(p, sizeof p, "%s/%s", s.torch, wheel_paths[i]);
            if (access(p, R_OK) == 0 && try_open(c, p, TR_CUPTI_WHEEL, 1, err) == 0)
                return 0;
        }
    }
    /* the CUPTI of the CUDA runtime the process loaded first (a CUDA 12 program beside a CUDA 13
     * toolkit), then the rest in order */
    for (int pass = s.cudart[0] != '\0' ? 0 : 1; pass < 2; pass++)
        for (size_t i = 0; i < sizeof default_paths / sizeof default_paths[0]; i++) {
            size_t n = strlen(default_paths[i]), m = strlen(s.cudart);
            int runtimes = m > 0 && n > m && strcmp(default_paths[i] + n - m, s.cudart) == 0;
            if ((pass == 0) == runtimes && try_open(c, default_paths[i], TR_CUPTI_SEARCHED, 1, err) == 0)
                return 0;
        }
    return err_set(err, ERR_NOENT,
                   "libcupti.so.13 or libcupti.so.12 not found (set SYNCTOP_CUPTI=/path/to/libcupti.so)");
}

int tr_cupti_whole_api_kinds(const tr_cupti *c) {
    return c->cuptiActivityEnableRuntimeApi == NULL || c->cuptiActivityEnableDriverApi == NULL;
}

const char *tr_cupti_strerror(const tr_cupti *c, CUptiResult r) {
    const char *s = NULL;
    if (c->cuptiGetResultString != NULL && c->cuptiGetResultString(r, &s) == CUPTI_SUCCESS && s)
        return s;
    return "unknown CUPTI error";
}

const char *tr_cupti_source_name(enum tr_cupti_source s) {
    switch (s) {
    case TR_CUPTI_NAMED: return "named by SYNCTOP_CUPTI";
    case TR_CUPTI_LOADED: return "the copy the process had loaded";
    case TR_CUPTI_WHEEL: return "the CUDA wheel next to torch";
    case TR_CUPTI_SEARCHED: return "found on the library path or in the CUDA toolkit";
    }
    return "?";
}
