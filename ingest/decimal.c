/*
 * Exact decimal numbers (decimal.h): any JSON number's text, digit by digit, and the common ones
 * through the parts the scanner reads.
 */
#include "decimal.h"

#include <limits.h>

/* Parses the text of a JSON number into value * 10^scale as an int64, rounding half away from zero
 * when digits are dropped (exact: refuse instead). Returns 0, or -1 when the text is not a number or
 * the result does not fit. No floating point is involved. */
int dec_parse(const char *s, size_t n, int scale, int exact, int64_t *out) {
    if (n == 0 || n > DEC_TEXT_MAX)
        return -1;
    size_t i = 0;
    int neg = 0;
    if (s[i] == '-') {
        neg = 1;
        i++;
    }
    uint64_t mant = 0;
    long dexp = 0;   /* value = mant * 10^dexp (+ dropped digits) */
    int dropped = 0; /* significant digits that did not fit in mant were not all zero */
    int digits = 0;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (mant <= (UINT64_MAX - 9) / 10)
            mant = mant * 10 + d;
        else {
            dexp++;
            dropped |= d != 0;
        }
    }
    if (i < n && s[i] == '.') {
        i++;
        int fdigits = 0;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, fdigits++) {
            unsigned d = (unsigned)(s[i] - '0');
            if (mant <= (UINT64_MAX - 9) / 10) {
                mant = mant * 10 + d;
                dexp--;
            } else
                dropped |= d != 0;
        }
        if (fdigits == 0)
            return -1;
        digits += fdigits;
    }
    if (digits == 0)
        return -1;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        int eneg = 0;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            eneg = s[i++] == '-';
        long e = 0;
        int edigits = 0;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, edigits++)
            if (e < 100000)
                e = e * 10 + (s[i] - '0');
        if (edigits == 0)
            return -1;
        dexp += eneg ? -e : e;
    }
    if (i != n)
        return -1;
    long E = dexp + scale;
    uint64_t v;
    if (mant == 0) {
        v = 0;
    } else if (E >= 0) {
        if (dropped || E > 19)
            return -1;
        v = mant;
        for (long k = 0; k < E; k++) {
            if (v > UINT64_MAX / 10)
                return -1;
            v *= 10;
        }
    } else if (E < -19) {
        if (exact)
            return -1;
        v = 0; /* mant < 10^20 / 2: rounds to 0 */
    } else {
        uint64_t p = 1;
        for (long k = 0; k < -E; k++)
            p *= 10;
        v = mant / p;
        uint64_t r = mant % p;
        if (exact && (r != 0 || dropped))
            return -1;
        if (r >= p - r)
            v++;
    }
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1)
            return -1;
        *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    } else {
        if (v > (uint64_t)INT64_MAX)
            return -1;
        *out = (int64_t)v;
    }
    return 0;
}

/* dec_parse, faster for the numbers traces are made of. */
int dec_fast(const char *s, size_t n, int scale, int exact, int64_t *out) {
    dec_num nv;
    if (n == 0 || n > 24 || scale < 0 || scale > 18)
        return dec_parse(s, n, scale, exact, out);
    char buf[40] = {0};
    memcpy(buf, s, n);
    if (dec_num_parts((const uint8_t *)buf, &nv) != n || !nv.ok)
        return dec_parse(s, n, scale, exact, out);
    int rc = dec_parts(&nv, scale, exact, out);
    return rc == -2 ? dec_parse(s, n, scale, exact, out) : rc;
}

