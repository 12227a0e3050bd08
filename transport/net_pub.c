/*
 * The publisher (net.h): an XPUB socket that never blocks its caller and where only a slow
 * subscriber loses. Each batch is first offered with XPUB_NODROP set, which libzmq refuses (EAGAIN)
 * when a subscriber's queue is at its high-water mark; the batch then goes out lossy, which libzmq
 * delivers to every queue with room and drops for the full ones (a full queue then stays out of
 * the delivery set, silently, until its subscriber has read enough). So healthy subscribers get
 * every batch, and only the subscriber knows exactly what it lost: it sees the gap in the sequence
 * numbers and reports it (net_loss.h). The publisher adds the reports up as its drop count and
 * answers them with a keyframe (at most one a second), since the lost batches may have carried
 * strings and metadata. Each batch goes as two frames, its topic ('B' + producer id, net_topic.h)
 * and the batch, so that subscribers choose producers. XPUB_VERBOSE passes every subscribe up, so
 * the publisher knows when a viewer of its batches arrives (its caller then sends a keyframe); an
 * unsubscribe comes up only when libzmq, which follows subscriptions per connection and topic,
 * sees the last subscriber of that topic go. So no peer can
 * unsubscribe the others (and switch on-demand tracing off for them), and one that subscribes again
 * and again counts once, for as long as it stays. How many are connected comes from the socket's
 * connection events.
 *
 * It owns its ZeroMQ context (non-blocking termination, linger 0 unless asked) and, for ipc, the
 * socket file it bound, which it removes on destroy. It refuses to expose traces beyond this
 * machine unencrypted unless told to. Given a list of clients, a ZAP handler in its context
 * (net_zap.c) admits those only.
 */
#include "synctop/net.h"
#include "clock.h"
#include "net_bind.h"
#include "net_forward.h"
#include "net_loss.h"
#include "net_monitor.h"
#include "net_peers.h"
#include "net_topic.h"
#include "net_zap.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

struct tp_pub {
    pid_t owner; /* the process that made it: a forked child must not touch its context */
    void *ctx;
    void *sock;
    char endpoint[TP_ENDPOINT_MAX];
    char ipc_path[PATH_MAX]; /* the socket file we bound, "" when none */
    dev_t ipc_dev;
    ino_t ipc_ino;
    int linger_ms;
    /* someone subscribes, as libzmq tracks it, to everything (""), to every producer's batches
     * ("B"), or to this one's ("B" + id) */
    int sub_all, sub_batches, sub_mine;
    void *mon;       /* the socket's connection events, to count the connections */
    net_zap *zap;    /* the check of client keys, when it admits listed clients only */
    net_peers *peers; /* what each peer's subscriptions hold (NULL: out of memory, unbounded) */
    int64_t accepted, handshakes, failures, disconnects;
    int tcp_port;    /* the port it listens on, 0 when not tcp */
    int lost_since_keyframe; /* a subscriber reported a loss since the last keyframe asked for */
    double last_loss_keyframe; /* cm_now_s, 0: never */
    uint64_t producer; /* its batches' id (given, or of the last batch sent): its topic, and loss
                          reports about others are not ours */
    uint64_t sent, dropped, bytes;
};

#define LOSS_KEYFRAME_EVERY_S 1.0
#define PUB_MAX_CONNECTIONS 64 /* open tcp connections, handshake done or not */
#define PUB_NOTICES_PER_POLL 4096 /* subscription notices read by one tp_pub_poll */

static int zmq_fail(err_msg *err, const char *what, const char *endpoint) {
    int e = zmq_errno();
    return err_set(err, ERR_ZMQ, "%s %s: %s", what, endpoint, zmq_strerror(e));
}

static int set_int(void *sock, int option, int value) {
    return zmq_setsockopt(sock, option, &value, sizeof value);
}

/* Which endpoint to bind, and whether binding it is allowed. */
static int choose_endpoint(const tp_pub_opts *o, char *ep, int *is_default, err_msg *err) {
    int rc;
    *is_default = o->endpoint == NULL;
    if (*is_default)
        rc = tp_endpoint_for_pid((long)getpid(), ep, TP_ENDPOINT_MAX, err);
    else
        rc = tp_endpoint_resolve(o->endpoint, ep, TP_ENDPOINT_MAX, err);
    if (rc < 0)
        return rc;
    if ((rc = net_bind_check(ep, o->curve, o->insecure, err)) < 0)
        return rc;
    if (*is_default && strncmp(ep, "ipc://", 6) == 0)
        tp_endpoint_remove_stale(NULL);
    return 0;
}

static int configure(tp_pub *p, const tp_pub_opts *o, err_msg *err) {
    void *s = p->sock;
    int hwm = o->sndhwm > 0 ? o->sndhwm : 1000;
    if (set_int(s, ZMQ_LINGER, 0) != 0 || set_int(s, ZMQ_SNDHWM, hwm) != 0 ||
        /* Subscriptions wait in the peer's queue, not ours: libzmq takes in (and holds) at most
         * about this many of a connection's at each call, so a peer past its bound is shut
         * before it can make us hold much more (net_peers.h). */
        set_int(s, ZMQ_RCVHWM, NET_PEER_QUEUE) != 0 ||
        set_int(s, ZMQ_XPUB_NODROP, 1) != 0 || set_int(s, ZMQ_XPUB_VERBOSE, 1) != 0 ||
        /* A connection that has not finished its handshake within 2 s (a legitimate peer takes
         * milliseconds) is dropped, so raw connections cannot pile up and take the traced
         * program's file descriptors: holding N of them takes N new connections every 2 s. */
        set_int(s, ZMQ_HANDSHAKE_IVL, 2000) != 0 || set_int(s, ZMQ_BACKLOG, 32) != 0 ||
        /* Only subscriptions come in: bound what an unauthenticated peer can make us hold. */
        zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &(int64_t){4096}, sizeof(int64_t)) != 0)
        return zmq_fail(err, "cannot configure the publisher for", p->endpoint);
    if (strncmp(p->endpoint, "tcp://[", 7) == 0 && set_int(s, ZMQ_IPV6, 1) != 0)
        return zmq_fail(err, "cannot enable IPv6 for", p->endpoint);
    if (o->clients != NULL && o->curve == NULL)
        return err_set(err, ERR_INVAL, "a list of clients needs the server's CURVE keys");
    if (o->curve != NULL &&
        (set_int(s, ZMQ_CURVE_SERVER, 1) != 0 ||
         zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, o->curve->secret_key, TP_KEY_Z85_LEN) != 0))
        return zmq_fail(err, "cannot set up CURVE encryption for", p->endpoint);
    return 0;
}

static int bind_endpoint(tp_pub *p, err_msg *err) {
    if (zmq_bind(p->sock, p->endpoint) != 0) {
        if (zmq_errno() == EADDRINUSE)
            return err_set(err, ERR_EXIST, "cannot bind %s: address already in use",
                              p->endpoint);
        return zmq_fail(err, "cannot bind", p->endpoint);
    }
    char last[TP_ENDPOINT_MAX];
    size_t len = sizeof last;
    if (zmq_getsockopt(p->sock, ZMQ_LAST_ENDPOINT, last, &len) == 0 && len > 1 &&
        len <= sizeof last)
        memcpy(p->endpoint, last, len);
    const char *path = p->endpoint + 6;
    if (strncmp(p->endpoint, "ipc://", 6) == 0) {
        struct stat st;
        /* Remember which file is ours (to remove it, and only it), then let only our user
         * connect, wherever the file is. */
        if (lstat(path, &st) != 0)
            return err_set(err, ERR_IO, "cannot find socket file %s: %s", path, strerror(errno));
        snprintf(p->ipc_path, sizeof p->ipc_path, "%s", path);
        p->ipc_dev = st.st_dev;
        p->ipc_ino = st.st_ino;
        if (chmod(path, 0600) != 0)
            return err_set(err, ERR_IO, "cannot make socket file %s private: %s", path,
                              strerror(errno));
    }
    return 0;
}

/* The connections are counted from the socket's own events: a connection counts once its
 * handshake succeeded and until it goes. Every connection that goes without having succeeded
 * first reports a failed handshake, so the live ones are successes + failures - disconnections.
 * Not fatal when it cannot be set up: a subscribed publisher then reports one. */
static void watch_connections(tp_pub *p) {
    const char *colon = strncmp(p->endpoint, "tcp://", 6) == 0 ? strrchr(p->endpoint, ':') : NULL;
    p->tcp_port = colon ? atoi(colon + 1) : 0;
    p->mon = net_monitor_open(p->ctx, p->sock,
                              ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                                  ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                  ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_DISCONNECTED);
}

/* A tcp connection past PUB_MAX_CONNECTIONS is shut down (libzmq then closes it as it would any
 * connection whose peer left): raw connections cannot take the traced program's file descriptors.
 * The descriptor is libzmq's, and may have been closed and reused by the program since the event
 * was sent: it is touched only when it still is a connected socket on our own port. */
static void shed(const tp_pub *p, int fd) {
    struct sockaddr_storage me, peer;
    socklen_t ml = sizeof me, pl = sizeof peer;
    if (p->tcp_port <= 0 || getsockname(fd, (struct sockaddr *)&me, &ml) != 0 ||
        getpeername(fd, (struct sockaddr *)&peer, &pl) != 0)
        return;
    int port = me.ss_family == AF_INET    ? ntohs(((struct sockaddr_in *)&me)->sin_port)
               : me.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&me)->sin6_port)
                                          : -1;
    if (port == p->tcp_port)
        shutdown(fd, SHUT_RDWR);
}

/* Takes the connection events that came. */
static void read_connections(tp_pub *p) {
    uint16_t event;
    uint32_t value;
    while (net_monitor_next(p->mon, &event, &value, NULL, 0)) {
        if (event == ZMQ_EVENT_ACCEPTED) {
            net_peers_connected(p->peers, (int)value);
            if (++p->accepted - p->disconnects > PUB_MAX_CONNECTIONS)
                shed(p, (int)value);
        } else if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
            p->handshakes++;
        } else if (event == ZMQ_EVENT_DISCONNECTED) {
            net_peers_disconnected(p->peers, (int)value);
            p->disconnects++;
        } else if (event != 0) {
            p->failures++;
        }
    }
}

/* 0 when nobody subscribes; else the connections, at least one. */
static int live_subscribers(const tp_pub *p) {
    if (!p->sub_all && !p->sub_batches && !p->sub_mine)
        return 0;
    int64_t n = p->handshakes + p->failures - p->disconnects;
    return n < 1 ? 1 : n > INT32_MAX ? INT32_MAX : (int)n;
}

tp_pub *tp_pub_new(const tp_pub_opts *opts, err_msg *err) {
    tp_pub_opts o = {0};
    if (opts != NULL)
        o = *opts;
    if (o.sndhwm < 0) {
        err_set(err, ERR_INVAL, "negative high-water mark %d", o.sndhwm);
        return NULL;
    }
    tp_pub *p = calloc(1, sizeof *p);
    if (p == NULL) {
        err_set(err, ERR_NOMEM, "out of memory");
        return NULL;
    }
    p->owner = getpid();
    p->producer = o.producer;
    int is_default;
    if (choose_endpoint(&o, p->endpoint, &is_default, err) < 0)
        goto fail;
    p->ctx = zmq_ctx_new();
    if (p->ctx == NULL) {
        zmq_fail(err, "cannot create a ZeroMQ context for", p->endpoint);
        goto fail;
    }
    zmq_ctx_set(p->ctx, ZMQ_BLOCKY, 0);
    p->sock = zmq_socket(p->ctx, ZMQ_XPUB);
    if (p->sock == NULL) {
        zmq_fail(err, "cannot create a publisher socket for", p->endpoint);
        goto fail;
    }
    if (configure(p, &o, err) < 0)
        goto fail;
    /* The check of client keys is in place before anyone can connect. */
    if (o.clients != NULL && (p->zap = net_zap_start(p->ctx, o.clients, o.curve->public_key, err)) == NULL)
        goto fail;
    if (bind_endpoint(p, err) < 0)
        goto fail;
    p->peers = net_peers_new(p->endpoint);
    watch_connections(p);
    return p;
fail:
    tp_pub_destroy(&p);
    return NULL;
}

void tp_pub_destroy(tp_pub **pp) {
    if (pp == NULL || *pp == NULL)
        return;
    tp_pub *p = *pp;
    /* After fork (a traced program's worker processes) the context's threads and the socket
     * file belong to the parent: terminating the context here would wait forever and removing
     * the file would cut the parent off, so a child only frees memory. */
    if (p->owner == getpid()) {
        net_monitor_close(p->mon, p->sock);
        if (p->sock != NULL) {
            set_int(p->sock, ZMQ_LINGER, p->linger_ms);
            zmq_close(p->sock);
        }
        /* Stopped after the socket is closed, so that nobody is let in unchecked. */
        net_zap_stop(&p->zap);
        /* Returns once queued batches are written or the linger time is up. */
        while (p->ctx != NULL && zmq_ctx_term(p->ctx) != 0 && zmq_errno() == EINTR)
            ;
        struct stat st;
        if (p->ipc_path[0] != '\0' && lstat(p->ipc_path, &st) == 0 && st.st_dev == p->ipc_dev &&
            st.st_ino == p->ipc_ino)
            unlink(p->ipc_path);
    }
    net_zap_stop(&p->zap); /* in a forked child: its memory only */
    net_peers_destroy(&p->peers);
    free(p);
    *pp = NULL;
}

const char *tp_pub_endpoint(const tp_pub *pub) { return pub->endpoint; }

void tp_pub_set_linger(tp_pub *pub, int linger_ms) {
    pub->linger_ms = linger_ms > 0 ? linger_ms : 0;
}

/* One frame, retried on EINTR: 0, EAGAIN or another errno. */
static int send_frame(tp_pub *pub, const void *data, size_t len, int more) {
    for (;;) {
        if (zmq_send(pub->sock, data, len, ZMQ_DONTWAIT | (more ? ZMQ_SNDMORE : 0)) >= 0)
            return 0;
        int e = zmq_errno();
        if (e != EINTR)
            return e;
    }
}

/* The batch under its topic, 'B' + producer id (net_topic.h): 0, EAGAIN or another errno. Once the
 * topic frame is taken the batch frame is too (libzmq checks the high-water mark per message). */
static int send_once(tp_pub *pub, const void *batch, size_t len) {
    uint8_t topic[NET_TOPIC_LEN];
    net_topic_encode(topic, NET_TOPIC_BATCH, pub->producer);
    int e = send_frame(pub, topic, sizeof topic, 1);
    return e != 0 ? e : send_frame(pub, batch, len, 0);
}

/* Sends to the queues with room; the full ones drop it (their subscribers report the loss). */
static int send_lossy(tp_pub *pub, const void *batch, size_t len) {
    if (set_int(pub->sock, ZMQ_XPUB_NODROP, 0) != 0)
        return ERR_ZMQ;
    int e = send_once(pub, batch, len);
    set_int(pub->sock, ZMQ_XPUB_NODROP, 1);
    if (e != 0)
        return ERR_ZMQ;
    pub->sent++;
    pub->bytes += len;
    return ERR_AGAIN;
}

static void note_producer(tp_pub *pub, const void *batch, size_t len) {
    tp_batch_hdr h;
    if (len >= TP_BATCH_HDR_SIZE) {
        memcpy(&h, batch, sizeof h);
        pub->producer = h.producer;
    }
}

int tp_pub_send_wait(tp_pub *pub, const void *batch, size_t len, int timeout_ms) {
    note_producer(pub, batch, len);
    double deadline = cm_now_s() + (timeout_ms > 0 ? timeout_ms : 0) / 1000.0;
    for (;;) {
        int e = send_once(pub, batch, len);
        if (e == 0) {
            pub->sent++;
            pub->bytes += len;
            return 0;
        }
        if (e != EAGAIN)
            return ERR_ZMQ;
        if (cm_now_s() >= deadline)
            return send_lossy(pub, batch, len);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* One notice from a peer, taken: whether it asks for a keyframe. */
static int take_notice(tp_pub *pub, const uint8_t *note, size_t n) {
    uint64_t producer, lost;
    if (n > 1 && note[0] == 1 && net_key_decode(note + 1, n - 1, &producer))
        /* a relay's second subscriber of batches it passes on already: a newcomer too */
        return producer == 0 || producer == pub->producer;
    if (n > 1 && note[0] == 1 && net_loss_decode(note + 1, n - 1, &producer, &lost)) {
        /* A report is untrusted: it can add no more than was ever sent. */
        if (producer == pub->producer && lost > 0) {
            uint64_t room = pub->sent - pub->dropped;
            pub->dropped += lost < room ? lost : room;
            pub->lost_since_keyframe = 1;
        }
        return 0;
    }
    /* A notice is 1 and the topic on each subscribe (a new viewer: keyframe), 0 and the
     * topic once nobody subscribes to it any more. Topics that are not batches of this
     * producer (summaries, clock requests, other producers' batches) are not ours. */
    if (n < 1 || n > 1 + NET_TOPIC_LEN || note[0] > 1)
        return 0;
    int on = note[0] == 1, *flag = NULL;
    if (n == 1)
        flag = &pub->sub_all;
    else if (n == 2 && note[1] == NET_TOPIC_BATCH)
        flag = &pub->sub_batches;
    else if (n == 1 + NET_TOPIC_LEN && note[1] == NET_TOPIC_BATCH && pub->producer != 0 &&
             net_loss_get_u64(note + 2) == pub->producer)
        flag = &pub->sub_mine;
    if (flag == NULL)
        return 0;
    *flag = on;
    return on;
}

int tp_pub_poll(tp_pub *pub, int *keyframe) {
    int j = 0;
    read_connections(pub);
    zmq_msg_t m;
    zmq_msg_init(&m);
    /* A bounded number a call: a peer that floods never holds the caller (the tracer's flush
     * thread) here; what is left waits for the next call. */
    for (int k = 0; k < PUB_NOTICES_PER_POLL; k++) {
        if (zmq_msg_recv(&m, pub->sock, ZMQ_DONTWAIT) < 0) {
            if (zmq_errno() == EINTR)
                continue;
            break;
        }
        const uint8_t *note = zmq_msg_data(&m);
        size_t n = zmq_msg_size(&m);
        /* what a peer makes libzmq hold is bounded: past it, its connections are shut */
        int ours = !zmq_msg_more(&m) && net_fwd_ours(note, n);
        if (!net_peers_note(pub->peers, &m, n > 0 && note[0] == 1, ours))
            read_connections(pub); /* the ends of the connections it shut, before the next notice */
        else if (ours)
            j |= take_notice(pub, note, n);
        while (zmq_msg_more(&m) && zmq_msg_recv(&m, pub->sock, ZMQ_DONTWAIT) >= 0)
            ;
    }
    zmq_msg_close(&m);
    if (pub->lost_since_keyframe) {
        double now = cm_now_s();
        if (pub->last_loss_keyframe == 0 || now - pub->last_loss_keyframe >= LOSS_KEYFRAME_EVERY_S) {
            pub->lost_since_keyframe = 0;
            pub->last_loss_keyframe = now;
            j = 1;
        }
    }
    if (keyframe != NULL)
        *keyframe = j;
    return live_subscribers(pub);
}

void tp_pub_stats_get(const tp_pub *pub, tp_pub_stats *out) {
    out->sent = pub->sent;
    out->dropped = pub->dropped;
    out->bytes = pub->bytes;
    out->subscribers = live_subscribers(pub);
    net_peers_stats ps;
    net_peers_stats_get(pub->peers, &ps);
    out->subs_dropped = ps.dropped;
    out->peers_shut = ps.shut;
}

int tp_pub_send(tp_pub *pub, const void *batch, size_t len) {
    return tp_pub_send_wait(pub, batch, len, 0);
}
