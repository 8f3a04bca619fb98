// Deduplicates call stacks and gives each a small id.
//
// Capture (native frames, Python frames) happens on the allocating thread;
// the first time a stack is seen, its definition (StackRecord, and a
// PythonCodeRecord for each new code object) is encoded into `definitions`
// so the caller can put it in its buffer ahead of the event that uses it.
//
// Thread-safe: the table is sharded, each shard behind its own mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "collector/config.h"
#include "collector/python_frames.h"
#include "collector/remembered_stacks.h"

namespace gpuleak::collector {

class StackTable {
 public:
  explicit StackTable(const Config& config) : config_(config) {}

  // Return addresses a caller unwound itself (capture_native_stack), from a
  // frame nearer the program than capture() would start: every frame of the
  // collector's own is one more step of the unwinder.
  struct NativeFrames {
    const std::uint64_t* frames = nullptr;
    int count = 0;
    // The remembered stack they were read from, if one: a stack with no
    // Python frames takes the id kept there instead of hashing its frames.
    RememberedHit remembered;
  };

  // Whether capture() takes native frames whatever Python frames it finds,
  // so a caller may unwind first and hand them over.
  bool native_frames_wanted(bool with_native) const;

  // Captures the calling thread's stack and returns its id (0 if none could
  // be captured). New definitions are appended (encoded) to `definitions`,
  // and `definition_count` is increased by their number. Native frames are
  // taken when there are no Python frames, or always with `with_native`
  // (driver allocations: their native frames tell PyTorch's cache, NCCL
  // and cuBLAS apart); `unwound`, if given, are used instead of unwinding.
  // `tensor`: a tensor allocation, whose native frames (when it has no
  // Python ones) stop at the config's tensor_native_depth.
  std::uint32_t capture(std::string& definitions, std::uint32_t& definition_count, bool with_native,
                        const NativeFrames* unwound = nullptr, bool tensor = false);

  // For bench/torch/step_time.py only (gpuleak_benchmark_tensor_recording):
  // what tensor stacks keep, so one process can time its own parts.
  enum class TensorStacks : int { kNone = 1, kPythonOnly = 2, kFull = 3 };
  void set_tensor_stacks_for_benchmark(TensorStacks stacks) {
    tensor_stacks_.store(static_cast<int>(stacks), std::memory_order_relaxed);
  }

 private:
  static constexpr int kShards = 64;
  static constexpr int kRecentStacks = 64;  // per-thread cache of recent stack ids
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::uint64_t, std::uint32_t> ids;  // stack hash -> id
  };

  std::uint32_t intern(std::uint64_t hash, bool* is_new);
  // Id of a code object, defining it on first sight. `reader` is the frame
  // reader that saw it, or null when it was seen with the GIL held.
  std::uint32_t code_id(void* code, const PythonFrameReader* reader, std::string& definitions,
                        std::uint32_t& definition_count);

  const Config& config_;
  std::atomic<int> tensor_stacks_{static_cast<int>(TensorStacks::kFull)};
  Shard shards_[kShards];
  std::atomic<std::uint32_t> next_stack_id_{1};

  std::mutex code_mutex_;
  std::unordered_map<void*, std::uint32_t> code_ids_;
  std::uint32_t next_code_id_ = 1;
};

}  // namespace gpuleak::collector
