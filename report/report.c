/*
 * Report rendering and thresholds (report.h). Text follows `perf report` and `nsys stats`: a header
 * with the totals, then the table that answers the question (top stalls by call site), then the
 * details. JSON carries every number in integer nanoseconds so that a program can redo the sums;
 * Markdown is the text's tables for a CI job summary.
 *
 * This module owns no state; the output stream belongs to the caller.
 */
#include "report.h"
#include "advice.h"
#include "stalls.h"
#include "text.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "synctop/sanitize.h"


#define RP_TOP_DEFAULT 15
#define RP_NAME_MAX 4096
#define RP_WIDTH 80 /* the text report reads at 80 columns */

/* ------------------------------------------------------------------------------------------ */
/* Strings                                                                                    */
/* ------------------------------------------------------------------------------------------ */

int rp_format_parse(const char *s) {
    if (strcmp(s, "text") == 0)
        return RP_TEXT;
    if (strcmp(s, "json") == 0)
        return RP_JSON;
    if (strcmp(s, "markdown") == 0 || strcmp(s, "md") == 0)
        return RP_MARKDOWN;
    return -1;
}

/* A safe copy of an untrusted string. */
static const char *safe(const char *s, char *buf, size_t len) {
    tp_sanitize(buf, len, s ? s : "", s ? strlen(s) : 0, NULL);
    return buf;
}

/* The operators of a call site named after one, from its outermost one inward,
 * "forward > aten::item > aten::_local_scalar_dense". */
static void op_chain(const st_store *s, uint64_t callsite, char *buf, size_t len) {
    size_t n = 0, at = 0;
    const st_frame *f = callsite ? st_callsite_frames(s, callsite, &n) : NULL;
    buf[0] = '\0';
    for (size_t i = n; i > 0 && at + 1 < len; i--)
        if (f[i - 1].kind == TP_FRAME_OP)
            at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? " > " : "", st_str(s, f[i - 1].func));
}

char *rp_site_text(const st_store *s, uint64_t callsite, uint32_t api, char *buf, size_t len) {
    char raw[1024] = "", ops[512] = "";
    const st_frame *f = st_site_frame(s, callsite);
    const st_frame *op = st_site_op(s, callsite);
    if (f != NULL && f->kind == TP_FRAME_OP)
        op_chain(s, callsite, raw, sizeof raw);
    else if (f != NULL && f->kind == TP_FRAME_PYTHON)
        snprintf(raw, sizeof raw, "%s:%u %s", st_str(s, f->file), f->line, st_str(s, f->func));
    else if (f != NULL && f->line != 0 && *st_str(s, f->file))
        snprintf(raw, sizeof raw, "%s:%u %s", cm_base_name(st_str(s, f->file)), f->line, st_str(s, f->func));
    else if (f != NULL && f->pc == 0) /* an imported frame: a function and its module, no address */
        snprintf(raw, sizeof raw, "%s (%s)", *st_str(s, f->func) ? st_str(s, f->func) : "??",
                 cm_base_name(st_str(s, f->module)));
    else if (f != NULL)
        snprintf(raw, sizeof raw, "%s (%s+%#" PRIx64 ")", *st_str(s, f->func) ? st_str(s, f->func) : "??",
                 cm_base_name(st_str(s, f->module)), f->pc);
    else if (callsite)
        snprintf(raw, sizeof raw, "(call site %" PRIu64 ": no frames)", callsite);
    if (op != NULL && f != op) {
        snprintf(ops, sizeof ops, " [%s]", st_str(s, op->func));
        size_t used = strlen(raw);
        snprintf(raw + used, sizeof raw - used, "%s", ops);
    }
    (void)api; /* no call site taken: "" (the caller shows the API) */
    safe(raw, buf, len);
    return buf;
}

/* ------------------------------------------------------------------------------------------ */
/* JSON output                                                                                */
/* ------------------------------------------------------------------------------------------ */

/* Untrusted names as JSON strings: sanitized, then escaped. */
static void json_str(FILE *out, const char *s) { tp_print_json_string(out, s, (size_t)-1); }

/* A range's name as the report shows it: a profiler's numbered ranges as "ProfilerStep#N". */
static const char *host_range_name(const st_store *s, const an_host_range *h, char *buf, size_t len) {
    const char *t = h->name ? st_str(s, h->name) : "";
    if (!h->numbered)
        return t;
    size_t k = strlen(t);
    while (k > 0 && t[k - 1] >= '0' && t[k - 1] <= '9')
        k--;
    snprintf(buf, len, "%.*sN", (int)k, t);
    return buf;
}


static void json_frames(FILE *out, const st_store *s, uint64_t callsite) {
    size_t n = 0;
    const st_frame *f = callsite ? st_callsite_frames(s, callsite, &n) : NULL;
    fputc('[', out);
    for (size_t i = 0; i < n; i++) {
        fprintf(out, "%s{\"kind\":\"%s\",\"function\":", i ? "," : "", f[i].kind == TP_FRAME_PYTHON ? "python" : f[i].kind == TP_FRAME_OP ? "op" : "native");
        json_str(out, st_str(s, f[i].func));
        fprintf(out, ",\"file\":");
        json_str(out, st_str(s, f[i].file));
        fprintf(out, ",\"line\":%u,\"module\":", f[i].line);
        json_str(out, st_str(s, f[i].module));
        fprintf(out, ",\"pc\":%" PRIu64 "}", f[i].pc);
    }
    fputc(']', out);
}

static int32_t rank_of(const st_store *s, uint32_t producer) {
    const st_producer_info *p = producer < st_producer_count(s) ? st_producer_get(s, producer) : NULL;
    return p ? p->rank : -1;
}

/* A process the report names where it has no rank: "pid P", with its host where another process
 * of the store has the same pid ("pid P on HOST"; with no host, "pid P (process N)", its place), or
 * "process N" when its pid is not known. */
static void process_name(const st_store *s, uint32_t producer, char *buf, size_t len) {
    const st_producer_info *p = producer < st_producer_count(s) ? st_producer_get(s, producer) : NULL;
    if (p == NULL || p->pid == 0) {
        snprintf(buf, len, "process %u", producer);
        return;
    }
    int twin = 0;
    for (size_t i = 0; i < st_producer_count(s); i++)
        twin |= i != producer && st_producer_get(s, i)->pid == p->pid;
    char host[128];
    safe(st_str(s, p->host), host, sizeof host);
    if (twin && host[0] != '\0')
        snprintf(buf, len, "pid %u on %s", p->pid, host);
    else if (twin) /* no host to tell them apart: their places */
        snprintf(buf, len, "pid %u (process %u)", p->pid, producer);
    else
        snprintf(buf, len, "pid %u", p->pid);
}

/* A process as the report names it: its rank (rank >= 0), after word ("rank ", or "" in a column
 * of ranks), else process_name. */
static const char *rank_or_process(const st_store *s, uint32_t producer, int32_t rank, const char *word, char *buf,
                                   size_t len) {
    if (rank >= 0)
        snprintf(buf, len, "%s%d", word, rank);
    else
        process_name(s, producer, buf, len);
    return buf;
}

static const char *device_name(const st_store *s, uint32_t producer, uint16_t device) {
    for (size_t i = 0; i < st_device_count(s); i++) {
        const st_device_info *d = st_device_get(s, i);
        if (d->producer == producer && d->device == device)
            return st_str(s, d->name);
    }
    return "";
}

static double share(uint64_t part, uint64_t whole) {
    return whole ? (double)part / (double)whole : 0.0;
}

/* One figure of describe(), in us as HTA rounds them (two decimals); NaN as null / "-". */
static void stat_str(char *buf, size_t n, double ns) {
    if (ns != ns)
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%.2f", ns / 1e3);
}

static const char *const stat_names[] = {"count", "mean", "std", "min", "25%", "50%", "75%", "max"};

/* describe()'s eight figures as strings; "count" first. */
static void stat_strs(const hta_interval_stats *st, char v[8][32]) {
    snprintf(v[0], sizeof v[0], "%" PRIu64, st->count);
    const double x[] = {st->mean, st->std, st->min, st->q25, st->q50, st->q75, st->max};
    for (int i = 0; i < 7; i++)
        stat_str(v[i + 1], sizeof v[i + 1], x[i]);
}

static void json_hta(FILE *out, const hta_result *h) {
    fprintf(out, ",\"hta\":{\"unit\":\"us\",\"ranks\":[");
    for (size_t i = 0; i < h->n_ranks; i++) {
        const hta_rank *k = &h->ranks[i];
        fprintf(out, "%s{\"producer\":%u,\"rank\":%d,\"filtered\":%s,\"rounded\":%s,\"rounded_as_doubles\":%s", i ? "," : "",
                k->producer, k->rank, k->filtered ? "true" : "false", k->rounded ? "true" : "false",
                k->doubles ? "true" : "false");
        if (k->rounded)
            fprintf(out, ",\"negative_rows\":%" PRIu64, k->negative_rows);
        if (k->has_gpu)
            fprintf(out, ",\"idle_time\":%.3f,\"compute_time\":%.3f,\"non_compute_time\":%.3f,\"kernel_time\":%.3f",
                    k->idle_ns / 1e3, k->compute_ns / 1e3, k->non_compute_ns / 1e3, k->kernel_ns / 1e3);
        fputc('}', out);
    }
    fprintf(out, "],\"streams\":[");
    for (size_t i = 0; i < h->n_streams; i++) {
        const hta_stream *st = &h->streams[i];
        fprintf(out, "%s{\"producer\":%u,\"rank\":%d,\"stream\":%" PRId64 ",\"ops\":%" PRIu64, i ? "," : "",
                st->producer, st->rank, st->stream, st->ops);
        for (int c = 0; c < HTA_IDLE_N_; c++)
            if (st->present[c])
                fprintf(out, ",\"%s\":%.3f", hta_idle_name(c), st->idle_ns[c] / 1e3);
        fprintf(out, ",\"interval_stats\":{");
        for (int c = 0, first = 1; c < HTA_IDLE_N_; c++) {
            if (!st->present[c])
                continue;
            char v[8][32];
            stat_strs(&st->stats[c], v);
            fprintf(out, "%s\"%s\":{", first ? "" : ",", hta_idle_name(c));
            for (int k = 0; k < 8; k++)
                fprintf(out, "%s\"%s\":%s", k ? "," : "", stat_names[k], strcmp(v[k], "-") ? v[k] : "null");
            fputc('}', out);
            first = 0;
        }
        fprintf(out, "}}");
    }
    fprintf(out, "]}");
}

static void json_baseline(FILE *out, const rp_opts *o);

static void json_ranks(FILE *out, const st_store *s, const an_result *r, const an_ranks *rk) {
    fprintf(out, ",\"ranks\":{\"ranks\":[");
    for (size_t i = 0; i < rk->n_ranks; i++) {
        const an_rank *x = &rk->ranks[i];
        fprintf(out,
                "%s{\"producer\":%u,\"rank\":%d,\"span_ns\":%" PRIu64 ",\"busy_ns\":%" PRIu64 ",\"idle_ns\":%" PRIu64
                ",\"blocked_ns\":%" PRIu64 ",\"collectives\":%" PRIu64 ",\"last\":%" PRIu64 ",\"made_wait_ns\":%" PRIu64
                ",\"waited_ns\":%" PRIu64 ",\"clock_offset_ns\":%" PRId64 ",\"clock_spread_ns\":%" PRIu64
                ",\"clock_collectives\":%" PRIu64 ",\"host\":",
                i ? "," : "", x->producer, x->rank, x->span_ns, x->busy_ns, x->idle_ns, x->blocked_ns, x->collectives,
                x->last_count, x->made_wait_ns, x->waited_ns, x->clock_offset_ns, x->clock_spread_ns, x->clock_n);
        const st_producer_info *p = st_producer_get(s, x->producer);
        json_str(out, st_str(s, p->host));
        if (p->clock_aligned)
            fprintf(out, ",\"host_clock_offset_ns\":%" PRId64 ",\"host_clock_uncertainty_ns\":%" PRIu64 "}",
                    p->clock_shift_ns, p->clock_uncertainty_ns);
        else
            fprintf(out, ",\"host_clock_offset_ns\":null,\"host_clock_uncertainty_ns\":null}");
    }
    fprintf(out, "],\"collectives\":[");
    for (size_t i = 0; i < rk->n_colls; i++) {
        const an_collective *c = &rk->colls[i];
        char where[512];
        fprintf(out, "%s{\"kernel\":", i ? "," : "");
        json_str(out, st_str(s, c->name));
        fprintf(out,
                ",\"stream\":%u,\"ordinal\":%zu,\"ranks\":%zu,\"first\":%" PRIu64 ",\"last\":%" PRIu64
                ",\"skew_ns\":%" PRIu64 ",\"straggler\":%u,\"straggler_rank\":%d,\"wait_ns\":%" PRIu64
                ",\"straggler_gpu_ns\":%" PRIu64,
                c->stream, c->ordinal, c->n_ranks, c->first, c->last, c->last - c->first, c->straggler,
                rank_of(s, c->straggler), c->wait_ns, c->gpu_ns);
        if (c->block != SIZE_MAX) {
            const an_block *b = &r->blocks[c->block];
            fprintf(out, ",\"held_by\":{\"api\":");
            json_str(out, st_str(s, b->name));
            fprintf(out, ",\"blocked_ns\":%" PRIu64 ",\"where\":", c->block_ns);
            json_str(out, rp_site_text(s, b->callsite, b->name, where, sizeof where));
            fputc('}', out);
        }
        fprintf(out, ",\"straggler_host_idle_ns\":%" PRIu64 ",\"straggler_host_range\":", c->host_ns);
        json_str(out, c->host_range ? st_str(s, c->host_range) : "");
        fprintf(out, ",\"straggler_host_range_ns\":%" PRIu64 "}", c->host_range_ns);
    }
    fprintf(out, "]}");
}

static void json_steps(FILE *out, const st_store *s, const an_result *r, const an_steps *st) {
    char where[512];
    fprintf(out, ",\"steps\":{\"source\":\"%s\",\"by\":", st->source ? an_step_source_name(st->source) : "none");
    json_str(out, st->what);
    fprintf(out, ",\"median_ns\":%" PRIu64 ",\"steps\":[", st->median_ns);
    for (size_t i = 0; i < st->n_steps; i++) {
        const an_step *x = &st->steps[i];
        fprintf(out,
                "%s{\"producer\":%u,\"rank\":%d,\"number\":%" PRId64 ",\"start\":%" PRIu64 ",\"end\":%" PRIu64
                ",\"wall_ns\":%" PRIu64 ",\"gpu_busy_ns\":%" PRIu64 ",\"blocked_ns\":%" PRIu64 ",\"stalls\":%u,\"outlier\":%s",
                i ? "," : "", x->producer, rank_of(s, x->producer), x->number, x->start, x->end, x->end - x->start,
                x->gpu_busy_ns, x->blocked_ns, x->stalls, x->outlier ? "true" : "false");
        if (x->top_site != SIZE_MAX) {
            const an_site *site = &r->sites[x->top_site];
            fprintf(out, ",\"top_site\":{\"blocked_ns\":%" PRIu64 ",\"api\":", x->top_site_ns);
            json_str(out, st_str(s, site->name));
            fprintf(out, ",\"where\":");
            json_str(out, rp_site_text(s, site->callsite, site->name, where, sizeof where));
            fputc('}', out);
        }
        fprintf(out, ",\"host_idle_ns\":%" PRIu64 ",\"host_range\":", x->host_ns);
        json_str(out, x->host_range ? st_str(s, x->host_range) : "");
        fprintf(out, ",\"host_range_ns\":%" PRIu64 "}", x->host_range_ns);
    }
    fprintf(out, "],\"periodic\":[");
    for (size_t i = 0; i < st->n_periodic; i++) {
        const an_periodic *p = &st->periodic[i];
        const an_site *site = &r->sites[p->site];
        fprintf(out, "%s{\"producer\":%u,\"rank\":%d,\"period\":%u,\"first_step\":%" PRId64 ",\"hits\":%u,\"extra_ns\":%" PRIu64 ",\"api\":",
                i ? "," : "", p->producer, rank_of(s, p->producer), p->period, st->steps[p->first].number, p->hits,
                p->extra_ns);
        json_str(out, st_str(s, site->name));
        fprintf(out, ",\"where\":");
        json_str(out, rp_site_text(s, site->callsite, site->name, where, sizeof where));
        fputc('}', out);
    }
    fprintf(out, "]}");
}

/* ,"advice":{fix, gpu_ns, cause, change, why} */
static void json_advice(FILE *out, const an_advice *adv) {
    fprintf(out, ",\"advice\":{\"fix\":\"%s\",\"gpu_ns\":%" PRIu64 ",\"cause\":", an_fix_name(adv->fix), adv->gpu_ns);
    json_str(out, adv->cause);
    fprintf(out, ",\"change\":");
    json_str(out, adv->change);
    fprintf(out, ",\"why\":");
    json_str(out, adv->why);
    fputc('}', out);
}

static void write_json(FILE *out, const st_store *s, const an_result *r, const rp_opts *o) {
    uint64_t wall = r->t1 - r->t0;
    fprintf(out, "{\"source\":");
    json_str(out, o->source ? o->source : "");
    fprintf(out, ",\"sources_left_out\":%zu,\"t0\":%" PRIu64 ",\"t1\":%" PRIu64 ",\"span_ns\":%" PRIu64, o->left_out,
            r->t0, r->t1, wall);
    if (!o->hta_only) {
        fprintf(out, ",\"processes\":[");
        for (size_t i = 0; i < st_producer_count(s); i++) {
            const st_producer_info *p = st_producer_get(s, i);
            fprintf(out, "%s{\"producer\":%zu,\"pid\":%u,\"rank\":%d,\"world\":%d,\"host\":", i ? "," : "", i, p->pid,
                    p->rank, p->world);
            json_str(out, st_str(s, p->host));
            fprintf(out, ",\"cmdline\":");
            json_str(out, st_str(s, p->cmdline));
            fputc('}', out);
        }
        fputc(']', out);
        fprintf(out, ",\"host\":{\"blocked_ns\":%" PRIu64 ",\"blocked_share\":%.6f,\"blocking_calls\":%zu,\"api_calls\":%" PRIu64 "}",
                r->blocked_ns, share(r->blocked_ns, wall), r->n_blocks, r->api_calls);
        fprintf(out, ",\"devices\":[");
        for (size_t i = 0; i < r->n_devices; i++) {
            const an_device *d = &r->devices[i];
            fprintf(out, "%s{\"producer\":%u,\"rank\":%d,\"device\":%u,\"name\":", i ? "," : "", d->producer,
                    rank_of(s, d->producer), d->device);
            json_str(out, device_name(s, d->producer, d->device));
            fprintf(out,
                    ",\"span_ns\":%" PRIu64 ",\"busy_ns\":%" PRIu64 ",\"idle_ns\":%" PRIu64
                    ",\"utilization\":%.6f,\"blocked_ns\":%" PRIu64 ",\"first\":%" PRIu64 ",\"last\":%" PRIu64 ",\"kernels\":%" PRIu64 ",\"copies\":%" PRIu64
                    ",\"memsets\":%" PRIu64 ",\"syncs\":%" PRIu64 ",\"idle_by_cause\":{",
                    d->span_ns, d->busy_ns, d->idle_ns, share(d->busy_ns, d->span_ns), d->blocked_ns, d->first, d->last,
                    d->kernels, d->copies, d->memsets, d->syncs);
            for (int c = 0; c < AN_CAUSE_N_; c++)
                fprintf(out, "%s\"%s\":%" PRIu64, c ? "," : "", an_cause_name(c), d->idle_by_cause[c]);
            fprintf(out, "}}");
        }
        fprintf(out, "],\"sites\":[");
        for (size_t i = 0; i < r->n_sites; i++) {
            const an_site *st = &r->sites[i];
            char where[512];
            fprintf(out, "%s{\"producer\":%u,\"rank\":%d,\"callsite\":%" PRIu64 ",\"api\":", i ? "," : "", st->producer,
                    rank_of(s, st->producer), st->callsite);
            json_str(out, st_str(s, st->name));
            fprintf(out,
                    ",\"kind\":\"%s\",\"count\":%" PRIu64 ",\"total_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64
                    ",\"gpu_idle_ns\":%" PRIu64 ",\"wall_share\":%.6f,\"where\":",
                    an_block_kind_name(st->kind), st->count, st->total_ns, st->max_ns, st->gpu_idle_ns, st->wall_share);
            json_str(out, rp_site_text(s, st->callsite, st->name, where, sizeof where));
            fprintf(out, ",\"frames\":");
            json_frames(out, s, st->callsite);
            an_advice adv;
            an_advise(s, st, &adv);
            json_advice(out, &adv);
            fputc('}', out);
        }
        fprintf(out, "],\"host_ranges\":[");
        for (size_t i = 0; i < r->n_host_ranges; i++) {
            const an_host_range *h = &r->host_ranges[i];
            char rname[256];
            const char *name = host_range_name(s, h, rname, sizeof rname);
            an_advice adv;
            an_advise_host(s, h, name, &adv);
            fprintf(out, "%s{\"producer\":%u,\"rank\":%d,\"range\":", i ? "," : "", h->producer, rank_of(s, h->producer));
            json_str(out, name);
            fprintf(out, ",\"idle_ns\":%" PRIu64 ",\"cuda_calls_ns\":%" PRIu64 ",\"longest_call\":", h->idle_ns,
                    h->api_ns);
            json_str(out, h->api_name ? st_str(s, h->api_name) : "");
            fprintf(out, ",\"longest_call_ns\":%" PRIu64, h->api_max_ns);
            json_advice(out, &adv);
            fputc('}', out);
        }
        fprintf(out, "],\"findings\":[");
        for (size_t i = 0; i < r->n_findings; i++) {
            const an_finding *f = &r->findings[i];
            char where[512];
            fprintf(out, "%s{\"rule\":\"%s\",\"nsys_rule\":\"%s\",\"title\":\"%s\",\"producer\":%u,\"rank\":%d",
                    i ? "," : "", an_rule_name(f->rule), an_rule_nsys(f->rule), an_rule_title(f->rule), f->producer,
                    rank_of(s, f->producer));
            if (f->device != TP_NO_DEVICE)
                fprintf(out, ",\"device\":%u", f->device);
            fprintf(out, ",\"count\":%" PRIu64 ",\"total_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64 ",\"start\":%" PRIu64
                         ",\"end\":%" PRIu64 ",\"api\":",
                    f->count, f->total_ns, f->max_ns, f->start, f->end);
            json_str(out, st_str(s, f->name));
            fprintf(out, ",\"callsite\":%" PRIu64 ",\"where\":", f->callsite);
            json_str(out, f->callsite || f->name ? rp_site_text(s, f->callsite, f->name, where, sizeof where) : "");
            fputc('}', out);
        }
        fputc(']', out);
    }
    if (o->steps)
        json_steps(out, s, r, o->steps);
    if (o->diff)
        json_baseline(out, o);
    if (o->ranks)
        json_ranks(out, s, r, o->ranks);
    if (o->hta)
        json_hta(out, o->hta);
    fprintf(out, "}\n");
}

/* ------------------------------------------------------------------------------------------ */
/* Text and Markdown                                                                          */
/* ------------------------------------------------------------------------------------------ */

static double ms(uint64_t ns) {
    return (double)ns / 1e6;
}

/* Text (sanitized: no newlines) for Markdown, table cells included: every character Markdown or
 * HTML could read as markup ('|', a code span's backtick, emphasis, a link, a tag, an entity) is
 * escaped with a backslash, so a name from a trace (untrusted; aten::foo<T>) shows as written. */
static const char *md_cell(const char *s, char *buf, size_t len) {
    size_t j = 0;
    for (size_t i = 0; s[i] && j + 2 < len; i++) {
        /* an underscore between two letters or digits never marks emphasis: file_name.py stays so */
        int inner = s[i] == '_' && i > 0 && isalnum((unsigned char)s[i - 1]) && isalnum((unsigned char)s[i + 1]);
        if (strchr("\\`*_[]<>|~&", s[i]) != NULL && !inner)
            buf[j++] = '\\';
        buf[j++] = s[i];
    }
    buf[j] = '\0';
    return buf;
}

static void wrap(FILE *out, int first, int rest, const char *text);

/* A paragraph: in Markdown escaped (md_cell) and not indented, else wrapped at first / rest. */
static void md_wrap(FILE *out, int md, int first, int rest, const char *line) {
    if (!md) {
        wrap(out, first, rest, line);
        return;
    }
    size_t len = 2 * strlen(line) + 1;
    char *buf = malloc(len);
    wrap(out, 0, 0, buf ? md_cell(line, buf, len) : line);
    free(buf);
}

static void device_label(const st_store *s, const an_result *r, uint32_t producer, uint16_t device, char *buf,
                         size_t len) {
    int32_t rank = rank_of(s, producer);
    int multi = st_producer_count(s) > 1;
    char name[128];
    safe(device_name(s, producer, device), name, sizeof name);
    if (device == TP_NO_DEVICE)
        snprintf(buf, len, "%s%s?", multi ? "" : "", "GPU ");
    else if (multi) {
        char proc[200];
        snprintf(buf, len, "%s GPU %u%s%s", rank_or_process(s, producer, rank, "rank ", proc, sizeof proc), device,
                 *name ? " " : "", name);
    } else
        snprintf(buf, len, "GPU %u%s%s", device, *name ? " " : "", name);
    (void)r;
}

/* What HTA's temporal breakdown of a rank leaves out or rounds, and a negative non_compute_time. */
static void hta_rank_notes(FILE *out, const hta_rank *k, int md) {
    if (k->filtered || k->rounded) {
        char note[256];
        snprintf(note, sizeof note, "%s%s%s%s", k->filtered ? "ProfilerStep filtering: the last step is left out, as HTA does." : "",
                 k->filtered && k->rounded ? " " : "",
                 k->rounded ? "Float timestamps rounded to whole us, as HTA does" : "",
                 !k->rounded ? "" : k->doubles ? " (on its float64 reading of the absolute times, 0.25 us apart)." : ".");
        if (md)
            fprintf(out, "\nRank %d: %s\n", k->rank, note);
        else
            wrap(out, 8, 8, note);
    }
    if (k->non_compute_ns < 0) {
        char why[512];
        snprintf(why, sizeof why,
                 "non_compute_time is negative: HTA's rounding (ts up, ts + dur down) left %" PRIu64 " GPU row%s "
                 "shorter than 1 us ending before %s start, and such a row overlapping no other counts negative "
                 "in the busy time, so idle and compute add up to more than kernel_time. HTA 0.5.0's code "
                 "computes the same figures, then stops on its assertion non_compute_time >= 0.",
                 k->negative_rows, k->negative_rows == 1 ? "" : "s", k->negative_rows == 1 ? "its" : "their");
        if (md)
            fprintf(out, "\nRank %d: %s\n", k->rank, why);
        else
            wrap(out, 8, 8, why);
    }
}

static void write_hta_text(FILE *out, const hta_result *h, int md) {
    if (md)
        fprintf(out, "\n## HTA idle time breakdown (us)\n\n| rank | stream | ops | host_wait | kernel_wait | other |\n|---:|---:|---:|---:|---:|---:|\n");
    else
        fprintf(out, "\nHTA idle time breakdown (us; Holistic Trace Analysis' definitions, 30 us\nkernel wait)\n"
                     "  %5s %10s %7s %14s %14s %14s\n", "rank", "stream", "ops", "host_wait", "kernel_wait", "other");
    for (size_t i = 0; i < h->n_streams; i++) {
        const hta_stream *st = &h->streams[i];
        char v[HTA_IDLE_N_][32];
        for (int c = 0; c < HTA_IDLE_N_; c++) {
            if (st->present[c])
                snprintf(v[c], sizeof v[c], "%.3f", st->idle_ns[c] / 1e3);
            else
                snprintf(v[c], sizeof v[c], "-");
        }
        if (md)
            fprintf(out, "| %d | %" PRId64 " | %" PRIu64 " | %s | %s | %s |\n", st->rank, st->stream, st->ops, v[0], v[1], v[2]);
        else
            fprintf(out, "  %5d %10" PRId64 " %7" PRIu64 " %14s %14s %14s\n", st->rank, st->stream, st->ops, v[0], v[1], v[2]);
    }
    if (md)
        fprintf(out, "\n## HTA idle interval statistics (us)\n\n| rank | stream | category | count | mean | std | min | 25%% | "
                     "50%% | 75%% | max |\n|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    else
        fprintf(out, "\nHTA idle interval statistics (us; pandas' describe of the intervals, std\nwith ddof 1)\n"
                     "  %4s %10s %-11s %6s %11s %11s %11s\n  %29s %11s %11s %11s %11s\n",
                "rank", "stream", "category", "count", "mean", "std", "min", "", "25%", "50%", "75%", "max");
    for (size_t i = 0; i < h->n_streams; i++) {
        const hta_stream *st = &h->streams[i];
        for (int c = 0; c < HTA_IDLE_N_; c++) {
            if (!st->present[c])
                continue;
            char v[8][32];
            stat_strs(&st->stats[c], v);
            if (md)
                fprintf(out, "| %d | %" PRId64 " | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", st->rank, st->stream,
                        hta_idle_name(c), v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
            else
                fprintf(out, "  %4d %10" PRId64 " %-11s %6s %11s %11s %11s\n  %29s %11s %11s %11s %11s\n", st->rank,
                        st->stream, hta_idle_name(c), v[0], v[1], v[2], v[3], "", v[4], v[5], v[6], v[7]);
        }
    }
    if (md)
        fprintf(out, "\n## HTA temporal breakdown (us)\n\n| rank | idle_time | compute_time | non_compute_time | kernel_time | idle %% | compute %% | non-compute %% |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    else
        fprintf(out, "\nHTA temporal breakdown (us, and %% of kernel_time)\n  %5s %14s %14s %16s %14s\n", "rank",
                "idle_time", "compute_time", "non_compute_time", "kernel_time");
    for (size_t i = 0; i < h->n_ranks; i++) {
        const hta_rank *k = &h->ranks[i];
        if (!k->has_gpu) {
            fprintf(out, md ? "| %d | - | - | - | - | - | - | - |\n" : "  %5d  (no GPU operation)\n", k->rank);
            continue;
        }
        double kt = k->kernel_ns ? (double)k->kernel_ns : 1.0;
        double pi = 100.0 * (double)k->idle_ns / kt, pc = 100.0 * (double)k->compute_ns / kt,
               pn = 100.0 * (double)k->non_compute_ns / kt;
        if (md)
            fprintf(out, "| %d | %.3f | %.3f | %.3f | %.3f | %.2f | %.2f | %.2f |\n", k->rank, k->idle_ns / 1e3,
                    k->compute_ns / 1e3, k->non_compute_ns / 1e3, k->kernel_ns / 1e3, pi, pc, pn);
        else
            fprintf(out, "  %5d %14.3f %14.3f %16.3f %14.3f\n  %5s %13.2f%% %13.2f%% %15.2f%% %13.2f%%\n", k->rank,
                    k->idle_ns / 1e3, k->compute_ns / 1e3, k->non_compute_ns / 1e3, k->kernel_ns / 1e3, "", pi, pc, pn,
                    100.0);
        if (!md)
            hta_rank_notes(out, k, md);
    }
    for (size_t i = 0; md && i < h->n_ranks; i++) /* in Markdown, under the table */
        if (h->ranks[i].has_gpu)
            hta_rank_notes(out, &h->ranks[i], md);
}

/* A space that wrap() prints but does not break at: a call site stays on one line. */
#define RP_NBSP '\x01'

static char *unbreakable(char *text) {
    for (char *p = text; *p; p++)
        if (*p == ' ')
            *p = RP_NBSP;
    return text;
}

/* Prose for a terminal: words wrapped at RP_WIDTH with a hanging indent; a word longer than the
 * line (a path, a C++ name, a call site) is kept whole rather than cut. */
static void wrap(FILE *out, int first, int rest, const char *text) {
    int col = 0, indent = first;
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        size_t w = strcspn(p, " ");
        if (w == 0)
            break;
        if (col > indent && col + 1 + (int)w > RP_WIDTH) {
            fputc('\n', out);
            col = 0;
            indent = rest;
        }
        if (col == 0)
            col = fprintf(out, "%*s", indent, "");
        else
            col += fprintf(out, " ");
        for (size_t i = 0; i < w; i++)
            fputc(p[i] == RP_NBSP ? ' ' : p[i], out);
        col += (int)w;
        p += w;
    }
    fputc('\n', out);
}

/* Appends to a bounded buffer. */
static void cat(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void cat(char *buf, size_t len, const char *fmt, ...) {
    size_t n = strlen(buf);
    if (n + 1 >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, len - n, fmt, ap);
    va_end(ap);
}

/* A frame in at most width columns: Python frames keep the end of the path (the file, the line and
 * the function), native frames the start of the function and the module; "..." marks the cut. */
static void frame_text(const st_store *s, const st_frame *f, int width, char *buf, size_t len) {
    char fn[512], file[512], mod[256], tail[600];
    safe(st_str(s, f->func), fn, sizeof fn);
    safe(st_str(s, f->file), file, sizeof file);
    safe(cm_base_name(st_str(s, f->module)), mod, sizeof mod);
    if (f->kind == TP_FRAME_PYTHON && (f->line == 0 || *file == '\0')) { /* "<built-in ...>", "nn.Module: ..." */
        snprintf(buf, len, "%.*s", width > 0 ? width : 0, fn);
        return;
    }
    if (f->kind == TP_FRAME_PYTHON) {
        snprintf(tail, sizeof tail, ":%u %s", f->line, fn);
        int room = width - (int)strlen(tail);
        int fl = (int)strlen(file);
        if (fl > room && room > 8)
            snprintf(buf, len, "...%s%s", file + fl - (room - 3), tail);
        else
            snprintf(buf, len, "%s%s", file, tail);
        return;
    }
    if (f->kind == TP_FRAME_OP)
        tail[0] = '\0';
    else if (f->line != 0 && *file)
        snprintf(tail, sizeof tail, " (%s:%u)", cm_base_name(file), f->line);
    else if (f->pc == 0)
        snprintf(tail, sizeof tail, " (%s)", mod);
    else
        snprintf(tail, sizeof tail, " (%s+%#" PRIx64 ")", mod, f->pc);
    const char *name = *fn ? fn : "??";
    int room = width - (int)strlen(tail);
    if ((int)strlen(name) > room && room > 12)
        snprintf(buf, len, "%.*s...%s", room - 3, name, tail);
    else
        snprintf(buf, len, "%s%s", name, tail);
}

/* A call site in at most width columns, as rp_site_text picks its frame, shortened as frame_text
 * does (as_frame: written as frame_text writes it), with the operator that made the call. "" when
 * no call site was taken. */
static void site_line(const st_store *s, uint64_t callsite, int width, int as_frame, char *buf, size_t len) {
    const st_frame *pick = st_site_frame(s, callsite);
    const st_frame *op = st_site_op(s, callsite);
    rp_site_text(s, callsite, 0, buf, len);
    if (pick == NULL || ((int)strlen(buf) <= width && !(as_frame && pick->kind != TP_FRAME_OP)))
        return;
    if (pick->kind == TP_FRAME_OP) { /* the chain, cut at its inner end */
        if (width > 3 && (size_t)width < len)
            snprintf(buf + width - 3, len - (size_t)(width - 3), "...");
        return;
    }
    char ops[160] = "", clean[160];
    if (op != NULL && op != pick)
        snprintf(ops, sizeof ops, " [%s]", safe(st_str(s, op->func), clean, sizeof clean));
    int room = width - (int)strlen(ops);
    frame_text(s, pick, room > 24 ? room : width, buf, len);
    if (room > 24) {
        size_t used = strlen(buf);
        snprintf(buf + used, len - used, "%s", ops);
    }
}

/* site_line, made unbreakable for wrap(). */
static char *site_fit(const st_store *s, uint64_t callsite, int width, char *buf, size_t len) {
    site_line(s, callsite, width, 0, buf, len);
    return unbreakable(buf);
}

/* " [rank N]" (or " [pid P]": rank_or_process) when the report covers several producers, else "". */
static const char *who(const st_store *s, uint32_t producer, char *buf, size_t len) {
    char proc[200];
    if (st_producer_count(s) < 2)
        buf[0] = '\0';
    else
        snprintf(buf, len, " [%s]", rank_or_process(s, producer, rank_of(s, producer), "rank ", proc, sizeof proc));
    return buf;
}

/* Host threads that blocked: a blocked total above the wall time is summed over them. */
static size_t blocking_threads(const an_result *r) {
    size_t n = 0;
    for (size_t i = 0; i < r->n_blocks; i++) {
        size_t k = 0;
        while (k < i && r->blocks[k].lane != r->blocks[i].lane)
            k++;
        n += k == i;
        if (n > 64)
            break;
    }
    return n;
}

static int low_util_by_time(const void *a, const void *b) {
    const an_finding *x = *(const an_finding *const *)a, *y = *(const an_finding *const *)b;
    if (x->producer != y->producer)
        return x->producer < y->producer ? -1 : 1;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

static void sort_ptrs(const an_finding **p, size_t n) {
    if (n > 1)
        qsort(p, n, sizeof *p, low_util_by_time);
}

/* Low-utilisation windows: per GPU, in time order, with the worst (most idle) named apart. */
static void write_low_util(FILE *out, const st_store *s, const an_result *r, const an_finding *const *w, size_t n,
                           int md) {
    char line[1024], label[400], where[512], cell[2100];
    for (size_t i = 0; i < n;) {
        size_t j = i;
        uint64_t idle = 0;
        const an_finding *worst = w[i];
        while (j < n && w[j]->producer == w[i]->producer && w[j]->device == w[i]->device) {
            idle += w[j]->total_ns;
            if (w[j]->total_ns > worst->total_ns)
                worst = w[j];
            j++;
        }
        device_label(s, r, w[i]->producer, w[i]->device, label, sizeof label);
        snprintf(line, sizeof line, "%s: %zu window%s, %.3f ms idle in them", label, j - i, j - i == 1 ? "" : "s",
                 ms(idle));
        if (md)
            fprintf(out, "- %s\n", md_cell(line, cell, sizeof cell));
        else
            wrap(out, 4, 6, line);
        for (size_t k = i; k < j; k++) {
            const an_finding *f = w[k];
            snprintf(line, sizeof line, "+%.3f..+%.3f ms: %.1f%% busy", ms(f->start - r->t0), ms(f->end - r->t0),
                     100.0 * share(f->max_ns, f->end - f->start));
            if (f->callsite || f->name) {
                if (md)
                    rp_site_text(s, f->callsite, f->name, where, sizeof where);
                else
                    site_fit(s, f->callsite, RP_WIDTH - 10, where, sizeof where);
                if (!*where)
                    safe(st_str(s, f->name), where, sizeof where);
                cat(line, sizeof line, ", mostly after %s", where);
            }
            if (md)
                fprintf(out, "  - %s\n", md_cell(line, cell, sizeof cell));
            else
                wrap(out, 6, 8, line);
        }
        if (j - i > 1) {
            snprintf(line, sizeof line, "worst: +%.3f..+%.3f ms, %.3f ms idle", ms(worst->start - r->t0),
                     ms(worst->end - r->t0), ms(worst->total_ns));
            if (md)
                fprintf(out, "  - %s\n", line);
            else
                wrap(out, 6, 8, line);
        }
        i = j;
    }
}

/* The text or Markdown report's sections. */

static void text_totals(FILE *out, const st_store *s, const an_result *r, int md) {
    uint64_t wall = r->t1 - r->t0;
    char line[2048];
    uint64_t kernels = 0, copies = 0, memsets = 0, syncs = 0;
    for (size_t i = 0; i < r->n_devices; i++) {
        kernels += r->devices[i].kernels;
        copies += r->devices[i].copies;
        memsets += r->devices[i].memsets;
        syncs += r->devices[i].syncs;
    }
    fprintf(out, "span %.3f ms, %zu process%s, %zu GPU%s%s\n", ms(wall), st_producer_count(s),
            st_producer_count(s) == 1 ? "" : "es", r->n_devices, r->n_devices == 1 ? "" : "s", md ? "  " : "");
    snprintf(line, sizeof line,
             "kernels %" PRIu64 ", copies %" PRIu64 ", memsets %" PRIu64 ", GPU syncs %" PRIu64 ", CUDA calls %" PRIu64,
             kernels, copies, memsets, syncs, r->api_calls);
    if (md)
        fprintf(out, "%s\n", line);
    else
        wrap(out, 0, 2, line);
    size_t threads = blocking_threads(r);
    snprintf(line, sizeof line, "host blocked %.3f ms in %zu call%s (%.1f%% of wall time%s)", ms(r->blocked_ns),
             r->n_blocks, r->n_blocks == 1 ? "" : "s", 100.0 * share(r->blocked_ns, wall),
             threads > 1 ? ", summed over the threads that waited" : "");
    if (md)
        fprintf(out, "\n**%s**\n", line);
    else
        wrap(out, 0, 2, line);
}

/* What the tracer itself noted in the trace (NVTX instants of its own, named "synctop: ..."):
 * another CUPTI client that held the activity buffers, for one. At most a few, in time order. */
static void text_notices(FILE *out, const st_store *s, const an_result *r, int md) {
    unsigned shown = 0;
    for (size_t li = 0; li < st_lane_count(s) && shown < 8; li++) {
        if (st_lane_get(s, li)->kind != ST_LANE_NVTX)
            continue;
        size_t n = 0;
        const st_event *ev = st_lane_events(s, li, &n);
        for (size_t i = 0; i < n && shown < 8; i++) {
            const char *name = st_str(s, st_ev_name(s, &ev[i]));
            if (st_ev_sub(s, &ev[i]) != TP_NVTX_INSTANT || name == NULL || strncmp(name, "synctop: ", 9) != 0)
                continue;
            char text[600], line[700];
            safe(name + 9, text, sizeof text);
            snprintf(line, sizeof line, "note at +%.3f ms: %s",
                     ms(ev[i].start > r->t0 ? ev[i].start - r->t0 : 0), text);
            if (md) {
                char cell[1500];
                fprintf(out, "\n> %s\n", md_cell(line, cell, sizeof cell));
            } else {
                wrap(out, 0, 2, line);
            }
            shown++;
        }
    }
}

/* Top stalls by call site: the numbers and the API on one line, where it was called below. */
#define RP_WHERE 512

/* The one-line texts of r's sites (rp_site_text), in their order, told apart where two read the
 * same (an_labels_distinguish); NULL without memory, and then each is made as it is used. */
static char *sites_where(const st_store *s, const an_result *r) {
    if (r->n_sites == 0)
        return NULL;
    char *texts = malloc(r->n_sites * RP_WHERE);
    uint64_t *cs = malloc(r->n_sites * sizeof *cs);
    if (texts != NULL && cs != NULL) {
        for (size_t i = 0; i < r->n_sites; i++) {
            rp_site_text(s, r->sites[i].callsite, r->sites[i].name, texts + i * RP_WHERE, RP_WHERE);
            cs[i] = r->sites[i].callsite;
        }
        an_labels_distinguish(s, cs, texts, RP_WHERE, r->n_sites);
    } else {
        free(texts);
        texts = NULL;
    }
    free(cs);
    return texts;
}

/* For the text report: a word of text longer than max columns (a long path in a frame that tells
 * two sites apart) keeps its end, after "...". */
static char *fit_words(char *text, size_t max) {
    for (char *w = text; *w;) {
        size_t n = strcspn(w, " ");
        if (n > max) {
            memmove(w + 3, w + n - (max - 3), strlen(w + n - (max - 3)) + 1);
            memcpy(w, "...", 3);
            n = max;
        }
        w += n;
        w += strspn(w, " ");
    }
    return text;
}

static const char *site_where(const char *texts, const st_store *s, const an_result *r, const an_site *st, char *buf,
                              size_t len) {
    if (texts == NULL)
        return rp_site_text(s, st->callsite, st->name, buf, len);
    snprintf(buf, len, "%s", texts + (size_t)(st - r->sites) * RP_WHERE);
    return buf;
}

/* Why calls have no call site, and how to get one, by the kinds of input they came from. */
static void untaken_note(FILE *out, unsigned sources) {
    char msg[1024];
    int n = snprintf(msg, sizeof msg, "(no \"at\" line: no call site was taken for those calls, grouped by API");
    if (sources & RP_SRC_NSYS)
        n += snprintf(msg + n, sizeof msg - (size_t)n,
                      "; the Nsight Systems export holds no backtrace of them: record with `nsys profile "
                      "--cudabacktrace=all --python-backtrace=cuda ...`");
    if (sources & RP_SRC_KINETO)
        n += snprintf(msg + n, sizeof msg - (size_t)n,
                      "; in a profiler trace, they ran outside any operator or Python frame it recorded "
                      "(with_stack=True records the Python lines)");
    if (sources & RP_SRC_TRACER || sources == 0)
        n += snprintf(msg + n, sizeof msg - (size_t)n, "; the tracer could not walk the caller's stack");
    snprintf(msg + n, sizeof msg - (size_t)n, ")");
    wrap(out, 2, 3, msg);
}

static void text_sites(FILE *out, const st_store *s, const an_result *r, const rp_opts *o, const char *wheres,
                       int md) {
    char where[512], cell[4200], label[820], api[256], line[2048], rk[224];
    size_t top = o->top ? o->top : RP_TOP_DEFAULT;
    int any_untaken = 0, multi = st_producer_count(s) > 1;
    if (md)
        fprintf(out, "\n## Top stalls by call site\n\n|%s blocked ms | calls | max ms | %% wall | GPU idle ms | kind | API | call site |\n|%s---:|---:|---:|---:|---:|---|---|---|\n",
                multi ? " rank or process |" : "", multi ? "---|" : "");
    else if (r->n_sites)
        fprintf(out, "\nTop stalls by call site\n  %10s %6s %10s %6s %12s  %s\n", "blocked ms", "calls", "max ms", "%wall",
                "GPU idle ms", "API (kind)");
    for (size_t i = 0; i < r->n_sites && i < top; i++) {
        const an_site *st = &r->sites[i];
        site_where(wheres, s, r, st, where, sizeof where);
        safe(st_str(s, st->name), api, sizeof api);
        any_untaken |= st->callsite == 0;
        if (md) {
            if (multi) {
                char pn[200];
                rank_or_process(s, st->producer, rank_of(s, st->producer), "", pn, sizeof pn);
                fprintf(out, "| %s ", md_cell(pn, label, sizeof label));
            }
            fprintf(out, "| %.3f | %" PRIu64 " | %.3f | %.1f | %.3f | %s | %s | %s |\n", ms(st->total_ns), st->count,
                    ms(st->max_ns), 100.0 * st->wall_share, ms(st->gpu_idle_ns), an_block_kind_name(st->kind),
                    md_cell(api, label, sizeof label), *where ? md_cell(where, cell, sizeof cell) : "-");
            continue;
        }
        /* The API, then its kind (and rank) on the line when they fit, under it when not. */
        int col = fprintf(out, "  %10.3f %6" PRIu64 " %10.3f %6.1f %12.3f  ", ms(st->total_ns), st->count,
                          ms(st->max_ns), 100.0 * st->wall_share, ms(st->gpu_idle_ns));
        snprintf(label, sizeof label, "(%s)%s", an_block_kind_name(st->kind), who(s, st->producer, rk, sizeof rk));
        if (col + (int)strlen(api) + 1 + (int)strlen(label) <= RP_WIDTH)
            fprintf(out, "%s %s\n", api, label);
        else
            fprintf(out, "%s\n%*s%s\n", api, col, "", label);
        /* Where: the call chain, innermost first, as perf report shows it (at most 6 frames),
         * from the frame the site is named after (the CUDA runtime's own frames are left out). */
        size_t nf = 0;
        const st_frame *f = st->callsite ? st_callsite_frames(s, st->callsite, &nf) : NULL;
        const st_frame *named = st_site_frame(s, st->callsite);
        size_t at = named != NULL ? (size_t)(named - f) : 0, from = at;
        if (from > 0 && f[from - 1].kind == TP_FRAME_PYTHON && named->kind == TP_FRAME_PYTHON)
            from--; /* the library function the program's line called, above it */
        if (st->callsite && nf == 0)
            fprintf(out, "      at %s\n", where);
        if (named != NULL && named->kind == TP_FRAME_OP) /* only operators: their chain says it all */
            nf = at + 1;
        for (size_t k = from; k < nf && k < from + 6; k++) {
            if (k == at) /* with the operator that made the call */
                site_line(s, st->callsite, RP_WIDTH - 9, 1, line, sizeof line);
            else
                frame_text(s, &f[k], RP_WIDTH - 9, line, sizeof line);
            fprintf(out, "      %s %s\n", k == at ? "at" : "  ", line);
        }
        if (nf > from + 6)
            fprintf(out, "         (%zu more frames)\n", nf - from - 6);
    }
    if (r->n_sites > top)
        fprintf(out, md ? "\n(%zu more call sites)\n" : "  (%zu more call sites)\n", r->n_sites - top);
    if (any_untaken && !md)
        untaken_note(out, o->sources);
}

/* When the devices' processes were traced over different times (several sources), what their idle
 * and utilisation are counted over. */
static void own_spans_note(FILE *out, const an_result *r, int md) {
    uint64_t wall = r->t1 - r->t0, lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < r->n_devices; i++) {
        lo = r->devices[i].span_ns < lo ? r->devices[i].span_ns : lo;
        hi = r->devices[i].span_ns > hi ? r->devices[i].span_ns : hi;
    }
    if (r->n_devices == 0 || (lo == wall && hi == wall))
        return;
    char text[400], each[80];
    if (lo == hi)
        snprintf(each, sizeof each, "%.3f ms long", ms(lo));
    else
        snprintf(each, sizeof each, "between %.3f and %.3f ms long", ms(lo), ms(hi));
    snprintf(text, sizeof text,
             "Each GPU's busy and idle time is counted over the time its own process was traced (%s), not the "
             "%.3f ms all the sources span together: before a process's trace began and after it ended, its GPUs "
             "were not seen.",
             each, ms(wall));
    if (md)
        fprintf(out, "\n%s\n", text);
    else
        wrap(out, 2, 2, text);
}

/* GPU utilisation: a label too wide for its column gets a line of its own. */
static void text_devices(FILE *out, const st_store *s, const an_result *r, int md) {
    char cell[1000], label[400];
    if (md)
        fprintf(out, "\n## GPU utilisation\n\n| GPU | busy ms | idle ms | util %% | idle: blocked | launch | host | unattributed | host blocked ms | kernels | copies |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    else if (r->n_devices)
        fprintf(out, "\nGPU utilisation\n  %-29s %11s %11s %6s %16s\n", "GPU", "busy ms", "idle ms", "util%",
                "host blocked ms");
    for (size_t i = 0; i < r->n_devices; i++) {
        const an_device *d = &r->devices[i];
        device_label(s, r, d->producer, d->device, label, sizeof label);
        if (md) {
            fprintf(out, "| %s | %.3f | %.3f | %.1f | %.3f | %.3f | %.3f | %.3f | %.3f | %" PRIu64 " | %" PRIu64 " |\n",
                    md_cell(label, cell, sizeof cell), ms(d->busy_ns), ms(d->idle_ns), 100.0 * share(d->busy_ns, d->span_ns),
                    ms(d->idle_by_cause[AN_CAUSE_BLOCK]), ms(d->idle_by_cause[AN_CAUSE_LAUNCH]),
                    ms(d->idle_by_cause[AN_CAUSE_HOST]), ms(d->idle_by_cause[0]), ms(d->blocked_ns), d->kernels, d->copies);
            continue;
        }
        if (strlen(label) > 29)
            fprintf(out, "  %s\n  %-29s", label, "");
        else
            fprintf(out, "  %-29s", label);
        fprintf(out, " %11.3f %11.3f %6.1f %16.3f\n", ms(d->busy_ns), ms(d->idle_ns), 100.0 * share(d->busy_ns, d->span_ns),
                ms(d->blocked_ns));
    }
    own_spans_note(out, r, md);
}

/* GPU idle time by cause (in the text report; Markdown has it in the utilisation table). */
static void text_idle_causes(FILE *out, const st_store *s, const an_result *r) {
    char label[400];
    if (r->n_devices == 0)
        return;
    fprintf(out, "\nGPU idle time by cause (ms)\n  %-29s %11s %11s %11s %12s\n", "GPU", "blocked", "launch", "host",
            "unattributed");
    for (size_t i = 0; i < r->n_devices; i++) {
        const an_device *d = &r->devices[i];
        device_label(s, r, d->producer, d->device, label, sizeof label);
        if (strlen(label) > 29)
            fprintf(out, "  %s\n  %-29s", label, "");
        else
            fprintf(out, "  %-29s", label);
        fprintf(out, " %11.3f %11.3f %11.3f %12.3f\n", ms(d->idle_by_cause[AN_CAUSE_BLOCK]),
                ms(d->idle_by_cause[AN_CAUSE_LAUNCH]), ms(d->idle_by_cause[AN_CAUSE_HOST]), ms(d->idle_by_cause[0]));
    }
    wrap(out, 2, 2, "blocked: what the host's waits in CUDA calls cost: the idle while they held the host and, "
                    "after them, no more than the GPU work they held it back for (a waiting call that queued the "
                    "next work, as a copy through pageable memory: until that work began); launch: the call that queued the next work "
                    "had begun, the work not yet started (launch latency, or the call's own time: a first "
                    "launch loading its kernel); host: the host submitted nothing in time; unattributed: gaps "
                    "shorter than the threshold, and before the first and after the last GPU operation.");
}

/* Findings, grouped by rule. */
/* The told-apart text (sites_where) of the site of a finding's call, NULL when there is none. */
static const char *finding_where(const char *wheres, const an_result *r, const an_finding *f) {
    for (size_t i = 0; wheres != NULL && i < r->n_sites; i++)
        if (r->sites[i].producer == f->producer && r->sites[i].callsite == f->callsite && r->sites[i].name == f->name)
            return wheres + i * RP_WHERE;
    return NULL;
}

static void text_findings(FILE *out, const st_store *s, const an_result *r, const char *wheres, int md) {
    char where[512], cell[4200], label[820], api[256], line[2048], rk[224];
    fprintf(out, md ? "\n## Findings (Nsight Systems expert rules)\n" : "\nFindings (the checks of Nsight Systems' expert rules)\n");
    if (r->n_findings == 0)
        fprintf(out, md ? "\nNone.\n" : "  none\n");
    const an_finding **low = calloc(r->n_findings + 1, sizeof *low);
    size_t n_low = 0;
    int rule = 0;
    for (size_t i = 0; i < r->n_findings; i++) {
        const an_finding *f = &r->findings[i];
        if (f->rule != rule) {
            rule = f->rule;
            if (md)
                fprintf(out, "\n### %s (`%s`)\n\n", an_rule_title(rule), an_rule_nsys(rule));
            else {
                snprintf(line, sizeof line, "[%s / %s] %s", an_rule_name(rule), an_rule_nsys(rule), an_rule_title(rule));
                wrap(out, 2, 4, line);
            }
        }
        if (f->rule == AN_RULE_LOW_UTIL) {
            if (low != NULL)
                low[n_low++] = f;
            if (i + 1 < r->n_findings && r->findings[i + 1].rule == AN_RULE_LOW_UTIL)
                continue;
            if (low != NULL) {
                sort_ptrs(low, n_low);
                write_low_util(out, s, r, low, n_low, md);
            }
            continue;
        }
        /* a site told apart from another keeps the frame that does it; the others read as ever */
        const char *told = f->callsite ? finding_where(wheres, r, f) : NULL;
        if (told != NULL && (strlen(told) > 2 * RP_WIDTH ||
                             strcmp(told, rp_site_text(s, f->callsite, f->name, where, sizeof where)) == 0))
            told = NULL;
        char told_fit[RP_WHERE];
        if (told != NULL && !md)
            told = fit_words(strcpy(told_fit, told), RP_WIDTH - 10);
        const char *w = !f->callsite   ? ""
                        : told != NULL ? told
                        : md           ? rp_site_text(s, f->callsite, f->name, where, sizeof where)
                                       : site_fit(s, f->callsite, RP_WIDTH - 10, where, sizeof where);
        if (f->rule == AN_RULE_GPU_GAPS) {
            device_label(s, r, f->producer, f->device, label, sizeof label);
            snprintf(line, sizeof line, "%s: %" PRIu64 " gap%s, %.3f ms idle, longest %.3f ms at +%.3f ms", label,
                     f->count, f->count == 1 ? "" : "s", ms(f->total_ns), ms(f->max_ns), ms(f->start - r->t0));
            if (f->name)
                cat(line, sizeof line, ", while the host waited in %s%s%s", safe(st_str(s, f->name), api, sizeof api),
                    *w ? " at " : "", w);
        } else {
            safe(st_str(s, f->name), api, sizeof api);
            snprintf(line, sizeof line, "%" PRIu64 " call%s, %.3f ms, longest %.3f ms: %s%s%s%s", f->count,
                     f->count == 1 ? "" : "s", ms(f->total_ns), ms(f->max_ns), api, who(s, f->producer, rk, sizeof rk),
                     *w ? " at " : "", w);
        }
        if (md)
            fprintf(out, "- %s\n", md_cell(line, cell, sizeof cell));
        else
            wrap(out, 4, 6, line);
    }
    free(low);
}

static double pct_change(uint64_t old, uint64_t now) {
    return old ? 100.0 * ((double)now - (double)old) / (double)old : 0;
}

/* Against the baseline: the totals, then the call sites that are new, grew, shrank or went. */
static void text_baseline(FILE *out, const rp_opts *o, int md) {
    const an_diff *d = o->diff;
    char src[512], line[2048], cell[4200];
    safe(o->baseline ? o->baseline : "", src, sizeof src);
    snprintf(line, sizeof line, "%s %s", md ? "\n## Against the baseline" : "\nAgainst the baseline",
             md ? md_cell(src, cell, sizeof cell) : src);
    if (md)
        fprintf(out, "%s\n\n", line);
    else
        wrap(out, 0, 2, line + 1);
    snprintf(line, sizeof line, "host blocked %.3f ms, baseline %.3f ms (%+.1f%%); %" PRIu64 " blocking calls, baseline %" PRIu64
             "; %zu new call site%s, %zu grew, %zu shrank, %zu gone",
             ms(d->new_blocked_ns), ms(d->old_blocked_ns), pct_change(d->old_blocked_ns, d->new_blocked_ns), d->new_stalls,
             d->old_stalls, d->n_new, d->n_new == 1 ? "" : "s", d->n_grew, d->n_shrank, d->n_gone);
    if (md)
        fprintf(out, "%s\n\n", line);
    else
        wrap(out, 2, 4, line);
    size_t shown = 0;
    for (size_t i = 0; i < d->n_sites && shown < 20; i++) {
        const an_delta *x = &d->sites[i];
        if (x->kind == AN_DELTA_SAME)
            continue;
        shown++;
        if (x->kind == AN_DELTA_NEW)
            snprintf(line, sizeof line, "new: %s, %.3f ms blocked in %" PRIu64 " call%s", x->key, ms(x->new_ns), x->new_count,
                     x->new_count == 1 ? "" : "s");
        else if (x->kind == AN_DELTA_GONE)
            snprintf(line, sizeof line, "gone: %s (was %.3f ms)", x->key, ms(x->old_ns));
        else
            snprintf(line, sizeof line, "%s: %s, %.3f ms blocked, baseline %.3f ms (%+.1f%%)", an_delta_name(x->kind), x->key,
                     ms(x->new_ns), ms(x->old_ns), pct_change(x->old_ns, x->new_ns));
        if (md)
            fprintf(out, "- %s\n", md_cell(line, cell, sizeof cell));
        else
            wrap(out, 2, 4, line);
    }
}

static void json_baseline(FILE *out, const rp_opts *o) {
    const an_diff *d = o->diff;
    fprintf(out, ",\"baseline\":{\"source\":");
    json_str(out, o->baseline ? o->baseline : "");
    fprintf(out,
            ",\"blocked_ns\":%" PRIu64 ",\"stalls\":%" PRIu64 ",\"span_ns\":%" PRIu64 ",\"new_sites\":%zu,\"grew\":%zu,"
            "\"shrank\":%zu,\"gone\":%zu,\"sites\":[",
            d->old_blocked_ns, d->old_stalls, d->old_wall_ns, d->n_new, d->n_grew, d->n_shrank, d->n_gone);
    for (size_t i = 0; i < d->n_sites; i++) {
        const an_delta *x = &d->sites[i];
        fprintf(out, "%s{\"key\":", i ? "," : "");
        json_str(out, x->key);
        fprintf(out,
                ",\"change\":\"%s\",\"blocked_ns\":%" PRIu64 ",\"baseline_blocked_ns\":%" PRIu64 ",\"count\":%" PRIu64
                ",\"baseline_count\":%" PRIu64 ",\"gpu_idle_ns\":%" PRIu64 ",\"baseline_gpu_idle_ns\":%" PRIu64 "}",
                an_delta_name(x->kind), x->new_ns, x->old_ns, x->new_count, x->old_count, x->new_idle_ns, x->old_idle_ns);
    }
    fprintf(out, "]}");
}

static int by_wait(const void *a, const void *b) {
    const an_collective *x = *(const an_collective *const *)a, *y = *(const an_collective *const *)b;
    return x->wait_ns > y->wait_ns ? -1 : x->wait_ns < y->wait_ns;
}

/* Each rank's clock against the job's, as the ends of the collectives measure it, and whether
 * that says anything: an offset within its spread is not a measured one. */
static void text_clocks(FILE *out, const st_store *s, const an_ranks *rk, int md) {
    char line[1024];
    int at = snprintf(line, sizeof line, "Clocks, from the ends of the collectives (each ends at about the same moment "
                                         "on every rank): ");
    uint64_t worst = 0;
    int trusted = 0;
    for (size_t i = 0; i < rk->n_ranks && at < (int)sizeof line - 64; i++) {
        const an_rank *x = &rk->ranks[i];
        if (x->clock_n == 0)
            continue;
        char id[200];
        rank_or_process(s, x->producer, x->rank, "rank ", id, sizeof id);
        at += snprintf(line + at, sizeof line - (size_t)at, "%s%s %+.3f ms (spread %.3f)", i ? "; " : "", id,
                       (double)x->clock_offset_ns / 1e6, ms(x->clock_spread_ns));
        uint64_t off = x->clock_offset_ns < 0 ? (uint64_t)-x->clock_offset_ns : (uint64_t)x->clock_offset_ns;
        if (an_rank_clock_measured(x)) {
            trusted = 1;
            if (off > worst)
                worst = off;
        }
    }
    if (trusted)
        snprintf(line + at, sizeof line - (size_t)at,
                 ". Arrivals below are taken on the job's clock, each rank's measured offset (up to %.3f ms) "
                 "taken off.",
                 ms(worst));
    else
        snprintf(line + at, sizeof line - (size_t)at,
                 ". No offset is measured (larger than its spread, over three collectives or more): arrivals "
                 "are on each rank's own clock.");
    if (md)
        fprintf(out, "\n");
    md_wrap(out, md, 2, 4, line);
}

/* The hosts' clocks measured through relays (st_store_set_host_clock), and the ranks each holds;
 * returns the largest uncertainty that remains between two ranks' clocks (0 when none was
 * measured, UINT64_MAX when some ranks were and others were not). */
static uint64_t text_host_clocks(FILE *out, const st_store *s, const an_ranks *rk, int md) {
    char line[2048];
    int at = snprintf(line, sizeof line, "Clocks between hosts, measured through the relays (round trips, NTP-style) "
                                         "against this machine's: ");
    uint64_t worst = 0;
    size_t aligned = 0, hosts = 0;
    for (size_t i = 0; i < rk->n_ranks; i++) {
        const st_producer_info *p = st_producer_get(s, rk->ranks[i].producer);
        aligned += p->clock_aligned != 0;
        if (p->clock_aligned && p->clock_uncertainty_ns > worst)
            worst = p->clock_uncertainty_ns;
    }
    if (aligned == 0)
        return 0;
    /* one entry per host, naming its ranks */
    size_t i = 0;
    for (; i < rk->n_ranks && at < (int)sizeof line - 200; i++) {
        const st_producer_info *p = st_producer_get(s, rk->ranks[i].producer);
        size_t first = 0;
        while (st_producer_get(s, rk->ranks[first].producer)->host != p->host)
            first++;
        if (first != i)
            continue; /* its host was named with an earlier rank */
        char host[128];
        safe(st_str(s, p->host), host, sizeof host);
        if (p->clock_aligned)
            at += snprintf(line + at, sizeof line - (size_t)at, "%s%s %+.3f ms +/- %.3f ms (", hosts ? "; " : "",
                           host[0] ? host : "?", (double)p->clock_shift_ns / 1e6, ms(p->clock_uncertainty_ns));
        else
            at += snprintf(line + at, sizeof line - (size_t)at, "%s%s not measured, on its own clock (", hosts ? "; " : "",
                           host[0] ? host : "?");
        hosts++;
        int n = 0;
        for (size_t j = i; j < rk->n_ranks && at < (int)sizeof line - 200; j++) {
            const st_producer_info *q = st_producer_get(s, rk->ranks[j].producer);
            if (q->host != p->host)
                continue;
            if (n++ == 4) {
                at += snprintf(line + at, sizeof line - (size_t)at, ", ...");
                break;
            }
            if (rk->ranks[j].rank >= 0)
                at += snprintf(line + at, sizeof line - (size_t)at, "%srank %d", n > 1 ? ", " : "", rk->ranks[j].rank);
            else
                at += snprintf(line + at, sizeof line - (size_t)at, "%spid %u", n > 1 ? ", " : "", q->pid);
        }
        at += snprintf(line + at, sizeof line - (size_t)at, ")");
    }
    if (i < rk->n_ranks)
        at += snprintf(line + at, sizeof line - (size_t)at, "; ...");
    if (aligned < rk->n_ranks)
        snprintf(line + at, sizeof line - (size_t)at,
                 ". The ranks of hosts measured are on this machine's clock within that; the others are not aligned "
                 "with them.");
    else
        snprintf(line + at, sizeof line - (size_t)at,
                 ". Every rank's events are on this machine's clock within that: times between ranks of two hosts "
                 "are known to within both hosts' uncertainties.");
    if (md)
        fprintf(out, "\n");
    md_wrap(out, md, 2, 4, line);
    return aligned < rk->n_ranks ? UINT64_MAX : worst;
}

/* Per rank: busy, idle, blocked, and at collectives how often it came last and what the others
 * waited for it; then the collectives the others waited longest at, with what held the last one. */
static void text_ranks(FILE *out, const st_store *s, const an_result *r, const an_ranks *rk, int md) {
    char line[2048], where[512], name[256], cell[4200];
    fprintf(out, md ? "\n## Ranks\n\n| rank or process | GPU busy ms | idle ms | blocked ms | collectives | last at | others waited ms | waited ms |\n|---|---:|---:|---:|---:|---:|---:|---:|\n"
                    : "\nRanks\n  %-9s %11s %9s %10s %6s %5s %11s %9s\n",
            "rank", "GPU busy ms", "idle ms", "blocked ms", "colls", "last", "made wait", "waited");
    for (size_t i = 0; i < rk->n_ranks; i++) {
        const an_rank *x = &rk->ranks[i];
        char id[200], idc[420];
        rank_or_process(s, x->producer, x->rank, "", id, sizeof id);
        if (md) {
            md_cell(id, idc, sizeof idc);
        } else if (strlen(id) > 9) { /* a long name on a line of its own, the figures under it */
            fprintf(out, "  %s\n", id);
            id[0] = '\0';
        }
        fprintf(out, md ? "| %s | %.3f | %.3f | %.3f | %" PRIu64 " | %" PRIu64 " | %.3f | %.3f |\n"
                        : "  %-9s %11.3f %9.3f %10.3f %6" PRIu64 " %5" PRIu64 " %11.3f %9.3f\n",
                md ? idc : id, ms(x->busy_ns), ms(x->idle_ns), ms(x->blocked_ns), x->collectives, x->last_count,
                ms(x->made_wait_ns), ms(x->waited_ns));
    }
    uint64_t clock_unc = text_host_clocks(out, s, rk, md);
    if (rk->n_colls == 0) {
        md_wrap(out, md, 2, 2, "no collectives (NCCL kernels) seen on two ranks or more");
        return;
    }
    text_clocks(out, s, rk, md);
    const an_collective **v = malloc(rk->n_colls * sizeof *v);
    if (v == NULL)
        return;
    for (size_t i = 0; i < rk->n_colls; i++)
        v[i] = &rk->colls[i];
    qsort(v, rk->n_colls, sizeof *v, by_wait);
    snprintf(line, sizeof line, "%zu collectives matched; where the others waited longest for the last rank:", rk->n_colls);
    fprintf(out, "\n");
    md_wrap(out, md, 2, 4, line);
    for (size_t i = 0; i < rk->n_colls && i < 5; i++) {
        const an_collective *c = v[i];
        safe(st_str(s, c->name), name, sizeof name);
        char *paren = strchr(name, '(');
        if (paren)
            *paren = '\0'; /* the kernel's signature says nothing here */
        char who[200]; /* no rank said: its process, as the table names it */
        rank_or_process(s, c->straggler, rank_of(s, c->straggler), "rank ", who, sizeof who);
        int n = snprintf(line, sizeof line, "%s#%zu on stream %u: %s last, %.3f ms after the first; others waited %.3f ms;",
                         name, c->ordinal, c->stream, who, ms(c->last - c->first), ms(c->wait_ns));
        if (c->block != SIZE_MAX) {
            const an_block *b = &r->blocks[c->block];
            char api[128];
            safe(st_str(s, b->name), api, sizeof api);
            rp_site_text(s, b->callsite, b->name, where, sizeof where);
            snprintf(line + n, sizeof line - (size_t)n, " it was blocked %.3f ms in %s%s%s meanwhile, its GPU busy %.3f ms",
                     ms(c->block_ns), api, where[0] ? " at " : "", where, ms(c->gpu_ns));
        } else {
            snprintf(line + n, sizeof line - (size_t)n, " its host was not blocked meanwhile, its GPU busy %.3f ms",
                     ms(c->gpu_ns));
        }
        if (c->host_ns > 0) { /* where its host was meanwhile, outside waiting calls */
            char rn[200] = "";
            if (c->host_range != 0)
                safe(st_str(s, c->host_range), rn, sizeof rn);
            size_t len = strlen(line);
            len += (size_t)snprintf(line + len, sizeof line - len, "; its host kept its GPU waiting %.3f ms",
                                    ms(c->host_ns));
            if (rn[0] && len < sizeof line)
                snprintf(line + len, sizeof line - len, ", %.3f of it in %s", ms(c->host_range_ns), rn);
            else if (len < sizeof line)
                snprintf(line + len, sizeof line - len, ", most in no range the trace names");
        }
        /* two ranks' clocks may each be off by clock_unc: a smaller lead is not one that was measured */
        if (clock_unc != 0 && clock_unc != UINT64_MAX && c->last - c->first <= 2 * clock_unc) {
            size_t len = strlen(line);
            snprintf(line + len, sizeof line - len,
                     " (the lead is within the hosts' clock uncertainty, +/-%.3f ms each: which rank came last is "
                     "not certain)",
                     ms(clock_unc));
        }
        if (md)
            fprintf(out, "- %s\n", md_cell(line, cell, sizeof cell));
        else
            wrap(out, 4, 6, line);
    }
    free(v);
}

/* One entry of "What to change": a call site, or the host's own share in a range. */
typedef struct advice_item {
    const an_site *site;
    const an_host_range *host;
    uint64_t gpu_ns, blocked_ns;
} advice_item;

static int by_gpu_idle(const void *a, const void *b) {
    const advice_item *x = a, *y = b;
    if (x->gpu_ns != y->gpu_ns)
        return x->gpu_ns > y->gpu_ns ? -1 : 1;
    return x->blocked_ns > y->blocked_ns ? -1 : x->blocked_ns < y->blocked_ns;
}

/* A site's text cut for the text report: an op chain of over 56 columns keeps its start (the
 * program's op); a path loses its directories ("file.py:LINE function" is what names it), and
 * what is still over 120 columns its end. */
static char *advice_site_cut(char *where, const st_frame *named) {
    size_t wl = strlen(where);
    if (wl <= 56)
        return where;
    if (named != NULL && named->kind == TP_FRAME_OP) {
        memcpy(where + 53, "...", 4);
        return where;
    }
    size_t path = strcspn(where, ": "); /* "dir/file.py:LINE function [op]" */
    const char *slash = NULL;
    for (const char *p = where; p < where + path; p++)
        if (*p == '/')
            slash = p;
    if (slash != NULL && (size_t)(slash - where) > 3) {
        memcpy(where, ".../", 4);
        memmove(where + 4, slash + 1, strlen(slash + 1) + 1);
        wl = strlen(where);
    }
    if (wl > 120)
        memcpy(where + 117, "...", 4);
    return where;
}

/* What to change: the sites whose cause the trace tells, and the ranges the host spent the GPU's
 * idle time in, by the GPU time a fix would give back. */
static void text_advice(FILE *out, const st_store *s, const an_result *r, const rp_opts *o, const char *wheres,
                        int md) {
    size_t top = o->top ? o->top : RP_TOP_DEFAULT, n = 0;
    advice_item *v = malloc((r->n_sites + r->n_host_ranges + 1) * sizeof *v);
    if (v == NULL)
        return;
    for (size_t i = 0; i < r->n_sites; i++)
        v[n++] = (advice_item){.site = &r->sites[i], .gpu_ns = r->sites[i].gpu_idle_ns, .blocked_ns = r->sites[i].total_ns};
    for (size_t i = 0; i < r->n_host_ranges; i++)
        if (r->host_ranges[i].idle_ns > 0)
            v[n++] = (advice_item){.host = &r->host_ranges[i], .gpu_ns = r->host_ranges[i].idle_ns};
    qsort(v, n, sizeof *v, by_gpu_idle);
    char where[512], line[2048], rk[224], rname[256], cell[4200];
    int shown = 0;
    for (size_t i = 0; i < n && (size_t)shown < top; i++) {
        an_advice a;
        if (v[i].host != NULL) {
            an_advise_host(s, v[i].host, host_range_name(s, v[i].host, rname, sizeof rname), &a);
        } else {
            an_advise(s, v[i].site, &a);
            if (a.fix == AN_FIX_NONE)
                continue;
        }
        if (shown++ == 0)
            fprintf(out, md ? "\n## What to change, by the GPU time it gives back\n"
                            : "\nWhat to change, by the GPU time it gives back\n");
        if (v[i].host != NULL) {
            const char *name = host_range_name(s, v[i].host, rname, sizeof rname);
            char safe_name[160];
            tp_sanitize(safe_name, sizeof safe_name, name, strlen(name), NULL);
            snprintf(line, sizeof line, "%d. %.3f ms of GPU idle to gain (the host busy, not waiting in CUDA) %s%s%s",
                     shown, ms(a.gpu_ns), name[0] ? "in " : "in no named range", safe_name,
                     who(s, v[i].host->producer, rk, sizeof rk));
        } else {
            site_where(wheres, s, r, v[i].site, where, sizeof where);
            if (!md) /* markdown has no width to keep: the site whole */
                fit_words(advice_site_cut(where, st_site_frame(s, v[i].site->callsite)), RP_WIDTH - 10);
            snprintf(line, sizeof line, "%d. %.3f ms of GPU idle to gain (%.3f ms blocked)%s%s%s", shown, ms(a.gpu_ns),
                     ms(v[i].site->total_ns), where[0] ? " at " : "", where, who(s, v[i].site->producer, rk, sizeof rk));
        }
        int in = shown >= 10; /* under a two-digit number, one column further */
        if (md)
            fprintf(out, "\n%s  \n", md_cell(line, cell, sizeof cell));
        else
            wrap(out, 2, 5 + in, line);
        snprintf(line, sizeof line, "why: %s: %s", a.cause, a.why);
        if (md)
            fprintf(out, "   %s  \n", md_cell(line, cell, sizeof cell));
        else
            wrap(out, 5 + in, 7 + in, line);
        snprintf(line, sizeof line, "change: %s.", a.change);
        if (md)
            fprintf(out, "   %s\n", md_cell(line, cell, sizeof cell));
        else
            wrap(out, 5 + in, 7 + in, line);
    }
    free(v);
}

/* Steps: how they were found, the slowest and the outliers with the site that blocked longest in
 * each, and the stalls that come every Nth step. */
static void text_steps(FILE *out, const st_store *s, const an_result *r, const an_steps *st, int md) {
    char where[512], line[2048], rk[224], cell[4200];
    fprintf(out, md ? "\n## Steps\n\n" : "\nSteps\n");
    if (st->source == AN_STEPS_NONE) {
        char why[96];
        snprintf(line, sizeof line,
                 "no steps found: %s; no range named with --step; and no range or blocking call that repeats "
                 "regularly enough to mark a loop (%d times or more, 0.1 ms or more apart, with GPU work between, "
                 "over a tenth of the trace or more); --step NAME names the loop's range (three times or more)",
                 an_steps_none_why(st, why, sizeof why), AN_HEARTBEAT_MIN);
        md_wrap(out, md, 2, 2, line);
        return;
    }
    size_t slow = 0;
    for (size_t i = 0; i < st->n_steps; i++)
        slow += st->steps[i].outlier;
    snprintf(line, sizeof line, "%zu steps by %s%s%s%s, median %.3f ms; %zu slow (above median + 3 x 1.4826 MAD)", st->n_steps,
             an_step_source_name(st->source), st->what[0] ? " (" : "", st->what, st->what[0] ? ")" : "",
             ms(st->median_ns), slow);
    md_wrap(out, md, 2, 4, line);
    if (md)
        fprintf(out, "\n| step | wall ms | GPU busy ms | blocked ms | stalls | slow | blocked longest at | host kept the GPU waiting ms | most in |\n|---:|---:|---:|---:|---:|---|---|---:|---|\n");
    else
        fprintf(out, "  %8s %10s %11s %10s %6s  %s\n", "step", "wall ms", "GPU busy ms", "blocked ms", "stalls",
                "blocked longest at");
    /* every step when there are few, else the outliers and the slowest */
    size_t shown = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < st->n_steps; i++) {
            const an_step *x = &st->steps[i];
            int want = st->n_steps <= 20 ? pass == 0 : pass == 0 ? x->outlier : 0;
            if (!want || shown >= 40)
                continue;
            shown++;
            where[0] = '\0';
            if (x->top_site != SIZE_MAX) { /* the call site, else the API */
                const an_site *site = &r->sites[x->top_site];
                if (!*rp_site_text(s, site->callsite, site->name, where, sizeof where))
                    safe(st_str(s, site->name), where, sizeof where);
            }
            if (md) {
                char rn[200] = "", rcell[600], wcell[600];
                if (x->host_range)
                    safe(st_str(s, x->host_range), rn, sizeof rn);
                fprintf(out, "| %" PRId64 "%s | %.3f | %.3f | %.3f | %u | %s | %s | %.3f | %s |\n", x->number,
                        md_cell(who(s, x->producer, rk, sizeof rk), wcell, sizeof wcell), ms(x->end - x->start), ms(x->gpu_busy_ns),
                        ms(x->blocked_ns), x->stalls, x->outlier ? "**slow**" : "", where[0] ? md_cell(where, cell, sizeof cell) : "-",
                        ms(x->host_ns), rn[0] ? md_cell(rn, rcell, sizeof rcell) : "-");
            } else {
                char head[128];
                int col = snprintf(head, sizeof head, "  %8" PRId64 " %10.3f %11.3f %10.3f %6u  %s", x->number,
                                   ms(x->end - x->start), ms(x->gpu_busy_ns), ms(x->blocked_ns), x->stalls,
                                   x->outlier ? "SLOW " : "");
                who(s, x->producer, rk, sizeof rk);
                if (col + (int)strlen(where) + (int)strlen(rk) <= RP_WIDTH) {
                    fprintf(out, "%s%s%s\n", head, where, rk);
                } else { /* a long call site: on a line of its own, shortened as the sites table does */
                    while (col > 0 && head[col - 1] == ' ')
                        head[--col] = '\0';
                    fprintf(out, "%s%s", head, rk);
                    const an_site *site = &r->sites[x->top_site];
                    char fit[600];
                    if (site->callsite)
                        site_line(s, site->callsite, RP_WIDTH - 16, 0, fit, sizeof fit);
                    else
                        snprintf(fit, sizeof fit, "%s", where);
                    fprintf(out, "\n%12s at %s\n", "", fit);
                }
                if (x->host_ns > 0) { /* the host's own share of the GPU idle in it, and where */
                    char rn[200] = "";
                    if (x->host_range)
                        safe(st_str(s, x->host_range), rn, sizeof rn);
                    int k = snprintf(line, sizeof line, "host kept the GPU waiting %.3f ms", ms(x->host_ns));
                    if (rn[0])
                        snprintf(line + k, sizeof line - (size_t)k, ", %.3f of it in %s", ms(x->host_range_ns), rn);
                    wrap(out, 13, 15, line);
                }
            }
        }
    if (shown < st->n_steps)
        fprintf(out, md ? "\n(%zu more steps, none slow)\n" : "  (%zu more steps, none slow)\n", st->n_steps - shown);
    for (size_t i = 0; i < st->n_periodic; i++) {
        const an_periodic *p = &st->periodic[i];
        const an_site *site = &r->sites[p->site];
        rp_site_text(s, site->callsite, site->name, where, sizeof where);
        char api[256];
        safe(st_str(s, site->name), api, sizeof api);
        snprintf(line, sizeof line,
                 "every %u%s step (%u times from step %" PRId64 "): %s%s%s, +%.3f ms a time, %.3f ms a step on average%s",
                 p->period, p->period == 2 ? "nd" : p->period == 3 ? "rd" : "th", p->hits, st->steps[p->first].number,
                 api, where[0] ? " at " : "", where, ms(p->extra_ns), ms(p->extra_ns) / p->period,
                 who(s, p->producer, rk, sizeof rk));
        if (md)
            fprintf(out, "\n- %s\n", md_cell(line, cell, sizeof cell));
        else
            wrap(out, 2, 4, line);
    }
}

static void write_text(FILE *out, const st_store *s, const an_result *r, const rp_opts *o, int md) {
    char src[512], cell[600], line[2048];
    safe(o->source ? o->source : "", src, sizeof src);
    if (md)
        fprintf(out, "# synctop report: %s\n\n", md_cell(src, cell, sizeof cell));
    else {
        snprintf(line, sizeof line, "synctop report: %s", src);
        wrap(out, 0, 2, line);
    }
    if (o->left_out > 0) {
        snprintf(line, sizeof line, "NOT IN THIS REPORT: %zu of the sources, which could not be read (the warnings "
                                    "say why)", o->left_out);
        if (md)
            fprintf(out, "**%s**\n\n", line);
        else
            wrap(out, 0, 2, line);
    }
    if (!o->hta_only) {
        text_totals(out, s, r, md);
        text_notices(out, s, r, md);
        char *wheres = sites_where(s, r);
        text_sites(out, s, r, o, wheres, md);
        text_advice(out, s, r, o, wheres, md);
        if (o->diff)
            text_baseline(out, o, md);
        if (o->ranks)
            text_ranks(out, s, r, o->ranks, md);
        if (o->steps)
            text_steps(out, s, r, o->steps, md);
        text_devices(out, s, r, md);
        if (!md)
            text_idle_causes(out, s, r);
        text_findings(out, s, r, wheres, md);
        free(wheres);
    }
    if (o->hta)
        write_hta_text(out, o->hta, md);
}

int rp_write_brief(FILE *out, const st_store *s, const an_result *r, size_t top) {
    uint64_t wall = r->t1 > r->t0 ? r->t1 - r->t0 : 0, busy = 0, span = 0;
    for (size_t i = 0; i < r->n_devices; i++) {
        busy += r->devices[i].busy_ns;
        span += r->devices[i].span_ns;
    }
    char line[2048], where[512], api[256];
    size_t threads = blocking_threads(r);
    int n = snprintf(line, sizeof line, "host blocked %.3f ms in %zu call%s (%.1f%% of %.3f ms%s)", ms(r->blocked_ns),
                     r->n_blocks, r->n_blocks == 1 ? "" : "s", 100.0 * share(r->blocked_ns, wall), ms(wall),
                     threads > 1 ? ", summed over the threads that waited" : "");
    if (r->n_devices > 0)
        snprintf(line + n, sizeof line - (size_t)n, "; GPU%s busy %.1f%%", r->n_devices == 1 ? "" : "s",
                 100.0 * share(busy, span));
    wrap(out, 2, 4, line);
    char *wheres = sites_where(s, r);
    for (size_t i = 0; i < r->n_sites && i < top; i++) {
        const an_site *st = &r->sites[i];
        fit_words((char *)site_where(wheres, s, r, st, where, sizeof where), RP_WIDTH - 10);
        safe(st_str(s, st->name), api, sizeof api);
        snprintf(line, sizeof line, "%zu. %.3f ms in %" PRIu64 " call%s of %s%s%s", i + 1, ms(st->total_ns),
                 st->count, st->count == 1 ? "" : "s", api, where[0] ? " at " : "", where);
        wrap(out, 4, 7, line);
    }
    free(wheres);
    if (r->n_sites > top)
        fprintf(out, "    (%zu more call sites)\n", r->n_sites - top);
    return fflush(out) == 0 && !ferror(out) ? 0 : -1;
}

int rp_write(FILE *out, const st_store *s, const an_result *r, const rp_opts *o) {
    rp_opts def = {0};
    if (o == NULL)
        o = &def;
    if (o->format == RP_JSON)
        write_json(out, s, r, o);
    else
        write_text(out, s, r, o, o->format == RP_MARKDOWN);
    return fflush(out) == 0 && !ferror(out) ? 0 : -1;
}

/* ------------------------------------------------------------------------------------------ */
/* --fail-if                                                                                  */
/* ------------------------------------------------------------------------------------------ */

enum { M_BLOCKED = 1, M_IDLE, M_STALLS, M_BUBBLES, M_FINDINGS, M_RULE, M_SITE, M_API, M_NEW_SITES, M_HOST_IDLE, M_RANGE };

/* The checks whose value is a time (a share of a time with %). */
static int is_time_metric(int m) {
    return m == M_BLOCKED || m == M_IDLE || m == M_SITE || m == M_API || m == M_HOST_IDLE || m == M_RANGE;
}
enum { OP_GT = 1, OP_GE, OP_LT, OP_LE, OP_EQ };

int rp_check_parse(const char *text, rp_check *c, err_msg *err) {
    memset(c, 0, sizeof *c);
    snprintf(c->text, sizeof c->text, "%s", text);
    /* The operator is the last run of <>= in the text: site:TEXT may hold anything before it. */
    const char *op = NULL;
    for (const char *p = text; *p; p++)
        if (strchr("<>=", *p) != NULL)
            op = p;
    if (op != NULL && op > text && strchr("<>=", op[-1]) != NULL)
        op--;
    if (op == NULL)
        return err_set(err, ERR_INVAL, "'%s': no comparison (use METRIC>VALUE, e.g. blocked>5%%)", text);
    size_t mlen = (size_t)(op - text);
    const char *v = op;
    if (v[0] == '>' && v[1] == '=') {
        c->op = OP_GE;
        v += 2;
    } else if (v[0] == '<' && v[1] == '=') {
        c->op = OP_LE;
        v += 2;
    } else if (v[0] == '=' && v[1] == '=') {
        c->op = OP_EQ;
        v += 2;
    } else if (v[0] == '>') {
        c->op = OP_GT;
        v += 1;
    } else if (v[0] == '<') {
        c->op = OP_LT;
        v += 1;
    } else {
        return err_set(err, ERR_INVAL, "'%s': unknown comparison", text);
    }
    char metric[192];
    if (mlen == 0 || mlen >= sizeof metric)
        return err_set(err, ERR_INVAL, "'%s': no metric", text);
    memcpy(metric, text, mlen);
    metric[mlen] = '\0';
    char *end;
    int sign = *v == '+' || *v == '-';
    double val = strtod(v, &end);
    if (end == v)
        return err_set(err, ERR_INVAL, "'%s': '%s' is not a number", text, v);
    if (sign && strcmp(end, "%") != 0)
        return err_set(err, ERR_INVAL, "'%s': a signed value is a change against the baseline, in %% (e.g. +10%%)", text);
    if (sign) {
        c->unit = 3;
    } else if (strcmp(end, "%") == 0) {
        c->unit = 1;
    } else if (*end) {
        static const struct {
            const char *u;
            double f;
        } units[] = {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}};
        size_t k = 0;
        while (k < 4 && strcmp(end, units[k].u) != 0)
            k++;
        if (k == 4)
            return err_set(err, ERR_INVAL, "'%s': unknown unit '%s' (%%, ns, us, ms, s)", text, end);
        c->unit = 2;
        val *= units[k].f;
    }
    c->value = val;
    if (strcmp(metric, "blocked") == 0)
        c->metric = M_BLOCKED;
    else if (strcmp(metric, "idle") == 0)
        c->metric = M_IDLE;
    else if (strcmp(metric, "stalls") == 0)
        c->metric = M_STALLS;
    else if (strcmp(metric, "bubbles") == 0)
        c->metric = M_BUBBLES;
    else if (strcmp(metric, "findings") == 0)
        c->metric = M_FINDINGS;
    else if (strcmp(metric, "new-sites") == 0)
        c->metric = M_NEW_SITES;
    else if (strcmp(metric, "host-idle") == 0)
        c->metric = M_HOST_IDLE;
    else if (strncmp(metric, "range:", 6) == 0 && metric[6])
        c->metric = M_RANGE;
    else if (strncmp(metric, "site:", 5) == 0 && metric[5])
        c->metric = M_SITE;
    else if (strncmp(metric, "api:", 4) == 0 && metric[4])
        c->metric = M_API;
    else {
        for (int r = 1; r < AN_RULE_N_; r++)
            if (strcmp(metric, an_rule_name(r)) == 0 || strcmp(metric, an_rule_nsys(r)) == 0) {
                c->metric = M_RULE;
                snprintf(c->arg, sizeof c->arg, "%d", r);
            }
        if (c->metric == 0)
            return err_set(err, ERR_INVAL,
                              "'%s': unknown metric '%s' (blocked, idle, host-idle, stalls, bubbles, findings, "
                              "new-sites, a rule such as sync-api, site:TEXT, api:NAME, range:TEXT)", text, metric);
    }
    if (c->metric == M_SITE || c->metric == M_API || c->metric == M_RANGE)
        snprintf(c->arg, sizeof c->arg, "%s", strchr(metric, ':') + 1);
    int times = is_time_metric(c->metric);
    if (c->unit == 3 && !(times || c->metric == M_STALLS))
        return err_set(err, ERR_INVAL,
                       "'%s': a change against the baseline is for blocked, idle, host-idle, stalls, site:, api: and "
                       "range:", text);
    if (c->unit == 3)
        return 0;
    if (c->unit == 2 && !times)
        return err_set(err, ERR_INVAL, "'%s': %s is a count, not a time", text, metric);
    if (c->unit == 1 && !times)
        return err_set(err, ERR_INVAL, "'%s': %s is a count, not a share", text, metric);
    if (c->unit == 0 && times && c->value != 0)
        return err_set(err, ERR_INVAL, "'%s': give %s a unit (%% or ns/us/ms/s)", text, metric);
    return 0;
}

static int compare(double a, int op, double b) {
    switch (op) {
    case OP_GT: return a > b;
    case OP_GE: return a >= b;
    case OP_LT: return a < b;
    case OP_LE: return a <= b;
    default: return a == b;
    }
}

/* What a check measures in one run: a time (*ns_out, of *base_out for shares) or a count
 * (returned); *hits_out how many ranges or sites a range:, site: or api: check matched. */
static double measure(const rp_check *c, const st_store *s, const an_result *r, uint64_t *ns_out, uint64_t *base_out,
                      size_t *hits_out) {
    uint64_t wall = r->t1 - r->t0;
    size_t hits = 0;
    double measured = 0;
    uint64_t ns = 0, base = wall;
    switch (c->metric) {
    case M_BLOCKED: ns = r->blocked_ns; break;
    case M_IDLE:
        /* The device that sat idle the most (by share, or by time). */
        base = 0;
        for (size_t i = 0; i < r->n_devices; i++) {
            const an_device *d = &r->devices[i];
            int more = c->unit == 1 ? share(d->idle_ns, d->span_ns) > share(ns, base) || base == 0 : d->idle_ns > ns;
            if (more) {
                ns = d->idle_ns;
                base = d->span_ns;
            }
        }
        break;
    case M_HOST_IDLE:
        /* The device the host kept waiting the most (by share, or by time). */
        base = 0;
        for (size_t i = 0; i < r->n_devices; i++) {
            const an_device *d = &r->devices[i];
            uint64_t h = d->idle_by_cause[AN_CAUSE_HOST];
            int more = c->unit == 1 ? share(h, d->span_ns) > share(ns, base) || base == 0 : h > ns;
            if (more) {
                ns = h;
                base = d->span_ns;
            }
        }
        break;
    case M_RANGE:
        for (size_t i = 0; i < r->n_host_ranges; i++) {
            char rname[256];
            const an_host_range *h = &r->host_ranges[i];
            const char *name = host_range_name(s, h, rname, sizeof rname);
            if (strstr(name, c->arg) != NULL) {
                ns += h->idle_ns;
                hits++;
            }
        }
        break;
    case M_STALLS: measured = (double)r->n_blocks; break;
    case M_BUBBLES:
        for (size_t i = 0; i < r->n_bubbles; i++)
            measured += r->bubbles[i].lane == AN_DEVICE_LANE;
        break;
    case M_FINDINGS: measured = (double)r->n_findings; break;
    case M_RULE: {
        int rule = atoi(c->arg);
        /* Calls and gaps are counted; a low-utilisation window counts once, however long. */
        for (size_t i = 0; i < r->n_findings; i++)
            if (r->findings[i].rule == rule)
                measured += rule == AN_RULE_LOW_UTIL ? 1.0 : (double)r->findings[i].count;
        break;
    }
    case M_SITE:
    case M_API:
        for (size_t i = 0; i < r->n_sites; i++) {
            const an_site *st = &r->sites[i];
            char where[512], desc[1024];
            /* A site is described by its API and where it was called: "cudaMemcpyAsync at train.py:40 step". */
            if (c->metric == M_SITE)
                snprintf(desc, sizeof desc, "%s at %s", st_str(s, st->name),
                         st->callsite ? rp_site_text(s, st->callsite, st->name, where, sizeof where) : "");
            int hit = c->metric == M_API ? strcmp(st_str(s, st->name), c->arg) == 0 : strstr(desc, c->arg) != NULL;
            if (hit) {
                ns += st->total_ns;
                hits++;
            }
        }
        break;
    default: break;
    }
    *ns_out = ns;
    *base_out = base;
    *hits_out = hits;
    return measured;
}

int rp_check_eval(const rp_check *c, const st_store *s, const an_result *r, char *msg, size_t len) {
    return rp_check_eval_base(c, s, r, NULL, NULL, NULL, msg, len);
}

int rp_check_needs_baseline(const rp_check *c) {
    return c->metric == M_NEW_SITES || c->unit == 3;
}

/* A range:, site: or api: check whose name matches nothing (most often mistyped: it can never
 * fail) says so after its line. */
static void no_match_note(const rp_check *c, char *msg, size_t len) {
    if (c->metric != M_SITE && c->metric != M_API && c->metric != M_RANGE)
        return;
    size_t at = strlen(msg);
    snprintf(msg + at, len - at, " (%s)",
             c->metric == M_API    ? "no call of that name blocked in these sources"
             : c->metric == M_SITE ? "no call site that blocked matches it in these sources"
                                   : "no range the host kept the GPU waiting in matches it");
}

int rp_check_eval_base(const rp_check *c, const st_store *s, const an_result *r, const st_store *bs,
                       const an_result *br, const an_diff *diff, char *msg, size_t len) {
    uint64_t ns = 0, base = 0;
    size_t hits = 0, old_hits = 0;
    double measured = measure(c, s, r, &ns, &base, &hits);
    static const char *const ops[] = {"?", ">", ">=", "<", "<=", "=="};
    const char *op = c->op >= OP_GT && c->op <= OP_EQ ? ops[c->op] : "?";
    if (rp_check_needs_baseline(c)) {
        if (diff == NULL || bs == NULL || br == NULL) {
            snprintf(msg, len, "%s: needs a baseline (--baseline OLD)", c->text);
            return 1;
        }
        if (c->metric == M_NEW_SITES) {
            snprintf(msg, len, "%s: %zu call site%s the baseline did not have", c->text, diff->n_new,
                     diff->n_new == 1 ? "" : "s");
            return compare((double)diff->n_new, c->op, c->value);
        }
        uint64_t ons = 0, obase = 0;
        double old = measure(c, bs, br, &ons, &obase, &old_hits);
        int times = c->metric != M_STALLS;
        double now_v = times ? (double)ns : measured, old_v = times ? (double)ons : old;
        double change = old_v > 0 ? 100.0 * (now_v - old_v) / old_v : now_v > 0 ? 1e9 : 0;
        /* the threshold is the check's own text */
        if (times)
            snprintf(msg, len, "%s: %.3f ms, baseline %.3f ms (%+.1f%%)", c->text, ms((uint64_t)now_v),
                     ms((uint64_t)old_v), change);
        else
            snprintf(msg, len, "%s: %.0f, baseline %.0f (%+.1f%%)", c->text, now_v, old_v, change);
        if (hits == 0 && old_hits == 0)
            no_match_note(c, msg, len);
        return compare(change, c->op, c->value);
    }
    /* Every line names the measured value with its unit, and the threshold with the same unit. */
    int times = is_time_metric(c->metric);
    char what[256];
    if (c->metric == M_BLOCKED)
        snprintf(what, sizeof what, "host blocked");
    else if (c->metric == M_IDLE)
        snprintf(what, sizeof what, "GPU idle (the idlest GPU)");
    else if (c->metric == M_HOST_IDLE)
        snprintf(what, sizeof what, "GPU idle the host caused outside waiting calls (the GPU it kept waiting most)");
    else if (c->metric == M_RANGE)
        snprintf(what, sizeof what, "GPU idle the host caused in ranges matching '%s'", c->arg);
    else if (c->metric == M_SITE)
        snprintf(what, sizeof what, "blocked at call sites matching '%s'", c->arg);
    else
        snprintf(what, sizeof what, "blocked in %s", c->arg);
    if (times && c->unit == 1) {
        measured = 100.0 * share(ns, base);
        snprintf(msg, len, "%s: %s %.2f%% of %s (%.3f ms of %.3f ms); threshold %s %g%%", c->text, what, measured,
                 c->metric == M_IDLE || c->metric == M_HOST_IDLE ? "its span" : "wall time", ms(ns), ms(base), op,
                 c->value);
    } else if (times) {
        measured = (double)ns;
        snprintf(msg, len, "%s: %s %.3f ms; threshold %s %.3f ms", c->text, what, ms(ns), op, c->value / 1e6);
    } else {
        const char *unit = c->metric == M_STALLS     ? "blocking calls"
                           : c->metric == M_BUBBLES  ? "GPU idle bubbles"
                           : c->metric == M_FINDINGS ? "findings"
                                                     : NULL;
        const char *kind = "";
        if (unit == NULL) {
            int rule = atoi(c->arg);
            unit = rule == AN_RULE_GPU_GAPS ? "GPU gaps" : rule == AN_RULE_LOW_UTIL ? "low-utilisation windows" : "calls";
            kind = rule == AN_RULE_GPU_GAPS || rule == AN_RULE_LOW_UTIL ? "" : an_rule_name(rule);
        }
        snprintf(msg, len, "%s: %.0f %s%s%s; threshold %s %g %s", c->text, measured, kind, *kind ? " " : "", unit, op,
                 c->value, unit);
    }
    if (hits == 0)
        no_match_note(c, msg, len);
    return compare(measured, c->op, c->value);
}
