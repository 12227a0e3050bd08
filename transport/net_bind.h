/*
 * Whether an endpoint may be bound by a publishing socket (the publisher's and the relay's):
 * tcp:// on a loopback address, or beyond with CURVE keys (or an explicit insecure flag); ipc://
 * with a file path nobody else listens on. Abstract sockets and other transports are refused.
 */
#ifndef SYNCTOP_NET_BIND_H
#define SYNCTOP_NET_BIND_H

#include "synctop/error.h"
#include "synctop/net.h"

/* ep: a resolved endpoint (tp_endpoint_resolve); curve: the server's keys (the secret one
 * needed) or NULL. Returns 0, or a negative ERR_* code with the reason in err. */
int net_bind_check(const char *ep, const tp_keypair *curve, int insecure, err_msg *err);

#endif
