/*
 * Starting and stopping libsynctop-tracer.so in a process that is already running (`synctop attach
 * PID` on a program started without synctop run, `synctop detach PID`), with ptrace, on x86-64
 * and aarch64 Linux (aarch64 cross-compiled and reviewed, not yet run on an aarch64 machine).
 *
 * What it does to the process. One thread, the main one, is stopped (PTRACE_SEIZE and
 * PTRACE_INTERRUPT, no SIGSTOP) at a moment when it holds none of the C library's locks (see
 * ij_safe_point), its registers (general, and the whole x87/SSE/AVX state on x86-64, the FPSIMD and
 * SVE state on aarch64) are saved, and it is made to call, one after the other and each time
 * returning to address 0, whose fault brings it back to us: __errno_location (errno is put back at
 * the end), dlopen(tracer, RTLD_NOW | RTLD_LOCAL) when the tracer is not loaded yet (dlerror when it
 * fails), and the tracer's synctop_tracer_start(settings) (synctop/tracer.h), which makes a thread
 * of the tracer's, with every signal blocked, to start tracing, and returns at once, so that the
 * program's thread is not held while CUPTI starts. The settings (on-demand mode: the tracer collects
 * only while a viewer is connected; the default endpoint; no trace file) go to the tracer, not to
 * the environment. The strings go on its stack below the red zone, whose bytes are put back, then
 * its registers, and it is let go (PTRACE_DETACH). Detaching is one such stop that calls
 * synctop_tracer_stop, which only sets a flag: within a flush period the tracer's thread turns
 * CUPTI's collection off, ships what is left, unsubscribes, closes its socket, frees its memory and
 * ends. The functions are found in the libraries the process has mapped: the address in
 * /proc/PID/maps plus the symbol's offset in the same file's dynamic symbol table.
 *
 * What stays after a detach: the tracer library and the CUPTI it loaded (neither can be unloaded
 * safely), its exit and fork handlers (which then do nothing), and, with a CUPTI older than 13.0
 * Update 1, kernel recording in CUPTI (which cannot turn it off safely; the records are dropped at
 * once). No thread, socket or descriptor of the tracer's. What may be seen: a pause of the main
 * thread of about the time dlopen takes at the first attach, a few milliseconds afterwards; like a
 * debugger's attach, a blocking epoll_wait, sigtimedwait or semop may return EINTR once; on aarch64 a
 * relative sleep the thread was stopped in (nanosleep, a futex wait with a relative timeout) starts
 * its whole time again (inject.c says why), and a thread in SME streaming mode or using ZA is not
 * called into (the stop is tried again, as for one busy in the C library).
 *
 * A main thread that runs with a shadow stack (x86 CET, arm64 GCS: the kernel says so through
 * NT_X86_SHSTK or NT_ARM_GCS) is refused before anything is written: a call would return through
 * an address its shadow stack does not hold. Such a program takes the tracer at start instead.
 *
 * Every wait is bounded; on every error after the process was stopped, its registers and memory
 * are put back and it is let go. Signals that would end this process are held off meanwhile, since
 * a tracer that dies while the program runs an injected call leaves it to crash.
 */
#ifndef SYNCTOP_INJECT_H
#define SYNCTOP_INJECT_H

#include <stddef.h>
#include <stdint.h>

#include "synctop/error.h"
#include "synctop/net.h"

/* What /proc tells about a process before anything is done to it. */
typedef struct ij_probe_info {
    char name[64];       /* its comm */
    char cmdline[256];   /* its command line, spaces between the arguments */
    int tracer_loaded;   /* libsynctop-tracer.so is mapped in it */
    int tracer_at_init;  /* its environment names the tracer in CUDA_INJECTION64_PATH: the driver
                            loads it when the program initialises CUDA */
    int cuda_loaded;     /* libcuda is mapped in it */
    int seccomp_filters; /* seccomp filters it runs under (a container's, a sandbox's); 0: none or
                            not said */
} ij_probe_info;

/* 0; ERR_PERM, before anything else is read, when the process is another user's (the rule of
 * ij_inject), or when the kernel does not let this user read its mappings; ERR_NOENT when there is
 * no such process. err says why. */
int ij_probe(long pid, ij_probe_info *p, err_msg *err);

/* The points at which ij_opts.hook is called, for tests that make the process exit there. */
typedef enum ij_step {
    IJ_STEP_STOPPED = 1, /* the thread is stopped at a safe point, nothing called yet */
    IJ_STEP_LOADED = 2,  /* dlopen returned */
} ij_step;

typedef struct ij_opts {
    const char *mode;     /* the tracer's SYNCTOP_MODE, always or on-demand (NULL: always) */
    int call_ms;          /* how long one call on the stopped thread may take (default 5000) */
    int start_ms;         /* how long the tracer may take to start publishing (default 30000) */
    int safe_point_ms;    /* how long to look for a safe point (default 2000) */
    void (*hook)(void *ctx, ij_step step, long pid);
    void *hook_ctx;
} ij_opts;

typedef struct ij_report {
    char endpoint[TP_ENDPOINT_MAX]; /* where the tracer publishes */
    uint64_t longest_pause_ns;      /* the longest time the thread was held at once */
    uint64_t total_pause_ns;
    unsigned stops;                 /* times the thread was stopped (safe-point tries included) */
    long held_in_syscall;           /* the system call it was stopped in, -1: none */
    uint64_t held_at_ns;            /* CLOCK_MONOTONIC when it was stopped for the calls (the
                                       program can tell its pause by its own clock) */
    int loaded;                     /* the tracer was loaded now (it was not in the process) */
    char warning[512];              /* something that went wrong after the tracer started */
} ij_report;

/* Returned by ij_inject when the tracer is already there and publishing on the pid's endpoint:
 * nothing was done. */
#define IJ_PUBLISHING 2

/* Loads the tracer at tracer_path into process pid (or takes the one it has, stopped by a detach
 * or never started), starts it, and waits until it publishes on the pid's endpoint. 0,
 * IJ_PUBLISHING, or a negative code with the reason and what to do in err: ERR_PERM (another
 * user's process, ptrace not allowed: err says what allows it), ERR_EXIST (traced by someone else:
 * a debugger, another synctop; err names it; or its tracer publishes elsewhere), ERR_NOENT (no
 * such process, or it exited meanwhile), ERR_UNSUPPORTED (another architecture, a static
 * program), ERR_AGAIN (another attach or detach of the same process is in progress: err names
 * its process; no safe point found; a call that did not return), ERR_IO (the tracer did not load,
 * or loaded but does not publish). Never leaves the process stopped. Call it from one thread only,
 * the whole time.
 *
 * One attach or detach at a time per process: each holds a lock (flock) on PID.lock in this user's
 * endpoint directory (tp_endpoint_dir) from before it looks at the process until it is done, and
 * the one that finds it taken refuses at once. */
int ij_inject(long pid, const char *tracer_path, const ij_opts *o, ij_report *r, err_msg *err);

/* Returned by ij_detach when the process has no tracer, or one that does not trace. */
#define IJ_NOT_TRACING 1

/* Stops the tracer in process pid and waits (o->start_ms at most) until its threads have ended and
 * its endpoint is gone. 0, IJ_NOT_TRACING, or a negative code as for ij_inject. */
int ij_detach(long pid, const ij_opts *o, ij_report *r, err_msg *err);

/* The tracer library beside this program (installed: the tracer directory the build compiled in,
 * relative to the binary's; build tree: tracer/) or named by SYNCTOP_TRACER, as an absolute path; 0 or ERR_NOENT. */
int ij_find_tracer(char *out, size_t outlen);

/* Whether this build can inject at all (x86-64 or aarch64 Linux). */
int ij_supported(void);

#endif
