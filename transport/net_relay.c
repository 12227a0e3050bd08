/*
 * The relay (net.h): a proxy between an XSUB socket connected to the publishers of a node and an
 * XPUB socket that viewers (or another relay) subscribe to. Batches flow down as they came, and
 * subscriptions and loss reports flow up, so each traced process still hears when a viewer arrives
 * (XPUB_VERBOSE passes every subscribe up: the process answers with a keyframe) and which batches a
 * viewer lost on the way (it counts them and answers with a keyframe too), however many relays lie
 * between them. What goes through is decided by net_forward.h: each relay appends its id to every
 * message's trail, so that one that comes back round a loop of relays is dropped, a batch that came
 * twice (two relays between it and its publisher) goes on once, and a second subscriber of what
 * is passed on already becomes a keyframe request rather than a subscription that could go round a
 * loop for ever.
 *
 * The proxy runs in the caller's thread for as long as tp_relay_run asks, and the caller may
 * connect more publishers before running it again (sockets belong to one thread at a time; the
 * proxy is not running then). It hands a copy of every batch and subscription that went through
 * to a reader thread over a capture socket; the reader counts them and, when asked, writes the
 * batches to a trace file. A recording that fails stops alone, and the reader tells the
 * subscribers below with a notice (net_notice.h), as the proxy does when it finds itself in a loop.
 *
 * The reader thread also answers the clock requests that subscribers below send up (net_clock.h):
 * it stamps each with this host's CLOCK_REALTIME and publishes the answer on an inproc PUB socket
 * that the proxy's XSUB side is connected to, so the answer goes down through the proxy like a
 * batch, to every subscriber below (the asker knows its own by the nonce). Answers are bounded to
 * CLOCK_ANSWERS_PER_S, so a peer asking in a loop cannot make the relay flood its viewers.
 *
 * Every message is [topic][body] (net_topic.h), which the proxy forwards whole; the capture socket
 * hands the reader the frames one by one. The reader also follows the subscriptions to summaries
 * ("S"...) that come up from below: while there is one, it subscribes to the batches of every
 * publisher it is connected to, on a socket of its own per upstream, sums them up per producer
 * (net_summary.h) and, once an interval, publishes a summary per producer under 'S' + producer id
 * on the same inproc PUB as the clock answers. When the last one goes it unsubscribes, so that
 * on-demand tracers go dormant again when nobody watches.
 *
 * An upstream that is itself a relay summarises its own producers (the "S" subscription went up
 * to it through the proxy), so its batches are not taken for summaries here: a tree of relays
 * moves summaries, not batches, however deep. The reader tells a relay from a publisher by asking
 * it the time (net_clock.h) on that upstream's socket when it connects, the request subscribed
 * until an answer comes (a connection made later, or again, carries it): relays answer, publishers
 * never do. An upstream that has not answered within UP_ASK_MS counts as a publisher; one that
 * answers later (a relay that came up late) counts as a relay from then on.
 */
#include "synctop/net.h"
#include "synctop/file.h"
#include "net_bind.h"
#include "net_clock.h"
#include "net_curve.h"
#include "net_forward.h"
#include "net_monitor.h"
#include "net_notice.h"
#include "net_peers.h"
#include "net_summary.h"
#include "net_topic.h"
#include "net_zap.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

/* What an upstream is, as far as summaries go. */
enum { UP_ASKING, UP_PUBLISHER, UP_RELAY };
#define UP_ASK_MS 1500 /* how long a relay may take to answer the first clock request */

/* An upstream, seen from the reader thread: a SUB socket of its own connected to it, subscribed
 * to clock answers and holding a clock request (until it answers), and to its batches while
 * summaries are wanted and it is a publisher. */
typedef struct upstream {
    void *sub;      /* NULL: it could not be made (out of memory): no summaries of it */
    uint64_t nonce; /* of its clock request */
    uint64_t since; /* CLOCK_MONOTONIC ns when connected */
    int kind;       /* UP_* */
    int taking;     /* subscribed to "B" */
} upstream;

struct tp_relay {
    void *ctx;
    void *front, *back;           /* XSUB to the publishers, XPUB to the subscribers */
    void *cap_proxy, *cap_reader; /* PUSH / PULL: copies of what went through */
    void *clk_pub;                /* PUB (reader thread's): clock answers and summaries, read by front */
    void *front_mon;              /* the front's handshake events (NULL: not watched) */
    void *back_mon;               /* the back's connections (NULL: not watched) */
    net_peers *peers;             /* what each subscriber's subscriptions hold (the proxy's) */
    uint64_t handshake_failures;  /* upstreams that refused the front's handshake */
    int client_refused;           /* the last one refused our client key (its ZAP handler said no) */
    char handshake_ep[TP_ENDPOINT_MAX]; /* where the last one was refused */
    char endpoint[TP_ENDPOINT_MAX];
    int bound_ipc; /* the socket file at endpoint is ours: removed on destroy */
    size_t upstreams;
    pthread_t reader;
    int reader_started;
    pthread_mutex_t mu;
    atomic_int reader_stop;
    /* the proxy's (the caller's thread, in tp_relay_run) */
    net_fwd *fwd;
    zmq_msg_t down_topic, down_body, up_note;
    uint64_t from_below, duplicates, looped, too_far, refused;
    uint64_t loop_notice_ns; /* when it last said it is in a loop (0: never) */
    atomic_uint_fast64_t batches, bytes, subscribes, clock_answers;
    char host[NET_CLOCK_HOST_MAX + 1]; /* named in clock answers */
    uint64_t id;                       /* this relay's id in clock answers */
    int64_t clock_skew_ns;             /* added to the clock it answers with (tests) */
    double answer_tokens;              /* reader thread: answers it may send now */
    uint64_t answer_refill_ns;         /* when the tokens were last topped up */
    char (*up)[TP_ENDPOINT_MAX]; /* the upstream endpoints (under mu), for the reader's sockets */
    size_t up_cap;
    upstream *ups;               /* reader thread's: one per upstream it connected to */
    size_t n_ups, ups_cap;
    zmq_pollitem_t *items;       /* reader thread's: the capture socket and the upstreams' */
    size_t *item_up;             /* reader thread's: items[i + 1] polls ups[item_up[i]] */
    size_t n_asking;             /* reader thread's: upstreams still UP_ASKING */
    int rcvhwm;                  /* the upstream sockets' options */
    char up_key[TP_KEY_Z85_LEN + 1]; /* "": none */
    tp_keypair up_client;        /* its own pair as the upstreams' client; public_key "": none */
    net_zap *zap;                /* the check of client keys below, when it admits listed ones only */
    uint64_t summary_ns;         /* the summaries' interval; 0: none */
    net_summer *summer;          /* reader thread's */
    uint8_t s_topics[64][NET_TOPIC_LEN]; /* reader thread's: the "S" topics subscribed below */
    uint8_t s_len[64];
    size_t n_s_topics;
    uint64_t s_untracked; /* subscribed "S" topics beyond those 64, less their unsubscriptions */
    uint64_t interval_start, interval_mono; /* the current interval: realtime and monotonic ns */
    atomic_uint_fast64_t summaries, malformed;
    atomic_int summarising;
    tp_recorder *rec;     /* written by the reader thread only, then by tp_relay_stop */
    char *record_path;    /* where rec writes (named in its notice) */
    uint64_t notice_ns;   /* reader thread's: when it last said the recording stopped (0: never) */
    tp_sub *clk;          /* clock thread's, when recording: the clocks of the hosts above */
    pthread_t clk_thread;
    int clk_started;
    size_t clk_connected; /* upstreams it was connected to */
    int stopped;          /* tp_relay_stop ran */
    size_t host_clocks;   /* hosts whose clocks the recording kept */
};

static int zmq_fail(err_msg *err, const char *what, const char *endpoint) {
    int e = zmq_errno();
    return err_set(err, ERR_ZMQ, "%s %s: %s", what, endpoint, zmq_strerror(e));
}

static int set_int(void *sock, int option, int value) {
    return zmq_setsockopt(sock, option, &value, sizeof value);
}

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define CLOCK_ANSWERS_PER_S 200

static uint64_t real_ns(const tp_relay *r) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + (uint64_t)r->clock_skew_ns;
}

/* Answers a clock request seen at t1 (this relay's clock), unless the rate bound says no. */
static void clock_answer(tp_relay *r, uint64_t nonce, uint64_t t1) {
    uint64_t now = mono_ns();
    r->answer_tokens += (double)(now - r->answer_refill_ns) * 1e-9 * CLOCK_ANSWERS_PER_S;
    if (r->answer_tokens > CLOCK_ANSWERS_PER_S)
        r->answer_tokens = CLOCK_ANSWERS_PER_S;
    r->answer_refill_ns = now;
    if (r->answer_tokens < 1)
        return;
    r->answer_tokens -= 1;
    net_clock_answer a = {.nonce = nonce, .t1 = t1, .relay = r->id};
    memcpy(a.host, r->host, sizeof a.host);
    uint8_t msg[NET_CLOCK_ANSWER_MAX];
    a.t2 = real_ns(r);
    size_t len = net_clock_answer_encode(msg, &a);
    if (zmq_send(r->clk_pub, "C", 1, ZMQ_DONTWAIT | ZMQ_SNDMORE) == 1 &&
        zmq_send(r->clk_pub, msg, len, ZMQ_DONTWAIT) == (int)len)
        atomic_fetch_add(&r->clock_answers, 1);
}

static int configure_front(tp_relay *r, void *k, const tp_relay_opts *o, err_msg *err);
static void up_open(tp_relay *r, upstream *u, const char *ep);
static void up_take(tp_relay *r, upstream *u);

static void summary_emit(void *ctx, const tp_summary *s) {
    tp_relay *r = ctx;
    uint8_t topic[NET_TOPIC_LEN], body[TP_SUMMARY_SIZE];
    net_topic_encode(topic, NET_TOPIC_SUMMARY, s->producer);
    tp_summary_encode(s, body);
    if (zmq_send(r->clk_pub, topic, sizeof topic, ZMQ_DONTWAIT | ZMQ_SNDMORE) == (int)sizeof topic &&
        zmq_send(r->clk_pub, body, sizeof body, ZMQ_DONTWAIT) == (int)sizeof body)
        atomic_fetch_add(&r->summaries, 1);
}

/* A subscription (1) or unsubscription (0) to a topic that starts with 'S' came up from below:
 * summaries start with the first such topic and stop with the last. */
static void summary_wanted(tp_relay *r, int on, const uint8_t *topic, size_t len) {
    size_t i = 0;
    while (i < r->n_s_topics && (r->s_len[i] != len || memcmp(r->s_topics[i], topic, len) != 0))
        i++;
    if (on && i == r->n_s_topics && i < sizeof r->s_topics / sizeof r->s_topics[0]) {
        memcpy(r->s_topics[i], topic, len);
        r->s_len[r->n_s_topics++] = (uint8_t)len;
    } else if (on && i == r->n_s_topics) {
        r->s_untracked++; /* possibly one seen before: summaries then go on longer, never shorter */
    } else if (!on && i < r->n_s_topics) {
        r->n_s_topics--;
        memcpy(r->s_topics[i], r->s_topics[r->n_s_topics], NET_TOPIC_LEN);
        r->s_len[i] = r->s_len[r->n_s_topics];
    } else if (!on && r->s_untracked > 0) {
        r->s_untracked--;
    }
    int want = (r->n_s_topics > 0 || r->s_untracked > 0) && r->summary_ns > 0 && r->summer != NULL;
    if (want == atomic_load(&r->summarising))
        return;
    atomic_store(&r->summarising, want);
    for (size_t k = 0; k < r->n_ups; k++)
        up_take(r, &r->ups[k]);
    if (want) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r->interval_start = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        r->interval_mono = mono_ns();
    } else {
        net_summer_reset(r->summer);
    }
}

/* Connects a socket of the reader's to each upstream added since (tp_relay_connect runs in
 * another thread) and asks it the time. The front connected to each already: the same endpoint
 * cannot fail here but for lack of memory, and then summaries lack that upstream alone. */
static void summary_connect_new(tp_relay *r) {
    for (;;) {
        char ep[TP_ENDPOINT_MAX];
        pthread_mutex_lock(&r->mu);
        int more = r->n_ups < r->upstreams;
        if (more)
            memcpy(ep, r->up[r->n_ups], sizeof ep);
        pthread_mutex_unlock(&r->mu);
        if (!more)
            return;
        if (r->n_ups == r->ups_cap) {
            size_t cap = r->ups_cap ? 2 * r->ups_cap : 16;
            upstream *v = realloc(r->ups, cap * sizeof *v);
            if (v != NULL)
                r->ups = v;
            zmq_pollitem_t *it = v != NULL ? realloc(r->items, (cap + 1) * sizeof *it) : NULL;
            if (it != NULL)
                r->items = it;
            size_t *iu = it != NULL ? realloc(r->item_up, cap * sizeof *iu) : NULL;
            if (iu == NULL)
                return; /* tried again on the next turn */
            r->item_up = iu;
            r->ups_cap = cap;
        }
        upstream *u = &r->ups[r->n_ups++];
        *u = (upstream){.kind = UP_PUBLISHER, .since = mono_ns()};
        up_open(r, u, ep);
    }
}

/* Makes u's socket, connects it to ep, subscribes to clock answers and asks. */
static void up_open(tp_relay *r, upstream *u, const char *ep) {
    tp_relay_opts o = {.rcvhwm = r->rcvhwm, .upstream_key = r->up_key[0] ? r->up_key : NULL,
                       .upstream_client = r->up_client.public_key[0] ? &r->up_client : NULL};
    uint8_t ask[NET_CLOCK_ASK_LEN];
    if (getrandom(&u->nonce, sizeof u->nonce, 0) != (ssize_t)sizeof u->nonce)
        u->nonce = mono_ns() ^ (uint64_t)(uintptr_t)u ^ r->id;
    net_clock_ask_encode(ask, u->nonce);
    u->sub = zmq_socket(r->ctx, ZMQ_SUB);
    if (u->sub == NULL)
        return;
    if (configure_front(r, u->sub, &o, NULL) != 0 || (strncmp(ep, "tcp://[", 7) == 0 && set_int(u->sub, ZMQ_IPV6, 1) != 0) ||
        zmq_setsockopt(u->sub, ZMQ_SUBSCRIBE, "C", 1) != 0 || zmq_setsockopt(u->sub, ZMQ_SUBSCRIBE, ask, sizeof ask) != 0 ||
        zmq_connect(u->sub, ep) != 0) {
        zmq_close(u->sub);
        u->sub = NULL;
        return;
    }
    u->kind = UP_ASKING;
    r->n_asking++;
    up_take(r, u);
}

/* Subscribes u to every batch while summaries are wanted and it is a publisher, else not. */
static void up_take(tp_relay *r, upstream *u) {
    int want = atomic_load(&r->summarising) && u->kind == UP_PUBLISHER && u->sub != NULL;
    if (want != u->taking && zmq_setsockopt(u->sub, want ? ZMQ_SUBSCRIBE : ZMQ_UNSUBSCRIBE, "B", 1) == 0)
        u->taking = want;
}

/* u answered its clock request: a relay, which summarises its own producers. Its batches are
 * let go, and so are the answers, which it sends for every subscriber below it. */
static void up_is_relay(tp_relay *r, upstream *u) {
    uint8_t ask[NET_CLOCK_ASK_LEN];
    net_clock_ask_encode(ask, u->nonce);
    if (u->kind == UP_ASKING)
        r->n_asking--;
    u->kind = UP_RELAY;
    up_take(r, u);
    (void)zmq_setsockopt(u->sub, ZMQ_UNSUBSCRIBE, ask, sizeof ask);
    (void)zmq_setsockopt(u->sub, ZMQ_UNSUBSCRIBE, "C", 1);
}

/* The upstreams that did not answer in time are publishers. Returns the ms until the next one
 * that is still asking is due (at most cap). */
static long up_decide(tp_relay *r, long cap) {
    uint64_t now = mono_ns(), limit = (uint64_t)UP_ASK_MS * 1000000ull;
    for (size_t i = 0; r->n_asking > 0 && i < r->n_ups; i++) {
        upstream *u = &r->ups[i];
        if (u->kind != UP_ASKING)
            continue;
        if (now - u->since >= limit) {
            u->kind = UP_PUBLISHER;
            r->n_asking--;
            up_take(r, u);
        } else if ((long)((u->since + limit - now) / 1000000) + 1 < cap) {
            cap = (long)((u->since + limit - now) / 1000000) + 1;
        }
    }
    return cap;
}

/* Takes what u's socket has: [topic][batch] into the summer, its answer to our clock request;
 * other clock answers dropped, anything else counted and dropped. */
static void summary_read(tp_relay *r, upstream *u, zmq_msg_t *m) {
    for (int k = 0; k < 1000; k++) {
        if (zmq_msg_recv(m, u->sub, ZMQ_DONTWAIT) < 0)
            return;
        int ok = zmq_msg_more(m);
        uint64_t id = 0;
        char letter = ok ? net_topic_decode(zmq_msg_data(m), zmq_msg_size(m), &id) : 0;
        ok = ok && (letter == NET_TOPIC_BATCH || letter == NET_TOPIC_CLOCK);
        if (zmq_msg_more(m) && zmq_msg_recv(m, u->sub, ZMQ_DONTWAIT) < 0)
            ok = 0;
        int extra = 0;
        while (zmq_msg_more(m) && zmq_msg_recv(m, u->sub, ZMQ_DONTWAIT) >= 0)
            extra = 1;
        if (ok && !extra && letter == NET_TOPIC_CLOCK) {
            net_clock_answer a;
            if (net_clock_answer_decode(zmq_msg_data(m), zmq_msg_size(m), &a) && a.nonce == u->nonce &&
                u->kind != UP_RELAY)
                up_is_relay(r, u);
            continue;
        }
        tp_batch_hdr h;
        const uint8_t *d = zmq_msg_data(m);
        size_t len = zmq_msg_size(m);
        ok = ok && !extra && len >= TP_BATCH_HDR_SIZE && tp_batch_check_header(d, len, &h, NULL) == 0 &&
             h.producer == id && tp_batch_size(&h) == len;
        if (!ok || !atomic_load(&r->summarising) || net_summer_add(r->summer, d, len, NULL) != 0) {
            if (atomic_load(&r->summarising))
                atomic_fetch_add(&r->malformed, 1);
        }
    }
}

/* One message from the capture socket, all its frames: counts and records the batches (their batch
 * frame only, as a trace file holds them), follows the subscriptions, answers clock requests. */
static void capture_take(tp_relay *r, zmq_msg_t *m) {
    const uint8_t *d = zmq_msg_data(m);
    size_t len = zmq_msg_size(m);
    if (!zmq_msg_more(m)) { /* a single frame: from below, a subscription or a request */
        if (len >= 2 && d[0] <= 1 && d[1] == NET_TOPIC_SUMMARY && len - 1 <= NET_TOPIC_LEN)
            summary_wanted(r, d[0], d + 1, len - 1);
        uint64_t nonce;
        if (len > 1 && d[0] == 1 && net_clock_ask_decode(d + 1, len - 1, &nonce)) {
            clock_answer(r, nonce, real_ns(r));
        } else if (len >= 1 && d[0] == 1 && len - 1 <= NET_TOPIC_LEN &&
                   (len == 1 || d[1] == NET_TOPIC_BATCH || d[1] == NET_TOPIC_SUMMARY)) {
            atomic_fetch_add(&r->subscribes, 1); /* a viewer of batches or summaries */
        }
        return;
    }
    uint64_t id;
    char letter = net_topic_decode(d, len, &id);
    if (zmq_msg_recv(m, r->cap_reader, 0) < 0)
        return;
    int extra = 0;
    while (zmq_msg_more(m) && zmq_msg_recv(m, r->cap_reader, 0) >= 0)
        extra = 1;
    if (letter != NET_TOPIC_BATCH || extra)
        return; /* summaries and clock answers going down; a bad message went down too */
    d = zmq_msg_data(m);
    len = zmq_msg_size(m);
    tp_batch_hdr h;
    if (len >= TP_BATCH_HDR_SIZE && tp_batch_check_header(d, len, &h, NULL) == 0 && h.producer == id &&
        tp_batch_size(&h) == len) {
        atomic_fetch_add(&r->batches, 1);
        atomic_fetch_add(&r->bytes, len);
        err_msg e;
        /* a batch the file refuses ends the recording too, as a write error does */
        if (r->rec != NULL && tp_recorder_append(r->rec, d, len, &e) == ERR_MALFORMED)
            tp_recorder_stop(r->rec, &e);
    } else {
        atomic_fetch_add(&r->malformed, 1);
    }
}

#define NOTICE_EVERY_NS 2000000000ull /* how often a stopped recording is said again, for viewers that came since */

/* Tells every subscriber below that the recording stopped (the live stream goes on), once it has,
 * and again every NOTICE_EVERY_NS. */
static void notice_recording(tp_relay *r) {
    err_msg e = {{0}};
    uint64_t now = mono_ns();
    if (r->rec == NULL || (r->notice_ns != 0 && now - r->notice_ns < NOTICE_EVERY_NS) ||
        tp_recorder_error(r->rec, &e) == 0)
        return;
    r->notice_ns = now;
    tp_sub_notice n = {.relay = r->id, .kind = TP_NOTICE_RECORDING_STOPPED};
    memcpy(n.host, r->host, sizeof n.host);
    snprintf(n.text, sizeof n.text, "recording to %s stopped: %s", r->record_path, e.msg);
    uint8_t body[NET_NOTICE_MAX];
    size_t len = net_notice_encode(body, &n);
    if (zmq_send(r->clk_pub, "N", 1, ZMQ_DONTWAIT | ZMQ_SNDMORE) == 1)
        (void)zmq_send(r->clk_pub, body, len, ZMQ_DONTWAIT);
}

/* Counts what went through, records the batches, answers clock requests, and makes the summaries. */
static void *reader_main(void *arg) {
    tp_relay *r = arg;
    zmq_msg_t m;
    zmq_msg_init(&m);
    while (!atomic_load(&r->reader_stop)) {
        summary_connect_new(r);
        long wait_ms = up_decide(r, 100);
        if (atomic_load(&r->summarising)) {
            uint64_t now = mono_ns(), due = r->interval_mono + r->summary_ns;
            if (now >= due) {
                net_summer_flush(r->summer, r->interval_start, r->summary_ns, summary_emit, r);
                r->interval_start += r->summary_ns;
                r->interval_mono = due;
                if (now - due > r->summary_ns) { /* fell behind (a stopped process): start afresh */
                    r->interval_start += now - due;
                    r->interval_mono = now;
                }
                continue;
            }
            if ((due - now) / 1000000 < (uint64_t)wait_ms)
                wait_ms = (long)((due - now) / 1000000) + 1;
        }
        zmq_pollitem_t one = {.socket = r->cap_reader, .events = ZMQ_POLLIN}, *items = &one;
        int n = 1;
        if (r->item_up != NULL) { /* sized with ups: items hold one more */
            items = r->items;
            items[0] = one;
            for (size_t i = 0; i < r->n_ups; i++)
                if (r->ups[i].sub != NULL) {
                    r->item_up[n - 1] = i;
                    items[n++] = (zmq_pollitem_t){.socket = r->ups[i].sub, .events = ZMQ_POLLIN};
                }
        }
        if (zmq_poll(items, n, wait_ms) <= 0)
            continue; /* the timeout: look at the stop flag again */
        for (int i = 1; i < n; i++)
            if (items[i].revents & ZMQ_POLLIN)
                summary_read(r, &r->ups[r->item_up[i - 1]], &m);
        for (int k = 0; k < 1000 && zmq_msg_recv(&m, r->cap_reader, ZMQ_DONTWAIT) >= 0; k++)
            capture_take(r, &m);
        notice_recording(r);
    }
    zmq_msg_close(&m);
    return NULL;
}

/* When recording: asks the relays above for their clocks, as a subscriber does, all along. */
static void *clock_main(void *arg) {
    tp_relay *r = arg;
    while (!atomic_load(&r->reader_stop)) {
        for (;;) {
            char ep[TP_ENDPOINT_MAX];
            pthread_mutex_lock(&r->mu);
            int more = r->clk_connected < r->upstreams;
            if (more)
                memcpy(ep, r->up[r->clk_connected++], sizeof ep);
            pthread_mutex_unlock(&r->mu);
            if (!more)
                break;
            (void)tp_sub_connect(r->clk, ep, NULL); /* the front connected to it already */
        }
        tp_sub_msg m;
        err_msg err;
        (void)tp_sub_recv(r->clk, &m, 100, &err); /* clock answers only: never a batch */
    }
    return NULL;
}

/* The XSUB front, or the summaries' SUB: both subscribe to the same publishers. */
static int configure_front(tp_relay *r, void *k, const tp_relay_opts *o, err_msg *err) {
    int64_t max_msg = (int64_t)TP_BATCH_HDR_SIZE + TP_BATCH_MAX_PAYLOAD;
    if (set_int(k, ZMQ_LINGER, 0) != 0 || set_int(k, ZMQ_RCVHWM, o->rcvhwm > 0 ? o->rcvhwm : 10000) != 0 ||
        set_int(k, ZMQ_RECONNECT_IVL, 100) != 0 || set_int(k, ZMQ_RECONNECT_IVL_MAX, 1000) != 0 ||
        zmq_setsockopt(k, ZMQ_MAXMSGSIZE, &max_msg, sizeof max_msg) != 0)
        return zmq_fail(err, "cannot configure the relay's subscriber side for", r->endpoint);
    /* Its own pair when given (upstreams that check their clients list it), else a throwaway one. */
    return o->upstream_key != NULL ? net_curve_client(k, o->upstream_key, o->upstream_client, NULL, err) : 0;
}

static int configure_back(tp_relay *r, const tp_relay_opts *o, err_msg *err) {
    void *s = r->back;
    if (set_int(s, ZMQ_LINGER, 0) != 0 || set_int(s, ZMQ_SNDHWM, o->sndhwm > 0 ? o->sndhwm : 1000) != 0 ||
        set_int(s, ZMQ_RCVHWM, NET_PEER_QUEUE) != 0 || /* as the publisher's: net_peers.h */
        set_int(s, ZMQ_XPUB_VERBOSE, 1) != 0 || set_int(s, ZMQ_HANDSHAKE_IVL, 2000) != 0 ||
        set_int(s, ZMQ_BACKLOG, 32) != 0 ||
        /* only subscriptions and loss reports come in */
        zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &(int64_t){4096}, sizeof(int64_t)) != 0)
        return zmq_fail(err, "cannot configure the relay on", r->endpoint);
    if (strncmp(r->endpoint, "tcp://[", 7) == 0 && set_int(s, ZMQ_IPV6, 1) != 0)
        return zmq_fail(err, "cannot enable IPv6 for", r->endpoint);
    if (o->curve != NULL && (set_int(s, ZMQ_CURVE_SERVER, 1) != 0 ||
                             zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, o->curve->secret_key, TP_KEY_Z85_LEN) != 0))
        return zmq_fail(err, "cannot set up CURVE encryption for", r->endpoint);
    /* The check of client keys is in place before anyone can connect. */
    if (o->clients != NULL && o->curve == NULL)
        return err_set(err, ERR_INVAL, "a list of clients needs the relay's CURVE keys (--key)");
    if (o->clients != NULL && (r->zap = net_zap_start(r->ctx, o->clients, o->curve->public_key, err)) == NULL)
        return ERR_ZMQ;
    if (zmq_bind(s, r->endpoint) != 0)
        return zmq_errno() == EADDRINUSE ? err_set(err, ERR_EXIST, "cannot bind %s: address already in use", r->endpoint)
                                         : zmq_fail(err, "cannot bind", r->endpoint);
    char last[TP_ENDPOINT_MAX];
    size_t len = sizeof last;
    if (zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, last, &len) == 0 && len > 1 && len <= sizeof last)
        memcpy(r->endpoint, last, len);
    if (strncmp(r->endpoint, "ipc://", 6) == 0) {
        r->bound_ipc = 1;
        if (chmod(r->endpoint + 6, 0600) != 0)
            return err_set(err, ERR_IO, "cannot make socket file %s private: %s", r->endpoint + 6, strerror(errno));
    }
    return 0;
}

/* The capture pair and the clock answers' socket, over inproc endpoints of this relay's own context. */
static int make_pairs(tp_relay *r, err_msg *err) {
    char cap[64], clk[64];
    snprintf(cap, sizeof cap, "inproc://relay-capture-%p", (void *)r);
    snprintf(clk, sizeof clk, "inproc://relay-clock-%p", (void *)r);
    r->clk_pub = zmq_socket(r->ctx, ZMQ_PUB);
    if (r->clk_pub == NULL || set_int(r->clk_pub, ZMQ_LINGER, 0) != 0 || set_int(r->clk_pub, ZMQ_SNDHWM, 100000) != 0 ||
        zmq_bind(r->clk_pub, clk) != 0 || zmq_connect(r->front, clk) != 0)
        return zmq_fail(err, "cannot set up the relay's clock answers for", r->endpoint);
    r->cap_proxy = zmq_socket(r->ctx, ZMQ_PUSH);
    r->cap_reader = zmq_socket(r->ctx, ZMQ_PULL);
    if (r->cap_proxy == NULL || r->cap_reader == NULL ||
        set_int(r->cap_proxy, ZMQ_LINGER, 0) != 0 || set_int(r->cap_reader, ZMQ_LINGER, 0) != 0 ||
        /* a slow recording makes the proxy wait (the publishers then drop for the relay, and the
         * viewers see and report the gap) rather than grow without bound */
        set_int(r->cap_proxy, ZMQ_SNDHWM, 10000) != 0 || set_int(r->cap_reader, ZMQ_RCVHWM, 10000) != 0 ||
        zmq_bind(r->cap_reader, cap) != 0 || zmq_connect(r->cap_proxy, cap) != 0)
        return zmq_fail(err, "cannot set up the relay's capture for", r->endpoint);
    return 0;
}

/* The host name and id its clock answers carry. */
static int set_identity(tp_relay *r, const tp_relay_opts *o, err_msg *err) {
    char host[256] = "";
    if (o->host != NULL)
        snprintf(host, sizeof host, "%s", o->host);
    else if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "localhost");
    if (!net_clock_host_ok(host, strlen(host)))
        return err_set(err, ERR_INVAL, "the relay's host name \"%.64s\" is not 1 to %d printable characters",
                       host, NET_CLOCK_HOST_MAX);
    memcpy(r->host, host, strlen(host) + 1);
    if (getrandom(&r->id, sizeof r->id, 0) != (ssize_t)sizeof r->id)
        r->id = mono_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)r;
    r->clock_skew_ns = o->clock_skew_ns;
    r->answer_tokens = CLOCK_ANSWERS_PER_S;
    r->answer_refill_ns = mono_ns();
    return 0;
}

tp_relay *tp_relay_new(const tp_relay_opts *opts, err_msg *err) {
    tp_relay_opts o = {0};
    if (opts != NULL)
        o = *opts;
    if (o.listen == NULL) {
        err_set(err, ERR_INVAL, "a relay needs an endpoint to listen on");
        return NULL;
    }
    tp_relay *r = calloc(1, sizeof *r);
    if (r == NULL) {
        err_set(err, ERR_NOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&r->mu, NULL);
    zmq_msg_init(&r->down_topic);
    zmq_msg_init(&r->down_body);
    zmq_msg_init(&r->up_note);
    if (tp_endpoint_resolve(o.listen, r->endpoint, sizeof r->endpoint, err) < 0 ||
        net_bind_check(r->endpoint, o.curve, o.insecure, err) < 0)
        goto fail;
    if ((r->ctx = zmq_ctx_new()) == NULL) {
        zmq_fail(err, "cannot create a ZeroMQ context for", r->endpoint);
        goto fail;
    }
    zmq_ctx_set(r->ctx, ZMQ_BLOCKY, 0);
    r->front = zmq_socket(r->ctx, ZMQ_XSUB);
    r->back = zmq_socket(r->ctx, ZMQ_XPUB);
    if (r->front == NULL || r->back == NULL) {
        zmq_fail(err, "cannot create the relay's sockets for", r->endpoint);
        goto fail;
    }
    if (set_identity(r, &o, err) < 0 || configure_front(r, r->front, &o, err) < 0 || configure_back(r, &o, err) < 0 ||
        make_pairs(r, err) < 0)
        goto fail;
    /* What a subscriber below may make libzmq hold is bounded (net_peers.h): the relay's memory is
     * not a peer's to spend, nor, through it, the publishers' above. */
    r->peers = net_peers_new(r->endpoint);
    r->back_mon = net_monitor_open(r->ctx, r->back, ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED);
    if ((r->fwd = net_fwd_new(r->id)) == NULL) {
        err_set(err, ERR_NOMEM, "out of memory");
        goto fail;
    }
    /* An upstream whose CURVE key is not the one given refuses the handshake, and the relay would
     * otherwise only hear nothing: watched, so that it can say so. */
    r->front_mon = net_monitor_open(r->ctx, r->front,
                                    ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                        ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
    r->rcvhwm = o.rcvhwm;
    if (o.upstream_key != NULL) /* configure_front checked its length */
        memcpy(r->up_key, o.upstream_key, TP_KEY_Z85_LEN);
    if (o.upstream_key != NULL && o.upstream_client != NULL) /* and this pair */
        r->up_client = *o.upstream_client;
    r->summary_ns = o.summary_ms < 0 ? 0 : (uint64_t)(o.summary_ms > 0 ? o.summary_ms : 1000) * 1000000ull;
    if (r->summary_ns > 0 && (r->summer = net_summer_new(r->id)) == NULL) {
        err_set(err, ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (o.record != NULL && (r->record_path = strdup(o.record)) == NULL) {
        err_set(err, ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (o.record != NULL &&
        (r->rec = tp_recorder_open(o.record, o.record_overwrite ? TP_FW_OVERWRITE : 0, err)) == NULL)
        goto fail;
    if (r->rec != NULL) {
        if ((r->clk = tp_sub_new(&(tp_sub_opts){.server_key = o.upstream_key, .client_key = o.upstream_client,
                                                 .clocks_only = 1},
                                  err)) == NULL)
            goto fail;
        if (pthread_create(&r->clk_thread, NULL, clock_main, r) != 0) {
            err_set(err, ERR_IO, "cannot start the relay's clock thread");
            goto fail;
        }
        r->clk_started = 1;
    }
    if (pthread_create(&r->reader, NULL, reader_main, r) != 0) {
        err_set(err, ERR_IO, "cannot start the relay's capture thread");
        goto fail;
    }
    r->reader_started = 1;
    return r;
fail:
    tp_relay_destroy(&r, NULL);
    return NULL;
}

const char *tp_relay_endpoint(const tp_relay *r) { return r->endpoint; }

int tp_relay_connect(tp_relay *r, const char *endpoint, err_msg *err) {
    char ep[TP_ENDPOINT_MAX];
    int rc = tp_endpoint_resolve(endpoint, ep, sizeof ep, err);
    if (rc < 0)
        return rc;
    if (strcmp(ep, r->endpoint) == 0)
        return err_set(err, ERR_INVAL, "the relay cannot subscribe to itself (%s)", ep);
    if (strncmp(ep, "tcp://[", 7) == 0)
        set_int(r->front, ZMQ_IPV6, 1);
    pthread_mutex_lock(&r->mu);
    if (r->upstreams == r->up_cap) {
        size_t cap = r->up_cap ? 2 * r->up_cap : 16;
        char(*v)[TP_ENDPOINT_MAX] = realloc(r->up, cap * sizeof *v);
        if (v == NULL) {
            pthread_mutex_unlock(&r->mu);
            return err_set(err, ERR_NOMEM, "out of memory");
        }
        r->up = v;
        r->up_cap = cap;
    }
    pthread_mutex_unlock(&r->mu);
    if (zmq_connect(r->front, ep) != 0)
        return zmq_fail(err, "cannot connect the relay to", ep);
    pthread_mutex_lock(&r->mu);
    memcpy(r->up[r->upstreams], ep, sizeof ep);
    r->upstreams++; /* the reader connects a socket of its own to it */
    pthread_mutex_unlock(&r->mu);
    return 0;
}

/* Counts the refused handshakes that came, and follows the subscribers' connections (the
 * caller's thread, the proxy's). */
static void read_handshakes(tp_relay *r) {
    uint16_t event;
    uint32_t value;
    char ep[TP_ENDPOINT_MAX];
    while (net_monitor_next(r->front_mon, &event, &value, ep, sizeof ep))
        if (event != 0) {
            r->handshake_failures++;
            snprintf(r->handshake_ep, sizeof r->handshake_ep, "%s", ep);
            /* RFC 27's 300, 400 or 500 from the upstream's ZAP handler: our key was checked, so it
             * is the client key, not the server's, that it refused */
            r->client_refused = event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH && value >= 300 && value < 600;
        }
    while (net_monitor_next(r->back_mon, &event, &value, NULL, 0))
        if (event == ZMQ_EVENT_ACCEPTED)
            net_peers_connected(r->peers, (int)value);
        else if (event == ZMQ_EVENT_DISCONNECTED)
            net_peers_disconnected(r->peers, (int)value);
}

const char *tp_relay_handshake_failed(const tp_relay *r) {
    return r->handshake_failures > 0 ? r->handshake_ep : NULL;
}

int tp_relay_client_refused(const tp_relay *r) { return r->handshake_failures > 0 && r->client_refused; }

#define LOOP_NOTICE_EVERY_NS 10000000000ull /* how often a loop still seen is said again */
#define LOOP_NOTICE_MIN_NS 100000000ull     /* and at most how often to newcomers */

/* Tells the subscribers below that this relay is in a loop of relays (a message it passed on came
 * back to it): at once, again every every_ns while it goes on, and to each newcomer (the loop is
 * often found before any viewer comes). */
static void notice_loop(tp_relay *r, uint64_t every_ns) {
    uint64_t now = mono_ns();
    if (r->loop_notice_ns != 0 && now - r->loop_notice_ns < every_ns)
        return;
    r->loop_notice_ns = now;
    tp_sub_notice n = {.relay = r->id, .kind = TP_NOTICE_LOOP};
    memcpy(n.host, r->host, sizeof n.host);
    snprintf(n.text, sizeof n.text,
             "in a loop of relays: what it passes on comes back to it through relay %016" PRIx64
             "; what came twice is dropped",
             net_fwd_loop_via(r->fwd));
    uint8_t topic[1 + 8], body[NET_NOTICE_MAX];
    topic[0] = NET_TOPIC_NOTICE;
    net_trail_put(topic + 1, r->id);
    size_t len = net_notice_encode(body, &n);
    if (zmq_send(r->back, topic, sizeof topic, ZMQ_DONTWAIT | ZMQ_SNDMORE) == (int)sizeof topic)
        (void)zmq_send(r->back, body, len, ZMQ_DONTWAIT);
}

/* Counts a message that does not go through. */
static void proxy_drop(tp_relay *r, net_fwd_verdict v) {
    switch (v) {
    case NET_FWD_MALFORMED: atomic_fetch_add(&r->malformed, 1); break;
    case NET_FWD_LOOPED:
        r->looped++;
        notice_loop(r, LOOP_NOTICE_EVERY_NS);
        break;
    case NET_FWD_TOO_FAR: r->too_far++; break;
    case NET_FWD_COPY: r->duplicates++; break;
    default: r->refused++; break;
    }
}

/* Reads the rest of a message whose last frame read was m (a message of more frames than ours). */
static void proxy_drain(void *sock, zmq_msg_t *m) {
    while (zmq_msg_more(m) && zmq_msg_recv(m, sock, ZMQ_DONTWAIT) >= 0)
        ;
}

/* One message from above, if one is waiting: on to the subscribers below (and a batch to the
 * reader), or dropped. 1 when one was taken, 0 when none was waiting, -1 when a signal came while
 * the reader was too slow to take the batch's copy (the caller looks at its flags). */
static int proxy_down(tp_relay *r) {
    zmq_msg_t *t = &r->down_topic, *b = &r->down_body;
    if (zmq_msg_recv(t, r->front, ZMQ_DONTWAIT) < 0)
        return 0;
    /* [topic][body]: a message arrives whole, so the body is there when the topic is */
    if (!zmq_msg_more(t) || zmq_msg_recv(b, r->front, ZMQ_DONTWAIT) < 0 || zmq_msg_more(b)) {
        proxy_drain(r->front, zmq_msg_more(t) ? b : t);
        proxy_drop(r, NET_FWD_MALFORMED);
        return 1;
    }
    uint8_t topic[NET_TOPIC_MAX];
    size_t tl;
    net_fwd_verdict v = net_fwd_down(r->fwd, zmq_msg_data(t), zmq_msg_size(t), zmq_msg_data(b), zmq_msg_size(b), topic, &tl);
    if (v != NET_FWD_PASS) {
        proxy_drop(r, v);
        return 1;
    }
    int batch = topic[0] == NET_TOPIC_BATCH;
    zmq_msg_t copy;
    zmq_msg_init(&copy);
    if (batch)
        zmq_msg_copy(&copy, b); /* shares the data */
    /* the XPUB never blocks: a full subscriber's queue drops it (that subscriber reports the gap) */
    if (zmq_send(r->back, topic, tl, ZMQ_DONTWAIT | ZMQ_SNDMORE) == (int)tl)
        (void)zmq_msg_send(b, r->back, ZMQ_DONTWAIT);
    int rc = 1;
    /* A slow recording makes the proxy wait (the publishers then drop for the relay, and the
     * viewers see and report the gap) rather than grow without bound. Once the first frame is
     * taken the second is too (the high-water mark counts messages). */
    if (batch) {
        if (zmq_send(r->cap_proxy, topic, tl, ZMQ_SNDMORE) == (int)tl)
            (void)zmq_msg_send(&copy, r->cap_proxy, 0);
        else if (zmq_errno() == EINTR)
            rc = -1;
    }
    zmq_msg_close(&copy);
    return rc;
}

/* One subscription notice from below, if one is waiting: what it makes go up, and the notice to
 * the reader. Returns as proxy_down does. */
static int proxy_up(tp_relay *r) {
    zmq_msg_t *m = &r->up_note;
    if (zmq_msg_recv(m, r->back, ZMQ_DONTWAIT) < 0)
        return 0;
    r->from_below++;
    if (zmq_msg_more(m)) { /* a peer's own message of several frames: not a subscription */
        proxy_drain(r->back, m);
        proxy_drop(r, NET_FWD_REFUSED);
        return 1;
    }
    const uint8_t *d = zmq_msg_data(m);
    size_t len = zmq_msg_size(m);
    if (!net_peers_note(r->peers, m, len > 0 && d[0] == 1, net_fwd_ours(d, len))) {
        r->refused++;
        read_handshakes(r); /* the ends of the connections it shut, before the next notice */
        return 1;
    }
    net_fwd_up out;
    net_fwd_verdict v = net_fwd_up_take(r->fwd, d, len, &out);
    if (v != NET_FWD_PASS) {
        proxy_drop(r, v);
        return 1;
    }
    for (int i = 0; i < out.n; i++)
        (void)zmq_send(r->front, out.msg[i], out.len[i], ZMQ_DONTWAIT);
    if (r->looped > 0 && len == 2 && d[0] == 1 && d[1] == NET_TOPIC_NOTICE)
        notice_loop(r, LOOP_NOTICE_MIN_NS); /* a newcomer, subscribed already */
    return zmq_msg_send(m, r->cap_proxy, 0) < 0 && zmq_errno() == EINTR ? -1 : 1;
}

int tp_relay_run(tp_relay *r, int ms, err_msg *err) {
    read_handshakes(r);
    uint64_t end = mono_ns() + (uint64_t)(ms > 0 ? ms : 1) * 1000000ull, now;
    int rc = 0;
    while (rc >= 0 && (now = mono_ns()) < end) {
        zmq_pollitem_t it[2] = {{.socket = r->front, .events = ZMQ_POLLIN}, {.socket = r->back, .events = ZMQ_POLLIN}};
        if (zmq_poll(it, 2, (long)((end - now) / 1000000) + 1) < 0) {
            if (zmq_errno() == EINTR)
                break; /* a signal: the caller looks at its flags */
            return zmq_fail(err, "the relay stopped on", r->endpoint);
        }
        /* a bounded number each way per turn: a flood in one direction does not stop the other */
        for (int k = 0; k < 1000 && rc >= 0 && (rc = proxy_up(r)) > 0; k++)
            ;
        for (int k = 0; k < 1000 && rc >= 0 && (rc = proxy_down(r)) > 0; k++)
            ;
    }
    read_handshakes(r);
    return 0;
}

void tp_relay_stats_get(const tp_relay *r, tp_relay_stats *out) {
    tp_relay_stats *o = out;
    memset(o, 0, sizeof *o);
    o->batches = atomic_load(&((tp_relay *)r)->batches);
    o->bytes = atomic_load(&((tp_relay *)r)->bytes);
    o->subscribes = atomic_load(&((tp_relay *)r)->subscribes);
    o->clock_answers = atomic_load(&((tp_relay *)r)->clock_answers);
    o->summaries = atomic_load(&((tp_relay *)r)->summaries);
    o->malformed = atomic_load(&((tp_relay *)r)->malformed);
    o->from_below = r->from_below;
    o->duplicates = r->duplicates;
    o->looped = r->looped;
    o->too_far = r->too_far;
    o->refused = r->refused;
    net_peers_stats ps;
    net_peers_stats_get(r->peers, &ps);
    o->peers_shut = ps.shut;
    o->loop_via = net_fwd_loop_via(r->fwd);
    o->summarising = atomic_load(&((tp_relay *)r)->summarising);
    pthread_mutex_lock(&((tp_relay *)r)->mu);
    o->upstreams = r->upstreams;
    pthread_mutex_unlock(&((tp_relay *)r)->mu);
    o->record_failed = r->rec != NULL && tp_recorder_failed(r->rec);
    o->host_clocks = r->host_clocks;
}

void tp_relay_stop(tp_relay *r) {
    if (r->stopped)
        return;
    r->stopped = 1;
    atomic_store(&r->reader_stop, 1);
    if (r->reader_started)
        pthread_join(r->reader, NULL);
    if (r->clk_started)
        pthread_join(r->clk_thread, NULL);
    r->reader_started = r->clk_started = 0;
    int hosts = r->rec != NULL && r->clk != NULL ? tp_recorder_add_clocks(r->rec, r->clk, NULL) : 0;
    if (hosts > 0)
        r->host_clocks = (size_t)hosts;
}

const tp_sub *tp_relay_clocks(const tp_relay *r) { return r->clk; }

int tp_relay_record_error(const tp_relay *r, err_msg *err) { return r->rec != NULL ? tp_recorder_error(r->rec, err) : 0; }

int tp_relay_destroy(tp_relay **rp, err_msg *err) {
    if (rp == NULL || *rp == NULL)
        return 0;
    tp_relay *r = *rp;
    tp_relay_stop(r);
    int rc = tp_recorder_close(&r->rec, err);
    net_monitor_close(r->front_mon, r->front);
    net_monitor_close(r->back_mon, r->back);
    net_peers_destroy(&r->peers);
    zmq_msg_close(&r->down_topic);
    zmq_msg_close(&r->down_body);
    zmq_msg_close(&r->up_note);
    void *socks[] = {r->front, r->back, r->cap_proxy, r->cap_reader, r->clk_pub};
    for (size_t i = 0; i < sizeof socks / sizeof socks[0]; i++)
        if (socks[i] != NULL)
            zmq_close(socks[i]);
    for (size_t i = 0; i < r->n_ups; i++) /* the reader ended: its sockets are ours now */
        if (r->ups[i].sub != NULL)
            zmq_close(r->ups[i].sub);
    net_zap_stop(&r->zap); /* after the socket it checks for */
    explicit_bzero(&r->up_client, sizeof r->up_client);
    while (r->ctx != NULL && zmq_ctx_term(r->ctx) != 0 && zmq_errno() == EINTR)
        ;
    tp_sub_destroy(&r->clk);
    if (r->bound_ipc)
        unlink(r->endpoint + 6);
    pthread_mutex_destroy(&r->mu);
    net_summer_destroy(&r->summer);
    net_fwd_destroy(&r->fwd);
    free(r->record_path);
    free(r->up);
    free(r->ups);
    free(r->items);
    free(r->item_up);
    free(r);
    *rp = NULL;
    return rc;
}
