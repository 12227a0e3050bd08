/*
 * A ZeroMQ socket's own events (connections, handshakes), read without waiting: the publisher
 * counts its connections with them, the subscriber notices a refused handshake.
 */
#ifndef SYNCTOP_NET_MONITOR_H
#define SYNCTOP_NET_MONITOR_H

#include <stddef.h>
#include <stdint.h>

/* Starts watching sock (of context ctx) for the ZMQ_EVENT_* in events; NULL when it cannot (the
 * caller goes on without). */
void *net_monitor_open(void *ctx, void *sock, int events);
/* The next event that came: 1 with its ZMQ_EVENT_*, its value (a file descriptor for
 * ZMQ_EVENT_ACCEPTED and ZMQ_EVENT_DISCONNECTED) and the endpoint it concerns (cut to eplen - 1
 * bytes; ep may be NULL), 0 when none is waiting. */
int net_monitor_next(void *mon, uint16_t *event, uint32_t *value, char *ep, size_t eplen);
/* Stops watching sock and closes the monitor (NULL: nothing to do). */
void net_monitor_close(void *mon, void *sock);

#endif
