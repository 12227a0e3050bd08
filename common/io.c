/* Whole reads and writes (io.h). */
#include "io.h"

#include <errno.h>
#include <unistd.h>

ssize_t cm_read_full(int fd, void *buf, size_t n, int64_t off) {
    size_t got = 0;
    while (got < n) {
        ssize_t k = off < 0 ? read(fd, (char *)buf + got, n - got)
                            : pread(fd, (char *)buf + got, n - got, (off_t)(off + (int64_t)got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0)
            break;
        got += (size_t)k;
    }
    return (ssize_t)got;
}

ssize_t cm_read_some(int fd, void *buf, size_t n) {
    ssize_t k;
    do
        k = read(fd, buf, n);
    while (k < 0 && errno == EINTR);
    return k;
}

int cm_write_full(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = EIO;
            return -1;
        }
        c += k;
        n -= (size_t)k;
    }
    return 0;
}
