/*
 * The verbs' argument parser (args.h).
 */
#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "synctop/sanitize.h"
#include "verb.h"

void args_init(args *p, const char *verb_name, void (*usage)(FILE *), const arg_opt *opts, size_t n_opts, int argc,
               char **argv) {
    *p = (args){.verb = verb_name, .usage = usage, .opts = opts, .n_opts = n_opts, .argc = argc, .argv = argv, .i = 1};
}

int args_bad(const args *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    verb_vline(p->verb, "", fmt, ap);
    va_end(ap);
    if (p->usage) {
        fputc('\n', stderr);
        p->usage(stderr);
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
