// Times allocate/free pairs of 1 MiB: stream-ordered (cudaMallocAsync +
// cudaFreeAsync) and synchronous (cudaMalloc + cudaFree). Prints one JSON
// object with the median time per pair over several rounds, so the same
// binary can be run natively, under gpuleak and under compute-sanitizer and
// the runs compared (bench/run_collector_overhead.sh does that).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                    \
  do {                                                                                 \
    cudaError_t s_ = (call);                                                           \
    if (s_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(s_));          \
      std::exit(2);                                                                    \
    }                                                                                  \
  } while (0)

using Clock = std::chrono::steady_clock;

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

static double async_pair_us(cudaStream_t stream, int pairs) {
  auto start = Clock::now();
  for (int i = 0; i < pairs; ++i) {
    void* p = nullptr;
    CHECK(cudaMallocAsync(&p, 1 << 20, stream));
    CHECK(cudaFreeAsync(p, stream));
  }
  CHECK(cudaStreamSynchronize(stream));
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / pairs;
}

static double sync_pair_us(int pairs) {
  auto start = Clock::now();
  for (int i = 0; i < pairs; ++i) {
    void* p = nullptr;
    CHECK(cudaMalloc(&p, 1 << 20));
    CHECK(cudaFree(p));
  }
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / pairs;
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
  int async_pairs = argc > 2 ? std::atoi(argv[2]) : 20000;
  int sync_pairs = argc > 3 ? std::atoi(argv[3]) : 500;
  CHECK(cudaFree(nullptr));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  // Warm up: pool creation, first-touch costs.
  async_pair_us(stream, 1000);
  sync_pair_us(20);
  std::vector<double> a, s;
  for (int r = 0; r < rounds; ++r) {
    a.push_back(async_pair_us(stream, async_pairs));
    s.push_back(sync_pair_us(sync_pairs));
  }
  std::printf("{\"async_pair_us\": %.4f, \"sync_pair_us\": %.3f, \"rounds\": %d, "
              "\"async_pairs_per_round\": %d, \"sync_pairs_per_round\": %d, "
              "\"async_all_us\": [",
              median(a), median(s), rounds, async_pairs, sync_pairs);
  for (size_t i = 0; i < a.size(); ++i) std::printf("%s%.4f", i ? ", " : "", a[i]);
  std::printf("], \"sync_all_us\": [");
  for (size_t i = 0; i < s.size(); ++i) std::printf("%s%.3f", i ? ", " : "", s[i]);
  std::printf("]}\n");
  CHECK(cudaStreamDestroy(stream));
  return 0;
}
