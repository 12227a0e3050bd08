/*
 * The synctop command's verbs. Each verb lives in its own cmd_*.c file and registers itself with
 * SYNCTOP_VERB, so main.c dispatches without knowing them and `synctop --help` lists them in the
 * order of their `rank`.
 */
#ifndef SYNCTOP_VERB_H
#define SYNCTOP_VERB_H

#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

typedef int (*verb_fn)(int argc, char **argv); /* argv[0] is the verb; returns the exit status */

typedef struct verb {
    const char *name;
    verb_fn fn;
    const char *synopsis; /* "record ENDPOINT... -o FILE" */
    const char *summary;  /* one line for `synctop --help` */
    int rank;             /* order in the help */
    int batch;            /* reads its sources, writes its result and exits (see main) */
} verb;

void verb_register(const verb *v);
/* The registered verbs, in registration order; returns their number. */
int verb_list(const verb ***out);

#define SYNCTOP_VERB(ident, ...)                                               \
    static const verb verb_##ident = {__VA_ARGS__};                            \
    __attribute__((constructor)) static void verb_register_##ident(void) {    \
        verb_register(&verb_##ident);                                          \
    }

/* Exit statuses of the verbs: 0 success, 1 the job failed or a check did not hold, 2 usage. */
enum { EXIT_USAGE = 2 };

/* How a verb speaks on stderr: one line, "synctop VERB: message", the message sanitized (it often
 * carries names from traces or peers). verb_error returns 1, the status of a failed job, so a verb
 * can `return verb_error(...)`; verb_warn says "warning: " first; verb_say is for progress and
 * results. Errors from the layers below arrive as an err_msg, printed with "%s". */
int verb_error(const char *verb_name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void verb_warn(const char *verb_name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void verb_say(const char *verb_name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* verb_warn as an importer's warning callback: ctx is the verb's name. */
void verb_warn_cb(void *ctx, const char *msg);
/* The warning for a publisher that refused the handshake (live_opts.on_refused): a wrong server
 * key, or our client key not on its list; ctx: the verb. */
struct tp_sub;
void verb_refused_cb(void *ctx, const struct tp_sub *sub);
/* The same from its parts (a relay's upstream): the endpoint that refused, whether it refused our
 * client key (mine, own: as tp_sub_client_key says them) rather than the server key. */
void verb_refused(const char *verb_name, const char *endpoint, int client_refused, const char *mine, int own);
/* The warning for a relay's notice (live_opts.on_notice): what it said, and that this stream is
 * whole. */
struct tp_sub_notice;
void verb_notice(const char *verb_name, const struct tp_sub_notice *n);
/* The client key pair of a verb that subscribes: --client-key's file (path) when given, else this
 * user's own (tp_client_key_base) when `synctop keygen --client` made it; none (*out NULL: a
 * throwaway pair) without --server-key or either. 0, or the verb's status with the reason said. */
struct tp_keypair;
int verb_client_key(const char *verb_name, const char *path, int server_key, struct tp_keypair *kp,
                    const struct tp_keypair **out);
/* Symbolizes a whole store's native frames, warning when a module changed since the trace was
 * taken (its frames stay module+offset). */
struct st_store;
void verb_symbolize(const char *verb_name, struct st_store *s);

/* Says how a viewer session ended (its error, what it recorded) and returns its status. */
struct viewer_result;
int verb_viewer_done(const char *verb_name, int rc, const struct viewer_result *r, const char *record_path);

/* What an import skipped, by category: " (cpu_instant_event 2450, ac2g 3629, other 3)", or nothing
 * when it skipped nothing it counted by category. */
struct import_stats;
void verb_put_skipped(FILE *out, const struct import_stats *st);
/* An importer's batches into a trace file (ctx: the tp_fwriter). */
struct err_msg;
int verb_emit_to_file(void *ctx, const void *batch, size_t len, struct err_msg *err);

/* A progress bar on stderr while a verb reads its sources ("importing 2/3 [###....]  40%  91.2 MB
 * name"): only on a terminal, from half a second after verb_progress_init, at most ten times a
 * second. Any line a verb says meanwhile (verb_error, verb_warn, verb_say) clears it first. */
typedef struct verb_progress {
    int tty, shown;
    int events;        /* done and total count events, not bytes (verb_progress_events) */
    const char *doing; /* "importing", "reading", "writing" */
    const char *name;  /* the source being read, or the file written */
    int index, count;  /* its place among the sources, from 1 */
    double t0, last;
} verb_progress;
/* doing: what the bar says it does; tty: whether it may draw (standard error is a terminal and the
 * user did not ask for quiet). */
void verb_progress_init(verb_progress *p, const char *doing, int count, int tty);
/* The source now read: index (from 1) and its name. */
void verb_progress_next(verb_progress *p, int index, const char *name);
/* An import_progress_fn (ctx: the verb_progress): draws the bar; never stops the reading. */
int verb_progress_cb(void *ctx, uint64_t done, uint64_t total);
/* The same for work counted in events (an export's rows written): "12.3 M events". */
void verb_progress_events(void *ctx, uint64_t done, uint64_t total);
/* Takes the bar off the screen, if it is there. */
void verb_progress_clear(verb_progress *p);

/* An output file named on the command line (import's trace file, export's JSON): written under a
 * temporary name beside it and renamed into place, so that a failed write leaves nothing half
 * written and --force replaces the old file only with a whole new one; a device or a FIFO
 * (/dev/null, a named pipe) is written in place, with or without --force; a symbolic link's target
 * is what is replaced. */
typedef struct verb_out {
    const char *path;     /* as given */
    char final[PATH_MAX]; /* what the file becomes: path, or the link's target */
    char tmp[PATH_MAX + 32];
    int direct;           /* written in place: open final itself */
} verb_out;
/* Where path goes; 0, or 1 with the reason said: a directory, a file that exists without force,
 * the output also an input (one of the n inputs), a directory that cannot be written. */
int verb_out_plan(const char *verb_name, const char *path, int force, const char *const *inputs, size_t n,
                  verb_out *o);
/* What to open for writing: final when direct, else tmp. */
const char *verb_out_target(const verb_out *o);
/* After the writing (ok: whole): the temporary file renamed into place, or removed. 0, or 1 with
 * the reason said. */
int verb_out_finish(const char *verb_name, verb_out *o, int ok);
/* Do a and b name the same file (both exist)? */
int verb_same_file(const char *a, const char *b);

/* Refuses (said, EXIT_USAGE) publishing in the clear on a resolved tcp:// listen endpoint beyond
 * loopback, with neither a key nor --insecure: who publishes (what it would then do, "" or ", and
 * ..."), and the keygen base name to suggest; 0 when it may go on. */
int verb_refuse_clear_listen(const char *verb_name, const char *ep, int have_key, int insecure, const char *who,
                             const char *then, const char *keybase);
/* --listen's endpoint (tp_endpoint_resolve) into out: 0, or EXIT_USAGE with the reason said (not an
 * endpoint, or a number alone, which names a process's endpoint: :PORT is meant). */
int verb_listen_resolve(const char *verb_name, const char *spec, char *out, size_t len);

/* Reads files (trace files, profiler traces, Nsight exports) into s as ingest_files does, several
 * at once on the cores the process may use, each placed as align says (INGEST_ALIGN_*; what
 * aligning did is said as a warning), the store committed; on a terminal with the progress bar
 * ("reading"). With left_out, a file that cannot be read is left out with a warning saying why and
 * the others read (ingest_files_kept; *left_out: how many); without, it ends the reading. 0, or
 * the ingest error (its message in err). */
struct st_store;
int verb_read_files(const char *verb_name, struct st_store *s, const char *const *paths, size_t n,
                    uint64_t max_events, int align, size_t *left_out, struct err_msg *err);

/* The clocks of the hosts above as the relays answered (tp_sub_clock), on one line, and that the
 * file keeps them: "synctop VERB: clocks against this machine's, as the relays answered: ...". */
void verb_say_clocks(const char *verb_name, const struct tp_sub *sub);

/* A verb that runs until Ctrl-C or kill: while caught, SIGINT and SIGTERM set verb_stop_signal (to
 * the signal) instead of ending the process; verb_signals_restore puts back what was there. */
extern volatile sig_atomic_t verb_stop_signal;
typedef struct verb_signals {
    struct sigaction old_int, old_term;
} verb_signals;
void verb_signals_catch(verb_signals *saved); /* also clears verb_stop_signal */
void verb_signals_restore(const verb_signals *saved);

/* The line itself, from a va_list (args.c's usage errors). */
void verb_vline(const char *verb_name, const char *prefix, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* For a source given as a pid: 1, with "no process PID" said, when no such process exists. */
int verb_no_such_pid(const char *verb_name, const char *spec);
/* What a verb says when nothing answered at its live sources within wait_s seconds (live.h). */
void verb_say_unanswered(const char *verb_name, const char *const *endpoints, size_t n, double wait_s);

#endif
