/*
 * libsynctop-tracer.so: the library the CUDA driver loads into a program through
 * CUDA_INJECTION64_PATH. It exports InitializeInjection and nothing else.
 *
 * Two kinds of threads meet here. Application threads run CUPTI's callbacks: they only read a
 * clock, copy a few words into a lock-free queue (hostq.h) or hand a filled activity buffer over
 * under a mutex held for a few instructions; they never allocate on the hot path (the one
 * exception is a new activity buffer, which CUPTI asks for rarely), never print, never block on
 * the flush thread except at context destruction, where the wait is bounded. One flush thread owns
 * everything else: the encoder, the publisher, the trace file, symbolization. It asks CUPTI for
 * completed buffers every SYNCTOP_FLUSH_MS, converts them (convert.h), drains the host-call
 * queue, and ships batches.
 *
 * Lifecycle. InitializeInjection loads CUPTI (cupti_load.h), subscribes, binds the publisher,
 * opens the trace file, enables activity and callbacks, and starts the flush thread; any failure
 * prints one line (unless SYNCTOP_QUIET) and leaves the program untraced and untouched.
 * Python: when the host is CPython, blocking calls also carry the calling thread's Python frames
 * (pyframes.h), read without the GIL; nothing is said when it is not, or is a version the tracer
 * does not read (call sites are then native only).
 *
 * End of data, in the order it happens at a normal exit:
 * - An exit handler (atexit, registered at injection: it runs before CUPTI's destructors, and
 *   usually before the CUDA runtime's own exit handlers) forces CUPTI's buffers out,
 *   incomplete ones included, and waits, bounded, until they are shipped. NVIDIA's CUPTI samples
 *   flush at exit the same way; without it a program that never destroys its context (most
 *   PyTorch programs) would lose what CUPTI held at exit. It leaves the flush thread running.
 * - CUPTI's resource callback for context destruction (cudaDeviceReset, cuCtxDestroy, the runtime
 *   releasing its primary contexts at exit) force-flushes that context's records while it still
 *   exists and waits, bounded, until the flush thread has shipped them.
 * - The final batch (TP_BF_END) is written by a destructor of this library, which cannot run
 *   before the runtime's exit handlers, and is safe by what it does not do: it calls no CUPTI
 *   function that touches CUPTI's state (by then libcupti's own destructors may have run; walking
 *   a buffer we own with cuptiActivityGetNextRecord is pure), it does nothing in a forked child or
 *   when tracing never started, and it waits for the flush thread a bounded time
 *   (SYNCTOP_LINGER_MS + 2 s), leaving it be rather than freeing what it still uses. The flush
 *   thread itself stops calling CUPTI's stateful functions once no context is alive.
 * What a program loses when it does not exit normally (_exit, os._exit, abort, a fatal signal):
 * at most one flush period (SYNCTOP_FLUSH_MS) of records, since the flush thread ships and writes
 * the trace file through to the kernel every round; such a trace file has no END batch and no
 * footer, and readers recover it by scanning. No signal handler is ever installed.
 * fork: the prepare handler of pthread_atfork flushes like the exit handler, waiting at most
 * FORK_WAIT_MS, so that a parent that forks and leaves with _exit (a daemon's first half) loses
 * nothing; the child handler turns every callback into an immediate return, so a child never
 * calls CUPTI (it has no flush thread, and CUPTI in a forked child can hang). Neither the exit
 * handler nor the destructor does anything in a child.
 */
#include <cupti.h>
#include <errno.h>
#include <execinfo.h>
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
#include "synctop/codec.h"
#include "synctop/file.h"
#include "synctop/net.h"

#define SHIP_BYTES (1u << 20)        /* a batch is shipped once it holds this much */
#define CLOCK_EVERY_NS 1000000000ull /* clock beacon period */
#define DRAIN_WAIT_MS 2000           /* context destruction waits at most this for the flush */
#define FORK_WAIT_MS 500             /* fork() waits at most this for the flush */
#define NOT_READY 600                /* cudaErrorNotReady == CUDA_ERROR_NOT_READY */
#define MAX_THREADS 4096             /* threads described with TP_K_THREAD */

enum { TR_OFF = 0, TR_ON = 1, TR_STOPPED = 2, TR_FORKED = 3 };

typedef struct done_buf {
    uint8_t *buf;
    size_t valid;
} done_buf;

static struct {
    atomic_int state;      /* TR_* */
    atomic_int collecting; /* callbacks record (0 while dormant, stopped, or in a forked child) */
    atomic_uint gen;       /* bumped at each enable, to reset per-thread state */
    atomic_int live_contexts;
    atomic_int names_stale; /* a module was unloaded: forget cached kernel-name pointers */
    atomic_uint_fast64_t buf_refused;
    pid_t pid;
    tr_config cfg;
    tr_cupti cupti;
    CUpti_SubscriberHandle sub;
    tr_hostq *hostq;

    /* Activity buffers: pool and completed list, both under pool_mu (held for a few stores). */
    pthread_mutex_t pool_mu;
    uint8_t **free_bufs;
    unsigned n_free, n_alloc;
    done_buf *done;
    unsigned n_done;
    size_t buf_size;

    /* Flush thread control, under wake_mu. */
    pthread_mutex_t wake_mu;
    pthread_cond_t wake_cv, done_cv;
    pthread_t thread;
    int stop, exited, kicked;
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
} g = {.pool_mu = PTHREAD_MUTEX_INITIALIZER,
       .wake_mu = PTHREAD_MUTEX_INITIALIZER,
       .wake_cv = PTHREAD_COND_INITIALIZER,
       .done_cv = PTHREAD_COND_INITIALIZER};

/* Per application thread: who we are, and a busy query loop being folded into one event. */
typedef struct poll_run {
    int active;
    uint8_t driver;
    uint32_t cbid, correlation, context, polls;
    uint64_t start, end;
    uint8_t n_frames, n_py;
    uintptr_t frames[TR_RAW_FRAMES];
    tr_pyframe py[TR_PY_FRAMES];
} poll_run;

static __thread struct {
    uint32_t tid;
    unsigned gen;
    int runtime_depth; /* inside a watched runtime call: its driver calls are not separate waits */
    poll_run poll;
} tls;

/* ---- small helpers ---- */

static void notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void notice(const char *fmt, ...) {
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (g.cfg.quiet || atomic_flag_test_and_set(&said))
        return;
    char line[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "synctop: %s\n", line);
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

static unsigned take_frames(uintptr_t *out) {
    void *pcs[TR_RAW_FRAMES];
    /* backtrace() was primed at init, so the unwinder is loaded and this does not allocate. */
    int n = backtrace(pcs, TR_RAW_FRAMES);
    for (int i = 0; i < n; i++)
        out[i] = (uintptr_t)pcs[i];
    return n > 0 ? (unsigned)n : 0;
}

static void kick(void) {
    pthread_mutex_lock(&g.wake_mu);
    g.kicked = 1;
    pthread_cond_signal(&g.wake_cv);
    pthread_mutex_unlock(&g.wake_mu);
}

/* ---- activity buffers (CUPTI calls these from any thread, concurrently) ---- */

static void CUPTIAPI buf_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = NULL;
    *size = 0;
    *max_records = 0;
    if (atomic_load_explicit(&g.state, memory_order_acquire) != TR_ON)
        return;
    uint8_t *b = NULL;
    int alloc = 0;
    pthread_mutex_lock(&g.pool_mu);
    if (g.n_free > 0)
        b = g.free_bufs[--g.n_free];
    else if (g.n_alloc < g.cfg.max_buffers) {
        g.n_alloc++;
        alloc = 1;
    }
    pthread_mutex_unlock(&g.pool_mu);
    if (alloc) {
        b = aligned_alloc(8, g.buf_size);
        if (b == NULL) {
            pthread_mutex_lock(&g.pool_mu);
            g.n_alloc--;
            pthread_mutex_unlock(&g.pool_mu);
        }
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
    int orphan = 0;
    pthread_mutex_lock(&g.pool_mu);
    if (g.done == NULL)
        orphan = 1; /* the pool is gone (after exit): the buffer is ours to free */
    else if (valid > 0 && g.n_done < g.cfg.max_buffers)
        g.done[g.n_done++] = (done_buf){buffer, valid};
    else if (g.n_free < g.cfg.max_buffers)
        g.free_bufs[g.n_free++] = buffer;
    pthread_mutex_unlock(&g.pool_mu);
    if (orphan) {
        free(buffer);
        return;
    }
    if (valid > 0 && state == TR_ON)
        kick();
}

/* ---- host-call callbacks ---- */

static unsigned take_py(tr_pyframe *out) {
    return tr_py_capture(out, g.cfg.frames < TR_PY_FRAMES ? g.cfg.frames : TR_PY_FRAMES);
}

/* frames == NULL: take the call site now; else it was taken earlier (a poll run's first call). */
static void push_event(uint8_t driver, uint32_t cbid, uint32_t corr, uint32_t context, int32_t ret,
                       uint64_t start, uint64_t end, uint32_t polls, const uintptr_t *frames,
                       unsigned n_frames, const tr_pyframe *py, unsigned n_py) {
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
    ev.blocking = end - start >= g.cfg.block_threshold_ns;
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

/* A busy query loop ends when a query reports ready or the thread calls something else; it is
 * one event spanning the loop, a wait when the loop lasted the threshold. */
static void end_poll_run(void) {
    poll_run *p = &tls.poll;
    if (!p->active)
        return;
    p->active = 0;
    if (p->end - p->start >= g.cfg.block_threshold_ns)
        push_event(p->driver, p->cbid, p->correlation, p->context, NOT_READY, p->start, p->end,
                   p->polls, p->frames, p->n_frames, p->py, p->n_py);
}

static void on_poll_exit(const CUpti_CallbackData *cd, uint8_t driver, uint32_t cbid,
                         uint64_t start, uint64_t end, int32_t ret) {
    poll_run *p = &tls.poll;
    if (p->active && (p->cbid != cbid || p->driver != driver))
        end_poll_run();
    if (!p->active) {
        if (ret != NOT_READY) {
            /* A lone query: worth an event only if it waited by itself. */
            if (end - start >= g.cfg.block_threshold_ns)
                push_event(driver, cbid, cd->correlationId, cd->contextUid, ret, start, end, 1,
                           NULL, 0, NULL, 0);
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

static void on_api(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const CUpti_CallbackData *cd) {
    enum tr_cb_class cls = tr_cb_class_of(dom, cbid);
    if (cls == TR_CB_NONE || cls == TR_CB_LAUNCH)
        return;
    unsigned gen = atomic_load_explicit(&g.gen, memory_order_relaxed);
    if (tls.gen != gen) {
        tls.gen = gen;
        tls.runtime_depth = 0;
        tls.poll.active = 0;
    }
    uint8_t driver = dom == CUPTI_CB_DOMAIN_DRIVER_API;
    if (driver && tls.runtime_depth > 0)
        return;
    if (cd->callbackSite == CUPTI_API_ENTER) {
        if (!driver)
            tls.runtime_depth++;
        *cd->correlationData = cupti_now();
        return;
    }
    if (!driver && tls.runtime_depth > 0)
        tls.runtime_depth--;
    uint64_t start = *cd->correlationData;
    if (start == 0)
        return; /* entered before we were collecting */
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
               0);
}

static void drain_sync(uint32_t wait_ms);

/* CUPTI resets its counter at each query, so every query adds to ours. Never call this while
 * holding pool_mu: CUPTI may call buf_completed, which takes it. */
static void count_cupti_drops(void) {
    size_t dropped = 0;
    if (g.cupti.cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS)
        atomic_fetch_add(&g.cupti_dropped, dropped);
}

static void on_resource(CUpti_CallbackId cbid) {
    switch (cbid) {
    case CUPTI_CBID_RESOURCE_CONTEXT_CREATED:
        atomic_fetch_add(&g.live_contexts, 1);
        kick();
        break;
    case CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING:
        /* The last chance to get this context's records: flush them out of CUPTI now, on this
         * thread, and let the flush thread ship them before the process may end. */
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
        on_resource(cbid);
        return;
    }
    if (!atomic_load_explicit(&g.collecting, memory_order_relaxed))
        return;
    if (dom == CUPTI_CB_DOMAIN_RUNTIME_API || dom == CUPTI_CB_DOMAIN_DRIVER_API)
        on_api(dom, cbid, data);
}

/* ---- enabling ---- */

static const CUpti_ActivityKind optional_kinds[] = {
    CUPTI_ACTIVITY_KIND_MEMCPY,  CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_MARKER,  CUPTI_ACTIVITY_KIND_DEVICE, CUPTI_ACTIVITY_KIND_CONTEXT,
    CUPTI_ACTIVITY_KIND_STREAM,
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

/* Turns collection on or off, but for CONCURRENT_KERNEL: enabling it late makes CUPTI instrument
 * every loaded module, which has stalled programs for seconds, so it stays on from the start and
 * a dormant tracer throws its kernel records away. */
static void set_collecting(int on) {
    uint8_t flag = (uint8_t)on;
    if (on)
        atomic_fetch_add(&g.gen, 1);
    else
        atomic_store(&g.collecting, 0);
    /* The callbacks first and the activity kinds last, in this order, either way: once the last
     * kind (STREAM) is seen on or off, so is everything else (the on-demand test waits on it). */
    tr_cb_foreach(set_one, &flag);
    for (size_t i = 0; i < sizeof optional_kinds / sizeof optional_kinds[0]; i++) {
        if (on)
            g.cupti.cuptiActivityEnable(optional_kinds[i]);
        else
            g.cupti.cuptiActivityDisable(optional_kinds[i]);
    }
    if (on)
        atomic_store(&g.collecting, 1);
}

/* ---- flush thread ---- */

static void add(const void *rec) { tp_enc_add(g.enc, rec); }

/* The trace file could not take a batch (a full disk, a file size limit): the file keeps what it
 * has (readers see it was not closed cleanly), tracing goes on for the live subscribers, and the
 * program's stderr gets one line. */
static void recording_failed(const err_msg *err) {
    g.fw_failed = 1;
    if (!g.cfg.quiet)
        fprintf(stderr, "synctop: recording to %s stopped: %s; the file keeps what came before\n", g.cfg.record,
                err->msg);
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
                    .rank = -1, .world = -1,
                    .start_realtime_ns = clock_ns(CLOCK_REALTIME)};
    if (!env_int("RANK", &p.rank) && !env_int("OMPI_COMM_WORLD_RANK", &p.rank))
        env_int("LOCAL_RANK", &p.rank);
    if (!env_int("WORLD_SIZE", &p.world))
        env_int("OMPI_COMM_WORLD_SIZE", &p.world);
    add(&p);
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

static void convert_buffer(uint8_t *buf, size_t valid, int keep) {
    CUpti_Activity *rec = NULL;
    while (g.cupti.cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
        if (!keep)
            continue;
        tr_conv_activity(g.conv, rec);
        if (rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME || rec->kind == CUPTI_ACTIVITY_KIND_DRIVER)
            note_thread(((const CUpti_ActivityAPI *)rec)->threadId);
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
        pthread_mutex_unlock(&g.pool_mu);
        if (n == 0)
            return;
        /* The list is a stack; walk in the order CUPTI completed them. */
        for (unsigned i = n; i-- > 0;)
            convert_buffer(local[i].buf, local[i].valid, keep);
        pthread_mutex_lock(&g.pool_mu);
        for (unsigned i = 0; i < n; i++)
            g.free_bufs[g.n_free++] = local[i].buf;
        pthread_mutex_unlock(&g.pool_mu);
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

/* One round of the flush thread. cupti_ok: CUPTI's stateful functions may be called. */
static void pump(int cupti_ok) {
    int go_dormant = 0;
    int live = atomic_load(&g.live_contexts) > 0;
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
                    /* Kernel records of the dormant time are still in CUPTI's buffers: out with
                     * them first, so that the first viewer sees only its own time. */
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

    uint64_t ts = 0;
    if (cupti_ok) {
        ts = cupti_now();
        if (live) {
            count_cupti_drops(); /* not under pool_mu: see count_cupti_drops */
        }
        if (clock_ns(CLOCK_MONOTONIC) - g.last_clock >= CLOCK_EVERY_NS)
            add_clock();
    }
    add_drops(TP_DROP_CUPTI, atomic_load(&g.cupti_dropped), atomic_load(&g.buf_refused), ts);
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
        int stop = g.stop;
        uint64_t want = g.drain_req;
        g.kicked = 0;
        pthread_mutex_unlock(&g.wake_mu);

        /* A drain request comes from a thread inside CUPTI's context-destruction callback, which
         * already flushed: do not call into CUPTI while it waits. */
        pump(!stop && want == g.drain_done);

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
    pthread_mutex_lock(&g.wake_mu);
    g.exited = 1;
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
    while (g.drain_done < want && !g.exited)
        if (pthread_cond_timedwait(&g.done_cv, &g.wake_mu, &until) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&g.wake_mu);
}

/* CUPTI's buffers, incomplete ones included, out to the flush thread, and shipped: what fork and
 * exit must not lose. Only in the process that started tracing, while it traces. */
static void flush_now(uint32_t wait_ms) {
    if (atomic_load(&g.state) != TR_ON || getpid() != g.pid)
        return;
    if (atomic_load(&g.live_contexts) > 0) {
        g.cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        count_cupti_drops();
    }
    drain_sync(wait_ms);
}

/* pthread_atfork prepare: a parent that forks may be about to leave without exiting normally
 * (a daemon's first half calls _exit), and the child will not ship what it inherits. */
static void before_fork(void) { flush_now(FORK_WAIT_MS); }

/* atexit: runs before the destructors of every library loaded until then (CUPTI's included: it is
 * registered after CUPTI is loaded and subscribed), so CUPTI is still there, and usually before the
 * CUDA runtime's own exit handlers (ours is registered during cuInit, theirs when the runtime
 * starts); when theirs run first they destroy the contexts, whose callbacks have flushed already,
 * and this only waits for the shipping. Either way a program that never destroys its context loses
 * nothing that CUPTI has recorded. NVIDIA's CUPTI samples force a flush at exit the same way. The
 * flush thread keeps running: context destruction may follow. */
static void at_exit(void) { flush_now(DRAIN_WAIT_MS); }

static void in_child(void) {
    atomic_store(&g.collecting, 0);
    atomic_store(&g.state, TR_FORKED);
}

static void release_all(void) {
    tr_sites_destroy(&g.sites);
    tr_conv_destroy(&g.conv);
    tp_enc_destroy(&g.enc);
    tp_buf_free(&g.batch);
    /* The host-call queue stays: an application thread may be inside a callback right now. Buffers
     * CUPTI still holds come back through buf_completed, which frees them from now on. */
    pthread_mutex_lock(&g.pool_mu);
    for (unsigned i = 0; g.free_bufs != NULL && i < g.n_free; i++)
        free(g.free_bufs[i]);
    for (unsigned i = 0; g.done != NULL && i < g.n_done; i++)
        free(g.done[i].buf);
    free(g.free_bufs);
    free(g.done);
    g.free_bufs = NULL;
    g.done = NULL;
    g.n_free = g.n_done = 0;
    pthread_mutex_unlock(&g.pool_mu);
}

/* Runs at exit (see the top of the file for why a destructor and why it is safe). */
__attribute__((destructor)) static void tracer_fini(void) {
    if (atomic_load(&g.state) != TR_ON || getpid() != g.pid)
        return;
    atomic_store(&g.collecting, 0);
    atomic_store(&g.state, TR_STOPPED);
    pthread_mutex_lock(&g.wake_mu);
    g.stop = 1;
    pthread_cond_signal(&g.wake_cv);
    pthread_mutex_unlock(&g.wake_mu);
    struct timespec until;
    deadline_in(&until, g.cfg.linger_ms + 2000);
    if (pthread_timedjoin_np(g.thread, NULL, &until) != 0)
        return; /* stuck (a stalled disk?): leave it everything it uses */
    release_all();
}

static int start(void) {
    char why[600];
    if (tr_cupti_load(&g.cupti, g.cfg.cupti[0] ? g.cfg.cupti : NULL, why, sizeof why) != 0) {
        notice("not tracing: %s", why);
        return -1;
    }
    /* The first backtrace() loads the unwinder (dlopen, malloc): do it now, not in a callback. */
    void *prime[4];
    backtrace(prime, 4);
    /* CPython in this process? (its frames are then part of call sites; silent either way) */
    tr_py_init(NULL, 0);

    g.buf_size = (size_t)g.cfg.buffer_kb * 1024u;
    g.free_bufs = calloc(g.cfg.max_buffers, sizeof *g.free_bufs);
    g.done = calloc(g.cfg.max_buffers, sizeof *g.done);
    g.hostq = tr_hostq_new(g.cfg.queue_len);
    tp_enc_opts eo = {.producer = 0, .max_string_bytes = 16u << 20, .max_meta_records = 1u << 18};
    g.enc = tp_enc_new(&eo);
    g.conv = g.enc ? tr_conv_new(g.enc) : NULL;
    g.sites = tr_sites_new(g.cfg.frames, 65536);
    if (!g.free_bufs || !g.done || !g.hostq || !g.enc || !g.conv || !g.sites) {
        notice("not tracing: out of memory");
        release_all();
        return -1;
    }

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
                          .insecure = g.cfg.insecure};
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
        g.fw = tp_fwriter_open(g.cfg.record, TP_FW_OVERWRITE, &err);
        if (g.fw == NULL) {
            notice("not tracing: cannot record to %s: %s", g.cfg.record, err.msg);
            goto unsubscribe;
        }
    }
    r = g.cupti.cuptiActivityRegisterCallbacks(buf_requested, buf_completed);
    if (r == CUPTI_SUCCESS)
        r = g.cupti.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r != CUPTI_SUCCESS) {
        notice("not tracing: CUPTI activity unavailable (%s)", tr_cupti_strerror(&g.cupti, r));
        goto unsubscribe;
    }
    g.cupti.cuptiEnableDomain(1, g.sub, CUPTI_CB_DOMAIN_RESOURCE);

    g.pid = getpid();
    atomic_store(&g.state, TR_ON);
    if (g.cfg.mode == TR_MODE_ALWAYS)
        set_collecting(1);
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
    pthread_setname_np(g.thread, "synctop-flush");
    atexit(at_exit);

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
    char bad[256];
    tr_config_from_env(&g.cfg, bad, sizeof bad);
    if (g.cfg.disabled)
        return 1;
    if (start() == 0 && bad[0] != '\0')
        notice("ignoring unreadable %s", bad);
    return 1;
}
