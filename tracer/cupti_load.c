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

/* Where CUPTI usually lives when no copy is loaded yet. */
static const char *const default_paths[] = {
    "libcupti.so.13",
    "libcupti.so",
    "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
    "/usr/local/cuda/lib64/libcupti.so.13",
    "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13",
    "/usr/local/cuda/targets/sbsa-linux/lib/libcupti.so.13",
};

/* The CUDA wheels' libcupti, relative to site-packages. */
static const char *const wheel_paths[] = {
    "nvidia/cu13/lib/libcupti.so.13",
    "nvidia/cuda_cupti/lib/libcupti.so.13",
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
    if (c->cuptiGetVersion(&c->version) != CUPTI_SUCCESS)
        c->version = 0;
    return 0;
}

/* Opens path and binds it. With `same_major`, a CUPTI of another major version than the headers'
 * (whose records the converter would misread) is refused. */
static int try_open(tr_cupti *c, const char *path, enum tr_cupti_source src, int same_major,
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
    if (same_major && t.version / 10000 != CUPTI_API_VERSION / 10000) {
        err_set(err, ERR_UNSUPPORTED, "%s is CUPTI API version %u, not %u", t.path, t.version,
                CUPTI_API_VERSION / 10000 * 10000);
        dlclose(h);
        return ERR_UNSUPPORTED;
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
    for (size_t i = 0; i < sizeof default_paths / sizeof default_paths[0]; i++)
        if (try_open(c, default_paths[i], TR_CUPTI_SEARCHED, 1, err) == 0)
            return 0;
    return err_set(err, ERR_NOENT,
                   "libcupti.so.13 not found (set SYNCTOP_CUPTI=/path/to/libcupti.so)");
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
