// How much device memory does one executable graph hold? The driver keeps it
// for itself (no cuMemAlloc of the program's), so the collector can only
// estimate it from the graph's node count. This probe measures the slope: for
// graphs of N kernel nodes (and N memset nodes), it instantiates K executable
// graphs, keeps them all, and reads the device's used memory before and after
// (cudaMemGetInfo), then destroys them and reads it again.
//
// Output: one JSON object per line:
//   {"nodes": N, "node_type": "kernel", "execs": K, "bytes_per_exec": B, "freed_bytes": F}
// Build: nvcc -std=c++17 -arch=sm_90 -O1 -o graph_exec_bytes_probe graph_exec_bytes_probe.cu
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#define CHECK(call)                                                                   \
  do {                                                                                \
    cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

__global__ void step_kernel(float* state, int count) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) state[i] = state[i] * 0.5f + 1.0f;
}

static long long used_bytes() {
  size_t free_bytes = 0, total = 0;
  cudaDeviceSynchronize();
  cudaMemGetInfo(&free_bytes, &total);
  return static_cast<long long>(total - free_bytes);
}

static int measure(int nodes, bool memset_nodes, int execs) {
  const int count = 1 << 14;
  float* state = nullptr;
  CHECK(cudaMalloc(&state, count * sizeof(float)));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int n = 0; n < nodes; ++n) {
    if (memset_nodes)
      CHECK(cudaMemsetAsync(state, 0, count * sizeof(float), stream));
    else
      step_kernel<<<(count + 255) / 256, 256, 0, stream>>>(state, count);
  }
  cudaGraph_t graph;
  CHECK(cudaStreamEndCapture(stream, &graph));
  long long before = used_bytes();
  std::vector<cudaGraphExec_t> kept(execs);
  for (auto& exec : kept) CHECK(cudaGraphInstantiate(&exec, graph, 0));
  // Launch each once: some drivers place a graph's data on the device at the
  // first launch (or upload), not at instantiation.
  for (auto& exec : kept) CHECK(cudaGraphLaunch(exec, stream));
  CHECK(cudaStreamSynchronize(stream));
  long long after = used_bytes();
  for (auto& exec : kept) CHECK(cudaGraphExecDestroy(exec));
  long long destroyed = used_bytes();
  std::printf(
      "{\"nodes\": %d, \"node_type\": \"%s\", \"execs\": %d, \"bytes_per_exec\": %.1f, "
      "\"freed_bytes\": %lld}\n",
      nodes, memset_nodes ? "memset" : "kernel", execs, double(after - before) / execs,
      after - destroyed);
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaStreamDestroy(stream));
  CHECK(cudaFree(state));
  return 0;
}

int main() {
  CHECK(cudaFree(nullptr));
  for (int nodes : {1, 4, 16, 64, 256, 1024}) {
    int execs = nodes >= 256 ? 64 : 256;
    if (measure(nodes, false, execs)) return 1;
  }
  for (int nodes : {16, 256}) {
    if (measure(nodes, true, 64)) return 1;
  }
  return 0;
}
