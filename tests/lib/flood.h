/*
 * Hostile peers for the tests: a process that floods a publisher or a relay with subscriptions
 * through a real libzmq XSUB socket, the resident memory of a process as /proc says it, and a
 * healthy subscriber's receiving meanwhile.
 */
#ifndef SYNCTOP_TEST_FLOOD_H
#define SYNCTOP_TEST_FLOOD_H

#include <stdint.h>
#include <sys/types.h>

typedef enum flood_kind {
    FLOOD_LONG = 1, /* 4,000-byte topics, distinct in their last bytes (under a 4 KB message cap) */
    FLOOD_BATCHES   /* 'B' and a distinct producer id: subscriptions of the form synctop sends */
} flood_kind;

/* Starts a child process that connects to endpoint and sends n distinct subscriptions of kind,
 * then writes one byte to done_fd and waits to be killed (it dies with the test, too). */
pid_t flood_start(const char *endpoint, flood_kind kind, int n, int done_fd);
/* The resident memory of process pid in KiB (statm's second field), -1 when it is gone. */
long flood_rss_kib(pid_t pid);

struct tp_sub;
/* Receives on sub until every producer it saw ended, while two flooders (flood_start, done_fd
 * their shared pipe, non-blocking) go on: kills them once both said they are done, and keeps in
 * peak[i] the largest resident memory of watched[i] seen meanwhile (it starts from peak[i]).
 * Returns the events received (not metadata); fails the test past 100 s. */
uint64_t flood_receive(struct tp_sub *sub, const pid_t *watched, long *peak, int n_watched, const pid_t flooders[2],
                       int done_fd);

#endif
