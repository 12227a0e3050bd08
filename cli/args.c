/*
 * The verbs' argument parser (args.h).
 */
#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synctop/sanitize.h"
#include "verb.h"

void args_init(args *p, const char *verb_name, void (*usage)(FILE *), const arg_opt *opts, size_t n_opts, int argc,
               char **argv) {
    *p = (args){.verb = verb_name, .usage = usage, .opts = opts, .n_opts = n_opts, .argc = argc, .argv = argv, .i = 1};
}

/* The optimal string alignment distance of a and b (edits, a swap of neighbours one), or a number
 * over max when it is over max. */
static size_t edit_distance(const char *a, const char *b, size_t max) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64 || (la > lb ? la - lb : lb - la) > max)
        return max + 1;
    size_t d[65][65];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            size_t best = sub < del ? sub : del;
            best = best < ins ? best : ins;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

const char *args_closest(const char *word, const char *const *words, size_t n) {
    const char *best = NULL, *prefixed = NULL;
    size_t wl = strlen(word), best_d = wl < 6 ? 1 : 2, n_prefixed = 0;
    for (size_t i = 0; i < n; i++) {
        if (words[i] == NULL)
            continue;
        if (wl >= 3 && strncmp(words[i], word, wl) == 0) {
            prefixed = words[i];
            n_prefixed++;
        }
        size_t d = edit_distance(word, words[i], best_d);
        if (d < best_d || (d == best_d && best == NULL)) {
            best = words[i];
            best_d = d;
        }
    }
    return n_prefixed == 1 ? prefixed : best;
}

/* The option named nearest to a, for "did you mean". */
static const char *closest_option(const args *p, const char *a) {
    const char *names[64];
    size_t n = 0;
    for (size_t k = 0; k < p->n_opts && n < 62; k++)
        names[n++] = p->opts[k].name;
    names[n++] = "--help";
    char word[128];
    snprintf(word, sizeof word, "%.*s", (int)strcspn(a, "="), a);
    return args_closest(word, names, n);
}

/* The first paragraph of the verb's usage: its synopsis. */
static void put_synopsis(const args *p, FILE *out) {
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (m == NULL) {
        p->usage(out);
        return;
    }
    p->usage(m);
    if (fclose(m) != 0 || text == NULL) {
        free(text);
        p->usage(out);
        return;
    }
    const char *end = strstr(text, "\n\n");
    fwrite(text, 1, end ? (size_t)(end - text) + 1 : len, out);
    free(text);
}

int args_bad(const args *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    verb_vline(p->verb, "", fmt, ap);
    va_end(ap);
    if (p->usage) {
        put_synopsis(p, stderr);
        fprintf(stderr, "See 'synctop %s --help' for what each option does.\n", p->verb);
    }
    return EXIT_USAGE;
}

int args_next(args *p, const char **val) {
    *val = NULL;
    if (p->i >= p->argc)
        return ARGS_END;
    const char *a = p->argv[p->i++];
    if (p->operands_only || a[0] != '-' || a[1] == '\0') {
        *val = a;
        return ARGS_OPERAND;
    }
    if (strcmp(a, "--") == 0) {
        p->operands_only = 1;
        return args_next(p, val);
    }
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
        if (p->usage)
            p->usage(stdout);
        return ARGS_HELP;
    }
    const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    for (size_t k = 0; k < p->n_opts; k++) {
        const arg_opt *o = &p->opts[k];
        int is_name = strlen(o->name) == len && strncmp(o->name, a, len) == 0;
        int is_alias = eq == NULL && o->alias && strcmp(o->alias, a) == 0;
        if (!is_name && !is_alias)
            continue;
        if (!o->has_value) {
            if (eq)
                return args_bad(p, "%s takes no value", o->name), ARGS_BAD;
            return o->id;
        }
        if (eq) {
            *val = eq + 1;
        } else if (p->i < p->argc) {
            *val = p->argv[p->i++];
        } else {
            return args_bad(p, "%s needs a value", o->name), ARGS_BAD;
        }
        return o->id;
    }
    const char *near = closest_option(p, a);
    if (near != NULL)
        return args_bad(p, "unknown option '%s' (did you mean %s?)", a, near), ARGS_BAD;
    return args_bad(p, "unknown option '%s'", a), ARGS_BAD;
}

char **args_from_operand(const args *p) {
    return p->argv + p->i - 1;
}

int args_u64(const args *p, const char *opt, const char *val, uint64_t min, uint64_t max, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(val, &end, 10);
    if (errno || end == val || *end != '\0' || val[0] == '-' || v < min || v > max)
        return args_bad(p, "%s wants a whole number from %llu to %llu, not '%s'", opt, (unsigned long long)min,
                        (unsigned long long)max, val);
    *out = v;
    return 0;
}

int args_double(const args *p, const char *opt, const char *val, double min, double max, double *out) {
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || end == val || *end != '\0' || !isfinite(v) || v < min || v > max)
        return args_bad(p, "%s wants a number from %g to %g, not '%s'", opt, min, max, val);
    *out = v;
    return 0;
}

int args_file_lines(const args *p, const char *opt, const char *path, const char **out, int max) {
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        args_bad(p, "%s %s: %s", opt, path, strerror(errno));
        return -1;
    }
    char line[1024];
    int n = 0, lineno = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        lineno++;
        char *w = line + strspn(line, " \t");
        size_t len = strcspn(w, "\r\n");
        while (len > 0 && (w[len - 1] == ' ' || w[len - 1] == '\t'))
            len--;
        w[len] = '\0';
        if (len == 0 || w[0] == '#')
            continue;
        if (n == max) {
            fclose(f);
            args_bad(p, "%s %s: more than %d entries (line %d)", opt, path, max, lineno);
            return -1;
        }
        if ((out[n] = strdup(w)) == NULL) {
            fclose(f);
            args_bad(p, "%s %s: out of memory", opt, path);
            return -1;
        }
        n++;
    }
    fclose(f);
    return n;
}
