/*
 * What a CUDA API call is, from its name: the one classifier the importers and the analysis share.
 */
#ifndef SYNCTOP_API_H
#define SYNCTOP_API_H

#include <stddef.h>

typedef enum st_api_class {
    ST_API_OTHER,
    ST_API_SYNC,       /* ...Synchronize: waits for a stream, event, context or device */
    ST_API_QUERY,      /* ...Query: returns at once (a busy loop of them waits) */
    ST_API_COPY,       /* cudaMemcpy*, cuMemcpy* */
    ST_API_COPY_ASYNC, /* their ...Async forms */
    ST_API_SET,        /* cudaMemset*, cuMemset* */
    ST_API_SET_ASYNC,  /* their ...Async forms */
    ST_API_FREE,       /* the frees that synchronize the device: cudaFree, cuMemFree, ... */
    ST_API_ALLOC,      /* other allocations and frees that may synchronize: cudaMalloc, ... */
    ST_API_LAUNCH      /* kernel and graph launches */
} st_api_class;

/* The class of the API named name (len bytes; (size_t)-1 for a C string), ignoring a version or
 * per-thread suffix (_v2, _v3020, _ptsz, _ptds). */
st_api_class st_api_class_of(const char *name, size_t len);

#endif
