/*
 * Filling a store from a file (load.h): the file's kind is told by its first bytes (a synctop trace
 * file's magic, else a Kineto JSON, plain or gzip), then a trace file is read batch by batch in file
 * order, within a time budget per step, and a Kineto trace is imported whole.
 */
#include "load.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kineto.h"
#include "synctop/file.h"

typedef enum { SRC_TRACE = 1, SRC_KINETO = 2 } src_kind;

struct ingest_loader {
    st_store *s;
    src_kind kind;
    char *path;
    tp_freader *r;
    size_t next, count;
    tp_buf buf;
    ingest_warn_fn warn;
    void *ctx;
    uint64_t t0, t1;
    size_t damaged;
};

static int is_trace_file(const char *path) {
    char magic[16];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, magic, sizeof magic);
    close(fd);
    return n == (ssize_t)sizeof magic && memcmp(magic, TP_FILE_MAGIC, sizeof magic) == 0;
}

static void warn2(ingest_loader *ld, const char *a, const char *what, const char *b) {
    if (ld->warn == NULL)
        return;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s: %s%s", a, what, b);
    ld->warn(ld->ctx, msg);
}

ingest_loader *ingest_open(st_store *s, const char *path, ingest_warn_fn warn, void *ctx, err_msg *err) {
    int t = is_trace_file(path);
    if (t < 0) {
        err_set(err, ERR_IO, "cannot open %s", path);
        return NULL;
    }
    ingest_loader *ld = calloc(1, sizeof *ld);
    if (ld == NULL || (ld->path = strdup(path)) == NULL) {
        free(ld);
        err_set(err, ERR_NOMEM, "out of memory");
        return NULL;
    }
    ld->s = s;
    ld->warn = warn;
    ld->ctx = ctx;
    ld->kind = t ? SRC_TRACE : SRC_KINETO;
    if (ld->kind == SRC_TRACE) {
        ld->r = tp_freader_open(path, err);
        if (ld->r == NULL) {
            free(ld->path);
            free(ld);
            return NULL;
        }
        ld->count = tp_freader_count(ld->r);
        ld->t0 = UINT64_MAX;
        for (size_t i = 0; i < ld->count; i++) {
            const tp_findex_entry *e = tp_freader_entry(ld->r, i);
            if (e->n_events == 0 || (e->flags & TP_BF_SYNTHETIC))
                continue;
            if (e->t_min < ld->t0)
                ld->t0 = e->t_min;
            if (e->t_max > ld->t1)
                ld->t1 = e->t_max;
        }
        if (ld->t0 == UINT64_MAX)
            ld->t0 = ld->t1 = 0;
        for (size_t i = 0; i < tp_freader_problem_count(ld->r); i++)
            warn2(ld, path, "", tp_freader_problem(ld->r, i)->what);
    } else {
        ld->count = 1;
    }
    return ld;
}

static int kineto_emit(void *ctx, const void *batch, size_t len, err_msg *err) {
    return st_store_add_batch(ctx, batch, len, err);
}

int ingest_step(ingest_loader *ld, double budget_s, err_msg *err) {
    if (ld->next >= ld->count)
        return 1;
    if (ld->kind == SRC_KINETO) {
        ld->next = 1;
        int rc = kineto_import(ld->path, NULL, kineto_emit, ld->s, NULL, err);
        return rc ? rc : 1;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double start = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    while (ld->next < ld->count) {
        size_t i = ld->next++;
        err_msg why;
        if (tp_freader_read(ld->r, i, &ld->buf, &why) != 0 || st_store_add_batch(ld->s, ld->buf.data, ld->buf.len, &why) != 0) {
            if (why.msg[0] == '\0')
                snprintf(why.msg, sizeof why.msg, "unreadable batch");
            ld->damaged++;
            warn2(ld, ld->path, "skipped a damaged batch: ", why.msg);
        }
        if ((i & 15) == 15 && budget_s > 0) {
            clock_gettime(CLOCK_MONOTONIC, &ts);
            if ((double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 - start >= budget_s)
                break;
        }
    }
    return ld->next >= ld->count;
}

double ingest_progress(const ingest_loader *ld) {
    return ld->count ? (double)ld->next / (double)ld->count : 1.0;
}

void ingest_span(const ingest_loader *ld, uint64_t *t0, uint64_t *t1) {
    *t0 = ld->t0;
    *t1 = ld->t1;
}

void ingest_close(ingest_loader **ldp) {
    if (ldp == NULL || *ldp == NULL)
        return;
    ingest_loader *ld = *ldp;
    tp_freader_close(&ld->r);
    tp_buf_free(&ld->buf);
    free(ld->path);
    free(ld);
    *ldp = NULL;
}

int ingest_file(st_store *s, const char *path, ingest_warn_fn warn, void *ctx, err_msg *err) {
    ingest_loader *ld = ingest_open(s, path, warn, ctx, err);
    if (ld == NULL)
        return ERR_IO;
    int rc;
    while ((rc = ingest_step(ld, 0, err)) == 0)
        ;
    ingest_close(&ld);
    if (rc < 0)
        return rc;
    st_store_commit(s);
    st_store_shrink(s);
    return 0;
}
