/*
 * The stand-in libcupti's assumptions (tests/tracer/standin/standin.h), measured against the real
 * CUPTI on a GPU: a small CUDA program that is its own CUPTI client, as the tracer is, and checks
 * one assumption after another. Each check prints what it saw ("conformance: ok NAME: ...", or
 * "conformance: FAIL NAME: ..." with what the stand-in assumes and what CUPTI did); the checks go
 * on where they still can (a GPU session is rare: every difference is worth seeing), and the
 * program exits 1 naming the first that differed. Lines marked "seen" are facts the stand-in
 * models both ways (a script chooses), printed for the record.
 *
 * usage: gpu_conformance            (the checks, then itself again as `teardown`)
 *        gpu_conformance teardown   (a client that returns from main with records still in CUPTI)
 * Exit status: 0 all held, 1 one differed, 2 no usable GPU or CUPTI failed outright.
 */
#include <cuda_runtime.h>
#include <cupti.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define BUF_SIZE (1u << 20)
#define MAX_SEEN 65536
#define EXT_ID 4242

/* ---- what the buffer callbacks saw ---- */

typedef struct seen {
    uint32_t kind;
    size_t off;        /* where it lies in its buffer */
    size_t step;       /* bytes to the next record in the buffer (0: the last one) */
    uint32_t corr, cbid, device, context, stream, type;
    uint64_t start, end, ext_id, bytes;
    char name[64];
    pid_t tid;         /* the thread that handed the buffer over */
    int in_flush;      /* handed over inside one of our cuptiActivityFlushAll calls */
    int after_atexit;  /* handed over after our exit handler's flush (teardown mode) */
} seen;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static seen recs[MAX_SEEN];
static size_t n_recs;
static unsigned buffers;
static __thread int in_flush;
static pid_t main_tid;
static int atexit_done;
static char failed[1024]; /* the first check that differed */
static int n_failed;

static pid_t gettid_(void) { return (pid_t)syscall(SYS_gettid); }

static void CUPTIAPI requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = (uint8_t *)aligned_alloc(8, BUF_SIZE);
    *size = *buffer ? BUF_SIZE : 0;
    *max_records = 0;
}

static void CUPTIAPI completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *rec = NULL;
    pthread_mutex_lock(&mu);
    buffers++;
    seen *prev = NULL;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS && n_recs < MAX_SEEN) {
        seen *s = &recs[n_recs++];
        memset(s, 0, sizeof *s);
        s->off = (size_t)((uint8_t *)rec - buffer);
        if (prev != NULL)
            prev->step = s->off - prev->off;
        s->kind = rec->kind;
        s->tid = gettid_();
        s->in_flush = in_flush;
        s->after_atexit = atexit_done;
        switch (rec->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
            s->corr = k->correlationId, s->start = k->start, s->end = k->end;
            s->device = k->deviceId, s->context = k->contextId, s->stream = k->streamId;
            snprintf(s->name, sizeof s->name, "%s", k->name ? k->name : "");
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
            s->corr = m->correlationId, s->start = m->start, s->end = m->end, s->bytes = m->bytes;
            s->type = m->copyKind, s->device = m->deviceId, s->stream = m->streamId;
            break;
        }
        case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
            const CUpti_ActivitySynchronization2 *y = (const CUpti_ActivitySynchronization2 *)rec;
            s->corr = y->correlationId, s->start = y->start, s->end = y->end, s->type = y->type;
            s->context = y->contextId, s->stream = y->streamId;
            break;
        }
        case CUPTI_ACTIVITY_KIND_RUNTIME:
        case CUPTI_ACTIVITY_KIND_DRIVER: {
            const CUpti_ActivityAPI *a = (const CUpti_ActivityAPI *)rec;
            s->corr = a->correlationId, s->cbid = a->cbid, s->start = a->start, s->end = a->end;
            break;
        }
        case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
            const CUpti_ActivityExternalCorrelation *x = (const CUpti_ActivityExternalCorrelation *)rec;
            s->corr = x->correlationId, s->ext_id = x->externalId;
            break;
        }
        default:
            break;
        }
        prev = s;
    }
    pthread_mutex_unlock(&mu);
    free(buffer);
}

/* ---- the callbacks: the calls' correlation ids and when they entered and returned ---- */

typedef struct call {
    uint32_t cbid, corr, context;
    uint64_t enter, exit;
} call;
static call calls[4096];
static size_t n_calls;

static void CUPTIAPI on_api(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data) {
    (void)ud;
    const CUpti_CallbackData *cd = (const CUpti_CallbackData *)data;
    if (dom != CUPTI_CB_DOMAIN_RUNTIME_API)
        return;
    uint64_t now = 0;
    cuptiGetTimestamp(&now);
    pthread_mutex_lock(&mu);
    if (cd->callbackSite == CUPTI_API_ENTER && n_calls < 4096) {
        calls[n_calls].cbid = cbid;
        calls[n_calls].corr = cd->correlationId;
        calls[n_calls].context = cd->contextUid;
        calls[n_calls].enter = now;
        calls[n_calls].exit = 0;
        n_calls++;
    } else {
        for (size_t i = n_calls; i-- > 0;)
            if (calls[i].corr == cd->correlationId && calls[i].exit == 0) {
                calls[i].exit = now;
                break;
            }
    }
    pthread_mutex_unlock(&mu);
}

static const call *last_call(uint32_t cbid) {
    for (size_t i = n_calls; i-- > 0;)
        if (calls[i].cbid == cbid)
            return &calls[i];
    return NULL;
}

static const seen *find(uint32_t kind, uint32_t corr) {
    for (size_t i = 0; i < n_recs; i++)
        if (recs[i].kind == kind && recs[i].corr == corr)
            return &recs[i];
    return NULL;
}

static void flush(uint32_t flag) {
    in_flush = 1;
    CUptiResult r = cuptiActivityFlushAll(flag);
    in_flush = 0;
    if (r != CUPTI_SUCCESS)
        printf("conformance: cuptiActivityFlushAll(%u) returned %d\n", flag, (int)r);
}

/* ---- reporting ---- */

static void finish(void) {
    if (n_failed == 0) {
        printf("conformance: all checks held\n");
        exit(0);
    }
    printf("conformance: %d check(s) differed, the first: %s\n", n_failed, failed);
    exit(1);
}

/* A check; NEED: one the next checks cannot do without (they are not run when it fails). */
#define CHECK(name, cond, ...)                                                                \
    do {                                                                                      \
        int ok_ = (cond);                                                                     \
        printf("conformance: %s " name ": ", ok_ ? "ok" : "FAIL");                            \
        printf(__VA_ARGS__);                                                                  \
        printf("\n");                                                                         \
        if (!ok_ && n_failed++ == 0)                                                          \
            snprintf(failed, sizeof failed, "%s", name);                                      \
    } while (0)
#define NEED(name, cond, ...)                                                                 \
    do {                                                                                      \
        CHECK(name, cond, __VA_ARGS__);                                                       \
        if (!(cond))                                                                          \
            finish();                                                                         \
    } while (0)

static void need(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        printf("conformance: %s: %s\n", what, cudaGetErrorString(e));
        exit(2);
    }
}

static void need_cupti(CUptiResult r, const char *what) {
    if (r != CUPTI_SUCCESS) {
        const char *s = "?";
        cuptiGetResultString(r, &s);
        printf("conformance: %s: %s\n", what, s);
        exit(2);
    }
}

/* ---- the GPU work ---- */

/* Spins until the host sets *flag (mapped host memory), at most about `limit` clocks. */
__global__ void conformance_spin(volatile int *flag, long long limit) {
    long long t0 = clock64();
    while (*flag == 0 && clock64() - t0 < limit) {
    }
}

__global__ void conformance_tick(int *p) { p[threadIdx.x] += 1; }

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* ---- the teardown child ---- */

static void at_exit(void) {
    flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    pthread_mutex_lock(&mu);
    size_t k = 0;
    for (size_t i = 0; i < n_recs; i++)
        k += recs[i].kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    atexit_done = 1;
    pthread_mutex_unlock(&mu);
    printf("teardown: atexit flush kernels=%zu\n", k);
    fflush(stdout);
}

__attribute__((destructor)) static void at_fini(void) {
    if (!atexit_done)
        return;
    size_t late = 0;
    for (size_t i = 0; i < n_recs; i++)
        late += recs[i].after_atexit;
    printf("teardown: destructor records_after_atexit=%zu\n", late);
    fflush(stdout);
}

static int teardown_child(void) {
    CUpti_SubscriberHandle sub;
    need_cupti(cuptiSubscribe(&sub, on_api, NULL), "cuptiSubscribe");
    need_cupti(cuptiActivityRegisterCallbacks(requested, completed), "cuptiActivityRegisterCallbacks");
    need_cupti(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable CONCURRENT_KERNEL");
    int *d = NULL;
    need(cudaMalloc(&d, 256 * sizeof(int)), "cudaMalloc");
    /* After CUPTI is in use, as the tracer registers its own. */
    atexit(at_exit);
    conformance_tick<<<1, 256>>>(d);
    need(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    conformance_tick<<<1, 256>>>(d); /* still queued or running as main returns */
    printf("teardown: main returns\n");
    fflush(stdout);
    return 0;
}

/* ---- the checks ---- */

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    main_tid = gettid_();
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("conformance: no CUDA device\n");
        return 2;
    }
    if (argc > 1 && strcmp(argv[1], "teardown") == 0)
        return teardown_child();

    uint32_t version = 0;
    need_cupti(cuptiGetVersion(&version), "cuptiGetVersion");
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    cudaDeviceProp prop;
    need(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    printf("conformance: CUPTI API %u, driver %d, runtime %d, %s (cc %d.%d)\n", version, driver,
           runtime, prop.name, prop.major, prop.minor);
    NEED("cupti-13", version / 10000 == 13,
          "the stand-in writes CUPTI 13's records; this CUPTI's API version is %u", version);

    CUpti_SubscriberHandle sub;
    need_cupti(cuptiSubscribe(&sub, on_api, NULL), "cuptiSubscribe");
    CUpti_SubscriberHandle second;
    CUptiResult r2 = cuptiSubscribe(&second, on_api, NULL);
    CHECK("second-subscriber", r2 == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
          "a second cuptiSubscribe returns %d (the stand-in: %d, MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; "
          "CUDA 13.3 and drivers r610 on allow several)", (int)r2,
          (int)CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    need_cupti(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API,
                                   CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020), "callback");
    need_cupti(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API,
                                   CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000), "callback");
    need_cupti(cuptiActivityRegisterCallbacks(requested, completed), "cuptiActivityRegisterCallbacks");
    const CUpti_ActivityKind kinds[] = {
        CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
        CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,   CUPTI_ACTIVITY_KIND_RUNTIME,
        CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_OVERHEAD};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        CUptiResult r = cuptiActivityEnable(kinds[i]);
        if (kinds[i] == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION || kinds[i] == CUPTI_ACTIVITY_KIND_OVERHEAD)
            CHECK("other-kinds", r == CUPTI_SUCCESS, "enabling kind %d (as Kineto does): %d", (int)kinds[i], (int)r);
        else
            need_cupti(r, "cuptiActivityEnable");
    }

    int *flag = NULL, *dflag = NULL, *d = NULL;
    need(cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped), "cudaHostAlloc");
    need(cudaHostGetDevicePointer(&dflag, flag, 0), "cudaHostGetDevicePointer");
    need(cudaMalloc(&d, 1 << 20), "cudaMalloc");
    cudaStream_t st;
    need(cudaStreamCreate(&st), "cudaStreamCreate");
    *flag = 0;

    /* A kernel still running: FlushAll(0) holds its record back; a forced flush hands it out
     * with times 0 (the stand-in's `running=1`). */
    cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, EXT_ID);
    int khz = 0;
    need(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0), "cudaDeviceGetAttribute");
    conformance_spin<<<1, 1, 0, st>>>(dflag, (long long)khz * 1000ll * 5); /* ~5 s at most */
    uint64_t ext_last = 0;
    cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &ext_last);
    const call *launch = last_call(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
    NEED("launch-callback", launch != NULL, "cudaLaunchKernel's callbacks came");
    uint32_t spin_corr = launch->corr;
    sleep_ms(100);
    flush(0);
    pthread_mutex_lock(&mu);
    const seen *k = find(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, spin_corr);
    int early = k != NULL;
    pthread_mutex_unlock(&mu);
    CHECK("running-held-back", !early,
          "a kernel still running: its record %s by cuptiActivityFlushAll(0)",
          early ? "was handed out" : "was not handed out");
    flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    pthread_mutex_lock(&mu);
    k = find(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, spin_corr);
    int forced_out = k != NULL;
    uint64_t fs = k ? k->start : 0, fe = k ? k->end : 0;
    pthread_mutex_unlock(&mu);
    CHECK("running-forced-out", forced_out && fs == 0 && fe == 0,
          "a kernel still running, forced flush: record %s, start %llu end %llu (the stand-in: "
          "handed out with times 0)", forced_out ? "handed out" : "not handed out",
          (unsigned long long)fs, (unsigned long long)fe);

    /* The work ends; the synchronize that waited for it returns. */
    *flag = 1;
    conformance_tick<<<1, 256, 0, st>>>(d);
    uint32_t tick_corr = last_call(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000)->corr;
    need(cudaMemcpyAsync(d, flag, sizeof(int), cudaMemcpyHostToDevice, st), "cudaMemcpyAsync");
    need(cudaStreamSynchronize(st), "cudaStreamSynchronize");
    const call *sync = last_call(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020);
    NEED("sync-callback", sync != NULL && sync->exit >= sync->enter,
          "cudaStreamSynchronize's callbacks came");
    pthread_mutex_lock(&mu);
    int by_itself = find(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, tick_corr) != NULL;
    pthread_mutex_unlock(&mu);
    CHECK("not-before-a-flush", !by_itself,
          "after the synchronize, before any flush, the kernel's record %s (the stand-in: records "
          "come through a flush, a full buffer or its worker's `collect`)",
          by_itself ? "had come" : "had not come");
    int tries = 0;
    const seen *tick = NULL;
    for (; tries < 200 && tick == NULL; tries++) {
        flush(0);
        pthread_mutex_lock(&mu);
        tick = find(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, tick_corr);
        pthread_mutex_unlock(&mu);
        if (tick == NULL)
            sleep_ms(10);
    }
    NEED("complete-by-flush", tick != NULL,
          "the finished kernel's record came through cuptiActivityFlushAll(0) after %d call(s)", tries);
    pthread_mutex_lock(&mu);
    unsigned spin_records = 0;
    for (size_t i = 0; i < n_recs; i++)
        if (recs[i].kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && recs[i].corr == spin_corr) {
            spin_records++;
            printf("conformance: seen the once-running kernel's record %u: start %llu end %llu\n",
                   spin_records, (unsigned long long)recs[i].start, (unsigned long long)recs[i].end);
        }
    pthread_mutex_unlock(&mu);
    CHECK("flush-on-caller", tick->in_flush && tick->tid == main_tid,
          "cuptiActivityFlushAll(0) handed it over %s, on %s", tick->in_flush ? "inside the call" : "outside it",
          tick->tid == main_tid ? "the calling thread" : "another thread");

    /* Fields the converter reads, where this program knows the answer. */
    uint32_t ctx_id = launch->context; /* the launch callback's contextUid */
    CHECK("kernel-fields", tick->device == 0 && tick->context == ctx_id && tick->start > 0 &&
                               tick->end >= tick->start && strstr(tick->name, "conformance_tick"),
          "kernel record: device %u context %u (want %u) start %llu end %llu name %s", tick->device,
          tick->context, ctx_id, (unsigned long long)tick->start, (unsigned long long)tick->end,
          tick->name);
    pthread_mutex_lock(&mu);
    const seen *copy = NULL, *ysync = NULL, *twin = NULL, *ext = NULL;
    for (size_t i = 0; i < n_recs; i++) {
        const seen *s = &recs[i];
        if (s->kind == CUPTI_ACTIVITY_KIND_MEMCPY && s->bytes == sizeof(int))
            copy = s;
        if (s->kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION && s->corr == sync->corr)
            ysync = s;
        if (s->kind == CUPTI_ACTIVITY_KIND_RUNTIME && s->corr == sync->corr)
            twin = s;
        if (s->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION && s->ext_id == EXT_ID)
            ext = s;
    }
    pthread_mutex_unlock(&mu);
    CHECK("memcpy-fields", copy != NULL && copy->type == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD &&
                               copy->end >= copy->start && copy->start > 0,
          "memcpy record: %s", copy ? "4 bytes host to device" : "none");
    CHECK("sync-record", ysync != NULL && ysync->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE,
          "the synchronize's SYNCHRONIZATION record: %s, type %u, correlation %u", ysync ? "there" : "none",
          ysync ? ysync->type : 0, sync->corr);
    CHECK("twin", twin != NULL && twin->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
          "with RUNTIME on, the synchronize also has a RUNTIME record with the callback's "
          "correlation id %u: %s", sync->corr, twin ? "yes" : "no");
    if (twin != NULL)
        printf("conformance: seen twin times: record %llu..%llu, callback %llu..%llu\n",
               (unsigned long long)twin->start, (unsigned long long)twin->end,
               (unsigned long long)sync->enter, (unsigned long long)sync->exit);
    CHECK("external-correlation", ext != NULL && ext->corr == spin_corr,
          "an EXTERNAL_CORRELATION record (kind %d) lies among the others, id %d, correlation %u: %s",
          (int)CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, EXT_ID, spin_corr, ext ? "yes" : "no");

    /* Record sizes: the distance from one record to the next, as CUPTI steps, is the size of the
     * struct the stand-in writes (and the converter reads). */
    static const struct {
        uint32_t kind;
        size_t size;
    } sizes[] = {{CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, sizeof(CUpti_ActivityKernel10)},
                 {CUPTI_ACTIVITY_KIND_MEMCPY, sizeof(CUpti_ActivityMemcpy6)},
                 {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, sizeof(CUpti_ActivitySynchronization2)},
                 {CUPTI_ACTIVITY_KIND_RUNTIME, sizeof(CUpti_ActivityAPI)},
                 {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, sizeof(CUpti_ActivityExternalCorrelation)},
                 {CUPTI_ACTIVITY_KIND_OVERHEAD, sizeof(CUpti_ActivityOverhead3)}};
    pthread_mutex_lock(&mu);
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
        size_t n = 0, bad = 0, step = 0;
        for (size_t i = 0; i < n_recs; i++)
            if (recs[i].kind == sizes[j].kind && recs[i].step != 0) {
                n++;
                if (recs[i].step != sizes[j].size) {
                    bad++;
                    step = recs[i].step;
                }
            }
        if (n == 0) {
            printf("conformance: seen no record of kind %u followed by another\n", sizes[j].kind);
            continue;
        }
        CHECK("record-size", bad == 0, "kind %u: %zu records, %zu stepped %zu bytes, not %zu",
              sizes[j].kind, n, bad, step, sizes[j].size);
    }
    unsigned other_thread = 0;
    for (size_t i = 0; i < n_recs; i++)
        other_thread += !recs[i].in_flush;
    printf("conformance: seen %zu records in %u buffers, %u handed over outside our flushes\n",
           n_recs, buffers, other_thread);
    pthread_mutex_unlock(&mu);

    /* Full buffers: handed over on the thread that filled them or on one of CUPTI's (the stand-in
     * plays both: its default, and `worker on`). */
    size_t before = n_recs;
    for (int i = 0; i < 6000; i++)
        conformance_tick<<<1, 32, 0, st>>>(d);
    need(cudaStreamSynchronize(st), "cudaStreamSynchronize");
    sleep_ms(500);
    pthread_mutex_lock(&mu);
    unsigned self = 0, other = 0;
    for (size_t i = before; i < n_recs; i++) {
        self += recs[i].tid == main_tid;
        other += recs[i].tid != main_tid;
    }
    pthread_mutex_unlock(&mu);
    printf("conformance: seen full buffers without a flush: %u records on the program's thread, %u "
           "on another\n", self, other);
    flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME);
    cuptiUnsubscribe(sub);

    /* Teardown order: another process, which returns from main with a kernel in flight. */
    fflush(stdout);
    int pipefd[2];
    if (pipe(pipefd) != 0)
        return 2;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], 1);
        execl("/proc/self/exe", argv[0], "teardown", (char *)NULL);
        _exit(127);
    }
    close(pipefd[1]);
    char out[4096];
    size_t n = 0;
    ssize_t got;
    while (n < sizeof out - 1 && (got = read(pipefd[0], out + n, sizeof out - 1 - n)) > 0)
        n += (size_t)got;
    out[n] = '\0';
    int status = 0;
    waitpid(pid, &status, 0);
    printf("%s", out);
    const char *a = strstr(out, "teardown: main returns"), *b = strstr(out, "teardown: atexit flush kernels=");
    int kernels = b ? atoi(b + strlen("teardown: atexit flush kernels=")) : -1;
    CHECK("teardown-order", WIFEXITED(status) && WEXITSTATUS(status) == 0 && a && b && a < b && kernels >= 1,
          "an exit handler registered after CUPTI's first use runs while CUPTI still answers: its "
          "forced flush handed over %d kernel record(s) (exit status %d)", kernels,
          WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    const char *c = strstr(out, "records_after_atexit=");
    printf("conformance: seen buffers handed over after the exit handler's flush: %s (the stand-in's "
           "worker hands over at its teardown)\n", c ? c + strlen("records_after_atexit=") : "?\n");
    finish();
    return 0;
}
