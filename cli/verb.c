/*
 * The verbs' registry and the helpers every verb shares (verb.h): how a verb speaks on stderr
 * (untrusted names sanitized), its progress bar, reading files into a store, symbolizing a loaded
 * store, and the end of a viewer session.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <inttypes.h>

#include "clock.h"
#include "import.h"
#include "load.h"
#include "store.h"
#include "synctop/file.h"
#include "synctop/net.h"
#include "symbols.h"
#include "synctop/sanitize.h"
#include "verb.h"
#include "viewer.h"

#define VERB_MAX 32

static const verb *verbs[VERB_MAX];
static int n_verbs;

void verb_register(const verb *v) {
    if (n_verbs < VERB_MAX)
        verbs[n_verbs++] = v;
}

/* The bar on the screen, taken off before any line is said. */
static verb_progress *bar_shown;

void verb_progress_init(verb_progress *p, const char *doing, int count, int tty) {
    memset(p, 0, sizeof *p);
    p->tty = tty;
    p->doing = doing;
    p->count = count;
    p->name = "";
    p->t0 = cm_now_s();
}

void verb_progress_next(verb_progress *p, int index, const char *name) {
    p->index = index;
    p->name = name;
}

int verb_progress_cb(void *ctx, uint64_t done, uint64_t total) {
    verb_progress *p = ctx;
    if (!p->tty)
        return 0;
    double t = cm_now_s();
    if (t - p->t0 < 0.5 || t - p->last < 0.1)
        return 0;
    p->last = t;
    p->shown = 1;
    bar_shown = p;
    if (total == 0 && done == 0) { /* an export: its rows are not counted in bytes */
        fprintf(stderr, "\r%s %d/%d ", p->doing, p->index, p->count);
    } else if (total == 0) { /* a pipe: how much, not how far */
        fprintf(stderr, "\r%s %d/%d %6.1f MB ", p->doing, p->index, p->count, (double)done / 1e6);
    } else {
        char bar[31];
        int pct = done >= total ? 100 : (int)(done * 100 / total);
        int fill = pct * 30 / 100;
        memset(bar, '#', (size_t)fill);
        memset(bar + fill, '.', (size_t)(30 - fill));
        bar[30] = '\0';
        fprintf(stderr, "\r%s %d/%d [%s] %3d%% %6.1f %s ", p->doing, p->index, p->count, bar, pct,
                (double)done / 1e6, p->events ? "M events" : "MB");
    }
    tp_print_sanitized(stderr, p->name, (size_t)-1);
    fprintf(stderr, "\033[K");
    fflush(stderr);
    return 0;
}

void verb_progress_events(void *ctx, uint64_t done, uint64_t total) {
    verb_progress *p = ctx;
    p->events = 1;
    verb_progress_cb(p, done, total);
}

void verb_progress_clear(verb_progress *p) {
    if (p->shown) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
        p->shown = 0;
    }
    if (bar_shown == p)
        bar_shown = NULL;
}

/* The bar while verb_read_files reads (ingest_reading_fn). */
static int read_progress(void *ctx, size_t index, const char *path, uint64_t done, uint64_t total) {
    verb_progress *bar = ctx;
    verb_progress_next(bar, (int)index + 1, strcmp(path, "/dev/stdin") == 0 ? "-" : path);
    return verb_progress_cb(bar, done, total);
}

int verb_read_files(const char *verb_name, st_store *s, const char *const *paths, size_t n, uint64_t max_events,
                    int align, size_t *left_out, err_msg *err) {
    /* a large profiler trace takes seconds to minutes: on a terminal, how far the reading is */
    verb_progress bar;
    verb_progress_init(&bar, "reading", (int)n, isatty(STDERR_FILENO));
    int rc = ingest_files_kept(s, paths, n, max_events, align, verb_warn_cb, (void *)verb_name, read_progress, &bar,
                               left_out, err);
    verb_progress_clear(&bar);
    return rc;
}

void verb_vline(const char *verb_name, const char *prefix, const char *fmt, va_list ap) {
    char msg[2048];
    if (bar_shown)
        verb_progress_clear(bar_shown);
    vsnprintf(msg, sizeof msg, fmt, ap);
    fprintf(stderr, "synctop %s: %s", verb_name, prefix);
    tp_print_sanitized(stderr, msg, (size_t)-1);
    fputc('\n', stderr);
}

int verb_error(const char *verb_name, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    verb_vline(verb_name, "", fmt, ap);
    va_end(ap);
    return 1;
}

void verb_warn(const char *verb_name, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    verb_vline(verb_name, "warning: ", fmt, ap);
    va_end(ap);
}

void verb_say(const char *verb_name, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    verb_vline(verb_name, "", fmt, ap);
    va_end(ap);
}

void verb_warn_cb(void *ctx, const char *msg) {
    verb_warn(ctx, "%s", msg);
}

void verb_refused_cb(void *ctx, const tp_sub *sub) {
    int own;
    const char *mine = tp_sub_client_key(sub, &own);
    verb_refused(ctx, tp_sub_handshake_failed(sub), tp_sub_client_refused(sub), mine, own);
}

void verb_refused(const char *verb_name, const char *endpoint, int client_refused, const char *mine, int own) {
    if (!client_refused && mine == NULL) /* we speak in the clear: no --server-key */
        verb_warn(verb_name, "%s refused our handshake: it publishes encrypted (CURVE); give --server-key with its "
                       "public key, the .pub file `synctop keygen` wrote beside its .key (still trying)", endpoint);
    else if (!client_refused)
        verb_warn(verb_name, "%s refused the encrypted handshake: is --server-key that publisher's public key, and does it "
                       "publish with keys? (still trying)", endpoint);
    else if (own)
        verb_warn(verb_name, "%s refused our client key %s: it admits only the clients its --clients list names; have "
                       "that key (its .pub file) added there, or give --client-key with a key it lists (not retried)",
                  endpoint, mine);
    else
        verb_warn(verb_name, "%s admits only the clients its --clients list names, and we have no client key: make one "
                       "with `synctop keygen --client` (then used by default) and have its .pub file added there, "
                       "or give --client-key (not retried)", endpoint);
}

int verb_client_key(const char *verb_name, const char *path, int server_key, tp_keypair *kp,
                    const tp_keypair **out) {
    err_msg err = {{0}};
    char def[PATH_MAX];
    struct stat st;
    *out = NULL;
    if (path != NULL && !server_key) {
        verb_error(verb_name, "--client-key goes with --server-key (a client key is only used with CURVE)");
        return EXIT_USAGE;
    }
    if (!server_key)
        return 0;
    if (path == NULL) {
        /* This user's own pair, when `synctop keygen --client` made one, as ssh takes ~/.ssh/id_*. */
        if (tp_client_key_base(def, sizeof def - 4, &err) != 0)
            return 0;
        strcat(def, ".key");
        if (stat(def, &st) != 0 && errno == ENOENT)
            return 0;
    }
    const char *file = path != NULL ? path : def;
    if (tp_keypair_load(kp, file, &err) != 0)
        return verb_error(verb_name, "%s%s", err.msg,
                          path != NULL ? "" : " (this user's client key; --client-key FILE takes another)");
    if (kp->secret_key[0] == '\0')
        return verb_error(verb_name, "--client-key %s is a public key: a client needs its .key file (both keys)",
                          file);
    *out = kp;
    return 0;
}

void verb_notice(const char *verb_name, const tp_sub_notice *n) {
    verb_warn(verb_name, "relay %s (%016" PRIx64 ") says: %s%s", n->host, n->relay, n->text,
              n->kind == TP_NOTICE_RECORDING_STOPPED ? "; the live stream goes on, and nothing received here is lost"
                                                     : "");
}

void verb_symbolize(const char *verb_name, st_store *s) {
    char changed[512];
    size_t n = sy_symbolize_store(s, changed, sizeof changed);
    if (n > 0)
        verb_warn(verb_name, "%s%s changed since the trace was taken (another build id): its frames are shown as "
                  "module+offset, not named", changed, n > 1 ? " and other modules" : "");
}

int verb_viewer_done(const char *verb_name, int rc, const viewer_result *r, const char *record_path) {
    if (r->record_failed)
        verb_error(verb_name, "the recording is incomplete: %s", r->record_err.msg);
    else if (r->recorded)
        verb_say(verb_name, "recorded %" PRIu64 " batches (%" PRIu64 " events) to %s", r->rec_batches, r->rec_events,
                 record_path);
    if (r->damaged > 0)
        verb_warn(verb_name, "%s (%" PRIu64 " damaged batch%s in all; `synctop info FILE` lists them)", r->damage,
                  r->damaged, r->damaged == 1 ? "" : "es");
    if (rc != 0 && r->err.msg[0])
        verb_error(verb_name, "%s", r->err.msg);
    return rc;
}

int verb_list(const verb ***out) {
    *out = verbs;
    return n_verbs;
}

void verb_put_skipped(FILE *out, const import_stats *st) {
    for (size_t i = 0; i < st->n_skip; i++) {
        fputs(i ? ", " : " (", out);
        tp_print_sanitized(out, st->skip[i].cat, (size_t)-1);
        fprintf(out, " %" PRIu64, st->skip[i].count);
    }
    if (st->skip_other)
        fprintf(out, "%sother %" PRIu64, st->n_skip ? ", " : " (", st->skip_other);
    if (st->n_skip || st->skip_other)
        fputc(')', out);
}

int verb_emit_to_file(void *ctx, const void *batch, size_t len, err_msg *err) {
    return tp_fwriter_append(ctx, batch, len, err);
}

void verb_say_clocks(const char *verb_name, const struct tp_sub *sub) {
    size_t n = tp_sub_clock_count(sub), said = 0;
    for (size_t i = 0; i < n; i++) {
        tp_sub_clock c;
        if (!tp_sub_clock_best(sub, i, &c))
            continue;
        if (said++ == 0)
            fprintf(stderr, "synctop %s: clocks against this machine's, as the relays answered: ", verb_name);
        else
            fputs("; ", stderr);
        tp_print_sanitized(stderr, c.host, (size_t)-1);
        fprintf(stderr, " %+.3f ms +/- %.3f ms", (double)c.offset_ns / 1e6, (double)c.uncertainty_ns / 1e6);
    }
    if (said > 0)
        fputs(" (kept in the file: replay and report put each host's processes on this machine's clock)\n", stderr);
}

volatile sig_atomic_t verb_stop_signal;

static void verb_on_signal(int sig) { verb_stop_signal = sig; }

void verb_signals_catch(verb_signals *saved) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = verb_on_signal;
    sigemptyset(&sa.sa_mask);
    verb_stop_signal = 0;
    sigaction(SIGINT, &sa, &saved->old_int);
    sigaction(SIGTERM, &sa, &saved->old_term);
}

void verb_signals_restore(const verb_signals *saved) {
    sigaction(SIGINT, &saved->old_int, NULL);
    sigaction(SIGTERM, &saved->old_term, NULL);
}

int verb_listen_resolve(const char *verb_name, const char *spec, char *out, size_t len) {
    err_msg err = {{0}};
    size_t n = strlen(spec);
    if (n > 0 && strspn(spec, "0123456789") == n)
        return verb_error(verb_name, "--listen %s: a number alone names a process's endpoint, not one to publish on; "
                                     "for a TCP port on this machine write :%s", spec, spec), EXIT_USAGE;
    if (tp_endpoint_resolve(spec, out, len, &err) < 0)
        return verb_error(verb_name, "--listen %s: %s", spec, err.msg), EXIT_USAGE;
    return 0;
}

int verb_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int verb_out_plan(const char *verb_name, const char *path, int force, const char *const *inputs, size_t n,
                  verb_out *o) {
    memset(o, 0, sizeof *o);
    o->path = path;
    if (path[0] == '\0')
        return verb_error(verb_name, "-o: an empty file name");
    for (size_t i = 0; i < n; i++)
        if (verb_same_file(inputs[i], path))
            return verb_error(verb_name, "-o %s: that is also an input; it would be lost", path);
    struct stat sb;
    if (snprintf(o->final, sizeof o->final, "%s", path) >= (int)sizeof o->final)
        return verb_error(verb_name, "-o %s: the name is too long", path);
    if (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode) && realpath(path, o->final) == NULL) {
        if (stat(path, &sb) != 0)
            return verb_error(verb_name, "-o %s: a symbolic link to nothing that can be written (%s)", path,
                              strerror(errno));
        snprintf(o->final, sizeof o->final, "%s", path); /* no path to follow (/dev/stdout to a pipe): through it */
    }
    if (stat(o->final, &sb) == 0) {
        if (S_ISDIR(sb.st_mode))
            return verb_error(verb_name, "-o %s: that is a directory; name a file", path);
        if (S_ISCHR(sb.st_mode) || S_ISFIFO(sb.st_mode)) {
            o->direct = 1;
            return 0;
        }
        if (!S_ISREG(sb.st_mode))
            return verb_error(verb_name, "-o %s: neither a file, a character device nor a pipe", path);
        if (!force)
            return verb_error(verb_name, "%s exists (use --force to replace it)", path);
    } else if (errno != ENOENT) {
        return verb_error(verb_name, "cannot write %s: %s", path, strerror(errno));
    }
    /* the directory it goes into, asked now rather than as the temporary file's failure */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", o->final);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    if (access(dir, W_OK) != 0)
        return verb_error(verb_name, "cannot write %s: %s%s", path, errno == ENOENT ? "no directory " : "",
                          errno == ENOENT ? dir : strerror(errno));
    snprintf(o->tmp, sizeof o->tmp, "%s.partial-%ld", o->final, (long)getpid());
    return 0;
}

const char *verb_out_target(const verb_out *o) {
    return o->direct ? o->final : o->tmp;
}

int verb_out_finish(const char *verb_name, verb_out *o, int ok) {
    if (o->direct)
        return 0;
    if (!ok) {
        unlink(o->tmp);
        return 0;
    }
    if (rename(o->tmp, o->final) != 0) {
        int e = errno;
        unlink(o->tmp);
        return verb_error(verb_name, "cannot put %s in place: %s", o->path, strerror(e));
    }
    return 0;
}

int verb_refuse_clear_listen(const char *verb_name, const char *ep, int have_key, int insecure, const char *who,
                             const char *then, const char *keybase) {
    if (have_key || insecure || strncmp(ep, "tcp://", 6) != 0 || tp_endpoint_is_loopback(ep) != 0)
        return 0;
    verb_error(verb_name,
               "--listen %s is not a loopback address: %s publishes beyond this machine only encrypted%s. Make keys "
               "(synctop keygen -o %s), then give --key %s.key (viewers: --server-key %s.pub), or add --insecure to "
               "publish in the clear",
               ep, who, then, keybase, keybase, keybase);
    return EXIT_USAGE;
}

int verb_no_such_pid(const char *verb_name, const char *spec) {
    if (spec[0] == '\0' || strspn(spec, "0123456789") != strlen(spec) || strlen(spec) > 9)
        return 0;
    if (kill((pid_t)strtol(spec, NULL, 10), 0) == 0 || errno != ESRCH)
        return 0;
    verb_error(verb_name, "no process %s (`synctop attach` with no argument shows every traced process of this "
                          "user)", spec);
    return 1;
}

void verb_say_unanswered(const char *verb_name, const char *const *endpoints, size_t n, double wait_s) {
    fprintf(stderr, "synctop %s: nothing answered at ", verb_name);
    for (size_t i = 0; i < n && i < 4; i++) {
        fputs(i ? ", " : "", stderr);
        tp_print_sanitized(stderr, endpoints[i], (size_t)-1);
    }
    fprintf(stderr, "%s in %g s: is the program running with the tracer (synctop run, or CUDA_INJECTION64_PATH) "
                    "and publishing there? (--wait SECONDS waits longer, --wait 0 for ever)\n",
            n > 4 ? " and more" : "", wait_s);
}
