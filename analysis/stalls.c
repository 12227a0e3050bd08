/*
 * The stalls a viewer lists (stalls.h): spans summed per call site, merged across the processes
 * of a large job, sorted.
 */
#include "stalls.h"
#include "hash.h"
#include "text.h"
#include "u64map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synctop/error.h"
#include "synctop/sanitize.h"

void an_site_label(const st_store *s, uint64_t callsite, uint32_t name, char *out, size_t n) {
    char raw[512] = "";
    const st_frame *f = st_site_frame(s, callsite);
    const st_frame *op = st_site_op(s, callsite);
    char ops[160] = "";
    if (op != NULL)
        snprintf(ops, sizeof ops, " [%s]", st_str(s, op->func));
    int line = f != NULL && (f->kind == TP_FRAME_PYTHON || (f->line != 0 && *st_str(s, f->file)));
    if (line)
        snprintf(raw, sizeof raw, "%s:%u %s%s in %s",
                 f->kind == TP_FRAME_PYTHON ? st_str(s, f->file) : cm_base_name(st_str(s, f->file)), f->line,
                 st_str(s, f->func), op != f ? ops : "", name ? st_str(s, name) : "?");
    else if (f != NULL && f->kind == TP_FRAME_OP)
        snprintf(raw, sizeof raw, "%s in %s", st_str(s, f->func), name ? st_str(s, name) : "?");
    else if (f != NULL)
        snprintf(raw, sizeof raw, "%s (%s)", f->func ? st_str(s, f->func) : "??", cm_base_name(st_str(s, f->module)));
    else
        snprintf(raw, sizeof raw, "%s (no call site)", name ? st_str(s, name) : "?");
    tp_sanitize(out, n, raw, strlen(raw), NULL);
}

/* A frame as a label names it: "file:line function", an operator's name, or "function (module)". */
static void frame_text(const st_store *s, const st_frame *f, char *out, size_t n) {
    char raw[512];
    if (f->kind == TP_FRAME_OP)
        snprintf(raw, sizeof raw, "%s", st_str(s, f->func));
    else if (f->kind == TP_FRAME_PYTHON || (f->line != 0 && *st_str(s, f->file)))
        snprintf(raw, sizeof raw, "%s:%u %s",
                 f->kind == TP_FRAME_PYTHON ? st_str(s, f->file) : cm_base_name(st_str(s, f->file)), f->line,
                 st_str(s, f->func));
    else
        snprintf(raw, sizeof raw, "%s (%s)", f->func ? st_str(s, f->func) : "??", cm_base_name(st_str(s, f->module)));
    tp_sanitize(out, n, raw, strlen(raw), NULL);
}

/* The frame d places outward (d > 0) or inward (d < 0) of the one callsite is named after; NULL
 * past either end. */
static const st_frame *frame_from_named(const st_store *s, uint64_t callsite, int d) {
    size_t nf = 0;
    const st_frame *f = callsite ? st_callsite_frames(s, callsite, &nf) : NULL;
    const st_frame *named = st_site_frame(s, callsite);
    if (f == NULL || named == NULL)
        return NULL;
    long at = (long)(named - f) + d;
    return at >= 0 && at < (long)nf ? &f[at] : NULL;
}

static int frame_same(const st_store *s, const st_frame *a, const st_frame *b) {
    if (a == NULL || b == NULL)
        return a == b;
    return a->kind == b->kind && a->line == b->line && strcmp(st_str(s, a->func), st_str(s, b->func)) == 0 &&
           strcmp(st_str(s, a->file), st_str(s, b->file)) == 0 &&
           (a->kind == TP_FRAME_PYTHON || strcmp(st_str(s, a->module), st_str(s, b->module)) == 0);
}

typedef struct label_ref {
    const char *text;
    size_t i;
} label_ref;

static int by_label(const void *a, const void *b) {
    const label_ref *x = a, *y = b;
    int c = strcmp(x->text, y->text);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

#define DISTINGUISH_DEPTH 64

/* One group of equal labels: the first place, outward from the named frame and then inward, where
 * their call sites' frames differ, and each label with its frame there. */
static void distinguish_group(const st_store *s, const uint64_t *callsites, char *labels, size_t len,
                              const label_ref *g, size_t n) {
    for (int step = 1; step <= 2 * DISTINGUISH_DEPTH; step++) {
        int d = step <= DISTINGUISH_DEPTH ? step : DISTINGUISH_DEPTH - step; /* 1..64, then -1..-64 */
        const st_frame *first = frame_from_named(s, callsites[g[0].i], d);
        size_t k = 1;
        while (k < n && frame_same(s, first, frame_from_named(s, callsites[g[k].i], d)))
            k++;
        if (k == n)
            continue;
        for (k = 0; k < n; k++) {
            char ft[256];
            char *l = labels + g[k].i * len;
            const st_frame *f = frame_from_named(s, callsites[g[k].i], d);
            size_t at = strlen(l);
            if (f == NULL) { /* the chain ends here: nothing called it, or it called nothing more */
                snprintf(l + at, len - at, " (%s)", d > 0 ? "top level" : "innermost");
                continue;
            }
            frame_text(s, f, ft, sizeof ft);
            snprintf(l + at, len - at, " (%s %s)", d > 0 ? "from" : "via", ft);
        }
        return;
    }
}

int an_labels_distinguish(const st_store *s, const uint64_t *callsites, char *labels, size_t len, size_t n) {
    if (n < 2)
        return 0;
    label_ref *refs = malloc(n * sizeof *refs);
    if (refs == NULL)
        return ERR_NOMEM;
    for (size_t i = 0; i < n; i++)
        refs[i] = (label_ref){.text = labels + i * len, .i = i};
    qsort(refs, n, sizeof *refs, by_label);
    /* a group is extended once found whole; the next starts past it */
    for (size_t a = 0, b; a < n; a = b) {
        for (b = a + 1; b < n && strcmp(refs[a].text, refs[b].text) == 0;)
            b++;
        if (b - a > 1)
            distinguish_group(s, callsites, labels, len, refs + a, b - a);
    }
    free(refs);
    return 0;
}

int an_stall_site_has(const an_stall_site *site, const an_block *b) {
    if (site->members != NULL) {
        for (size_t i = 0; i < site->n_members; i++) {
            const an_stall_member *m = &site->members[i];
            if (b->producer == m->producer && b->callsite == m->callsite && (m->callsite != 0 || b->name == m->name))
                return 1;
        }
        return 0;
    }
    return b->producer == site->producer && b->callsite == site->callsite &&
           (site->callsite != 0 || b->name == site->name);
}

void an_stall_sites_free(an_stall_site *sites, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(sites[i].members);
    free(sites);
}

/* ---- order ---- */

static int site_tie(const an_stall_site *x, const an_stall_site *y) {
    if (x->total_ns != y->total_ns)
        return x->total_ns > y->total_ns ? -1 : 1;
    if (x->producer != y->producer)
        return x->producer < y->producer ? -1 : 1;
    if (x->callsite != y->callsite)
        return x->callsite < y->callsite ? -1 : 1;
    return x->name < y->name ? -1 : x->name > y->name;
}

/* Largest first by the column, then as site_tie. */
#define SITE_CMP(fn, field)                                         \
    static int fn(const void *a, const void *b) {                   \
        const an_stall_site *x = a, *y = b;                         \
        if (x->field != y->field)                                   \
            return x->field > y->field ? -1 : 1;                    \
        return site_tie(x, y);                                      \
    }
SITE_CMP(site_by_total, total_ns)
SITE_CMP(site_by_max, max_ns)
SITE_CMP(site_by_count, count)
SITE_CMP(site_by_idle, gpu_idle_ns)

void an_stall_sites_sort(an_stall_site *sites, size_t n, an_stall_order order) {
    static int (*const cmp[AN_STALL_BY_N_])(const void *, const void *) = {site_by_total, site_by_max, site_by_count,
                                                                            site_by_idle};
    if (n)
        qsort(sites, n, sizeof *sites, cmp[order < AN_STALL_BY_N_ ? order : 0]);
}

/* ---- one row for the same call in many processes ---- */

/* A job of many processes: the same call (API and frames, as the panel names it) in several of
 * them becomes one row, their figures summed. */
#define AN_STALL_MERGE_ABOVE 4

/* Sums row x into row r, r's members growing by x's. */
static void merge_into(an_stall_site *r, an_stall_site *x) {
    if (r->members == NULL) {
        if ((r->members = malloc(sizeof *r->members)) == NULL)
            return;
        r->members[0] = (an_stall_member){r->producer, r->callsite, r->name};
        r->n_members = 1;
        r->n_procs = 1;
    }
    an_stall_member *m = realloc(r->members, (r->n_members + 1) * sizeof *m);
    if (m == NULL)
        return;
    r->members = m;
    int new_proc = 1;
    for (size_t k = 0; k < r->n_members; k++)
        new_proc &= m[k].producer != x->producer;
    m[r->n_members++] = (an_stall_member){x->producer, x->callsite, x->name};
    r->n_procs += (uint32_t)new_proc;
    r->count += x->count;
    r->total_ns += x->total_ns;
    r->gpu_idle_ns += x->gpu_idle_ns;
    if (x->max_ns > r->max_ns)
        r->max_ns = x->max_ns;
    x->count = 0; /* merged: left out */
}

static void merge_processes(const st_store *s, an_stall_site *sites, size_t *n_sites) {
    if (s == NULL || st_producer_count(s) <= AN_STALL_MERGE_ABOVE || *n_sites < 2)
        return;
    size_t n = *n_sites;
    char (*keys)[512] = malloc(n * sizeof *keys);
    size_t *rep = malloc(n * sizeof *rep);
    if (keys == NULL || rep == NULL) {
        free(keys);
        free(rep);
        return;
    }
    cm_u64map first = {0}; /* hash of kind and label -> the first site with it + 1 */
    for (size_t i = 0; i < n; i++) {
        an_site_label(s, sites[i].callsite, sites[i].name, keys[i], sizeof keys[i]);
        rep[i] = i;
        /* keyed (hash.h): labels come from traces, and labels chosen to share a hash would each
         * walk past all the others */
        uint64_t h = cm_hash_bytes(keys[i], strlen(keys[i])) ^ (uint64_t)sites[i].kind;
        for (;; h++) { /* a collision of two different labels moves on to the next slot */
            int added;
            uint64_t *at = cm_u64map_get_or_add(&first, h ? h : 1, i + 1, &added);
            if (at == NULL || added)
                break;
            size_t j = (size_t)*at - 1;
            if (sites[j].kind == sites[i].kind && strcmp(keys[j], keys[i]) == 0) {
                rep[i] = j;
                break;
            }
        }
    }
    cm_u64map_free(&first);
    for (size_t i = 0; i < n; i++)
        if (rep[i] != i)
            merge_into(&sites[rep[i]], &sites[i]);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (rep[i] == i)
            sites[k++] = sites[i];
    *n_sites = k;
    free(keys);
    free(rep);
}

/* ---- the tally ---- */

/* With by_step: per producer, the step at `at` ([lo, hi); hi 0 when none), and its number. */
static int step_bounds(const an_stall_scope *sc, uint64_t **lo, uint64_t **hi, size_t *np, int64_t *step_no) {
    *lo = *hi = NULL;
    *np = 0;
    *step_no = -1;
    if (!sc->by_step || sc->steps == NULL)
        return 0;
    const an_steps *st = sc->steps;
    for (size_t i = 0; i < st->n_steps; i++)
        if (st->steps[i].producer + 1 > *np)
            *np = st->steps[i].producer + 1;
    *lo = calloc(*np ? *np : 1, sizeof **lo);
    *hi = calloc(*np ? *np : 1, sizeof **hi);
    if (*lo == NULL || *hi == NULL)
        return ERR_NOMEM;
    for (size_t i = 0; i < st->n_steps; i++) {
        const an_step *x = &st->steps[i];
        if (x->start <= sc->at && sc->at < x->end && (*hi)[x->producer] == 0) {
            (*lo)[x->producer] = x->start;
            (*hi)[x->producer] = x->end;
            if (*step_no < 0)
                *step_no = x->number;
        }
    }
    return 0;
}

/* The row of b's call site among sites[0..n), NULL when it has none yet. Sites are few and the
 * blocks many: a linear probe over the last rows first. */
static an_stall_site *site_of(an_stall_site *sites, size_t n, const an_block *b) {
    for (size_t k = 0; k < n; k++) {
        an_stall_site *c = &sites[n - 1 - k];
        if (c->producer == b->producer && c->callsite == b->callsite && (b->callsite || c->name == b->name))
            return c;
        if (k > 256)
            break;
    }
    for (size_t k = 0; k < n; k++) {
        an_stall_site *c = &sites[k];
        if (c->producer == b->producer && c->callsite == b->callsite && (b->callsite || c->name == b->name))
            return c;
    }
    return NULL;
}

int an_stall_sites(const st_store *s, const an_result *an, const an_stall_scope *sc, an_stall_order order,
                   an_stall_site **out, size_t *n_out, int64_t *step_no) {
    *out = NULL;
    *n_out = 0;
    uint64_t *lo, *hi;
    size_t np;
    int rc = step_bounds(sc, &lo, &hi, &np, step_no);
    if (rc != 0 || an == NULL || an->n_blocks == 0 || (sc->by_step && *step_no < 0)) {
        free(lo);
        free(hi);
        return rc;
    }
    an_stall_site *sites = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < an->n_blocks; i++) {
        const an_block *b = &an->blocks[i];
        if (b->end > sc->now)
            continue;
        if (hi != NULL && (b->producer >= np || hi[b->producer] == 0 || b->start < lo[b->producer] ||
                           b->start >= hi[b->producer]))
            continue;
        an_stall_site *st = site_of(sites, n, b);
        if (st == NULL) {
            if (n == cap) {
                cap = cap ? cap * 2 : 32;
                an_stall_site *ns = realloc(sites, cap * sizeof *ns);
                if (ns == NULL)
                    break;
                sites = ns;
            }
            st = &sites[n++];
            *st = (an_stall_site){.producer = b->producer, .callsite = b->callsite, .name = b->name, .kind = b->kind};
        }
        uint64_t d = b->end - b->start;
        st->count++;
        st->total_ns += d;
        st->gpu_idle_ns += b->gpu_idle_ns;
        if (d > st->max_ns)
            st->max_ns = d;
    }
    free(lo);
    free(hi);
    merge_processes(s, sites, &n);
    an_stall_sites_sort(sites, n, order);
    *out = sites;
    *n_out = n;
    return 0;
}
