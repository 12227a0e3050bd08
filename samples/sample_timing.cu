// Timing GPU work with a host clock. Without a synchronize the host measures only the launch
// (and the numbers are wrong); with one, the measurement is right and each one is a wait.
// EXPECT: 30 x cudaDeviceSynchronize blocking at @timed
#include <chrono>

#include "common.cuh"

int main() {
    double wrong = 0, right = 0;
    for (int i = 0; i < 30; i++) {
        auto t0 = std::chrono::steady_clock::now();
        spin<<<1, 32>>>(kStepNs, nullptr); // no wait: measures the launch only
        wrong += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < 30; i++) {
        auto t0 = std::chrono::steady_clock::now();
        spin<<<1, 32>>>(kStepNs, nullptr);
        CHECK(cudaDeviceSynchronize()); // @timed
        right += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    printf("without synchronize %.3f ms/step, with %.3f ms/step\n", wrong * 1e3 / 30, right * 1e3 / 30);
    return 0;
}
