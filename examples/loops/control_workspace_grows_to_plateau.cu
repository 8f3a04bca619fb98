// NOT A LEAK: a solver loop whose workspace is regrown (to the next power of two) only when a call
//   needs more.
//
// Sources:
//   https://github.com/karpathy/nanochat/pull/520  ("Grow the cache to the next power of two for
//       amortized behavior", replacing a fixed-size buffer that overflowed on long inputs)
//   https://github.com/openai/gpt-oss/pull/43  ("Ensured that cache updates only when the sequence
//       length increases")
//
// What was reported: a scratch buffer that is grown when a call needs more than
// it holds (and reused otherwise) makes device memory rise in steps during the
// first calls of a loop -- each time a larger request than any before arrives
// -- and then stay flat: from outside it looks like a leak that stops.
//
// This program: each iteration "solves" a problem whose workspace need is drawn
// from 1..48 MiB (data-dependent), plus a per-iteration output buffer that is
// allocated and freed. The workspace is freed and reallocated at the next power
// of two only when too small: at most six regrowths (1 -> 64 MiB), nearly all
// within the first iterations.
//
// Iteration: one solve() call.
// Verdict: NO LEAK (workspace growth that plateaus).
#include <cstdlib>
#include <cstring>
#include <random>

#include "../cuda/check.h"

struct Workspace {
  void* data = nullptr;
  size_t bytes = 0;
  int growths = 0;
};

static void* reserve(Workspace* workspace, size_t bytes) {
  if (bytes > workspace->bytes) {
    size_t capacity = 1;
    while (capacity < bytes) capacity <<= 1;
    if (workspace->data) CHECK(cudaFree(workspace->data));
    CHECK(cudaMalloc(&workspace->data, capacity));
    workspace->bytes = capacity;
    ++workspace->growths;
  }
  return workspace->data;
}

__global__ void solve_kernel(float* scratch, size_t count, float* result) {
  size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  if (i < count) scratch[i] = 1.0f / (1.0f + i);
  if (i == 0) result[0] = scratch[0];
}

static float solve(Workspace* workspace, size_t need_bytes) {
  float* scratch = static_cast<float*>(reserve(workspace, need_bytes));
  float* result = nullptr;
  CHECK(cudaMalloc(&result, 4096 * sizeof(float)));
  const size_t count = need_bytes / sizeof(float);
  solve_kernel<<<(count + 255) / 256, 256>>>(scratch, count, result);
  CHECK(cudaGetLastError());
  float value = 0;
  CHECK(cudaMemcpy(&value, result, sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(result));
  return value;
}

static int iterations_from(int argc, char** argv, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--iterations") == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

int main(int argc, char** argv) {
  const int iterations = iterations_from(argc, argv, 800);
  std::mt19937 random(3);
  std::uniform_int_distribution<size_t> need(size_t{1} << 20, size_t{48} << 20);
  Workspace workspace;
  float total = 0;
  for (int i = 0; i < iterations; ++i) total += solve(&workspace, need(random) & ~size_t{255});
  CHECK(cudaFree(workspace.data));
  std::printf("iterations=%d workspace_bytes=%zu growths=%d total=%.3f\n", iterations,
              workspace.bytes, workspace.growths, total);
  return 0;
}
