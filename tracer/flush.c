/*
 * The flush thread, and everything it owns: the encoder, the converter, the call sites, the
 * publisher, the trace file, the batch being shipped, the counts it reports (drops, threads
 * described), and its watch for another CUPTI client. Every SYNCTOP_FLUSH_MS, or when woken
 * (wake.c), it asks CUPTI for completed buffers, converts them (convert.h), drains the host-call
 * queue, and ships batches. The lifecycle
 * makes its outputs before it starts (tr_flush_prepare, _publish, _claim_record, _open_record);
 * from then on they are this thread's alone.
 *
 * Another CUPTI client. torch.profiler (Kineto) registers its own buffer callbacks when it starts,
 * which takes CUPTI's activity records away from the tracer, and disables the kinds it used when
 * it stops. The flush thread notices when no buffer has come for a while although the program's
 * calls went on (their correlation ids advance), and says so in the trace (an NVTX instant in the
 * "synctop" domain, and a lost batch in CUPTI's drop count); when the other client has collected
 * its buffers (Kineto then clears CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, which the tracer
 * set), the tracer registers its callbacks again, re-enables its kinds and says that too. Buffers
 * CUPTI held for the tracer when the other client took over are written off (not reused: they may
 * come back, and then they are taken back); buffers that are not the tracer's are never touched.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "callsite.h"
#include "record_path.h"
#include "stackscan.h"
#include "synctop/codec.h"
#include "synctop/file.h"
#include "tracer_int.h"

#define SHIP_BYTES (1u << 20)        /* a batch is shipped once it holds this much */
#define CLOCK_EVERY_NS 1000000000ull /* clock beacon period */
#define MAX_THREADS 4096             /* threads described with TP_K_THREAD */
#define TAKEOVER_ROUNDS 20           /* flush rounds without a buffer... */
#define TAKEOVER_CALLS 1000          /* ...while the program made this many CUDA calls: taken over */

/* The session's settings and CUPTI (the lifecycle's), and the host-call queue. */
static const tr_config *cfg;
static const tr_cupti *cupti;
static tr_hostq *hostq;
static uint32_t pid;
static int name_gpus; /* started late: the driver names the GPUs (once) */
static pthread_t thread;
static atomic_int exiting; /* exit handlers have run: the flush thread leaves CUPTI alone */
/* Collecting when the end was asked: the last round keeps the device records of buffers that
 * arrived until then (CUPTI's teardown at exit hands over what its worker still held). */
static atomic_int kept_at_stop;

/* The outputs. */
static tp_enc *enc;
static tr_conv *conv;
static tr_sites *sites;
static tp_pub *pub;
static tp_fwriter *fw;
static char record[4096]; /* the trace file actually written */
static int record_lock = -1;
static int fw_failed; /* the recording stopped (a full disk): said once */
static tp_buf batch;

/* What the thread keeps from round to round. */
static uint64_t last_clock;
static uint64_t sent_drops[TP_DROP_MAX_][2];
static uint32_t tids[MAX_THREADS];
static unsigned n_tids;
static unsigned ctx_merged;
/* Another CUPTI client (the flush thread's view). */
static uint64_t seen_bufs;
static uint32_t window_corr;
static unsigned quiet_rounds;
static uint64_t quiet_since;
static int taken;
static uint64_t takeovers;
static uint64_t walks_cut; /* buffers whose walk CUPTI refused before their end */

static uint64_t clock_ns(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t cupti_now(void) {
    uint64_t t = 0;
    cupti->cuptiGetTimestamp(&t);
    return t;
}

static int env_int(const char *name, int32_t *out) {
    const char *s = getenv(name);
    if (s == NULL || *s == '\0')
        return 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end != '\0' || v < 0 || v > INT32_MAX)
        return 0;
    *out = (int32_t)v;
    return 1;
}

static int32_t env_rank(void) {
    int32_t rank = -1;
    if (!env_int("RANK", &rank) && !env_int("OMPI_COMM_WORLD_RANK", &rank))
        env_int("LOCAL_RANK", &rank);
    return rank;
}

/* ---- before the thread: the session's outputs ---- */

void tr_flush_reset(void) {
    fw_failed = 0;
    last_clock = 0;
    memset(sent_drops, 0, sizeof sent_drops);
    n_tids = 0;
    seen_bufs = 0;
    window_corr = 0;
    quiet_rounds = 0;
    quiet_since = 0;
    taken = 0;
    takeovers = 0;
    walks_cut = 0;
    ctx_merged = 0;
    name_gpus = 0;
    record[0] = '\0';
}

int tr_flush_prepare(const tr_config *c, const tr_cupti *cu, tr_hostq *q) {
    atomic_store(&kept_at_stop, 0);
    cfg = c;
    cupti = cu;
    hostq = q;
    tp_enc_opts eo = {.producer = 0, .max_string_bytes = 16u << 20, .max_meta_records = 1u << 18};
    enc = tp_enc_new(&eo);
    conv = enc ? tr_conv_new(enc) : NULL;
    sites = tr_sites_new(cfg->frames, 65536);
    if (!hostq || !enc || !conv || !sites)
        return ERR_NOMEM;
    tr_conv_set_block_threshold(conv, cfg->block_threshold_ns);
    tr_conv_set_sync_size(conv, cu ? cu->sync_size : 0);
    tr_conv_set_launches_only(conv, cu && tr_cupti_whole_api_kinds(cu));
    return 0;
}

int tr_flush_publish(tp_pub_opts *po, err_msg *err) {
    po->producer = tp_enc_producer(enc);
    pub = tp_pub_new(po, err);
    return pub != NULL ? 0 : ERR_ZMQ;
}

const char *tr_flush_endpoint(void) { return tp_pub_endpoint(pub); }

int tr_flush_claim_record(const char *spec) {
    return tr_record_claim(spec, env_rank(), record, sizeof record, &record_lock);
}

int tr_flush_open_record(err_msg *err) {
    fw = tp_fwriter_open(record, TP_FW_OVERWRITE, err);
    return fw != NULL ? 0 : ERR_IO;
}

const char *tr_flush_record_path(void) { return record; }

void tr_flush_release(void) {
    tr_sites_destroy(&sites);
    tr_conv_destroy(&conv);
    tp_enc_destroy(&enc);
    tp_buf_free(&batch);
    /* The host-call queue stays: an application thread may be inside a callback right now. */
    tr_bufs_release();
}

void tr_flush_discard(void) {
    err_msg err;
    if (fw != NULL)
        tp_fwriter_close(&fw, &err);
    tp_pub_destroy(&pub);
    tr_flush_release();
}

/* ---- shipping ---- */

static void add(const void *rec) { tp_enc_add(enc, rec); }

/* The trace file could not take a batch (a full disk, a file size limit): the file keeps what it
 * has (readers see it was not closed cleanly), tracing goes on for the live subscribers, and the
 * program's stderr gets one line. */
static void recording_failed(const err_msg *err) {
    fw_failed = 1;
    if (!cfg->quiet)
        fprintf(stderr, "synctop: recording to %s stopped: %s; the file keeps what came before\n",
                record, err->msg);
}

/* Finishes the batch, writes it to the trace file and sends it. A subscriber too slow to take it
 * loses it (and reports that, so the publisher counts it and asks for a keyframe); the others have
 * it, so its strings count as delivered. The last batch (TP_BF_END) closes the file first, then
 * waits up to wait_ms for every subscriber to have room. */
static void ship_wait(uint32_t flags, int wait_ms) {
    if (tp_enc_finish_flags(enc, flags, &batch) != 0) {
        tp_enc_delivered(enc, 0);
        return;
    }
    if (fw != NULL) {
        err_msg err;
        if (!fw_failed && tp_fwriter_append(fw, batch.data, batch.len, &err) != 0)
            recording_failed(&err);
        if ((flags & TP_BF_END) && tp_fwriter_close(&fw, &err) != 0 && !fw_failed)
            recording_failed(&err);
    }
    int delivered = 1;
    if (pub != NULL) {
        int rc = wait_ms > 0 ? tp_pub_send_wait(pub, batch.data, batch.len, wait_ms)
                             : tp_pub_send(pub, batch.data, batch.len);
        delivered = rc == 0 || rc == ERR_AGAIN;
    }
    tp_enc_delivered(enc, delivered);
}

static void ship(uint32_t flags) { ship_wait(flags, 0); }

static void maybe_ship(void) {
    if (tp_enc_pending_bytes(enc) >= SHIP_BYTES)
        ship(0);
}

/* ---- records the tracer makes itself ---- */

static void add_clock(void) {
    uint64_t mono0 = clock_ns(CLOCK_MONOTONIC);
    uint64_t trace = cupti_now();
    uint64_t real = clock_ns(CLOCK_REALTIME);
    uint64_t mono1 = clock_ns(CLOCK_MONOTONIC);
    tp_clock c = {.kind = TP_K_CLOCK, .device = TP_NO_DEVICE, .trace_ns = trace,
                  .realtime_ns = real, .monotonic_ns = mono0 + (mono1 - mono0) / 2};
    add(&c);
    last_clock = mono1;
}

static void add_process(void) {
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char cmd[4096];
    size_t n = 0;
    FILE *f = fopen("/proc/self/cmdline", "re");
    if (f != NULL) {
        n = fread(cmd, 1, sizeof cmd - 1, f);
        fclose(f);
    }
    while (n > 0 && cmd[n - 1] == '\0')
        n--;
    for (size_t i = 0; i < n; i++)
        if (cmd[i] == '\0')
            cmd[i] = ' ';
    tp_process p = {.kind = TP_K_PROCESS, .device = TP_NO_DEVICE, .pid = pid,
                    .host = tp_enc_intern_cstr(enc, host), .cmdline = tp_enc_intern(enc, cmd, n),
                    .rank = env_rank(), .world = -1,
                    .start_realtime_ns = clock_ns(CLOCK_REALTIME)};
    if (!env_int("WORLD_SIZE", &p.world))
        env_int("OMPI_COMM_WORLD_SIZE", &p.world);
    add(&p);
}

/* A note for whoever reads the trace, at trace time ts: an NVTX instant of the "synctop" domain
 * on the process's main thread. */
static void add_notice(uint64_t ts, const char *text) {
    tp_nvtx r = {.kind = TP_K_NVTX, .flags = TP_NVTX_INSTANT, .device = TP_NO_DEVICE,
                 .tid = pid, .start = ts, .end = ts,
                 .name = tp_enc_intern_cstr(enc, text),
                 .domain = tp_enc_intern_cstr(enc, "synctop")};
    if (ts != 0)
        add(&r);
}

static void note_thread(uint32_t tid) {
    if (tid == 0)
        return;
    for (unsigned i = 0; i < n_tids; i++)
        if (tids[i] == tid)
            return;
    if (n_tids == MAX_THREADS)
        return;
    tids[n_tids++] = tid;
    char path[64], name[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%u/comm", tid);
    FILE *f = fopen(path, "re");
    if (f != NULL) {
        if (fgets(name, sizeof name, f) == NULL)
            name[0] = '\0';
        fclose(f);
    }
    name[strcspn(name, "\n")] = '\0';
    tp_thread t = {.kind = TP_K_THREAD, .device = TP_NO_DEVICE, .tid = tid,
                   .name = tp_enc_intern_cstr(enc, name), .pid = pid};
    add(&t);
}

static void add_drops(int source, uint64_t records, uint64_t batches, uint64_t ts) {
    if (sent_drops[source][0] == records && sent_drops[source][1] == batches)
        return;
    sent_drops[source][0] = records;
    sent_drops[source][1] = batches;
    tp_drops d = {.kind = TP_K_DROPS, .device = TP_NO_DEVICE, .source = (uint32_t)source, .ts = ts,
                  .records = records, .batches = batches};
    add(&d);
}

/* ---- what CUPTI and the callbacks handed over ---- */

static int is_meta_kind(CUpti_ActivityKind k) {
    return k == CUPTI_ACTIVITY_KIND_DEVICE || k == CUPTI_ACTIVITY_KIND_CONTEXT ||
           k == CUPTI_ACTIVITY_KIND_STREAM;
}

/* keep == 0 (dormant): only the metadata records are converted. A record of a kind the converter
 * does not read (another client's, a newer CUPTI's) is stepped over by CUPTI, which knows its size,
 * and counted there; a record CUPTI itself cannot step over (a kind it does not know) ends the
 * walk: the rest of that buffer is lost, and counted as a lost batch. */
static void convert_buffer(uint8_t *buf, size_t valid, void *arg) {
    int keep = *(const int *)arg;
    CUpti_Activity *rec = NULL;
    CUptiResult r;
    while ((r = cupti->cuptiActivityGetNextRecord(buf, valid, &rec)) == CUPTI_SUCCESS) {
        if (!keep && !is_meta_kind(rec->kind))
            continue;
        tr_conv_activity(conv, rec);
        if (rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME || rec->kind == CUPTI_ACTIVITY_KIND_DRIVER)
            note_thread(((const CUpti_ActivityAPI *)rec)->threadId);
        else if (rec->kind == CUPTI_ACTIVITY_KIND_MARKER)
            note_thread(((const CUpti_ActivityMarker2 *)rec)->objectId.pt.threadId);
        maybe_ship();
    }
    if (r != CUPTI_ERROR_MAX_LIMIT_REACHED) {
        if (walks_cut++ == 0)
            tr_config_debug(cfg, "CUPTI stopped walking an activity buffer (%s): its other records "
                                 "are lost", tr_cupti_strerror(cupti, r));
    }
}

static void drain_buffers(int keep) { tr_bufs_drain(convert_buffer, &keep); }

static void drain_hostq(void) {
    tr_hostev ev;
    while (tr_hostq_pop(hostq, &ev)) {
        CUpti_CallbackDomain dom = ev.driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
        note_thread(ev.tid);
        uint32_t site = ev.n_frames || ev.n_py ? tr_sites_intern(sites, enc, ev.py, ev.n_py,
                                                                 ev.frames, ev.n_frames)
                                               : 0;
        tp_api a = {.kind = TP_K_API,
                    .flags = (uint8_t)((ev.blocking ? TP_F_BLOCKING : 0) | (ev.driver ? TP_F_DRIVER : 0)),
                    .device = tr_conv_context_device(conv, ev.context), .tid = ev.tid,
                    .start = ev.start, .end = ev.end, .correlation = ev.correlation,
                    .cbid = ev.cbid, .name = tr_conv_api_name(conv, dom, ev.cbid),
                    .callsite = site, .ret = ev.ret};
        add(&a);
        maybe_ship();
    }
}

/* ---- another CUPTI client ---- */

static void reset_quiet_window(void) {
    seen_bufs = tr_bufs_in();
    window_corr = tr_callbacks_last_correlation();
    quiet_rounds = 0;
    quiet_since = 0;
}

/* The other client collected its records: the tracer takes CUPTI back. */
static void take_back(uint64_t now, int collecting) {
    tr_bufs_write_off();
    CUptiResult r = tr_enable_activity();
    if (collecting)
        tr_enable_collecting(1);
    if (!taken) {
        takeovers++;
        add_notice(quiet_since ? quiet_since : now,
                   "synctop: another CUPTI client (torch.profiler?) held the activity buffers "
                   "until the next notice: GPU activity in between is missing");
    }
    add_notice(now, r == CUPTI_SUCCESS
                        ? "synctop: GPU activity recorded again (the other CUPTI client let go)"
                        : "synctop: could not take CUPTI's activity buffers back");
    tr_config_debug(cfg, "another CUPTI client let go of the activity buffers; %s",
                    r == CUPTI_SUCCESS ? "recording GPU activity again"
                                       : tr_cupti_strerror(cupti, r));
    taken = 0;
    reset_quiet_window();
}

/* Another CUPTI client: noticed by the silence (no buffer in TAKEOVER_ROUNDS rounds while the
 * program made TAKEOVER_CALLS calls), ended when it has collected its records. */
static void watch_other_client(uint64_t now) {
    int collecting = tr_callbacks_collecting();
    if (tr_enable_other_client_left()) {
        take_back(now, collecting);
        return;
    }
    if (taken)
        return;
    uint64_t in = tr_bufs_in();
    if (!collecting || in != seen_bufs) {
        reset_quiet_window();
        return;
    }
    if (quiet_rounds++ == 0)
        quiet_since = now;
    uint32_t calls = tr_callbacks_last_correlation() - window_corr;
    if (in > 0 && quiet_rounds >= TAKEOVER_ROUNDS && calls >= TAKEOVER_CALLS) {
        taken = 1;
        takeovers++;
        add_notice(quiet_since,
                   "synctop: no GPU activity reaches synctop from here although the program goes "
                   "on: another CUPTI client (torch.profiler?) holds the activity buffers");
        tr_config_debug(cfg,
                        "no activity buffer for %u rounds over %u CUDA calls: another CUPTI client "
                        "holds them", quiet_rounds, calls);
    }
}

/* A tracer started in a running process gets no DEVICE records: CUPTI makes them when the driver
 * initialises, for the clients it has then. The driver the process has loaded names its GPUs
 * instead, in records of the same shape (the ordinals are CUPTI's device ids). Nothing when the
 * process has no libcuda. */
static void name_devices(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL)
        return;
    union {
        void *p;
        CUresult (*count)(int *);
        CUresult (*get)(CUdevice *, int);
        CUresult (*name)(char *, int, CUdevice);
        CUresult (*attr)(int *, CUdevice_attribute, CUdevice);
        CUresult (*mem)(size_t *, CUdevice);
    } count = {dlsym(h, "cuDeviceGetCount")}, get = {dlsym(h, "cuDeviceGet")},
      name = {dlsym(h, "cuDeviceGetName")}, attr = {dlsym(h, "cuDeviceGetAttribute")},
      mem = {dlsym(h, "cuDeviceTotalMem_v2")};
    int n = 0;
    if (count.p != NULL && get.p != NULL && name.p != NULL && count.count(&n) == CUDA_SUCCESS) {
        for (int i = 0; i < n && i < (int)TP_NO_DEVICE; i++) {
            CUdevice dev;
            char text[256] = "";
            if (get.get(&dev, i) != CUDA_SUCCESS || name.name(text, sizeof text, dev) != CUDA_SUCCESS)
                continue;
            int major = 0, minor = 0, sms = 0;
            size_t bytes = 0;
            if (attr.p != NULL) {
                attr.attr(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
                attr.attr(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
                attr.attr(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
            }
            if (mem.p != NULL)
                mem.mem(&bytes, dev);
            CUpti_ActivityDevice5 d;
            memset(&d, 0, sizeof d);
            d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
            d.id = (uint32_t)i;
            d.name = text;
            d.computeCapabilityMajor = (uint32_t)major;
            d.computeCapabilityMinor = (uint32_t)minor;
            d.numMultiprocessors = (uint32_t)sms;
            d.globalMemorySize = bytes;
            tr_conv_activity(conv, (const CUpti_Activity *)&d);
        }
    }
    dlclose(h);
}

/* ---- a round ---- */

/* A change of audience, on demand: the first viewer starts collection, the last one leaving makes
 * the tracer dormant (returned: 1, done at the end of the round). */
static int follow_audience(int subs, int live) {
    int go_dormant = 0;
    if (cfg->mode == TR_MODE_ON_DEMAND) {
        if (subs > 0 && tr_wake_subscribers() == 0) {
            /* Records of the dormant time are still in CUPTI's buffers: out with them first
             * (their metadata kept), so that the first viewer sees only its own time. */
            if (live)
                cupti->cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
            drain_buffers(0);
            tr_enable_collecting(1);
        } else if (subs == 0) {
            go_dormant = 1;
        }
    }
    tr_wake_set_subscribers(subs);
    return go_dormant;
}

/* The publisher's side of a round: keyframes, and the audience. Returns 1 to go dormant. */
static int poll_publisher(int cupti_ok, int live) {
    int keyframe = 0;
    int subs = tp_pub_poll(pub, &keyframe);
    if (keyframe) {
        /* A newcomer, or a subscriber that lost a batch, needs the metadata, and a beacon to put
         * our clock on its own. */
        tp_enc_keyframe(enc);
        if (cupti_ok)
            add_clock();
    }
    /* On demand, a change of audience waits for a round that may call CUPTI. */
    if (subs >= 0 && subs != tr_wake_subscribers() && (cfg->mode != TR_MODE_ON_DEMAND || cupti_ok))
        return follow_audience(subs, live);
    return 0;
}

/* The counts of what was lost, the batch, and the trace file through to the kernel. */
static void report_and_ship(int cupti_ok, int live) {
    uint64_t ts = 0;
    if (cupti_ok) {
        ts = cupti_now();
        if (live)
            tr_callbacks_count_drops(); /* no lock held: see tr_callbacks_count_drops */
        if (clock_ns(CLOCK_MONOTONIC) - last_clock >= CLOCK_EVERY_NS)
            add_clock();
        watch_other_client(ts);
    }
    add_drops(TP_DROP_CUPTI, tr_callbacks_dropped(), tr_bufs_missed() + takeovers + walks_cut, ts);
    add_drops(TP_DROP_TRACER, tr_hostq_dropped(hostq), 0, ts);
    if (pub != NULL) {
        tp_pub_stats ps;
        tp_pub_stats_get(pub, &ps);
        add_drops(TP_DROP_PUBLISHER, 0, ps.dropped, ts);
    }
    if (tp_enc_pending(enc) > 0)
        ship(0);
    if (fw != NULL && !fw_failed) {
        /* Into the file each round, not only when the writer's buffer fills: a program that
         * crashes or calls _exit loses one round at most. */
        err_msg err;
        if (tp_fwriter_flush(fw, &err) != 0)
            recording_failed(&err);
    }
}

/* One round of the flush thread. cupti_ok: CUPTI's stateful functions may be called. */
static void pump(int cupti_ok) {
    int live = tr_callbacks_contexts_alive();
    tr_callbacks_merge_contexts(conv, &ctx_merged);
    if (name_gpus && cupti_ok) {
        name_gpus = 0;
        name_devices();
    }
    int go_dormant = pub != NULL ? poll_publisher(cupti_ok, live) : 0;
    /* Going dormant: what was collected while a viewer was there is shipped first (to the trace
     * file, and to a viewer that comes back soon), incomplete buffers included. */
    if (cupti_ok && live)
        cupti->cuptiActivityFlushAll(go_dormant ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
    if (tr_callbacks_names_stale())
        tr_conv_forget_names(conv);
    int keep = tr_callbacks_collecting() || atomic_load(&kept_at_stop);
    drain_buffers(keep);
    drain_hostq();
    if (go_dormant)
        tr_enable_collecting(0);
    tr_scan_refresh();
    report_and_ship(cupti_ok, live);
}

/* The flush thread's last round with CUPTI when synctop_tracer_stop asked: collection and every
 * activity kind off, the records CUPTI holds handed over, incomplete ones too, and converted, then
 * no more callbacks. Once exit has begun CUPTI is left alone, as in every round. */
static void quit_cupti(void) {
    int keep = tr_callbacks_collecting();
    int cupti_ok = !atomic_load(&exiting);
    if (cupti_ok) {
        tr_enable_quit();
        if (tr_callbacks_contexts_alive()) {
            cupti->cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
            tr_callbacks_count_drops();
        }
    } else {
        tr_callbacks_set_collecting(0);
    }
    drain_buffers(keep);
    drain_hostq();
    /* Callbacks already running return at once from now on; CUPTI makes no new ones. */
    tr_callbacks_set_state(TR_OFF);
    if (cupti_ok)
        tr_enable_unsubscribe();
}

/* ---- the thread ---- */

/* The end batch tells every subscriber that this producer is done: it waits (within the linger
 * time) for a slow subscriber's queue to have room, and closing waits the rest. */
static void finish(void) {
    tr_conv_stats cs;
    tr_conv_stats_get(conv, &cs);
    tr_config_debug(cfg,
                    "%llu activity records converted; left out: %llu of kinds synctop does not "
                    "read, %llu twins of calls the callbacks measured, %llu of calls it does not "
                    "trace, %llu without times",
                    (unsigned long long)cs.converted, (unsigned long long)cs.skipped,
                    (unsigned long long)cs.twins, (unsigned long long)cs.untraced,
                    (unsigned long long)cs.uncollected);
    uint64_t end_t0 = clock_ns(CLOCK_MONOTONIC);
    ship_wait(TP_BF_END, (int)cfg->linger_ms);
    uint64_t spent_ms = (clock_ns(CLOCK_MONOTONIC) - end_t0) / 1000000u;
    if (fw != NULL) { /* the end batch could not be built: close the file all the same */
        err_msg err;
        tp_fwriter_close(&fw, &err);
    }
    if (pub != NULL) {
        tp_pub_set_linger(pub, spent_ms < cfg->linger_ms ? (int)(cfg->linger_ms - spent_ms) : 0);
        tp_pub_destroy(&pub);
    }
}

static void close_record_lock(void) {
    if (record_lock >= 0) {
        close(record_lock);
        record_lock = -1;
    }
}

static void *flush_main(void *arg) {
    (void)arg;
    add_process();
    add_clock();
    ship(0);
    for (;;) {
        uint64_t want;
        int detach;
        int stopping = tr_wake_wait(cfg->flush_ms, &want, &detach);
        /* A drain request comes from a thread inside CUPTI's context-destruction callback, which
         * already flushed: do not call into CUPTI while it waits. Nor once exit has begun. */
        pump(!stopping && !tr_wake_draining(want) && !atomic_load(&exiting));
        if (detach)
            quit_cupti();
        tr_wake_drained(want);
        if (stopping)
            break;
    }
    finish();
    if (tr_wake_detaching()) {
        /* Nobody joins this thread: it frees what it used and ends by itself. */
        tr_flush_release();
        close_record_lock();
        pthread_detach(pthread_self());
    }
    tr_wake_ended();
    return NULL;
}

int tr_flush_start(uint32_t process, int late) {
    pid = process;
    name_gpus = late;
    /* The flush thread takes no signal meant for the program. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&thread, NULL, flush_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return ERR_LIMIT;
    tr_wake_started();
    pthread_setname_np(thread, "synctop-flush");
    return 0;
}

void tr_flush_wait_subscribers(uint32_t wait_ms) {
    if (pub != NULL && wait_ms > 0)
        tr_wake_wait_subscribers(wait_ms);
}

void tr_flush_exiting(void) { atomic_store(&exiting, 1); }

/* The callbacks stop for good, before the flush thread is told to. */
static void stop_callbacks(void) {
    atomic_store(&kept_at_stop, tr_callbacks_collecting());
    tr_callbacks_set_collecting(0);
    tr_callbacks_set_state(TR_STOPPED);
}

void tr_flush_end(uint32_t wait_ms) {
    struct timespec until;
    tr_wake_deadline(&until, wait_ms);
    if (!tr_wake_stop(&until, stop_callbacks))
        return;
    if (pthread_timedjoin_np(thread, NULL, &until) != 0)
        return; /* stuck (a stalled disk?): leave it everything it uses */
    tr_flush_release();
    close_record_lock();
}
