// CUDA C++ control: stream-ordered scratch per batch, returned to a pool that keeps it.
//
// Reported: the memory-pool version of
// https://www.rightnowai.co/guides/cuda-operations/memory-management
// (cudaMallocAsync/cudaFreeAsync per batch with the pool's release threshold
// at UINT64_MAX, "memory returned to pool"). The driver keeps the pool's
// memory reserved, so device memory looks held; every block is freed. Not a
// leak.
//
//   control_async_pool_per_batch [BATCHES]     (default 200)
//
// Prints one `CLIENT_STEP {"step", "loss", "step_ms"}` line per batch.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
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

static float process_batch(int batch, float* d_sum, cudaStream_t stream) {
  const int n = 64 * 1024;
  float* d_data = nullptr;
  CHECK(cudaMallocAsync(&d_data, n * sizeof(float), stream));
  CHECK(cudaMemsetAsync(d_sum, 0, sizeof(float), stream));
  fill_and_sum<<<(n + 255) / 256, 256, 0, stream>>>(d_data, n, batch, d_sum);
  CHECK(cudaFreeAsync(d_data, stream));
  float sum = 0;
  CHECK(cudaMemcpyAsync(&sum, d_sum, sizeof(float), cudaMemcpyDeviceToHost, stream));
  CHECK(cudaStreamSynchronize(stream));
  return sum;
}

int main(int argc, char** argv) {
  int batches = argc > 1 ? std::atoi(argv[1]) : 200;
  cudaMemPool_t pool;
  CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
  std::uint64_t threshold = UINT64_MAX;
  CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  float* d_sum = nullptr;
  CHECK(cudaMalloc(&d_sum, sizeof(float)));
  for (int batch = 1; batch <= batches; ++batch) {
    auto started = std::chrono::steady_clock::now();
    float sum = process_batch(batch, d_sum, stream);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    std::printf("CLIENT_STEP {\"step\": %d, \"loss\": %.1f, \"step_ms\": %.3f}\n", batch, sum, ms);
    std::fflush(stdout);
  }
  CHECK(cudaFree(d_sum));
  CHECK(cudaStreamDestroy(stream));
  return 0;
}
