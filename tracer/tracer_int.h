/*
 * What the parts of libsynctop-tracer.so tell one another. Each part keeps its state private,
 * beside the code that uses it, and this header is all that crosses between them:
 * - tracer.c, the lifecycle: the exported entry points, the settings and the CUPTI loaded (handed
 *   to the other parts when a session starts), starting, stopping, exit and fork;
 * - flush.c, the flush thread and what it owns: the encoder, the publisher, the trace file, the
 *   counts it reports;
 * - enable.c, what CUPTI is asked for: the subscription, the callbacks, the activity kinds;
 * - buffers.c, CUPTI's activity buffers: handed out, completed, taken by the flush thread;
 * - callbacks.c, CUPTI's API and resource callbacks on the application's threads, the gates they
 *   read (the tracer's state, whether it collects) and the few counts they keep;
 * - wake.c, how other threads reach the flush thread (a wake-up, a drain, a stop) and wait on it.
 * Each part uses only those listed after it, and the lifecycle all of them.
 */
#ifndef SYNCTOP_TRACER_TRACER_INT_H
#define SYNCTOP_TRACER_TRACER_INT_H

#include <cupti.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "config.h"
#include "convert.h"
#include "cupti_load.h"
#include "hostq.h"
#include "synctop/error.h"
#include "synctop/net.h"

#define TR_DRAIN_WAIT_MS 2000 /* context destruction and exit wait at most this for the flush */

/* The tracer's state. TR_OFF: never started, or stopped by synctop_tracer_stop (it may start
 * again). TR_STOPPED: for good (exit, or the flush thread could not start). */
enum { TR_OFF = 0, TR_ON = 1, TR_STOPPED = 2, TR_FORKED = 3 };

/* ---- callbacks.c: CUPTI's API and resource callbacks, and the gates they read ---- */

/* The settings, the CUPTI and the host-call queue the callbacks use from now on. */
void tr_callbacks_session(const tr_config *cfg, const tr_cupti *cupti, tr_hostq *hostq);
/* The callback function the subscription gives CUPTI. */
void CUPTIAPI tr_callbacks_on(void *userdata, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
                              const void *data);
int tr_callbacks_state(void); /* TR_* */
void tr_callbacks_set_state(int state);
/* Whether the API callbacks record (0 while dormant, stopped, or in a forked child). */
int tr_callbacks_collecting(void);
void tr_callbacks_set_collecting(int on);
/* Forgets each thread's open calls and poll run, at their next callback (collection begins). */
void tr_callbacks_new_generation(void);
/* Started in a running process: contexts may exist that no creation callback counted. */
void tr_callbacks_set_contexts_unknown(int unknown);
/* Whether a context may be alive (so that CUPTI's records may be flushed out). */
int tr_callbacks_contexts_alive(void);
/* Gives conv the contexts learnt at creation from *merged on, and advances *merged. */
void tr_callbacks_merge_contexts(tr_conv *conv, unsigned *merged);
/* Whether a module was unloaded since the last call (cached kernel-name pointers are stale). */
int tr_callbacks_names_stale(void);
/* The highest correlation id of a watched call: it advances while the program makes CUDA calls. */
uint32_t tr_callbacks_last_correlation(void);
/* Adds CUPTI's count of dropped records to the tracer's (from context destruction, exit and the
 * flush thread), never while a lock that the buffer callbacks take is held; the count so far. */
void tr_callbacks_count_drops(void);
uint64_t tr_callbacks_dropped(void);

/* ---- buffers.c: CUPTI's activity buffers ---- */

/* Counts and pool ready for a session (nothing of an earlier one is freed: see tr_bufs_release). */
void tr_bufs_reset(void);
/* The settings of the session (buffer size, SYNCTOP_MAX_BUFFERS). */
void tr_bufs_session(const tr_config *cfg);
/* CUPTI's buffer callbacks (cuptiActivityRegisterCallbacks), any thread, concurrently. */
void CUPTIAPI tr_bufs_requested(uint8_t **buffer, size_t *size, size_t *max_records);
void CUPTIAPI tr_bufs_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                size_t valid);
/* Another client took CUPTI's buffer callbacks: the buffers CUPTI held for the tracer are written
 * off (kept, and taken back if they return). */
void tr_bufs_write_off(void);
/* Calls walk on each completed buffer, in the order CUPTI completed them, then reuses or frees
 * it. */
void tr_bufs_drain(void (*walk)(uint8_t *buf, size_t valid, void *arg), void *arg);
/* Frees the buffers the tracer holds; those CUPTI still holds are freed when they come back. */
void tr_bufs_release(void);
uint64_t tr_bufs_in(void);     /* buffers with records that reached the tracer */
uint64_t tr_bufs_missed(void); /* buffers refused for lack of memory, or another client's */

/* ---- enable.c: what CUPTI is asked for ---- */

/* The settings and the CUPTI of a session; kernels count as off. */
void tr_enable_session(const tr_config *cfg, const tr_cupti *cupti);
/* System thread ids in records and per-thread buffers, before anything is enabled. Returns 1 when
 * CUPTI gives the system's thread ids. */
int tr_enable_prepare(void);
CUptiResult tr_enable_subscribe(void);
void tr_enable_unsubscribe(void);
/* Buffer callbacks, CONCURRENT_KERNEL and the metadata kinds: what is on whatever the mode. */
CUptiResult tr_enable_activity(void);
/* Collection on or off: the API callbacks, the collected kinds (and kernels, on demand). */
void tr_enable_collecting(int on);
void tr_enable_resources(int on);
/* A late start: CUPTI's records of the contexts and streams that exist already. */
void tr_enable_dump_existing(void);
/* Everything off, for synctop_tracer_stop (the subscription stays until tr_enable_unsubscribe). */
void tr_enable_quit(void);
/* Whether another client has collected its records since the tracer (re)registered. */
int tr_enable_other_client_left(void);

/* ---- flush.c: the flush thread and its outputs ---- */

/* The flush thread's state for a new session (its outputs are made by the calls below). */
void tr_flush_reset(void);
/* The encoder, the converter and the call sites: 0, or ERR_NOMEM. */
int tr_flush_prepare(const tr_config *cfg, const tr_cupti *cupti, tr_hostq *hostq);
/* The publisher, with po's settings and the encoder's producer id: 0, or ERR_ZMQ with the
 * failure in err. */
int tr_flush_publish(tp_pub_opts *po, err_msg *err);
const char *tr_flush_endpoint(void);
/* Claims the trace file spec names for this process (record_path.h): 0, or ERR_IO (errno says
 * why). Then opens it: 0, or ERR_IO with the failure in err. */
int tr_flush_claim_record(const char *spec);
int tr_flush_open_record(err_msg *err);
const char *tr_flush_record_path(void); /* the trace file actually written */
/* Frees what a session made (its outputs and the activity buffers), before or after its thread. */
void tr_flush_release(void);
/* The same for a session that could not start: the trace file is closed, the publisher ends. */
void tr_flush_discard(void);
/* Starts the flush thread: 0, or ERR_LIMIT (no thread). name_devices: started late, the driver
 * names the GPUs. */
int tr_flush_start(uint32_t pid, int name_devices);
/* Waits, wait_ms at most, until a subscriber is there (while publishing). */
void tr_flush_wait_subscribers(uint32_t wait_ms);
/* Exit has begun: from now on the flush thread calls no stateful CUPTI function. */
void tr_flush_exiting(void);
/* At exit: stops the callbacks for good and the flush thread, waits for it (wait_ms at most: a
 * stuck one keeps everything it uses), and frees what the session used. When the thread is
 * stopping for synctop_tracer_stop already, only waits for it to end. */
void tr_flush_end(uint32_t wait_ms);

/* ---- wake.c: reaching the flush thread ---- */

/* ts = now + ms, on CLOCK_REALTIME (the clock of the waits below). */
void tr_wake_deadline(struct timespec *ts, uint32_t ms);
/* A new session: no request pending, no subscriber, no thread. */
void tr_wake_reset(void);
/* Other threads. A round soon. */
void tr_wake_kick(void);
/* A round that ships everything queued so far, without calling CUPTI (the caller has just flushed
 * it), waited for wait_ms at most. */
void tr_wake_drain_sync(uint32_t wait_ms);
/* synctop_tracer_stop: the flush thread stops the session and ends by itself. */
void tr_wake_request_stop(void);
int tr_wake_stop_requested(void);
/* Waits, wait_ms at most, until a subscriber is there or the flush thread has ended. */
void tr_wake_wait_subscribers(uint32_t wait_ms);
/* Waits, wait_ms at most, for a session that is stopping to end: 1 when no flush thread runs. */
int tr_wake_wait_ended(uint32_t wait_ms);
/* At exit: tells the flush thread to stop, after first() under the lock, and returns 1 (the caller
 * joins it); or, when it is stopping for synctop_tracer_stop already, waits for it to end (until
 * *until) and returns 0. */
int tr_wake_stop(const struct timespec *until, void (*first)(void));
/* The flush thread. It runs (made by tr_flush_start). */
void tr_wake_started(void);
/* Waits for a request or wait_ms: the drain request to answer in *want, whether to stop for
 * synctop_tracer_stop in *detach; returns 1 when this is the last round. */
int tr_wake_wait(uint32_t wait_ms, uint64_t *want, int *detach);
int tr_wake_draining(uint64_t want); /* a drain request waits: CUPTI is flushed already */
void tr_wake_drained(uint64_t want); /* the round that answers want is done */
int tr_wake_detaching(void);
int tr_wake_subscribers(void);
void tr_wake_set_subscribers(int subs);
/* The last thing the thread does. */
void tr_wake_ended(void);

#endif
