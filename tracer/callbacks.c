/*
 * CUPTI's API and resource callbacks, on the application's threads, and what they touch: the gates
 * they read on every call (the tracer's state, whether it collects, the generation that resets a
 * thread's open calls), each thread's open calls and busy query loop, the contexts learnt at
 * creation, and the counts the flush thread reads (the highest correlation id seen, by which it
 * notices another CUPTI client; the records CUPTI dropped). A callback only reads a clock and copies a few words into the host-call
 * queue (hostq.h); it never allocates on the hot path (a thread's stack bounds are learnt once if
 * unwinding fails: stackscan.h), never prints, and never waits for the flush thread except at
 * context destruction, where the wait is bounded.
 */
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cbids.h"
#include "pyframes.h"
#include "stackscan.h"
#include "tracer_int.h"

#define NOT_READY 600 /* cudaErrorNotReady == CUDA_ERROR_NOT_READY */
#define CTX_MAP 256   /* contexts learnt from creation callbacks */
#define CALL_DEPTH 4  /* nested watched calls followed per thread */

/* What every callback reads, set at each session's start. */
static const tr_config *cfg;
static const tr_cupti *cupti;
static tr_hostq *hostq;

static atomic_int state;      /* TR_* */
static atomic_int collecting; /* callbacks record (0 while dormant, stopped, or in a forked child) */
static atomic_uint gen;       /* bumped at each enable, to reset per-thread state */
static atomic_int live_contexts;
static atomic_int ctx_unknown; /* started in a running process: contexts may exist that no creation
                                  callback counted, so CUPTI is flushed as if one did */
static atomic_int names_stale; /* a module was unloaded: forget cached kernel-name pointers */
static atomic_uint corr_cb;    /* highest correlation id of a watched call */
static atomic_uint_fast64_t cupti_dropped; /* records CUPTI dropped, as it counted them */

/* Contexts learnt from creation callbacks, for the flush thread to merge. */
static struct {
    uint32_t context, device;
} ctx_map[CTX_MAP];
static atomic_uchar ctx_ready[CTX_MAP];
static atomic_uint ctx_n;

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

void tr_callbacks_session(const tr_config *c, const tr_cupti *cu, tr_hostq *q) {
    cfg = c;
    cupti = cu;
    hostq = q;
    atomic_store(&cupti_dropped, 0);
}

int tr_callbacks_state(void) { return atomic_load(&state); }
void tr_callbacks_set_state(int s) { atomic_store(&state, s); }
int tr_callbacks_collecting(void) { return atomic_load(&collecting); }
void tr_callbacks_set_collecting(int on) { atomic_store(&collecting, on); }
void tr_callbacks_new_generation(void) { atomic_fetch_add(&gen, 1); }
void tr_callbacks_set_contexts_unknown(int unknown) { atomic_store(&ctx_unknown, unknown); }

int tr_callbacks_contexts_alive(void) {
    return atomic_load(&live_contexts) > 0 || atomic_load(&ctx_unknown);
}

int tr_callbacks_names_stale(void) { return atomic_exchange(&names_stale, 0); }
uint32_t tr_callbacks_last_correlation(void) { return atomic_load(&corr_cb); }
uint64_t tr_callbacks_dropped(void) { return atomic_load(&cupti_dropped); }

/* CUPTI resets its counter at each query, so every query adds to ours. Never called while holding
 * a lock that the buffer callbacks take: CUPTI may call them from here (Kineto documents the
 * deadlock). */
void tr_callbacks_count_drops(void) {
    size_t dropped = 0;
    if (cupti->cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS)
        atomic_fetch_add(&cupti_dropped, dropped);
}

static uint32_t my_tid(void) {
    if (tls.tid == 0)
        tls.tid = (uint32_t)syscall(SYS_gettid);
    return tls.tid;
}

static uint64_t cupti_now(void) {
    uint64_t t = 0;
    cupti->cuptiGetTimestamp(&t);
    return t;
}

static unsigned take_frames(uintptr_t *out) {
    return tr_scan_take(out, TR_RAW_FRAMES, tls.cb_frame);
}

/* ---- contexts learnt at creation ---- */

static void learn_context(const CUpti_ResourceData *rd) {
    uint32_t id = 0, dev = 0;
    if (rd == NULL || rd->context == NULL || cupti->cuptiGetContextId == NULL ||
        cupti->cuptiGetDeviceId == NULL ||
        cupti->cuptiGetContextId(rd->context, &id) != CUPTI_SUCCESS ||
        cupti->cuptiGetDeviceId(rd->context, &dev) != CUPTI_SUCCESS)
        return;
    unsigned i = atomic_fetch_add(&ctx_n, 1);
    if (i >= CTX_MAP)
        return; /* the CONTEXT records still tell */
    ctx_map[i].context = id;
    ctx_map[i].device = dev;
    atomic_store_explicit(&ctx_ready[i], 1, memory_order_release);
}

void tr_callbacks_merge_contexts(tr_conv *into, unsigned *merged) {
    unsigned n = atomic_load(&ctx_n);
    if (n > CTX_MAP)
        n = CTX_MAP;
    while (*merged < n && atomic_load_explicit(&ctx_ready[*merged], memory_order_acquire)) {
        tr_conv_set_context(into, ctx_map[*merged].context, ctx_map[*merged].device);
        (*merged)++;
    }
}

/* ---- host-call callbacks ---- */

static unsigned take_py(tr_pyframe *out) {
    return tr_py_capture(out, cfg->frames < TR_PY_FRAMES ? cfg->frames : TR_PY_FRAMES);
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
    ev.blocking = may_wait && end - start >= cfg->block_threshold_ns;
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
    tr_hostq_push(hostq, &ev);
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
    if (p->end - p->start >= cfg->block_threshold_ns)
        push_event(p->driver, p->cbid, p->correlation, p->context, NOT_READY, p->start, p->end,
                   p->polls, p->frames, p->n_frames, p->py, p->n_py, 1);
}

static void on_poll_exit(const CUpti_CallbackData *cd, uint8_t driver, uint32_t cbid,
                         uint64_t start, uint64_t end, int32_t ret) {
    poll_run *p = &tls.poll;
    if (p->active && (p->cbid != cbid || p->driver != driver ||
                      start > p->end + cfg->poll_gap_ns))
        end_poll_run();
    if (!p->active) {
        if (ret != NOT_READY) {
            /* A lone query: worth an event only if it waited by itself. */
            if (end - start >= cfg->block_threshold_ns)
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
    unsigned cur = atomic_load_explicit(&corr_cb, memory_order_relaxed);
    while (corr > cur && !atomic_compare_exchange_weak_explicit(&corr_cb, &cur, corr,
                                                                memory_order_relaxed,
                                                                memory_order_relaxed)) {
    }
}

static void on_api(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const CUpti_CallbackData *cd) {
    enum tr_cb_class cls = tr_cb_class_of(dom, cbid);
    if (cls == TR_CB_NONE || cls == TR_CB_LAUNCH)
        return;
    unsigned g = atomic_load_explicit(&gen, memory_order_relaxed);
    if (tls.gen != g) {
        tls.gen = g;
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

static void on_resource(CUpti_CallbackId cbid, const void *data) {
    switch (cbid) {
    case CUPTI_CBID_RESOURCE_CONTEXT_CREATED:
        learn_context(data);
        atomic_fetch_add(&live_contexts, 1);
        tr_wake_kick();
        break;
    case CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING:
        /* The last chance to get this context's records: flush them out of CUPTI now, on this
         * thread (CUPTI is alive: it is calling us), and let the flush thread ship them before
         * the process may end. */
        end_poll_run();
        cupti->cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        tr_callbacks_count_drops();
        if (atomic_load(&live_contexts) > 0)
            atomic_fetch_sub(&live_contexts, 1);
        tr_wake_drain_sync(TR_DRAIN_WAIT_MS);
        break;
    case CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING:
        atomic_store(&names_stale, 1);
        break;
    default:
        break;
    }
}

void CUPTIAPI tr_callbacks_on(void *userdata, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
                              const void *data) {
    (void)userdata;
    int s = atomic_load_explicit(&state, memory_order_acquire);
    if (s != TR_ON)
        return;
    if (dom == CUPTI_CB_DOMAIN_RESOURCE) {
        on_resource(cbid, data);
        return;
    }
    if (!atomic_load_explicit(&collecting, memory_order_relaxed))
        return;
    tls.cb_frame = (uintptr_t)__builtin_frame_address(0);
    if (dom == CUPTI_CB_DOMAIN_RUNTIME_API || dom == CUPTI_CB_DOMAIN_DRIVER_API)
        on_api(dom, cbid, data);
}
