/*
 * The tables behind cbids.h. Ids are spelled by their CUPTI enum names, so a name that a CUPTI
 * release drops fails the build instead of watching the wrong call; numbers were checked against
 * cupti_runtime_cbid.h and cupti_driver_cbid.h of CUDA 13 (CUPTI_API_VERSION 130001). The calls
 * CUDA 13.1 to 13.5 added, which these headers do not name, are given by number (the NEWER
 * tables below).
 */
#include "cbids.h"

#include <string.h>

/* Runtime API. Per-thread-default-stream variants (_ptds/_ptsz) are the same calls. */
#define TR_RUNTIME_TABLE(X)                                          \
    X(cudaDeviceSynchronize_v3020, SYNC)                             \
    X(cudaThreadSynchronize_v3020, SYNC)                             \
    X(cudaStreamSynchronize_v3020, SYNC)                             \
    X(cudaStreamSynchronize_ptsz_v7000, SYNC)                        \
    X(cudaEventSynchronize_v3020, SYNC)                              \
    X(cudaStreamQuery_v3020, POLL)                                   \
    X(cudaStreamQuery_ptsz_v7000, POLL)                              \
    X(cudaEventQuery_v3020, POLL)                                    \
    X(cudaMemcpy_v3020, COPY)                                        \
    X(cudaMemcpy_ptds_v7000, COPY)                                   \
    X(cudaMemcpy2D_v3020, COPY)                                      \
    X(cudaMemcpy2D_ptds_v7000, COPY)                                 \
    X(cudaMemcpyToArray_v3020, COPY)                                 \
    X(cudaMemcpyToArray_ptds_v7000, COPY)                            \
    X(cudaMemcpy2DToArray_v3020, COPY)                               \
    X(cudaMemcpy2DToArray_ptds_v7000, COPY)                          \
    X(cudaMemcpyFromArray_v3020, COPY)                               \
    X(cudaMemcpyFromArray_ptds_v7000, COPY)                          \
    X(cudaMemcpy2DFromArray_v3020, COPY)                             \
    X(cudaMemcpy2DFromArray_ptds_v7000, COPY)                        \
    X(cudaMemcpyArrayToArray_v3020, COPY)                            \
    X(cudaMemcpyArrayToArray_ptds_v7000, COPY)                       \
    X(cudaMemcpy2DArrayToArray_v3020, COPY)                          \
    X(cudaMemcpy2DArrayToArray_ptds_v7000, COPY)                     \
    X(cudaMemcpyToSymbol_v3020, COPY)                                \
    X(cudaMemcpyToSymbol_ptds_v7000, COPY)                           \
    X(cudaMemcpyFromSymbol_v3020, COPY)                              \
    X(cudaMemcpyFromSymbol_ptds_v7000, COPY)                         \
    X(cudaMemcpy3D_v3020, COPY)                                      \
    X(cudaMemcpy3D_ptds_v7000, COPY)                                 \
    X(cudaMemcpyPeer_v4000, COPY)                                    \
    X(cudaMemcpy3DPeer_v4000, COPY)                                  \
    X(cudaMemcpy3DPeer_ptds_v7000, COPY)                             \
    X(cudaMemcpyAsync_v3020, COPY)                                   \
    X(cudaMemcpyAsync_ptsz_v7000, COPY)                              \
    X(cudaMemcpyToArrayAsync_v3020, COPY)                            \
    X(cudaMemcpyToArrayAsync_ptsz_v7000, COPY)                       \
    X(cudaMemcpyFromArrayAsync_v3020, COPY)                          \
    X(cudaMemcpyFromArrayAsync_ptsz_v7000, COPY)                     \
    X(cudaMemcpy2DAsync_v3020, COPY)                                 \
    X(cudaMemcpy2DAsync_ptsz_v7000, COPY)                            \
    X(cudaMemcpy2DToArrayAsync_v3020, COPY)                          \
    X(cudaMemcpy2DToArrayAsync_ptsz_v7000, COPY)                     \
    X(cudaMemcpy2DFromArrayAsync_v3020, COPY)                        \
    X(cudaMemcpy2DFromArrayAsync_ptsz_v7000, COPY)                   \
    X(cudaMemcpyToSymbolAsync_v3020, COPY)                           \
    X(cudaMemcpyToSymbolAsync_ptsz_v7000, COPY)                      \
    X(cudaMemcpyFromSymbolAsync_v3020, COPY)                         \
    X(cudaMemcpyFromSymbolAsync_ptsz_v7000, COPY)                    \
    X(cudaMemcpy3DAsync_v3020, COPY)                                 \
    X(cudaMemcpy3DAsync_ptsz_v7000, COPY)                            \
    X(cudaMemcpyPeerAsync_v4000, COPY)                               \
    X(cudaMemcpy3DPeerAsync_v4000, COPY)                             \
    X(cudaMemcpy3DPeerAsync_ptsz_v7000, COPY)                        \
    X(cudaMemcpyBatchAsync_v12080, COPY)                             \
    X(cudaMemcpyBatchAsync_ptsz_v12080, COPY)                        \
    X(cudaMemcpy3DBatchAsync_v12080, COPY)                           \
    X(cudaMemcpy3DBatchAsync_ptsz_v12080, COPY)                      \
    X(cudaMemcpyBatchAsync_v13000, COPY)                             \
    X(cudaMemcpyBatchAsync_ptsz_v13000, COPY)                        \
    X(cudaMemcpy3DBatchAsync_v13000, COPY)                           \
    X(cudaMemcpy3DBatchAsync_ptsz_v13000, COPY)                      \
    X(cudaMemset_v3020, SET)                                         \
    X(cudaMemset_ptds_v7000, SET)                                    \
    X(cudaMemset2D_v3020, SET)                                       \
    X(cudaMemset2D_ptds_v7000, SET)                                  \
    X(cudaMemset3D_v3020, SET)                                       \
    X(cudaMemset3D_ptds_v7000, SET)                                  \
    X(cudaMemsetAsync_v3020, SET)                                    \
    X(cudaMemsetAsync_ptsz_v7000, SET)                               \
    X(cudaMemset2DAsync_v3020, SET)                                  \
    X(cudaMemset2DAsync_ptsz_v7000, SET)                             \
    X(cudaMemset3DAsync_v3020, SET)                                  \
    X(cudaMemset3DAsync_ptsz_v7000, SET)                             \
    X(cudaMalloc_v3020, MEM)                                         \
    X(cudaMallocPitch_v3020, MEM)                                    \
    X(cudaMallocArray_v3020, MEM)                                    \
    X(cudaMallocHost_v3020, HOSTMEM)                                 \
    X(cudaHostAlloc_v3020, HOSTMEM)                                  \
    X(cudaHostRegister_v4000, HOSTMEM)                               \
    X(cudaHostUnregister_v4000, MEM)                                 \
    X(cudaMalloc3D_v3020, MEM)                                       \
    X(cudaMalloc3DArray_v3020, MEM)                                  \
    X(cudaMallocManaged_v6000, MEM)                                  \
    X(cudaMallocMipmappedArray_v5000, MEM)                           \
    X(cudaFree_v3020, MEM)                                           \
    X(cudaFreeArray_v3020, MEM)                                      \
    X(cudaFreeHost_v3020, MEM)                                       \
    X(cudaFreeMipmappedArray_v5000, MEM)                             \
    X(cudaDeviceReset_v3020, RESET)                                  \
    X(cudaLaunch_v3020, LAUNCH)                                      \
    X(cudaLaunch_ptsz_v7000, LAUNCH)                                 \
    X(cudaLaunchKernel_v7000, LAUNCH)                                \
    X(cudaLaunchKernel_ptsz_v7000, LAUNCH)                           \
    X(__cudaLaunchKernel_v13000, LAUNCH)                             \
    X(__cudaLaunchKernel_ptsz_v13000, LAUNCH)                        \
    X(cudaLaunchKernelExC_v11060, LAUNCH)                            \
    X(cudaLaunchKernelExC_ptsz_v11060, LAUNCH)                       \
    X(cudaLaunchCooperativeKernel_v9000, LAUNCH)                     \
    X(cudaLaunchCooperativeKernel_ptsz_v9000, LAUNCH)                \
    X(cudaLaunchCooperativeKernelMultiDevice_v9000, LAUNCH)          \
    X(cudaLaunchHostFunc_v10000, LAUNCH)                             \
    X(cudaLaunchHostFunc_ptsz_v10000, LAUNCH)                        \
    X(cudaGraphLaunch_v10000, LAUNCH)                                \
    X(cudaGraphLaunch_ptsz_v10000, LAUNCH)

/* Driver API. Calls made by the runtime on the application's behalf are skipped at run time (the
 * runtime callback already covers them); these matter for programs that use the driver directly. */
#define TR_DRIVER_TABLE(X)                                           \
    X(cuCtxSynchronize, SYNC)                                        \
    X(cuCtxSynchronize_v2, SYNC)                                     \
    X(cuStreamSynchronize, SYNC)                                     \
    X(cuStreamSynchronize_ptsz, SYNC)                                \
    X(cuEventSynchronize, SYNC)                                      \
    X(cuStreamQuery, POLL)                                           \
    X(cuStreamQuery_ptsz, POLL)                                      \
    X(cuEventQuery, POLL)                                            \
    X(cuMemcpy, COPY)                                                \
    X(cuMemcpy_ptds, COPY)                                           \
    X(cuMemcpyAsync, COPY)                                           \
    X(cuMemcpyAsync_ptsz, COPY)                                      \
    X(cuMemcpyPeer, COPY)                                            \
    X(cuMemcpyPeer_ptds, COPY)                                       \
    X(cuMemcpyPeerAsync, COPY)                                       \
    X(cuMemcpyPeerAsync_ptsz, COPY)                                  \
    X(cuMemcpy3DPeer, COPY)                                          \
    X(cuMemcpy3DPeer_ptds, COPY)                                     \
    X(cuMemcpy3DPeerAsync, COPY)                                     \
    X(cuMemcpy3DPeerAsync_ptsz, COPY)                                \
    X(cuMemcpyHtoD, COPY)                                            \
    X(cuMemcpyHtoD_v2, COPY)                                         \
    X(cuMemcpyHtoD_v2_ptds, COPY)                                    \
    X(cuMemcpyDtoH, COPY)                                            \
    X(cuMemcpyDtoH_v2, COPY)                                         \
    X(cuMemcpyDtoH_v2_ptds, COPY)                                    \
    X(cuMemcpyDtoD, COPY)                                            \
    X(cuMemcpyDtoD_v2, COPY)                                         \
    X(cuMemcpyDtoD_v2_ptds, COPY)                                    \
    X(cuMemcpyDtoA, COPY)                                            \
    X(cuMemcpyDtoA_v2, COPY)                                         \
    X(cuMemcpyDtoA_v2_ptds, COPY)                                    \
    X(cuMemcpyAtoD, COPY)                                            \
    X(cuMemcpyAtoD_v2, COPY)                                         \
    X(cuMemcpyAtoD_v2_ptds, COPY)                                    \
    X(cuMemcpyHtoA, COPY)                                            \
    X(cuMemcpyHtoA_v2, COPY)                                         \
    X(cuMemcpyHtoA_v2_ptds, COPY)                                    \
    X(cuMemcpyAtoH, COPY)                                            \
    X(cuMemcpyAtoH_v2, COPY)                                         \
    X(cuMemcpyAtoH_v2_ptds, COPY)                                    \
    X(cuMemcpyAtoA, COPY)                                            \
    X(cuMemcpyAtoA_v2, COPY)                                         \
    X(cuMemcpyAtoA_v2_ptds, COPY)                                    \
    X(cuMemcpy2D, COPY)                                              \
    X(cuMemcpy2D_v2, COPY)                                           \
    X(cuMemcpy2D_v2_ptds, COPY)                                      \
    X(cuMemcpy2DUnaligned, COPY)                                     \
    X(cuMemcpy2DUnaligned_v2, COPY)                                  \
    X(cuMemcpy2DUnaligned_v2_ptds, COPY)                             \
    X(cuMemcpy3D, COPY)                                              \
    X(cuMemcpy3D_v2, COPY)                                           \
    X(cuMemcpy3D_v2_ptds, COPY)                                      \
    X(cuMemcpyHtoDAsync, COPY)                                       \
    X(cuMemcpyHtoDAsync_v2, COPY)                                    \
    X(cuMemcpyHtoDAsync_v2_ptsz, COPY)                               \
    X(cuMemcpyDtoHAsync, COPY)                                       \
    X(cuMemcpyDtoHAsync_v2, COPY)                                    \
    X(cuMemcpyDtoHAsync_v2_ptsz, COPY)                               \
    X(cuMemcpyDtoDAsync, COPY)                                       \
    X(cuMemcpyDtoDAsync_v2, COPY)                                    \
    X(cuMemcpyDtoDAsync_v2_ptsz, COPY)                               \
    X(cuMemcpyHtoAAsync, COPY)                                       \
    X(cuMemcpyHtoAAsync_v2, COPY)                                    \
    X(cuMemcpyHtoAAsync_v2_ptsz, COPY)                               \
    X(cuMemcpyAtoHAsync, COPY)                                       \
    X(cuMemcpyAtoHAsync_v2, COPY)                                    \
    X(cuMemcpyAtoHAsync_v2_ptsz, COPY)                               \
    X(cuMemcpy2DAsync, COPY)                                         \
    X(cuMemcpy2DAsync_v2, COPY)                                      \
    X(cuMemcpy2DAsync_v2_ptsz, COPY)                                 \
    X(cuMemcpy3DAsync, COPY)                                         \
    X(cuMemcpy3DAsync_v2, COPY)                                      \
    X(cuMemcpy3DAsync_v2_ptsz, COPY)                                 \
    X(cuMemcpyBatchAsync, COPY)                                      \
    X(cuMemcpyBatchAsync_ptsz, COPY)                                 \
    X(cuMemcpy3DBatchAsync, COPY)                                    \
    X(cuMemcpy3DBatchAsync_ptsz, COPY)                               \
    X(cuMemcpyBatchAsync_v2, COPY)                                   \
    X(cuMemcpyBatchAsync_v2_ptsz, COPY)                              \
    X(cuMemcpy3DBatchAsync_v2, COPY)                                 \
    X(cuMemcpy3DBatchAsync_v2_ptsz, COPY)                            \
    X(cuMemsetD8, SET)                                               \
    X(cuMemsetD8_v2, SET)                                            \
    X(cuMemsetD8_v2_ptds, SET)                                       \
    X(cuMemsetD16, SET)                                              \
    X(cuMemsetD16_v2, SET)                                           \
    X(cuMemsetD16_v2_ptds, SET)                                      \
    X(cuMemsetD32, SET)                                              \
    X(cuMemsetD32_v2, SET)                                           \
    X(cuMemsetD32_v2_ptds, SET)                                      \
    X(cuMemsetD2D8, SET)                                             \
    X(cuMemsetD2D8_v2, SET)                                          \
    X(cuMemsetD2D8_v2_ptds, SET)                                     \
    X(cuMemsetD2D16, SET)                                            \
    X(cuMemsetD2D16_v2, SET)                                         \
    X(cuMemsetD2D16_v2_ptds, SET)                                    \
    X(cuMemsetD2D32, SET)                                            \
    X(cuMemsetD2D32_v2, SET)                                         \
    X(cuMemsetD2D32_v2_ptds, SET)                                    \
    X(cuMemsetD8Async, SET)                                          \
    X(cuMemsetD8Async_ptsz, SET)                                     \
    X(cuMemsetD16Async, SET)                                         \
    X(cuMemsetD16Async_ptsz, SET)                                    \
    X(cuMemsetD32Async, SET)                                         \
    X(cuMemsetD32Async_ptsz, SET)                                    \
    X(cuMemsetD2D8Async, SET)                                        \
    X(cuMemsetD2D8Async_ptsz, SET)                                   \
    X(cuMemsetD2D16Async, SET)                                       \
    X(cuMemsetD2D16Async_ptsz, SET)                                  \
    X(cuMemsetD2D32Async, SET)                                       \
    X(cuMemsetD2D32Async_ptsz, SET)                                  \
    X(cuMemAlloc, MEM)                                               \
    X(cuMemAlloc_v2, MEM)                                            \
    X(cuMemAllocPitch, MEM)                                          \
    X(cuMemAllocPitch_v2, MEM)                                       \
    X(cuMemAllocHost, HOSTMEM)                                       \
    X(cuMemAllocHost_v2, HOSTMEM)                                    \
    X(cuMemHostAlloc, HOSTMEM)                                       \
    X(cuMemHostAlloc_v2, HOSTMEM)                                    \
    X(cuMemHostRegister, HOSTMEM)                                    \
    X(cuMemHostRegister_v2, HOSTMEM)                                 \
    X(cuMemHostUnregister, MEM)                                      \
    X(cuMemAllocManaged, MEM)                                        \
    X(cuMemFree, MEM)                                                \
    X(cuMemFree_v2, MEM)                                             \
    X(cuMemFreeHost, MEM)                                            \
    X(cuDevicePrimaryCtxReset, RESET)                                \
    X(cuDevicePrimaryCtxReset_v2, RESET)                             \
    X(cuCtxDestroy, RESET)                                           \
    X(cuCtxDestroy_v2, RESET)                                        \
    X(cuLaunchKernel, LAUNCH)                                        \
    X(cuLaunchKernel_ptsz, LAUNCH)                                   \
    X(cuLaunchKernelEx, LAUNCH)                                      \
    X(cuLaunchKernelEx_ptsz, LAUNCH)                                 \
    X(cuLaunchCooperativeKernel, LAUNCH)                             \
    X(cuLaunchCooperativeKernel_ptsz, LAUNCH)                        \
    X(cuLaunchCooperativeKernelMultiDevice, LAUNCH)                  \
    X(cuLaunchGrid, LAUNCH)                                          \
    X(cuLaunchGridAsync, LAUNCH)                                     \
    X(cuGraphLaunch, LAUNCH)                                         \
    X(cuGraphLaunch_ptsz, LAUNCH)

/* Calls added by CUDA 13.1 to 13.5, by the ids their cupti_runtime_cbid.h and cupti_driver_cbid.h
 * give them (the same in every release from the one that added them to 13.5; CUPTI never reuses an
 * id: a dropped call's stays reserved). A CUPTI older than the call does not know the id, and
 * refuses to watch it: the call does not exist there. */
#define TR_RUNTIME_NEWER(X)                                                                      \
    X(534, cudaExecutionCtxSynchronize_v13010, SYNC)                                             \
    X(550, cudaLaunchHostFunc_v2_v13020, LAUNCH)                                                 \
    X(551, cudaLaunchHostFunc_v2_ptsz_v13020, LAUNCH)                                            \
    X(554, cudaMemcpyWithAttributesAsync_v13020, COPY)                                           \
    X(555, cudaMemcpyWithAttributesAsync_ptsz_v13020, COPY)                                      \
    X(556, cudaMemcpy3DWithAttributesAsync_v13020, COPY)                                         \
    X(557, cudaMemcpy3DWithAttributesAsync_ptsz_v13020, COPY)

#define TR_DRIVER_NEWER(X)                                                                       \
    X(831, cuLaunchHostFunc_v2, LAUNCH)                                                          \
    X(832, cuLaunchHostFunc_v2_ptsz, LAUNCH)                                                     \
    X(837, cuMemcpyWithAttributesAsync, COPY)                                                    \
    X(838, cuMemcpyWithAttributesAsync_ptsz, COPY)                                               \
    X(839, cuMemcpy3DWithAttributesAsync, COPY)                                                  \
    X(840, cuMemcpy3DWithAttributesAsync_ptsz, COPY)

/* Headers that name them must give the same numbers. */
#define TR_RT_SAME_(id, sym, cls) _Static_assert(CUPTI_RUNTIME_TRACE_CBID_##sym == id, #sym);
#define TR_DRV_SAME_(id, sym, cls) _Static_assert(CUPTI_DRIVER_TRACE_CBID_##sym == id, #sym);
#if CUPTI_API_VERSION >= 130200
TR_RUNTIME_NEWER(TR_RT_SAME_)
TR_DRIVER_NEWER(TR_DRV_SAME_)
#endif

/* The ids the tables hold: CUDA 13.5's, or the headers' where they have more. */
#define TR_RT_IDS (CUPTI_RUNTIME_TRACE_CBID_SIZE > 567 ? CUPTI_RUNTIME_TRACE_CBID_SIZE : 567)
#define TR_DRV_IDS (CUPTI_DRIVER_TRACE_CBID_SIZE > 877 ? CUPTI_DRIVER_TRACE_CBID_SIZE : 877)

#define TR_RT_CLASS_(sym, cls) [CUPTI_RUNTIME_TRACE_CBID_##sym] = TR_CB_##cls,
#define TR_DRV_CLASS_(sym, cls) [CUPTI_DRIVER_TRACE_CBID_##sym] = TR_CB_##cls,
#define TR_RT_NAME_(sym, cls) [CUPTI_RUNTIME_TRACE_CBID_##sym] = #sym,
#define TR_DRV_NAME_(sym, cls) [CUPTI_DRIVER_TRACE_CBID_##sym] = #sym,

#define TR_NEWER_CLASS_(id, sym, cls) [id] = TR_CB_##cls,
#define TR_NEWER_NAME_(id, sym, cls) [id] = #sym,

static const uint8_t rt_class[TR_RT_IDS] = {TR_RUNTIME_TABLE(TR_RT_CLASS_) TR_RUNTIME_NEWER(TR_NEWER_CLASS_)};
static const uint8_t drv_class[TR_DRV_IDS] = {TR_DRIVER_TABLE(TR_DRV_CLASS_) TR_DRIVER_NEWER(TR_NEWER_CLASS_)};
static const char *const rt_name[TR_RT_IDS] = {TR_RUNTIME_TABLE(TR_RT_NAME_) TR_RUNTIME_NEWER(TR_NEWER_NAME_)};
static const char *const drv_name[TR_DRV_IDS] = {TR_DRIVER_TABLE(TR_DRV_NAME_) TR_DRIVER_NEWER(TR_NEWER_NAME_)};

enum tr_cb_class tr_cb_class_of(CUpti_CallbackDomain domain, uint32_t cbid) {
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid < TR_RT_IDS)
        return (enum tr_cb_class)rt_class[cbid];
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid < TR_DRV_IDS)
        return (enum tr_cb_class)drv_class[cbid];
    return TR_CB_NONE;
}

size_t tr_cb_name(CUpti_CallbackDomain domain, uint32_t cbid, char *out, size_t outlen) {
    const char *s = NULL;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid < TR_RT_IDS)
        s = rt_name[cbid];
    else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid < TR_DRV_IDS)
        s = drv_name[cbid];
    if (s == NULL || outlen == 0)
        return 0;
    size_t n = strlen(s);
    /* Runtime ids end in _vNNNN (the CUDA version that introduced them): not part of the name. */
    const char *v = strrchr(s, '_');
    if (v != NULL && v[1] == 'v' && v[2] >= '0' && v[2] <= '9' && v[3] >= '0' && v[3] <= '9')
        n = (size_t)(v - s);
    if (n >= outlen)
        n = outlen - 1;
    memcpy(out, s, n);
    out[n] = '\0';
    return n;
}

void tr_cb_foreach(void (*fn)(void *arg, CUpti_CallbackDomain domain, uint32_t cbid,
                              enum tr_cb_class cls),
                   void *arg) {
    for (uint32_t i = 0; i < TR_RT_IDS; i++)
        if (rt_class[i] != TR_CB_NONE)
            fn(arg, CUPTI_CB_DOMAIN_RUNTIME_API, i, (enum tr_cb_class)rt_class[i]);
    for (uint32_t i = 0; i < TR_DRV_IDS; i++)
        if (drv_class[i] != TR_CB_NONE)
            fn(arg, CUPTI_CB_DOMAIN_DRIVER_API, i, (enum tr_cb_class)drv_class[i]);
}
