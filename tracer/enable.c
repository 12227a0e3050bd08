/*
 * What the tracer asks CUPTI for, and the state of asking: the subscription (its handle), whether
 * CONCURRENT_KERNEL is on, whether the per-thread buffer attribute can be set and read back (how
 * the flush thread tells that another client let go of CUPTI). Called by the lifecycle at start and
 * by the flush thread afterwards, never at once: the flush thread starts after the lifecycle has
 * done its part.
 *
 * What is enabled. Always: CONCURRENT_KERNEL (early: enabling it late makes CUPTI instrument every
 * loaded module at once), the cheap metadata kinds (DEVICE, CONTEXT, STREAM), the resource
 * callbacks (context creation gives the context -> device map before any record needs it). While
 * collecting: MEMCPY, MEMSET, MARKER, SYNCHRONIZATION (without the records of queries that found
 * work pending, where CUPTI allows it), the launch APIs' records (where CUPTI has no per-API
 * records, before 12.5: the whole RUNTIME and DRIVER kinds, the converter keeping the launches')
 * and the blocking APIs' callbacks. SYNCTOP_MODE=on-demand collects only while a viewer is
 * subscribed; dormant, it also turns CONCURRENT_KERNEL off (CUPTI 13.0 Update 1 on: 13.0's could
 * deadlock doing so) and keeps only the metadata records, so that a viewer arriving later still
 * learns device names.
 */
#include "cbids.h"
#include "cupti_newer.h"
#include "tracer_int.h"

#define CUPTI_TOGGLES_KERNELS 130001 /* the first CUPTI that disables CONCURRENT_KERNEL safely */

static const tr_config *cfg;
static const tr_cupti *cupti;
static CUpti_SubscriberHandle sub;
static int kernels_on; /* CONCURRENT_KERNEL is enabled */
static int attr_ok;    /* PER_THREAD_ACTIVITY_BUFFER can be set and read back */

/* Cheap and rare: on from the start, whatever the mode. */
static const CUpti_ActivityKind meta_kinds[] = {
    CUPTI_ACTIVITY_KIND_DEVICE, CUPTI_ACTIVITY_KIND_CONTEXT, CUPTI_ACTIVITY_KIND_STREAM,
    (CUpti_ActivityKind)TR_CUPTI_KIND_GREEN_CONTEXT, /* CUPTI 13.2 on; refused before */
};

/* On while collecting. SYNCHRONIZATION last: once it is seen on or off, so is everything else
 * (the on-demand test waits on it). */
static const CUpti_ActivityKind collect_kinds[] = {
    CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MARKER,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
};

void tr_enable_session(const tr_config *c, const tr_cupti *cu) {
    cfg = c;
    cupti = cu;
    kernels_on = 0;
}

int tr_enable_prepare(void) {
    /* Records carry the thread ids the callbacks see (gettid), not pthread_self(): one thread,
     * one lane. Before anything is enabled, as CUPTI requires. */
    int system_tids = cupti->cuptiSetThreadIdType != NULL &&
                      cupti->cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) ==
                          CUPTI_SUCCESS;
    if (cupti->cuptiActivitySetAttribute != NULL && cupti->cuptiActivityGetAttribute != NULL) {
        uint8_t one = 1, back = 0;
        size_t sz = sizeof one;
        attr_ok = cupti->cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER,
                                                   &sz, &one) == CUPTI_SUCCESS &&
                  cupti->cuptiActivityGetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER,
                                                   &sz, &back) == CUPTI_SUCCESS &&
                  back == 1;
    }
    return system_tids;
}

CUptiResult tr_enable_subscribe(void) { return cupti->cuptiSubscribe(&sub, tr_callbacks_on, NULL); }

void tr_enable_unsubscribe(void) { cupti->cuptiUnsubscribe(sub); }

void tr_enable_resources(int on) {
    cupti->cuptiEnableDomain((uint32_t)on, sub, CUPTI_CB_DOMAIN_RESOURCE);
}

static void set_one(void *arg, CUpti_CallbackDomain dom, uint32_t cbid, enum tr_cb_class cls) {
    uint8_t on = *(const uint8_t *)arg;
    if (cls == TR_CB_LAUNCH) {
        if (tr_cupti_whole_api_kinds(cupti))
            return; /* the whole kinds instead (tr_enable_collecting) */
        if (dom == CUPTI_CB_DOMAIN_RUNTIME_API)
            cupti->cuptiActivityEnableRuntimeApi(cbid, on);
        else
            cupti->cuptiActivityEnableDriverApi(cbid, on);
    } else {
        cupti->cuptiEnableCallback(on, sub, dom, cbid);
    }
}

/* Dormant, CONCURRENT_KERNEL goes off too, where CUPTI can turn it off safely. */
static int kernels_follow_collecting(void) {
    return cfg->mode == TR_MODE_ON_DEMAND && cupti->version >= CUPTI_TOGGLES_KERNELS;
}

static void set_kernels(int on) {
    CUptiResult r = on ? cupti->cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
                       : cupti->cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r == CUPTI_SUCCESS)
        kernels_on = on;
}

/* The callbacks first and the activity kinds last, in this order, either way. */
void tr_enable_collecting(int on) {
    uint8_t flag = (uint8_t)on;
    if (on)
        tr_callbacks_new_generation();
    else
        tr_callbacks_set_collecting(0);
    tr_cb_foreach(set_one, &flag);
    if (kernels_follow_collecting() && on != kernels_on)
        set_kernels(on);
    if (tr_cupti_whole_api_kinds(cupti)) {
        static const CUpti_ActivityKind api_kinds[] = {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};
        for (size_t i = 0; i < sizeof api_kinds / sizeof api_kinds[0]; i++) {
            if (on)
                cupti->cuptiActivityEnable(api_kinds[i]);
            else
                cupti->cuptiActivityDisable(api_kinds[i]);
        }
    }
    for (size_t i = 0; i < sizeof collect_kinds / sizeof collect_kinds[0]; i++) {
        if (on)
            cupti->cuptiActivityEnable(collect_kinds[i]);
        else
            cupti->cuptiActivityDisable(collect_kinds[i]);
    }
    if (on)
        tr_callbacks_set_collecting(1);
}

/* At injection, and again when another client has let go of CUPTI. */
CUptiResult tr_enable_activity(void) {
    if (attr_ok) {
        uint8_t one = 1;
        size_t sz = sizeof one;
        cupti->cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &sz, &one);
    }
    CUptiResult r = cupti->cuptiActivityRegisterCallbacks(tr_bufs_requested, tr_bufs_completed);
    if (r != CUPTI_SUCCESS)
        return r;
    /* Queries that found work pending synchronized nothing; CUPTI 13 records them unless told. */
    if (cupti->cuptiActivityEnableAllSyncRecords != NULL)
        cupti->cuptiActivityEnableAllSyncRecords(0);
    r = cupti->cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r != CUPTI_SUCCESS)
        return r;
    kernels_on = 1;
    for (size_t i = 0; i < sizeof meta_kinds / sizeof meta_kinds[0]; i++)
        cupti->cuptiActivityEnable(meta_kinds[i]);
    /* Enabled once all the same, as early as possible: CUPTI prepares its kernel tracing then,
     * rather than when a viewer arrives. */
    if (kernels_follow_collecting() && !tr_callbacks_collecting())
        set_kernels(0);
    return CUPTI_SUCCESS;
}

/* CUPTI's way for a late start, now that buffers are given; CUPTI without it tells of new
 * contexts and streams only. */
void tr_enable_dump_existing(void) {
    for (size_t i = 0; i < sizeof meta_kinds / sizeof meta_kinds[0]; i++)
        if (cupti->cuptiActivityEnableAndDump != NULL)
            cupti->cuptiActivityEnableAndDump(meta_kinds[i]);
}

/* CONCURRENT_KERNEL goes off only where CUPTI turns it off safely: 13.0 Update 1 on. */
void tr_enable_quit(void) {
    tr_enable_collecting(0);
    if (kernels_on && cupti->version >= CUPTI_TOGGLES_KERNELS)
        set_kernels(0);
    for (size_t i = 0; i < sizeof meta_kinds / sizeof meta_kinds[0]; i++)
        cupti->cuptiActivityDisable(meta_kinds[i]);
    tr_enable_resources(0);
}

/* Kineto clears PER_THREAD_ACTIVITY_BUFFER when it collects its records, which the tracer sets. */
int tr_enable_other_client_left(void) {
    if (!attr_ok)
        return 0;
    uint8_t v = 1;
    size_t sz = sizeof v;
    return cupti->cuptiActivityGetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &sz,
                                            &v) == CUPTI_SUCCESS &&
           v == 0;
}
