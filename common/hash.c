/*
 * SipHash (Aumasson and Bernstein, 2012) and the process's key for it (hash.h). The key is drawn
 * when a table first needs it, not when the program loads: the tracer runs inside other programs
 * and keeps no constructors.
 */
#include "hash.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* Eight bytes at p as a little-endian word, as SipHash reads its input. */
static uint64_t load_le64(const uint8_t *p) {
    uint64_t w;
    memcpy(&w, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}

uint64_t cm_siphash(const cm_hash_key *key, int c, int d, const void *p, size_t n) {
    const uint8_t *in = p, *end = in + (n - n % 8);
    cm_sip s = cm_sip_start(key);
    for (; in != end; in += 8)
        cm_sip_word(&s, load_le64(in), c);
    /* the last 0 to 7 bytes, and the length's low byte on top */
    uint64_t b = (uint64_t)n << 56;
    for (size_t i = 0; i < n % 8; i++)
        b |= (uint64_t)in[i] << (8 * i);
    return cm_sip_end(&s, b, c, d);
}

static cm_hash_key process_key;
static pthread_once_t process_key_once = PTHREAD_ONCE_INIT;

/* A key where getrandom() cannot give one at once (an early boot's pool, a sandbox that refuses
 * the call): the 16 random bytes the kernel hands every process at exec (AT_RANDOM) as SipHash's
 * key over the clocks, the pid and where the stack, the code and the data were placed. */
static void key_fallback(cm_hash_key *key) {
    cm_hash_key seed = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull};
    const uint8_t *at_random = (const uint8_t *)(uintptr_t)getauxval(AT_RANDOM);
    if (at_random != NULL)
        memcpy(&seed, at_random, sizeof seed);
    struct {
        struct timespec real, mono;
        uint64_t pid, stack, code, data, which;
    } mix;
    memset(&mix, 0, sizeof mix);
    clock_gettime(CLOCK_REALTIME, &mix.real);
    clock_gettime(CLOCK_MONOTONIC, &mix.mono);
    mix.pid = (uint64_t)getpid();
    mix.stack = (uint64_t)(uintptr_t)&mix;
    mix.code = (uint64_t)(uintptr_t)&key_fallback;
    mix.data = (uint64_t)(uintptr_t)&process_key;
    key->k0 = cm_siphash(&seed, 2, 4, &mix, sizeof mix);
    mix.which = 1;
    key->k1 = cm_siphash(&seed, 2, 4, &mix, sizeof mix);
}

static void key_draw(void) {
    uint8_t b[sizeof process_key];
    ssize_t got;
    do
        got = getrandom(b, sizeof b, GRND_NONBLOCK);
    while (got < 0 && errno == EINTR);
    if (got == (ssize_t)sizeof b)
        memcpy(&process_key, b, sizeof b);
    else
        key_fallback(&process_key);
}

void cm_hash_key_get(cm_hash_key *key) {
    int saved = errno; /* a caller's errno survives the first draw */
    pthread_once(&process_key_once, key_draw);
    errno = saved;
    *key = process_key;
}

uint64_t cm_hash_bytes(const void *p, size_t n) {
    cm_hash_key key;
    cm_hash_key_get(&key);
    return cm_hash_bytes_k(&key, p, n);
}

static _Atomic uint64_t long_probes;

void cm_hash_long_probe_note(void) { atomic_fetch_add_explicit(&long_probes, 1, memory_order_relaxed); }

uint64_t cm_hash_long_probes(void) { return atomic_load_explicit(&long_probes, memory_order_relaxed); }
