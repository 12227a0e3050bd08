// Compute-bound loop for the tracer's overhead benchmark (bench/gpu/overhead.sh): few long kernels
// (about 20 ms each of arithmetic over all SMs), so the GPU is the bottleneck and the tracer should
// cost next to nothing. Prints the wall time of the timed part in ms.
//
// usage: overhead_compute [KERNELS (default 150)]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void work(float *x, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = x[i];
    for (int k = 0; k < iters; k++)
        v = v * 1.0000001f + 0.0000001f;
    x[i] = v;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 150;
    const int threads = 256, blocks = 132 * 8;
    float *x;
    if (cudaMalloc(&x, (size_t)threads * blocks * sizeof(float)) != cudaSuccess)
        return 1;
    cudaMemset(x, 0, (size_t)threads * blocks * sizeof(float));
    // Calibrate the loop count to about 20 ms per kernel on this GPU.
    int iters = 1 << 16;
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int k = 0; k < 6; k++) {
        cudaEventRecord(a);
        work<<<blocks, threads>>>(x, iters);
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        if (ms > 0)
            iters = (int)((double)iters * 20.0 / ms);
    }
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < n; k++)
        work<<<blocks, threads>>>(x, iters);
    cudaDeviceSynchronize();
    auto t1 = std::chrono::steady_clock::now();
    printf("%.3f\n", std::chrono::duration<double, std::milli>(t1 - t0).count());
    cudaFree(x);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
