/*
 * The tracer's configuration: SYNCTOP_* environment variables read at injection (the program's
 * command line is not ours to parse), or the settings `synctop attach` hands to a tracer it starts
 * in a running process (synctop/tracer.h), which win over the environment. `synctop run --help` documents them; the names
 * and defaults live here and nowhere else.
 */
#ifndef SYNCTOP_TRACER_CONFIG_H
#define SYNCTOP_TRACER_CONFIG_H

#include <stddef.h>
#include <stdint.h>

enum tr_mode { TR_MODE_ALWAYS = 0, TR_MODE_ON_DEMAND = 1 };

typedef struct tr_config {
    int disabled;               /* SYNCTOP_DISABLE=1: do nothing at all */
    int quiet;                  /* SYNCTOP_QUIET=1: not even the one-line failure notice */
    int verbose;                /* SYNCTOP_VERBOSE=1: a few more lines on stderr (which libcupti,
                                   its version, what was detected); never with SYNCTOP_QUIET */
    char endpoint[512];         /* SYNCTOP_LISTEN (or SYNCTOP_ENDPOINT); "" = default ipc endpoint;
                                   "none" = no publisher (record only) */
    char record[1024];          /* SYNCTOP_RECORD: trace file path, "" = none; %p and %r in it
                                   become the pid and the rank; a process that finds the path
                                   taken by another one of the same job records beside it
                                   (record_path.h) */
    char curve_key[1024];       /* SYNCTOP_CURVE_KEY: the publisher's CURVE key file (synctop keygen's
                                   .key), "" = no encryption */
    char curve_clients[1024];   /* SYNCTOP_CURVE_CLIENTS: with curve_key, the only clients admitted (a
                                   directory of .pub files or a file of keys), "" = any that has
                                   the public key */
    int insecure;               /* SYNCTOP_INSECURE=1: allow a non-loopback tcp endpoint in the clear */
    char cupti[512];            /* SYNCTOP_CUPTI: libcupti to load, "" = search */
    enum tr_mode mode;          /* SYNCTOP_MODE=always|on-demand */
    uint64_t block_threshold_ns; /* SYNCTOP_BLOCK_THRESHOLD_US (20) */
    uint64_t poll_gap_ns;       /* SYNCTOP_POLL_GAP_US (1000): a cudaStreamQuery/cudaEventQuery
                                   loop counts as waiting only while its queries come less than
                                   this apart; a longer gap (work launched between two queries)
                                   ends the loop */
    uint32_t flush_ms;          /* SYNCTOP_FLUSH_MS (100) */
    uint32_t start_wait_ms;     /* SYNCTOP_START_WAIT_MS (0): wait this long at start for a viewer */
    uint32_t linger_ms;         /* SYNCTOP_LINGER_MS (1000): at exit, for queued batches to leave */
    uint32_t buffer_kb;         /* SYNCTOP_BUFFER_KB (1024): one CUPTI activity buffer */
    uint32_t max_buffers;       /* SYNCTOP_MAX_BUFFERS (64): bound on activity buffers */
    uint32_t queue_len;         /* SYNCTOP_QUEUE (16384): host-call events waiting for the flush
                                   thread, rounded up to a power of two */
    int sndhwm;                 /* SYNCTOP_SNDHWM (1000): batches queued per subscriber */
    uint32_t frames;            /* SYNCTOP_FRAMES (12): call-site frames kept, innermost first, of
                                   each kind: up to this many Python frames (16 at most) when the
                                   host is CPython 3.10-3.13, then up to this many native ones */
} tr_config;

/* Fills c from settings (NAME=VALUE lines, '\n' between them; NULL: none), else the environment,
 * else the defaults: a setting given in both is taken from settings, and one given there empty
 * keeps its default. Values that do not parse keep their defaults and are named in bad
 * (comma-separated, "" when all parsed). */
void tr_config_read(tr_config *c, const char *settings, char *bad, size_t badlen);

/* A line on stderr, "synctop: " and the text (600 bytes at most), as the settings allow:
 * tr_config_say unless SYNCTOP_QUIET (a line worth one even when tracing works), tr_config_debug
 * with SYNCTOP_VERBOSE only. */
void tr_config_say(const tr_config *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tr_config_debug(const tr_config *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
