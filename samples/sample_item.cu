// The `.item()` pattern: every step reads one scalar back to the host with a synchronous copy,
// so the host waits for all the step's GPU work, every step.
// EXPECT: 100 x cudaMemcpy blocking at @item
#include "common.cuh"

int main() {
    float *loss;
    CHECK(cudaMalloc(&loss, sizeof(float)));
    CHECK(cudaMemset(loss, 0, sizeof(float)));
    float host = 0;
    for (int step = 0; step < 100; step++) {
        spin<<<1, 32>>>(kStepNs, loss);
        CHECK(cudaMemcpy(&host, loss, sizeof host, cudaMemcpyDeviceToHost)); // @item
    }
    printf("loss %.0f\n", host);
    CHECK(cudaFree(loss));
    return 0;
}
