// Leak: stream-ordered allocations (cudaMallocAsync) whose cudaFreeAsync is
// skipped on an early-exit path: 3 of 8 buffers of 256 KiB leak.
#include "check.h"

static bool run_step(cudaStream_t stream, int step) {
  void* activations = nullptr;
  CHECK(cudaMallocAsync(&activations, 256 << 10, stream));  // LEAK 3 x 262144
  CHECK(cudaMemsetAsync(activations, 0, 256 << 10, stream));
  if (step % 3 == 1) return false;  // forgets to free on this path
  CHECK(cudaFreeAsync(activations, stream));
  return true;
}

int main() {
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  int failed = 0;
  for (int step = 0; step < 8; ++step) failed += run_step(stream, step) ? 0 : 1;
  CHECK(cudaStreamSynchronize(stream));
  CHECK(cudaStreamDestroy(stream));
  std::printf("async_leak: %d steps took the early exit\n", failed);
  return 0;
}
