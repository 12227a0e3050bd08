// A busy cudaStreamQuery loop: the host spins until the stream is done. Each loop is one wait
// (synctop folds the polls of a loop into one blocking span).
// EXPECT: 20 x cudaStreamQuery blocking at @query
#include "common.cuh"

int main() {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    long polls = 0;
    for (int i = 0; i < 20; i++) {
        spin<<<1, 32, 0, s>>>(kStepNs, nullptr);
        while (cudaStreamQuery(s) == cudaErrorNotReady) // @query
            polls++;
    }
    printf("%ld polls\n", polls);
    CHECK(cudaStreamDestroy(s));
    return 0;
}
