// The analysis on traces recorded by the real collector on an NVIDIA H200
// (examples/traces, committed; examples/traces/README.md says how they
// were made). Symbols are embedded in the traces, so the stacks resolve on a
// machine without the programs, CUDA or PyTorch.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/trace_loader.h"
#include "trace/event_sequencer.h"
#include "trace/trace_reader.h"

namespace gpuleak::analysis {
namespace {

namespace fs = std::filesystem;

const std::string kExamples = GPULEAK_TEST_EXAMPLE_TRACES;

std::vector<ProcessReport> reports_in(const std::string& name) {
  std::vector<std::string> paths;
  for (const auto& entry : fs::directory_iterator(kExamples + "/" + name)) {
    if (entry.path().extension() == ".trace") paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<ProcessReport> out;
  for (const auto& path : paths) out.push_back(analyze_trace_file(path, {}));
  return out;
}

ProcessReport only_report(const std::string& name) {
  auto reports = reports_in(name);
  EXPECT_EQ(reports.size(), 1u) << name;
  return reports.empty() ? ProcessReport{} : reports.front();
}

void expect_clean_read(const ProcessReport& r) {
  EXPECT_TRUE(r.trace_error.empty()) << r.trace_path << ": " << r.trace_error;
  EXPECT_TRUE(r.exited) << r.trace_path;
  EXPECT_EQ(r.unmatched_frees, 0u) << r.trace_path;
  EXPECT_EQ(r.lost_events, 0u) << r.trace_path;
}

bool any_frame_in(const std::vector<Frame>& frames, const char* module_part) {
  return std::any_of(frames.begin(), frames.end(), [&](const Frame& f) {
    return f.module.find(module_part) != std::string::npos;
  });
}

TEST(RecordedTraces, forgot_free_leaks_five_mebibytes_at_its_cudamalloc_line) {
  ProcessReport r = only_report("cuda/forgot_free");
  expect_clean_read(r);
  EXPECT_EQ(r.leaks.allocations, 5u);
  EXPECT_EQ(r.leaks.bytes, 5u << 20);
  ASSERT_EQ(r.leaks.groups.size(), 1u);
  EXPECT_EQ(r.leaks.groups[0].site.label(), "forgot_free.cu:7");
  EXPECT_EQ(r.leaks.groups[0].api, "cuMemAlloc_v2");
  EXPECT_EQ(r.leaks.groups[0].device, 0);
}

TEST(RecordedTraces, parent_and_child_each_have_their_trace_and_their_leak) {
  auto reports = reports_in("cuda/child_leak");
  ASSERT_EQ(reports.size(), 2u);
  std::vector<std::string> sites;
  for (const auto& r : reports) {
    expect_clean_read(r);
    ASSERT_EQ(r.leaks.groups.size(), 1u);
    sites.push_back(r.leaks.groups[0].site.label());
  }
  std::sort(sites.begin(), sites.end());
  EXPECT_EQ(sites, (std::vector<std::string>{"child_leak.cu:11", "child_leak.cu:18"}));
  EXPECT_NE(reports[0].process.pid, reports[1].process.pid);
}

TEST(RecordedTraces, out_of_memory_keeps_what_was_live_when_the_allocation_failed) {
  ProcessReport r = only_report("cuda/out_of_memory");
  expect_clean_read(r);
  ASSERT_EQ(r.out_of_memory.size(), 1u);
  const OutOfMemoryEvent& oom = r.out_of_memory[0];
  // Twice the total cudaMemGetInfo gave on the H200 (139.8 GiB), out_of_memory.cu:12.
  EXPECT_EQ(oom.requested_bytes, 300219760640u);
  EXPECT_EQ(oom.api, "cuMemAlloc_v2");
  EXPECT_EQ(oom.result, 2u);  // CUDA_ERROR_OUT_OF_MEMORY
  EXPECT_EQ(oom.site.label(), "out_of_memory.cu:12");
  EXPECT_EQ(oom.live_allocations, 1u);
  EXPECT_EQ(oom.live_bytes, 64u << 20);
  EXPECT_EQ(r.leaks.allocations, 0u) << "the 64 MiB buffer was freed before exit";
}

TEST(RecordedTraces, pinned_host_and_vmm_leaks_are_found_at_their_lines) {
  ProcessReport pinned = only_report("cuda/pinned_leak");
  expect_clean_read(pinned);
  ASSERT_EQ(pinned.leaks.groups.size(), 1u);
  EXPECT_EQ(pinned.leaks.groups[0].site.label(), "pinned_leak.cu:7");
  EXPECT_EQ(pinned.leaks.bytes, 4u << 20);
  ProcessReport vmm = only_report("cuda/vmm_leak");
  expect_clean_read(vmm);
  ASSERT_FALSE(vmm.leaks.groups.empty());
  EXPECT_EQ(vmm.leaks.groups[0].site.label(), "vmm_leak.cu:24");
}

TEST(RecordedTraces, graph_accumulated_in_evaluation_is_a_leak_with_its_holder) {
  ProcessReport r = only_report("torch/leak_eval_total_loss");
  expect_clean_read(r);
  EXPECT_EQ(r.growth.verdict, Verdict::kLeak);
  EXPECT_EQ(r.growth.cause, "autograd-graph-kept-alive");
  ASSERT_TRUE(r.growth.verdict_step.has_value());
  EXPECT_LE(*r.growth.verdict_step - r.growth.warmup_steps, 50u);
  ASSERT_TRUE(r.growth.holder && r.growth.holder->holder);
  EXPECT_EQ(r.growth.holder->holder->name, "total_loss");
  EXPECT_EQ(r.growth.holder->kind, "graph");
  EXPECT_EQ(r.growth.holder->graph_tensors_per_element, 56);
  EXPECT_NE(r.growth.fix.find("item()"), std::string::npos) << r.growth.fix;
}

TEST(RecordedTraces, four_kibibytes_a_step_is_found_within_fifty_steps_after_warm_up) {
  ProcessReport r = only_report("torch/leak_small_tensor_per_step");
  expect_clean_read(r);
  EXPECT_EQ(r.growth.verdict, Verdict::kLeak);
  EXPECT_EQ(r.growth.cause, "tensors-kept-alive");
  EXPECT_NEAR(r.growth.rate_bytes_per_step, 4096, 1);
  ASSERT_TRUE(r.growth.verdict_step.has_value());
  EXPECT_LE(*r.growth.verdict_step - r.growth.warmup_steps, 50u);
  ASSERT_FALSE(r.growth.sites.empty());
  EXPECT_EQ(r.growth.sites[0].site.label(), "leak_small_tensor_per_step.py:50");
}

// The same traces as if the programs had marked no steps at all (their
// step records dropped): the loop is found in the allocations themselves.
ProcessReport report_without_step_marks(const std::string& name) {
  std::string path;
  for (const auto& entry : fs::directory_iterator(kExamples + "/" + name)) {
    if (entry.path().extension() == ".trace") path = entry.path().string();
  }
  ProcessAnalysis analysis;
  trace::TraceReader reader(path);
  trace::EventSequencer sequencer;
  trace::Record record;
  // A step record's sequence number is filled as the collector fills one
  // that has no event (a LostRecord of zero events), so no events look lost.
  auto consume = [&](const trace::Record& r) {
    if (const auto* step = std::get_if<trace::StepRecord>(&r)) {
      analysis.consume(trace::LostRecord{step->seq, step->time_ns, 0, {}});
    } else {
      analysis.consume(r);
    }
  };
  while (reader.next(record) == trace::TraceReader::Status::kRecord) {
    sequencer.push(std::move(record));
    while (sequencer.pop(record)) consume(record);
  }
  sequencer.finish();
  while (sequencer.pop(record)) consume(record);
  return analysis.build_report(path);
}

TEST(RecordedTraces, evaluation_loop_without_step_marks_is_found_from_its_allocations) {
  ProcessReport r = report_without_step_marks("torch/leak_eval_total_loss");
  EXPECT_EQ(r.growth.verdict, Verdict::kLeak) << r.growth.undecided_reason;
  EXPECT_EQ(r.growth.step_source, "allocation-period");
  EXPECT_NE(r.growth.phase.find("evaluate"), std::string::npos) << r.growth.phase;
  EXPECT_GE(r.growth.steps, 115u);  // 120 evaluation batches
  EXPECT_LE(r.growth.steps, 121u);
  ASSERT_TRUE(r.growth.verdict_step.has_value());
  EXPECT_LE(*r.growth.verdict_step - r.growth.warmup_steps, 50u);
  EXPECT_EQ(r.growth.cause, "autograd-graph-kept-alive");
}

TEST(RecordedTraces, training_loop_without_step_marks_is_found_from_its_allocations) {
  ProcessReport r = report_without_step_marks("torch/leak_small_tensor_per_step");
  EXPECT_EQ(r.growth.verdict, Verdict::kLeak) << r.growth.undecided_reason;
  EXPECT_EQ(r.growth.step_source, "allocation-period");
  EXPECT_NEAR(r.growth.rate_bytes_per_step, 4096, 1);
  ASSERT_TRUE(r.growth.verdict_step.has_value());
  EXPECT_LE(*r.growth.verdict_step - r.growth.warmup_steps, 50u);
  ASSERT_FALSE(r.growth.sites.empty());
  EXPECT_EQ(r.growth.sites[0].site.label(), "leak_small_tensor_per_step.py:50");
}

TEST(RecordedTraces, bounded_replay_buffer_without_step_marks_is_still_no_leak) {
  ProcessReport r = report_without_step_marks("torch/control_replay_buffer");
  EXPECT_EQ(r.growth.verdict, Verdict::kNoLeak) << r.growth.phase;
  EXPECT_EQ(r.growth.step_source, "allocation-period");
}

TEST(RecordedTraces, replay_buffer_that_plateaus_is_bounded_not_a_leak) {
  ProcessReport r = only_report("torch/control_replay_buffer");
  expect_clean_read(r);
  EXPECT_EQ(r.growth.verdict, Verdict::kNoLeak);
  EXPECT_EQ(r.growth.cause, "bounded-growth");
}

// Driver allocations under PyTorch, captured by the CUPTI backend, are recorded
// with the frames of CUPTI and the driver on top; those are marked plumbing (the
// report hides them), and only the leading ones: the rest of the stack says who
// allocated. (torch/cupti_driver_frames: control_replay_buffer.py recorded on
// 29 November, when CUPTI was the default backend.)
TEST(RecordedTraces, cupti_and_driver_frames_on_top_of_a_stack_are_plumbing) {
  ProcessReport r = only_report("torch/cupti_driver_frames");
  bool checked = false;
  for (const auto& group : r.leaks.groups) {
    if (!any_frame_in(group.frames, "libcupti")) continue;
    checked = true;
    std::size_t i = 0;
    while (i < group.frames.size() && group.frames[i].plumbing) ++i;
    ASSERT_GT(i, 0u);
    ASSERT_LT(i, group.frames.size()) << "some frame must say who allocated";
    for (std::size_t j = 0; j < i; ++j) {
      const std::string& module = group.frames[j].module;
      EXPECT_TRUE(module.find("libcupti") != std::string::npos ||
                  module.find("libcuda.so") != std::string::npos ||
                  module.find("libgpuleak_collector") != std::string::npos)
          << module;
    }
    for (std::size_t j = i; j < group.frames.size(); ++j) EXPECT_FALSE(group.frames[j].plumbing);
    EXPECT_EQ(group.frames[i].module.find("libcupti"), std::string::npos);
  }
  EXPECT_TRUE(checked) << "the trace has driver allocations made under CUPTI";
}

// examples/torch/control_varying_seq_len.py --steps 200 on the H200 (bundle
// b2dbb0e; tests/gpu/suites/fixtures.sh): a loop of one allocation inside
// Adam's _multi_tensor_adam repeats within every optimizer step; judged alone
// it looks like growth per iteration. The optimizer's steps are the program's
// iterations, and they say NO LEAK.
TEST(RecordedTraces, a_loop_inside_the_optimizer_step_does_not_outvote_the_optimizer_steps) {
  ProcessReport r = only_report("torch/control_varying_seq_len");
  expect_clean_read(r);
  EXPECT_EQ(r.growth.verdict, Verdict::kNoLeak) << r.growth.phase;
  EXPECT_EQ(r.growth.step_source, "optimizer-hook");
  for (const auto& phase : r.growth.phases)
    EXPECT_EQ(phase.name.find("_multi_tensor_adam"), std::string::npos) << phase.name;
}

// examples/depth/control_nccl_group_destroyed.py on an H100 (bundle 0a99e72;
// tests/gpu/suites/depth.sh): init_process_group sets up NCCL's communicator
// with a loop that allocates three 2 MiB buffers a round, 64 rounds in 13 ms,
// kept for the run; then the script's own loop makes and destroys a group per
// step for 16 s. The set-up loop, in library code and over before the
// script's loop began, is not the program's steps: it must not say LEAK
// (24 steps are too few for the script's loop to say anything yet).
TEST(RecordedTraces, a_library_set_up_loop_before_the_programs_loop_is_not_its_steps) {
  ProcessReport r = only_report("depth/control_nccl_group_destroyed");
  EXPECT_NE(r.growth.verdict, Verdict::kLeak) << r.growth.phase;
  EXPECT_EQ(r.growth.step_source, "python-loop") << r.growth.phase;
  EXPECT_NE(r.growth.phase.find("control_nccl_group_destroyed.py"), std::string::npos)
      << r.growth.phase;
  for (const auto& phase : r.growth.phases)
    EXPECT_EQ(phase.name.find("_new_process_group_helper"), std::string::npos) << phase.name;
}

// The leak beside it: a new NCCL group per step, never destroyed, 376 MiB
// each; the script ends after 24 steps (17 of them seen as its loop's), too
// few for a verdict, and destroys every group at exit. The report still says
// where memory rose, at the line that made the group; the control, whose
// groups are destroyed each step, has nothing rising.
TEST(RecordedTraces, a_job_too_short_for_a_verdict_is_told_which_line_its_memory_rose_at) {
  ProcessReport leak = only_report("depth/leak_nccl_group_per_call");
  EXPECT_EQ(leak.growth.verdict, Verdict::kNotYet);
  ASSERT_FALSE(leak.growth.rising_sites.empty());
  std::uint64_t rate = 0;
  for (const SiteGrowth& s : leak.growth.rising_sites) {
    EXPECT_EQ(s.site.label(), "leak_nccl_group_per_call.py:54") << s.site.label();
    EXPECT_EQ(s.origin, "NCCL");
    rate += static_cast<std::uint64_t>(s.rate_bytes_per_step);
  }
  EXPECT_GT(rate, 256ull << 20);
  // What it would be if it kept rising: a communicator never destroyed.
  EXPECT_EQ(leak.growth.cause, "library-handles-never-destroyed");
  EXPECT_NE(leak.growth.cause_text.find("ncclCommDestroy"), std::string::npos)
      << leak.growth.cause_text;
  ProcessReport control = only_report("depth/control_nccl_group_destroyed");
  EXPECT_TRUE(control.growth.rising_sites.empty());
}

}  // namespace
}  // namespace gpuleak::analysis
