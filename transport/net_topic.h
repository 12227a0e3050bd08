/*
 * Topics: every message a publisher or relay sends is two frames, [topic][body], so that ZeroMQ's
 * subscription matching (a prefix match on the first frame) lets a subscriber take exactly what it
 * wants, and the subscriptions that travel up tell publishers and relays what is wanted:
 *   'B' + producer id (u64 LE): a batch of that producer (body: the batch, as in a trace file)
 *   'S' + producer id (u64 LE): a relay's summary of that producer (body: tp_summary wire form)
 *   'C':                        a relay's clock answer (body: net_clock.h)
 *   'N':                        a relay's notice to every subscriber below (body: net_notice.h)
 * Subscribing to "B" takes every producer's batches, "B" + id one producer's, "S" every summary.
 * Each relay on the way down appends its id to the topic frame (net_trail.h): a topic frame is its
 * head (the letter, and the producer id for 'B' and 'S') and then a trail of at most NET_HOPS_MAX
 * relays.
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
#define NET_TOPIC_MAX (NET_TOPIC_LEN + 8 * NET_HOPS_MAX) /* and a whole trail */

static inline void net_topic_encode(uint8_t out[NET_TOPIC_LEN], char letter, uint64_t producer) {
    out[0] = (uint8_t)letter;
    net_loss_put_u64(out + 1, producer);
}

/* The length of a topic's head for its letter: 9 for 'B' and 'S', 1 for 'C' and 'N', 0 for others. */
static inline size_t net_topic_head(uint8_t letter) {
    return letter == NET_TOPIC_BATCH || letter == NET_TOPIC_SUMMARY ? NET_TOPIC_LEN
           : letter == NET_TOPIC_CLOCK || letter == NET_TOPIC_NOTICE ? 1
                                                                     : 0;
}

/* The letter of a well-formed topic frame ('B' or 'S' with its producer id, 'C' or 'N' alone, then
 * a trail), with its producer id (0 for 'C' and 'N') and the relays in its trail (hops may be
 * NULL); else 0. */
static inline char net_topic_decode_hops(const uint8_t *t, size_t len, uint64_t *producer, int *hops) {
    *producer = 0;
    size_t head = len > 0 ? net_topic_head(t[0]) : 0;
    int n = head > 0 && len >= head ? net_trail_hops(len - head) : -1;
    if (n < 0)
        return 0;
    if (head == NET_TOPIC_LEN)
        *producer = net_loss_get_u64(t + 1);
    if (hops != NULL)
        *hops = n;
    return (char)t[0];
}

static inline char net_topic_decode(const uint8_t *t, size_t len, uint64_t *producer) {
    return net_topic_decode_hops(t, len, producer, NULL);
}

#endif
