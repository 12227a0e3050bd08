// Shared by the samples: a kernel that keeps the GPU busy for a known time, so that a host call
// that waits for the device waits long enough to be seen (far above the 20 us threshold).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(call)                                                                     \
    do {                                                                                \
        cudaError_t e_ = (call);                                                        \
        if (e_ != cudaSuccess) {                                                        \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,               \
                    cudaGetErrorString(e_));                                            \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

__device__ inline unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Busy for `ns` nanoseconds, then writes a value the host may read.
__global__ void spin(long long ns, float *out) {
    unsigned long long end = global_ns() + (unsigned long long)ns;
    while (global_ns() < end) {
    }
    if (out != nullptr && threadIdx.x == 0 && blockIdx.x == 0)
        *out += 1.0f;
}

static const long long kStepNs = 1000000; // 1 ms of GPU work per step
