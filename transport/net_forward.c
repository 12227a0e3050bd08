/* What a relay does with each message on its way through (net_forward.h). */
#include "net_forward.h"

#include <stdlib.h>
#include <string.h>

#include "synctop/codec.h"
#include "net_seen.h"
#include "u64map.h"

struct topic {
    uint8_t t[NET_TOPIC_LEN];
    uint8_t len;
};

struct net_fwd {
    uint64_t id;
    struct topic *topics; /* passed up now */
    size_t n_topics;
    cm_u64map seen_ix;    /* producer -> index + 1 in seen */
    net_seen **seen;
    size_t n_seen;
    uint64_t loop_via;
    int in_loop; /* a message came back: unsubscriptions stop here */
    size_t pending; /* requests passed up whose unsubscription has not followed */
};

net_fwd *net_fwd_new(uint64_t relay_id) {
    net_fwd *f = calloc(1, sizeof *f);
    if (f == NULL)
        return NULL;
    f->id = relay_id;
    f->topics = calloc(NET_FWD_TOPICS, sizeof *f->topics);
    f->seen = calloc(NET_FWD_PRODUCERS, sizeof *f->seen);
    if (f->topics == NULL || f->seen == NULL)
        net_fwd_destroy(&f);
    return f;
}

void net_fwd_destroy(net_fwd **fp) {
    if (fp == NULL || *fp == NULL)
        return;
    net_fwd *f = *fp;
    for (size_t i = 0; i < f->n_seen; i++)
        net_seen_destroy(&f->seen[i]);
    free(f->seen);
    free(f->topics);
    cm_u64map_free(&f->seen_ix);
    free(f);
    *fp = NULL;
}

uint64_t net_fwd_loop_via(const net_fwd *f) { return f->loop_via; }

size_t net_fwd_topics(const net_fwd *f) { return f->n_topics; }

/* Whether the trail (hops relays at t) holds this relay: a loop, noted. */
static int looped(net_fwd *f, const uint8_t *t, int hops) {
    int at = net_trail_find(t, hops, f->id);
    if (at < 0)
        return 0;
    f->in_loop = 1;
    if (f->loop_via == 0 && at + 1 < hops)
        f->loop_via = net_trail_get(t, (size_t)at + 1);
    return 1;
}

/* The window of producer's batches; NULL past NET_FWD_PRODUCERS (or out of memory): not followed. */
static net_seen *seen_of(net_fwd *f, uint64_t producer) {
    uint64_t *ix = cm_u64map_find(&f->seen_ix, producer);
    if (ix != NULL)
        return f->seen[*ix - 1];
    if (f->n_seen == NET_FWD_PRODUCERS)
        return NULL;
    net_seen *w = net_seen_new();
    if (w == NULL || cm_u64map_put(&f->seen_ix, producer, f->n_seen + 1) != 0) {
        net_seen_destroy(&w);
        return NULL;
    }
    f->seen[f->n_seen++] = w;
    return w;
}

net_fwd_verdict net_fwd_down(net_fwd *f, const uint8_t *topic, size_t tlen, const uint8_t *body, size_t blen,
                             uint8_t *out, size_t *out_len) {
    uint64_t producer;
    int hops;
    char letter = net_topic_decode_hops(topic, tlen, &producer, &hops);
    if (letter == 0)
        return NET_FWD_MALFORMED;
    size_t head = net_topic_head(topic[0]);
    if (looped(f, topic + head, hops))
        return NET_FWD_LOOPED;
    if (hops == NET_HOPS_MAX)
        return NET_FWD_TOO_FAR;
    if (letter == NET_TOPIC_BATCH) {
        tp_batch_hdr h;
        if (blen < TP_BATCH_HDR_SIZE || tp_batch_check_header(body, blen, &h, NULL) != 0 || tp_batch_size(&h) != blen ||
            h.producer != producer)
            return NET_FWD_MALFORMED;
        net_seen *w = (h.flags & TP_BF_SYNTHETIC) ? NULL : seen_of(f, producer);
        if (w != NULL && net_seen_take(w, h.seq, h.hdr_crc) == NET_SEEN_COPY)
            return NET_FWD_COPY;
    }
    memcpy(out, topic, tlen);
    net_trail_put(out + tlen, f->id);
    *out_len = tlen + 8;
    return NET_FWD_PASS;
}

/* Writes on (1 or 0) and the len bytes at t, with this relay's id appended, as the next message. */
static void up_add(net_fwd *f, net_fwd_up *out, int on, const uint8_t *t, size_t len, int trail) {
    uint8_t *m = out->msg[out->n];
    m[0] = (uint8_t)on;
    memcpy(m + 1, t, len);
    if (trail)
        net_trail_put(m + 1 + len, f->id);
    out->len[out->n++] = 1 + len + (trail ? 8 : 0);
}

/* A request (loss report, clock request, keyframe request) whose fixed part is head bytes. */
static net_fwd_verdict up_request(net_fwd *f, int on, const uint8_t *t, size_t len, size_t head, net_fwd_up *out) {
    int hops = net_trail_hops(len - head);
    if (looped(f, t + head, hops))
        return NET_FWD_LOOPED;
    if (hops == NET_HOPS_MAX)
        return NET_FWD_TOO_FAR;
    if (on && f->pending == NET_FWD_PENDING)
        return NET_FWD_REFUSED;
    if (on)
        f->pending++;
    else if (f->pending > 0)
        f->pending--;
    up_add(f, out, on, t, len, 1);
    return NET_FWD_PASS;
}

/* Whether t (len bytes) is a topic subscribers may ask for; *producer is its producer id when it
 * names one, and *keyframe says whether a newcomer to it needs a keyframe. */
static int topic_ours(const uint8_t *t, size_t len, uint64_t *producer, int *keyframe) {
    *producer = 0;
    *keyframe = len == 0;
    if (len == 0)
        return 1;
    if (len == 1 && (t[0] == NET_TOPIC_CLOCK || t[0] == NET_TOPIC_NOTICE))
        return 1;
    if (t[0] != NET_TOPIC_BATCH && t[0] != NET_TOPIC_SUMMARY)
        return 0;
    if (len != 1 && len != NET_TOPIC_LEN)
        return 0;
    if (len == NET_TOPIC_LEN)
        *producer = net_loss_get_u64(t + 1);
    *keyframe = t[0] == NET_TOPIC_BATCH;
    return 1;
}

static size_t topic_find(const net_fwd *f, const uint8_t *t, size_t len) {
    size_t i = 0;
    while (i < f->n_topics && (f->topics[i].len != len || memcmp(f->topics[i].t, t, len) != 0))
        i++;
    return i;
}

int net_fwd_ours(const uint8_t *note, size_t len) {
    uint64_t x, y;
    int keyframe;
    if (len < 1 || note[0] > 1)
        return 0;
    return net_loss_decode(note + 1, len - 1, &x, &y) || net_clock_ask_decode(note + 1, len - 1, &x) ||
           net_key_decode(note + 1, len - 1, &x) || topic_ours(note + 1, len - 1, &x, &keyframe);
}

net_fwd_verdict net_fwd_up_take(net_fwd *f, const uint8_t *note, size_t len, net_fwd_up *out) {
    out->n = 0;
    if (len < 1 || note[0] > 1)
        return NET_FWD_REFUSED;
    int on = note[0];
    const uint8_t *t = note + 1;
    size_t tl = len - 1;
    uint64_t x, y;
    if (net_loss_decode(t, tl, &x, &y))
        return up_request(f, on, t, tl, NET_LOSS_LEN, out);
    if (net_clock_ask_decode(t, tl, &x))
        return up_request(f, on, t, tl, NET_CLOCK_ASK_LEN, out);
    if (net_key_decode(t, tl, &x))
        return up_request(f, on, t, tl, NET_KEY_LEN, out);
    int keyframe;
    if (!topic_ours(t, tl, &x, &keyframe))
        return NET_FWD_REFUSED;
    size_t i = topic_find(f, t, tl);
    if (!on) {
        /* The last subscriber below left: forgotten here, and above. Not in a loop, where the
         * relays hold each other's subscriptions: an unsubscription would come back as a
         * subscription's wake, round and round; what is subscribed then stays so. */
        if (f->in_loop)
            return NET_FWD_PASS;
        if (i < f->n_topics)
            f->topics[i] = f->topics[--f->n_topics];
        up_add(f, out, 0, t, tl, 0);
        return NET_FWD_PASS;
    }
    if (i == f->n_topics) {
        if (f->n_topics == NET_FWD_TOPICS)
            return NET_FWD_REFUSED;
        memcpy(f->topics[i].t, t, tl);
        f->topics[i].len = (uint8_t)tl;
        f->n_topics++;
        up_add(f, out, 1, t, tl, 0);
        return NET_FWD_PASS;
    }
    if (keyframe) { /* passed on already: a newcomer, whose keyframe is asked for */
        uint8_t key[NET_KEY_LEN];
        net_key_encode(key, x);
        up_add(f, out, 1, key, sizeof key, 1);
        up_add(f, out, 0, key, sizeof key, 1);
    }
    return NET_FWD_PASS;
}
