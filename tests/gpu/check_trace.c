/*
 * Checks a trace recorded from a sample against the EXPECT lines at the top of the sample's
 * source: "// EXPECT: N x API blocking at @TAG", where the line holding "// @TAG" is the call.
 * A blocking call counts toward an expectation when its API name matches and its call site is
 * named after that line of that file: the innermost native frame outside the CUDA runtime, looked
 * up in the module on disk (module + offset, as the tracer publishes them) as synctop's viewer and
 * report do (ingest/symbols.c). For a Python script, "# EXPECT-PY: N x blocking at @TAG" (the line holding "# @TAG")
 * counts the blocking calls, of any API, whose call site has a Python frame at that line of a file
 * of that name. Prints one line per expectation; exit status 0 when all hold, 1 otherwise, 2 on
 * error.
 *
 * usage: synctop_check_trace TRACE SOURCE
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbols.h"
#include "text.h"
#include "synctop/codec.h"
#include "synctop/file.h"

#define MAX_SITES 4096

typedef struct site {
    uint32_t id;
    const char *file; /* the frame the call site is named after (symbols.h), as synctop names it */
    uint32_t line;
    const char *func;
} site;

static tp_strtab *strings;
static tp_record *recs;
static size_t n_recs, cap_recs;
static sy_cache *symbols;

static const char *str(uint32_t id) {
    uint32_t len;
    const char *s = id ? tp_strtab_get(strings, id, &len) : NULL;
    return s ? s : "";
}

static int load(const char *path) {
    err_msg err;
    tp_freader *r = tp_freader_open(path, &err);
    if (r == NULL) {
        fprintf(stderr, "check_trace: %s: %s\n", path, err.msg);
        return -1;
    }
    tp_buf b = {0};
    for (size_t i = 0; i < tp_freader_count(r); i++) {
        if (tp_freader_read(r, i, &b, &err) != 0)
            continue;
        tp_dec d;
        memset(&d, 0, sizeof d);
        if (tp_dec_open(&d, b.data, b.len, &err) == 0 && !(d.hdr.flags & TP_BF_SYNTHETIC)) {
            tp_dec_load_strings(&d, strings);
            const tp_record *x;
            while ((x = tp_dec_next_record(&d)) != NULL) {
                if (n_recs == cap_recs) {
                    cap_recs = cap_recs ? cap_recs * 2 : 1024;
                    recs = realloc(recs, cap_recs * sizeof *recs);
                }
                memcpy(&recs[n_recs++], x, tp_kind_size(x->head.kind));
            }
        }
        tp_dec_free(&d);
    }
    tp_buf_free(&b);
    tp_freader_close(&r);
    return 0;
}

/* The frame synctop names a native call site after: the innermost one, by index, whose function
 * (looked up in the module on disk, as synctop does) is not the CUDA runtime's own. */
static void resolve(site *s) {
    int best = -1;
    for (size_t i = 0; i < n_recs; i++) {
        const tp_frame *f = &recs[i].frame;
        if (recs[i].head.kind != TP_K_FRAME || f->callsite != s->id || f->flags != TP_FRAME_NATIVE ||
            (best >= 0 && f->index >= best))
            continue;
        /* the build id the module had where it ran, when the trace says */
        sy_build_id want = {0};
        const sy_build_id *w = NULL;
        for (size_t k = 0; k < n_recs && w == NULL; k++)
            if (recs[k].head.kind == TP_K_MODULE && recs[k].module.path == f->module) {
                want = (sy_build_id){recs[k].module.build_id, recs[k].module.build_id_len};
                w = &want;
            }
        sy_sym sym;
        if (sy_lookup(symbols, str(f->module), w, f->pc, &sym) != 0)
            sym = (sy_sym){.func = *str(f->func) ? str(f->func) : NULL};
        if (st_is_runtime_function(sym.func))
            continue;
        best = f->index;
        s->file = sym.file;
        s->line = sym.line;
        s->func = sym.func;
    }
}

static site sites[MAX_SITES];
static size_t n_sites;

static site *site_of(uint32_t id) {
    for (size_t i = 0; i < n_sites; i++)
        if (sites[i].id == id)
            return &sites[i];
    if (n_sites == MAX_SITES)
        return NULL;
    site *s = &sites[n_sites++];
    memset(s, 0, sizeof *s);
    s->id = id;
    resolve(s);
    return s;
}

/* Whether a call site has a Python frame at line `at` of a file named `base`. */
static int python_hits(uint32_t id, const char *base, int at) {
    for (size_t i = 0; i < n_recs; i++) {
        const tp_frame *f = &recs[i].frame;
        if (recs[i].head.kind != TP_K_FRAME || f->callsite != id || f->flags != TP_FRAME_PYTHON)
            continue;
        const char *file = str(f->file);
        const char *slash = strrchr(file, '/');
        if (strcmp(slash ? slash + 1 : file, base) == 0 && (int)f->line == at)
            return 1;
    }
    return 0;
}

static int tag_line(const char *source, const char *tag, int python) {
    FILE *f = fopen(source, "r");
    if (f == NULL)
        return -1;
    char line[4096], want[128];
    snprintf(want, sizeof want, "%s %s", python ? "#" : "//", tag);
    int n = 0, found = -1;
    while (fgets(line, sizeof line, f) != NULL) {
        n++;
        if (strstr(line, "EXPECT") == NULL && strstr(line, want) != NULL) {
            size_t after = (size_t)(strstr(line, want) - line) + strlen(want);
            if (line[after] == '\0' || line[after] == '\n' || line[after] == ' ') {
                found = n;
                break;
            }
        }
    }
    fclose(f);
    return found;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: synctop_check_trace TRACE SOURCE\n");
        return 2;
    }
    strings = tp_strtab_new();
    symbols = sy_new();
    if (load(argv[1]) != 0)
        return 2;
    const char *base = strrchr(argv[2], '/') ? strrchr(argv[2], '/') + 1 : argv[2];
    FILE *src = fopen(argv[2], "r");
    if (src == NULL) {
        fprintf(stderr, "check_trace: cannot read %s\n", argv[2]);
        return 2;
    }
    char line[4096];
    int failed = 0, expectations = 0;
    while (fgets(line, sizeof line, src) != NULL) {
        const char *e = strstr(line, "EXPECT:");
        const char *epy = strstr(line, "EXPECT-PY:");
        if (e == NULL && epy == NULL)
            continue;
        unsigned want = 0;
        char api[128] = "", tag[128];
        if (epy != NULL ? sscanf(epy, "EXPECT-PY: %u x blocking at %127s", &want, tag) != 2
                        : sscanf(e, "EXPECT: %u x %127s blocking at %127s", &want, api, tag) != 3) {
            fprintf(stderr, "check_trace: cannot read: %s", line);
            return 2;
        }
        int at = tag_line(argv[2], tag, epy != NULL);
        if (at < 0) {
            fprintf(stderr, "check_trace: no line tagged %s in %s\n", tag, argv[2]);
            return 2;
        }
        unsigned got = 0, n_other = 0;
        for (size_t i = 0; i < n_recs; i++) {
            const tp_api *a = &recs[i].api;
            if (recs[i].head.kind != TP_K_API || !(a->flags & TP_F_BLOCKING) || a->callsite == 0)
                continue;
            if (epy != NULL) {
                got += (unsigned)python_hits(a->callsite, base, at);
                continue;
            }
            const char *name = str(a->name);
            if (strncmp(name, api, strlen(api)) != 0 ||
                (name[strlen(api)] != '\0' && strncmp(name + strlen(api), "_pt", 3) != 0))
                continue;
            const site *s = site_of(a->callsite);
            if (s != NULL && s->file != NULL && (int)s->line == at && strcmp(cm_base_name(s->file), base) == 0)
                got++;
            else if (s != NULL && n_other < 4) /* what the misses were named after */
                fprintf(stderr, "  %s call site %u named %s:%u %s\n", name, s->id,
                        s->file ? cm_base_name(s->file) : "?", s->line, s->func ? s->func : "?"),
                    n_other++;
        }
        expectations++;
        int ok = got == want;
        failed += !ok;
        printf("%s %s:%d %u x %s blocking (saw %u)\n", ok ? "ok  " : "FAIL", base, at, want,
               epy != NULL ? "Python call" : api, got);
    }
    fclose(src);
    if (expectations == 0) {
        fprintf(stderr, "check_trace: no EXPECT lines in %s\n", argv[2]);
        return 2;
    }
    const char *example = NULL;
    if (sy_stale_modules(symbols, &example) > 0)
        fprintf(stderr, "check_trace: %s changed since the trace was taken (another build id)\n", example);
    return failed ? 1 : 0;
}
