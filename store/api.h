/*
 * What a CUDA API call is, from its name: the one classifier the importers and the analysis share.
 * HIP runtime names (ROCm traces: hipDeviceSynchronize, hipMemcpyAsync, hipHostFree, ...) are
 * classified as their CUDA twins.
 */
#ifndef SYNCTOP_API_H
#define SYNCTOP_API_H

#include <stddef.h>

#include "synctop/event.h"

typedef enum st_api_class {
    ST_API_OTHER,
    ST_API_SYNC,       /* ...Synchronize: waits for a stream, event, context or device */
    ST_API_QUERY,      /* ...Query: returns at once (a busy loop of them waits) */
    ST_API_COPY,       /* cudaMemcpy*, cuMemcpy* */
    ST_API_COPY_ASYNC, /* their ...Async forms */
    ST_API_COPY_WAIT,  /* a copy that then waits for its stream: hipMemcpyWithStream */
    ST_API_SET,        /* cudaMemset*, cuMemset* */
    ST_API_SET_ASYNC,  /* their ...Async forms */
    ST_API_FREE,       /* the frees that synchronize the device: cudaFree, cuMemFree, ... */
    ST_API_ALLOC,      /* other allocations and frees that may synchronize: cudaMalloc, ... */
    ST_API_LAUNCH      /* kernel and graph launches */
} st_api_class;

/* No CUDA or HIP API's name, suffixes included, comes near this many bytes: a longer name (a
 * hostile file's 1 MiB one, given to every call) is no API's, told without reading it. */
#define ST_API_NAME_MAX 128

/* The class of the API named name (len bytes; (size_t)-1 for a C string), ignoring a version or
 * per-thread suffix (_v2, _v3020, _ptsz, _ptds); ST_API_OTHER for a name over ST_API_NAME_MAX. */
st_api_class st_api_class_of(const char *name, size_t len);

/* Length of name (len bytes) without a trailing version suffix (_v3020): how importers show calls. */
size_t st_api_strip_version(const char *name, size_t len);

/* What a GPU-side synchronization record waits for (enum tp_sync_type), told by the call that made
 * it (name, len bytes; (size_t)-1 for a C string): trace formats number sync types inconsistently.
 * TP_SYNC_UNKNOWN for a name over ST_API_NAME_MAX. */
unsigned st_api_sync_type(const char *name, size_t len);

/* The flags (TP_F_BLOCKING, TP_F_LAUNCH) of a host call of class cls, given the GPU operation with
 * the same correlation id (NULL when none): the explicit synchronizations, the copies and memsets
 * that wait (decided with their GPU operation, but a copy that waits for its stream always does)
 * and the frees that synchronize the device block. A
 * copy or memset issued by an Async call gets TP_F_ASYNC. */
unsigned st_api_resolve(st_api_class cls, tp_record *op);

#endif
