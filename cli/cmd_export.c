/*
 * `synctop export SOURCE... --format chrome -o OUT.json`: the timeline as Chrome trace JSON, which
 * Perfetto (ui.perfetto.dev) and chrome://tracing open. The rows follow Kineto's conventions (pid =
 * GPU, tid = stream for GPU work; pid/tid of the process and thread for host calls; categories
 * kernel, gpu_memcpy, gpu_memset, cuda_sync, cuda_runtime, cuda_driver, user_annotation), so that
 * `synctop import OUT.json` reads the same timeline back. Host calls that blocked carry
 * "blocking": true and their call site in args, and get a second slice of category "blocking" (named
 * "blocked: API") that Perfetto nests under the call; flow arrows (ac2g) go from each launch to its
 * GPU work. Process and thread names come as metadata rows.
 *
 * Long exports show a progress bar on a terminal (stderr) and are quiet otherwise.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "synctop/sanitize.h"
#include "analysis.h"
#include "report.h"
#include "symbols.h"
#include "store.h"
#include "load.h"
#include "args.h"
#include "verb.h"

#define EXPORT_MAX_SOURCES 64

static void export_usage(FILE *out) {
    fprintf(out, "usage: synctop export SOURCE... --format chrome -o OUT.json [--force] [--no-flows]\n\n"
                 "Writes the timeline as Chrome trace JSON for Perfetto (ui.perfetto.dev) or\n"
                 "chrome://tracing: one process per GPU and per host process, one thread per stream\n"
                 "and host thread, blocking calls marked (category \"blocking\", call site in args),\n"
                 "flow arrows from launches to GPU work. `synctop import OUT.json` reads it back.\n\n"
                 "  SOURCE       a synctop trace file or a Kineto .json[.gz] trace\n"
                 "  --format F   chrome (the only one for now)\n"
                 "  -o FILE      output file (\"-\": standard output)\n"
                 "  --force      replace FILE if it exists\n"
                 "  --no-flows   leave out the launch-to-kernel arrows\n");
}

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
    int tty;
    uint64_t done, total, next_tick;
} exp_ctx;

static void row_begin(exp_ctx *x) {
    fputs(x->first ? "\n" : ",\n", x->out);
    x->first = 0;
}

static void progress(exp_ctx *x) {
    if (!x->tty || ++x->done < x->next_tick)
        return;
    x->next_tick = x->done + x->total / 100 + 1;
    int pct = x->total ? (int)(100 * x->done / x->total) : 100;
    char bar[41];
    memset(bar, '#', (size_t)(pct * 40 / 100));
    memset(bar + pct * 40 / 100, '.', (size_t)(40 - pct * 40 / 100));
    bar[40] = '\0';
    fprintf(stderr, "\rexport [%s] %3d%%", bar, pct);
    fflush(stderr);
}

/* The pid of a GPU in the output: the device number for the first producer (Kineto's convention,
 * which the importer reads back), offset per further producer. */
/* The stream number of device-wide syncs: -1, or 4294967295 when the imported trace wrote that
 * (TP_F_SYNC_ID_U32), so that a re-import (and HTA) reads them as the original did. */
static int64_t wide_tid(const st_lane_info *li) {
    return (li->stream_flags & TP_F_SYNC_ID_U32) ? (int64_t)TP_NO_ID : -1;
}

static int64_t gpu_pid(uint32_t producer, uint16_t device) {
    return (int64_t)producer * 1000 + (device == TP_NO_DEVICE ? 999 : device);
}

static int export_chrome(FILE *out, const st_store *s, const an_result *r, int flows) {
    exp_ctx x = {.out = out, .first = 1, .tty = isatty(STDERR_FILENO)};
    x.total = st_store_events(s);
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
    /* Names: processes, GPUs, threads, streams. */
    for (size_t p = 0; p < st_producer_count(s); p++) {
        const st_producer_info *pi = st_producer_get(s, p);
        row_begin(&x);
        fprintf(out, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"tid\":0,\"args\":{\"name\":", pi->pid);
        jstr(out, *st_str(s, pi->cmdline) ? st_str(s, pi->cmdline) : "host");
        fputs("}}", out);
    }
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        const st_producer_info *pi = st_producer_get(s, li->producer);
        char name[256];
        if (li->kind == ST_LANE_STREAM) {
            row_begin(&x);
            fprintf(out, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%" PRId64 ",\"tid\":0,\"args\":{\"name\":\"GPU %u\"}}",
                    gpu_pid(li->producer, li->device), li->device);
            row_begin(&x);
            if (li->id == TP_NO_ID)
                snprintf(name, sizeof name, "device-wide syncs");
            else
                snprintf(name, sizeof name, "stream %u%s", li->id, li->null_stream ? " (default)" : "");
            fprintf(out, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"args\":{\"name\":\"%s\"}}",
                    gpu_pid(li->producer, li->device), li->id == TP_NO_ID ? wide_tid(li) : (int64_t)li->id, name);
        } else if (li->kind == ST_LANE_THREAD && *st_str(s, li->name)) {
            row_begin(&x);
            fprintf(out, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,\"args\":{\"name\":", pi->pid, li->id);
            jstr(out, st_str(s, li->name));
            fputs("}}", out);
        }
    }
    /* Which API events blocked, and where: from the analysis. */
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        const st_producer_info *pi = st_producer_get(s, li->producer);
        size_t n;
        const st_event *ev = st_lane_events(s, l, &n);
        int64_t pid = li->kind == ST_LANE_STREAM || (li->kind == ST_LANE_NVTX && li->device != TP_NO_DEVICE)
                          ? gpu_pid(li->producer, li->device)
                          : (int64_t)pi->pid;
        int64_t tid = li->id == TP_NO_ID ? wide_tid(li) : (int64_t)li->id;
        for (size_t i = 0; i < n; i++) {
            const st_event *e = &ev[i];
            progress(&x);
            row_begin(&x);
            fprintf(out, "{\"ph\":\"X\",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"ts\":", pid, tid);
            jus(out, e->start);
            fputs(",\"dur\":", out);
            jus(out, e->end - e->start);
            char nm[160];
            switch (e->kind) {
            case TP_K_KERNEL:
                fputs(",\"cat\":\"kernel\",\"name\":", out);
                jstr(out, st_str(s, e->name));
                fprintf(out, ",\"args\":{\"device\":%u,\"stream\":%" PRId64 ",\"correlation\":%u,\"threads per block\":%u}}",
                        li->device, tid, e->corr, e->aux);
                break;
            case TP_K_MEMCPY:
                snprintf(nm, sizeof nm, "Memcpy %s (%s -> %s)", copy_kind_text(e->sub), mem_text(e->mem >> 4),
                         mem_text(e->mem & 15));
                fprintf(out, ",\"cat\":\"gpu_memcpy\",\"name\":\"%s\",\"args\":{\"device\":%u,\"stream\":%" PRId64
                             ",\"correlation\":%u,\"bytes\":%" PRIu64 "}}",
                        nm, li->device, tid, e->corr, e->value);
                break;
            case TP_K_MEMSET:
                fprintf(out, ",\"cat\":\"gpu_memset\",\"name\":\"Memset (%s)\",\"args\":{\"device\":%u,\"stream\":%" PRId64
                             ",\"correlation\":%u,\"bytes\":%" PRIu64 "}}",
                        mem_text(e->sub), li->device, tid, e->corr, e->value);
                break;
            case TP_K_SYNC:
                fprintf(out, ",\"cat\":\"cuda_sync\",\"name\":\"%s\",\"args\":{\"device\":%u,\"stream\":%" PRId64
                             ",\"correlation\":%u,\"cuda_sync_kind\":\"%s\"",
                        sync_text(e->sub), li->device, tid, e->corr, sync_text(e->sub));
                if (e->aux != TP_NO_ID)
                    fprintf(out, ",\"wait_on_cuda_event_id\":%u", e->aux);
                fputs("}}", out);
                break;
            case TP_K_API: {
                fprintf(out, ",\"cat\":\"%s\",\"name\":", e->flags & TP_F_DRIVER ? "cuda_driver" : "cuda_runtime");
                jstr(out, st_str(s, e->name));
                fprintf(out, ",\"args\":{\"correlation\":%u,\"cbid\":%u", e->corr, e->aux);
                char where[512] = "";
                if (e->flags & TP_F_BLOCKING) {
                    if (*rp_site_text(s, e->value, e->name, where, sizeof where) == '\0')
                        snprintf(where, sizeof where, "(not taken)");
                    fputs(",\"blocking\":true,\"call site\":", out);
                    jstr(out, where);
                }
                fputs("}}", out);
                if (e->flags & TP_F_BLOCKING) {
                    row_begin(&x);
                    fprintf(out, "{\"ph\":\"X\",\"cat\":\"blocking\",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"ts\":", pid, tid);
                    jus(out, e->start);
                    fputs(",\"dur\":", out);
                    jus(out, e->end - e->start);
                    snprintf(nm, sizeof nm, "blocked: %s", st_str(s, e->name));
                    fputs(",\"name\":", out);
                    jstr(out, nm);
                    fprintf(out, ",\"args\":{\"kind\":\"%s\",\"call site\":",
                            an_block_kind_name(an_block_kind_of_name(st_str(s, e->name)) ? an_block_kind_of_name(st_str(s, e->name))
                                                                                         : AN_BLOCK_OTHER));
                    jstr(out, where);
                    fputs("}}", out);
                }
                if (flows && e->corr && (e->flags & TP_F_LAUNCH)) {
                    row_begin(&x);
                    fprintf(out, "{\"ph\":\"s\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":%u,\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"ts\":",
                            e->corr, pid, tid);
                    jus(out, e->start);
                    fputs("}", out);
                }
                break;
            }
            case TP_K_NVTX:
                fprintf(out, ",\"cat\":\"%s\",\"name\":", li->device != TP_NO_DEVICE ? "gpu_user_annotation" : "user_annotation");
                jstr(out, st_str(s, e->name));
                fputs(",\"args\":{}}", out);
                break;
            default:
                fputs(",\"cat\":\"other\",\"name\":\"?\"}", out);
                break;
            }
            if (flows && e->corr && (e->kind == TP_K_KERNEL || e->kind == TP_K_MEMCPY || e->kind == TP_K_MEMSET)) {
                row_begin(&x);
                fprintf(out, "{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":%u,\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"ts\":",
                        e->corr, pid, tid);
                jus(out, e->start);
                fputs("}", out);
            }
        }
    }
    fputs("\n]}\n", out);
    if (x.tty && x.total > 0)
        fputs("\r\033[K", stderr);
    (void)r;
    return ferror(out) ? -1 : 0;
}

static int cmd_export(int argc, char **argv) {
    const char *sources[EXPORT_MAX_SOURCES], *out_path = NULL, *format = "chrome";
    int n_sources = 0, force = 0, flows = 1;
    enum { O_FORMAT = 1, O_OUT, O_FORCE, O_NO_FLOWS };
    static const arg_opt opts[] = {
        {O_FORMAT, "--format", NULL, 1},
        {O_OUT, "--output", "-o", 1},
        {O_FORCE, "--force", NULL, 0},
        {O_NO_FLOWS, "--no-flows", NULL, 0},
    };
    args p;
    ARGS_INIT(&p, "export", export_usage, opts, argc, argv);
    const char *a;
    for (int id; (id = args_next(&p, &a)) != ARGS_END;) {
        switch (id) {
        case ARGS_HELP: return 0;
        case ARGS_BAD: return EXIT_USAGE;
        case O_FORMAT: format = a; break;
        case O_OUT: out_path = a; break;
        case O_FORCE: force = 1; break;
        case O_NO_FLOWS: flows = 0; break;
        default:
            if (n_sources == EXPORT_MAX_SOURCES)
                return args_bad(&p, "at most %d sources", EXPORT_MAX_SOURCES);
            sources[n_sources++] = a;
            break;
        }
    }
    if (n_sources == 0)
        return args_bad(&p, "no source given");
    if (out_path == NULL)
        return args_bad(&p, "no -o FILE given");
    if (strcmp(format, "chrome") != 0)
        return args_bad(&p, "unknown format '%s' (chrome)", format);
    if (strcmp(out_path, "-") != 0 && !force && access(out_path, F_OK) == 0)
        return verb_error("export", "%s already exists (use --force to replace it)", out_path);
    st_store *s = st_store_new(NULL);
    if (s == NULL)
        return verb_error("export", "out of memory");
    err_msg err = {{0}};
    for (int i = 0; i < n_sources; i++) {
        if (ingest_file(s, sources[i], verb_warn_cb, "export", &err) != 0) {
            verb_error("export", "%s", err.msg);
            st_store_destroy(&s);
            return 1;
        }
    }
    st_store_commit(s);
    verb_symbolize("export", s); /* native call sites to file:line */
    an_result r;
    if (an_analyze(s, NULL, &r, &err) != 0) {
        st_store_destroy(&s);
        return verb_error("export", "%s", err.msg);
    }
    FILE *out = strcmp(out_path, "-") == 0 ? stdout : fopen(out_path, "w");
    int status = 0;
    if (out == NULL)
        status = verb_error("export", "cannot write %s: %s", out_path, strerror(errno));
    else if (export_chrome(out, s, &r, flows) != 0 || (out != stdout && fclose(out) != 0))
        status = verb_error("export", "cannot write %s", out_path);
    an_result_free(&r);
    st_store_destroy(&s);
    return status;
}

SYNCTOP_VERB(export, .name = "export", .fn = cmd_export,
             .synopsis = "export SOURCE... --format chrome -o OUT.json",
             .summary = "write the timeline as Chrome trace JSON for Perfetto",
             .rank = 65)
