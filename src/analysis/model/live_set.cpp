#include "analysis/model/live_set.h"

#include <stdexcept>

namespace gpuleak::analysis {

using trace::MemoryKind;

LiveAllocation live_allocation_of(const trace::AllocRecord& r, std::uint64_t step_index) {
  LiveAllocation a;
  a.seq = r.seq;
  a.address = r.address;
  a.size = r.size;
  a.step_index = step_index;
  a.api = r.api;
  a.stack_id = r.stack_id;
  a.device = r.device;
  a.kind = r.kind;
  return a;
}

std::uint8_t LiveSet::space_of(MemoryKind kind) { return trace::address_space(kind); }

std::uint32_t LiveSet::hash_of(std::uint8_t space, std::uint64_t address) {
  // Addresses are aligned and close together: mix them before masking.
  std::uint64_t h = address ^ (static_cast<std::uint64_t>(space) << 59);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return static_cast<std::uint32_t>(h);
}

std::size_t LiveSet::find(std::uint32_t hash, std::uint8_t space, std::uint64_t address) const {
  std::size_t mask = index_.size() - 1;
  for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
    std::uint64_t slot = index_[i];
    if (slot == 0) return i;
    if (hash_in(slot) != hash) continue;
    const LiveAllocation& a = entry(position_of(slot));
    if (a.address == address && space_of(a.kind) == space) return i;
  }
}

void LiveSet::resize(std::size_t size) {
  // The slots carry their home (the hash's low bits): no entry is read.
  std::vector<std::uint64_t> old;
  old.swap(index_);
  index_.assign(size, 0);
  std::size_t mask = size - 1;
  for (std::uint64_t slot : old) {
    if (slot == 0) continue;
    std::size_t i = hash_in(slot) & mask;
    while (index_[i] != 0) i = (i + 1) & mask;
    index_[i] = slot;
  }
}

void LiveSet::erase_slot(std::size_t i) {
  // Shift back the slots after it whose home is at or before the hole, so
  // every lookup still finds them without passing an empty slot.
  std::size_t mask = index_.size() - 1;
  std::size_t hole = i;
  for (std::size_t j = (i + 1) & mask; index_[j] != 0; j = (j + 1) & mask) {
    std::size_t home = hash_in(index_[j]) & mask;
    // Movable when `home` is not cyclically within (hole, j].
    bool between = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
    if (!between) {
      index_[hole] = index_[j];
      hole = j;
    }
  }
  index_[hole] = 0;
}

void LiveSet::account(const LiveAllocation& a, bool adding) {
  auto apply = [adding](std::uint64_t& total, std::uint64_t size) {
    total = adding ? total + size : total - size;
  };
  apply(bytes_, a.size);
  if (is_tensor_kind(a.kind)) apply(tensor_bytes_, a.size);
  if (occupies_device(a.kind)) apply(device_bytes_, a.size);
}

std::size_t LiveSet::memory_bytes() const {
  return chunks_.size() * kChunkEntries * sizeof(LiveAllocation) +
         chunks_.capacity() * sizeof(chunks_[0]) + index_.capacity() * sizeof(index_[0]);
}

bool LiveSet::add(const trace::AllocRecord& r, std::uint64_t step_index,
                  LiveAllocation* replaced_entry) {
  LiveAllocation a = live_allocation_of(r, step_index);
  std::uint8_t space = space_of(r.kind);
  std::uint32_t hash = hash_of(space, r.address);
  if (!index_.empty()) {
    std::size_t i = find(hash, space, r.address);
    if (index_[i] != 0) {
      LiveAllocation& held = entry(position_of(index_[i]));
      account(held, false);
      if (replaced_entry) *replaced_entry = held;
      held = a;
      account(a, true);
      return true;
    }
  }
  if (count_ >= kMaxEntries) {
    throw std::length_error("more than 2^31 allocations live at once: more than a report can hold");
  }
  if ((count_ + 1) * 10 > index_.size() * 7)
    resize(index_.empty() ? kSmallestSize : index_.size() * 2);
  if (count_ == chunks_.size() * kChunkEntries)
    chunks_.push_back(std::make_unique<LiveAllocation[]>(kChunkEntries));
  std::size_t i = find(hash, space, r.address);
  entry(count_) = a;
  index_[i] = slot_value(hash, count_);
  ++count_;
  account(a, true);
  return false;
}

std::optional<LiveAllocation> LiveSet::remove(const trace::FreeRecord& r) {
  if (index_.empty()) return std::nullopt;
  std::uint8_t space = space_of(r.kind);
  std::uint32_t hash = hash_of(space, r.address);
  std::size_t i = find(hash, space, r.address);
  if (index_[i] == 0) return std::nullopt;
  std::uint64_t position = position_of(index_[i]);
  LiveAllocation a = entry(position);
  account(a, false);
  erase_slot(i);
  // The last entry fills the hole, so the entries stay dense.
  std::uint64_t last = count_ - 1;
  if (position != last) {
    const LiveAllocation& moved = entry(last);
    std::uint32_t moved_hash = hash_of(space_of(moved.kind), moved.address);
    std::size_t mask = index_.size() - 1;
    std::uint64_t from = slot_value(moved_hash, last);
    for (std::size_t j = moved_hash & mask;; j = (j + 1) & mask) {
      if (index_[j] == from) {
        index_[j] = slot_value(moved_hash, position);
        break;
      }
    }
    entry(position) = moved;
  }
  --count_;
  // Give memory back when the live set has shrunk (a burst of allocations
  // that was freed): the store holds what is live, not the peak. One spare
  // chunk stays, so a set that goes to and fro across a chunk's edge does
  // not allocate at every step.
  if (chunks_.size() * kChunkEntries >= count_ + 2 * kChunkEntries) chunks_.pop_back();
  if (index_.size() > kSmallestSize && count_ * 8 < index_.size()) resize(index_.size() / 2);
  return a;
}

}  // namespace gpuleak::analysis
