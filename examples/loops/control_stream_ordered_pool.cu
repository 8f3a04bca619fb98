// NOT A LEAK: two host threads, each on its own stream, allocate and free per iteration through the
// stream-ordered allocator; the pool keeps the memory (release threshold at its maximum).
//
// Sources:
//   https://docs.nvidia.com/cuda/cuda-programming-guide/04-special-topics/stream-ordered-memory-allocation.html
//       ("When set up with an appropriate release threshold, the caching behavior allows the
//       allocator to avoid expensive calls into the OS when the application indicates it is willing
//       to accept a bigger memory footprint")
//   https://developer.nvidia.com/blog/using-the-nvidia-cuda-stream-ordered-memory-allocator-part-1/
//   https://github.com/sdodlapati3/cuda-lab  (the usual loop: cudaMallocAsync, a kernel,
//       cudaFreeAsync, per iteration)
//
// What was reported: with cudaMallocAsync the memory a process holds, seen
// from outside, does not go down after cudaFreeAsync when the pool's release
// threshold is raised -- the pool keeps it to serve the next allocation.
// That is the point of the pool, not a leak.
//
// This program: two worker threads each run N iterations of cudaMallocAsync
// (1..8 MiB, drawn per iteration), a kernel, and cudaFreeAsync on their own
// stream, with the device's default pool set to keep everything
// (cudaMemPoolAttrReleaseThreshold = UINT64_MAX). Every iteration allocates
// and frees; nothing is kept. The two threads' allocation streams interleave.
//
// Iteration: one iteration of a worker's loop (2 x --iterations in all, from two threads).
// Verdict: NO LEAK.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#include "../cuda/check.h"

__global__ void fill(float* data, size_t count, float value) {
  size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  if (i < count) data[i] = value * static_cast<float>(i % 1024);
}

static void worker(int seed, int iterations) {
  CHECK(cudaSetDevice(0));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::mt19937 random(seed);
  std::uniform_int_distribution<size_t> mebibytes(1, 8);
  for (int i = 0; i < iterations; ++i) {
    const size_t bytes = mebibytes(random) << 20;
    float* data = nullptr;
    CHECK(cudaMallocAsync(reinterpret_cast<void**>(&data), bytes, stream));
    const size_t count = bytes / sizeof(float);
    fill<<<(count + 255) / 256, 256, 0, stream>>>(data, count, 0.5f);
    CHECK(cudaGetLastError());
    CHECK(cudaFreeAsync(data, stream));
    if (i % 16 == 0) CHECK(cudaStreamSynchronize(stream));
  }
  CHECK(cudaStreamSynchronize(stream));
  CHECK(cudaStreamDestroy(stream));
}

static int iterations_from(int argc, char** argv, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--iterations") == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

int main(int argc, char** argv) {
  const int iterations = iterations_from(argc, argv, 1000);
  CHECK(cudaSetDevice(0));
  cudaMemPool_t pool;
  CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
  uint64_t keep_everything = UINT64_MAX;
  CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
  std::thread first(worker, 1, iterations), second(worker, 2, iterations);
  first.join();
  second.join();
  uint64_t reserved = 0, used = 0;
  CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
  std::printf("iterations=%d pool_reserved=%llu pool_used=%llu\n", iterations,
              static_cast<unsigned long long>(reserved), static_cast<unsigned long long>(used));
  return 0;
}
