/*
 * `synctop replay FILE`: the viewer over a trace file or a Kineto JSON. It opens on the whole trace,
 * paused; space (or --play) plays it back from its start, revealing the events up to a moving
 * "now" ([ and ] change the speed, g and G jump to the start and the end).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "verb.h"
#include "load.h"
#include "viewer.h"

static void replay_usage(FILE *out) {
    fprintf(out, "usage: synctop replay FILE... [--play] [--step NAME] [--max-events N] [--align A]\n"
                 "                      [--ascii] [--mono]\n\n"
                 "Shows a trace in the interactive timeline: all of it, paused; space plays it\n"
                 "back from its start as it happened.\n\n"
                 "  FILE      a synctop trace file, a PyTorch profiler (Kineto) .json / .json.gz\n"
                 "            or an Nsight Systems export (.sqlite); several (one per rank, say)\n"
                 "            share one timeline\n"
                 "  --play    start playing at once\n"
                 "  --step NAME  the loop's steps are the ranges (NVTX or profiler annotations)\n"
                 "            named NAME (default: ProfilerStep#N, else a regular blocking call,\n"
                 "            as report --steps finds them)\n"
                 "  --max-events N  a source of more than N events is refused, not cut: by\n"
                 "            default a trace file up to 4 per byte, a profiler trace or\n"
                 "            export up to 33554432 (one per 4 bytes of a larger file)\n"
                 "  --align A  several files on one time axis: auto (default: each at its own\n"
                 "            start when no two overlap in time), start, clock (as recorded)\n"
                 "  --ascii   ASCII glyphs only (also when the locale is not UTF-8)\n"
                 "  --mono    no colours (also when NO_COLOR is set)\n\n"
                 "Profiler JSON of 16 MiB or more is parsed on the cores the process may use,\n"
                 "and several files are read that many at once (SYNCTOP_THREADS=N sets how many).\n\n"
                 "Keys: ? help, space play/pause, [ ] speed, g G start/end, +/- (w/s) zoom,\n"
                 "n/N stalls, i/I a site's stalls worst first, > < sort them, t this step only,\n"
                 "} { slow steps, f fit, m mark, c fold, o a thread's ranges (operators) by\n"
                 "depth, r the range around the event, b idle breakdown, / search, q quit.\n");
}

enum { O_PLAY = 1, O_ASCII, O_MONO, O_MAX_EVENTS, O_STEP, O_ALIGN };
static const arg_opt replay_opts[] = {
    {O_PLAY, "--play", NULL, 0},
    {O_STEP, "--step", NULL, 1},
    {O_ASCII, "--ascii", NULL, 0},
    {O_MONO, "--mono", NULL, 0},
    {O_MAX_EVENTS, "--max-events", NULL, 1},
    {O_ALIGN, "--align", NULL, 1},
};

#define REPLAY_MAX_FILES 4096

static int cmd_replay(int argc, char **argv) {
    const char *paths[REPLAY_MAX_FILES], *val;
    size_t n_paths = 0;
    viewer_opts o = {.verb = "replay"};
    args p;
    ARGS_INIT(&p, "replay", replay_usage, replay_opts, argc, argv);
    for (int id; (id = args_next(&p, &val)) != ARGS_END;) {
        switch (id) {
        case ARGS_HELP: return 0;
        case ARGS_BAD: return EXIT_USAGE;
        case O_PLAY: o.play = 1; break;
        case O_ASCII: o.ascii = 1; break;
        case O_MONO: o.mono = 1; break;
        case O_STEP: o.step_name = val; break;
        case O_MAX_EVENTS:
            if (args_u64(&p, "--max-events", val, 1, UINT64_MAX, &o.max_events))
                return EXIT_USAGE;
            break;
        case O_ALIGN:
            if ((o.align = ingest_align_parse(val)) < 0)
                return args_bad(&p, "unknown --align '%s' (auto, start, clock)", val);
            break;
        case ARGS_OPERAND:
            if (n_paths == REPLAY_MAX_FILES)
                return args_bad(&p, "at most %d files", REPLAY_MAX_FILES);
            paths[n_paths++] = val;
            break;
        }
    }
    if (n_paths == 0)
        return args_bad(&p, "no trace file given");
    viewer_result res;
    /* Ctrl-C (or SIGTERM) ends the view as q does: the terminal restored, status 0 */
    o.stop = &verb_stop_signal;
    verb_signals saved;
    verb_signals_catch(&saved);
    int rc = viewer_run_replay(paths, n_paths, &o, &res);
    verb_signals_restore(&saved);
    return verb_viewer_done("replay", rc, &res, NULL);
}

SYNCTOP_VERB(replay, .name = "replay", .fn = cmd_replay, .synopsis = "replay FILE...",
             .summary = "show trace files, profiler JSON or nsys exports in the interactive timeline", .rank = 35)
