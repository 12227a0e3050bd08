/*
 * SYNCTOP_* settings (config.h): from a settings text first, else the environment. No allocation,
 * no locale. And the lines the tracer says as they allow (quiet, verbose).
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where the settings are read: the text of NAME=VALUE lines given at start (it wins), else the
 * environment. */
typedef struct source {
    const char *over;
    char value[1024];
} source;

/* The value of name, or NULL when neither the text nor the environment has it. A value too long
 * for the scratch space is returned as the text "\x01", which no setting accepts. */
static const char *lookup(source *src, const char *name) {
    size_t nlen = strlen(name);
    for (const char *l = src->over; l != NULL && *l != '\0';) {
        const char *end = strchr(l, '\n');
        size_t len = end ? (size_t)(end - l) : strlen(l);
        if (len > nlen && strncmp(l, name, nlen) == 0 && l[nlen] == '=') {
            size_t vlen = len - nlen - 1;
            if (vlen >= sizeof src->value)
                return "\x01";
            memcpy(src->value, l + nlen + 1, vlen);
            src->value[vlen] = '\0';
            return src->value;
        }
        l = end ? end + 1 : l + len;
    }
    return getenv(name);
}

static void note_bad(char *bad, size_t badlen, const char *name) {
    size_t n = strlen(bad);
    if (n + strlen(name) + 2 < badlen)
        snprintf(bad + n, badlen - n, "%s%s", n ? "," : "", name);
}

static void get_u32(source *src, const char *name, uint32_t *out, uint32_t lo, uint32_t hi, char *bad,
                    size_t badlen) {
    const char *s = lookup(src, name);
    if (s == NULL || *s == '\0')
        return;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end != '\0' || s[0] == '-' || v < lo || v > hi) {
        note_bad(bad, badlen, name);
        return;
    }
    *out = (uint32_t)v;
}

static int get_flag(source *src, const char *name) {
    const char *s = lookup(src, name);
    return s != NULL && *s != '\0' && strcmp(s, "0") != 0;
}

static void get_str(source *src, const char *name, char *out, size_t outlen, char *bad, size_t badlen) {
    const char *s = lookup(src, name);
    if (s == NULL || *s == '\0')
        return;
    if (strlen(s) >= outlen) {
        note_bad(bad, badlen, name);
        return;
    }
    snprintf(out, outlen, "%s", s);
}

void tr_config_read(tr_config *c, const char *settings, char *bad, size_t badlen) {
    source src_ = {.over = settings}, *src = &src_;
    memset(c, 0, sizeof *c);
    bad[0] = '\0';
    c->mode = TR_MODE_ALWAYS;
    uint32_t threshold_us = 20, poll_gap_us = 1000;
    c->flush_ms = 100;
    c->linger_ms = 1000;
    c->buffer_kb = 1024;
    c->max_buffers = 64;
    c->queue_len = 16384;
    uint32_t hwm = 1000;
    c->frames = 12;

    c->disabled = get_flag(src, "SYNCTOP_DISABLE");
    c->quiet = get_flag(src, "SYNCTOP_QUIET");
    c->verbose = get_flag(src, "SYNCTOP_VERBOSE") && !c->quiet;
    get_str(src, "SYNCTOP_ENDPOINT", c->endpoint, sizeof c->endpoint, bad, badlen);
    get_str(src, "SYNCTOP_LISTEN", c->endpoint, sizeof c->endpoint, bad, badlen);
    get_str(src, "SYNCTOP_RECORD", c->record, sizeof c->record, bad, badlen);
    get_str(src, "SYNCTOP_CURVE_KEY", c->curve_key, sizeof c->curve_key, bad, badlen);
    get_str(src, "SYNCTOP_CURVE_CLIENTS", c->curve_clients, sizeof c->curve_clients, bad, badlen);
    c->insecure = get_flag(src, "SYNCTOP_INSECURE");
    get_str(src, "SYNCTOP_CUPTI", c->cupti, sizeof c->cupti, bad, badlen);
    const char *mode = lookup(src, "SYNCTOP_MODE");
    if (mode != NULL && *mode != '\0') {
        if (strcmp(mode, "always") == 0)
            c->mode = TR_MODE_ALWAYS;
        else if (strcmp(mode, "on-demand") == 0)
            c->mode = TR_MODE_ON_DEMAND;
        else
            note_bad(bad, badlen, "SYNCTOP_MODE");
    }
    get_u32(src, "SYNCTOP_BLOCK_THRESHOLD_US", &threshold_us, 0, 60u * 1000 * 1000, bad, badlen);
    c->block_threshold_ns = (uint64_t)threshold_us * 1000u;
    get_u32(src, "SYNCTOP_POLL_GAP_US", &poll_gap_us, 1, 60u * 1000 * 1000, bad, badlen);
    c->poll_gap_ns = (uint64_t)poll_gap_us * 1000u;
    get_u32(src, "SYNCTOP_FLUSH_MS", &c->flush_ms, 1, 60000, bad, badlen);
    get_u32(src, "SYNCTOP_START_WAIT_MS", &c->start_wait_ms, 0, 600000, bad, badlen);
    get_u32(src, "SYNCTOP_LINGER_MS", &c->linger_ms, 0, 600000, bad, badlen);
    get_u32(src, "SYNCTOP_BUFFER_KB", &c->buffer_kb, 16, 64 * 1024, bad, badlen);
    get_u32(src, "SYNCTOP_MAX_BUFFERS", &c->max_buffers, 2, 4096, bad, badlen);
    get_u32(src, "SYNCTOP_QUEUE", &c->queue_len, 16, 1u << 22, bad, badlen);
    get_u32(src, "SYNCTOP_SNDHWM", &hwm, 1, 1000000, bad, badlen);
    get_u32(src, "SYNCTOP_FRAMES", &c->frames, 1, 32, bad, badlen);
    c->sndhwm = (int)hwm;
    uint32_t q = 16;
    while (q < c->queue_len)
        q <<= 1;
    c->queue_len = q;
}

__attribute__((format(printf, 1, 0))) static void say_v(const char *fmt, va_list ap) {
    char line[600];
    vsnprintf(line, sizeof line, fmt, ap);
    fprintf(stderr, "synctop: %s\n", line);
}

void tr_config_say(const tr_config *c, const char *fmt, ...) {
    if (c->quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    say_v(fmt, ap);
    va_end(ap);
}

void tr_config_debug(const tr_config *c, const char *fmt, ...) {
    if (!c->verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    say_v(fmt, ap);
    va_end(ap);
}
