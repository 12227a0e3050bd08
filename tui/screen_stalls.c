/*
 * The stalls panel (the call sites that blocked the host, analysis/stalls.h, by the column chosen)
 * and the idle breakdown pane that takes its place on b (the GPU idle of the window by cause, HTA's
 * breakdown of the whole trace, the host's ranges), with the state they own (vw_stalls); and the
 * keys that walk the stalls (n, N, i, I), sort them (<, >), keep one step's (t), and move the
 * focus between the panels.
 */
#include "screen_int.h"
#include "advice.h"
#include "hta.h"
#include "steps.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The breakdown pane's rows under its header: a row per GPU; then, when HTA's breakdown is
 * there, its header and a row per stream, else a line saying why it is not. */
size_t vw__breakdown_rows(const vw_state *v) {
    size_t n = v->an ? v->an->n_devices : 0;
    return n + 1 + (v->stalls.hta ? v->stalls.hta->n_streams : 0);
}

static void sites_free(vw_state *v) {
    an_stall_sites_free(v->stalls.sites, v->stalls.n_sites);
    v->stalls.sites = NULL;
    v->stalls.n_sites = 0;
    free(v->stalls.labels);
    v->stalls.labels = NULL;
    free(v->stalls.heads);
    v->stalls.heads = NULL;
}

/* The rows' labels, in their order (after every update and sort). Without memory for them the
 * rows are labelled one by one, as they come. */
static void sites_label(vw_state *v) {
    free(v->stalls.labels);
    free(v->stalls.heads);
    v->stalls.heads = NULL;
    size_t n = v->stalls.n_sites;
    v->stalls.labels = n ? malloc(n * VW_STALL_LABEL) : NULL;
    v->stalls.heads = n ? malloc(n * sizeof *v->stalls.heads) : NULL;
    uint64_t *cs = n ? malloc(n * sizeof *cs) : NULL;
    if (v->stalls.labels == NULL || v->stalls.heads == NULL || cs == NULL) {
        free(v->stalls.labels);
        v->stalls.labels = NULL;
        free(v->stalls.heads);
        v->stalls.heads = NULL;
        free(cs);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const an_stall_site *x = &v->stalls.sites[i];
        an_site_label(v->store, x->callsite, x->name, v->stalls.labels + i * VW_STALL_LABEL, VW_STALL_LABEL);
        v->stalls.heads[i] = strlen(v->stalls.labels + i * VW_STALL_LABEL);
        cs[i] = x->callsite;
    }
    an_labels_distinguish(v->store, cs, v->stalls.labels, VW_STALL_LABEL, n);
    free(cs);
}

size_t vw__stall_label(const vw_state *v, int k, char out[VW_STALL_LABEL]) {
    const an_stall_site *x = &v->stalls.sites[k];
    if (v->stalls.labels == NULL) {
        an_site_label(v->store, x->callsite, x->name, out, VW_STALL_LABEL);
        return strlen(out);
    }
    snprintf(out, VW_STALL_LABEL, "%s", v->stalls.labels + (size_t)k * VW_STALL_LABEL);
    return v->stalls.heads[k] < strlen(out) ? v->stalls.heads[k] : strlen(out);
}

void vw__stalls_free(vw_state *v) {
    if (v->stalls.hta) {
        hta_result_free(v->stalls.hta);
        free(v->stalls.hta);
        v->stalls.hta = NULL;
    }
    sites_free(v);
}

void vw_sites_update(vw_state *v) {
    sites_free(v);
    an_stall_scope sc = {.now = v->now, .by_step = v->stalls.step, .steps = v->steps, .at = v->cursor};
    an_stall_sites(v->store, v->an, &sc, v->stalls.sort, &v->stalls.sites, &v->stalls.n_sites, &v->stalls.step_no);
    sites_label(v);
    if (v->stalls.sel >= (int)v->stalls.n_sites)
        v->stalls.sel = v->stalls.n_sites ? (int)v->stalls.n_sites - 1 : 0;
}

/* Bubbles of a device by cause over [a, b): out[cause] += their overlap. */
static void bubbles_by_cause(const an_result *an, uint64_t maxlen, uint32_t p, uint16_t d, uint64_t a, uint64_t b,
                             uint64_t gap, uint64_t out[AN_CAUSE_N_]) {
    for (size_t i = vw__bubble_from(an, maxlen, a); i < an->n_bubbles && an->bubbles[i].start < b; i++) {
        const an_bubble *x = &an->bubbles[i];
        if (x->lane != AN_DEVICE_LANE || x->producer != p || x->device != d || x->end - x->start < gap ||
            x->cause <= 0 || x->cause >= AN_CAUSE_N_)
            continue;
        an_bubble_split(an, x, a, b, out);
    }
}

#define HOST_RANGES_X 104 /* the breakdown pane's column for the host's ranges, beside its tables */

/* The breakdown pane's rows of the host's own share of the whole run by the range it ran (the
 * report's "What to change" lists them), in columns x0 onwards from row y while it is under end;
 * returns the next row. */
static int render_host_ranges(frame_ctx *f, int x0, int y, int end) {
    const st_store *s = f->s;
    const vw_state *v = f->v;
    vw_grid *g = f->g;
    char line[512];
    int multi = st_producer_count(s) > 1;
    uint64_t host_all = 0;
    for (size_t i = 0; v->an && i < v->an->n_host_ranges; i++)
        host_all += v->an->host_ranges[i].idle_ns;
    if (host_all > 0 && y < end) {
        if (x0 == 0)
            vw__fill(g, 0, y, g->w, ROLE_PANEL, 0);
        vw__put_str(g, v, x0, y++, g->w - x0, " HOST-ELSEWHERE, WHOLE RUN, BY THE RANGE IT RAN", ROLE_PANEL, VW_A_BOLD);
        for (size_t i = 0; i < v->an->n_host_ranges && i < 3 && y < end; i++, y++) {
            const an_host_range *h = &v->an->host_ranges[i];
            char d[32], nm[160];
            vw_fmt_dur(d, sizeof d, h->idle_ns, v->ascii);
            const char *raw = h->name ? st_str(s, h->name) : "(in no range)";
            size_t k = strlen(raw);
            while (h->numbered && k > 0 && raw[k - 1] >= '0' && raw[k - 1] <= '9')
                k--;
            vw__sanitized(nm, sizeof nm - 1, raw);
            if (h->numbered && k < sizeof nm - 1) /* a profiler's numbered ranges: "ProfilerStep#N" */
                memcpy(nm + k, "N", 2);
            int len = (int)strlen(d) - (strstr(d, "\xc2\xb5") ? 1 : 0);
            snprintf(line, sizeof line, " %*s%s %6.1f%%  ", 14 - len > 0 ? 14 - len : 0, "", d,
                     100.0 * (double)h->idle_ns / (double)host_all);
            int x = x0 + vw__put_str(g, v, x0, y, g->w - x0, line, ROLE_DEFAULT, 0);
            if (multi) {
                char tag[24];
                vw__producer_tag(s, h->producer, tag, sizeof tag - 1);
                strcat(tag, " ");
                x += vw__put_str(g, v, x, y, g->w - x, tag, ROLE_DIM, 0);
            }
            vw__put_str(g, v, x, y, g->w - x, nm, ROLE_DEFAULT, 0);
        }
    }
    return y;
}

/* The idle breakdown pane: per GPU, for the window shown, busy and idle and the idle by cause
 * (blocked in a call, launch latency, host busy elsewhere, the rest: edges and short gaps); then
 * HTA's idle breakdown of the whole trace per stream (host_wait, kernel_wait, other). */
static void render_breakdown(frame_ctx *f) {
    const st_store *s = f->s;
    const vw_state *v = f->v;
    vw_grid *g = f->g;
    const vw_layout *L = f->L;
    int y = L->stalls.y, end = L->stalls.y + L->stalls.h;
    vw__fill(g, 0, y, g->w, ROLE_PANEL, 0);
    char line[512];
    /* a column's name is one word, so that the names count as the columns do */
    snprintf(line, sizeof line, " %-14s %7s %7s %13s %9s %14s %8s   (b: the stalls)", "GPU IDLE, VIEW", "BUSY", "IDLE",
             "BLOCKED-CALL", "LAUNCH", "HOST-ELSEWHERE", "REST");
    vw__put_str(g, v, 0, y++, g->w, line, ROLE_PANEL, VW_A_BOLD);
    int wide = g->w >= HOST_RANGES_X + 60, top = y; /* wide: the host's ranges beside the tables */
    uint64_t a, b;
    vw_figs_range(v, &a, &b);
    int multi = st_producer_count(s) > 1;
    for (size_t i = 0; v->an && i < v->an->n_devices && y < end; i++, y++) {
        const an_device *dv = &v->an->devices[i];
        char tag[24] = "", name[48];
        if (multi) {
            vw__producer_tag(s, dv->producer, tag, sizeof tag - 1);
            strcat(tag, ":");
        }
        snprintf(name, sizeof name, "%sGPU%u", tag, dv->device);
        const an_gpu_fig *fig = NULL;
        for (size_t k = 0; v->header.figs_ready && k < v->header.n_figs; k++)
            if (v->header.figs[k].producer == dv->producer && v->header.figs[k].device == dv->device)
                fig = &v->header.figs[k];
        if (fig == NULL || fig->span_ns == 0) { /* not swept yet; or its process was not traced then */
            snprintf(line, sizeof line, " %-14s %s", name, fig == NULL ? "analysing..." : "not traced in this window");
            vw__put_str(g, v, 0, y, g->w, line, ROLE_DIM, 0);
            continue;
        }
        uint64_t cause[AN_CAUSE_N_] = {0}, caused = 0;
        bubbles_by_cause(v->an, f->bmax, dv->producer, dv->device, a, b, v->gap_ns, cause);
        for (int c = 1; c < AN_CAUSE_N_; c++)
            caused += cause[c];
        uint64_t rest = fig->idle_ns > caused ? fig->idle_ns - caused : 0;
        double span = (double)fig->span_ns;
        snprintf(line, sizeof line, " %-14s %6.1f%% %6.1f%% %12.1f%% %8.1f%% %13.1f%% %7.1f%%", name,
                 100.0 * (double)fig->busy_ns / span, 100.0 * (double)fig->idle_ns / span,
                 100.0 * (double)cause[AN_CAUSE_BLOCK] / span, 100.0 * (double)cause[AN_CAUSE_LAUNCH] / span,
                 100.0 * (double)cause[AN_CAUSE_HOST] / span, 100.0 * (double)rest / span);
        vw__put_str(g, v, 0, y, g->w, line, ROLE_DEFAULT, 0);
        if (cause[AN_CAUSE_BLOCK]) { /* the share the stalls cost, in red: what this tool is about */
            char red[32];
            snprintf(red, sizeof red, " %12.1f%%", 100.0 * (double)cause[AN_CAUSE_BLOCK] / span);
            vw__put_str(g, v, 31, y, 14, red, ROLE_BLOCKED, VW_A_BOLD);
        }
    }
    if (y >= end) {
        if (wide)
            render_host_ranges(f, HOST_RANGES_X, top, end);
        return;
    }
    if (v->stalls.hta == NULL) {
        vw__put_str(g, v, 1, y, g->w - 2, v->stalls.hta_note[0] ? v->stalls.hta_note : "HTA's breakdown: replay only", ROLE_DIM, 0);
        render_host_ranges(f, wide ? HOST_RANGES_X : 0, wide ? top : y + 1, end);
        return;
    }
    snprintf(line, sizeof line, " %-14s %14s %14s %14s %10s", "HTA, WHOLE RUN", "HOST_WAIT", "KERNEL_WAIT", "OTHER", "OPS");
    vw__fill(g, 0, y, g->w, ROLE_PANEL, 0);
    vw__put_str(g, v, 0, y++, g->w, line, ROLE_PANEL, 0);
    for (size_t i = 0; i < v->stalls.hta->n_streams && y < end; i++, y++) {
        const hta_stream *hs = &v->stalls.hta->streams[i];
        char name[48], cell[HTA_IDLE_N_][32];
        snprintf(name, sizeof name, "r%d stream %lld", hs->rank, (long long)hs->stream);
        for (int c = 0; c < HTA_IDLE_N_; c++) {
            if (!hs->present[c]) {
                snprintf(cell[c], sizeof cell[c], "-");
                continue;
            }
            char d[32];
            uint64_t mag = hs->idle_ns[c] < 0 ? (uint64_t)-hs->idle_ns[c] : (uint64_t)hs->idle_ns[c];
            vw_fmt_dur(d, sizeof d, mag, v->ascii);
            snprintf(cell[c], sizeof cell[c], "%s%s", hs->idle_ns[c] < 0 ? "-" : "", d);
        }
        /* durations may carry a two-byte micro sign: pad by columns */
        int n = snprintf(line, sizeof line, " %-14s", name);
        for (int c = 0; c < HTA_IDLE_N_; c++) {
            int len = (int)strlen(cell[c]) - (strstr(cell[c], "\xc2\xb5") ? 1 : 0);
            n += snprintf(line + n, sizeof line - (size_t)n, " %*s%s", 14 - len > 0 ? 14 - len : 0, "", cell[c]);
        }
        snprintf(line + n, sizeof line - (size_t)n, " %10" PRIu64, hs->ops);
        vw__put_str(g, v, 0, y, g->w, line, ROLE_DEFAULT, 0);
    }
    render_host_ranges(f, wide ? HOST_RANGES_X : 0, wide ? top : y, end);
}

/* The cause of a site's stalls in a word or two (advice.h), else the kind of block. */
static const char *site_cause(const st_store *s, const an_stall_site *site) {
    static const char *const words[AN_FIX_N_] = {
        [AN_FIX_ITEM] = ".item()",      [AN_FIX_IF_TENSOR] = "if tensor", [AN_FIX_TO_HOST] = "copy",
        [AN_FIX_NONZERO] = "nonzero",   [AN_FIX_DEVICE_SYNC] = "dev sync", [AN_FIX_EVENT_SYNC] = "evt sync",
        [AN_FIX_STREAM_SYNC] = "str sync", [AN_FIX_PAGEABLE] = "pageable", [AN_FIX_SYNC_COPY] = "sync copy",
        [AN_FIX_ALLOC] = "alloc",       [AN_FIX_QUERY] = "polling",       [AN_FIX_MEMSET] = "memset",
    };
    static const char *const kinds[] = {"?", "sync", "memcpy", "pageable", "memset", "alloc", "query", "other"};
    an_site as = {.producer = site->producer, .callsite = site->callsite, .name = site->name, .kind = site->kind,
                  .count = site->count, .total_ns = site->total_ns, .max_ns = site->max_ns,
                  .gpu_idle_ns = site->gpu_idle_ns};
    an_advice a;
    an_advise(s, &as, &a);
    if (a.fix > AN_FIX_NONE && a.fix < AN_FIX_N_ && words[a.fix] != NULL)
        return words[a.fix];
    return site->kind > 0 && site->kind < 8 ? kinds[site->kind] : "?";
}

/* What %WALL is a share of: with t, the step at the cursor (the first process's that is in one, as
 * the panel's rows are counted); else the run up to what is shown. */
static uint64_t stalls_wall(const vw_state *v) {
    if (v->stalls.step && v->steps != NULL && v->stalls.step_no >= 0)
        for (size_t i = 0; i < v->steps->n_steps; i++) {
            const an_step *x = &v->steps->steps[i];
            if (x->start <= v->cursor && v->cursor < x->end)
                return x->end - x->start;
        }
    uint64_t shown = v->now < v->end ? v->now : v->end;
    return shown > v->origin ? shown - v->origin : 1;
}

void vw__render_stalls(frame_ctx *f) {
    const st_store *s = f->s;
    const vw_state *v = f->v;
    vw_grid *g = f->g;
    const vw_layout *L = f->L;
    if (L->stalls.h == 0)
        return;
    if (v->stalls.breakdown) {
        render_breakdown(f);
        return;
    }
    int y = L->stalls.y;
    int focus = v->focus == VW_FOCUS_STALLS;
    vw__fill(g, 0, y, g->w, ROLE_PANEL, 0);
    /* the columns, right-aligned over the rows' figures; the one sorted by carries a mark */
    char head[256];
    int hn = snprintf(head, sizeof head, "%s", focus ? " TOP STALLS" : " top stalls");
    static const struct { const char *label; int width, sort; } cols[] = {
        {"COUNT", 6, AN_STALL_BY_COUNT}, {" TOTAL", 10, AN_STALL_BY_TOTAL}, {" MAX", 10, AN_STALL_BY_MAX},
        {" %WALL", 7, -1},           {" GPU IDLE", 10, AN_STALL_BY_IDLE},
    };
    /* GPU idle from 140 columns on, else the call site keeps its room; sorted by GPU idle, its
     * column takes the place of %WALL, so that the column sorted by is always there */
    int by_idle = v->stalls.sort == AN_STALL_BY_IDLE, wide = g->w >= 140;
    int show_wall = wide || !by_idle, show_idle = wide || by_idle;
    int owed = 0; /* columns a label took from the next one's padding */
    for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) {
        if ((cols[c].sort == -1 && !show_wall) || (cols[c].sort == AN_STALL_BY_IDLE && !show_idle))
            continue;
        int marked = cols[c].sort == (int)v->stalls.sort;
        int pad = cols[c].width - (int)strlen(cols[c].label) - marked - owed;
        owed = 0;
        if (c == 0 && pad < 1) { /* a space after the panel's name, taken from the next column */
            owed = 1 - pad;
            pad = 1;
        }
        hn += snprintf(head + hn, sizeof head - (size_t)hn, "%*s%s%s", pad > 0 ? pad : 0, "", cols[c].label,
                       marked ? (v->ascii ? "v" : "\xe2\x96\xbc") : "");
    }
    hn += snprintf(head + hn, sizeof head - (size_t)hn, " %-9s %s", "CAUSE", "CALL SITE");
    if (v->stalls.step && v->stalls.step_no >= 0) /* t: only the step at the cursor */
        snprintf(head + hn, sizeof head - (size_t)hn, "  (step %" PRId64 " only; t: all)", v->stalls.step_no);
    vw__put_str(g, v, 0, y, g->w, head, ROLE_PANEL, focus ? VW_A_BOLD : 0);
    int multi = st_producer_count(s) > 1;
    uint64_t wall = stalls_wall(v);
    if (v->stalls.n_sites == 0) {
        vw__put_str(g, v, 2, y + 1, g->w - 4,
                v->an == NULL                                    ? "analysing..."
                : v->stalls.step && v->steps == NULL              ? "no steps found (t: all the run)"
                : v->stalls.step && v->stalls.step_no < 0          ? "the cursor is in no step (t: all the run)"
                : v->stalls.step                                  ? "no host-blocking calls in this step (t: all the run)"
                                                                 : "no host-blocking calls so far",
                ROLE_DIM, 0);
        return;
    }
    for (int i = 0; i + 1 < L->stalls.h; i++) {
        int k = v->stalls.scroll + i;
        if (k >= (int)v->stalls.n_sites)
            break;
        const an_stall_site *site = &v->stalls.sites[k];
        char tot[32], mx[32], idle[32], lab[VW_STALL_LABEL], row[768], who[24] = "";
        size_t named = vw__stall_label(v, k, lab);
        vw_fmt_dur(tot, sizeof tot, site->total_ns, v->ascii);
        vw_fmt_dur(mx, sizeof mx, site->max_ns, v->ascii);
        vw_fmt_dur(idle, sizeof idle, site->gpu_idle_ns, v->ascii);
        if (site->n_procs > 1) /* the same call in several processes */
            snprintf(who, sizeof who, "%s%u ", v->ascii ? "x" : "\xc3\x97", site->n_procs);
        else if (multi) { /* which process */
            vw__producer_tag(s, site->producer, who, sizeof who - 1);
            strcat(who, " ");
        }
        int sel = k == v->stalls.sel;
        /* durations may carry a two-byte micro sign: pad by columns, not bytes */
        char tp[40], mp[40], ip[40];
        int tl = (int)strlen(tot) - (strstr(tot, "\xc2\xb5") ? 1 : 0), ml = (int)strlen(mx) - (strstr(mx, "\xc2\xb5") ? 1 : 0);
        int il = (int)strlen(idle) - (strstr(idle, "\xc2\xb5") ? 1 : 0);
        snprintf(tp, sizeof tp, "%*s%s", 9 - tl > 0 ? 9 - tl : 0, "", tot);
        snprintf(mp, sizeof mp, "%*s%s", 9 - ml > 0 ? 9 - ml : 0, "", mx);
        snprintf(ip, sizeof ip, "%*s%s", 9 - il > 0 ? 9 - il : 0, "", idle);
        char pct[16] = "";
        if (show_wall) /* per process, for a row of several */
            snprintf(pct, sizeof pct, " %5.1f%%", 100.0 * (double)site->total_ns / (double)wall / (site->n_procs > 1 ? site->n_procs : 1));
        snprintf(row, sizeof row, "%4d %12" PRIu64 " %s %s%s%s%s %-9s %s", k + 1, site->count, tp, mp, pct,
                 show_idle ? " " : "", show_idle ? ip : "", site_cause(s, site), who);
        int role = sel ? ROLE_SELECTION : ROLE_DEFAULT;
        int attr = sel && focus ? VW_A_BOLD : 0;
        if (sel)
            vw__fill(g, 0, y + 1 + i, g->w, role, attr);
        int x = vw__put_str(g, v, 0, y + 1 + i, g->w, row, role, attr);
        vw__put_str_tail(g, v, x, y + 1 + i, g->w - x, lab, named, role, attr);
        if (!sel && v->stalls.sort != AN_STALL_BY_COUNT) {
            /* the column the panel is sorted by, in red */
            int at = v->stalls.sort == AN_STALL_BY_TOTAL ? 18 : v->stalls.sort == AN_STALL_BY_MAX ? 28 : show_wall ? 45 : 38;
            const char *txt = v->stalls.sort == AN_STALL_BY_TOTAL ? tp : v->stalls.sort == AN_STALL_BY_MAX ? mp : ip;
            vw__put_str(g, v, at, y + 1 + i, 9, txt, ROLE_BLOCKED, VW_A_BOLD);
        }
    }
}

static const an_block *block_at_site_next(const vw_state *v, const an_stall_site *site, uint64_t after, int dir) {
    const an_block *best = NULL;
    for (size_t k = 0; v->an && k < v->an->n_blocks; k++) {
        const an_block *b = &v->an->blocks[k];
        if (b->end > v->now || (site && !an_stall_site_has(site, b)))
            continue;
        if (dir > 0 && b->start > after && (best == NULL || b->start < best->start))
            best = b;
        if (dir < 0 && b->start < after && (best == NULL || b->start > best->start))
            best = b;
    }
    return best;
}

static void go_block(vw_state *v, const st_store *s, const an_block *b, int cols) {
    v->cursor = b->start;
    vw__reveal(v, b->start, b->end, cols);
    v->cursor_row = vw__row_of_lane(v, s, b->lane);
    for (size_t i = 0; i < v->stalls.n_sites; i++)
        if (an_stall_site_has(&v->stalls.sites[i], b))
            v->stalls.sel = (int)i;
    char d[32], site[200];
    vw_fmt_dur(d, sizeof d, b->end - b->start, v->ascii);
    an_site_label(s, b->callsite, b->name, site, sizeof site);
    snprintf(v->message, sizeof v->message, "stall %s at %.120s", d, site);
}

static int by_duration_desc(const void *a, const void *b) {
    const an_block *x = *(const an_block *const *)a, *y = *(const an_block *const *)b;
    uint64_t dx = x->end - x->start, dy = y->end - y->start;
    if (dx != dy)
        return dx > dy ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The selected call site's stalls, worst first: the next (dir 1) or previous one, with "i/N". */
static void worst_cmd(vw_state *v, const st_store *s, int dir, int cols) {
    if (v->stalls.n_sites == 0 || v->an == NULL) {
        snprintf(v->message, sizeof v->message, "no stalls so far");
        return;
    }
    const an_stall_site *site = &v->stalls.sites[v->stalls.sel];
    const an_block **list = malloc((v->an->n_blocks ? v->an->n_blocks : 1) * sizeof *list);
    if (list == NULL)
        return;
    size_t n = 0;
    for (size_t k = 0; k < v->an->n_blocks; k++)
        if (v->an->blocks[k].end <= v->now && an_stall_site_has(site, &v->an->blocks[k]))
            list[n++] = &v->an->blocks[k];
    if (n == 0) {
        free(list);
        return;
    }
    qsort(list, n, sizeof *list, by_duration_desc);
    if (v->stalls.worst_pos < 0 || v->stalls.worst_pos >= (int)n) /* the first i: the worst; I: the shortest */
        v->stalls.worst_pos = dir > 0 ? 0 : (int)n - 1;
    else
        v->stalls.worst_pos = (int)(((long)v->stalls.worst_pos + dir + (long)n) % (long)n);
    int sel = v->stalls.sel;
    go_block(v, s, list[v->stalls.worst_pos], cols);
    v->stalls.sel = sel; /* the same site, even when another matches the block too */
    v->stalls.show_site = 1;
    char d[32], label[200];
    vw_fmt_dur(d, sizeof d, list[v->stalls.worst_pos]->end - list[v->stalls.worst_pos]->start, v->ascii);
    an_site_label(s, list[v->stalls.worst_pos]->callsite, list[v->stalls.worst_pos]->name, label, sizeof label);
    snprintf(v->message, sizeof v->message, "stall %d/%zu by length: %s at %.100s", v->stalls.worst_pos + 1, n, d, label);
    free(list);
}

void vw__stalls_enter(vw_state *v, const st_store *s, int cols) {
    if (v->stalls.n_sites == 0) {
        snprintf(v->message, sizeof v->message, "no stall to open");
        return;
    }
    v->stalls.worst_pos = -1; /* its longest */
    worst_cmd(v, s, 1, cols);
    v->detail = 1;
}

/* The stalls: every one in time order (n, N), the selected call site's worst first (i, I), the
 * column sorted by (<, >), the step at the cursor only (t). */
void vw__stall_cmd(vw_state *v, const st_store *s, vw_cmd c, int cols) {
    switch (c) {
    case VW_CMD_NEXT_STALL:
    case VW_CMD_PREV_STALL: {
        int next = c == VW_CMD_NEXT_STALL;
        const an_block *b = block_at_site_next(v, NULL, v->cursor, next ? 1 : -1);
        if (b == NULL) {
            snprintf(v->message, sizeof v->message, "%s", next ? "no later stall" : "no earlier stall");
        } else {
            go_block(v, s, b, cols);
            v->stalls.show_site = 1;
            v->stalls.worst_pos = -1; /* i starts again from the worst */
        }
        break;
    }
    case VW_CMD_WORST_NEXT:
    case VW_CMD_WORST_PREV:
        worst_cmd(v, s, c == VW_CMD_WORST_NEXT ? 1 : -1, cols);
        break;
    case VW_CMD_SORT_NEXT:
    case VW_CMD_SORT_PREV: {
        static const char *const names[AN_STALL_BY_N_] = {"total time blocked", "longest stall", "count",
                                                      "GPU idle caused"};
        an_stall_site keep = v->stalls.n_sites ? v->stalls.sites[v->stalls.sel] : (an_stall_site){0};
        v->stalls.sort = (an_stall_order)(((int)v->stalls.sort + (c == VW_CMD_SORT_NEXT ? 1 : AN_STALL_BY_N_ - 1)) % AN_STALL_BY_N_);
        an_stall_sites_sort(v->stalls.sites, v->stalls.n_sites, v->stalls.sort);
        sites_label(v);
        for (size_t i = 0; i < v->stalls.n_sites; i++) /* the selection stays on its call site */
            if (v->stalls.sites[i].producer == keep.producer && v->stalls.sites[i].callsite == keep.callsite &&
                v->stalls.sites[i].name == keep.name)
                v->stalls.sel = (int)i;
        snprintf(v->message, sizeof v->message, "stalls by %s", names[v->stalls.sort]);
        break;
    }
    case VW_CMD_STALL_STEP:
        if (!v->stalls.step && (v->steps == NULL || v->steps->n_steps == 0)) {
            char why[96];
            snprintf(v->message, sizeof v->message, "no steps found (%s): the stalls stay the whole run's",
                     an_steps_none_why(v->steps, why, sizeof why));
            break;
        }
        v->stalls.step = !v->stalls.step;
        vw_sites_update(v);
        if (v->stalls.step && v->stalls.step_no >= 0)
            snprintf(v->message, sizeof v->message, "stalls of step %" PRId64 " (t: all the run)", v->stalls.step_no);
        else if (v->stalls.step)
            snprintf(v->message, sizeof v->message, "stalls of the step at the cursor: it is in none");
        else
            snprintf(v->message, sizeof v->message, "stalls of the whole run");
        break;
    default:
        break;
    }
}

int vw_hta_wanted(const vw_state *v) { return v->stalls.hta_pending && v->stalls.hta == NULL; }

void vw_hta_take(vw_state *v, hta_result *h, int rc, const err_msg *err) {
    v->stalls.hta_pending = 0;
    if (rc != 0 || h == NULL || v->stalls.hta != NULL) {
        if (v->stalls.hta == NULL)
            snprintf(v->stalls.hta_note, sizeof v->stalls.hta_note, "HTA's breakdown: %.70s", h ? err->msg : "out of memory");
        else if (rc == 0 && h != NULL)
            hta_result_free(h);
        free(h);
        return;
    }
    v->stalls.hta = h;
}

/* HTA's breakdown of a replayed trace, once it is loaded: made once, kept. With hta_async the
 * loop makes it on its analysis thread (a frame is not kept waiting), else it is made here. */
static void hta_ask(vw_state *v, const st_store *s) {
    if (v->stalls.hta != NULL || v->stalls.hta_pending)
        return;
    if (v->mode != VW_REPLAY) {
        snprintf(v->stalls.hta_note, sizeof v->stalls.hta_note, "HTA's breakdown: on a recorded run (synctop report --hta)");
        return;
    }
    if (v->load_progress < 1.0) {
        snprintf(v->stalls.hta_note, sizeof v->stalls.hta_note, "HTA's breakdown: once the file is loaded (b twice)");
        return;
    }
    v->stalls.hta_pending = 1;
    if (v->stalls.hta_async) {
        snprintf(v->stalls.hta_note, sizeof v->stalls.hta_note, "HTA's breakdown: computing...");
        return;
    }
    hta_result *h = calloc(1, sizeof *h);
    err_msg err = {{0}};
    int rc = h == NULL ? ERR_NOMEM : hta_analyze(s, NULL, h, &err);
    vw_hta_take(v, h, rc, &err);
}

void vw__breakdown_cmd(vw_state *v, const st_store *s) {
    v->stalls.breakdown = !v->stalls.breakdown;
    snprintf(v->message, sizeof v->message, "%s", v->stalls.breakdown ? "GPU idle for the window shown, by cause" : "top stalls");
    if (v->stalls.breakdown)
        hta_ask(v, s);
}

void vw__stalls_move(vw_state *v, int d) {
    v->stalls.sel += d;
    v->stalls.worst_pos = -1;
}
