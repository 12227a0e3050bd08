/*
 * What to change at a blocking call site (advice.h).
 */
#include "advice.h"

#include <stdio.h>
#include <string.h>

#include "synctop/sanitize.h"

/* Each fix's change in words for any CUDA program, and where PyTorch has its own way, in its
 * words too (torch_change, used when the trace shows PyTorch). */
static const struct {
    const char *name, *cause, *change, *torch_change;
} k_fixes[AN_FIX_N_] = {
    [AN_FIX_NONE] = {"none", "", "", NULL},
    [AN_FIX_ITEM] = {"item", ".item() / float() / int() of a CUDA tensor",
                     "Keep the value on the GPU (accumulate it in a tensor) and read it every N steps, or copy it "
                     "with non_blocking=True into pinned memory and read it after an event", NULL},
    [AN_FIX_IF_TENSOR] = {"if-tensor", "a Python branch on a CUDA tensor (if tensor:, bool(), assert)",
                          "Compute the condition on the GPU (torch.where) or check it only every N steps: a branch "
                          "on a CUDA tensor waits for all the work queued before it", NULL},
    [AN_FIX_TO_HOST] = {"to-host", "a copy between host and GPU that waits (.to(device), .cpu(), .numpy(), .tolist())",
                        "Copy through pinned memory with non_blocking=True (to the GPU: tensor.pin_memory() or "
                        "pin_memory=True in the DataLoader; to the host: into a pinned buffer read after an event), "
                        "or only every N steps", NULL},
    [AN_FIX_NONZERO] = {"data-dependent-shape", "an op whose output size depends on the data (nonzero, masked "
                                                "indexing, unique)",
                        "Use a fixed-shape form (torch.where with a mask, a padded index) so the host need not "
                        "learn the size", NULL},
    [AN_FIX_DEVICE_SYNC] = {"device-sync", "a device-wide synchronize",
                            "Take it out of the loop; to time GPU work, record CUDA events and read their elapsed "
                            "time later", NULL},
    [AN_FIX_EVENT_SYNC] = {"event-sync", "the host waiting on a CUDA event",
                           "Let the consuming stream wait instead (cudaStreamWaitEvent) and read results later",
                           "Let the consuming stream wait instead (stream.wait_event / cudaStreamWaitEvent) and read "
                           "results later"},
    [AN_FIX_STREAM_SYNC] = {"stream-sync", "a stream synchronize",
                            "Synchronize only where the host needs the results, as late as possible, with more work "
                            "queued first", NULL},
    [AN_FIX_PAGEABLE] = {"pageable-copy", "an \"async\" copy through pageable host memory",
                         "Copy from pinned memory (cudaMallocHost, or cudaHostRegister on the buffer), "
                         "asynchronously",
                         "Copy from pinned memory, asynchronously (in PyTorch: pin_memory=True in the DataLoader, "
                         "tensor.pin_memory(), non_blocking=True)"},
    [AN_FIX_SYNC_COPY] = {"sync-copy", "a synchronous copy",
                          "Copy asynchronously from pinned memory and wait with an event where the data is needed", NULL},
    [AN_FIX_ALLOC] = {"alloc", "cudaFree / cudaMalloc in the loop",
                      "Reuse buffers: allocate once, outside the loop (or from a pool: cudaMallocAsync)",
                      "Reuse buffers, and let the caching allocator keep its memory (in PyTorch: no "
                      "torch.cuda.empty_cache() in the loop)"},
    [AN_FIX_QUERY] = {"query-polling", "polling a stream or an event from the host",
                      "Replace the polling loop by one event wait (or a host callback)", NULL},
    [AN_FIX_MEMSET] = {"sync-memset", "a synchronous memset", "Use cudaMemsetAsync on the work's stream", NULL},
    [AN_FIX_INPUT] = {"input-pipeline", "the host waiting for its next batch",
                      "Make loading keep up: more DataLoader workers (num_workers), persistent_workers=True, "
                      "pin_memory=True, a larger prefetch_factor, or the preprocessing on the GPU", NULL},
    [AN_FIX_HOST] = {"host-work", "host work between GPU work",
                     "Queue the GPU's next work before this host work, move it to another thread or process, or "
                     "make it cheaper; launch overhead shrinks with CUDA graphs",
                     "Queue the GPU's next work before this host work, move it to another thread or process, or "
                     "make it cheaper; launch overhead shrinks with CUDA graphs or torch.compile"},
    [AN_FIX_HOST_API] = {"host-cuda-calls", "slow CUDA calls that do not wait for the GPU",
                         "Do the slow setup once, before the work: allocate memory and create streams and events "
                         "ahead and reuse them, and load kernels at start-up (CUDA_MODULE_LOADING=EAGER) instead "
                         "of on their first launch",
                         "Warm up before the work that counts: run a step first so that the caching allocator "
                         "holds its memory, streams exist and kernels are loaded, and allocate no new memory in "
                         "the loop"},
};

const char *an_fix_name(int fix) { return fix >= 0 && fix < AN_FIX_N_ ? k_fixes[fix].name : "none"; }

/* A name only PyTorch gives: its operators, its modules' and libraries' paths, its step ranges. */
static int torch_name(const char *n) {
    return strncmp(n, "aten::", 6) == 0 || strstr(n, "torch/") != NULL || strstr(n, "libtorch") != NULL ||
           strstr(n, "libc10") != NULL || strstr(n, "at::native::") != NULL || strncmp(n, "ProfilerStep#", 13) == 0 ||
           strncmp(n, "torch.", 6) == 0;
}

int an_trace_uses_pytorch(const st_store *s) {
    /* A store only grows its strings: each thread looks at the ones it has not seen, once. */
    static _Thread_local const st_store *seen_store;
    static _Thread_local size_t seen;
    static _Thread_local int found;
    if (seen_store != s) {
        seen_store = s;
        seen = 1;
        found = 0;
    }
    size_t n = st_str_count(s);
    for (; !found && seen < n; seen++)
        found = torch_name(st_str(s, (uint32_t)seen));
    return found;
}

static const char *change_of(const st_store *s, int fix) {
    return k_fixes[fix].torch_change != NULL && an_trace_uses_pytorch(s) ? k_fixes[fix].torch_change
                                                                         : k_fixes[fix].change;
}

/* The op a frame names, PyTorch's own name ("aten::item") or its C++ kernel's
 * ("at::native::_local_scalar_dense_cuda"). */
static int names(const char *func, const char *op) { return func != NULL && strstr(func, op) != NULL; }

/* The cause from the ops in the call site's frames (innermost first): the outermost op that tells
 * one is what the program asked for (aten::is_nonzero around aten::item around
 * aten::_local_scalar_dense is an `if tensor:`); AN_FIX_NONE when none tells. */
static int fix_from_frames(const st_store *s, uint64_t callsite, const char **op) {
    size_t nf;
    const st_frame *f = callsite ? st_callsite_frames(s, callsite, &nf) : NULL;
    int found = AN_FIX_NONE;
    for (size_t i = 0; f != NULL && i < nf; i++) {
        const char *fn = f[i].func ? st_str(s, f[i].func) : NULL;
        const char *file = f[i].file ? st_str(s, f[i].file) : "";
        int fix = AN_FIX_NONE;
        if (names(fn, "is_nonzero"))
            fix = AN_FIX_IF_TENSOR;
        else if (names(fn, "nonzero") || names(fn, "masked_select") || names(fn, "unique") ||
                 names(fn, "index_put") || names(fn, "_unique"))
            fix = AN_FIX_NONZERO;
        else if (names(fn, "_local_scalar_dense") || names(fn, "aten::item"))
            fix = AN_FIX_ITEM;
        else if (names(fn, "aten::_to_copy") || names(fn, "aten::to") || names(fn, "aten::copy_") ||
                 names(fn, "aten::cpu") || names(fn, "tolist") || names(fn, "aten::numpy"))
            fix = AN_FIX_TO_HOST;
        else if (f[i].kind == TP_FRAME_PYTHON && fn != NULL && strcmp(fn, "synchronize") == 0 &&
                 strstr(file, "torch/cuda") != NULL)
            fix = AN_FIX_DEVICE_SYNC;
        if (fix != AN_FIX_NONE) {
            *op = fn;
            found = fix;
        }
    }
    return found;
}

void an_advise(const st_store *s, const an_site *site, an_advice *out) {
    memset(out, 0, sizeof *out);
    const char *op = NULL, *api = st_str(s, site->name);
    int fix = fix_from_frames(s, site->callsite, &op);
    if (fix == AN_FIX_TO_HOST && site->kind == AN_BLOCK_PAGEABLE)
        fix = AN_FIX_PAGEABLE; /* the copy to the host is the one through pageable memory */
    if (fix == AN_FIX_NONE) {
        switch (site->kind) {
        case AN_BLOCK_PAGEABLE: fix = AN_FIX_PAGEABLE; break;
        case AN_BLOCK_ALLOC: fix = AN_FIX_ALLOC; break;
        case AN_BLOCK_QUERY: fix = AN_FIX_QUERY; break;
        case AN_BLOCK_MEMSET: fix = AN_FIX_MEMSET; break;
        case AN_BLOCK_MEMCPY: fix = AN_FIX_SYNC_COPY; break;
        case AN_BLOCK_SYNC:
            if (strstr(api, "DeviceSynchronize") || strstr(api, "CtxSynchronize"))
                fix = AN_FIX_DEVICE_SYNC;
            else if (strstr(api, "EventSynchronize"))
                fix = AN_FIX_EVENT_SYNC;
            else if (strstr(api, "StreamSynchronize"))
                fix = AN_FIX_STREAM_SYNC;
            break;
        default: break;
        }
    }
    out->fix = fix;
    out->cause = k_fixes[fix].cause;
    out->change = change_of(s, fix);
    out->gpu_ns = site->gpu_idle_ns;
    if (fix == AN_FIX_NONE)
        return;
    char raw[320];
    if (op != NULL)
        snprintf(raw, sizeof raw, "%s inside %s blocked %llu time%s", api, op, (unsigned long long)site->count,
                 site->count == 1 ? "" : "s");
    else
        snprintf(raw, sizeof raw, "%s blocked %llu time%s (%s)", api, (unsigned long long)site->count,
                 site->count == 1 ? "" : "s", an_block_kind_name(site->kind));
    tp_sanitize(out->why, sizeof out->why, raw, strlen(raw), NULL);
}

void an_advise_host(const st_store *s, const an_host_range *h, const char *range, an_advice *out) {
    memset(out, 0, sizeof *out);
    int input = strstr(range, "DataLoader") != NULL || strstr(range, "__next__") != NULL;
    int api = h->api_name != 0 && 2 * h->api_ns >= h->idle_ns;
    out->fix = api ? AN_FIX_HOST_API : input ? AN_FIX_INPUT : AN_FIX_HOST;
    out->cause = k_fixes[out->fix].cause;
    out->change = change_of(s, out->fix);
    out->gpu_ns = h->idle_ns;
    if (api) {
        char raw[200];
        const char *call = st_str(s, h->api_name);
        snprintf(raw, sizeof raw, "the GPU had nothing queued while the host was in %s, %.0f%% of it in CUDA calls "
                                  "that did not wait; the longest: %s, %.3f ms",
                 range[0] ? "this range" : "no named range", 100.0 * (double)h->api_ns / (double)h->idle_ns,
                 call ? call : "?", (double)h->api_max_ns / 1e6);
        tp_sanitize(out->why, sizeof out->why, raw, strlen(raw), NULL);
    } else if (range[0] == '\0')
        snprintf(out->why, sizeof out->why, "the GPU had nothing queued while the host was in no CUDA call that "
                                            "waited and in no range the trace names (NVTX ranges or record_function "
                                            "would name it)");
    else
        snprintf(out->why, sizeof out->why, "the GPU had nothing queued while the host was in this range%s, in no "
                                            "CUDA call that waited", h->numbered ? " (each of them)" : "");
}
