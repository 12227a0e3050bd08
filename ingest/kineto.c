/*
 * Kineto trace import (kineto.h): the schema and the parser. A scanner of its own over the JSON
 * text knows the few keys of Kineto's schema, reads an event's keys directly and steps over
 * everything else without building anything, while checking the whole text as strictly as yajl 2
 * did (yajl's grammar, its error messages and the places they name). Numbers keep their text, so
 * timestamps are converted exactly (decimal.h). The text comes from json_src.h, a piece at a time;
 * json_lex.h reads its tokens, keypredict.h guesses the next key, kineto_event.c makes records of
 * the entries, and once the whole file is read kineto_emit.c orders and emits them.
 *
 * This module owns the importer's state (kineto_int.h): the schema, the grammar's state, the
 * window over the text and what the parse finds at the top level; json_lex.c, below it, the text
 * buffers, positions and failures every part reports through.
 */
#include "kineto.h"
#include "emit.h"
#include "grow.h"
#include "json_lex.h"
#include "json_src.h"
#include "kineto_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* The parser: what the scanner finds, read by the schema                                     */
/* ------------------------------------------------------------------------------------------ */

/* The schema: each key the importer reads, where it may appear, and for the plain numbers where
 * their value goes. key_of finds a key here; scalar stores the plain numbers from the table and
 * handles the rest (strings, the timestamps' error bits, the top level) by key. */
enum field_kind {
    F_OTHER,  /* scalar() handles it by key */
    F_EV_INT, /* an integer into the event (at off), setting bit in kev.have */
    F_DP_INT  /* an integer into the device properties (at off) */
};

typedef struct kfield {
    uint8_t ctx;  /* enum ctx */
    uint8_t kind; /* enum field_kind */
    uint8_t len;  /* strlen(key) */
    const char *key;
    size_t off;
    uint32_t bit;
} kfield;

#define KF(c, k, kind_, off_, bit_) {(c), (kind_), sizeof(k) - 1, (k), (off_), (bit_)}
#define EV_INT(c, k, field, bit_) KF(c, k, F_EV_INT, offsetof(kev, field), (bit_))
#define DP_INT(k, field) KF(C_DEVPROP, k, F_DP_INT, offsetof(kdevprop, field), 0)
#define OTHER(c, k) KF(c, k, F_OTHER, 0, 0)

static const kfield k_fields[] = {
    [K_NONE] = OTHER(C_ROOT, ""),
    [K_TRACE_EVENTS] = OTHER(C_TOP, "traceEvents"),
    [K_DEVPROPS] = OTHER(C_TOP, "deviceProperties"),
    [K_DIST] = OTHER(C_TOP, "distributedInfo"),
    [K_BASE_TIME] = OTHER(C_TOP, "baseTimeNanoseconds"),
    [K_HOSTNAME] = OTHER(C_TOP, "hostname"),
    [K_RANK] = OTHER(C_DIST, "rank"),
    [K_WORLD] = OTHER(C_DIST, "world_size"),
    [K_P_ID] = DP_INT("id", id),
    [K_P_NAME] = OTHER(C_DEVPROP, "name"),
    [K_P_MAJOR] = DP_INT("computeMajor", major),
    [K_P_MINOR] = DP_INT("computeMinor", minor),
    [K_P_MEM] = DP_INT("totalGlobalMem", mem),
    [K_P_SMS] = DP_INT("numSms", sms),
    [K_PH] = OTHER(C_EVENT, "ph"),
    [K_CAT] = OTHER(C_EVENT, "cat"),
    [K_NAME] = OTHER(C_EVENT, "name"),
    [K_PID] = EV_INT(C_EVENT, "pid", pid, H_PID),
    [K_TID] = EV_INT(C_EVENT, "tid", tid, H_TID),
    [K_TS] = OTHER(C_EVENT, "ts"),
    [K_DUR] = OTHER(C_EVENT, "dur"),
    [K_ARGS] = OTHER(C_EVENT, "args"),
    [K_A_DEVICE] = EV_INT(C_ARGS, "device", device, H_DEVICE),
    [K_A_STREAM] = EV_INT(C_ARGS, "stream", stream, H_STREAM),
    [K_A_CORR] = EV_INT(C_ARGS, "correlation", corr, H_CORR),
    [K_A_CBID] = EV_INT(C_ARGS, "cbid", cbid, H_CBID),
    [K_A_BYTES] = EV_INT(C_ARGS, "bytes", bytes, H_BYTES),
    [K_A_CONTEXT] = EV_INT(C_ARGS, "context", context, H_CONTEXT),
    [K_A_GRID] = OTHER(C_ARGS, "grid"),
    [K_A_BLOCK] = OTHER(C_ARGS, "block"),
    [K_A_SYNC_KIND] = OTHER(C_ARGS, "cuda_sync_kind"),
    [K_A_EVENT] = EV_INT(C_ARGS, "wait_on_cuda_event_id", event, H_EVENT),
    [K_A_NAME] = OTHER(C_ARGS, "name"),
    [K_A_FROM_DEV] = EV_INT(C_ARGS, "fromDevice", from_dev, H_FROM_DEV),
    [K_A_TO_DEV] = EV_INT(C_ARGS, "toDevice", to_dev, H_TO_DEV),
    [K_A_GRAPH] = EV_INT(C_ARGS, "graph id", graph, H_GRAPH),
    [K_A_MODULE] = OTHER(C_ARGS, "synctop module"),
    [K_A_STACK] = OTHER(C_ARGS, "Call stack"),
};

/* The keys of each context are consecutive in enum key: [first, last]. */
static const struct {
    uint8_t first, last;
} k_ctx_keys[] = {
    [C_TOP] = {K_TRACE_EVENTS, K_HOSTNAME}, [C_DIST] = {K_RANK, K_WORLD},  [C_DEVPROP] = {K_P_ID, K_P_SMS},
    [C_EVENT] = {K_PH, K_ARGS},             [C_ARGS] = {K_A_DEVICE, K_A_STACK},
};

/* Per context and key length (under KEY_LENS), the keys of k_fields that have them (bit i: key i). */
#define KEY_LENS 32
static void key_masks(kimp *k) {
    for (int c = 0; c < (int)(sizeof k_ctx_keys / sizeof k_ctx_keys[0]); c++)
        for (int i = k_ctx_keys[c].first; k_ctx_keys[c].first != K_NONE && i <= k_ctx_keys[c].last; i++)
            if (k_fields[i].len < KEY_LENS)
                k->kmask[c][k_fields[i].len] |= 1ull << i;
    for (int i = 0; i < (int)(sizeof k_fields / sizeof k_fields[0]); i++) {
        char pad[16] = {0};
        memcpy(pad, k_fields[i].key, k_fields[i].len < 16 ? k_fields[i].len : 16);
        memcpy(k->kwords[i], pad, 16);
    }
}
_Static_assert(K_A_STACK < 64, "a key mask holds every key");

/* The key s[0, len) names in context ctx, or K_NONE. s may be read up to 16 bytes past len
 * (the window's JSRC_PAD and kbufs of at least 256 bytes allow it). */
static int key_of(const kimp *k, int ctx, const char *s, size_t len) {
    if (len >= KEY_LENS)
        return K_NONE;
    uint64_t m = k->kmask[ctx][len];
    if (m == 0)
        return K_NONE;
    uint64_t a, b, ma = len >= 8 ? ~0ull : (1ull << (8 * len)) - 1;
    uint64_t mb = len >= 16 ? ~0ull : len <= 8 ? 0 : (1ull << (8 * (len - 8))) - 1;
    memcpy(&a, s, 8);
    memcpy(&b, s + 8, 8);
    a &= ma;
    b &= mb;
    for (; m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        if (k->kwords[i][0] == a && k->kwords[i][1] == b &&
            (len <= 16 || memcmp(k_fields[i].key + 16, s + 16, len - 16) == 0))
            return i;
    }
    return K_NONE;
}

static int push(kimp *k, int ctx) {
    if (k->sp + 1 >= (int)sizeof k->stack)
        return kt_fail_here(k, ERR_MALFORMED, "nesting too deep");
    k->pnext[k->sp] = k->pcur;
    k->stack[++k->sp] = (uint8_t)ctx;
    k->pcur = k->pred[ctx == C_ARGS ? C_DIMS + 1 + k->ev.cat : ctx];
    k->key = K_NONE;
    return 1;
}

static int enter_skip(kimp *k) {
    if (++k->skip > MAX_SKIP_DEPTH)
        return kt_fail_here(k, ERR_LIMIT, "JSON nested more than 1000 levels deep");
    return 1;
}


static int on_start_map(kimp *k) {
    if (k->skip)
        return enter_skip(k);
    switch (k->stack[k->sp]) {
    case C_ROOT: return push(k, C_TOP);
    case C_TOP:
        if (k->key == K_DIST)
            return push(k, C_DIST);
        if (k->key == K_TRACE_EVENTS)
            k->events_not_array = 1;
        return enter_skip(k);
    case C_EVENTS: kt_event_reset(&k->ev); return push(k, C_EVENT);
    case C_DEVPROPS:
        memset(&k->dp, 0, sizeof k->dp);
        k->dp.id = -1;
        return push(k, C_DEVPROP);
    case C_EVENT:
        if (k->key == K_ARGS)
            return push(k, C_ARGS);
        return enter_skip(k);
    default: return enter_skip(k);
    }
}

static int devprop_end(kimp *k) {
    kdevprop *d = &k->dp;
    if (d->id < 0 || d->id >= TP_NO_DEVICE)
        return 1;
    for (size_t i = 0; i < k->n_devprops; i++)
        if (k->devprops[i].id == d->id)
            return 1;
    if (k->n_devprops == MAX_DEVPROPS)
        return 1;
    if (k->devprops == NULL) {
        k->devprops = malloc(MAX_DEVPROPS * sizeof *k->devprops);
        if (k->devprops == NULL)
            return kt_fail_nomem(k);
    }
    k->devprops[k->n_devprops++] = *d;
    return 1;
}


static int on_end_map(kimp *k) {
    if (k->skip) {
        k->skip--;
        return 1;
    }
    int was = k->stack[k->sp--];
    k->pcur = k->pnext[k->sp];
    if (was == C_EVENT)
        return k->capt ? kt_par_keep(k, &k->ev, 0) : kt_event_end(k, &k->ev);
    if (was == C_DEVPROP)
        return devprop_end(k);
    return 1;
}

static int on_start_array(kimp *k) {
    if (k->skip)
        return enter_skip(k);
    switch (k->stack[k->sp]) {
    case C_ROOT: /* Chrome's JSON Array Format: the events alone */
        k->saw_events = 1;
        return push(k, C_EVENTS);
    case C_TOP:
        if (k->key == K_TRACE_EVENTS) {
            k->saw_events = 1;
            return push(k, C_EVENTS);
        }
        if (k->key == K_DEVPROPS)
            return push(k, C_DEVPROPS);
        return enter_skip(k);
    case C_ARGS:
        if (k->key == K_A_GRID || k->key == K_A_BLOCK) {
            k->ev.dims = k->key;
            return push(k, C_DIMS);
        }
        return enter_skip(k);
    default: return enter_skip(k);
    }
}

static int on_end_array(kimp *k) {
    if (k->skip) {
        k->skip--;
        return 1;
    }
    if (k->capt && k->sp <= k->capt_sp) { /* a worker's piece goes on past traceEvents: k takes it */
        k->fail = ERR_MALFORMED;
        return 0;
    }
    k->pcur = k->pnext[--k->sp];
    return 1;
}

/* Whether s[0, n) is a plain run of at most 20 digits. */
static int digits_only(const char *s, size_t n) {
    if (n == 0 || n > 20)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

/* The value of the number text num (see dec_parse), from the parts the scanner read when it has
 * them (k->nv). */
static int num_dec(const kimp *k, const char *num, size_t num_len, int scale, int exact, int64_t *out) {
    if (k->nv && k->nv->ok) {
        int rc = dec_parts(k->nv, scale, exact, out);
        if (rc != -2)
            return rc;
    }
    return dec_fast(num, num_len, scale, exact, out);
}

/* The integer field f names in the event being read (F_EV_INT) or the device properties (F_DP_INT):
 * the schema's table says where each is (offsetof), so that one store serves every integer key. */
static inline int64_t *field_int(kimp *k, const kfield *f) {
    char *base = f->kind == F_EV_INT ? (char *)&k->ev : (char *)&k->dp;
    return (int64_t *)(void *)(base + f->off);
}

/* An event's integer field f, read: its value and its bit in kev.have. */
static inline void ev_int_set(kimp *k, const kfield *f, int64_t v) {
    *field_int(k, f) = v;
    k->ev.have |= f->bit;
}

/* An event's ts or dur (key), read (ok, its value already stored) or not. */
static inline void ev_time_got(kimp *k, int key, int ok) {
    k->ev.have |= key == K_TS ? (ok ? H_TS : H_TS_BAD) : (ok ? H_DUR : H_DUR_BAD);
}

/* A string or a number of an event (not of its args). */
static int scalar_event(kimp *k, const char *num, size_t num_len, const char *str, size_t str_len) {
    kev *e = &k->ev;
    switch (k->key) {
    case K_PH:
        if (str) {
            e->ph_len = str_len;
            e->ph = str_len ? str[0] : 0;
        }
        return 1;
    case K_CAT:
        if (str) {
            e->cat = kt_cat_of(k, str, str_len);
            e->cat_len = str_len < IMPORT_CAT_MAX ? str_len : IMPORT_CAT_MAX - 1;
            memcpy(e->cat_text, str, e->cat_len);
        }
        return 1;
    case K_NAME:
        if (str == NULL)
            return 1;
        e->name_len = str_len < TP_STRING_MAX ? str_len : TP_STRING_MAX;
        e->in_window = (const uint8_t *)str >= k->wbeg && (const uint8_t *)str < k->wend;
        if (e->in_window) { /* copied only if the window moves on before the entry ends */
            e->name_s = str;
            return 1;
        }
        if (kt_buf_set(&e->name_buf, str, str_len, TP_STRING_MAX) != 0)
            return kt_fail_nomem(k);
        e->name_s = e->name_buf.s;
        return 1;
    case K_TS:
    case K_DUR: {
        int ok = num && num_dec(k, num, num_len, 3, 0, k->key == K_TS ? &e->ts : &e->dur) == 0;
        ev_time_got(k, k->key, ok);
        return 1;
    }
    default: return 1;
    }
}

/* A string of an event's args (the numbers of use are integer fields). */
static int scalar_args(kimp *k, const char *str, size_t str_len) {
    kev *e = &k->ev;
    if (k->key == K_A_SYNC_KIND && str) {
        e->sync_kind = kt_sync_type_of(str, str_len);
    } else if (k->key == K_A_STACK && str) {
        /* a text seen before is known by its key; only a new one is kept until the entry ends */
        size_t len = str_len < STACK_KEEP ? str_len : STACK_KEEP;
        e->stack_key = kt_stack_key(str, len);
        const uint64_t *id = len > 0 ? cm_u64map_find(&k->stack_ids, e->stack_key) : NULL;
        e->stack_id = id ? (uint32_t)*id : 0;
        e->stack.len = 0;
        if (id == NULL && kt_buf_set(&e->stack, str, len, STACK_KEEP) != 0)
            return kt_fail_nomem(k);
        e->have |= H_STACK;
    } else if (k->key == K_A_MODULE && str) {
        if (kt_buf_set(&e->module, str, str_len, NAME_KEEP) != 0)
            return kt_fail_nomem(k);
        e->have |= H_MODULE;
    } else if (k->key == K_A_NAME && str) {
        if (kt_buf_set(&e->mname, str, str_len, NAME_KEEP) != 0)
            return kt_fail_nomem(k);
        e->have |= H_MNAME;
    }
    return 1;
}

/* The next number of a kernel's grid or block: v when ok, else 0. */
static inline void dim_put(kimp *k, int ok, int64_t v) {
    kev *e = &k->ev;
    uint32_t *dims = e->dims == K_A_GRID ? e->grid : e->block;
    int *n = e->dims == K_A_GRID ? &e->n_grid : &e->n_block;
    if (*n < 3)
        dims[*n] = ok && v >= 0 && v <= (int64_t)UINT32_MAX ? (uint32_t)v : 0;
    (*n)++;
}

/* A number in a kernel's grid or block. */
static int scalar_dim(kimp *k, const char *num, size_t num_len) {
    int64_t v = 0;
    int ok = num && num_dec(k, num, num_len, 0, 1, &v) == 0;
    dim_put(k, ok, v);
    return 1;
}

/* A scalar outside traceEvents: at the top level, in distributedInfo, in deviceProperties. */
static int scalar_meta(kimp *k, const char *num, size_t num_len, const char *str, size_t str_len) {
    int64_t v = 0;
    switch (k->stack[k->sp]) {
    case C_TOP:
        if (k->key == K_BASE_TIME && num && num_dec(k, num, num_len, 0, 0, &v) == 0) {
            k->have_base = 1;
            k->base = v;
        } else if (k->key == K_HOSTNAME && str) {
            if (kt_buf_set(&k->host, str, str_len, NAME_KEEP) != 0)
                return kt_fail_nomem(k);
        } else if (k->key == K_TRACE_EVENTS) {
            k->events_not_array = 1;
        }
        return 1;
    case C_DIST:
        if (num && num_dec(k, num, num_len, 0, 1, &v) == 0 && v >= INT32_MIN && v <= INT32_MAX) {
            if (k->key == K_RANK) {
                k->have_rank = 1;
                k->rank = v;
            } else if (k->key == K_WORLD) {
                k->have_world = 1;
                k->world = v;
            }
        }
        return 1;
    case C_DEVPROP:
        if (k->key == K_P_NAME && str) {
            k->dp.name_len = str_len < NAME_KEEP ? str_len : NAME_KEEP;
            memcpy(k->dp.name, str, k->dp.name_len);
        }
        return 1;
    default: return 1;
    }
}

/* A scalar at the current place: number text, string, or neither (bool, null). */
static int scalar(kimp *k, const char *num, size_t num_len, const char *str, size_t str_len) {
    if (k->skip)
        return 1;
    int64_t v = 0;
    const kfield *f = &k_fields[k->key];
    if (f->ctx != k->stack[k->sp]) /* a value in an array after such a key: not that key's */
        f = &k_fields[K_NONE];
    if (f->kind == F_EV_INT) {
        if (num && num_dec(k, num, num_len, 0, 1, &v) == 0)
            ev_int_set(k, f, v);
        /* legacy traces write a host pid or tid as a string of digits ("25738") */
        else if (str && (k->key == K_PID || k->key == K_TID) && digits_only(str, str_len) &&
                 dec_fast(str, str_len, 0, 1, &v) == 0)
            ev_int_set(k, f, v);
        return 1;
    }
    if (f->kind == F_DP_INT) {
        if (num && num_dec(k, num, num_len, 0, 1, &v) == 0)
            *field_int(k, f) = v;
        return 1;
    }
    switch (k->stack[k->sp]) {
    case C_ROOT: return kt_fail_here(k, ERR_MALFORMED, "not a Kineto trace: the JSON text is not an object");
    case C_EVENTS:
        if (k->capt)
            return kt_par_keep(k, NULL, 1);
        k->st->entries++;
        kt_count_skip(k, "(not an object)", strlen("(not an object)"));
        return 1;
    case C_EVENT: return scalar_event(k, num, num_len, str, str_len);
    case C_ARGS: return scalar_args(k, str, str_len);
    case C_DIMS: return scalar_dim(k, num, num_len);
    default: return scalar_meta(k, num, num_len, str, str_len);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The scanner                                                                                */
/* ------------------------------------------------------------------------------------------ */

/* The state after a value in each of the states that expect one. */
static const uint8_t y_after[] = {Y_DONE, Y_MAP_GOT, Y_ARR_GOT, Y_ARR_GOT};


/* A string's content to the parser, decoded when it has escapes: a key, or a scalar. */
static int take_key(kimp *k, const ktok *t) {
    if (k->skip)
        return 1;
    if (!t->esc) {
        k->key = key_of(k, k->stack[k->sp], (const char *)t->s, t->n);
        return 1;
    }
    if (jl_str_decode(k, t->s, t->n) != 0)
        return kt_fail_nomem(k);
    k->key = key_of(k, k->stack[k->sp], k->dec.s, k->dec.len);
    return 1;
}

static int take_string(kimp *k, const ktok *t) {
    if (k->skip)
        return 1;
    k->at = t->end;
    if (!t->esc)
        return scalar(k, NULL, 0, (const char *)t->s, t->n);
    if (jl_str_decode(k, t->s, t->n) != 0)
        return kt_fail_nomem(k);
    return scalar(k, NULL, 0, k->dec.s, k->dec.len);
}

static int y_push(kimp *k, unsigned after) {
    if (k->depth == YDEPTH)
        return kt_fail_here(k, ERR_LIMIT, "JSON nested more than 1000 levels deep");
    k->ystk[k->depth++] = (uint8_t)after;
    return 1;
}

/* The end of a map (or an array) just read: back to the grammar state around it. 0 when the
 * parser failed. */
static int take_close(kimp *k, unsigned *ys, int map) {
    if (!(map ? on_end_map(k) : on_end_array(k)))
        return 0;
    *ys = k->ystk[--k->depth];
    return 1;
}

/* A token (kind T_STR ... T_PUNCT) in state *ys: the parser's callbacks and the next state, or a
 * parse error (at: the token's offset). Returns 1, or 0 with k->fail or a code in *rc. */
static int take_token(kimp *k, unsigned *ys, int kind, const ktok *t, uint64_t at, int *rc) {
    unsigned y = *ys;
    const char *perr;
    uint64_t stop = off_of(k, t->end), f = jl_feed_start(k, kind == T_NUM ? stop : stop - 1); /* its last byte read */
    k->at = t->end;
    switch (y) {
    case Y_START:
    case Y_MAP_VAL:
    case Y_ARR_START:
    case Y_ARR_VAL:
        if (kind == T_STR) {
            if (!take_string(k, t))
                return 0;
        } else if (kind == T_NUM) {
            if (!scalar(k, (const char *)t->s, t->n, NULL, 0))
                return 0;
        } else if (kind == T_LIT) {
            if (!scalar(k, NULL, 0, NULL, 0))
                return 0;
        } else if (t->c == '{') {
            if (!on_start_map(k) || !y_push(k, y_after[y]))
                return 0;
            *ys = Y_MAP_START;
            return 1;
        } else if (t->c == '[') {
            if (!on_start_array(k) || !y_push(k, y_after[y]))
                return 0;
            *ys = Y_ARR_START;
            return 1;
        } else if (t->c == ']' && y == Y_ARR_START) {
            return take_close(k, ys, 0);
        } else {
            perr = "unallowed token at this point in JSON text";
            break;
        }
        *ys = y_after[y];
        return 1;
    case Y_MAP_START:
    case Y_MAP_KEY:
        if (kind == T_STR) {
            if (!take_key(k, t))
                return 0;
            *ys = Y_MAP_SEP;
            return 1;
        }
        if (kind == T_PUNCT && t->c == '}' && y == Y_MAP_START) {
            return take_close(k, ys, 1);
        }
        perr = "invalid object key (must be a string)";
        break;
    case Y_MAP_SEP:
        if (kind == T_PUNCT && t->c == ':') {
            *ys = Y_MAP_VAL;
            return 1;
        }
        perr = "object key and value must be separated by a colon (':')";
        break;
    case Y_MAP_GOT:
        if (kind == T_PUNCT && t->c == '}') {
            return take_close(k, ys, 1);
        }
        if (kind == T_PUNCT && t->c == ',') {
            *ys = Y_MAP_KEY;
            return 1;
        }
        perr = "after key and value, inside map, I expect ',' or '}'";
        /* the error is placed before the token (a string: before its content), but not before
         * the start of its piece */
        uint64_t back = kind == T_STR ? t->n : stop - at;
        stop = stop - f > back ? stop - back : f;
        break;
    case Y_ARR_GOT:
        if (kind == T_PUNCT && t->c == ']') {
            return take_close(k, ys, 0);
        }
        if (kind == T_PUNCT && t->c == ',') {
            *ys = Y_ARR_VAL;
            return 1;
        }
        perr = "after array element, I expect ',' or ']'";
        break;
    default: perr = "trailing garbage"; break;
    }
    *rc = jl_error(k, stop, f, 0, perr);
    return 0;
}

/* The contexts where a value of a key the schema does not know is of no use (see jl_skip_value). */
#define IGNORED_VALUE_CTX (1u << C_TOP | 1u << C_EVENT | 1u << C_ARGS | 1u << C_DIST | 1u << C_DEVPROP)

/* The rest of a long token (a cut string's tail, a long number) at p, where a window starts: the
 * lexer's verdict, the token in *t. */
static int long_token(kimp *k, const uint8_t *p, int final, ktok *t) {
    if (k->lnum)
        return jl_lex_long_number(k, p, final, t);
    const uint8_t *close;
    if (!jl_tail_scan(k, p, &close)) {
        t->in_esc = 0;
        return final ? T_MORE : T_TAIL;
    }
    k->cut_close = off_of(k, close);
    t->s = (const uint8_t *)k->kept.s;
    t->n = k->kept.len;
    t->esc = k->tail - 1;
    t->end = close + 1;
    k->tail = 0;
    return T_STR;
}

/* A token the lexer read at q (r: its verdict, at: its offset) in grammar state *ys: the window
 * ends inside it, a lexical error, or the grammar takes it. Returns 1 to scan on after it, else 0
 * with what scan returns in *ret. */
static int scan_token(kimp *k, unsigned *ys, int r, const ktok *t, uint64_t at, const uint8_t *q, int final, int *ret) {
    if (r == T_MORE || r == T_TAIL) {
        k->ys = (uint8_t)*ys;
        if (!final) {
            k->wpos = r == T_TAIL ? k->wend : q;
            *ret = S_MORE;
            return 0;
        }
        /* the text ends inside a token: after a complete value, a string left open is
         * taken as yajl took it; anything else is cut short */
        k->wpos = k->wend;
        *ret = *ys == Y_DONE && !t->in_esc ? S_END : S_CUT;
        return 0;
    }
    if (r == T_ERR) {
        uint64_t stop = off_of(k, t->end);
        *ret = k->fail ? k->fail
                       : jl_error(k, stop, jl_feed_start(k, t->took ? stop - 1 : stop), *ys != Y_DONE,
                                  *ys == Y_DONE ? "trailing garbage" : t->msg);
        return 0;
    }
    int rc = 0;
    if (take_token(k, ys, r, t, at, &rc))
        return 1;
    /* an error found only with the blank after the text is the end's */
    *ret = k->fail ? k->fail : final && t->end == k->wend && r == T_NUM ? S_CUT : rc;
    return 0;
}

/* A number at *p: [-]digits[.digits] is read with its value, and an integer field of an event
 * stored at once (what scalar() does with it, sooner); anything else (an exponent, a leading zero
 * before a digit, the end of the window) goes through jl_lex_number. Returns 1 with *p after it, 0
 * when the lexer's verdict (*r, *t) is for scan_token to take, or -1 when the parser failed. */
static inline __attribute__((always_inline)) int scan_number(kimp *k, const uint8_t **pp, int final, ktok *t, int *r) {
    const uint8_t *p = *pp;
    dec_num nv;
    size_t n = dec_num_parts(p, &nv);
    const uint8_t *e = p + n;
    if (n == 0 || e >= k->wend || *e == 'e' || *e == 'E' || (p[nv.neg] == '0' && nv.digits > 1)) {
        *r = jl_lex_number(k, p, final, t);
        if (*r != T_NUM || t->end == k->wend)
            return 0;
        e = t->end;
        nv.ok = 0;
    }
    const kfield *f = &k_fields[k->key];
    int64_t v = 0;
    int rc;
    unsigned c = k->stack[k->sp];
    int usable = nv.ok && k->skip == 0; /* its parts are whole, and it is of use */
    if (usable && f->kind == F_EV_INT && f->ctx == c && (rc = dec_parts(&nv, 0, 1, &v)) != -2) {
        if (rc == 0)
            ev_int_set(k, f, v);
    } else if (usable && c == C_EVENT && (k->key == K_TS || k->key == K_DUR) &&
               (rc = dec_parts(&nv, 3, 0, k->key == K_TS ? &k->ev.ts : &k->ev.dur)) != -2) {
        ev_time_got(k, k->key, rc == 0); /* microseconds to nanoseconds, as scalar_event */
    } else if (usable && c == C_DIMS && (rc = dec_parts(&nv, 0, 1, &v)) != -2) {
        dim_put(k, rc == 0, v); /* as scalar_dim */
    } else {
        k->at = e;
        k->nv = &nv;
        int ok = scalar(k, (const char *)p, (size_t)(e - p), NULL, 0);
        k->nv = NULL;
        if (!ok)
            return -1;
    }
    *pp = e;
    return 1;
}

/* What scan does next, as its pieces below say: take a key, a value, or what follows a member;
 * go round again from the grammar state; hand a token the lexer read to scan_token; take what is
 * left (the end of the window, anything unusual) through jl_lex_any; or stop on the parser's
 * failure (k->fail). */
enum { SC_KEY, SC_VALUE, SC_GOT, SC_NEXT, SC_TOKEN, SC_OTHER, SC_FAIL };

/* The scanner's position: p where it reads, q where the token being read began, ys the grammar
 * state, and the lexer's last verdict (r, t) with the token's offset (at). */
typedef struct scan_pos {
    const uint8_t *p, *q;
    unsigned ys;
    int r, final;
    uint64_t at;
    ktok *t;
} scan_pos;

#define SCAN_INLINE static inline __attribute__((always_inline))

/* A key at s->p (a string, else SC_OTHER), its colon and the start of its value: a key seen
 * before at this place in an entry is matched whole by the predictor; a value the schema has no
 * use for is skipped at once. */
SCAN_INLINE int scan_key(kimp *k, scan_pos *s) {
    const uint8_t *p = s->p;
    if (*p != '"')
        return SC_OTHER;
    kpred *pr = k->skip ? NULL : pred_slot(&k->pcur);
    int r;
    if (pr && (pred_match(p, pr, r = 0) || pred_match(p, pr, r = 1))) {
        k->key = pr->key[r];
        p += pr->len[r];
        pr->older = (uint8_t)!r;
    } else {
        s->r = jl_lex_string(k, p, s->final, s->t);
        if (s->r != T_STR) {
            s->at = off_of(k, s->q);
            return SC_TOKEN;
        }
        take_key(k, s->t);
        p = skip_ws(k, s->t->end);
        if (*p != ':') {
            s->p = p;
            s->ys = Y_MAP_SEP;
            return SC_NEXT;
        }
        p++;
        if (pr)
            pred_learn(pr, s->q, p, k->key);
    }
    s->p = s->q = skip_ws(k, p);
    s->ys = Y_MAP_VAL;
    if (k->key == K_NONE && k->skip == 0 && (IGNORED_VALUE_CTX >> k->stack[k->sp] & 1)) {
        /* most such values are numbers: digits (no leading zero), maybe a fraction, and the
         * member's end */
        const uint8_t *e = s->p;
        if ((unsigned)(*e - '1') < 9 || (*e == '0' && !is_digit(e[1]))) {
            e = dec_skip_digits(e);
            if (*e == '.' && is_digit(e[1]))
                e = dec_skip_digits(e + 1);
            if (*e != ',' && *e != '}')
                e = jl_skip_value(k, s->p);
        } else {
            e = jl_skip_value(k, s->p);
        }
        if (e) {
            s->p = e;
            s->ys = Y_MAP_GOT;
            return SC_GOT;
        }
    }
    return SC_VALUE;
}

/* After a value: in a map, what follows a member. */
SCAN_INLINE int scan_after_value(scan_pos *s) {
    s->ys = y_after[s->ys];
    return s->ys == Y_MAP_GOT ? SC_GOT : SC_NEXT;
}

/* A value at s->p: a string, a number, or the start of a map or an array; else SC_OTHER. */
SCAN_INLINE int scan_value(kimp *k, scan_pos *s) {
    const uint8_t *p = s->p;
    if (*p == '"') {
        s->r = jl_lex_string(k, p, s->final, s->t);
        if (s->r != T_STR) {
            s->at = off_of(k, s->q);
            return SC_TOKEN;
        }
        if (!take_string(k, s->t))
            return SC_FAIL;
        s->p = s->t->end;
        return scan_after_value(s);
    }
    if (is_digit(*p) || *p == '-') {
        int n = scan_number(k, &s->p, s->final, s->t, &s->r);
        if (n < 0)
            return SC_FAIL;
        if (n == 0) {
            s->at = off_of(k, s->q);
            return SC_TOKEN;
        }
        return scan_after_value(s);
    }
    if (*p == '{') {
        k->at = ++p;
        if (!on_start_map(k) || !y_push(k, y_after[s->ys]))
            return SC_FAIL;
        s->ys = Y_MAP_START;
        s->p = s->q = skip_ws(k, p);
        return SC_KEY;
    }
    if (*p == '[') {
        k->at = ++p;
        if (!on_start_array(k) || !y_push(k, y_after[s->ys]))
            return SC_FAIL;
        s->p = p;
        s->ys = Y_ARR_START;
        return SC_NEXT;
    }
    return SC_OTHER;
}

/* The end of a map or an array at s->p (its closing character just read): back to the state
 * around it. */
SCAN_INLINE int scan_close(kimp *k, scan_pos *s, int map) {
    k->at = ++s->p;
    if (!(map ? on_end_map(k) : on_end_array(k)))
        return SC_FAIL;
    s->ys = k->ystk[--k->depth];
    return s->ys == Y_MAP_GOT ? SC_GOT : SC_NEXT;
}

/* After a member of a map: a comma and the next key, or the map's end. */
SCAN_INLINE int scan_map_got(kimp *k, scan_pos *s) {
    s->p = s->q = skip_ws(k, s->p);
    if (*s->p == ',') {
        s->p = s->q = skip_ws(k, s->p + 1);
        s->ys = Y_MAP_KEY;
        return SC_KEY;
    }
    return *s->p == '}' ? scan_close(k, s, 1) : SC_OTHER;
}

/* After an element of an array: a comma and the next value, or the array's end. */
SCAN_INLINE int scan_arr_got(kimp *k, scan_pos *s) {
    if (*s->p == ',') {
        s->p = s->q = skip_ws(k, s->p + 1);
        s->ys = Y_ARR_VAL;
        return SC_VALUE;
    }
    return *s->p == ']' ? scan_close(k, s, 0) : SC_OTHER;
}

/* Where the grammar state sends the scanner at s->p. */
SCAN_INLINE int scan_state(kimp *k, scan_pos *s) {
    switch (s->ys) {
    case Y_MAP_START:
    case Y_MAP_KEY: return SC_KEY;
    case Y_MAP_SEP:
        if (*s->p != ':')
            return SC_OTHER;
        s->p++;
        s->ys = Y_MAP_VAL;
        return SC_NEXT;
    case Y_MAP_GOT: return SC_GOT;
    case Y_ARR_GOT: return scan_arr_got(k, s);
    case Y_DONE: return SC_OTHER;
    default: return SC_VALUE; /* a value */
    }
}

/* Scans the window from k->wpos. final: the window ends the text. Returns S_MORE when the next
 * piece is needed (k->wpos: where to go on, the start of an unfinished token), S_END at the end of
 * a complete text, S_CUT when the text ends inside its value, or a negative code. The common
 * sequences (a key, its colon and its value; a comma and the next key) are taken in one go, one
 * piece leading to the next; everything else, and whatever the window ends in, goes through
 * jl_lex_any and take_token. */
int kt_scan(kimp *k, int final) {
    ktok t = {0};
    scan_pos s = {.p = k->wpos, .ys = k->ys, .final = final, .t = &t};
    int rc = 0;
    for (;;) {
        int step;
        if (k->tail || k->lnum) {
            s.q = s.p;
            s.at = k->tok_at;
            s.r = long_token(k, s.p, final, &t);
            step = SC_TOKEN;
        } else {
            s.p = s.q = skip_ws(k, s.p);
            step = scan_state(k, &s);
            while (step <= SC_GOT) { /* in the order they mostly come */
                if (step == SC_KEY)
                    step = scan_key(k, &s);
                if (step == SC_VALUE)
                    step = scan_value(k, &s);
                if (step == SC_GOT)
                    step = scan_map_got(k, &s);
            }
        }
        if (step == SC_NEXT)
            continue;
        if (step == SC_FAIL)
            return k->fail;
        if (step == SC_OTHER) { /* everything else, and the ends of the window */
            if (s.p == k->wend) {
                k->wpos = s.p;
                k->ys = (uint8_t)s.ys;
                if (!final)
                    return S_MORE;
                return s.ys == Y_DONE ? S_END : S_CUT;
            }
            s.at = off_of(k, s.q);
            s.r = jl_lex_any(k, s.q, final, &t);
        }
        unsigned ys = s.ys;
        if (!scan_token(k, &ys, s.r, &t, s.at, s.q, final, &rc))
            return rc;
        s.ys = ys;
        s.p = t.end;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The import                                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* Makes the window the unfinished token of the last one (from k->wpos) followed by the piece in
 * slot i (len bytes at data). */
int kt_window_next(kimp *k, uint8_t *data, size_t len) {
    kev *e = &k->ev;
    if (e->in_window) { /* the entry being read keeps its name */
        if (kt_buf_set(&e->name_buf, e->name_s, e->name_len, TP_STRING_MAX) != 0)
            return err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
        e->name_s = e->name_buf.s;
        e->in_window = 0;
    }
    size_t carry = (size_t)(k->wend - k->wpos);
    uint64_t base = off_of(k, k->wpos);
    uint8_t *w;
    if (carry <= JSRC_HEAD) {
        w = data - carry;
        memmove(w, k->wpos, carry);
    } else {
        size_t need = carry + len + JSRC_PAD;
        if (need > k->big_cap) {
            size_t cap = k->big_cap ? k->big_cap : (1u << 20);
            while (cap < need)
                cap *= 2;
            uint8_t *b = malloc(cap);
            if (b == NULL)
                return err_set(k->err, ERR_NOMEM, "%s: out of memory", k->name);
            memcpy(b, k->wpos, carry);
            free(k->big);
            k->big = b;
            k->big_cap = cap;
        } else {
            memmove(k->big, k->wpos, carry);
        }
        w = k->big;
        memcpy(w + carry, data, len);
        memset(w + carry + len, 0, JSRC_PAD);
    }
    k->wbeg = k->wpos = w;
    k->wend = w + carry + len;
    *(uint8_t *)(uintptr_t)k->wend = 0;
    k->wbase = base;
    return 0;
}

int kt_scan_piece(kimp *k, uint8_t *data, size_t len) {
    int rc = kt_window_next(k, data, len);
    if (rc == 0)
        rc = kt_scan(k, 0);
    if (rc >= 0 && (size_t)(k->wend - k->wpos) > LONG_NUMBER && (*k->wpos == '-' || is_digit(*k->wpos)))
        jl_long_number(k);
    return rc;
}

/* Scans the text piece by piece (on several threads when given them and the text is long enough),
 * then judges its end. */
/* The bytes of input above which its text is parsed on threads (gz: of a gzip'd text's compressed
 * bytes; pieces asked for: a sixteenth of a piece). */
static size_t par_least(const import_opts *o, int gz) {
    if (o && o->piece_bytes)
        return gz ? o->piece_bytes / 16 : o->piece_bytes;
    return gz ? KT_PAR_LEAST_GZ : KT_PAR_LEAST;
}

/* The threads a text of total input bytes (0: unknown) is parsed on, given threads. */
static int parsing_threads(const import_opts *o, uint64_t total, int gz, int threads) {
    return threads > 1 && (total == 0 || total > par_least(o, gz)) ? threads : 1;
}

/* The bytes of a piece on this many threads: 2 threads + 3 pieces are in flight (kt_par_parse). */
static size_t piece_for(int threads) {
    size_t p = KT_IN_FLIGHT / (2 * (size_t)threads + 3) / 4096 * 4096;
    return p > KT_PIECE ? KT_PIECE : p < KT_PIECE_MIN ? KT_PIECE_MIN : p;
}

static int parse_text(kimp *k, jsrc *s, int threads) {
    int rc = 0;
    k->st->gzip = s->gz;
    k->feed0 = s->fd >= 0 && !s->gz ? s->head_len : JSRC_CHUNK;
    const import_opts *o = k->opts;
    static const uint8_t empty[JSRC_PAD];
    k->wbeg = k->wpos = k->wend = empty;
    size_t piece = o && o->piece_bytes ? o->piece_bytes : piece_for(threads);
    k->st->parse_threads = 1;
    if (parsing_threads(o, s->total, s->gz, threads) > 1) {
        k->on_threads = 1;
        k->st->parse_threads = threads;
        rc = kt_par_parse(k, s, threads, piece);
    } else {
        int held = -1; /* the slot the window's carry comes from */
        for (;;) {
            int i = -1;
            rc = jsrc_next(s, &i, k->err);
            if (rc < 0)
                break;
            if (rc == 0) {
                rc = kt_scan(k, 1);
                break;
            }
            rc = kt_scan_piece(k, s->slot[i] + JSRC_HEAD, s->len[i]);
            if (held >= 0)
                jsrc_release(s, held);
            held = i;
            if (rc < 0)
                break;
            if (o && o->progress && o->progress(o->progress_ctx, s->done[i], s->total) != 0) {
                rc = err_set(k->err, ERR_EOF, "%s: import cancelled", k->name);
                break;
            }
        }
        if (held >= 0)
            jsrc_release(s, held);
    }
    if (rc < 0)
        return rc;
    k->st->input_bytes = s->read_bytes;
    k->st->strings_cut = k->cuts;
    k->st->json_bytes = off_of(k, k->wend);
    if (k->fail)
        return k->fail;
    if (rc == S_CUT)
        return err_set(k->err, ERR_TRUNCATED,
                       "%s: JSON text cut short: it ends at line %llu (byte %llu) inside a value", k->name,
                       (unsigned long long)k->nl + 1, (unsigned long long)k->st->json_bytes);
    if (!k->saw_events)
        return err_set(k->err, ERR_MALFORMED, "%s: not a Kineto trace: %s", k->name,
                       k->events_not_array ? "traceEvents is not an array" : "no traceEvents array");
    return 0;
}

static int parse_all(kimp *k, jsrc *s) {
    int threads = kt_threads(k->opts);
    s->plain_here = threads > 1 ? par_least(k->opts, 0) : 0; /* the workers read those themselves */
    /* gzip parsed on as many threads as there are cores, one or two: the importer's thread inflates
     * each piece as it needs it, between the entries it makes records of (and the worker scans);
     * an inflater of its own would take turns with them. On three threads and more the inflate
     * would be more than the importer's thread's share. */
    int parsing = parsing_threads(k->opts, s->total, 1, threads);
    s->inline_gz = parsing <= 2 && parsing >= cm_cores();
    int rc = jsrc_start(s, k->err);
    return rc ? rc : parse_text(k, s, threads);
}

int kt_setup(kimp *k) {
    k->stack[0] = C_ROOT;
    k->ys = Y_START;
    key_masks(k);
    for (size_t r = 0; r < sizeof k->pred / sizeof k->pred[0]; r++)
        k->pred[r][PRED_POS].last = 1;
    k->pcur = k->pred[C_ROOT];
    k->ev.name_s = "";
    if (kt_buf_set(&k->ev.name_buf, "", 0, 0) != 0 || kt_buf_set(&k->ev.mname, "", 0, 0) != 0)
        return ERR_NOMEM;
    return 0;
}

void kt_release(kimp *k) {
    free(k->ev.name_buf.s);
    free(k->ev.mname.s);
    free(k->ev.stack.s);
    free(k->ev.module.s);
    free(k->kept.s);
    free(k->dec.s);
    free(k->big);
}

static int import(jsrc *s, const char *name, const import_opts *opts, import_emit_fn emit, void *ctx,
                  import_stats *st_out, err_msg *err) {
    import_stats st_local;
    import_stats *st = em_stats_init(st_out, &st_local);
    err_msg err_local;
    if (err == NULL)
        err = &err_local;
    kimp *k = calloc(1, sizeof *k);
    if (k == NULL)
        return err_set(err, ERR_NOMEM, "%s: out of memory", name);
    k->name = name;
    k->opts = opts;
    k->st = st;
    k->err = err;
    k->max_events = em_max_events(opts, s->total);
    cm_hash_key_get(&k->name_key);
    if (kt_setup(k) != 0) {
        kt_release(k);
        free(k);
        return err_set(err, ERR_NOMEM, "%s: out of memory", name);
    }
    k->enc = tp_enc_new(
        &(tp_enc_opts){.producer = opts ? opts->producer : 0, .max_string_bytes = IMPORT_MAX_STRING_BYTES});
    int rc;
    if (k->enc == NULL)
        rc = err_set(err, ERR_NOMEM, "%s: out of memory", name);
    else
        rc = parse_all(k, s);
    jsrc_close(s);
    if (rc == 0 && k->fail)
        rc = k->fail;
    if (rc == 0)
        rc = kt_emit_all(k, emit, ctx);
    tp_enc_destroy(&k->enc);
    kt_release(k);
    free(k->host.s);
    free(k->tnames_text.s);
    free(k->names);
    free(k->names_text.s);
    free(k->devprops);
    cm_big_free(k->rec, k->cap_rec * sizeof *k->rec);
    free(k->shapes);
    cm_u64map_free(&k->shape_ids);
    cm_big_free(k->ctx, k->cap_ctx * sizeof *k->ctx);
    cm_u64map_free(&k->ctx_long);
    free(k->frames);
    cm_u64map_free(&k->frame_ids);
    free(k->pyfr);
    free(k->stacks);
    cm_u64map_free(&k->stack_ids);
    free(k->api_class);
    cm_u64map_free(&k->streams);
    cm_u64map_free(&k->threads);
    cm_u64map_free(&k->tnames);
    free(k);
    return rc;
}

int kineto_import_mem(const void *data, size_t len, const char *name, const import_opts *opts,
                      import_emit_fn emit, void *ctx, import_stats *st, err_msg *err) {
    if (name == NULL)
        name = "(memory)";
    if (emit == NULL || (data == NULL && len > 0))
        return err_set(err, ERR_INVAL, "%s: invalid argument", name);
    jsrc s = {.name = name, .fd = -1, .mem = data, .mem_len = len, .total = len};
    int rc = import(&s, name, opts, emit, ctx, st, err);
    jsrc_close(&s);
    return rc;
}

int kineto_import_fd(int fd, const void *prefix, size_t prefix_len, const char *name, const import_opts *opts,
                     import_emit_fn emit, void *ctx, import_stats *st, err_msg *err) {
    if (fd < 0 || emit == NULL || prefix_len > JSRC_CHUNK || (prefix == NULL && prefix_len > 0))
        return err_set(err, ERR_INVAL, "kineto import: invalid argument");
    jsrc s = {.name = name, .fd = fd};
    struct stat sb;
    int rc = 0;
    if (fstat(fd, &sb) == 0) {
        if (S_ISDIR(sb.st_mode))
            rc = err_set(err, ERR_INVAL, "%s: is a directory", name);
        else if (S_ISREG(sb.st_mode))
            s.total = (uint64_t)sb.st_size;
    }
    if (rc == 0) {
        s.head = malloc(JSRC_CHUNK);
        if (s.head == NULL) {
            rc = err_set(err, ERR_NOMEM, "%s: out of memory", name);
        } else {
            if (prefix_len > 0)
                memcpy(s.head, prefix, prefix_len);
            s.head_len = prefix_len;
            rc = import(&s, name, opts, emit, ctx, st, err);
        }
    }
    jsrc_close(&s);
    return rc;
}

int kineto_import(const char *path, const import_opts *opts, import_emit_fn emit, void *ctx, import_stats *st,
                  err_msg *err) {
    if (path == NULL || emit == NULL)
        return err_set(err, ERR_INVAL, "kineto import: invalid argument");
    if (strcmp(path, "-") == 0)
        return kineto_import_fd(STDIN_FILENO, NULL, 0, "(stdin)", opts, emit, ctx, st, err);
    /* not blocking in open(): a FIFO nobody writes to then reads as empty */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        return err_set(err,
                       e == ENOENT   ? ERR_NOENT
                       : e == EACCES ? ERR_PERM
                                     : ERR_IO,
                       "%s: %s", path, strerror(e));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    int rc = kineto_import_fd(fd, NULL, 0, path, opts, emit, ctx, st, err);
    close(fd);
    return rc;
}
