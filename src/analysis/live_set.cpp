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

LiveSet::Key LiveSet::key_of(MemoryKind kind, std::uint64_t address) {
  std::uint8_t space = 0;
  switch (kind) {
    case MemoryKind::kVmmPhysical:
      space = 1;
      break;
    case MemoryKind::kVmmMapping:
      space = 2;
      break;
    case MemoryKind::kAddressRange:
      space = 3;
      break;
    case MemoryKind::kArray:
      space = 4;
      break;
    case MemoryKind::kTorchBlock:
      space = 5;
      break;
    default:
      space = 0;  // device, async, managed and pinned host pointers share unified addressing
  }
  return Key{space, address};
}

void LiveSet::account(const LiveAllocation& a, bool adding) {
  auto apply = [adding](std::uint64_t& total, std::uint64_t size) {
    total = adding ? total + size : total - size;
  };
  apply(bytes_, a.size);
  if (is_tensor_kind(a.kind)) apply(tensor_bytes_, a.size);
  if (occupies_device(a.kind)) apply(device_bytes_, a.size);
}

bool LiveSet::add(const trace::AllocRecord& r, std::uint64_t step_index) {
  LiveAllocation a{r.seq, r.time_ns, r.address,  r.size,      r.kind,
                   r.api, r.device,  r.stack_id, r.thread_id, step_index};
  auto [it, inserted] = entries_.try_emplace(key_of(r.kind, r.address), a);
  if (!inserted) {
    account(it->second, false);
    it->second = a;
  }
  account(a, true);
  return !inserted;
}

std::optional<LiveAllocation> LiveSet::remove(const trace::FreeRecord& r) {
  auto it = entries_.find(key_of(r.kind, r.address));
  if (it == entries_.end()) return std::nullopt;
  LiveAllocation a = it->second;
  account(a, false);
  entries_.erase(it);
  return a;
}

}  // namespace gpuleak::analysis
