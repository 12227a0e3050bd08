/*
 * synctop: the entry point. Dispatches to the verbs registered by the cmd_*.c files (verb.h).
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "synctop/sanitize.h"
#include "verb.h"

#define VERB_MAX 32

static const verb *verbs[VERB_MAX];
static int n_verbs;

void verb_register(const verb *v) {
    if (n_verbs < VERB_MAX)
        verbs[n_verbs++] = v;
}

int verb_error(const char *verb_name, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "synctop %s: ", verb_name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

void verb_print_sanitized(FILE *out, const char *s, size_t len) {
    char buf[1024];
    if (len == (size_t)-1)
        len = strlen(s);
    while (len > 0) {
        size_t used = 0;
        size_t n = tp_sanitize(buf, sizeof buf, s, len, &used);
        fwrite(buf, 1, n, out);
        if (used == 0)
            break;
        s += used;
        len -= used;
    }
}

static int by_rank(const void *a, const void *b) {
    const verb *x = *(const verb *const *)a, *y = *(const verb *const *)b;
    return x->rank - y->rank;
}

static void usage(FILE *out) {
    fprintf(out, "usage: synctop VERB [ARGS...]\n\n"
                 "synctop shows where a CUDA program's host threads wait for the GPU.\n\n"
                 "verbs:\n");
    qsort(verbs, (size_t)n_verbs, sizeof verbs[0], by_rank);
    for (int i = 0; i < n_verbs; i++)
        fprintf(out, "  %-34s %s\n", verbs[i]->synopsis, verbs[i]->summary);
    fprintf(out, "\n`synctop VERB --help` describes one verb.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("synctop %s\n", SYNCTOP_VERSION);
        return 0;
    }
    for (int i = 0; i < n_verbs; i++)
        if (strcmp(argv[1], verbs[i]->name) == 0)
            return verbs[i]->fn(argc - 1, argv + 1);
    fprintf(stderr, "synctop: unknown verb '");
    verb_print_sanitized(stderr, argv[1], (size_t)-1);
    fprintf(stderr, "'\n");
    usage(stderr);
    return EXIT_USAGE;
}
