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

void verb_print_json_string(FILE *out, const char *s, size_t len) {
    char buf[512];
    if (s == NULL)
        s = "", len = 0;
    if (len == (size_t)-1)
        len = strlen(s);
    fputc('"', out);
    while (len > 0) {
        size_t used = 0, n = tp_sanitize(buf, sizeof buf, s, len, &used);
        for (size_t i = 0; i < n; i++) {
            if (buf[i] == '"' || buf[i] == '\\')
                fputc('\\', out);
            fputc(buf[i], out);
        }
        if (used == 0)
            break;
        s += used;
        len -= used;
    }
    fputc('"', out);
}

int verb_list(const verb ***out) {
    *out = verbs;
    return n_verbs;
}
