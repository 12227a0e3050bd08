/*
 * The event model's tables (event.h): record sizes and names per kind. The static asserts pin the
 * wire layout: a change here is a change of format and needs a new TP_BATCH_VERSION.
 */
#include <assert.h>
#include <stddef.h>

#include "synctop/event.h"

static_assert(sizeof(tp_head) == 4, "tp_head");
static_assert(sizeof(tp_kernel) == 64, "tp_kernel");
static_assert(sizeof(tp_memcpy) == 48, "tp_memcpy");
static_assert(sizeof(tp_memset) == 48, "tp_memset");
static_assert(sizeof(tp_sync) == 40, "tp_sync");
static_assert(sizeof(tp_api) == 48, "tp_api");
static_assert(sizeof(tp_nvtx) == 40, "tp_nvtx");
static_assert(sizeof(tp_clock) == 32, "tp_clock");
static_assert(sizeof(tp_drops) == 32, "tp_drops");
static_assert(sizeof(tp_process) == 32, "tp_process");
static_assert(sizeof(tp_device) == 24, "tp_device");
static_assert(sizeof(tp_stream) == 16, "tp_stream");
static_assert(sizeof(tp_thread) == 16, "tp_thread");
static_assert(sizeof(tp_callsite) == 16, "tp_callsite");
static_assert(sizeof(tp_frame) == 32, "tp_frame");
static_assert(sizeof(tp_module) == 48 && offsetof(tp_module, build_id) == 16, "tp_module");
static_assert(offsetof(tp_kernel, start) == 8 && offsetof(tp_memcpy, start) == 8 &&
                  offsetof(tp_memset, start) == 8 && offsetof(tp_sync, start) == 8 &&
                  offsetof(tp_api, start) == 8 && offsetof(tp_nvtx, start) == 8,
              "every span record keeps start at offset 8 and end at 16");
static_assert(sizeof(tp_hostclock) == 32 && offsetof(tp_hostclock, offset_ns) == 8, "tp_hostclock");
static_assert(offsetof(tp_memcpy, bytes) == 32 && offsetof(tp_api, callsite) == 36 &&
                  offsetof(tp_frame, pc) == 24 && offsetof(tp_process, start_realtime_ns) == 24,
              "wire offsets");

static const struct {
    const char *name;
    size_t size;
} kinds[TP_K_MAX_] = {
    [TP_K_KERNEL] = {"kernel", sizeof(tp_kernel)},
    [TP_K_MEMCPY] = {"memcpy", sizeof(tp_memcpy)},
    [TP_K_MEMSET] = {"memset", sizeof(tp_memset)},
    [TP_K_SYNC] = {"sync", sizeof(tp_sync)},
    [TP_K_API] = {"api", sizeof(tp_api)},
    [TP_K_NVTX] = {"nvtx", sizeof(tp_nvtx)},
    [TP_K_CLOCK] = {"clock", sizeof(tp_clock)},
    [TP_K_DROPS] = {"drops", sizeof(tp_drops)},
    [TP_K_PROCESS] = {"process", sizeof(tp_process)},
    [TP_K_DEVICE] = {"device", sizeof(tp_device)},
    [TP_K_STREAM] = {"stream", sizeof(tp_stream)},
    [TP_K_THREAD] = {"thread", sizeof(tp_thread)},
    [TP_K_CALLSITE] = {"callsite", sizeof(tp_callsite)},
    [TP_K_FRAME] = {"frame", sizeof(tp_frame)},
    [TP_K_MODULE] = {"module", sizeof(tp_module)},
    [TP_K_HOSTCLOCK] = {"hostclock", sizeof(tp_hostclock)},
};

size_t tp_kind_size(unsigned kind) { return kind < TP_K_MAX_ ? kinds[kind].size : 0; }

const char *tp_kind_name(unsigned kind) {
    return kind < TP_K_MAX_ && kinds[kind].name ? kinds[kind].name : "?";
}

const char *tp_copy_kind_name(unsigned k) {
    static const char *const names[TP_COPY_MAX_] = {"?",    "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                                    "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
    return k < TP_COPY_MAX_ ? names[k] : "?";
}

const char *tp_mem_kind_name(unsigned k) {
    static const char *const names[TP_MEM_MAX_] = {"?",      "pageable", "pinned",        "device",
                                                   "array",  "managed",  "device-static", "managed-static"};
    return k < TP_MEM_MAX_ ? names[k] : "?";
}

const char *tp_sync_type_name(unsigned t) {
    static const char *const names[TP_SYNC_MAX_] = {"unknown", "event", "stream-wait-event", "stream",
                                                    "context"};
    return t < TP_SYNC_MAX_ ? names[t] : "?";
}

void tp_record_span(const tp_record *r, uint64_t *start, uint64_t *end) {
    switch (r->head.kind) {
    case TP_K_KERNEL:
    case TP_K_MEMCPY:
    case TP_K_MEMSET:
    case TP_K_SYNC:
    case TP_K_API:
    case TP_K_NVTX:
        /* start at offset 8 and end at 16 in all of these (static asserts above) */
        *start = r->kernel.start;
        *end = r->kernel.end;
        return;
    case TP_K_CLOCK:
        *start = *end = r->clock.trace_ns;
        return;
    case TP_K_DROPS:
        *start = *end = r->drops.ts;
        return;
    default:
        *start = *end = 0;
        return;
    }
}
