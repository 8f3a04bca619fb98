// Exact accounting under load: 8 threads each make 100,000 stream-ordered
// allocate/free pairs of varying size, and thread t also leaks t+1 buffers
// of 4 KiB (36 in all, 147,456 bytes).
#include <thread>
#include <vector>

#include "check.h"

constexpr int kThreads = 8;
constexpr int kPairs = 100000;

static void leak_some(cudaStream_t stream, int count) {
  for (int i = 0; i < count; ++i) {
    void* leaked = nullptr;
    CHECK(cudaMallocAsync(&leaked, 4096, stream));  // LEAK 36 x 4096
  }
}

static void hammer(int thread_index) {
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int i = 0; i < kPairs; ++i) {
    void* p = nullptr;
    CHECK(cudaMallocAsync(&p, 256 + (i % 64) * 512, stream));
    CHECK(cudaFreeAsync(p, stream));
  }
  leak_some(stream, thread_index + 1);
  CHECK(cudaStreamSynchronize(stream));
  CHECK(cudaStreamDestroy(stream));
}

int main() {
  CHECK(cudaFree(nullptr));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(hammer, t);
  for (auto& t : threads) t.join();
  std::printf("stress: %d threads x %d pairs done\n", kThreads, kPairs);
  return 0;
}
