// CUDA C++: a scratch buffer allocated for every batch and never freed.
//
// Reported: the per-batch allocation anti-pattern of
// https://www.rightnowai.co/guides/cuda-operations/memory-management
// ("Allocating per batch adds 100us+ per iteration"), with the pitfall of
// https://birdpeople1984.com/%E7%AC%94%E8%AE%B0/Cuda-Challenges/day-8-Memory-Allocation-&-Pointers.html
// ("memory leaks due to forgetting to free device pointers"): the
// cudaFree(d_data) is missing.
//
//   leak_scratch_per_batch [BATCHES]     (default 200)
//
// Each batch cudaMallocs 256 KiB of scratch, runs a kernel on it and sums it;
// prints one `CLIENT_STEP {"step", "loss", "step_ms"}` line per batch
// ("loss" is the batch's checksum).
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                      \
  do {                                                                   \
    cudaError_t status_ = (call);                                        \
    if (status_ != cudaSuccess) {                                        \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorString(status_));                         \
      std::exit(2);                                                      \
    }                                                                    \
  } while (0)

__global__ void fill_and_sum(float* data, int n, int batch, float* sum) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    data[i] = static_cast<float>((i * 7 + batch) % 13) * 0.5f;
    atomicAdd(sum, data[i]);
  }
}

static float process_batch(int batch, float* d_sum) {
  const int n = 64 * 1024;  // 256 KiB of float
  float* d_data = nullptr;
  CHECK(cudaMalloc(&d_data, n * sizeof(float)));  // LEAK: non-tensor-driver-allocations
  CHECK(cudaMemset(d_sum, 0, sizeof(float)));
  fill_and_sum<<<(n + 255) / 256, 256>>>(d_data, n, batch, d_sum);
  float sum = 0;
  CHECK(cudaMemcpy(&sum, d_sum, sizeof(float), cudaMemcpyDeviceToHost));
  return sum;
}

int main(int argc, char** argv) {
  int batches = argc > 1 ? std::atoi(argv[1]) : 200;
  float* d_sum = nullptr;
  CHECK(cudaMalloc(&d_sum, sizeof(float)));
  for (int batch = 1; batch <= batches; ++batch) {
    auto started = std::chrono::steady_clock::now();
    float sum = process_batch(batch, d_sum);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    std::printf("CLIENT_STEP {\"step\": %d, \"loss\": %.1f, \"step_ms\": %.3f}\n", batch, sum, ms);
    std::fflush(stdout);
  }
  CHECK(cudaFree(d_sum));
  return 0;
}
