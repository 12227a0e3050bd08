/*
 * Recording what a subscriber receives into a trace file (file.h): the trace-file writer, the
 * latch that the first failure sets, after which nothing more is written, and the hosts' clocks
 * appended last. The latch is atomic because a recording relay's stats are read from another
 * thread than the one that appends.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "synctop/file.h"
#include "synctop/net.h"

struct tp_recorder {
    tp_fwriter *w;
    atomic_int failed; /* 0, or the code that stopped the recording */
    err_msg why;       /* its reason (read after failed is set) */
};

tp_recorder *tp_recorder_open(const char *path, int flags, err_msg *err) {
    tp_recorder *r = calloc(1, sizeof *r);
    if (r == NULL) {
        err_set(err, ERR_NOMEM, "out of memory");
        return NULL;
    }
    if ((r->w = tp_fwriter_open(path, flags, err)) == NULL) {
        free(r);
        return NULL;
    }
    return r;
}

static int rec_latched(const tp_recorder *r, err_msg *err) {
    return err_set(err, atomic_load(&((tp_recorder *)r)->failed), "%s", r->why.msg);
}

/* Ends the recording on code rc, whose reason is in e. Returns rc. */
static int rec_latch(tp_recorder *r, int rc, const err_msg *e) {
    r->why = *e;
    atomic_store(&r->failed, rc);
    return rc;
}

int tp_recorder_append(tp_recorder *r, const void *batch, size_t len, err_msg *err) {
    if (atomic_load(&r->failed))
        return rec_latched(r, err);
    err_msg e = {{0}};
    int rc = tp_fwriter_append(r->w, batch, len, &e);
    if (rc != 0 && rc != ERR_MALFORMED)
        rec_latch(r, rc, &e);
    return rc == 0 ? 0 : err_set(err, rc, "%s", e.msg);
}

void tp_recorder_stop(tp_recorder *r, const err_msg *why) {
    if (!atomic_load(&r->failed))
        rec_latch(r, ERR_IO, why);
}

int tp_recorder_flush(tp_recorder *r, err_msg *err) {
    if (atomic_load(&r->failed))
        return rec_latched(r, err);
    err_msg e = {{0}};
    int rc = tp_fwriter_flush(r->w, &e);
    return rc == 0 ? 0 : err_set(err, rec_latch(r, rc, &e), "%s", e.msg);
}

int tp_recorder_failed(const tp_recorder *r) { return atomic_load(&((tp_recorder *)r)->failed) != 0; }

void tp_recorder_stats_get(const tp_recorder *r, tp_fwriter_stats *out) { tp_fwriter_stats_get(r->w, out); }

int tp_recorder_add_clocks(tp_recorder *r, const tp_sub *sub, err_msg *err) {
    tp_buf notes = {0};
    size_t hosts = tp_sub_clock_notes(sub, &notes);
    int rc = 0;
    if (hosts > 0 && atomic_load(&r->failed)) {
        rc = rec_latched(r, err);
    } else if (hosts > 0) {
        err_msg e = {{0}};
        if ((rc = tp_fwriter_append(r->w, notes.data, notes.len, &e)) != 0)
            err_set(err, rec_latch(r, rc, &e), "%s", e.msg);
    }
    tp_buf_free(&notes);
    return rc != 0 ? rc : (int)hosts;
}

int tp_recorder_close(tp_recorder **rp, err_msg *err) { return tp_recorder_close_stats(rp, NULL, err); }

int tp_recorder_close_stats(tp_recorder **rp, tp_fwriter_stats *out, err_msg *err) {
    tp_recorder *r = rp ? *rp : NULL;
    if (r == NULL)
        return 0;
    int rc;
    if (atomic_load(&r->failed)) {
        rc = err_set(err, ERR_IO, "%s", r->why.msg);
        tp_fwriter_close_stats(&r->w, out, NULL);
    } else {
        rc = tp_fwriter_close_stats(&r->w, out, err);
    }
    free(r);
    *rp = NULL;
    return rc;
}
