// Verdicts from the main script's loop (step source python-loop) and a
// framework pool's bytes in use: what a JAX program that preallocates gives
// the analysis. Its arrays live inside one block the driver saw at start, the
// loop runs 200 times in about 0.1 s after compiling, and the package reads
// the pool (Device.memory_stats()) at each time round the loop.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "analysis/steps/clock_arbiter.h"
#include "analysis/synthetic_trace.h"
#include "analysis/trace_loader.h"

namespace gpuleak::analysis {
namespace {

using testing::SyntheticTrace;
using trace::MemoryKind;
using trace::Metric;
using trace::StepSource;

constexpr std::uint64_t kMiB = 1 << 20;

// What the package writes for a JAX program with its default allocator, and
// the clock of the loop at leak_param_history.py:49 in main.
void jax_preallocating(SyntheticTrace& t) {
  t.annotate("framework_tracking",
             R"({"framework": "JAX", "mode": "preallocated-pool", "hidden_allocations": true,
                 "how_to_see": "XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_ALLOCATOR=platform"})");
  t.annotate("python_loop", R"({"available": true, "tool_id": 4})");
  t.annotate(
      "iteration_clock",
      R"json({"source": 6, "clock": 1, "description": "iterations of the loop in main (leak_param_history.py:49)",
                 "file": "/work/examples/clients/jax/leak_param_history.py", "line": 49, "function": "main"})json");
  auto start = t.python_site("/work/site-packages/jax/_src/xla_bridge.py", 900, "backends");
  t.alloc(start, 20ull << 30, MemoryKind::kDevice);  // the preallocated block
}

struct Outcome {
  GrowthReport growth;
  ProcessReport report;
};

Outcome analyze(const SyntheticTrace& t) {
  ProcessAnalysis analysis = t.analyze();
  Outcome run;
  run.report = analysis.build_report("synthetic");
  run.growth = run.report.growth;
  return run;
}

// One iteration: the pool read, then the loop's back-edge mark (the package's
// order), 0.5 ms apart.
void iteration(SyntheticTrace& t, std::uint64_t step, std::uint64_t pool_bytes, bool read = true) {
  t.advance_ms(0.5);
  if (read) t.sample(Metric::kPoolUsedBytes, pool_bytes);
  t.step_from(StepSource::kPythonLoop, step, 1);
}

TEST(PythonLoopVerdict, arrays_kept_in_a_preallocated_pool_are_a_leak_per_iteration) {
  SyntheticTrace t;
  jax_preallocating(t);
  std::uint64_t pool = 3 * kMiB;
  for (std::uint64_t step = 1; step <= 200; ++step) {
    pool += kMiB;  // weight_history.append(params["w1"])
    iteration(t, step, pool);
  }
  Outcome run = analyze(t);
  const GrowthReport& g = run.growth;
  ASSERT_EQ(g.verdict, Verdict::kLeak) << g.undecided_reason;
  EXPECT_EQ(g.step_source, "python-loop");
  EXPECT_EQ(g.phase, "iterations of the loop in main (leak_param_history.py:49)");
  EXPECT_NE(g.step_source_reason.find("main script's outermost busy loop"), std::string::npos)
      << g.step_source_reason;
  EXPECT_NEAR(g.rate_bytes_per_step, static_cast<double>(kMiB), kMiB / 16.0);
  EXPECT_EQ(g.cause, "tensors-kept-alive");
  EXPECT_TRUE(g.pool_judged);
  ASSERT_TRUE(g.verdict_step.has_value());
  EXPECT_LE(*g.verdict_step, 60u);
  ASSERT_FALSE(g.sites.empty());
  EXPECT_EQ(g.sites.front().site_id, kPoolSiteId);
  EXPECT_EQ(g.sites.front().site.function, "main");
  EXPECT_EQ(g.sites.front().site.line, 49u);
  EXPECT_NE(g.note.find("pool's bytes in use"), std::string::npos) << g.note;
}

TEST(PythonLoopVerdict, a_jitted_loop_with_a_warmup_plateau_is_no_leak) {
  // Compiling and the first steps take buffers (the plateau), then every
  // step replaces the parameters; the pool's bytes in use at the back-edge
  // jitter by a transient buffer now and then.
  SyntheticTrace t;
  jax_preallocating(t);
  std::mt19937 random(7);
  std::uint64_t base = 3 * kMiB;
  for (std::uint64_t step = 1; step <= 200; ++step) {
    if (step <= 4) base += 2 * kMiB;
    std::uint64_t transient = random() % 4 == 0 ? 256 * 1024 : 0;
    iteration(t, step, base + transient);
  }
  Outcome run = analyze(t);
  const GrowthReport& g = run.growth;
  EXPECT_EQ(g.verdict, Verdict::kNoLeak) << g.undecided_reason;
  EXPECT_EQ(g.step_source, "python-loop");
  EXPECT_TRUE(g.pool_judged);
  EXPECT_TRUE(g.sites.empty());
  EXPECT_NE(g.note.find("pool's bytes in use"), std::string::npos) << g.note;
}

TEST(PythonLoopVerdict, a_pool_read_every_second_iteration_is_enough) {
  // The package reads at most once per ms; a jitted step takes ~0.5 ms.
  SyntheticTrace t;
  jax_preallocating(t);
  for (std::uint64_t step = 1; step <= 200; ++step) {
    iteration(t, step, 3 * kMiB + step * kMiB, /*read=*/step % 2 == 0);
  }
  Outcome run = analyze(t);
  EXPECT_EQ(run.growth.verdict, Verdict::kLeak) << run.growth.undecided_reason;
  EXPECT_NEAR(run.growth.rate_bytes_per_step, static_cast<double>(kMiB), kMiB / 8.0);
}

TEST(PythonLoopVerdict, a_pool_read_too_rarely_still_says_not_yet) {
  // Only the 500 ms sampler read the pool (a loop of 0.1 s): the loop's
  // boundaries are there, the pool's level at them is not.
  SyntheticTrace t;
  jax_preallocating(t);
  for (std::uint64_t step = 1; step <= 200; ++step) {
    iteration(t, step, 3 * kMiB + step * kMiB, /*read=*/step == 100);
  }
  Outcome run = analyze(t);
  EXPECT_EQ(run.growth.verdict, Verdict::kNotYet);
  EXPECT_NE(run.growth.undecided_reason.find("JAX allocates its arrays from a pool"),
            std::string::npos)
      << run.growth.undecided_reason;
}

TEST(PythonLoopVerdict, a_leak_too_short_for_a_verdict_says_how_many_iterations_it_needs) {
  SyntheticTrace t;
  jax_preallocating(t);
  for (std::uint64_t step = 1; step <= 30; ++step) iteration(t, step, step * kMiB);
  Outcome run = analyze(t);
  EXPECT_EQ(run.growth.verdict, Verdict::kNotYet);
  EXPECT_EQ(run.growth.step_source, "python-loop");
  EXPECT_NE(run.growth.undecided_reason.find("a verdict needs 45"), std::string::npos)
      << run.growth.undecided_reason;
}

TEST(PythonLoopVerdict, optimizer_steps_in_the_same_process_win_over_the_loop) {
  // A torch loop in the main script: each time round, an optimizer step and
  // the loop's back-edge. The optimizer is the program's own word.
  SyntheticTrace t;
  t.annotate("python_loop", R"({"available": true, "tool_id": 4})");
  auto kept = t.python_site("/work/train.py", 30, "main");
  auto forward = t.python_site("/work/model.py", 20, "forward");
  for (std::uint64_t step = 1; step <= 200; ++step) {
    std::uint64_t a = t.alloc(forward, kMiB);
    t.alloc(kept, 64 * 1024);
    t.free(a);
    t.advance_ms(5);
    t.step_from(StepSource::kOptimizerHook, step);
    t.advance_ms(0.01);
    t.step_from(StepSource::kPythonLoop, step, 1);
  }
  Outcome run = analyze(t);
  EXPECT_EQ(run.growth.verdict, Verdict::kLeak);
  EXPECT_EQ(run.growth.step_source, "optimizer-hook");
  for (const PhaseSummary& p : run.growth.phases) EXPECT_NE(p.step_source, "python-loop");
}

TEST(PythonLoopVerdict, the_pool_is_not_judged_when_the_framework_hides_nothing) {
  // PyTorch's cudaMallocAsync backend records pool used bytes too; its
  // tensors are seen one by one, and the pool's level is no verdict of its own.
  SyntheticTrace t;
  auto forward = t.python_site("/work/train.py", 20, "main");
  for (std::uint64_t step = 1; step <= 200; ++step) {
    std::uint64_t a = t.alloc(forward, kMiB, MemoryKind::kDeviceAsync);
    t.free(a, MemoryKind::kDeviceAsync);
    iteration(t, step, step * kMiB);  // a cache that keeps growing, no tensor does
  }
  Outcome run = analyze(t);
  EXPECT_EQ(run.growth.verdict, Verdict::kNoLeak);
  EXPECT_FALSE(run.growth.pool_judged);
  EXPECT_TRUE(run.growth.sites.empty());
}

TEST(PythonLoopVerdict, python_before_3_12_is_said_in_words_when_no_verdict_comes) {
  SyntheticTrace t;
  t.annotate("framework_tracking",
             R"({"framework": "JAX", "mode": "preallocated-pool", "hidden_allocations": true})");
  t.annotate(
      "python_loop",
      R"({"available": false, "reason": "Python 3.11 has no sys.monitoring; it needs 3.12 or later"})");
  auto step_site = t.python_site("/work/train.py", 20, "main");
  for (int i = 0; i < 5; ++i) {
    t.alloc(step_site, kMiB, MemoryKind::kDevice);
    t.advance_ms(20);
  }
  Outcome run = analyze(t);
  EXPECT_EQ(run.growth.verdict, Verdict::kNotYet);
  EXPECT_NE(run.growth.undecided_reason.find("could not follow the main script's loop (Python "
                                             "3.11 has no sys.monitoring; it needs 3.12"),
            std::string::npos)
      << run.growth.undecided_reason;
  EXPECT_NE(run.growth.undecided_reason.find("gpuleak.step()"), std::string::npos);
}

// A serving loop (clock 2) found after the per-request loop inside each
// batch (clock 1) had gone round 8 times: the package's description of
// clock 2 says it encloses clock 1 (python_loop.py). Recorded on the H200
// (leak_serving_shape_keyed_cache, bundle 7f1280f, before `encloses`): the
// inner clock's 78 marks, a few batches' worth, were the report's phase.
void describe_python_loop(SyntheticTrace& t, std::uint32_t clock, const std::string& function,
                          int line, const std::string& encloses) {
  t.annotate("iteration_clock",
             R"({"source": 6, "clock": )" + std::to_string(clock) +
                 R"(, "description": "iterations of the loop in )" + function + " (serve.py:" +
                 std::to_string(line) + R"json()", "file": "/work/serve.py", "line": )json" +
                 std::to_string(line) + R"(, "function": ")" + function + "\"" + encloses + "}");
}

struct ServedBatches {
  std::uint64_t inner_marks = 0, outer_marks = 0;
};

// `batches` batches of 1-9 requests each; the first `inner_batches` are
// marked per request (clock 1), the rest per batch (clock 2). Each batch
// keeps `kept` bytes (a new placeholder per batch), eight times that while
// marked per request: early batches' totals are all new, later ones repeat
// some (so per mark the inner loop grew faster, as on the H200).
ServedBatches serve(SyntheticTrace& t, int batches, int inner_batches, std::uint64_t kept,
                    const std::string& encloses) {
  std::uint32_t request_site = t.python_site("/work/serve.py", 80, "PackedAttention.forward");
  std::uint32_t cache_site = t.python_site("/work/serve.py", 60, "denominator_placeholder");
  t.annotate("python_loop", R"({"available": true, "tool_id": 4})");
  describe_python_loop(t, 1, "PackedAttention.forward", 79, "");
  ServedBatches marks;
  for (int batch = 0; batch < batches; ++batch) {
    if (batch == inner_batches) describe_python_loop(t, 2, "serve", 92, encloses);
    if (kept > 0) t.alloc(cache_site, batch < inner_batches ? 8 * kept : kept);
    for (int request = 0; request < 1 + batch % 9; ++request) {
      t.advance_ms(0.3);
      std::uint64_t scores = t.alloc(request_site, 64 * 1024);
      t.free(scores);
      if (batch < inner_batches) t.step_from(StepSource::kPythonLoop, ++marks.inner_marks, 1);
    }
    t.advance_ms(1);
    if (batch >= inner_batches) t.step_from(StepSource::kPythonLoop, ++marks.outer_marks, 2);
  }
  return marks;
}

TEST(PythonLoopVerdict, the_loop_that_took_over_is_the_phase_not_the_inner_loop_it_encloses) {
  SyntheticTrace t;
  serve(t, 300, 12, 140 * 1024, R"(, "encloses": [1])");
  Outcome run = analyze(t);
  const GrowthReport& g = run.growth;
  ASSERT_EQ(g.verdict, Verdict::kLeak);
  EXPECT_EQ(g.phase, "iterations of the loop in serve (serve.py:92)");
  EXPECT_GT(g.steps, 250u);
  ASSERT_TRUE(g.verdict_step.has_value());
  EXPECT_LE(*g.verdict_step, 60u);
  // The inner loop's phase is a piece of the serving loop's: not listed.
  ASSERT_EQ(g.phases.size(), 1u);
  EXPECT_TRUE(g.phases.front().primary);
}

TEST(PythonLoopVerdict, without_encloses_the_inner_loops_faster_rate_made_it_the_phase) {
  // What the H200 run of 7f1280f showed: the same stream, no `encloses`.
  SyntheticTrace t;
  serve(t, 300, 12, 140 * 1024, "");
  const GrowthReport& g = analyze(t).growth;
  ASSERT_EQ(g.verdict, Verdict::kLeak);
  EXPECT_EQ(g.phase, "iterations of the loop in PackedAttention.forward (serve.py:79)");
}

TEST(PythonLoopVerdict, encloses_entries_that_are_not_clock_ids_are_ignored) {
  // A crafted trace: strings, negatives, ids past 32 bits, nested arrays.
  SyntheticTrace t;
  serve(t, 300, 12, 140 * 1024, R"(, "encloses": ["1", -1, 4294967297, [1], null, 1.5])");
  const GrowthReport& g = analyze(t).growth;
  ASSERT_EQ(g.verdict, Verdict::kLeak);
  EXPECT_EQ(g.phase, "iterations of the loop in PackedAttention.forward (serve.py:79)");
}

TEST(PythonLoopVerdict,
     an_enclosed_loop_with_a_verdict_stays_the_phase_over_an_undecided_outer_one) {
  // Batches marked through 8 epochs, then the epoch loop took over and went
  // round twice more: its phase has no verdict yet, the batches' has.
  SyntheticTrace t;
  serve(t, 70, 60, 140 * 1024, R"(, "encloses": [1])");
  const GrowthReport& g = analyze(t).growth;
  ASSERT_EQ(g.verdict, Verdict::kLeak);
  EXPECT_EQ(g.phase, "iterations of the loop in PackedAttention.forward (serve.py:79)");
  EXPECT_EQ(g.phases.size(), 2u);
}

// Recorded on the H200 (tests/gpu/suites/loops.sh, bundle 50a0c30): the
// serving case with `encloses`. Its 300 batches were served by 4 threads;
// the per-request loop (clock 2, 42 marks) was followed first.
TEST(PythonLoopVerdict, the_recorded_serving_loop_is_the_phase_over_its_per_request_loop) {
  const std::string path = std::string(GPULEAK_TEST_EXAMPLE_TRACES) +
                           "/python_loop/leak_serving_shape_keyed_cache/gpuleak-3219.trace";
  ProcessReport report = analyze_trace_file(path, {});
  const GrowthReport& g = report.growth;
  ASSERT_EQ(g.verdict, Verdict::kLeak);
  EXPECT_EQ(g.step_source, "python-loop");
  EXPECT_EQ(g.phase, "iterations of the loop in serve (leak_serving_shape_keyed_cache.py:92)");
  EXPECT_GE(g.steps, 280u);
  ASSERT_TRUE(g.verdict_step.has_value());
  EXPECT_LE(*g.verdict_step - g.warmup_steps, 50u);
  for (const PhaseSummary& phase : g.phases) {
    EXPECT_EQ(
        phase.name.find("loop in PackedAttention.forward (leak_serving_shape_keyed_cache.py:79)"),
        std::string::npos)
        << "the enclosed per-request clock is listed: " << phase.name;
  }
}

TEST(ClockArbiter, python_loop_ranks_below_the_programs_clocks_and_above_the_allocations) {
  EXPECT_LT(trust_rank(StepSource::kDataLoader), trust_rank(StepSource::kPythonLoop));
  EXPECT_LT(trust_rank(StepSource::kOptimizerHook), trust_rank(StepSource::kPythonLoop));
  EXPECT_LT(trust_rank(StepSource::kPythonLoop), trust_rank(StepSource::kAllocationPeriod));
  EXPECT_LT(trust_rank(StepSource::kPythonLoop), trust_rank(StepSource::kTimeWindow));
}

TEST(ClockArbiter, a_python_loop_as_fine_as_the_allocations_silences_them) {
  ClockArbiter arbiter;
  int period = 0;
  std::uint64_t t = 1'000'000'000ull;
  for (int i = 0; i < 100; ++i) {
    t += 1'000'000;
    EXPECT_TRUE(arbiter.on_step_boundary({StepSource::kPythonLoop, 1}, t));
    period += arbiter.on_step_boundary({StepSource::kAllocationPeriod, 1}, t + 500'000);
  }
  EXPECT_LE(period, 1);
}

TEST(ClockArbiter, an_epoch_loop_in_the_script_does_not_silence_the_batches_inside_it) {
  // The main script loops over 10 epochs; the batches (20 each) are a loop in
  // another module that only the allocations show.
  ClockArbiter arbiter;
  int batches = 0;
  std::uint64_t t = 1'000'000'000ull;
  for (int epoch = 0; epoch < 10; ++epoch) {
    for (int batch = 0; batch < 20; ++batch) {
      t += 1'000'000;
      batches += arbiter.on_step_boundary({StepSource::kAllocationPeriod, 1}, t);
    }
    arbiter.on_step_boundary({StepSource::kPythonLoop, 1}, t + 100);
  }
  EXPECT_GE(batches, 190);  // all but the first batch of each epoch after the first
}

}  // namespace
}  // namespace gpuleak::analysis
