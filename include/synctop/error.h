/*
 * The error convention of every synctop module, the tracer's and the command's alike: a function
 * returns 0 or a negative ERR_* code, which err_str() describes, and where it takes an err_msg it
 * fills it with the detail (which file, which offset, which field) when it fails. A command prints
 * that message and chooses its exit status; nothing below the command prints or exits.
 */
#ifndef SYNCTOP_ERROR_H
#define SYNCTOP_ERROR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ERR_CODES(X)                                                         \
    X(INVAL, -1, "invalid argument")                                         \
    X(NOMEM, -2, "out of memory")                                            \
    X(MALFORMED, -3, "malformed data")                                       \
    X(VERSION, -4, "format version newer than this synctop understands")     \
    X(CHECKSUM, -5, "checksum mismatch")                                     \
    X(TRUNCATED, -6, "data cut short")                                       \
    X(AGAIN, -7, "would block")                                              \
    X(IO, -8, "input/output error")                                          \
    X(ZMQ, -9, "ZeroMQ error")                                               \
    X(EXIST, -10, "already exists")                                          \
    X(NOENT, -11, "not found")                                               \
    X(PERM, -12, "permission denied")                                        \
    X(LIMIT, -13, "limit reached")                                           \
    X(EOF, -14, "end of data")                                               \
    X(UNSUPPORTED, -15, "not supported")                                     \
    X(SECURITY, -16, "refused for security")

enum err_code {
#define ERR_CODE_ENUM_(name, val, msg) ERR_##name = (val),
    ERR_CODES(ERR_CODE_ENUM_)
#undef ERR_CODE_ENUM_
};

const char *err_str(int err);

/* The detail of a failure, for a person: functions that take one fill it when they fail. */
typedef struct err_msg {
    char msg[512];
} err_msg;

/* Formats into err (if not NULL) and returns code, so callers can write
 * `return err_set(err, ERR_MALFORMED, "record %u: bad kind %u", i, k);`. */
int err_set(err_msg *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif
