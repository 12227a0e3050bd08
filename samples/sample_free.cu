// cudaFree in a loop: each cudaFree synchronizes the device, so the host waits for the kernel
// that just used the buffer (and everything else in flight) every iteration.
// EXPECT: 50 x cudaFree blocking at @free
#include "common.cuh"

int main() {
    for (int i = 0; i < 50; i++) {
        float *scratch;
        CHECK(cudaMalloc(&scratch, 1 << 20));
        spin<<<1, 32>>>(kStepNs, scratch);
        CHECK(cudaFree(scratch)); // @free
    }
    CHECK(cudaDeviceSynchronize());
    printf("done\n");
    return 0;
}
