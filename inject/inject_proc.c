/*
 * /proc for injection (inject_proc.h): maps, status, tasks, Yama, and the decisions taken from
 * them. What reads /proc is kept apart from what decides, so the decisions are tested on text.
 */
#include "inject_proc.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- maps ---- */

int ij_maps_parse_line(const char *line, ij_map *m) {
    memset(m, 0, sizeof *m);
    char perms[8];
    int used = 0;
    if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 "%n", &m->start, &m->end, perms,
               &m->offset, &m->dev_major, &m->dev_minor, &m->inode, &used) != 7 ||
        strlen(perms) != 4 || m->end < m->start)
        return ERR_MALFORMED;
    memcpy(m->perms, perms, 5);
    const char *p = line + used;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strcspn(p, "\n");
    if (n >= sizeof m->path)
        return ERR_MALFORMED;
    memcpy(m->path, p, n);
    m->path[n] = '\0';
    return 0;
}

int ij_maps_read(long pid, ij_map **out, size_t *n, err_msg *err) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/maps", pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return err_set(err, errno == ENOENT ? ERR_NOENT : ERR_PERM, "cannot read %s: %s", path, strerror(errno));
    ij_map *maps = NULL;
    size_t count = 0, cap = 0;
    char line[PATH_MAX + 128];
    int rc = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (count == cap) {
            cap = cap ? cap * 2 : 128;
            ij_map *grown = realloc(maps, cap * sizeof *maps);
            if (grown == NULL) {
                rc = err_set(err, ERR_NOMEM, "out of memory");
                break;
            }
            maps = grown;
        }
        if (ij_maps_parse_line(line, &maps[count]) == 0)
            count++;
    }
    fclose(f);
    if (rc == 0 && count == 0)
        rc = err_set(err, ERR_NOENT, "process %ld has no mappings (it has exited)", pid);
    if (rc != 0) {
        free(maps);
        return rc;
    }
    *out = maps;
    *n = count;
    return 0;
}

const ij_map *ij_maps_find(const ij_map *maps, size_t n, uint64_t addr) {
    for (size_t i = 0; i < n; i++)
        if (addr >= maps[i].start && addr < maps[i].end)
            return &maps[i];
    return NULL;
}

const ij_map *ij_maps_file_start(const ij_map *maps, size_t n, const ij_map *f) {
    for (size_t i = 0; i < n; i++)
        if (maps[i].inode == f->inode && maps[i].dev_major == f->dev_major && maps[i].dev_minor == f->dev_minor &&
            maps[i].offset == 0 && strcmp(maps[i].path, f->path) == 0)
            return &maps[i];
    return NULL;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int has_prefix(const char *s, const char *const *prefixes, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strncmp(s, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

int ij_is_system_lib(const char *path) {
    static const char *const libs[] = {"libc.so", "libc-2.", "libdl.so", "libdl-2.", "libpthread.so",
                                       "libpthread-2.", "ld-musl-", "libc.musl-"};
    return path[0] == '/' && has_prefix(base_name(path), libs, sizeof libs / sizeof libs[0]);
}

/* ---- status ---- */

static const char *field(const char *text, const char *name) {
    size_t n = strlen(name);
    for (const char *p = text; p != NULL && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, name, n) == 0 && p[n] == ':')
            return p + n + 1;
    return NULL;
}

int ij_status_parse(const char *text, ij_status *s) {
    memset(s, 0, sizeof *s);
    const char *v;
    if ((v = field(text, "Name")) != NULL) {
        while (*v == ' ' || *v == '\t')
            v++;
        size_t n = strcspn(v, "\n");
        if (n >= sizeof s->name)
            n = sizeof s->name - 1;
        memcpy(s->name, v, n);
    }
    v = field(text, "State");
    if (v == NULL || sscanf(v, " %c", &s->state) != 1)
        return ERR_MALFORMED;
    v = field(text, "PPid");
    if (v == NULL || sscanf(v, "%ld", &s->ppid) != 1)
        return ERR_MALFORMED;
    v = field(text, "TracerPid");
    if (v == NULL || sscanf(v, "%ld", &s->tracer_pid) != 1)
        return ERR_MALFORMED;
    v = field(text, "Uid");
    if (v == NULL || sscanf(v, "%ld %ld %ld %ld", &s->uid[0], &s->uid[1], &s->uid[2], &s->uid[3]) != 4)
        return ERR_MALFORMED;
    v = field(text, "Gid");
    if (v == NULL || sscanf(v, "%ld %ld %ld %ld", &s->gid[0], &s->gid[1], &s->gid[2], &s->gid[3]) != 4)
        return ERR_MALFORMED;
    if ((v = field(text, "CapEff")) != NULL)
        sscanf(v, "%" SCNx64, &s->cap_eff);
    if ((v = field(text, "Threads")) != NULL)
        sscanf(v, "%d", &s->threads);
    s->seccomp = s->seccomp_filters = -1;
    if ((v = field(text, "Seccomp")) != NULL && sscanf(v, "%d", &s->seccomp) != 1)
        s->seccomp = -1;
    if ((v = field(text, "Seccomp_filters")) != NULL && sscanf(v, "%d", &s->seccomp_filters) != 1)
        s->seccomp_filters = -1;
    return 0;
}

static int read_small(const char *path, char *buf, size_t len) {
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    return 0;
}

int ij_status_read(long pid, ij_status *s, err_msg *err) {
    char path[64], text[4096];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    if (read_small(path, text, sizeof text) != 0)
        return err_set(err, errno == ENOENT ? ERR_NOENT : ERR_PERM, "no process %ld", pid);
    if (ij_status_parse(text, s) != 0)
        return err_set(err, ERR_MALFORMED, "%s: unexpected contents", path);
    return 0;
}

int ij_yama_scope(void) {
    char buf[16];
    int v;
    if (read_small("/proc/sys/kernel/yama/ptrace_scope", buf, sizeof buf) != 0 || sscanf(buf, "%d", &v) != 1)
        return -1;
    return v;
}

/* ---- access ---- */

int ij_access_check_owner(const ij_access *a, err_msg *err) {
    const ij_status *t = &a->target;
    for (int i = 0; i < 3; i++) {
        if (t->uid[i] == a->my_uid)
            continue;
        char user[96];
        if (a->target_user != NULL)
            snprintf(user, sizeof user, "%s (uid %ld)", a->target_user, t->uid[i]);
        else
            snprintf(user, sizeof user, "uid %ld", t->uid[i]);
        return err_set(err, ERR_PERM,
                       "process %ld (%s) runs as %s, not as you (uid %ld): synctop loads, starts and stops its "
                       "tracer only in your own processes; run synctop as that user (nothing was done)",
                       a->pid, t->name, user, a->my_uid);
    }
    return 0;
}

int ij_access_precheck(const ij_access *a, err_msg *err) {
    const ij_status *t = &a->target;
    if (t->state == 'Z' || t->state == 'X')
        return err_set(err, ERR_NOENT, "process %ld has exited", a->pid);
    if (t->seccomp == 1)
        return err_set(err, ERR_PERM,
                       "process %ld runs in seccomp's strict mode: any system call but read, write and exit "
                       "would end it, and loading a library makes many; start the program under `synctop run` "
                       "instead",
                       a->pid);
    int rc = ij_access_check_owner(a, err);
    if (rc != 0)
        return rc;
    if (t->tracer_pid != 0 && a->tracer_name != NULL && strcmp(a->tracer_name, "synctop") == 0)
        return err_set(err, ERR_EXIST,
                       "process %ld is held by another synctop (process %ld) attaching to it or detaching from "
                       "it right now: let that finish, then try again",
                       a->pid, t->tracer_pid);
    if (t->tracer_pid != 0)
        return err_set(err, ERR_EXIST,
                       "process %ld is already traced by process %ld (%s): a debugger or another tool (gdb, "
                       "strace) holds it; detach that first (nothing was done)",
                       a->pid, t->tracer_pid, a->tracer_name ? a->tracer_name : "?");
    if (t->state == 'T' || t->state == 't')
        return err_set(err, ERR_INVAL,
                       "process %ld is stopped (Ctrl-Z or SIGSTOP): resume it first (kill -CONT %ld)", a->pid,
                       a->pid);
    return 0;
}

int ij_access_explain_eperm(const ij_access *a, err_msg *err) {
    static const char cap_hint[] = "give synctop the capability (sudo setcap cap_sys_ptrace+ep "
                                   "\"$(command -v synctop)\")";
    if (a->yama == 3)
        return err_set(err, ERR_PERM,
                       "the kernel forbids tracing any process (kernel.yama.ptrace_scope is 3, fixed until the "
                       "next reboot): start the program under `synctop run` instead");
    if (a->yama == 2 && !a->have_cap_ptrace)
        return err_set(err, ERR_PERM,
                       "only a process with CAP_SYS_PTRACE may trace another here (kernel.yama.ptrace_scope is "
                       "2): %s, or start the program under `synctop run`",
                       cap_hint);
    if (a->yama == 1 && !a->descendant && !a->have_cap_ptrace)
        return err_set(err, ERR_PERM,
                       "a process may only trace its own descendants here (kernel.yama.ptrace_scope is 1): "
                       "`sudo sysctl kernel.yama.ptrace_scope=0` allows tracing any of your processes (until "
                       "the next reboot), or %s, or start the program under `synctop run`",
                       cap_hint);
    if ((a->target.gid[0] != a->my_gid || a->target.gid[1] != a->my_gid || a->target.gid[2] != a->my_gid) &&
        !a->have_cap_ptrace)
        return err_set(err, ERR_PERM,
                       "process %ld runs with another group's privileges (group %ld, a setgid program): only a "
                       "process with CAP_SYS_PTRACE may trace it",
                       a->pid, a->target.gid[1]);
    return err_set(err, ERR_PERM,
                   "the kernel refused to let synctop trace process %ld: it may have made itself undumpable "
                   "(prctl PR_SET_DUMPABLE 0), or a security module (AppArmor, SELinux) or a container's "
                   "seccomp profile forbids ptrace",
                   a->pid);
}

static long parent_of(long pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    if (read_small(path, buf, sizeof buf) != 0)
        return -1;
    const char *close = strrchr(buf, ')'); /* the command name may hold anything */
    long ppid = -1;
    if (close == NULL || sscanf(close + 1, " %*c %ld", &ppid) != 1)
        return -1;
    return ppid;
}

int ij_access_gather(long pid, ij_access *a, char *tracer_name, size_t tn_len, char *user, size_t user_len,
                     err_msg *err) {
    memset(a, 0, sizeof *a);
    a->pid = pid;
    int rc = ij_status_read(pid, &a->target, err);
    if (rc != 0)
        return rc;
    ij_status self;
    if (ij_status_read((long)getpid(), &self, err) != 0)
        memset(&self, 0, sizeof self);
    a->my_uid = (long)getuid();
    a->my_gid = (long)getgid();
    a->have_cap_ptrace = (self.cap_eff >> IJ_CAP_SYS_PTRACE) & 1;
    a->yama = ij_yama_scope();
    long me = (long)getpid();
    long p = a->target.ppid;
    for (int depth = 0; p > 1 && depth < 256; depth++, p = parent_of(p))
        if (p == me) {
            a->descendant = 1;
            break;
        }
    if (a->target.tracer_pid != 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/comm", a->target.tracer_pid);
        if (read_small(path, tracer_name, tn_len) == 0) {
            tracer_name[strcspn(tracer_name, "\n")] = '\0';
            a->tracer_name = tracer_name;
        }
    }
    struct passwd pw, *found = NULL;
    char buf[1024];
    if (getpwuid_r((uid_t)a->target.uid[0], &pw, buf, sizeof buf, &found) == 0 && found != NULL) {
        snprintf(user, user_len, "%s", found->pw_name);
        a->target_user = user;
    }
    return 0;
}

/* ---- safe points ---- */

/* System calls a thread waits in without holding a lock of the C library or the loader; among them
 * restart_syscall, the kernel's continuation of a sleep or timed wait that a stop (an earlier try
 * of ours) interrupted. */
static const long waiting_syscalls[] = {
    SYS_restart_syscall,
    SYS_read,          SYS_readv,          SYS_ioctl,         SYS_futex,       SYS_clock_nanosleep,
    SYS_pselect6,      SYS_ppoll,          SYS_epoll_pwait,   SYS_recvfrom,    SYS_recvmsg,
    SYS_accept4,       SYS_rt_sigsuspend,  SYS_rt_sigtimedwait, SYS_sched_yield, SYS_waitid,
    SYS_wait4,         SYS_nanosleep,      SYS_msgrcv,        SYS_semtimedop,  SYS_io_getevents,
#ifdef SYS_poll
    SYS_poll,
#endif
#ifdef SYS_select
    SYS_select,
#endif
#ifdef SYS_epoll_wait
    SYS_epoll_wait,
#endif
#ifdef SYS_epoll_pwait2
    SYS_epoll_pwait2,
#endif
#ifdef SYS_accept
    SYS_accept,
#endif
#ifdef SYS_pause
    SYS_pause,
#endif
};

/* Code that may hold a lock dlopen, malloc or pthread_create takes. */
static const char *const lock_holders[] = {"libc.so", "libc-2.",  "ld-linux",      "ld-2.",       "ld-musl-",
                                           "libc.musl-", "libdl",  "libpthread",    "libjemalloc", "libtcmalloc",
                                           "libmimalloc", "libstdc++", "libgcc_s"};

int ij_safe_point(const ij_map *maps, size_t n, uint64_t pc, long syscall_nr, err_msg *why) {
    if (syscall_nr >= 0)
        for (size_t i = 0; i < sizeof waiting_syscalls / sizeof waiting_syscalls[0]; i++)
            if (waiting_syscalls[i] == syscall_nr)
                return 1;
    const ij_map *m = ij_maps_find(maps, n, pc);
    if (m == NULL || m->path[0] != '/' ||
        !has_prefix(base_name(m->path), lock_holders, sizeof lock_holders / sizeof lock_holders[0]))
        return 1;
    if (syscall_nr >= 0)
        err_set(why, 0, "in system call %ld from %s", syscall_nr, base_name(m->path));
    else
        err_set(why, 0, "running in %s", base_name(m->path));
    return 0;
}

/* ---- tasks ---- */

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int ij_tasks_read(long pid, long **out, size_t *n, err_msg *err) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/task", pid);
    DIR *d = opendir(path);
    if (d == NULL)
        return err_set(err, ERR_NOENT, "no process %ld", pid);
    long *tids = NULL;
    size_t count = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        if (count == cap) {
            cap = cap ? cap * 2 : 32;
            long *grown = realloc(tids, cap * sizeof *tids);
            if (grown == NULL) {
                free(tids);
                closedir(d);
                return err_set(err, ERR_NOMEM, "out of memory");
            }
            tids = grown;
        }
        tids[count++] = strtol(de->d_name, NULL, 10);
    }
    closedir(d);
    qsort(tids, count, sizeof *tids, cmp_long);
    *out = tids;
    *n = count;
    return 0;
}
