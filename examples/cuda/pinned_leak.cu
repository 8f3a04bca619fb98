// Leak: page-locked host memory. One cudaMallocHost buffer (4 MiB) is never
// freed; a cudaHostAlloc buffer is freed.
#include "check.h"

static float* make_staging_buffer(size_t bytes) {
  void* host = nullptr;
  CHECK(cudaMallocHost(&host, bytes));  // LEAK 1 x 4194304
  return static_cast<float*>(host);
}

int main() {
  float* staging = make_staging_buffer(4 << 20);
  staging[0] = 1.0f;
  void* mapped = nullptr;
  CHECK(cudaHostAlloc(&mapped, 1 << 20, cudaHostAllocDefault));
  CHECK(cudaFreeHost(mapped));
  std::printf("pinned_leak: done\n");
  return 0;
}
