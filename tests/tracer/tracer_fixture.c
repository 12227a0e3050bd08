/* The tracer's tests' fixture (tracer_fixture.h). */
#include "tracer_fixture.h"
#include "task.h"

#ifdef SYNCTOP_HAVE_TRACER

#include <cupti.h>
#include <dlfcn.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "cbids.h"
#include "convert.h"
#include "hostq.h"
#include "synctop/codec.h"
#include "synctop/file.h"
#include "synctop/net.h"

/* ---- what a consumer saw ---- */


void model_init(model *m) {
    memset(m, 0, sizeof *m);
    m->strings = tp_strtab_new();
    ASSERT_NOT_NULL(m->strings);
}

void model_free(model *m) {
    free(m->recs);
    free(m->seqs);
    free(m->rec_seq);
    tp_strtab_destroy(&m->strings);
}

void model_add_batch(model *m, const void *batch, size_t len) {
    tp_dec d;
    memset(&d, 0, sizeof d);
    err_msg err = {{0}};
    int rc = tp_dec_open(&d, batch, len, &err);
    if (rc != 0)
        TASK_FAIL_("batch does not decode: %s", err.msg);
    if (d.hdr.flags & TP_BF_SYNTHETIC) {
        tp_dec_free(&d);
        return;
    }
    ASSERT_OK(tp_dec_load_strings(&d, m->strings));
    m->batches++;
    if (d.hdr.flags & TP_BF_END)
        m->ended++;
    m->seqs = realloc(m->seqs, (m->n_seqs + 1) * sizeof *m->seqs);
    m->seqs[m->n_seqs++] = d.hdr.seq;
    const tp_record *r;
    while ((r = tp_dec_next_record(&d)) != NULL) {
        if (m->n == m->cap) {
            m->cap = m->cap ? m->cap * 2 : 256;
            m->recs = realloc(m->recs, m->cap * sizeof *m->recs);
            m->rec_seq = realloc(m->rec_seq, m->cap * sizeof *m->rec_seq);
        }
        memset(&m->recs[m->n], 0, sizeof m->recs[0]);
        memcpy(&m->recs[m->n], r, tp_kind_size(r->head.kind));
        m->rec_seq[m->n] = d.hdr.seq;
        m->n++;
    }
    tp_dec_free(&d);
}

const char *str(const model *m, uint32_t id) {
    uint32_t len;
    const char *s = id ? tp_strtab_get(m->strings, id, &len) : NULL;
    return s ? s : "";
}

size_t count_kind(const model *m, unsigned kind) {
    size_t n = 0;
    for (size_t i = 0; i < m->n; i++)
        n += m->recs[i].head.kind == kind;
    return n;
}

void model_from_file(model *m, const char *path) {
    err_msg err = {{0}};
    tp_freader *r = tp_freader_open(path, &err);
    if (r == NULL)
        TASK_FAIL_("cannot open %s: %s", path, err.msg);
    ASSERT_EQ(tp_freader_complete(r), 1);
    ASSERT_EQ(tp_freader_problem_count(r), 0);
    tp_buf b = {0};
    for (size_t i = 0; i < tp_freader_count(r); i++) {
        ASSERT_OK(tp_freader_read(r, i, &b, &err));
        model_add_batch(m, b.data, b.len);
    }
    tp_buf_free(&b);
    tp_freader_close(&r);
}

/* ---- running the harness ---- */

void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    fputs(text, f);
    fclose(f);
}

char *read_text(const char *path) {
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return strdup("");
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Starts the harness on a script with extra environment ("NAME=value", NULL-terminated); its
 * stdout and stderr go to out.txt and err.txt in the test's directory. */
rlim_t harness_fsize = RLIM_INFINITY; /* RLIMIT_FSIZE of the next harness: a full disk */
const char *harness_lib = TRACER_SO;  /* the injection the next harness loads */

pid_t start_harness(const char *script, const char *const *env) {
    const char *script_path = task_path("script.txt");
    write_text(script_path, script);
    char out[4096], err[4096];
    snprintf(out, sizeof out, "%s", task_path("out.txt"));
    snprintf(err, sizeof err, "%s", task_path("err.txt"));
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        setenv("SYNCTOP_STANDIN", STANDIN_SO, 1);
        setenv("SYNCTOP_CUPTI", STANDIN_SO, 1);
        setenv("SYNCTOP_FLUSH_MS", "5", 1);
        setenv("NVTX_INJECTION64_PATH", TRACER_SO, 1); /* as `synctop run` sets it */
        setenv("LD_LIBRARY_PATH", INSTALLED_DRIVER_DIR, 1); /* a CUDA driver is installed */
        for (size_t i = 0; env != NULL && env[i] != NULL; i++)
            putenv((char *)env[i]);
        if (harness_fsize != RLIM_INFINITY) {
            signal(SIGXFSZ, SIG_IGN); /* writes past the limit fail with EFBIG, as on a full disk */
            setrlimit(RLIMIT_FSIZE, &(struct rlimit){harness_fsize, harness_fsize});
        }
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fo, 1);
        dup2(fe, 2);
        execl(HARNESS, HARNESS, harness_lib, script_path, (char *)NULL);
        _exit(127);
    }
    return pid;
}

int wait_harness(pid_t pid) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status))
        TASK_FAIL_("harness killed by signal %d; stderr: %s", WTERMSIG(status),
                   read_text(task_path("err.txt")));
    return WEXITSTATUS(status);
}

int run_harness(const char *script, const char *const *env) {
    return wait_harness(start_harness(script, env));
}

tp_sub *connect_sub(const char *endpoint, int rcvhwm) {
    err_msg err = {{0}};
    tp_sub_opts o = {.server_key = NULL, .rcvhwm = rcvhwm};
    tp_sub *s = tp_sub_new(&o, &err);
    if (s == NULL)
        TASK_FAIL_("tp_sub_new: %s", err.msg);
    if (tp_sub_connect(s, endpoint, &err) != 0)
        TASK_FAIL_("tp_sub_connect %s: %s", endpoint, err.msg);
    return s;
}

/* Receives until the producer's last batch (TP_BF_END) or quiet_ms without any batch. */
void drain_sub(tp_sub *s, model *m, int quiet_ms) {
    while (!m->ended) {
        tp_sub_msg msg;
        err_msg err = {{0}};
        int rc = tp_sub_recv(s, &msg, quiet_ms, &err);
        if (rc == 0)
            break;
        if (rc < 0)
            TASK_FAIL_("tp_sub_recv: %s", err.msg);
        model_add_batch(m, msg.data, msg.len);
    }
}

const tp_record *find_api(const model *m, uint32_t cbid, uint32_t corr) {
    for (size_t i = 0; i < m->n; i++)
        if (m->recs[i].head.kind == TP_K_API && m->recs[i].api.cbid == cbid &&
            m->recs[i].api.correlation == corr)
            return &m->recs[i];
    return NULL;
}

size_t count_api(const model *m, uint32_t cbid) {
    size_t n = 0;
    for (size_t i = 0; i < m->n; i++)
        n += m->recs[i].head.kind == TP_K_API && m->recs[i].api.cbid == cbid;
    return n;
}

const tp_record *find_callsite_frame(const model *m, uint32_t site, unsigned index) {
    for (size_t i = 0; i < m->n; i++)
        if (m->recs[i].head.kind == TP_K_FRAME && m->recs[i].frame.callsite == site &&
            m->recs[i].frame.index == index)
            return &m->recs[i];
    return NULL;
}

uint64_t last_drops(const model *m, unsigned source, int batches, uint64_t *seq) {
    uint64_t v = 0;
    for (size_t i = 0; i < m->n; i++)
        if (m->recs[i].head.kind == TP_K_DROPS && m->recs[i].drops.source == source) {
            v = batches ? m->recs[i].drops.batches : m->recs[i].drops.records;
            if (seq)
                *seq = m->rec_seq[i];
        }
    return v;
}

/* A small "training step" program; every number below is checked against what comes out. */
const char *step_script(void) {
    static char s[8192];
    snprintf(s, sizeof s,
             "context_create 1\n"
             "device id=0 name=FakeH100 cc_major=9 cc_minor=0 sms=132 mem=85899345920\n"
             "context id=1 device=0 nullstream=7\n"
             "stream ctx=1 id=13 prio=-1\n"
             "clock 2000000000\n"
             "x10@1000000 api domain=rt cbid=%d start=1999990000 end=1999995000 corr=100\n"
             "x10@1000000 kernel name=step_kernel start=2000000000 end=2000500000 dev=0 ctx=1 "
             "stream=13 corr=100 grid=4,1,1 block=128,1,1\n"
             "api domain=rt cbid=%d start=2100000000 end=2100100000 corr=150\n"
             "memcpy copy=2 src=3 dst=1 bytes=4 start=2020000000 end=2020001000 dev=0 ctx=1 stream=13 corr=200\n"
             "memset bytes=4096 value=0 mem=3 start=2030000000 end=2030002000 dev=0 ctx=1 stream=13 corr=210 async=1\n"
             "sync type=3 start=2040000000 end=2040300000 ctx=1 stream=13 corr=300\n"
             "marker flags=2 ts=2000000000 id=5 name=step domain=train\n"
             "marker flags=4 ts=2010000000 id=5\n"
             "flush\n"
             "wait_flush\n"
             "x3@0 call domain=rt cbid=%d wait=500000 ctx=1 corr=400 site=1\n"
             "call domain=rt cbid=%d wait=5000 ctx=1 corr=410 site=2\n"
             "call domain=rt cbid=%d wait=300000 inner=%d ctx=1 corr=420 site=2\n"
             "poll domain=rt cbid=%d count=50 step=10000 ctx=1 corr=500 site=3\n"
             "call domain=drv cbid=%d wait=100000 ctx=1 corr=600 site=1\n"
             "drop 7\n"
             "kernel name=last_kernel start=2200000000 end=2200001000 dev=0 ctx=1 stream=13 corr=700\n"
             "context_destroy 1\n",
             CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
             CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
             CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
             CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
             CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2,
             CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_v3020,
             CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize);
    return s;
}

/* The events of step_script, as any consumer must see them. */
/* The step program's GPU work, its launches and its NVTX range. */
void check_step_gpu(const model *m) {
    /* Kernels: all eleven, including the one only a forced flush at context destruction gets. */
    ASSERT_EQ(count_kind(m, TP_K_KERNEL), 11);
    size_t named = 0;
    for (size_t i = 0; i < m->n; i++) {
        const tp_record *r = &m->recs[i];
        if (r->head.kind != TP_K_KERNEL)
            continue;
        ASSERT_EQ(r->kernel.device, 0);
        ASSERT_EQ(r->kernel.stream, 13);
        ASSERT_EQ(r->kernel.context, 1);
        if (strcmp(str(m, r->kernel.name), "step_kernel") == 0) {
            named++;
            ASSERT_EQ(r->kernel.end - r->kernel.start, 500000);
            ASSERT_EQ(r->kernel.grid[0], 4);
            ASSERT_EQ(r->kernel.block[0], 128);
            ASSERT_EQ(r->kernel.start, 2000000000 + (r->kernel.correlation - 100) * 1000000ull);
        } else {
            ASSERT_STR_EQ(str(m, r->kernel.name), "last_kernel");
        }
    }
    ASSERT_EQ(named, 10);
    /* Launch API records from activity (10); the sync API activity record is not enabled. */
    ASSERT_EQ(count_api(m, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000), 10);
    const tp_record *launch = find_api(m, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 103);
    ASSERT_NOT_NULL(launch);
    ASSERT_EQ(launch->api.flags, TP_F_LAUNCH);
    /* The program's one thread: its launches (activity records), its NVTX ranges and its waits
     * (callbacks) are on one lane, the thread's system id. */
    const tp_record *wait = find_api(m, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, 400);
    ASSERT_NOT_NULL(wait);
    uint32_t tid = wait->api.tid;
    ASSERT_EQ(launch->api.tid, tid);
    ASSERT_STR_EQ(str(m, launch->api.name), "cudaLaunchKernel");
    ASSERT_NULL(find_api(m, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, 150));

    ASSERT_EQ(count_kind(m, TP_K_MEMCPY), 1);
    ASSERT_EQ(count_kind(m, TP_K_MEMSET), 1);
    /* The stream sync, and of the 50 queries only the one that found the work done. */
    ASSERT_EQ(count_kind(m, TP_K_SYNC), 2);
    ASSERT_EQ(count_kind(m, TP_K_NVTX), 2);
    for (size_t i = 0; i < m->n; i++) {
        const tp_record *r = &m->recs[i];
        if (r->head.kind == TP_K_MEMCPY) {
            ASSERT_EQ(r->memcpy.copy_kind, TP_COPY_DTOH);
            ASSERT_EQ(r->memcpy.src_kind, TP_MEM_DEVICE);
            ASSERT_EQ(r->memcpy.dst_kind, TP_MEM_PAGEABLE);
            ASSERT_EQ(r->memcpy.bytes, 4);
            ASSERT_EQ(r->memcpy.flags, 0);
        } else if (r->head.kind == TP_K_MEMSET) {
            ASSERT_EQ(r->memset.bytes, 4096);
            ASSERT_EQ(r->memset.flags, TP_F_ASYNC);
            ASSERT_EQ(r->memset.mem_kind, TP_MEM_DEVICE);
        } else if (r->head.kind == TP_K_SYNC && r->sync.correlation == 549) {
            ASSERT_EQ(r->sync.sync_type, TP_SYNC_STREAM);
            ASSERT_EQ(r->sync.end - r->sync.start, 10000);
        } else if (r->head.kind == TP_K_SYNC) {
            ASSERT_EQ(r->sync.correlation, 300);
            ASSERT_EQ(r->sync.sync_type, TP_SYNC_STREAM);
            ASSERT_EQ(r->sync.device, 0); /* from the context record */
            ASSERT_EQ(r->sync.stream, 13);
            ASSERT_UEQ(r->sync.event, TP_NO_ID);
            ASSERT_EQ(r->sync.end - r->sync.start, 300000);
        } else if (r->head.kind == TP_K_NVTX) {
            ASSERT_EQ(r->nvtx.id, 5);
            ASSERT_EQ(r->nvtx.tid, tid);
            if (r->nvtx.flags == TP_NVTX_START) {
                ASSERT_STR_EQ(str(m, r->nvtx.name), "step");
                ASSERT_STR_EQ(str(m, r->nvtx.domain), "train");
            } else {
                ASSERT_EQ(r->nvtx.flags, TP_NVTX_END);
            }
        }
    }
}

/* The step program's host calls: its waits, where they were called from, and CUPTI's drops. */
void check_step_host(const model *m) {
    /* Host calls from the callbacks. */
    const uint32_t ss = CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020;
    ASSERT_EQ(count_api(m, ss), 4); /* three waits and one short call */
    uint32_t site1 = 0;
    for (uint32_t corr = 400; corr < 403; corr++) {
        const tp_record *a = find_api(m, ss, corr);
        ASSERT_NOT_NULL(a);
        ASSERT_EQ(a->api.flags, TP_F_BLOCKING);
        ASSERT_EQ(a->api.end - a->api.start, 500000);
        ASSERT_EQ(a->api.device, 0);
        ASSERT_STR_EQ(str(m, a->api.name), "cudaStreamSynchronize");
        ASSERT_NE(a->api.callsite, 0);
        if (site1 == 0)
            site1 = a->api.callsite;
        ASSERT_EQ(a->api.callsite, site1); /* the same place: one call site */
    }
    const tp_record *quick = find_api(m, ss, 410);
    ASSERT_NOT_NULL(quick);
    ASSERT_EQ(quick->api.flags, 0);
    ASSERT_EQ(quick->api.callsite, 0);
    ASSERT_EQ(quick->api.end - quick->api.start, 5000);

    /* A blocking cudaMemcpy: one record for the runtime call, none for the driver call inside. */
    const tp_record *cp = find_api(m, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, 420);
    ASSERT_NOT_NULL(cp);
    ASSERT_EQ(cp->api.flags, TP_F_BLOCKING);
    ASSERT_EQ(cp->api.end - cp->api.start, 300000);
    ASSERT_EQ(count_api(m, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2), 0);
    uint32_t site2 = cp->api.callsite;
    ASSERT_NE(site2, 0);
    ASSERT_NE(site2, site1);

    /* A busy cudaStreamQuery loop: one event spanning the 50 polls. */
    ASSERT_EQ(count_api(m, CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_v3020), 1);
    const tp_record *poll = find_api(m, CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_v3020, 549);
    ASSERT_NOT_NULL(poll);
    ASSERT_EQ(poll->api.flags, TP_F_BLOCKING);
    ASSERT_EQ(poll->api.end - poll->api.start, 500000);
    uint32_t site3 = poll->api.callsite;
    ASSERT_NE(site3, 0);
    ASSERT_NE(site3, site1);
    ASSERT_NE(site3, site2);

    /* A driver-API wait made directly by the program, at the same place as the first syncs. */
    const tp_record *drv = find_api(m, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, 600);
    ASSERT_NOT_NULL(drv);
    ASSERT_EQ(drv->api.flags, TP_F_BLOCKING | TP_F_DRIVER);
    ASSERT_EQ(drv->api.end - drv->api.start, 100000);
    ASSERT_STR_EQ(str(m, drv->api.name), "cuStreamSynchronize");
    ASSERT_EQ(drv->api.callsite, site1);

    /* Call sites: their innermost frame is the program's function, in the program's file. */
    const char *expect[3] = {"harness_site_1", "harness_site_2", "harness_site_3"};
    uint32_t sites[3] = {site1, site2, site3};
    for (int i = 0; i < 3; i++) {
        const tp_record *f = find_callsite_frame(m, sites[i], 0);
        ASSERT_NOT_NULL(f);
        ASSERT_EQ(f->frame.flags, TP_FRAME_NATIVE);
        if (strcmp(str(m, f->frame.func), expect[i]) != 0)
            for (unsigned j = 0; (f = find_callsite_frame(m, sites[i], j)) != NULL; j++)
                fprintf(stderr, "site %u frame %u: %s %s+%#" PRIx64 "\n", sites[i], j,
                        str(m, f->frame.module), str(m, f->frame.func), f->frame.pc);
        f = find_callsite_frame(m, sites[i], 0);
        ASSERT_STR_EQ(str(m, f->frame.func), expect[i]);
        ASSERT_STR_CONTAINS(str(m, f->frame.module), "tracer_harness");
    }
    /* CUPTI's dropped records are reported. */
    ASSERT_EQ(last_drops(m, TP_DROP_CUPTI, 0, NULL), 7);
}

void check_step_events(const model *m) {
    ASSERT_EQ(m->ended, 1);
    check_step_gpu(m);
    check_step_host(m);
}

void check_step_meta(const model *m) {
    int process = 0, device = 0, null_stream = 0, stream13 = 0, clock = 0, thread = 0;
    const tp_record *wait = find_api(m, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, 400);
    ASSERT_NOT_NULL(wait);
    for (size_t i = 0; i < m->n; i++) {
        const tp_record *r = &m->recs[i];
        switch (r->head.kind) {
        case TP_K_PROCESS:
            process++;
            ASSERT_GT(r->process.pid, 0);
            ASSERT_STR_CONTAINS(str(m, r->process.cmdline), "tracer_harness");
            ASSERT_EQ(r->process.rank, 3);
            ASSERT_EQ(r->process.world, 8);
            break;
        case TP_K_DEVICE:
            device++;
            ASSERT_STR_EQ(str(m, r->device.name), "FakeH100");
            ASSERT_EQ(r->device.cc_major, 9);
            ASSERT_EQ(r->device.sm_count, 132);
            ASSERT_UEQ(r->device.memory_bytes, 85899345920ull);
            break;
        case TP_K_STREAM:
            if (r->stream.flags == TP_F_NULL_STREAM) {
                null_stream++;
                ASSERT_EQ(r->stream.stream, 7);
            } else {
                stream13++;
                ASSERT_EQ(r->stream.stream, 13);
                ASSERT_EQ(r->stream.priority, -1);
                ASSERT_EQ(r->stream.device, 0);
            }
            break;
        case TP_K_CLOCK:
            clock++;
            ASSERT_GT(r->clock.realtime_ns, 0);
            ASSERT_GT(r->clock.monotonic_ns, 0);
            ASSERT_GE(r->clock.trace_ns, 1000000000);
            break;
        case TP_K_THREAD:
            /* one thread, named after the program (its comm) */
            ASSERT_EQ(r->thread.tid, wait->api.tid);
            ASSERT_STR_EQ(str(m, r->thread.name), "tracer_harness");
            thread++;
            break;
        }
    }
    ASSERT_GE(process, 1);
    ASSERT_GE(device, 1);
    ASSERT_GE(null_stream, 1);
    ASSERT_GE(stream13, 1);
    ASSERT_GE(clock, 1);
    ASSERT_GE(thread, 1);
}

#endif
