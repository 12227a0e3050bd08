// Launch-bound loop for the tracer's overhead benchmark (bench/gpu/overhead.sh): many tiny kernels,
// a cudaStreamSynchronize every 1000, so the host's launch path is the bottleneck and any cost the
// tracer adds per launch shows. Prints the wall time of the timed part in ms.
//
// usage: overhead_launch [LAUNCHES (default 200000)]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void tiny(float *x) {
    if (threadIdx.x == 0)
        x[blockIdx.x] += 1.0f;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    float *x;
    if (cudaMalloc(&x, 1024 * sizeof(float)) != cudaSuccess)
        return 1;
    cudaStream_t s;
    cudaStreamCreate(&s);
    for (int i = 0; i < 1000; i++) // warm-up: module load, first launches
        tiny<<<1, 32, 0, s>>>(x);
    cudaStreamSynchronize(s);
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < n; i++) {
        tiny<<<1, 32, 0, s>>>(x);
        if (i % 1000 == 999)
            cudaStreamSynchronize(s);
    }
    cudaStreamSynchronize(s);
    auto t1 = std::chrono::steady_clock::now();
    printf("%.3f\n", std::chrono::duration<double, std::milli>(t1 - t0).count());
    cudaFree(x);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
