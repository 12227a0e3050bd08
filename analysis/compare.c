/*
 * A run against a baseline (compare.h).
 */
#include "compare.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "synctop/sanitize.h"

const char *an_delta_name(int kind) {
    static const char *const n[] = {"same", "new", "gone", "grew", "shrank"};
    return kind >= 0 && kind <= AN_DELTA_SHRANK ? n[kind] : "?";
}

void an_diff_free(an_diff *d) {
    free(d->sites);
    memset(d, 0, sizeof *d);
}

/* The key of a site: its API, and the frame it is named after without the line. */
static void site_key(const st_store *s, const an_site *st, char *out, size_t n) {
    char raw[640];
    const char *base = NULL;
    const st_frame *f = st->callsite ? st_site_frame(s, st->callsite) : NULL;
    if (f != NULL && (f->kind == TP_FRAME_PYTHON || (f->line && *st_str(s, f->file)))) {
        base = strrchr(st_str(s, f->file), '/');
        snprintf(raw, sizeof raw, "%s at %s:%s", st_str(s, st->name), base ? base + 1 : st_str(s, f->file),
                 st_str(s, f->func));
    } else if (f != NULL && f->kind == TP_FRAME_OP) {
        snprintf(raw, sizeof raw, "%s at %s", st_str(s, st->name), st_str(s, f->func));
    } else if (f != NULL) {
        base = strrchr(st_str(s, f->module), '/');
        snprintf(raw, sizeof raw, "%s at %s (%s)", st_str(s, st->name), st_str(s, f->func),
                 base ? base + 1 : st_str(s, f->module));
    } else {
        snprintf(raw, sizeof raw, "%s", st_str(s, st->name));
    }
    tp_sanitize(out, n, raw, strlen(raw), NULL);
}

static an_delta *find(an_diff *d, const char *key) {
    for (size_t i = 0; i < d->n_sites; i++)
        if (strcmp(d->sites[i].key, key) == 0)
            return &d->sites[i];
    return NULL;
}

static int delta_cmp(const void *a, const void *b) {
    const an_delta *x = a, *y = b;
    if ((x->kind == AN_DELTA_NEW) != (y->kind == AN_DELTA_NEW))
        return x->kind == AN_DELTA_NEW ? -1 : 1;
    int64_t gx = (int64_t)x->new_ns - (int64_t)x->old_ns, gy = (int64_t)y->new_ns - (int64_t)y->old_ns;
    if (gx != gy)
        return gx > gy ? -1 : 1;
    return strcmp(x->key, y->key);
}

static int add_sites(const st_store *s, const an_result *r, int is_new, an_diff *d, size_t *cap) {
    for (size_t i = 0; i < r->n_sites; i++) {
        const an_site *st = &r->sites[i];
        char key[320];
        site_key(s, st, key, sizeof key);
        an_delta *x = find(d, key);
        if (x == NULL) {
            if (CM_GROW(d->sites, *cap, d->n_sites + 1))
                return ERR_NOMEM;
            x = &d->sites[d->n_sites++];
            memset(x, 0, sizeof *x);
            snprintf(x->key, sizeof x->key, "%s", key);
        }
        if (is_new) {
            x->new_ns += st->total_ns;
            x->new_count += st->count;
            x->new_idle_ns += st->gpu_idle_ns;
        } else {
            x->old_ns += st->total_ns;
            x->old_count += st->count;
            x->old_idle_ns += st->gpu_idle_ns;
        }
    }
    return 0;
}

int an_compare(const st_store *old_s, const an_result *old_r, const st_store *new_s, const an_result *new_r,
               an_diff *out, err_msg *err) {
    memset(out, 0, sizeof *out);
    size_t cap = 0;
    if (add_sites(old_s, old_r, 0, out, &cap) || add_sites(new_s, new_r, 1, out, &cap)) {
        an_diff_free(out);
        return err_set(err, ERR_NOMEM, "out of memory comparing with the baseline");
    }
    out->old_blocked_ns = old_r->blocked_ns;
    out->new_blocked_ns = new_r->blocked_ns;
    out->old_wall_ns = old_r->t1 - old_r->t0;
    out->new_wall_ns = new_r->t1 - new_r->t0;
    out->old_stalls = old_r->n_blocks;
    out->new_stalls = new_r->n_blocks;
    for (size_t i = 0; i < out->n_sites; i++) {
        an_delta *x = &out->sites[i];
        if (x->old_count == 0)
            x->kind = AN_DELTA_NEW, out->n_new++;
        else if (x->new_count == 0)
            x->kind = AN_DELTA_GONE, out->n_gone++;
        else if (x->new_ns > x->old_ns + x->old_ns / 10)
            x->kind = AN_DELTA_GREW, out->n_grew++;
        else if (x->new_ns + x->old_ns / 10 < x->old_ns)
            x->kind = AN_DELTA_SHRANK, out->n_shrank++;
    }
    if (out->n_sites)
        qsort(out->sites, out->n_sites, sizeof *out->sites, delta_cmp);
    return 0;
}
