/*
 * The synctop command's verbs. Each verb lives in its own cmd_*.c file and registers itself with
 * SYNCTOP_VERB, so main.c dispatches without knowing them and `synctop --help` lists them in the
 * order of their `rank`.
 */
#ifndef SYNCTOP_VERB_H
#define SYNCTOP_VERB_H

#include <stdio.h>

typedef int (*verb_fn)(int argc, char **argv); /* argv[0] is the verb; returns the exit status */

typedef struct verb {
    const char *name;
    verb_fn fn;
    const char *synopsis; /* "record ENDPOINT... -o FILE" */
    const char *summary;  /* one line for `synctop --help` */
    int rank;             /* order in the help */
} verb;

void verb_register(const verb *v);
/* The registered verbs, in registration order; returns their number. */
int verb_list(const verb ***out);

#define SYNCTOP_VERB(ident, ...)                                               \
    static const verb verb_##ident = {__VA_ARGS__};                            \
    __attribute__((constructor)) static void verb_register_##ident(void) {    \
        verb_register(&verb_##ident);                                          \
    }

/* Exit statuses of the verbs: 0 success, 1 the job failed or a check did not hold, 2 usage. */
enum { EXIT_USAGE = 2 };

/* Prints "synctop VERB: message" on stderr; returns 1 so verbs can `return die(...)`. */
int verb_error(const char *verb_name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
