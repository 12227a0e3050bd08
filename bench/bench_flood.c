/*
 * What inputs built to cost synctop the most cost it, next to ordinary inputs of the same shape and
 * size (samples/synth/hostile.h makes both): keys chosen to collide under the unkeyed hashes the
 * tables used before they were keyed, and Nsight call chains of long names. First the hashes
 * themselves, per 8-byte key and per 100-byte name: the old unkeyed mixes, SipHash-1-3 as the tables
 * use it, SipHash-2-4, and libsodium's crypto_shorthash (SipHash-2-4) where it is installed. Then
 * each importer on each input, in this process: seconds (the best of RUNS), and the probe sequences
 * longer than CM_HASH_LONG_PROBE that the tables counted (0 when keyed hashing holds).
 *
 *   bench_flood [SCALE]      (SCALE 1, the default: 200k StringIds ids in a copy of the saxpy export,
 *                             200k launches and kernels in profiler JSON, 100k producers in a trace
 *                             file, 120 calls with 1,023-frame chains and 1 MiB names)
 *   bench_flood --write DIR  (writes those inputs and their ordinary twins into DIR, for timing
 *                             another build: synctop import FILE -o OUT, synctop info FILE)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>
#ifdef SYNCTOP_HAVE_SODIUM
#include <sodium.h>
#endif

#include "clock.h"
#include "hash.h"
#include "hostile.h"
#include "kineto.h"
#include "nsys.h"
#include "traceinfo.h"

#define RUNS 3

static void die(const char *what, const char *detail) {
    fprintf(stderr, "bench_flood: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

/* ---- the hashes ---- */

static volatile uint64_t sink;

/* Nanoseconds per call of each hash, over n keys i * an odd number and n names of 100 bytes. */
static void bench_hashes(size_t n) {
    cm_hash_key key;
    cm_hash_key_get(&key);
    char name[100];
    memset(name, 'k', sizeof name);
    double t0 = cm_now_s();
    uint64_t acc = 0;
    for (size_t i = 0; i < n; i++)
        acc += hostile_old_u64map_hash(i * 0x9E3779B97F4A7C15ull);
    double t_old = cm_now_s() - t0;
    t0 = cm_now_s();
    for (size_t i = 0; i < n; i++)
        acc += cm_hash_u64(&key, i * 0x9E3779B97F4A7C15ull);
    double t_13 = cm_now_s() - t0;
    t0 = cm_now_s();
    for (size_t i = 0; i < n; i++) {
        uint64_t x = i * 0x9E3779B97F4A7C15ull;
        acc += cm_siphash(&key, 2, 4, &x, 8);
    }
    double t_24 = cm_now_s() - t0;
    printf("hash of an 8-byte key, ns: old mix %.2f, SipHash-1-3 (tables) %.2f, SipHash-2-4 %.2f", t_old * 1e9 / (double)n,
           t_13 * 1e9 / (double)n, t_24 * 1e9 / (double)n);
#ifdef SYNCTOP_HAVE_SODIUM
    unsigned char k[crypto_shorthash_KEYBYTES], out[crypto_shorthash_BYTES];
    memcpy(k, &key, sizeof k);
    t0 = cm_now_s();
    for (size_t i = 0; i < n; i++) {
        uint64_t x = i * 0x9E3779B97F4A7C15ull;
        crypto_shorthash(out, (const unsigned char *)&x, 8, k);
        acc += out[0];
    }
    printf(", libsodium crypto_shorthash %.2f", (cm_now_s() - t0) * 1e9 / (double)n);
#endif
    printf("\n");
    size_t m = n / 8;
    t0 = cm_now_s();
    for (size_t i = 0; i < m; i++) {
        name[i % sizeof name] = (char)i;
        acc += hostile_old_strpool_hash(name, sizeof name);
    }
    double s_old = cm_now_s() - t0;
    t0 = cm_now_s();
    for (size_t i = 0; i < m; i++) {
        name[i % sizeof name] = (char)i;
        acc += cm_hash_bytes_k(&key, name, sizeof name);
    }
    double s_13 = cm_now_s() - t0;
    printf("hash of a 100-byte name, ns: old FNV-1a and mix %.1f, SipHash-1-3 %.1f", s_old * 1e9 / (double)m,
           s_13 * 1e9 / (double)m);
#ifdef SYNCTOP_HAVE_SODIUM
    t0 = cm_now_s();
    for (size_t i = 0; i < m; i++) {
        name[i % sizeof name] = (char)i;
        crypto_shorthash(out, (const unsigned char *)name, sizeof name, k);
        acc += out[0];
    }
    printf(", libsodium crypto_shorthash %.1f", (cm_now_s() - t0) * 1e9 / (double)m);
#endif
    printf("\n");
    sink = acc;
}

/* ---- the inputs ---- */

/* A copy of the saxpy export at path, open. */
static sqlite3 *sample_copy(const char *path) {
    char src[4096];
    snprintf(src, sizeof src, "%s/saxpy_mpi_a100_rank0.sqlite", NSYS_TRACE_DIR);
    unlink(path);
    sqlite3 *in = NULL, *db = NULL;
    char *into = sqlite3_mprintf("VACUUM INTO %Q", path);
    int rc = into ? sqlite3_open_v2(src, &in, SQLITE_OPEN_READONLY, NULL) : SQLITE_NOMEM;
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(in, into, NULL, NULL, NULL);
    sqlite3_free(into);
    sqlite3_close(in);
    if (rc != SQLITE_OK || sqlite3_open(path, &db) != SQLITE_OK)
        die("cannot copy", src);
    return db;
}

typedef struct input {
    const char *name, *what;
    char path[2][4096]; /* ordinary, chosen */
} input;

enum { IN_IDS, IN_CORR, IN_PRODUCERS, IN_CHAINS, IN_N };

static void write_inputs(input *in, const char *dir, double scale) {
    static const char *const names[IN_N][3] = {
        {"ids", ".sqlite", "nsys import: StringIds ids"},
        {"corr", ".json", "Kineto import: correlations, names"},
        {"producers", ".trace", "info: producer ids"},
        {"chains", ".sqlite", "nsys import: call chains, 1 MiB names"}};
    size_t ids = (size_t)(200000 * scale), corrs = (size_t)(200000 * scale), prods = (size_t)(100000 * scale),
           calls = (size_t)(120 * scale);
    for (int i = 0; i < IN_N; i++) {
        in[i].name = names[i][0];
        in[i].what = names[i][2];
        for (int chosen = 0; chosen < 2; chosen++) {
            char *p = in[i].path[chosen];
            snprintf(p, sizeof in[i].path[0], "%s/%s%s%s", dir, names[i][0], chosen ? "" : "-ordinary", names[i][1]);
            if (i == IN_IDS || i == IN_CHAINS) {
                sqlite3 *db = sample_copy(p);
                int rc = i == IN_IDS ? hostile_nsys_ids(db, ids, chosen, 1000000)
                                     : hostile_nsys_chains(db, calls, 1023, chosen ? 1u << 20 : 32);
                if (rc != SQLITE_OK || sqlite3_exec(db, "VACUUM", NULL, NULL, NULL) != SQLITE_OK)
                    die("cannot build", p);
                sqlite3_close(db);
            } else if (i == IN_CORR) {
                size_t len;
                char *json = hostile_kineto_json(corrs, chosen ? HOSTILE_CORRS | HOSTILE_NAMES : 0, &len);
                FILE *f = fopen(p, "wb");
                if (json == NULL || f == NULL || fwrite(json, 1, len, f) != len || fclose(f) != 0)
                    die("cannot write", p);
                free(json);
            } else {
                err_msg err = {{0}};
                if (hostile_trace(p, prods, chosen, &err) != 0)
                    die("cannot write", err.msg);
            }
        }
    }
}

static int discard(void *ctx, const void *batch, size_t len, err_msg *err) {
    (void)batch;
    (void)err;
    *(size_t *)ctx += len;
    return 0;
}

/* Reads input i's file at path as synctop does; the best time of RUNS. */
static double time_input(int i, const char *path) {
    double best = 1e30;
    for (int r = 0; r < RUNS; r++) {
        size_t bytes = 0;
        err_msg err = {{0}};
        int rc;
        double t0 = cm_now_s();
        if (i == IN_PRODUCERS) {
            traceinfo ti;
            rc = traceinfo_load(&ti, path, &err);
            if (rc == 0)
                traceinfo_free(&ti);
        } else if (i == IN_CORR) {
            rc = kineto_import(path, NULL, discard, &bytes, NULL, &err);
        } else {
            rc = nsys_import(path, NULL, discard, &bytes, NULL, &err);
        }
        double t = cm_now_s() - t0;
        if (rc != 0)
            die("cannot read", err.msg);
        best = t < best ? t : best;
    }
    return best;
}

int main(int argc, char **argv) {
    if (argc > 2 && strcmp(argv[1], "--write") == 0) {
        input in[IN_N];
        mkdir(argv[2], 0755); /* or it is there already */
        write_inputs(in, argv[2], argc > 3 ? atof(argv[3]) : 1.0);
        for (int i = 0; i < IN_N; i++)
            printf("%s\n%s\n", in[i].path[0], in[i].path[1]);
        return 0;
    }
    double scale = argc > 1 ? atof(argv[1]) : 1.0;
    if (scale <= 0)
        scale = 1.0;
    bench_hashes(20000000);
    char dir[] = "/tmp/bench_flood_XXXXXX";
    if (mkdtemp(dir) == NULL)
        die("cannot make a temporary directory", NULL);
    input in[IN_N];
    write_inputs(in, dir, scale);
    printf("%-48s %11s %11s %7s %12s\n", "input", "ordinary s", "chosen s", "ratio", "long probes");
    for (int i = 0; i < IN_N; i++) {
        struct stat sb;
        double t[2];
        uint64_t before = cm_hash_long_probes();
        t[0] = time_input(i, in[i].path[0]);
        t[1] = time_input(i, in[i].path[1]);
        if (stat(in[i].path[1], &sb) != 0)
            die("cannot stat", in[i].path[1]);
        char label[96];
        snprintf(label, sizeof label, "%s, %.1f MB", in[i].what, (double)sb.st_size / 1e6);
        printf("%-48s %11.3f %11.3f %7.2f %12llu\n", label, t[0], t[1], t[1] / t[0],
               (unsigned long long)(cm_hash_long_probes() - before));
        unlink(in[i].path[0]);
        unlink(in[i].path[1]);
    }
    rmdir(dir);
    return 0;
}
