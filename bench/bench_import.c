/*
 * Kineto import speed. Builds a large trace in memory from the two real sampled_rank traces (their
 * traceEvents entries repeated with shifted timestamps and correlation ids, about 220 MB of JSON by
 * default), then times the importer on it as plain JSON and gzip-compressed (from memory, the
 * median and the best of several runs), and writing a trace file. Prints MB/s of JSON text,
 * events/s, the trace file's size against the JSON's, and the peak resident memory of a process
 * that imports the trace from a file (plain and gzip), per GB of JSON. Then each of the four large
 * real traces in TRACE_DIR as it is (modern, ROCm and legacy PyTorch 1.9 formats), plain and gzip.
 *
 *
 * Then the threads: the same input on 1, 2 and more threads (up to the cores the process may use),
 * plain and gzip, in rounds that run each once (each ratio the median of the rounds' own, so that
 * the machine's speed drifting between runs moves both sides of a ratio alike), with the speed-up
 * over one thread and the ratio gzip/plain, and ISA-L's inflate
 * alone, which bounds what gzip can cost on two cores: (one thread's plain time + the inflate) / 2
 * against two threads' plain time; and, for the large
 * input, a ~1 GB one built the same way and each real trace, the import's time against that of
 * counting the text's lines as wc -l does, run as a child on the same bytes in a file (from the page
 * cache) and in-process (memchr over the text in memory), in rounds as the threads: the ratio
 * import/wc. Then several
 * sources (the input cut in eight files, one per rank, plain and gzip'd), loaded into a store as
 * `report` loads them, on 1, 2 and more threads. --busy runs a busy loop in a process beside it
 * all, as other work on the machine would.
 *
 *   bench_import [--busy] [MB] [TRACE_DIR]
 *   bench_import --import FILE   (what the memory figures run: imports FILE, prints its peak RSS, and
 *                                 the page faults and system time of the import)
 *   bench_import --write FILE [MB]   (writes the large input to FILE, for other readers to time)
 *   bench_import --files FILE...   (each plain JSON file against wc -l, as the real traces above)
 */
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <isa-l/igzip_lib.h>

#include "child_rss.h"
#include "cores.h"
#include "grow.h"
#include "import.h"
#include "json_src.h"
#include "kineto.h"
#include "load.h"
#include "store.h"
#include "synctop/codec.h"
#include "synctop/file.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
    fprintf(stderr, "bench_import: %s\n", what);
    exit(1);
}

static void append(tp_buf *b, const void *s, size_t n) {
    if (tp_buf_append(b, s, n) != 0)
        die("out of memory");
}

static tp_buf inflate_file(const char *path) {
    gzFile z = gzopen(path, "rb");
    if (z == NULL) {
        fprintf(stderr, "bench_import: cannot open %s\n", path);
        exit(1);
    }
    tp_buf b = {0};
    char chunk[1 << 16];
    int n;
    while ((n = gzread(z, chunk, sizeof chunk)) > 0)
        append(&b, chunk, (size_t)n);
    gzclose(z);
    return b;
}

/* The traceEvents entries of a trace: offsets and lengths of each object in the array. */
typedef struct entry {
    size_t off, len;
    int meta;
} entry;

static size_t split_entries(const tp_buf *t, entry **out) {
    const char *s = (const char *)t->data, *end = s + t->len;
    const char *p = strstr(s, "\"traceEvents\"");
    if (p == NULL)
        die("no traceEvents");
    p = memchr(p, '[', (size_t)(end - p));
    if (p == NULL)
        die("no traceEvents array");
    p++;
    size_t n = 0, cap = 1024;
    entry *e = malloc(cap * sizeof *e);
    if (e == NULL)
        die("out of memory");
    while (p < end) {
        while (p < end && *p != '{' && *p != ']')
            p++;
        if (p >= end || *p == ']')
            break;
        const char *start = p;
        int depth = 0, in_str = 0;
        for (; p < end; p++) {
            char c = *p;
            if (in_str) {
                if (c == '\\')
                    p++;
                else if (c == '"')
                    in_str = 0;
            } else if (c == '"') {
                in_str = 1;
            } else if (c == '{' || c == '[') {
                depth++;
            } else if (c == '}' || c == ']') {
                if (--depth == 0) {
                    p++;
                    break;
                }
            }
        }
        if (n == cap) {
            cap *= 2;
            e = realloc(e, cap * sizeof *e);
            if (e == NULL)
                die("out of memory");
        }
        e[n].off = (size_t)(start - s);
        e[n].len = (size_t)(p - start);
        e[n].meta = memmem(start, e[n].len, "\"ph\": \"M\"", 9) != NULL;
        n++;
    }
    *out = e;
    return n;
}

/* Copies entry text to b, adding delta to the integer part of the number after each key given. */
static void copy_shifted(tp_buf *b, const char *s, size_t len, const char *const *keys,
                         const long long *deltas, int n_keys) {
    const char *end = s + len;
    while (s < end) {
        const char *best = NULL;
        int which = -1;
        for (int k = 0; k < n_keys; k++) {
            const char *q = memmem(s, (size_t)(end - s), keys[k], strlen(keys[k]));
            if (q && (best == NULL || q < best)) {
                best = q;
                which = k;
            }
        }
        if (best == NULL || deltas[which] == 0) {
            append(b, s, (size_t)(end - s));
            return;
        }
        const char *num = best + strlen(keys[which]);
        append(b, s, (size_t)(num - s));
        char *stop;
        long long v = strtoll(num, &stop, 10);
        if (stop == num) {
            s = num;
            continue;
        }
        char digits[32];
        int n = snprintf(digits, sizeof digits, "%lld", v + deltas[which]);
        append(b, digits, (size_t)n);
        s = stop;
    }
}

/* ~mb MB of Kineto JSON: both ranks' events, repeated; metadata rows once. */
static tp_buf build_input(const char *dir, size_t mb, uint64_t *span_us) {
    char path[4096];
    tp_buf src[2];
    entry *ents[2];
    size_t n_ents[2];
    for (int r = 0; r < 2; r++) {
        snprintf(path, sizeof path, "%s/sampled_rank-%d.json.gz", dir, r);
        src[r] = inflate_file(path);
        n_ents[r] = split_entries(&src[r], &ents[r]);
    }
    tp_buf out = {0};
    const char *head = "{\"schemaVersion\": 1, \"distributedInfo\": {\"rank\": 0, \"world_size\": 2},\n"
                       "\"traceEvents\": [\n";
    append(&out, head, strlen(head));
    const char *keys[] = {"\"ts\": ", "\"correlation\": ", "\"External id\": "};
    const long long step_us = 4000000; /* each copy 4 s later than the one before */
    int first = 1;
    long long rep = 0;
    while (out.len < mb * 1000000) {
        for (int r = 0; r < 2; r++) {
            const char *s = (const char *)src[r].data;
            /* correlation ids stay unique in the file, as in one process's trace: each copy of a
             * rank's ids (a range of 0.3 M) 0.4 M above the copy before */
            long long deltas[] = {rep * step_us, (rep * 2 + r) * 400000ll, rep * 100000000ll};
            for (size_t i = 0; i < n_ents[r]; i++) {
                if (ents[r][i].meta && rep > 0)
                    continue;
                if (!first)
                    append(&out, ",\n", 2);
                first = 0;
                copy_shifted(&out, s + ents[r][i].off, ents[r][i].len, keys, deltas, 3);
            }
        }
        rep++;
    }
    append(&out, "\n]}\n", 4);
    *span_us = (uint64_t)(rep * step_us);
    for (int r = 0; r < 2; r++) {
        tp_buf_free(&src[r]);
        free(ents[r]);
    }
    return out;
}

static tp_buf gzip_buf(const tp_buf *in, int level) {
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (deflateInit2(&zs, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        die("deflateInit2");
    tp_buf out = {0};
    if (tp_buf_reserve(&out, deflateBound(&zs, in->len)) != 0)
        die("out of memory");
    zs.next_in = in->data;
    zs.avail_in = (uInt)in->len;
    zs.next_out = out.data;
    zs.avail_out = (uInt)out.cap;
    if (deflate(&zs, Z_FINISH) != Z_STREAM_END)
        die("deflate");
    out.len = zs.total_out;
    deflateEnd(&zs);
    return out;
}

typedef struct sink {
    uint64_t bytes, batches;
} sink;

static int to_sink(void *ctx, const void *batch, size_t len, err_msg *err) {
    (void)batch;
    (void)err;
    sink *s = ctx;
    s->bytes += len;
    s->batches++;
    return 0;
}

static int to_file(void *ctx, const void *batch, size_t len, err_msg *err) {
    return tp_fwriter_append(ctx, batch, len, err);
}

static tp_buf read_whole(const char *path) {
    tp_buf b = {0};
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        die("cannot open a real trace");
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        append(&b, chunk, n);
    fclose(f);
    return b;
}

static void write_file(const char *path, const tp_buf *b) {
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(b->data, 1, b->len, f) != b->len || fclose(f) != 0)
        die("cannot write the input");
}

#define ROUNDS_MAX 16 /* rounds of the interleaved timings */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Imports the JSON or gzip in data runs times on threads threads (0: the default): the median and
 * the best seconds. */
static void time_import_piece(const tp_buf *data, const char *name, int threads, size_t piece, int runs,
                              double *median, double *best, import_stats *st) {
    double t[16];
    err_msg err = {{0}};
    import_opts opts = {.threads = threads, .piece_bytes = piece};
    if (runs > 16)
        runs = 16;
    for (int run = 0; run < runs; run++) {
        sink sk = {0};
        double t0 = now_s();
        if (kineto_import_mem(data->data, data->len, name, &opts, to_sink, &sk, st, &err) != 0)
            die(err.msg);
        t[run] = now_s() - t0;
    }
    qsort(t, (size_t)runs, sizeof t[0], cmp_double);
    *median = t[runs / 2];
    *best = t[0];
}

static void time_import_on(const tp_buf *data, const char *name, int threads, int runs, double *median, double *best,
                           import_stats *st) {
    time_import_piece(data, name, threads, 0, runs, median, best, st);
}

/* One import of data on threads threads (0: the default): its seconds. */
static double import_once(const tp_buf *data, const char *name, int threads) {
    double m, b;
    import_stats st;
    time_import_piece(data, name, threads, 0, 1, &m, &b, &st);
    return m;
}

/* The median of the n (at most ROUNDS_MAX) values at v. */
static double median_of(const double *v, int n) {
    double s[ROUNDS_MAX];
    memcpy(s, v, (size_t)n * sizeof *v);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return s[n / 2];
}

/* The ratios a[r] / b[r] of n rounds, their median: each ratio taken within one round, so that the
 * machine's speed drifting between rounds moves both sides of it alike. */
static double ratio_median(const double *a, const double *b, int n) {
    double q[ROUNDS_MAX];
    for (int r = 0; r < n; r++)
        q[r] = a[r] / b[r];
    return median_of(q, n);
}

/* Where threads start to pay: 1 thread against 2 on inputs of a few sizes, the threads made to
 * parse every one of them (pieces of the default size given, so that the size below which the
 * importer keeps to one thread does not apply). */
static void crossover(const char *dir, int runs) {
    static const size_t sizes[] = {8, 16, 32, 64, 128};
    printf("where 2 threads start to pay (plain JSON, median of %d; the importer uses them from %zu MiB):\n", runs,
           (size_t)IMPORT_PAR_LEAST_MIB);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint64_t span_us;
        tp_buf b = build_input(dir, sizes[i], &span_us);
        double one, two, best;
        import_stats st;
        time_import_piece(&b, "x.json", 1, 1u << 20, runs, &one, &best, &st);
        time_import_piece(&b, "x.json", 2, 1u << 20, runs, &two, &best, &st);
        printf("  %6.1f MB: 1 thread %.3f s, 2 threads %.3f s: %.2fx\n", (double)b.len / 1e6, one, two, one / two);
        tp_buf_free(&b);
    }
}

static void time_import(const tp_buf *data, const char *name, int runs, double *median, double *best,
                        import_stats *st) {
    time_import_on(data, name, 0, runs, median, best, st);
}

/* ---- what the import is measured against ---- */

static size_t g_lines; /* kept, so that the count is not optimized away */

/* wc -l's work in-process: the newlines of the text in memory, counted with memchr (median of runs). */
static double time_memchr_lines(const tp_buf *b, int runs) {
    double t[16];
    for (int run = 0; run < runs && run < 16; run++) {
        double t0 = now_s();
        size_t n = 0;
        const char *p = (const char *)b->data, *end = p + b->len;
        while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
            n++;
            p++;
        }
        g_lines += n;
        t[run] = now_s() - t0;
    }
    qsort(t, (size_t)runs, sizeof t[0], cmp_double);
    return t[runs / 2];
}

/* ISA-L alone inflating a gzip member in memory into one buffer of JSRC_CHUNK bytes after another,
 * as the importer's inflating thread does (its CRC-32 checked too): the median of runs. */
static double time_inflate(const tp_buf *gz, size_t want, int runs) {
    static uint8_t out[JSRC_CHUNK];
    double t[16];
    for (int run = 0; run < runs && run < 16; run++) {
        double t0 = now_s();
        struct inflate_state is;
        isal_inflate_init(&is);
        is.crc_flag = ISAL_GZIP;
        is.next_in = gz->data;
        is.avail_in = (uint32_t)gz->len;
        size_t n = 0;
        do {
            is.next_out = out;
            is.avail_out = sizeof out;
            if (isal_inflate(&is) != ISAL_DECOMP_OK)
                die("ISA-L cannot inflate the gzip input");
            n += sizeof out - is.avail_out;
        } while (is.block_state != ISAL_BLOCK_FINISH);
        if (n != want)
            die("ISA-L inflated a different length");
        t[run] = now_s() - t0;
    }
    qsort(t, (size_t)runs, sizeof t[0], cmp_double);
    return t[runs / 2];
}

/* wc -l itself, as a child, on a file of the same bytes: its seconds. */
static double wc_once(const char *path) {
    char *args[] = {"wc", "-l", (char *)path, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    extern char **environ;
    pid_t pid;
    double t0 = now_s();
    int ok = posix_spawnp(&pid, "wc", &fa, NULL, args, environ) == 0;
    posix_spawn_file_actions_destroy(&fa);
    int status = 0;
    if (!ok || waitpid(pid, &status, 0) != pid || status != 0)
        die("cannot run wc -l");
    return now_s() - t0;
}

/* A busy loop in a process of its own, as other work on the machine; ended by busy_stop. */
static pid_t busy_start(void) {
    pid_t pid = fork();
    if (pid == 0) {
        volatile uint64_t x = 0;
        for (;;)
            x++;
    }
    if (pid < 0)
        die("cannot start the busy loop");
    return pid;
}

static void busy_stop(pid_t pid) {
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

/* The import of the text (and its gzip, when given) against wc -l on the same bytes, in rounds
 * (wc -l, memchr, the import, the gzip import in each): a line per input, each time the median of
 * the rounds and each ratio the median of the rounds' own. */
static void versus_wc(const char *what, const tp_buf *text, const tp_buf *gz, int rounds) {
    char path[256];
    snprintf(path, sizeof path, "/tmp/bench_import-%ld-wc.json", (long)getpid());
    write_file(path, text);
    double wc[ROUNDS_MAX], mc[ROUNDS_MAX], im[ROUNDS_MAX], gm[ROUNDS_MAX];
    if (rounds > ROUNDS_MAX)
        rounds = ROUNDS_MAX;
    wc_once(path); /* the file into the page cache */
    for (int r = 0; r < rounds; r++) {
        wc[r] = wc_once(path);
        mc[r] = time_memchr_lines(text, 1);
        im[r] = import_once(text, "real.json", 0);
        gm[r] = gz ? import_once(gz, "real.json.gz", 0) : 1;
    }
    unlink(path);
    double r_wc = ratio_median(im, wc, rounds), r_mc = ratio_median(im, mc, rounds);
    double r_gz = ratio_median(gm, im, rounds);
    double m = median_of(im, rounds);
    printf("%-27s %6.1f MB: import %.3f s (%6.1f MB/s), wc -l %.3f s, memchr %.3f s: import/wc %5.1fx, "
           "import/memchr %5.1fx",
           what, (double)text->len / 1e6, m, (double)text->len / 1e6 / m, median_of(wc, rounds),
           median_of(mc, rounds), r_wc, r_mc);
    if (gz)
        printf("; gzip %.3f s = %.2fx plain", median_of(gm, rounds), r_gz);
    printf(" (%d rounds)\n", rounds);
}

static double tv_s(struct timeval t) {
    return (double)t.tv_sec + (double)t.tv_usec * 1e-6;
}

/* bench_import --import FILE: prints "<peak RSS KiB> <RSS KiB before> <JSON bytes> <seconds>
 * <page faults> <system seconds>", the last two those of the import alone. */
static int import_child(const char *path) {
    cm_malloc_for_batches(); /* as the command line's import and report */
    uint64_t before = bench_peak_rss_kib();
    import_stats st;
    err_msg err = {{0}};
    sink sk = {0};
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    double t0 = now_s();
    if (kineto_import(path, NULL, to_sink, &sk, &st, &err) != 0)
        die(err.msg);
    double t = now_s() - t0;
    getrusage(RUSAGE_SELF, &r1);
    printf("%llu %llu %llu %.3f %ld %.3f\n", (unsigned long long)bench_peak_rss_kib(), (unsigned long long)before,
           (unsigned long long)st.json_bytes, t, r1.ru_minflt - r0.ru_minflt, tv_s(r1.ru_stime) - tv_s(r0.ru_stime));
    return 0;
}

/* Runs bench_import --import path in a process of its own: its peak RSS, measured from its start. */
static void rss_of_import(const char *self, const char *path, const char *what) {
    char *args[] = {(char *)self, "--import", (char *)path, NULL};
    char line[256];
    int rc = bench_child_line(args, line, sizeof line);
    unsigned long long peak = 0, before = 0, json = 0;
    long faults = 0;
    double secs = 0, sys = 0;
    if (rc != 0 || sscanf(line, "%llu %llu %llu %lf %ld %lf", &peak, &before, &json, &secs, &faults, &sys) != 6)
        die("bench_import --import failed");
    printf("%s: peak RSS %.1f MiB (%.1f MiB before the import) for %.1f MB of JSON: %.0f MiB per GB of JSON "
           "(%.0f MiB per GB above the start); %.1f MB/s; %ld page faults (%.0f per MB of JSON), %.3f s in the "
           "kernel\n",
           what, peak / 1024.0, before / 1024.0, json / 1e6, peak / 1024.0 / (json / 1e9),
           (peak - before) / 1024.0 / (json / 1e9), json / 1e6 / secs, faults, faults / (json / 1e6), sys);
}


/* Loads the files into a store on threads threads as `report` does (ingest_open_many), runs times:
 * the median seconds. */
static double time_load(const char *const *paths, size_t n, int threads, int runs) {
    double t[16];
    if (runs > 16)
        runs = 16;
    for (int run = 0; run < runs; run++) {
        err_msg err = {{0}};
        st_store *s = st_store_new(NULL);
        double t0 = now_s();
        ingest_loader *ld = ingest_open_many(s, paths, n, 0, NULL, NULL, &err);
        if (ld == NULL)
            die(err.msg);
        ingest_set_threads(ld, threads);
        int rc;
        while ((rc = ingest_step(ld, 0, &err)) == 0)
            ;
        ingest_close(&ld);
        if (rc < 0)
            die(err.msg);
        st_store_commit(s);
        t[run] = now_s() - t0;
        st_store_destroy(&s);
    }
    qsort(t, (size_t)runs, sizeof t[0], cmp_double);
    return t[runs / 2];
}

/* Several sources, one per rank: the input's first eighth (whole entries) written to eight files,
 * plain and gzip'd, and loaded on 1, 2 and more threads. */
static void several_sources(const char *dir, size_t mb, int n_cores, int runs) {
    enum { RANKS = 8 };
    uint64_t span_us;
    tp_buf one = build_input(dir, mb / RANKS ? mb / RANKS : 1, &span_us), gz = gzip_buf(&one, 6);
    char names[2][RANKS][256];
    const char *paths[2][RANKS];
    for (int z = 0; z < 2; z++)
        for (int i = 0; i < RANKS; i++) {
            snprintf(names[z][i], sizeof names[z][i], "/tmp/bench_import-%ld-rank%d.json%s", (long)getpid(), i,
                     z ? ".gz" : "");
            write_file(names[z][i], z ? &gz : &one);
            paths[z][i] = names[z][i];
        }
    printf("%d sources of %.1f MB of JSON each (%.1f MB), loaded into a store as report loads them, median of %d:\n",
           RANKS, (double)one.len / 1e6, (double)one.len * RANKS / 1e6, runs);
    double base[2] = {0, 0};
    for (int t = 1; t <= (n_cores > 2 ? n_cores : 2); t = t < 2 ? 2 : t * 2) {
        double pm = time_load(paths[0], RANKS, t, runs), gm = time_load(paths[1], RANKS, t, runs);
        if (t == 1) {
            base[0] = pm;
            base[1] = gm;
        }
        printf("  %2d thread%s: plain %.3f s (%7.1f MB/s, %.2fx one thread)  gzip %.3f s (%.2fx one thread)  "
               "gzip/plain %.2f\n",
               t, t > 1 ? "s" : " ", pm, (double)one.len * RANKS / 1e6 / pm, base[0] / pm, gm, base[1] / gm,
               gm / pm);
    }
    for (int z = 0; z < 2; z++)
        for (int i = 0; i < RANKS; i++)
            unlink(names[z][i]);
    tp_buf_free(&one);
    tp_buf_free(&gz);
}

int main(int argc, char **argv) {
    tp_crc32_use(import_crc32); /* as the command line computes the batches' checksums */
    if (argc == 3 && strcmp(argv[1], "--import") == 0)
        return import_child(argv[2]);
    if (argc > 2 && strcmp(argv[1], "--files") == 0) {
        for (int i = 2; i < argc; i++) {
            tp_buf text = read_whole(argv[i]);
            const char *base = strrchr(argv[i], '/');
            versus_wc(base ? base + 1 : argv[i], &text, NULL, 9);
            tp_buf_free(&text);
        }
        return 0;
    }
    pid_t busy = 0;
    if (argc > 1 && strcmp(argv[1], "--busy") == 0) {
        busy = busy_start();
        printf("a busy loop runs beside the benchmark (pid %ld)\n", (long)busy);
        argv++;
        argc--;
    }
    int writing = argc > 2 && strcmp(argv[1], "--write") == 0;
    size_t mb = argc > 1 + 2 * writing ? (size_t)atol(argv[1 + 2 * writing]) : 220;
    const char *dir = argc > 2 && !writing ? argv[2] : KINETO_TRACE_DIR;
    if (mb == 0)
        die("usage: bench_import [--busy] [MB] [TRACE_DIR] | --write FILE [MB] | --files FILE...");
    uint64_t span_us;
    double t0 = now_s();
    tp_buf json = build_input(dir, mb, &span_us);
    if (writing) {
        write_file(argv[2], &json);
        printf("%s: %.1f MB of Kineto JSON\n", argv[2], (double)json.len / 1e6);
        tp_buf_free(&json);
        return 0;
    }
    printf("input: %.1f MB of Kineto JSON (sampled_rank-0/1 repeated, span %.0f s), built in %.2f s\n",
           (double)json.len / 1e6, (double)span_us / 1e6, now_s() - t0);

    import_stats st;
    err_msg err = {{0}};
    double median, best;
    const int runs = 5;
    time_import(&json, "bench.json", runs, &median, &best, &st);
    printf("plain JSON:    %7.1f MB/s  %6.2f M events/s  (median of %d: %.3f s; best %.1f MB/s; %llu events, "
           "%llu entries)\n",
           (double)json.len / 1e6 / median, (double)st.events / 1e6 / median, runs, median,
           (double)json.len / 1e6 / best, (unsigned long long)st.events, (unsigned long long)st.entries);

    t0 = now_s();
    tp_buf gz = gzip_buf(&json, 6);
    printf("gzip -6 of the input: %.1f MB (made in %.1f s)\n", (double)gz.len / 1e6, now_s() - t0);
    time_import(&gz, "bench.json.gz", runs, &median, &best, &st);
    printf("gzip JSON:     %7.1f MB/s of JSON text  %6.2f M events/s  (median of %d: %.3f s; best %.1f MB/s)\n",
           (double)json.len / 1e6 / median, (double)st.events / 1e6 / median, runs, median,
           (double)json.len / 1e6 / best);

    /* threads: 1, 2 and more where the process may use more cores, in rounds that time each count
     * once, plain and gzip, so that each ratio is taken within a round */
    int n_cores = cm_cores();
    enum { T_MAX = 8 };
    int counts[T_MAX], n_counts = 0;
    for (int t = 1; t <= (n_cores > 2 ? n_cores : 2) && n_counts < T_MAX; t = t < 2 ? 2 : t * 2)
        counts[n_counts++] = t;
    const int rounds = 7;
    double tp[T_MAX][ROUNDS_MAX], tg[T_MAX][ROUNDS_MAX];
    for (int r = 0; r < rounds; r++)
        for (int c = 0; c < n_counts; c++) {
            tp[c][r] = import_once(&json, "bench.json", counts[c]);
            tg[c][r] = import_once(&gz, "bench.json.gz", counts[c]);
        }
    printf("threads (the process may use %d cores): %d rounds, each count once a round, plain and gzip; times and "
           "MB/s of JSON text the medians, each ratio the median of the rounds' own\n",
           n_cores, rounds);
    double one_plain = 0, two_plain = 0;
    for (int c = 0; c < n_counts; c++) {
        int t = counts[c];
        double up = ratio_median(tp[0], tp[c], rounds), ug = ratio_median(tg[0], tg[c], rounds);
        double gp = ratio_median(tg[c], tp[c], rounds);
        double pm = median_of(tp[c], rounds), gm = median_of(tg[c], rounds);
        if (t == 1)
            one_plain = pm;
        else if (t == 2)
            two_plain = pm;
        printf("  %2d thread%s: plain %7.1f MB/s (%.3f s, %.2fx one thread)  gzip %7.1f MB/s (%.3f s, %.2fx one "
               "thread)  gzip/plain %.2f\n",
               t, t > 1 ? "s" : " ", (double)json.len / 1e6 / pm, pm, up, (double)json.len / 1e6 / gm, gm, ug, gp);
    }
    /* a gzip'd import does the plain one's work and the inflate's: on two cores at best the sum
     * spread evenly over both */
    double inflate = time_inflate(&gz, json.len, runs);
    printf("inflate alone (ISA-L, pieces as the importer's, median of %d): %.3f s (%.0f MB/s of text)", runs,
           inflate, (double)json.len / 1e6 / inflate);
    if (n_cores >= 2)
        printf("; so gzip on 2 cores takes at least (1 thread plain + inflate) / 2 = (%.3f + %.3f) / 2 = %.3f s, "
               "%.2fx plain on 2 threads",
               one_plain, inflate, (one_plain + inflate) / 2, (one_plain + inflate) / 2 / two_plain);
    printf("\n");
    versus_wc("large input (default threads)", &json, &gz, 7);
    crossover(dir, runs);
    several_sources(dir, mb, n_cores, runs);

    char path[256];
    snprintf(path, sizeof path, "/tmp/bench_import-%ld.synctop", (long)getpid());
    tp_fwriter *w = tp_fwriter_open(path, TP_FW_OVERWRITE, &err);
    if (w == NULL)
        die(err.msg);
    t0 = now_s();
    if (kineto_import_mem(json.data, json.len, "bench.json", NULL, to_file, w, &st, &err) != 0)
        die(err.msg);
    if (tp_fwriter_close(&w, &err) != 0)
        die(err.msg);
    double t = now_s() - t0;
    struct stat sb;
    if (stat(path, &sb) != 0)
        die("stat of the trace file");
    printf("to trace file: %7.1f MB/s  (%.3f s); file %.1f MB = %.1f%% of the JSON, %.0f%% of its gzip\n",
           (double)json.len / 1e6 / t, t, (double)sb.st_size / 1e6,
           100.0 * (double)sb.st_size / (double)json.len, 100.0 * (double)sb.st_size / (double)gz.len);
    unlink(path);

    /* memory: a process of its own imports the trace from a file */
    char jpath[256], gpath[256];
    snprintf(jpath, sizeof jpath, "/tmp/bench_import-%ld.json", (long)getpid());
    snprintf(gpath, sizeof gpath, "/tmp/bench_import-%ld.json.gz", (long)getpid());
    write_file(jpath, &json);
    write_file(gpath, &gz);
    tp_buf_free(&gz);
    tp_buf_free(&json);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        die("cannot find /proc/self/exe");
    self[n] = '\0';
    rss_of_import(self, jpath, "memory, .json file   ");
    rss_of_import(self, gpath, "memory, .json.gz file");
    unlink(jpath);
    unlink(gpath);

    /* the real traces, each as it is, from memory: the text, and its gzip as shipped */
    static const char *const real[] = {"qwen_h100_with_stack", "qwen_mi300_rocm_with_stack",
                                       "resnet_2080ti_two_threads", "resnet50_v100_legacy_2021"};
    for (size_t i = 0; i < sizeof real / sizeof real[0]; i++) {
        char rp[1024];
        snprintf(rp, sizeof rp, "%s/%s.json.gz", dir, real[i]);
        tp_buf text = inflate_file(rp), packed = read_whole(rp);
        double pm, pb, gm, gb;
        time_import(&text, "real.json", 9, &pm, &pb, &st);
        time_import(&packed, "real.json.gz", 9, &gm, &gb, &st);
        printf("%-27s %5.1f MB: plain %6.1f MB/s (best %6.1f), gzip %6.1f MB/s of JSON (best %6.1f); %llu events\n",
               real[i], (double)text.len / 1e6, (double)text.len / 1e6 / pm, (double)text.len / 1e6 / pb,
               (double)text.len / 1e6 / gm, (double)text.len / 1e6 / gb, (unsigned long long)st.events);
        versus_wc(real[i], &text, &packed, 9);
        tp_buf_free(&text);
        tp_buf_free(&packed);
    }

    /* a ~1 GB trace built the same way, plain */
    tp_buf gb = build_input(dir, 1000, &span_us);
    versus_wc("built ~1 GB", &gb, NULL, 3);
    tp_buf_free(&gb);
    busy_stop(busy);
    return 0;
}
