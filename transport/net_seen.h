/*
 * Which batches of one producer came already: a window over its last NET_SEEN_WINDOW sequence
 * numbers, each with the checksum of the batch's header (which covers its producer, sequence,
 * times, sizes and the payload's checksum), so that a copy of a batch that came before (two relays
 * between a publisher and a subscriber, a diamond; a loop of relays) is told from the batch itself
 * and from a producer that started over under the same id (its batches differ). The subscriber and
 * the relay keep one per producer they follow (about 4 KiB each).
 */
#ifndef SYNCTOP_NET_SEEN_H
#define SYNCTOP_NET_SEEN_H

#include <stdint.h>

#define NET_SEEN_WINDOW 1024

typedef enum net_seen_kind {
    NET_SEEN_NEW = 1, /* past every one seen (the first, or after a gap) */
    NET_SEEN_LATE,    /* within the window, where none came before: it fills a gap */
    NET_SEEN_COPY,    /* the same batch came before: drop it */
    NET_SEEN_RESTART  /* a sequence number seen with another batch, or older than the window: the
                         producer started over (the window starts again from it) */
} net_seen_kind;

typedef struct net_seen net_seen;

/* A window with nothing seen; NULL when out of memory. */
net_seen *net_seen_new(void);
void net_seen_destroy(net_seen **w);
/* Forgets what came (the producer's batches will not be taken for a while). */
void net_seen_reset(net_seen *w);
/* Takes a batch's sequence number and header checksum; says what it is. */
net_seen_kind net_seen_take(net_seen *w, uint64_t seq, uint32_t hdr_crc);
/* The highest sequence number taken (0 before any). */
uint64_t net_seen_top(const net_seen *w);

#endif
