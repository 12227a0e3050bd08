/*
 * Trace-file figures on the realistic synthetic mix (samples/synth/synth.h): bytes per event raw and in the
 * file at several zstd levels and batch sizes, write speed (check + compress + index + write, close
 * and its fsync included) and read speed (open + read + decompress + decode every record).
 *
 * usage: bench_file [EVENTS] [DIR]   (default 2000000 events, $TMPDIR or /tmp)
 * The target is at most 32 file bytes per event.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "synctop/file.h"
#include "synth.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct batches {
    uint8_t **data;
    size_t *len;
    size_t n;
    uint64_t raw_bytes, events;
} batches;

static int make_batches(batches *b, uint64_t events, size_t per) {
    memset(b, 0, sizeof *b);
    size_t n = (size_t)((events + per - 1) / per);
    b->data = calloc(n, sizeof *b->data);
    b->len = calloc(n, sizeof *b->len);
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 42});
    if (b->data == NULL || b->len == NULL || enc == NULL)
        return -1;
    synth s;
    synth_init(&s, 1);
    tp_buf buf = {0};
    for (uint64_t left = events; left > 0; b->n++) {
        size_t k = left < per ? (size_t)left : per;
        synth_fill(&s, enc, k);
        left -= k;
        if (tp_enc_finish(enc, &buf) != 0)
            return -1;
        tp_enc_delivered(enc, 1);
        b->data[b->n] = malloc(buf.len);
        if (b->data[b->n] == NULL)
            return -1;
        memcpy(b->data[b->n], buf.data, buf.len);
        b->len[b->n] = buf.len;
        b->raw_bytes += buf.len;
        b->events += k;
    }
    tp_buf_free(&buf);
    tp_enc_destroy(&enc);
    return 0;
}

static void free_batches(batches *b) {
    for (size_t i = 0; i < b->n; i++)
        free(b->data[i]);
    free(b->data);
    free(b->len);
}

static int write_file(const char *path, const batches *b, int level, double *secs, uint64_t *bytes) {
    err_msg err = {{0}};
    double t0 = now_s();
    tp_fwriter_opts o = {.flags = TP_FW_OVERWRITE, .zstd_level = level};
    tp_fwriter *w = tp_fwriter_open_opts(path, &o, &err);
    if (w == NULL) {
        fprintf(stderr, "bench_file: %s\n", err.msg);
        return -1;
    }
    for (size_t i = 0; i < b->n; i++) {
        if (tp_fwriter_append(w, b->data[i], b->len[i], &err) != 0) {
            fprintf(stderr, "bench_file: %s\n", err.msg);
            tp_fwriter_close(&w, NULL);
            return -1;
        }
    }
    if (tp_fwriter_close(&w, &err) != 0) {
        fprintf(stderr, "bench_file: %s\n", err.msg);
        return -1;
    }
    *secs = now_s() - t0;
    FILE *f = fopen(path, "rb");
    if (f == NULL || fseek(f, 0, SEEK_END) != 0)
        return -1;
    *bytes = (uint64_t)ftell(f);
    fclose(f);
    return 0;
}

/* Reads everything back; returns the events decoded (and a checksum of their starts, so the
 * decoding cannot be skipped). */
static int read_file(const char *path, double *secs, uint64_t *events, uint64_t *sum) {
    err_msg err = {{0}};
    double t0 = now_s();
    tp_freader *r = tp_freader_open(path, &err);
    if (r == NULL) {
        fprintf(stderr, "bench_file: %s\n", err.msg);
        return -1;
    }
    tp_buf buf = {0};
    tp_dec d = {0};
    tp_strtab *t = tp_strtab_new();
    *events = *sum = 0;
    for (size_t i = 0; i < tp_freader_count(r); i++) {
        if (tp_freader_read(r, i, &buf, &err) != 0 || tp_dec_open(&d, buf.data, buf.len, &err) != 0 ||
            tp_dec_load_strings(&d, t) != 0) {
            fprintf(stderr, "bench_file: %s\n", err.msg);
            return -1;
        }
        const tp_record *rec;
        while ((rec = tp_dec_next_record(&d)) != NULL) {
            if (TP_KIND_IS_META(rec->head.kind))
                continue;
            uint64_t s, e;
            tp_record_span(rec, &s, &e);
            *sum += s ^ e;
            (*events)++;
        }
    }
    tp_strtab_destroy(&t);
    tp_dec_free(&d);
    tp_buf_free(&buf);
    tp_freader_close(&r);
    *secs = now_s() - t0;
    return 0;
}

int main(int argc, char **argv) {
    uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 2000000;
    const char *dir = argc > 2 ? argv[2] : getenv("TMPDIR");
    if (events == 0) {
        fprintf(stderr, "usage: bench_file [EVENTS] [DIR]\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/bench_file-%ld.trace", dir && *dir ? dir : "/tmp", (long)getpid());
    static const size_t pers[] = {256, 4096};
    static const int levels[] = {-3, 1, 3, 6, 9};
    int status = 0;
    printf("bench_file: %" PRIu64 " synthetic events (samples/synth/synth.h mix), file %s\n", events, path);
    printf("%6s %6s %10s %11s %12s %12s\n", "batch", "level", "raw B/ev", "file B/ev", "write ev/s", "read ev/s");
    for (size_t p = 0; p < sizeof pers / sizeof pers[0] && status == 0; p++) {
        batches b;
        if (make_batches(&b, events, pers[p]) != 0) {
            fprintf(stderr, "bench_file: cannot make batches\n");
            return 1;
        }
        for (size_t l = 0; l < sizeof levels / sizeof levels[0]; l++) {
            double ws, rs;
            uint64_t bytes, got, sum;
            if (write_file(path, &b, levels[l], &ws, &bytes) != 0 || read_file(path, &rs, &got, &sum) != 0) {
                status = 1;
                break;
            }
            if (got != b.events) {
                fprintf(stderr, "bench_file: read %" PRIu64 " events, wrote %" PRIu64 "\n", got, b.events);
                status = 1;
                break;
            }
            printf("%6zu %6d %10.2f %11.2f %12.3g %12.3g%s\n", pers[p], levels[l],
                   (double)b.raw_bytes / (double)b.events, (double)bytes / (double)b.events,
                   (double)b.events / ws, (double)b.events / rs,
                   levels[l] == TP_FILE_ZSTD_LEVEL ? "  (default level)" : "");
            fflush(stdout);
        }
        free_batches(&b);
    }
    unlink(path);
    return status;
}
