// How one traced process used CUDA, gathered while its trace is read: the
// first use of CUDA (context creation, with the stack the collector captured
// then; else the first allocation), the driver memory it held over time split
// into PyTorch's cache, tensors and other calls, its last GPU activity, and
// the facts its role is judged by (main thread name, `process_role`).
//
// ProcessAnalysis feeds it every record and every allocation that enters or
// leaves its live set; ProcessAnalysis::build_report copies the summary
// into ProcessReport::cuda_use. The memory series is bounded: when it is
// full, every other point is dropped and the spacing doubles.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>

#include "analysis/model/live_set.h"
#include "analysis/model/report_model.h"
#include "analysis/model/stack_catalog.h"
#include "trace/records.h"

namespace gpuleak::analysis {

class ProcessActivity {
 public:
  static constexpr std::size_t kMaxMemoryPoints = 4096;
  static constexpr std::uint64_t kFirstSpacingNs = 10'000'000;  // 10 ms

  explicit ProcessActivity(StackCatalog& catalog) : catalog_(catalog) {}

  void consume(const trace::Record& record);
  void on_alloc(const LiveAllocation& allocation, std::uint64_t time_ns);
  void on_free(const LiveAllocation& allocation, std::uint64_t free_time_ns);

  ProcessCudaUse summary();
  // Driver memory PyTorch's caching allocator holds now (its reserve).
  std::uint64_t cache_bytes() const { return cache_bytes_; }

 private:
  bool from_caching_allocator(std::uint32_t stack_id);
  void note_memory(std::uint64_t time_ns);
  double seconds(std::uint64_t time_ns) const;

  StackCatalog& catalog_;
  std::uint32_t pid_ = 0;
  std::uint64_t start_ns_ = 0;

  struct FirstUse {
    std::uint64_t time_ns = 0;
    std::int32_t device = -1;
    std::uint32_t stack_id = 0;
    bool context = false;
  };
  std::optional<FirstUse> first_context_, first_alloc_;
  std::uint64_t contexts_created_ = 0;
  std::optional<std::uint64_t> last_activity_ns_, python_exit_ns_, exit_ns_;
  std::string main_thread_name_;
  std::optional<ProcessRoleAnnotation> role_;

  std::unordered_map<std::uint32_t, bool> cache_origin_;  // stack id -> from PyTorch's cache
  std::uint64_t cache_bytes_ = 0, tensor_bytes_ = 0, driver_bytes_ = 0;
  std::vector<DriverMemoryPoint> memory_;
  std::vector<std::uint64_t> memory_times_ns_;
  std::uint64_t spacing_ns_ = kFirstSpacingNs;
};

}  // namespace gpuleak::analysis
