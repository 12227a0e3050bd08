/*
 * The header panel: the title bar (the job, the mode, the time) and a row per GPU with its busy,
 * idle and host-blocked figures over the range the header covers, which it owns (vw_header: the
 * sweep that brings them up to date a budget at a time, analysis/busy.h).
 */
#include "screen_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vw_figs_range(const vw_state *v, uint64_t *a, uint64_t *b) {
    uint64_t shown = v->now < v->end ? v->now : v->end;
    if (v->header.scope_window || v->stalls.breakdown) {
        *a = v->t0 > v->origin ? v->t0 : v->origin;
        *b = v->t1 < shown ? v->t1 : shown;
        if (*b < *a)
            *b = *a;
        if (*b == *a) /* nothing shown: an empty range, not "the whole trace" */
            *b = *a + 1;
    } else if (v->now == UINT64_MAX || v->now >= v->end) {
        *a = *b = 0; /* everything: the analysis' own figures */
    } else {
        *a = v->origin;
        *b = shown > v->origin ? shown : v->origin + 1;
    }
}

int vw_figs_update(vw_state *v, const st_store *s, size_t budget) {
    uint64_t a, b;
    vw_figs_range(v, &a, &b);
    if (a == b) {
        an_sweep_free(&v->header.sweep);
        v->header.figs_ready = 0;
        return 1;
    }
    int fresh = !an_sweep_fits(v->header.sweep, s, v->an, a, b);
    if (!fresh && v->header.figs_ready && v->header.figs_a == a && v->header.figs_b == b)
        return 1;
    if (fresh) {
        an_sweep_free(&v->header.sweep);
        if ((v->header.sweep = an_sweep_new(s, v->an, a)) == NULL)
            return 1;
    }
    if (!an_sweep_to(v->header.sweep, b, budget))
        return 0;
    an_gpu_fig *f;
    size_t n;
    if (an_sweep_figures(v->header.sweep, b, &f, &n) != 0)
        return 1;
    free(v->header.figs);
    v->header.figs = f;
    v->header.n_figs = n;
    v->header.figs_a = a;
    v->header.figs_b = b;
    v->header.figs_ready = 1;
    return 1;
}

void vw__render_title(const st_store *s, const vw_state *v, vw_grid *g, const vw_layout *L) {
    vw__fill(g, 0, L->title.y, g->w, ROLE_TITLE, 0);
    char job[512] = "", raw[512];
    size_t np = st_producer_count(s);
    if (np == 0) {
        snprintf(job, sizeof job, "%s", v->mode != VW_LIVE ? "empty trace" : v->live_over ? "nothing traced"
                                                                                        : "waiting for a traced process...");
    } else {
        const st_producer_info *p = st_producer_get(s, 0);
        const char *cmd = st_str(s, p->cmdline), *host = st_str(s, p->host);
        snprintf(raw, sizeof raw, "%s", *cmd ? cmd : "?");
        vw__sanitized(job, sizeof job, raw);
        size_t l = strlen(job);
        snprintf(job + l, sizeof job - l, " %s pid %u", v->ascii ? "|" : "\xe2\x94\x82", p->pid);
        if (*host) {
            char h[128];
            vw__sanitized(h, sizeof h, host);
            l = strlen(job);
            snprintf(job + l, sizeof job - l, " %s %s", v->ascii ? "|" : "\xe2\x94\x82", h);
        }
        if (p->rank >= 0 && p->world > 1) {
            l = strlen(job);
            snprintf(job + l, sizeof job - l, " rank %d/%d", p->rank, p->world);
        }
        if (np > 1) {
            l = strlen(job);
            snprintf(job + l, sizeof job - l, " (+%zu more)", np - 1);
        }
    }
    /* right side: mode, time */
    char right[160], d1[32], d2[32];
    uint64_t shown = v->now < v->end ? v->now : v->end;
    vw_fmt_dur(d1, sizeof d1, shown > v->origin ? shown - v->origin : 0, v->ascii);
    vw_fmt_dur(d2, sizeof d2, v->end > v->origin ? v->end - v->origin : 0, v->ascii);
    if (v->mode == VW_REPLAY && st_store_events(s) == 0 && v->load_progress >= 1.0) {
        snprintf(right, sizeof right, " REPLAY  no events ");
    } else if (v->mode == VW_REPLAY) {
        char sp[16];
        snprintf(sp, sizeof sp, v->speed >= 1 ? "%.0fx" : "%.2gx", v->speed);
        snprintf(right, sizeof right, " REPLAY %s %s  %s / %s ",
                 v->paused ? (v->ascii ? "||" : "\xe2\x8f\xb8") : (v->ascii ? ">" : "\xe2\x96\xb6"), sp, d1, d2);
    } else {
        /* Every producer has sent its last batch: the job is over, what is shown is all there is. */
        size_t ended = 0;
        for (size_t i = 0; i < np; i++)
            ended += st_producer_get(s, i)->ended != 0;
        if (np > 0 && ended == np)
            snprintf(right, sizeof right, " ENDED  %s ", d2);
        else
            snprintf(right, sizeof right, " LIVE %s%s  %s ", v->paused ? "paused" : (v->ascii ? "*" : "\xe2\x97\x8f"),
                     v->follow && !v->paused ? " follow" : "", d2);
    }
    if (v->recording) {
        size_t l = strlen(right);
        snprintf(right + l, sizeof right - l, "%s", v->ascii ? "REC " : "\xe2\x97\x8f REC ");
    }
    if (v->load_progress < 1.0) {
        char lp[32];
        snprintf(lp, sizeof lp, " loading %.0f%% ", v->load_progress * 100);
        size_t l = strlen(right);
        snprintf(right + l, sizeof right - l, "%s", lp);
    }
    /* events, rate and drops, between the job and the mode */
    uint64_t missed = 0, dropped = 0;
    for (size_t i = 0; i < np; i++) {
        const st_producer_info *p = st_producer_get(s, i);
        missed += p->missed;
        for (int k = 0; k < TP_DROP_MAX_; k++)
            dropped += p->drop_records[k];
    }
    char ev[32], rate[32], mid[128], dr[64];
    vw__fmt_count(ev, sizeof ev, (double)st_store_events(s));
    if (v->mode == VW_LIVE) {
        vw__fmt_count(rate, sizeof rate, v->events_per_s);
        snprintf(mid, sizeof mid, " %s ev  %s ev/s  drops ", ev, rate);
    } else {
        snprintf(mid, sizeof mid, " %s ev  drops ", ev);
    }
    if (missed || dropped)
        snprintf(dr, sizeof dr, "%" PRIu64 " batches + %" PRIu64 " records", missed, dropped);
    else
        snprintf(dr, sizeof dr, "0");
    if (v->damaged) {
        size_t l = strlen(dr);
        snprintf(dr + l, sizeof dr - l, "  damaged %" PRIu64, v->damaged);
    }
    int warn = missed || dropped || v->damaged;
    int rw = 0; /* columns, not bytes: the play glyph and the micro sign take one each */
    for (const char *const *p = (const char *const[]){right, mid, dr, NULL}; *p; p++)
        for (const unsigned char *c = (const unsigned char *)*p; *c; c++)
            rw += (*c & 0xC0) != 0x80;
    int x = vw__put_str(g, v, 0, L->title.y, 8, " synctop", ROLE_TITLE, VW_A_BOLD);
    x += vw__put_str(g, v, x, L->title.y, 1, " ", ROLE_TITLE, 0);
    int room = g->w - x - rw - 2; /* the job, then at least one space before the counts */
    if (room > 4)
        vw__put_str(g, v, x + 1, L->title.y, room, job, ROLE_TITLE, 0);
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s", right);
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)tmp; *p; p++)
        n += (*p & 0xC0) != 0x80;
    vw__put_str(g, v, g->w - n, L->title.y, n, tmp, ROLE_TITLE, VW_A_BOLD);
    int dl = (int)strlen(dr), ml = (int)strlen(mid);
    if (g->w - n - dl - ml > x + 12) {
        vw__put_str(g, v, g->w - n - dl, L->title.y, dl, dr, warn ? ROLE_WARN : ROLE_TITLE, VW_A_BOLD);
        vw__put_str(g, v, g->w - n - dl - ml, L->title.y, ml, mid, ROLE_TITLE, 0);
    }
}

void vw__render_gpus(const st_store *s, const vw_state *v, vw_grid *g, const vw_layout *L) {
    /* devices with streams, in row order */
    size_t nr;
    vw_row *rows = vw__rows_build(s, NULL, &nr);
    int shown = 0, total = 0;
    for (size_t i = 0; i < nr; i++)
        total += rows[i].type == ROW_DEVICE;
    int meter = clampi(g->w / 6, 10, 32);
    for (size_t i = 0; i < nr && shown < L->gpus.h; i++) {
        if (rows[i].type != ROW_DEVICE)
            continue;
        int y = L->gpus.y + shown++;
        /* the figures for the range the header covers: the sweep's when it has them, the
         * analysis' own when the range is the whole trace */
        uint64_t fa, fb;
        vw_figs_range(v, &fa, &fb);
        an_gpu_fig fig, *dv = NULL;
        if (fa != fb) {
            for (size_t k = 0; v->header.figs_ready && k < v->header.n_figs; k++)
                if (v->header.figs[k].producer == rows[i].producer && v->header.figs[k].device == rows[i].device)
                    dv = &v->header.figs[k];
        } else {
            for (size_t k = 0; v->an && k < v->an->n_devices; k++) {
                const an_device *d = &v->an->devices[k];
                if (d->producer == rows[i].producer && d->device == rows[i].device) {
                    fig = (an_gpu_fig){d->producer, d->device, d->span_ns, d->busy_ns, d->idle_ns, d->blocked_ns};
                    dv = &fig;
                }
            }
        }
        char lab[48], tag[24] = "";
        if (st_producer_count(s) > 1) { /* which process's GPU: two ranks both have a GPU0 */
            vw__producer_tag(s, rows[i].producer, tag, sizeof tag - 1);
            strcat(tag, ":");
        }
        snprintf(lab, sizeof lab, " %sGPU%u ", tag, rows[i].device);
        int x = vw__put_str(g, v, 0, y, 16, lab, ROLE_DEVICE, VW_A_BOLD);
        double busy = dv && dv->span_ns ? (double)dv->busy_ns / (double)dv->span_ns : 0;
        vw__put_cell(g, x++, y, '[', ROLE_DIM, 0);
        int inner = meter - 2;
        double fill_cols = busy * inner;
        for (int c = 0; c < inner; c++) {
            double f = fill_cols - c;
            uint32_t ch = ' ';
            if (f >= 1)
                ch = v->ascii ? '|' : 0x2588;
            else if (f > 0)
                ch = v->ascii ? (f >= 0.5 ? '|' : ' ') : (uint32_t[]){' ', 0x258F, 0x258E, 0x258D, 0x258C, 0x258B, 0x258A, 0x2589}[clampi((int)(f * 8), 0, 7)];
            vw__put_cell(g, x + c, y, ch, ROLE_KERNEL, 0);
        }
        char pct[16];
        snprintf(pct, sizeof pct, "%.1f%%", busy * 100);
        vw__put_str(g, v, x + inner - (int)strlen(pct), y, (int)strlen(pct), pct, ROLE_VALUE, VW_A_BOLD);
        x += inner;
        vw__put_cell(g, x++, y, ']', ROLE_DIM, 0);
        char buf[256], d[32], d2[32];
        if (dv) {
            vw_fmt_dur(d, sizeof d, dv->blocked_ns, v->ascii);
            vw_fmt_dur(d2, sizeof d2, dv->idle_ns, v->ascii);
            x += 1;
            x += vw__put_str(g, v, x, y, 6, "busy ", ROLE_LABEL, 0);
            snprintf(buf, sizeof buf, "%5.1f%%", busy * 100);
            x += vw__put_str(g, v, x, y, 8, buf, ROLE_VALUE, 0);
            x += vw__put_str(g, v, x, y, 7, "  idle ", ROLE_LABEL, 0);
            snprintf(buf, sizeof buf, "%5.1f%%", dv->span_ns ? 100.0 * (double)dv->idle_ns / (double)dv->span_ns : 0);
            x += vw__put_str(g, v, x, y, 8, buf, ROLE_VALUE, 0);
            x += vw__put_str(g, v, x, y, 16, "  host blocked ", ROLE_LABEL, 0);
            x += vw__put_str(g, v, x, y, 12, d, dv->blocked_ns ? ROLE_BLOCKED : ROLE_VALUE, VW_A_BOLD);
            if (v->header.scope_window || v->stalls.breakdown)
                x += vw__put_str(g, v, x, y, 10, "  in view", ROLE_LABEL, VW_A_BOLD);
        } else {
            x += vw__put_str(g, v, x + 1, y, 20, v->an && (fa == fb || v->header.figs_ready) ? "no GPU work" : "analysing...",
                         ROLE_DIM, 0) + 1;
        }
        /* device name */
        for (size_t k = 0; k < st_device_count(s); k++) {
            const st_device_info *di = st_device_get(s, k);
            if (di->producer == rows[i].producer && di->device == rows[i].device) {
                char nm[128];
                vw__sanitized(nm, sizeof nm, st_str(s, di->name));
                if (x + 3 < g->w - 16)
                    vw__put_str(g, v, x + 2, y, g->w - 16 - x - 2, nm, ROLE_DIM, 0);
            }
        }
        if (shown == L->gpus.h && total > shown) { /* at the right end, after what the row holds */
            int n = snprintf(buf, sizeof buf, "  (+%d more)", total - shown);
            int at = g->w - n - 1;
            vw__fill(g, at, y, g->w - at, ROLE_DEFAULT, 0);
            vw__put_str(g, v, at, y, n, buf, ROLE_DIM, 0);
        }
    }
    if (total == 0)
        vw__put_str(g, v, 1, L->gpus.y, 30, v->mode == VW_LIVE ? "no GPU activity yet" : "no GPU activity", ROLE_DIM, 0);
    free(rows);
}

void vw__header_free(vw_state *v) {
    free(v->header.figs);
    v->header.figs = NULL;
    v->header.n_figs = 0;
    v->header.figs_ready = 0;
    an_sweep_free(&v->header.sweep);
}
