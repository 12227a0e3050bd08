/*
 * The verbs' argument parser. A verb lists its options in a table; args_next hands them back one
 * at a time, with their values, and the operands in between. Every verb thus takes the same
 * forms (--name VALUE, --name=VALUE, -o VALUE, -- before operands that start with '-') and
 * reports a bad argument the same way: "synctop VERB: why" (with the option it likely meant, for a
 * misspelt one), then its synopsis and where the whole help is, exit status 2.
 */
#ifndef SYNCTOP_ARGS_H
#define SYNCTOP_ARGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct arg_opt {
    int id;            /* > 0: what args_next returns for it */
    const char *name;  /* "--format" */
    const char *alias; /* "-o", or NULL */
    int has_value;     /* 1: takes a value, the next argument or after '=' */
} arg_opt;

typedef struct args {
    const char *verb;
    void (*usage)(FILE *out);
    const arg_opt *opts;
    size_t n_opts;
    int argc;
    char **argv;
    int i;             /* the next argument */
    int operands_only; /* after "--" */
} args;

enum {
    ARGS_END = 0,      /* no argument left */
    ARGS_OPERAND = -1, /* *val is an operand */
    ARGS_HELP = -2,    /* --help or -h: the usage went to stdout; the verb returns 0 */
    ARGS_BAD = -3      /* a bad argument: reported; the verb returns EXIT_USAGE */
};

/* argv[0] is the verb. */
void args_init(args *p, const char *verb_name, void (*usage)(FILE *), const arg_opt *opts, size_t n_opts, int argc,
               char **argv);
#define ARGS_INIT(p, verb, usage, opts, argc, argv) \
    args_init((p), (verb), (usage), (opts), sizeof(opts) / sizeof((opts)[0]), (argc), (argv))

/* The next option (its id, and its value in *val when it takes one), operand, or the end. */
int args_next(args *p, const char **val);

/* The arguments from the operand args_next just returned to the end (run's command line). */
char **args_from_operand(const args *p);

/* Reports a usage error: "synctop VERB: " and the message (sanitized), then the verb's synopsis
 * (its usage's first paragraph) and a pointer to --help, on stderr. Returns EXIT_USAGE. */
int args_bad(const args *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Of the n words (NULLs skipped), the one a user likely meant by word: the only one that word
 * (3 characters or more) begins, else the nearest within 1 edit (2 for words of 6 or more), a swap
 * of neighbours counted as one; NULL when none is near. */
const char *args_closest(const char *word, const char *const *words, size_t n);

/* A whole number in [min, max] for option opt: 0, or the usage error reported and EXIT_USAGE. */
int args_u64(const args *p, const char *opt, const char *val, uint64_t min, uint64_t max, uint64_t *out);
/* A number in [min, max]: 0, or the usage error reported and EXIT_USAGE. */
int args_double(const args *p, const char *opt, const char *val, double min, double max, double *out);

/* The words of a file, one per line (blank lines and lines starting with '#' left out, spaces
 * around a word trimmed): the endpoints of a job, say. Returns how many (at most max, each a
 * malloc'd string in out), or -1 with the reason said as a usage error for option opt. */
int args_file_lines(const args *p, const char *opt, const char *path, const char **out, int max);

#endif
