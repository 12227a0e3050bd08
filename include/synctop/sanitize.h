/*
 * Making untrusted text (names from traces and messages) safe for a terminal.
 */
#ifndef SYNCTOP_SANITIZE_H
#define SYNCTOP_SANITIZE_H

#include <stddef.h>
#include <stdio.h>

/* Copies up to len bytes of src into dst (dst_size bytes, always NUL-terminated) keeping valid
 * UTF-8 text and replacing each control character (C0, DEL, C1), each invalid or overlong UTF-8
 * sequence and each bidirectional override with '?'. Stops early when dst is full, never in the
 * middle of a character. Returns the bytes written (without the NUL); *consumed (may be NULL) gets
 * the bytes of src used. */
size_t tp_sanitize(char *dst, size_t dst_size, const char *src, size_t len, size_t *consumed);

/* Writes s to out with every control character, invalid UTF-8 byte and escape replaced, so that
 * names from traces (untrusted) never reach a terminal raw. len may be (size_t)-1 for a C string. */
void tp_print_sanitized(FILE *out, const char *s, size_t len);
/* The same as a JSON string: sanitized, then quoted and escaped. len may be (size_t)-1. */
void tp_print_json_string(FILE *out, const char *s, size_t len);

#endif
