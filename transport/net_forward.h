/*
 * What a relay does with each message on its way through (net_relay.c moves them between its
 * sockets; this decides, and holds no socket, so that it can be tested and fuzzed alone).
 *
 * Down, [topic][body] from the publishers and relays above: a message whose topic trail already
 * holds this relay went round a loop of relays and is dropped, so is one whose trail is full
 * (NET_HOPS_MAX) and a batch that came before (its producer, sequence number and header checksum:
 * net_seen.h; two relays between a publisher and this one, or a loop); the others go on with this
 * relay's id appended to the topic.
 *
 * Up, the subscription notices of the subscribers below: the requests (loss reports, clock
 * requests, keyframe requests: net_loss.h, net_clock.h) go on with this relay's id appended, unless
 * their trail holds it already (a loop) or is full, or NET_FWD_PENDING of them wait for their
 * unsubscription. A subscription to a topic of ours ("", 'B', 'S',
 * 'C', 'N', with or without a producer id) goes on the first time; again, while it is passed on
 * already, it becomes a keyframe request for that producer (or every one), so that the publishers
 * still answer a newcomer with a keyframe while a subscription that went round a loop of relays
 * stops there. An unsubscription (which comes up once the last subscriber below has left) goes
 * on, unless the relay has found itself in a loop: the relays of a loop subscribe to each other,
 * and an unsubscription and a subscription would chase each other round it for ever, so what is
 * subscribed then stays so. Any other subscription is refused, and so are new topics past
 * NET_FWD_TOPICS.
 */
#ifndef SYNCTOP_NET_FORWARD_H
#define SYNCTOP_NET_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "net_clock.h"
#include "net_loss.h"
#include "net_topic.h"

/* What a relay passes up stays within what a publisher (or relay) above lets one peer hold
 * (NET_PEER_SUBS, net_peers.h), whatever its subscribers below send: so a flood below never gets
 * the relay itself cut off above. */
#define NET_FWD_TOPICS 512      /* topics passed up at once */
#define NET_FWD_PENDING 256     /* requests passed up and not yet let go of */
#define NET_FWD_PRODUCERS 4096  /* producers whose batches are followed for copies */
#define NET_FWD_UP_MAX (1 + NET_LOSS_LEN + 8 * NET_HOPS_MAX) /* the longest message passed up */

typedef enum net_fwd_verdict {
    NET_FWD_PASS = 0,  /* send what the call wrote */
    NET_FWD_MALFORMED, /* not a message of ours */
    NET_FWD_LOOPED,    /* its trail holds this relay: it went round a loop */
    NET_FWD_TOO_FAR,   /* its trail is full */
    NET_FWD_COPY,      /* a batch that came before */
    NET_FWD_REFUSED    /* a subscription that is not ours, or a new topic past the bound */
} net_fwd_verdict;

/* Up to two messages to pass up (a keyframe request is a subscription and its unsubscription). */
typedef struct net_fwd_up {
    uint8_t msg[2][NET_FWD_UP_MAX];
    size_t len[2];
    int n;
} net_fwd_up;

typedef struct net_fwd net_fwd;

/* The forwarding state of the relay whose id is relay_id; NULL when out of memory. */
net_fwd *net_fwd_new(uint64_t relay_id);
void net_fwd_destroy(net_fwd **f);

/* A message from above: topic (tlen bytes) and body. On NET_FWD_PASS, out (NET_TOPIC_MAX bytes)
 * holds the topic to send it under and *out_len its length. */
net_fwd_verdict net_fwd_down(net_fwd *f, const uint8_t *topic, size_t tlen, const uint8_t *body, size_t blen,
                             uint8_t *out, size_t *out_len);
/* A notice from below (1 or 0, then a topic: len bytes in all). On NET_FWD_PASS, *out says what to
 * send up (nothing, for a second subscription to a topic that needs no keyframe). */
net_fwd_verdict net_fwd_up_take(net_fwd *f, const uint8_t *note, size_t len, net_fwd_up *out);

/* Whether a notice (1 or 0, then a topic) is one synctop sends: a subscription to one of its
 * topics, or a request with a trail. */
int net_fwd_ours(const uint8_t *note, size_t len);

/* The relay after this one in the trail of the first message that came back to it (0: none). */
uint64_t net_fwd_loop_via(const net_fwd *f);
/* Topics passed up now. */
size_t net_fwd_topics(const net_fwd *f);

#endif
