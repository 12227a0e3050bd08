/*
 * The ZAP handler (ZeroMQ's RFC 27) of a context whose CURVE server socket admits listed clients
 * only (tp_pub_opts.clients, tp_relay_opts.clients).
 */
#ifndef SYNCTOP_NET_ZAP_H
#define SYNCTOP_NET_ZAP_H

#include "synctop/error.h"
#include "synctop/net.h"

typedef struct net_zap net_zap;

/* Binds ctx's ZAP endpoint and answers its requests from a thread of its own: 200 for a CURVE
 * client whose public key is in clients (copied) or is server_public (Z85: whoever holds the
 * server's key pair may watch too), 400 for any other. Call it before the server socket binds,
 * so that no client ever finds the context without a handler (libzmq then admits everyone).
 * NULL with err set when it cannot. */
net_zap *net_zap_start(void *ctx, const tp_clients *clients, const char *server_public, err_msg *err);
/* Stops the thread and closes its sockets: after the server socket is closed, before the context
 * is terminated. In a process forked after net_zap_start it only frees memory. NULL: nothing. */
void net_zap_stop(net_zap **z);

/* A copy of a list of clients (net_clients.c), NULL when out of memory. */
tp_clients *net_clients_copy(const tp_clients *c);

#endif
