/*
 * The known training loop as a Kineto trace (loop.h).
 */
#include "loop.h"

#include <stdio.h>

int loop_trace_write(const char *path, const loop_opts *o) {
    const char *api = o && o->api ? o->api : "cudaDeviceSynchronize";
    int period = o && o->period > 0 ? o->period : 5;
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fputs("{\"traceEvents\":[\n", f);
    long long at = 1000;
    for (int i = 0; i < 30; i++) {
        long long len = i % period == period - 1 ? 40000 : 10000;
        fprintf(f,
                "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#%d\",\"pid\":9,\"tid\":9,\"ts\":%lld,\"dur\":%lld},\n"
                "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":9,\"tid\":9,\"ts\":%lld,\"dur\":2,\"args\":{\"correlation\":%d}},\n"
                "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"pid\":0,\"tid\":7,\"ts\":%lld,\"dur\":7980,\"args\":{\"device\":0,\"stream\":7,\"correlation\":%d}},\n"
                "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaStreamSynchronize\",\"pid\":9,\"tid\":9,\"ts\":%lld,\"dur\":7980,\"args\":{\"correlation\":%d}},\n",
                i, at, len, at + 10, 2 * i + 1, at + 20, 2 * i + 1, at + 30, 2 * i + 2);
        if (i % period == period - 1)
            fprintf(f,
                    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"%s\",\"pid\":9,\"tid\":9,\"ts\":%lld,\"dur\":30000,\"args\":{\"correlation\":%d}},\n",
                    api, at + 8100, 1000 + i);
        at += len;
    }
    fputs("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":9,\"tid\":0,\"args\":{\"name\":\"python\"}}\n]}\n", f);
    return fclose(f) == 0 ? 0 : -1;
}
