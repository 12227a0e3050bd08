/*
 * Peak memory of a measured step, taken in a process of its own (a benchmark runs itself again with
 * arguments that do only that step and print one line): shared by bench_import, bench_simdjson and
 * bench_store.
 */
#ifndef SYNCTOP_BENCH_CHILD_RSS_H
#define SYNCTOP_BENCH_CHILD_RSS_H

#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* A figure of /proc/self/status in KiB ("VmRSS", "VmHWM"); 0 when not found. */
static inline uint64_t bench_status_kib(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t n = strlen(field);
    unsigned long long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':' && sscanf(line + n + 1, "%llu", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

/* The process's peak resident memory in KiB (VmHWM: unlike getrusage's ru_maxrss, it starts again
 * at exec, rather than at the size of the process that started this one). */
static inline uint64_t bench_peak_rss_kib(void) { return bench_status_kib("VmHWM"); }

/* Runs argv (argv[0] the program's path) with its output into line (n bytes, NUL-terminated).
 * 0 when it wrote something and exited 0, else -1. */
static inline int bench_child_line(char *const argv[], char *line, size_t n) {
    int fd[2];
    if (pipe(fd) != 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    extern char **environ;
    pid_t pid;
    int spawned = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ) == 0;
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    ssize_t got = spawned ? read(fd[0], line, n - 1) : -1;
    close(fd[0]);
    line[got > 0 ? got : 0] = '\0';
    int status = 0;
    if (spawned)
        waitpid(pid, &status, 0);
    return spawned && got > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

#endif
