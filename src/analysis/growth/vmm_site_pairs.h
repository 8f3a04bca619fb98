// Pairs the two sites of a virtual-memory allocation.
//
// A framework that places its buffers in virtual memory (JAX's platform
// allocator on CUDA 13 takes 2 MiB granules) makes two records per
// allocation: the physical memory (cuMemCreate, whose "address" is a
// handle) and its mapping (cuMemMap, the addresses its arrays live at).
// Growth is judged on the physical site, which holds the memory; a holder
// is found for the mapping site, because the walk matches array addresses
// (the collector's live index asks for mappings, never for handles). A
// physical site is paired with the first mapping made after it on the same
// thread, which is how drivers' users create and map a granule.
//
// Bounded: at most kMaxPairs physical sites are paired. Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>

#include "trace/records.h"

namespace gpuleak::analysis {

class VmmSitePairs {
 public:
  void on_alloc(const trace::AllocRecord& alloc);
  // The mapping site that follows this physical site's allocations, if any.
  std::optional<std::uint32_t> mapping_site_of(std::uint32_t physical_site) const;

  static constexpr std::size_t kMaxPairs = 4096;

 private:
  // Per thread, the physical site whose mapping has not come yet.
  std::unordered_map<std::uint32_t, std::uint32_t> unmapped_physical_by_thread_;
  std::unordered_map<std::uint32_t, std::uint32_t> mapping_of_physical_;
};

}  // namespace gpuleak::analysis
