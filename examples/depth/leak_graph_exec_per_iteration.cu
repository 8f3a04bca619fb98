// A CUDA graph captured and instantiated on every iteration; the graph is destroyed, the executable graph
// never is: every cudaGraphExec_t keeps its device memory.
//
// Sources:
//   https://github.com/xangel82/DS4-GB10-GX10-DSpark-CUDA/issues/3  (a per-request leak traced to a graph
//       cache that kept instantiating: "over a 40-request soak I logged instantiated=123 against
//       replaced=1 ... '123 created, ~0 destroyed' was the actual signal")
//   https://forums.developer.nvidia.com/t/increasing-memory-footprint-with-large-task-graphs/244901
//       ("I noticed increasing GPU memory usage with increasing size of the graph ... For graphs with 500
//       nodes, I see a memory usage of 362MB. 1000 nodes becomes 395MB. 2000 nodes becomes 458MB")
//   https://github.com/NVIDIA/cuopt/pull/1753  ("If a previous update failed, destroy the cudaGraphExec_t
//       before re-instantiating it")
//
// What was reported: an executable graph holds device memory for its nodes
// (the forum thread measured it growing with the node count), and code that
// instantiates graphs repeatedly without cudaGraphExecDestroy -- a cache that
// only fills, or a re-instantiate path that forgets the old executable -- grows
// device memory with every instantiation.
//
// This program: each iteration captures a stream's work (256 small kernel
// launches, a "decode step") into a graph, instantiates it, launches it once,
// and destroys the graph (cudaGraphDestroy) but not the executable graph: the
// cudaGraphExec_t is overwritten on the next iteration.
//
// Step: one iteration (capture, instantiate, launch).
// Leak: one executable graph of 256 kernel nodes per step: driver-owned device memory for its nodes,
//   about 0.7 MiB, measured in a plain run on an H100 (device memory 538.8 MiB after 30 steps, 634.8
//   after 150; the control stays at 528.8). No cuMemAlloc of the program's holds it.
// Creating API: cudaGraphInstantiate (marked KEEP); matching destroy: cudaGraphExecDestroy.
// Fix: cudaGraphExecDestroy(exec) when it is replaced -- or instantiate once and update it
//   (cudaGraphExecUpdate) or relaunch it.
#include <cstdlib>
#include <cstring>

#include "../cuda/check.h"

constexpr int kNodes = 256;
constexpr int kCount = 1 << 16;

__global__ void decode_kernel(float* state, int count, float scale) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) state[i] = state[i] * scale + 1.0f;
}

static cudaGraphExec_t capture_step(cudaStream_t stream, float* state, float scale) {
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int node = 0; node < kNodes; ++node)
    decode_kernel<<<(kCount + 255) / 256, 256, 0, stream>>>(state, kCount, scale);
  cudaGraph_t graph;
  CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));  // KEEP: an executable graph per step, never destroyed
  CHECK(cudaGraphDestroy(graph));
  return exec;
}

static int steps_from(int argc, char** argv, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--steps") == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

int main(int argc, char** argv) {
  const int steps = steps_from(argc, argv, 150);
  float* state = nullptr;
  CHECK(cudaMalloc(&state, kCount * sizeof(float)));
  CHECK(cudaMemset(state, 0, kCount * sizeof(float)));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraphExec_t exec = nullptr;
  for (int step = 0; step < steps; ++step) {
    exec = capture_step(stream, state, 0.5f + 0.001f * step);
    CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaStreamSynchronize(stream));
  }
  CHECK(cudaStreamDestroy(stream));
  CHECK(cudaFree(state));
  size_t free_bytes = 0, total_bytes = 0;
  CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  std::printf("device_used_mib=%.1f\n", (total_bytes - free_bytes) / 1048576.0);
  std::printf("steps=%d last_exec=%p\n", steps, static_cast<void*>(exec));
  return 0;
}
