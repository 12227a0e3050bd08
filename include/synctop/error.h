/*
 * Error codes shared by every synctop module: functions return 0 or a negative TP_E* code, and
 * tp_strerror() names it. Detailed messages (which offset, which field) go to a caller-supplied
 * tp_err buffer where a function takes one.
 */
#ifndef SYNCTOP_ERROR_H
#define SYNCTOP_ERROR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TP_ERRNO_MAP(X)                                                       \
    X(INVAL, -1, "invalid argument")                                          \
    X(NOMEM, -2, "out of memory")                                             \
    X(MALFORMED, -3, "malformed data")                                        \
    X(VERSION, -4, "format version newer than this synctop understands")      \
    X(CHECKSUM, -5, "checksum mismatch")                                      \
    X(TRUNCATED, -6, "data cut short")                                        \
    X(AGAIN, -7, "would block")                                               \
    X(IO, -8, "input/output error")                                           \
    X(ZMQ, -9, "ZeroMQ error")                                                \
    X(EXIST, -10, "already exists")                                           \
    X(NOENT, -11, "not found")                                                \
    X(PERM, -12, "permission denied")                                         \
    X(LIMIT, -13, "limit reached")                                            \
    X(EOF, -14, "end of data")                                                \
    X(UNSUPPORTED, -15, "not supported")                                      \
    X(SECURITY, -16, "refused for security")

enum tp_errno {
#define TP_ERRNO_ENUM_(name, val, msg) TP_E##name = (val),
    TP_ERRNO_MAP(TP_ERRNO_ENUM_)
#undef TP_ERRNO_ENUM_
};

const char *tp_strerror(int err);

/* A buffer for a human-readable error message. Functions that take one fill it when they fail. */
typedef struct tp_err {
    char msg[512];
} tp_err;

/* Formats into err (if not NULL) and returns code, so callers can write
 * `return tp_err_set(err, TP_EMALFORMED, "record %u: bad kind %u", i, k);`. */
int tp_err_set(tp_err *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif
