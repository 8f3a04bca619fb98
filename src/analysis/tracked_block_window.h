// The part of a trace that one `gpuleak.track()` block recorded.
//
// A process that tracks blocks (python/gpuleak/tracking.py) records into one
// trace for its whole life and marks each block with two `tracked_block`
// annotations, {"event": "begin", "block": N} and {"event": "end", ...}.
// The report on block N sees the trace's definitions (stacks, modules,
// code) and annotations all through, and its events (allocations, frees,
// steps, samples) only between the two marks: what was allocated in the
// block and is still live at its end is what the block left behind, and
// only the block's steps count for growth. Frees of memory allocated
// before the block are frees of unknown addresses, which the analysis
// already tolerates (memory allocated before recording began).
//
// Not thread-safe; one per ProcessAnalysis.
#pragma once

#include <cstdint>

#include "trace/records.h"

namespace gpuleak::analysis {

// The annotation key that marks tracked blocks (one name with tracking.py).
inline constexpr const char* kTrackedBlockAnnotation = "tracked_block";

class TrackedBlockWindow {
 public:
  explicit TrackedBlockWindow(std::uint64_t block) : block_(block) {}

  // Whether the analysis sees this record. Records without a sequence number
  // (definitions) never reach it; annotations, context, exit and lost records
  // always pass (a holder answer comes after the block's end; losses must be
  // said; a context made before the block is still the process's).
  bool admits(const trace::Record& record);

  bool began() const { return state_ != State::kBefore; }
  bool ended() const { return state_ == State::kAfter; }
  std::uint64_t block() const { return block_; }

 private:
  enum class State { kBefore, kInside, kAfter };
  void on_annotation(const trace::AnnotationRecord& annotation);

  std::uint64_t block_;
  State state_ = State::kBefore;
};

}  // namespace gpuleak::analysis
