/*
 * The loss report a subscriber sends its publishers when it sees a gap in a producer's sequence
 * numbers: a subscription message (the only thing a SUB socket can send upstream), subscribed and
 * at once unsubscribed, whose topic is
 *   NET_LOSS_TAG (12 bytes) | producer id (u64 LE) | batches lost (u64 LE).
 * No batch starts with the tag, so the subscription never matches one. The publisher adds the count
 * to the drops it publishes and sends a keyframe soon, since the lost batches may have carried
 * strings and metadata. Each relay on the way up appends its id (net_trail.h).
 *
 * A keyframe request is sent the same way, by a relay that sees a second subscriber below it
 * subscribe to batches it already passes on: rather than the subscription again, it sends up
 *   NET_KEY_TAG (12 bytes) | producer id (u64 LE; 0: every producer) | trail,
 * and each publisher of that producer answers with a keyframe, as it does a new subscriber.
 */
#ifndef SYNCTOP_NET_LOSS_H
#define SYNCTOP_NET_LOSS_H

#include <stdint.h>
#include <string.h>

#include "net_trail.h"

#define NET_LOSS_TAG "synctop-lost"
#define NET_LOSS_TAG_LEN 12
#define NET_LOSS_LEN (NET_LOSS_TAG_LEN + 16)

static inline void net_loss_put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t net_loss_get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static inline void net_loss_encode(uint8_t out[NET_LOSS_LEN], uint64_t producer, uint64_t lost) {
    memcpy(out, NET_LOSS_TAG, NET_LOSS_TAG_LEN);
    net_loss_put_u64(out + NET_LOSS_TAG_LEN, producer);
    net_loss_put_u64(out + NET_LOSS_TAG_LEN + 8, lost);
}

/* 1 and the fields when topic (len bytes) is a loss report (with a trail of relays), else 0. */
static inline int net_loss_decode(const uint8_t *topic, size_t len, uint64_t *producer, uint64_t *lost) {
    if (len < NET_LOSS_LEN || net_trail_hops(len - NET_LOSS_LEN) < 0 ||
        memcmp(topic, NET_LOSS_TAG, NET_LOSS_TAG_LEN) != 0)
        return 0;
    *producer = net_loss_get_u64(topic + NET_LOSS_TAG_LEN);
    *lost = net_loss_get_u64(topic + NET_LOSS_TAG_LEN + 8);
    return 1;
}

#define NET_KEY_TAG "synctop-key?"
#define NET_KEY_TAG_LEN 12
#define NET_KEY_LEN (NET_KEY_TAG_LEN + 8)

static inline void net_key_encode(uint8_t out[NET_KEY_LEN], uint64_t producer) {
    memcpy(out, NET_KEY_TAG, NET_KEY_TAG_LEN);
    net_loss_put_u64(out + NET_KEY_TAG_LEN, producer);
}

/* 1 and the producer (0: every one) when topic (len bytes) is a keyframe request, else 0. */
static inline int net_key_decode(const uint8_t *topic, size_t len, uint64_t *producer) {
    if (len < NET_KEY_LEN || net_trail_hops(len - NET_KEY_LEN) < 0 || memcmp(topic, NET_KEY_TAG, NET_KEY_TAG_LEN) != 0)
        return 0;
    *producer = net_loss_get_u64(topic + NET_KEY_TAG_LEN);
    return 1;
}

#endif
