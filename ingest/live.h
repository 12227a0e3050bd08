/*
 * Following live publishers until their programs end: the one loop behind `record`, `report` of a
 * live source and `run` without its viewer. The viewer has a loop of its own (it also reads the
 * keyboard) and ends the same way: tp_sub_all_ended.
 */
#ifndef SYNCTOP_LIVE_H
#define SYNCTOP_LIVE_H

#include <signal.h>
#include <stddef.h>

#include "synctop/error.h"
#include "synctop/net.h"
#include "store.h"

typedef enum live_end {
    LIVE_ENDED = 1, /* every producer seen sent its last batch */
    LIVE_STOPPED,   /* *stop was set (a signal) */
    LIVE_GONE,      /* a quiet second with every ipc publisher gone: killed without its last batch */
    LIVE_DONE,      /* on_tick said so (a duration, the traced program ended quietly) */
    LIVE_FAILED,    /* receiving failed, or on_batch did: err says why */
    LIVE_UNANSWERED /* wait_s passed and no publisher answered (no connection, no handshake refused) */
} live_end;

typedef struct live_opts {
    int poll_ms;                  /* the longest wait for a batch before on_tick (default 250) */
    volatile sig_atomic_t *stop;  /* may be NULL */
    /* Each batch; returns 0 to go on, or a negative code (with err set) to stop. */
    int (*on_batch)(void *ctx, const tp_sub_msg *m, err_msg *err);
    /* After each wait, with or without a batch; returns 1 to stop (LIVE_DONE). May be NULL. */
    int (*on_tick)(void *ctx);
    /* Each message that is not a batch. May be NULL. */
    void (*on_malformed)(void *ctx, const err_msg *err);
    /* Once, when a publisher refused the handshake (a wrong server key, keys on one side only, or
     * our client key not on its list: tp_sub_handshake_failed, tp_sub_client_refused) and nothing
     * has been received yet. May be NULL. */
    void (*on_refused)(void *ctx, const tp_sub *sub);
    /* Once per notice a relay above sent (tp_sub_notice: one per relay and kind). May be NULL. */
    void (*on_notice)(void *ctx, const tp_sub_notice *n);
    void *ctx;
    int keep_after_end; /* more producers may come: LIVE_ENDED is left to on_tick to decide */
    double wait_s;      /* > 0: give up (LIVE_UNANSWERED) when after this long no publisher answered */
    /* ipc endpoints watched for LIVE_GONE (none: never); tcp publishers cannot be told apart from
     * a quiet network, so any tcp source turns LIVE_GONE off. */
    const char *const *endpoints;
    size_t n_endpoints;
} live_opts;

/* Receives until one of the ends above. */
live_end live_follow(tp_sub *sub, const live_opts *o, err_msg *err);

/* Whether every endpoint is an ipc one on which nobody listens any more. */
int live_sources_gone(const char *const *endpoints, size_t n);

/* Gives the store the clock of each host whose relays answered sub (the best answer of the host's
 * relays: the least uncertainty), so that its producers' events go on this process's clock
 * (st_store_set_host_clock). Returns how many hosts' events moved. */
size_t live_clocks_apply(tp_sub *sub, st_store *s);

/* A few words for an end, for "stopped: ..." lines. */
const char *live_end_name(live_end e);

#endif
