/*
 * The Kineto reader's key predictor (keypredict.h): what it learns of a key it did not predict.
 */
#include "keypredict.h"

void pred_learn(kpred *pr, const uint8_t *q, const uint8_t *e, int key) {
    size_t len = (size_t)(e - q);
    int i = pr->older;
    if (len >= PRED_KEEP || memchr(q, '\n', len) != NULL) /* newlines are counted where they are */
        return;
    memset(pr->text[i], 0, sizeof pr->text[i]);
    memcpy(pr->text[i], q, len);
    pr->mask[i] = (uint32_t)((1ull << len) - 1);
    pr->len[i] = (uint8_t)len;
    pr->key[i] = (uint8_t)key;
    pr->older = (uint8_t)!i;
}
