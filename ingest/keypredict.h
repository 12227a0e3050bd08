/*
 * The Kineto reader's key predictor: objects of one kind in a trace have the same keys in the same
 * order, so the text of the key expected next (as it was the last two times at that place in an
 * object of that kind) is compared whole with the text at the scanning point, quote to colon, before
 * the key is read a byte at a time. A predictor is a row of kpred, one per place in an object.
 */
#ifndef SYNCTOP_KEYPREDICT_H
#define SYNCTOP_KEYPREDICT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* A key an object is expected to have next: as its text was the last two times (two shapes of
 * objects may alternate) at that place in an object of that kind (see pred_slot), from its opening
 * quote to its colon. */
#define PRED_POS  32 /* keys predicted per object */
#define PRED_KEEP 32 /* bytes of a key's text kept */
typedef struct kpred {
    uint8_t text[2][PRED_KEEP];
    uint32_t mask[2]; /* (1 << len) - 1 */
    uint8_t len[2], key[2];
    uint8_t older; /* which of the two to replace */
    uint8_t last;  /* the end of its row: nothing predicted */
} kpred;

/* Where the key at the scanning point is predicted, *cur the next key's place in its object (by
 * its object's context, the arguments of an event by its category, and its place in it); NULL past
 * PRED_POS. Counts the key. */
static inline kpred *pred_slot(kpred **cur) {
    kpred *pr = *cur;
    if (pr->last)
        return NULL;
    *cur = pr + 1;
    return pr;
}

/* Whether the text at p starts with predicted key i of pr (p may be read PRED_KEEP bytes on). */
static inline int pred_match(const uint8_t *p, const kpred *pr, int i) {
    if (pr->len[i] == 0)
        return 0;
#ifdef __SSE2__
    __m128i a0 = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i a1 = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
    __m128i b0 = _mm_loadu_si128((const __m128i *)(const void *)pr->text[i]);
    __m128i b1 = _mm_loadu_si128((const __m128i *)(const void *)(pr->text[i] + 16));
    uint32_t eq = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(a0, b0)) |
                  (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(a1, b1)) << 16;
    return (eq & pr->mask[i]) == pr->mask[i];
#else
    return memcmp(p, pr->text[i], pr->len[i]) == 0;
#endif
}

/* Remembers the key text [q, e) (its quote to its colon) in pr, in place of the older one. */
void pred_learn(kpred *pr, const uint8_t *q, const uint8_t *e, int key);

#endif
