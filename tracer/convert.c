/*
 * CUPTI record -> synctop record (convert.h). Struct names are CUPTI 13.0's (cupti_activity.h):
 * Kernel10, Memcpy6, Memset4, Synchronization2, API, Marker2, Context3, Stream, Device5. CUPTI
 * 12 writes earlier versions of some (Kernel9, Memcpy5, Synchronization, Context and Context2,
 * Device4: shorter, see cupti_load.c); every field read here lies at the same offset in them, as
 * the assertions below check, so one reading serves both. CUPTI 13.1 to 13.5 write later ones,
 * 13.0's with fields appended (cupti_newer.h), read the same way. Synchronization alone lacks a
 * field read here (returnValue): tr_conv_set_sync_size says whether records have it.
 */
#include "convert.h"

#include <cupti_activity_deprecated.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cbids.h"
#include "cupti_newer.h"

/* Field f of CUPTI 13's struct is where an earlier version has it, within the earlier's size. */
#define SAME_AT(now, old, f)                                                                       \
    _Static_assert(offsetof(now, f) == offsetof(old, f) &&                                         \
                       sizeof(((now *)0)->f) == sizeof(((old *)0)->f) &&                           \
                       offsetof(old, f) + sizeof(((old *)0)->f) <= sizeof(old),                     \
                   #old "." #f " is not where " #now " has it")
SAME_AT(CUpti_ActivityKernel10, CUpti_ActivityKernel9, start);
SAME_AT(CUpti_ActivityKernel10, CUpti_ActivityKernel9, end);
SAME_AT(CUpti_ActivityKernel10, CUpti_ActivityKernel9, correlationId);
SAME_AT(CUpti_ActivityKernel10, CUpti_ActivityKernel9, graphId);
SAME_AT(CUpti_ActivityKernel10, CUpti_ActivityKernel9, deviceId);
SAME_AT(CUpti_ActivityKernel10, CUpti_ActivityKernel9, contextId);
SAME_AT(CUpti_ActivityKernel10, CUpti_ActivityKernel9, streamId);
SAME_AT(CUpti_ActivityKernel10, CUpti_ActivityKernel9, name);
SAME_AT(CUpti_ActivityKernel10, CUpti_ActivityKernel9, gridX);
SAME_AT(CUpti_ActivityKernel10, CUpti_ActivityKernel9, gridY);
SAME_AT(CUpti_ActivityKernel10, CUpti_ActivityKernel9, gridZ);
SAME_AT(CUpti_ActivityKernel10, CUpti_ActivityKernel9, blockX);
SAME_AT(CUpti_ActivityKernel10, CUpti_ActivityKernel9, blockY);
SAME_AT(CUpti_ActivityKernel10, CUpti_ActivityKernel9, blockZ);

SAME_AT(CUpti_ActivityMemcpy6, CUpti_ActivityMemcpy5, start);
SAME_AT(CUpti_ActivityMemcpy6, CUpti_ActivityMemcpy5, end);
SAME_AT(CUpti_ActivityMemcpy6, CUpti_ActivityMemcpy5, flags);
SAME_AT(CUpti_ActivityMemcpy6, CUpti_ActivityMemcpy5, deviceId);
SAME_AT(CUpti_ActivityMemcpy6, CUpti_ActivityMemcpy5, contextId);
SAME_AT(CUpti_ActivityMemcpy6, CUpti_ActivityMemcpy5, streamId);
SAME_AT(CUpti_ActivityMemcpy6, CUpti_ActivityMemcpy5, correlationId);
SAME_AT(CUpti_ActivityMemcpy6, CUpti_ActivityMemcpy5, bytes);
SAME_AT(CUpti_ActivityMemcpy6, CUpti_ActivityMemcpy5, copyKind);
SAME_AT(CUpti_ActivityMemcpy6, CUpti_ActivityMemcpy5, srcKind);
SAME_AT(CUpti_ActivityMemcpy6, CUpti_ActivityMemcpy5, dstKind);

SAME_AT(CUpti_ActivitySynchronization2, CUpti_ActivitySynchronization, start);
SAME_AT(CUpti_ActivitySynchronization2, CUpti_ActivitySynchronization, end);
SAME_AT(CUpti_ActivitySynchronization2, CUpti_ActivitySynchronization, type);
SAME_AT(CUpti_ActivitySynchronization2, CUpti_ActivitySynchronization, correlationId);
SAME_AT(CUpti_ActivitySynchronization2, CUpti_ActivitySynchronization, contextId);
SAME_AT(CUpti_ActivitySynchronization2, CUpti_ActivitySynchronization, streamId);
SAME_AT(CUpti_ActivitySynchronization2, CUpti_ActivitySynchronization, cudaEventId);

SAME_AT(CUpti_ActivityContext3, CUpti_ActivityContext2, contextId);
SAME_AT(CUpti_ActivityContext3, CUpti_ActivityContext2, deviceId);
SAME_AT(CUpti_ActivityContext3, CUpti_ActivityContext2, nullStreamId);
SAME_AT(CUpti_ActivityContext3, CUpti_ActivityContext, contextId);
SAME_AT(CUpti_ActivityContext3, CUpti_ActivityContext, deviceId);
SAME_AT(CUpti_ActivityContext3, CUpti_ActivityContext, nullStreamId);
SAME_AT(CUpti_ActivityDevice5, CUpti_ActivityDevice4, id);
SAME_AT(CUpti_ActivityDevice5, CUpti_ActivityDevice4, name);
SAME_AT(CUpti_ActivityDevice5, CUpti_ActivityDevice4, computeCapabilityMajor);
SAME_AT(CUpti_ActivityDevice5, CUpti_ActivityDevice4, computeCapabilityMinor);
SAME_AT(CUpti_ActivityDevice5, CUpti_ActivityDevice4, numMultiprocessors);
SAME_AT(CUpti_ActivityDevice5, CUpti_ActivityDevice4, globalMemorySize);

/* Bytes a SYNCHRONIZATION record needs to hold returnValue. */
#define SYNC_WITH_RESULT (offsetof(CUpti_ActivitySynchronization2, returnValue) + sizeof(uint32_t))

#define NAME_CACHE 4096 /* kernel-name pointers remembered (direct-mapped) */
#define CTX_SLOTS 1024  /* contexts remembered */
#define API_NAMES 1024  /* cbids whose names are cached, per domain */

typedef struct name_slot {
    const char *ptr;
    uint32_t id;
} name_slot;

typedef struct ctx_slot {
    uint32_t context; /* 0: empty (CUPTI context ids start at 1) */
    uint16_t device;
} ctx_slot;

struct tr_conv {
    tp_enc *enc;
    name_slot names[NAME_CACHE];
    ctx_slot ctx[CTX_SLOTS];
    uint32_t api_names[2][API_NAMES]; /* [driver][cbid]: id + 1, 0 = not looked up */
    uint64_t block_ns;                /* a launch this long blocked its thread (0: never) */
    uint32_t corr_max;                /* highest correlation id converted */
    int sync_no_result;               /* SYNCHRONIZATION records end before returnValue */
    int launches_only;                /* API records of other calls are not wanted */
    tr_conv_stats stats;
};

tr_conv *tr_conv_new(tp_enc *enc) {
    tr_conv *c = calloc(1, sizeof *c);
    if (c != NULL)
        c->enc = enc;
    return c;
}

void tr_conv_destroy(tr_conv **cp) {
    if (cp == NULL || *cp == NULL)
        return;
    free(*cp);
    *cp = NULL;
}

void tr_conv_stats_get(const tr_conv *c, tr_conv_stats *out) { *out = c->stats; }

void tr_conv_forget_names(tr_conv *c) { memset(c->names, 0, sizeof c->names); }

static uint32_t intern_ptr(tr_conv *c, const char *s) {
    if (s == NULL || *s == '\0')
        return 0;
    uintptr_t p = (uintptr_t)s;
    name_slot *slot = &c->names[((p >> 3) ^ (p >> 15)) & (NAME_CACHE - 1)];
    if (slot->ptr == s)
        return slot->id;
    uint32_t id = tp_enc_intern_cstr(c->enc, s);
    if (id != 0) {
        slot->ptr = s;
        slot->id = id;
    }
    return id;
}

static ctx_slot *ctx_find(const tr_conv *c, uint32_t context, int insert) {
    if (context == 0)
        return NULL;
    uint32_t h = (context * 2654435761u) & (CTX_SLOTS - 1);
    for (uint32_t i = 0; i < CTX_SLOTS; i++) {
        ctx_slot *s = (ctx_slot *)&c->ctx[(h + i) & (CTX_SLOTS - 1)];
        if (s->context == context)
            return s;
        if (s->context == 0)
            return insert ? s : NULL;
    }
    return NULL;
}

void tr_conv_set_block_threshold(tr_conv *c, uint64_t ns) { c->block_ns = ns; }

void tr_conv_set_sync_size(tr_conv *c, size_t bytes) { c->sync_no_result = bytes != 0 && bytes < SYNC_WITH_RESULT; }

void tr_conv_set_launches_only(tr_conv *c, int on) { c->launches_only = on; }

uint32_t tr_conv_max_correlation(const tr_conv *c) { return c->corr_max; }

void tr_conv_set_context(tr_conv *c, uint32_t context, uint32_t device) {
    ctx_slot *s = ctx_find(c, context, 1);
    if (s != NULL) {
        s->context = context;
        s->device = device < TP_NO_DEVICE ? (uint16_t)device : TP_NO_DEVICE;
    }
}

uint16_t tr_conv_context_device(const tr_conv *c, uint32_t context) {
    ctx_slot *s = ctx_find(c, context, 0);
    return s ? s->device : TP_NO_DEVICE;
}

uint32_t tr_conv_api_name(tr_conv *c, CUpti_CallbackDomain domain, uint32_t cbid) {
    int drv = domain == CUPTI_CB_DOMAIN_DRIVER_API;
    if (cbid < API_NAMES && c->api_names[drv][cbid] != 0)
        return c->api_names[drv][cbid] - 1;
    char buf[128];
    size_t n = tr_cb_name(domain, cbid, buf, sizeof buf);
    uint32_t id = n ? tp_enc_intern(c->enc, buf, n) : 0;
    if (cbid < API_NAMES && (id != 0 || n == 0))
        c->api_names[drv][cbid] = id + 1;
    return id;
}

static uint16_t dev16(uint32_t d) { return d < TP_NO_DEVICE ? (uint16_t)d : TP_NO_DEVICE; }

static int add(tr_conv *c, const void *rec) {
    int rc = tp_enc_add(c->enc, rec);
    if (rc == 0) {
        c->stats.converted++;
        return 1;
    }
    return rc;
}

static int invalid(tr_conv *c) {
    c->stats.invalid++;
    return 0;
}

/* CUPTI writes 0 for a time it could not collect (a forced flush hands out records of work still
 * running): such a record would put the event 55 years back. */
static int uncollected(tr_conv *c) {
    c->stats.uncollected++;
    return 0;
}

static void saw_correlation(tr_conv *c, uint32_t corr) {
    if (corr > c->corr_max)
        c->corr_max = corr;
}

static int conv_kernel(tr_conv *c, const CUpti_ActivityKernel10 *k) {
    if (k->start == 0 || k->end == 0)
        return uncollected(c);
    saw_correlation(c, k->correlationId);
    if (k->end < k->start)
        return invalid(c);
    tp_kernel r = {.kind = TP_K_KERNEL, .flags = k->graphId ? TP_F_GRAPH : 0,
                   .device = dev16(k->deviceId), .stream = k->streamId, .start = k->start,
                   .end = k->end, .correlation = k->correlationId, .name = intern_ptr(c, k->name),
                   .context = k->contextId, .graph = k->graphId,
                   .grid = {(uint32_t)k->gridX, (uint32_t)k->gridY, (uint32_t)k->gridZ},
                   .block = {(uint32_t)k->blockX, (uint32_t)k->blockY, (uint32_t)k->blockZ}};
    return add(c, &r);
}

static uint8_t mem_kind(unsigned k) { return k < TP_MEM_MAX_ ? (uint8_t)k : TP_MEM_UNKNOWN; }

static int conv_memcpy(tr_conv *c, const CUpti_ActivityMemcpy6 *m) {
    if (m->start == 0 || m->end == 0)
        return uncollected(c);
    saw_correlation(c, m->correlationId);
    if (m->end < m->start)
        return invalid(c);
    tp_memcpy r = {.kind = TP_K_MEMCPY,
                   .flags = (m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) ? TP_F_ASYNC : 0,
                   .device = dev16(m->deviceId), .stream = m->streamId, .start = m->start,
                   .end = m->end, .correlation = m->correlationId, .context = m->contextId,
                   .bytes = m->bytes,
                   .copy_kind = m->copyKind < TP_COPY_MAX_ ? m->copyKind : TP_COPY_UNKNOWN,
                   .src_kind = mem_kind(m->srcKind), .dst_kind = mem_kind(m->dstKind),
                   .src_device = TP_NO_DEVICE, .dst_device = TP_NO_DEVICE};
    return add(c, &r);
}

static int conv_memset(tr_conv *c, const CUpti_ActivityMemset4 *m) {
    if (m->start == 0 || m->end == 0)
        return uncollected(c);
    saw_correlation(c, m->correlationId);
    if (m->end < m->start)
        return invalid(c);
    tp_memset r = {.kind = TP_K_MEMSET,
                   .flags = (m->flags & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC) ? TP_F_ASYNC : 0,
                   .device = dev16(m->deviceId), .stream = m->streamId, .start = m->start,
                   .end = m->end, .correlation = m->correlationId, .context = m->contextId,
                   .bytes = m->bytes, .mem_kind = mem_kind(m->memoryKind), .value = m->value};
    return add(c, &r);
}

static int conv_sync(tr_conv *c, const CUpti_ActivitySynchronization2 *s) {
    if (s->start == 0 || s->end == 0)
        return uncollected(c);
    saw_correlation(c, s->correlationId);
    if (s->end < s->start)
        return invalid(c);
    if (!c->sync_no_result && s->returnValue == CUDA_ERROR_NOT_READY) {
        /* A cudaStreamQuery/cudaEventQuery that found work pending synchronized nothing. */
        c->stats.pending++;
        return 0;
    }
    tp_sync r = {.kind = TP_K_SYNC, .device = tr_conv_context_device(c, s->contextId),
                 .stream = s->streamId, /* CUPTI's "unused" 0xFFFFFFFF is TP_NO_ID */
                 .start = s->start, .end = s->end, .correlation = s->correlationId,
                 .context = s->contextId, .event = s->cudaEventId,
                 .sync_type = (unsigned)s->type < TP_SYNC_MAX_ ? (uint8_t)s->type : TP_SYNC_UNKNOWN};
    return add(c, &r);
}

static int conv_api(tr_conv *c, const CUpti_ActivityAPI *a, int driver) {
    if (a->start == 0 || a->end == 0)
        return uncollected(c);
    saw_correlation(c, a->correlationId);
    if (a->end < a->start)
        return invalid(c);
    CUpti_CallbackDomain dom = driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
    enum tr_cb_class cls = tr_cb_class_of(dom, a->cbid);
    if (cls != TR_CB_NONE && cls != TR_CB_LAUNCH) {
        /* A call the callbacks measure, recorded again because another CUPTI client enabled the
         * whole RUNTIME or DRIVER kind: the callbacks' event is the one (it has the call site and
         * the wait), this twin would count the call twice. */
        c->stats.twins++;
        return 0;
    }
    if (cls == TR_CB_NONE && c->launches_only) {
        c->stats.untraced++;
        return 0;
    }
    uint8_t flags = driver ? TP_F_DRIVER : 0;
    if (cls == TR_CB_LAUNCH) {
        flags |= TP_F_LAUNCH;
        /* A launch waits when the launch queue is full (or the module loads): then it blocks. */
        if (c->block_ns != 0 && a->end - a->start >= c->block_ns)
            flags |= TP_F_BLOCKING;
    }
    tp_api r = {.kind = TP_K_API, .flags = flags, .device = TP_NO_DEVICE, .tid = a->threadId,
                .start = a->start, .end = a->end, .correlation = a->correlationId,
                .cbid = a->cbid, .name = tr_conv_api_name(c, dom, a->cbid),
                .ret = (int32_t)a->returnValue};
    return add(c, &r);
}

static int conv_marker(tr_conv *c, const CUpti_ActivityMarker2 *m) {
    if (m->timestamp == 0)
        return uncollected(c);
    uint8_t shape;
    if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS)
        shape = TP_NVTX_INSTANT;
    else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START)
        shape = TP_NVTX_START;
    else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END)
        shape = TP_NVTX_END;
    else
        return invalid(c);
    uint32_t tid = 0;
    if (m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD || m->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS)
        tid = m->objectId.pt.threadId;
    tp_nvtx r = {.kind = TP_K_NVTX, .flags = shape, .device = TP_NO_DEVICE, .tid = tid,
                 .start = m->timestamp, .end = m->timestamp, .id = m->id,
                 .name = m->name ? tp_enc_intern_cstr(c->enc, m->name) : 0,
                 .domain = m->domain ? tp_enc_intern_cstr(c->enc, m->domain) : 0};
    return add(c, &r);
}

static int conv_context(tr_conv *c, const CUpti_ActivityContext3 *x) {
    tr_conv_set_context(c, x->contextId, x->deviceId);
    tp_stream r = {.kind = TP_K_STREAM, .flags = TP_F_NULL_STREAM, .device = dev16(x->deviceId),
                   .stream = x->nullStreamId, .context = x->contextId, .priority = 0};
    return add(c, &r);
}

/* A green context (CUPTI 13.2 on) has no CONTEXT record: its GREEN_CONTEXT record gives its device,
 * for the synchronizations made on it. */
static int conv_green_context(tr_conv *c, const tr_cupti_green_context_head *x) {
    tr_conv_set_context(c, x->contextId, x->deviceId);
    return 0;
}

static int conv_stream(tr_conv *c, const CUpti_ActivityStream *x) {
    tp_stream r = {.kind = TP_K_STREAM, .device = tr_conv_context_device(c, x->contextId),
                   .stream = x->streamId, .context = x->contextId, .priority = (int32_t)x->priority};
    return add(c, &r);
}

static int conv_device(tr_conv *c, const CUpti_ActivityDevice5 *d) {
    tp_device r = {.kind = TP_K_DEVICE, .device = dev16(d->id),
                   .name = d->name ? tp_enc_intern_cstr(c->enc, d->name) : 0,
                   .cc_major = (uint8_t)d->computeCapabilityMajor,
                   .cc_minor = (uint8_t)d->computeCapabilityMinor,
                   .sm_count = d->numMultiprocessors, .memory_bytes = d->globalMemorySize};
    return add(c, &r);
}

int tr_conv_activity(tr_conv *c, const CUpti_Activity *a) {
    switch ((int)a->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL:
        return conv_kernel(c, (const CUpti_ActivityKernel10 *)a);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
        return conv_memcpy(c, (const CUpti_ActivityMemcpy6 *)a);
    case CUPTI_ACTIVITY_KIND_MEMSET:
        return conv_memset(c, (const CUpti_ActivityMemset4 *)a);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
        return conv_sync(c, (const CUpti_ActivitySynchronization2 *)a);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
        return conv_api(c, (const CUpti_ActivityAPI *)a, 0);
    case CUPTI_ACTIVITY_KIND_DRIVER:
        return conv_api(c, (const CUpti_ActivityAPI *)a, 1);
    case CUPTI_ACTIVITY_KIND_MARKER:
        return conv_marker(c, (const CUpti_ActivityMarker2 *)a);
    case CUPTI_ACTIVITY_KIND_CONTEXT:
        return conv_context(c, (const CUpti_ActivityContext3 *)a);
    case CUPTI_ACTIVITY_KIND_STREAM:
        return conv_stream(c, (const CUpti_ActivityStream *)a);
    case CUPTI_ACTIVITY_KIND_DEVICE:
        return conv_device(c, (const CUpti_ActivityDevice5 *)a);
    case TR_CUPTI_KIND_GREEN_CONTEXT:
        return conv_green_context(c, (const tr_cupti_green_context_head *)a);
    default:
        c->stats.skipped++;
        return 0;
    }
}
