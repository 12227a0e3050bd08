/*
 * What the store and report hold per event: each FILE (a Kineto JSON, plain or gzip, an Nsight
 * export or a trace file) is loaded as report loads it, in a process of its own, which prints its
 * peak resident memory after the load, after the analysis and after the text report, the store's
 * bytes per event and where they go (events, summaries, shapes, strings, call sites...). The peak is also
 * given per GiB (2^30 bytes) of the file's text (inflated, for .gz), the stricter reading of a bound of
 * 120 MiB per GB.
 * Without FILE, the large sample traces (TRACE_DIR); a large built input is given as FILE
 * (bench_import --write FILE).
 *
 *   bench_store [FILE...]
 *   bench_store --phases FILE   (what each line runs: loads FILE, prints its figures)
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "analysis.h"
#include "child_rss.h"
#include "grow.h"
#include "import.h"
#include "load.h"
#include "report.h"
#include "store.h"
#include "synctop/codec.h"

static int phases(const char *path) {
    cm_malloc_for_batches(); /* as the command line's report */
    uint64_t base = bench_peak_rss_kib();
    st_store *s = st_store_new(NULL);
    err_msg err = {{0}};
    if (s == NULL || ingest_file(s, path, NULL, NULL, &err) != 0) {
        fprintf(stderr, "bench_store: %s: %s\n", path, err.msg);
        return 1;
    }
    st_store_commit(s); /* as report leaves the store before its analysis */
    st_store_shrink(s);
    malloc_trim(0);
    uint64_t load_peak = bench_peak_rss_kib(), load_now = bench_status_kib("VmRSS");
    an_result r;
    if (an_analyze(s, NULL, &r, &err) != 0) {
        fprintf(stderr, "bench_store: %s: %s\n", path, err.msg);
        return 1;
    }
    uint64_t an_peak = bench_peak_rss_kib();
    FILE *null = fopen("/dev/null", "w");
    rp_opts o = {.format = RP_TEXT, .source = path};
    rp_write(null, s, &r, &o);
    fclose(null);
    uint64_t rp_peak = bench_peak_rss_kib();
    st_memory m;
    st_store_memory_parts(s, &m);
    size_t n = st_store_events(s), all = st_store_memory(s);
    double per = n ? 1.0 / (double)n : 0;
    printf("%zu %.2f %.2f %.2f %.2f %.2f %.2f %.2f %.2f %llu %llu %llu %llu %llu\n", n, (double)all * per,
           (double)m.events * per, (double)m.summaries * per, (double)m.depths * per, (double)m.shapes * per,
           (double)m.strings * per,
           (double)m.callsites * per, (double)m.other * per, (unsigned long long)base,
           (unsigned long long)load_now, (unsigned long long)load_peak, (unsigned long long)an_peak,
           (unsigned long long)rp_peak);
    an_result_free(&r);
    st_store_destroy(&s);
    return 0;
}

/* Bytes of text a file holds (inflated, for gzip). */
static double text_bytes(const char *path) {
    size_t n = strlen(path);
    if (n > 3 && strcmp(path + n - 3, ".gz") == 0) {
        gzFile z = gzopen(path, "rb");
        char buf[1 << 16];
        double total = 0;
        int k;
        while (z && (k = gzread(z, buf, sizeof buf)) > 0)
            total += k;
        if (z)
            gzclose(z);
        return total;
    }
    struct stat st;
    return stat(path, &st) == 0 ? (double)st.st_size : 0;
}

static void measure(const char *self, const char *path) {
    char *args[] = {(char *)self, "--phases", (char *)path, NULL};
    char line[512];
    size_t n;
    double all, ev, sum, dep, shp, str, cs, oth;
    unsigned long long base, now, lp, ap, rp;
    if (bench_child_line(args, line, sizeof line) != 0 ||
        sscanf(line, "%zu %lf %lf %lf %lf %lf %lf %lf %lf %llu %llu %llu %llu %llu", &n, &all, &ev, &sum, &dep, &shp,
               &str, &cs, &oth, &base, &now, &lp, &ap, &rp) != 14) {
        printf("%s: cannot be measured\n", path);
        return;
    }
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    double gb = text_bytes(path) / (double)(1u << 30);
    printf("%-40s %9zu events, store %.1f B/event (events %.1f, summaries %.1f, depths %.1f, shapes %.1f, "
           "strings %.1f, call sites %.1f, other %.1f)\n",
           name, n, all, ev, sum, dep, shp, str, cs, oth);
    printf("%-40s peak RSS: process %.1f MiB, after load %.1f (resident then %.1f), analysis %.1f, report %.1f MiB",
           "", base / 1024.0, lp / 1024.0, now / 1024.0, ap / 1024.0, rp / 1024.0);
    if (gb > 0)
        printf("; %.0f MiB per GiB of text (%.1f MB of it)", rp / 1024.0 / gb, gb * 1073.741824);
    printf("\n");
}

int main(int argc, char **argv) {
    tp_crc32_use(import_crc32); /* as the command line computes the batches' checksums */
    if (argc == 3 && strcmp(argv[1], "--phases") == 0)
        return phases(argv[2]);
    if (argc > 1) {
        for (int i = 1; i < argc; i++)
            measure(argv[0], argv[i]);
        return 0;
    }
    static const char *const k_samples[] = {
        "kineto/resnet_2080ti_two_threads.json.gz", "kineto/resnet50_v100_legacy_2021.json.gz",
        "kineto/v100_ns_resolution_hta.json.gz",   "kineto/qwen_h100_with_stack.json.gz",
        "kineto/qwen_mi300_rocm_with_stack.json.gz", "kineto/sampled_rank-0.json.gz",
        "kineto/alexnet_a100_sync_heavy.json.gz",  "nsys/torchrun_2proc_2gpu_h100.sqlite",
        "nsys/cloverleaf_a100_perlmutter.sqlite",  "nsys/nvfuser_h200_benchmark.sqlite",
    };
    char path[4096];
    for (size_t i = 0; i < sizeof k_samples / sizeof *k_samples; i++) {
        snprintf(path, sizeof path, "%s/%s", TRACE_DIR, k_samples[i]);
        measure(argv[0], path);
    }
    return 0;
}
