/*
 * Small text helpers (text.h).
 */
#include "text.h"

#include <string.h>

const char *cm_base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s && s[1] ? s + 1 : path;
}
