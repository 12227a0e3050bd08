/*
 * libsynctop-cupti-floor.so: CUPTI's own cost, for bench/gpu/overhead.sh. An injection
 * (CUDA_INJECTION64_PATH) that asks CUPTI for what synctop's tracer asks in its always mode, from
 * the same libcupti (cupti_load.h): system thread ids, the same activity kinds, the launch calls'
 * API records and callbacks on the same calls (cbids.h), buffers of the same size; and does
 * nothing with them: the callback returns at once, completed buffers go back to a small pool
 * unread. A program runs at least this much slower under any CUPTI-based tracer that collects the
 * same; what synctop adds is the rest.
 */
#include <cupti.h>
#include <pthread.h>
#include <stdlib.h>

#include "cbids.h"
#include "cupti_load.h"

#define BUF_BYTES (1u << 20)
#define POOL 64

static tr_cupti cupti;
static CUpti_SubscriberHandle sub;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *pool[POOL];
static int n_pool, n_made;

static void CUPTIAPI requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    uint8_t *b = NULL;
    pthread_mutex_lock(&mu);
    if (n_pool > 0)
        b = pool[--n_pool];
    else if (n_made < POOL && (b = aligned_alloc(8, BUF_BYTES)) != NULL)
        n_made++;
    pthread_mutex_unlock(&mu);
    *buffer = b;
    *size = b != NULL ? BUF_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void)ctx;
    (void)stream;
    (void)size;
    (void)valid;
    if (buffer == NULL)
        return;
    pthread_mutex_lock(&mu);
    if (n_pool < POOL)
        pool[n_pool++] = buffer;
    pthread_mutex_unlock(&mu);
}

static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data) {
    (void)ud;
    (void)dom;
    (void)cbid;
    (void)data;
}

static void enable(void *arg, CUpti_CallbackDomain dom, uint32_t cbid, enum tr_cb_class cls) {
    (void)arg;
    if (cls == TR_CB_LAUNCH) {
        if (tr_cupti_whole_api_kinds(&cupti))
            return; /* the whole kinds instead, as the tracer does (InitializeInjection) */
        if (dom == CUPTI_CB_DOMAIN_RUNTIME_API)
            cupti.cuptiActivityEnableRuntimeApi(cbid, 1);
        else
            cupti.cuptiActivityEnableDriverApi(cbid, 1);
    } else {
        cupti.cuptiEnableCallback(1, sub, dom, cbid);
    }
}

/* At exit: what CUPTI still holds is handed back, as a tracer's flush would make it. */
static void at_exit(void) { cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); }

__attribute__((visibility("default"))) int InitializeInjection(void);
__attribute__((visibility("default"))) int InitializeInjection(void) {
    err_msg why;
    if (tr_cupti_load(&cupti, getenv("SYNCTOP_CUPTI"), &why) != 0)
        return 1;
    if (cupti.cuptiSetThreadIdType != NULL)
        cupti.cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
    if (cupti.cuptiSubscribe(&sub, on_callback, NULL) != CUPTI_SUCCESS)
        return 1;
    cupti.cuptiActivityRegisterCallbacks(requested, completed);
    if (cupti.cuptiActivityEnableAllSyncRecords != NULL)
        cupti.cuptiActivityEnableAllSyncRecords(0);
    static const CUpti_ActivityKind kinds[] = {
        CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_DEVICE, CUPTI_ACTIVITY_KIND_CONTEXT,
        CUPTI_ACTIVITY_KIND_STREAM,            CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
        CUPTI_ACTIVITY_KIND_MARKER,            CUPTI_ACTIVITY_KIND_SYNCHRONIZATION};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        cupti.cuptiActivityEnable(kinds[i]);
    tr_cb_foreach(enable, NULL);
    if (tr_cupti_whole_api_kinds(&cupti)) {
        cupti.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
        cupti.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER);
    }
    cupti.cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RESOURCE);
    atexit(at_exit);
    return 1;
}
