// The allocations that are live at the current point of a trace.
//
// Keys are (address space, address): device and host pointers share one
// space (unified addressing), while VMM handles, mappings, address-range
// reservations, CUDA arrays and PyTorch blocks (which lie inside driver
// segments) each have their own, so they never collide.
//
// Every allocation and free of a trace looks an entry up here, so the
// entries live in one open-addressing table (linear probing, deletion by
// shifting back, no tombstones): a lookup touches one or two cache lines,
// not a bucket array and a separately allocated node.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

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
  // key (a free the trace did not contain); the entry replaced goes to
  // `replaced` when given.
  bool add(const trace::AllocRecord& record, std::uint64_t step_index,
           LiveAllocation* replaced = nullptr);
  // Removes the allocation a free refers to; nullopt if it is not live.
  std::optional<LiveAllocation> remove(const trace::FreeRecord& record);

  std::uint64_t count() const { return count_; }
  std::uint64_t bytes() const { return bytes_; }
  std::uint64_t tensor_bytes() const { return tensor_bytes_; }
  std::uint64_t device_bytes() const { return device_bytes_; }
  // Slots the table holds now: what its memory is proportional to.
  std::size_t slot_count() const { return slots_.size(); }

  template <class Visit>
  void for_each(Visit&& visit) const {
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      if (used(i)) visit(slots_[i]);
    }
  }

 private:
  static std::uint8_t space_of(trace::MemoryKind kind);
  std::size_t home_of(std::uint8_t space, std::uint64_t address) const;
  // The slot holding (space, address), or the empty slot where it would go.
  std::size_t find(std::uint8_t space, std::uint64_t address) const;
  bool used(std::size_t i) const { return (used_[i >> 6] >> (i & 63)) & 1; }
  void set_used(std::size_t i, bool on) {
    if (on)
      used_[i >> 6] |= 1ull << (i & 63);
    else
      used_[i >> 6] &= ~(1ull << (i & 63));
  }
  // Rehashes every entry into a table of `size` slots (a power of two).
  void resize(std::size_t size);
  static constexpr std::size_t kSmallestSize = 1024;
  void account(const LiveAllocation& a, bool adding);

  // One allocation per slot (64 bytes, a cache line), which slots are in
  // use in a bitmap; the size is a power of two, between an eighth (above the
  // smallest size) and 70 % used.
  std::vector<LiveAllocation> slots_;
  std::vector<std::uint64_t> used_;
  std::uint64_t count_ = 0;
  std::uint64_t bytes_ = 0;
  std::uint64_t tensor_bytes_ = 0;
  std::uint64_t device_bytes_ = 0;
};

}  // namespace gpuleak::analysis
