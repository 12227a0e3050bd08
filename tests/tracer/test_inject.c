/* Loading the tracer into a running program (inject/inject.h): the ELF, /proc and safe-point code on
 * their own, then the real libsynctop-tracer.so injected with ptrace into inject_target, a program
 * that runs the stand-in libcupti and computes a checksum, checked for what the tracer publishes and
 * for what the program kept (its result, its exit status, its threads and descriptors), and the
 * refusals. Where this machine forbids ptrace, the cases that need it say so and pass. */
#include "task.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <grp.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "inject.h"
#include "inject_elf.h"
#include "inject_proc.h"
#include "synctop/codec.h"
#include "synctop/net.h"

#ifdef SYNCTOP_HAVE_TRACER
#include <cupti.h>
#endif

#if defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#else
#define HOST_MACHINE EM_X86_64
#endif

/* ---- helpers ---- */

static char *read_text(const char *path) {
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return strdup("");
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void touch(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT, 0600);
    ASSERT(fd >= 0);
    close(fd);
}

/* Whether this process may ptrace a child of its own; the reason when not. */
static int ptrace_works(char *why, size_t len) {
    pid_t c = fork();
    ASSERT(c >= 0);
    if (c == 0) {
        pause();
        _exit(0);
    }
    int ok = ptrace(PTRACE_SEIZE, c, NULL, NULL) == 0;
    if (!ok)
        snprintf(why, len, "%s", strerror(errno));
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
    return ok;
}

#define NEED_PTRACE()                                                                    \
    do {                                                                                 \
        char why_[256];                                                                  \
        if (!ptrace_works(why_, sizeof why_))                                            \
            TASK_SKIP("ptrace is not permitted here (%s)", why_);                        \
    } while (0)

/* The mapping of this process's own C library (the file dlopen is in). */
static void own_libc(ij_map *out) {
    ij_map *maps = NULL;
    size_t n = 0;
    err_msg err;
    ASSERT_OK(ij_maps_read((long)getpid(), &maps, &n, &err));
    int found = 0;
    for (size_t i = 0; i < n && !found; i++)
        if (maps[i].offset == 0 && strstr(maps[i].path, "/libc.so") != NULL) {
            *out = maps[i];
            found = 1;
        }
    free(maps);
    ASSERT(found);
}

static void *libc_symbol(const char *name) {
    void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NOT_NULL(h);
    void *p = dlsym(h, name);
    ASSERT_NOT_NULL(p);
    dlclose(h);
    return p;
}

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    ASSERT_NOT_NULL(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*len);
    ASSERT_EQ(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

/* ---- ELF: where a function lies in a library another process mapped ---- */

TEST(inject_elf_finds_libc_functions_where_they_are_mapped) {
    ij_map libc;
    own_libc(&libc);
    err_msg err;
    ij_elf *e = ij_elf_open(libc.path, &err);
    if (e == NULL)
        TASK_FAIL_("%s", err.msg);
    ASSERT_EQ(ij_elf_machine(e), HOST_MACHINE);
    uint64_t vaddr = 1;
    ASSERT_OK(ij_elf_load_vaddr(e, 0, (uint64_t)sysconf(_SC_PAGESIZE), &vaddr));
    uint64_t bias = libc.start - vaddr;
    static const char *const names[] = {"dlopen", "dlerror", "pthread_create", "pthread_detach", "getenv",
                                        "setenv", "unsetenv", "__errno_location", "pthread_sigmask"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        uint64_t v = 0;
        if (ij_elf_symbol(e, names[i], &v) != 0)
            TASK_FAIL_("no %s in %s", names[i], libc.path);
        ASSERT_UEQ(bias + v, (uintptr_t)libc_symbol(names[i]));
    }
    uint64_t v;
    ASSERT_EQ(ij_elf_symbol(e, "no_such_function_here", &v), ERR_NOENT);
    ij_elf_close(&e);
    ij_elf_close(&e); /* twice is fine */
}

/* A library stripped of its section headers is read as the loader reads it: through PT_DYNAMIC. */
TEST(inject_elf_reads_a_library_without_section_headers) {
    ij_map libc;
    own_libc(&libc);
    size_t len;
    uint8_t *b = slurp(libc.path, &len);
    err_msg err;
    ij_elf *full = ij_elf_open_mem(b, len, &err);
    ASSERT_NOT_NULL(full);
    Elf64_Ehdr eh;
    memcpy(&eh, b, sizeof eh);
    eh.e_shoff = 0;
    eh.e_shnum = 0;
    memcpy(b, &eh, sizeof eh);
    ij_elf *bare = ij_elf_open_mem(b, len, &err);
    if (bare == NULL)
        TASK_FAIL_("%s", err.msg);
    uint64_t a = 0, c = 0;
    ASSERT_OK(ij_elf_symbol(full, "dlopen", &a));
    ASSERT_OK(ij_elf_symbol(bare, "dlopen", &c));
    ASSERT_UEQ(a, c);
    ASSERT_OK(ij_elf_symbol(bare, "pthread_create", &c));
    ASSERT_OK(ij_elf_symbol(full, "pthread_create", &a));
    ASSERT_UEQ(a, c);
    ij_elf_close(&full);
    ij_elf_close(&bare);
    free(b);
}

/* Cut short anywhere, or with any header byte changed, a file gives an answer or an error. */
TEST(inject_elf_survives_damaged_files) {
    ij_map libc;
    own_libc(&libc);
    size_t len;
    uint8_t *b = slurp(libc.path, &len);
    err_msg err;
    static const size_t cuts[] = {0, 1, 4, 16, 63, 64, 65, 200, 4096, 65536, 1 << 20};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        if (cuts[i] >= len)
            continue;
        ij_elf *e = ij_elf_open_mem(b, cuts[i], &err);
        uint64_t v;
        if (e != NULL)
            (void)ij_elf_symbol(e, "dlopen", &v);
        ij_elf_close(&e);
    }
    uint32_t seed = 12345;
    for (int round = 0; round < 500; round++) {
        uint8_t *c = malloc(len);
        memcpy(c, b, len);
        for (int k = 0; k < 4; k++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = (seed >> 8) % 64; /* the ELF header */
            if (k >= 2) {
                Elf64_Ehdr eh;
                memcpy(&eh, c, sizeof eh);
                at = (size_t)(eh.e_phoff + ((seed >> 4) % (eh.e_phnum * sizeof(Elf64_Phdr) + 1))) % len;
            }
            c[at] = (uint8_t)(seed >> 24);
        }
        ij_elf *e = ij_elf_open_mem(c, len, &err);
        uint64_t v;
        if (e != NULL) {
            (void)ij_elf_symbol(e, "dlopen", &v);
            (void)ij_elf_load_vaddr(e, 0, 4096, &v);
        }
        ij_elf_close(&e);
        free(c);
    }
    ASSERT_NULL(ij_elf_open_mem("#!/bin/sh\n", 10, &err));
    ASSERT_STR_CONTAINS(err.msg, "not an ELF file");
    free(b);
}

/* ---- /proc: maps, status, and the refusals taken from them ---- */

TEST(inject_parses_maps_and_status) {
    ij_map m;
    ASSERT_OK(ij_maps_parse_line("7f01a2c00000-7f01a2c28000 r--p 00000000 fe:01 1835113    "
                                 "/usr/lib/x86_64-linux-gnu/libc.so.6\n",
                                 &m));
    ASSERT_UEQ(m.start, 0x7f01a2c00000ull);
    ASSERT_UEQ(m.end, 0x7f01a2c28000ull);
    ASSERT_EQ(m.dev_major, 0xfe);
    ASSERT_EQ(m.dev_minor, 1);
    ASSERT_UEQ(m.inode, 1835113);
    ASSERT_STR_EQ(m.path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
    ASSERT_STR_EQ(m.perms, "r--p");
    ASSERT_OK(ij_maps_parse_line("7ffd1000-7ffd2000 rw-p 00000000 00:00 0 \n", &m));
    ASSERT_STR_EQ(m.path, "");
    ASSERT_OK(ij_maps_parse_line("1000-2000 r-xp 00001000 08:02 77 /opt/my lib/libx.so (deleted)", &m));
    ASSERT_STR_EQ(m.path, "/opt/my lib/libx.so (deleted)");
    ASSERT_EQ(ij_maps_parse_line("garbage", &m), ERR_MALFORMED);
    ASSERT_EQ(ij_maps_parse_line("2000-1000 r-xp 0 08:02 77 /x", &m), ERR_MALFORMED);

    ASSERT(ij_is_system_lib("/lib/x86_64-linux-gnu/libc.so.6"));
    ASSERT(ij_is_system_lib("/usr/lib/libdl.so.2"));
    ASSERT(ij_is_system_lib("/lib/ld-musl-x86_64.so.1"));
    ASSERT(!ij_is_system_lib("/usr/lib/libcuda.so.1"));
    ASSERT(!ij_is_system_lib("[vdso]"));

    ij_status s;
    ASSERT_OK(ij_status_parse("Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t42\nPid:\t42\n"
                              "PPid:\t1\nTracerPid:\t0\nUid:\t1000\t1000\t1000\t1000\n"
                              "Gid:\t100\t100\t100\t100\nThreads:\t7\nCapEff:\t0000000000080000\n",
                              &s));
    ASSERT_STR_EQ(s.name, "python3");
    ASSERT_EQ(s.state, 'S');
    ASSERT_EQ(s.ppid, 1);
    ASSERT_EQ(s.uid[1], 1000);
    ASSERT_EQ(s.gid[2], 100);
    ASSERT_EQ(s.threads, 7);
    ASSERT_UEQ((s.cap_eff >> IJ_CAP_SYS_PTRACE) & 1, 1);
    ASSERT_EQ(s.seccomp, -1); /* a kernel that does not say */
    ASSERT_EQ(s.seccomp_filters, -1);
    ASSERT_OK(ij_status_parse("Name:\tx\nState:\tS\nPPid:\t1\nTracerPid:\t0\nUid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\n"
                              "Seccomp:\t2\nSeccomp_filters:\t3\n",
                              &s));
    ASSERT_EQ(s.seccomp, 2);
    ASSERT_EQ(s.seccomp_filters, 3);
    ASSERT_EQ(ij_status_parse("Name:\tx\nState:\tR\n", &s), ERR_MALFORMED);
}

static ij_access facts(long uid, long tracer, char state) {
    ij_access a;
    memset(&a, 0, sizeof a);
    a.pid = 4242;
    snprintf(a.target.name, sizeof a.target.name, "train.py");
    a.target.state = state;
    a.target.tracer_pid = tracer;
    for (int i = 0; i < 4; i++) {
        a.target.uid[i] = uid;
        a.target.gid[i] = 100;
    }
    a.my_uid = 1000;
    a.my_gid = 100;
    a.yama = 1;
    return a;
}

TEST(inject_refuses_other_users_traced_stopped_and_exited_processes) {
    err_msg why = {{0}};
    ij_access a = facts(1000, 0, 'S');
    ASSERT_OK(ij_access_precheck(&a, &why));

    a = facts(1001, 0, 'S');
    a.target_user = "alice";
    ASSERT_EQ(ij_access_precheck(&a, &why), ERR_PERM);
    ASSERT_STR_CONTAINS(why.msg, "runs as alice (uid 1001), not as you (uid 1000)");
    a = facts(1000, 0, 'S');
    a.target.uid[1] = 0; /* a setuid-root program the user started */
    ASSERT_EQ(ij_access_precheck(&a, &why), ERR_PERM);
    ASSERT_STR_CONTAINS(why.msg, "uid 0");
    a = facts(0, 0, 'S'); /* root is refused another user's process too */
    a.my_uid = 0;
    a.target.uid[0] = 1000;
    ASSERT_EQ(ij_access_precheck(&a, &why), ERR_PERM);

    a = facts(1000, 777, 't');
    a.tracer_name = "gdb";
    ASSERT_EQ(ij_access_precheck(&a, &why), ERR_EXIST);
    ASSERT_STR_CONTAINS(why.msg, "already traced by process 777 (gdb)");
    a = facts(1000, 778, 't');
    a.tracer_name = "synctop"; /* another attach or detach that got there first */
    ASSERT_EQ(ij_access_precheck(&a, &why), ERR_EXIST);
    ASSERT_STR_CONTAINS(why.msg, "held by another synctop (process 778)");
    a = facts(1000, 0, 'T');
    ASSERT_EQ(ij_access_precheck(&a, &why), ERR_INVAL);
    ASSERT_STR_CONTAINS(why.msg, "kill -CONT 4242");
    a = facts(1000, 0, 'Z');
    ASSERT_EQ(ij_access_precheck(&a, &why), ERR_NOENT);
}

TEST(inject_says_what_allows_ptrace) {
    err_msg why = {{0}};
    ij_access a = facts(1000, 0, 'S');
    a.yama = 1;
    ASSERT_EQ(ij_access_explain_eperm(&a, &why), ERR_PERM);
    ASSERT_STR_CONTAINS(why.msg, "ptrace_scope is 1");
    ASSERT_STR_CONTAINS(why.msg, "sysctl kernel.yama.ptrace_scope=0");
    ASSERT_STR_CONTAINS(why.msg, "cap_sys_ptrace");
    a.yama = 2;
    ij_access_explain_eperm(&a, &why);
    ASSERT_STR_CONTAINS(why.msg, "ptrace_scope is 2");
    ASSERT_STR_CONTAINS(why.msg, "CAP_SYS_PTRACE");
    a.yama = 3;
    ij_access_explain_eperm(&a, &why);
    ASSERT_STR_CONTAINS(why.msg, "ptrace_scope is 3");
    ASSERT_STR_CONTAINS(why.msg, "synctop run");
    a.yama = 1;
    a.descendant = 1; /* Yama allows it: something else refused */
    ij_access_explain_eperm(&a, &why);
    ASSERT_STR_CONTAINS(why.msg, "undumpable");
    a.yama = -1;
    a.descendant = 0;
    a.target.gid[1] = 5; /* setgid */
    ij_access_explain_eperm(&a, &why);
    ASSERT_STR_CONTAINS(why.msg, "setgid");
}

TEST(inject_calls_only_at_safe_points) {
    ij_map maps[3];
    ASSERT_OK(ij_maps_parse_line("400000-500000 r-xp 00000000 08:01 10 /usr/bin/python3.11", &maps[0]));
    ASSERT_OK(ij_maps_parse_line("7f0000000000-7f0000100000 r-xp 00028000 08:01 11 /lib/libc.so.6", &maps[1]));
    ASSERT_OK(ij_maps_parse_line("7f0000200000-7f0000300000 r-xp 00001000 08:01 12 /lib/ld-linux-x86-64.so.2",
                                 &maps[2]));
    err_msg why = {{0}};
    ASSERT_EQ(ij_safe_point(maps, 3, 0x400100, -1, &why), 1);            /* the program's code */
    ASSERT_EQ(ij_safe_point(maps, 3, 0x7f0000000100, -1, &why), 0);      /* malloc, say */
    ASSERT_STR_CONTAINS(why.msg, "libc.so.6");
    ASSERT_EQ(ij_safe_point(maps, 3, 0x7f0000200100, -1, &why), 0);      /* the loader */
    ASSERT_EQ(ij_safe_point(maps, 3, 0x7f0000000100, SYS_futex, &why), 1); /* waiting */
    ASSERT_EQ(ij_safe_point(maps, 3, 0x7f0000000100, SYS_clock_nanosleep, &why), 1);
    /* a sleep an earlier stop interrupted, continued by the kernel */
    ASSERT_EQ(ij_safe_point(maps, 3, 0x7f0000000100, SYS_restart_syscall, &why), 1);
    ASSERT_EQ(ij_safe_point(maps, 3, 0x7f0000000100, SYS_mmap, &why), 0); /* malloc growing */
    ASSERT_EQ(ij_safe_point(maps, 3, 0x7fff00000000, -1, &why), 1);      /* JIT code */
}

/* ---- injection into a running program (needs the tracer: tests/CMakeLists.txt disables these
 * cases without the CUDA toolkit) ---- */

#ifdef SYNCTOP_HAVE_TRACER

typedef struct target {
    pid_t pid;
    char stop[256], out[256], err[256];
} target;

static int without_driver; /* the next target maps no libcuda: not a CUDA program */

static void start_target(target *t, const char *binary, const char *mode) {
    static int n;
    n++;
    char name[64];
    snprintf(name, sizeof name, "stop%d", n);
    snprintf(t->stop, sizeof t->stop, "%s", task_path(name));
    snprintf(name, sizeof name, "out%d.txt", n);
    snprintf(t->out, sizeof t->out, "%s", task_path(name));
    snprintf(name, sizeof name, "err%d.txt", n);
    snprintf(t->err, sizeof t->err, "%s", task_path(name));
    setenv("SYNCTOP_STANDIN", STANDIN_SO, 1);
    setenv("SYNCTOP_CUPTI", STANDIN_SO, 1);
    if (without_driver)
        unsetenv("SYNCTOP_STANDIN_DRIVER");
    else
        setenv("SYNCTOP_STANDIN_DRIVER", DRIVER_SO, 1);
    setenv("SYNCTOP_FLUSH_MS", "5", 1);
    unsetenv("SYNCTOP_MODE");
    const char *argv[] = {binary, mode, t->stop, NULL};
    t->pid = task_spawn(argv, t->out, t->err);
    if (strcmp(mode, "exit") == 0)
        return;
    for (int i = 0; i < 1000; i++) {
        char *o = read_text(t->out);
        int ready = strstr(o, "ready") != NULL;
        free(o);
        if (ready)
            return;
        task_sleep_ms(10);
    }
    TASK_FAIL_("the target did not start: %s", read_text(t->err));
}

/* Stops the target and returns its last line (its results). */
static char *finish_target(target *t) {
    touch(t->stop);
    int rc = task_wait_exit(t->pid, 60);
    char *o = read_text(t->out);
    if (rc != 0)
        TASK_FAIL_("the target ended with status %d; stdout: %s; stderr: %s", rc, o, read_text(t->err));
    return o;
}

static void parse_result(const char *out, unsigned long long *iterations, char checksum[17], unsigned long long *gap,
                         char mode[32]) {
    const char *r = strstr(out, "iterations=");
    ASSERT_NOT_NULL(r);
    unsigned long long at = 0;
    ASSERT_EQ(sscanf(r, "iterations=%llu checksum=%16s longest_gap_us=%llu gap_at=%llu mode=%31s", iterations,
                     checksum, gap, &at, mode),
              5);
}

/* The gap of the program's loop that held the injection, by the program's clock: its pause. */
static double pause_seen_ms(const char *out, uint64_t held_at) {
    for (const char *p = strstr(out, "gap "); p != NULL; p = strstr(p + 1, "\ngap ")) {
        unsigned long long a, b;
        if (sscanf(p + (*p == '\n'), "gap %llu %llu", &a, &b) == 2 && a <= held_at && held_at <= b)
            return (double)(b - a) / 1e6;
    }
    return 0; /* under 1 ms */
}

/* The untraced reference: the same number of iterations in a program nobody touched. */
static void reference_checksum(unsigned long long iterations, char checksum[17]) {
    char n[32], out[256], err[256];
    snprintf(n, sizeof n, "%llu", iterations);
    snprintf(out, sizeof out, "%s", task_path("ref_out.txt"));
    snprintf(err, sizeof err, "%s", task_path("ref_err.txt"));
    const char *argv[] = {INJECT_TARGET, "count", n, NULL};
    ASSERT_EQ(task_wait_exit(task_spawn(argv, out, err), 120), 0);
    char *o = read_text(out);
    unsigned long long it, gap;
    char mode[32];
    parse_result(o, &it, checksum, &gap, mode);
    ASSERT_EQ(it, iterations);
    free(o);
}

/* Stops the target and checks what it computed: the untraced program's checksum for as many
 * iterations, with SYNCTOP_MODE never set in its environment. Its output (to free) and figures. */
typedef struct result {
    char *out;
    unsigned long long iterations, gap; /* its longest gap between two iterations, us */
    char sum[17];
} result;

static result finish_checked(target *t) {
    result r;
    char ref[17], mode[32];
    r.out = finish_target(t);
    parse_result(r.out, &r.iterations, r.sum, &r.gap, mode);
    ASSERT_STR_EQ(mode, "unset");
    reference_checksum(r.iterations, ref);
    ASSERT_STR_EQ(r.sum, ref);
    return r;
}

/* The entries of /proc/PID/fd (targets) and /proc/PID/task (thread names). */
static size_t list_dir(const char *dir, char names[][128], size_t max, int fds) {
    DIR *d = opendir(dir);
    ASSERT_NOT_NULL(d);
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n < max) {
        if (de->d_name[0] == '.')
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (fds) {
            ssize_t k = readlink(path, names[n], 127);
            names[n][k > 0 ? k : 0] = '\0';
        } else {
            char comm[600];
            snprintf(comm, sizeof comm, "%s/comm", path);
            char *c = read_text(comm);
            c[strcspn(c, "\n")] = '\0';
            snprintf(names[n], 128, "%s", c);
            free(c);
        }
        n++;
    }
    closedir(d);
    return n;
}

static int count_name(char names[][128], size_t n, const char *name) {
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += strcmp(names[i], name) == 0;
    return k;
}

/* A process's descriptors (their targets) and threads (their names) at one moment. */
typedef struct snapshot {
    char fds[256][128], tasks[64][128];
    size_t nfd, nt;
} snapshot;

static void snapshot_take(long pid, snapshot *s) {
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%ld/fd", pid);
    s->nfd = list_dir(dir, s->fds, 256, 1);
    snprintf(dir, sizeof dir, "/proc/%ld/task", pid);
    s->nt = list_dir(dir, s->tasks, 64, 0);
}

static ij_report inject_ok(long pid) {
    ij_opts o = {.mode = "on-demand"};
    ij_report r;
    err_msg err = {{0}};
    int rc = ij_inject(pid, TRACER_SO, &o, &r, &err);
    if (rc != 0)
        TASK_FAIL_("ij_inject: %s (%s)", err.msg, err_str(rc));
    return r;
}

static void assert_running_untraced(long pid) {
    ij_status st;
    err_msg err;
    ASSERT_OK(ij_status_read(pid, &st, &err));
    ASSERT_EQ(st.tracer_pid, 0);
    ASSERT(st.state != 'T' && st.state != 't');
}

/* Receives until API records of the target's blocking cudaStreamSynchronize and the name of its
 * GPU (the stand-in driver's) have arrived. */
static void expect_events(const char *endpoint, long pid, size_t *apis, size_t *kernels) {
    err_msg err = {{0}};
    tp_sub_opts so = {0};
    tp_sub *sub = tp_sub_new(&so, &err);
    ASSERT_NOT_NULL(sub);
    ASSERT_OK(tp_sub_connect(sub, endpoint, &err));
    int saw_process = 0, saw_device = 0;
    tp_strtab *strings = tp_strtab_new();
    *apis = *kernels = 0;
    for (int i = 0; i < 1000 && (*apis < 3 || !saw_process || !saw_device); i++) {
        tp_sub_msg msg;
        int rc = tp_sub_recv(sub, &msg, 20, &err);
        ASSERT(rc >= 0);
        if (rc == 0)
            continue;
        tp_dec d;
        memset(&d, 0, sizeof d);
        if (tp_dec_open(&d, msg.data, msg.len, &err) != 0)
            continue;
        ASSERT_OK(tp_dec_load_strings(&d, strings));
        const tp_record *rec;
        while ((rec = tp_dec_next_record(&d)) != NULL) {
            if (rec->head.kind == TP_K_PROCESS && rec->process.pid == (uint32_t)pid)
                saw_process = 1;
            if (rec->head.kind == TP_K_DEVICE && rec->device.device == 0) {
                uint32_t len = 0;
                const char *name = tp_strtab_get(strings, rec->device.name, &len);
                saw_device = name != NULL && len == 8 && memcmp(name, "FakeH100", 8) == 0 &&
                             rec->device.sm_count == 132 && rec->device.cc_major == 9;
            }
            if (rec->head.kind == TP_K_API &&
                rec->api.cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020 &&
                (rec->api.flags & TP_F_BLOCKING))
                (*apis)++;
            if (rec->head.kind == TP_K_KERNEL)
                (*kernels)++;
        }
        tp_dec_free(&d);
    }
    tp_sub_destroy(&sub);
    tp_strtab_destroy(&strings);
    ASSERT(saw_process);
    ASSERT_GE(*apis, 3);
    ASSERT(saw_device); /* named by the driver: CUPTI made its device record before the tracer came */
}

TEST(inject_loads_the_tracer_into_a_running_program) {
    NEED_PTRACE();
    target t;
    start_target(&t, INJECT_TARGET, "run");
    static snapshot before, after;
    snapshot_take(t.pid, &before);
    task_sleep_ms(100);

    ij_report r = inject_ok(t.pid);
    assert_running_untraced(t.pid);
    ASSERT_EQ(r.loaded, 1);
    fprintf(stderr, "inject: the main thread was held %.3f ms at the longest (%.3f ms in all, %u stops)\n",
            r.longest_pause_ns / 1e6, r.total_pause_ns / 1e6, r.stops);

    size_t apis, kernels;
    expect_events(r.endpoint, t.pid, &apis, &kernels);
    fprintf(stderr, "inject: %zu blocking calls and %zu kernels received\n", apis, kernels);
    /* The context was made before the tracer came: its kernels arrive all the same. */
    ASSERT_GE(kernels, 1);

    /* What stays in the program: the tracer's threads (its flush thread, ZeroMQ's) and its
     * descriptors (sockets, ZeroMQ's eventfds and epoll); nothing of the injection itself. */
    task_sleep_ms(100);
    snapshot_take(t.pid, &after);
    for (size_t i = 0; i < after.nfd; i++) {
        if (count_name(before.fds, before.nfd, after.fds[i]) > 0)
            continue;
        if (strncmp(after.fds[i], "socket:", 7) != 0 && strncmp(after.fds[i], "anon_inode:", 11) != 0)
            TASK_FAIL_("a new descriptor in the program that is not the tracer's: %s", after.fds[i]);
    }
    ASSERT_GE(after.nt, before.nt);
    int flush = 0;
    for (size_t i = 0; i < after.nt; i++) {
        const char *name = after.tasks[i];
        if (count_name(after.tasks, after.nt, name) <= count_name(before.tasks, before.nt, name))
            continue;
        flush += strcmp(name, "synctop-flush") == 0;
        if (strcmp(name, "synctop-flush") != 0 && strcmp(name, "synctop-start") != 0 && strncmp(name, "ZMQbg/", 6) != 0)
            TASK_FAIL_("a new thread in the program that is not the tracer's: %s", name);
    }
    ASSERT_EQ(flush, 1);
    fprintf(stderr, "inject: the program has %zu more descriptors and %zu more threads, all the tracer's\n",
            after.nfd - before.nfd, after.nt - before.nt);

    result res = finish_checked(&t);
    fprintf(stderr, "inject: the program ran %llu iterations, checksum %s as untraced; its loop paused %.3f ms "
                    "for the injection (under 1 ms: 0) by its own clock; its longest gap from any cause: %.3f ms\n",
            res.iterations, res.sum, pause_seen_ms(res.out, r.held_at_ns), res.gap / 1e3);
    free(res.out);
}

/* Whether the process has the same descriptors and threads now as in the snapshot (by what they
 * are: descriptor targets, thread names). */
static int same_as(snapshot *now, snapshot *before) {
    if (now->nfd != before->nfd || now->nt != before->nt)
        return 0;
    for (size_t i = 0; i < now->nfd; i++)
        if (count_name(now->fds, now->nfd, now->fds[i]) != count_name(before->fds, before->nfd, now->fds[i]))
            return 0;
    for (size_t i = 0; i < now->nt; i++)
        if (count_name(now->tasks, now->nt, now->tasks[i]) != count_name(before->tasks, before->nt, now->tasks[i]))
            return 0;
    return 1;
}

/* That the process has the same descriptors and threads as in the snapshot, with what differs said.
 * A stopped tracer's flush thread ends by itself once it has said it is done: it may still be on
 * its way out when the stop returns, so the process is given a few seconds to be as it was. */
static void assert_same_as(long pid, snapshot *before, const char *when) {
    static snapshot now;
    snapshot_take(pid, &now);
    for (int i = 0; i < 500 && !same_as(&now, before); i++) {
        task_sleep_ms(10);
        snapshot_take(pid, &now);
    }
    for (size_t i = 0; i < now.nfd; i++)
        if (count_name(now.fds, now.nfd, now.fds[i]) != count_name(before->fds, before->nfd, now.fds[i]))
            TASK_FAIL_("%s: the program has a descriptor it did not have before: %s", when, now.fds[i]);
    for (size_t i = 0; i < now.nt; i++)
        if (count_name(now.tasks, now.nt, now.tasks[i]) != count_name(before->tasks, before->nt, now.tasks[i]))
            TASK_FAIL_("%s: the program has a thread it did not have before: %s", when, now.tasks[i]);
    ASSERT_EQ(now.nfd, before->nfd);
    ASSERT_EQ(now.nt, before->nt);
}

/* The resident memory of a process, in KiB (VmRSS), 0 when unknown. */
static long rss_kib(long pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    char *t = read_text(path);
    const char *v = strstr(t, "VmRSS:");
    long kib = v ? strtol(v + 6, NULL, 10) : 0;
    free(t);
    return kib;
}

/* Attach, receive, detach, as often as SYNCTOP_TEST_CYCLES says (80 by default: more than the
 * activity buffers the tracer may hold, SYNCTOP_MAX_BUFFERS' 64, so that a buffer a stop fails to
 * give back runs the pool dry and the kernels stop arriving; bench/attach_cycles.sh asks for 1000):
 * each detach leaves the program with the threads and descriptors it had before the first attach,
 * each attach after a detach starts the tracer that is there (nothing loaded twice) and its events
 * arrive, and the program computes what it computes untraced. */
TEST(inject_detach_stops_the_tracer_and_attach_starts_it_again) {
    NEED_PTRACE();
    const char *env = getenv("SYNCTOP_TEST_CYCLES");
    unsigned cycles = env != NULL && atoi(env) > 0 ? (unsigned)atoi(env) : 80;
    target t;
    start_target(&t, INJECT_TARGET, "run");
    static snapshot before;
    snapshot_take(t.pid, &before);

    uint64_t worst_attach = 0, worst_detach = 0, sum_attach = 0, sum_detach = 0;
    unsigned checked = 0;
    long rss_first = 0, rss_last = 0;
    for (unsigned c = 0; c < cycles; c++) {
        ij_report r = inject_ok(t.pid);
        ASSERT_EQ(r.loaded, c == 0);
        assert_running_untraced(t.pid);
        /* Events on the first and the last cycle, and every 100th (receiving takes a while). */
        if (c == 0 || c + 1 == cycles || c % 100 == 0) {
            size_t apis, kernels;
            expect_events(r.endpoint, t.pid, &apis, &kernels);
            if (kernels == 0)
                TASK_FAIL_("cycle %u: %zu blocking calls but no kernel received", c + 1, apis);
            checked++;
        }
        ij_report d;
        err_msg err = {{0}};
        int rc = ij_detach(t.pid, NULL, &d, &err);
        if (rc != 0)
            TASK_FAIL_("cycle %u: ij_detach: %d: %s", c, rc, err.msg);
        assert_running_untraced(t.pid);
        ASSERT(tp_endpoint_is_live(r.endpoint) != 1);
        char when[64];
        snprintf(when, sizeof when, "after detach %u", c + 1);
        assert_same_as(t.pid, &before, when);
        rss_last = rss_kib(t.pid);
        if (c == 0)
            rss_first = rss_last;
        worst_attach = r.longest_pause_ns > worst_attach ? r.longest_pause_ns : worst_attach;
        worst_detach = d.longest_pause_ns > worst_detach ? d.longest_pause_ns : worst_detach;
        sum_attach += r.longest_pause_ns;
        sum_detach += d.longest_pause_ns;
    }
    /* Nothing runs any more: a second detach says so and stops nothing. */
    ij_report d;
    err_msg err = {{0}};
    ASSERT_EQ(ij_detach(t.pid, NULL, &d, &err), IJ_NOT_TRACING);

    result res = finish_checked(&t);
    fprintf(stderr,
            "inject: %u attach/detach cycles (events checked in %u): main thread held at attach %.3f ms mean, "
            "%.3f ms at most; at detach %.3f ms mean, %.3f ms at most; the program's longest gap %.3f ms; "
            "%llu iterations, checksum as untraced; its resident memory after the first detach %ld KiB, after "
            "the last %ld KiB\n",
            cycles, checked, sum_attach / 1e6 / cycles, worst_attach / 1e6, sum_detach / 1e6 / cycles,
            worst_detach / 1e6, res.gap / 1e3, res.iterations, rss_first, rss_last);
    free(res.out);
}

/* The tracer binds its socket before it turns CUPTI's activity kinds on, which a real CUPTI can
 * take a while to do (here 200 ms a kind). An attach that returned as soon as the socket answered
 * left a detach right after it refused ("not tracing") while the start went on, and the process
 * traced after all: attach returns once the start is done, and the detach that follows stops it. */
TEST(inject_attach_returns_once_the_start_is_done) {
    NEED_PTRACE();
    setenv("SYNCTOP_STANDIN_ENABLE_MS", "200", 1);
    target t;
    start_target(&t, INJECT_TARGET, "run");
    unsetenv("SYNCTOP_STANDIN_ENABLE_MS");
    ij_report r = inject_ok(t.pid);
    ij_report d;
    err_msg err = {{0}};
    int rc = ij_detach(t.pid, NULL, &d, &err);
    if (rc != 0)
        TASK_FAIL_("ij_detach right after the attach: %d: %s", rc, err.msg);
    assert_running_untraced(t.pid);
    ASSERT(tp_endpoint_is_live(r.endpoint) != 1);
    int starting = 0;
    for (int i = 0; i < 200; i++) { /* the tracer's threads end with the detach: none comes back */
        char dir[64];
        static char tasks[64][128];
        snprintf(dir, sizeof dir, "/proc/%ld/task", (long)t.pid);
        size_t n = list_dir(dir, tasks, 64, 0);
        starting = 0;
        for (size_t k = 0; k < n; k++)
            starting += strncmp(tasks[k], "synctop-", 8) == 0;
        if (starting != 0)
            break;
        task_sleep_ms(5);
    }
    ASSERT_EQ(starting, 0);
    ASSERT(tp_endpoint_is_live(r.endpoint) != 1);
    result res = finish_checked(&t);
    free(res.out);
}

/* A viewer connected when the tracer is stopped gets what it still held and the end of the
 * producer (the last batch says so), so it knows the process is no longer traced. */
TEST(inject_detach_ends_the_stream_for_a_connected_viewer) {
    NEED_PTRACE();
    target t;
    start_target(&t, INJECT_TARGET, "run");
    ij_report r = inject_ok(t.pid);
    err_msg err = {{0}};
    tp_sub_opts so = {0};
    tp_sub *sub = tp_sub_new(&so, &err);
    ASSERT_NOT_NULL(sub);
    ASSERT_OK(tp_sub_connect(sub, r.endpoint, &err));
    int detached = 0, ended = 0;
    size_t apis_before = 0, apis_after = 0;
    for (int i = 0; i < 1500 && !ended; i++) {
        tp_sub_msg msg;
        int rc = tp_sub_recv(sub, &msg, 20, &err);
        ASSERT(rc >= 0);
        if (rc > 0) {
            tp_dec d;
            memset(&d, 0, sizeof d);
            if (tp_dec_open(&d, msg.data, msg.len, &err) != 0)
                continue;
            const tp_record *rec;
            while ((rec = tp_dec_next_record(&d)) != NULL)
                if (rec->head.kind == TP_K_API && (rec->api.flags & TP_F_BLOCKING))
                    (detached ? &apis_after : &apis_before)[0]++;
            ended = (d.hdr.flags & TP_BF_END) != 0;
            tp_dec_free(&d);
        }
        if (!detached && apis_before >= 3) {
            ij_report dr;
            ASSERT_OK(ij_detach(t.pid, NULL, &dr, &err));
            detached = 1;
        }
    }
    tp_sub_destroy(&sub);
    ASSERT_EQ(detached, 1);
    ASSERT_EQ(ended, 1);
    fprintf(stderr, "inject: %zu blocking calls before the detach, %zu in the last batches, then the end\n",
            apis_before, apis_after);
    char *o = finish_target(&t);
    free(o);
}

/* Another client holds CUPTI (a profiler): the tracer loads, cannot subscribe, and changes
 * nothing; attach says why, read from the tracer; the program goes on as before, with no thread or
 * descriptor of the tracer's. */
TEST(inject_says_when_another_profiler_holds_cupti) {
    NEED_PTRACE();
    target t;
    start_target(&t, INJECT_TARGET, "held");
    static snapshot before;
    snapshot_take(t.pid, &before);

    ij_opts o = {.mode = "on-demand"};
    ij_report r;
    err_msg err = {{0}};
    ASSERT_EQ(ij_inject(t.pid, TRACER_SO, &o, &r, &err), ERR_IO);
    ASSERT_STR_CONTAINS(err.msg, "another profiler");
    ASSERT_STR_CONTAINS(err.msg, "does not publish");
    fprintf(stderr, "inject: refused as it should: %s\n", err.msg);
    assert_running_untraced(t.pid);
    assert_same_as(t.pid, &before, "after the refused start");
    /* Nothing runs: detach has nothing to stop. */
    ij_report d;
    ASSERT_EQ(ij_detach(t.pid, NULL, &d, &err), IJ_NOT_TRACING);

    result res = finish_checked(&t);
    free(res.out);
    char *e = read_text(t.err);
    ASSERT_STR_EQ(e, ""); /* nothing said on the program's stderr */
    free(e);
}

/* What /proc/PID/task/PID/FILE says after "key" (a number), -1 when it cannot be read. */
static long long main_thread_number(long pid, const char *file, const char *key) {
    char path[128];
    snprintf(path, sizeof path, "/proc/%ld/task/%ld/%s", pid, pid, file);
    char *text = read_text(path);
    const char *at = key[0] ? strstr(text, key) : text;
    long long v = at != NULL && at[strlen(key)] != '\0' ? strtoll(at + strlen(key), NULL, 10) : -1;
    if (at != NULL && strncmp(at + strlen(key), "running", 7) == 0)
        v = -1;
    free(text);
    return v;
}

/* Waits until the target's main thread is in block()'s loop: inside its read or its nanosleep, as
 * the kernel says (/proc/PID/task/PID/syscall starts with the call's number while it is in one). */
static void wait_in_block_loop(long pid) {
    for (int i = 0; i < 20000; i++) {
        long long nr = main_thread_number(pid, "syscall", "");
        if (nr == SYS_read || nr == SYS_clock_nanosleep)
            return;
        task_sleep_ms(1);
    }
    TASK_FAIL_("the target's main thread never blocked in read or clock_nanosleep");
}

/* Waits until the target's main thread has blocked n more times (each read that waits for the
 * feeder and each nanosleep gives up the CPU once: voluntary context switches). */
static void wait_blocked_more(long pid, long long n) {
    long long from = main_thread_number(pid, "status", "voluntary_ctxt_switches:");
    ASSERT_GE(from, 0);
    for (int i = 0; i < 60000; i++) {
        if (main_thread_number(pid, "status", "voluntary_ctxt_switches:") >= from + n)
            return;
        task_sleep_ms(1);
    }
    TASK_FAIL_("the target's main thread did not block %lld more times", n);
}

/* A thread stopped inside a blocking read or sleep gets it back whole: the kernel restarts the
 * call with its own arguments once the registers are put back, and nothing returns EINTR early. */
TEST(inject_into_a_thread_blocked_in_a_system_call) {
    NEED_PTRACE();
    target t;
    ij_report r;
    /* Nearly always it is caught inside one; when not, another program is tried. */
    for (int tries = 0;; tries++) {
        start_target(&t, INJECT_TARGET, "block");
        wait_in_block_loop(t.pid);
        r = inject_ok(t.pid);
        assert_running_untraced(t.pid);
        if (r.held_in_syscall == SYS_read || r.held_in_syscall == SYS_clock_nanosleep)
            break;
        ASSERT_LT(tries, 5);
        free(finish_target(&t));
    }
    /* then a few dozen more reads and sleeps, each checked by the target: 40 blocking calls at
     * least, 20 of them reads (they alternate), before it is told to stop */
    wait_blocked_more(t.pid, 40);
    char *o = finish_target(&t);
    unsigned long long reads = 0, wrong = 1, eintr = 1, shorts = 1;
    const char *line = strstr(o, "reads=");
    ASSERT_NOT_NULL(line);
    ASSERT_EQ(sscanf(line, "reads=%llu wrong=%llu eintr=%llu short=%llu", &reads, &wrong, &eintr, &shorts), 4);
    ASSERT_GT(reads, 10);
    ASSERT_EQ(wrong, 0);
    ASSERT_EQ(eintr, 0);
    ASSERT_EQ(shorts, 0);
    fprintf(stderr, "inject: stopped in system call %ld; then %llu reads and as many sleeps, none cut short; the "
                    "thread was held %.3f ms\n",
            r.held_in_syscall, reads, r.longest_pause_ns / 1e6);
    free(o);
}

TEST(inject_reports_why_dlopen_failed_and_leaves_the_program_whole) {
    NEED_PTRACE();
    /* A library that needs a symbol nothing defines: dlopen fails in the program, and says why
     * through dlerror. */
    target t;
    start_target(&t, INJECT_TARGET, "run");
    ij_opts o = {.mode = "on-demand"};
    ij_report r;
    err_msg err = {{0}};
    ASSERT_EQ(ij_inject(t.pid, INJECT_BADLIB, &o, &r, &err), ERR_IO);
    ASSERT_STR_CONTAINS(err.msg, "could not load the tracer");
    ASSERT_STR_CONTAINS(err.msg, "synctop_test_nowhere");
    assert_running_untraced(t.pid);
    free(finish_checked(&t).out);
}

static void kill_at(void *ctx, ij_step step, long pid) {
    if (step == *(ij_step *)ctx)
        kill((pid_t)pid, SIGKILL);
}

static void expect_exit_during_injection(ij_step at) {
    target t;
    start_target(&t, INJECT_TARGET, "run");
    ij_opts o = {.mode = "on-demand", .hook = kill_at, .hook_ctx = &at};
    ij_report r;
    err_msg err = {{0}};
    uint64_t t0 = (uint64_t)time(NULL);
    ASSERT_EQ(ij_inject(t.pid, TRACER_SO, &o, &r, &err), ERR_NOENT);
    ASSERT_STR_CONTAINS(err.msg, "exited");
    ASSERT_LE((uint64_t)time(NULL) - t0, 10);
    waitpid(t.pid, NULL, WNOHANG); /* reaped already, or now */
}

TEST(inject_process_exits_while_stopped) {
    NEED_PTRACE();
    expect_exit_during_injection(IJ_STEP_STOPPED);
}

TEST(inject_process_exits_after_dlopen) {
    NEED_PTRACE();
    expect_exit_during_injection(IJ_STEP_LOADED);
}

TEST(inject_process_that_exits_at_once) {
    NEED_PTRACE();
    for (int i = 0; i < 5; i++) {
        target t;
        start_target(&t, INJECT_TARGET, "exit");
        task_sleep_ms(i * 3);
        ij_report r;
        err_msg err = {{0}};
        /* gone before, during, or it exited before the tracer could start: said why; or, where it
         * was slow to start (a loaded machine), the tracer got in first */
        int rc = ij_inject(t.pid, TRACER_SO, NULL, &r, &err);
        if (rc != 0)
            ASSERT(err.msg[0] != '\0');
        waitpid(t.pid, NULL, 0);
    }
}

TEST(inject_refuses_a_traced_process) {
    NEED_PTRACE();
    target t;
    start_target(&t, INJECT_TARGET, "run");
    ASSERT_OK((int)ptrace(PTRACE_SEIZE, t.pid, NULL, NULL));
    ij_report r;
    err_msg err = {{0}};
    ASSERT_EQ(ij_inject(t.pid, TRACER_SO, NULL, &r, &err), ERR_EXIST);
    ASSERT_STR_CONTAINS(err.msg, "already traced by process");
    /* A seized thread is detached from a stop. */
    ASSERT_OK((int)ptrace(PTRACE_INTERRUPT, t.pid, NULL, NULL));
    ASSERT_EQ(waitpid(t.pid, NULL, __WALL), t.pid);
    ASSERT_OK((int)ptrace(PTRACE_DETACH, t.pid, NULL, NULL));
    free(finish_target(&t));
}

TEST(inject_refuses_a_static_program) {
#ifdef INJECT_TARGET_STATIC
    NEED_PTRACE();
    target t;
    start_target(&t, INJECT_TARGET_STATIC, "run");
    ij_report r;
    err_msg err = {{0}};
    ASSERT_EQ(ij_inject(t.pid, TRACER_SO, NULL, &r, &err), ERR_UNSUPPORTED);
    ASSERT_STR_CONTAINS(err.msg, "statically linked");
    assert_running_untraced(t.pid);
    free(finish_target(&t));
#else
    fprintf(stderr, "skipped: this toolchain cannot link a static program\n");
#endif
}

/* A process in seccomp's strict mode would be killed by the first system call the load makes: it is
 * refused before it is touched, and runs on untraced. */
TEST(inject_refuses_a_process_in_seccomp_strict_mode) {
    NEED_PTRACE();
    int ready[2];
    ASSERT_OK(pipe(ready));
    pid_t c = fork();
    ASSERT(c >= 0);
    if (c == 0) {
        close(ready[0]);
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0) != 0)
            _exit(3);
        if (write(ready[1], "s", 1) != 1) /* write is allowed */
            syscall(SYS_exit, 4);
        for (volatile unsigned long spin = 0;; spin++) /* no system call from here on */
            ;
    }
    close(ready[1]);
    char b = 0;
    ASSERT_EQ(read(ready[0], &b, 1), 1);
    close(ready[0]);
    ij_status st;
    err_msg err = {{0}};
    ASSERT_OK(ij_status_read(c, &st, &err));
    ASSERT_EQ(st.seccomp, 1);
    ij_report r;
    ASSERT_EQ(ij_inject(c, TRACER_SO, NULL, &r, &err), ERR_PERM);
    ASSERT_STR_CONTAINS(err.msg, "strict mode");
    ASSERT_EQ(kill(c, 0), 0);
    assert_running_untraced(c);
    kill(c, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(c, &status, 0), c);
    ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL); /* it was alive until then */
}

TEST(inject_refuses_another_users_process) {
    if (getuid() != 0)
        TASK_SKIP("only root can start a process of another user here (the decision itself is tested in "
                  "inject_refuses_other_users_traced_stopped_and_exited_processes)");
    pid_t c = fork();
    ASSERT(c >= 0);
    if (c == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(3);
        for (int i = 0; i < 600; i++)
            sleep(1);
        _exit(0);
    }
    task_sleep_ms(100);
    ij_report r;
    err_msg err = {{0}};
    ASSERT_EQ(ij_inject(c, TRACER_SO, NULL, &r, &err), ERR_PERM);
    ASSERT_STR_CONTAINS(err.msg, "not as you");
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
}

/* The kernel's own refusal, as a user without CAP_SYS_PTRACE meets it: a process of the same user
 * that made itself undumpable. Said with what the kernel checks. */
TEST(inject_says_why_the_kernel_refused) {
    NEED_PTRACE();
    if (getuid() != 0)
        TASK_SKIP("only root can drop to a user without CAP_SYS_PTRACE here (the messages themselves are "
                  "tested in inject_says_what_allows_ptrace)");
    int fds[2];
    ASSERT_OK(pipe(fds));
    fflush(NULL);
    pid_t a = fork();
    ASSERT(a >= 0);
    if (a == 0) {
        close(fds[0]);
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(3);
        pid_t b = fork();
        if (b == 0) {
            prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
            for (int i = 0; i < 600; i++)
                sleep(1);
            _exit(0);
        }
        usleep(100000);
        ij_report r;
        err_msg err = {{0}};
        int rc = ij_inject(b, TRACER_SO, NULL, &r, &err);
        if (write(fds[1], err.msg, strlen(err.msg)) < 0)
            rc = 1;
        kill(b, SIGKILL);
        waitpid(b, NULL, 0);
        _exit(rc == ERR_PERM ? 0 : 4);
    }
    close(fds[1]);
    char msg[600] = "";
    ssize_t n = read(fds[0], msg, sizeof msg - 1);
    msg[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    int st = 0;
    ASSERT_EQ(waitpid(a, &st, 0), a);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        TASK_FAIL_("expected a refusal, got status %d: %s", st, msg);
    ASSERT_STR_CONTAINS(msg, "undumpable");
    fprintf(stderr, "inject: refused with: %s\n", msg);
}

/* ---- the command ---- */

/* synctop's command line: the binary, then args (NULL-terminated, 14 at most). */
static void synctop_argv(const char *const *args, const char *argv[16]) {
    size_t n = 0;
    argv[n++] = task_synctop();
    for (size_t i = 0; args[i] != NULL && n < 15; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
}

static int run_synctop(const char *const *args, const char *out, const char *err) {
    const char *argv[16];
    synctop_argv(args, argv);
    return task_wait_exit(task_spawn(argv, out, err), 60);
}

/* `synctop attach PID --yes --inject-only`: its exit status in *rc, its stderr (to free). */
static char *attach_inject_only(long pid, int *rc) {
    char p[32];
    snprintf(p, sizeof p, "%ld", pid);
    const char *err = task_path("cli_err.txt");
    const char *yes[] = {"attach", p, "--yes", "--inject-only", NULL};
    *rc = run_synctop(yes, task_path("cli_out.txt"), err);
    return read_text(err);
}

/* A process that has not loaded the CUDA driver has nothing to trace: attach refuses and loads
 * nothing. */
TEST(inject_attach_refuses_a_process_without_cuda) {
    NEED_PTRACE();
    target t;
    without_driver = 1;
    start_target(&t, INJECT_TARGET, "run");
    without_driver = 0;
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)t.pid);
    const char *out = task_path("cli_out.txt"), *err = task_path("cli_err.txt");
    const char *yes[] = {"attach", pid, "--yes", "--inject-only", NULL};
    ASSERT_EQ(run_synctop(yes, out, err), 1);
    char *e = read_text(err);
    ASSERT_STR_CONTAINS(e, "has not loaded libcuda");
    free(e);
    ij_probe_info p;
    err_msg em;
    ASSERT_OK(ij_probe(t.pid, &p, &em));
    ASSERT_EQ(p.tracer_loaded, 0);
    ASSERT_EQ(p.cuda_loaded, 0);
    char *o = finish_target(&t);
    free(o);
}

/* A program under a seccomp filter (a container's profile): the confirmation says so, and with a
 * filter that allows what the load and the tracer do, the tracer runs and its events come. */
TEST(inject_attach_says_the_seccomp_filters_and_loads_under_them) {
    NEED_PTRACE();
    target t;
    start_target(&t, INJECT_TARGET, "sandboxed");
    ij_probe_info p;
    err_msg em;
    ASSERT_OK(ij_probe(t.pid, &p, &em));
    ASSERT_EQ(p.seccomp_filters, 1);
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)t.pid);
    const char *out = task_path("cli_out.txt"), *err = task_path("cli_err.txt");
    const char *yes[] = {"attach", pid, "--yes", "--inject-only", NULL};
    int rc = run_synctop(yes, out, err);
    char *e = read_text(err);
    if (rc != 0)
        TASK_FAIL_("synctop attach --yes --inject-only: %d: %s", rc, e);
    ASSERT_STR_CONTAINS(e, "runs under 1 seccomp filter, as in a container");
    ASSERT_STR_CONTAINS(e, "loaded and started the tracer in process");
    free(e);
    char ep[TP_ENDPOINT_MAX];
    ASSERT_OK(tp_endpoint_for_pid(t.pid, ep, sizeof ep, &em));
    size_t apis, kernels;
    expect_events(ep, t.pid, &apis, &kernels);
    ASSERT_GE(kernels, 1);
    const char *detach[] = {"detach", pid, NULL};
    ASSERT_EQ(run_synctop(detach, out, err), 0);
    assert_running_untraced(t.pid);
    free(finish_target(&t));
}

TEST(inject_attach_asks_first_then_loads_the_tracer) {
    NEED_PTRACE();
    target t;
    start_target(&t, INJECT_TARGET, "run");
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)t.pid);
    const char *out = task_path("cli_out.txt"), *err = task_path("cli_err.txt");

    /* No terminal to ask on, no --yes: refused, the program untouched. */
    const char *ask[] = {"attach", pid, "--inject-only", NULL};
    ASSERT_EQ(run_synctop(ask, out, err), 1);
    char *e = read_text(err);
    ASSERT_STR_CONTAINS(e, "--yes");
    ASSERT_STR_CONTAINS(e, "libsynctop-tracer.so");
    free(e);
    ij_probe_info p;
    err_msg em;
    ASSERT_OK(ij_probe(t.pid, &p, &em));
    ASSERT_EQ(p.tracer_loaded, 0);

    const char *yes[] = {"attach", pid, "--yes", "--inject-only", NULL};
    int rc = run_synctop(yes, out, err);
    e = read_text(err);
    if (rc != 0)
        TASK_FAIL_("synctop attach --yes --inject-only: %d: %s", rc, e);
    ASSERT_STR_CONTAINS(e, "loaded and started the tracer in process");
    free(e);
    ASSERT_OK(ij_probe(t.pid, &p, &em));
    ASSERT_EQ(p.tracer_loaded, 1);
    assert_running_untraced(t.pid);

    /* Once it runs, attach only attaches: nothing is loaded twice. */
    ASSERT_EQ(run_synctop(ask, out, err), 0);
    e = read_text(err);
    ASSERT_STR_CONTAINS(e, "already has the tracer");
    free(e);

    /* detach stops it: its threads go, the library stays. */
    const char *detach[] = {"detach", pid, NULL};
    ASSERT_EQ(run_synctop(detach, out, err), 0);
    e = read_text(err);
    ASSERT_STR_CONTAINS(e, "stopped the tracer in process");
    free(e);
    ASSERT_OK(ij_probe(t.pid, &p, &em));
    ASSERT_EQ(p.tracer_loaded, 1);
    char ep[TP_ENDPOINT_MAX];
    ASSERT_OK(tp_endpoint_for_pid(t.pid, ep, sizeof ep, &em));
    ASSERT(tp_endpoint_is_live(ep) != 1);
    ASSERT_EQ(run_synctop(detach, out, err), 0);
    e = read_text(err);
    ASSERT_STR_CONTAINS(e, "not running: nothing to detach");
    free(e);

    /* Stopped, it is started again, after asking as before. */
    ASSERT_EQ(run_synctop(ask, out, err), 1);
    e = read_text(err);
    ASSERT_STR_CONTAINS(e, "has the tracer, not running");
    free(e);
    rc = run_synctop(yes, out, err);
    e = read_text(err);
    if (rc != 0)
        TASK_FAIL_("synctop attach --yes --inject-only (again): %d: %s", rc, e);
    ASSERT_STR_CONTAINS(e, "started the tracer in process");
    free(e);
    ASSERT_EQ(tp_endpoint_is_live(ep), 1);
    free(finish_checked(&t).out);
}

/* A process a debugger holds (here a helper that seized it, as gdb or strace would): attach names
 * the debugger, exits 1 and loads nothing, instead of taking it for a tracer already publishing. */
TEST(inject_attach_names_the_debugger_that_holds_the_process) {
    NEED_PTRACE();
    target t;
    start_target(&t, INJECT_TARGET, "run");
    int ready[2], hold[2];
    ASSERT_OK(pipe(ready));
    ASSERT_OK(pipe(hold));
    fflush(NULL);
    pid_t dbg = fork();
    ASSERT(dbg >= 0);
    if (dbg == 0) {
        close(ready[0]);
        close(hold[1]);
        prctl(PR_SET_NAME, "fake-gdb", 0, 0, 0);
        char ok = ptrace(PTRACE_SEIZE, t.pid, NULL, NULL) == 0 ? 'y' : 'n';
        char b;
        if (write(ready[1], &ok, 1) == 1 && read(hold[0], &b, 1) < 0) /* until the test lets go */
            _exit(1);
        _exit(0); /* a tracer that exits lets its tracee go */
    }
    close(ready[1]);
    close(hold[0]);
    char ok = 0;
    ASSERT_EQ(read(ready[0], &ok, 1), 1);
    close(ready[0]);
    if (ok != 'y') {
        close(hold[1]);
        waitpid(dbg, NULL, 0);
        free(finish_target(&t));
        TASK_SKIP("a helper process may not trace its sibling here (Yama)");
    }
    ij_status st;
    err_msg em = {{0}};
    ASSERT_OK(ij_status_read(t.pid, &st, &em));
    ASSERT_EQ(st.tracer_pid, dbg);

    char want[96];
    int rc;
    char *e = attach_inject_only(t.pid, &rc);
    if (rc != 1)
        TASK_FAIL_("synctop attach of a process a debugger holds exited %d: %s", rc, e);
    snprintf(want, sizeof want, "already traced by process %d (fake-gdb)", (int)dbg);
    ASSERT_STR_CONTAINS(e, want);
    ASSERT(strstr(e, "already has the tracer") == NULL);
    free(e);
    ij_probe_info p;
    ASSERT_OK(ij_probe(t.pid, &p, &em));
    ASSERT_EQ(p.tracer_loaded, 0);

    close(hold[1]);
    ASSERT_EQ(waitpid(dbg, NULL, 0), dbg);
    free(finish_checked(&t).out);
}

/* Runs synctop as the user nobody (uid 65534), its sockets under dir; its exit status. */
static int run_synctop_as_nobody(const char *const *args, const char *dir, const char *out, const char *err) {
    const char *argv[16];
    synctop_argv(args, argv);
    fflush(NULL);
    pid_t c = fork();
    ASSERT(c >= 0);
    if (c == 0) {
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fi = open("/dev/null", O_RDONLY);
        if (fo < 0 || fe < 0 || fi < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0 || dup2(fi, 0) < 0)
            _exit(126);
        if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
            _exit(125);
        setenv("TMPDIR", dir, 1);
        setenv("HOME", dir, 1);
        unsetenv("XDG_RUNTIME_DIR");
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return task_wait_exit(c, 60);
}

/* Another user, facing root's process that is tracing: attach and detach say it is not theirs and
 * exit 1 (they cannot read its mappings, which must not read as "no libcuda" or "no tracer"); the
 * tracer goes on untouched. */
TEST(inject_attach_and_detach_refuse_another_users_tracing_process) {
    NEED_PTRACE();
    if (getuid() != 0)
        TASK_SKIP("only root can run a second user here (the decision itself is tested in "
                  "inject_refuses_other_users_traced_stopped_and_exited_processes)");
    target t;
    start_target(&t, INJECT_TARGET, "run");
    ij_report r = inject_ok(t.pid);
    char dir[] = "/tmp/synctop-nobody-XXXXXX";
    ASSERT_NOT_NULL(mkdtemp(dir));
    ASSERT_OK(chown(dir, 65534, 65534));
    char pid[32], want[160];
    snprintf(pid, sizeof pid, "%d", (int)t.pid);
    snprintf(want, sizeof want, "process %d (inject_target) runs as root (uid 0), not as you (uid 65534)",
             (int)t.pid);
    const char *out = task_path("cli_out.txt"), *err = task_path("cli_err.txt");
    const char *attach[] = {"attach", pid, "--yes", "--inject-only", NULL};
    const char *detach[] = {"detach", pid, NULL};
    const char *const *verbs[] = {attach, detach};
    for (int i = 0; i < 2; i++) {
        int rc = run_synctop_as_nobody(verbs[i], dir, out, err);
        char *e = read_text(err);
        if (rc != 1)
            TASK_FAIL_("synctop %s as another user exited %d: %s", verbs[i][0], rc, e);
        ASSERT_STR_CONTAINS(e, want);
        ASSERT(strstr(e, "libcuda") == NULL && strstr(e, "nothing to detach") == NULL);
        free(e);
    }
    ASSERT_EQ(tp_endpoint_is_live(r.endpoint), 1); /* still tracing */
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ASSERT_OK(system(cmd));
    free(finish_checked(&t).out);
}

/* The loser of two attaches at once is told that another one is in progress, by whom, and exits
 * 1; the winner goes on. The loser runs while the winner holds the process stopped. */
typedef struct loser {
    int rc;
    char *err;
} loser;

static void attach_meanwhile(void *ctx, ij_step step, long pid) {
    loser *l = ctx;
    if (step != IJ_STEP_STOPPED || l->err != NULL)
        return;
    l->err = attach_inject_only(pid, &l->rc);
}

TEST(inject_two_attaches_at_once_the_loser_is_told_another_is_in_progress) {
    NEED_PTRACE();
    target t;
    start_target(&t, INJECT_TARGET, "run");
    loser l = {0};
    ij_opts o = {.mode = "on-demand", .hook = attach_meanwhile, .hook_ctx = &l};
    ij_report r;
    err_msg err = {{0}};
    int rc = ij_inject(t.pid, TRACER_SO, &o, &r, &err);
    if (rc != 0)
        TASK_FAIL_("the first attach: %s (%s)", err.msg, err_str(rc));
    ASSERT_NOT_NULL(l.err);
    if (l.rc != 1)
        TASK_FAIL_("the second attach exited %d: %s", l.rc, l.err);
    char want[128];
    snprintf(want, sizeof want, "another attach or detach of process %d is in progress (process %d, test_inject)",
             (int)t.pid, (int)getpid());
    ASSERT_STR_CONTAINS(l.err, want);
    ASSERT(strstr(l.err, "undumpable") == NULL);
    free(l.err);
    ASSERT_EQ(tp_endpoint_is_live(r.endpoint), 1);
    free(finish_checked(&t).out);
}

#endif /* SYNCTOP_HAVE_TRACER */
