/*
 * A small test harness in the manner of libuv's test/task.h: TEST(name) defines a test case that
 * registers itself; typed ASSERT_* macros print both sides when they fail. Each test file becomes
 * one executable; CMake registers every TEST(...) line as its own ctest case, run as
 * `test_binary CASE` in its own process (ctest applies the timeout).
 */
#ifndef SYNCTOP_TASK_H
#define SYNCTOP_TASK_H

#include <inttypes.h>
#include <stdint.h>
#include <sys/types.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*task_fn)(void);
void task_register(const char *name, task_fn fn);
/* A fresh private temporary directory for this test (removed at exit when the test passes). */
const char *task_tmpdir(void);
/* Path of a file in task_tmpdir(), in a static buffer rotated over 8 slots. */
const char *task_path(const char *name);
/* The directory holding the test binaries and the synctop binary's path. */
const char *task_bindir(void);
const char *task_synctop(void);

/* Starts argv[0] with stdin from /dev/null and stdout, stderr to the files given. A failed check
 * kills every process started this way, so none is left behind. */
pid_t task_spawn(const char *const argv[], const char *out_path, const char *err_path);
/* Its exit status (128 + the signal when killed by one), or -1 when it still ran after timeout_s
 * (it is killed then). */
int task_wait_exit(pid_t pid, int timeout_s);
void task_sleep_ms(int ms);
/* A whole file as a malloc'd C string (the test fails when it cannot be read). */
char *task_slurp(const char *path);
/* Runs synctop with args (NULL-terminated, without the binary) to its end, within timeout_s: its exit
 * status, and its stdout and stderr as task_slurp gives them in *out and *err (either may be NULL). */
int task_run_synctop(const char *const args[], char **out, char **err, int timeout_s);
/* A loopback TCP port free now, outside the kernel's ephemeral range (32768 and up by default), for
 * a test that binds it again after a restart: no other test's "port *" can take it in between (and
 * have a subscriber reconnect to someone else's publisher), and no other test's task_free_port
 * hands it out while this test runs (an flock held until the process ends). 0 when none was found.
 * A test that binds a port once binds port 0 (tcp://127.0.0.1:*) and reads it back instead. */
int task_free_port(void);

#define TEST(name)                                                                   \
    static void test_##name(void);                                                   \
    __attribute__((constructor)) static void test_register_##name(void) {           \
        task_register(#name, test_##name);                                           \
    }                                                                                \
    static void test_##name(void)

/* Ends the test as skipped (exit status 77, which CMake gives ctest as SKIP_RETURN_CODE): what it
 * needs is missing here, and fmt says what. ctest then reports it as skipped, never as passed. */
void task_skip(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
#define TASK_SKIP(...) task_skip(__VA_ARGS__)

#define TASK_FAIL_(...)                                                              \
    do {                                                                             \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                              \
        fprintf(stderr, __VA_ARGS__);                                                \
        fprintf(stderr, "\n");                                                       \
        fflush(stderr);                                                              \
        abort();                                                                     \
    } while (0)

#define ASSERT(expr)                                                                 \
    do {                                                                             \
        if (!(expr))                                                                 \
            TASK_FAIL_("assertion failed: %s", #expr);                               \
    } while (0)

#define ASSERT_CMP_(a, op, b, type, fmt)                                             \
    do {                                                                             \
        type a_ = (type)(a);                                                         \
        type b_ = (type)(b);                                                         \
        if (!(a_ op b_))                                                             \
            TASK_FAIL_("%s %s %s: %" fmt " vs %" fmt, #a, #op, #b, a_, b_);          \
    } while (0)

#define ASSERT_EQ(a, b) ASSERT_CMP_(a, ==, b, int64_t, PRId64)
#define ASSERT_NE(a, b) ASSERT_CMP_(a, !=, b, int64_t, PRId64)
#define ASSERT_LT(a, b) ASSERT_CMP_(a, <, b, int64_t, PRId64)
#define ASSERT_LE(a, b) ASSERT_CMP_(a, <=, b, int64_t, PRId64)
#define ASSERT_GT(a, b) ASSERT_CMP_(a, >, b, int64_t, PRId64)
#define ASSERT_GE(a, b) ASSERT_CMP_(a, >=, b, int64_t, PRId64)
#define ASSERT_UEQ(a, b) ASSERT_CMP_(a, ==, b, uint64_t, PRIu64)
#define ASSERT_OK(expr) ASSERT_CMP_(expr, ==, 0, int64_t, PRId64)
#define ASSERT_NULL(p) ASSERT((p) == NULL)
#define ASSERT_NOT_NULL(p) ASSERT((p) != NULL)
#define ASSERT_STR_EQ(a, b)                                                          \
    do {                                                                             \
        const char *a_ = (a), *b_ = (b);                                             \
        if (a_ == NULL || b_ == NULL || strcmp(a_, b_) != 0)                         \
            TASK_FAIL_("%s == %s: \"%s\" vs \"%s\"", #a, #b, a_ ? a_ : "(null)",     \
                       b_ ? b_ : "(null)");                                          \
    } while (0)
#define ASSERT_STR_CONTAINS(hay, needle)                                             \
    do {                                                                             \
        const char *h_ = (hay), *n_ = (needle);                                      \
        if (h_ == NULL || strstr(h_, n_) == NULL)                                    \
            TASK_FAIL_("%s does not contain \"%s\": \"%s\"", #hay, n_, h_ ? h_ : "(null)"); \
    } while (0)
#define ASSERT_MEM_EQ(a, b, n)                                                       \
    do {                                                                             \
        if (memcmp((a), (b), (n)) != 0)                                              \
            TASK_FAIL_("memory differs: %s vs %s (%zu bytes)", #a, #b, (size_t)(n)); \
    } while (0)

#endif
