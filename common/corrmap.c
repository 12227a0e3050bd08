/* (process, correlation id) -> value (corrmap.h). */
#include "corrmap.h"

#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "synctop/error.h"

#define FIRST_CAP 64
#define FEW_PROCS 8 /* looked for one by one; more through by_pid */

/* The most ids a process's table may cover while it holds n: a sixteenth of them at least (a
 * capture of part of a run holds one id in ten: the driver's calls take ids too). */
static uint64_t dense_limit(size_t n) {
    return 16 * ((uint64_t)n + 1) + 1024;
}

/* The index of pid's entry; SIZE_MAX when it has none (and add is 0, or memory ran out). */
static size_t proc_at(cm_corrmap *m, uint32_t pid, int add) {
    if (m->last < m->n_procs && m->procs[m->last].pid == pid)
        return m->last;
    if (m->n_procs <= FEW_PROCS) {
        for (size_t i = 0; i < m->n_procs; i++)
            if (m->procs[i].pid == pid)
                return m->last = i;
    } else {
        const uint64_t *v = cm_u64map_find(&m->by_pid, (uint64_t)pid + 1);
        if (v != NULL)
            return m->last = (size_t)*v;
    }
    if (!add || CM_GROW(m->procs, m->cap_procs, m->n_procs + 1) ||
        cm_u64map_put(&m->by_pid, (uint64_t)pid + 1, m->n_procs) != 0)
        return SIZE_MAX;
    memset(&m->procs[m->n_procs], 0, sizeof m->procs[0]);
    m->procs[m->n_procs].pid = pid;
    return m->last = m->n_procs++;
}

int cm_corrmap_find(cm_corrmap *m, uint32_t pid, uint32_t corr, uint64_t *val) {
    size_t i = proc_at(m, pid, 0);
    if (i == SIZE_MAX)
        return 0;
    const cm_corr_proc *p = &m->procs[i];
    if (corr >= p->lo && (uint64_t)(corr - p->lo) < p->cap && p->vals[corr - p->lo] != 0) {
        *val = p->vals[corr - p->lo] - 1;
        return 1;
    }
    const uint64_t *v = p->spilled ? cm_u64map_find(&m->sparse, (uint64_t)pid << 32 | corr) : NULL;
    if (v == NULL)
        return 0;
    *val = *v;
    return 1;
}

/* Widens p's table to take corr, when the ids would still fill a sixteenth of it: to twice its
 * size at least, the room it gains on the side corr lies (ids falling or rising cost one copy per
 * doubling). 1 done, 0 not (too sparse), -1 out of memory. */
static int widen(cm_corr_proc *p, uint32_t corr) {
    uint64_t lo = p->cap == 0 ? corr : p->lo, end = p->cap == 0 ? (uint64_t)corr + 1 : p->lo + p->cap;
    int down = corr < lo;
    lo = corr < lo ? corr : lo;
    end = (uint64_t)corr + 1 > end ? (uint64_t)corr + 1 : end;
    uint64_t span = end - lo, limit = dense_limit(p->n);
    if (span > limit)
        return 0;
    uint64_t cap = p->cap * 2 > span ? p->cap * 2 : span;
    if (cap < FIRST_CAP)
        cap = FIRST_CAP;
    if (cap > limit)
        cap = limit;
    if (down) /* the room below: [end - cap, end), not under id 0 */
        lo = end > cap ? end - cap : 0;
    if (lo + cap > (uint64_t)UINT32_MAX + 1) /* ids are 32-bit */
        cap = (uint64_t)UINT32_MAX + 1 - lo;
    uint32_t *v = calloc((size_t)cap, sizeof *v);
    if (v == NULL)
        return -1;
    if (p->cap != 0)
        memcpy(v + (p->lo - lo), p->vals, p->cap * sizeof *v);
    free(p->vals);
    p->vals = v;
    p->lo = (uint32_t)lo;
    p->cap = (size_t)cap;
    return 1;
}

int cm_corrmap_put(cm_corrmap *m, uint32_t pid, uint32_t corr, uint64_t val) {
    size_t i = proc_at(m, pid, 1);
    if (i == SIZE_MAX)
        return ERR_NOMEM;
    cm_corr_proc *p = &m->procs[i];
    int in = p->cap != 0 && corr >= p->lo && (uint64_t)(corr - p->lo) < p->cap;
    if (val >= UINT32_MAX) { /* too large for a table: the hash map keeps it */
        if (cm_u64map_put(&m->sparse, (uint64_t)pid << 32 | corr, val) != 0)
            return ERR_NOMEM;
        p->spilled = 1;
        if (in && p->vals[corr - p->lo] != 0) {
            p->vals[corr - p->lo] = 0;
            p->n--;
        }
        return 0;
    }
    if (!in && !p->spilled) {
        int w = widen(p, corr);
        if (w < 0)
            return ERR_NOMEM;
        in = w;
    }
    if (in) {
        uint32_t *slot = &p->vals[corr - p->lo];
        p->n += *slot == 0;
        *slot = (uint32_t)val + 1;
        return 0;
    }
    if (cm_u64map_put(&m->sparse, (uint64_t)pid << 32 | corr, val) != 0)
        return ERR_NOMEM;
    p->spilled = 1;
    return 0;
}

void cm_corrmap_free(cm_corrmap *m) {
    for (size_t i = 0; i < m->n_procs; i++)
        free(m->procs[i].vals);
    free(m->procs);
    cm_u64map_free(&m->by_pid);
    cm_u64map_free(&m->sparse);
    memset(m, 0, sizeof *m);
}
