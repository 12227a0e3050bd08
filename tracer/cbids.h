/*
 * Which CUDA runtime and driver calls the tracer watches, and how (cbids.c holds the tables).
 *
 * Calls that can make the host wait for the device get ENTER/EXIT callbacks that measure the wait
 * and take the call site; calls that launch work get CUPTI activity API records only (they are too
 * frequent for callbacks, and their records carry the correlation id that links them to kernels).
 * Everything else is left alone: the per-call flood of RUNTIME/DRIVER activity is never enabled.
 */
#ifndef SYNCTOP_TRACER_CBIDS_H
#define SYNCTOP_TRACER_CBIDS_H

#include <cupti.h>
#include <stddef.h>
#include <stdint.h>

/* How a call is watched. */
enum tr_cb_class {
    TR_CB_NONE = 0,
    TR_CB_SYNC,   /* explicit synchronize: waits for the device by definition */
    TR_CB_POLL,   /* cudaStreamQuery/cudaEventQuery: a busy loop of them is a wait */
    TR_CB_COPY,   /* copies: blocking when synchronous, or pageable memory in an async copy */
    TR_CB_SET,    /* memsets: may block on host or pageable memory */
    TR_CB_MEM,    /* device allocation and every release (cudaMalloc, cudaFree, cudaFreeHost,
                     cudaHostUnregister...): may synchronize the device */
    TR_CB_HOSTMEM, /* host-memory allocation and pinning (cudaMallocHost, cudaHostAlloc,
                     cudaHostRegister, their driver twins): slow in the driver, but never a wait for
                     the device; recorded with its duration, never as blocking (PyTorch's first
                     .item() pins its staging buffer this way, inside the user's line) */
    TR_CB_RESET,  /* device reset / context destroy: synchronizes, then tears down */
    TR_CB_LAUNCH  /* launches: activity API records, no callback */
};

/* Class of a callback id in the runtime (CUPTI_CB_DOMAIN_RUNTIME_API) or driver
 * (CUPTI_CB_DOMAIN_DRIVER_API) domain; TR_CB_NONE for anything else. */
enum tr_cb_class tr_cb_class_of(CUpti_CallbackDomain domain, uint32_t cbid);
/* The API's name without CUPTI's version suffix ("cudaMemcpy_ptds"), written into out; returns
 * its length, 0 when the id is not in the tables. */
size_t tr_cb_name(CUpti_CallbackDomain domain, uint32_t cbid, char *out, size_t outlen);
/* Iterates the tables: calls fn for every watched id (launches included). */
void tr_cb_foreach(void (*fn)(void *arg, CUpti_CallbackDomain domain, uint32_t cbid,
                              enum tr_cb_class cls),
                   void *arg);

#endif
