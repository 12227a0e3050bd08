/*
 * libsynctop-tracer.so: the library the CUDA driver loads into a program through
 * CUDA_INJECTION64_PATH. It exports InitializeInjection, InitializeInjectionNvtx2 for
 * NVTX_INJECTION64_PATH (which `synctop run` points here too: NVTX is handed to the CUPTI the
 * tracer uses, cupti_load.h, so that a process never has two CUPTIs), and the start, stop and
 * status of synctop/tracer.h, which `synctop attach` and `synctop detach` call in a running
 * process. Nothing else is exported.
 *
 * Two kinds of threads meet here. Application threads run CUPTI's callbacks: they only read a
 * clock, copy a few words into a lock-free queue (hostq.h) or hand a filled activity buffer over
 * under a mutex held for a few instructions; they never allocate on the hot path (the exceptions:
 * a new activity buffer, which CUPTI asks for rarely, and a thread's stack bounds, learnt once if
 * unwinding fails: stackscan.h), never print, never block on the flush thread except at context
 * destruction, where the wait is bounded. One flush thread owns everything else: the encoder, the
 * publisher, the trace file, symbolization. It asks CUPTI for completed buffers every
 * SYNCTOP_FLUSH_MS, converts them (convert.h), drains the host-call queue, and ships batches.
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
 * What is enabled. Always: CONCURRENT_KERNEL (early: enabling it late makes CUPTI instrument every
 * loaded module at once), the cheap metadata kinds (DEVICE, CONTEXT, STREAM), the resource
 * callbacks (context creation gives the context -> device map before any record needs it). While
 * collecting: MEMCPY, MEMSET, MARKER, SYNCHRONIZATION (without the records of queries that found
 * work pending, where CUPTI allows it), the launch APIs' records and the blocking APIs'
 * callbacks. SYNCTOP_MODE=on-demand collects only while a viewer is subscribed; dormant, it also
 * turns CONCURRENT_KERNEL off (CUPTI 13.0 Update 1 on: 13.0's could deadlock doing so) and keeps
 * only the metadata records, so that a viewer arriving later still learns device names.
 *
 * Another CUPTI client. torch.profiler (Kineto) registers its own buffer callbacks when it starts,
 * which takes CUPTI's activity records away from the tracer, and disables the kinds it used when
 * it stops. The flush thread notices when no buffer has come for a while although the program's
 * calls went on (their correlation ids advance), and says so in the trace (an NVTX instant in the
 * "synctop" domain, and a lost batch in CUPTI's drop count); when the other client has collected
 * its buffers (Kineto then clears CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, which the tracer
 * set), the tracer registers its callbacks again, re-enables its kinds and says that too. Buffers
 * CUPTI held for the tracer when the other client took over are written off (not reused: they may
 * come back, and then they are taken back); buffers that are not the tracer's are never touched.
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
#include <cupti.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "callsite.h"
#include "cbids.h"
#include "config.h"
#include "convert.h"
#include "cupti_load.h"
#include "hostq.h"
#include "pyframes.h"
#include "record_path.h"
#include "stackscan.h"
#include "synctop/codec.h"
#include "synctop/file.h"
#include "synctop/net.h"
#include "synctop/tracer.h"

#define SHIP_BYTES (1u << 20)        /* a batch is shipped once it holds this much */
#define CLOCK_EVERY_NS 1000000000ull /* clock beacon period */
#define DRAIN_WAIT_MS 2000           /* context destruction waits at most this for the flush */
#define NOT_READY 600                /* cudaErrorNotReady == CUDA_ERROR_NOT_READY */
#define MAX_THREADS 4096             /* threads described with TP_K_THREAD */
#define BUF_SLOTS 8192               /* activity buffers known at once (2 x SYNCTOP_MAX_BUFFERS' bound) */
#define LOST_FACTOR 2                /* buffers live and written off together: at most this many
                                        times SYNCTOP_MAX_BUFFERS (the tracer's memory bound) */
#define CTX_MAP 256                  /* contexts learnt from creation callbacks */
#define CALL_DEPTH 4                 /* nested watched calls followed per thread */
#define TAKEOVER_ROUNDS 20           /* flush rounds without a buffer... */
#define TAKEOVER_CALLS 1000          /* ...while the program made this many CUDA calls: taken over */
#define CUPTI_TOGGLES_KERNELS 130001 /* the first CUPTI that disables CONCURRENT_KERNEL safely */

/* TR_OFF: never started, or stopped by synctop_tracer_stop (it may start again). TR_STOPPED: for
 * good (exit, or the flush thread could not start). */
enum { TR_OFF = 0, TR_ON = 1, TR_STOPPED = 2, TR_FORKED = 3 };

/* An activity buffer the tracer allocated, by state. */
enum { BUF_NONE = 0, BUF_FREE, BUF_OUT, BUF_DONE, BUF_LOST };

typedef struct buf_slot {
    uint8_t *buf;
    uint8_t state;
} buf_slot;

typedef struct done_buf {
    unsigned slot;
    size_t valid;
} done_buf;

static struct {
    atomic_int state;      /* TR_* */
    atomic_int collecting; /* callbacks record (0 while dormant, stopped, or in a forked child) */
    atomic_int exiting;    /* exit handlers have run: the flush thread leaves CUPTI alone */
    atomic_uint gen;       /* bumped at each enable, to reset per-thread state */
    atomic_int live_contexts;
    atomic_int ctx_unknown; /* started in a running process: contexts may exist that no creation
                               callback counted, so CUPTI is flushed as if one did */
    atomic_int stop_req;    /* synctop_tracer_stop asked */
    int name_devices;       /* started late: the driver names the GPUs (the flush thread, once) */
    atomic_int names_stale; /* a module was unloaded: forget cached kernel-name pointers */
    atomic_uint_fast64_t buf_refused;
    atomic_uint_fast64_t buf_foreign; /* buffers CUPTI completed that were not the tracer's */
    atomic_uint_fast64_t bufs_in;     /* buffers with records that reached the tracer */
    atomic_uint corr_cb;              /* highest correlation id of a watched call */
    pid_t pid;
    tr_config cfg;
    tr_cupti cupti;
    CUpti_SubscriberHandle sub;
    tr_hostq *hostq;
    char record[4096]; /* the trace file actually written */
    int record_lock;

    /* Activity buffers, under pool_mu (held for a few stores, or a scan of the slots). */
    pthread_mutex_t pool_mu;
    buf_slot bufs[BUF_SLOTS];
    unsigned n_slots; /* slots ever used */
    unsigned n_live;  /* buffers free, out or done: at most cfg.max_buffers */
    unsigned n_lost;  /* written off (BUF_LOST) */
    done_buf done[BUF_SLOTS];
    unsigned n_done;
    int pool_gone; /* released at exit: buffers coming back are freed */
    size_t buf_size;

    /* Contexts learnt from creation callbacks, for the flush thread to merge. */
    struct {
        uint32_t context, device;
    } ctx_map[CTX_MAP];
    atomic_uchar ctx_ready[CTX_MAP];
    atomic_uint ctx_n;
    unsigned ctx_merged;

    /* Flush thread control, under wake_mu. */
    pthread_mutex_t wake_mu;
    pthread_cond_t wake_cv, done_cv;
    pthread_t thread;
    int stop, exited, kicked;
    int detaching; /* the flush thread is stopping for synctop_tracer_stop, not for exit */
    int running;   /* a flush thread exists (joinable at exit, or ending by itself when detaching) */
    uint64_t drain_req, drain_done;
    int subscribers;

    /* Owned by the flush thread once it runs. */
    tp_enc *enc;
    tr_conv *conv;
    tr_sites *sites;
    tp_pub *pub;
    tp_fwriter *fw;
    int fw_failed;            /* the recording stopped (a full disk): said once */
    tp_buf batch;
    uint64_t last_clock;
    uint64_t sent_drops[TP_DROP_MAX_][2];
    atomic_uint_fast64_t cupti_dropped;
    uint32_t tids[MAX_THREADS];
    unsigned n_tids;
    int kernels_on;    /* CONCURRENT_KERNEL is enabled */
    /* Another CUPTI client (the flush thread's view). */
    uint64_t seen_bufs;
    uint32_t window_corr;
    unsigned quiet_rounds;
    uint64_t quiet_since;
    int taken;
    int attr_ok;       /* PER_THREAD_ACTIVITY_BUFFER can be set and read back */
    uint64_t takeovers;
    char why[600]; /* the line said when tracing did not start (synctop_tracer_status) */
} g = {.pool_mu = PTHREAD_MUTEX_INITIALIZER,
       .wake_mu = PTHREAD_MUTEX_INITIALIZER,
       .wake_cv = PTHREAD_COND_INITIALIZER,
       .done_cv = PTHREAD_COND_INITIALIZER,
       .record_lock = -1};

/* Per application thread: who we are, the watched calls it is inside, and a busy query loop
 * being folded into one event. */
typedef struct poll_run {
    int active;
    uint8_t driver;
    uint32_t cbid, correlation, context, polls;
    uint64_t start, end;
    uint8_t n_frames, n_py;
    uintptr_t frames[TR_RAW_FRAMES];
    tr_pyframe py[TR_PY_FRAMES];
} poll_run;

typedef struct open_call {
    uint8_t driver;
    uint32_t cbid;
    uint64_t start;
} open_call;

static __thread struct {
    uint32_t tid;
    unsigned gen;
    /* Watched calls entered while collecting, innermost last. CUPTI's correlationData slot is
     * not used: its content at a call's entry is not defined, and a call entered before
     * collecting began has no start to find there. */
    open_call calls[CALL_DEPTH];
    int depth;
    uintptr_t cb_frame; /* the frame of the callback running on this thread (stack scans start there) */
    int runtime_open; /* runtime calls among them: their driver calls are not separate waits */
    poll_run poll;
} tls;

/* ---- small helpers ---- */

__attribute__((format(printf, 1, 0))) static void say_v(const char *fmt, va_list ap) {
    char line[600];
    vsnprintf(line, sizeof line, fmt, ap);
    fprintf(stderr, "synctop: %s\n", line);
}

/* The one line a tracer that steps aside prints. */
static void notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void notice(const char *fmt, ...) {
    static atomic_flag said = ATOMIC_FLAG_INIT;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g.why, sizeof g.why, fmt, ap);
    va_end(ap);
    if (g.cfg.quiet || atomic_flag_test_and_set(&said))
        return;
    fprintf(stderr, "synctop: %s\n", g.why);
}

/* A line that is worth one even when tracing works (where the recording went, when not where it
 * was asked). */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    if (g.cfg.quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    say_v(fmt, ap);
    va_end(ap);
}

/* SYNCTOP_VERBOSE only. */
static void debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void debug(const char *fmt, ...) {
    if (!g.cfg.verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    say_v(fmt, ap);
    va_end(ap);
}

static uint64_t clock_ns(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t my_tid(void) {
    if (tls.tid == 0)
        tls.tid = (uint32_t)syscall(SYS_gettid);
    return tls.tid;
}

static uint64_t cupti_now(void) {
    uint64_t t = 0;
    g.cupti.cuptiGetTimestamp(&t);
    return t;
}

static int env_int(const char *name, int32_t *out) {
    const char *s = getenv(name);
    if (s == NULL || *s == '\0')
        return 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end != '\0' || v < 0 || v > INT32_MAX)
        return 0;
    *out = (int32_t)v;
    return 1;
}

static int32_t env_rank(void) {
    int32_t rank = -1;
    if (!env_int("RANK", &rank) && !env_int("OMPI_COMM_WORLD_RANK", &rank))
        env_int("LOCAL_RANK", &rank);
    return rank;
}

static unsigned take_frames(uintptr_t *out) {
    return tr_scan_take(out, TR_RAW_FRAMES, tls.cb_frame);
}

static void kick(void) {
    pthread_mutex_lock(&g.wake_mu);
    g.kicked = 1;
    pthread_cond_signal(&g.wake_cv);
    pthread_mutex_unlock(&g.wake_mu);
}

/* ---- activity buffers (CUPTI calls these from any thread, concurrently) ---- */

/* The slot of a buffer the tracer allocated, or -1. Under pool_mu. */
static int slot_of(const uint8_t *buf) {
    for (unsigned i = 0; i < g.n_slots; i++)
        if (g.bufs[i].buf == buf && g.bufs[i].state != BUF_NONE)
            return (int)i;
    return -1;
}

/* A slot for a new buffer, or -1. Under pool_mu. */
static int slot_new(void) {
    for (unsigned i = 0; i < g.n_slots; i++)
        if (g.bufs[i].state == BUF_NONE)
            return (int)i;
    return g.n_slots < BUF_SLOTS ? (int)g.n_slots++ : -1;
}

static void CUPTIAPI buf_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = NULL;
    *size = 0;
    *max_records = 0;
    if (atomic_load_explicit(&g.state, memory_order_acquire) != TR_ON)
        return;
    uint8_t *b = NULL;
    int fresh = -1;
    pthread_mutex_lock(&g.pool_mu);
    for (unsigned i = 0; i < g.n_slots && b == NULL; i++)
        if (g.bufs[i].state == BUF_FREE) {
            g.bufs[i].state = BUF_OUT;
            b = g.bufs[i].buf;
        }
    if (b == NULL && g.n_live < g.cfg.max_buffers &&
        g.n_live + g.n_lost < LOST_FACTOR * g.cfg.max_buffers && (fresh = slot_new()) >= 0) {
        g.bufs[fresh] = (buf_slot){NULL, BUF_OUT}; /* reserved; no buffer matches NULL */
        g.n_live++;
    }
    pthread_mutex_unlock(&g.pool_mu);
    if (fresh >= 0) {
        b = aligned_alloc(8, g.buf_size);
        pthread_mutex_lock(&g.pool_mu);
        if (b != NULL) {
            g.bufs[fresh].buf = b;
        } else {
            g.bufs[fresh].state = BUF_NONE;
            g.n_live--;
        }
        pthread_mutex_unlock(&g.pool_mu);
    }
    if (b == NULL) {
        /* CUPTI drops the records it cannot store and counts them; the flush thread reports it. */
        atomic_fetch_add_explicit(&g.buf_refused, 1, memory_order_relaxed);
        return;
    }
    *buffer = b;
    *size = g.buf_size;
}

static void CUPTIAPI buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                   size_t valid) {
    (void)ctx;
    (void)stream;
    (void)size;
    if (buffer == NULL)
        return;
    int state = atomic_load_explicit(&g.state, memory_order_acquire);
    if (state == TR_FORKED)
        return; /* the child's copy of the pool is not ours to touch */
    int keep = 0, release = 0;
    pthread_mutex_lock(&g.pool_mu);
    int i = slot_of(buffer);
    if (i < 0) {
        /* Not the tracer's (another CUPTI client's, completed after the tracer registered again):
         * its owner frees it; its records are lost to the tracer, and counted. */
        pthread_mutex_unlock(&g.pool_mu);
        if (valid > 0)
            atomic_fetch_add_explicit(&g.buf_foreign, 1, memory_order_relaxed);
        return;
    }
    if (g.bufs[i].state == BUF_LOST) {
        g.n_lost--; /* written off when another client took over; back now */
        g.n_live++;
    }
    if (g.pool_gone) {
        release = 1;
    } else if (valid > 0 && g.n_done < BUF_SLOTS) {
        g.bufs[i].state = BUF_DONE;
        g.done[g.n_done++] = (done_buf){(unsigned)i, valid};
        keep = 1;
    } else if (g.n_live > g.cfg.max_buffers) {
        release = 1;
    } else {
        g.bufs[i].state = BUF_FREE;
    }
    if (release) {
        g.bufs[i] = (buf_slot){NULL, BUF_NONE};
        g.n_live--;
    }
    pthread_mutex_unlock(&g.pool_mu);
    if (release)
        free(buffer);
    if (keep) {
        atomic_fetch_add_explicit(&g.bufs_in, 1, memory_order_relaxed);
        if (state == TR_ON)
            kick();
    }
}

/* Another client took CUPTI's buffer callbacks: the buffers CUPTI held for the tracer went to it.
 * They stay allocated (whoever has them may still write, or free them), no longer count against
 * SYNCTOP_MAX_BUFFERS but against LOST_FACTOR times it, and are taken back if they ever return. */
static void write_off_out_buffers(void) {
    pthread_mutex_lock(&g.pool_mu);
    for (unsigned i = 0; i < g.n_slots; i++)
        if (g.bufs[i].state == BUF_OUT && g.bufs[i].buf != NULL) {
            g.bufs[i].state = BUF_LOST;
            g.n_live--;
            g.n_lost++;
        }
    pthread_mutex_unlock(&g.pool_mu);
}

/* ---- contexts learnt at creation ---- */

static void learn_context(const CUpti_ResourceData *rd) {
    uint32_t id = 0, dev = 0;
    if (rd == NULL || rd->context == NULL || g.cupti.cuptiGetContextId == NULL ||
        g.cupti.cuptiGetDeviceId == NULL ||
        g.cupti.cuptiGetContextId(rd->context, &id) != CUPTI_SUCCESS ||
        g.cupti.cuptiGetDeviceId(rd->context, &dev) != CUPTI_SUCCESS)
        return;
    unsigned i = atomic_fetch_add(&g.ctx_n, 1);
    if (i >= CTX_MAP)
        return; /* the CONTEXT records still tell */
    g.ctx_map[i].context = id;
    g.ctx_map[i].device = dev;
    atomic_store_explicit(&g.ctx_ready[i], 1, memory_order_release);
}

static void merge_contexts(void) {
    unsigned n = atomic_load(&g.ctx_n);
    if (n > CTX_MAP)
        n = CTX_MAP;
    while (g.ctx_merged < n &&
           atomic_load_explicit(&g.ctx_ready[g.ctx_merged], memory_order_acquire)) {
        tr_conv_set_context(g.conv, g.ctx_map[g.ctx_merged].context, g.ctx_map[g.ctx_merged].device);
        g.ctx_merged++;
    }
}

/* ---- host-call callbacks ---- */

static unsigned take_py(tr_pyframe *out) {
    return tr_py_capture(out, g.cfg.frames < TR_PY_FRAMES ? g.cfg.frames : TR_PY_FRAMES);
}

/* frames == NULL: take the call site now; else it was taken earlier (a poll run's first call).
 * may_wait: the call can wait for the device, so a long one is blocking. */
static void push_event(uint8_t driver, uint32_t cbid, uint32_t corr, uint32_t context, int32_t ret,
                       uint64_t start, uint64_t end, uint32_t polls, const uintptr_t *frames,
                       unsigned n_frames, const tr_pyframe *py, unsigned n_py, int may_wait) {
    tr_hostev ev;
    ev.start = start;
    ev.end = end;
    ev.tid = my_tid();
    ev.correlation = corr;
    ev.cbid = cbid;
    ev.context = context;
    ev.ret = ret;
    ev.polls = polls;
    ev.driver = driver;
    ev.blocking = may_wait && end - start >= g.cfg.block_threshold_ns;
    ev.n_frames = 0;
    ev.n_py = 0;
    if (ev.blocking) {
        if (frames != NULL) {
            memcpy(ev.frames, frames, n_frames * sizeof frames[0]);
            ev.n_frames = (uint8_t)n_frames;
            memcpy(ev.py, py, n_py * sizeof py[0]);
            ev.n_py = (uint8_t)n_py;
        } else {
            ev.n_frames = (uint8_t)take_frames(ev.frames);
            ev.n_py = (uint8_t)take_py(ev.py);
        }
    }
    tr_hostq_push(g.hostq, &ev);
}

/* A busy query loop is one event spanning the loop, a wait when it lasted the threshold. It ends
 * when a query reports ready, the thread calls something else that is watched, or the next query
 * comes more than SYNCTOP_POLL_GAP_US after the last (the thread did other work between them,
 * launches for instance, which is not waiting). */
static void end_poll_run(void) {
    poll_run *p = &tls.poll;
    if (!p->active)
        return;
    p->active = 0;
    if (p->end - p->start >= g.cfg.block_threshold_ns)
        push_event(p->driver, p->cbid, p->correlation, p->context, NOT_READY, p->start, p->end,
                   p->polls, p->frames, p->n_frames, p->py, p->n_py, 1);
}

static void on_poll_exit(const CUpti_CallbackData *cd, uint8_t driver, uint32_t cbid,
                         uint64_t start, uint64_t end, int32_t ret) {
    poll_run *p = &tls.poll;
    if (p->active && (p->cbid != cbid || p->driver != driver ||
                      start > p->end + g.cfg.poll_gap_ns))
        end_poll_run();
    if (!p->active) {
        if (ret != NOT_READY) {
            /* A lone query: worth an event only if it waited by itself. */
            if (end - start >= g.cfg.block_threshold_ns)
                push_event(driver, cbid, cd->correlationId, cd->contextUid, ret, start, end, 1,
                           NULL, 0, NULL, 0, 1);
            return;
        }
        *p = (poll_run){.active = 1, .driver = driver, .cbid = cbid,
                        .correlation = cd->correlationId, .context = cd->contextUid,
                        .start = start};
        p->n_frames = (uint8_t)take_frames(p->frames);
        p->n_py = (uint8_t)take_py(p->py);
    }
    p->polls++;
    p->end = end;
    if (ret != NOT_READY) {
        p->correlation = cd->correlationId;
        end_poll_run();
    }
}

static void saw_call(uint32_t corr) {
    unsigned cur = atomic_load_explicit(&g.corr_cb, memory_order_relaxed);
    while (corr > cur && !atomic_compare_exchange_weak_explicit(&g.corr_cb, &cur, corr,
                                                                memory_order_relaxed,
                                                                memory_order_relaxed)) {
    }
}

static void on_api(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const CUpti_CallbackData *cd) {
    enum tr_cb_class cls = tr_cb_class_of(dom, cbid);
    if (cls == TR_CB_NONE || cls == TR_CB_LAUNCH)
        return;
    unsigned gen = atomic_load_explicit(&g.gen, memory_order_relaxed);
    if (tls.gen != gen) {
        tls.gen = gen;
        tls.depth = 0;
        tls.runtime_open = 0;
        tls.poll.active = 0;
    }
    uint8_t driver = dom == CUPTI_CB_DOMAIN_DRIVER_API;
    if (driver && tls.runtime_open > 0)
        return;
    if (cd->callbackSite == CUPTI_API_ENTER) {
        if (tls.depth < CALL_DEPTH) {
            tls.calls[tls.depth++] = (open_call){driver, cbid, cupti_now()};
            tls.runtime_open += !driver;
        }
        return;
    }
    saw_call(cd->correlationId);
    if (tls.depth == 0 || tls.calls[tls.depth - 1].driver != driver ||
        tls.calls[tls.depth - 1].cbid != cbid)
        return; /* entered before we were collecting (or deeper than followed) */
    uint64_t start = tls.calls[--tls.depth].start;
    tls.runtime_open -= !driver;
    uint64_t end = cupti_now();
    if (end < start)
        end = start;
    int32_t ret = cd->functionReturnValue ? *(const int32_t *)cd->functionReturnValue : 0;
    if (cls == TR_CB_POLL) {
        on_poll_exit(cd, driver, cbid, start, end, ret);
        return;
    }
    end_poll_run();
    push_event(driver, cbid, cd->correlationId, cd->contextUid, ret, start, end, 0, NULL, 0, NULL,
               0, cls != TR_CB_HOSTMEM);
}

static void drain_sync(uint32_t wait_ms);
static void release_all(void);

/* CUPTI resets its counter at each query, so every query adds to ours. Never call this while
 * holding pool_mu: CUPTI may call buf_completed, which takes it. */
static void count_cupti_drops(void) {
    size_t dropped = 0;
    if (g.cupti.cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS)
        atomic_fetch_add(&g.cupti_dropped, dropped);
}

static void on_resource(CUpti_CallbackId cbid, const void *data) {
    switch (cbid) {
    case CUPTI_CBID_RESOURCE_CONTEXT_CREATED:
        learn_context(data);
        atomic_fetch_add(&g.live_contexts, 1);
        kick();
        break;
    case CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING:
        /* The last chance to get this context's records: flush them out of CUPTI now, on this
         * thread (CUPTI is alive: it is calling us), and let the flush thread ship them before
         * the process may end. */
        end_poll_run();
        g.cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        count_cupti_drops();
        if (atomic_load(&g.live_contexts) > 0)
            atomic_fetch_sub(&g.live_contexts, 1);
        drain_sync(DRAIN_WAIT_MS);
        break;
    case CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING:
        atomic_store(&g.names_stale, 1);
        break;
    default:
        break;
    }
}

static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
                                 const void *data) {
    (void)userdata;
    int state = atomic_load_explicit(&g.state, memory_order_acquire);
    if (state != TR_ON)
        return;
    if (dom == CUPTI_CB_DOMAIN_RESOURCE) {
        on_resource(cbid, data);
        return;
    }
    if (!atomic_load_explicit(&g.collecting, memory_order_relaxed))
        return;
    tls.cb_frame = (uintptr_t)__builtin_frame_address(0);
    if (dom == CUPTI_CB_DOMAIN_RUNTIME_API || dom == CUPTI_CB_DOMAIN_DRIVER_API)
        on_api(dom, cbid, data);
}

/* ---- enabling ---- */

/* Cheap and rare: on from the start, whatever the mode. */
static const CUpti_ActivityKind meta_kinds[] = {
    CUPTI_ACTIVITY_KIND_DEVICE, CUPTI_ACTIVITY_KIND_CONTEXT, CUPTI_ACTIVITY_KIND_STREAM,
};

/* On while collecting. SYNCHRONIZATION last: once it is seen on or off, so is everything else
 * (the on-demand test waits on it). */
static const CUpti_ActivityKind collect_kinds[] = {
    CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MARKER,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
};

static void set_one(void *arg, CUpti_CallbackDomain dom, uint32_t cbid, enum tr_cb_class cls) {
    uint8_t on = *(const uint8_t *)arg;
    if (cls == TR_CB_LAUNCH) {
        if (dom == CUPTI_CB_DOMAIN_RUNTIME_API)
            g.cupti.cuptiActivityEnableRuntimeApi(cbid, on);
        else
            g.cupti.cuptiActivityEnableDriverApi(cbid, on);
    } else {
        g.cupti.cuptiEnableCallback(on, g.sub, dom, cbid);
    }
}

/* Dormant, CONCURRENT_KERNEL goes off too, where CUPTI can turn it off safely. */
static int kernels_follow_collecting(void) {
    return g.cfg.mode == TR_MODE_ON_DEMAND && g.cupti.version >= CUPTI_TOGGLES_KERNELS;
}

static void set_kernels(int on) {
    CUptiResult r = on ? g.cupti.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
                       : g.cupti.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r == CUPTI_SUCCESS)
        g.kernels_on = on;
}

/* Turns collection on or off. The callbacks first and the activity kinds last, in this order,
 * either way. */
static void set_collecting(int on) {
    uint8_t flag = (uint8_t)on;
    if (on)
        atomic_fetch_add(&g.gen, 1);
    else
        atomic_store(&g.collecting, 0);
    tr_cb_foreach(set_one, &flag);
    if (kernels_follow_collecting() && on != g.kernels_on)
        set_kernels(on);
    for (size_t i = 0; i < sizeof collect_kinds / sizeof collect_kinds[0]; i++) {
        if (on)
            g.cupti.cuptiActivityEnable(collect_kinds[i]);
        else
            g.cupti.cuptiActivityDisable(collect_kinds[i]);
    }
    if (on)
        atomic_store(&g.collecting, 1);
}

/* What is on whatever the mode: buffer callbacks, CONCURRENT_KERNEL, the metadata kinds. At
 * injection, and again when another client has let go of CUPTI. */
static CUptiResult enable_activity(void) {
    if (g.attr_ok) {
        uint8_t one = 1;
        size_t sz = sizeof one;
        g.cupti.cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &sz, &one);
    }
    CUptiResult r = g.cupti.cuptiActivityRegisterCallbacks(buf_requested, buf_completed);
    if (r != CUPTI_SUCCESS)
        return r;
    /* Queries that found work pending synchronized nothing; CUPTI 13 records them unless told. */
    if (g.cupti.cuptiActivityEnableAllSyncRecords != NULL)
        g.cupti.cuptiActivityEnableAllSyncRecords(0);
    r = g.cupti.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r != CUPTI_SUCCESS)
        return r;
    g.kernels_on = 1;
    for (size_t i = 0; i < sizeof meta_kinds / sizeof meta_kinds[0]; i++)
        g.cupti.cuptiActivityEnable(meta_kinds[i]);
    /* Enabled once all the same, as early as possible: CUPTI prepares its kernel tracing then,
     * rather than when a viewer arrives. */
    if (kernels_follow_collecting() && !atomic_load(&g.collecting))
        set_kernels(0);
    return CUPTI_SUCCESS;
}

/* ---- flush thread ---- */

static void add(const void *rec) { tp_enc_add(g.enc, rec); }

/* The trace file could not take a batch (a full disk, a file size limit): the file keeps what it
 * has (readers see it was not closed cleanly), tracing goes on for the live subscribers, and the
 * program's stderr gets one line. */
static void recording_failed(const err_msg *err) {
    g.fw_failed = 1;
    if (!g.cfg.quiet)
        fprintf(stderr, "synctop: recording to %s stopped: %s; the file keeps what came before\n",
                g.record, err->msg);
}

/* Finishes the batch, writes it to the trace file and sends it. A subscriber too slow to take it
 * loses it (and reports that, so the publisher counts it and asks for a keyframe); the others have
 * it, so its strings count as delivered. The last batch (TP_BF_END) closes the file first, then
 * waits up to wait_ms for every subscriber to have room. */
static void ship_wait(uint32_t flags, int wait_ms) {
    if (tp_enc_finish_flags(g.enc, flags, &g.batch) != 0) {
        tp_enc_delivered(g.enc, 0);
        return;
    }
    if (g.fw != NULL) {
        err_msg err;
        if (!g.fw_failed && tp_fwriter_append(g.fw, g.batch.data, g.batch.len, &err) != 0)
            recording_failed(&err);
        if ((flags & TP_BF_END) && tp_fwriter_close(&g.fw, &err) != 0 && !g.fw_failed)
            recording_failed(&err);
    }
    int delivered = 1;
    if (g.pub != NULL) {
        int rc = wait_ms > 0 ? tp_pub_send_wait(g.pub, g.batch.data, g.batch.len, wait_ms)
                             : tp_pub_send(g.pub, g.batch.data, g.batch.len);
        delivered = rc == 0 || rc == ERR_AGAIN;
    }
    tp_enc_delivered(g.enc, delivered);
}

static void ship(uint32_t flags) { ship_wait(flags, 0); }

static void maybe_ship(void) {
    if (tp_enc_pending_bytes(g.enc) >= SHIP_BYTES)
        ship(0);
}

static void add_clock(void) {
    uint64_t mono0 = clock_ns(CLOCK_MONOTONIC);
    uint64_t trace = cupti_now();
    uint64_t real = clock_ns(CLOCK_REALTIME);
    uint64_t mono1 = clock_ns(CLOCK_MONOTONIC);
    tp_clock c = {.kind = TP_K_CLOCK, .device = TP_NO_DEVICE, .trace_ns = trace,
                  .realtime_ns = real, .monotonic_ns = mono0 + (mono1 - mono0) / 2};
    add(&c);
    g.last_clock = mono1;
}

static void add_process(void) {
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char cmd[4096];
    size_t n = 0;
    FILE *f = fopen("/proc/self/cmdline", "re");
    if (f != NULL) {
        n = fread(cmd, 1, sizeof cmd - 1, f);
        fclose(f);
    }
    while (n > 0 && cmd[n - 1] == '\0')
        n--;
    for (size_t i = 0; i < n; i++)
        if (cmd[i] == '\0')
            cmd[i] = ' ';
    tp_process p = {.kind = TP_K_PROCESS, .device = TP_NO_DEVICE, .pid = (uint32_t)g.pid,
                    .host = tp_enc_intern_cstr(g.enc, host), .cmdline = tp_enc_intern(g.enc, cmd, n),
                    .rank = env_rank(), .world = -1,
                    .start_realtime_ns = clock_ns(CLOCK_REALTIME)};
    if (!env_int("WORLD_SIZE", &p.world))
        env_int("OMPI_COMM_WORLD_SIZE", &p.world);
    add(&p);
}

/* A note for whoever reads the trace, at trace time ts: an NVTX instant of the "synctop" domain
 * on the process's main thread. */
static void add_notice(uint64_t ts, const char *text) {
    tp_nvtx r = {.kind = TP_K_NVTX, .flags = TP_NVTX_INSTANT, .device = TP_NO_DEVICE,
                 .tid = (uint32_t)g.pid, .start = ts, .end = ts,
                 .name = tp_enc_intern_cstr(g.enc, text),
                 .domain = tp_enc_intern_cstr(g.enc, "synctop")};
    if (ts != 0)
        add(&r);
}

static void note_thread(uint32_t tid) {
    if (tid == 0)
        return;
    for (unsigned i = 0; i < g.n_tids; i++)
        if (g.tids[i] == tid)
            return;
    if (g.n_tids == MAX_THREADS)
        return;
    g.tids[g.n_tids++] = tid;
    char path[64], name[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%u/comm", tid);
    FILE *f = fopen(path, "re");
    if (f != NULL) {
        if (fgets(name, sizeof name, f) == NULL)
            name[0] = '\0';
        fclose(f);
    }
    name[strcspn(name, "\n")] = '\0';
    tp_thread t = {.kind = TP_K_THREAD, .device = TP_NO_DEVICE, .tid = tid,
                   .name = tp_enc_intern_cstr(g.enc, name), .pid = (uint32_t)g.pid};
    add(&t);
}

static int is_meta_kind(CUpti_ActivityKind k) {
    return k == CUPTI_ACTIVITY_KIND_DEVICE || k == CUPTI_ACTIVITY_KIND_CONTEXT ||
           k == CUPTI_ACTIVITY_KIND_STREAM;
}

/* keep == 0 (dormant): only the metadata records are converted. */
static void convert_buffer(uint8_t *buf, size_t valid, int keep) {
    CUpti_Activity *rec = NULL;
    while (g.cupti.cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
        if (!keep && !is_meta_kind(rec->kind))
            continue;
        tr_conv_activity(g.conv, rec);
        if (rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME || rec->kind == CUPTI_ACTIVITY_KIND_DRIVER)
            note_thread(((const CUpti_ActivityAPI *)rec)->threadId);
        else if (rec->kind == CUPTI_ACTIVITY_KIND_MARKER)
            note_thread(((const CUpti_ActivityMarker2 *)rec)->objectId.pt.threadId);
        maybe_ship();
    }
}

static void drain_buffers(int keep) {
    done_buf local[64];
    for (;;) {
        unsigned n = 0;
        pthread_mutex_lock(&g.pool_mu);
        while (n < 64 && g.n_done > 0)
            local[n++] = g.done[--g.n_done];
        uint8_t *bufs[64];
        for (unsigned i = 0; i < n; i++)
            bufs[i] = g.bufs[local[i].slot].buf;
        pthread_mutex_unlock(&g.pool_mu);
        if (n == 0)
            return;
        /* The list is a stack; walk in the order CUPTI completed them. */
        for (unsigned i = n; i-- > 0;)
            convert_buffer(bufs[i], local[i].valid, keep);
        uint8_t *spare[64];
        unsigned n_spare = 0;
        pthread_mutex_lock(&g.pool_mu);
        for (unsigned i = 0; i < n; i++) {
            buf_slot *s = &g.bufs[local[i].slot];
            if (g.n_live > g.cfg.max_buffers) { /* buffers taken back after a takeover */
                spare[n_spare++] = s->buf;
                *s = (buf_slot){NULL, BUF_NONE};
                g.n_live--;
            } else {
                s->state = BUF_FREE;
            }
        }
        pthread_mutex_unlock(&g.pool_mu);
        for (unsigned i = 0; i < n_spare; i++)
            free(spare[i]);
    }
}

static void drain_hostq(void) {
    tr_hostev ev;
    while (tr_hostq_pop(g.hostq, &ev)) {
        CUpti_CallbackDomain dom = ev.driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
        note_thread(ev.tid);
        uint32_t site = ev.n_frames || ev.n_py ? tr_sites_intern(g.sites, g.enc, ev.py, ev.n_py,
                                                                 ev.frames, ev.n_frames)
                                               : 0;
        tp_api a = {.kind = TP_K_API,
                    .flags = (uint8_t)((ev.blocking ? TP_F_BLOCKING : 0) | (ev.driver ? TP_F_DRIVER : 0)),
                    .device = tr_conv_context_device(g.conv, ev.context), .tid = ev.tid,
                    .start = ev.start, .end = ev.end, .correlation = ev.correlation,
                    .cbid = ev.cbid, .name = tr_conv_api_name(g.conv, dom, ev.cbid),
                    .callsite = site, .ret = ev.ret};
        add(&a);
        maybe_ship();
    }
}

static void add_drops(int source, uint64_t records, uint64_t batches, uint64_t ts) {
    if (g.sent_drops[source][0] == records && g.sent_drops[source][1] == batches)
        return;
    g.sent_drops[source][0] = records;
    g.sent_drops[source][1] = batches;
    tp_drops d = {.kind = TP_K_DROPS, .device = TP_NO_DEVICE, .source = (uint32_t)source, .ts = ts,
                  .records = records, .batches = batches};
    add(&d);
}

/* Whether another client has collected its records since the tracer (re)registered: Kineto clears
 * PER_THREAD_ACTIVITY_BUFFER then, which the tracer sets. */
static int other_client_left(void) {
    if (!g.attr_ok)
        return 0;
    uint8_t v = 1;
    size_t sz = sizeof v;
    return g.cupti.cuptiActivityGetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &sz,
                                             &v) == CUPTI_SUCCESS &&
           v == 0;
}

static void reset_quiet_window(void) {
    g.seen_bufs = atomic_load(&g.bufs_in);
    g.window_corr = atomic_load(&g.corr_cb);
    g.quiet_rounds = 0;
    g.quiet_since = 0;
}

/* Another CUPTI client: noticed by the silence (no buffer in TAKEOVER_ROUNDS rounds while the
 * program made TAKEOVER_CALLS calls), ended when it has collected its records. */
static void watch_other_client(uint64_t now) {
    int collecting = atomic_load(&g.collecting);
    if (other_client_left()) {
        write_off_out_buffers();
        CUptiResult r = enable_activity();
        if (collecting)
            set_collecting(1);
        if (!g.taken) {
            g.takeovers++;
            add_notice(g.quiet_since ? g.quiet_since : now,
                       "synctop: another CUPTI client (torch.profiler?) held the activity buffers "
                       "until the next notice: GPU activity in between is missing");
        }
        add_notice(now, r == CUPTI_SUCCESS
                            ? "synctop: GPU activity recorded again (the other CUPTI client let go)"
                            : "synctop: could not take CUPTI's activity buffers back");
        debug("another CUPTI client let go of the activity buffers; %s",
              r == CUPTI_SUCCESS ? "recording GPU activity again" : tr_cupti_strerror(&g.cupti, r));
        g.taken = 0;
        reset_quiet_window();
        return;
    }
    if (g.taken)
        return;
    uint64_t in = atomic_load(&g.bufs_in);
    if (!collecting || in != g.seen_bufs) {
        reset_quiet_window();
        return;
    }
    if (g.quiet_rounds++ == 0)
        g.quiet_since = now;
    uint32_t calls = atomic_load(&g.corr_cb) - g.window_corr;
    if (in > 0 && g.quiet_rounds >= TAKEOVER_ROUNDS && calls >= TAKEOVER_CALLS) {
        g.taken = 1;
        g.takeovers++;
        add_notice(g.quiet_since,
                   "synctop: no GPU activity reaches synctop from here although the program goes "
                   "on: another CUPTI client (torch.profiler?) holds the activity buffers");
        debug("no activity buffer for %u rounds over %u CUDA calls: another CUPTI client holds "
              "them", g.quiet_rounds, calls);
    }
}

/* A tracer started in a running process gets no DEVICE records: CUPTI makes them when the driver
 * initialises, for the clients it has then. The driver the process has loaded names its GPUs
 * instead, in records of the same shape (the ordinals are CUPTI's device ids). Nothing when the
 * process has no libcuda. */
static void name_devices(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL)
        return;
    union {
        void *p;
        CUresult (*count)(int *);
        CUresult (*get)(CUdevice *, int);
        CUresult (*name)(char *, int, CUdevice);
        CUresult (*attr)(int *, CUdevice_attribute, CUdevice);
        CUresult (*mem)(size_t *, CUdevice);
    } count = {dlsym(h, "cuDeviceGetCount")}, get = {dlsym(h, "cuDeviceGet")},
      name = {dlsym(h, "cuDeviceGetName")}, attr = {dlsym(h, "cuDeviceGetAttribute")},
      mem = {dlsym(h, "cuDeviceTotalMem_v2")};
    int n = 0;
    if (count.p != NULL && get.p != NULL && name.p != NULL && count.count(&n) == CUDA_SUCCESS) {
        for (int i = 0; i < n && i < (int)TP_NO_DEVICE; i++) {
            CUdevice dev;
            char text[256] = "";
            if (get.get(&dev, i) != CUDA_SUCCESS || name.name(text, sizeof text, dev) != CUDA_SUCCESS)
                continue;
            int major = 0, minor = 0, sms = 0;
            size_t bytes = 0;
            if (attr.p != NULL) {
                attr.attr(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
                attr.attr(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
                attr.attr(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
            }
            if (mem.p != NULL)
                mem.mem(&bytes, dev);
            CUpti_ActivityDevice5 d;
            memset(&d, 0, sizeof d);
            d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
            d.id = (uint32_t)i;
            d.name = text;
            d.computeCapabilityMajor = (uint32_t)major;
            d.computeCapabilityMinor = (uint32_t)minor;
            d.numMultiprocessors = (uint32_t)sms;
            d.globalMemorySize = bytes;
            tr_conv_activity(g.conv, (const CUpti_Activity *)&d);
        }
    }
    dlclose(h);
}

/* One round of the flush thread. cupti_ok: CUPTI's stateful functions may be called. */
static void pump(int cupti_ok) {
    int go_dormant = 0;
    int live = atomic_load(&g.live_contexts) > 0 || atomic_load(&g.ctx_unknown);
    merge_contexts();
    if (g.name_devices && cupti_ok) {
        g.name_devices = 0;
        name_devices();
    }
    if (g.pub != NULL) {
        int keyframe = 0;
        int subs = tp_pub_poll(g.pub, &keyframe);
        if (keyframe) {
            /* A newcomer, or a subscriber that lost a batch, needs the metadata, and a beacon to
             * put our clock on its own. */
            tp_enc_keyframe(g.enc);
            if (cupti_ok)
                add_clock();
        }
        /* On demand, a change of audience waits for a round that may call CUPTI. */
        if (subs >= 0 && subs != g.subscribers &&
            (g.cfg.mode != TR_MODE_ON_DEMAND || cupti_ok)) {
            if (g.cfg.mode == TR_MODE_ON_DEMAND) {
                if (subs > 0 && g.subscribers == 0) {
                    /* Records of the dormant time are still in CUPTI's buffers: out with them
                     * first (their metadata kept), so that the first viewer sees only its own
                     * time. */
                    if (live)
                        g.cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
                    drain_buffers(0);
                    set_collecting(1);
                } else if (subs == 0) {
                    go_dormant = 1;
                }
            }
            pthread_mutex_lock(&g.wake_mu);
            g.subscribers = subs;
            pthread_cond_broadcast(&g.done_cv);
            pthread_mutex_unlock(&g.wake_mu);
        }
    }
    /* Going dormant: what was collected while a viewer was there is shipped first (to the trace
     * file, and to a viewer that comes back soon), incomplete buffers included. */
    if (cupti_ok && live)
        g.cupti.cuptiActivityFlushAll(go_dormant ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
    if (atomic_exchange(&g.names_stale, 0))
        tr_conv_forget_names(g.conv);
    int keep = atomic_load(&g.collecting);
    drain_buffers(keep);
    drain_hostq();
    if (go_dormant)
        set_collecting(0);
    tr_scan_refresh();

    uint64_t ts = 0;
    if (cupti_ok) {
        ts = cupti_now();
        if (live)
            count_cupti_drops(); /* not under pool_mu: see count_cupti_drops */
        if (clock_ns(CLOCK_MONOTONIC) - g.last_clock >= CLOCK_EVERY_NS)
            add_clock();
        watch_other_client(ts);
    }
    add_drops(TP_DROP_CUPTI, atomic_load(&g.cupti_dropped),
              atomic_load(&g.buf_refused) + atomic_load(&g.buf_foreign) + g.takeovers, ts);
    add_drops(TP_DROP_TRACER, tr_hostq_dropped(g.hostq), 0, ts);
    if (g.pub != NULL) {
        tp_pub_stats ps;
        tp_pub_stats_get(g.pub, &ps);
        add_drops(TP_DROP_PUBLISHER, 0, ps.dropped, ts);
    }
    if (tp_enc_pending(g.enc) > 0)
        ship(0);
    if (g.fw != NULL && !g.fw_failed) {
        /* Into the file each round, not only when the writer's buffer fills: a program that
         * crashes or calls _exit loses one round at most. */
        err_msg err;
        if (tp_fwriter_flush(g.fw, &err) != 0)
            recording_failed(&err);
    }
}

/* The flush thread's last round with CUPTI when synctop_tracer_stop asked: collection and every
 * activity kind off (CONCURRENT_KERNEL only where CUPTI turns it off safely: 13.0 Update 1 on), the
 * records CUPTI holds handed over, incomplete ones too, and converted, then no more callbacks.
 * Once exit has begun CUPTI is left alone, as in every round. */
static void quit_cupti(void) {
    int keep = atomic_load(&g.collecting);
    int cupti_ok = !atomic_load(&g.exiting);
    if (cupti_ok) {
        set_collecting(0);
        if (g.kernels_on && g.cupti.version >= CUPTI_TOGGLES_KERNELS)
            set_kernels(0);
        for (size_t i = 0; i < sizeof meta_kinds / sizeof meta_kinds[0]; i++)
            g.cupti.cuptiActivityDisable(meta_kinds[i]);
        g.cupti.cuptiEnableDomain(0, g.sub, CUPTI_CB_DOMAIN_RESOURCE);
        if (atomic_load(&g.live_contexts) > 0 || atomic_load(&g.ctx_unknown)) {
            g.cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
            count_cupti_drops();
        }
    } else {
        atomic_store(&g.collecting, 0);
    }
    drain_buffers(keep);
    drain_hostq();
    /* Callbacks already running return at once from now on; CUPTI makes no new ones. */
    atomic_store(&g.state, TR_OFF);
    if (cupti_ok)
        g.cupti.cuptiUnsubscribe(g.sub);
}

static void *flush_main(void *arg) {
    (void)arg;
    add_process();
    add_clock();
    ship(0);
    for (;;) {
        pthread_mutex_lock(&g.wake_mu);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        uint64_t ns = (uint64_t)until.tv_nsec + (uint64_t)g.cfg.flush_ms * 1000000ull;
        until.tv_sec += (time_t)(ns / 1000000000ull);
        until.tv_nsec = (long)(ns % 1000000000ull);
        while (!g.stop && !g.kicked && g.drain_req == g.drain_done)
            if (pthread_cond_timedwait(&g.wake_cv, &g.wake_mu, &until) == ETIMEDOUT)
                break;
        if (!g.stop && atomic_load(&g.stop_req))
            g.detaching = 1;
        int stop = g.stop || g.detaching;
        int detaching = g.detaching;
        uint64_t want = g.drain_req;
        g.kicked = 0;
        pthread_mutex_unlock(&g.wake_mu);

        /* A drain request comes from a thread inside CUPTI's context-destruction callback, which
         * already flushed: do not call into CUPTI while it waits. Nor once exit has begun. */
        pump(!stop && want == g.drain_done && !atomic_load(&g.exiting));
        if (detaching)
            quit_cupti();

        pthread_mutex_lock(&g.wake_mu);
        if (want != g.drain_done) {
            g.drain_done = want;
            pthread_cond_broadcast(&g.done_cv);
        }
        pthread_mutex_unlock(&g.wake_mu);
        if (stop)
            break;
    }
    /* The end batch tells every subscriber that this producer is done: it waits (within the
     * linger time) for a slow subscriber's queue to have room, and closing waits the rest. */
    uint64_t end_t0 = clock_ns(CLOCK_MONOTONIC);
    ship_wait(TP_BF_END, (int)g.cfg.linger_ms);
    uint64_t spent_ms = (clock_ns(CLOCK_MONOTONIC) - end_t0) / 1000000u;
    if (g.fw != NULL) { /* the end batch could not be built: close the file all the same */
        err_msg err;
        tp_fwriter_close(&g.fw, &err);
    }
    if (g.pub != NULL) {
        tp_pub_set_linger(g.pub, spent_ms < g.cfg.linger_ms ? (int)(g.cfg.linger_ms - spent_ms) : 0);
        tp_pub_destroy(&g.pub);
    }
    if (g.detaching) {
        /* Nobody joins this thread: it frees what it used and ends by itself. */
        release_all();
        if (g.record_lock >= 0) {
            close(g.record_lock);
            g.record_lock = -1;
        }
        pthread_detach(pthread_self());
    }
    pthread_mutex_lock(&g.wake_mu);
    g.exited = 1;
    if (g.detaching)
        g.running = 0;
    pthread_cond_broadcast(&g.done_cv);
    pthread_mutex_unlock(&g.wake_mu);
    return NULL;
}

static void deadline_in(struct timespec *ts, uint32_t ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    uint64_t ns = (uint64_t)ts->tv_nsec + (uint64_t)ms * 1000000ull;
    ts->tv_sec += (time_t)(ns / 1000000000ull);
    ts->tv_nsec = (long)(ns % 1000000000ull);
}

/* Asks the flush thread for a round that ships everything queued so far (without calling CUPTI:
 * the caller has just flushed it) and waits for it, wait_ms at most. */
static void drain_sync(uint32_t wait_ms) {
    struct timespec until;
    deadline_in(&until, wait_ms);
    pthread_mutex_lock(&g.wake_mu);
    uint64_t want = ++g.drain_req;
    pthread_cond_signal(&g.wake_cv);
    while (g.drain_done < want && !g.exited && !g.detaching)
        if (pthread_cond_timedwait(&g.done_cv, &g.wake_mu, &until) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&g.wake_mu);
}

/* pthread_atfork prepare: a wake-up, so that what is queued leaves soon; nothing that waits. */
static void before_fork(void) {
    if (atomic_load(&g.state) == TR_ON && getpid() == g.pid)
        kick();
}

/* atexit: runs before the destructors of every library loaded until then (CUPTI's included: it is
 * registered after CUPTI is loaded and subscribed), so CUPTI is still there, and usually before the
 * CUDA runtime's own exit handlers (ours is registered during cuInit, theirs when the runtime
 * starts); when theirs run first they destroy the contexts, whose callbacks have flushed already,
 * and this only waits for the shipping. Either way a program that never destroys its context loses
 * nothing that CUPTI has recorded. NVIDIA's CUPTI samples force a flush at exit the same way. The
 * flush thread keeps running (context destruction may follow), but without calling CUPTI. */
static void at_exit(void) {
    if (atomic_load(&g.state) != TR_ON || getpid() != g.pid)
        return;
    if (atomic_load(&g.live_contexts) > 0 || atomic_load(&g.ctx_unknown)) {
        g.cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        count_cupti_drops();
    }
    atomic_store(&g.exiting, 1);
    drain_sync(DRAIN_WAIT_MS);
}

static void in_child(void) {
    atomic_store(&g.collecting, 0);
    atomic_store(&g.state, TR_FORKED);
}

static void release_all(void) {
    tr_sites_destroy(&g.sites);
    tr_conv_destroy(&g.conv);
    tp_enc_destroy(&g.enc);
    tp_buf_free(&g.batch);
    /* The host-call queue stays: an application thread may be inside a callback right now.
     * Buffers CUPTI still holds come back through buf_completed, which frees them from now on. */
    uint8_t *gone[BUF_SLOTS];
    unsigned n = 0;
    pthread_mutex_lock(&g.pool_mu);
    for (unsigned i = 0; i < g.n_slots; i++)
        if (g.bufs[i].state == BUF_FREE || g.bufs[i].state == BUF_DONE) {
            gone[n++] = g.bufs[i].buf;
            g.bufs[i] = (buf_slot){NULL, BUF_NONE};
            g.n_live--;
        }
    g.n_done = 0;
    g.pool_gone = 1;
    pthread_mutex_unlock(&g.pool_mu);
    for (unsigned i = 0; i < n; i++)
        free(gone[i]);
}

/* Runs at exit (see the top of the file for why a destructor and why it is safe). */
__attribute__((destructor)) static void tracer_fini(void) {
    if (atomic_load(&g.state) != TR_ON || getpid() != g.pid)
        return;
    atomic_store(&g.exiting, 1);
    struct timespec until;
    deadline_in(&until, g.cfg.linger_ms + 2000);
    pthread_mutex_lock(&g.wake_mu);
    if (g.detaching) {
        /* Stopping already, for synctop_tracer_stop: it ships and frees by itself. */
        while (g.running)
            if (pthread_cond_timedwait(&g.done_cv, &g.wake_mu, &until) == ETIMEDOUT)
                break;
        pthread_mutex_unlock(&g.wake_mu);
        return;
    }
    atomic_store(&g.collecting, 0);
    atomic_store(&g.state, TR_STOPPED);
    g.stop = 1;
    pthread_cond_signal(&g.wake_cv);
    pthread_mutex_unlock(&g.wake_mu);
    if (pthread_timedjoin_np(g.thread, NULL, &until) != 0)
        return; /* stuck (a stalled disk?): leave it everything it uses */
    release_all();
    if (g.record_lock >= 0) {
        close(g.record_lock);
        g.record_lock = -1;
    }
}

/* ---- injection ---- */

/* The configuration and CUPTI, once, for whichever entry point comes first (NVTX may initialize
 * before CUDA does). 0, or -1 with the reason in why. */
static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t life_mu = PTHREAD_MUTEX_INITIALIZER; /* one start at a time */
static int loaded;             /* 0: not tried, 1: loaded, -1: failed */
static char load_why[600];
static char bad_env[256];

static void read_config(void) { tr_config_read(&g.cfg, NULL, bad_env, sizeof bad_env); }

/* Once; a second caller waits until the first has read it all. */
static void load_config(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, read_config);
}

static int load_cupti(void) {
    pthread_mutex_lock(&load_mu);
    load_config();
    if (loaded == 0) {
        loaded = tr_cupti_load(&g.cupti, g.cfg.cupti[0] ? g.cfg.cupti : NULL, load_why,
                               sizeof load_why) == 0
                     ? 1
                     : -1;
        if (loaded == 1)
            debug("CUPTI %u from %s (%s)", g.cupti.version, g.cupti.path,
                  tr_cupti_source_name(g.cupti.source));
    }
    int rc = loaded == 1 ? 0 : -1;
    pthread_mutex_unlock(&load_mu);
    return rc;
}

/* What a session of tracing starts from: the flush thread's state and the counts it reports. The
 * host-call queue stays from an earlier session (a callback may still hold it), and so do the
 * contexts learnt at creation (they are merged into the new converter). */
static void reset_session(void) {
    g.stop = g.exited = g.kicked = g.detaching = 0;
    g.drain_req = g.drain_done = 0;
    g.subscribers = 0;
    g.fw_failed = 0;
    g.last_clock = 0;
    memset(g.sent_drops, 0, sizeof g.sent_drops);
    g.n_tids = 0;
    g.kernels_on = 0;
    g.seen_bufs = 0;
    g.window_corr = 0;
    g.quiet_rounds = 0;
    g.quiet_since = 0;
    g.taken = 0;
    g.takeovers = 0;
    g.ctx_merged = 0;
    g.name_devices = 0;
    g.record[0] = '\0';
    atomic_store(&g.stop_req, 0);
    atomic_store(&g.buf_refused, 0);
    atomic_store(&g.buf_foreign, 0);
    atomic_store(&g.bufs_in, 0);
    atomic_store(&g.cupti_dropped, 0);
    pthread_mutex_lock(&g.pool_mu);
    g.pool_gone = 0;
    pthread_mutex_unlock(&g.pool_mu);
}

/* late: the process runs CUDA already (synctop_tracer_start), rather than initialising it. */
static int start(int late) {
    reset_session();
    g.why[0] = '\0';
    if (load_cupti() != 0) {
        notice("not tracing: %s", load_why);
        return -1;
    }
    /* Records carry the thread ids the callbacks see (gettid), not pthread_self(): one thread,
     * one lane. Before anything is enabled, as CUPTI requires. */
    if (g.cupti.cuptiSetThreadIdType == NULL ||
        g.cupti.cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) != CUPTI_SUCCESS)
        debug("CUPTI keeps its own thread ids: launches and NVTX ranges get lanes of their own");
    if (g.cupti.cuptiActivitySetAttribute != NULL && g.cupti.cuptiActivityGetAttribute != NULL) {
        uint8_t one = 1, back = 0;
        size_t sz = sizeof one;
        g.attr_ok = g.cupti.cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER,
                                                      &sz, &one) == CUPTI_SUCCESS &&
                    g.cupti.cuptiActivityGetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER,
                                                      &sz, &back) == CUPTI_SUCCESS &&
                    back == 1;
    }
    /* Loads the unwinder and learns the modules (dlopen, malloc): now, not in a callback. */
    tr_scan_refresh();
    /* CPython in this process? (its frames are then part of call sites; silent either way) */
    tr_py_init(NULL, 0);

    g.buf_size = (size_t)g.cfg.buffer_kb * 1024u;
    if (g.hostq == NULL)
        g.hostq = tr_hostq_new(g.cfg.queue_len);
    tp_enc_opts eo = {.producer = 0, .max_string_bytes = 16u << 20, .max_meta_records = 1u << 18};
    g.enc = tp_enc_new(&eo);
    g.conv = g.enc ? tr_conv_new(g.enc) : NULL;
    g.sites = tr_sites_new(g.cfg.frames, 65536);
    if (!g.hostq || !g.enc || !g.conv || !g.sites) {
        notice("not tracing: out of memory");
        release_all();
        return -1;
    }
    tr_conv_set_block_threshold(g.conv, g.cfg.block_threshold_ns);

    CUptiResult r = g.cupti.cuptiSubscribe(&g.sub, on_callback, NULL);
    if (r != CUPTI_SUCCESS) {
        notice("not tracing: CUPTI refused to subscribe (%s)%s", tr_cupti_strerror(&g.cupti, r),
               r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                   ? "; another profiler (nsys, ncu, torch.profiler) holds it"
                   : "");
        release_all();
        return -1;
    }
    err_msg err = {{0}};
    if (strcmp(g.cfg.endpoint, "none") != 0) {
        tp_keypair keys;
        if (g.cfg.curve_key[0] != '\0' && tp_keypair_load(&keys, g.cfg.curve_key, &err) != 0) {
            notice("not tracing: SYNCTOP_CURVE_KEY: %s", err.msg);
            goto unsubscribe;
        }
        tp_pub_opts po = {.endpoint = g.cfg.endpoint[0] ? g.cfg.endpoint : NULL,
                          .sndhwm = g.cfg.sndhwm,
                          .curve = g.cfg.curve_key[0] != '\0' ? &keys : NULL,
                          .insecure = g.cfg.insecure,
                          .producer = tp_enc_producer(g.enc)};
        g.pub = tp_pub_new(&po, &err);
        explicit_bzero(&keys, sizeof keys); /* the secret key lives on in the socket only */
        if (g.pub == NULL && g.cfg.record[0] == '\0') {
            notice("not tracing: cannot publish: %s", err.msg);
            goto unsubscribe;
        }
        if (g.pub == NULL) {
            /* the recording needs no socket */
            notice("not publishing (%s); recording to %s only", err.msg, g.cfg.record);
        } else if (po.endpoint == NULL) {
            char dir[TP_ENDPOINT_MAX];
            err_msg refused = {{0}};
            if (tp_endpoint_dir(dir, sizeof dir, &refused) == 1)
                notice("%s; publishing on %s instead", refused.msg, tp_pub_endpoint(g.pub));
        }
    }
    if (g.cfg.record[0] != '\0') {
        if (tr_record_claim(g.cfg.record, env_rank(), g.record, sizeof g.record, &g.record_lock) != 0) {
            notice("not tracing: cannot record to %s: %s", g.cfg.record, strerror(errno));
            goto unsubscribe;
        }
        g.fw = tp_fwriter_open(g.record, TP_FW_OVERWRITE, &err);
        if (g.fw == NULL) {
            notice("not tracing: cannot record to %s: %s", g.record, err.msg);
            goto unsubscribe;
        }
        if (strcmp(g.record, g.cfg.record) != 0)
            say("recording to %s (%s is another process's)", g.record, g.cfg.record);
    }
    r = enable_activity();
    if (r != CUPTI_SUCCESS) {
        notice("not tracing: CUPTI activity unavailable (%s)", tr_cupti_strerror(&g.cupti, r));
        goto unsubscribe;
    }
    g.cupti.cuptiEnableDomain(1, g.sub, CUPTI_CB_DOMAIN_RESOURCE);

    g.pid = getpid();
    atomic_store(&g.ctx_unknown, late);
    g.name_devices = late;
    atomic_store(&g.state, TR_ON);
    if (late) {
        /* The records of the contexts and streams that exist already (CUPTI's way for a late
         * start), now that buffers are given; CUPTI without it tells of new ones only. */
        for (size_t i = 0; i < sizeof meta_kinds / sizeof meta_kinds[0]; i++)
            if (g.cupti.cuptiActivityEnableAndDump != NULL)
                g.cupti.cuptiActivityEnableAndDump(meta_kinds[i]);
    }
    if (g.cfg.mode == TR_MODE_ALWAYS)
        set_collecting(1);
    static int handlers; /* once for the life of the process, however often tracing starts */
    if (!handlers)
        pthread_atfork(before_fork, NULL, in_child);

    /* The flush thread takes no signal meant for the program. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&g.thread, NULL, flush_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        atomic_store(&g.state, TR_STOPPED);
        atomic_store(&g.collecting, 0);
        notice("not tracing: cannot start the flush thread");
        return -1; /* CUPTI keeps its subscription; every callback now returns at once */
    }
    pthread_mutex_lock(&g.wake_mu);
    g.running = 1;
    pthread_mutex_unlock(&g.wake_mu);
    pthread_setname_np(g.thread, "synctop-flush");
    if (!handlers)
        atexit(at_exit);
    handlers = 1;
    if (bad_env[0] != '\0' && !late)
        say("ignoring unreadable %s", bad_env);

    if (g.pub != NULL && g.cfg.start_wait_ms > 0) {
        struct timespec until;
        deadline_in(&until, g.cfg.start_wait_ms);
        pthread_mutex_lock(&g.wake_mu);
        while (g.subscribers == 0 && !g.exited)
            if (pthread_cond_timedwait(&g.done_cv, &g.wake_mu, &until) == ETIMEDOUT)
                break;
        pthread_mutex_unlock(&g.wake_mu);
    }
    return 0;

unsubscribe:
    g.cupti.cuptiUnsubscribe(g.sub);
    if (g.fw != NULL)
        tp_fwriter_close(&g.fw, &err);
    tp_pub_destroy(&g.pub);
    release_all();
    return -1;
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
    if (!g.cfg.disabled && atomic_load(&g.state) == TR_OFF)
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
    pthread_mutex_lock(&life_mu);
    struct timespec until;
    deadline_in(&until, 10000);
    pthread_mutex_lock(&g.wake_mu);
    while (g.running && (g.detaching || atomic_load(&g.stop_req)))
        if (pthread_cond_timedwait(&g.done_cv, &g.wake_mu, &until) == ETIMEDOUT)
            break;
    int idle = !g.running;
    pthread_mutex_unlock(&g.wake_mu);
    int state = atomic_load(&g.state);
    if (getpid() != g.pid && state != TR_OFF)
        state = TR_FORKED; /* a forked child of a traced process: never traced */
    if (state == TR_OFF && idle) {
        load_config(); /* the environment's, once; then the settings over it */
        char bad[256];
        tr_config_read(&g.cfg, start_settings, bad, sizeof bad);
        if (start(1) == 0 && bad[0] != '\0')
            debug("ignoring unreadable %s", bad);
    } else if (state != TR_ON) {
        snprintf(g.why, sizeof g.why, "not tracing: %s",
                 state == TR_FORKED ? "this process is a fork of a traced one"
                 : idle             ? "tracing ended for good in this process (it is exiting?)"
                                    : "the last session has not ended yet (its flush thread is stuck)");
    }
    pthread_mutex_unlock(&life_mu);
    atomic_store(&start_pending, 0);
    return NULL;
}

__attribute__((visibility("default"))) int synctop_tracer_start(const char *settings) {
    if (atomic_load(&g.state) == TR_ON && !atomic_load(&g.stop_req) && getpid() == g.pid)
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
    if (atomic_load(&g.state) != TR_ON || getpid() != g.pid)
        return 1;
    atomic_store(&g.stop_req, 1);
    return 0;
}

__attribute__((visibility("default"))) const char *synctop_tracer_status(void) { return g.why; }

/* Called by NVTX at its first use (NVTX_INJECTION64_PATH): NVTX goes to the CUPTI that traces.
 * Returns CUPTI's answer, 0 (NVTX then stays a no-op) when there is no CUPTI to give it to. */
typedef const void *(*nvtx_export_table_fn)(uint32_t);
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(nvtx_export_table_fn get_export_table);
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(nvtx_export_table_fn get_export_table) {
    load_config();
    if (g.cfg.disabled || load_cupti() != 0 || g.cupti.nvtx_init == NULL)
        return 0;
    return g.cupti.nvtx_init(get_export_table);
}
