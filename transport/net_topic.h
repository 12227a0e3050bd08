/*
 * Topics: every message a publisher or relay sends is two frames, [topic][body], so that ZeroMQ's
 * subscription matching (a prefix match on the first frame) lets a subscriber take exactly what it
 * wants, and the subscriptions that travel up tell publishers and relays what is wanted:
 *   'B' + producer id (u64 LE): a batch of that producer (body: the batch, as in a trace file)
 *   'S' + producer id (u64 LE): a relay's summary of that producer (body: tp_summary wire form)
 *   'C':                        a relay's clock answer (body: net_clock.h)
 *   'N':                        a relay's notice to every subscriber below (body: net_notice.h)
 * Subscribing to "B" takes every producer's batches, "B" + id one producer's, "S" every summary.
 */
#ifndef SYNCTOP_NET_TOPIC_H
#define SYNCTOP_NET_TOPIC_H

#include <stddef.h>
#include <stdint.h>

#include "net_loss.h"

#define NET_TOPIC_BATCH 'B'
#define NET_TOPIC_SUMMARY 'S'
#define NET_TOPIC_CLOCK 'C'
#define NET_TOPIC_NOTICE 'N'
#define NET_TOPIC_LEN 9 /* a letter and a producer id */

static inline void net_topic_encode(uint8_t out[NET_TOPIC_LEN], char letter, uint64_t producer) {
    out[0] = (uint8_t)letter;
    net_loss_put_u64(out + 1, producer);
}

/* The letter of a well-formed topic frame ('B' or 'S' with its producer id, 'C' or 'N' alone), else 0. */
static inline char net_topic_decode(const uint8_t *t, size_t len, uint64_t *producer) {
    *producer = 0;
    if (len == 1 && (t[0] == NET_TOPIC_CLOCK || t[0] == NET_TOPIC_NOTICE))
        return (char)t[0];
    if (len == NET_TOPIC_LEN && (t[0] == NET_TOPIC_BATCH || t[0] == NET_TOPIC_SUMMARY)) {
        *producer = net_loss_get_u64(t + 1);
        return (char)t[0];
    }
    return 0;
}

#endif
