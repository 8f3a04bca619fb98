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
// The bits above the low nibble follow a function's parameters into stores.
inline constexpr FlowBits kFirstParameterBit = 0x10;
inline constexpr FlowBits kParameterBits = ~FlowBits{0xF};
inline constexpr std::size_t kTrackedParameters = 28;
static_assert(kTrackedParameters == kGraphFlowTrackedParameters);
inline constexpr int kMaxRounds = 4;
// Nested loops are walked twice each; beyond this depth once, which bounds
// the work on pathological nesting at the price of missing facts carried
// around very deep loops.
inline constexpr int kMaxLoopDepthWalkedTwice = 4;

inline bool one_of(std::string_view s, std::initializer_list<std::string_view> words) {
  return std::find(words.begin(), words.end(), s) != words.end();
}

}  // namespace gpuleak::lint::graph_flow
