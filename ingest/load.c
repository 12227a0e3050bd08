/*
 * Filling a store from a file (load.h): the file's kind is told by its first bytes (a synctop trace
 * file's magic, an SQLite header for an Nsight Systems export, else a Kineto JSON, plain or gzip),
 * then a trace file is read batch by batch in file order, within a time budget per step, and a
 * Kineto trace or an Nsight Systems export is imported whole.
 */
#include "load.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ahead.h"
#include "io.h"
#include "kineto.h"
#include "nsys.h"
#include "synctop/file.h"

#define INGEST_EVENTS_PER_BYTE 4u        /* real traces: about one event per 11 bytes */
#define INGEST_EVENTS_FLOOR (1ull << 20)

#define SNIFF_BYTES 16 /* an input's first bytes, which tell its kind: a trace file's magic is as long */

typedef enum { SRC_TRACE = 1, SRC_KINETO = 2, SRC_NSYS = 3 } src_kind;

struct ingest_loader {
    ingest_loader **parts; /* several sources, loaded one after another (ingest_open_many) */
    size_t n_parts, cur;
    ing_ahead *ahead;      /* the parts read several at once (ahead.h), or NULL */
    int ahead_tried;       /* parts_ahead was called */
    uint32_t *part_prods;  /* per part: the store's producer count before it was read, then after */
    int align;             /* INGEST_ALIGN_* */
    char align_note[1024]; /* what align_parts did, "" when nothing */
    st_store *s;
    src_kind kind;
    char *path;
    tp_freader *r;
    uint64_t max_events;  /* events this trace file may add (ingest_max_events) */
    uint64_t max_events_flag; /* the caller's bound, 0: from the file's size */
    uint64_t events;      /* events it added so far */
    int fd;               /* a trace file or a Kineto JSON: its descriptor, and the bytes read to sniff */
    uint8_t head[SNIFF_BYTES];
    size_t n_head;
    size_t next, count;
    tp_buf buf;
    ingest_warn_fn warn;
    void *ctx;
    uint64_t t0, t1;
    size_t damaged;
    import_progress_fn progress; /* an import's reading progress (ingest_on_progress), or NULL */
    void *progress_ctx;
    int ops;     /* ingest_keep_ops */
    int threads; /* an import's threads (import_opts.threads): 0 for the default */
    int keep;    /* several sources: one that cannot be read is left out, the others read */
    import_stats st;     /* a profiler trace's or an export's import: what it skipped */
    uint32_t first_prod; /* the store's producers before this source's: those after are its own */
    unsigned char *left; /* per part: it was left out */
    size_t n_left;       /* sources left out, whether at opening or in the reading */
    size_t n_asked;      /* sources asked for */
};

/* Says that a source is left out, and why (warn). */
static void leave_out(ingest_loader *ld, const err_msg *why) {
    ld->n_left++;
    if (ld->warn != NULL) {
        char msg[700];
        snprintf(msg, sizeof msg, "left out: %s", why->msg);
        ld->warn(ld->ctx, msg);
    }
}

/* A JSON text (after a UTF-8 byte order mark and white space: an object or an array) or gzip. */
static int looks_like_json(const uint8_t *p, size_t n) {
    size_t i = 0;
    if (n >= 2 && p[0] == 0x1f && p[1] == 0x8b)
        return 1;
    if (n >= 3 && p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf)
        i = 3;
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
        i++;
    return i == n || p[i] == '{' || p[i] == '[';
}

/* The kind of an input from its first n bytes: 0 when it is none synctop reads. */
static src_kind kind_of(const uint8_t *head, size_t n) {
    if (n == SNIFF_BYTES && memcmp(head, TP_FILE_MAGIC, n) == 0)
        return SRC_TRACE;
    if (nsys_is_sqlite(head, n))
        return SRC_NSYS;
    return n == 0 || looks_like_json(head, n) ? SRC_KINETO : 0;
}

int ingest_kind(const char *path) {
    uint8_t head[SNIFF_BYTES];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return 0;
    struct stat st;
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? cm_read_full(fd, head, sizeof head, 0) : -1;
    close(fd);
    if (n <= 0)
        return 0;
    switch (kind_of(head, (size_t)n)) {
    case SRC_TRACE: return INGEST_TRACE;
    case SRC_NSYS: return INGEST_NSYS;
    case SRC_KINETO: return INGEST_KINETO;
    default: return 0;
    }
}

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcasecmp(s + n - t, tail) == 0;
}

/* Why an input of no kind synctop reads is refused: Nsight Systems' own report files are named
 * with what turns them into one that it reads. */
int ingest_unreadable(const char *path, err_msg *err) {
    int rc = ingest_nsight_report(path, err);
    if (rc != 0)
        return rc;
    return err_set(err, ERR_UNSUPPORTED,
                   "%s: neither a synctop trace file, an Nsight Systems SQLite export nor a PyTorch profiler "
                   "(Kineto) JSON, plain or gzip",
                   path);
}

int ingest_nsight_report(const char *path, err_msg *err) {
    if (ends_with(path, ".nsys-rep") || ends_with(path, ".qdrep"))
        return err_set(err, ERR_UNSUPPORTED,
                       "%s: an Nsight Systems report, which synctop reads once exported to SQLite: "
                       "nsys export --type sqlite %s (then give it the .sqlite file)",
                       path, path);
    if (ends_with(path, ".qdstrm"))
        return err_set(err, ERR_UNSUPPORTED,
                       "%s: an Nsight Systems capture that was never turned into a report: open it in Nsight "
                       "Systems (or its QdstrmImporter) to make a .nsys-rep, then nsys export --type sqlite",
                       path);
    return 0;
}

/* Opens the input and tells its kind from its first bytes. The descriptor and the bytes read stay
 * with the loader for the trace file's reader, or for the Kineto importer when the input is a pipe
 * (or standard input); a profiler trace in a regular file and an Nsight Systems export are opened
 * again by path when imported (SQLite opens its files itself). Never blocks in open(): a FIFO
 * nobody writes to reads as empty. */
static int sniff(ingest_loader *ld, const char *path, err_msg *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return err_set(err, errno == ENOENT ? ERR_NOENT : errno == EACCES ? ERR_PERM : ERR_IO, "%s: cannot open: %s",
                       path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
        close(fd);
        return err_set(err, ERR_INVAL, "%s: is a directory", path);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    ssize_t got = cm_read_full(fd, ld->head, sizeof ld->head, -1);
    size_t n = got > 0 ? (size_t)got : 0;
    ld->kind = kind_of(ld->head, n);
    int trace = ld->kind == SRC_TRACE, sqlite = ld->kind == SRC_NSYS;
    if (ld->kind == 0) {
        close(fd);
        return ingest_unreadable(path, err);
    }
    if (S_ISREG(st.st_mode) && ld->kind == SRC_KINETO && strcmp(path, "/dev/stdin") != 0) {
        close(fd); /* opened again by path when imported: a job's thousand files hold no descriptors meanwhile */
        return 0;
    }
    if (S_ISREG(st.st_mode) && !sqlite) {
        ld->fd = fd;
        ld->n_head = n;
        return 0;
    }
    if (S_ISREG(st.st_mode)) {
        close(fd);
        return 0;
    }
    if (n == 0) {
        close(fd);
        return err_set(err, ERR_MALFORMED, "%s: empty (a pipe or FIFO that nobody writes to?)", path);
    }
    if (trace || sqlite) {
        close(fd);
        return err_set(err, ERR_UNSUPPORTED, "%s: %s is read by offsets: give it as a regular file, not a pipe", path,
                       trace ? "a synctop trace file" : "an SQLite file");
    }
    ld->fd = fd;
    ld->n_head = n;
    return 0;
}

static void warn2(ingest_loader *ld, const char *a, const char *what, const char *b) {
    if (ld->warn == NULL)
        return;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s: %s%s", a, what, b);
    ld->warn(ld->ctx, msg);
}

uint64_t ingest_max_events(uint64_t file_bytes, uint64_t max_events) {
    if (max_events)
        return max_events;
    return file_bytes > (UINT64_MAX - INGEST_EVENTS_FLOOR) / INGEST_EVENTS_PER_BYTE
               ? UINT64_MAX
               : file_bytes * INGEST_EVENTS_PER_BYTE + INGEST_EVENTS_FLOOR;
}

static int over_budget(const ingest_loader *ld, uint64_t events, uint64_t max_events, err_msg *err) {
    if (max_events)
        return err_set(err, ERR_LIMIT, "%s: holds more than --max-events %llu events (a larger --max-events N reads it)", ld->path,
                       (unsigned long long)max_events);
    return err_set(err, ERR_LIMIT,
                   "%s: %llu events in %llu bytes is more than a trace file can hold (%u per byte at most): "
                   "it looks made to exhaust memory; --max-events N reads up to N events anyway",
                   ld->path, (unsigned long long)events, (unsigned long long)tp_freader_size(ld->r),
                   INGEST_EVENTS_PER_BYTE);
}

ingest_loader *ingest_open(st_store *s, const char *path, ingest_warn_fn warn, void *ctx, err_msg *err) {
    return ingest_open_max(s, path, 0, warn, ctx, err);
}

ingest_loader *ingest_open_max(st_store *s, const char *path, uint64_t max_events, ingest_warn_fn warn, void *ctx,
                               err_msg *err) {
    /* "-" is standard input, opened again by name: a regular file (a redirection, a memfd) is read
     * from its start and by offsets as any file, an SQLite export too; a pipe is read as it comes. */
    if (strcmp(path, "-") == 0)
        path = "/dev/stdin";
    ingest_loader *ld = calloc(1, sizeof *ld);
    if (ld == NULL || (ld->path = strdup(path)) == NULL) {
        free(ld);
        err_set(err, ERR_NOMEM, "out of memory");
        return NULL;
    }
    ld->fd = -1;
    ld->s = s;
    ld->first_prod = (uint32_t)st_producer_count(s);
    ld->warn = warn;
    ld->ctx = ctx;
    if (sniff(ld, path, err) != 0) {
        free(ld->path);
        free(ld);
        return NULL;
    }
    ld->max_events_flag = max_events;
    if (ld->kind == SRC_TRACE) {
        ld->r = tp_freader_open_fd(ld->fd, path, 0, err);
        ld->fd = -1;
        if (ld->r == NULL) {
            free(ld->path);
            free(ld);
            return NULL;
        }
        ld->count = tp_freader_count(ld->r);
        ld->max_events = ingest_max_events(tp_freader_size(ld->r), max_events);
        uint64_t declared = 0;
        for (size_t i = 0; i < ld->count; i++)
            declared += tp_freader_entry(ld->r, i)->n_events;
        if (declared > ld->max_events) {
            over_budget(ld, declared, max_events, err);
            tp_freader_close(&ld->r);
            free(ld->path);
            free(ld);
            return NULL;
        }
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

static ingest_loader *open_many(st_store *s, const char *const *paths, size_t n, uint64_t max_events,
                                ingest_warn_fn warn, void *ctx, int keep, err_msg *err) {
    if (n == 1)
        return ingest_open_max(s, paths[0], max_events, warn, ctx, err);
    ingest_loader *ld = calloc(1, sizeof *ld);
    if (ld == NULL || (ld->parts = calloc(n ? n : 1, sizeof *ld->parts)) == NULL) {
        free(ld);
        err_set(err, ERR_NOMEM, "out of memory");
        return NULL;
    }
    ld->fd = -1;
    ld->s = s;
    ld->warn = warn;
    ld->ctx = ctx;
    ld->keep = keep;
    ld->n_asked = n;
    if ((ld->part_prods = calloc(2 * (n ? n : 1), sizeof *ld->part_prods)) == NULL ||
        (ld->left = calloc(n ? n : 1, 1)) == NULL) {
        ingest_close(&ld);
        err_set(err, ERR_NOMEM, "out of memory");
        return NULL;
    }
    ld->part_prods[0] = (uint32_t)st_producer_count(s);
    for (size_t i = 0; i < n; i++) {
        ingest_loader *part = ingest_open_max(s, paths[i], max_events, warn, ctx, err);
        if (part == NULL && keep) {
            leave_out(ld, err);
            continue;
        }
        if (part == NULL) {
            ingest_close(&ld);
            return NULL;
        }
        ld->parts[ld->n_parts++] = part;
        if (part->r != NULL) /* its index is read: no descriptor held until its turn */
            tp_freader_release(part->r);
    }
    if (ld->n_parts == 0) {
        ingest_close(&ld);
        err_set(err, ERR_IO, "none of the %zu sources could be read", n);
        return NULL;
    }
    return ld;
}

ingest_loader *ingest_open_many(st_store *s, const char *const *paths, size_t n, uint64_t max_events,
                                ingest_warn_fn warn, void *ctx, err_msg *err) {
    return open_many(s, paths, n, max_events, warn, ctx, 0, err);
}

void ingest_set_align(ingest_loader *ld, int mode) { ld->align = mode; }

const char *ingest_align_note(const ingest_loader *ld) { return ld->align_note; }

int ingest_align_parse(const char *word) {
    return strcmp(word, "auto") == 0    ? INGEST_ALIGN_AUTO
           : strcmp(word, "start") == 0 ? INGEST_ALIGN_START
           : strcmp(word, "clock") == 0 ? INGEST_ALIGN_CLOCK
                                        : -1;
}

static int part_cmp(const void *a, const void *b) {
    const uint64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Once every part is read: each part at its own start, when asked or when no two overlap. A part
 * that added no producer of its own (its events went to one an earlier part made) cannot move
 * alone, and then none moves. */
static void align_parts(ingest_loader *ld) {
    size_t n = ld->n_parts;
    if (n < 2 || ld->align == INGEST_ALIGN_CLOCK)
        return;
    uint64_t (*sp)[3] = calloc(n, sizeof *sp); /* t0, t1, part */
    if (sp == NULL)
        return;
    size_t m = 0;
    int shared = 0;
    for (size_t i = 0; i < n; i++) {
        if (ld->left[i])
            continue;
        uint32_t a = ld->part_prods[2 * i], b = ld->part_prods[2 * i + 1];
        uint64_t t0 = UINT64_MAX, t1 = 0;
        for (uint32_t p = a; p < b; p++) {
            uint64_t x, y;
            st_producer_span(ld->s, p, &x, &y);
            if (y == 0)
                continue;
            t0 = x < t0 ? x : t0;
            t1 = y > t1 ? y : t1;
        }
        if (t1 == 0) {
            shared |= st_store_events(ld->s) > 0 && a == b;
            continue;
        }
        sp[m][0] = t0, sp[m][1] = t1, sp[m][2] = i;
        m++;
    }
    qsort(sp, m, sizeof *sp, part_cmp);
    int overlap = 0;
    for (size_t i = 1; i < m; i++)
        overlap |= sp[i][0] < sp[i - 1][1];
    if (m < 2 || shared || (overlap && ld->align == INGEST_ALIGN_AUTO)) {
        free(sp);
        return;
    }
    uint64_t base = sp[0][0];
    for (size_t i = 1; i < m; i++) {
        size_t part = (size_t)sp[i][2];
        int64_t by = (int64_t)(sp[i][0] - base);
        for (uint32_t p = ld->part_prods[2 * part]; p < ld->part_prods[2 * part + 1]; p++)
            st_store_shift_producer(ld->s, p, st_producer_get(ld->s, p)->clock_shift_ns + by);
    }
    snprintf(ld->align_note, sizeof ld->align_note,
             "%s: each put at its own start (%s began %.3f s after %s); --align clock keeps them where their "
             "clocks put them",
             overlap ? "--align start" : "the sources do not overlap in time and share no known clock",
             ld->parts[sp[m - 1][2]]->path, (double)(sp[m - 1][0] - base) / 1e9, ld->parts[sp[0][2]]->path);
    free(sp);
}

int ingest_import_path(const char *path, int kind, const import_opts *o, import_emit_fn emit, void *ctx,
                       import_stats *st, err_msg *err) {
    return kind == INGEST_NSYS ? nsys_import(path, o, emit, ctx, st, err) : kineto_import(path, o, emit, ctx, st, err);
}

/* Imports a profiler trace or an Nsight Systems export, with emit receiving its batches and st its
 * figures. */
static int import_part(ingest_loader *ld, const import_opts *o, import_emit_fn emit, void *ctx, import_stats *st,
                       err_msg *err) {
    import_opts opts = *o;
    opts.max_events = ld->max_events_flag; /* the caller's bound, else the importer's own */
    if (ld->kind == SRC_KINETO && ld->fd >= 0) /* a pipe, or standard input */
        return kineto_import_fd(ld->fd, ld->head, ld->n_head, ld->path, &opts, emit, ctx, st, err);
    return ingest_import_path(ld->path, ld->kind == SRC_NSYS ? INGEST_NSYS : INGEST_KINETO, &opts, emit, ctx, st,
                              err);
}

/* Says what an import skipped as unusable (import says the same), so that a report of a damaged
 * trace does not pass for a whole one. */
static void say_unusable(ingest_loader *ld, const import_stats *st) {
    if (st->invalid == 0 || ld->warn == NULL)
        return;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s: skipped %" PRIu64 " unusable entr%s; the first: %s", ld->path, st->invalid,
             st->invalid == 1 ? "y" : "ies", st->first_invalid);
    ld->warn(ld->ctx, msg);
}

/* Part i of a multi-source loader, read ahead on a worker (ahead.h). */
static int read_part(void *ctx, size_t i, const import_opts *o, import_emit_fn emit, void *emit_ctx,
                     import_stats *st, err_msg *err) {
    ingest_loader *part = ((ingest_loader *)ctx)->parts[i];
    import_opts opts = *o;
    opts.ops = part->ops;
    return import_part(part, &opts, emit, emit_ctx, st, err);
}

/* The profiler traces and Nsight exports among the parts are read several at once (ahead.h); the
 * others (trace files) are read in steps by the calling thread. Returns 0, or -1 when out of
 * memory. */
static int parts_ahead(ingest_loader *ld) {
    uint8_t *may = calloc(ld->n_parts, 1);
    if (may == NULL)
        return -1;
    for (size_t i = 0; i < ld->n_parts; i++)
        may[i] = ld->parts[i]->kind == SRC_KINETO || ld->parts[i]->kind == SRC_NSYS;
    int nomem;
    ld->ahead = ahead_start(ld->n_parts, may, import_threads(ld->threads), read_part, ld, &nomem);
    free(may);
    if (ld->ahead)
        for (size_t i = 0; i < ld->n_parts; i++)
            ld->parts[i]->threads = ahead_threads_each(ld->ahead);
    return nomem ? -1 : 0;
}

int ingest_step(ingest_loader *ld, double budget_s, err_msg *err) {
    if (ld->parts != NULL) {
        if (!ld->ahead_tried) {
            ld->ahead_tried = 1;
            if (parts_ahead(ld) != 0)
                return err_set(err, ERR_NOMEM, "out of memory");
        }
        while (ld->cur < ld->n_parts) {
            ingest_loader *part = ld->parts[ld->cur];
            part->first_prod = ld->part_prods[2 * ld->cur];
            int r = ld->ahead ? ahead_take(ld->ahead, ld->cur, kineto_emit, ld->s, &part->st, part->progress,
                                           part->progress_ctx, part->path, err)
                              : AHEAD_MINE;
            if (r == AHEAD_MINE)
                r = ingest_step(part, budget_s, err); /* which says what it skipped */
            else if (r > 0)
                say_unusable(part, &part->st);
            ld->part_prods[2 * ld->cur + 1] = (uint32_t)st_producer_count(ld->s);
            if (r < 0 && ld->keep && r != ERR_NOMEM && r != ERR_EOF) { /* not out of memory, not cancelled */
                leave_out(ld, err);
                ld->left[ld->cur] = 1;
                if (ld->n_left == ld->n_asked)
                    return err_set(err, ERR_IO, "none of the %zu sources could be read", ld->n_asked);
                r = 1;
            }
            if (r <= 0)
                return r;
            /* read whole, or left out: what it gave is all there is of its processes */
            st_store_producers_read(ld->s, part->first_prod);
            if (part->r != NULL)
                tp_freader_release(part->r);
            ld->cur++;
            if (ld->cur < ld->n_parts) /* the next part's producers come after this one's */
                ld->part_prods[2 * ld->cur] = ld->part_prods[2 * ld->cur - 1];
            if (ld->cur >= ld->n_parts)
                align_parts(ld);
            if (budget_s > 0)
                return ld->cur >= ld->n_parts;
        }
        return 1;
    }
    if (ld->next >= ld->count)
        return 1;
    if (ld->kind == SRC_NSYS || ld->kind == SRC_KINETO) {
        ld->next = 1;
        import_opts o = {
            .ops = ld->ops, .threads = ld->threads, .progress = ld->progress, .progress_ctx = ld->progress_ctx};
        int rc = import_part(ld, &o, kineto_emit, ld->s, &ld->st, err);
        if (rc == 0) {
            say_unusable(ld, &ld->st);
            st_store_producers_read(ld->s, ld->first_prod);
        }
        return rc ? rc : 1;
    }
    int rc = tp_freader_reacquire(ld->r, err); /* released while other files were read */
    if (rc != 0)
        return rc;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double start = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    while (ld->next < ld->count) {
        size_t i = ld->next++;
        err_msg why;
        if (ld->events + tp_freader_entry(ld->r, i)->n_events > ld->max_events)
            return over_budget(ld, ld->events + tp_freader_entry(ld->r, i)->n_events, ld->max_events_flag, err);
        size_t before = st_store_events(ld->s);
        if (tp_freader_read(ld->r, i, &ld->buf, &why) != 0 || st_store_add_batch(ld->s, ld->buf.data, ld->buf.len, &why) != 0) {
            if (why.msg[0] == '\0')
                snprintf(why.msg, sizeof why.msg, "unreadable batch");
            ld->damaged++;
            warn2(ld, ld->path, "skipped a damaged batch: ", why.msg);
        }
        size_t after = st_store_events(ld->s);
        ld->events += after > before ? after - before : 0;
        if (ld->events > ld->max_events) /* more than its index said */
            return over_budget(ld, ld->events, ld->max_events_flag, err);
        if ((i & 15) == 15 && budget_s > 0) {
            clock_gettime(CLOCK_MONOTONIC, &ts);
            if ((double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 - start >= budget_s)
                break;
        }
    }
    if (ld->next < ld->count)
        return 0;
    st_store_producers_read(ld->s, ld->first_prod);
    return 1;
}

void ingest_on_progress(ingest_loader *ld, import_progress_fn fn, void *ctx) {
    for (size_t i = 0; i < ld->n_parts; i++)
        ingest_on_progress(ld->parts[i], fn, ctx);
    ld->progress = fn;
    ld->progress_ctx = ctx;
}

void ingest_set_threads(ingest_loader *ld, int threads) {
    for (size_t i = 0; i < ld->n_parts; i++)
        ingest_set_threads(ld->parts[i], threads);
    ld->threads = threads;
}

void ingest_keep_ops(ingest_loader *ld) {
    for (size_t i = 0; i < ld->n_parts; i++)
        ingest_keep_ops(ld->parts[i]);
    ld->ops = 1;
}

double ingest_progress(const ingest_loader *ld) {
    if (ld->parts != NULL)
        return ld->cur >= ld->n_parts ? 1.0
                                      : ((double)ld->cur + ingest_progress(ld->parts[ld->cur])) / (double)ld->n_parts;
    return ld->count ? (double)ld->next / (double)ld->count : 1.0;
}

void ingest_span(const ingest_loader *ld, uint64_t *t0, uint64_t *t1) {
    if (ld->parts != NULL) { /* the union of the spans known (a Kineto JSON's is not, before it is read) */
        *t0 = *t1 = 0;
        for (size_t i = 0; i < ld->n_parts; i++) {
            uint64_t a, b;
            ingest_span(ld->parts[i], &a, &b);
            if (b == 0)
                continue;
            if (*t1 == 0 || a < *t0)
                *t0 = a;
            if (b > *t1)
                *t1 = b;
        }
        return;
    }
    *t0 = ld->t0;
    *t1 = ld->t1;
}

void ingest_close(ingest_loader **ldp) {
    if (ldp == NULL || *ldp == NULL)
        return;
    ingest_loader *ld = *ldp;
    ahead_end(&ld->ahead);
    for (size_t i = 0; i < ld->n_parts; i++)
        ingest_close(&ld->parts[i]);
    free(ld->parts);
    free(ld->part_prods);
    free(ld->left);
    tp_freader_close(&ld->r);
    if (ld->fd >= 0)
        close(ld->fd);
    tp_buf_free(&ld->buf);
    free(ld->path);
    free(ld);
    *ldp = NULL;
}

int ingest_file(st_store *s, const char *path, ingest_warn_fn warn, void *ctx, err_msg *err) {
    return ingest_file_max(s, path, 0, warn, ctx, err);
}

int ingest_file_max(st_store *s, const char *path, uint64_t max_events, ingest_warn_fn warn, void *ctx, err_msg *err) {
    return ingest_files(s, &path, 1, max_events, INGEST_ALIGN_CLOCK, warn, ctx, err);
}

int ingest_files(st_store *s, const char *const *paths, size_t n, uint64_t max_events, int align, ingest_warn_fn warn,
                 void *ctx, err_msg *err) {
    return ingest_files_told(s, paths, n, max_events, align, warn, ctx, NULL, NULL, err);
}

/* The import progress of ingest_files_told's loader, as its caller's reading_fn hears it. */
typedef struct told {
    const ingest_loader *ld;
    ingest_reading_fn fn;
    void *ctx;
} told;

static int tell(void *ctx, uint64_t done, uint64_t total) {
    const told *t = ctx;
    const ingest_loader *ld = t->ld;
    if (ld->parts == NULL)
        return t->fn(t->ctx, 0, ld->path, done, total);
    size_t i = ld->cur < ld->n_parts ? ld->cur : ld->n_parts - 1; /* n_parts > 0: it is reading */
    return t->fn(t->ctx, i, ld->parts[i]->path, done, total);
}

int ingest_files_told(st_store *s, const char *const *paths, size_t n, uint64_t max_events, int align,
                      ingest_warn_fn warn, void *ctx, ingest_reading_fn reading, void *reading_ctx, err_msg *err) {
    return ingest_files_kept(s, paths, n, max_events, align, warn, ctx, reading, reading_ctx, NULL, err);
}

int ingest_files_kept(st_store *s, const char *const *paths, size_t n, uint64_t max_events, int align,
                      ingest_warn_fn warn, void *ctx, ingest_reading_fn reading, void *reading_ctx, size_t *left_out,
                      err_msg *err) {
    ingest_loader *ld = open_many(s, paths, n, max_events, warn, ctx, left_out != NULL, err);
    if (ld == NULL)
        return ERR_IO;
    ingest_set_align(ld, align);
    told t = {ld, reading, reading_ctx};
    if (reading)
        ingest_on_progress(ld, tell, &t);
    int rc;
    while ((rc = ingest_step(ld, 0, err)) == 0)
        ;
    if (rc > 0 && ld->align_note[0] && warn)
        warn(ctx, ld->align_note);
    if (left_out != NULL)
        *left_out = ld->n_left;
    ingest_close(&ld);
    if (rc < 0)
        return rc;
    st_store_commit(s);
    st_store_shrink(s);
    return 0;
}
