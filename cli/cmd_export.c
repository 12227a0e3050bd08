/*
 * `synctop export SOURCE... --format chrome -o OUT.json`: the timeline as Chrome trace JSON
 * (report/chrome.c), which Perfetto and chrome://tracing open and `synctop import` reads back.
 *
 * Long exports show progress bars on a terminal (stderr: the reading, then the writing) and are
 * quiet otherwise.
 */
#include <errno.h>
#include <limits.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chrome.h"
#include "store.h"
#include "load.h"
#include "args.h"
#include "verb.h"

#define EXPORT_MAX_SOURCES 4096

static void export_usage(FILE *out) {
    fprintf(out, "usage: synctop export SOURCE... [--format chrome] -o OUT.json [-f|--force] [--no-flows]\n"
                 "                      [--max-events N]\n\n"
                 "Writes the timeline as Chrome trace JSON for Perfetto (ui.perfetto.dev) or\n"
                 "chrome://tracing: one process per GPU and per host process, one thread per stream\n"
                 "and host thread, blocking calls marked (category \"blocking\", call site in args,\n"
                 "its frames as the rows a profiler writes around a call), flow arrows from\n"
                 "each call to the kernel, copy or memset it queued. `synctop import OUT.json`\n"
                 "reads it back, call sites too.\n\n"
                 "  SOURCE       a synctop trace file, a Kineto .json[.gz] trace or an Nsight\n"
                 "               Systems SQLite export; several share one timeline, as their\n"
                 "               clocks put them, and are read several at a time on the cores\n"
                 "               the process may use (SYNCTOP_THREADS=N sets how many)\n"
                 "  --format F   chrome (the default and the only one for now)\n"
                 "  -o, --output FILE  output file (\"-\": standard output)\n"
                 "  -f, --force  replace FILE if it exists\n"
                 "  --no-flows   leave out the call-to-GPU-work arrows\n"
                 "  --max-events N  a source of more than N events is refused, not cut: by\n"
                 "               default a trace file up to 4 per byte, a profiler trace or\n"
                 "               export up to 33554432 (one per 4 bytes of a larger file)\n");
}

static int cmd_export(int argc, char **argv) {
    const char *sources[EXPORT_MAX_SOURCES], *out_path = NULL, *format = "chrome";
    int n_sources = 0, force = 0, flows = 1;
    uint64_t max_events = 0;
    enum { O_FORMAT = 1, O_OUT, O_FORCE, O_NO_FLOWS, O_MAX_EVENTS };
    static const arg_opt opts[] = {
        {O_FORMAT, "--format", NULL, 1},
        {O_OUT, "--output", "-o", 1},
        {O_FORCE, "--force", "-f", 0},
        {O_NO_FLOWS, "--no-flows", NULL, 0},
        {O_MAX_EVENTS, "--max-events", NULL, 1},
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
        case O_MAX_EVENTS:
            if (args_u64(&p, "--max-events", a, 1, UINT64_MAX, &max_events))
                return EXIT_USAGE;
            break;
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
    int to_stdout = strcmp(out_path, "-") == 0;
    verb_out vo;
    if (!to_stdout && verb_out_plan("export", out_path, force, (const char *const *)sources, (size_t)n_sources, &vo))
        return 1;
    st_store *s = st_store_new(NULL);
    if (s == NULL)
        return verb_error("export", "out of memory");
    err_msg err = {{0}};
    size_t left_out = 0; /* sources that could not be read: the others are exported, and the status is 1 */
    /* the sources are read several at a time, each where its clock puts it */
    if (verb_read_files("export", s, (const char *const *)sources, (size_t)n_sources, max_events, INGEST_ALIGN_CLOCK,
                        &left_out, &err) != 0) {
        verb_error("export", "%s", err.msg);
        st_store_destroy(&s);
        return 1;
    }
    verb_symbolize("export", s); /* native call sites to file:line */
    /* Written under a temporary name and renamed into place (verb_out): a failed export (a full
     * disk) leaves no truncated JSON behind. */
    FILE *out = to_stdout ? stdout : fopen(verb_out_target(&vo), vo.direct ? "w" : "wx");
    int status = 0;
    if (out == NULL) {
        status = verb_error("export", "cannot write %s: %s", out_path, strerror(errno));
    } else {
        /* on a terminal, how far the writing is, as the reading said it */
        verb_progress bar;
        verb_progress_init(&bar, "writing", 1, isatty(STDERR_FILENO));
        verb_progress_next(&bar, 1, to_stdout ? "-" : out_path);
        int wrc = rp_write_chrome(out, s, flows, verb_progress_events, &bar);
        if ((to_stdout ? fflush(out) : fclose(out)) != 0)
            wrc = ERR_IO;
        verb_progress_clear(&bar);
        if (wrc != 0)
            status = verb_error("export", "cannot write %s: %s", out_path, strerror(errno));
        if (!to_stdout && verb_out_finish("export", &vo, status == 0) != 0)
            status = 1;
    }
    st_store_destroy(&s);
    return status == 0 && left_out > 0 ? 1 : status;
}

SYNCTOP_VERB(export, .name = "export", .fn = cmd_export,
             .synopsis = "export SOURCE... [--format chrome] -o OUT.json",
             .summary = "write the timeline as Chrome trace JSON for Perfetto",
             .rank = 65, .batch = 1)
