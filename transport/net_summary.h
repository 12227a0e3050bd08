/*
 * The summer (net_summary.c): per producer and per interval, the busy, blocked and event figures of
 * tp_summary, from the batches a relay feeds it. One thread uses it at a time.
 */
#ifndef SYNCTOP_NET_SUMMARY_H
#define SYNCTOP_NET_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "synctop/net.h"

typedef struct net_summer net_summer;

/* relay: the id the summaries carry. NULL when out of memory. */
net_summer *net_summer_new(uint64_t relay);
void net_summer_destroy(net_summer **m);
/* Forgets every producer (summaries stopped: nobody wants them). */
void net_summer_reset(net_summer *m);
/* Adds one batch (exactly len bytes); 0, or a negative ERR_* code with a message when the batch
 * does not decode (nothing of it is counted) or a bound is reached. */
int net_summer_add(net_summer *m, const void *batch, size_t len, err_msg *err);
/* Calls emit with the summary of each producer that sent a batch since the last flush, for the
 * interval [start_ns, start_ns + interval_ns), and starts the next interval. Returns how many. */
size_t net_summer_flush(net_summer *m, uint64_t start_ns, uint64_t interval_ns,
                        void (*emit)(void *ctx, const tp_summary *s), void *ctx);

#endif
