/*
 * ZeroMQ transport: a publisher that never blocks its caller and a subscriber that listens to many
 * producers at once. Raw libzmq only (no czmq: it installs signal handlers and atexit hooks, which a
 * library injected into someone else's program must never do).
 *
 * Endpoints: by default an ipc socket in a private directory of the user
 * ($XDG_RUNTIME_DIR/synctop, else /tmp/synctop-$UID; mode 0700, owned by the user), named PID.sock,
 * so `synctop attach PID` finds it and other users cannot. TCP only when asked; a TCP endpoint
 * whose host is not a loopback address needs CURVE keys or an explicit insecure flag.
 *
 * CURVE here encrypts and authenticates the publisher (subscribers pin its public key). Given a
 * list of client keys (tp_clients), it authenticates the subscribers too: a ZAP handler (ZeroMQ's
 * RFC 27) admits only the clients whose public key is listed, or is the server's own, and refuses
 * the others in the handshake (status 400, which they see as such). Without a list, whoever has
 * the server's public key and can reach the port can subscribe; subscribers without a key pair of
 * their own use a throwaway one.
 *
 * The publisher is an XPUB socket that never blocks: a batch reaches every subscriber whose queue
 * has room, and only a subscriber whose queue is at its high-water mark loses it. That subscriber
 * sees the gap in the sequence numbers, counts it, and reports it to the publisher, which adds the
 * reports up into the drop count it publishes and answers with a keyframe (the lost batches may
 * have carried strings and metadata). Subscription notices tell the publisher when a new viewer
 * arrives (the next batch is then a keyframe) and how many are connected.
 *
 * Each message is a topic frame and a body (docs/FORMAT.md): a batch goes under 'B' and its
 * producer id, a relay's summary of a producer under 'S' and its id, a relay's clock answer under
 * 'C'. A subscriber takes every producer's batches, or only the relays' summaries and the batches
 * of the producers it watches; what nobody subscribes to is never sent.
 */
#ifndef SYNCTOP_NET_H
#define SYNCTOP_NET_H

#include <stddef.h>
#include <stdint.h>

#include "synctop/codec.h"
#include "synctop/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TP_KEY_Z85_LEN 40 /* a CURVE key as Z85 text, without the NUL */
#define TP_ENDPOINT_MAX 512 /* room for any endpoint these functions produce, with the NUL */

/* ---- endpoints ---- */

/* The private directory for ipc endpoints, created 0700 if missing: $XDG_RUNTIME_DIR/synctop, or
 * without it $TMPDIR/synctop-UID (/tmp by default). Refuses (ERR_SECURITY) a directory owned by
 * another user, open to group/others or a symbolic link. When the temporary directory's one is
 * refused so (another user can create it first), it falls back to $HOME/.cache/synctop/HOST and
 * returns 1, with the reason the first was refused in err; else 0. */
int tp_endpoint_dir(char *out, size_t outlen, err_msg *err);
/* "ipc://DIR/PID.sock" for that pid. */
int tp_endpoint_for_pid(long pid, char *out, size_t outlen, err_msg *err);
/* Is this tcp:// endpoint's host a loopback address (127.0.0.0/8, ::1, localhost)? 1, 0, or a
 * negative ERR_* code for an endpoint that is not tcp:// or cannot be parsed. */
int tp_endpoint_is_loopback(const char *endpoint);
/* Normalises what a user typed: "PID" -> ipc endpoint of that pid, "host:port" -> tcp://host:port,
 * "tcp://:port" and ":port" -> tcp://127.0.0.1:port, localhost as 127.0.0.1, "/path" or "./path"
 * -> ipc://path; other scheme://... are copied. A tcp endpoint must have a host and a port (1 to
 * 65535, or "*"). */
int tp_endpoint_resolve(const char *spec, char *out, size_t outlen, err_msg *err);
/* Can a tcp:// endpoint's host name be looked up? 0 when it can, when it is an address, when the
 * endpoint is not tcp://, or when the lookup failed only for now (no DNS answer yet); ERR_NOENT,
 * with the reason in err, when the name is known not to exist. libzmq would retry such a name
 * quietly for ever. */
int tp_endpoint_host_found(const char *endpoint, err_msg *err);
/* Is a process listening on this ipc:// endpoint? 1 yes, 0 no (no socket file, or a file left by a
 * process that died), or a negative ERR_* code (not ipc://, permission denied). */
int tp_endpoint_is_live(const char *endpoint);
/* Does something listen on this endpoint already: an ipc:// one (tp_endpoint_is_live), or a
 * tcp:// one that a connection reaches within 300 ms (a port of "*": not asked)? 1, 0, or a
 * negative ERR_* code. */
int tp_endpoint_in_use(const char *endpoint);
/* Calls each for every PID.sock endpoint in tp_endpoint_dir() (live or not); returns how many, or
 * a negative ERR_* code when the directory cannot be listed. */
int tp_endpoint_each(void (*each)(void *ctx, long pid, const char *endpoint), void *ctx, err_msg *err);
/* Removes the PID.sock files in tp_endpoint_dir() whose process is gone and on which nobody
 * listens. Returns how many it removed, or a negative ERR_* code. tp_pub_new does this when it
 * binds the default endpoint. */
int tp_endpoint_remove_stale(err_msg *err);

/* ---- CURVE keys ---- */

typedef struct tp_keypair {
    char public_key[TP_KEY_Z85_LEN + 1];
    char secret_key[TP_KEY_Z85_LEN + 1];
} tp_keypair;

/* 0 when this libzmq has CURVE (zmq_has("curve")), else ERR_UNSUPPORTED with a message. */
int tp_curve_available(err_msg *err);
int tp_keypair_new(tp_keypair *kp, err_msg *err);
/* Checks that public_key is 40 characters of valid Z85 and, when secret_key is not empty, that it
 * is valid too and that the public key derives from it. */
int tp_keypair_check(const tp_keypair *kp, err_msg *err);
/* Writes BASE.key (both keys, mode 0600) and BASE.pub (public key only). Refuses to overwrite. */
int tp_keypair_save(const tp_keypair *kp, const char *base, err_msg *err);
/* Reads a .key file (both keys) or a .pub file (public key only; secret_key left empty). */
int tp_keypair_load(tp_keypair *kp, const char *path, err_msg *err);
/* Accepts a path to a .pub/.key file or a 40-character Z85 key given inline. */
int tp_public_key_resolve(const char *spec, char out[TP_KEY_Z85_LEN + 1], err_msg *err);
/* Writes a client's pair as tp_keypair_save does, saying in the files that it is a client's. */
int tp_keypair_save_client(const tp_keypair *kp, const char *base, err_msg *err);
/* The base name (without .key/.pub) of this user's own client key pair, which `synctop keygen
 * --client` writes and the viewing verbs use when given none: $XDG_CONFIG_HOME/synctop/client, or
 * $HOME/.config/synctop/client. 0, or ERR_NOENT when neither variable is set, ERR_LIMIT when too long. */
int tp_client_key_base(char *out, size_t outlen, err_msg *err);

/* ---- the clients a publisher admits ---- */

/* An allow-list of client public keys, as `authorized_keys` is for ssh. */
typedef struct tp_clients tp_clients;
#define TP_CLIENTS_MAX 10000 /* keys in one list */

/* Reads a list: a directory, whose files named *.pub each hold keys (as `synctop keygen --client`
 * writes them; other files are not read), or one file of keys. In either, a line is a key (40 Z85
 * characters, then optionally blanks and a comment such as its owner's name), `public-key = KEY`,
 * a comment starting with '#', or blank. Refuses, naming the file and line, a line that is none of
 * these or holds a secret key, a list (file or directory) that every user may write to, more than
 * TP_CLIENTS_MAX keys, and an empty list. */
tp_clients *tp_clients_load(const char *path, err_msg *err);
void tp_clients_destroy(tp_clients **c);
/* How many distinct keys it holds. */
size_t tp_clients_count(const tp_clients *c);
/* Whether it holds this key (32 bytes, as ZAP requests carry it). */
int tp_clients_has(const tp_clients *c, const uint8_t key[32]);

/* ---- publisher ---- */

typedef struct tp_pub tp_pub;

typedef struct tp_pub_opts {
    const char *endpoint;        /* NULL: the default ipc endpoint of this process */
    int sndhwm;                  /* batches queued per subscriber; 0: 1000 */
    const tp_keypair *curve;     /* server keys (secret needed) or NULL */
    int insecure;                /* allow a non-loopback tcp endpoint without CURVE */
    uint64_t producer;           /* the producer id its batches carry (0: learnt from the first
                                    batch), so that a subscription to its topic counts before */
    const tp_clients *clients;   /* with curve: the only clients admitted (with the server's own
                                    key); NULL: any that has the server's public key */
} tp_pub_opts;

tp_pub *tp_pub_new(const tp_pub_opts *opts, err_msg *err);
/* Closes the socket and removes the ipc socket file this publisher created. In a child process
 * forked after tp_pub_new it only frees memory: the socket and its file stay the parent's (and a
 * ZeroMQ context cannot be used across fork). The same holds for tp_sub_destroy. */
void tp_pub_destroy(tp_pub **pub);
/* The endpoint actually bound (tcp port filled in when 0 was asked). */
const char *tp_pub_endpoint(const tp_pub *pub);
/* How long tp_pub_destroy may wait for batches still queued to reach connected subscribers
 * (default 0: they are discarded and closing returns at once). It returns as soon as they are
 * written, so only a stalled subscriber makes it wait the whole time. */
void tp_pub_set_linger(tp_pub *pub, int linger_ms);

/* Sends one batch without ever blocking. Returns 0 when queued for every subscriber (or when there
 * are none); ERR_AGAIN when a subscriber's queue was full: the batch was queued for the others and
 * lost for that one, which will report it (the caller goes on as if it was delivered); ERR_ZMQ when
 * the socket failed. A queue found full stays out of delivery until its subscriber catches up, and
 * the sends meanwhile return 0: the subscriber's report is what counts the loss. */
int tp_pub_send(tp_pub *pub, const void *batch, size_t len);

/* The same for a batch that should reach everyone (the last one): waits up to timeout_ms for every
 * subscriber's queue to have room, then sends it as tp_pub_send does. */
int tp_pub_send_wait(tp_pub *pub, const void *batch, size_t len, int timeout_ms);

/* Reads pending subscription notices and loss reports without blocking. Returns the number of
 * subscribers now connected; *keyframe (may be NULL) is set to 1 when the next batch should be a
 * keyframe: a subscriber arrived since the last call, or one reported a loss (asked for at most
 * once a second). */
int tp_pub_poll(tp_pub *pub, int *keyframe);

typedef struct tp_pub_stats {
    uint64_t sent;    /* batches handed to the socket */
    uint64_t dropped; /* batches the subscribers reported lost, summed over them */
    uint64_t bytes;
    int subscribers;
    uint64_t subs_dropped; /* subscriptions dropped: their peer went past what one may hold
                              (1024), past what all may (4096), or sent one synctop never sends */
    uint64_t peers_shut;   /* connections shut for them (libzmq then frees what they held) */
} tp_pub_stats;
void tp_pub_stats_get(const tp_pub *pub, tp_pub_stats *out);

/* ---- summaries ---- */

/* What a relay says of one producer for one interval, computed from that producer's batches as the
 * relay received them during the interval (not from the events' own times):
 *  - busy_ns: per device, the union of its kernels, copies and memsets (as analysis/busy.c counts
 *    GPU work), summed over devices;
 *  - blocked_ns: per host thread, the union of its blocking API calls (TP_F_BLOCKING), summed over
 *    threads (as the analysis counts host-blocked time).
 * A span of a later interval that starts before the latest end already counted on its device or
 * thread counts only from that end (a batch that arrives out of order counts short, never twice).
 * Wire form (TP_SUMMARY_SIZE bytes, little-endian): magic u32 "STS1", version u16, size u16, then
 * the u64 fields in the order below, then pid u32, rank i32, world i32, devices u32, host (64
 * bytes, NUL-padded). */
#define TP_SUMMARY_MAGIC 0x31535453u /* "STS1" as bytes */
#define TP_SUMMARY_VERSION 1
#define TP_SUMMARY_SIZE 184
typedef struct tp_summary {
    uint64_t producer;
    uint64_t relay;        /* the relay that computed it (its clock answers carry the same id) */
    uint64_t start_ns;     /* the interval's start, the relay's CLOCK_REALTIME */
    uint64_t interval_ns;  /* its length */
    uint64_t t_min, t_max; /* the events' span on the producer's trace clock (0, 0: none) */
    uint64_t busy_ns, blocked_ns;
    uint64_t events;       /* event records, as the batch headers count them */
    uint64_t batches;
    uint64_t missed;       /* batches the relay did not get (sequence gaps) */
    uint64_t drops;        /* records the producer reported lost, cumulative over all sources */
    uint32_t pid;          /* from its process record; 0, -1, -1 until one came */
    int32_t rank, world;
    uint32_t devices;      /* devices that did GPU work in the interval */
    char host[65];         /* from its process record (printable ASCII), "" until one came */
} tp_summary;
/* Writes s in wire form; returns TP_SUMMARY_SIZE. */
size_t tp_summary_encode(const tp_summary *s, uint8_t out[TP_SUMMARY_SIZE]);
/* Reads the wire form: 0, ERR_VERSION for a newer version, or ERR_MALFORMED with a message
 * (length, magic, span, busy time longer than the span on every device, host). */
int tp_summary_decode(const void *buf, size_t len, tp_summary *out, err_msg *err);

/* ---- subscriber ---- */

typedef struct tp_sub tp_sub;

typedef struct tp_sub_opts {
    const char *server_key; /* the publishers' CURVE public key (Z85) or NULL */
    const tp_keypair *client_key; /* with server_key: our own pair (secret needed), which the
                               publishers' lists of clients name; NULL: a throwaway pair */
    int rcvhwm;             /* 0: 10000 batches */
    int summaries;          /* take the relays' summaries (tp_sub_summary_get) and, unless
                               watching producers with tp_sub_watch, no batch at all */
    int clocks_only;        /* take the relays' clock answers only: no batch, no summary */
} tp_sub_opts;

tp_sub *tp_sub_new(const tp_sub_opts *opts, err_msg *err);
void tp_sub_destroy(tp_sub **sub);
/* Connects to one more endpoint; ZeroMQ reconnects by itself when the publisher restarts. */
int tp_sub_connect(tp_sub *sub, const char *endpoint, err_msg *err);
/* Takes (watch 1) or stops taking (0) the batches of one producer, in summary mode; in the
 * default mode every producer's batches come anyway. The subscription travels up to the
 * publishers through any relays (the producer answers with a keyframe). */
int tp_sub_watch(tp_sub *sub, uint64_t producer, int watch, err_msg *err);

/* One received batch. data/len stay valid until the next tp_sub_recv or tp_sub_destroy. */
typedef struct tp_sub_msg {
    const uint8_t *data;
    size_t len;
    tp_batch_hdr hdr;  /* checked header */
    uint64_t missed;   /* batches of this producer skipped just before this one (sequence gap) */
    int new_producer;  /* first batch seen from this producer, or its sequence started over (the
                          same id restarted): its strings and metadata start over too */
} tp_sub_msg;

/* Waits up to timeout_ms (-1: forever, 0: poll) for a batch. Returns 1 with msg filled, 0 on
 * timeout (or when a signal interrupted the wait, or a relay's clock answer, summary or notice
 * came instead of a batch: it is taken here, see tp_sub_clock_get, tp_sub_summary_get and
 * tp_sub_notice_get, or a copy of a batch that came before, through another relay: dropped and
 * counted in stats.duplicates), or a
 * negative code; a message that is not [topic][body] with a valid batch (its header, its size,
 * the producer its topic names), summary or clock answer as body is counted in stats, skipped, and
 * reported as ERR_MALFORMED with a message (the caller may go on receiving). Batches flagged TP_BF_SYNTHETIC never count as gaps. A gap is
 * reported to the publishers, which answer with a keyframe. */
int tp_sub_recv(tp_sub *sub, tp_sub_msg *msg, int timeout_ms, err_msg *err);

/* Waits up to timeout_ms (-1: no limit) until a batch may be received from sub (may be NULL) or fd
 * (may be -1) is readable. Returns TP_WAIT_BATCH | TP_WAIT_FD for what is ready, 0 on timeout or
 * a signal, or a negative code. */
enum { TP_WAIT_BATCH = 1, TP_WAIT_FD = 2 };
int tp_sub_wait(tp_sub *sub, int fd, int timeout_ms, err_msg *err);

typedef struct tp_sub_producer {
    uint64_t producer;
    uint64_t received, missed, bytes, last_seq;
    int ended; /* its last batch (TP_BF_END) came, and it has not started over since */
} tp_sub_producer;
typedef struct tp_sub_stats {
    uint64_t received, missed, malformed, bytes;
    uint64_t summaries;          /* relays' summaries taken (tp_sub_summary_get); a second relay's
                                    of the same producer are not */
    size_t n_producers, n_ended;
    uint64_t handshakes;         /* connections a publisher accepted */
    uint64_t handshake_failures; /* connections refused in the handshake: a wrong --server-key,
                                    keys on one side only, or a client key not listed */
    uint64_t client_refusals;    /* of those, refused because the publisher admits listed clients
                                    only and ours is not listed (ZAP status 300 to 500) */
    uint64_t duplicates;         /* batches dropped because the same batch came before (through
                                    two relays on the way); not in received */
} tp_sub_stats;
void tp_sub_stats_get(const tp_sub *sub, tp_sub_stats *out);
/* The endpoint of the last refused handshake, or NULL when none was refused (counted as of the
 * last tp_sub_recv or tp_sub_wait). */
const char *tp_sub_handshake_failed(const tp_sub *sub);
/* Whether that last refusal was of our client key (the publisher checks its clients, and ours is
 * not on its list). libzmq does not retry such a connection. */
int tp_sub_client_refused(const tp_sub *sub);
/* Our client public key (Z85) in the handshakes, NULL without CURVE; *own (may be NULL) is 1 when
 * it is the pair given in tp_sub_opts.client_key, 0 for a throwaway one. */
const char *tp_sub_client_key(const tp_sub *sub, int *own);
/* Whether producers were seen and every one of them has sent its last batch. */
int tp_sub_all_ended(const tp_sub *sub);
/* The i-th producer seen so far (i < n_producers, in order of first sight; at most 4096 are
 * followed, later ones are delivered but not counted here); returns 0 or ERR_INVAL. */
int tp_sub_producer_get(const tp_sub *sub, size_t i, tp_sub_producer *out);

/* What the summaries of one producer said, taken by tp_sub_recv (which returns 0 for them). When
 * two relays summarise the same producer, one relay's are taken, the other's ignored (not counted)
 * until the first has been silent for three of its intervals. */
typedef struct tp_sub_summary {
    tp_summary last;    /* the latest one */
    uint64_t summaries; /* how many came */
    uint64_t interval_ns, span_ns, busy_ns, blocked_ns, events, batches, missed; /* their sums (span:
                           t_max - t_min of each) */
} tp_sub_summary;
/* How many producers summaries came for (at most 4096 are followed). */
size_t tp_sub_summary_count(const tp_sub *sub);
/* The i-th of them, in order of first summary; 0 or ERR_INVAL. */
int tp_sub_summary_get(const tp_sub *sub, size_t i, tp_sub_summary *out);

/* ---- notices from the relays above ---- */

/* What a relay above said to every subscriber below it (tp_sub_recv takes them and returns 0):
 * something that happened there although no batch of the subscriber's is missing. */
enum {
    TP_NOTICE_RECORDING_STOPPED = 1, /* its recording (relay --record) stopped; relaying goes on */
    TP_NOTICE_LOOP = 2               /* it is in a loop of relays; what came twice is dropped */
};
typedef struct tp_sub_notice {
    uint64_t relay;  /* the relay's id (its clock answers carry the same) */
    int kind;        /* TP_NOTICE_* */
    char host[65];   /* the relay's host name */
    char text[241];  /* what it said, printable ASCII */
} tp_sub_notice;
/* How many notices were taken: one per relay and kind (a notice said again replaces the one
 * kept), at most 16. */
size_t tp_sub_notice_count(const tp_sub *sub);
/* The i-th of them, in order of arrival; 0 or ERR_INVAL. */
int tp_sub_notice_get(const tp_sub *sub, size_t i, tp_sub_notice *out);

/* ---- clocks of the hosts above, through relays ---- */

/* A subscriber asks the relays above it for their clocks (at once, every 100 ms ten times, then
 * every second; from tp_sub_recv and tp_sub_wait) and each relay answers with its host's
 * CLOCK_REALTIME, NTP-style: t0 asked, t1 and t2 the relay's receipt and answer, t3 received here.
 * The relay's clock minus this process's CLOCK_REALTIME then lies within
 *   offset ± uncertainty, offset = ((t1 - t0) + (t2 - t3)) / 2, uncertainty = ((t3 - t0) - (t2 - t1)) / 2
 * whatever the delays on the way, as long as neither clock jumps in between. Of its exchanges
 * with a relay the one of least uncertainty is kept; the uncertainty of a kept exchange grows by
 * 15 ppm of its age (clocks drift), and a later exchange replaces it once it is better, or when
 * the two bounds cannot both hold (a clock was stepped in between: the new one is true). Producers
 * on a relay's host (their process record names the same host) share its clock. */
typedef struct tp_sub_clock {
    char host[65];           /* the relay's host name */
    uint64_t relay;          /* the relay's id (several may run on one host) */
    int64_t offset_ns;       /* its clock minus ours */
    uint64_t uncertainty_ns; /* the true offset is within offset_ns ± this (aged to now) */
    uint64_t exchanges;      /* answers used */
} tp_sub_clock;
/* How many relays answered so far (at most 256 are followed). */
size_t tp_sub_clock_count(const tp_sub *sub);
/* The i-th relay that answered, in order of first answer; 0 or ERR_INVAL. */
int tp_sub_clock_get(const tp_sub *sub, size_t i, tp_sub_clock *out);
/* Whether the i-th relay's answer is the best of its host's relays (the least uncertainty, the
 * first of equals), with that answer in *out: one clock per host. */
int tp_sub_clock_best(const tp_sub *sub, size_t i, tp_sub_clock *out);
/* Each host's best clock as a recorder's notes for a trace file: a synthetic batch of producer
 * TP_PRODUCER_NOTES holding a TP_K_HOSTCLOCK record per host, into out, which a reader's store
 * applies to the producers on that host. Returns how many hosts it holds (0: none answered, or no
 * memory; out is then empty). */
size_t tp_sub_clock_notes(const tp_sub *sub, tp_buf *out);

/* ---- relay ---- */

/* A relay republishes what the publishers it is connected to send (the traced processes of a node,
 * or other relays) to the subscribers of its own endpoint: batches go down as they came,
 * subscriptions and loss reports go up, so each process still learns of every viewer (and answers
 * with a keyframe) and of every batch a viewer lost on the way, through up to 8 relays. A batch
 * that comes twice goes on once, and what comes back round a loop of relays is dropped (said once,
 * and to the subscribers below: tp_sub_notice). It answers the clock requests of the subscribers below it with its host's
 * clock (see tp_sub_clock). While a subscriber below wants summaries (subscribes to "S"), it takes
 * the batches of its producers itself and publishes a tp_summary per producer and interval. Its endpoint follows the publisher's rules (loopback tcp, or keys, or
 * insecure; an ipc file path), and so does the check of its clients' keys. */
typedef struct tp_relay tp_relay;

typedef struct tp_relay_opts {
    const char *listen;          /* the endpoint subscribers connect to */
    const tp_keypair *curve;     /* its server keys (secret needed) or NULL */
    int insecure;                /* allow a non-loopback tcp endpoint without CURVE */
    const tp_clients *clients;   /* with curve: the only clients admitted below (as tp_pub_opts) */
    const char *upstream_key;    /* the upstream publishers' CURVE public key (Z85), or NULL */
    const tp_keypair *upstream_client; /* with upstream_key: its own pair as their client (secret
                                    needed); NULL: a throwaway pair */
    int sndhwm;                  /* batches queued per subscriber; 0: 1000 */
    int rcvhwm;                  /* batches queued from the publishers; 0: 10000 */
    const char *record;          /* also write every batch that goes through to this trace file */
    int record_overwrite;        /* replace that file when it exists */
    const char *host;            /* the name its clock answers carry; NULL: this machine's host name */
    int64_t clock_skew_ns;       /* for tests only: added to the clock it answers with, so that one
                                    machine can play hosts whose clocks differ; 0 otherwise */
    int summary_ms;              /* the summaries' interval; 0: 1000; -1: never summarise */
} tp_relay_opts;

tp_relay *tp_relay_new(const tp_relay_opts *opts, err_msg *err);
/* Stops taking what comes through, only between runs, and, when recording, ends the recording with
 * the clocks of the hosts above (tp_sub_clock_notes of the clocks it measured all along by asking
 * the relays above, as a subscriber does); then tp_relay_stats_get and tp_relay_clocks say what
 * it did. tp_relay_destroy does it when it was not done. */
void tp_relay_stop(tp_relay *relay);
/* The clocks of the hosts above (tp_sub_clock_count, tp_sub_clock_get) that a recording relay
 * measured, to read after tp_relay_stop; NULL when it does not record. */
const tp_sub *tp_relay_clocks(const tp_relay *relay);
/* Stops and frees the relay; returns 0, or the error that ended its recording (err says it). */
int tp_relay_destroy(tp_relay **relay, err_msg *err);
const char *tp_relay_endpoint(const tp_relay *relay);
/* Connects to one more publisher (or relay); only between runs. */
int tp_relay_connect(tp_relay *relay, const char *endpoint, err_msg *err);
/* Forwards for about ms milliseconds (a signal may end it sooner), then returns 0; a negative
 * ERR_* code when the proxy failed. */
int tp_relay_run(tp_relay *relay, int ms, err_msg *err);
/* The upstream endpoint whose handshake was last refused (a wrong upstream_key, or keys on one
 * side only), or NULL when none was, as of the last tp_relay_run. */
const char *tp_relay_handshake_failed(const tp_relay *relay);
/* Whether that upstream refused our client key (it admits listed clients only), not its server key. */
int tp_relay_client_refused(const tp_relay *relay);

typedef struct tp_relay_stats {
    uint64_t batches, bytes; /* batches that went down to the subscribers */
    uint64_t subscribes;     /* subscriptions that went up (a viewer arriving, on any relay below) */
    uint64_t from_below;     /* subscription notices and requests taken from below, all kinds */
    uint64_t clock_answers;  /* clock requests it answered */
    uint64_t summaries;      /* summaries it published */
    uint64_t malformed;      /* messages from upstream that were dropped: not [topic][batch] with
                                a valid batch header, or a batch its summaries could not decode */
    int summarising;         /* a subscriber below wants summaries now */
    size_t upstreams;        /* publishers and relays connected to */
    uint64_t duplicates;     /* batches dropped because the same batch came before (two relays
                                between this one and a publisher, or a loop) */
    uint64_t looped;         /* messages dropped because they went round a loop of relays back to
                                this one (their trail holds its id) */
    uint64_t loop_via;       /* the relay after this one in the first such loop (0: none) */
    uint64_t too_far;        /* messages dropped past NET_HOPS_MAX relays (8) */
    uint64_t refused;        /* subscriptions from below dropped: not synctop's, past what one
                                subscriber may hold (1024) or all may (4096), or past what it passes
                                up (512 topics, 256 requests waiting to be let go of) */
    uint64_t peers_shut;     /* subscribers' connections shut for them */
    int record_failed;       /* the recording stopped (tp_relay_record_error says why): the relay
                                goes on relaying, and tells the subscribers below (tp_sub_notice) */
    size_t host_clocks;      /* hosts whose clocks the recording keeps (after tp_relay_stop) */
} tp_relay_stats;
void tp_relay_stats_get(const tp_relay *relay, tp_relay_stats *out);
/* 0 while the recording goes on (or there is none), else the code that stopped it, with why. */
int tp_relay_record_error(const tp_relay *relay, err_msg *err);

#ifdef __cplusplus
}
#endif
#endif
