#include "analysis/growth/vmm_site_pairs.h"

namespace gpuleak::analysis {

void VmmSitePairs::on_alloc(const trace::AllocRecord& alloc) {
  if (alloc.kind == trace::MemoryKind::kVmmPhysical) {
    if (mapping_of_physical_.contains(alloc.stack_id)) return;
    if (unmapped_physical_by_thread_.size() >= kMaxPairs) return;
    unmapped_physical_by_thread_[alloc.thread_id] = alloc.stack_id;
    return;
  }
  if (alloc.kind != trace::MemoryKind::kVmmMapping) return;
  auto pending = unmapped_physical_by_thread_.find(alloc.thread_id);
  if (pending == unmapped_physical_by_thread_.end()) return;
  if (mapping_of_physical_.size() < kMaxPairs)
    mapping_of_physical_.try_emplace(pending->second, alloc.stack_id);
  unmapped_physical_by_thread_.erase(pending);
}

std::optional<std::uint32_t> VmmSitePairs::mapping_site_of(std::uint32_t physical_site) const {
  auto it = mapping_of_physical_.find(physical_site);
  if (it == mapping_of_physical_.end()) return std::nullopt;
  return it->second;
}

}  // namespace gpuleak::analysis
