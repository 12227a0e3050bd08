/*
 * Trails: the relays a message went through. Each relay appends its id (u64, little-endian) to the
 * topic frame of every message it passes down (net_topic.h), and to the topic of every request it
 * passes up (a loss report, a clock request, a keyframe request: net_loss.h, net_clock.h), so that
 * a relay that finds its own id in a trail knows the message went round a loop of relays and drops
 * it, and no message travels more than NET_HOPS_MAX relays. A trail rides at the end of the topic,
 * so ZeroMQ's prefix matching of subscriptions is unchanged by it.
 */
#ifndef SYNCTOP_NET_TRAIL_H
#define SYNCTOP_NET_TRAIL_H

#include <stddef.h>
#include <stdint.h>

#define NET_HOPS_MAX 8 /* relays a message may go through */

/* The relays in a trail of len bytes, or -1 when len is not a whole trail of at most NET_HOPS_MAX. */
static inline int net_trail_hops(size_t len) {
    return len % 8 == 0 && len / 8 <= NET_HOPS_MAX ? (int)(len / 8) : -1;
}

/* The i-th relay of the trail at t. */
static inline uint64_t net_trail_get(const uint8_t *t, size_t i) {
    uint64_t v = 0;
    for (int k = 0; k < 8; k++)
        v |= (uint64_t)t[8 * i + (size_t)k] << (8 * k);
    return v;
}

/* Where id is in the trail at t of hops relays: its index, or -1. */
static inline int net_trail_find(const uint8_t *t, int hops, uint64_t id) {
    for (int i = 0; i < hops; i++)
        if (net_trail_get(t, (size_t)i) == id)
            return i;
    return -1;
}

/* Appends id at out (8 bytes). */
static inline void net_trail_put(uint8_t *out, uint64_t id) {
    for (int k = 0; k < 8; k++)
        out[k] = (uint8_t)(id >> (8 * k));
}

#endif
