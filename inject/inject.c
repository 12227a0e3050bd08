/*
 * Loading the tracer into a running process with ptrace (inject.h). Three parts: the session (stop
 * one thread at a safe point, save everything, call functions in it, put everything back, let it
 * go), the architecture's registers (x86-64 and aarch64), and ij_inject, which finds the
 * functions in the process's own libraries and makes the calls. The aarch64 part has been
 * cross-compiled (tests/cross/check_arm64.sh) but not yet run on an aarch64 machine.
 *
 * A session is driven from one thread and every wait in it is a poll of waitpid bounded by a
 * deadline, so a process that never stops, never returns from a call or exits halfway is noticed.
 */
#include "inject.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dlfcn.h>

#include "inject_elf.h"
#include "inject_proc.h"
#include "io.h"

#define SCRATCH_BYTES 8192 /* the strings and results of the calls, on the thread's stack */
#define BELOW_SP 256       /* the red zone (128 bytes on x86-64, none on aarch64) and a margin */
#define EXT_MAX (64 * 1024) /* room for the largest XSAVE area (AMX included), or for the FPSIMD and
                               SVE states (2048-bit vectors: under 10 KiB) */

/* ---- the architecture ---- */

#if defined(__x86_64__)
#include <sys/user.h>

#define IJ_SUPPORTED 1
#define IJ_MACHINE EM_X86_64
typedef struct user_regs_struct ij_regs;

static int regs_get(pid_t tid, ij_regs *r) { return (int)ptrace(PTRACE_GETREGS, tid, NULL, r); }
static int regs_set(pid_t tid, const ij_regs *r) { return (int)ptrace(PTRACE_SETREGS, tid, NULL, r); }
static uint64_t regs_pc(const ij_regs *r) { return r->rip; }
static uint64_t regs_sp(const ij_regs *r) { return r->rsp; }
static uint64_t regs_ret(const ij_regs *r) { return r->rax; }
/* The system call the thread was stopped in, or -1. */
static long regs_syscall(const ij_regs *r) { return (long)r->orig_rax; }

/* fn(args...) with the return address already at sp: at entry the stack is 8 bytes off 16-byte
 * alignment, as after a call instruction. orig_rax = -1: the kernel must not restart the system
 * call the thread was stopped in, on our call's behalf (the saved registers restart it at the end). */
static void regs_call(ij_regs *r, uint64_t fn, const uint64_t *a, uint64_t sp) {
    r->rdi = a[0];
    r->rsi = a[1];
    r->rdx = a[2];
    r->rcx = a[3];
    r->r8 = a[4];
    r->r9 = a[5];
    r->rax = 0;
    r->orig_rax = (unsigned long long)-1;
    r->rip = fn;
    r->rsp = sp;
    r->eflags &= ~0x400ull; /* the direction flag, clear at every call */
}

/* The whole XSAVE state (x87, SSE, AVX, AVX-512...), else the FXSAVE one. */
static int ext_get(pid_t tid, void *buf, size_t *len) {
    struct iovec iov = {buf, EXT_MAX};
    if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &iov) == 0) {
        *len = iov.iov_len;
        return 1;
    }
    if (ptrace(PTRACE_GETFPREGS, tid, NULL, buf) == 0) {
        *len = sizeof(struct user_fpregs_struct);
        return 2;
    }
    return -1;
}

static int ext_set(pid_t tid, int kind, void *buf, size_t len) {
    if (kind == 1) {
        struct iovec iov = {buf, len};
        return (int)ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE, &iov);
    }
    return (int)ptrace(PTRACE_SETFPREGS, tid, NULL, buf);
}

#ifndef NT_X86_SHSTK
#define NT_X86_SHSTK 0x204
#endif
/* Whether the thread runs with a shadow stack (CET): the kernel offers its pointer then only. A
 * call made here would return through a return address the shadow stack does not hold, and fault
 * somewhere other than at address 0. */
static int shadow_stack(pid_t tid) {
    uint64_t ssp = 0;
    struct iovec iov = {&ssp, sizeof ssp};
    return ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_SHSTK, &iov) == 0;
}

/* Whether the thread's extended state forbids calls now: never on x86-64. */
static int ext_busy(pid_t tid, err_msg *why) {
    (void)tid;
    (void)why;
    return 0;
}
#elif defined(__aarch64__)
#include <asm/ptrace.h>

#define IJ_SUPPORTED 1
#define IJ_MACHINE EM_AARCH64

#ifndef NT_ARM_SYSTEM_CALL
#define NT_ARM_SYSTEM_CALL 0x404
#endif
#ifndef NT_ARM_SVE
#define NT_ARM_SVE 0x405
#endif
#ifndef NT_ARM_SSVE
#define NT_ARM_SSVE 0x40b
#endif
#ifndef NT_ARM_ZA
#define NT_ARM_ZA 0x40c
#endif
#define A64_SVC_0 0xd4000001u     /* svc #0, the system call instruction */
#define A64_PSTATE_BTYPE 0xc00ull /* PSTATE.BTYPE: the kind of the last indirect branch (BTI) */
#define A64_VEC_REGS_SVE 1u       /* the header's flags: register data in SVE format (SVE_PT_REGS_SVE) */
#define EXT_SVE_AT 1024           /* where the SVE state lies in the extended-state buffer, after the FPSIMD */

/* The header of the NT_ARM_SVE, NT_ARM_SSVE and NT_ARM_ZA register sets (struct user_sve_header,
 * struct user_za_header); those sets are read and written in multiples of 16 bytes. */
typedef struct a64_vec_header {
    uint32_t size;     /* the bytes of the set that mean something, this header included */
    uint32_t max_size;
    uint16_t vl, max_vl, flags, reserved;
} a64_vec_header;
_Static_assert(sizeof(a64_vec_header) == 16, "the kernel's vector register set header is 16 bytes");

/*
 * The registers of the thread (NT_PRSTATUS) and the kernel's record of the system call it is in
 * (NT_ARM_SYSTEM_CALL, x86-64's orig_rax).
 *
 * System call restart on arm64 differs from x86-64. The kernel's do_signal
 * (arch/arm64/kernel/signal.c; arch_do_signal_or_restart in later kernels, the same steps) first
 * forgets the system call (syscallno = -1) and, for a call that returned -ERESTARTSYS,
 * -ERESTARTNOINTR, -ERESTARTNOHAND or -ERESTART_RESTARTBLOCK, puts its first argument back in x0
 * (orig_x0) and the pc back on the svc instruction; only then does it look for a signal, where
 * ptrace stops the thread. So at every stop the session sees, syscallno reads -1 and the registers
 * already say "execute svc again": putting them back at the end restarts the call by executing that
 * svc. CRIU's aarch64 infection code relies on the same and saves only NT_PRSTATUS and NT_PRFPREG,
 * where its x86 code rewinds ax and ip itself. After the stop, do_signal changes the restart to
 * restart_syscall (x8) only when the pc is still on that svc, which it is not once a call was set
 * up: an interrupted -ERESTART_RESTARTBLOCK call (a relative nanosleep or clock_nanosleep, a futex
 * wait with a relative timeout) is therefore started again with its original arguments, waiting its
 * whole timeout again, where x86-64 resumes it through restart_syscall. Calls that keep their
 * remaining time in their arguments (ppoll, pselect6) or take an absolute time lose nothing;
 * epoll_pwait and the like return EINTR, as on x86-64.
 *
 * syscallno is still written -1 before each call and its saved value written back at the end,
 * as orig_rax is, so that no stop of another kind could make the kernel restart a system call on a
 * call's behalf. Which system call the thread is in (regs_syscall) is read from the code: x8 when
 * the instruction at the pc (a call to be restarted, or about to be made) or just before it (a call
 * that returned) is svc #0.
 */
typedef struct ij_regs {
    struct user_pt_regs gp; /* x0-x30, sp, pc, pstate */
    int syscallno;          /* NT_ARM_SYSTEM_CALL; -1: none */
    int have_syscallno;     /* the kernel offers NT_ARM_SYSTEM_CALL */
    long in_syscall;        /* the system call the thread is in or at, -1: none */
} ij_regs;

/* Whether the instruction at pc or the one before it is svc #0. */
static int a64_at_svc(pid_t tid, uint64_t pc) {
    if (pc < 4 || (pc & 3) != 0)
        return 0;
    errno = 0;
    long w = ptrace(PTRACE_PEEKTEXT, tid, (void *)(uintptr_t)(pc - 4), NULL);
    if (errno == 0) /* little-endian: the instruction at pc - 4 in the low half, at pc in the high */
        return (uint32_t)(unsigned long)w == A64_SVC_0 || (uint32_t)((unsigned long)w >> 32) == A64_SVC_0;
    errno = 0; /* pc - 4 lies on a page that is not mapped */
    w = ptrace(PTRACE_PEEKTEXT, tid, (void *)(uintptr_t)pc, NULL);
    return errno == 0 && (uint32_t)(unsigned long)w == A64_SVC_0;
}

static int regs_get(pid_t tid, ij_regs *r) {
    struct iovec gp = {&r->gp, sizeof r->gp};
    if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_PRSTATUS, &gp) != 0 || gp.iov_len != sizeof r->gp)
        return -1;
    struct iovec nr = {&r->syscallno, sizeof r->syscallno};
    r->have_syscallno = ptrace(PTRACE_GETREGSET, tid, (void *)NT_ARM_SYSTEM_CALL, &nr) == 0;
    if (!r->have_syscallno)
        r->syscallno = -1;
    if (r->syscallno >= 0)
        r->in_syscall = r->syscallno;
    else
        r->in_syscall = a64_at_svc(tid, r->gp.pc) ? (long)r->gp.regs[8] : -1;
    return 0;
}

static int regs_set(pid_t tid, const ij_regs *r) {
    struct iovec gp = {(void *)&r->gp, sizeof r->gp};
    if (ptrace(PTRACE_SETREGSET, tid, (void *)NT_PRSTATUS, &gp) != 0)
        return -1;
    if (!r->have_syscallno)
        return 0;
    int nr = r->syscallno;
    struct iovec iov = {&nr, sizeof nr};
    return (int)ptrace(PTRACE_SETREGSET, tid, (void *)NT_ARM_SYSTEM_CALL, &iov);
}

static uint64_t regs_pc(const ij_regs *r) { return r->gp.pc; }
static uint64_t regs_sp(const ij_regs *r) { return r->gp.sp; }
static uint64_t regs_ret(const ij_regs *r) { return r->gp.regs[0]; }
static long regs_syscall(const ij_regs *r) { return r->in_syscall; }

/* fn(args...) returning to address 0: the link register x30 is 0, so fn's ret branches to 0 and
 * the instruction fetch there faults with the pc at 0 (SIGSEGV), as on x86-64. A function signed
 * with pointer authentication signs and authenticates that 0 against the same sp, which gives 0
 * back. sp is 16-byte aligned, as the architecture checks at every use. PSTATE.BTYPE is cleared:
 * the pc is set here, not reached by a branch, so no landing-pad check is due at fn. A thread with
 * a Guarded Control Stack on (Linux 6.13 and later, when the C library turns it on) is not handled:
 * fn's ret finds the interrupted code's return address there instead of 0 and faults, which
 * wait_stop reports as a crash of the call, after which everything is put back. */
static void regs_call(ij_regs *r, uint64_t fn, const uint64_t *a, uint64_t sp) {
    for (int i = 0; i < 6; i++)
        r->gp.regs[i] = a[i];
    r->gp.regs[30] = 0;
    r->gp.sp = sp & ~15ull;
    r->gp.pc = fn;
    r->gp.pstate &= ~A64_PSTATE_BTYPE;
    r->syscallno = -1;
}

/* Whether the thread's SME state forbids calls now. The thread is stopped anywhere, not at a call
 * boundary where the SME ABI would have it out of streaming mode with ZA off or dormant: in
 * streaming mode much of the C library's FP/SIMD code would fault, and writing NT_ARM_SVE at the
 * end would take the thread out of it; a live ZA array (and ZT0) is not saved here, and a call may
 * turn it off (glibc's clone and setjmp do, from 2.41). The session tries another stop, as for a
 * thread busy in the C library; nothing of SME is written. */
static int ext_busy(pid_t tid, err_msg *why) {
    a64_vec_header h;
    struct iovec iov = {&h, sizeof h};
    if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_ARM_SSVE, &iov) == 0 && iov.iov_len >= sizeof h &&
        (h.flags & A64_VEC_REGS_SVE) != 0) {
        err_set(why, 0, "in SME streaming mode");
        return 1;
    }
    iov = (struct iovec){&h, sizeof h};
    if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_ARM_ZA, &iov) == 0 && iov.iov_len >= sizeof h &&
        h.size > sizeof h) {
        err_set(why, 0, "with SME's ZA array in use");
        return 1;
    }
    return 0;
}

#ifndef NT_ARM_GCS
#define NT_ARM_GCS 0x410
#endif
/* Whether the thread runs with a Guarded Control Stack (struct user_gcs: features_enabled,
 * features_locked, gcspr_el0; bit 0 of the first is PR_SHADOW_STACK_ENABLE). A call made here
 * would return through a return address the GCS does not hold, and fault somewhere other than at
 * address 0. */
static int shadow_stack(pid_t tid) {
    uint64_t gcs[3] = {0, 0, 0};
    struct iovec iov = {gcs, sizeof gcs};
    return ptrace(PTRACE_GETREGSET, tid, (void *)NT_ARM_GCS, &iov) == 0 && iov.iov_len >= sizeof gcs[0] &&
           (gcs[0] & 1) != 0;
}

/* The FPSIMD state (v0-v31, fpsr, fpcr: NT_PRFPREG) at the start of buf and, where the kernel
 * offers SVE, the SVE state (NT_ARM_SVE: the Z and P registers and FFR when the thread is in SVE
 * mode, the FPSIMD ones else) at EXT_SVE_AT. The C library's string functions may use SVE where
 * the CPU has it, so a call may change the upper parts of the Z registers and put the thread in SVE
 * mode: writing the saved SVE state back restores both. Kind: 1 FPSIMD, 3 FPSIMD and SVE. */
static int ext_get(pid_t tid, void *buf, size_t *len) {
    uint8_t *b = buf;
    struct iovec fp = {b, sizeof(struct user_fpsimd_state)};
    if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_PRFPREG, &fp) != 0 ||
        fp.iov_len != sizeof(struct user_fpsimd_state))
        return -1;
    *len = fp.iov_len;
    struct iovec sve = {b + EXT_SVE_AT, EXT_MAX - EXT_SVE_AT};
    if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_ARM_SVE, &sve) != 0)
        return errno == EINVAL || errno == ENODEV ? 1 : -1; /* EINVAL: no SVE in the CPU or the kernel */
    a64_vec_header h;
    if (sve.iov_len < sizeof h)
        return -1;
    memcpy(&h, b + EXT_SVE_AT, sizeof h);
    size_t n = ((size_t)h.size + 15) & ~(size_t)15;
    if (n < sizeof h || n > sve.iov_len)
        return -1; /* more than the buffer holds (not with the architecture's 2048-bit vectors) */
    *len = EXT_SVE_AT + n;
    return 3;
}

/* The FPSIMD state, then the SVE state, which holds the FPSIMD registers too and sets the mode. */
static int ext_set(pid_t tid, int kind, void *buf, size_t len) {
    uint8_t *b = buf;
    struct iovec fp = {b, sizeof(struct user_fpsimd_state)};
    int rc = (int)ptrace(PTRACE_SETREGSET, tid, (void *)NT_PRFPREG, &fp);
    if ((kind & 2) != 0 && len > EXT_SVE_AT) {
        struct iovec sve = {b + EXT_SVE_AT, len - EXT_SVE_AT};
        if (ptrace(PTRACE_SETREGSET, tid, (void *)NT_ARM_SVE, &sve) != 0)
            rc = -1;
    }
    return rc;
}
#else
#define IJ_SUPPORTED 0
#endif

int ij_supported(void) { return IJ_SUPPORTED; }

/* ---- finding the tracer ---- */

int ij_find_tracer(char *out, size_t outlen) {
    const char *env = getenv("SYNCTOP_TRACER");
    if (env != NULL && *env != '\0')
        return realpath(env, out) != NULL && strlen(out) < outlen && access(out, R_OK) == 0 ? 0 : ERR_NOENT;
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return ERR_NOENT;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash == NULL)
        return ERR_NOENT;
    *slash = '\0';
    /* Installed: the directory the build compiled in, relative to the binary's (cmake --install,
     * the Debian package and the wheel keep it); in a build tree: tracer/ beside the binary. */
    static const char *const rel[] = {SYNCTOP_TRACER_RELDIR "/libsynctop-tracer.so", "tracer/libsynctop-tracer.so"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char path[PATH_MAX + 64], real[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", self, rel[i]);
        if (access(path, R_OK) == 0 && realpath(path, real) != NULL && strlen(real) < outlen) {
            snprintf(out, outlen, "%s", real);
            return 0;
        }
    }
    return ERR_NOENT;
}

/* ---- probing ---- */

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int is_tracer_file(const char *path) { return strcmp(base_name(path), "libsynctop-tracer.so") == 0; }

/* Reads a /proc file that holds NUL-separated strings; returns its length. */
static size_t read_proc(const char *path, char *buf, size_t len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t got = cm_read_full(fd, buf, len, -1);
    close(fd);
    return got > 0 ? (size_t)got : 0;
}

int ij_probe(long pid, ij_probe_info *p, err_msg *err) {
    memset(p, 0, sizeof *p);
    ij_access acc;
    char tracer_name[64], user[64]; /* acc points into them */
    int rc = ij_access_gather(pid, &acc, tracer_name, sizeof tracer_name, user, sizeof user, err);
    if (rc != 0)
        return rc;
    /* Another user's process: its mappings and environment are not ours to read, and what could not
     * be read must not be taken for "no libcuda" or "no tracer". */
    if ((rc = ij_access_check_owner(&acc, err)) != 0)
        return rc;
    const ij_status st = acc.target;
    snprintf(p->name, sizeof p->name, "%s", st.name);
    p->seccomp_filters = st.seccomp == 2 ? (st.seccomp_filters > 0 ? st.seccomp_filters : 1) : 0;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
    size_t n = read_proc(path, p->cmdline, sizeof p->cmdline - 1);
    while (n > 0 && p->cmdline[n - 1] == '\0')
        n--;
    for (size_t i = 0; i < n; i++)
        if (p->cmdline[i] == '\0')
            p->cmdline[i] = ' ';
    p->cmdline[n] = '\0';
    ij_map *maps = NULL;
    size_t nm = 0;
    err_msg why;
    if ((rc = ij_maps_read(pid, &maps, &nm, &why)) == ERR_PERM)
        return err_set(err, rc,
                       "%s: the kernel does not let you look into process %ld (%s), so synctop cannot tell what "
                       "it has loaded (it made itself undumpable, or a security module forbids it; nothing was "
                       "done)",
                       why.msg, pid, st.name);
    if (rc != 0)
        return err_set(err, rc, "process %ld: %s", pid, why.msg);
    for (size_t i = 0; i < nm; i++) {
        p->tracer_loaded |= is_tracer_file(maps[i].path);
        p->cuda_loaded |= strncmp(base_name(maps[i].path), "libcuda.so", 10) == 0;
    }
    free(maps);
    /* The environment the program started with (what the driver reads at CUDA init). */
    const size_t env_max = 1 << 20;
    char *env = malloc(env_max);
    if (env == NULL)
        return 0;
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    size_t len = read_proc(path, env, env_max - 1);
    env[len] = '\0';
    for (size_t i = 0; i < len; i += strlen(env + i) + 1)
        if (strncmp(env + i, "CUDA_INJECTION64_PATH=", 22) == 0 && is_tracer_file(env + i + 22))
            p->tracer_at_init = 1;
    free(env);
    return 0;
}

#if IJ_SUPPORTED

/* ---- a session: one thread, stopped, called into, put back ---- */

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}


typedef struct sess {
    pid_t tid;
    const ij_opts *o;
    ij_report *rep;
    err_msg *err;
    int seized, stopped, gone;
    uint64_t pause_t0; /* when the thread was stopped for the program: 0 while it runs its own code */
    ij_regs saved;
    int have_regs;
    uint8_t *ext;
    size_t ext_len;
    int ext_kind;
    uint64_t lo, top, next; /* the scratch area [lo, top) on its stack, and its first free byte */
    uint8_t orig[SCRATCH_BYTES + 64];
    int have_orig;
    int fault_sig;
    uint64_t fault_addr;
    uint64_t errno_at; /* the thread's errno, put back at the end (0: unknown) */
    int32_t saved_errno;
} sess;

static void pause_end(sess *s) {
    if (s->pause_t0 == 0)
        return;
    uint64_t d = now_ns() - s->pause_t0;
    s->pause_t0 = 0;
    s->rep->total_pause_ns += d;
    if (d > s->rep->longest_pause_ns)
        s->rep->longest_pause_ns = d;
}

static int mem_write(pid_t tid, uint64_t addr, const void *data, size_t len) {
    struct iovec local = {(void *)data, len}, remote = {(void *)(uintptr_t)addr, len};
    if (process_vm_writev(tid, &local, 1, &remote, 1, 0) == (ssize_t)len)
        return 0;
    /* word by word through ptrace, which also writes where process_vm_writev may not */
    const uint8_t *p = data;
    for (size_t off = 0; off < len; off += sizeof(long)) {
        uint64_t a = addr + off;
        long word;
        size_t n = len - off < sizeof word ? len - off : sizeof word;
        if (n < sizeof word) {
            errno = 0;
            word = ptrace(PTRACE_PEEKDATA, tid, (void *)(uintptr_t)a, NULL);
            if (errno != 0)
                return -1;
        }
        memcpy(&word, p + off, n);
        if (ptrace(PTRACE_POKEDATA, tid, (void *)(uintptr_t)a, (void *)word) != 0)
            return -1;
    }
    return 0;
}

static int mem_read(pid_t tid, uint64_t addr, void *data, size_t len) {
    struct iovec local = {data, len}, remote = {(void *)(uintptr_t)addr, len};
    if (process_vm_readv(tid, &local, 1, &remote, 1, 0) == (ssize_t)len)
        return 0;
    uint8_t *p = data;
    for (size_t off = 0; off < len; off += sizeof(long)) {
        errno = 0;
        long word = ptrace(PTRACE_PEEKDATA, tid, (void *)(uintptr_t)(addr + off), NULL);
        if (errno != 0)
            return -1;
        memcpy(p + off, &word, len - off < sizeof word ? len - off : sizeof word);
    }
    return 0;
}

/* The thread's state in /proc: 'Z' or 'X' (or gone) once it has exited. */
static int thread_gone(pid_t tid) {
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 1;
    buf[n] = '\0';
    const char *close_paren = strrchr(buf, ')');
    char state = close_paren != NULL ? close_paren[2] : '?';
    return state == 'Z' || state == 'X';
}

/* Every C library of a (where the functions to call were found) is still mapped at the same place
 * in b: the process did not exec meanwhile. Libraries loaded since do not matter. */
static int same_libraries(const ij_map *a, size_t na, const ij_map *b, size_t nb) {
    for (size_t i = 0; i < na; i++) {
        if (a[i].offset != 0 || !ij_is_system_lib(a[i].path))
            continue;
        int found = 0;
        for (size_t j = 0; j < nb && !found; j++)
            found = b[j].start == a[i].start && b[j].inode == a[i].inode && b[j].offset == 0 &&
                    strcmp(a[i].path, b[j].path) == 0;
        if (!found)
            return 0;
    }
    return 1;
}

static int gone(sess *s, const char *when) {
    s->gone = 1;
    s->stopped = 0;
    s->pause_t0 = 0;
    return err_set(s->err, ERR_NOENT, "process %d exited %s", (int)s->tid, when);
}

enum { STOP_INTERRUPT = 1, STOP_TRAP, STOP_FAULT };

static int cont(sess *s, int sig) {
    if (ptrace(PTRACE_CONT, s->tid, NULL, (void *)(intptr_t)sig) != 0)
        return -1;
    s->stopped = 0;
    return 0;
}

/* Waits for the thread to stop: at PTRACE_INTERRUPT's stop (want_trap 0), or, running a call, at
 * its return to address 0 (want_trap 1) or at a fault inside the call. Any other signal is passed
 * on to the program as it would have been, and a group stop is let through. 0 with *what, ERR_AGAIN
 * at the deadline, ERR_NOENT when the process exited. */
static int wait_stop(sess *s, int want_trap, int timeout_ms, int *what) {
    uint64_t t0 = now_ns(), deadline = t0 + (uint64_t)timeout_ms * 1000000ull, last_check = t0;
    for (;;) {
        int status = 0;
        pid_t r = waitpid(s->tid, &status, __WALL | WNOHANG);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return gone(s, "during the injection");
        uint64_t t = now_ns();
        if (r == 0) {
            if (t >= deadline)
                return ERR_AGAIN;
            if (t - last_check > 10000000ull) {
                last_check = t;
                if (thread_gone(s->tid))
                    return gone(s, "during the injection");
            }
            /* SIGCHLD (held by ij_inject) says the thread stopped; the cap covers a SIGCHLD that
             * another thread of this process took. */
            uint64_t nap = deadline - t < 1000000 ? deadline - t : 1000000;
            struct timespec ts = {0, (long)nap};
            sigset_t chld;
            sigemptyset(&chld);
            sigaddset(&chld, SIGCHLD);
            sigtimedwait(&chld, NULL, &ts);
            continue;
        }
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
            s->seized = 0;
            return gone(s, "during the injection");
        }
        if (!WIFSTOPPED(status))
            continue;
        s->stopped = 1;
        int sig = WSTOPSIG(status), event = status >> 16;
        if (event == PTRACE_EVENT_EXIT) {
            pause_end(s);
            ptrace(PTRACE_DETACH, s->tid, NULL, NULL);
            s->seized = 0;
            return gone(s, "during the injection");
        }
        if (event == PTRACE_EVENT_STOP) {
            if (sig == SIGTRAP && !want_trap) {
                *what = STOP_INTERRUPT;
                return 0;
            }
            if (cont(s, 0) != 0)
                return gone(s, "during the injection");
            continue;
        }
        if (want_trap) {
            siginfo_t si;
            ij_regs regs;
            memset(&si, 0, sizeof si);
            if (ptrace(PTRACE_GETSIGINFO, s->tid, NULL, &si) == 0 && regs_get(s->tid, &regs) == 0) {
                if (sig == SIGSEGV && regs_pc(&regs) == 0) {
                    *what = STOP_TRAP;
                    return 0;
                }
                if ((sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE) && si.si_code > 0) {
                    s->fault_sig = sig;
                    s->fault_addr = regs_pc(&regs);
                    *what = STOP_FAULT;
                    return 0;
                }
            }
        }
        if (cont(s, sig) != 0)
            return gone(s, "during the injection");
    }
}

/* Stops the thread where it is; with no deadline left, gives up. */
static int interrupt(sess *s, int timeout_ms) {
    if (ptrace(PTRACE_INTERRUPT, s->tid, NULL, NULL) != 0)
        return gone(s, "during the injection");
    int what = 0;
    int rc = wait_stop(s, 0, timeout_ms, &what);
    if (rc == 0)
        s->pause_t0 = s->pause_t0 ? s->pause_t0 : now_ns();
    return rc;
}

/* Puts back the scratch bytes, the registers and the extended state, and lets the thread go. */
static void sess_end(sess *s) {
    if (!s->seized || s->gone)
        return;
    if (!s->stopped && interrupt(s, 1000) != 0) {
        if (!s->gone) /* the thread cannot be stopped: leave it be rather than wait for ever */
            ptrace(PTRACE_DETACH, s->tid, NULL, NULL);
        s->seized = 0;
        return;
    }
    if (s->errno_at != 0)
        mem_write(s->tid, s->errno_at, &s->saved_errno, sizeof s->saved_errno);
    if (s->have_orig)
        mem_write(s->tid, s->lo, s->orig, (size_t)(s->top - s->lo));
    if (s->ext_kind > 0)
        ext_set(s->tid, s->ext_kind, s->ext, s->ext_len);
    if (s->have_regs)
        regs_set(s->tid, &s->saved);
    ptrace(PTRACE_DETACH, s->tid, NULL, NULL);
    pause_end(s);
    s->seized = 0;
    s->stopped = 0;
}

/* Why PTRACE_SEIZE was refused: someone who began tracing since the checks (a debugger, another
 * synctop that does not share our lock: another user's, root's), else what the kernel checks. */
static int seize_refused(sess *s, const ij_access *acc) {
    ij_access now;
    char tracer_name[64], user[64];
    err_msg e2;
    int rc;
    if (ij_access_gather(s->tid, &now, tracer_name, sizeof tracer_name, user, sizeof user, &e2) == 0 &&
        now.target.tracer_pid != 0 && (rc = ij_access_precheck(&now, s->err)) != 0)
        return rc;
    return ij_access_explain_eperm(acc, s->err);
}

/* Attaches and stops the thread at a safe point (ij_safe_point, judged on the mappings read while
 * it is stopped), checks that the libraries are still those of maps (where the functions to call
 * were found), then saves what a call changes. */
static int sess_begin(sess *s, const ij_access *acc, const ij_map *maps, size_t nm) {
    if (ptrace(PTRACE_SEIZE, s->tid, NULL, (void *)(uintptr_t)PTRACE_O_TRACEEXIT) != 0) {
        if (errno == ESRCH || thread_gone(s->tid))
            return gone(s, "before it could be traced");
        if (errno == EPERM)
            return seize_refused(s, acc);
        return err_set(s->err, ERR_PERM, "cannot trace process %d: %s", (int)s->tid, strerror(errno));
    }
    s->seized = 1;
    uint64_t deadline = now_ns() + (uint64_t)s->o->safe_point_ms * 1000000ull;
    err_msg why = {{0}};
    ij_map *now = NULL;
    size_t nnow = 0;
    for (unsigned tries = 0;; tries++) {
        int rc = interrupt(s, s->o->call_ms);
        if (rc == 0 && regs_get(s->tid, &s->saved) != 0)
            rc = gone(s, "while it was stopped");
        free(now); /* the mappings of the try before */
        now = NULL;
        if (rc == ERR_AGAIN)
            return err_set(s->err, ERR_AGAIN, "process %d did not stop within %d ms", (int)s->tid, s->o->call_ms);
        if (rc != 0)
            return rc;
        s->rep->stops++;
        if (ij_maps_read(s->tid, &now, &nnow, s->err) != 0)
            return gone(s, "while it was stopped");
        if (ij_safe_point(now, nnow, regs_pc(&s->saved), regs_syscall(&s->saved), &why) && !ext_busy(s->tid, &why))
            break;
        pause_end(s);
        if (cont(s, 0) != 0) {
            free(now);
            return gone(s, "while it was stopped");
        }
        if (now_ns() >= deadline) {
            free(now);
            return err_set(s->err, ERR_AGAIN,
                           "process %d's main thread was busy inside the C library each time it was stopped "
                           "(%u times in %d ms; last %s): loading a library then could deadlock it; try again",
                           (int)s->tid, tries + 1, s->o->safe_point_ms, why.msg);
        }
        sleep_ns(1000000ull + (tries % 4) * 500000ull);
    }
    int same = same_libraries(maps, nm, now, nnow);
    free(now);
    if (!same)
        return err_set(s->err, ERR_AGAIN,
                       "process %d changed its program or its C library while synctop looked at it (it ran "
                       "exec?): try again",
                       (int)s->tid);
    if (shadow_stack(s->tid))
        return err_set(s->err, ERR_UNSUPPORTED,
                       "process %d runs with a shadow stack (x86 CET or arm64 GCS), which synctop cannot call "
                       "into: start the program under synctop run (or with CUDA_INJECTION64_PATH) instead",
                       (int)s->tid);
    s->have_regs = 1;
    if (s->rep->held_at_ns == 0) {
        s->rep->held_at_ns = s->pause_t0;
        s->rep->held_in_syscall = regs_syscall(&s->saved) >= 0 ? regs_syscall(&s->saved) : -1;
    }
    s->ext = malloc(EXT_MAX);
    if (s->ext == NULL)
        return err_set(s->err, ERR_NOMEM, "out of memory");
    s->ext_kind = ext_get(s->tid, s->ext, &s->ext_len);
    if (s->ext_kind < 0)
        return err_set(s->err, ERR_IO, "cannot read process %d's floating-point registers", (int)s->tid);
    s->top = (regs_sp(&s->saved) - BELOW_SP) & ~15ull;
    s->lo = s->top - SCRATCH_BYTES;
    if (mem_read(s->tid, s->lo, s->orig, SCRATCH_BYTES) != 0)
        return err_set(s->err, ERR_IO, "cannot read process %d's stack", (int)s->tid);
    s->have_orig = 1;
    s->next = s->lo + 16; /* [lo + 8, lo + 16): the return address of every call */
    if (s->o->hook != NULL)
        s->o->hook(s->o->hook_ctx, IJ_STEP_STOPPED, (long)s->tid);
    return 0;
}

/* Copies data into the scratch area; its address in the process, or 0 when it is full. */
static uint64_t put(sess *s, const void *data, size_t len) {
    uint64_t at = (s->next + 15) & ~15ull;
    if (at + len > s->top || mem_write(s->tid, at, data, len) != 0)
        return 0;
    s->next = at + len;
    return at;
}

/* Calls fn(a[0..5]) on the stopped thread and waits, bounded, for it to return; its return value in
 * *ret. On a timeout or a fault the thread is stopped again where it is (sess_end puts it back). */
static int call(sess *s, const char *name, uint64_t fn, const uint64_t a[6], int timeout_ms, uint64_t *ret) {
    static const uint64_t zero = 0;
    uint64_t sp = s->lo + 8;
    if (mem_write(s->tid, sp, &zero, sizeof zero) != 0)
        return err_set(s->err, ERR_IO, "cannot write to process %d's stack", (int)s->tid);
    ij_regs r = s->saved;
    regs_call(&r, fn, a, sp);
    if (regs_set(s->tid, &r) != 0 || cont(s, 0) != 0)
        return gone(s, "during the injection");
    int what = 0;
    int rc = wait_stop(s, 1, timeout_ms, &what);
    if (rc == ERR_AGAIN) {
        if (interrupt(s, 1000) != 0 && s->gone)
            return gone(s, "during the injection");
        return err_set(s->err, ERR_AGAIN,
                       "%s did not return within %d ms in process %d (a lock held by the interrupted code?); "
                       "the call was abandoned and the thread put back where it was, but the program may now "
                       "hang in its next %s",
                       name, timeout_ms, (int)s->tid, name);
    }
    if (rc != 0)
        return rc;
    if (what == STOP_FAULT)
        return err_set(s->err, ERR_IO,
                       "%s crashed in process %d (signal %d at 0x%llx); the signal was withheld and the thread "
                       "put back where it was",
                       name, (int)s->tid, s->fault_sig, (unsigned long long)s->fault_addr);
    if (regs_get(s->tid, &r) != 0)
        return gone(s, "during the injection");
    *ret = regs_ret(&r);
    return 0;
}

/* Finds the thread's errno (__errno_location) and keeps its value for sess_end. */
static int save_errno(sess *s, uint64_t errno_location) {
    uint64_t a[6] = {0}, at = 0;
    if (errno_location == 0)
        return 0;
    int rc = call(s, "__errno_location", errno_location, a, s->o->call_ms, &at);
    if (rc == 0 && at != 0 && mem_read(s->tid, at, &s->saved_errno, sizeof s->saved_errno) == 0)
        s->errno_at = at;
    return rc;
}

/* Reads a NUL-terminated string of the process (dlerror's). */
static void read_string(pid_t tid, uint64_t addr, char *out, size_t len) {
    out[0] = '\0';
    for (size_t got = 0; addr != 0 && got + 1 < len;) {
        size_t chunk = len - 1 - got < 64 ? len - 1 - got : 64;
        if (mem_read(tid, addr + got, out + got, chunk) != 0)
            break;
        out[got + chunk] = '\0';
        if (memchr(out + got, '\0', chunk) != NULL)
            return;
        got += chunk;
    }
}

/* ---- the functions to call, in the process's own libraries ---- */

enum { F_DLOPEN, F_DLERROR, F_ERRNO, F_N };
static const char *const fn_names[F_N] = {"dlopen", "dlerror", "__errno_location"};

/* The load bias of the file of mapping m in the process, from the file's own ELF. */
static int file_bias(const ij_map *maps, size_t nm, const ij_map *m, const ij_elf *e, uint64_t *bias) {
    const ij_map *first = ij_maps_file_start(maps, nm, m);
    uint64_t vaddr;
    if (first == NULL || ij_elf_load_vaddr(e, 0, (uint64_t)sysconf(_SC_PAGESIZE), &vaddr) != 0)
        return -1;
    *bias = first->start - vaddr;
    return 0;
}

/* The file a mapping names, as this process reaches it (through the process's root: it may live
 * in another mount namespace), checked to be the very file mapped (same device and inode). */
static int mapped_file_path(long pid, const ij_map *m, char *out, size_t len) {
    snprintf(out, len, "/proc/%ld/root%s", pid, m->path);
    struct stat st;
    return stat(out, &st) == 0 && st.st_ino == m->inode && major(st.st_dev) == m->dev_major &&
                   minor(st.st_dev) == m->dev_minor
               ? 0
               : -1;
}

/* The address of each function in fn_names, 0 where none was found; dlopen must be there when
 * need_dlopen. */
static int find_functions(long pid, const ij_map *maps, size_t nm, uint64_t addr[F_N], int need_dlopen,
                          err_msg *err) {
    memset(addr, 0, F_N * sizeof addr[0]);
    int libs = 0;
    for (size_t i = 0; i < nm; i++) {
        const ij_map *m = &maps[i];
        if (m->offset != 0 || !ij_is_system_lib(m->path))
            continue;
        libs++;
        char path[PATH_MAX + 64];
        if (mapped_file_path(pid, m, path, sizeof path) != 0)
            return err_set(err, ERR_IO,
                           "%s, mapped in process %ld, is no longer the file on disk (the C library was upgraded "
                           "since the program started?): its functions cannot be found; restart the program "
                           "under `synctop run`",
                           m->path, pid);
        err_msg e2;
        ij_elf *e = ij_elf_open(path, &e2);
        if (e == NULL)
            return err_set(err, ERR_IO, "%s", e2.msg);
        uint64_t bias;
        if (ij_elf_machine(e) != IJ_MACHINE || file_bias(maps, nm, m, e, &bias) != 0) {
            ij_elf_close(&e);
            continue;
        }
        for (int f = 0; f < F_N; f++) {
            uint64_t v;
            if (addr[f] == 0 && ij_elf_symbol(e, fn_names[f], &v) == 0)
                addr[f] = bias + v;
        }
        ij_elf_close(&e);
    }
    if (need_dlopen && addr[F_DLOPEN] == 0)
        return err_set(err, libs == 0 ? ERR_AGAIN : ERR_UNSUPPORTED,
                       libs == 0 ? "process %ld has not loaded its C library yet (it is starting up): try again "
                                   "in a moment"
                                 : "process %ld's C library has no dlopen that synctop can find (an older glibc "
                                   "whose libdl is not loaded?): nothing can be loaded into it",
                       pid);
    return 0;
}

/* ---- the injection ---- */

static int check_target(long pid, const char *tracer, ij_access *acc, char *tracer_name, size_t tn_len, char *user,
                        size_t user_len, err_msg *err) {
    int rc = ij_access_gather(pid, acc, tracer_name, tn_len, user, user_len, err);
    if (rc != 0)
        return err_set(err, rc, "no process %ld", pid);
    if ((rc = ij_access_precheck(acc, err)) != 0)
        return rc;
    char exe[64];
    unsigned cls = 0, machine = 0;
    int dynamic = 0;
    snprintf(exe, sizeof exe, "/proc/%ld/exe", pid);
    err_msg e2;
    if ((rc = ij_elf_ident(exe, &cls, &machine, &dynamic, &e2)) != 0) {
        if (thread_gone((pid_t)pid))
            return err_set(err, ERR_NOENT, "process %ld has exited", pid);
        if (rc == ERR_PERM) /* the kernel's ptrace access check refused: say why */
            return ij_access_explain_eperm(acc, err);
        return err_set(err, ERR_IO, "cannot read process %ld's program (%s)", pid, e2.msg);
    }
    if (cls != ELFCLASS64 || machine != IJ_MACHINE)
        return err_set(err, ERR_UNSUPPORTED,
                       "process %ld is not a 64-bit program of this machine's architecture (ELF class %u, machine "
                       "%u): synctop injects into 64-bit programs of its own architecture only",
                       pid, cls, machine);
    if (!dynamic)
        return err_set(err, ERR_UNSUPPORTED,
                       "process %ld is statically linked (its program has no dynamic loader): nothing can be "
                       "loaded into it",
                       pid);
    /* The tracer must be the same file inside the process's filesystem (a container has its own). */
    char inside[PATH_MAX + 64];
    struct stat mine, theirs;
    snprintf(inside, sizeof inside, "/proc/%ld/root%s", pid, tracer);
    if (stat(tracer, &mine) != 0)
        return err_set(err, ERR_NOENT, "cannot find the tracer %s: %s", tracer, strerror(errno));
    if (stat(inside, &theirs) != 0 || mine.st_ino != theirs.st_ino || mine.st_dev != theirs.st_dev)
        return err_set(err, ERR_UNSUPPORTED,
                       "process %ld does not see the tracer at %s (it runs in another filesystem, a "
                       "container?): install synctop inside it, or start the program under `synctop run`",
                       pid, tracer);
    return 0;
}

/* The tracer's entry points as offsets in its file, and the address its first segment is linked
 * at: read from the file before the process is stopped. */
typedef struct tracer_layout {
    uint64_t vaddr0, start, stop, status;
} tracer_layout;

static int tracer_layout_read(const char *file, const char *shown, tracer_layout *tl, err_msg *err) {
    ij_elf *e = ij_elf_open(file, err);
    if (e == NULL)
        return ERR_IO;
    int rc = ij_elf_load_vaddr(e, 0, (uint64_t)sysconf(_SC_PAGESIZE), &tl->vaddr0);
    if (rc != 0)
        rc = err_set(err, ERR_IO, "%s: no loadable segment at offset 0", shown);
    else if (ij_elf_machine(e) != IJ_MACHINE)
        rc = err_set(err, ERR_UNSUPPORTED, "%s is not a library for this machine", shown);
    else if (ij_elf_symbol(e, "synctop_tracer_start", &tl->start) != 0 ||
             ij_elf_symbol(e, "synctop_tracer_stop", &tl->stop) != 0 ||
             ij_elf_symbol(e, "synctop_tracer_status", &tl->status) != 0)
        rc = err_set(err, ERR_UNSUPPORTED,
                     "%s has no synctop_tracer_start/stop: not synctop's tracer, or an older one that cannot "
                     "be started or stopped in a running process",
                     shown);
    ij_elf_close(&e);
    return rc;
}

/* The tracer mapped in the process (its offset-0 mapping), or NULL. */
static const ij_map *mapped_tracer(const ij_map *maps, size_t nm) {
    for (size_t i = 0; i < nm; i++)
        if (maps[i].offset == 0 && is_tracer_file(maps[i].path))
            return &maps[i];
    return NULL;
}

/* The layout of the tracer the process has mapped, read from the very file it mapped. */
static int mapped_layout(long pid, const ij_map *m, tracer_layout *tl, err_msg *err) {
    char path[PATH_MAX + 64];
    if (mapped_file_path(pid, m, path, sizeof path) != 0)
        return err_set(err, ERR_IO,
                       "the tracer mapped in process %ld (%s) is no longer the file on disk (synctop was rebuilt "
                       "or upgraded since it was loaded): it cannot be started or stopped from outside",
                       pid, m->path);
    return tracer_layout_read(path, m->path, tl, err);
}

/* The settings the tracer starts with (synctop/tracer.h): the process's own SYNCTOP_* variables
 * are for a start at launch, not this one. */
static void start_settings(const ij_opts *o, char *out, size_t len) {
    snprintf(out, len,
             "SYNCTOP_MODE=%s\nSYNCTOP_QUIET=1\nSYNCTOP_VERBOSE=0\nSYNCTOP_LISTEN=\nSYNCTOP_ENDPOINT=\n"
             "SYNCTOP_RECORD=\nSYNCTOP_CURVE_KEY=\nSYNCTOP_CURVE_CLIENTS=\nSYNCTOP_START_WAIT_MS=0\n",
             o->mode != NULL ? o->mode : "always");
}

/* The calls of the stop: errno saved, dlopen (when the tracer is not there yet), then
 * synctop_tracer_start, which returns at once (a thread of the tracer's starts it). */
static int load_and_start(sess *s, long pid, const char *tracer, const ij_map *mapped, const tracer_layout *tl,
                          const uint64_t fn[F_N], int *start_ret) {
    const int ms = s->o->call_ms;
    uint64_t a[6] = {0}, ret = 0;
    int rc;
    if ((rc = save_errno(s, fn[F_ERRNO])) != 0)
        return rc;
    if (mapped == NULL) {
        uint64_t path = put(s, tracer, strlen(tracer) + 1);
        if (path == 0)
            return err_set(s->err, ERR_IO, "cannot write to process %ld's stack", pid);
        a[0] = path;
        a[1] = RTLD_NOW | RTLD_LOCAL;
        uint64_t handle = 0;
        if ((rc = call(s, "dlopen", fn[F_DLOPEN], a, ms, &handle)) != 0)
            return rc;
        if (handle == 0) {
            char why[400] = "no reason given";
            uint64_t msg = 0;
            memset(a, 0, sizeof a);
            if (fn[F_DLERROR] != 0 && call(s, "dlerror", fn[F_DLERROR], a, ms, &msg) == 0 && msg != 0)
                read_string(s->tid, msg, why, sizeof why);
            return err_set(s->err, ERR_IO, "process %ld could not load the tracer: %s", pid, why);
        }
        s->rep->loaded = 1;
        if (s->o->hook != NULL)
            s->o->hook(s->o->hook_ctx, IJ_STEP_LOADED, pid);
    }
    /* Where the tracer now lies in the process. */
    ij_map *maps = NULL;
    size_t nm = 0;
    if ((rc = ij_maps_read(pid, &maps, &nm, s->err)) != 0)
        return rc;
    const ij_map *m = mapped_tracer(maps, nm);
    uint64_t base = m != NULL ? m->start - tl->vaddr0 : 0;
    free(maps);
    if (m == NULL)
        return err_set(s->err, ERR_IO, "the tracer loaded into process %ld is not in its mappings", pid);

    char settings[512];
    start_settings(s->o, settings, sizeof settings);
    uint64_t at = put(s, settings, strlen(settings) + 1);
    if (at == 0)
        return err_set(s->err, ERR_IO, "cannot write to process %ld's stack", pid);
    memset(a, 0, sizeof a);
    a[0] = at;
    if ((rc = call(s, "synctop_tracer_start", base + tl->start, a, ms, &ret)) != 0)
        return rc;
    *start_ret = (int32_t)ret;
    return 0;
}

/* Calls one of the tracer's entry points that take nothing (synctop_tracer_stop,
 * synctop_tracer_status) in a stop of its own; its return value in *ret. */
static int call_entry(long pid, const ij_access *acc, const ij_map *maps, size_t nm, const char *name,
                      uint64_t fn, const ij_opts *o, ij_report *r, err_msg *err, uint64_t *ret, char *text,
                      size_t text_len) {
    sess s = {.tid = (pid_t)pid, .o = o, .rep = r, .err = err};
    uint64_t a[6] = {0};
    int rc = sess_begin(&s, acc, maps, nm);
    if (rc == 0)
        rc = call(&s, name, fn, a, o->call_ms, ret);
    if (rc == 0 && text != NULL)
        read_string(s.tid, *ret, text, text_len);
    sess_end(&s);
    free(s.ext);
    return rc;
}

/* The tracer's threads in the process now (their names begin with "synctop-"). */
static int tracer_threads(long pid, int *starting) {
    long *tids = NULL;
    size_t n = 0;
    err_msg e;
    *starting = 0;
    if (ij_tasks_read(pid, &tids, &n, &e) != 0)
        return -1;
    int count = 0;
    for (size_t i = 0; i < n; i++) {
        char path[96], comm[32] = "";
        snprintf(path, sizeof path, "/proc/%ld/task/%ld/comm", pid, tids[i]);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t got = read(fd, comm, sizeof comm - 1);
        close(fd);
        comm[got > 0 ? got : 0] = '\0';
        if (strncmp(comm, "synctop-", 8) == 0) {
            count++;
            *starting += strncmp(comm, "synctop-start", 13) == 0;
        }
    }
    free(tids);
    return count;
}

/* Waits, the program running, until the tracer publishes and its starting thread has ended (the
 * socket answers before the start is done: a stop asked meanwhile would find nothing to stop), or
 * that thread has ended without publishing (it stepped aside), at most start_ms. 1 publishing, 0
 * not, or ERR_NOENT when the process exited. */
static int wait_started(long pid, const ij_opts *o, const char *endpoint, err_msg *err) {
    uint64_t deadline = now_ns() + (uint64_t)o->start_ms * 1000000ull;
    for (int round = 0;; round++) {
        int starting = 0;
        tracer_threads(pid, &starting);
        int live = tp_endpoint_is_live(endpoint) == 1;
        if (live && starting == 0) /* the starting thread names itself before it publishes */
            return 1;
        if (thread_gone((pid_t)pid))
            return err_set(err, ERR_NOENT, "process %ld exited after the tracer was loaded", pid);
        /* The starting thread may not be there yet in the first rounds. */
        if ((starting == 0 && round >= 50) || now_ns() >= deadline)
            return tp_endpoint_is_live(endpoint) == 1;
        sleep_ns(2000000);
    }
}

/* The process's mappings (*maps malloc'd) and, in r, its endpoint; 0 or a negative code. */
static int target_maps(long pid, ij_map **maps, size_t *nm, ij_report *r, err_msg *err) {
    int rc = ij_maps_read(pid, maps, nm, err);
    if (rc == 0 && (rc = tp_endpoint_for_pid(pid, r->endpoint, sizeof r->endpoint, err)) != 0) {
        free(*maps);
        *maps = NULL;
    }
    return rc;
}

static int inject(long pid, const char *tracer, const ij_opts *o, ij_report *r, err_msg *err) {
    ij_access acc;
    char tracer_name[64], user[64]; /* acc points into them */
    int rc = check_target(pid, tracer, &acc, tracer_name, sizeof tracer_name, user, sizeof user, err);
    if (rc != 0)
        return rc;
    ij_map *maps = NULL;
    size_t nm = 0;
    if ((rc = target_maps(pid, &maps, &nm, r, err)) != 0)
        return rc;
    const ij_map *mapped = mapped_tracer(maps, nm);
    if (mapped != NULL && tp_endpoint_is_live(r->endpoint) == 1) {
        free(maps);
        err_set(err, 0, "process %ld already has the tracer loaded, publishing on %s", pid, r->endpoint);
        return IJ_PUBLISHING;
    }
    uint64_t fn[F_N];
    tracer_layout tl;
    if ((rc = find_functions(pid, maps, nm, fn, mapped == NULL, err)) != 0 ||
        (rc = mapped != NULL ? mapped_layout(pid, mapped, &tl, err) : tracer_layout_read(tracer, tracer, &tl, err)) !=
            0) {
        free(maps);
        return rc;
    }

    sess s = {.tid = (pid_t)pid, .o = o, .rep = r, .err = err};
    int start_ret = 0;
    rc = sess_begin(&s, &acc, maps, nm);
    if (rc == 0)
        rc = load_and_start(&s, pid, tracer, mapped, &tl, fn, &start_ret);
    sess_end(&s);
    free(s.ext);
    if (rc == 0 && start_ret < 0)
        rc = err_set(err, ERR_IO, "the tracer in process %ld could not make a thread to start on", pid);
    else if (rc == 0 && start_ret == 1 && tp_endpoint_is_live(r->endpoint) != 1)
        rc = err_set(err, ERR_EXIST,
                     "process %ld's tracer is running but does not publish on %s: it publishes where its "
                     "SYNCTOP_LISTEN says (see the program's environment)",
                     pid, r->endpoint);
    if (rc != 0) {
        free(maps);
        return rc;
    }

    int live = wait_started(pid, o, r->endpoint, err);
    if (live == 0) {
        /* Why: the line the tracer keeps, read in one more short stop. */
        char why[600] = "";
        ij_map *now = NULL;
        size_t nnow = 0;
        err_msg e2 = {{0}};
        uint64_t at = 0;
        const ij_map *m = ij_maps_read(pid, &now, &nnow, &e2) == 0 ? mapped_tracer(now, nnow) : NULL;
        if (m != NULL)
            call_entry(pid, &acc, now, nnow, "synctop_tracer_status", m->start - tl.vaddr0 + tl.status, o, r, &e2,
                       &at, why, sizeof why);
        free(now);
        live = err_set(err, ERR_IO, "the tracer is loaded in process %ld but does not publish on %s: %s", pid,
                       r->endpoint,
                       why[0] != '\0' ? why
                                      : "it stepped aside without saying why (SYNCTOP_DISABLE? a start that "
                                        "took longer than the time allowed?)");
    }
    free(maps);
    return live < 0 ? live : 0;
}

/* ---- one attach or detach at a time ---- */

/* The lock held on PID.lock in the endpoint directory while attaching to or detaching from pid.
 * Without it two synctops that both passed the checks race to PTRACE_SEIZE, and the kernel's
 * refusal of the second reads like a security module's. The file holds the holder's pid, so that
 * the one refused can say who has it. */
typedef struct op_lock {
    int fd;
    char path[PATH_MAX];
} op_lock;

/* The holder of the lock at fd, as "process PID, NAME", into out ("" when it cannot be told). */
static void op_lock_holder(int fd, char *out, size_t len) {
    char text[32], comm[64] = "?", path[64];
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    long holder = strtol(text, NULL, 10);
    out[0] = '\0';
    if (holder <= 0)
        return;
    snprintf(path, sizeof path, "/proc/%ld/comm", holder);
    size_t got = read_proc(path, comm, sizeof comm - 1);
    if (got > 0) {
        comm[got] = '\0';
        comm[strcspn(comm, "\n")] = '\0';
    }
    snprintf(out, len, " (process %ld, %s)", holder, comm);
}

static int op_lock_take(long pid, op_lock *l, err_msg *err) {
    l->fd = -1;
    char dir[PATH_MAX];
    int rc = tp_endpoint_dir(dir, sizeof dir, err);
    if (rc < 0)
        return rc;
    int n = snprintf(l->path, sizeof l->path, "%s/%ld.lock", dir, pid);
    if (n < 0 || (size_t)n >= sizeof l->path)
        return err_set(err, ERR_LIMIT, "the lock file's path in %s is too long", dir);
    for (int tries = 0; tries < 8; tries++) {
        int fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
            return err_set(err, ERR_IO, "cannot open %s: %s", l->path, strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            char holder[128];
            op_lock_holder(fd, holder, sizeof holder);
            close(fd);
            if (e != EWOULDBLOCK)
                return err_set(err, ERR_IO, "cannot lock %s: %s", l->path, strerror(e));
            return err_set(err, ERR_AGAIN,
                           "another attach or detach of process %ld is in progress%s: let it finish, then try "
                           "again (nothing was done)",
                           pid, holder);
        }
        /* The holder before us removes the file as it lets go: when that came between our open and
         * our lock, ours is a lock on a file nobody else opens; start over on the path's. */
        struct stat mine, named;
        if (fstat(fd, &mine) == 0 && stat(l->path, &named) == 0 && mine.st_dev == named.st_dev &&
            mine.st_ino == named.st_ino) {
            char me[32];
            int len = snprintf(me, sizeof me, "%ld\n", (long)getpid());
            if (ftruncate(fd, 0) != 0 || pwrite(fd, me, (size_t)len, 0) != len) {
                /* the lock holds all the same; only the holder's name is missing */
            }
            l->fd = fd;
            return 0;
        }
        close(fd);
    }
    return err_set(err, ERR_AGAIN, "cannot lock %s: it keeps being replaced", l->path);
}

static void op_lock_drop(op_lock *l) {
    if (l->fd < 0)
        return;
    unlink(l->path);
    close(l->fd);
    l->fd = -1;
}

/* Holds off the signals that would end this process while the program runs an injected call
 * (a tracer that dies then leaves it to crash), and SIGCHLD, which wait_stop waits for. */
static void hold_signals(sigset_t *old) {
    sigset_t hold;
    sigemptyset(&hold);
    sigaddset(&hold, SIGINT);
    sigaddset(&hold, SIGTERM);
    sigaddset(&hold, SIGHUP);
    sigaddset(&hold, SIGQUIT);
    sigaddset(&hold, SIGTSTP);
    sigaddset(&hold, SIGPIPE);
    sigaddset(&hold, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &hold, old);
}

static void opts_defaults(ij_opts *o, const ij_opts *given) {
    *o = given ? *given : (ij_opts){0};
    o->call_ms = o->call_ms > 0 ? o->call_ms : 5000;
    o->start_ms = o->start_ms > 0 ? o->start_ms : 30000;
    o->safe_point_ms = o->safe_point_ms > 0 ? o->safe_point_ms : 2000;
}

int ij_inject(long pid, const char *tracer, const ij_opts *opts, ij_report *r, err_msg *err) {
    ij_opts o;
    opts_defaults(&o, opts);
    memset(r, 0, sizeof *r);
    if (tracer[0] != '/')
        return err_set(err, ERR_INVAL, "the tracer's path must be absolute: %s", tracer);
    sigset_t old;
    hold_signals(&old);
    op_lock lock;
    int rc = op_lock_take(pid, &lock, err);
    if (rc == 0)
        rc = inject(pid, tracer, &o, r, err);
    op_lock_drop(&lock);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

static int detach(long pid, const ij_opts *o, ij_report *r, err_msg *err) {
    ij_access acc;
    char tracer_name[64], user[64];
    int rc = ij_access_gather(pid, &acc, tracer_name, sizeof tracer_name, user, sizeof user, err);
    if (rc != 0)
        return err_set(err, rc, "no process %ld", pid);
    if ((rc = ij_access_precheck(&acc, err)) != 0)
        return rc;
    ij_map *maps = NULL;
    size_t nm = 0;
    if ((rc = target_maps(pid, &maps, &nm, r, err)) != 0)
        return rc;
    const ij_map *mapped = mapped_tracer(maps, nm);
    tracer_layout tl;
    if (mapped == NULL) {
        free(maps);
        return IJ_NOT_TRACING;
    }
    if ((rc = mapped_layout(pid, mapped, &tl, err)) != 0) {
        free(maps);
        return rc;
    }
    uint64_t ret = 0;
    rc = call_entry(pid, &acc, maps, nm, "synctop_tracer_stop", mapped->start - tl.vaddr0 + tl.stop, o, r, err, &ret,
                    NULL, 0);
    free(maps);
    if (rc != 0)
        return rc;
    if ((int32_t)ret != 0)
        return IJ_NOT_TRACING;
    /* The flush thread ships the last batch (within SYNCTOP_LINGER_MS) and ends. */
    uint64_t deadline = now_ns() + (uint64_t)o->start_ms * 1000000ull;
    for (;;) {
        int starting = 0;
        int left = tracer_threads(pid, &starting);
        if (left < 0 || thread_gone((pid_t)pid))
            return 0; /* it exited meanwhile: nothing is traced there either */
        if (left == 0 && tp_endpoint_is_live(r->endpoint) != 1)
            return 0;
        if (now_ns() >= deadline)
            return err_set(err, ERR_AGAIN,
                           "the tracer in process %ld was asked to stop but its thread is still there after %d ms",
                           pid, o->start_ms);
        sleep_ns(5000000);
    }
}

int ij_detach(long pid, const ij_opts *opts, ij_report *r, err_msg *err) {
    ij_opts o;
    opts_defaults(&o, opts);
    memset(r, 0, sizeof *r);
    sigset_t old;
    hold_signals(&old);
    op_lock lock;
    int rc = op_lock_take(pid, &lock, err);
    if (rc == 0)
        rc = detach(pid, &o, r, err);
    op_lock_drop(&lock);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

#else /* neither x86-64 nor aarch64 */

int ij_inject(long pid, const char *tracer, const ij_opts *opts, ij_report *r, err_msg *err) {
    (void)tracer;
    (void)opts;
    memset(r, 0, sizeof *r);
    return err_set(err, ERR_UNSUPPORTED,
                   "loading the tracer into a running process (%ld) is implemented for x86-64 and aarch64 only: "
                   "start the program under `synctop run`",
                   pid);
}

int ij_detach(long pid, const ij_opts *opts, ij_report *r, err_msg *err) {
    (void)opts;
    memset(r, 0, sizeof *r);
    return err_set(err, ERR_UNSUPPORTED,
                   "stopping the tracer in a running process (%ld) is implemented for x86-64 and aarch64 only",
                   pid);
}

#endif
