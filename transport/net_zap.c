/*
 * The ZAP handler (net_zap.h). libzmq asks it about each CURVE client once the client has proved
 * that it holds the secret half of the public key it presents: a request on the context's
 * inproc://zeromq.zap.01 (version "1.0", request id, domain, address, routing id, mechanism, and
 * for CURVE the client's 32-byte public key), and the handshake waits for the answer (version,
 * request id, status "200" or "400", status text, user id, metadata). The handshake interval of
 * the server socket bounds that wait, so the answer must come at once: a thread of its own does
 * nothing else, looking the key up in the sorted list (a binary search), and sleeps in zmq_poll
 * between requests. It blocks every signal, so the traced program's handlers never run on it, and
 * prints nothing. Another socket pair of the same context tells it to stop.
 *
 * libzmq admits every client of a context that has no handler, so the handler is bound before the
 * server socket and stays until that socket is closed; a request it cannot read is refused.
 */
#include "net_zap.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define ZAP_FRAMES 7      /* version, request id, domain, address, routing id, mechanism, key */
#define ZAP_FRAME_MAX 256 /* each frame's bytes kept (libzmq's are shorter) */

struct net_zap {
    pid_t owner; /* the process that started it: a forked child has no such thread */
    void *ctx;
    void *zap;     /* REP on ZAP_ENDPOINT, the thread's */
    void *stop_rx; /* PAIR, the thread's end */
    void *stop_tx; /* PAIR, the owner's end */
    pthread_t thread;
    int started;
    tp_clients *clients;
    uint8_t server[32];
};

/* One request, as its frames came. */
typedef struct zap_request {
    uint8_t frame[ZAP_FRAMES][ZAP_FRAME_MAX];
    size_t len[ZAP_FRAMES]; /* as sent, may exceed ZAP_FRAME_MAX */
    size_t n;               /* frames received, counting those past ZAP_FRAMES */
} zap_request;

/* Reads a whole request: every frame is taken, so the next one starts clean. 0, or -1 when none. */
static int zap_recv(void *sock, zap_request *q) {
    q->n = 0;
    for (;;) {
        uint8_t spill[1];
        int more = 0;
        size_t more_len = sizeof more;
        int n = q->n < ZAP_FRAMES ? zmq_recv(sock, q->frame[q->n], ZAP_FRAME_MAX, ZMQ_DONTWAIT)
                                  : zmq_recv(sock, spill, sizeof spill, ZMQ_DONTWAIT);
        if (n < 0) {
            if (zmq_errno() == EINTR)
                continue;
            return q->n > 0 ? 0 : -1;
        }
        if (q->n < ZAP_FRAMES)
            q->len[q->n] = (size_t)n;
        q->n++;
        if (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &more_len) != 0 || !more)
            return 0;
    }
}

static int frame_is(const zap_request *q, size_t i, const char *text) {
    size_t n = strlen(text);
    return q->len[i] == n && memcmp(q->frame[i], text, n) == 0;
}

/* Whether the request is a well-formed CURVE one whose client is admitted. */
static int zap_admits(const net_zap *z, const zap_request *q) {
    if (q->n != ZAP_FRAMES || !frame_is(q, 0, "1.0") || !frame_is(q, 5, "CURVE") || q->len[6] != 32)
        return 0;
    return memcmp(q->frame[6], z->server, 32) == 0 || tp_clients_has(z->clients, q->frame[6]);
}

static void zap_answer(net_zap *z) {
    zap_request q;
    if (zap_recv(z->zap, &q) != 0)
        return;
    int ok = zap_admits(z, &q);
    /* A request id longer than kept cannot be echoed: libzmq then drops the connection itself. */
    size_t id_len = q.n > 1 ? (q.len[1] < ZAP_FRAME_MAX ? q.len[1] : ZAP_FRAME_MAX) : 0;
    const char *text = ok ? "OK" : "client key not listed";
    /* A REP socket must answer every request before it can take the next one. */
    zmq_send(z->zap, "1.0", 3, ZMQ_SNDMORE);
    zmq_send(z->zap, q.frame[1], id_len, ZMQ_SNDMORE);
    zmq_send(z->zap, ok ? "200" : "400", 3, ZMQ_SNDMORE);
    zmq_send(z->zap, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(z->zap, "", 0, ZMQ_SNDMORE);
    zmq_send(z->zap, "", 0, 0);
}

static void *zap_main(void *arg) {
    net_zap *z = arg;
    zmq_pollitem_t items[2] = {{z->zap, 0, ZMQ_POLLIN, 0}, {z->stop_rx, 0, ZMQ_POLLIN, 0}};
    for (;;) {
        if (zmq_poll(items, 2, -1) < 0) {
            int e = zmq_errno();
            if (e == ETERM)
                break;
            if (e != EINTR) {
                /* Leaving would let every client in: wait and try again. */
                struct timespec ts = {0, 10000000};
                nanosleep(&ts, NULL);
            }
            continue;
        }
        if (items[1].revents & ZMQ_POLLIN)
            break;
        if (items[0].revents & ZMQ_POLLIN)
            zap_answer(z);
    }
    zmq_close(z->zap);
    zmq_close(z->stop_rx);
    return NULL;
}

static int set_linger0(void *sock) {
    int zero = 0;
    return zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
}

net_zap *net_zap_start(void *ctx, const tp_clients *clients, const char *server_public, err_msg *err) {
    net_zap *z = calloc(1, sizeof *z);
    if (z == NULL || (z->clients = net_clients_copy(clients)) == NULL) {
        free(z);
        err_set(err, ERR_NOMEM, "out of memory");
        return NULL;
    }
    z->owner = getpid();
    z->ctx = ctx;
    char stop[64];
    snprintf(stop, sizeof stop, "inproc://synctop-zap-stop-%p", (void *)z);
    if (server_public == NULL || strlen(server_public) != TP_KEY_Z85_LEN ||
        zmq_z85_decode(z->server, server_public) == NULL) {
        err_set(err, ERR_INVAL, "the server's public key is not %d characters of Z85", TP_KEY_Z85_LEN);
        goto fail;
    }
    z->zap = zmq_socket(ctx, ZMQ_REP);
    if (z->zap == NULL || set_linger0(z->zap) != 0 || zmq_bind(z->zap, ZAP_ENDPOINT) != 0) {
        err_set(err, ERR_ZMQ, "cannot set up the check of client keys (%s): %s", ZAP_ENDPOINT,
                zmq_strerror(zmq_errno()));
        goto fail;
    }
    z->stop_rx = zmq_socket(ctx, ZMQ_PAIR);
    z->stop_tx = zmq_socket(ctx, ZMQ_PAIR);
    if (z->stop_rx == NULL || z->stop_tx == NULL || set_linger0(z->stop_rx) != 0 || set_linger0(z->stop_tx) != 0 ||
        zmq_bind(z->stop_rx, stop) != 0 || zmq_connect(z->stop_tx, stop) != 0) {
        err_set(err, ERR_ZMQ, "cannot set up the check of client keys: %s", zmq_strerror(zmq_errno()));
        goto fail;
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&z->thread, NULL, zap_main, z);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        err_set(err, ERR_IO, "cannot start the thread that checks client keys: %s", strerror(rc));
        goto fail;
    }
    z->started = 1;
    pthread_setname_np(z->thread, "synctop-zap");
    return z;
fail:
    net_zap_stop(&z);
    return NULL;
}

void net_zap_stop(net_zap **zp) {
    if (zp == NULL || *zp == NULL)
        return;
    net_zap *z = *zp;
    if (z->owner == getpid()) {
        if (z->started) {
            int timeout = 1000;
            zmq_setsockopt(z->stop_tx, ZMQ_SNDTIMEO, &timeout, sizeof timeout);
            /* Should the word not go through, shutting the context down wakes the thread. */
            if (zmq_send(z->stop_tx, "", 0, 0) != 0)
                zmq_ctx_shutdown(z->ctx);
            pthread_join(z->thread, NULL);
        } else {
            if (z->zap != NULL)
                zmq_close(z->zap);
            if (z->stop_rx != NULL)
                zmq_close(z->stop_rx);
        }
        if (z->stop_tx != NULL)
            zmq_close(z->stop_tx);
    }
    tp_clients_destroy(&z->clients);
    free(z);
    *zp = NULL;
}
