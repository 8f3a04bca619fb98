// The allocations that are live at the current point of a trace.
//
// Keys are (address space, address): device and host pointers share one
// space (unified addressing), while VMM handles, mappings, address-range
// reservations, CUDA arrays and PyTorch blocks (which lie inside driver
// segments) each have their own, so they never collide.
//
// Every allocation and free of a trace looks an entry up here, and a trace
// whose frees were lost (by a collector under load, from an allocator that
// never hands an address out twice) keeps millions of entries to its end;
// so the entries are dense and small, and the hash table holds only 8-byte
// references to them:
//   - entries: 48 bytes each, in fixed chunks of kChunkEntries (the store
//     never copies itself to grow), a free filled from the last entry;
//   - index: open addressing (linear probing, deletion by shifting back, no
//     tombstones), each slot the entry's position and the low 32 bits of
//     its key's hash, which give the slot's home (a table never has more
//     than 2^32 slots) and tell most keys of a probe run apart without
//     reading their entry.
// About 70 bytes per live allocation at most, against 90-180 for a table of
// whole entries (and twice that while it doubled).
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "trace/records.h"

namespace gpuleak::analysis {

struct LiveAllocation {
  std::uint64_t seq = 0;
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  std::uint64_t step_index = 0;  // step boundaries seen before it was made
  std::uint32_t api = 0;
  std::uint32_t stack_id = 0;
  std::int32_t device = -1;
  trace::MemoryKind kind = trace::MemoryKind::kDevice;
};

// What a memory kind is (defined with the record format, trace/records.h).
using trace::is_tensor_kind;
using trace::occupies_device;

// The entry an allocation record makes.
LiveAllocation live_allocation_of(const trace::AllocRecord& record, std::uint64_t step_index);

class LiveSet {
 public:
  LiveSet() = default;
  LiveSet(LiveSet&&) = default;
  LiveSet& operator=(LiveSet&&) = default;

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
  // Slots the index holds now.
  std::size_t slot_count() const { return index_.size(); }
  // Bytes the entries and the index take now.
  std::size_t memory_bytes() const;

  // Visits every live allocation, in no particular order.
  template <class Visit>
  void for_each(Visit&& visit) const {
    for (std::uint64_t p = 0; p < count_; ++p) visit(entry(p));
  }

 private:
  static constexpr std::size_t kSmallestSize = 1024;  // index slots
  static constexpr std::uint64_t kChunkShift = 12;
  static constexpr std::uint64_t kChunkEntries = 1ull << kChunkShift;
  // Positions are 32 bits in a slot, and the index must stay under 2^32 slots.
  static constexpr std::uint64_t kMaxEntries = 1ull << 31;

  static std::uint8_t space_of(trace::MemoryKind kind);
  static std::uint32_t hash_of(std::uint8_t space, std::uint64_t address);
  static std::uint64_t slot_value(std::uint32_t hash, std::uint64_t position) {
    return (static_cast<std::uint64_t>(position + 1) << 32) | hash;
  }
  static std::uint64_t position_of(std::uint64_t slot) { return (slot >> 32) - 1; }
  static std::uint32_t hash_in(std::uint64_t slot) { return static_cast<std::uint32_t>(slot); }

  LiveAllocation& entry(std::uint64_t p) {
    return chunks_[p >> kChunkShift][p & (kChunkEntries - 1)];
  }
  const LiveAllocation& entry(std::uint64_t p) const {
    return chunks_[p >> kChunkShift][p & (kChunkEntries - 1)];
  }
  // The slot holding (space, address), or the empty slot where it would go.
  std::size_t find(std::uint32_t hash, std::uint8_t space, std::uint64_t address) const;
  // Rehashes every slot into an index of `size` slots (a power of two).
  void resize(std::size_t size);
  // Empties slot `i`, shifting back the slots after it.
  void erase_slot(std::size_t i);
  void account(const LiveAllocation& a, bool adding);

  std::vector<std::unique_ptr<LiveAllocation[]>> chunks_;
  // 0: empty; else (position + 1) << 32 | low 32 bits of the key's hash. The
  // size is a power of two, between an eighth (above the smallest size) and
  // 70 % used.
  std::vector<std::uint64_t> index_;
  std::uint64_t count_ = 0;
  std::uint64_t bytes_ = 0;
  std::uint64_t tensor_bytes_ = 0;
  std::uint64_t device_bytes_ = 0;
};

}  // namespace gpuleak::analysis
