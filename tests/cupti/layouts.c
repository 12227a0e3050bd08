/*
 * What a libcupti says of itself without a GPU: its version, how far cuptiActivityGetNextRecord
 * steps over a record of each kind the tracer reads (its record layouts), and whether the tracer
 * takes it (tr_cupti_load, as SYNCTOP_CUPTI would). tests/cupti/wheels.sh runs it on the
 * libraries of NVIDIA's CUDA wheels. Each library in a process of its own: usage: layouts LIBCUPTI
 */
#include <cupti.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cupti_load.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: layouts LIBCUPTI\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        printf("cannot load: %s\n", dlerror());
        return 1;
    }
    union {
        void *p;
        CUptiResult (*f)(uint32_t *);
    } gv = {.p = dlsym(h, "cuptiGetVersion")};
    union {
        void *p;
        CUptiResult (*f)(uint8_t *, size_t, CUpti_Activity **);
    } nx = {.p = dlsym(h, "cuptiActivityGetNextRecord")};
    if (gv.p == NULL || nx.p == NULL) {
        printf("not a libcupti\n");
        return 1;
    }
    uint32_t v = 0;
    CUptiResult vr = gv.f(&v);
    printf("version %u (CUPTI result %d)\n", v, (int)vr);
    static const struct {
        CUpti_ActivityKind kind;
        const char *name;
    } kinds[] = {{CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL"},
                 {CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY"},
                 {CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET"},
                 {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "SYNCHRONIZATION"},
                 {CUPTI_ACTIVITY_KIND_RUNTIME, "RUNTIME"},
                 {CUPTI_ACTIVITY_KIND_MARKER, "MARKER"},
                 {CUPTI_ACTIVITY_KIND_CONTEXT, "CONTEXT"},
                 {CUPTI_ACTIVITY_KIND_STREAM, "STREAM"},
                 {CUPTI_ACTIVITY_KIND_DEVICE, "DEVICE"}};
    printf("steps");
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        /* a record of the kind, then STREAM records (24 bytes in every release) at every 8 bytes */
        uint64_t buf[128];
        for (size_t w = 0; w < sizeof buf / sizeof buf[0]; w++)
            memcpy(&buf[w], &(CUpti_ActivityKind){CUPTI_ACTIVITY_KIND_STREAM}, sizeof(CUpti_ActivityKind));
        memcpy(&buf[0], &kinds[i].kind, sizeof kinds[i].kind);
        CUpti_Activity *rec = NULL;
        CUptiResult r = nx.f((uint8_t *)buf, sizeof buf, &rec);
        if (r == CUPTI_SUCCESS)
            r = nx.f((uint8_t *)buf, sizeof buf, &rec);
        if (r == CUPTI_SUCCESS)
            printf(" %s=%ld", kinds[i].name, (long)((uint8_t *)rec - (uint8_t *)buf));
        else
            printf(" %s=error%d", kinds[i].name, (int)r);
    }
    printf("\n");
    tr_cupti c;
    err_msg why = {{0}};
    if (tr_cupti_load(&c, argv[1], &why) == 0)
        printf("tracer: takes it (version %u, synchronization records of %zu bytes)\n", c.version, c.sync_size);
    else
        printf("tracer: refuses it: %s\n", why.msg);
    return 0;
}
