// The allocations that are live at the current point of a trace.
//
// Keys are (address space, address): device and host pointers share one
// space (unified addressing), while VMM handles, mappings, address-range
// reservations, CUDA arrays and PyTorch blocks (which lie inside driver
// segments) each have their own, so they never collide.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>

#include "trace/records.h"

namespace gpuleak::analysis {

struct LiveAllocation {
  std::uint64_t seq = 0;
  std::uint64_t time_ns = 0;
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  trace::MemoryKind kind = trace::MemoryKind::kDevice;
  std::uint32_t api = 0;
  std::int32_t device = -1;
  std::uint32_t stack_id = 0;
  std::uint32_t thread_id = 0;
  std::uint64_t step_index = 0;  // step boundaries seen before it was made
};

// Tensor-level memory (a PyTorch tensor, or one driver call per tensor
// under the cudaMallocAsync backend) versus memory the driver hands out.
bool is_tensor_kind(trace::MemoryKind kind);
// Memory that occupies the GPU (not host-pinned, not address space only).
bool occupies_device(trace::MemoryKind kind);

class LiveSet {
 public:
  // Adds an allocation. Returns true if it replaced an entry with the same
  // key (a free the trace did not contain).
  bool add(const trace::AllocRecord& record, std::uint64_t step_index);
  // Removes the allocation a free refers to; nullopt if it is not live.
  std::optional<LiveAllocation> remove(const trace::FreeRecord& record);

  std::uint64_t count() const { return entries_.size(); }
  std::uint64_t bytes() const { return bytes_; }
  std::uint64_t tensor_bytes() const { return tensor_bytes_; }
  std::uint64_t device_bytes() const { return device_bytes_; }

  template <class Visit>
  void for_each(Visit&& visit) const {
    for (const auto& [key, allocation] : entries_) visit(allocation);
  }

 private:
  struct Key {
    std::uint8_t space;
    std::uint64_t address;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const {
      return std::hash<std::uint64_t>()(k.address * 31 + k.space);
    }
  };
  static Key key_of(trace::MemoryKind kind, std::uint64_t address);
  void account(const LiveAllocation& a, bool adding);

  std::unordered_map<Key, LiveAllocation, KeyHash> entries_;
  std::uint64_t bytes_ = 0;
  std::uint64_t tensor_bytes_ = 0;
  std::uint64_t device_bytes_ = 0;
};

}  // namespace gpuleak::analysis
