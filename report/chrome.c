/*
 * The timeline as Chrome trace JSON (chrome.h), which Perfetto (ui.perfetto.dev) and
 * chrome://tracing open. The rows follow Kineto's conventions (pid = GPU, tid = stream for GPU
 * work; pid/tid of the process and thread for host calls; categories kernel, gpu_memcpy,
 * gpu_memset, cuda_sync, cuda_runtime, cuda_driver, user_annotation), so that the Kineto importer
 * reads the same timeline back. Host calls that blocked carry "blocking": true and their call site
 * in args, get a second slice of category "blocking" (named "blocked: API") that Perfetto nests
 * under the call, and their call site's frames as the python_function and cpu_op rows a profiler
 * writes around a call (which the importer reads back as the same call site); flow arrows (ac2g) go from each launch to its GPU work. Process and thread names
 * come as metadata rows.
 */
#include "chrome.h"

#include <inttypes.h>
#include <string.h>

#include "analysis.h"
#include "u64map.h"
#include "report.h"
#include "synctop/sanitize.h"

/* Untrusted names as JSON strings: sanitized, then escaped. */
static void jstr(FILE *out, const char *s) { tp_print_json_string(out, s, (size_t)-1); }

/* Microseconds with exact nanoseconds. */
static void jus(FILE *out, uint64_t ns) {
    fprintf(out, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000));
}

static const char *copy_kind_text(unsigned k) {
    static const char *const n[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
    return k < TP_COPY_MAX_ ? n[k] : "Unknown";
}

static const char *mem_text(unsigned k) {
    static const char *const n[] = {"Unknown", "Pageable", "Pinned", "Device", "Array", "Managed", "Device Static", "Managed Static"};
    return k < TP_MEM_MAX_ ? n[k] : "Unknown";
}

static const char *sync_text(unsigned t) {
    switch (t) {
    case TP_SYNC_EVENT: return "Event Sync";
    case TP_SYNC_STREAM_WAIT_EVENT: return "Stream Wait Event";
    case TP_SYNC_STREAM: return "Stream Sync";
    case TP_SYNC_CONTEXT: return "Context Sync";
    default: return "Unknown Sync";
    }
}

typedef struct exp_ctx {
    FILE *out;
    int first;
    uint64_t done, total, next_tick;
    rp_progress_fn progress;
    void *progress_ctx;
    uint32_t producer; /* of the lane being written */
    cm_u64map flows;   /* (producer, correlation) of the calls that queued GPU work: 1, 2 once its
                          arrow's start is written */
} exp_ctx;

/* A flow arrow's key and id: the correlation, made unique across processes. */
static uint64_t flow_key(uint32_t producer, uint32_t corr) { return (uint64_t)producer << 32 | corr; }

static int is_gpu_work(const st_store *s, const st_event *e) {
    int k = st_ev_kind(s, e);
    return k == TP_K_KERNEL || k == TP_K_MEMCPY || k == TP_K_MEMSET;
}

/* The calls that queued GPU work in the store: those whose correlation a kernel, copy or memset of
 * their process carries (the first call of the process with it). Arrows are drawn between those
 * only, so that none starts or ends in nothing. 0 or ERR_NOMEM. */
static int flow_pairs(exp_ctx *x, const st_store *s) {
    cm_u64map work = {0};
    int rc = 0;
    for (size_t l = 0; l < st_lane_count(s) && rc == 0; l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (li->kind != ST_LANE_STREAM)
            continue;
        size_t n;
        const st_event *ev = st_lane_events(s, l, &n);
        for (size_t i = 0; i < n && rc == 0; i++)
            if (ev[i].corr && is_gpu_work(s, &ev[i]) && cm_u64map_put(&work, flow_key(li->producer, ev[i].corr), 1) != 0)
                rc = ERR_NOMEM;
    }
    for (size_t l = 0; l < st_lane_count(s) && rc == 0; l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (li->kind != ST_LANE_THREAD)
            continue;
        size_t n;
        const st_event *ev = st_lane_events(s, l, &n);
        for (size_t i = 0; i < n && rc == 0; i++) {
            uint64_t key = flow_key(li->producer, ev[i].corr);
            if (ev[i].corr && st_ev_kind(s, &ev[i]) == TP_K_API && cm_u64map_find(&work, key) != NULL &&
                cm_u64map_put(&x->flows, key, 1) != 0)
                rc = ERR_NOMEM;
        }
    }
    cm_u64map_free(&work);
    return rc;
}

static void row_begin(exp_ctx *x) {
    fputs(x->first ? "\n" : ",\n", x->out);
    x->first = 0;
}

/* Tells the caller about every hundredth of the events written. */
static void progress(exp_ctx *x) {
    if (x->progress == NULL || ++x->done < x->next_tick)
        return;
    x->next_tick = x->done + x->total / 100 + 1;
    x->progress(x->progress_ctx, x->done, x->total);
}

/* The stream number of device-wide syncs: -1, or 4294967295 when the imported trace wrote that
 * (TP_F_SYNC_ID_U32), so that a re-import (and HTA) reads them as the original did. */
static int64_t wide_tid(const st_lane_info *li) {
    return (li->stream_flags & TP_F_SYNC_ID_U32) ? (int64_t)TP_NO_ID : -1;
}

/* The pid of a GPU in the output: the device number for the first producer (Kineto's convention,
 * which the importer reads back), offset per further producer. */
static int64_t gpu_pid(uint32_t producer, uint16_t device) {
    return (int64_t)producer * 1000 + (device == TP_NO_DEVICE ? 999 : device);
}

/* The file's head: the first producer's rank, the devices, and the opening of the rows. */
static void chrome_header(FILE *out, const st_store *s) {
    fputs("{\"displayTimeUnit\":\"ns\",\"schemaVersion\":1", out);
    /* One rank per producer is all a Kineto file can say; the first producer's. */
    if (st_producer_count(s) > 0 && st_producer_get(s, 0)->rank >= 0)
        fprintf(out, ",\"distributedInfo\":{\"rank\":%d,\"world_size\":%d}", st_producer_get(s, 0)->rank,
                st_producer_get(s, 0)->world);
    fputs(",\"deviceProperties\":[", out);
    for (size_t i = 0; i < st_device_count(s); i++) {
        const st_device_info *d = st_device_get(s, i);
        fprintf(out, "%s{\"id\":%u,\"name\":", i ? "," : "", d->device);
        jstr(out, st_str(s, d->name));
        fprintf(out, ",\"computeMajor\":%u,\"computeMinor\":%u,\"totalGlobalMem\":%" PRIu64 ",\"numSms\":%u}",
                d->cc_major, d->cc_minor, d->memory_bytes, d->sm_count);
    }
    fputs("],\"traceEvents\":[", out);
}

/* Whether key is met for the first time (remembered in seen; out of memory: taken as first). */
static int first_time(cm_u64map *seen, uint64_t key) {
    int added = 1;
    return cm_u64map_get_or_add(seen, key, 1, &added) == NULL || added;
}

/* The metadata rows that name processes, GPUs, threads and streams. */
static void chrome_names(exp_ctx *x, const st_store *s) {
    FILE *out = x->out;
    cm_u64map named = {0}; /* the GPUs and threads named already */
    for (size_t p = 0; p < st_producer_count(s); p++) {
        const st_producer_info *pi = st_producer_get(s, p);
        row_begin(x);
        fprintf(out, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"tid\":0,\"args\":{\"name\":", pi->pid);
        jstr(out, *st_str(s, pi->cmdline) ? st_str(s, pi->cmdline) : "host");
        fputs("}}", out);
    }
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        const st_producer_info *pi = st_producer_get(s, li->producer);
        char name[256];
        if (li->kind == ST_LANE_STREAM) {
            /* a GPU's name once, however many streams it has */
            if (first_time(&named, (uint64_t)1 << 63 | (uint64_t)li->producer << 16 | li->device)) {
                row_begin(x);
                fprintf(out,
                        "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%" PRId64 ",\"tid\":0,\"args\":{\"name\":\"GPU %u\"}}",
                        gpu_pid(li->producer, li->device), li->device);
            }
            row_begin(x);
            if (li->id == TP_NO_ID)
                snprintf(name, sizeof name, "device-wide syncs");
            else
                snprintf(name, sizeof name, "stream %u%s", li->id, li->null_stream ? " (default)" : "");
            fprintf(out, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"args\":{\"name\":\"%s\"}}",
                    gpu_pid(li->producer, li->device), li->id == TP_NO_ID ? wide_tid(li) : (int64_t)li->id, name);
        } else if ((li->kind == ST_LANE_THREAD || li->kind == ST_LANE_NVTX) && *st_str(s, li->name) &&
                   first_time(&named, (uint64_t)li->producer << 32 | li->id)) { /* a thread's name once, from its
                                                                                     calls' lane or its ranges' */
            row_begin(x);
            fprintf(out, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,\"args\":{\"name\":", pi->pid, li->id);
            jstr(out, st_str(s, li->name));
            fputs("}}", out);
        }
    }
    cm_u64map_free(&named);
}

/* Frames exported around one call: deeper stacks keep their innermost frames. */
#define CHROME_FRAMES 32

/* The call site of a host call that blocked as the rows a profiler writes around it, outermost first, each a
 * nanosecond wider on both sides than the one it holds: python_function rows for Python frames
 * ("file.py(42): f"), cpu_op rows for operators, and native frames as python_function rows of
 * their file and line (or function), so that the Kineto importer finds the same call site again; a native frame's row says its module in args ("synctop module"). */
static void chrome_frames(exp_ctx *x, const st_store *s, const st_event *e, int64_t pid, int64_t tid) {
    size_t nf = 0;
    const st_frame *f = st_ev_value(s, e) ? st_callsite_frames(s, st_ev_value(s, e), &nf) : NULL;
    if (f == NULL || nf == 0)
        return;
    if (nf > CHROME_FRAMES)
        nf = CHROME_FRAMES;
    FILE *out = x->out;
    for (size_t k = nf; k-- > 0;) {
        const st_frame *fr = &f[k];
        uint64_t wide = k + 1, a = e->start > wide ? e->start - wide : 0;
        char name[1024];
        const char *func = st_str(s, fr->func), *file = st_str(s, fr->file);
        if (fr->kind == TP_FRAME_OP)
            snprintf(name, sizeof name, "%s", func);
        else if (*file)
            snprintf(name, sizeof name, "%s(%u): %s", file, fr->line, func);
        else
            snprintf(name, sizeof name, "%s", func);
        row_begin(x);
        fprintf(out, "{\"ph\":\"X\",\"cat\":\"%s\",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"ts\":",
                fr->kind == TP_FRAME_OP ? "cpu_op" : "python_function", pid, tid);
        jus(out, a);
        fputs(",\"dur\":", out);
        jus(out, st_ev_end(s, e) + wide - a);
        fputs(",\"name\":", out);
        jstr(out, name);
        fputs(",\"args\":{\"synctop\":\"call site\"", out);
        if (fr->kind == TP_FRAME_NATIVE) {
            fputs(",\"synctop module\":", out);
            jstr(out, st_str(s, fr->module));
        }
        fputs("}}", out);
    }
}

/* The rest of a host call's row (the API, its call site when it blocked), then the "blocked: API"
 * slice of one that blocked and the start of its launch's flow arrow. */
static void chrome_api(exp_ctx *x, const st_store *s, const st_event *e, int64_t pid, int64_t tid, int flows) {
    FILE *out = x->out;
    fprintf(out, ",\"cat\":\"%s\",\"name\":", st_ev_flags(s, e) & TP_F_DRIVER ? "cuda_driver" : "cuda_runtime");
    jstr(out, st_str(s, st_ev_name(s, e)));
    fprintf(out, ",\"args\":{\"correlation\":%u,\"cbid\":%u", e->corr, st_ev_aux(s, e));
    char where[512] = "";
    if (st_ev_flags(s, e) & TP_F_BLOCKING) {
        if (*rp_site_text(s, st_ev_value(s, e), st_ev_name(s, e), where, sizeof where) == '\0')
            snprintf(where, sizeof where, "(not taken)");
        fputs(",\"blocking\":true,\"call site\":", out);
        jstr(out, where);
    }
    fputs("}}", out);
    if (st_ev_flags(s, e) & TP_F_BLOCKING) {
        char nm[160];
        row_begin(x);
        fprintf(out, "{\"ph\":\"X\",\"cat\":\"blocking\",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"ts\":", pid, tid);
        jus(out, e->start);
        fputs(",\"dur\":", out);
        jus(out, st_ev_dur(s, e));
        snprintf(nm, sizeof nm, "blocked: %s", st_str(s, st_ev_name(s, e)));
        fputs(",\"name\":", out);
        jstr(out, nm);
        fprintf(out, ",\"args\":{\"kind\":\"%s\",\"call site\":",
                an_block_kind_name(an_block_kind_of_name(st_str(s, st_ev_name(s, e))) ? an_block_kind_of_name(st_str(s, st_ev_name(s, e)))
                                                                             : AN_BLOCK_OTHER));
        jstr(out, where);
        fputs("}}", out);
    }
    if (st_ev_flags(s, e) & TP_F_BLOCKING)
        chrome_frames(x, s, e, pid, tid);
    uint64_t *v = flows && e->corr ? cm_u64map_find(&x->flows, flow_key(x->producer, e->corr)) : NULL;
    if (v != NULL && *v == 1) {
        *v = 2;
        row_begin(x);
        fprintf(out, "{\"ph\":\"s\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":%" PRIu64 ",\"pid\":%" PRId64
                     ",\"tid\":%" PRId64 ",\"ts\":",
                flow_key(x->producer, e->corr), pid, tid);
        jus(out, e->start);
        fputs("}", out);
    }
}

/* One event's row on lane li (pid, tid), and the end of its flow arrow for GPU work. */
static void chrome_event(exp_ctx *x, const st_store *s, const st_lane_info *li, const st_event *e, int64_t pid,
                         int64_t tid, int flows) {
    FILE *out = x->out;
    row_begin(x);
    fprintf(out, "{\"ph\":\"X\",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"ts\":", pid, tid);
    jus(out, e->start);
    fputs(",\"dur\":", out);
    jus(out, st_ev_dur(s, e));
    char nm[160];
    switch (st_ev_kind(s, e)) {
    case TP_K_KERNEL:
        fputs(",\"cat\":\"kernel\",\"name\":", out);
        jstr(out, st_str(s, st_ev_name(s, e)));
        fprintf(out, ",\"args\":{\"device\":%u,\"stream\":%" PRId64 ",\"correlation\":%u,\"threads per block\":%u}}",
                li->device, tid, e->corr, st_ev_aux(s, e));
        break;
    case TP_K_MEMCPY:
        snprintf(nm, sizeof nm, "Memcpy %s (%s -> %s)", copy_kind_text(st_ev_sub(s, e)), mem_text(st_ev_mem(s, e) >> 4),
                 mem_text(st_ev_mem(s, e) & 15));
        fprintf(out, ",\"cat\":\"gpu_memcpy\",\"name\":\"%s\",\"args\":{\"device\":%u,\"stream\":%" PRId64
                     ",\"correlation\":%u,\"bytes\":%" PRIu64 "}}",
                nm, li->device, tid, e->corr, st_ev_value(s, e));
        break;
    case TP_K_MEMSET:
        fprintf(out, ",\"cat\":\"gpu_memset\",\"name\":\"Memset (%s)\",\"args\":{\"device\":%u,\"stream\":%" PRId64
                     ",\"correlation\":%u,\"bytes\":%" PRIu64 "}}",
                mem_text(st_ev_sub(s, e)), li->device, tid, e->corr, st_ev_value(s, e));
        break;
    case TP_K_SYNC:
        fprintf(out, ",\"cat\":\"cuda_sync\",\"name\":\"%s\",\"args\":{\"device\":%u,\"stream\":%" PRId64
                     ",\"correlation\":%u,\"cuda_sync_kind\":\"%s\"",
                sync_text(st_ev_sub(s, e)), li->device, tid, e->corr, sync_text(st_ev_sub(s, e)));
        if (st_ev_aux(s, e) != TP_NO_ID)
            fprintf(out, ",\"wait_on_cuda_event_id\":%u", st_ev_aux(s, e));
        fputs("}}", out);
        break;
    case TP_K_API: chrome_api(x, s, e, pid, tid, flows); break;
    case TP_K_NVTX:
        fprintf(out, ",\"cat\":\"%s\",\"name\":", li->device != TP_NO_DEVICE ? "gpu_user_annotation" : "user_annotation");
        jstr(out, st_str(s, st_ev_name(s, e)));
        fputs(",\"args\":{}}", out);
        break;
    default:
        fputs(",\"cat\":\"other\",\"name\":\"?\"}", out);
        break;
    }
    if (flows && e->corr && is_gpu_work(s, e) && cm_u64map_find(&x->flows, flow_key(x->producer, e->corr)) != NULL) {
        row_begin(x);
        fprintf(out, "{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":%" PRIu64
                     ",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"ts\":",
                flow_key(x->producer, e->corr), pid, tid);
        jus(out, e->start);
        fputs("}", out);
    }
}

int rp_write_chrome(FILE *out, const st_store *s, int flows, rp_progress_fn progress_cb, void *ctx) {
    exp_ctx x = {.out = out, .first = 1, .progress = progress_cb, .progress_ctx = ctx};
    x.total = st_store_events(s);
    if (flows && flow_pairs(&x, s) != 0) {
        cm_u64map_free(&x.flows);
        return ERR_NOMEM;
    }
    chrome_header(out, s);
    chrome_names(&x, s);
    /* The events; blocking calls carry their call site. */
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        const st_producer_info *pi = st_producer_get(s, li->producer);
        size_t n;
        const st_event *ev = st_lane_events(s, l, &n);
        int64_t pid = li->kind == ST_LANE_STREAM || (li->kind == ST_LANE_NVTX && li->device != TP_NO_DEVICE)
                          ? gpu_pid(li->producer, li->device)
                          : (int64_t)pi->pid;
        int64_t tid = li->id == TP_NO_ID ? wide_tid(li) : (int64_t)li->id;
        x.producer = li->producer;
        for (size_t i = 0; i < n; i++) {
            progress(&x);
            chrome_event(&x, s, li, &ev[i], pid, tid, flows);
        }
    }
    fputs("\n]}\n", out);
    cm_u64map_free(&x.flows);
    return ferror(out) ? ERR_IO : 0;
}
