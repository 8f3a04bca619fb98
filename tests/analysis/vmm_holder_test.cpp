// The holder of memory a framework keeps in virtual-memory granules (JAX's
// platform allocator on CUDA 13): growth is judged on the physical site
// (cuMemCreate), the package's walk answers for the mapping site (cuMemMap,
// whose addresses are the arrays'); the report must name the holder for the
// physical site all the same (analysis/growth/vmm_site_pairs.h).
#include <gtest/gtest.h>

#include <string>

#include "analysis/growth/vmm_site_pairs.h"
#include "analysis/synthetic_trace.h"
#include "analysis/trace_loader.h"

namespace gpuleak::analysis {
namespace {

using testing::SyntheticTrace;
using trace::MemoryKind;
using trace::StepSource;

constexpr std::uint64_t kGranule = 2 << 20;

trace::AllocRecord vmm_alloc(MemoryKind kind, std::uint32_t stack, std::uint32_t thread) {
  trace::AllocRecord r;
  r.kind = kind;
  r.stack_id = stack;
  r.thread_id = thread;
  return r;
}

TEST(VmmSitePairs, a_physical_site_pairs_with_the_next_mapping_on_its_own_thread) {
  VmmSitePairs pairs;
  pairs.on_alloc(vmm_alloc(MemoryKind::kVmmPhysical, 10, 1));
  pairs.on_alloc(vmm_alloc(MemoryKind::kVmmPhysical, 20, 2));
  pairs.on_alloc(vmm_alloc(MemoryKind::kAddressRange, 11, 1));
  pairs.on_alloc(vmm_alloc(MemoryKind::kVmmMapping, 22, 2));
  pairs.on_alloc(vmm_alloc(MemoryKind::kVmmMapping, 12, 1));
  EXPECT_EQ(pairs.mapping_site_of(10), 12u);
  EXPECT_EQ(pairs.mapping_site_of(20), 22u);
  // The first pairing stays; a mapping with no physical allocation before it pairs nothing.
  pairs.on_alloc(vmm_alloc(MemoryKind::kVmmPhysical, 10, 1));
  pairs.on_alloc(vmm_alloc(MemoryKind::kVmmMapping, 13, 1));
  pairs.on_alloc(vmm_alloc(MemoryKind::kVmmMapping, 14, 3));
  EXPECT_EQ(pairs.mapping_site_of(10), 12u);
  EXPECT_FALSE(pairs.mapping_site_of(12).has_value());
  EXPECT_FALSE(pairs.mapping_site_of(99).has_value());
}

// A JAX loop keeping one granule of arrays per iteration, the holder answer
// given for the mapping site as the package gives it.
void granule_per_iteration(SyntheticTrace& t, std::uint32_t physical, std::uint32_t mapping,
                           bool with_answer) {
  t.annotate("framework_tracking",
             R"({"framework": "JAX", "mode": "platform", "hidden_allocations": false,
                 "device_memory_holds_arrays": true})");
  std::uint32_t reserve = t.python_site("/work/train.py", 30, "main");
  for (std::uint64_t step = 1; step <= 120; ++step) {
    t.advance_ms(2);
    t.alloc(physical, kGranule, MemoryKind::kVmmPhysical);
    t.alloc(reserve, kGranule, MemoryKind::kAddressRange);
    t.alloc(mapping, kGranule, MemoryKind::kVmmMapping);
    t.step_from(StepSource::kPythonLoop, step, 1);
    if (with_answer && step == 20) {
      t.annotate(
          "holder",
          R"json({"request_id": "in-process-1", "seconds": 0.2, "sites": [{"site_id": )json" +
              std::to_string(mapping) +
              R"json(, "matched_addresses": 12, "kind": "tensor", "holder": {"type": "list",
                     "name": "train_metrics", "owner": "local of main (/work/train.py:20)"}}]})json");
    }
  }
}

TEST(VmmHolder, the_mapping_sites_holder_is_the_growing_physical_sites_holder) {
  SyntheticTrace t;
  std::uint32_t physical = t.python_site("/work/train.py", 31, "main");
  std::uint32_t mapping = t.python_site("/work/train.py", 32, "main");
  granule_per_iteration(t, physical, mapping, true);
  GrowthReport g = t.analyze().build_report("synthetic").growth;
  ASSERT_EQ(g.verdict, Verdict::kLeak);
  ASSERT_FALSE(g.sites.empty());
  EXPECT_EQ(g.sites.front().site_id, physical);
  ASSERT_TRUE(g.holder.has_value());
  ASSERT_TRUE(g.holder->holder.has_value());
  EXPECT_EQ(g.holder->holder->name, "train_metrics");
}

TEST(VmmHolder, without_an_answer_no_holder_is_named) {
  SyntheticTrace t;
  std::uint32_t physical = t.python_site("/work/train.py", 31, "main");
  std::uint32_t mapping = t.python_site("/work/train.py", 32, "main");
  granule_per_iteration(t, physical, mapping, false);
  GrowthReport g = t.analyze().build_report("synthetic").growth;
  ASSERT_EQ(g.verdict, Verdict::kLeak);
  EXPECT_FALSE(g.holder.has_value());
}

// Recorded on the H200 (tests/gpu/suites/loops.sh, bundle 7f1280f): JAX 0.11
// with XLA_PYTHON_CLIENT_ALLOCATOR=platform, its loop's iterations marked by
// the python-loop signal; the walk answered for the mapping site.
TEST(VmmHolder, the_recorded_jax_platform_leak_names_its_list) {
  const std::string path = std::string(GPULEAK_TEST_EXAMPLE_TRACES) +
                           "/python_loop/leak_jax_metrics_on_device_platform/gpuleak-4473.trace";
  ProcessReport report = analyze_trace_file(path, {});
  const GrowthReport& g = report.growth;
  ASSERT_EQ(g.verdict, Verdict::kLeak);
  EXPECT_EQ(g.step_source, "python-loop");
  ASSERT_FALSE(g.sites.empty());
  EXPECT_EQ(g.sites.front().kind, MemoryKind::kVmmPhysical);
  ASSERT_TRUE(g.holder.has_value());
  ASSERT_TRUE(g.holder->holder.has_value());
  EXPECT_EQ(g.holder->holder->name, "train_metrics");
  ASSERT_TRUE(g.holder->holder->kept_at.has_value());
  EXPECT_EQ(g.holder->holder->kept_at->line, 83u);
}

}  // namespace
}  // namespace gpuleak::analysis
