/*
 * dlopen of libcupti and dlsym of the functions the tracer calls (cupti_load.h). The library is
 * never closed: CUPTI keeps callbacks into the tracer and the driver keeps callbacks into CUPTI.
 */
#include "cupti_load.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* Where CUPTI usually lives when it is not on the loader's path. */
static const char *const default_paths[] = {
    "libcupti.so.13",
    "libcupti.so",
    "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
    "/usr/local/cuda/lib64/libcupti.so.13",
    "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13",
    "/usr/local/cuda/targets/sbsa-linux/lib/libcupti.so.13",
};

static void *open_one(const char *path, char *why, size_t whylen) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *e = dlerror();
        snprintf(why, whylen, "cannot load %s: %s", path, e ? e : "unknown error");
    }
    return h;
}

int tr_cupti_load(tr_cupti *c, const char *path, char *why, size_t whylen) {
    memset(c, 0, sizeof *c);
    if (path != NULL && *path != '\0') {
        c->handle = open_one(path, why, whylen);
    } else {
        for (size_t i = 0; i < sizeof default_paths / sizeof default_paths[0]; i++) {
            c->handle = open_one(default_paths[i], why, whylen);
            if (c->handle != NULL) {
                path = default_paths[i];
                break;
            }
        }
        if (c->handle == NULL)
            snprintf(why, whylen, "libcupti.so.13 not found (set SYNCTOP_CUPTI=/path/to/libcupti.so)");
    }
    if (c->handle == NULL)
        return -1;
    snprintf(c->path, sizeof c->path, "%s", path);
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
            snprintf(why, whylen, "%s has no %s (CUPTI too old?)", c->path, #name);   \
            memset(c, 0, sizeof *c);                                                  \
            return -1;                                                                \
        }                                                                             \
        c->name = u_.f;                                                               \
    }
    TR_CUPTI_FUNCS(TR_CUPTI_SYM_)
#undef TR_CUPTI_SYM_
    return 0;
}

const char *tr_cupti_strerror(const tr_cupti *c, CUptiResult r) {
    const char *s = NULL;
    if (c->cuptiGetResultString != NULL && c->cuptiGetResultString(r, &s) == CUPTI_SUCCESS && s)
        return s;
    return "unknown CUPTI error";
}
