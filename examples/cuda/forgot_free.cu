// Leak: a scratch buffer allocated every iteration and freed only on even
// iterations, so 5 of 10 buffers of 1 MiB leak from one line.
#include "check.h"

static void process_batch(int batch) {
  void* scratch = nullptr;
  CHECK(cudaMalloc(&scratch, 1 << 20));  // LEAK 5 x 1048576
  CHECK(cudaMemset(scratch, 0, 1 << 20));
  if (batch % 2 == 0) CHECK(cudaFree(scratch));
}

int main() {
  for (int batch = 0; batch < 10; ++batch) process_batch(batch);
  void* kept = nullptr;
  CHECK(cudaMalloc(&kept, 4096));
  CHECK(cudaFree(kept));
  CHECK(cudaDeviceSynchronize());
  std::printf("forgot_free: done\n");
  return 0;
}
