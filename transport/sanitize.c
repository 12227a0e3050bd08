/*
 * Terminal-safe text (sanitize.h). Names in traces come from other people's programs and files:
 * a kernel name with an escape sequence must not be able to rewrite the user's terminal.
 */
#include "synctop/sanitize.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (at most len bytes) and its code point, or 0. */
static size_t utf8_decode(const unsigned char *s, size_t len, uint32_t *cp) {
    unsigned char c = s[0];
    size_t n;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0xE0) == 0xC0) {
        n = 2, v = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        n = 3, v = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        n = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (len < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return n;
}

static int unsafe(uint32_t cp) {
    return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0) || /* C0, DEL, C1 */
           (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) || /* bidi */
           cp == 0x200E || cp == 0x200F || cp == 0x061C || cp == 0xFEFF;
}

size_t tp_sanitize(char *dst, size_t dst_size, const char *src, size_t len, size_t *consumed) {
    const unsigned char *s = (const unsigned char *)src;
    size_t in = 0, out = 0;
    if (dst_size == 0) {
        if (consumed)
            *consumed = 0;
        return 0;
    }
    while (in < len) {
        uint32_t cp = 0;
        size_t n = utf8_decode(s + in, len - in, &cp);
        if (n == 0 || unsafe(cp)) {
            if (out + 1 >= dst_size)
                break;
            dst[out++] = '?';
            in += n ? n : 1;
            continue;
        }
        if (out + n >= dst_size)
            break;
        for (size_t i = 0; i < n; i++)
            dst[out++] = (char)s[in + i];
        in += n;
    }
    dst[out] = '\0';
    if (consumed)
        *consumed = in;
    return out;
}

void tp_print_sanitized(FILE *out, const char *s, size_t len) {
    char buf[1024];
    if (len == (size_t)-1)
        len = strlen(s);
    while (len > 0) {
        size_t used = 0;
        size_t n = tp_sanitize(buf, sizeof buf, s, len, &used);
        fwrite(buf, 1, n, out);
        if (used == 0)
            break;
        s += used;
        len -= used;
    }
}

void tp_print_json_string(FILE *out, const char *s, size_t len) {
    char buf[512];
    if (s == NULL)
        s = "", len = 0;
    if (len == (size_t)-1)
        len = strlen(s);
    fputc('"', out);
    while (len > 0) {
        size_t used = 0, n = tp_sanitize(buf, sizeof buf, s, len, &used);
        for (size_t i = 0; i < n; i++) {
            if (buf[i] == '"' || buf[i] == '\\')
                fputc('\\', out);
            fputc(buf[i], out);
        }
        if (used == 0)
            break;
        s += used;
        len -= used;
    }
    fputc('"', out);
}
