// cudaMemcpyAsync into pageable memory is not async: the call returns only once the copy is done,
// after the kernel before it. The same copy into pinned memory returns at once.
// EXPECT: 20 x cudaMemcpyAsync blocking at @pageable
// EXPECT: 0 x cudaMemcpyAsync blocking at @pinned
#include "common.cuh"

int main() {
    const size_t bytes = 16u << 20;
    float *dev, *pinned;
    float *pageable = (float *)malloc(bytes);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&dev, bytes));
    CHECK(cudaMallocHost(&pinned, bytes));
    // One of each watched call first, at an untagged line: the first call of a kind pays one-time
    // costs (lazy loading, driver setup) that the EXPECT lines, which describe the steady state,
    // do not count.
    CHECK(cudaMemcpyAsync(pinned, dev, bytes, cudaMemcpyDeviceToHost, s));
    CHECK(cudaMemcpyAsync(pageable, dev, bytes, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < 20; i++) {
        spin<<<1, 32, 0, s>>>(kStepNs, dev);
        CHECK(cudaMemcpyAsync(pageable, dev, bytes, cudaMemcpyDeviceToHost, s)); // @pageable
    }
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < 20; i++) {
        spin<<<1, 32, 0, s>>>(kStepNs, dev);
        CHECK(cudaMemcpyAsync(pinned, dev, bytes, cudaMemcpyDeviceToHost, s)); // @pinned
    }
    CHECK(cudaStreamSynchronize(s));
    printf("%f %f\n", pageable[0], pinned[0]);
    free(pageable);
    CHECK(cudaFreeHost(pinned));
    CHECK(cudaFree(dev));
    CHECK(cudaStreamDestroy(s));
    return 0;
}
