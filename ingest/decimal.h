/*
 * Exact decimal numbers: the text of a JSON number into an integer count of 10^-scale units
 * ("1695835535123456.789" us at scale 3 -> 1695835535123456789 ns), with no floating point, rounding
 * half away from zero when digits are dropped (or refusing, when exact). dec_parse reads any number;
 * the parts below read the [-]digits[.digits] that traces are made of eight digits at a time, inline,
 * for the scanner's loop (which may read 8 bytes past a number: its text ends in padding).
 */
#ifndef SYNCTOP_DECIMAL_H
#define SYNCTOP_DECIMAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define DEC_TEXT_MAX 4096 /* longer numbers are not numbers we can use */

/* Parses the text of a JSON number into value * 10^scale as an int64, rounding half away from zero
 * when digits are dropped (exact: refuse instead). Returns 0, or -1 when the text is not a number or
 * the result does not fit. No floating point is involved. */
int dec_parse(const char *s, size_t n, int scale, int exact, int64_t *out);
/* dec_parse, faster for the numbers traces are made of. */
int dec_fast(const char *s, size_t n, int scale, int exact, int64_t *out);

/* A number's parts as the scanner reads them: [-]digits[.fdigits], mant all its digits (exact
 * when ok: at most 19 of them, no exponent). */
typedef struct dec_num {
    uint64_t mant;
    int digits, fdigits, neg, ok;
} dec_num;

/* dec_parse from a number's parts (n->ok). */
static inline int dec_parts(const dec_num *n, int scale, int exact, int64_t *out) {
    static const uint64_t pow10[] = {1,
                                     10,
                                     100,
                                     1000,
                                     10000,
                                     100000,
                                     1000000,
                                     10000000,
                                     100000000,
                                     1000000000,
                                     10000000000ull,
                                     100000000000ull,
                                     1000000000000ull,
                                     10000000000000ull,
                                     100000000000000ull,
                                     1000000000000000ull,
                                     10000000000000000ull,
                                     100000000000000000ull,
                                     1000000000000000000ull,
                                     10000000000000000000ull};
    static const uint64_t fits[] = {/* INT64_MAX / 10^e */
                                    9223372036854775807ull,
                                    922337203685477580ull,
                                    92233720368547758ull,
                                    9223372036854775ull,
                                    922337203685477ull,
                                    92233720368547ull,
                                    9223372036854ull,
                                    922337203685ull,
                                    92233720368ull,
                                    9223372036ull,
                                    922337203ull,
                                    92233720ull,
                                    9223372ull,
                                    922337ull,
                                    92233ull,
                                    9223ull,
                                    922ull,
                                    92ull,
                                    9ull,
                                    0ull};
    int e = scale - n->fdigits;
    uint64_t v, mant = n->mant;
    if (mant == 0) {
        v = 0;
    } else if (e >= 0) {
        if (e > 19 || mant > fits[e])
            return -2;
        v = mant * pow10[e];
    } else {
        if (-e > 19)
            return -2;
        uint64_t p = pow10[-e], r = mant % p;
        v = mant / p;
        if (exact && r != 0)
            return -1;
        if (r >= p - r)
            v++;
    }
    *out = n->neg ? -(int64_t)v : (int64_t)v;
    return 0;
}

/* The value of eight ASCII digits, the first in the lowest byte of w. */
static inline uint64_t dec_eight_value(uint64_t w) {
    w -= 0x3030303030303030ull;
    w = w * 10 + (w >> 8);
    return (((w & 0x000000ff000000ffull) * 0x000f424000000064ull) +
            (((w >> 16) & 0x000000ff000000ffull) * 0x0000271000000001ull)) >>
           32;
}

static inline uint64_t dec_load8(const uint8_t *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    return w; /* little-endian assumed by dec_eight_value: x86 and the like */
}

/* How many of the eight bytes of w, from the lowest, are ASCII digits before the first that is not
 * (8: all of them). A carry out of a byte that is not a digit only reaches the bytes above it. */
static inline unsigned dec_digits_in(uint64_t w) {
    uint64_t x = w ^ 0x3030303030303030ull; /* digits become 0 to 9 */
    uint64_t bad = (x & 0xf0f0f0f0f0f0f0f0ull) | ((x + 0x0606060606060606ull) & 0x1010101010101010ull);
    return bad ? (unsigned)__builtin_ctzll(bad) >> 3 : 8;
}

/* Digits at p, into *m (mod 2^64): the first byte after them. p may be read 8 bytes past them. */
static inline const uint8_t *dec_digits_value(const uint8_t *p, uint64_t *m) {
    uint64_t v = *m;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    static const uint32_t pow10_8[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
    for (;;) {
        uint64_t w = dec_load8(p);
        unsigned n = dec_digits_in(w);
        if (n == 8) {
            v = v * 100000000 + dec_eight_value(w);
            p += 8;
            continue;
        }
        if (n > 0) { /* the n digits moved up, '0's below them */
            w = (w << (8 * (8 - n))) | (0x3030303030303030ull >> (8 * n));
            v = v * pow10_8[n] + dec_eight_value(w);
            p += n;
        }
        break;
    }
#else
    unsigned c;
    while ((c = (unsigned)(*p - '0')) < 10) {
        v = v * 10 + c;
        p++;
    }
#endif
    *m = v;
    return p;
}

/* The first byte after the digits at p. p may be read 8 bytes past them. */
static inline const uint8_t *dec_skip_digits(const uint8_t *p) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    unsigned n;
    while ((n = dec_digits_in(dec_load8(p))) == 8)
        p += 8;
    return p + n;
#else
    while ((unsigned)(*p - '0') < 10)
        p++;
    return p;
#endif
}

/* Reads [-]digits[.digits] at s (the 0 sentinel, or any other byte, ends it) into n: its length,
 * or 0 when it is not such a number. s may be read 8 bytes past the number. */
static inline size_t dec_num_parts(const uint8_t *s, dec_num *n) {
    const uint8_t *p = s + (*s == '-'), *d = p;
    uint64_t m = 0;
    p = dec_digits_value(p, &m);
    n->digits = (int)(p - d);
    n->fdigits = 0;
    if (*p == '.') {
        const uint8_t *f = ++p;
        p = dec_digits_value(p, &m);
        n->fdigits = (int)(p - f);
        if (n->fdigits == 0)
            return 0;
    }
    n->mant = m;
    n->neg = *s == '-';
    n->ok = n->digits + n->fdigits <= 19;
    return n->digits ? (size_t)(p - s) : 0;
}

#endif
