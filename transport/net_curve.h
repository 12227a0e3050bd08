/*
 * The client side of CURVE, as the subscriber and the relay's sockets towards its upstreams set it
 * up: the server's public key pinned, and a key pair of the client's own or a throwaway one.
 */
#ifndef SYNCTOP_NET_CURVE_H
#define SYNCTOP_NET_CURVE_H

#include "synctop/error.h"
#include "synctop/net.h"

/* Makes sock a CURVE client of the server whose public key is server_key (Z85), presenting the
 * pair client (its secret half needed) or, when NULL, a throwaway one, whose public key goes to
 * used_public (may be NULL). 0, or a negative ERR_* code with err set. */
int net_curve_client(void *sock, const char *server_key, const tp_keypair *client,
                     char used_public[TP_KEY_Z85_LEN + 1], err_msg *err);

#endif
