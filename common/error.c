/* The error convention shared by every module (synctop/error.h): code descriptions and messages. */
#include <stdarg.h>
#include <stdio.h>

#include "synctop/error.h"

const char *err_str(int err) {
    switch (err) {
    case 0:
        return "success";
#define ERR_CODE_CASE_(name, val, msg) \
    case ERR_##name:                   \
        return msg;
        ERR_CODES(ERR_CODE_CASE_)
#undef ERR_CODE_CASE_
    default:
        return "unknown error";
    }
}

int err_set(err_msg *err, int code, const char *fmt, ...) {
    if (err != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}
