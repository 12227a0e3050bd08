/* What the peers of an XPUB socket may make libzmq hold (net_peers.h). */
#include "net_peers.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <zmq.h>

#define PEERS_MAX 256   /* peers followed; past it, the others count as one */
#define CONNS_MAX 1024  /* connections followed (a tcp publisher takes 64 at most) */
#define PEER_NAME_MAX 96

struct peer {
    char name[PEER_NAME_MAX]; /* as libzmq's Peer-Address says it */
    uint32_t subs;            /* subscriptions held */
    uint32_t conns;           /* connections open */
};

struct conn {
    int fd;
    size_t peer;
    int shut; /* shut already: libzmq has yet to see it end */
};

struct net_peers {
    int tcp_port;                   /* the socket's port, 0 when not tcp */
    char ipc_path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* its socket file, "" when not ipc */
    struct peer peers[PEERS_MAX];
    size_t n_peers;
    struct conn conns[CONNS_MAX];
    size_t n_conns;
    uint64_t held, dropped, shut;
};

net_peers *net_peers_new(const char *endpoint) {
    net_peers *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    if (strncmp(endpoint, "ipc://", 6) == 0) {
        snprintf(p->ipc_path, sizeof p->ipc_path, "%s", endpoint + 6);
    } else if (strncmp(endpoint, "tcp://", 6) == 0) {
        const char *colon = strrchr(endpoint, ':');
        p->tcp_port = colon != NULL ? atoi(colon + 1) : 0;
    }
    return p;
}

void net_peers_destroy(net_peers **pp) {
    if (pp != NULL) {
        free(*pp);
        *pp = NULL;
    }
}

/* The peer's name of a connection, as libzmq makes its Peer-Address (the numeric address, and for
 * a unix socket the peer's credentials after it); 0, or -1 when fd is no connected socket. */
static int name_of(int fd, char *out, size_t cap) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char host[NI_MAXHOST];
    if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0 ||
        getnameinfo((struct sockaddr *)&ss, len, host, sizeof host, NULL, 0, NI_NUMERICHOST) != 0)
        return -1;
    struct ucred cred;
    socklen_t cl = sizeof cred;
    if (ss.ss_family == AF_UNIX && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0)
        snprintf(out, cap, "%s:%u:%u:%d", host, (unsigned)cred.uid, (unsigned)cred.gid, (int)cred.pid);
    else
        snprintf(out, cap, "%s", host);
    return 0;
}

/* Whether fd is a connection to our own endpoint (not a descriptor the program reused). */
static int ours(const net_peers *p, int fd) {
    struct sockaddr_storage me;
    socklen_t ml = sizeof me;
    if (getsockname(fd, (struct sockaddr *)&me, &ml) != 0)
        return 0;
    if (me.ss_family == AF_UNIX)
        return p->ipc_path[0] != '\0' && strncmp(((struct sockaddr_un *)&me)->sun_path, p->ipc_path, sizeof p->ipc_path) == 0;
    int port = me.ss_family == AF_INET    ? ntohs(((struct sockaddr_in *)&me)->sin_port)
               : me.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&me)->sin6_port)
                                          : -1;
    return p->tcp_port > 0 && port == p->tcp_port;
}

/* The peer named name, added when new; when the table is full, a peer with nothing open or held
 * makes room, else the last one stands for every other. */
static size_t peer_of(net_peers *p, const char *name) {
    for (size_t i = 0; i < p->n_peers; i++)
        if (strncmp(p->peers[i].name, name, PEER_NAME_MAX - 1) == 0)
            return i;
    size_t i = p->n_peers;
    if (i == PEERS_MAX) {
        for (i = 0; i < PEERS_MAX && (p->peers[i].subs > 0 || p->peers[i].conns > 0); i++)
            ;
        if (i == PEERS_MAX)
            return PEERS_MAX - 1;
    } else {
        p->n_peers++;
    }
    p->peers[i] = (struct peer){0};
    snprintf(p->peers[i].name, sizeof p->peers[i].name, "%s", name);
    return i;
}

void net_peers_connected(net_peers *p, int fd) {
    char name[PEER_NAME_MAX];
    if (p == NULL || p->n_conns == CONNS_MAX || name_of(fd, name, sizeof name) != 0)
        return;
    size_t k = peer_of(p, name);
    p->peers[k].conns++;
    p->conns[p->n_conns++] = (struct conn){fd, k, 0};
}

/* What peer k held is free (its connections are gone, or shut). */
static void peer_release(net_peers *p, size_t k) {
    p->held -= p->peers[k].subs;
    p->peers[k].subs = 0;
}

void net_peers_disconnected(net_peers *p, int fd) {
    for (size_t i = 0; p != NULL && i < p->n_conns; i++) {
        if (p->conns[i].fd != fd)
            continue;
        size_t k = p->conns[i].peer;
        p->conns[i] = p->conns[--p->n_conns];
        if (--p->peers[k].conns == 0)
            peer_release(p, k);
        return;
    }
}

/* Shuts every connection of peer k (libzmq then closes them, and frees what they held). */
static void peer_shut(net_peers *p, size_t k) {
    char name[PEER_NAME_MAX];
    for (size_t i = 0; i < p->n_conns; i++) {
        struct conn *c = &p->conns[i];
        if (c->peer == k && !c->shut && ours(p, c->fd) && name_of(c->fd, name, sizeof name) == 0 &&
            strcmp(name, p->peers[k].name) == 0 && shutdown(c->fd, SHUT_RDWR) == 0) {
            c->shut = 1;
            p->shut++;
        }
    }
    peer_release(p, k);
}

int net_peers_note(net_peers *p, void *msg, int on, int is_ours) {
    if (p == NULL)
        return 1;
    const char *name = zmq_msg_gets(msg, "Peer-Address");
    if (name == NULL && !on)
        return 1; /* libzmq's own, for a connection that ended: nobody's any more */
    size_t k = peer_of(p, name != NULL ? name : "");
    struct peer *e = &p->peers[k];
    if (!on && is_ours) {
        if (e->subs > 0) {
            e->subs--;
            p->held--;
        }
        return 1;
    }
    size_t shut = k;
    if (is_ours && e->subs < NET_PEER_SUBS && p->held >= NET_PEERS_SUBS) {
        /* past the total: the peer that holds most goes */
        for (size_t i = 0; i < p->n_peers; i++)
            if (p->peers[i].subs > p->peers[shut].subs)
                shut = i;
    } else if (is_ours && e->subs < NET_PEER_SUBS) {
        e->subs++;
        p->held++;
        return 1;
    }
    p->dropped++;
    peer_shut(p, shut);
    return 0;
}

void net_peers_stats_get(const net_peers *p, net_peers_stats *out) {
    memset(out, 0, sizeof *out);
    if (p != NULL) {
        out->dropped = p->dropped;
        out->shut = p->shut;
        out->held = p->held;
    }
}
