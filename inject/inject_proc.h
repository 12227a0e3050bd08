/*
 * What /proc says about a process that injection needs, and the decisions taken from it: whose it
 * is, who traces it, whether this user may trace it (and what to change when not), what it has
 * mapped (its C library, the tracer, libcuda), and whether a thread stopped at some instruction is
 * at a point where calling dlopen on it is safe. The parsers and the decisions are pure functions
 * over text and facts, so they are tested without any process.
 */
#ifndef SYNCTOP_INJECT_PROC_H
#define SYNCTOP_INJECT_PROC_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "synctop/error.h"

/* ---- /proc/PID/maps ---- */

typedef struct ij_map {
    uint64_t start, end, offset, inode;
    unsigned dev_major, dev_minor;
    char perms[5];
    char path[PATH_MAX]; /* "" for anonymous memory; may end in " (deleted)" */
} ij_map;

/* One line of /proc/PID/maps; 0, or ERR_MALFORMED. */
int ij_maps_parse_line(const char *line, ij_map *m);
/* Every mapping of the process, in address order (*out malloc'd); 0 or a negative code. */
int ij_maps_read(long pid, ij_map **out, size_t *n, err_msg *err);
/* The mapping holding addr, or NULL. */
const ij_map *ij_maps_find(const ij_map *maps, size_t n, uint64_t addr);

/* The load bias of the file mapped at maps[i] (start of its offset-0 mapping minus that segment's
 * virtual address): found by the caller with the file's ELF; this finds the mapping of offset 0 of
 * the same file (same device and inode). NULL when there is none. */
const ij_map *ij_maps_file_start(const ij_map *maps, size_t n, const ij_map *any_of_file);

/* The C libraries a process maps, where dlopen, pthread_create, getenv... are: libc, libdl,
 * libpthread (older glibc) and musl's. 1 when the file name is one of them. */
int ij_is_system_lib(const char *path);

/* ---- /proc/PID/status ---- */

typedef struct ij_status {
    char name[64];
    char state; /* 'R', 'S', 'D', 'T' (stopped), 't' (tracing stop), 'Z', 'X' */
    long ppid, tracer_pid;
    long uid[4], gid[4]; /* real, effective, saved, filesystem */
    uint64_t cap_eff;
    int threads;
    int seccomp;         /* 0 none, 1 strict mode, 2 filters; -1: the kernel does not say */
    int seccomp_filters; /* how many filters; -1: the kernel does not say */
} ij_status;

/* 0, or ERR_MALFORMED when a field injection needs is missing. */
int ij_status_parse(const char *text, ij_status *s);
int ij_status_read(long pid, ij_status *s, err_msg *err);

/* kernel.yama.ptrace_scope: 0-3, or -1 when the kernel has no Yama. */
int ij_yama_scope(void);

/* ---- may this user trace that process? ---- */

#define IJ_CAP_SYS_PTRACE 19

typedef struct ij_access {
    long pid;
    ij_status target;
    long my_uid, my_gid;       /* real ids of this process */
    int have_cap_ptrace;       /* CAP_SYS_PTRACE in this process's effective set */
    int yama;                  /* ij_yama_scope() */
    int descendant;            /* the target descends from this process */
    const char *tracer_name;   /* the comm of target.tracer_pid, or NULL */
    const char *target_user;   /* the name of target.uid[0], or NULL */
} ij_access;

/* The refusals that come before any ptrace call: another user's process, one already traced (by a
 * debugger, or by another synctop attaching or detaching), a stopped or exited one. 0, or a negative
 * code with the reason and what to do in err. */
int ij_access_precheck(const ij_access *a, err_msg *err);
/* The first of them: another user's process (any of its real, effective or saved uids not this
 * user's), refused with ERR_PERM even for root. 0, or ERR_PERM with the reason in err. */
int ij_access_check_owner(const ij_access *a, err_msg *err);
/* Why ptrace was refused (EPERM) and what allows it: Yama's scope, capabilities. Always fills
 * err; returns ERR_PERM. */
int ij_access_explain_eperm(const ij_access *a, err_msg *err);
/* Fills a from /proc for pid and this process; 0 or a negative code. */
int ij_access_gather(long pid, ij_access *a, char *tracer_name, size_t tn_len, char *user, size_t user_len,
                     err_msg *err);

/* ---- safe points ---- */

/* Whether a thread stopped at pc, inside system call nr (-1: not in one), may be made to call
 * dlopen and pthread_create: not when it was running inside the C library, the dynamic loader or
 * an allocator (it may hold their locks, and the call would wait for itself), unless it was
 * waiting in a system call that waits for something else (a futex, a sleep, poll, read, ioctl...),
 * where no such lock is held. 1 safe, 0 not, with what it was doing in why. */
int ij_safe_point(const ij_map *maps, size_t n, uint64_t pc, long syscall_nr, err_msg *why);

/* ---- tasks ---- */

/* The thread ids of a process, sorted (*out malloc'd); 0 or a negative code. */
int ij_tasks_read(long pid, long **out, size_t *n, err_msg *err);

#endif
