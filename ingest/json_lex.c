/*
 * The Kineto importer's JSON lexer (json_lex.h): long strings and numbers, the tokens the scanner
 * does not take inline, escapes, error messages and their places, and values stepped over whole;
 * and what every part of the importer reports through: text buffers, positions in the text and
 * failures (kineto_int.h's kt_buf_*, kt_pos_at, kt_fail_*).
 */
#include "json_lex.h"
#include "json_src.h"

#include <stdio.h>

/* ---- text buffers, positions and failures (kineto_int.h) ---- */

int kt_buf_set(kbuf *b, const void *s, size_t len, size_t keep) {
    if (len > keep)
        len = keep;
    if (len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < len + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (p == NULL)
            return ERR_NOMEM;
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s, s, len);
    b->s[len] = '\0';
    b->len = len;
    return 0;
}

int kt_buf_append(kbuf *b, const void *s, size_t len) {
    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + len + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (p == NULL)
            return ERR_NOMEM;
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, len);
    b->len += len;
    b->s[b->len] = '\0';
    return 0;
}

void kt_pos_at(kimp *k, uint64_t off, uint64_t *line, uint64_t *col) {
    /* a piece another thread scanned: its lines are counted here, up to off, only when a message
     * needs them */
    for (; k->rp_text && k->rp_lines < off; k->rp_lines++)
        if (k->rp_text[k->rp_lines - k->rp_base] == '\n') {
            k->nl++;
            k->line_prev = k->line_at;
            k->drop_prev = k->drop;
            k->line_at = k->rp_lines + 1;
            k->drop = 0;
        }
    if (off >= k->line_at || k->nl == 0) {
        *line = k->nl + 1;
        *col = off - k->line_at - k->drop + 1;
    } else {
        *line = k->nl;
        *col = off - k->line_prev - k->drop_prev + 1;
    }
}

int kt_fail_here(kimp *k, int code, const char *what) {
    if (k->fail)
        return 0;
    uint64_t off = off_of(k, k->at), line, col;
    kt_pos_at(k, off, &line, &col);
    k->fail = err_set(k->err, code, "%s: line %llu, column %llu (byte %llu): %s", k->name, (unsigned long long)line,
                      (unsigned long long)col, (unsigned long long)off, what);
    return 0;
}

int kt_fail_nomem(kimp *k) {
    return kt_fail_here(k, ERR_NOMEM, "out of memory");
}

/* ---- the lexer ---- */

/* The first '"' or backslash in p[i, n), or n: sixteen bytes at a time where SSE2 is, eight
 * elsewhere. */
static size_t next_special(const uint8_t *p, size_t i, size_t n) {
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
    while (i + 16 <= n) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)));
        if (m)
            return i + (size_t)__builtin_ctz(m);
        i += 16;
    }
#else
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    while (i + 8 <= n) {
        uint64_t v, q, b;
        memcpy(&v, p + i, 8);
        q = v ^ (ones * '"');
        b = v ^ (ones * '\\');
        uint64_t z = (((q - ones) & ~q) | ((b - ones) & ~b)) & highs;
        if (z)
            return i + (size_t)(__builtin_ctzll(z) >> 3);
        i += 8;
    }
#endif
    while (i < n && p[i] != '"' && p[i] != '\\')
        i++;
    return i;
}

int jl_tail_scan(kimp *k, const uint8_t *p, const uint8_t **q) {
    const uint8_t *end = k->wend;
    size_t i = 0, n = (size_t)(end - p);
    for (;;) {
        while (i < n && (k->tail_hex || k->tail_esc)) {
            if (k->tail_hex)
                k->tail_hex--;
            else
                k->tail_esc = 0, k->tail_hex = p[i] == 'u' ? 4 : 0;
            i++;
        }
        i = next_special(p, i, n);
        if (i == n) {
            k->drop += n;
            return 0;
        }
        if (p[i] == '"') {
            k->drop += i;
            *q = p + i;
            return 1;
        }
        k->tail_esc = 1;
        i++;
    }
}

int jl_lex_long(kimp *k, const uint8_t *q, const uint8_t *cut, const uint8_t *p, int final, int esc,
                    ktok *t) {
    const uint8_t *s = q + 1;
    if (cut == p) {
        if (*p == '"') { /* it ends at the bound, or just past it within an escape */
            if ((size_t)(p - s) > KINETO_MAX_TOKEN) {
                k->cuts++;
                k->cut_close = off_of(k, p);
            }
            t->s = s;
            t->n = (size_t)(p - s);
            t->end = p + 1;
            t->esc = esc;
            return T_STR;
        }
        if (p == k->wend && !final) {
            t->in_esc = 0;
            return T_MORE;
        }
    }
    if (p == k->wend && final && cut == p) {
        k->cuts += (size_t)(p - s) > KINETO_MAX_TOKEN;
        t->in_esc = 0;
        return T_MORE;
    }
    k->cuts++;
    k->tail_esc = k->tail_hex = 0;
    const uint8_t *close;
    if (jl_tail_scan(k, cut, &close)) {
        k->cut_close = off_of(k, close);
        t->s = s;
        t->n = (size_t)(cut - s);
        t->end = close + 1;
        t->esc = esc;
        return T_STR;
    }
    if (final) {
        t->in_esc = 0;
        return T_MORE;
    }
    if (kt_buf_set(&k->kept, s, (size_t)(cut - s), KINETO_MAX_TOKEN + 8) != 0)
        return kt_fail_nomem(k), T_ERR;
    k->tail = 1 + esc;
    k->tok_at = off_of(k, q);
    return T_TAIL;
}

int jl_number_step(int st, uint8_t c, const char **msg) {
    int d = is_digit(c);
    switch (st) {
    case N_START: return c == '-' ? N_MINUS : c == '0' ? N_ZERO : d ? N_INT : (*msg = LEX_MINUS, -1);
    case N_MINUS: return c == '0' ? N_ZERO : d ? N_INT : (*msg = LEX_MINUS, -1);
    case N_ZERO: return c == '.' ? N_DOT : (c == 'e' || c == 'E') ? N_E : N_END;
    case N_INT: return d ? N_INT : c == '.' ? N_DOT : (c == 'e' || c == 'E') ? N_E : N_END;
    case N_DOT: return d ? N_FRAC : (*msg = LEX_DOT, -1);
    case N_FRAC: return d ? N_FRAC : (c == 'e' || c == 'E') ? N_E : N_END;
    case N_E: return (c == '+' || c == '-') ? N_ESIGN : d ? N_EXP : (*msg = LEX_EXP, -1);
    case N_ESIGN: return d ? N_EXP : (*msg = LEX_EXP, -1);
    default: return d ? N_EXP : N_END;
    }
}

int jl_lex_long_number(kimp *k, const uint8_t *p, int final, ktok *t) {
    int st = k->lnum - 1;
    const char *msg = NULL;
    for (;; p++) {
        if (p == k->wend && !final) {
            k->lnum = st + 1;
            return T_TAIL;
        }
        int next = jl_number_step(st, p == k->wend ? ' ' : *p, &msg);
        if (next == N_END)
            break;
        if (next < 0) {
            k->lnum = 0;
            if (p == k->wend) {
                t->in_esc = 1;
                return T_MORE;
            }
            t->end = p;
            t->msg = msg;
            return T_ERR;
        }
        st = next;
    }
    k->lnum = 0;
    t->s = p; /* the text is gone; its length says it is not a number the importer can use */
    t->n = DEC_TEXT_MAX + 1;
    t->end = p;
    return T_NUM;
}

/* true, false or null at q (c: its first letter). */
static int lex_word(kimp *k, const uint8_t *q, ktok *t) {
    const char *w = *q == 't' ? "true" : *q == 'f' ? "false" : "null";
    size_t i = 1;
    for (; w[i]; i++) {
        if (q[i] != (uint8_t)w[i]) {
            if (q + i == k->wend) {
                t->in_esc = 1;
                return T_MORE;
            }
            t->end = q + i;
            t->msg = LEX_WORD;
            return T_ERR;
        }
    }
    t->c = *q;
    t->end = q + i;
    return T_LIT;
}

int jl_lex_any(kimp *k, const uint8_t *q, int final, ktok *t) {
    switch (*q) {
    case '"': return jl_lex_string(k, q, final, t);
    case '-':
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
    case '8':
    case '9': return jl_lex_number(k, q, final, t);
    case 't':
    case 'f':
    case 'n': return lex_word(k, q, t);
    case '{':
    case '}':
    case '[':
    case ']':
    case ',':
    case ':':
        t->c = *q;
        t->end = q + 1;
        return T_PUNCT;
    case '/':
        t->end = q;
        t->msg = LEX_COMMENT;
        return T_ERR;
    default:
        t->end = q + 1;
        t->msg = LEX_CHAR;
        t->took = 1;
        return T_ERR;
    }
}

/* The four hex digits at h. */
static unsigned hex4(const uint8_t *h) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = h[i];
        v = v << 4 | (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return v;
}

int jl_str_decode(kimp *k, const uint8_t *s, size_t n) {
    kbuf *d = &k->dec;
    d->len = 0;
    size_t beg = 0, end = 0;
    while (end < n) {
        if (s[end] != '\\') {
            end++;
            continue;
        }
        if (kt_buf_append(d, s + beg, end - beg) != 0)
            return ERR_NOMEM;
        char buf[5];
        size_t len = 1;
        uint8_t c = s[++end];
        switch (c) {
        case 'r': buf[0] = '\r'; break;
        case 'n': buf[0] = '\n'; break;
        case 'f': buf[0] = '\f'; break;
        case 'b': buf[0] = '\b'; break;
        case 't': buf[0] = '\t'; break;
        case 'u': {
            unsigned cp = hex4(s + end + 1);
            end += 4;
            if ((cp & 0xFC00) == 0xD800) {
                if (end + 2 < n && s[end + 1] == '\\' && s[end + 2] == 'u') {
                    unsigned lo = hex4(s + end + 3);
                    cp = ((cp & 0x3F) << 10) | ((((cp >> 6) & 0xF) + 1) << 16) | (lo & 0x3FF);
                    end += 6;
                } else {
                    buf[0] = '?';
                    break;
                }
            }
            if (cp < 0x80) {
                buf[0] = (char)cp;
            } else if (cp < 0x800) {
                buf[0] = (char)(cp >> 6 | 0xC0);
                buf[1] = (char)((cp & 0x3F) | 0x80);
                len = 2;
            } else if (cp < 0x10000) {
                buf[0] = (char)(cp >> 12 | 0xE0);
                buf[1] = (char)(((cp >> 6) & 0x3F) | 0x80);
                buf[2] = (char)((cp & 0x3F) | 0x80);
                len = 3;
            } else if (cp < 0x200000) {
                buf[0] = (char)(cp >> 18 | 0xF0);
                buf[1] = (char)(((cp >> 12) & 0x3F) | 0x80);
                buf[2] = (char)(((cp >> 6) & 0x3F) | 0x80);
                buf[3] = (char)((cp & 0x3F) | 0x80);
                len = 4;
            } else {
                buf[0] = '?';
            }
            break;
        }
        default: buf[0] = (char)c; break; /* " \ / */
        }
        if (kt_buf_append(d, buf, len) != 0)
            return ERR_NOMEM;
        beg = ++end;
    }
    return kt_buf_append(d, s + beg, end - beg);
}

uint64_t jl_feed_start(const kimp *k, uint64_t x) {
    uint64_t f = x < k->feed0 ? 0 : k->feed0 + (x - k->feed0) / JSRC_CHUNK * JSRC_CHUNK;
    return k->cut_close > f && k->cut_close <= x ? k->cut_close : f;
}

int jl_error(kimp *k, uint64_t stop, uint64_t f, int lexical, const char *msg) {
    uint64_t off = stop > f ? stop - 1 : f, line, col;
    kt_pos_at(k, off, &line, &col);
    return err_set(k->err, ERR_MALFORMED, "%s: line %llu, column %llu (byte %llu): invalid JSON: %s error: %s", k->name,
                   (unsigned long long)line, (unsigned long long)col, (unsigned long long)off,
                   lexical ? "lexical" : "parse", msg);
}

/* The newlines jl_skip_value passes: how many, and where the last two lines start. */
typedef struct skip_lines {
    const uint8_t *last, *prev;
    uint64_t n;
} skip_lines;

static inline __attribute__((always_inline)) const uint8_t *skip_blank(skip_lines *nl, const uint8_t *p) {
    for (;;) {
        uint8_t c = *p;
        if (c > ' ') {
            return p;
        } else if (c == ' ') { /* runs of them: the indentation of pretty-printed JSON */
            p = skip_spaces(p);
        } else if (c == '\t' || c == '\r' || c == '\v' || c == '\f') {
            p++;
        } else if (c == '\n') {
            nl->n++;
            nl->prev = nl->last;
            nl->last = ++p;
        } else {
            return p;
        }
    }
}

/* The string whose opening quote is at p: just after its closing quote, or NULL (a control
 * character, a bad escape, the end of the window, or longer than a token may be). */
static inline __attribute__((always_inline)) const uint8_t *skip_string(const uint8_t *p) {
    const uint8_t *s = ++p;
    for (;;) {
        p = str_special(p);
        if (*p == '"')
            break;
        if (*p != '\\')
            return NULL;
        if (p[1] == 'u') {
            if (!is_hex(p[2]) || !is_hex(p[3]) || !is_hex(p[4]) || !is_hex(p[5]))
                return NULL;
            p += 6;
        } else if (is_esc(p[1])) {
            p += 2;
        } else {
            return NULL;
        }
    }
    return (size_t)(p - s) >= KINETO_MAX_TOKEN ? NULL : p + 1;
}

/* The number at p (a digit or '-'): just after it, or NULL (malformed, or it may go on past the
 * window's end). */
static inline __attribute__((always_inline)) const uint8_t *skip_number(const uint8_t *p, const uint8_t *end) {
    p += *p == '-';
    if (*p == '0')
        p++;
    else if (is_digit(*p))
        p = dec_skip_digits(p);
    else
        return NULL;
    if (*p == '.') {
        if (!is_digit(*++p))
            return NULL;
        p = dec_skip_digits(p);
    }
    if (*p == 'e' || *p == 'E') {
        p += p[1] == '+' || p[1] == '-';
        if (!is_digit(*++p))
            return NULL;
        p = dec_skip_digits(p);
    }
    return p == end ? NULL : p;
}

/* The lines passed, for the error positions yajl would give. */
static void skip_count_lines(kimp *k, const skip_lines *nl) {
    k->nl += nl->n;
    if (nl->n >= 2) {
        k->line_prev = off_of(k, nl->prev);
        k->drop_prev = 0;
    } else {
        k->line_prev = k->line_at;
        k->drop_prev = k->drop;
    }
    k->line_at = off_of(k, nl->last);
    k->drop = 0;
}

const uint8_t *jl_skip_value(kimp *k, const uint8_t *p) {
    const uint8_t *const end = k->wend;
    skip_lines nl = {NULL, NULL, 0};
    uint8_t stk[32]; /* the closers of the open containers; ':' a map whose key comes next */
    int depth = 0;
    for (;;) {
        /* a value (or a map's key: a string, when stk's top is ':') */
        uint8_t c = *p;
        if (c == '"') {
            if ((p = skip_string(p)) == NULL)
                return NULL;
            if (depth > 0 && stk[depth - 1] == ':') { /* that was a key */
                stk[depth - 1] = '}';
                p = skip_blank(&nl, p);
                if (*p++ != ':')
                    return NULL;
                p = skip_blank(&nl, p);
                continue;
            }
        } else if (is_digit(c) || c == '-') {
            if ((p = skip_number(p, end)) == NULL)
                return NULL;
        } else if (c == '{' || c == '[') {
            if (depth == (int)sizeof stk)
                return NULL;
            p = skip_blank(&nl, p + 1);
            if (*p == (c == '{' ? '}' : ']')) {
                p++;
            } else {
                stk[depth++] = c == '{' ? ':' : ']';
                if (c == '{' && *p != '"')
                    return NULL;
                continue;
            }
        } else if (c == 't' && memcmp(p, "true", 4) == 0) {
            p += 4;
        } else if (c == 'f' && memcmp(p, "false", 5) == 0) {
            p += 5;
        } else if (c == 'n' && memcmp(p, "null", 4) == 0) {
            p += 4;
        } else {
            return NULL;
        }
        /* after a value: a comma and the next member, or the ends of the containers it closes */
        for (;;) {
            if (depth == 0) {
                if (nl.n)
                    skip_count_lines(k, &nl);
                return p;
            }
            p = skip_blank(&nl, p);
            if (*p == ',') {
                p = skip_blank(&nl, p + 1);
                if (stk[depth - 1] == '}') {
                    if (*p != '"')
                        return NULL;
                    stk[depth - 1] = ':';
                }
                break;
            }
            if (*p != stk[depth - 1])
                return NULL;
            p++;
            depth--;
        }
    }
}

void jl_long_number(kimp *k) {
    const uint8_t *p = k->wpos;
    const char *msg;
    int st = N_START;
    for (; p < k->wend; p++)
        st = jl_number_step(st, *p, &msg);
    k->lnum = st + 1;
    k->tok_at = off_of(k, k->wpos);
    k->wpos = k->wend;
}
