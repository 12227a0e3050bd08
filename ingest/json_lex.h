/*
 * The Kineto importer's JSON lexer: the tokens of the text in the window (kimp.wbeg to wend, a 0
 * byte after it), whitespace with its lines counted for messages, strings (cut past
 * KINETO_MAX_TOKEN bytes, their tails followed without their text), numbers (followed without their
 * text past LONG_NUMBER bytes), values stepped over whole, escapes decoded, and the messages of
 * JSON errors. What the scanner meets most (whitespace, strings, numbers) is inline here, for the
 * scan's loop; the rest is in json_lex.c.
 *
 What the scanner accepts and rejects, and what it says then, follows yajl 2.1 (as Debian builds
 * it), whose messages these are: its grammar (whitespace is " \t\n\v\f\r"; control characters and
 * bad escapes in strings are errors, other bytes are taken as they are), its messages, and the
 * byte a message names (the one before where reading stopped, counted as if the text came in the
 * pieces of jl_feed_start). The text ends as if one blank followed it: what is still open then is cut
 * short. The text is scanned a piece at a time; a token that a piece ends in is scanned again from
 * its start with the next piece after it, except the two that may be long, followed without their
 * text: a string's tail past KINETO_MAX_TOKEN bytes and a number of more than LONG_NUMBER bytes.
 */
#ifndef SYNCTOP_JSON_LEX_H
#define SYNCTOP_JSON_LEX_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "kineto_int.h"

/* What the lexers return. */
enum { T_ERR = -1, T_MORE, T_TAIL, T_STR, T_NUM, T_LIT, T_PUNCT };

typedef struct ktok {
    const uint8_t *s;   /* T_STR: the string's content (what is kept of it), T_NUM: the text */
    size_t n;
    const uint8_t *end; /* just after the token; T_ERR: where reading stopped */
    const char *msg;    /* T_ERR: yajl's lexical error */
    int took;           /* T_ERR: the byte before end is the one in error (else end is) */
    int esc;            /* T_STR: the content has escapes */
    int in_esc;         /* T_MORE: the text ends inside an escape */
    int c;              /* T_LIT: 't', 'f' or 'n'; T_PUNCT: the character */
} ktok;

#define LEX_CHAR    "invalid char in json text."
#define LEX_WORD    "invalid string in json text."
#define LEX_COMMENT "probable comment found in input text, comments are not enabled."
#define LEX_STR     "invalid character inside string."
#define LEX_ESC     "inside a string, '\\' occurs before a character which it may not."
#define LEX_HEX     "invalid (non-hex) character occurs after '\\u' inside string."
#define LEX_MINUS   "malformed number, a digit is required after the minus sign."
#define LEX_DOT     "malformed number, a digit is required after the decimal point."
#define LEX_EXP     "malformed number, a digit is required after the exponent."

static inline int is_digit(uint8_t c) {
    return (unsigned)(c - '0') < 10;
}

static inline int is_hex(uint8_t c) {
    return is_digit(c) || (unsigned)((c | 0x20) - 'a') < 6;
}

/* The characters a backslash may escape other than u. */
static inline int is_esc(uint8_t c) {
    return c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't';
}

static inline void newline(kimp *k, const uint8_t *p) {
    k->nl++;
    k->line_prev = k->line_at;
    k->drop_prev = k->drop;
    k->line_at = off_of(k, p) + 1;
    k->drop = 0;
}

/* The first byte after the spaces at p[1..] (p: a space): a lone one at once, a run of them
 * (indentation) eight bytes at a time. p may be read 9 bytes past the spaces. */
static inline const uint8_t *skip_spaces(const uint8_t *p) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (p[1] != ' ')
        return p + 1;
    for (p += 2;; p += 8) {
        uint64_t x = dec_load8(p) ^ 0x2020202020202020ull; /* spaces become 0 */
        if (x)
            return p + (__builtin_ctzll(x) >> 3);
    }
#else
    while (*++p == ' ') {
    }
    return p;
#endif
}

static inline const uint8_t *skip_ws(kimp *k, const uint8_t *p) {
    for (;;) {
        uint8_t c = *p;
        if (c > ' ') {
            return p;
        } else if (c == ' ') {
            p = skip_spaces(p);
        } else if (c == '\n') {
            newline(k, p);
            p++;
        } else if (c == '\t' || c == '\r' || c == '\v' || c == '\f') {
            p++;
        } else {
            return p;
        }
    }
}

/* The first '"', backslash or control character at or after p: the 0 sentinel at the end of the
 * window stops it. Sixteen bytes at a time where SSE2 is, eight elsewhere. */
static inline const uint8_t *str_special(const uint8_t *p) {
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'), ctl = _mm_set1_epi8(0x1f);
    for (;;) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
                                 _mm_cmpeq_epi8(_mm_min_epu8(v, ctl), v));
        unsigned bits = (unsigned)_mm_movemask_epi8(m);
        if (bits)
            return p + __builtin_ctz(bits);
        p += 16;
    }
#else
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    for (;;) {
        uint64_t v, q, b;
        memcpy(&v, p, 8);
        q = v ^ (ones * '"');
        b = v ^ (ones * '\\');
        /* the lowest flagged byte of each test is exact: a false flag only sits above a true one */
        uint64_t z = (((q - ones) & ~q) | ((b - ones) & ~b) | ((v - ones * 0x20) & ~v)) & highs;
        if (z)
            return p + (__builtin_ctzll(z) >> 3);
        p += 8;
    }
#endif
}

/* The parts of a number, for following a long one a byte at a time. */
enum { N_START, N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP, N_END };

/* The dropped tail of a cut string, from p to the end of the window: 1 at its closing quote (*q),
 * 0 when the window ends first. Escapes are followed as the cut always has: a backslash takes the
 * byte after it, and \u the four after that, whatever they are. */
int jl_tail_scan(kimp *k, const uint8_t *p, const uint8_t **q);
/* A string whose content reaches KINETO_MAX_TOKEN bytes (s: its start, q: its quote). It is cut at
 * the first place past the bound that is not inside an escape (cut); only what is before is seen
 * (checked, decoded, handed on), and the rest up to the closing quote is dropped, as if the string
 * ended there. p: the first quote, backslash or control character at or after cut. */
int jl_lex_long(kimp *k, const uint8_t *q, const uint8_t *cut, const uint8_t *p, int final, int esc,
                    ktok *t);

/* A string at q (its opening quote). */
static inline int jl_lex_string(kimp *k, const uint8_t *q, int final, ktok *t) {
    const uint8_t *s = q + 1, *p = s;
    int esc = 0;
    for (;;) {
        const uint8_t *from = p;
        p = str_special(p);
        if ((size_t)(p - s) >= KINETO_MAX_TOKEN)
            return jl_lex_long(k, q, (size_t)(from - s) > KINETO_MAX_TOKEN ? from : s + KINETO_MAX_TOKEN, p, final,
                            esc, t);
        uint8_t c = *p;
        if (c == '"') {
            t->s = s;
            t->n = (size_t)(p - s);
            t->end = p + 1;
            t->esc = esc;
            return T_STR;
        }
        if (c == '\\') {
            esc = 1;
            uint8_t e = p[1];
            if (e == 'u') {
                for (int i = 2; i < 6; i++) {
                    if (!is_hex(p[i])) {
                        if (p + i == k->wend) {
                            t->in_esc = 1;
                            return T_MORE;
                        }
                        t->end = p + i;
                        t->msg = LEX_HEX;
                        return T_ERR;
                    }
                }
                p += 6;
            } else if (is_esc(e)) {
                p += 2;
            } else {
                if (p + 1 == k->wend) {
                    t->in_esc = 1;
                    return T_MORE;
                }
                t->end = p + 1;
                t->msg = LEX_ESC;
                return T_ERR;
            }
        } else {
            if (p == k->wend) {
                t->in_esc = 0;
                return T_MORE;
            }
            t->end = p;
            t->msg = LEX_STR;
            return T_ERR;
        }
    }
}

/* A number at q. */
static inline int jl_lex_number(kimp *k, const uint8_t *q, int final, ktok *t) {
    const uint8_t *p = q;
    if (*p == '-')
        p++;
    if (*p == '0') {
        p++;
    } else if (is_digit(*p)) {
        do
            p++;
        while (is_digit(*p));
    } else {
        t->msg = LEX_MINUS;
        goto bad;
    }
    if (*p == '.') {
        p++;
        if (!is_digit(*p)) {
            t->msg = LEX_DOT;
            goto bad;
        }
        do
            p++;
        while (is_digit(*p));
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!is_digit(*p)) {
            t->msg = LEX_EXP;
            goto bad;
        }
        do
            p++;
        while (is_digit(*p));
    }
    if (p == k->wend && !final) { /* it may go on in the next piece */
        t->in_esc = 1;
        return T_MORE;
    }
    t->s = q;
    t->n = (size_t)(p - q);
    t->end = p;
    return T_NUM;
bad:
    if (p == k->wend) {
        t->in_esc = 1;
        return T_MORE;
    }
    t->end = p;
    return T_ERR;
}

/* One byte of a number in state st: the next state, N_END when the number ended before c, or -1
 * when c is an error (*msg). */
int jl_number_step(int st, uint8_t c, const char **msg);
/* The rest of a long number (k->lnum) from p. */
int jl_lex_long_number(kimp *k, const uint8_t *p, int final, ktok *t);
/* Any token at q (not at the end of the window). */
int jl_lex_any(kimp *k, const uint8_t *q, int final, ktok *t);
/* Decodes the escapes of a string's content into k->dec as yajl does: \u escapes to UTF-8, a
 * high surrogate and the \u escape after it to one code point, a lone high surrogate to '?'. */
int jl_str_decode(kimp *k, const uint8_t *s, size_t n);
/* The start of the piece of text that holds offset x, in the pieces that error positions are
 * counted in (yajl's, when it was given the text): JSRC_CHUNK bytes after a first one of feed0, and a new
 * one from the closing quote of a cut string. */
uint64_t jl_feed_start(const kimp *k, uint64_t x);
/* A JSON error where reading stopped (stop) in the piece that began at f: the message names the
 * byte before stop, or f when reading stopped at the start of its piece. */
int jl_error(kimp *k, uint64_t stop, uint64_t f, int lexical, const char *msg);
/* Steps over the value at p that the parser has no use for (the value of a key it does not know),
 * checking it as yajl would: returns its end, or NULL when that is not simple to do here (an error,
 * the end of the window, a long string, deep nesting), and the scanner then takes it token by
 * token instead. Newlines are counted only when it succeeds. */
const uint8_t *jl_skip_value(kimp *k, const uint8_t *p);
/* A number too long to carry from piece to piece is followed without its text from here on. */
void jl_long_number(kimp *k);

#endif
