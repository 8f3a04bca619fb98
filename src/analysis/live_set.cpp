#include "analysis/live_set.h"

namespace gpuleak::analysis {

using trace::MemoryKind;

bool is_tensor_kind(MemoryKind kind) {
  return kind == MemoryKind::kTorchBlock || kind == MemoryKind::kDeviceAsync;
}

bool occupies_device(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kDevice:
    case MemoryKind::kDeviceAsync:
    case MemoryKind::kManaged:
    case MemoryKind::kVmmPhysical:
    case MemoryKind::kArray:
      return true;
    // Host memory, address space, mappings of handles counted once as
    // kVmmPhysical, and torch blocks (inside driver segments, counted there).
    default:
      return false;
  }
}

std::uint8_t LiveSet::space_of(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kVmmPhysical:
      return 1;
    case MemoryKind::kVmmMapping:
      return 2;
    case MemoryKind::kAddressRange:
      return 3;
    case MemoryKind::kArray:
      return 4;
    case MemoryKind::kTorchBlock:
      return 5;
    default:
      return 0;  // device, async, managed and pinned host pointers share unified addressing
  }
}

std::size_t LiveSet::home_of(std::uint8_t space, std::uint64_t address) const {
  // Addresses are aligned and close together: mix them before masking.
  std::uint64_t h = address ^ (static_cast<std::uint64_t>(space) << 59);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return static_cast<std::size_t>(h) & (slots_.size() - 1);
}

std::size_t LiveSet::find(std::uint8_t space, std::uint64_t address) const {
  std::size_t mask = slots_.size() - 1;
  for (std::size_t i = home_of(space, address);; i = (i + 1) & mask) {
    if (!used(i)) return i;
    const LiveAllocation& a = slots_[i];
    if (a.address == address && space_of(a.kind) == space) return i;
  }
}

void LiveSet::resize(std::size_t size) {
  std::vector<LiveAllocation> old;
  std::vector<std::uint64_t> old_used;
  old.swap(slots_);
  old_used.swap(used_);
  slots_.assign(size, LiveAllocation{});
  used_.assign(size / 64, 0);
  for (std::size_t i = 0; i < old.size(); ++i) {
    if (!((old_used[i >> 6] >> (i & 63)) & 1)) continue;
    std::size_t to = find(space_of(old[i].kind), old[i].address);
    slots_[to] = old[i];
    set_used(to, true);
  }
}

void LiveSet::account(const LiveAllocation& a, bool adding) {
  auto apply = [adding](std::uint64_t& total, std::uint64_t size) {
    total = adding ? total + size : total - size;
  };
  apply(bytes_, a.size);
  if (is_tensor_kind(a.kind)) apply(tensor_bytes_, a.size);
  if (occupies_device(a.kind)) apply(device_bytes_, a.size);
}

bool LiveSet::add(const trace::AllocRecord& r, std::uint64_t step_index,
                  LiveAllocation* replaced_entry) {
  LiveAllocation a{r.seq, r.time_ns, r.address,  r.size,      r.kind,
                   r.api, r.device,  r.stack_id, r.thread_id, step_index};
  if ((count_ + 1) * 10 > slots_.size() * 7)
    resize(slots_.empty() ? kSmallestSize : slots_.size() * 2);
  std::size_t i = find(space_of(r.kind), r.address);
  bool replaced = used(i);
  if (replaced) {
    account(slots_[i], false);
    if (replaced_entry) *replaced_entry = slots_[i];
  } else {
    set_used(i, true);
    ++count_;
  }
  slots_[i] = a;
  account(a, true);
  return replaced;
}

std::optional<LiveAllocation> LiveSet::remove(const trace::FreeRecord& r) {
  if (slots_.empty()) return std::nullopt;
  std::size_t i = find(space_of(r.kind), r.address);
  if (!used(i)) return std::nullopt;
  LiveAllocation a = slots_[i];
  account(a, false);
  // Shift back the entries after it whose home is at or before the hole,
  // so every lookup still finds them without passing an empty slot.
  std::size_t mask = slots_.size() - 1;
  std::size_t hole = i;
  for (std::size_t j = (i + 1) & mask; used(j); j = (j + 1) & mask) {
    std::size_t home = home_of(space_of(slots_[j].kind), slots_[j].address);
    // Movable when `home` is not cyclically within (hole, j].
    bool between = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
    if (!between) {
      slots_[hole] = slots_[j];
      hole = j;
    }
  }
  set_used(hole, false);
  --count_;
  // Give memory back when the live set has shrunk to an eighth (a burst of
  // allocations that was freed): the table holds what is live, not the peak.
  if (slots_.size() > kSmallestSize && count_ * 8 < slots_.size()) resize(slots_.size() / 2);
  return a;
}

}  // namespace gpuleak::analysis
