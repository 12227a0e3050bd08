/*
 * Choosing and claiming this process's trace file (record_path.h).
 */
#include "record_path.h"
#include "synctop/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Expands %p, %r and %%; *own: the name has the process's id or rank in it. 0, or -1 when it does
 * not fit. */
static int expand(const char *spec, int rank, char *out, size_t outlen, int *own) {
    size_t n = 0;
    *own = 0;
    for (const char *s = spec; *s != '\0'; s++) {
        char num[32] = "";
        const char *piece = NULL;
        size_t len = 1;
        if (s[0] == '%' && (s[1] == 'p' || s[1] == 'r')) {
            long v = s[1] == 'r' && rank >= 0 ? rank : (long)getpid();
            snprintf(num, sizeof num, "%ld", v);
            piece = num;
            len = strlen(num);
            *own = 1;
            s++;
        } else if (s[0] == '%' && s[1] == '%') {
            piece = "%";
            s++;
        } else {
            piece = s;
        }
        if (n + len >= outlen)
            return -1;
        memcpy(out + n, piece, len);
        n += len;
    }
    out[n] = '\0';
    return 0;
}

/* path with tag inserted before the extension of its last component ("t.trace" -> "t.TAG.trace"),
 * or appended when it has none. */
static int insert_tag(const char *path, const char *tag, char *out, size_t outlen) {
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(slash ? slash + 1 : path, '.');
    if (dot == NULL || dot == (slash ? slash + 1 : path))
        dot = path + strlen(path);
    int n = snprintf(out, outlen, "%.*s.%s%s", (int)(dot - path), path, tag, dot);
    return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

/* When this process's parent started, in CLOCK_REALTIME seconds; 0 when unknown. */
static double parent_start(void) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)getppid());
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* The command name may hold spaces and parentheses: fields start after the last ')'. */
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return 0;
    unsigned long long ticks = 0;
    /* after ")": state is field 3; starttime is field 22 */
    int field = 2;
    for (p++; *p != '\0' && field < 22; p++)
        if (*p == ' ')
            field++;
    if (field != 22 || sscanf(p, "%llu", &ticks) != 1)
        return 0;
    f = fopen("/proc/stat", "re");
    if (f == NULL)
        return 0;
    unsigned long long btime = 0;
    char line[256];
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "btime %llu", &btime) == 1)
            break;
    fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    if (btime == 0 || hz <= 0)
        return 0;
    return (double)btime + (double)ticks / (double)hz;
}

/* Claims path: 0 (locked, descriptor in *fd), 1 when it is another process's, -1 on error. With
 * `since` > 0, a file written since then is another's too. */
static int try_claim(const char *path, double since, int *fd) {
    int f = open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
    if (f < 0)
        return -1;
    if (flock(f, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        close(f);
        if (e == EWOULDBLOCK)
            return 1;
        errno = e;
        return -1;
    }
    struct stat st;
    if (since > 0 && fstat(f, &st) == 0 && st.st_size > 0 &&
        (double)st.st_mtim.tv_sec + (double)st.st_mtim.tv_nsec * 1e-9 >= since - 1.0) {
        flock(f, LOCK_UN);
        close(f);
        return 1;
    }
    *fd = f;
    return 0;
}

int tr_record_claim(const char *spec, int rank, char *out, size_t outlen, int *lock_fd) {
    char path[4096], alt[4096];
    int own = 0;
    if (expand(spec, rank, path, sizeof path, &own) != 0 || strlen(path) >= outlen) {
        errno = ENAMETOOLONG;
        return ERR_IO;
    }
    /* A name of its own is the process's (unless a live process holds it: another job's). */
    int rc = try_claim(path, own ? 0 : parent_start(), lock_fd);
    if (rc == 1 && !own && rank >= 0) {
        char tag[32];
        snprintf(tag, sizeof tag, "rank%d", rank);
        if (insert_tag(path, tag, alt, sizeof alt) == 0 && strlen(alt) < outlen) {
            rc = try_claim(alt, parent_start(), lock_fd);
            if (rc == 0)
                snprintf(path, sizeof path, "%s", alt);
        }
    }
    if (rc == 1) {
        char tag[32];
        snprintf(tag, sizeof tag, "pid%ld", (long)getpid());
        if (insert_tag(path, tag, alt, sizeof alt) != 0 || strlen(alt) >= outlen) {
            errno = ENAMETOOLONG;
            return ERR_IO;
        }
        rc = try_claim(alt, 0, lock_fd);
        if (rc == 0)
            snprintf(path, sizeof path, "%s", alt);
        else if (rc == 1)
            errno = EBUSY;
    }
    if (rc != 0)
        return ERR_IO;
    snprintf(out, outlen, "%s", path);
    return 0;
}
