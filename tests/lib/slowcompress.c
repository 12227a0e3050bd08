/*
 * A slow recorder for tests, preloaded (LD_PRELOAD) into the process under test: zstd's one-shot
 * compression, which the trace-file writer runs on every batch it stores, first sleeps
 * SYNCTOP_TEST_SLOW_COMPRESS_US microseconds per KiB of input. Receiving goes at its own speed, so
 * a recorder becomes slower than the producers it records in its writing alone, as it is when its
 * disk or its CPU cannot keep up.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>

/* Exported in spite of the build's hidden default: it must interpose libzstd's. */
__attribute__((visibility("default"))) size_t ZSTD_compress(void *dst, size_t dst_cap, const void *src,
                                                            size_t src_size, int level);

size_t ZSTD_compress(void *dst, size_t dst_cap, const void *src, size_t src_size, int level) {
    static size_t (*real)(void *, size_t, const void *, size_t, int);
    static long us_per_kib = -1;
    if (real == NULL)
        real = (size_t (*)(void *, size_t, const void *, size_t, int))dlsym(RTLD_NEXT, "ZSTD_compress");
    if (us_per_kib < 0) {
        const char *v = getenv("SYNCTOP_TEST_SLOW_COMPRESS_US");
        us_per_kib = v != NULL ? strtol(v, NULL, 10) : 0;
    }
    if (us_per_kib > 0) {
        int saved = errno;
        long long us = (long long)(src_size / 1024 + 1) * us_per_kib;
        struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        errno = saved;
    }
    return real != NULL ? real(dst, dst_cap, src, src_size, level) : (size_t)-1;
}
