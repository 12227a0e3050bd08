/*
 * A stand-in for a CUDA program and its driver, for the tracer's tests: loads the stand-in
 * libcupti ($SYNCTOP_STANDIN) and the script, loads the tracer (argv[1], else
 * $CUDA_INJECTION64_PATH, as the driver would) and calls its InitializeInjection, then plays the
 * script as "the program". The harness_site_* functions are the program's call sites: the tracer
 * must name them as where the program waited.
 *
 * NVTX: with $NVTX_INJECTION64_PATH set, the harness does what NVTX does at its first use, before
 * CUDA starts (the order that leaves the injection to find CUPTI by itself): loads that library
 * and calls its InitializeInjectionNvtx2.
 * A process that loaded libraries of its own before CUDA (PyTorch): $HARNESS_PRELOAD, a library
 * loaded first; with $HARNESS_LATE_STANDIN=1 the stand-in is loaded only after the tracer has
 * chosen its libcupti (the script is then read after injection).
 *
 * usage: tracer_harness [TRACER.so] SCRIPT
 * Prints "harness: program done" when the program ran to its end; exit status 0, or 3 when the
 * script failed to play, 2 on a setup error.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standin/standin.h"

#define SITE(n)                                                                              \
    __attribute__((visibility("default"), noinline)) void harness_site_##n(void (*inner)(void *), \
                                                                             void *arg);     \
    __attribute__((visibility("default"), noinline)) void harness_site_##n(void (*inner)(void *), \
                                                                             void *arg) {    \
        inner(arg);                                                                          \
        __asm__ volatile("" ::: "memory"); /* no tail call: this frame must stay on the stack */ \
    }
SITE(1) // @site1
SITE(2) // @site2
SITE(3) // @site3

/* Site 4 goes through frames like those a statically linked CUDA runtime puts between the driver
 * and the program: the API function and cudart:: internals, in the program itself. A call site
 * must be named after harness_site_4, not after them. */
__attribute__((noinline)) void harness_runtime_inner(void (*inner)(void *), void *arg) __asm__(
    "_ZN6cudart24cudaApiStreamSynchronizeEP11CUstream_st");
__attribute__((noinline)) void harness_runtime_inner(void (*inner)(void *), void *arg) {
    inner(arg);
    __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) void harness_runtime_api(void (*inner)(void *), void *arg) __asm__(
    "cudaStreamSynchronize");
__attribute__((noinline)) void harness_runtime_api(void (*inner)(void *), void *arg) {
    harness_runtime_inner(inner, arg);
    __asm__ volatile("" ::: "memory");
}
__attribute__((visibility("default"), noinline)) void harness_site_4(void (*inner)(void *), void *arg);
__attribute__((visibility("default"), noinline)) void harness_site_4(void (*inner)(void *), void *arg) {
    harness_runtime_api(inner, arg); // @site4
    __asm__ volatile("" ::: "memory");
}

static void *sym(void *h, const char *name) {
    void *p = dlsym(h, name);
    if (p == NULL) {
        fprintf(stderr, "harness: no %s: %s\n", name, dlerror());
        exit(2);
    }
    return p;
}

/* NVTX's export-table accessor, as an injection receives it (nothing is looked up here). */
static const void *nvtx_export_table(uint32_t id) {
    (void)id;
    return NULL;
}

static void *load_standin(const char *path, const char *script) {
    void *s = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (s == NULL) {
        fprintf(stderr, "harness: %s\n", dlerror());
        exit(2);
    }
    int (*load)(const char *) = (int (*)(const char *))sym(s, "standin_load");
    void (*set_sites)(const standin_site_fn *, int) =
        (void (*)(const standin_site_fn *, int))sym(s, "standin_set_sites");
    if (load(script) != 0) {
        fprintf(stderr, "harness: cannot read %s\n", script);
        exit(2);
    }
    const standin_site_fn sites[] = {harness_site_1, harness_site_2, harness_site_3, harness_site_4};
    set_sites(sites, 4);
    return s;
}

int main(int argc, char **argv) {
    const char *tracer = argc > 2 ? argv[1] : getenv("CUDA_INJECTION64_PATH");
    const char *script = argv[argc - 1];
    const char *standin = getenv("SYNCTOP_STANDIN");
    const char *nvtx = getenv("NVTX_INJECTION64_PATH");
    const char *preload = getenv("HARNESS_PRELOAD");
    const char *late = getenv("HARNESS_LATE_STANDIN");
    int late_standin = late != NULL && strcmp(late, "1") == 0;
    if (argc < 2 || standin == NULL) {
        fprintf(stderr, "usage: SYNCTOP_STANDIN=libcupti.so.13 tracer_harness [TRACER.so] SCRIPT\n");
        return 2;
    }
    if (preload != NULL && *preload != '\0' && dlopen(preload, RTLD_NOW | RTLD_LOCAL) == NULL) {
        fprintf(stderr, "harness: %s\n", dlerror());
        return 2;
    }
    void *s = late_standin ? NULL : load_standin(standin, script);
    if (nvtx != NULL && *nvtx != '\0') {
        void *n = dlopen(nvtx, RTLD_NOW | RTLD_LOCAL);
        union {
            void *p;
            int (*f)(const void *(*)(uint32_t));
        } init = {.p = n ? dlsym(n, "InitializeInjectionNvtx2") : NULL};
        if (init.p == NULL || init.f(nvtx_export_table) == 0)
            printf("harness: no NVTX injection in %s\n", nvtx);
    }
    if (tracer != NULL && *tracer != '\0') {
        void *t = dlopen(tracer, RTLD_NOW | RTLD_LOCAL);
        if (t == NULL) {
            fprintf(stderr, "harness: %s\n", dlerror());
            return 2;
        }
        int (*init)(void) = (int (*)(void))sym(t, "InitializeInjection");
        if (init() != 1)
            fprintf(stderr, "harness: InitializeInjection did not return 1\n");
    }
    if (s == NULL)
        s = load_standin(standin, script);
    int (*play)(void) = (int (*)(void))sym(s, "standin_play");
    int rc = play();
    printf("harness: program done\n");
    fflush(stdout);
    return rc == 0 ? 0 : 3;
}
