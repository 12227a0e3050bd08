/*
 * `synctop info FILE...`: what a trace file holds (producers, devices, streams, threads, time span,
 * counts per kind, bytes, drops), what is damaged in it, and whether it was closed cleanly. A
 * PyTorch profiler JSON or an Nsight Systems export is described as `import` reads it: converted
 * into a temporary trace file, then the same summary, with what the import skipped. Text by
 * default, JSON with --json (one object per file, one per line). Every name comes from the file
 * and goes out sanitized.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "synctop/sanitize.h"
#include "synctop/file.h"
#include "ahead.h"
#include "kineto.h"
#include "load.h"
#include "nsys.h"
#include "traceinfo.h"
#include "args.h"
#include "verb.h"

static const char *const drop_source_names[TP_DROP_MAX_] = {"?", "cupti", "tracer", "publisher", "recorder"};

static void info_usage(FILE *out) {
    fprintf(out,
            "usage: synctop info [--json] FILE...\n\n"
            "Describes a trace file: its producers (pid, host, command line, rank), devices,\n"
            "streams, threads, time span, events per kind, bytes, drops (batches missed in\n"
            "sequence and records the tracer reported lost), the hosts' clocks a recorder kept\n"
            "(measured through relays), the damaged regions found (by offset) and whether the\n"
            "file was closed cleanly. A PyTorch profiler (Kineto)\n"
            "JSON or an Nsight Systems SQLite export is described as `synctop import` reads\n"
            "it, with what the import skipped and why. Several files are described one after\n"
            "the other, the profiler traces and exports among them read several at once on\n"
            "the cores the process may use (SYNCTOP_THREADS=N sets how many).\n\n"
            "  --json   print one JSON object per file (one per line) instead of text; a\n"
            "           file that cannot be read gets one too, saying why (\"error\")\n\n"
            "Exit status: 0 when every file could be read (even with damage, which is listed),\n"
            "1 when one cannot be read at all (the others are still described), 2 on bad\n"
            "usage.\n");
}

/* ---- text ---- */

static void put_name(FILE *out, const ti_producer *p, uint32_t id) {
    uint32_t len = 0;
    const char *s = traceinfo_string(p, id, &len);
    if (id == 0)
        fputs("-", out);
    else if (s == NULL)
        fprintf(out, "(string %" PRIu32 " unknown)", id);
    else
        tp_print_sanitized(out, s, len);
}

static void put_ns(FILE *out, uint64_t ns) {
    fprintf(out, "%" PRIu64 ".%09" PRIu64, ns / 1000000000u, ns % 1000000000u);
}

static void put_time(FILE *out, uint64_t ns) {
    time_t t = (time_t)(ns / 1000000000u);
    struct tm tm;
    char buf[64];
    if (gmtime_r(&t, &tm) != NULL && strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm) > 0)
        fputs(buf, out);
    else
        put_ns(out, ns);
}

static int has_drops(const traceinfo *ti) {
    if (ti->unwritten_batches)
        return 1;
    for (size_t i = 0; i < ti->n_prods; i++) {
        const ti_producer *p = &ti->prods[i];
        if (p->missed)
            return 1;
        for (int s = 1; s < TP_DROP_MAX_; s++)
            if (p->drop_records[s] || p->drop_batches[s])
                return 1;
    }
    return 0;
}

/* The first metadata record whose key is at least (kind, a): they are in key order. */
static size_t meta_lower_bound(const ti_producer *p, unsigned kind, uint32_t a) {
    uint64_t want = (uint64_t)kind << 32 | a;
    size_t lo = 0, hi = p->n_meta;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t k1, k2;
        tp_fmeta_key(&p->meta[mid], &k1, &k2);
        if (k1 < want)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int has_device(const ti_producer *p, uint16_t device) {
    size_t i = meta_lower_bound(p, TP_K_DEVICE, device);
    return i < p->n_meta && p->meta[i].head.kind == TP_K_DEVICE && p->meta[i].head.device == device;
}

/* "N streams: ID, ID (default), device-wide" (the ids the trace gives them). */
static void put_streams(FILE *out, const ti_producer *p, uint16_t device) {
    size_t first = meta_lower_bound(p, TP_K_STREAM, device), count = 0;
    for (size_t j = first; j < p->n_meta && p->meta[j].head.kind == TP_K_STREAM && p->meta[j].head.device == device; j++)
        count++;
    fprintf(out, "      %zu stream%s:", count, count == 1 ? "" : "s");
    int n = 0;
    for (size_t j = first; j < p->n_meta; j++) {
        const tp_stream *s = &p->meta[j].stream;
        if (s->kind != TP_K_STREAM || s->device != device)
            break;
        if (s->stream == TP_NO_ID) /* the device-wide synchronizations' lane */
            fprintf(out, "%s device-wide", n ? "," : "");
        else
            fprintf(out, "%s %" PRIu32 "%s", n ? "," : "", s->stream, (s->flags & TP_F_NULL_STREAM) ? " (default)" : "");
        n++;
    }
    fputs(n ? "\n" : " none\n", out);
}

static void text_producer(FILE *out, const ti_producer *p) {
    fprintf(out, "  producer %016" PRIx64 ":", p->id);
    int any = 0;
    for (size_t i = 0; i < p->n_meta; i++) {
        const tp_process *pr = &p->meta[i].process;
        if (pr->kind != TP_K_PROCESS)
            continue;
        fprintf(out, "%s pid %" PRIu32 ", host ", any ? ";" : "", pr->pid);
        put_name(out, p, pr->host);
        if (pr->rank >= 0)
            fprintf(out, ", rank %" PRId32, pr->rank);
        if (pr->rank >= 0 && pr->world > 0) /* a Kineto trace without distributedInfo has no world size */
            fprintf(out, " of %" PRId32, pr->world);
        fputs("\n    command line: ", out);
        put_name(out, p, pr->cmdline);
        any = 1;
    }
    if (!any)
        fputs(" (no process record)", out);
    fputc('\n', out);
    fprintf(out, "    batches: %" PRIu64, p->batches);
    if (p->seq_known)
        fprintf(out, " (seq %" PRIu64 " to %" PRIu64 ")", p->first_seq, p->last_seq);
    fprintf(out, ", synthetic keyframes %" PRIu64 ", events %" PRIu64 ", ended: %s\n", p->keyframes, p->events,
            p->ended ? "yes" : "no");
    /* Devices, each with its streams; then streams of devices the file does not describe. */
    size_t threads = 0, callsites = 0;
    for (size_t i = 0; i < p->n_meta; i++) {
        const tp_record *r = &p->meta[i];
        if (r->head.kind == TP_K_THREAD)
            threads++;
        else if (r->head.kind == TP_K_CALLSITE)
            callsites++;
    }
    for (size_t i = 0; i < p->n_meta; i++) {
        const tp_device *d = &p->meta[i].device;
        if (d->kind != TP_K_DEVICE)
            continue;
        fprintf(out, "    device %u: ", d->device);
        put_name(out, p, d->name);
        if (d->cc_major == 0 && d->sm_count == 0 && d->memory_bytes == 0)
            fputs(", its properties not in the trace\n", out);
        else
            fprintf(out, ", compute capability %u.%u, %" PRIu32 " SMs, %.1f GiB\n", d->cc_major, d->cc_minor,
                    d->sm_count, (double)d->memory_bytes / (1u << 30));
        put_streams(out, p, d->device);
    }
    /* Streams sort by device: a new device without a record of its own gets a bare heading. */
    for (size_t i = 0; i < p->n_meta; i++) {
        const tp_stream *s = &p->meta[i].stream;
        if (s->kind != TP_K_STREAM || has_device(p, s->device) ||
            (i > 0 && p->meta[i - 1].head.kind == TP_K_STREAM && p->meta[i - 1].head.device == s->device))
            continue;
        fprintf(out, "    device %u: (no description)\n", s->device);
        put_streams(out, p, s->device);
    }
    fputs("    threads:", out);
    size_t shown = 0;
    for (size_t i = 0; i < p->n_meta && shown < 32; i++) {
        const tp_thread *t = &p->meta[i].thread;
        if (t->kind != TP_K_THREAD)
            continue;
        fprintf(out, "%s %" PRIu32 " ", shown ? "," : "", t->tid);
        put_name(out, p, t->name);
        shown++;
    }
    if (shown < threads)
        fprintf(out, ", and %zu more", threads - shown);
    if (threads == 0)
        fputs(" none", out);
    fprintf(out, "\n    call sites: %zu\n", callsites);
}

/* A profiler trace or an Nsight Systems export, as the import read it. */
typedef struct foreign {
    const char *format;
    int nsys;
    import_stats st;
} foreign;

/* The files given, and which of them are profiler traces or Nsight exports (read ahead, several at
 * once, on the cores the process may use: ahead.h). */
typedef struct info_files {
    const char **paths;
    int *kind; /* ingest_kind */
    ing_ahead *ahead;
    int n;
} info_files;

static int read_ahead(void *ctx, size_t i, const import_opts *o, import_emit_fn emit, void *emit_ctx, import_stats *st,
                      err_msg *err) {
    const info_files *in = ctx;
    return ingest_import_path(in->paths[i], in->kind[i], o, emit, emit_ctx, st, err);
}

/* Imports file i, a Kineto JSON or an Nsight Systems export (nsys), into a temporary trace file
 * (from its worker's batches when it was read ahead) and summarizes that. */
static int load_foreign(const info_files *in, size_t i, traceinfo *ti, foreign *f, err_msg *err) {
    const char *path = in->paths[i];
    int nsys = in->kind[i] == INGEST_NSYS;
    const char *dir = getenv("TMPDIR");
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s/synctop-info-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(tmp);
    if (fd < 0)
        return err_set(err, ERR_IO, "cannot make a temporary file in %s: %s", dir && *dir ? dir : "/tmp",
                       strerror(errno));
    close(fd);
    f->nsys = nsys;
    f->format = nsys ? "Nsight Systems SQLite export" : "PyTorch profiler (Kineto) JSON";
    tp_fwriter *w = tp_fwriter_open(tmp, TP_FW_OVERWRITE, err);
    int rc = w ? 0 : -1;
    if (rc == 0) {
        verb_progress bar; /* on a terminal, how far the reading is; gone before the file is described */
        verb_progress_init(&bar, "reading", in->n, isatty(STDERR_FILENO));
        verb_progress_next(&bar, (int)i + 1, path);
        rc = in->ahead ? ahead_take(in->ahead, i, verb_emit_to_file, w, &f->st, verb_progress_cb, &bar, path, err)
                       : AHEAD_MINE;
        import_opts o = {.threads = in->ahead ? ahead_threads_each(in->ahead) : 0,
                         .progress = verb_progress_cb,
                         .progress_ctx = &bar};
        if (rc == AHEAD_MINE)
            rc = ingest_import_path(path, in->kind[i], &o, verb_emit_to_file, w, &f->st, err);
        else if (rc > 0)
            rc = 0;
        verb_progress_clear(&bar);
        err_msg cerr = {{0}};
        int crc = tp_fwriter_close(&w, &cerr);
        if (rc == 0 && crc != 0) {
            rc = crc;
            *err = cerr;
        }
    }
    if (rc == 0)
        rc = traceinfo_load(ti, tmp, err);
    unlink(tmp);
    return rc;
}

/* What the import read and left out. */
static void text_import(FILE *out, const foreign *f) {
    const import_stats *st = &f->st;
    fprintf(out, "format: %s%s\n", f->format, st->gzip ? ", gzip-compressed" : "");
    fprintf(out, "size: %" PRIu64 " bytes", st->input_bytes);
    if (st->json_bytes && st->json_bytes != st->input_bytes)
        fprintf(out, " (%" PRIu64 " bytes of JSON)", st->json_bytes);
    if (f->nsys)
        fprintf(out, "\nread: %" PRIu64 " rows not imported (a call stored under two names counts once)",
                st->skipped);
    else
        fprintf(out, "\nread: %" PRIu64 " entries, %" PRIu64 " metadata rows, %" PRIu64 " skipped", st->entries,
                st->meta_rows, st->skipped);
    verb_put_skipped(out, st);
    fputc('\n', out);
    if (st->syncs_moved)
        fprintf(out, "syncs: %" PRIu64 " put on the device their context's work ran on (the export names device 0 "
                     "for every one)\n",
                st->syncs_moved);
    if (st->sited_calls)
        fprintf(out, "call sites: %" PRIu64 " calls given one, %s\n", st->sited_calls,
                f->nsys ? "from their CUDA backtraces" : "from the operators and Python frames around them");
    if (st->invalid) {
        fprintf(out, "unusable: %" PRIu64 "; the first: ", st->invalid);
        tp_print_sanitized(out, st->first_invalid, (size_t)-1);
        fputc('\n', out);
    }
}

static void text_file(FILE *out, const traceinfo *ti) {
    fputs("created: ", out);
    put_time(out, ti->created_ns);
    fprintf(out, "\nclosed cleanly: %s (%s)\n", ti->complete ? "yes" : "no",
            ti->indexed ? "index read from the footer" : "index rebuilt from the batch headers");
    fprintf(out, "size: %" PRIu64 " bytes; %" PRIu64 " batches, %" PRIu64 " synthetic keyframes, %zu index blocks\n",
            ti->file_bytes, ti->batches, ti->keyframes, ti->index_blocks);
    fprintf(out, "payload: %" PRIu64 " bytes raw, %" PRIu64 " stored", ti->raw_bytes, ti->stored_bytes);
    if (ti->events)
        fprintf(out, "; %.1f file bytes per event", (double)ti->file_bytes / (double)ti->events);
    fputc('\n', out);
}

static void text_contents(FILE *out, const traceinfo *ti, const foreign *f) {
    if (ti->events) {
        fputs("time: first event ", out);
        put_ns(out, ti->t_first);
        fputs(", last event ", out);
        put_ns(out, ti->t_last);
        fputs(" (trace clock), duration ", out);
        put_ns(out, ti->t_last - ti->t_first);
        fputs(" s\n", out);
    } else {
        fputs("time: no events\n", out);
    }
    fprintf(out, "events: %" PRIu64 "\n", ti->events);
    for (unsigned k = 0; k < TP_K_MAX_; k++)
        if (ti->per_kind[k])
            fprintf(out, "  %s: %" PRIu64 "\n", tp_kind_name(k), ti->per_kind[k]);
    fprintf(out, "producers: %zu\n", ti->n_prods);
    for (size_t i = 0; i < ti->n_prods; i++)
        text_producer(out, &ti->prods[i]);
    if (ti->batches_beyond)
        fprintf(out, "  (and %" PRIu64 " batches of further producers, not itemized)\n", ti->batches_beyond);
    if (f != NULL) /* an imported trace has neither drops nor damage of its own */
        return;
    if (ti->n_hostclocks > 0) {
        fputs("host clocks, as the recorder measured them through the relays (host minus recorder):\n", out);
        for (size_t i = 0; i < ti->n_hostclocks; i++) {
            fputs("  ", out);
            tp_print_sanitized(out, ti->hostclocks[i].host, (size_t)-1);
            fprintf(out, " %+.3f ms +/- %.3f ms\n", (double)ti->hostclocks[i].offset_ns / 1e6,
                    (double)ti->hostclocks[i].uncertainty_ns / 1e6);
        }
    }
    if (!has_drops(ti)) {
        fputs("drops: none\n", out);
    } else {
        fputs("drops:\n", out);
        for (size_t i = 0; i < ti->n_prods; i++) {
            const ti_producer *p = &ti->prods[i];
            if (p->missed)
                fprintf(out, "  producer %016" PRIx64 ": %" PRIu64 " batches missed (sequence gaps)\n", p->id,
                        p->missed);
            for (int s = 1; s < TP_DROP_MAX_; s++)
                if (p->drop_records[s] || p->drop_batches[s])
                    fprintf(out, "  producer %016" PRIx64 ": %s reported %" PRIu64 " records and %" PRIu64
                                 " batches lost\n",
                            p->id, drop_source_names[s], p->drop_records[s], p->drop_batches[s]);
        }
        if (ti->unwritten_batches)
            fprintf(out, "  recorder: %" PRIu64 " batches (%" PRIu64 " events) received and not written\n",
                    ti->unwritten_batches, ti->unwritten_events);
    }
    if (ti->n_probs == 0) {
        fputs("problems: none\n", out);
    } else {
        fprintf(out, "problems: %zu\n", ti->n_probs);
        for (size_t i = 0; i < ti->n_probs; i++) {
            fprintf(out, "  offset %" PRIu64 " (%" PRIu64 " bytes): ", ti->probs[i].offset, ti->probs[i].length);
            tp_print_sanitized(out, ti->probs[i].what, (size_t)-1);
            fputc('\n', out);
        }
    }
}

static void print_text(FILE *out, const char *path, const traceinfo *ti, const foreign *f) {
    fputs("file: ", out);
    tp_print_sanitized(out, path, (size_t)-1);
    fputc('\n', out);
    if (f != NULL)
        text_import(out, f);
    else
        text_file(out, ti);
    text_contents(out, ti, f);
}

/* ---- JSON ---- */

static void json_name(FILE *out, const ti_producer *p, uint32_t id) {
    uint32_t len = 0;
    const char *s = traceinfo_string(p, id, &len);
    if (s == NULL)
        fputs("null", out);
    else
        tp_print_json_string(out, s, len);
}

static void json_producer(FILE *out, const ti_producer *p) {
    fprintf(out, "{\"id\": \"%016" PRIx64 "\", \"batches\": %" PRIu64 ", \"keyframes\": %" PRIu64
                 ", \"events\": %" PRIu64 ", \"first_seq\": %" PRIu64 ", \"last_seq\": %" PRIu64
                 ", \"missed\": %" PRIu64 ", \"ended\": %s",
            p->id, p->batches, p->keyframes, p->events, p->first_seq, p->last_seq, p->missed,
            p->ended ? "true" : "false");
    fputs(", \"processes\": [", out);
    int n = 0;
    for (size_t i = 0; i < p->n_meta; i++) {
        const tp_process *pr = &p->meta[i].process;
        if (pr->kind != TP_K_PROCESS)
            continue;
        fprintf(out, "%s{\"pid\": %" PRIu32 ", \"host\": ", n++ ? ", " : "", pr->pid);
        json_name(out, p, pr->host);
        fputs(", \"cmdline\": ", out);
        json_name(out, p, pr->cmdline);
        fprintf(out, ", \"rank\": %" PRId32 ", \"world\": %" PRId32 "}", pr->rank, pr->world);
    }
    fputs("], \"devices\": [", out);
    n = 0;
    for (size_t i = 0; i < p->n_meta; i++) {
        const tp_device *d = &p->meta[i].device;
        if (d->kind != TP_K_DEVICE)
            continue;
        fprintf(out, "%s{\"device\": %u, \"name\": ", n++ ? ", " : "", d->device);
        json_name(out, p, d->name);
        fprintf(out, ", \"cc\": \"%u.%u\", \"sm_count\": %" PRIu32 ", \"memory_bytes\": %" PRIu64 "}", d->cc_major,
                d->cc_minor, d->sm_count, d->memory_bytes);
    }
    fputs("], \"streams\": [", out);
    n = 0;
    for (size_t i = 0; i < p->n_meta; i++) {
        const tp_stream *s = &p->meta[i].stream;
        if (s->kind != TP_K_STREAM)
            continue;
        fprintf(out, "%s{\"device\": %u, \"stream\": %" PRIu32 ", \"context\": %" PRIu32 ", \"default\": %s}",
                n++ ? ", " : "", s->device, s->stream, s->context, (s->flags & TP_F_NULL_STREAM) ? "true" : "false");
    }
    fputs("], \"threads\": [", out);
    n = 0;
    size_t callsites = 0;
    for (size_t i = 0; i < p->n_meta; i++) {
        const tp_thread *t = &p->meta[i].thread;
        callsites += t->kind == TP_K_CALLSITE;
        if (t->kind != TP_K_THREAD)
            continue;
        fprintf(out, "%s{\"pid\": %" PRIu32 ", \"tid\": %" PRIu32 ", \"name\": ", n++ ? ", " : "", t->pid, t->tid);
        json_name(out, p, t->name);
        fputc('}', out);
    }
    fprintf(out, "], \"callsites\": %zu, \"drops\": {", callsites);
    n = 0;
    for (int s = 1; s < TP_DROP_MAX_; s++)
        if (p->drops_seen[s])
            fprintf(out, "%s\"%s\": {\"records\": %" PRIu64 ", \"batches\": %" PRIu64 "}", n++ ? ", " : "",
                    drop_source_names[s], p->drop_records[s], p->drop_batches[s]);
    fputs("}}", out);
}

/* What the import read and left out, as JSON members. */
static void json_import(FILE *out, const foreign *f) {
    const import_stats *st = &f->st;
    fputs(", \"format\": ", out);
    tp_print_json_string(out, f->format, strlen(f->format));
    fprintf(out, ", \"gzip\": %s, \"size\": %" PRIu64 ", \"json_bytes\": %" PRIu64 ", \"entries\": %" PRIu64
                 ", \"metadata_rows\": %" PRIu64 ", \"skipped\": %" PRIu64 ", \"skipped_by_category\": {",
            st->gzip ? "true" : "false", st->input_bytes, st->json_bytes, st->entries, st->meta_rows, st->skipped);
    for (size_t i = 0; i < st->n_skip; i++) {
        fputs(i ? ", " : "", out);
        tp_print_json_string(out, st->skip[i].cat, strlen(st->skip[i].cat));
        fprintf(out, ": %" PRIu64, st->skip[i].count);
    }
    fprintf(out, "}, \"skipped_other\": %" PRIu64 ", \"sited_calls\": %" PRIu64 ", \"syncs_moved\": %" PRIu64
                 ", \"unusable\": %" PRIu64,
            st->skip_other, st->sited_calls, st->syncs_moved, st->invalid);
    if (st->invalid) {
        fputs(", \"first_unusable\": ", out);
        tp_print_json_string(out, st->first_invalid, strlen(st->first_invalid));
    }
}

static void print_json(FILE *out, const char *path, const traceinfo *ti, const foreign *f) {
    fputs("{\"file\": ", out);
    tp_print_json_string(out, path, strlen(path));
    if (f != NULL)
        json_import(out, f);
    else
        fprintf(out, ", \"created_ns\": %" PRIu64 ", \"complete\": %s, \"indexed\": %s, \"size\": %" PRIu64
                     ", \"batches\": %" PRIu64 ", \"keyframes\": %" PRIu64 ", \"index_blocks\": %zu, \"raw_bytes\": %" PRIu64
                     ", \"stored_bytes\": %" PRIu64,
                ti->created_ns, ti->complete ? "true" : "false", ti->indexed ? "true" : "false", ti->file_bytes,
                ti->batches, ti->keyframes, ti->index_blocks, ti->raw_bytes, ti->stored_bytes);
    fprintf(out, ", \"events\": %" PRIu64, ti->events);
    if (ti->events)
        fprintf(out, ", \"first_event_ns\": %" PRIu64 ", \"last_event_ns\": %" PRIu64, ti->t_first, ti->t_last);
    fputs(", \"kinds\": {", out);
    int n = 0;
    for (unsigned k = 0; k < TP_K_MAX_; k++)
        if (ti->per_kind[k])
            fprintf(out, "%s\"%s\": %" PRIu64, n++ ? ", " : "", tp_kind_name(k), ti->per_kind[k]);
    fprintf(out, "}, \"batches_of_producers_not_itemized\": %" PRIu64, ti->batches_beyond);
    fputs(", \"producers\": [", out);
    for (size_t i = 0; i < ti->n_prods; i++) {
        if (i)
            fputs(", ", out);
        json_producer(out, &ti->prods[i]);
    }
    fputs("], \"host_clocks\": [", out);
    for (size_t i = 0; i < ti->n_hostclocks; i++) {
        fputs(i ? ", {\"host\": " : "{\"host\": ", out);
        tp_print_json_string(out, ti->hostclocks[i].host, strlen(ti->hostclocks[i].host));
        fprintf(out, ", \"offset_ns\": %" PRId64 ", \"uncertainty_ns\": %" PRIu64 "}", ti->hostclocks[i].offset_ns,
                ti->hostclocks[i].uncertainty_ns);
    }
    fprintf(out, "], \"received_not_written\": {\"batches\": %" PRIu64 ", \"events\": %" PRIu64 "}",
            ti->unwritten_batches, ti->unwritten_events);
    fputs(", \"problems\": [", out);
    for (size_t i = 0; i < ti->n_probs; i++) {
        fprintf(out, "%s{\"offset\": %" PRIu64 ", \"length\": %" PRIu64 ", \"what\": ", i ? ", " : "",
                ti->probs[i].offset, ti->probs[i].length);
        tp_print_json_string(out, ti->probs[i].what, strlen(ti->probs[i].what));
        fputc('}', out);
    }
    fputs("]}\n", out);
}

/* Describes one file; 0, or 1 when it cannot be read (said on stderr). */
static int info_one(const info_files *in, size_t i, int json) {
    const char *path = in->paths[i];
    traceinfo ti;
    err_msg err = {{0}};
    foreign *f = NULL;
    int rc;
    int kind = in->kind[i];
    if (kind == INGEST_KINETO || kind == INGEST_NSYS) {
        f = calloc(1, sizeof *f);
        rc = f ? load_foreign(in, i, &ti, f, &err) : err_set(&err, ERR_NOMEM, "out of memory");
    } else {
        if (in->ahead) /* the files after it may be read ahead now */
            ahead_take(in->ahead, i, verb_emit_to_file, NULL, NULL, NULL, NULL, path, &err);
        rc = traceinfo_load(&ti, path, &err);
        struct stat st;
        /* of no kind it reads (not even a damaged trace file, which keeps its magic): say what it reads,
         * or what an Nsight report is exported with */
        if (rc != 0 && kind == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
            access(path, R_OK) == 0)
            rc = ingest_unreadable(path, &err);
    }
    if (rc != 0) {
        free(f);
        if (json) { /* the file's object says why, as the others say what they hold */
            fputs("{\"file\": ", stdout);
            tp_print_json_string(stdout, path, strlen(path));
            fputs(", \"error\": ", stdout);
            tp_print_json_string(stdout, err.msg, strlen(err.msg));
            fputs("}\n", stdout);
        }
        return verb_error("info", "%s", err.msg);
    }
    if (json)
        print_json(stdout, path, &ti, f);
    else
        print_text(stdout, path, &ti, f);
    traceinfo_free(&ti);
    free(f);
    return 0;
}

static int cmd_info(int argc, char **argv) {
    static const arg_opt opts[] = {{1, "--json", NULL, 0}};
    const char *val;
    const char **paths = calloc((size_t)argc + 1, sizeof *paths);
    int json = 0, n = 0;
    if (paths == NULL)
        return verb_error("info", "out of memory");
    args p;
    ARGS_INIT(&p, "info", info_usage, opts, argc, argv);
    int status = -1;
    for (int id; status < 0 && (id = args_next(&p, &val)) != ARGS_END;) {
        if (id == ARGS_HELP)
            status = 0;
        else if (id == ARGS_BAD)
            status = EXIT_USAGE;
        else if (id == 1)
            json = 1;
        else
            paths[n++] = val;
    }
    if (status < 0 && n == 0)
        status = args_bad(&p, "no trace file given");
    int failed = 0;
    info_files in = {paths, calloc((size_t)n + 1, sizeof *in.kind), NULL, n};
    uint8_t *may = calloc((size_t)n + 1, 1);
    if (status < 0 && (in.kind == NULL || may == NULL))
        status = verb_error("info", "out of memory");
    for (int i = 0; status < 0 && i < n; i++) {
        in.kind[i] = ingest_kind(paths[i]);
        may[i] = in.kind[i] == INGEST_KINETO || in.kind[i] == INGEST_NSYS;
    }
    int nomem = 0;
    if (status < 0)
        in.ahead = ahead_start((size_t)n, may, import_threads(0), read_ahead, &in, &nomem);
    free(may);
    if (status < 0 && nomem)
        status = verb_error("info", "out of memory");
    for (int i = 0; status < 0 && i < n; i++) {
        if (i > 0 && !json)
            fputc('\n', stdout);
        failed |= info_one(&in, (size_t)i, json) != 0;
    }
    ahead_end(&in.ahead);
    free(in.kind);
    free(paths);
    if (status >= 0)
        return status;
    return fflush(stdout) == 0 && !failed ? 0 : 1;
}

SYNCTOP_VERB(info, .name = "info", .fn = cmd_info, .synopsis = "info [--json] FILE...",
             .summary = "describe trace files (or profiler traces, nsys exports): producers, devices, counts, drops, damage",
             .rank = 30, .batch = 1)
