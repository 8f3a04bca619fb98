// What the files of GraphFlow share (graph_flow.h describes the analysis):
// the bits it keeps beside ValueBits and a small word helper.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "file_analysis.h"
#include "graph_flow.h"

namespace gpuleak::lint::graph_flow {

inline constexpr FlowBits kTensorBits = kCarriesGraph | kDeviceTensor;
// A leaf that requires grad (`nn.Parameter(x)`, `torch.zeros(..., requires_grad=True)`
// made in a function): no graph of its own, but whatever is computed from it
// outside no_grad has one (as_operand).
inline constexpr FlowBits kRequiresGradLeaf = 0x10;
// The bits above those follow a function's parameters into stores.
inline constexpr int kParameterShift = 5;
inline constexpr FlowBits kFirstParameterBit = FlowBits{1} << kParameterShift;
inline constexpr FlowBits kParameterBits = ~(kFirstParameterBit - 1);
inline constexpr std::size_t kTrackedParameters = 32 - kParameterShift;
static_assert(kTrackedParameters == kGraphFlowTrackedParameters);
inline constexpr int kMaxRounds = 4;
// Nested loops are walked twice each; beyond this depth once, which bounds
// the work on pathological nesting at the price of missing facts carried
// around very deep loops.
inline constexpr int kMaxLoopDepthWalkedTwice = 4;

// What a value is as the operand of a computation: a leaf that requires grad
// gives a result with a graph.
inline FlowBits as_operand(FlowBits bits) {
  if (!(bits & kRequiresGradLeaf)) return bits;
  return (bits & ~kRequiresGradLeaf) | kCarriesGraph | kDeviceTensor;
}

inline bool one_of(std::string_view s, std::initializer_list<std::string_view> words) {
  return std::find(words.begin(), words.end(), s) != words.end();
}

}  // namespace gpuleak::lint::graph_flow
