/*
 * Run on aarch64 (or under qemu-aarch64) by check_arm64.sh: the two facts about the processor that
 * the injector's aarch64 calls (inject/inject.c) rest on, checked without ptrace. A function entered
 * as the injector enters it (arguments in x0, x1, the link register x30 zero, the pc set without a
 * call) returns by branching to 0, and the fetch there raises SIGSEGV with the pc at 0 and the
 * function's result still in x0; this holds with pointer authentication and BTI, which the file is
 * built with. And the C library's system call instruction is the word the injector looks for.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#if !defined(__aarch64__)
#error "this check is for aarch64"
#endif

#define A64_SVC_0 0xd4000001u /* as in inject/inject.c */

static sigjmp_buf back;
static volatile int fault_sig;
static volatile uint64_t fault_pc = 1, fault_addr = 1, fault_x0;

static void on_fault(int sig, siginfo_t *si, void *ctx) {
    const ucontext_t *uc = ctx;
    fault_sig = sig;
    fault_pc = uc->uc_mcontext.pc;
    fault_x0 = uc->uc_mcontext.regs[0];
    fault_addr = (uint64_t)(uintptr_t)si->si_addr;
    siglongjmp(back, 1);
}

__attribute__((noinline)) static long add(long a, long b) { return a + b; }

/* Not a leaf: it saves its link register on the stack and loads it back (signed and authenticated
 * where pointer authentication is on), as dlopen does. */
__attribute__((noinline)) long ret_to_zero_callee(long a, long b);
__attribute__((noinline)) long ret_to_zero_callee(long a, long b) {
    char text[32];
    snprintf(text, sizeof text, "%ld", a * 100);
    return add(a, b) + (long)strlen(text);
}

/* x0, x1 = a, b; x30 = 0; the pc = fn, reached by br through x16 (which a BTI landing pad for
 * calls accepts, as the injector's pc, set by ptrace, needs none). */
__attribute__((noinline, noreturn)) static void enter(long (*fn)(long, long), long a, long b) {
    __asm__ volatile("mov x0, %0\n\t"
                     "mov x1, %1\n\t"
                     "mov x16, %2\n\t"
                     "mov x30, xzr\n\t"
                     "br x16\n\t"
                     :
                     : "r"(a), "r"(b), "r"(fn)
                     : "x0", "x1", "x16", "x30", "memory");
    __builtin_unreachable();
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    sigaction(SIGILL, &sa, NULL);
    if (sigsetjmp(back, 1) == 0)
        enter(ret_to_zero_callee, 2, 3);
    int bad = 0;
    long want = add(2, 3) + 3; /* "200" */
    if (fault_sig != SIGSEGV || fault_pc != 0 || fault_addr != 0 || (long)fault_x0 != want) {
        fprintf(stderr, "FAIL: return to 0 gave signal %d, pc 0x%llx, address 0x%llx, x0 %lld (want %d, 0, 0, %ld)\n",
                fault_sig, (unsigned long long)fault_pc, (unsigned long long)fault_addr, (long long)fault_x0,
                SIGSEGV, want);
        bad = 1;
    } else {
        printf("ok: return to 0: SIGSEGV, pc 0, address 0, x0 = %ld\n", want);
    }

    /* syscall(2)'s code holds svc #0. */
    const uint32_t *code = (const uint32_t *)(uintptr_t)&syscall;
    int found = 0;
    for (int i = 0; i < 64 && !found; i++)
        found = code[i] == A64_SVC_0;
    if (!found) {
        fprintf(stderr, "FAIL: no svc #0 (0x%08x) in the first 64 instructions of syscall()\n", A64_SVC_0);
        bad = 1;
    } else {
        printf("ok: syscall() holds svc #0 = 0x%08x\n", A64_SVC_0);
    }
    return bad;
}
