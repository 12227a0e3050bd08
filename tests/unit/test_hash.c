/*
 * Keyed hashing (common/hash.h): SipHash against its published vectors, the process's key, and
 * the tables and importers fed keys chosen to collide under the unkeyed hashes they used before
 * (samples/synth/hostile.h builds them). Cost is counted, not timed: a lookup or insertion that
 * walks more than CM_HASH_LONG_PROBE slots is counted by the tables, and none may be. And the
 * importers' and the analysis's key sorts (common/radix.h), against qsort; and the pages the big
 * arrays are made in ahead (common/grow.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "corrmap.h"
#include "grow.h"
#include "hash.h"
#include "hostile.h"
#include "radix.h"
#include "hta.h"
#include "io.h"
#include "kineto.h"
#include "load.h"
#include "net_summary.h"
#include "nsys.h"
#include "store.h"
#include "strpool.h"
#include "task.h"
#include "traceinfo.h"
#include "u64map.h"

#ifndef NSYS_TRACE_DIR
#error "NSYS_TRACE_DIR must name samples/traces/nsys"
#endif

/* ---- SipHash ---- */

/* The reference's key: bytes 00 to 0f. */
static const cm_hash_key ref_key = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};

/* SipHash-2-4 from the reference implementation's vectors (Aumasson and Bernstein), and
 * SipHash-1-3, which tables use, from the Linux kernel's (lib/siphash_kunit.c: hsiphash is
 * SipHash-1-3 on 64-bit machines, its vectors the low 32 bits): input bytes 00, 01, ... of each
 * length under the reference's key. */
TEST(siphash_matches_the_published_vectors) {
    uint8_t in[64];
    for (int i = 0; i < 64; i++)
        in[i] = (uint8_t)i;
    static const struct {
        size_t len;
        uint64_t v;
    } sip24[] = {{0, 0x726fdb47dd0e0e31ull},  {1, 0x74f839c593dc67fdull},  {7, 0xab0200f58b01d137ull},
                 {8, 0x93f5f5799a932462ull},  {15, 0xa129ca6149be45e5ull}, {16, 0x3f2acc7f57c29bdbull},
                 {63, 0x958a324ceb064572ull}};
    for (size_t i = 0; i < sizeof sip24 / sizeof sip24[0]; i++)
        ASSERT_UEQ(cm_siphash(&ref_key, 2, 4, in, sip24[i].len), sip24[i].v);
    static const struct {
        size_t len;
        uint32_t v;
    } sip13[] = {{0, 0x050fc4dcu}, {1, 0x7d57ca93u}, {2, 0x4dc7d44du}, {7, 0x9bb11140u},
                 {8, 0x8d299a8eu}, {15, 0x2a519956u}, {16, 0x7d908b66u}};
    for (size_t i = 0; i < sizeof sip13 / sizeof sip13[0]; i++) {
        ASSERT_UEQ((uint32_t)cm_hash_bytes_k(&ref_key, in, sip13[i].len), sip13[i].v);
        ASSERT_UEQ(cm_siphash(&ref_key, 1, 3, in, sip13[i].len), cm_hash_bytes_k(&ref_key, in, sip13[i].len));
    }
    /* the words' forms hash the words' bytes */
    ASSERT_UEQ(cm_hash_u64(&ref_key, 0x0706050403020100ull), cm_hash_bytes_k(&ref_key, in, 8));
    ASSERT_UEQ(cm_hash_u64x2(&ref_key, 0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull), cm_hash_bytes_k(&ref_key, in, 16));
}

/* ---- the process's key ---- */

/* This binary started with SYNCTOP_TEST_KEY_FD draws its key, writes it there and ends before any
 * case runs: a process that has drawn none, whatever the cases run before in its parent did. */
__attribute__((constructor)) static void key_drawer(void) {
    const char *fd = getenv("SYNCTOP_TEST_KEY_FD");
    if (fd == NULL)
        return;
    cm_hash_key k;
    cm_hash_key_get(&k);
    _exit(write(atoi(fd), &k, sizeof k) == (ssize_t)sizeof k ? 0 : 1);
}

/* The key of a child process: a new program (this binary again, its key drawn before anything
 * else) when fresh, else this process forked; filter runs in it first. */
static cm_hash_key child_key(void (*filter)(void), int fresh) {
    int fd[2];
    ASSERT_OK(pipe(fd));
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        if (filter)
            filter();
        if (fresh) {
            char num[16];
            snprintf(num, sizeof num, "%d", fd[1]);
            setenv("SYNCTOP_TEST_KEY_FD", num, 1);
            execl("/proc/self/exe", "test_hash", (char *)NULL);
            _exit(4);
        }
        cm_hash_key k;
        cm_hash_key_get(&k);
        _exit(write(fd[1], &k, sizeof k) == (ssize_t)sizeof k ? 0 : 1);
    }
    close(fd[1]);
    cm_hash_key k = {0, 0};
    ssize_t got = read(fd[0], &k, sizeof k);
    close(fd[0]);
    int status;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ASSERT_EQ(got, (ssize_t)sizeof k);
    return k;
}

static int key_eq(cm_hash_key a, cm_hash_key b) { return a.k0 == b.k0 && a.k1 == b.k1; }

/* Each process draws its own key; one process keeps one, and a child forked after it was drawn
 * keeps its parent's, so that the tables it inherits stay usable. */
TEST(each_process_draws_one_key_and_a_fork_keeps_it) {
    cm_hash_key a = child_key(NULL, 1), b = child_key(NULL, 1);
    ASSERT(!key_eq(a, b));
    cm_hash_key mine, again;
    cm_hash_key_get(&mine);
    cm_hash_key_get(&again);
    ASSERT(key_eq(mine, again));
    ASSERT(!key_eq(mine, a) && !key_eq(mine, b));
    ASSERT(key_eq(child_key(NULL, 0), mine));
}

/* getrandom() answers ENOSYS, as under a sandbox that refuses it (seccomp). */
static void refuse_getrandom(void) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getrandom, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        _exit(77);
    uint8_t b[16];
    if (getrandom(b, sizeof b, GRND_NONBLOCK) != -1 || errno != ENOSYS)
        _exit(3);
}

/* Where getrandom() is refused, the key still comes at once, and still differs per process. */
TEST(a_key_is_drawn_where_getrandom_is_refused) {
    pid_t probe = fork();
    ASSERT(probe >= 0);
    if (probe == 0) {
        refuse_getrandom();
        _exit(0);
    }
    int status;
    ASSERT_EQ(waitpid(probe, &status, 0), probe);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
        TASK_SKIP("seccomp filters are not allowed here");
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    cm_hash_key a = child_key(refuse_getrandom, 1), b = child_key(refuse_getrandom, 1);
    ASSERT(!key_eq(a, b));
    ASSERT(a.k0 != 0 || a.k1 != 0);
}

/* ---- the tables ---- */

/* 20,000 keys that the old mix sent to one slot: under it, each insertion walked past every key
 * before it (2 * 10^8 slots in all). */
TEST(u64map_keys_chosen_against_the_old_mix_walk_no_long_probes) {
    enum { N = 20000 };
    for (size_t i = 0; i < N; i++)
        ASSERT_UEQ(hostile_old_u64map_hash(hostile_u64map_key(i)) & 0xFFFFF, 0);
    cm_u64map m = {0};
    for (size_t i = 0; i < N; i++)
        ASSERT_OK(cm_u64map_put(&m, hostile_u64map_key(i), i));
    ASSERT_UEQ(cm_u64map_count(&m), N);
    for (size_t i = 0; i < N; i++) {
        const uint64_t *v = cm_u64map_find(&m, hostile_u64map_key(i));
        ASSERT_NOT_NULL(v);
        ASSERT_UEQ(*v, i);
    }
    ASSERT_UEQ(cm_hash_long_probes(), 0);
    cm_u64map_free(&m);
}

/* A corrmap and a u64map (keyed pid << 32 | id) given the same puts: every key put is found with
 * the same value in both, and keys never put are in neither. */
static void corr_check(cm_corrmap *m, cm_u64map *ref, uint64_t *x) {
    for (size_t i = 0; i < ref->cap; i++) {
        if (ref->keys[i] == 0)
            continue;
        uint64_t v = 0;
        ASSERT(cm_corrmap_find(m, (uint32_t)(ref->keys[i] >> 32), (uint32_t)ref->keys[i], &v));
        ASSERT_UEQ(v, ref->vals[i]);
    }
    for (int i = 0; i < 20000; i++) {
        *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
        uint32_t pid = (uint32_t)(*x >> 40) % 12, id = (uint32_t)*x % 400000;
        uint64_t v = 0;
        int in_ref = cm_u64map_find(ref, (uint64_t)pid << 32 | id) != NULL;
        if (((uint64_t)pid << 32 | id) == 0)
            in_ref = ref->has_zero;
        ASSERT_EQ(cm_corrmap_find(m, pid, id, &v), in_ref);
    }
}

static void corr_put(cm_corrmap *m, cm_u64map *ref, uint32_t pid, uint32_t id, uint64_t v) {
    ASSERT_OK(cm_corrmap_put(m, pid, id, v));
    ASSERT_OK(cm_u64map_put(ref, (uint64_t)pid << 32 | id, v));
}

/* The (process, correlation id) map answers as a hash map does, whatever the ids: each process's
 * ids numbered on with gaps (a capture holds one call in ten, its processes interleaved), falling,
 * scattered, with values too large for its tables, written over, and more processes than it looks
 * through one by one. Ids that fill a sixteenth of their range stay in its tables, whose ranges
 * never cover more than 16 per id held and 1024. */
TEST(corrmap_answers_as_a_hash_map_does) {
    cm_corrmap m = {0};
    cm_u64map ref = {0};
    uint64_t x = 0x2545F4914F6CDD1Dull;
    uint32_t next[3] = {1000, 50000, 7};
    for (uint64_t i = 0; i < 30000; i++) { /* three processes, numbered on, nine ids in ten unseen */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint32_t p = (uint32_t)(x % 3);
        next[p] += 1 + (uint32_t)(x >> 8) % 19;
        corr_put(&m, &ref, p, next[p], i);
    }
    ASSERT_UEQ(cm_u64map_count(&m.sparse), 0);
    corr_check(&m, &ref, &x);
    for (uint32_t id = 399999; id > 390000; id -= 3) /* a fourth, falling */
        corr_put(&m, &ref, 3, id, id * 2ull);
    ASSERT_UEQ(cm_u64map_count(&m.sparse), 0);
    corr_check(&m, &ref, &x);
    for (int i = 0; i < 3000; i++) { /* scattered over the whole range of ids, some over the others */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        corr_put(&m, &ref, 4 + (uint32_t)(x % 8), (uint32_t)(x >> 32), x >> 40);
        corr_put(&m, &ref, (uint32_t)(x % 3), (uint32_t)(x >> 16) % 400000, x >> 44);
    }
    ASSERT_GT(cm_u64map_count(&m.sparse), 0);
    corr_check(&m, &ref, &x);
    corr_put(&m, &ref, 0, next[0], UINT32_MAX); /* too large for a table, then small again */
    corr_put(&m, &ref, 0, next[0] - 1, UINT64_MAX - 5);
    corr_check(&m, &ref, &x);
    corr_put(&m, &ref, 0, next[0], 17);
    corr_put(&m, &ref, 0, 0, 0);
    corr_check(&m, &ref, &x);
    ASSERT_GT(m.n_procs, 8);
    for (size_t i = 0; i < m.n_procs; i++)
        ASSERT(m.procs[i].cap <= 16 * (m.procs[i].n + 1) + 1024);
    cm_corrmap_free(&m);
    cm_u64map_free(&ref);
}

/* 2^13 strings with one old string-pool hash: interned, then found again, with no long walk. */
TEST(strpool_strings_chosen_against_the_old_hash_walk_no_long_probes) {
    enum { K = 13, N = 1 << K, LEN = 4 * K };
    char *s = malloc((size_t)N * LEN);
    ASSERT_NOT_NULL(s);
    hostile_strings(s, K);
    uint32_t h0 = hostile_old_strpool_hash(s, LEN);
    for (size_t i = 1; i < N; i++) {
        ASSERT_UEQ(hostile_old_strpool_hash(s + i * LEN, LEN), h0);
        ASSERT(memcmp(s + i * LEN, s + (i - 1) * LEN, LEN) != 0);
    }
    cm_strpool p;
    cm_strpool_init(&p, 0, 0);
    for (size_t i = 0; i < N; i++) {
        uint32_t id;
        ASSERT_OK(cm_strpool_intern(&p, s + i * LEN, LEN, &id));
        ASSERT_UEQ(id, i + 1);
    }
    for (size_t i = 0; i < N; i++) {
        uint32_t id;
        ASSERT_OK(cm_strpool_intern(&p, s + i * LEN, LEN, &id));
        ASSERT_UEQ(id, i + 1);
    }
    ASSERT_UEQ(cm_hash_long_probes(), 0);
    cm_strpool_free(&p);
    free(s);
}

/* ---- the importers ---- */

static int discard(void *ctx, const void *batch, size_t len, err_msg *err) {
    (void)batch, (void)err;
    *(size_t *)ctx += len;
    return 0;
}

/* A copy of the saxpy export with 20,000 more StringIds rows whose ids the old mix sent to one
 * slot of the importer's id map. */
TEST(nsys_string_ids_chosen_against_the_old_mix_import_without_long_probes) {
    enum { N = 20000 };
    const char *path = task_path("ids.sqlite");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cp %s/saxpy_mpi_a100_rank0.sqlite %s", NSYS_TRACE_DIR, path);
    ASSERT_OK(system(cmd));
    sqlite3 *db;
    ASSERT_EQ(sqlite3_open(path, &db), SQLITE_OK);
    ASSERT_EQ(hostile_nsys_ids(db, N, 1, 0), SQLITE_OK);
    sqlite3_stmt *q;
    ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM StringIds", -1, &q, NULL), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
    int64_t rows = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    ASSERT_EQ(rows, 697 + N);
    size_t bytes = 0;
    import_stats st;
    err_msg err = {{0}};
    if (nsys_import(path, NULL, discard, &bytes, &st, &err) != 0)
        TASK_FAIL_("import failed: %s", err.msg);
    ASSERT_UEQ(st.invalid, 0);
    ASSERT_GT(bytes, 0);
    ASSERT_UEQ(cm_hash_long_probes(), 0);
}

/* A profiler trace of 20,000 launches and kernels paired by correlation ids that the old mix sent
 * to the first 64 slots of the importer's correlation map, the kernels named by names that the old
 * name hash sent to the first 64 slots of its table of names. */
TEST(kineto_correlations_and_names_chosen_against_the_old_hashes_import_without_long_probes) {
    enum { N = 20000 };
    for (size_t i = 0; i < N; i += 97) {
        char name[HOSTILE_NAME_LEN];
        hostile_kineto_name(i, name);
        ASSERT_LT(hostile_old_kineto_name_hash(name, sizeof name) & 0xFFFF, 64);
    }
    uint32_t corr[64];
    hostile_corrs(corr, 64, 16);
    for (size_t i = 0; i < 64; i++)
        ASSERT_LT(hostile_old_u64map_hash(corr[i]) & 0xFFFF, 64);
    size_t len;
    char *json = hostile_kineto_json(N, HOSTILE_CORRS | HOSTILE_NAMES, &len);
    ASSERT_NOT_NULL(json);
    size_t bytes = 0;
    import_stats st;
    err_msg err = {{0}};
    if (kineto_import_mem(json, len, "chosen.json", NULL, discard, &bytes, &st, &err) != 0)
        TASK_FAIL_("import failed: %s", err.msg);
    ASSERT_UEQ(st.records[TP_K_KERNEL], N);
    ASSERT_UEQ(st.records[TP_K_API], N);
    ASSERT_UEQ(st.invalid, 0);
    ASSERT_UEQ(cm_hash_long_probes(), 0);
    free(json);
}

/* A trace file of 20,000 producers whose ids the old hashes sent to one slot, half of the 64-bit
 * map (info's producers) and half of the trace-file map (the writer's and the reader's producers):
 * written and summarized with no long walk. */
TEST(trace_producers_chosen_against_the_old_hashes_read_without_long_probes) {
    enum { N = 20000 };
    for (size_t i = 0; i < N / 2; i++)
        ASSERT_UEQ(hostile_old_fmap_hash(hostile_fmap_key(i), 0) & 0xFFFFF, 0);
    const char *path = task_path("producers.trace");
    err_msg err = {{0}};
    if (hostile_trace(path, N, 1, &err) != 0)
        TASK_FAIL_("cannot write the trace: %s", err.msg);
    traceinfo ti;
    if (traceinfo_load(&ti, path, &err) != 0)
        TASK_FAIL_("cannot read the trace: %s", err.msg);
    ASSERT_UEQ(ti.n_prods, N);
    ASSERT_UEQ(cm_hash_long_probes(), 0);
    traceinfo_free(&ti);
}

/* A profiler trace of 20,000 launches whose correlation ids the old hash of HTA's table of links
 * sent to its first 64 slots: HTA's breakdowns walk no long probe. */
TEST(hta_correlations_chosen_against_the_old_hash_link_without_long_probes) {
    enum { N = 20000 };
    uint32_t corr[64];
    hostile_hta_corrs(corr, 64, 16);
    for (size_t i = 0; i < 64; i++)
        ASSERT_LT(hostile_old_hta_slot(corr[i], 16), 64);
    size_t len;
    char *json = hostile_kineto_json(N, HOSTILE_HTA_CORRS, &len);
    ASSERT_NOT_NULL(json);
    const char *path = task_path("hta.json");
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    ASSERT(fd >= 0);
    ASSERT_OK(cm_write_full(fd, json, len));
    ASSERT_OK(close(fd));
    free(json);
    st_store *s = st_store_new(NULL);
    ASSERT_NOT_NULL(s);
    err_msg err = {{0}};
    if (ingest_file(s, path, NULL, NULL, &err) != 0)
        TASK_FAIL_("%s", err.msg);
    st_store_commit(s);
    hta_result h;
    ASSERT_OK(hta_analyze(s, &(hta_opts){0}, &h, NULL));
    ASSERT_UEQ(cm_hash_long_probes(), 0);
    hta_result_free(&h);
    st_store_destroy(&s);
}

static void count_summary(void *ctx, const tp_summary *sum) {
    (void)sum;
    ++*(size_t *)ctx;
}

/* A relay's summer fed one batch from each of 4,096 producers (its bound) whose ids the old slot
 * function sent to one slot. */
TEST(relay_producers_chosen_against_the_old_slots_walk_no_long_probes) {
    enum { N = 4096 };
    net_summer *m = net_summer_new(7);
    ASSERT_NOT_NULL(m);
    tp_buf b = {0};
    for (size_t i = 0; i < N; i++) {
        uint64_t id = hostile_producer_key(i);
        ASSERT_LT(hostile_old_producer_mix(id), 1ull << 50);
        tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = id});
        ASSERT_NOT_NULL(enc);
        tp_kernel k = {.kind = TP_K_KERNEL, .device = 0, .stream = 7, .start = 1000, .end = 2000, .correlation = 1};
        ASSERT_OK(tp_enc_add(enc, &k));
        ASSERT_OK(tp_enc_finish(enc, &b));
        err_msg err = {{0}};
        if (net_summer_add(m, b.data, b.len, &err) != 0)
            TASK_FAIL_("batch %zu: %s", i, err.msg);
        tp_enc_destroy(&enc);
    }
    size_t n = 0;
    ASSERT_UEQ(net_summer_flush(m, 0, 1000000000, count_summary, &n), N);
    ASSERT_UEQ(n, N);
    ASSERT_UEQ(cm_hash_long_probes(), 0);
    tp_buf_free(&b);
    net_summer_destroy(&m);
}

/* ---- the key sorts (radix.h) against qsort ---- */

typedef struct key_pair {
    uint64_t key, val;
} key_pair;

static int pair_by_key_then_val(const void *a, const void *b) {
    const key_pair *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->val < y->val ? -1 : x->val > y->val;
}

static uint64_t next_rand(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Keys of a few shapes: 0 any, 1 two bytes apart that vary, 2 seven keys, 4 timestamps (ns of 256 s
 * of a day in 2023, as a trace's bubbles: their top three bytes shared), 5 one key, 6 a top byte of
 * three values above a byte all share, then the low bits. */
static uint64_t key_of(int shape, uint64_t r) {
    switch (shape) {
    case 0:
        return r;
    case 1:
        return r & 0x00ff00000000ff00ull;
    case 4:
        return 1682725898000000000ull + r % 256000000000ull;
    case 5:
        return 0x0123456789abcdefull;
    case 6:
        return (r % 3) << 56 | 0xabull << 48 | (r & 0xffff);
    default:
        return (r % 7) << 40;
    }
}

static int u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The pairs by their keys' bits from low up, then by the order they came (val numbers them). */
static unsigned g_low;
static int pair_by_high_then_val(const void *a, const void *b) {
    const key_pair *x = a, *y = b;
    uint64_t hx = g_low >= 64 ? 0 : x->key >> g_low, hy = g_low >= 64 ? 0 : y->key >> g_low;
    if (hx != hy)
        return hx < hy ? -1 : 1;
    return x->val < y->val ? -1 : x->val > y->val;
}

/* A sort by the bits of the key from low up leaves elements equal in those bits in the order they
 * came, whatever their lower bits; and keys whose low bits number the elements in order come out in
 * whole-key order. */
TEST(a_sort_by_high_bits_keeps_the_order_given_among_equals) {
    static const unsigned lows[] = {0, 1, 11, 19, 32, 53, 63, 64};
    static const size_t sizes[] = {0, 1, 2, 33, 1000, 100000};
    uint64_t seed = 7;
    for (size_t l = 0; l < sizeof lows / sizeof lows[0]; l++)
        for (int shape = 0; shape < 3; shape++)
            for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
                size_t n = sizes[z];
                key_pair *want = malloc((n + 1) * sizeof *want), *a = malloc((n + 1) * sizeof *a);
                key_pair *t = malloc((n + 1) * sizeof *t);
                uint64_t *w = malloc((n + 1) * sizeof *w), *wt = malloc((n + 1) * sizeof *wt);
                uint64_t *wq = malloc((n + 1) * sizeof *wq);
                ASSERT(want && a && t && w && wt && wq);
                for (size_t i = 0; i < n; i++)
                    want[i] = a[i] = (key_pair){key_of(shape, next_rand(&seed)), i};
                g_low = lows[l];
                qsort(want, n, sizeof *want, pair_by_high_then_val);
                key_pair *s = cm_radix_sort_above_by(a, t, n, sizeof *a, lows[l]);
                ASSERT_NOT_NULL(s);
                for (size_t i = 0; i < n; i++)
                    if (s[i].key != want[i].key || s[i].val != want[i].val)
                        TASK_FAIL_("bits from %u, shape %d, %zu keys: differs at %zu", lows[l], shape, n, i);
                /* keys whose bits below low are the element's index: in whole-key order */
                unsigned low = lows[l] < 32 ? 32 : lows[l];
                for (size_t i = 0; i < n; i++) {
                    uint64_t hi = low >= 64 ? 0 : key_of(shape, next_rand(&seed)) << low;
                    w[i] = wq[i] = hi | i;
                }
                qsort(wq, n, sizeof *wq, u64_cmp);
                uint64_t *ws = cm_radix_sort_u64_above(w, wt, n, low);
                ASSERT_NOT_NULL(ws);
                for (size_t i = 0; i < n; i++)
                    if (ws[i] != wq[i])
                        TASK_FAIL_("numbered keys above bit %u, shape %d, %zu keys: differs at %zu", low, shape, n, i);
                free(want);
                free(a);
                free(t);
                free(w);
                free(wt);
                free(wq);
            }
}

static int pair_by_key(const void *a, const void *b) {
    const key_pair *x = a, *y = b;
    return (x->key > y->key) - (x->key < y->key);
}

static int pair_by_val_r(const void *a, const void *b, void *arg) {
    (void)arg;
    const key_pair *x = a, *y = b;
    return (x->val > y->val) - (x->val < y->val);
}

/* Sorted by key alone, each run of one key then put in order by value: the order of a sort by key
 * and value, runs of one, a few or thousands. */
TEST(runs_of_one_key_are_put_in_order_by_the_rest) {
    static const size_t sizes[] = {0, 1, 2, 17, 1000, 100000};
    uint64_t seed = 11;
    for (int shape = 0; shape < 4; shape++)
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
            size_t n = sizes[z];
            key_pair *want = malloc((n + 1) * sizeof *want), *a = malloc((n + 1) * sizeof *a);
            ASSERT(want && a);
            for (size_t i = 0; i < n; i++) { /* shape 3: runs of 1 to 20 */
                uint64_t r = next_rand(&seed);
                want[i] = a[i] = (key_pair){shape == 3 ? r % (n / 10 + 1) : key_of(shape, r), r >> 7};
            }
            qsort(want, n, sizeof *want, pair_by_key_then_val);
            qsort(a, n, sizeof *a, pair_by_key);
            cm_sort_runs(a, n, sizeof *a, pair_by_val_r, NULL);
            for (size_t i = 0; i < n; i++)
                if (a[i].key != want[i].key || a[i].val != want[i].val)
                    TASK_FAIL_("shape %d, %zu keys: differs at %zu", shape, n, i);
            free(want);
            free(a);
        }
}

TEST(key_sorts_order_as_qsort_does) {
    static const size_t sizes[] = {0, 1, 2, 31, 32, 33, 255, 1000, 100000};
    static const int shapes[] = {0, 1, 2, 4, 5, 6};
    uint64_t seed = 42;
    for (size_t h = 0; h < sizeof shapes / sizeof shapes[0]; h++)
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
            int shape = shapes[h];
            size_t n = sizes[z];
            key_pair *want = malloc((n + 1) * sizeof *want), *a = malloc((n + 1) * sizeof *a);
            key_pair *t = malloc((n + 1) * sizeof *t), *b = malloc((n + 1) * sizeof *b);
            ASSERT(want && a && t && b);
            for (size_t i = 0; i < n; i++)
                want[i] = a[i] = b[i] = (key_pair){key_of(shape, next_rand(&seed)), i};
            qsort(want, n, sizeof *want, pair_by_key_then_val); /* by key, then first in first */
            /* the stable sort: keys in order, and equal keys in the order they came */
            key_pair *s = cm_radix_sort_above_by(a, t, n, sizeof *a, 0);
            ASSERT_NOT_NULL(s);
            for (size_t i = 0; i < n; i++)
                if (s[i].key != want[i].key || s[i].val != want[i].val)
                    TASK_FAIL_("shape %d, %zu keys: stable sort differs at %zu", shape, n, i);
            /* in place: keys in order, the same pairs */
            cm_radix_sort_inplace_by(b, n, sizeof *b);
            for (size_t i = 0; i < n; i++)
                if (b[i].key != want[i].key || (i > 0 && b[i - 1].key > b[i].key))
                    TASK_FAIL_("shape %d, %zu keys: sort in place differs at %zu", shape, n, i);
            qsort(b, n, sizeof *b, pair_by_key_then_val);
            for (size_t i = 0; i < n; i++)
                if (b[i].val != want[i].val)
                    TASK_FAIL_("shape %d, %zu keys: sort in place lost or doubled a pair at %zu", shape, n, i);
            free(want);
            free(a);
            free(t);
            free(b);
        }
}

/* ---- the big arrays' pages (common/grow.h) ---- */

/* cm_big_populate makes the whole pages of its range, and only those (mincore says which pages are
 * in memory), and they read as zeros until written; cm_big_give_back gives back the whole pages of
 * its range, and only those, which read as zeros after. Where the kernel cannot make pages ahead,
 * the test says so. */
TEST(populate_and_give_back_take_the_whole_pages_of_their_range_and_no_others) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), n = 16;
    uint8_t *a = cm_big_alloc(n * page);
    ASSERT_NOT_NULL(a);
#ifdef MADV_POPULATE_WRITE
    int can = madvise(a + 12 * page, page, MADV_POPULATE_WRITE) == 0; /* the last page whole: page 12 */
#else
    int can = 0;
#endif
    if (!can) {
        cm_big_free(a, n * page);
        TASK_SKIP("this kernel does not make pages ahead (MADV_POPULATE_WRITE, Linux 5.14)");
    }
    cm_big_populate(a + page + page / 2, 8 * page); /* from page 1.5 to page 9.5: pages 2 to 8 whole */
    unsigned char in[16];
    ASSERT_EQ(mincore(a, n * page, in), 0);
    for (size_t i = 0; i < n; i++) {
        int want = (i >= 2 && i <= 8) || i == 12;
        if ((in[i] & 1) != want)
            TASK_FAIL_("page %zu: %s, expected %s", i, in[i] & 1 ? "in memory" : "not", want ? "in memory" : "not");
    }
    for (size_t i = 2 * page; i < 9 * page; i++)
        if (a[i] != 0)
            TASK_FAIL_("byte %zu of a page made ahead is %u, not 0", i, a[i]);
    /* given back: the whole pages of [3.5, 6.25) pages, 4 and 5, and only those */
    memset(a + 2 * page, 7, 7 * page);
    ASSERT_UEQ(cm_big_give_back(a + 3 * page + page / 2, a + 6 * page + page / 4), 2 * page);
    ASSERT_EQ(mincore(a, n * page, in), 0);
    for (size_t i = 0; i < n; i++) {
        int want = (i >= 2 && i <= 8 && i != 4 && i != 5) || i == 12;
        if ((in[i] & 1) != want)
            TASK_FAIL_("after the give-back, page %zu: %s", i, in[i] & 1 ? "in memory" : "not");
    }
    ASSERT_EQ(a[4 * page], 0);
    ASSERT_EQ(a[4 * page - 1], 7);
    ASSERT_EQ(a[6 * page], 7);
    ASSERT_UEQ(cm_big_give_back(a + page + 1, a + 2 * page - 1), 0); /* no whole page */
    cm_big_free(a, n * page);
}
