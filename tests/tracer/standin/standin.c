/*
 * The stand-in libcupti (standin.h): CUPTI's functions as the tracer uses them, and a script player
 * that behaves like a CUDA program under CUPTI. Records are CUPTI 13's structs laid end to end in
 * buffers the tracer hands out, which is what cuptiActivityGetNextRecord walks.
 */
#include "standin.h"

#include <cupti.h>
#include <cupti_activity_deprecated.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cupti_newer.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_LINES 4096
#define MAX_KINDS 128 /* activity kinds known: CUPTI 13's, and NEWER_KIND */
/* A kind of a CUPTI newer than the headers the tracer was built with: the library knows its size
 * and walks past it, the tracer has never heard of it. */
#define NEWER_KIND (CUPTI_ACTIVITY_KIND_COUNT + 8)
#define NEWER_SIZE 48
#define MAX_RECORD 304 /* bytes of the largest record written (CUPTI 13.4's GreenContext3) */
/* What the fields a later CUPTI appends to 13.0's records hold: anything, the tracer reads none. */
#define APPENDED32 0x5a5a5a5au
#define APPENDED64 0x5a5a5a5a5a5a5a5aull
#define MAX_SLOTS 64
#define MAX_SITES 16

/* One producer thread's current buffer, like CUPTI's per-thread buffers. */
typedef struct slot {
    pthread_mutex_t mu;
    pthread_t owner;
    int used_slot;
    uint8_t *buf;
    size_t size, used;
    int complete; /* a `flush` said its records are complete */
    int running;  /* it holds the record of work still running: only a forced flush returns it */
} slot;

#define MAX_CONTEXTS 64
#define OTHER_BUF 65536 /* the other client's buffers */
#define MAX_OTHER 256

static struct {
    pthread_mutex_t mu; /* guards the slot table and the enable tables */
    CUpti_BuffersCallbackRequestFunc req;
    CUpti_BuffersCallbackCompleteFunc comp;
    CUpti_CallbackFunc cb;
    void *ud;
    int subscribed;
    int fail_subscribe;
    uint8_t kinds[MAX_KINDS];
    int kernel_kind_ever; /* CUPTI_ACTIVITY_KIND_KERNEL was enabled at some point */
    uint8_t cb_on[4][1024];
    uint8_t domain_on[8];
    uint8_t rt_api[1024], drv_api[1024];
    atomic_uint_fast64_t clock;
    atomic_size_t dropped;
    atomic_int flushes;
    slot slots[MAX_SLOTS];
    pid_t pid;
    char *lines[MAX_LINES];
    int n_lines;
    standin_site_fn sites[MAX_SITES];
    int n_sites;
    int child_status;
    CUpti_ActivityThreadIdType tid_type;
    uint8_t all_sync;     /* cuptiActivityEnableAllSyncRecords: records of not-ready queries too */
    uint8_t per_thread;   /* CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER */
    atomic_int forced;    /* forced flushes */
    atomic_int torn_down; /* CUPTI's own exit-time teardown has run */
    int nvtx_ready;       /* NVTX handed itself to this CUPTI (InitializeInjectionNvtx2) */
    int unwind_off;       /* callbacks run through a frame the unwinder cannot pass */
    size_t kernel_size;   /* bytes of a kernel record ($SYNCTOP_STANDIN_KERNEL_SIZE: another version) */
    int cupti12;          /* $SYNCTOP_STANDIN_CUPTI=12: CUPTI 12's record versions */
    int minor13;          /* $SYNCTOP_STANDIN_CUPTI=13.N: CUPTI 13.N's record versions (N) */
    uint32_t version;     /* what cuptiGetVersion says ($SYNCTOP_STANDIN_VERSION) */
    long enable_ms;       /* cuptiActivityEnable takes this long ($SYNCTOP_STANDIN_ENABLE_MS) */
    int context2;         /* CONTEXT records are CUPTI 12.4's Context2 */
    /* CUPTI's worker thread (`worker on`): the device records it has not collected yet, and the
     * collections asked for and done. */
    pthread_t worker;
    int worker_on;
    pthread_cond_t worker_cv;
    struct pending_rec {
        size_t size;
        uint8_t bytes[MAX_RECORD];
    } *pending;
    size_t n_pending, cap_pending;
    unsigned collect_asked, collect_done;
    atomic_int worker_buffers; /* buffers handed over on the worker thread */
    atomic_int exit_buffers;   /* of them, during CUPTI's teardown at exit */
    CUptiResult other_subscribe; /* what the other client's cuptiSubscribe returned (-1: none) */
    struct {
        uint32_t id, device;
        int alive;
    } contexts[MAX_CONTEXTS];
    int n_contexts;
    /* The metadata records played so far, whatever was enabled then: what
     * cuptiActivityEnableAndDump hands a client that subscribes late. Devices only when CUPTI was
     * subscribed as the driver initialised (played them), as the real one says. */
    CUpti_ActivityDevice5 dev_recs[MAX_CONTEXTS];
    int dev_seen[MAX_CONTEXTS];
    int n_dev_recs;
    CUpti_ActivityContext3 ctx_recs[MAX_CONTEXTS];
    int n_ctx_recs;
    CUpti_ActivityStream stream_recs[MAX_CONTEXTS];
    int n_stream_recs;
    /* The other CUPTI client (a profiler): its buffers and what it received. */
    uint8_t *other_bufs[MAX_OTHER];
    int n_other;
    atomic_int other_records, other_unknown;
    int other_active;
} S = {.mu = PTHREAD_MUTEX_INITIALIZER, .child_status = -1, .all_sync = 1, .per_thread = 1,
       .worker_cv = PTHREAD_COND_INITIALIZER, .other_subscribe = (CUptiResult)-1};

__attribute__((constructor)) static void standin_init(void) {
    S.pid = getpid();
    atomic_init(&S.clock, 1000000000ull);
    const char *ks = getenv("SYNCTOP_STANDIN_KERNEL_SIZE");
    const char *cv = getenv("SYNCTOP_STANDIN_CUPTI"), *vs = getenv("SYNCTOP_STANDIN_VERSION");
    S.cupti12 = cv != NULL && strcmp(cv, "12") == 0;
    S.minor13 = cv != NULL && strncmp(cv, "13.", 3) == 0 ? atoi(cv + 3) : 0;
    S.version = S.cupti12 ? 24 /* CUDA 12.6's CUPTI */
                : S.minor13 ? 130000 + 100 * (uint32_t)S.minor13
                            : CUPTI_API_VERSION;
#ifdef STANDIN_CUPTI_12_4
    S.cupti12 = 1;
    S.context2 = 1;
    S.version = 22; /* CUDA 12.4's */
#endif
    if (vs != NULL && atoi(vs) > 0)
        S.version = (uint32_t)atoi(vs);
    const char *es = getenv("SYNCTOP_STANDIN_ENABLE_MS");
    S.enable_ms = es != NULL && atol(es) > 0 ? atol(es) : 0;
    S.kernel_size = S.cupti12         ? sizeof(CUpti_ActivityKernel9)
                    : S.minor13 >= 4  ? sizeof(tr_cupti_kernel13)
                    : S.minor13 == 3  ? sizeof(tr_cupti_kernel12)
                    : S.minor13 >= 1  ? sizeof(tr_cupti_kernel11)
                                      : sizeof(CUpti_ActivityKernel10);
    if (ks != NULL && atoi(ks) >= 16 && atoi(ks) <= MAX_RECORD)
        S.kernel_size = (size_t)atoi(ks) & ~(size_t)7;
    for (int i = 0; i < MAX_SLOTS; i++)
        pthread_mutex_init(&S.slots[i].mu, NULL);
}

/* Any CUPTI call in a forked child is written down: the tracer must make none. Any call after
 * CUPTI's teardown at exit is said on stderr: the real one may crash there. */
static void note_call(const char *fn) {
    if (atomic_load(&S.torn_down) && getpid() == S.pid)
        fprintf(stderr, "standin: %s called after CUPTI's teardown at exit\n", fn);
    if (getpid() == S.pid)
        return;
    const char *path = getenv("SYNCTOP_STANDIN_CHILD_LOG");
    if (path == NULL)
        return;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    char line[128];
    int n = snprintf(line, sizeof line, "%d %s\n", (int)getpid(), fn);
    if (write(fd, line, (size_t)n) < 0) {
    }
    close(fd);
}
#define NOTE() note_call(__func__)

/* ---- CUPTI API ---- */

EXPORT CUptiResult cuptiGetVersion(uint32_t *version) {
    NOTE();
    /* CUPTI 13.2 loads the driver at its first call, and where none can be loaded it recurses
     * until its stack overflows: the process dies. */
    if (S.minor13 >= 2 && dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) == NULL)
        abort();
    *version = S.version;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char **str) {
    switch (result) {
    case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
        *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
        break;
    default: *str = "CUPTI_ERROR_UNKNOWN"; break;
    }
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetTimestamp(uint64_t *ts) {
    NOTE();
    *ts = atomic_load(&S.clock);
    return CUPTI_SUCCESS;
}

/* CUPTI's own teardown at exit (its destructors): registered when it is first used, so it runs
 * after the exit handlers its clients register later. It takes a while when asked
 * ($SYNCTOP_STANDIN_TEARDOWN_MS), as a window in which a call from the tracer would show. */
static int worker_collect(void);
static void teardown(void) {
    atomic_store(&S.torn_down, 1);
    /* The device work the worker had not collected yet reaches the client now, from the worker
     * thread, after the client's own exit handlers. */
    if (S.worker_on && getpid() == S.pid && worker_collect() == 0) {
        printf("standin: teardown handed over %d buffers\n", atomic_load(&S.exit_buffers));
        fflush(stdout);
    }
    const char *ms = getenv("SYNCTOP_STANDIN_TEARDOWN_MS");
    long v = ms ? atol(ms) : 0;
    if (v > 0) {
        struct timespec ts = {v / 1000, (v % 1000) * 1000000};
        nanosleep(&ts, NULL);
    }
}

EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb, void *ud) {
    NOTE();
    static int registered;
    if (!registered && getpid() == S.pid) {
        registered = 1;
        atexit(teardown);
    }
    if (S.fail_subscribe || S.subscribed)
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    S.cb = cb;
    S.ud = ud;
    S.subscribed = 1;
    *sub = (CUpti_SubscriberHandle)&S;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle sub) {
    NOTE();
    (void)sub;
    S.subscribed = 0;
    S.cb = NULL;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle sub,
                                       CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
    NOTE();
    (void)sub;
    if ((unsigned)domain >= 4 || cbid >= 1024)
        return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&S.mu);
    S.cb_on[domain][cbid] = enable != 0;
    pthread_mutex_unlock(&S.mu);
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle sub,
                                     CUpti_CallbackDomain domain) {
    NOTE();
    (void)sub;
    if ((unsigned)domain >= 8)
        return CUPTI_ERROR_INVALID_PARAMETER;
    S.domain_on[domain] = enable != 0;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                  CUpti_BuffersCallbackCompleteFunc comp) {
    NOTE();
    S.req = req;
    S.comp = comp;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
    NOTE();
    if ((unsigned)kind >= MAX_KINDS || (kind == TR_CUPTI_KIND_GREEN_CONTEXT && S.minor13 < 2))
        return CUPTI_ERROR_INVALID_KIND;
    if (S.enable_ms > 0) { /* a CUPTI that takes its time to turn a kind on */
        struct timespec ts = {S.enable_ms / 1000, (S.enable_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&S.mu);
    S.kinds[kind] = 1;
    if (kind == CUPTI_ACTIVITY_KIND_KERNEL)
        S.kernel_kind_ever = 1;
    pthread_mutex_unlock(&S.mu);
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
    NOTE();
    if ((unsigned)kind >= MAX_KINDS)
        return CUPTI_ERROR_INVALID_KIND;
    pthread_mutex_lock(&S.mu);
    S.kinds[kind] = 0;
    pthread_mutex_unlock(&S.mu);
    return CUPTI_SUCCESS;
}

#ifndef STANDIN_CUPTI_12_4 /* per-API records: CUPTI 12.5 on */
EXPORT CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
    NOTE();
    pthread_mutex_lock(&S.mu);
    if (cbid < 1024)
        S.rt_api[cbid] = enable;
    pthread_mutex_unlock(&S.mu);
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
    NOTE();
    pthread_mutex_lock(&S.mu);
    if (cbid < 1024)
        S.drv_api[cbid] = enable;
    pthread_mutex_unlock(&S.mu);
    return CUPTI_SUCCESS;
}
#endif

EXPORT CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType type) {
    NOTE();
    if (type != CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT && type != CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)
        return CUPTI_ERROR_NOT_SUPPORTED;
    S.tid_type = type;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetThreadIdType(CUpti_ActivityThreadIdType *type) {
    NOTE();
    *type = S.tid_type;
    return CUPTI_SUCCESS;
}

#ifndef STANDIN_CUPTI_12_4 /* CUPTI 12.8 on */
EXPORT CUptiResult cuptiActivityEnableAllSyncRecords(uint8_t enable) {
    NOTE();
    S.all_sync = enable != 0;
    return CUPTI_SUCCESS;
}
#endif

EXPORT CUptiResult cuptiActivityGetAttribute(CUpti_ActivityAttribute attr, size_t *size, void *value) {
    NOTE();
    if (attr != CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER)
        return CUPTI_ERROR_NOT_SUPPORTED;
    if (size == NULL || value == NULL || *size < 1)
        return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
    *(uint8_t *)value = S.per_thread;
    *size = 1;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t *size, void *value) {
    NOTE();
    if (attr != CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER)
        return CUPTI_ERROR_NOT_SUPPORTED;
    if (size == NULL || value == NULL || *size < 1)
        return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
    S.per_thread = *(const uint8_t *)value != 0;
    return CUPTI_SUCCESS;
}

/* Contexts are (CUcontext)(CTX_BASE + index): what context_create made. */
#define CTX_BASE 0x5e7d0000u

EXPORT CUptiResult cuptiGetContextId(CUcontext ctx, uint32_t *id) {
    NOTE();
    uintptr_t i = (uintptr_t)ctx - CTX_BASE;
    if (i >= (uintptr_t)S.n_contexts)
        return CUPTI_ERROR_INVALID_CONTEXT;
    *id = S.contexts[i].id;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetDeviceId(CUcontext ctx, uint32_t *device) {
    NOTE();
    uintptr_t i = (uintptr_t)ctx - CTX_BASE;
    if (i >= (uintptr_t)S.n_contexts)
        return CUPTI_ERROR_INVALID_CONTEXT;
    *device = S.contexts[i].device;
    return CUPTI_SUCCESS;
}

/* NVTX hands itself over here (the real libcupti exports this too); without it, no MARKER record
 * is ever made. */
EXPORT int InitializeInjectionNvtx2(const void *(*get_export_table)(uint32_t));
EXPORT int InitializeInjectionNvtx2(const void *(*get_export_table)(uint32_t)) {
    NOTE();
    if (get_export_table == NULL)
        return 0;
    S.nvtx_ready = 1;
    return 1;
}

/* The size of a record of each kind, as the library that lays them out knows it: 0 for a kind it
 * does not know, which cuptiActivityGetNextRecord refuses (CUPTI_ERROR_INVALID_KIND), as the real
 * one does for kind 0 or a number beyond its own kinds. */
static size_t record_size(CUpti_ActivityKind kind) {
    switch ((int)kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return S.kernel_size;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
        return S.cupti12 ? sizeof(CUpti_ActivityMemcpy5)
               : S.minor13 >= 4 ? sizeof(tr_cupti_memcpy7)
                             : sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET: return S.minor13 >= 4 ? sizeof(tr_cupti_memset5) : sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
        return S.cupti12 ? sizeof(CUpti_ActivitySynchronization) : sizeof(CUpti_ActivitySynchronization2);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_MARKER: return sizeof(CUpti_ActivityMarker2);
    case CUPTI_ACTIVITY_KIND_CONTEXT:
        return S.context2 ? sizeof(CUpti_ActivityContext2)
               : S.minor13 >= 1 ? sizeof(tr_cupti_context4)
                             : sizeof(CUpti_ActivityContext3);
    case CUPTI_ACTIVITY_KIND_STREAM: return sizeof(CUpti_ActivityStream);
    case TR_CUPTI_KIND_GREEN_CONTEXT: /* GreenContext, GreenContext2 (13.2 Update 1), GreenContext3 */
        return S.minor13 >= 4 ? 304 : S.minor13 == 3 ? 168 : S.minor13 == 2 ? 152 : 0;
    case CUPTI_ACTIVITY_KIND_DEVICE: return S.minor13 >= 2 ? sizeof(tr_cupti_device6) : sizeof(CUpti_ActivityDevice5);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
    case CUPTI_ACTIVITY_KIND_OVERHEAD: return sizeof(CUpti_ActivityOverhead3);
    case NEWER_KIND: return NEWER_SIZE;
    default: return 0;
    }
}

EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **rec) {
    /* Pure: no NOTE(), the tracer may walk a buffer at any time. */
    size_t off = 0;
    if (*rec != NULL) {
        size_t sz = record_size((*rec)->kind);
        if (sz == 0)
            return CUPTI_ERROR_INVALID_KIND;
        off = (size_t)((uint8_t *)*rec - buffer) + sz;
    }
    if (off + sizeof(CUpti_Activity) > valid)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    CUpti_Activity *r = (CUpti_Activity *)(buffer + off);
    size_t sz = record_size(r->kind);
    if (sz == 0 || off + sz > valid)
        return CUPTI_ERROR_INVALID_KIND;
    *rec = r;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *n) {
    NOTE();
    (void)ctx;
    (void)stream;
    *n = atomic_exchange(&S.dropped, 0);
    return CUPTI_SUCCESS;
}

/* Hands a slot's buffer to the tracer, outside every stand-in lock (so that buffer callbacks from
 * several threads really do run at once). */
static void complete(uint8_t *buf, size_t used) {
    if (buf == NULL || S.comp == NULL)
        return;
    if (S.worker_on && pthread_equal(pthread_self(), S.worker)) {
        atomic_fetch_add(&S.worker_buffers, 1);
        if (atomic_load(&S.torn_down))
            atomic_fetch_add(&S.exit_buffers, 1);
    }
    S.comp(NULL, 0, buf, 0, used);
}

EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag) {
    NOTE();
    int forced = (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0;
    if (forced)
        atomic_fetch_add(&S.forced, 1);
    for (int i = 0; i < MAX_SLOTS; i++) {
        slot *s = &S.slots[i];
        pthread_mutex_lock(&s->mu);
        uint8_t *buf = NULL;
        size_t used = 0;
        if (s->buf != NULL && s->used > 0 && ((s->complete && !s->running) || forced)) {
            buf = s->buf;
            used = s->used;
            s->buf = NULL;
            s->used = s->size = 0;
            s->complete = 0;
            s->running = 0;
        }
        pthread_mutex_unlock(&s->mu);
        complete(buf, used);
    }
    atomic_fetch_add(&S.flushes, 1);
    return CUPTI_SUCCESS;
}

/* ---- producing records ---- */

static slot *my_slot(void) {
    pthread_t self = pthread_self();
    pthread_mutex_lock(&S.mu);
    slot *found = NULL;
    for (int i = 0; i < MAX_SLOTS && found == NULL; i++)
        if (S.slots[i].used_slot && pthread_equal(S.slots[i].owner, self))
            found = &S.slots[i];
    for (int i = 0; i < MAX_SLOTS && found == NULL; i++)
        if (!S.slots[i].used_slot) {
            S.slots[i].used_slot = 1;
            S.slots[i].owner = self;
            found = &S.slots[i];
        }
    pthread_mutex_unlock(&S.mu);
    return found;
}

static void release_slot(void) {
    slot *s = my_slot();
    pthread_mutex_lock(&s->mu);
    uint8_t *buf = s->buf;
    size_t used = s->used;
    s->buf = NULL;
    s->used = s->size = 0;
    pthread_mutex_unlock(&s->mu);
    complete(buf, used);
    pthread_mutex_lock(&S.mu);
    s->used_slot = 0;
    pthread_mutex_unlock(&S.mu);
}

/* running: the record is of work still running (its times are 0 until it ends), so the buffer
 * is incomplete until a forced flush takes it as it is. */
static void emit_as(const void *rec, size_t size, int running) {
    slot *s = my_slot();
    if (s == NULL) {
        atomic_fetch_add(&S.dropped, 1);
        return;
    }
    pthread_mutex_lock(&s->mu);
    if (s->buf != NULL && s->used + size <= s->size) {
        memcpy(s->buf + s->used, rec, size);
        s->used += size;
        s->running |= running;
        pthread_mutex_unlock(&s->mu);
        return;
    }
    uint8_t *full = s->buf;
    size_t full_used = s->used;
    s->buf = NULL;
    s->used = s->size = 0;
    pthread_mutex_unlock(&s->mu);
    complete(full, full_used);
    uint8_t *nb = NULL;
    size_t nsize = 0, max = 0;
    if (S.req != NULL)
        S.req(&nb, &nsize, &max);
    if (nb == NULL || nsize < size || ((uintptr_t)nb & 7) != 0) {
        atomic_fetch_add(&S.dropped, 1);
        if (nb != NULL)
            complete(nb, 0);
        return;
    }
    memcpy(nb, rec, size);
    pthread_mutex_lock(&s->mu);
    s->buf = nb;
    s->size = nsize;
    s->used = size;
    s->running = running;
    pthread_mutex_unlock(&s->mu);
}

static void emit(const void *rec, size_t size) { emit_as(rec, size, 0); }

/* ---- CUPTI's worker thread ---- */

/* With `worker on`, the records of device work (kernels, copies, memsets) are not written when
 * the script plays them but when CUPTI's worker thread collects them from the device: at the
 * next `collect`, or at CUPTI's teardown at exit. The worker writes them into a buffer of its
 * own and hands it over on its own thread, so they reach the client after the host calls that
 * waited for that work, on a thread that is none of the program's. Returns 1 when the record
 * went to the worker (or was dropped on the way), 0 when there is no worker. */
static int pending_push(const void *rec, size_t size) {
    pthread_mutex_lock(&S.mu);
    int on = S.worker_on;
    if (on && S.n_pending == S.cap_pending) {
        size_t cap = S.cap_pending ? 2 * S.cap_pending : 256;
        struct pending_rec *p = realloc(S.pending, cap * sizeof *p);
        if (p != NULL) {
            S.pending = p;
            S.cap_pending = cap;
        }
    }
    if (on && S.n_pending < S.cap_pending && size <= MAX_RECORD) {
        S.pending[S.n_pending].size = size;
        memcpy(S.pending[S.n_pending].bytes, rec, size);
        S.n_pending++;
    } else if (on) {
        atomic_fetch_add(&S.dropped, 1);
    }
    pthread_mutex_unlock(&S.mu);
    return on;
}

static void emit_device(const void *rec, size_t size) {
    if (!pending_push(rec, size))
        emit(rec, size);
}

static void *worker_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&S.mu);
    for (;;) {
        while (S.collect_done == S.collect_asked)
            pthread_cond_wait(&S.worker_cv, &S.mu);
        unsigned target = S.collect_asked;
        struct pending_rec *recs = S.pending;
        size_t n = S.n_pending;
        S.pending = NULL;
        S.n_pending = S.cap_pending = 0;
        pthread_mutex_unlock(&S.mu);
        /* Its buffer is its own until it hands it over below: not complete for a flush meanwhile
         * (a slot may keep the mark of an earlier `flush`). */
        slot *sl = my_slot();
        if (sl != NULL) {
            pthread_mutex_lock(&sl->mu);
            sl->complete = 0;
            pthread_mutex_unlock(&sl->mu);
        }
        for (size_t i = 0; i < n; i++)
            emit(recs[i].bytes, recs[i].size);
        free(recs);
        /* Its buffer's records are all complete: handed over now, from this thread. */
        uint8_t *buf = NULL;
        size_t used = 0;
        if (sl != NULL) {
            pthread_mutex_lock(&sl->mu);
            buf = sl->buf;
            used = sl->used;
            sl->buf = NULL;
            sl->used = sl->size = 0;
            sl->complete = sl->running = 0;
            pthread_mutex_unlock(&sl->mu);
        }
        complete(buf, used);
        pthread_mutex_lock(&S.mu);
        S.collect_done = target;
        pthread_cond_broadcast(&S.worker_cv);
    }
    return NULL;
}

static int worker_start(void) {
    pthread_mutex_lock(&S.mu);
    int rc = 0;
    if (!S.worker_on) {
        rc = pthread_create(&S.worker, NULL, worker_main, NULL);
        if (rc == 0) {
            S.worker_on = 1;
            pthread_setname_np(S.worker, "cupti-worker");
            pthread_detach(S.worker);
        }
    }
    pthread_mutex_unlock(&S.mu);
    return rc == 0 ? 0 : -1;
}

/* Asks the worker to collect what the device finished and waits (20 s at most) until it has
 * handed its buffer over. 0, or -1. */
static int worker_collect(void) {
    pthread_mutex_lock(&S.mu);
    if (!S.worker_on) {
        pthread_mutex_unlock(&S.mu);
        return -1;
    }
    unsigned want = ++S.collect_asked;
    pthread_cond_broadcast(&S.worker_cv);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 20;
    int rc = 0;
    while ((int)(S.collect_done - want) < 0 && rc == 0)
        rc = pthread_cond_timedwait(&S.worker_cv, &S.mu, &until);
    pthread_mutex_unlock(&S.mu);
    return rc == 0 ? 0 : -1;
}

/* The thread id CUPTI puts in records: pthread_self() unless told to use the system's. */
static uint32_t record_tid(void) {
    return S.tid_type == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM ? (uint32_t)syscall(SYS_gettid)
                                                              : (uint32_t)(uintptr_t)pthread_self();
}

/* ---- script ---- */

static uint64_t kv_u64(const char *line, const char *key, uint64_t def) {
    size_t kl = strlen(key);
    for (const char *p = line; (p = strstr(p, key)) != NULL; p += kl) {
        if ((p == line || p[-1] == ' ') && p[kl] == '=')
            return strtoull(p + kl + 1, NULL, 10);
    }
    return def;
}

static int64_t kv_i64(const char *line, const char *key, int64_t def) {
    size_t kl = strlen(key);
    for (const char *p = line; (p = strstr(p, key)) != NULL; p += kl)
        if ((p == line || p[-1] == ' ') && p[kl] == '=')
            return strtoll(p + kl + 1, NULL, 10);
    return def;
}

/* A string value: up to the next space. Stored in a small ring of static buffers: names handed
 * to CUPTI records must outlive the buffer, so strings are interned forever instead. */
static const char *kv_str(const char *line, const char *key) {
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static char *interned[256];
    static int n;
    size_t kl = strlen(key);
    for (const char *p = line; (p = strstr(p, key)) != NULL; p += kl) {
        if ((p == line || p[-1] == ' ') && p[kl] == '=') {
            const char *v = p + kl + 1;
            size_t len = strcspn(v, " ");
            const char *out = NULL;
            pthread_mutex_lock(&mu);
            for (int i = 0; i < n && out == NULL; i++)
                if (strlen(interned[i]) == len && strncmp(interned[i], v, len) == 0)
                    out = interned[i];
            if (out == NULL && n < 256) {
                interned[n] = strndup(v, len);
                out = interned[n++];
            }
            pthread_mutex_unlock(&mu);
            return out;
        }
    }
    return NULL;
}

static void kv_dim3(const char *line, const char *key, int32_t out[3]) {
    out[0] = out[1] = out[2] = 1;
    const char *s = kv_str(line, key);
    if (s != NULL)
        sscanf(s, "%d,%d,%d", &out[0], &out[1], &out[2]);
}

static CUpti_CallbackDomain kv_domain(const char *line) {
    const char *d = kv_str(line, "domain");
    return d != NULL && strcmp(d, "drv") == 0 ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
}

/* Shift applied by an xN@D prefix. */
typedef struct shift {
    uint64_t dt;
    uint32_t dcorr;
} shift;

static void do_kernel(const char *l, shift sh) {
    if (!S.kinds[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] && !S.kinds[CUPTI_ACTIVITY_KIND_KERNEL])
        return;
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof k);
    k.kind = S.kinds[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
                                                           : CUPTI_ACTIVITY_KIND_KERNEL;
    k.start = kv_u64(l, "start", 0) + sh.dt;
    k.end = kv_u64(l, "end", 0) + sh.dt;
    k.deviceId = (uint32_t)kv_u64(l, "dev", 0);
    k.contextId = (uint32_t)kv_u64(l, "ctx", 1);
    k.streamId = (uint32_t)kv_u64(l, "stream", 7);
    k.correlationId = (uint32_t)kv_u64(l, "corr", 0) + sh.dcorr;
    k.graphId = (uint32_t)kv_u64(l, "graph", 0);
    k.name = kv_str(l, "name");
    int32_t g[3], b[3];
    kv_dim3(l, "grid", g);
    kv_dim3(l, "block", b);
    k.gridX = g[0], k.gridY = g[1], k.gridZ = g[2];
    k.blockX = b[0], k.blockY = b[1], k.blockZ = b[2];
    int running = kv_u64(l, "running", 0) != 0;
    /* Laid out in kernel_size bytes: another CUPTI's version of the record when asked. */
    union {
        CUpti_ActivityKernel10 k;
        uint8_t b[MAX_RECORD];
    } raw;
    memset(&raw, 0, sizeof raw);
    if (running)
        k.start = k.end = 0; /* not collected yet */
    if (S.cupti12) { /* CUPTI 12's Kernel9, field by field */
        CUpti_ActivityKernel9 o;
        memset(&o, 0, sizeof o);
        o.kind = k.kind;
        o.start = k.start;
        o.end = k.end;
        o.deviceId = k.deviceId;
        o.contextId = k.contextId;
        o.streamId = k.streamId;
        o.correlationId = k.correlationId;
        o.graphId = k.graphId;
        o.name = k.name;
        o.gridX = k.gridX, o.gridY = k.gridY, o.gridZ = k.gridZ;
        o.blockX = k.blockX, o.blockY = k.blockY, o.blockZ = k.blockZ;
        memcpy(raw.b, &o, sizeof o);
    } else if (S.minor13 >= 1) { /* Kernel13, of which 13.1's Kernel11 and 13.3's Kernel12 are the start */
        tr_cupti_kernel13 o;
        memset(&o, 0, sizeof o);
        o.k.k.k = k;
        o.k.k.priority = -2;
        o.k.executionModel = 1; /* SIMT */
        o.sourceGraphId = APPENDED32;
        o.sourceGraphNodeId = APPENDED64;
        memcpy(raw.b, &o, sizeof o);
    } else {
        raw.k = k;
    }
    if (running)
        emit_as(&raw, S.kernel_size, running);
    else
        emit_device(&raw, S.kernel_size);
}

static void do_memcpy(const char *l, shift sh) {
    if (!S.kinds[CUPTI_ACTIVITY_KIND_MEMCPY])
        return;
    CUpti_ActivityMemcpy6 m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = (uint8_t)kv_u64(l, "copy", 0);
    m.srcKind = (uint8_t)kv_u64(l, "src", 0);
    m.dstKind = (uint8_t)kv_u64(l, "dst", 0);
    m.flags = kv_u64(l, "async", 0) ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0;
    m.bytes = kv_u64(l, "bytes", 0);
    m.start = kv_u64(l, "start", 0) + sh.dt;
    m.end = kv_u64(l, "end", 0) + sh.dt;
    m.deviceId = (uint32_t)kv_u64(l, "dev", 0);
    m.contextId = (uint32_t)kv_u64(l, "ctx", 1);
    m.streamId = (uint32_t)kv_u64(l, "stream", 7);
    m.correlationId = (uint32_t)kv_u64(l, "corr", 0) + sh.dcorr;
    if (S.cupti12) { /* CUPTI 12.0-12.6's Memcpy5 */
        CUpti_ActivityMemcpy5 o;
        memset(&o, 0, sizeof o);
        o.kind = m.kind;
        o.copyKind = m.copyKind, o.srcKind = m.srcKind, o.dstKind = m.dstKind, o.flags = m.flags;
        o.bytes = m.bytes;
        o.start = m.start;
        o.end = m.end;
        o.deviceId = m.deviceId, o.contextId = m.contextId, o.streamId = m.streamId;
        o.correlationId = m.correlationId;
        emit_device(&o, sizeof o);
        return;
    }
    if (S.minor13 >= 4) { /* CUPTI 13.4's Memcpy7: Memcpy6 and the fields after it */
        tr_cupti_memcpy7 o = {.m = m, .sourceGraphId = APPENDED32, .sourceGraphNodeId = APPENDED64};
        emit_device(&o, sizeof o);
        return;
    }
    emit_device(&m, sizeof m);
}

static void do_memset(const char *l, shift sh) {
    if (!S.kinds[CUPTI_ACTIVITY_KIND_MEMSET])
        return;
    CUpti_ActivityMemset4 m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    m.value = (uint32_t)kv_u64(l, "value", 0);
    m.bytes = kv_u64(l, "bytes", 0);
    m.start = kv_u64(l, "start", 0) + sh.dt;
    m.end = kv_u64(l, "end", 0) + sh.dt;
    m.deviceId = (uint32_t)kv_u64(l, "dev", 0);
    m.contextId = (uint32_t)kv_u64(l, "ctx", 1);
    m.streamId = (uint32_t)kv_u64(l, "stream", 7);
    m.correlationId = (uint32_t)kv_u64(l, "corr", 0) + sh.dcorr;
    m.flags = kv_u64(l, "async", 0) ? CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC : 0;
    m.memoryKind = (uint16_t)kv_u64(l, "mem", 3);
    if (S.minor13 >= 4) { /* CUPTI 13.4's Memset5: Memset4 and the fields after it */
        tr_cupti_memset5 o = {.m = m, .sourceGraphId = APPENDED32, .sourceGraphNodeId = APPENDED64};
        emit_device(&o, sizeof o);
        return;
    }
    emit_device(&m, sizeof m);
}

/* A SYNCHRONIZATION record: CUPTI 12.0-12.6's Synchronization (no returnValue) in 12's play. */
static void emit_sync(const CUpti_ActivitySynchronization2 *s) {
    if (!S.cupti12) {
        emit(s, sizeof *s);
        return;
    }
    CUpti_ActivitySynchronization o;
    memset(&o, 0, sizeof o);
    o.kind = s->kind;
    o.type = s->type;
    o.start = s->start;
    o.end = s->end;
    o.correlationId = s->correlationId;
    o.contextId = s->contextId;
    o.streamId = s->streamId;
    o.cudaEventId = s->cudaEventId;
    emit(&o, sizeof o);
}

static void do_sync(const char *l, shift sh) {
    if (!S.kinds[CUPTI_ACTIVITY_KIND_SYNCHRONIZATION])
        return;
    CUpti_ActivitySynchronization2 s;
    memset(&s, 0, sizeof s);
    s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    s.type = (CUpti_ActivitySynchronizationType)kv_u64(l, "type", 3);
    s.start = kv_u64(l, "start", 0) + sh.dt;
    s.end = kv_u64(l, "end", 0) + sh.dt;
    s.correlationId = (uint32_t)kv_u64(l, "corr", 0) + sh.dcorr;
    s.contextId = (uint32_t)kv_u64(l, "ctx", 1);
    s.streamId = (uint32_t)kv_u64(l, "stream", 0xFFFFFFFFu);
    s.cudaEventId = (uint32_t)kv_u64(l, "event", 0xFFFFFFFFu);
    emit_sync(&s);
}

/* A RUNTIME or DRIVER record of one call, on the calling thread, if that kind (or that API
 * alone) is enabled: whoever enabled it, and whether or not a callback saw the call too. */
static void emit_api(CUpti_CallbackDomain dom, uint32_t cbid, uint64_t start, uint64_t end,
                     uint32_t corr, uint32_t ret) {
    int on = dom == CUPTI_CB_DOMAIN_DRIVER_API
                 ? (S.kinds[CUPTI_ACTIVITY_KIND_DRIVER] || (cbid < 1024 && S.drv_api[cbid]))
                 : (S.kinds[CUPTI_ACTIVITY_KIND_RUNTIME] || (cbid < 1024 && S.rt_api[cbid]));
    if (!on)
        return;
    CUpti_ActivityAPI a;
    memset(&a, 0, sizeof a);
    a.kind = dom == CUPTI_CB_DOMAIN_DRIVER_API ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
    a.cbid = cbid;
    a.start = start;
    a.end = end;
    a.processId = (uint32_t)getpid();
    a.threadId = record_tid();
    a.correlationId = corr;
    a.returnValue = ret;
    emit(&a, sizeof a);
}

static void do_api(const char *l, shift sh) {
    emit_api(kv_domain(l), (uint32_t)kv_u64(l, "cbid", 0), kv_u64(l, "start", 0) + sh.dt,
             kv_u64(l, "end", 0) + sh.dt, (uint32_t)kv_u64(l, "corr", 0) + sh.dcorr,
             (uint32_t)kv_u64(l, "ret", 0));
}

/* `other kind=K`: a record of a kind the tracer never asks for (EXTERNAL_CORRELATION, OVERHEAD,
 * or NEWER_KIND, which only a newer CUPTI has), made while someone has the kind enabled. */
static void do_other(const char *l, shift sh) {
    unsigned kind = (unsigned)kv_u64(l, "kind", 0);
    size_t size = kind < MAX_KINDS ? record_size((CUpti_ActivityKind)kind) : 0;
    if (size == 0 || !S.kinds[kind])
        return;
    union {
        CUpti_ActivityExternalCorrelation x;
        CUpti_ActivityOverhead3 o;
        uint8_t b[MAX_RECORD];
    } raw;
    memset(&raw, 0x5a, sizeof raw); /* whatever a newer record holds */
    uint32_t corr = (uint32_t)kv_u64(l, "corr", 0) + sh.dcorr;
    if (kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
        memset(&raw, 0, sizeof raw);
        raw.x.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
        raw.x.externalId = kv_u64(l, "id", 1);
        raw.x.correlationId = corr;
    } else if (kind == CUPTI_ACTIVITY_KIND_OVERHEAD) {
        memset(&raw, 0, sizeof raw);
        raw.o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
        raw.o.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
        raw.o.start = kv_u64(l, "start", 0) + sh.dt;
        raw.o.end = kv_u64(l, "end", 0) + sh.dt;
        raw.o.correlationId = corr;
    }
    raw.x.kind = (CUpti_ActivityKind)kind;
    emit(&raw, size);
}

/* `junk`: a record whose kind no CUPTI has (0), as a buffer written by a CUPTI of another layout
 * would hold: cuptiActivityGetNextRecord stops there, as the real one does. */
static void do_junk(void) {
    uint64_t raw[2] = {0, 0};
    emit(raw, sizeof raw);
}

static void do_marker(const char *l, shift sh) {
    if (!S.kinds[CUPTI_ACTIVITY_KIND_MARKER] || !S.nvtx_ready)
        return;
    CUpti_ActivityMarker2 m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MARKER;
    m.flags = (CUpti_ActivityFlag)kv_u64(l, "flags", CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS);
    m.timestamp = kv_u64(l, "ts", 0) + sh.dt;
    m.id = (uint32_t)kv_u64(l, "id", 0);
    m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    m.objectId.pt.processId = (uint32_t)getpid();
    m.objectId.pt.threadId = record_tid();
    m.name = kv_str(l, "name");
    m.domain = kv_str(l, "domain");
    emit(&m, sizeof m);
}

/* A CONTEXT record: CUPTI 12.4's Context2, field by field, when it plays 12.4; Context4 when it
 * plays 13.1 or later. */
static void emit_context(const CUpti_ActivityContext3 *c) {
    if (S.minor13 >= 1) {
        tr_cupti_context4 o = {.c = *c, .processId = (uint64_t)getpid()};
        emit(&o, sizeof o);
        return;
    }
    if (!S.context2) {
        emit(c, sizeof *c);
        return;
    }
    CUpti_ActivityContext2 o;
    memset(&o, 0, sizeof o);
    o.kind = c->kind;
    o.contextId = c->contextId;
    o.deviceId = c->deviceId;
    o.nullStreamId = c->nullStreamId;
    emit(&o, sizeof o);
}

/* A DEVICE record: Device6 when it plays 13.2 or later. */
static void emit_devrec(const CUpti_ActivityDevice5 *d) {
    if (S.minor13 >= 2) {
        tr_cupti_device6 o = {.d = *d, .numTpcs = d->numMultiprocessors / 2};
        emit(&o, sizeof o);
        return;
    }
    emit(d, sizeof *d);
}

static void do_device(const char *l) {
    CUpti_ActivityDevice5 d;
    memset(&d, 0, sizeof d);
    d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
    d.id = (uint32_t)kv_u64(l, "id", 0);
    d.name = kv_str(l, "name");
    d.computeCapabilityMajor = (uint32_t)kv_u64(l, "cc_major", 9);
    d.computeCapabilityMinor = (uint32_t)kv_u64(l, "cc_minor", 0);
    d.numMultiprocessors = (uint32_t)kv_u64(l, "sms", 132);
    d.globalMemorySize = kv_u64(l, "mem", 0);
    if (S.n_dev_recs < MAX_CONTEXTS) {
        S.dev_seen[S.n_dev_recs] = S.subscribed;
        S.dev_recs[S.n_dev_recs++] = d;
    }
    if (S.kinds[CUPTI_ACTIVITY_KIND_DEVICE])
        emit_devrec(&d);
}

/* `green_context id= device= parent=`: a green context's record, CUPTI 13.2 on (whose green
 * contexts make no CONTEXT record), in the release's version; only its first fields are set. */
static void do_green_context(const char *l) {
    size_t size = record_size((CUpti_ActivityKind)TR_CUPTI_KIND_GREEN_CONTEXT);
    if (size == 0 || !S.kinds[TR_CUPTI_KIND_GREEN_CONTEXT])
        return;
    union {
        tr_cupti_green_context_head g;
        uint8_t b[MAX_RECORD];
    } raw;
    memset(&raw, 0, sizeof raw);
    raw.g.kind = (CUpti_ActivityKind)TR_CUPTI_KIND_GREEN_CONTEXT;
    raw.g.contextId = (uint32_t)kv_u64(l, "id", 2);
    raw.g.deviceId = (uint32_t)kv_u64(l, "device", 0);
    raw.g.parentContextId = (uint32_t)kv_u64(l, "parent", 1);
    emit(&raw, size);
}

static void do_context(const char *l) {
    CUpti_ActivityContext3 c;
    memset(&c, 0, sizeof c);
    c.kind = CUPTI_ACTIVITY_KIND_CONTEXT;
    c.contextId = (uint32_t)kv_u64(l, "id", 1);
    c.deviceId = (uint32_t)kv_u64(l, "device", 0);
    c.nullStreamId = (uint16_t)kv_u64(l, "nullstream", 7);
    if (S.n_ctx_recs < MAX_CONTEXTS)
        S.ctx_recs[S.n_ctx_recs++] = c;
    if (S.kinds[CUPTI_ACTIVITY_KIND_CONTEXT])
        emit_context(&c);
}

static void do_stream(const char *l) {
    CUpti_ActivityStream s;
    memset(&s, 0, sizeof s);
    s.kind = CUPTI_ACTIVITY_KIND_STREAM;
    s.contextId = (uint32_t)kv_u64(l, "ctx", 1);
    s.streamId = (uint32_t)kv_u64(l, "id", 13);
    s.priority = (uint32_t)kv_i64(l, "prio", 0);
    if (S.n_stream_recs < MAX_CONTEXTS)
        S.stream_recs[S.n_stream_recs++] = s;
    if (S.kinds[CUPTI_ACTIVITY_KIND_STREAM])
        emit(&s, sizeof s);
}

/* Whether the context with this id exists now (created and not destroyed). */
static int context_alive(uint32_t id) {
    for (int i = 0; i < S.n_contexts; i++)
        if (S.contexts[i].id == id)
            return S.contexts[i].alive;
    return 1; /* described without a creation line: taken as there */
}

EXPORT int standin_device_count(void) { return S.n_dev_recs; }

EXPORT const CUpti_ActivityDevice5 *standin_device(int i) {
    for (int k = 0; k < S.n_dev_recs; k++)
        if ((int)S.dev_recs[k].id == i)
            return &S.dev_recs[k];
    return NULL;
}

EXPORT CUptiResult cuptiActivityEnableAndDump(CUpti_ActivityKind kind) {
    CUptiResult r = cuptiActivityEnable(kind);
    if (r != CUPTI_SUCCESS || S.req == NULL)
        return r;
    int n = 0;
    if (kind == CUPTI_ACTIVITY_KIND_DEVICE) {
        for (int i = 0; i < S.n_dev_recs; i++)
            if (S.dev_seen[i]) {
                emit_devrec(&S.dev_recs[i]);
                n++;
            }
    } else if (kind == CUPTI_ACTIVITY_KIND_CONTEXT) {
        for (int i = 0; i < S.n_ctx_recs; i++)
            if (context_alive(S.ctx_recs[i].contextId)) {
                emit_context(&S.ctx_recs[i]);
                n++;
            }
    } else if (kind == CUPTI_ACTIVITY_KIND_STREAM) {
        for (int i = 0; i < S.n_stream_recs; i++)
            if (context_alive(S.stream_recs[i].contextId)) {
                emit(&S.stream_recs[i], sizeof S.stream_recs[i]);
                n++;
            }
    }
    if (n > 0) { /* records of what exists are complete */
        slot *sl = my_slot();
        pthread_mutex_lock(&sl->mu);
        sl->complete = 1;
        pthread_mutex_unlock(&sl->mu);
    }
    return CUPTI_SUCCESS;
}

static void resource(CUpti_CallbackId cbid, const char *l) {
    uint32_t id = (uint32_t)strtoul(strchr(l, ' ') ? strchr(l, ' ') + 1 : "1", NULL, 10);
    int i = 0;
    while (i < S.n_contexts && S.contexts[i].id != id)
        i++;
    if (i == S.n_contexts && i < MAX_CONTEXTS) {
        S.contexts[i].id = id;
        S.n_contexts++;
    }
    if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED && i < MAX_CONTEXTS)
        S.contexts[i].device = (uint32_t)kv_u64(l, "device", 0);
    if (i < MAX_CONTEXTS)
        S.contexts[i].alive = cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED;
    if (S.cb == NULL || !S.domain_on[CUPTI_CB_DOMAIN_RESOURCE])
        return;
    CUpti_ResourceData rd;
    memset(&rd, 0, sizeof rd);
    rd.context = (CUcontext)(uintptr_t)(CTX_BASE + (unsigned)i);
    S.cb(S.ud, CUPTI_CB_DOMAIN_RESOURCE, cbid, &rd);
}

/* One host call: ENTER, the wait (virtual), EXIT; with a nested driver call when asked. */
typedef struct host_call {
    CUpti_CallbackDomain dom;
    uint32_t cbid, inner, ctx, corr, stream;
    uint64_t wait;
    int32_t ret;
    int hold_kind; /* between ENTER and EXIT, wait until this activity kind is enabled (-1: no) */
    uint64_t t0, t1; /* when it entered and returned (set by host_call_run) */
} host_call;

/* Calls fn(arg) through a frame without unwind information, as code the unwinder cannot step
 * through would be: backtrace() from below stops there. */
#if defined(__x86_64__)
__attribute__((visibility("hidden"))) void standin_opaque_call(void (*fn)(void *), void *arg);
__asm__(".text\n"
        ".p2align 4\n"
        ".hidden standin_opaque_call\n"
        ".type standin_opaque_call,@function\n"
        "standin_opaque_call:\n"
        "    pushq %rbp\n"
        "    movq %rsp, %rbp\n"
        "    subq $64, %rsp\n"
        "    andq $-16, %rsp\n"
        "    movq %rdi, %rax\n"
        "    movq %rsi, %rdi\n"
        "    callq *%rax\n"
        "    movq %rbp, %rsp\n"
        "    popq %rbp\n"
        "    retq\n"
        ".size standin_opaque_call, .-standin_opaque_call\n");
#else
static void standin_opaque_call(void (*fn)(void *), void *arg) { fn(arg); }
#endif

typedef struct delivery {
    CUpti_CallbackDomain dom;
    uint32_t cbid;
    const void *data;
} delivery;

static void deliver(void *p) {
    const delivery *d = p;
    S.cb(S.ud, d->dom, d->cbid, d->data);
}

/* A query's SYNCHRONIZATION record type (1 event, 3 stream), 0 for any other call. */
static int query_type(CUpti_CallbackDomain dom, uint32_t cbid) {
    if (dom == CUPTI_CB_DOMAIN_RUNTIME_API)
        return cbid == CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020 ? 1
               : cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_v3020 ||
                       cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_ptsz_v7000
                   ? 3
                   : 0;
    return cbid == CUPTI_DRIVER_TRACE_CBID_cuEventQuery ? 1
           : cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamQuery ||
                   cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamQuery_ptsz
               ? 3
               : 0;
}

static int cb_enabled(CUpti_CallbackDomain dom, uint32_t cbid) {
    pthread_mutex_lock(&S.mu);
    int on = S.cb != NULL && cbid < 1024 && S.cb_on[dom][cbid];
    pthread_mutex_unlock(&S.mu);
    return on;
}

static void site_call(CUpti_CallbackDomain dom, uint32_t cbid, const host_call *hc, int32_t ret,
                      CUpti_ApiCallbackSite site, uint64_t *corr_data) {
    if (!cb_enabled(dom, cbid))
        return;
    CUpti_CallbackData cd;
    memset(&cd, 0, sizeof cd);
    cd.callbackSite = site;
    cd.functionName = "standin";
    cd.functionReturnValue = &ret;
    cd.contextUid = hc->ctx;
    cd.correlationData = corr_data;
    cd.correlationId = hc->corr;
    delivery d = {dom, cbid, &cd};
    if (S.unwind_off)
        standin_opaque_call(deliver, &d);
    else
        deliver(&d);
}

static int kind_is(const char *arg);

static void host_call_run(void *arg) {
    host_call *hc = arg;
    /* CUPTI does not clear the correlationData slot before ENTER: it holds what it held. */
    uint64_t outer = 0x5eedf00dull, inner = 0x5eedf00dull;
    uint64_t t0 = atomic_load(&S.clock);
    site_call(hc->dom, hc->cbid, hc, 0, CUPTI_API_ENTER, &outer);
    if (hc->inner)
        site_call(CUPTI_CB_DOMAIN_DRIVER_API, hc->inner, hc, 0, CUPTI_API_ENTER, &inner);
    if (hc->hold_kind >= 0) {
        char want[32];
        snprintf(want, sizeof want, "%d 1", hc->hold_kind);
        for (int i = 0; i < 20000 && !kind_is(want); i++) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    atomic_fetch_add(&S.clock, hc->wait);
    hc->t0 = t0;
    hc->t1 = atomic_load(&S.clock);
    if (hc->inner)
        site_call(CUPTI_CB_DOMAIN_DRIVER_API, hc->inner, hc, hc->ret, CUPTI_API_EXIT, &inner);
    site_call(hc->dom, hc->cbid, hc, hc->ret, CUPTI_API_EXIT, &outer);
    /* CUPTI 13 records every query as a SYNCHRONIZATION, with what it returned, unless told to
     * keep only those that found the work done; CUPTI 12's records have no room for what it
     * returned, and are kept for those alone. */
    int type = query_type(hc->dom, hc->cbid);
    if (type != 0 && S.kinds[CUPTI_ACTIVITY_KIND_SYNCHRONIZATION] && ((S.all_sync && !S.cupti12) || hc->ret == 0)) {
        CUpti_ActivitySynchronization2 r;
        memset(&r, 0, sizeof r);
        r.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
        r.type = (CUpti_ActivitySynchronizationType)type;
        r.start = t0;
        r.end = atomic_load(&S.clock);
        r.correlationId = hc->corr;
        r.contextId = hc->ctx;
        r.streamId = type == 3 ? hc->stream : 0xFFFFFFFFu;
        r.cudaEventId = type == 1 ? 1 : 0xFFFFFFFFu;
        r.returnValue = (uint32_t)hc->ret;
        emit_sync(&r);
    }
}

static void through_site(int site, void (*fn)(void *), void *arg) {
    if (site >= 1 && site <= S.n_sites && S.sites[site - 1] != NULL)
        S.sites[site - 1](fn, arg);
    else
        fn(arg);
}

/* The call's activity records, when their kind is enabled (by anyone): the twins of what the
 * callbacks saw, with the same correlation id, written on the calling thread as it returns.
 * (Written here, outside host_call_run, so that the frames the callbacks run under are the
 * same with or without them.) */
static void host_call_twins(const host_call *hc) {
    if (hc->inner)
        emit_api(CUPTI_CB_DOMAIN_DRIVER_API, hc->inner, hc->t0, hc->t1, hc->corr, (uint32_t)hc->ret);
    emit_api(hc->dom, hc->cbid, hc->t0, hc->t1, hc->corr, (uint32_t)hc->ret);
}

static void do_call(const char *l, shift sh) {
    host_call hc = {.dom = kv_domain(l), .cbid = (uint32_t)kv_u64(l, "cbid", 0),
                    .inner = (uint32_t)kv_u64(l, "inner", 0), .ctx = (uint32_t)kv_u64(l, "ctx", 1),
                    .corr = (uint32_t)kv_u64(l, "corr", 0) + sh.dcorr, .wait = kv_u64(l, "wait", 0),
                    .ret = (int32_t)kv_i64(l, "ret", 0), .stream = (uint32_t)kv_u64(l, "stream", 7),
                    .hold_kind = (int)kv_i64(l, "hold_kind", -1)};
    through_site((int)kv_u64(l, "site", 0), host_call_run, &hc);
    host_call_twins(&hc);
}

static void do_poll(const char *l, shift sh) {
    uint64_t count = kv_u64(l, "count", 1);
    for (uint64_t i = 0; i < count; i++) {
        host_call hc = {.dom = kv_domain(l), .cbid = (uint32_t)kv_u64(l, "cbid", 0),
                        .ctx = (uint32_t)kv_u64(l, "ctx", 1),
                        .corr = (uint32_t)kv_u64(l, "corr", 0) + sh.dcorr + (uint32_t)i,
                        .wait = kv_u64(l, "step", 1000), .ret = i + 1 < count ? 600 : 0,
                        .stream = (uint32_t)kv_u64(l, "stream", 7), .hold_kind = -1};
        through_site((int)kv_u64(l, "site", 0), host_call_run, &hc);
        host_call_twins(&hc);
    }
}

static void wait_flushes(int n) {
    int start = atomic_load(&S.flushes);
    for (int i = 0; i < 10000 && atomic_load(&S.flushes) < start + n; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static int play_range(int from, int to);

static void do_report(void) {
    char kinds[256] = "";
    size_t n = 0;
    int callbacks = 0, apis = 0;
    pthread_mutex_lock(&S.mu);
    for (int k = 0; k < MAX_KINDS; k++)
        if (S.kinds[k])
            n += (size_t)snprintf(kinds + n, sizeof kinds - n, "%s%d", n ? "," : "", k);
    for (int d = 0; d < 4; d++)
        for (int c = 0; c < 1024; c++)
            callbacks += S.cb_on[d][c];
    for (int c = 0; c < 1024; c++)
        apis += S.rt_api[c] + S.drv_api[c];
    pthread_mutex_unlock(&S.mu);
    printf("standin: report kinds=%s callbacks=%d api_records=%d forced=%d all_sync=%d\n", kinds,
           callbacks, apis, atomic_load(&S.forced), S.all_sync);
    fflush(stdout);
}

/* Waits (1 ms steps, 20 s at most) until cond(arg) holds. 0, or -1 when it never did. */
static int wait_until(int (*cond)(const char *), const char *arg) {
    for (int i = 0; i < 20000; i++) {
        if (cond(arg))
            return 0;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "standin: gave up waiting for %s\n", arg);
    return -1;
}

static int file_there(const char *path) { return access(path, F_OK) == 0; }

static int kind_is(const char *arg) {
    unsigned kind = 0, on = 0;
    if (sscanf(arg, "%u %u", &kind, &on) != 2 || kind >= MAX_KINDS)
        return 0;
    pthread_mutex_lock(&S.mu);
    int now = S.kinds[kind];
    pthread_mutex_unlock(&S.mu);
    return now == (int)on;
}

typedef struct thread_arg {
    int from, to;
} thread_arg;

static void *thread_main(void *p) {
    thread_arg *a = p;
    play_range(a->from, a->to);
    release_slot();
    return NULL;
}

/* The line index of the `end` closing the block opened at line i. */
static int block_end(int i) {
    int depth = 0;
    for (int j = i + 1; j < S.n_lines; j++) {
        if (strncmp(S.lines[j], "repeat ", 7) == 0 || strncmp(S.lines[j], "threads ", 8) == 0)
            depth++;
        else if (strcmp(S.lines[j], "end") == 0 && depth-- == 0)
            return j;
    }
    return -1;
}

static void do_fork(void) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        /* The child: a host call, as a program's worker would make, then a normal exit. */
        host_call hc = {.dom = CUPTI_CB_DOMAIN_RUNTIME_API,
                        .cbid = CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
                        .ctx = 1, .corr = 999999, .wait = 1000000, .hold_kind = -1};
        through_site(1, host_call_run, &hc);
        exit(0);
    }
    int status = 0;
    if (pid > 0 && waitpid(pid, &status, 0) == pid)
        S.child_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A daemon's first half: fork, and both processes leave at once with _exit (no exit handlers, no
 * destructors): what the parent had recorded must have gone out before the fork. */
static void do_fork_exit(void) {
    fflush(NULL);
    if (fork() >= 0)
        _exit(0);
}

/* ---- another CUPTI client: a profiler, as Kineto (torch.profiler) behaves ---- */

static void CUPTIAPI other_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = NULL;
    *size = 0;
    *max_records = 0;
    pthread_mutex_lock(&S.mu);
    uint8_t *b = S.n_other < MAX_OTHER ? aligned_alloc(8, OTHER_BUF) : NULL;
    if (b != NULL) {
        S.other_bufs[S.n_other++] = b;
        *buffer = b;
        *size = OTHER_BUF;
    }
    pthread_mutex_unlock(&S.mu);
}

/* Takes the records of its own buffers; a buffer it did not hand out it leaves alone, as Kineto
 * does ("bufferCompleted called with unknown buffer"). */
static void CUPTIAPI other_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                     size_t valid) {
    (void)ctx;
    (void)stream;
    (void)size;
    pthread_mutex_lock(&S.mu);
    int i = 0;
    while (i < S.n_other && S.other_bufs[i] != buffer)
        i++;
    if (i == S.n_other) {
        pthread_mutex_unlock(&S.mu);
        atomic_fetch_add(&S.other_unknown, 1);
        return;
    }
    S.other_bufs[i] = S.other_bufs[--S.n_other];
    pthread_mutex_unlock(&S.mu);
    CUpti_Activity *rec = NULL;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS)
        atomic_fetch_add(&S.other_records, 1);
    free(buffer);
}

static const CUpti_ActivityKind other_kinds[] = {
    CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};

static void CUPTIAPI other_api(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
                               const void *data) {
    (void)ud;
    (void)dom;
    (void)cbid;
    (void)data;
}

/* Its start: its own buffer callbacks (which replace the tracer's), its kinds; with `subscribe`,
 * it asks for callbacks first, as Kineto does for some of its features (refused while another
 * client is subscribed; it goes on without them). */
static void profiler_start(int subscribe) {
    if (subscribe) {
        CUpti_SubscriberHandle h;
        S.other_subscribe = cuptiSubscribe(&h, other_api, NULL);
    }
    cuptiActivityRegisterCallbacks(other_requested, other_completed);
    for (size_t i = 0; i < sizeof other_kinds / sizeof other_kinds[0]; i++)
        cuptiActivityEnable(other_kinds[i]);
}

/* Its stop: its kinds off (the tracer's too: kinds are CUPTI-wide), then its records collected with
 * a forced flush, and the per-thread buffer attribute cleared. */
static void profiler_stop(void) {
    for (size_t i = 0; i < sizeof other_kinds / sizeof other_kinds[0]; i++)
        cuptiActivityDisable(other_kinds[i]);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    uint8_t zero = 0;
    size_t sz = sizeof zero;
    cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &sz, &zero);
}

static int play_line(const char *l, shift sh) {
    if (strncmp(l, "kernel", 6) == 0) do_kernel(l, sh);
    else if (strncmp(l, "memcpy", 6) == 0) do_memcpy(l, sh);
    else if (strncmp(l, "memset", 6) == 0) do_memset(l, sh);
    else if (strncmp(l, "sync", 4) == 0) do_sync(l, sh);
    else if (strncmp(l, "api", 3) == 0) do_api(l, sh);
    else if (strncmp(l, "marker", 6) == 0) do_marker(l, sh);
    else if (strncmp(l, "device", 6) == 0) do_device(l);
    else if (strncmp(l, "context_create", 14) == 0) resource(CUPTI_CBID_RESOURCE_CONTEXT_CREATED, l);
    else if (strncmp(l, "context_destroy", 15) == 0) resource(CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, l);
    else if (strncmp(l, "context", 7) == 0) do_context(l);
    else if (strncmp(l, "green_context", 13) == 0) do_green_context(l);
    else if (strncmp(l, "stream", 6) == 0) do_stream(l);
    else if (strncmp(l, "call", 4) == 0) do_call(l, sh);
    else if (strncmp(l, "poll", 4) == 0) do_poll(l, sh);
    else if (strncmp(l, "clock ", 6) == 0) atomic_store(&S.clock, strtoull(l + 6, NULL, 10));
    else if (strncmp(l, "advance ", 8) == 0) atomic_fetch_add(&S.clock, strtoull(l + 8, NULL, 10));
    else if (strncmp(l, "drop ", 5) == 0) atomic_fetch_add(&S.dropped, strtoull(l + 5, NULL, 10));
    else if (strcmp(l, "flush") == 0) {
        for (int i = 0; i < MAX_SLOTS; i++) {
            pthread_mutex_lock(&S.slots[i].mu);
            S.slots[i].complete = 1;
            pthread_mutex_unlock(&S.slots[i].mu);
        }
    } else if (strcmp(l, "wait_flush") == 0) wait_flushes(2);
    else if (strncmp(l, "wait_flush ", 11) == 0) wait_flushes(atoi(l + 11));
    else if (strcmp(l, "fork") == 0) do_fork();
    else if (strcmp(l, "fork_exit") == 0) do_fork_exit();
    else if (strcmp(l, "report") == 0) do_report();
    else if (strcmp(l, "profiler_start") == 0) profiler_start(0);
    else if (strcmp(l, "profiler_start subscribe") == 0) profiler_start(1);
    else if (strncmp(l, "other_enable ", 13) == 0) return cuptiActivityEnable((CUpti_ActivityKind)atoi(l + 13)) == CUPTI_SUCCESS ? 0 : -1;
    else if (strncmp(l, "other_disable ", 14) == 0) return cuptiActivityDisable((CUpti_ActivityKind)atoi(l + 14)) == CUPTI_SUCCESS ? 0 : -1;
    else if (strncmp(l, "other ", 6) == 0) do_other(l, sh);
    else if (strcmp(l, "junk") == 0) do_junk();
    else if (strcmp(l, "worker on") == 0) return worker_start();
    else if (strcmp(l, "collect") == 0) return worker_collect();
    else if (strcmp(l, "profiler_stop") == 0) profiler_stop();
    else if (strcmp(l, "unwind off") == 0) S.unwind_off = 1;
    else if (strcmp(l, "unwind on") == 0) S.unwind_off = 0;
    else if (strncmp(l, "touch ", 6) == 0) {
        int fd = open(l + 6, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
            return -1;
        close(fd);
    } else if (strncmp(l, "wait_file ", 10) == 0) return wait_until(file_there, l + 10);
    else if (strncmp(l, "wait_kind ", 10) == 0) return wait_until(kind_is, l + 10);
    else if (strncmp(l, "fail ", 5) == 0) { /* applied at load */ }
    else return -1;
    return 0;
}

static int play_range(int from, int to) {
    for (int i = from; i < to; i++) {
        const char *l = S.lines[i];
        if (strncmp(l, "repeat ", 7) == 0 || strncmp(l, "threads ", 8) == 0) {
            int end = block_end(i);
            if (end < 0)
                return -1;
            int n = atoi(strchr(l, ' ') + 1);
            if (l[0] == 'r') {
                for (int k = 0; k < n; k++)
                    if (play_range(i + 1, end) != 0)
                        return -1;
            } else {
                pthread_t th[64];
                thread_arg a = {i + 1, end};
                int started = 0;
                for (int k = 0; k < n && k < 64; k++)
                    if (pthread_create(&th[k], NULL, thread_main, &a) == 0)
                        started++;
                for (int k = 0; k < started; k++)
                    pthread_join(th[k], NULL);
            }
            i = end;
            continue;
        }
        shift sh = {0, 0};
        unsigned long n = 1, d = 0;
        if (l[0] == 'x' && sscanf(l, "x%lu@%lu", &n, &d) == 2)
            l = strchr(l, ' ') ? strchr(l, ' ') + 1 : l;
        for (unsigned long k = 0; k < n; k++) {
            sh.dt = k * d;
            sh.dcorr = (uint32_t)k;
            if (play_line(l, sh) != 0) {
                fprintf(stderr, "standin: cannot play line %d: %s\n", i + 1, l);
                return -1;
            }
        }
    }
    return 0;
}

EXPORT int standin_load(const char *path) {
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    char line[1024];
    while (fgets(line, sizeof line, f) != NULL && S.n_lines < MAX_LINES) {
        char *h = strchr(line, '#');
        if (h)
            *h = '\0';
        size_t n = strlen(line);
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == ' ' || line[n - 1] == '\t'))
            line[--n] = '\0';
        char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        if (*s == '\0')
            continue;
        if (strcmp(s, "fail subscribe") == 0)
            S.fail_subscribe = 1;
        S.lines[S.n_lines++] = strdup(s);
    }
    fclose(f);
    return 0;
}

EXPORT int standin_run_line(const char *line) {
    shift sh = {0, 0};
    return line != NULL ? play_line(line, sh) : -1;
}

EXPORT void standin_set_sites(const standin_site_fn *fns, int n) {
    S.n_sites = n < MAX_SITES ? n : MAX_SITES;
    for (int i = 0; i < S.n_sites; i++)
        S.sites[i] = fns[i];
}

EXPORT int standin_play(void) {
    /* The main thread's last buffer stays with "CUPTI" until a flush takes it, as in CUPTI. */
    int rc = play_range(0, S.n_lines);
    printf("standin: rc=%d kernel_kind_enabled=%d concurrent_kernel=%d subscribed=%d child=%d "
           "other_records=%d other_unknown=%d other_subscribe=%d worker_buffers=%d\n",
           rc, S.kernel_kind_ever, S.kinds[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], S.subscribed,
           S.child_status, atomic_load(&S.other_records), atomic_load(&S.other_unknown),
           (int)S.other_subscribe, atomic_load(&S.worker_buffers));
    fflush(stdout);
    for (int i = 0; i < S.n_lines; i++)
        free(S.lines[i]);
    S.n_lines = 0;
    return rc;
}
