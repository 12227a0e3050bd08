/* Which batches of a producer came already (net_seen.h). */
#include "net_seen.h"

#include <stdlib.h>
#include <string.h>

struct net_seen {
    int known;                         /* a batch was taken */
    uint64_t top;                      /* the highest sequence number taken */
    uint64_t have[NET_SEEN_WINDOW / 64]; /* bit seq % WINDOW: that one came (for seq in the window) */
    uint32_t crc[NET_SEEN_WINDOW];     /* its header checksum */
};

net_seen *net_seen_new(void) { return calloc(1, sizeof(net_seen)); }

void net_seen_destroy(net_seen **w) {
    if (w != NULL) {
        free(*w);
        *w = NULL;
    }
}

void net_seen_reset(net_seen *w) { memset(w, 0, sizeof *w); }

uint64_t net_seen_top(const net_seen *w) { return w->top; }

static int has(const net_seen *w, uint64_t seq) {
    size_t i = seq % NET_SEEN_WINDOW;
    return (w->have[i / 64] >> (i % 64)) & 1;
}

static void mark(net_seen *w, uint64_t seq, uint32_t crc, int on) {
    size_t i = seq % NET_SEEN_WINDOW;
    if (on)
        w->have[i / 64] |= 1ull << (i % 64);
    else
        w->have[i / 64] &= ~(1ull << (i % 64));
    w->crc[i] = crc;
}

/* The window holds seq alone. */
static net_seen_kind start(net_seen *w, uint64_t seq, uint32_t crc, net_seen_kind kind) {
    memset(w->have, 0, sizeof w->have);
    w->known = 1;
    w->top = seq;
    mark(w, seq, crc, 1);
    return kind;
}

net_seen_kind net_seen_take(net_seen *w, uint64_t seq, uint32_t crc) {
    if (!w->known)
        return start(w, seq, crc, NET_SEEN_NEW);
    if (seq > w->top) {
        if (seq - w->top >= NET_SEEN_WINDOW)
            return start(w, seq, crc, NET_SEEN_NEW);
        for (uint64_t s = w->top + 1; s < seq; s++) /* the gap: none of those came */
            mark(w, s, 0, 0);
        w->top = seq;
        mark(w, seq, crc, 1);
        return NET_SEEN_NEW;
    }
    if (w->top - seq >= NET_SEEN_WINDOW)
        return start(w, seq, crc, NET_SEEN_RESTART);
    if (!has(w, seq)) {
        mark(w, seq, crc, 1);
        return NET_SEEN_LATE;
    }
    if (w->crc[seq % NET_SEEN_WINDOW] == crc)
        return NET_SEEN_COPY;
    return start(w, seq, crc, NET_SEEN_RESTART);
}
