/*
 * The verbs' registry and the helpers every verb shares (verb.h): error lines and printing
 * untrusted names safely.
 */
#include <stdarg.h>
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

int verb_list(const verb ***out) {
    *out = verbs;
    return n_verbs;
}
