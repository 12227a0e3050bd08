/*
 * The CUPTI functions the tracer calls, reached through dlopen + dlsym rather than linked.
 *
 * Linking libcupti would make the driver's dlopen of the tracer fail (and CUDA with it) on a machine
 * whose CUPTI is missing or elsewhere; dlopen lets the tracer start anyway, say why it stepped
 * aside, and lets tests put a stand-in libcupti in its place (SYNCTOP_CUPTI=path). Every function
 * in the table is required: a libcupti that lacks one is refused as a whole.
 */
#ifndef SYNCTOP_TRACER_CUPTI_LOAD_H
#define SYNCTOP_TRACER_CUPTI_LOAD_H

#include <cupti.h>
#include <stddef.h>

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
    X(cuptiActivityEnableRuntimeApi, (CUpti_CallbackId, uint8_t))                                \
    X(cuptiActivityEnableDriverApi, (CUpti_CallbackId, uint8_t))                                 \
    X(cuptiActivityFlushAll, (uint32_t))                                                         \
    X(cuptiActivityGetNextRecord, (uint8_t *, size_t, CUpti_Activity **))                        \
    X(cuptiActivityGetNumDroppedRecords, (CUcontext, uint32_t, size_t *))

typedef struct tr_cupti {
    void *handle;
    char path[512]; /* the library actually loaded */
#define TR_CUPTI_FIELD_(name, args) CUptiResult (*name) args;
    TR_CUPTI_FUNCS(TR_CUPTI_FIELD_)
#undef TR_CUPTI_FIELD_
} tr_cupti;

/* Loads libcupti: `path` when not NULL, else the usual names and CUDA install locations. Returns 0,
 * or -1 with a one-line reason in why (which library, which symbol). */
int tr_cupti_load(tr_cupti *c, const char *path, char *why, size_t whylen);
/* The reason for a CUPTI error code, never NULL. */
const char *tr_cupti_strerror(const tr_cupti *c, CUptiResult r);

#endif
