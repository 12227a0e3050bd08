/* Error codes and messages shared by every module (error.h). */
#include <stdarg.h>
#include <stdio.h>

#include "synctop/error.h"

const char *tp_strerror(int err) {
    switch (err) {
    case 0:
        return "success";
#define TP_ERRNO_CASE_(name, val, msg) \
    case TP_E##name:                   \
        return msg;
        TP_ERRNO_MAP(TP_ERRNO_CASE_)
#undef TP_ERRNO_CASE_
    default:
        return "unknown error";
    }
}

int tp_err_set(tp_err *err, int code, const char *fmt, ...) {
    if (err != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}
