#include "collector/graph_exec_size.h"

#include <dlfcn.h>

#include <cstddef>

namespace gpuleak::collector {

namespace {

// Measured on an H100 (driver of CUDA 13) with the probe; see docs/collector.md.
constexpr std::uint64_t kBytesPerGraph = 64 * 1024;
constexpr std::uint64_t kBytesPerNode = 3 * 1024;

using GetNodes = CUresult (*)(CUgraph, CUgraphNode*, std::size_t*);

GetNodes get_nodes_function() {
  void* driver = ::dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
  return driver ? reinterpret_cast<GetNodes>(::dlsym(driver, "cuGraphGetNodes")) : nullptr;
}

}  // namespace

std::uint64_t estimated_graph_exec_bytes(CUgraph graph) {
  // Resolved once, on the first instantiation (a rare call, never on the
  // allocation pair's path).
  static const GetNodes get_nodes = get_nodes_function();
  std::size_t nodes = 0;
  if (!graph || !get_nodes || get_nodes(graph, nullptr, &nodes) != CUDA_SUCCESS) nodes = 0;
  return kBytesPerGraph + kBytesPerNode * nodes;
}

}  // namespace gpuleak::collector
