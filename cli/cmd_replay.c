/*
 * `synctop replay FILE`: the viewer over a trace file or a Kineto JSON. It opens on the whole trace,
 * paused; space (or --play) plays it back from its start, revealing the events up to a moving
 * "now" ([ and ] change the speed, g and G jump to the start and the end).
 */
#include <stdio.h>
#include <string.h>

#include "verb.h"
#include "viewer.h"

static void replay_usage(FILE *out) {
    fprintf(out, "usage: synctop replay FILE [--play] [--ascii] [--mono]\n\n"
                 "Shows a trace in the interactive timeline: all of it, paused; space plays it\n"
                 "back from its start as it happened.\n\n"
                 "  FILE      a synctop trace file, or a PyTorch profiler (Kineto) .json / .json.gz\n"
                 "  --play    start playing at once\n"
                 "  --ascii   ASCII glyphs only (also when the locale is not UTF-8)\n"
                 "  --mono    no colours (also when NO_COLOR is set)\n\n"
                 "Keys: ? help, space play/pause, [ ] speed, g G start/end, +/- zoom, n/N stalls,\n"
                 "w GPU figures for the window shown, q quit.\n");
}

static int cmd_replay(int argc, char **argv) {
    const char *path = NULL;
    viewer_opts o = {.verb = "replay"};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            replay_usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--ascii") == 0) {
            o.ascii = 1;
        } else if (strcmp(argv[i], "--mono") == 0) {
            o.mono = 1;
        } else if (strcmp(argv[i], "--play") == 0) {
            o.play = 1;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            replay_usage(stderr);
            return EXIT_USAGE;
        } else if (path == NULL) {
            path = argv[i];
        } else {
            replay_usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (path == NULL) {
        replay_usage(stderr);
        return EXIT_USAGE;
    }
    return viewer_run_replay(path, &o);
}

SYNCTOP_VERB(replay, .name = "replay", .fn = cmd_replay, .synopsis = "replay FILE",
             .summary = "show a trace file or Kineto JSON in the interactive timeline", .rank = 35)
