/*
 * What the peers of an XPUB socket (a publisher's, a relay's) may make libzmq hold. libzmq keeps
 * every subscription a connected peer sends, per connection, until that connection ends, and no
 * mode of it (XPUB_MANUAL included, which keeps them for the unsubscriptions it owes) lets a
 * socket refuse one: so a peer's subscriptions are counted here as their notices come up
 * (XPUB_VERBOSE: every subscription; an unsubscription once the last holder of its topic lets go)
 * and a peer past its bound, past the total, or that sends a subscription synctop never sends, has
 * its connections shut, which is when libzmq frees what it held for them.
 *
 * A peer is what libzmq's Peer-Address says of a connection: the process (uid, gid and pid) over
 * ipc, the address over tcp (every connection from one address counts as one peer, so a flood from
 * a host shuts that host's viewers too). The connections are known from the socket's own events
 * (ZMQ_EVENT_ACCEPTED, ZMQ_EVENT_DISCONNECTED); a descriptor is shut only while it still is a
 * connection to this socket's own endpoint from that peer (libzmq may have closed it, and the
 * program reused the number, by the time its event is read).
 */
#ifndef SYNCTOP_NET_PEERS_H
#define SYNCTOP_NET_PEERS_H

#include <stddef.h>
#include <stdint.h>

#define NET_PEER_SUBS 1024   /* subscriptions one peer may hold */
#define NET_PEERS_SUBS 4096  /* subscriptions all peers together may hold */
#define NET_PEER_QUEUE 16    /* subscriptions of a connection libzmq takes in before the socket reads them */

typedef struct net_peers net_peers;

/* The peers of the socket bound to endpoint (tcp://HOST:PORT or ipc://PATH, as bound); NULL when
 * out of memory (the caller goes on unbounded: it cannot shut what it cannot count). */
net_peers *net_peers_new(const char *endpoint);
void net_peers_destroy(net_peers **peers);
/* A connection accepted (its descriptor, from ZMQ_EVENT_ACCEPTED) and one gone (ZMQ_EVENT_DISCONNECTED):
 * when the last connection of a peer goes, what it held is free again. */
void net_peers_connected(net_peers *peers, int fd);
void net_peers_disconnected(net_peers *peers, int fd);
/* A notice read from the socket: msg (a zmq_msg_t, for whose it is), a subscription (on 1) or an
 * unsubscription (0), ours: whether it is one synctop sends. Returns 1 to take it, 0 when it is
 * dropped: its peer's connections are shut (it went past its bound or the total, or it is not
 * ours). */
int net_peers_note(net_peers *peers, void *msg, int on, int ours);

typedef struct net_peers_stats {
    uint64_t dropped; /* subscriptions dropped */
    uint64_t shut;    /* connections shut for them */
    uint64_t held;    /* subscriptions counted now, all peers */
} net_peers_stats;
void net_peers_stats_get(const net_peers *peers, net_peers_stats *out);

#endif
