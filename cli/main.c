/*
 * synctop: the entry point. Dispatches to the verbs registered by the cmd_*.c files (verb.h).
 */
#include <malloc.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "grow.h"
#include "import.h"
#include "synctop/codec.h"
#include "synctop/sanitize.h"
#include "verb.h"

#define VERB_NAMES_MAX 32

static int by_rank(const void *a, const void *b) {
    const verb *x = *(const verb *const *)a, *y = *(const verb *const *)b;
    return x->rank - y->rank;
}

static void usage(FILE *out) {
    const verb **verbs = NULL;
    int n_verbs = verb_list(&verbs);
    fprintf(out, "usage: synctop VERB [ARGS...]\n\n"
                 "synctop shows where a CUDA program's host threads wait for the GPU.\n\n"
                 "verbs:\n");
    qsort((void *)verbs, (size_t)n_verbs, sizeof verbs[0], by_rank);
    for (int i = 0; i < n_verbs; i++) {
        if (strlen(verbs[i]->synopsis) < 34)
            fprintf(out, "  %-34s %s\n", verbs[i]->synopsis, verbs[i]->summary);
        else
            fprintf(out, "  %s\n  %-34s %s\n", verbs[i]->synopsis, "", verbs[i]->summary);
    }
    fprintf(out, "\n`synctop VERB --help` describes one verb; `synctop --version` prints the version.\n");
}

int main(int argc, char **argv) {
    tp_crc32_use(import_crc32); /* the batches' checksums: a part of every import, load and replay */
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    static char help_opt[] = "--help";
    static char *help[4];
    if (strcmp(argv[1], "help") == 0 && argc > 2) { /* `synctop help VERB`: the verb's own --help */
        help[0] = argv[0];
        help[1] = argv[2];
        help[2] = help_opt;
        argc = 3;
        argv = help;
    } else if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("synctop %s\n", SYNCTOP_VERSION);
        return 0;
    }
    const verb **verbs = NULL;
    int n_verbs = verb_list(&verbs);
    for (int i = 0; i < n_verbs; i++)
        if (strcmp(argv[1], verbs[i]->name) == 0) {
            if (verbs[i]->batch)
                cm_malloc_for_batches();
            return verbs[i]->fn(argc - 1, argv + 1);
        }
    const char *names[VERB_NAMES_MAX];
    int n_names = 0;
    for (int i = 0; i < n_verbs && n_names < VERB_NAMES_MAX; i++)
        names[n_names++] = verbs[i]->name;
    const char *near = args_closest(argv[1], names, (size_t)n_names);
    fprintf(stderr, "synctop: unknown verb '");
    tp_print_sanitized(stderr, argv[1], (size_t)-1);
    if (near != NULL) {
        fprintf(stderr, "' (did you mean %s?)\nSee 'synctop --help' for the verbs.\n", near);
        return EXIT_USAGE;
    }
    fprintf(stderr, "'\n");
    usage(stderr);
    return EXIT_USAGE;
}
