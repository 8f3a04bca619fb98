// The device memory an executable graph holds, estimated. The driver keeps a
// graph's launch data on the device for itself: no allocation call of the
// program's shows it, and no driver API reports it. What can be read is the
// graph's node count (cuGraphGetNodes); the bytes per node and per graph
// were measured on the GPU (tests/gpu/probes/graph_exec_bytes_probe.cu;
// figures in docs/collector.md), so a leaked executable graph is recorded
// with about the memory it keeps.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace gpuleak::collector {

// Estimated bytes for an executable graph instantiated from `graph`; the
// per-graph base alone when the node count cannot be read.
std::uint64_t estimated_graph_exec_bytes(CUgraph graph);

}  // namespace gpuleak::collector
