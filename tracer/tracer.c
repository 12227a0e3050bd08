/*
 * libsynctop-tracer.so: the library the CUDA driver loads into a program through
 * CUDA_INJECTION64_PATH. It exports InitializeInjection, InitializeInjectionNvtx2 for
 * NVTX_INJECTION64_PATH (which `synctop run` points here too: NVTX is handed to the CUPTI the
 * tracer uses, cupti_load.h, so that a process never has two CUPTIs), and the start, stop and
 * status of synctop/tracer.h, which `synctop attach` and `synctop detach` call in a running
 * process. Nothing else is exported.
 *
 * This file is the lifecycle: the entry points, the settings and the CUPTI loaded, starting and
 * stopping a session, exit and fork. The rest is held by its owners, each beside the code that uses
 * it (tracer_int.h says what crosses between them): CUPTI's callbacks on the application's threads
 * (callbacks.c: they only read a clock and copy a few words into a lock-free queue), its activity
 * buffers (buffers.c), what CUPTI is asked for (enable.c), the flush thread that owns everything
 * else (flush.c: the encoder, the publisher, the trace file, symbolization), and how the others
 * reach it (wake.c).
 *
 * Lifecycle. A session of tracing starts at InitializeInjection, or later in a running process at
 * synctop_tracer_start (on a thread of its own; CUPTI is then asked to dump the records of the
 * contexts and streams that exist, and CUPTI is flushed as if a context were alive, since none was
 * seen created), and ends at exit, or at synctop_tracer_stop: the flush thread then turns
 * collection and the activity kinds off, takes CUPTI's records out, ships the last batch,
 * unsubscribes, frees what the session used and ends, detached; a later start begins a new session
 * (the host-call queue and what CUPTI was told once stay). Starting: InitializeInjection loads CUPTI, asks for system thread ids in its records (the
 * callbacks' gettid, so that launches, NVTX ranges and waits of one thread share a lane), claims
 * the trace file (record_path.h), subscribes, binds the publisher, enables activity and callbacks,
 * and starts the flush thread; any failure prints one line (unless SYNCTOP_QUIET) and leaves the
 * program untraced and untouched. SYNCTOP_VERBOSE=1 adds a few lines: which libcupti and why, its
 * version, what was detected.
 * Python: when the host is CPython, blocking calls also carry the calling thread's Python frames
 * (pyframes.h), read without the GIL; nothing is said when it is not, or is a version the tracer
 * does not read (call sites are then native only).
 *
 * End of data, in the order it happens at a normal exit:
 * - An exit handler (atexit, registered at injection: it runs before CUPTI's destructors, and
 *   usually before the CUDA runtime's own exit handlers) forces CUPTI's buffers out,
 *   incomplete ones included, and waits, bounded, until they are shipped. NVIDIA's CUPTI samples
 *   flush at exit the same way; without it a program that never destroys its context (most
 *   PyTorch programs) would lose what CUPTI held at exit. From then on the flush thread calls no
 *   CUPTI function but walking buffers it owns (CUPTI's destructors may run at any time now).
 * - CUPTI's resource callback for context destruction (cudaDeviceReset, cuCtxDestroy, the runtime
 *   releasing its primary contexts at exit) force-flushes that context's records while it still
 *   exists and waits, bounded, until the flush thread has shipped them.
 * - The final batch (TP_BF_END) is written by a destructor of this library, which cannot run
 *   before the runtime's exit handlers, and is safe by what it does not do: it calls no CUPTI
 *   function that touches CUPTI's state, it does nothing in a forked child or when tracing never
 *   started, and it waits for the flush thread a bounded time (SYNCTOP_LINGER_MS + 2 s), leaving
 *   it be rather than freeing what it still uses. The flush thread itself stops calling CUPTI's
 *   stateful functions once no context is alive.
 * What a program loses when it does not exit normally (_exit, os._exit, abort, a fatal signal):
 * at most one flush period (SYNCTOP_FLUSH_MS) of records, since the flush thread ships and writes
 * the trace file through to the kernel every round; such a trace file has no END batch and no
 * footer, and readers recover it by scanning. No signal handler is ever installed.
 * fork: costs the parent nothing but a wake-up of the flush thread (no CUPTI call, no wait: a
 * program that forks workers every epoch must not pay a flush each time); a parent that forks and
 * leaves with _exit loses at most a flush period, as any _exit does. The child handler turns every
 * callback into an immediate return, so a child never calls CUPTI (it has no flush thread, and
 * CUPTI in a forked child can hang). Neither the exit handler nor the destructor does anything in
 * a child.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pyframes.h"
#include "stackscan.h"
#include "synctop/tracer.h"
#include "tracer_int.h"

/* The settings and the CUPTI loaded: the lifecycle's, read by every part during a session. */
static tr_config cfg;
static tr_cupti cupti;
/* The host-call queue: made at the first start, kept (a callback may still hold it). */
static tr_hostq *hostq;
static pid_t pid;     /* the traced process (a forked child is not) */
static char why[600]; /* the line said when tracing did not start (synctop_tracer_status) */

/* ---- what the tracer says ---- */

/* The one line a tracer that steps aside prints. */
static void notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void notice(const char *fmt, ...) {
    static atomic_flag said = ATOMIC_FLAG_INIT;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (cfg.quiet || atomic_flag_test_and_set(&said))
        return;
    fprintf(stderr, "synctop: %s\n", why);
}

/* ---- exit and fork ---- */

/* pthread_atfork prepare: a wake-up, so that what is queued leaves soon; nothing that waits. */
static void before_fork(void) {
    if (tr_callbacks_state() == TR_ON && getpid() == pid)
        tr_wake_kick();
}

/* atexit: runs before the destructors of every library loaded until then (CUPTI's included: it is
 * registered after CUPTI is loaded and subscribed), so CUPTI is still there, and usually before the
 * CUDA runtime's own exit handlers (ours is registered during cuInit, theirs when the runtime
 * starts); when theirs run first they destroy the contexts, whose callbacks have flushed already,
 * and this only waits for the shipping. Either way a program that never destroys its context loses
 * nothing that CUPTI has recorded. NVIDIA's CUPTI samples force a flush at exit the same way. The
 * flush thread keeps running (context destruction may follow), but without calling CUPTI. */
static void at_exit(void) {
    if (tr_callbacks_state() != TR_ON || getpid() != pid)
        return;
    if (tr_callbacks_contexts_alive()) {
        cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        tr_callbacks_count_drops();
    }
    tr_flush_exiting();
    tr_wake_drain_sync(TR_DRAIN_WAIT_MS);
}

static void in_child(void) {
    tr_callbacks_set_collecting(0);
    tr_callbacks_set_state(TR_FORKED);
}

/* Runs at exit (see the top of the file for why a destructor and why it is safe). */
__attribute__((destructor)) static void tracer_fini(void) {
    if (tr_callbacks_state() != TR_ON || getpid() != pid)
        return;
    tr_flush_exiting();
    tr_flush_end(cfg.linger_ms + 2000);
}

/* ---- injection ---- */

/* The configuration and CUPTI, once, for whichever entry point comes first (NVTX may initialize
 * before CUDA does). 0, or tr_cupti_load's ERR_* code with the reason in load_why. */
static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t life_mu = PTHREAD_MUTEX_INITIALIZER; /* one start at a time */
static int loaded;             /* 0: not tried, 1: loaded, else the ERR_* code it failed with */
static err_msg load_why;
static char bad_env[256];

static void read_config(void) { tr_config_read(&cfg, NULL, bad_env, sizeof bad_env); }

/* Once; a second caller waits until the first has read it all. */
static void load_config(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, read_config);
}

/* Whether a CUDA driver is in the process, or can be loaded into it (it then stays, as CUPTI
 * would keep it). CUPTI 13.2 and later load libcuda.so.1 at their first call, and where none can
 * be loaded 13.2 recurses until its stack overflows (13.3 to 13.5 fail every call instead). */
static int driver_present(void) {
    return dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD) != NULL ||
           dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) != NULL;
}

/* Loads CUPTI once. `before_cuda`: for NVTX, which may start before CUDA, on a machine without a
 * CUDA driver too: CUPTI is then loaded only where a driver is (else ERR_NOENT, and a later start
 * may load it). */
static int load_cupti(int before_cuda) {
    pthread_mutex_lock(&load_mu);
    load_config();
    if (loaded == 0 && before_cuda && !driver_present()) {
        pthread_mutex_unlock(&load_mu);
        tr_config_debug(&cfg, "NVTX started before CUDA, and no CUDA driver (libcuda.so.1) can be "
                              "loaded: no CUPTI loaded, NVTX ranges not recorded");
        return ERR_NOENT;
    }
    if (loaded == 0) {
        int rc = tr_cupti_load(&cupti, cfg.cupti[0] ? cfg.cupti : NULL, &load_why);
        loaded = rc == 0 ? 1 : rc;
        if (loaded == 1)
            tr_config_debug(&cfg, "CUPTI %u from %s (%s)", cupti.version, cupti.path,
                     tr_cupti_source_name(cupti.source));
    }
    int rc = loaded == 1 ? 0 : loaded;
    pthread_mutex_unlock(&load_mu);
    return rc;
}

/* What a session of tracing starts from: the flush thread's state and the counts it reports. The
 * host-call queue stays from an earlier session (a callback may still hold it), and so do the
 * contexts learnt at creation (they are merged into the new converter). */
static void reset_session(void) {
    tr_wake_reset();
    tr_flush_reset();
    tr_enable_session(&cfg, &cupti);
    tr_bufs_reset();
}

/* Starting, first phase: a fresh session, CUPTI loaded, and what the callbacks will need learnt
 * now rather than in a callback. */
static int start_load(void) {
    reset_session();
    why[0] = '\0';
    int rc = load_cupti(0);
    if (rc != 0) {
        notice("not tracing: %s", load_why.msg);
        return rc;
    }
    if (!tr_enable_prepare())
        tr_config_debug(&cfg, "CUPTI keeps its own thread ids: launches and NVTX ranges get lanes "
                              "of their own");
    /* Loads the unwinder and learns the modules (dlopen, malloc): now, not in a callback. */
    tr_scan_refresh();
    /* CPython in this process? (its frames are then part of call sites; silent either way) */
    tr_py_init(NULL);
    return 0;
}

/* The parts' settings, the host-call queue, the flush thread's encoder, converter and call sites,
 * and the subscription. */
static int start_session(void) {
    tr_bufs_session(&cfg);
    if (hostq == NULL)
        hostq = tr_hostq_new(cfg.queue_len);
    tr_callbacks_session(&cfg, &cupti, hostq);
    if (tr_flush_prepare(&cfg, &cupti, hostq) != 0) {
        notice("not tracing: out of memory");
        tr_flush_release();
        return ERR_NOMEM;
    }
    CUptiResult r = tr_enable_subscribe();
    if (r != CUPTI_SUCCESS) {
        notice("not tracing: CUPTI refused to subscribe (%s)%s", tr_cupti_strerror(&cupti, r),
               r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                   ? "; another profiler (nsys, ncu, torch.profiler) holds it"
                   : "");
        tr_flush_release();
        return ERR_UNSUPPORTED;
    }
    return 0;
}

/* The publisher (unless SYNCTOP_LISTEN=none). A recording goes on without it. */
static int start_publishing(void) {
    if (strcmp(cfg.endpoint, "none") == 0)
        return 0;
    err_msg err = {{0}};
    tp_keypair keys;
    int rc = cfg.curve_key[0] != '\0' ? tp_keypair_load(&keys, cfg.curve_key, &err) : 0;
    if (rc != 0) {
        notice("not tracing: SYNCTOP_CURVE_KEY: %s", err.msg);
        return rc;
    }
    /* A list of clients that cannot be read admits nobody rather than everybody. */
    tp_clients *clients = NULL;
    if (cfg.curve_clients[0] != '\0' && cfg.curve_key[0] == '\0')
        rc = err_set(&err, ERR_INVAL, "it needs SYNCTOP_CURVE_KEY (the server's keys) too");
    else if (cfg.curve_clients[0] != '\0' && (clients = tp_clients_load(cfg.curve_clients, &err)) == NULL)
        rc = ERR_INVAL;
    if (rc != 0) {
        explicit_bzero(&keys, sizeof keys);
        notice("not tracing: SYNCTOP_CURVE_CLIENTS: %s", err.msg);
        return rc;
    }
    tp_pub_opts po = {.endpoint = cfg.endpoint[0] ? cfg.endpoint : NULL,
                      .sndhwm = cfg.sndhwm,
                      .curve = cfg.curve_key[0] != '\0' ? &keys : NULL,
                      .insecure = cfg.insecure,
                      .clients = clients};
    rc = tr_flush_publish(&po, &err);
    explicit_bzero(&keys, sizeof keys); /* the secret key lives on in the socket only */
    tp_clients_destroy(&clients);       /* and the list in the publisher's check of its clients */
    if (rc != 0 && cfg.record[0] == '\0') {
        notice("not tracing: cannot publish: %s", err.msg);
        return rc;
    }
    if (rc != 0) {
        /* the recording needs no socket */
        notice("not publishing (%s); recording to %s only", err.msg, cfg.record);
    } else if (po.endpoint == NULL) {
        char dir[TP_ENDPOINT_MAX];
        err_msg refused = {{0}};
        if (tp_endpoint_dir(dir, sizeof dir, &refused) == 1)
            notice("%s; publishing on %s instead", refused.msg, tr_flush_endpoint());
    }
    return 0;
}

/* The trace file (SYNCTOP_RECORD), claimed for this process and opened. */
static int start_recording(void) {
    if (cfg.record[0] == '\0')
        return 0;
    int rc = tr_flush_claim_record(cfg.record);
    if (rc != 0) {
        notice("not tracing: cannot record to %s: %s", cfg.record, strerror(errno));
        return rc;
    }
    err_msg err = {{0}};
    rc = tr_flush_open_record(&err);
    if (rc != 0) {
        notice("not tracing: cannot record to %s: %s", tr_flush_record_path(), err.msg);
        return rc;
    }
    if (strcmp(tr_flush_record_path(), cfg.record) != 0)
        tr_config_say(&cfg, "recording to %s (%s is another process's)", tr_flush_record_path(),
                      cfg.record);
    return 0;
}

static int start_activity(void) {
    CUptiResult r = tr_enable_activity();
    if (r != CUPTI_SUCCESS) {
        notice("not tracing: CUPTI activity unavailable (%s)", tr_cupti_strerror(&cupti, r));
        return ERR_UNSUPPORTED;
    }
    tr_enable_resources(1);
    return 0;
}

/* The last phase: the callbacks open, collection on (unless on demand), the handlers, the flush
 * thread, and a wait for a first viewer when asked (SYNCTOP_START_WAIT_MS). */
static int start_running(int late) {
    pid = getpid();
    tr_callbacks_set_contexts_unknown(late);
    tr_callbacks_set_state(TR_ON);
    if (late)
        tr_enable_dump_existing();
    if (cfg.mode == TR_MODE_ALWAYS)
        tr_enable_collecting(1);
    static int handlers; /* once for the life of the process, however often tracing starts */
    if (!handlers)
        pthread_atfork(before_fork, NULL, in_child);
    int rc = tr_flush_start((uint32_t)pid, late);
    if (rc != 0) {
        tr_callbacks_set_state(TR_STOPPED);
        tr_callbacks_set_collecting(0);
        notice("not tracing: cannot start the flush thread");
        return rc; /* CUPTI keeps its subscription; every callback now returns at once */
    }
    if (!handlers)
        atexit(at_exit);
    handlers = 1;
    if (bad_env[0] != '\0' && !late)
        tr_config_say(&cfg, "ignoring unreadable %s", bad_env);
    tr_flush_wait_subscribers(cfg.start_wait_ms);
    return 0;
}

/* late: the process runs CUDA already (synctop_tracer_start), rather than initialising it. 0, or
 * the ERR_* code of what failed, which said one line and left the program untraced. */
static int start(int late) {
    int rc;
    if ((rc = start_load()) != 0 || (rc = start_session()) != 0)
        return rc;
    if ((rc = start_publishing()) != 0 || (rc = start_recording()) != 0 ||
        (rc = start_activity()) != 0) {
        tr_enable_unsubscribe();
        tr_flush_discard();
        return rc;
    }
    return start_running(late);
}

/* Called by the CUDA driver during cuInit (CUDA_INJECTION64_PATH). Returns 1 whatever happens:
 * a tracer that cannot trace steps aside; it never makes CUDA fail. */
__attribute__((visibility("default"))) int InitializeInjection(void);
__attribute__((visibility("default"))) int InitializeInjection(void) {
    static atomic_flag once = ATOMIC_FLAG_INIT;
    if (atomic_flag_test_and_set(&once))
        return 1;
    pthread_mutex_lock(&life_mu);
    load_config();
    if (!cfg.disabled && tr_callbacks_state() == TR_OFF)
        start(0);
    pthread_mutex_unlock(&life_mu);
    return 1;
}

/* ---- starting and stopping in a running process (synctop/tracer.h) ---- */

static char start_settings[4096];
static atomic_int start_pending;

/* The thread synctop_tracer_start makes: waits (bounded) for a session that is stopping to have
 * ended, then starts one with the settings given. */
static void *starter_main(void *arg) {
    (void)arg;
    /* named before it can publish, so that whoever sees the socket answer sees it start too */
    pthread_setname_np(pthread_self(), "synctop-start");
    pthread_mutex_lock(&life_mu);
    int idle = tr_wake_wait_ended(10000);
    int state = tr_callbacks_state();
    if (getpid() != pid && state != TR_OFF)
        state = TR_FORKED; /* a forked child of a traced process: never traced */
    if (state == TR_OFF && idle) {
        load_config(); /* the environment's, once; then the settings over it */
        char bad[256];
        tr_config_read(&cfg, start_settings, bad, sizeof bad);
        if (start(1) == 0 && bad[0] != '\0')
            tr_config_debug(&cfg, "ignoring unreadable %s", bad);
    } else if (state != TR_ON) {
        snprintf(why, sizeof why, "not tracing: %s",
                 state == TR_FORKED ? "this process is a fork of a traced one"
                 : idle             ? "tracing ended for good in this process (it is exiting?)"
                                    : "the last session has not ended yet (its flush thread is stuck)");
    }
    pthread_mutex_unlock(&life_mu);
    atomic_store(&start_pending, 0);
    return NULL;
}

__attribute__((visibility("default"))) int synctop_tracer_start(const char *settings) {
    if (tr_callbacks_state() == TR_ON && !tr_wake_stop_requested() && getpid() == pid)
        return 1;
    if (atomic_exchange(&start_pending, 1))
        return 2;
    size_t n = settings ? strnlen(settings, sizeof start_settings - 1) : 0;
    if (n > 0)
        memcpy(start_settings, settings, n);
    start_settings[n] = '\0';
    /* Every signal blocked in the new thread: the program's handlers are not for it. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    int rc = pthread_create(&t, NULL, starter_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        atomic_store(&start_pending, 0);
        return -1;
    }
    pthread_setname_np(t, "synctop-start");
    pthread_detach(t);
    return 0;
}

__attribute__((visibility("default"))) int synctop_tracer_stop(void) {
    if (tr_callbacks_state() != TR_ON || getpid() != pid)
        return 1;
    tr_wake_request_stop();
    return 0;
}

__attribute__((visibility("default"))) const char *synctop_tracer_status(void) { return why; }

/* Called by NVTX at its first use (NVTX_INJECTION64_PATH): NVTX goes to the CUPTI that traces.
 * Returns CUPTI's answer, 0 (NVTX then stays a no-op) when there is no CUPTI to give it to. */
typedef const void *(*nvtx_export_table_fn)(uint32_t);
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(nvtx_export_table_fn get_export_table);
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(nvtx_export_table_fn get_export_table) {
    load_config();
    if (cfg.disabled || load_cupti(1) != 0 || cupti.nvtx_init == NULL)
        return 0;
    return cupti.nvtx_init(get_export_table);
}
