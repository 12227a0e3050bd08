// Two streams joined by events. Joining on the GPU (cudaStreamWaitEvent) costs the host nothing;
// joining on the host (cudaEventSynchronize) waits every time.
// EXPECT: 0 x cudaStreamWaitEvent blocking at @gpu_join
// EXPECT: 20 x cudaEventSynchronize blocking at @host_join
// EXPECT: 1 x cudaDeviceSynchronize blocking at @final
#include "common.cuh"

int main() {
    cudaStream_t a, b;
    cudaEvent_t done;
    float *x;
    CHECK(cudaMalloc(&x, 2 * sizeof(float)));
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    // One of each watched call first, at an untagged line: the first call of a kind pays one-time
    // costs (lazy loading, driver setup) that the EXPECT lines, which describe the steady state,
    // do not count.
    CHECK(cudaEventRecord(done, a));
    CHECK(cudaStreamWaitEvent(b, done, 0));
    CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < 20; i++) {
        spin<<<1, 32, 0, a>>>(kStepNs, x);
        CHECK(cudaEventRecord(done, a));
        CHECK(cudaStreamWaitEvent(b, done, 0)); // @gpu_join
        spin<<<1, 32, 0, b>>>(kStepNs, x + 1);
    }
    CHECK(cudaDeviceSynchronize()); // @final
    for (int i = 0; i < 20; i++) {
        spin<<<1, 32, 0, a>>>(kStepNs, x);
        CHECK(cudaEventRecord(done, a));
        CHECK(cudaEventSynchronize(done)); // @host_join
        spin<<<1, 32, 0, b>>>(kStepNs, x + 1);
    }
    CHECK(cudaStreamSynchronize(b));
    printf("done\n");
    CHECK(cudaEventDestroy(done));
    CHECK(cudaStreamDestroy(a));
    CHECK(cudaStreamDestroy(b));
    CHECK(cudaFree(x));
    return 0;
}
