// A failed allocation: after keeping 64 MiB, the program asks for more than
// the device has. gpuleak records the failure with the live set at that
// moment, then the program frees everything.
#include "check.h"

int main() {
  void* kept = nullptr;
  CHECK(cudaMalloc(&kept, 64 << 20));
  size_t free_bytes = 0, total_bytes = 0;
  CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  void* huge = nullptr;
  cudaError_t status = cudaMalloc(&huge, total_bytes * 2);  // OOM
  std::printf("out_of_memory: asking for %zu bytes gave '%s'\n", total_bytes * 2,
              cudaGetErrorString(status));
  cudaGetLastError();
  CHECK(cudaFree(kept));
  return status == cudaErrorMemoryAllocation ? 0 : 1;
}
