/*
 * The clock exchange between a subscriber and the relays above it, NTP-style. The subscriber asks
 * with a subscription (the only thing a SUB socket can send upstream), subscribed and at once
 * unsubscribed, whose topic is
 *   NET_CLOCK_ASK (14 bytes) | nonce (u64 LE)
 * and that every relay on the way up sees and passes on, its id appended (net_trail.h). Each relay
 * answers with a message published
 * downstream, which every subscriber below it receives and only the asker uses:
 *   NET_CLOCK_ANSWER (14 bytes) | nonce | t1 | t2 | relay id (u64 LE each) | host length (u8) | host
 * t1 is the relay's CLOCK_REALTIME when it saw the request, t2 when it sent the answer; the asker
 * took t0 before asking and takes t3 on receipt. No batch starts with either tag, so neither is
 * mistaken for one (and the request never matches a batch as a topic).
 */
#ifndef SYNCTOP_NET_CLOCK_H
#define SYNCTOP_NET_CLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "net_loss.h"

#define NET_CLOCK_ASK "synctop-clock?"
#define NET_CLOCK_ANSWER "synctop-clock!"
#define NET_CLOCK_TAG_LEN 14
#define NET_CLOCK_ASK_LEN (NET_CLOCK_TAG_LEN + 8)
#define NET_CLOCK_HOST_MAX 64
#define NET_CLOCK_ANSWER_FIXED (NET_CLOCK_TAG_LEN + 32 + 1)
#define NET_CLOCK_ANSWER_MAX (NET_CLOCK_ANSWER_FIXED + NET_CLOCK_HOST_MAX)

typedef struct net_clock_answer {
    uint64_t nonce, t1, t2, relay;
    char host[NET_CLOCK_HOST_MAX + 1];
} net_clock_answer;

static inline void net_clock_ask_encode(uint8_t out[NET_CLOCK_ASK_LEN], uint64_t nonce) {
    memcpy(out, NET_CLOCK_ASK, NET_CLOCK_TAG_LEN);
    net_loss_put_u64(out + NET_CLOCK_TAG_LEN, nonce);
}

/* 1 and the nonce when topic (len bytes) is a clock request (with a trail of relays), else 0. */
static inline int net_clock_ask_decode(const uint8_t *topic, size_t len, uint64_t *nonce) {
    if (len < NET_CLOCK_ASK_LEN || net_trail_hops(len - NET_CLOCK_ASK_LEN) < 0 ||
        memcmp(topic, NET_CLOCK_ASK, NET_CLOCK_TAG_LEN) != 0)
        return 0;
    *nonce = net_loss_get_u64(topic + NET_CLOCK_TAG_LEN);
    return 1;
}

/* Whether a host name may travel in an answer: 1 to NET_CLOCK_HOST_MAX printable ASCII bytes,
 * no space. */
static inline int net_clock_host_ok(const char *host, size_t len) {
    if (len == 0 || len > NET_CLOCK_HOST_MAX)
        return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)host[i] <= 0x20 || (unsigned char)host[i] >= 0x7f)
            return 0;
    return 1;
}

/* Writes the answer into out (room for NET_CLOCK_ANSWER_MAX); returns its length. The host must
 * pass net_clock_host_ok. */
static inline size_t net_clock_answer_encode(uint8_t *out, const net_clock_answer *a) {
    size_t hl = strlen(a->host);
    memcpy(out, NET_CLOCK_ANSWER, NET_CLOCK_TAG_LEN);
    net_loss_put_u64(out + NET_CLOCK_TAG_LEN, a->nonce);
    net_loss_put_u64(out + NET_CLOCK_TAG_LEN + 8, a->t1);
    net_loss_put_u64(out + NET_CLOCK_TAG_LEN + 16, a->t2);
    net_loss_put_u64(out + NET_CLOCK_TAG_LEN + 24, a->relay);
    out[NET_CLOCK_TAG_LEN + 32] = (uint8_t)hl;
    memcpy(out + NET_CLOCK_ANSWER_FIXED, a->host, hl);
    return NET_CLOCK_ANSWER_FIXED + hl;
}

/* Whether msg (len bytes) starts with the answer tag: it is then never a batch. */
static inline int net_clock_is_answer(const uint8_t *msg, size_t len) {
    return len >= NET_CLOCK_TAG_LEN && memcmp(msg, NET_CLOCK_ANSWER, NET_CLOCK_TAG_LEN) == 0;
}

/* 1 and the fields when msg is a well-formed answer (lengths agree, the host passes
 * net_clock_host_ok, t2 not before t1), else 0. */
static inline int net_clock_answer_decode(const uint8_t *msg, size_t len, net_clock_answer *a) {
    if (len < NET_CLOCK_ANSWER_FIXED || len > NET_CLOCK_ANSWER_MAX || !net_clock_is_answer(msg, len))
        return 0;
    size_t hl = msg[NET_CLOCK_TAG_LEN + 32];
    if (len != NET_CLOCK_ANSWER_FIXED + hl || !net_clock_host_ok((const char *)msg + NET_CLOCK_ANSWER_FIXED, hl))
        return 0;
    a->nonce = net_loss_get_u64(msg + NET_CLOCK_TAG_LEN);
    a->t1 = net_loss_get_u64(msg + NET_CLOCK_TAG_LEN + 8);
    a->t2 = net_loss_get_u64(msg + NET_CLOCK_TAG_LEN + 16);
    a->relay = net_loss_get_u64(msg + NET_CLOCK_TAG_LEN + 24);
    memcpy(a->host, msg + NET_CLOCK_ANSWER_FIXED, hl);
    a->host[hl] = '\0';
    return a->t2 >= a->t1;
}

#endif
