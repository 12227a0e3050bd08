/*
 * The tracer's host cost per activity record: walking CUPTI buffers (with the real libcupti's
 * cuptiActivityGetNextRecord when it is installed), converting each record (tracer/convert.c),
 * batching, and publishing on a real ZeroMQ socket, on scripted buffers shaped like a training
 * loop (kernels with their launch API records, a few copies and syncs). Target: <= 100 ns/record.
 * Also what a dormant tracer (SYNCTOP_MODE=on-demand, no viewer) pays per record CUPTI still hands
 * it: the walk, and the kind check that keeps only device/context/stream records. From CUPTI 13.0
 * Update 1 on, a dormant tracer has kernels off too, so CUPTI hands it none per launch.
 */
#include <stdio.h>

#ifndef SYNCTOP_HAVE_TRACER
int main(void) {
    printf("bench_tracer: the tracer is not built (no CUDA toolkit)\n");
    return 0;
}
#else

#include <cupti.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "convert.h"
#include "synctop/codec.h"
#include "synctop/net.h"

#define BUF_BYTES (8u << 20)
#define ROUNDS 40

typedef CUptiResult (*next_fn)(uint8_t *, size_t, CUpti_Activity **);

static size_t record_size(CUpti_ActivityKind k) {
    switch (k) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return sizeof(CUpti_ActivitySynchronization2);
    case CUPTI_ACTIVITY_KIND_RUNTIME: return sizeof(CUpti_ActivityAPI);
    default: return 0;
    }
}

/* Used when no libcupti is installed: the same walk, done here. */
static CUptiResult local_next(uint8_t *buf, size_t valid, CUpti_Activity **rec) {
    size_t off = *rec ? (size_t)((uint8_t *)*rec - buf) + record_size((*rec)->kind) : 0;
    if (off + sizeof(CUpti_Activity) > valid)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *rec = (CUpti_Activity *)(buf + off);
    return CUPTI_SUCCESS;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char names[64][96];

/* Fills buf with a training loop's records; returns the bytes used and the record count. */
static size_t fill(uint8_t *buf, size_t cap, size_t *n_records) {
    size_t used = 0, n = 0;
    uint64_t t = 1000000;
    uint32_t corr = 1;
    for (unsigned i = 0;; i++) {
        union {
            CUpti_ActivityKernel10 k;
            CUpti_ActivityAPI a;
            CUpti_ActivityMemcpy6 m;
            CUpti_ActivitySynchronization2 s;
        } u;
        memset(&u, 0, sizeof u);
        size_t sz;
        unsigned what = i % 20;
        if (what < 9) {
            u.a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
            u.a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
            u.a.start = t;
            u.a.end = t + 3000;
            u.a.threadId = 4242;
            u.a.correlationId = corr;
            sz = sizeof u.a;
        } else if (what < 18) {
            u.k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
            u.k.start = t + 5000;
            u.k.end = t + 25000;
            u.k.streamId = 7;
            u.k.contextId = 1;
            u.k.correlationId = corr++;
            u.k.gridX = 128, u.k.gridY = u.k.gridZ = 1, u.k.blockX = 256, u.k.blockY = u.k.blockZ = 1;
            u.k.name = names[i % 64];
            sz = sizeof u.k;
        } else if (what == 18) {
            u.m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
            u.m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
            u.m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
            u.m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
            u.m.bytes = 4;
            u.m.start = t;
            u.m.end = t + 2000;
            u.m.streamId = 7;
            u.m.contextId = 1;
            u.m.correlationId = corr++;
            sz = sizeof u.m;
        } else {
            u.s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
            u.s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
            u.s.start = t;
            u.s.end = t + 50000;
            u.s.contextId = 1;
            u.s.streamId = 7;
            u.s.cudaEventId = 0xFFFFFFFFu;
            u.s.correlationId = corr++;
            sz = sizeof u.s;
        }
        if (used + sz > cap)
            break;
        memcpy(buf + used, &u, sz);
        used += sz;
        n++;
        t += 10000;
    }
    *n_records = n;
    return used;
}

int main(void) {
    for (int i = 0; i < 64; i++)
        snprintf(names[i], sizeof names[i],
                 "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13BinaryFunctorIfffEEv%d", i);
    next_fn next = local_next;
    const char *walker = "local walker (no libcupti)";
    void *h = SYNCTOP_REAL_CUPTI[0] ? dlopen(SYNCTOP_REAL_CUPTI, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (h != NULL) {
        union {
            void *p;
            next_fn f;
        } u = {.p = dlsym(h, "cuptiActivityGetNextRecord")};
        if (u.p != NULL) {
            next = u.f;
            walker = "real libcupti cuptiActivityGetNextRecord";
        }
    }
    uint8_t *buf = aligned_alloc(8, BUF_BYTES);
    size_t n_per = 0;
    size_t used = fill(buf, BUF_BYTES, &n_per);

    char dir[] = "/tmp/synctop-bench-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return 1;
    char ep[256];
    snprintf(ep, sizeof ep, "ipc://%s/bench.sock", dir);
    err_msg err = {{0}};
    tp_pub_opts po = {.endpoint = ep};
    tp_pub *pub = tp_pub_new(&po, &err);
    if (pub == NULL) {
        fprintf(stderr, "bench_tracer: %s\n", err.msg);
        return 1;
    }

    /* Even runs: walk + convert + encode. Odd runs: and publish. Best of three each; the first
     * round of each run also pays for interning the kernel names. */
    double figures[2] = {1e30, 1e30};
    for (int run = 0; run < 6; run++) {
        int pass = run & 1;
        tp_enc *enc = tp_enc_new(NULL);
        tr_conv *conv = tr_conv_new(enc);
        tp_buf out = {0};
        size_t total = 0;
        double t0 = now_s();
        for (int r = 0; r < ROUNDS; r++) {
            CUpti_Activity *rec = NULL;
            while (next(buf, used, &rec) == CUPTI_SUCCESS) {
                tr_conv_activity(conv, rec);
                total++;
                if (tp_enc_pending_bytes(enc) >= (1u << 20)) {
                    tp_enc_finish(enc, &out);
                    if (pass == 1)
                        tp_pub_send(pub, out.data, out.len);
                    tp_enc_delivered(enc, 1);
                }
            }
        }
        double ns = (now_s() - t0) * 1e9 / (double)total;
        if (ns < figures[pass])
            figures[pass] = ns;
        tp_buf_free(&out);
        tr_conv_destroy(&conv);
        tp_enc_destroy(&enc);
    }
    /* Dormant: walk, keep only the metadata kinds (none here). */
    double dormant = 1e30;
    for (int run = 0; run < 3; run++) {
        tp_enc *enc = tp_enc_new(NULL);
        tr_conv *conv = tr_conv_new(enc);
        size_t total = 0;
        double t0 = now_s();
        for (int r = 0; r < ROUNDS; r++) {
            CUpti_Activity *rec = NULL;
            while (next(buf, used, &rec) == CUPTI_SUCCESS) {
                if (rec->kind == CUPTI_ACTIVITY_KIND_DEVICE || rec->kind == CUPTI_ACTIVITY_KIND_CONTEXT ||
                    rec->kind == CUPTI_ACTIVITY_KIND_STREAM)
                    tr_conv_activity(conv, rec);
                total++;
            }
        }
        double ns = (now_s() - t0) * 1e9 / (double)total;
        if (ns < dormant)
            dormant = ns;
        tr_conv_destroy(&conv);
        tp_enc_destroy(&enc);
    }
    tp_pub_destroy(&pub);
    rmdir(dir);
    printf("bench_tracer: %zu records/buffer x %d, %s\n", n_per, ROUNDS, walker);
    printf("  walk + convert + encode:            %6.1f ns/record\n", figures[0]);
    printf("  walk + convert + encode + publish:  %6.1f ns/record (target <= 100)\n", figures[1]);
    printf("  dormant (walk, keep metadata only): %6.1f ns/record (CUPTI >= 13.0 U1: no records per launch)\n",
           dormant);
    free(buf);
    return 0;
}
#endif
