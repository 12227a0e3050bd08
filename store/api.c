/*
 * The CUDA API classifier (api.h).
 */
#include "api.h"

#include <string.h>

/* Length of an API name without its version or per-thread suffixes (_v3020, _ptsz, _ptds). */
static size_t base_len(const char *s, size_t n) {
    for (;;) {
        const char *u = n ? memrchr(s, '_', n) : NULL;
        if (u == NULL)
            return n;
        size_t k = (size_t)(u - s);
        const char *t = u + 1;
        size_t tl = n - k - 1;
        int version = tl >= 2 && t[0] == 'v';
        for (size_t i = 1; version && i < tl; i++)
            version = t[i] >= '0' && t[i] <= '9';
        if (!version && !(tl == 4 && (memcmp(t, "ptsz", 4) == 0 || memcmp(t, "ptds", 4) == 0)))
            return n;
        n = k;
    }
}

static int starts(const char *s, size_t n, const char *lit) {
    size_t l = strlen(lit);
    return n >= l && memcmp(s, lit, l) == 0;
}

static int ends(const char *s, size_t n, const char *lit) {
    size_t l = strlen(lit);
    return n >= l && memcmp(s + n - l, lit, l) == 0;
}

static int contains(const char *s, size_t n, const char *lit) {
    size_t l = strlen(lit);
    for (size_t i = 0; i + l <= n; i++)
        if (memcmp(s + i, lit, l) == 0)
            return 1;
    return 0;
}

/* A HIP runtime name ("hipMemcpyAsync") as its CUDA twin ("cudaMemcpyAsync") in buf (n bytes);
 * other names as they are. */
static const char *as_cuda(const char *name, size_t *len, char *buf, size_t n) {
    if (*len < 4 || *len + 1 >= n || memcmp(name, "hip", 3) != 0 || name[3] < 'A' || name[3] > 'Z')
        return name;
    memcpy(buf, "cuda", 4);
    memcpy(buf + 4, name + 3, *len - 3);
    *len += 1;
    return buf;
}

st_api_class st_api_class_of(const char *name, size_t len) {
    if (name == NULL)
        return ST_API_OTHER;
    if (len == (size_t)-1)
        len = strnlen(name, ST_API_NAME_MAX + 1);
    if (len > ST_API_NAME_MAX)
        return ST_API_OTHER;
    char twin[ST_API_NAME_MAX + 8];
    name = as_cuda(name, &len, twin, sizeof twin);
    size_t n = base_len(name, len);
    static const char *const frees[] = {
        "cudaFree",  "cudaFreeHost",  "cudaFreeArray",  "cudaFreeMipmappedArray", "cudaHostFree",
        "cuMemFree", "cuMemFreeHost", "cuArrayDestroy", "cuMipmappedArrayDestroy"};
    static const char *const allocs[] = {"cudaFree",       "cuMemFree",     "cudaMalloc",
                                         "cuMemAlloc",     "cuArrayDestroy", "cuMemHostAlloc",
                                         "cudaHostAlloc",  "cuMipmappedArrayDestroy", "cudaHostMalloc"};
    static const char *const launches[] = {"cudaLaunch",       "cuLaunch",       "cudaGraphLaunch",
                                           "cuGraphLaunch",    "cudaExtLaunch",  "cudaModuleLaunch",
                                           "cudaExtModuleLaunch"};
    if (contains(name, n, "Synchronize"))
        return ST_API_SYNC;
    if (contains(name, n, "Query"))
        return ST_API_QUERY;
    if (n == strlen("cudaMemcpyWithStream") && memcmp(name, "cudaMemcpyWithStream", n) == 0)
        return ST_API_COPY_WAIT; /* HIP's: a copy, then a wait for its stream */
    if (starts(name, n, "cudaMemcpy") || starts(name, n, "cuMemcpy"))
        return ends(name, n, "Async") ? ST_API_COPY_ASYNC : ST_API_COPY;
    if (starts(name, n, "cudaMemset") || starts(name, n, "cuMemset"))
        return ends(name, n, "Async") ? ST_API_SET_ASYNC : ST_API_SET;
    for (size_t i = 0; i < sizeof frees / sizeof frees[0]; i++)
        if (n == strlen(frees[i]) && memcmp(name, frees[i], n) == 0)
            return ST_API_FREE;
    for (size_t i = 0; i < sizeof allocs / sizeof allocs[0]; i++)
        if (starts(name, n, allocs[i]))
            return ST_API_ALLOC;
    for (size_t i = 0; i < sizeof launches / sizeof launches[0]; i++)
        if (starts(name, n, launches[i]))
            return ST_API_LAUNCH;
    return ST_API_OTHER;
}

size_t st_api_strip_version(const char *name, size_t len) {
    const char *u = len ? memrchr(name, '_', len) : NULL;
    if (u == NULL || (size_t)(name + len - u) < 3 || u[1] != 'v')
        return len;
    for (const char *t = u + 2; t < name + len; t++)
        if (*t < '0' || *t > '9')
            return len;
    return (size_t)(u - name);
}

unsigned st_api_sync_type(const char *name, size_t len) {
    if (name == NULL)
        return TP_SYNC_UNKNOWN;
    if (len == (size_t)-1)
        len = strnlen(name, ST_API_NAME_MAX + 1);
    if (len > ST_API_NAME_MAX)
        return TP_SYNC_UNKNOWN;
    size_t n = base_len(name, len);
    if (contains(name, n, "StreamWaitEvent"))
        return TP_SYNC_STREAM_WAIT_EVENT;
    if (contains(name, n, "EventSynchronize"))
        return TP_SYNC_EVENT;
    if (contains(name, n, "StreamSynchronize"))
        return TP_SYNC_STREAM;
    if (contains(name, n, "DeviceSynchronize") || contains(name, n, "CtxSynchronize"))
        return TP_SYNC_CONTEXT;
    return TP_SYNC_UNKNOWN;
}

static int is_pageable(const tp_memcpy *m) {
    return m->src_kind == TP_MEM_PAGEABLE || m->dst_kind == TP_MEM_PAGEABLE;
}

unsigned st_api_resolve(st_api_class cls, tp_record *op) {
    int copy = op && op->head.kind == TP_K_MEMCPY, set = op && op->head.kind == TP_K_MEMSET;
    /* cudaStreamWaitEvent only makes a stream wait; cudaEventQuery/cudaStreamQuery return at once
     * (a busy loop of them is seen by the analysis, not here). */
    switch (cls) {
    case ST_API_SYNC:
    case ST_API_FREE: return TP_F_BLOCKING;
    case ST_API_COPY_WAIT: return TP_F_BLOCKING;
    case ST_API_COPY: /* device-to-device copies do not wait for the host */
        return copy && op->memcpy.copy_kind == TP_COPY_DTOD ? 0 : TP_F_BLOCKING;
    case ST_API_COPY_ASYNC: /* pageable memory makes an async copy synchronous */
        if (!copy)
            return 0;
        op->head.flags |= TP_F_ASYNC;
        return is_pageable(&op->memcpy) ? TP_F_BLOCKING : 0;
    case ST_API_SET: /* a memset of device memory does not wait; of host memory, or unknown, does */
        return set && op->memset.mem_kind == TP_MEM_DEVICE ? 0 : TP_F_BLOCKING;
    case ST_API_SET_ASYNC:
        if (set)
            op->head.flags |= TP_F_ASYNC;
        return 0;
    case ST_API_LAUNCH: return TP_F_LAUNCH;
    default: return 0;
    }
}
