/*
 * The subscriber (net.h): one SUB socket connected to any number of publishers, which ZeroMQ
 * reconnects by itself when a publisher restarts. Every message is checked as a batch header
 * before the caller sees it, and each producer's sequence numbers are followed so that the batches
 * it lost on the way (a publisher dropping for a slow subscriber) are counted, per producer, and
 * reported back to the publishers (net_loss.h).
 *
 * It also asks the relays above it for their clocks (net_clock.h) and keeps, per relay, the
 * exchange that bounds the offset best; the answers are taken here and never reach the caller.
 *
 * Every message is two frames, a topic and a body (net_topic.h); it subscribes to the batches of
 * every producer ("B"), or in summary mode to the relays' summaries ("S") and to the batches of the
 * producers it watches ("B" + id), and always to the clock answers ("C").
 */
#include "synctop/net.h"
#include "hash.h"
#include "net_clock.h"
#include "net_curve.h"
#include "net_loss.h"
#include "net_monitor.h"
#include "net_notice.h"
#include "net_seen.h"
#include "net_topic.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define MAX_PRODUCERS 4096
#define SLOTS (2 * MAX_PRODUCERS) /* open addressing, at most half full */

#define CLOCK_PENDING 16   /* requests whose answers are still taken */
#define CLOCK_RELAYS 256   /* relays followed */
#define CLOCK_FAST 10      /* requests 100 ms apart after a connection, then one a second */
#define CLOCK_DRIFT_PPM 15 /* how fast a kept exchange's uncertainty grows with its age */
#define CLOCK_MAX_RTT_NS 10000000000ull
#define NOTICES_MAX 16 /* relay and kind pairs whose notices are kept */

_Static_assert(sizeof(((tp_sub_clock *)0)->host) == NET_CLOCK_HOST_MAX + 1, "a host name as answers carry it");

struct clock_ask {
    uint64_t nonce, t0; /* nonce 0: unused */
};

struct clock_est {
    tp_sub_clock c;   /* uncertainty_ns as measured, before aging */
    uint64_t at_mono; /* when it was measured */
};

struct producer {
    tp_sub_producer s;
    int seq_known; /* a batch of its own (not synthetic) was seen: last_seq means something */
    net_seen *seen; /* its batches that came, to drop copies; NULL: out of memory, none dropped */
};

struct summary {
    tp_sub_summary s;
    uint64_t at_mono; /* when the last one taken came */
};

struct tp_sub {
    pid_t owner; /* the process that made it: a forked child must not touch its context */
    void *ctx;
    void *sock;
    zmq_msg_t topic; /* the last message's topic frame */
    zmq_msg_t msg;   /* the last batch returned, owned until the next receive */
    struct summary *sums; /* per producer, in order of first summary */
    size_t n_sums;
    uint32_t sum_slot[SLOTS]; /* index + 1, 0 when empty */
    void *mon;     /* the socket's handshake events (NULL: not watched) */
    char handshake_ep[TP_ENDPOINT_MAX]; /* where the last handshake failed */
    int client_refused;  /* and it failed because our client key is not on the publisher's list */
    char client_pub[TP_KEY_Z85_LEN + 1]; /* our client public key, "" without CURVE */
    int client_own;      /* it is the pair given, not a throwaway one */
    tp_sub_stats stats;
    struct producer *producers; /* in order of first sight */
    size_t cap;
    uint32_t slot[SLOTS]; /* producer index + 1, 0 when empty */
    cm_hash_key key;      /* chooses both tables' slots: peers choose the producer ids */
    uint64_t clock_nonce;    /* the last request's nonce (random start) */
    int clock_fast;          /* fast requests still to send */
    uint64_t clock_next;     /* CLOCK_MONOTONIC ns of the next request */
    struct clock_ask asks[CLOCK_PENDING];
    struct clock_est *clocks;
    size_t n_clocks;
    tp_sub_notice notices[NOTICES_MAX];
    size_t n_notices;
};

static uint64_t clock_of(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Asks the relays above for their clocks when it is time (net_clock.h). */
static void clock_ask_maybe(tp_sub *s) {
    uint64_t now = clock_of(CLOCK_MONOTONIC);
    if (now < s->clock_next)
        return;
    s->clock_next = now + (s->clock_fast > 0 ? 100000000ull : 1000000000ull);
    if (s->clock_fast > 0)
        s->clock_fast--;
    if (++s->clock_nonce == 0)
        s->clock_nonce = 1;
    uint8_t topic[NET_CLOCK_ASK_LEN];
    net_clock_ask_encode(topic, s->clock_nonce);
    struct clock_ask *a = &s->asks[s->clock_nonce % CLOCK_PENDING];
    a->nonce = s->clock_nonce;
    a->t0 = clock_of(CLOCK_REALTIME);
    if (zmq_setsockopt(s->sock, ZMQ_SUBSCRIBE, topic, sizeof topic) == 0)
        zmq_setsockopt(s->sock, ZMQ_UNSUBSCRIBE, topic, sizeof topic);
}

/* A kept exchange's uncertainty, aged to now. */
static uint64_t clock_aged(const struct clock_est *e, uint64_t now) {
    uint64_t age = now > e->at_mono ? now - e->at_mono : 0;
    return e->c.uncertainty_ns + age / (1000000 / CLOCK_DRIFT_PPM);
}

/* Takes a relay's answer received at t3 (our CLOCK_REALTIME). Answers to others' requests, and
 * answers whose times cannot be (a relay that held the request longer than the round trip took),
 * are ignored. */
static void clock_take(tp_sub *s, const uint8_t *msg, size_t len, uint64_t t3) {
    net_clock_answer a;
    if (!net_clock_answer_decode(msg, len, &a) || a.nonce == 0)
        return;
    const struct clock_ask *q = &s->asks[a.nonce % CLOCK_PENDING];
    if (q->nonce != a.nonce || t3 < q->t0)
        return;
    uint64_t rtt = t3 - q->t0, hold = a.t2 - a.t1;
    if (rtt > CLOCK_MAX_RTT_NS || hold > rtt)
        return;
    /* the relay's clock minus ours lies in [t2 - t3, t1 - t0] */
    int64_t lo = (int64_t)(a.t2 - t3), hi = (int64_t)(a.t1 - q->t0);
    const int64_t lim = INT64_C(1) << 62;
    if (lo < -lim || lo > lim || hi < -lim || hi > lim)
        return;
    uint64_t width = rtt - hold, now = clock_of(CLOCK_MONOTONIC);
    struct clock_est *e = NULL;
    for (size_t i = 0; i < s->n_clocks && e == NULL; i++)
        if (s->clocks[i].c.relay == a.relay)
            e = &s->clocks[i];
    if (e == NULL) {
        if (s->n_clocks == CLOCK_RELAYS)
            return;
        if (s->clocks == NULL && (s->clocks = calloc(CLOCK_RELAYS, sizeof *s->clocks)) == NULL)
            return;
        e = &s->clocks[s->n_clocks++];
        memset(e, 0, sizeof *e);
        e->c.relay = a.relay;
        e->c.uncertainty_ns = UINT64_MAX / 2;
    }
    snprintf(e->c.host, sizeof e->c.host, "%s", a.host);
    e->c.exchanges++;
    uint64_t unc = (width + 1) / 2, kept = clock_aged(e, now);
    int64_t mid = lo + (int64_t)(width / 2);
    /* Both bounds hold unless a clock stepped since the kept one (or a relay of the same id came
     * back on another clock): bounds that cannot both hold leave only the new one true. */
    uint64_t apart = mid > e->c.offset_ns ? (uint64_t)mid - (uint64_t)e->c.offset_ns
                                          : (uint64_t)e->c.offset_ns - (uint64_t)mid;
    if (e->c.exchanges == 1 || unc <= kept || apart > unc + kept) {
        e->c.offset_ns = mid;
        e->c.uncertainty_ns = unc;
        e->at_mono = now;
    }
}

size_t tp_sub_clock_count(const tp_sub *sub) { return sub->n_clocks; }

int tp_sub_clock_best(const tp_sub *sub, size_t i, tp_sub_clock *c) {
    tp_sub_clock o;
    if (tp_sub_clock_get(sub, i, c) != 0)
        return 0;
    for (size_t j = 0; j < sub->n_clocks; j++)
        if (j != i && tp_sub_clock_get(sub, j, &o) == 0 && strcmp(o.host, c->host) == 0 &&
            (o.uncertainty_ns < c->uncertainty_ns || (o.uncertainty_ns == c->uncertainty_ns && j < i)))
            return 0;
    return 1;
}

size_t tp_sub_clock_notes(const tp_sub *sub, tp_buf *out) {
    size_t hosts = 0;
    out->len = 0;
    tp_enc_opts eo = {.producer = TP_PRODUCER_NOTES};
    tp_enc *enc = sub->n_clocks > 0 ? tp_enc_new(&eo) : NULL;
    if (enc == NULL)
        return 0;
    uint64_t now = clock_of(CLOCK_REALTIME);
    tp_sub_clock c;
    for (size_t i = 0; i < sub->n_clocks; i++) {
        if (!tp_sub_clock_best(sub, i, &c))
            continue;
        tp_hostclock h = {.kind = TP_K_HOSTCLOCK, .device = TP_NO_DEVICE, .host = tp_enc_intern_cstr(enc, c.host),
                          .offset_ns = c.offset_ns, .uncertainty_ns = c.uncertainty_ns, .measured_ns = now};
        if (h.host != 0 && tp_enc_add(enc, &h) == 0)
            hosts++;
    }
    if (hosts > 0 && tp_enc_finish_flags(enc, TP_BF_SYNTHETIC, out) != 0)
        hosts = 0;
    if (hosts == 0)
        out->len = 0;
    tp_enc_destroy(&enc);
    return hosts;
}

int tp_sub_clock_get(const tp_sub *sub, size_t i, tp_sub_clock *out) {
    if (i >= sub->n_clocks)
        return ERR_INVAL;
    *out = sub->clocks[i].c;
    out->uncertainty_ns = clock_aged(&sub->clocks[i], clock_of(CLOCK_MONOTONIC));
    return 0;
}

static int zmq_fail(err_msg *err, const char *what) {
    int e = zmq_errno();
    return err_set(err, ERR_ZMQ, "%s: %s", what, zmq_strerror(e));
}

static int set_int(void *sock, int option, int value) {
    return zmq_setsockopt(sock, option, &value, sizeof value);
}

static int configure(tp_sub *s, const tp_sub_opts *o, err_msg *err) {
    void *k = s->sock;
    int hwm = o->rcvhwm > 0 ? o->rcvhwm : 10000;
    int64_t max_msg = (int64_t)TP_BATCH_HDR_SIZE + TP_BATCH_MAX_PAYLOAD;
    if (set_int(k, ZMQ_LINGER, 0) != 0 || set_int(k, ZMQ_RCVHWM, hwm) != 0 ||
        set_int(k, ZMQ_RECONNECT_IVL, 100) != 0 || set_int(k, ZMQ_RECONNECT_IVL_MAX, 1000) != 0 ||
        zmq_setsockopt(k, ZMQ_MAXMSGSIZE, &max_msg, sizeof max_msg) != 0)
        return zmq_fail(err, "cannot configure the subscriber");
    if (o->server_key != NULL) {
        int rc = net_curve_client(k, o->server_key, o->client_key, s->client_pub, err);
        if (rc < 0)
            return rc;
        s->client_own = o->client_key != NULL;
    } else if (o->client_key != NULL) {
        return err_set(err, ERR_INVAL, "a client key needs the server's public key too");
    }
    const char *want = o->summaries ? "S" : "B";
    if ((!o->clocks_only && (zmq_setsockopt(k, ZMQ_SUBSCRIBE, want, 1) != 0 ||
                             zmq_setsockopt(k, ZMQ_SUBSCRIBE, "N", 1) != 0)) ||
        zmq_setsockopt(k, ZMQ_SUBSCRIBE, "C", 1) != 0)
        return zmq_fail(err, "cannot subscribe");
    return 0;
}

/* Watches the socket's handshakes: a publisher whose CURVE key is not the one given (or that
 * does not encrypt) refuses ours, one that checks its clients may refuse our client key, and
 * without this the subscriber would only hear nothing. Not fatal when it cannot be set up. */
static void watch_handshakes(tp_sub *s) {
    s->mon = net_monitor_open(s->ctx, s->sock,
                              ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                  ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_SUCCEEDED);
}

/* Counts the handshake events that came (never waits). */
static void read_handshakes(tp_sub *s) {
    uint16_t event;
    uint32_t value;
    char ep[TP_ENDPOINT_MAX];
    while (net_monitor_next(s->mon, &event, &value, ep, sizeof ep)) {
        if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
            s->stats.handshakes++;
            s->clock_fast = CLOCK_FAST; /* a new or restarted relay above: ask again soon */
            s->clock_next = 0;
        } else if (event != 0) {
            s->stats.handshake_failures++;
            snprintf(s->handshake_ep, sizeof s->handshake_ep, "%s", ep);
            /* A publisher's ZAP handler said no (RFC 27's 300, 400 or 500): our key is known and
             * was checked, so it is the client key, not the server's, that is refused. */
            s->client_refused = event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH && value >= 300 && value < 600;
            s->stats.client_refusals += (uint64_t)s->client_refused;
        }
    }
}

const char *tp_sub_handshake_failed(const tp_sub *sub) {
    return sub->stats.handshake_failures ? sub->handshake_ep : NULL;
}

int tp_sub_client_refused(const tp_sub *sub) { return sub->stats.handshake_failures && sub->client_refused; }

const char *tp_sub_client_key(const tp_sub *sub, int *own) {
    if (own != NULL)
        *own = sub->client_own;
    return sub->client_pub[0] != '\0' ? sub->client_pub : NULL;
}

tp_sub *tp_sub_new(const tp_sub_opts *opts, err_msg *err) {
    tp_sub_opts o = {0};
    if (opts != NULL)
        o = *opts;
    tp_sub *s = calloc(1, sizeof *s);
    if (s == NULL) {
        err_set(err, ERR_NOMEM, "out of memory");
        return NULL;
    }
    s->owner = getpid();
    cm_hash_key_get(&s->key);
    zmq_msg_init(&s->msg);
    zmq_msg_init(&s->topic);
    if (getrandom(&s->clock_nonce, sizeof s->clock_nonce, 0) != (ssize_t)sizeof s->clock_nonce)
        s->clock_nonce = clock_of(CLOCK_MONOTONIC) ^ ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)s;
    s->ctx = zmq_ctx_new();
    if (s->ctx == NULL) {
        zmq_fail(err, "cannot create a ZeroMQ context");
        goto fail;
    }
    zmq_ctx_set(s->ctx, ZMQ_BLOCKY, 0);
    s->sock = zmq_socket(s->ctx, ZMQ_SUB);
    if (s->sock == NULL) {
        zmq_fail(err, "cannot create a subscriber socket");
        goto fail;
    }
    if (configure(s, &o, err) < 0)
        goto fail;
    watch_handshakes(s);
    return s;
fail:
    tp_sub_destroy(&s);
    return NULL;
}

void tp_sub_destroy(tp_sub **sp) {
    if (sp == NULL || *sp == NULL)
        return;
    tp_sub *s = *sp;
    /* After fork the context's threads exist only in the parent: terminating it here would
     * wait for them forever, so a child only frees memory. */
    if (s->owner == getpid()) {
        zmq_msg_close(&s->msg);
        zmq_msg_close(&s->topic);
        net_monitor_close(s->mon, s->sock);
        if (s->sock != NULL)
            zmq_close(s->sock);
        while (s->ctx != NULL && zmq_ctx_term(s->ctx) != 0 && zmq_errno() == EINTR)
            ;
    }
    for (size_t i = 0; i < s->stats.n_producers; i++)
        net_seen_destroy(&s->producers[i].seen);
    free(s->producers);
    free(s->sums);
    free(s->clocks);
    free(s);
    *sp = NULL;
}

int tp_sub_connect(tp_sub *sub, const char *endpoint, err_msg *err) {
    char ep[TP_ENDPOINT_MAX];
    int rc = tp_endpoint_resolve(endpoint, ep, sizeof ep, err);
    if (rc < 0)
        return rc;
    if (strncmp(ep, "tcp://[", 7) == 0 && set_int(sub->sock, ZMQ_IPV6, 1) != 0)
        return zmq_fail(err, "cannot enable IPv6");
    if (zmq_connect(sub->sock, ep) != 0) {
        int e = zmq_errno();
        return err_set(err, ERR_ZMQ, "cannot connect to %s: %s", ep, zmq_strerror(e));
    }
    sub->clock_fast = CLOCK_FAST;
    sub->clock_next = 0;
    return 0;
}

int tp_sub_watch(tp_sub *sub, uint64_t producer, int watch, err_msg *err) {
    uint8_t topic[NET_TOPIC_LEN];
    net_topic_encode(topic, NET_TOPIC_BATCH, producer);
    if (zmq_setsockopt(sub->sock, watch ? ZMQ_SUBSCRIBE : ZMQ_UNSUBSCRIBE, topic, sizeof topic) != 0)
        return zmq_fail(err, watch ? "cannot watch a producer" : "cannot stop watching a producer");
    /* batches of it were not taken in between: no gap to count across that time */
    for (size_t i = 0; i < sub->stats.n_producers; i++)
        if (sub->producers[i].s.producer == producer) {
            sub->producers[i].seq_known = 0;
            if (sub->producers[i].seen != NULL)
                net_seen_reset(sub->producers[i].seen);
        }
    return 0;
}

int tp_sub_wait(tp_sub *sub, int fd, int timeout_ms, err_msg *err) {
    if (sub != NULL) {
        read_handshakes(sub);
        clock_ask_maybe(sub);
    }
    zmq_pollitem_t items[2];
    int n = 0, fd_at = -1, sub_at = -1;
    if (fd >= 0) {
        items[n] = (zmq_pollitem_t){.socket = NULL, .fd = fd, .events = ZMQ_POLLIN};
        fd_at = n++;
    }
    if (sub != NULL) {
        items[n] = (zmq_pollitem_t){.socket = sub->sock, .events = ZMQ_POLLIN};
        sub_at = n++;
    }
    if (zmq_poll(n ? items : NULL, n, timeout_ms) < 0) {
        if (zmq_errno() == EINTR)
            return 0;
        return zmq_fail(err, "cannot wait for batches and input");
    }
    int ready = 0;
    if (sub_at >= 0 && (items[sub_at].revents & ZMQ_POLLIN))
        ready |= TP_WAIT_BATCH;
    if (fd_at >= 0 && (items[fd_at].revents & ZMQ_POLLIN))
        ready |= TP_WAIT_FD;
    return ready;
}

static size_t slot_of(const tp_sub *s, uint64_t producer) { return (size_t)cm_hash_u64(&s->key, producer) & (SLOTS - 1); }

/* The producer's record, created on first sight; NULL when MAX_PRODUCERS are already tracked. */
static struct producer *producer_find(tp_sub *s, uint64_t id, int *is_new) {
    size_t from = slot_of(s, id), i = from;
    *is_new = 0;
    while (s->slot[i] != 0 && s->producers[s->slot[i] - 1].s.producer != id)
        i = (i + 1) & (SLOTS - 1);
    if (((i - from) & (SLOTS - 1)) > CM_HASH_LONG_PROBE)
        cm_hash_long_probe_note();
    if (s->slot[i] != 0)
        return &s->producers[s->slot[i] - 1];
    size_t n = s->stats.n_producers;
    if (n == MAX_PRODUCERS)
        return NULL;
    if (n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        struct producer *v = realloc(s->producers, cap * sizeof *v);
        if (v == NULL)
            return NULL;
        s->producers = v;
        s->cap = cap;
    }
    s->producers[n] = (struct producer){.s = {.producer = id}, .seen = net_seen_new()};
    s->slot[i] = (uint32_t)n + 1;
    s->stats.n_producers = n + 1;
    *is_new = 1;
    return &s->producers[n];
}

/* What a batch of p is, by the window of what came (see net_seen.h); without one (no memory for
 * it), a sequence number that goes back is a producer that started over. */
static net_seen_kind seen_take(struct producer *p, const tp_batch_hdr *h) {
    if (p->seen != NULL)
        return net_seen_take(p->seen, h->seq, h->hdr_crc);
    return !p->seq_known || h->seq > p->s.last_seq ? NET_SEEN_NEW : NET_SEEN_RESTART;
}

/* A batch of p that is new or starts p over: the gap before it (counted, and reported to the
 * publishers), or the new life. */
static void follow_sequence(tp_sub *sub, struct producer *p, const tp_batch_hdr *h, tp_sub_msg *m, net_seen_kind kind) {
    if (!p->seq_known) {
        p->seq_known = 1;
    } else if (kind == NET_SEEN_NEW && h->seq > p->s.last_seq) {
        m->missed = h->seq - p->s.last_seq - 1;
    } else {
        /* Sequence went back: the same producer id started over (a restarted process with a
         * fixed id). Its strings and metadata start over too, and it has not ended. */
        m->new_producer = 1;
        if (p->s.ended) {
            p->s.ended = 0;
            sub->stats.n_ended--;
        }
    }
    p->s.last_seq = h->seq;
    if (m->missed > 0) {
        uint8_t topic[NET_LOSS_LEN];
        net_loss_encode(topic, h->producer, m->missed);
        if (zmq_setsockopt(sub->sock, ZMQ_SUBSCRIBE, topic, sizeof topic) == 0)
            zmq_setsockopt(sub->sock, ZMQ_UNSUBSCRIBE, topic, sizeof topic);
    }
    p->s.missed += m->missed;
    sub->stats.missed += m->missed;
}

static int malformed(tp_sub *s, err_msg *err, const char *why) {
    s->stats.malformed++;
    return err_set(err, ERR_MALFORMED, "received a message that is not a synctop batch: %s",
                      why);
}

/* A relay's summary: checked, then added to its producer's record; 0 (not a batch). */
static int summary_take(tp_sub *s, uint64_t producer, const uint8_t *data, size_t len, err_msg *err) {
    tp_summary x;
    err_msg why = {{0}};
    char text[sizeof why.msg + 64];
    if (tp_summary_decode(data, len, &x, &why) < 0) {
        snprintf(text, sizeof text, "a summary: %s", why.msg);
        return malformed(s, err, text);
    }
    if (x.producer != producer)
        return malformed(s, err, "a summary under another producer's topic");
    s->stats.summaries++;
    size_t i = slot_of(s, producer);
    while (s->sum_slot[i] != 0 && s->sums[s->sum_slot[i] - 1].s.last.producer != producer)
        i = (i + 1) & (SLOTS - 1);
    struct summary *e;
    if (s->sum_slot[i] != 0) {
        e = &s->sums[s->sum_slot[i] - 1];
    } else {
        if (s->n_sums == MAX_PRODUCERS)
            return 0;
        if (s->sums == NULL && (s->sums = calloc(MAX_PRODUCERS, sizeof *s->sums)) == NULL)
            return 0;
        e = &s->sums[s->n_sums++];
        s->sum_slot[i] = (uint32_t)s->n_sums;
    }
    tp_sub_summary *t = &e->s;
    /* Two relays may summarise the same producer (a relay fed by relays that summarise too): the
     * summaries of one relay are taken, another's only once that one has been silent for three of
     * its intervals (it stopped, or restarted with a new id). */
    uint64_t now = clock_of(CLOCK_MONOTONIC);
    if (t->summaries > 0 && x.relay != t->last.relay && now - e->at_mono < 3 * t->last.interval_ns) {
        s->stats.summaries--;
        return 0;
    }
    e->at_mono = now;
    t->last = x;
    t->summaries++;
    t->interval_ns += x.interval_ns;
    t->span_ns += x.t_max - x.t_min;
    t->busy_ns += x.busy_ns;
    t->blocked_ns += x.blocked_ns;
    t->events += x.events;
    t->batches += x.batches;
    t->missed += x.missed;
    return 0;
}

/* A relay's notice: checked, then kept (one per relay and kind); 0 (not a batch). */
static int notice_take(tp_sub *s, const uint8_t *data, size_t len, err_msg *err) {
    tp_sub_notice n;
    if (!net_notice_decode(data, len, &n))
        return malformed(s, err, "a notice that does not decode");
    size_t i = 0;
    while (i < s->n_notices && (s->notices[i].relay != n.relay || s->notices[i].kind != n.kind))
        i++;
    if (i == s->n_notices) {
        if (s->n_notices == NOTICES_MAX)
            return 0;
        s->n_notices++;
    }
    s->notices[i] = n;
    return 0;
}

size_t tp_sub_notice_count(const tp_sub *sub) { return sub->n_notices; }

int tp_sub_notice_get(const tp_sub *sub, size_t i, tp_sub_notice *out) {
    if (i >= sub->n_notices)
        return ERR_INVAL;
    *out = sub->notices[i];
    return 0;
}

size_t tp_sub_summary_count(const tp_sub *sub) { return sub->n_sums; }

int tp_sub_summary_get(const tp_sub *sub, size_t i, tp_sub_summary *out) {
    if (i >= sub->n_sums)
        return ERR_INVAL;
    *out = sub->sums[i].s;
    return 0;
}

int tp_sub_recv(tp_sub *sub, tp_sub_msg *m, int timeout_ms, err_msg *err) {
    read_handshakes(sub);
    clock_ask_maybe(sub);
    /* Try first: when batches are flowing, one call instead of a poll and a receive. */
    while (zmq_msg_recv(&sub->msg, sub->sock, ZMQ_DONTWAIT) < 0) {
        int e = zmq_errno();
        if (e != EAGAIN && e != EINTR)
            return zmq_fail(err, "cannot receive");
        if (timeout_ms == 0)
            return 0;
        zmq_pollitem_t item = {.socket = sub->sock, .events = ZMQ_POLLIN};
        int n = zmq_poll(&item, 1, timeout_ms < 0 ? -1 : timeout_ms);
        if (n < 0 && zmq_errno() != EINTR)
            return zmq_fail(err, "cannot wait for batches");
        if (n <= 0)
            return 0; /* timeout, or a signal for the caller to look at */
        timeout_ms = 0; /* readable now: one more try, no second wait */
    }
    /* [topic][body]: the topic frame came; the body follows at once (a message arrives whole) */
    if (!zmq_msg_more(&sub->msg))
        return malformed(sub, err, "a message without its topic frame");
    zmq_msg_move(&sub->topic, &sub->msg);
    if (zmq_msg_recv(&sub->msg, sub->sock, ZMQ_DONTWAIT) < 0)
        return malformed(sub, err, "a topic frame without a body");
    if (zmq_msg_more(&sub->msg)) {
        while (zmq_msg_more(&sub->msg) && zmq_msg_recv(&sub->msg, sub->sock, ZMQ_DONTWAIT) >= 0)
            ;
        return malformed(sub, err, "a message of more than two frames");
    }
    uint64_t topic_id;
    char letter = net_topic_decode(zmq_msg_data(&sub->topic), zmq_msg_size(&sub->topic), &topic_id);
    const uint8_t *data = zmq_msg_data(&sub->msg);
    size_t len = zmq_msg_size(&sub->msg);
    if (letter == NET_TOPIC_CLOCK) {
        if (!net_clock_answer_decode(data, len, &(net_clock_answer){0}))
            return malformed(sub, err, "a clock answer that does not decode");
        clock_take(sub, data, len, clock_of(CLOCK_REALTIME));
        return 0; /* not a batch: the caller asks again */
    }
    if (letter == NET_TOPIC_SUMMARY)
        return summary_take(sub, topic_id, data, len, err);
    if (letter == NET_TOPIC_NOTICE)
        return notice_take(sub, data, len, err);
    if (letter != NET_TOPIC_BATCH)
        return malformed(sub, err, "an unknown topic");
    tp_batch_hdr h;
    err_msg why;
    char text[sizeof why.msg + 64];
    if (len < TP_BATCH_HDR_SIZE) {
        snprintf(text, sizeof text, "%zu bytes, shorter than a batch header", len);
        return malformed(sub, err, text);
    }
    why.msg[0] = '\0';
    if (tp_batch_check_header(data, len, &h, &why) < 0)
        return malformed(sub, err, why.msg);
    if (tp_batch_size(&h) != len) {
        snprintf(text, sizeof text, "a %zu-byte message holds a %zu-byte batch", len,
                 tp_batch_size(&h));
        return malformed(sub, err, text);
    }
    if (h.producer != topic_id) {
        snprintf(text, sizeof text, "a batch of producer %016llx under the topic of %016llx",
                 (unsigned long long)h.producer, (unsigned long long)topic_id);
        return malformed(sub, err, text);
    }
    int is_new;
    struct producer *p = producer_find(sub, h.producer, &is_new);
    /* A recorder's synthetic batches have sequence numbers that are not the producer's. */
    net_seen_kind kind = p != NULL && !(h.flags & TP_BF_SYNTHETIC) ? seen_take(p, &h) : NET_SEEN_NEW;
    if (kind == NET_SEEN_COPY) {
        sub->stats.duplicates++; /* it came through another relay too */
        return 0;
    }
    memset(m, 0, sizeof *m);
    m->data = data;
    m->len = len;
    m->hdr = h;
    sub->stats.received++;
    sub->stats.bytes += len;
    if (p == NULL)
        return 1; /* beyond the bound: delivered, not followed */
    m->new_producer = is_new;
    p->s.received++;
    p->s.bytes += len;
    if (h.flags & TP_BF_SYNTHETIC)
        return 1; /* made by a recorder: its sequence is not the producer's */
    if (kind == NET_SEEN_LATE) {
        /* One counted missing came after all, through another way: not missed. The report sent
         * up for it stands (the publisher cannot take it back). */
        if (p->s.missed > 0) {
            p->s.missed--;
            sub->stats.missed--;
        }
    } else {
        follow_sequence(sub, p, &h, m, kind);
    }
    /* The header's checksum held: its END flag counts even if the payload is damaged. */
    if ((h.flags & TP_BF_END) && !p->s.ended) {
        p->s.ended = 1;
        sub->stats.n_ended++;
    }
    return 1;
}

int tp_sub_all_ended(const tp_sub *sub) {
    return sub->stats.n_producers > 0 && sub->stats.n_ended == sub->stats.n_producers;
}

void tp_sub_stats_get(const tp_sub *sub, tp_sub_stats *out) { *out = sub->stats; }

int tp_sub_producer_get(const tp_sub *sub, size_t i, tp_sub_producer *out) {
    if (i >= sub->stats.n_producers)
        return ERR_INVAL;
    *out = sub->producers[i].s;
    return 0;
}
