// Leak: a worker thread allocates per-task buffers and never frees them
// (3 x 256 KiB); the main thread frees its own.
#include <thread>
#include <vector>

#include "check.h"

static void worker(std::vector<void*>* results) {
  for (int task = 0; task < 3; ++task) {
    void* buffer = nullptr;
    CHECK(cudaMalloc(&buffer, 256 << 10));  // LEAK 3 x 262144
    results->push_back(buffer);
  }
}

int main() {
  CHECK(cudaFree(nullptr));  // create the context on the main thread
  std::vector<void*> results;
  std::thread t(worker, &results);
  t.join();
  void* own = nullptr;
  CHECK(cudaMalloc(&own, 1 << 20));
  CHECK(cudaFree(own));
  std::printf("thread_leak: worker produced %zu buffers\n", results.size());
  return 0;
}
