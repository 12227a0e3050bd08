// The async-correct twin of sample_item: the scalar is copied into pinned memory with
// cudaMemcpyAsync and an event; the host looks at it only at the end, waiting once.
// EXPECT: 0 x cudaMemcpyAsync blocking at @copy
// EXPECT: 1 x cudaStreamSynchronize blocking at @final
#include "common.cuh"

int main() {
    float *loss, *host;
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&loss, sizeof(float)));
    CHECK(cudaMemsetAsync(loss, 0, sizeof(float), s));
    CHECK(cudaMallocHost(&host, 100 * sizeof(float)));
    // One of each watched call first, at an untagged line: the first call of a kind pays one-time
    // costs (lazy loading, driver setup) that the EXPECT lines, which describe the steady state,
    // do not count.
    CHECK(cudaMemcpyAsync(&host[0], loss, sizeof(float), cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    for (int step = 0; step < 100; step++) {
        spin<<<1, 32, 0, s>>>(kStepNs, loss);
        CHECK(cudaMemcpyAsync(&host[step], loss, sizeof(float), cudaMemcpyDeviceToHost, s)); // @copy
    }
    CHECK(cudaStreamSynchronize(s)); // @final
    printf("loss %.0f\n", host[99]);
    CHECK(cudaFreeHost(host));
    CHECK(cudaFree(loss));
    CHECK(cudaStreamDestroy(s));
    return 0;
}
