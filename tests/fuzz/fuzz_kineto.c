/*
 * libFuzzer target for the Kineto importer: any bytes go in (plain JSON or gzip), nothing may crash,
 * leak or read out of bounds; an import either fails with a message that names the input, or every
 * batch it emits opens in the real decoder with its events inside the batch's time span. Each input
 * is imported on one thread and again on three, in pieces of a few bytes (cut where entries seem to
 * end, in strings too; a quarter of the plain inputs gzip'd for the three, so that their pieces are
 * cut from the text as it is inflated): both must give the same batches, or the same error and
 * message.
 * `fuzz_kineto --write-seeds DIR` writes a corpus: small traces that reach each mapping, the
 * smallest real trace, plain and gzip, and a trace whose correlation ids and kernel names were
 * chosen to collide in the importer's tables (hostile.h). fuzz_kineto.dict beside it holds the importer's keys and names
 * for longer runs (-dict=).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "hostile.h"
#include "kineto.h"
#include "seeds.h"
#include "synctop/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static const char *const seeds[] = {
    ("{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7, "
     "\"ts\": "
     "1695835535123456.789, \"dur\": 1.5, \"args\": {\"device\": 0, \"stream\": 7, \"correlation\": 3, "
     "\"grid\": [1, 2, "
     "3], \"block\": [4, 5, 6]}}, {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", "
     "\"pid\": 1, "
     "\"tid\": 2, \"ts\": 1695835535123450, \"dur\": 3, \"args\": {\"cbid\": 211, \"correlation\": 3}}]}"),
    ("{\"deviceProperties\": [{\"id\": 0, \"name\": \"A100\", \"computeMajor\": 8, \"computeMinor\": 0, "
     "\"totalGlobalMem\": 42297524224, \"numSms\": 108}], \"distributedInfo\": {\"rank\": 3, \"world_size\": "
     "8}, "
     "\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"Memcpy HtoD (Pageable -> "
     "Device)\", "
     "\"pid\": 0, \"tid\": 7, \"ts\": 5, \"dur\": 2, \"args\": {\"device\": 0, \"stream\": 7, "
     "\"correlation\": 9, "
     "\"bytes\": 100}}, {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaMemcpyAsync\", \"pid\": "
     "1, \"tid\": "
     "2, \"ts\": 4, \"dur\": 9, \"args\": {\"correlation\": 9}}, {\"ph\": \"M\", \"name\": \"thread_name\", "
     "\"pid\": 1, "
     "\"tid\": 2, \"args\": {\"name\": \"main\"}}], \"baseTimeNanoseconds\": 1700000000000000000}"),
    ("{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cuda_sync\", \"name\": \"Event Sync\", \"pid\": 0, "
     "\"tid\": -1, "
     "\"ts\": 1, \"dur\": 1, \"args\": {\"cuda_sync_kind\": \"Event Sync\", \"stream\": 4294967295, "
     "\"wait_on_cuda_event_id\": 9, \"correlation\": 1, \"device\": 0}}, {\"ph\": \"X\", \"cat\": "
     "\"gpu_memset\", "
     "\"name\": \"Memset (Device)\", \"pid\": 0, \"tid\": 7, \"ts\": 2, \"dur\": 1, \"args\": {\"bytes\": "
     "8}}, {\"ph\": "
     "\"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#1\", \"pid\": 1, \"tid\": 2, \"ts\": 0, "
     "\"dur\": "
     "10}, {\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": \"a\", \"pid\": 0, \"tid\": 7, "
     "\"ts\": 0, \"dur\": "
     "3}, {\"ph\": \"s\", \"cat\": \"ac2g\", \"id\": 1, \"pid\": 1, \"tid\": 2, \"ts\": 1}]}"),
    ("[{\"ph\": \"X\", \"cat\": \"Kernel\", \"name\": \"legacy\", \"pid\": 0, \"tid\": \"stream 7\", \"ts\": "
     "1e3, "
     "\"dur\": 1, \"args\": {\"device\": 0, \"stream\": 7}}]"),
    /* a blocking call with the frames synctop's export writes around it: native, Python, operator */
    ("{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaStreamSynchronize\", "
     "\"pid\": 1, \"tid\": 2, \"ts\": 10.000, \"dur\": 5.000, \"args\": {\"cbid\": 131, \"correlation\": 4, "
     "\"blocking\": true}}, {\"ph\": \"X\", \"cat\": \"python_function\", \"pid\": 1, \"tid\": 2, \"ts\": "
     "9.997, \"dur\": 5.006, \"name\": \"main\", \"args\": {\"synctop\": \"call site\", \"synctop module\": "
     "\"/bin/app\"}}, {\"ph\": \"X\", \"cat\": \"python_function\", \"pid\": 1, \"tid\": 2, \"ts\": 9.998, "
     "\"dur\": 5.004, \"name\": \"train.py(42): step\", \"args\": {\"synctop\": \"call site\"}}, {\"ph\": "
     "\"X\", \"cat\": \"cpu_op\", \"pid\": 1, \"tid\": 2, \"ts\": 9.999, \"dur\": 5.002, \"name\": "
     "\"aten::item\", \"args\": {\"synctop\": \"call site\"}}]}"),
    /* operators that nest, start together, cross an end, and hold escapes in their names (the
     * viewer's ranges by depth; the importer makes them ranges when asked) */
    ("{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"step\\u001b[31m\", \"pid\": 1, "
     "\"tid\": 5, \"ts\": 100, \"dur\": 100}, {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::outer\", "
     "\"pid\": 1, \"tid\": 5, \"ts\": 110, \"dur\": 50}, {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": "
     "\"aten::inner\\u0007\", \"pid\": 1, \"tid\": 5, \"ts\": 110, \"dur\": 20}, {\"ph\": \"X\", \"cat\": "
     "\"cpu_op\", \"name\": \"aten::cross\", \"pid\": 1, \"tid\": 5, \"ts\": 150, \"dur\": 100}, {\"ph\": \"X\", "
     "\"cat\": \"cuda_runtime\", \"name\": \"cudaStreamSynchronize\", \"pid\": 1, \"tid\": 5, \"ts\": 112, "
     "\"dur\": 5}]}"),
    /* the text of entries' ends and starts inside strings, where the threads cut pieces */
    ("{\"traceEvents\": [\n  {\"ph\": \"i\"},\n  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"e}, {}, {}, {x\", \"pid\": 0, \"tid\": 7, "
     "\"ts\": 1, \"args\": {\"device\": 0, \"note\": \"}, {\"}},\n  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": "
     "\"q\\\"}, {\\\"cat\\\": 1\", \"pid\": 0, \"tid\": 7, \"ts\": 2}, {\"ph\": \"M\", \"name\": \"a\\\\},{x\"},\n  3,\n  "
     "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaFree\", \"pid\": 1, \"tid\": 2, \"ts\": 3}\n]}"),
};

static void write_trace_seeds(const char *dir) {
#ifdef KINETO_TRACE_DIR
    char path[4096];
    snprintf(path, sizeof path, "%s/event_sync_single_stream.json.gz", KINETO_TRACE_DIR);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return;
    tp_buf gz = {0}, text = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        tp_buf_append(&gz, chunk, n);
    fclose(f);
    fuzz_write_seed(dir, "real.json.gz", gz.data, gz.len);
    gzFile z = gzopen(path, "rb");
    int m;
    while (z && (m = gzread(z, chunk, sizeof chunk)) > 0)
        tp_buf_append(&text, chunk, (size_t)m);
    if (z)
        gzclose(z);
    fuzz_write_seed(dir, "real.json", text.data, text.len);
    tp_buf_free(&gz);
    tp_buf_free(&text);
#else
    (void)dir;
#endif
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *dir = fuzz_seed_dir(*argc, *argv);
    if (dir != NULL) {
        for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
            char name[32];
            snprintf(name, sizeof name, "seed%zu.json", s);
            fuzz_write_seed(dir, name, seeds[s], strlen(seeds[s]));
        }
        write_trace_seeds(dir);
        size_t len;
        char *chosen = hostile_kineto_json(300, HOSTILE_CORRS | HOSTILE_NAMES, &len);
        if (chosen == NULL)
            exit(1);
        fuzz_write_seed(dir, "chosen.json", chosen, len);
        free(chosen);
        exit(0);
    }
    return 0;
}

static int check_batch(void *ctx, const void *batch, size_t len, err_msg *err) {
    (void)ctx;
    (void)err;
    tp_dec d = {0};
    err_msg derr;
    if (tp_dec_open(&d, batch, len, &derr) != 0) {
        fprintf(stderr, "emitted batch does not decode: %s\n", derr.msg);
        abort();
    }
    const tp_record *r;
    while ((r = tp_dec_next_record(&d)) != NULL) {
        uint64_t a, b;
        tp_record_span(r, &a, &b);
        if (!TP_KIND_IS_META(r->head.kind) && (a < d.hdr.t_min || b > d.hdr.t_max || b < a))
            abort();
    }
    tp_dec_free(&d);
    return 0;
}

/* data as one gzip member (zlib, level 1): *len bytes, malloc'd. */
static uint8_t *gzip_of(const uint8_t *data, size_t size, size_t *len) {
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (deflateInit2(&zs, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        abort();
    size_t bound = deflateBound(&zs, (uLong)size);
    uint8_t *out = malloc(bound);
    if (out == NULL)
        abort();
    zs.next_in = (Bytef *)(uintptr_t)data;
    zs.avail_in = (uInt)size;
    zs.next_out = out;
    zs.avail_out = (uInt)bound;
    if (deflate(&zs, Z_FINISH) != Z_STREAM_END)
        abort();
    *len = zs.total_out;
    deflateEnd(&zs);
    return out;
}

/* Checks a batch and keeps it (ctx: a tp_buf). */
static int keep_batch(void *ctx, const void *batch, size_t len, err_msg *err) {
    check_batch(NULL, batch, len, err);
    if (tp_buf_append(ctx, batch, len) != 0)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* half the inputs as the viewer imports them: operators become ranges too */
    import_opts opts = {.producer = 1, .batch_records = 64, .max_events = 100000, .ops = (int)(size & 1), .threads = 1};
    import_stats st, st3;
    err_msg err = {{0}}, err3 = {{0}};
    tp_buf one = {0}, three = {0};
    int rc = kineto_import_mem(data, size, "fuzz.json", &opts, keep_batch, &one, &st, &err);
    if (rc != 0 && strstr(err.msg, "fuzz.json") == NULL) {
        fprintf(stderr, "error without the input's name: %s\n", err.msg);
        abort();
    }
    opts.threads = 3;
    opts.piece_bytes = 1 + size % 61;
    /* a quarter of the plain inputs gzip'd for the three threads: their pieces are then cut from
     * the text as it is inflated, not read in place */
    uint8_t *gz = NULL;
    size_t gz_len = 0;
    if ((size & 6) == 6 && !(data[0] == 0x1f && data[1] == 0x8b)) /* size & 6: 6 bytes or more */
        gz = gzip_of(data, size, &gz_len);
    int rc3 = gz ? kineto_import_mem(gz, gz_len, "fuzz.json", &opts, keep_batch, &three, &st3, &err3)
                 : kineto_import_mem(data, size, "fuzz.json", &opts, keep_batch, &three, &st3, &err3);
    free(gz);
    if (rc3 != rc || (rc != 0 && strcmp(err.msg, err3.msg) != 0) ||
        (rc == 0 && (one.len != three.len || memcmp(one.data, three.data, one.len) != 0 ||
                     st.entries != st3.entries || st.invalid != st3.invalid || st.skipped != st3.skipped ||
                     strcmp(st.first_invalid, st3.first_invalid) != 0))) {
        fprintf(stderr, "three threads differ from one: %d (%s) against %d (%s)\n", rc3, err3.msg, rc, err.msg);
        abort();
    }
    tp_buf_free(&one);
    tp_buf_free(&three);
    return 0;
}
