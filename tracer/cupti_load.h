/*
 * The CUPTI functions the tracer calls, reached through dlopen + dlsym rather than linked, and the
 * choice of which libcupti.
 *
 * Linking libcupti would make the driver's dlopen of the tracer fail (and CUDA with it) on a machine
 * whose CUPTI is missing or elsewhere; dlopen lets the tracer start anyway, say why it stepped
 * aside, and lets tests put a stand-in libcupti in its place (SYNCTOP_CUPTI=path). Every function
 * in the first table is required: a libcupti that lacks one is refused as a whole; those of the
 * second are used when present (older CUPTIs lack some) and are NULL otherwise.
 *
 * Which libcupti: a process must have one CUPTI, or the CUPTI that PyTorch's profiler or NVTX
 * talks to is not the one that traces. So the tracer takes, in this order: SYNCTOP_CUPTI; a
 * libcupti the process has loaded already (a PyTorch wheel loads its own); the one of the wheel
 * next to a loaded torch (site-packages/nvidia/cu13/lib, .../cuda_cupti/lib); then the loader's
 * search path and the CUDA toolkit's usual places, libcupti.so.13 before .so.12 unless the process
 * loaded libcudart.so.12. CUPTI 13 and 12 are read: their records differ in size but not where the
 * fields the tracer reads lie (cupti_load.c, convert.c). The NVTX injection entry (tracer.c)
 * forwards to the same library.
 */
#ifndef SYNCTOP_TRACER_CUPTI_LOAD_H
#define SYNCTOP_TRACER_CUPTI_LOAD_H

#include <cupti.h>
#include <stddef.h>

#include "synctop/error.h"

#define TR_CUPTI_FUNCS(X)                                                                        \
    X(cuptiGetVersion, (uint32_t *))                                                             \
    X(cuptiGetResultString, (CUptiResult, const char **))                                        \
    X(cuptiGetTimestamp, (uint64_t *))                                                           \
    X(cuptiSubscribe, (CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *))                    \
    X(cuptiUnsubscribe, (CUpti_SubscriberHandle))                                                \
    X(cuptiEnableCallback, (uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,              \
                            CUpti_CallbackId))                                                   \
    X(cuptiEnableDomain, (uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain))               \
    X(cuptiActivityRegisterCallbacks, (CUpti_BuffersCallbackRequestFunc,                         \
                                       CUpti_BuffersCallbackCompleteFunc))                       \
    X(cuptiActivityEnable, (CUpti_ActivityKind))                                                 \
    X(cuptiActivityDisable, (CUpti_ActivityKind))                                                \
    X(cuptiActivityFlushAll, (uint32_t))                                                         \
    X(cuptiActivityGetNextRecord, (uint8_t *, size_t, CUpti_Activity **))                        \
    X(cuptiActivityGetNumDroppedRecords, (CUcontext, uint32_t, size_t *))

/* Used when present. Without the per-API records (CUPTI before 12.5) the launches' records come
 * from the whole RUNTIME and DRIVER kinds (enable.c). */
#define TR_CUPTI_OPTIONAL(X)                                                                     \
    X(cuptiActivityEnableRuntimeApi, (CUpti_CallbackId, uint8_t))                                \
    X(cuptiActivityEnableDriverApi, (CUpti_CallbackId, uint8_t))                                 \
    X(cuptiSetThreadIdType, (CUpti_ActivityThreadIdType))                                        \
    X(cuptiActivityEnableAllSyncRecords, (uint8_t))                                              \
    X(cuptiGetContextId, (CUcontext, uint32_t *))                                                \
    X(cuptiGetDeviceId, (CUcontext, uint32_t *))                                                 \
    X(cuptiActivityGetAttribute, (CUpti_ActivityAttribute, size_t *, void *))                    \
    X(cuptiActivitySetAttribute, (CUpti_ActivityAttribute, size_t *, void *))                    \
    X(cuptiActivityEnableAndDump, (CUpti_ActivityKind))

/* How the library was chosen. */
enum tr_cupti_source {
    TR_CUPTI_NAMED = 1,  /* SYNCTOP_CUPTI */
    TR_CUPTI_LOADED,     /* already loaded by the process */
    TR_CUPTI_WHEEL,      /* the CUDA wheel next to a loaded torch */
    TR_CUPTI_SEARCHED    /* the loader's path or the CUDA toolkit */
};

typedef struct tr_cupti {
    void *handle;
    char path[512]; /* the library actually loaded */
    enum tr_cupti_source source;
    uint32_t version; /* cuptiGetVersion (a library whose call fails is refused) */
    size_t sync_size; /* bytes of its SYNCHRONIZATION records: CUPTI 12.8 on and 13 have returnValue */
#define TR_CUPTI_FIELD_(name, args) CUptiResult (*name) args;
    TR_CUPTI_FUNCS(TR_CUPTI_FIELD_)
    TR_CUPTI_OPTIONAL(TR_CUPTI_FIELD_)
#undef TR_CUPTI_FIELD_
    /* NVTX's entry point into this CUPTI (NULL when it has none). */
    int (*nvtx_init)(const void *(*get_export_table)(uint32_t));
} tr_cupti;

/* Whether this CUPTI lacks the per-API records (cuptiActivityEnableRuntimeApi/DriverApi, before
 * 12.5): the launches' records then come from the whole RUNTIME and DRIVER kinds while collecting. */
int tr_cupti_whole_api_kinds(const tr_cupti *c);

/* Loads libcupti: `path` when not NULL nor "", else as the file comment says. Returns 0, or
 * ERR_NOENT (none could be loaded) or ERR_UNSUPPORTED (one lacks a function, fails its first
 * call, is neither CUPTI 12 nor 13, or lays out a record in a size the tracer does not read) with
 * a one-line reason in err (which library, which symbol or record). */
int tr_cupti_load(tr_cupti *c, const char *path, err_msg *err);
/* The reason for a CUPTI error code, never NULL. */
const char *tr_cupti_strerror(const tr_cupti *c, CUptiResult r);
/* "named by SYNCTOP_CUPTI", "loaded by the process", ... */
const char *tr_cupti_source_name(enum tr_cupti_source s);

#endif
