/* What the tracer's tests share: a consumer's model of what the tracer published, the harness
 * that plays a CUDA program over the stand-in libcupti, and the "training step" program with its
 * checks. */
#ifndef SYNCTOP_TRACER_FIXTURE_H
#define SYNCTOP_TRACER_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "synctop/codec.h"
#include "synctop/event.h"
#include "synctop/net.h"

typedef struct model {
    tp_record *recs;
    size_t n, cap;
    tp_strtab *strings;
    size_t batches;
    int ended;
    uint64_t *seqs;
    size_t n_seqs;
    uint64_t *rec_seq; /* seq of the batch each record came in */
} model;

extern rlim_t harness_fsize;      /* RLIMIT_FSIZE of the next harness: a full disk */
extern const char *harness_lib; /* the injection the next harness loads */

void model_init(model *m);

void model_free(model *m);

void model_add_batch(model *m, const void *batch, size_t len);

const char *str(const model *m, uint32_t id);

size_t count_kind(const model *m, unsigned kind);

void model_from_file(model *m, const char *path);

void write_text(const char *path, const char *text);

char *read_text(const char *path);

int file_exists(const char *path);

pid_t start_harness(const char *script, const char *const *env);

int wait_harness(pid_t pid);

int run_harness(const char *script, const char *const *env);

tp_sub *connect_sub(const char *endpoint, int rcvhwm);

/* Receives until the producer's last batch (TP_BF_END) or quiet_ms without any batch. */
void drain_sub(tp_sub *s, model *m, int quiet_ms);

const tp_record *find_api(const model *m, uint32_t cbid, uint32_t corr);

size_t count_api(const model *m, uint32_t cbid);

const tp_record *find_callsite_frame(const model *m, uint32_t site, unsigned index);

uint64_t last_drops(const model *m, unsigned source, int batches, uint64_t *seq);

/* A small "training step" program; every number below is checked against what comes out. */
const char *step_script(void);

/* The step program's GPU work, its launches and its NVTX range. */
void check_step_gpu(const model *m);

/* The step program's host calls: its waits, where they were called from, and CUPTI's drops. */
void check_step_host(const model *m);

void check_step_events(const model *m);

void check_step_meta(const model *m);

#endif
