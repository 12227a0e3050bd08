/*
 * `synctop import`: turns PyTorch profiler (Kineto) traces and Nsight Systems SQLite exports into a
 * synctop trace file, one producer per Kineto input (a rank each) and per process of an export. The file is written under a temporary name and renamed into place once
 * every input has been imported, so a failed import leaves no half file and --force never loses the
 * old file to a failure.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "synctop/sanitize.h"
#include "ahead.h"
#include "clock.h"
#include "kineto.h"
#include "load.h"
#include "nsys.h"
#include "synctop/file.h"
#include "args.h"
#include "verb.h"

static void import_usage(FILE *out) {
    fprintf(out,
            "usage: synctop import TRACE.json[.gz]|EXPORT.sqlite... -o FILE [--force] [--quiet] [--verbose]\n"
            "                      [--max-events N]\n\n"
            "Reads traces written by the PyTorch profiler (Kineto's Chrome-trace JSON, plain or\n"
            "gzip-compressed) and Nsight Systems exports (nsys export --type sqlite) and writes them\n"
            "as one synctop trace file, each input (each process of an export) as its own\n"
            "producer. Kernels, copies, memsets, GPU-side syncs, CUDA runtime and driver\n"
            "calls (with the ones that block the host marked) and annotations are imported; the\n"
            "operators and Python frames around each blocking call become its call site; flow\n"
            "events are counted and skipped.\n\n"
            "  -o, --output FILE  the trace file to write\n"
            "  -f, --force        replace FILE if it exists\n"
            "  -q, --quiet        no progress bar\n"
            "  -v, --verbose      also list what was skipped, by category\n"
            "  --max-events N     refuse inputs with more than N events (default %u, or\n"
            "                     one per 4 bytes of a larger file)\n\n"
            "Prints one summary line: events per kind, ranks, time span. Profiler JSON of\n"
            "16 MiB or more is parsed on the cores the process may use, and several inputs\n"
            "are read that many at once, written in the order given (SYNCTOP_THREADS=N sets\n"
            "how many).\n",
            IMPORT_MAX_EVENTS);
}

/* ---- summary ---- */

static void fmt_ns(char *buf, size_t size, uint64_t ns) {
    if (ns >= 86400000000000ull) /* traces of different days */
        snprintf(buf, size, "%.1f days", (double)ns / 86400e9);
    else if (ns >= 3600000000000ull)
        snprintf(buf, size, "%.2f h", (double)ns / 3600e9);
    else if (ns >= 1000000000ull)
        snprintf(buf, size, "%.2f s", (double)ns / 1e9);
    else if (ns >= 1000000ull)
        snprintf(buf, size, "%.2f ms", (double)ns / 1e6);
    else if (ns >= 1000ull)
        snprintf(buf, size, "%.1f us", (double)ns / 1e3);
    else
        snprintf(buf, size, "%" PRIu64 " ns", ns);
}

static void fmt_bytes(char *buf, size_t size, uint64_t b) {
    if (b >= 1000000ull)
        snprintf(buf, size, "%.1f MB", (double)b / 1e6);
    else if (b >= 1000ull)
        snprintf(buf, size, "%.1f kB", (double)b / 1e3);
    else
        snprintf(buf, size, "%" PRIu64 " B", b);
}

typedef struct totals {
    uint64_t rec[TP_K_MAX_];
    uint64_t blocking, blocked_ns, input_bytes, json_bytes, sqlite_bytes, invalid;
    uint64_t t_min, t_max;
    int any_span;
    char ranks[160];
    size_t ranks_len;
    int any_rank; /* an input said its rank: the ranks are printed ("?" for those that did not) */
    int world;
} totals;

static void add_rank(totals *t, const import_stats *st) {
    char one[24];
    t->any_rank |= st->rank >= 0;
    if (st->rank >= 0)
        snprintf(one, sizeof one, "%s%d", t->ranks_len ? "," : "", (int)st->rank);
    else
        snprintf(one, sizeof one, "%s?", t->ranks_len ? "," : "");
    size_t n = strlen(one);
    if (t->ranks_len + n + 4 < sizeof t->ranks) {
        memcpy(t->ranks + t->ranks_len, one, n + 1);
        t->ranks_len += n;
    } else if (t->ranks_len + 4 < sizeof t->ranks && strcmp(t->ranks + t->ranks_len - 3, "...") != 0) {
        memcpy(t->ranks + t->ranks_len, "...", 4);
        t->ranks_len += 3;
    }
    if (st->world > 0)
        t->world = st->world;
}

static const char *pl(uint64_t n) {
    return n == 1 ? "" : "s";
}

static void print_summary(FILE *to, const totals *t, int n_inputs, const char *out, uint64_t file_bytes) {
    char span[32], blocked[32], in[32], fb[32];
    fmt_ns(span, sizeof span, t->any_span ? t->t_max - t->t_min : 0);
    fmt_ns(blocked, sizeof blocked, t->blocked_ns);
    /* what was read: JSON text, plus the exports' SQLite bytes (which have no JSON) */
    fmt_bytes(in, sizeof in, t->json_bytes + t->sqlite_bytes);
    fmt_bytes(fb, sizeof fb, file_bytes);
    fprintf(to, "imported %d trace%s ", n_inputs, n_inputs == 1 ? "" : "s");
    if (t->any_rank) {
        fprintf(to, "(rank%s %s", n_inputs == 1 ? "" : "s", t->ranks);
        if (t->world > 0)
            fprintf(to, " of %d", t->world);
        fprintf(to, ") ");
    }
    fprintf(to, "into ");
    tp_print_sanitized(to, out, (size_t)-1);
    fprintf(to, ": %" PRIu64 " kernel%s, %" PRIu64 " memcpy, %" PRIu64 " memset, %" PRIu64 " sync, %" PRIu64
           " api call%s (%" PRIu64 " blocking, %s), %" PRIu64 " annotation%s; %" PRIu64 " device%s, %" PRIu64
           " stream%s, %" PRIu64 " thread%s; span %s; %s %s -> %s\n",
           t->rec[TP_K_KERNEL], pl(t->rec[TP_K_KERNEL]), t->rec[TP_K_MEMCPY], t->rec[TP_K_MEMSET],
           t->rec[TP_K_SYNC], t->rec[TP_K_API], pl(t->rec[TP_K_API]), t->blocking, blocked, t->rec[TP_K_NVTX],
           pl(t->rec[TP_K_NVTX]), t->rec[TP_K_DEVICE], pl(t->rec[TP_K_DEVICE]), t->rec[TP_K_STREAM],
           pl(t->rec[TP_K_STREAM]), t->rec[TP_K_THREAD], pl(t->rec[TP_K_THREAD]), span, in,
           t->sqlite_bytes == 0 ? "JSON" : t->json_bytes == 0 ? "SQLite" : "JSON and SQLite", fb);
}

static void print_skipped(const char *path, const import_stats *st) {
    fprintf(stderr, "  ");
    tp_print_sanitized(stderr, path, (size_t)-1);
    fprintf(stderr, ": %" PRIu64 " entries, %" PRIu64 " metadata rows, %" PRIu64 " skipped", st->entries,
            st->meta_rows, st->skipped);
    verb_put_skipped(stderr, st);
    fputc('\n', stderr);
}

/* ---- the verb ---- */

/* What the command line asked for. */
typedef struct import_args {
    const char *out;
    int force, quiet, verbose;
    uint64_t max_events;
    const char **inputs; /* argc of them at most */
    int n_inputs;
} import_args;

/* The command line; -1 to go on, else the verb's status. */
static int import_parse(int argc, char **argv, import_args *ia) {
    enum { O_OUT = 1, O_FORCE, O_QUIET, O_VERBOSE, O_MAX_EVENTS };
    static const arg_opt arg_opts[] = {
        {O_OUT, "--output", "-o", 1},   {O_FORCE, "--force", "-f", 0},
        {O_QUIET, "--quiet", "-q", 0},  {O_VERBOSE, "--verbose", "-v", 0},
        {O_MAX_EVENTS, "--max-events", NULL, 1},
    };
    args p;
    ARGS_INIT(&p, "import", import_usage, arg_opts, argc, argv);
    const char *a;
    int status = -1;
    for (int id; status < 0 && (id = args_next(&p, &a)) != ARGS_END;) {
        switch (id) {
        case ARGS_HELP: status = 0; break;
        case ARGS_BAD: status = EXIT_USAGE; break;
        case O_OUT: ia->out = a; break;
        case O_FORCE: ia->force = 1; break;
        case O_QUIET: ia->quiet = 1; break;
        case O_VERBOSE: ia->verbose = 1; break;
        case O_MAX_EVENTS:
            if (args_u64(&p, "--max-events", a, 1, UINT64_MAX, &ia->max_events))
                status = EXIT_USAGE;
            break;
        default: ia->inputs[ia->n_inputs++] = a; break;
        }
    }
    if (status < 0 && ia->n_inputs == 0)
        status = args_bad(&p, "no input trace given");
    else if (status < 0 && ia->out == NULL)
        status = args_bad(&p, "no output file given (-o FILE)");
    return status;
}

/* One imported input's figures into the totals, and what it left out said. */
static void import_tally(totals *t, const import_stats *st, const char *path, int nsys, int verbose) {
    for (int k = 0; k < TP_K_MAX_; k++)
        t->rec[k] += st->records[k];
    t->blocking += st->blocking_calls;
    t->blocked_ns += st->blocked_ns;
    t->input_bytes += st->input_bytes;
    t->json_bytes += st->json_bytes;
    if (nsys)
        t->sqlite_bytes += st->input_bytes;
    if (st->events) {
        if (!t->any_span || st->t_min < t->t_min)
            t->t_min = st->t_min;
        if (!t->any_span || st->t_max > t->t_max)
            t->t_max = st->t_max;
        t->any_span = 1;
    }
    add_rank(t, st);
    if (st->invalid) {
        verb_warn("import", "%s: skipped %" PRIu64 " unusable entr%s; the first: %s", path, st->invalid,
                  st->invalid == 1 ? "y" : "ies", st->first_invalid);
    }
    if (st->events == 0) {
        verb_warn("import", "%s: no kernels, copies, CUDA calls or annotations in it", path);
    }
    if (st->strings_cut)
        verb_warn("import", "%s: %" PRIu64 " string%s over 1 MiB cut there", path, st->strings_cut,
                  st->strings_cut == 1 ? "" : "s");
    if (st->frame_names_cut)
        verb_warn("import", "%s: %" PRIu64 " call-chain name%s over %u KiB cut there", path, st->frame_names_cut,
                  st->frame_names_cut == 1 ? "" : "s", IMPORT_FRAME_NAME_MAX >> 10);
    if (st->strings_refused) {
        verb_warn("import", "%s: %" PRIu64 " names over the %u MiB bound on names were left out", path,
                  st->strings_refused, IMPORT_MAX_STRING_BYTES >> 20);
    }
    if (verbose)
        print_skipped(path, st);
}

/* The inputs and their kinds, for the ones read ahead on workers. */
typedef struct inputs {
    const import_args *ia;
    uint8_t *nsys; /* an Nsight Systems export, else profiler JSON */
} inputs;

static int import_one(const inputs *in, size_t i, const import_opts *o, import_emit_fn emit, void *emit_ctx,
                      import_stats *st, err_msg *err) {
    return ingest_import_path(in->ia->inputs[i], in->nsys[i] ? INGEST_NSYS : INGEST_KINETO, o, emit, emit_ctx, st, err);
}

/* Input i, read ahead on a worker (ahead.h): the threads and the progress it is given, the bound
 * on events it is asked for. */
static int read_ahead(void *ctx, size_t i, const import_opts *o, import_emit_fn emit, void *emit_ctx, import_stats *st,
                      err_msg *err) {
    const inputs *in = ctx;
    import_opts opts = *o;
    opts.max_events = in->ia->max_events;
    return import_one(in, i, &opts, emit, emit_ctx, st, err);
}

/* Every input into the writer, in order, each tallied into t; several are read at once on the
 * cores the process may use (ahead.h), the writer getting their batches in order. 0, or the error
 * that stopped it (err says it). */
static int import_all(const import_args *ia, tp_fwriter *w, totals *t, err_msg *err) {
    verb_progress pr; /* each input's bar from half a second into it */
    verb_progress_init(&pr, "importing", ia->n_inputs, !ia->quiet && isatty(STDERR_FILENO));
    import_opts opts = {.max_events = ia->max_events, .progress = verb_progress_cb, .progress_ctx = &pr};
    size_t n = (size_t)ia->n_inputs;
    inputs in = {ia, calloc(n ? n : 1, 1)};
    import_stats *st = calloc(1, sizeof *st);
    uint8_t *may = calloc(n ? n : 1, 1);
    int nomem = in.nsys == NULL || st == NULL || may == NULL;
    for (size_t i = 0; !nomem && i < n; i++) {
        in.nsys[i] = ingest_kind(ia->inputs[i]) == INGEST_NSYS;
        may[i] = 1;
    }
    ing_ahead *ahead = nomem ? NULL : ahead_start(n, may, import_threads(0), read_ahead, &in, &nomem);
    free(may);
    if (nomem) {
        free(in.nsys);
        free(st);
        return err_set(err, ERR_NOMEM, "out of memory");
    }
    if (ahead)
        opts.threads = ahead_threads_each(ahead);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        verb_progress_next(&pr, (int)i + 1, ia->inputs[i]);
        pr.t0 = pr.last = cm_now_s();
        rc = ahead ? ahead_take(ahead, i, verb_emit_to_file, w, st, verb_progress_cb, &pr, ia->inputs[i], err)
                   : AHEAD_MINE;
        if (rc == AHEAD_MINE)
            rc = import_one(&in, i, &opts, verb_emit_to_file, w, st, err);
        else if (rc > 0)
            rc = 0;
        verb_progress_clear(&pr);
        if (rc == 0)
            import_tally(t, st, ia->inputs[i], in.nsys[i], ia->verbose);
    }
    ahead_end(&ahead);
    free(in.nsys);
    free(st);
    return rc;
}

/* The inputs into a file beside the output, renamed to it once whole, so that a failed import
 * leaves no output behind. 0, or 1 with the reason said. */
static int import_run(const import_args *ia) {
    if (strcmp(ia->out, "-") == 0)
        return verb_error("import", "-o -: a trace file is written with its index at the end, so not to standard "
                                    "output; name a file");
    for (int i = 0; i < ia->n_inputs; i++)
        if (ingest_kind(ia->inputs[i]) == INGEST_TRACE)
            return verb_error("import", "%s is a synctop trace file already: report, replay, info and export read "
                                        "it as it is",
                              ia->inputs[i]);
    verb_out vo;
    if (verb_out_plan("import", ia->out, ia->force, ia->inputs, (size_t)ia->n_inputs, &vo))
        return 1;
    err_msg err = {{0}};
    tp_fwriter *w = tp_fwriter_open(verb_out_target(&vo), TP_FW_OVERWRITE, &err);
    if (w == NULL) {
        verb_out_finish("import", &vo, 0); /* it may have been made before the header could not be written */
        return verb_error("import", "%s", err.msg);
    }
    totals t;
    memset(&t, 0, sizeof t);
    int rc = import_all(ia, w, &t, &err);
    err_msg cerr = {{0}};
    tp_fwriter_stats ws = {0};
    int crc = tp_fwriter_close_stats(&w, &ws, &cerr);
    if (rc == 0 && crc != 0) {
        rc = crc;
        err = cerr;
    }
    uint64_t file_bytes = ws.file_bytes; /* what was written: a pipe or a device has no size to ask */
    if (rc != 0) {
        verb_out_finish("import", &vo, 0);
        verb_error("import", "%s", err.msg);
        return 1;
    }
    if (verb_out_finish("import", &vo, 1) != 0)
        return 1;
    /* said on standard error when the trace itself went somewhere a terminal or a pipe shows (/dev/stdout) */
    print_summary(vo.direct ? stderr : stdout, &t, ia->n_inputs, ia->out, file_bytes);
    return 0;
}

static int cmd_import(int argc, char **argv) {
    import_args ia = {.inputs = calloc((size_t)argc, sizeof *ia.inputs)};
    if (ia.inputs == NULL)
        return verb_error("import", "out of memory");
    int status = import_parse(argc, argv, &ia);
    if (status < 0)
        status = import_run(&ia);
    free(ia.inputs);
    return status;
}

SYNCTOP_VERB(import, .name = "import", .fn = cmd_import, .synopsis = "import TRACE.json[.gz]|EXPORT.sqlite... -o FILE",
             .summary = "convert profiler (Kineto) JSON and nsys exports to a trace file", .rank = 60, .batch = 1)
