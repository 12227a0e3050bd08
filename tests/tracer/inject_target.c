/*
 * A long-running "CUDA program" for test_inject, into which synctop loads the tracer while it runs.
 * It loads the stand-in libcupti ($SYNCTOP_STANDIN) as a CUDA program has libcupti at hand (the
 * injected tracer finds the same file through $SYNCTOP_CUPTI), and the stand-in libcuda.so.1
 * ($SYNCTOP_STANDIN_DRIVER, when set) as a CUDA program maps the driver, creates its context before
 * anyone traces it, then loops: a fixed computation in integer and floating-point registers (a register
 * the injection failed to put back changes the checksum), and every 64 iterations a kernel and a
 * blocking cudaStreamSynchronize played through the stand-in (after which the kernel's record is
 * complete, as CUPTI's is once the stream is synchronized), which the tracer sees once it is
 * there and a viewer is connected. It measures the longest gap between two iterations: the pause
 * the injection cost it.
 *
 * usage: inject_target run STOPFILE   loop until STOPFILE exists
 *        inject_target count N        exactly N iterations (the untraced reference)
 *        inject_target block STOPFILE wait in system calls until STOPFILE exists: by turns a read of
 *                                     a pipe a second thread writes a counter into every
 *                                     millisecond, and a 500 us sleep; prints "reads=N wrong=W
 *                                     eintr=E short=S" (wrong bytes, interrupted calls, sleeps
 *                                     that came back early: all must be 0 whatever was done to it)
 *        inject_target held STOPFILE  as run, with CUPTI held by another client (a profiler)
 *                                     that subscribed to it first
 *        inject_target sandboxed STOPFILE  as run, under a seccomp filter that allows every system
 *                                     call (as a container's profile allows the common ones)
 *        inject_target exit           set up, then exit at once
 * Prints "ready" once set up, and at the end a line "gap START END" for every gap of 1 ms or more
 * between two iterations (CLOCK_MONOTONIC ns), then
 * "iterations=N checksum=X longest_gap_us=G gap_at=I mode=M" (M: SYNCTOP_MODE as the program sees
 * it then, "unset" when absent); exit status 0, 2 on a setup error.
 * Built with INJECT_TARGET_STATIC, it is a statically linked program without the stand-in; built
 * with INJECT_TARGET_BADLIB, a shared library with the tracer's entry points that dlopen refuses
 * (they need a symbol nothing defines), for the failed-load case.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifndef INJECT_TARGET_BADLIB
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#endif

#ifdef INJECT_TARGET_BADLIB
extern int synctop_test_nowhere(void);
__attribute__((visibility("default"))) int synctop_tracer_start(const char *settings);
__attribute__((visibility("default"))) int synctop_tracer_start(const char *settings) {
    return settings != NULL ? synctop_test_nowhere() : 0;
}
__attribute__((visibility("default"))) int synctop_tracer_stop(void);
__attribute__((visibility("default"))) int synctop_tracer_stop(void) { return synctop_test_nowhere(); }
__attribute__((visibility("default"))) const char *synctop_tracer_status(void);
__attribute__((visibility("default"))) const char *synctop_tracer_status(void) { return ""; }
#else

#ifndef INJECT_TARGET_STATIC
#include <cupti.h>
#include <dlfcn.h>

static int (*run_line)(const char *line);
#endif

#define MAX_GAPS 4096
static uint64_t gaps[MAX_GAPS][2]; /* [start, end) of every gap of 1 ms or more, CLOCK_MONOTONIC */
static size_t n_gaps;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One iteration's work: a linear congruential walk feeding a decaying floating-point sum. */
static uint64_t work(uint64_t x, double *d, uint64_t i) {
    double acc = *d;
    for (int j = 0; j < 2048; j++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull + i;
        acc = acc * 0.999999 + (double)(x >> 44);
    }
    *d = acc;
    return x;
}

/* A kernel and a blocking synchronize, as the program's CUDA calls. */
static void cuda_calls(uint64_t i) {
#ifndef INJECT_TARGET_STATIC
    char line[256];
    uint64_t t = 3000000000ull + i * 1000000ull;
    snprintf(line, sizeof line,
             "kernel name=inject_kernel start=%" PRIu64 " end=%" PRIu64 " dev=0 ctx=1 stream=7 corr=%" PRIu64, t,
             t + 500000, 2 * i + 1);
    run_line(line);
    snprintf(line, sizeof line, "call domain=rt cbid=%d wait=200000 ctx=1 corr=%" PRIu64,
             CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, 2 * i + 2);
    run_line(line);
    run_line("flush"); /* the stream is synchronized: its kernel's record is complete */
#else
    (void)i;
#endif
}

#ifndef INJECT_TARGET_STATIC
static void CUPTIAPI profiler_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data) {
    (void)ud;
    (void)dom;
    (void)cbid;
    (void)data;
}
#endif

static int setup(int held) {
#ifndef INJECT_TARGET_STATIC
    const char *standin = getenv("SYNCTOP_STANDIN");
    void *s = standin ? dlopen(standin, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (s == NULL) {
        fprintf(stderr, "inject_target: cannot load $SYNCTOP_STANDIN: %s\n", standin ? dlerror() : "unset");
        return -1;
    }
    union {
        void *p;
        int (*f)(const char *);
    } u = {.p = dlsym(s, "standin_run_line")};
    run_line = u.f;
    if (run_line == NULL) {
        fprintf(stderr, "inject_target: no standin_run_line\n");
        return -1;
    }
    const char *driver = getenv("SYNCTOP_STANDIN_DRIVER");
    if (driver != NULL && dlopen(driver, RTLD_NOW | RTLD_LOCAL) == NULL) {
        fprintf(stderr, "inject_target: cannot load $SYNCTOP_STANDIN_DRIVER: %s\n", dlerror());
        return -1;
    }
    if (held) {
        union {
            void *p;
            CUptiResult (*f)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
        } sub = {.p = dlsym(s, "cuptiSubscribe")};
        CUpti_SubscriberHandle h;
        if (sub.f == NULL || sub.f(&h, profiler_callback, NULL) != CUPTI_SUCCESS) {
            fprintf(stderr, "inject_target: cannot subscribe to the stand-in\n");
            return -1;
        }
    }
    run_line("device id=0 name=FakeH100 cc_major=9 cc_minor=0 sms=132 mem=85899345920");
    run_line("context_create 1");
    run_line("context id=1 device=0 nullstream=7");
#else
    (void)held;
#endif
    return 0;
}

static int pipe_fds[2];

static void *feeder(void *arg) {
    (void)arg;
    for (uint8_t b = 0;; b++) {
        if (write(pipe_fds[1], &b, 1) != 1)
            return NULL;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* The main thread in blocking system calls, checking that each comes back as it should. */
static int block(const char *stop) {
    pthread_t t;
    if (pipe(pipe_fds) != 0 || pthread_create(&t, NULL, feeder, NULL) != 0)
        return 2;
    uint64_t reads = 0, wrong = 0, eintr = 0, shorts = 0;
    uint8_t expect = 0;
    for (uint64_t i = 0;; i++) {
        if (i % 2 == 0) {
            uint8_t b;
            ssize_t n = read(pipe_fds[0], &b, 1);
            if (n < 0 && errno == EINTR) {
                eintr++;
                continue;
            }
            reads++;
            wrong += n != 1 || b != expect;
            expect = (uint8_t)(b + 1);
        } else {
            uint64_t t0 = now_ns();
            struct timespec ts = {0, 500000};
            if (nanosleep(&ts, NULL) != 0)
                eintr += errno == EINTR;
            else
                shorts += now_ns() - t0 < 500000;
        }
        if (i % 64 == 63 && access(stop, F_OK) == 0)
            break;
    }
    printf("reads=%" PRIu64 " wrong=%" PRIu64 " eintr=%" PRIu64 " short=%" PRIu64 "\n", reads, wrong, eintr,
           shorts);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "exit") != 0 && argc < 3)) {
        fprintf(stderr, "usage: inject_target run STOPFILE | count N | exit\n");
        return 2;
    }
    if (setup(strcmp(argv[1], "held") == 0) != 0)
        return 2;
    if (strcmp(argv[1], "sandboxed") == 0) {
        struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
        struct sock_fprog prog = {.len = 1, .filter = &allow};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
            perror("inject_target: seccomp");
            return 2;
        }
    }
    printf("ready\n");
    fflush(stdout);
    if (strcmp(argv[1], "exit") == 0)
        return 0;
    if (strcmp(argv[1], "block") == 0)
        return block(argv[2]);
    int counted = strcmp(argv[1], "count") == 0;
    uint64_t n = counted ? strtoull(argv[2], NULL, 10) : UINT64_MAX;
    const char *stop = counted ? NULL : argv[2];

    uint64_t x = 88172645463325252ull, i = 0, longest = 0, gap_at = 0;
    double d = 1.0;
    uint64_t prev = now_ns();
    for (; i < n; i++) {
        x = work(x, &d, i);
        if (i % 64 == 0)
            cuda_calls(i);
        uint64_t t = now_ns();
        if (t - prev >= 1000000 && n_gaps < MAX_GAPS) {
            gaps[n_gaps][0] = prev;
            gaps[n_gaps++][1] = t;
        }
        if (t - prev > longest) {
            longest = t - prev;
            gap_at = i;
        }
        prev = t;
        if (stop != NULL && i % 256 == 255 && access(stop, F_OK) == 0) {
            i++;
            break;
        }
    }
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    const char *mode = getenv("SYNCTOP_MODE");
    for (size_t k = 0; k < n_gaps; k++)
        printf("gap %" PRIu64 " %" PRIu64 "\n", gaps[k][0], gaps[k][1]);
    printf("iterations=%" PRIu64 " checksum=%016" PRIx64 " longest_gap_us=%" PRIu64 " gap_at=%" PRIu64
           " mode=%s\n",
           i, x ^ bits, longest / 1000, gap_at, mode ? mode : "unset");
    return 0;
}

#endif /* INJECT_TARGET_BADLIB */
