// Growth verdicts on synthetic training runs: real leaks are found quickly,
// and the classic false positives of naive tools are not called leaks.
#include <gtest/gtest.h>

#include <deque>
#include <random>

#include "analysis/synthetic_trace.h"

namespace gpuleak::analysis {
namespace {

using testing::SyntheticTrace;
using trace::MemoryKind;
using trace::Metric;

// A training step's transient activations: allocated, then freed.
void activations(SyntheticTrace& t, std::uint32_t site, std::uint64_t bytes, int count) {
  std::vector<std::uint64_t> live;
  for (int i = 0; i < count; ++i) live.push_back(t.alloc(site, bytes));
  for (auto a : live) t.free(a);
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

TEST(GrowthVerdict, one_leaked_4kib_tensor_per_step_is_found_within_50_steps_after_warmup) {
  SyntheticTrace t;
  auto params = t.python_site("/work/train.py", 10, "<module>");
  auto forward = t.python_site("/work/model.py", 20, "forward");
  auto leak = t.python_site("/work/train.py", 42, "train");
  t.alloc(params, 64 << 20);
  for (int step = 0; step < 120; ++step) {
    activations(t, forward, 1 << 20, 8);
    t.alloc(leak, 4096);
    t.advance_ms(30);
    t.step(step);
  }
  Outcome run = analyze(t);
  ASSERT_EQ(run.growth.verdict, Verdict::kLeak);
  ASSERT_TRUE(run.growth.verdict_step.has_value());
  EXPECT_LE(*run.growth.verdict_step - run.growth.warmup_steps, 50u);
  EXPECT_NEAR(run.growth.rate_bytes_per_step, 4096, 1);
  EXPECT_NEAR(run.growth.rate_bytes_per_second, 4096 / 0.030, 5);
  EXPECT_EQ(run.growth.cause, "tensors-kept-alive");
  ASSERT_EQ(run.growth.sites.size(), 1u);
  EXPECT_EQ(run.growth.sites[0].site.label(), "train.py:42");
  EXPECT_LE(run.growth.first_growing_step.value_or(999), 1u);
}

TEST(GrowthVerdict, leak_is_not_called_before_the_minimum_number_of_steps) {
  SyntheticTrace t;
  auto leak = t.python_site("/work/train.py", 42, "train");
  for (int step = 0; step < 30; ++step) {
    t.alloc(leak, 1 << 20);
    t.step(step);
  }
  EXPECT_EQ(analyze(t).growth.verdict, Verdict::kNotYet);
}

TEST(GrowthVerdict, a_job_that_ends_before_the_minimum_is_told_where_memory_rises) {
  // A big leak that ends the job in its first steps (an NCCL group per
  // step, examples/depth/leak_nccl_group_per_call.py): no verdict yet, but
  // the site is named as rising, with what it held at the last step even
  // though the program freed it all at exit.
  SyntheticTrace t;
  auto steady = t.python_site("/work/train.py", 10, "<module>");
  auto forward = t.python_site("/work/model.py", 20, "forward");
  auto leak = t.python_site("/work/train.py", 42, "sync_metrics");
  t.alloc(steady, 64 << 20);
  std::vector<std::uint64_t> kept;
  for (int step = 0; step < 20; ++step) {
    activations(t, forward, 1 << 20, 8);
    kept.push_back(t.alloc(leak, 128 << 20));
    t.step(step);
  }
  for (auto a : kept) t.free(a);  // the clean-up at exit
  Outcome run = analyze(t);
  EXPECT_EQ(run.growth.verdict, Verdict::kNotYet);
  EXPECT_TRUE(run.growth.sites.empty());
  ASSERT_EQ(run.growth.rising_sites.size(), 1u);
  const SiteGrowth& rising = run.growth.rising_sites[0];
  EXPECT_EQ(rising.site.label(), "train.py:42");
  EXPECT_NEAR(rising.rate_bytes_per_step, 128 << 20, 1);
  EXPECT_EQ(rising.live_bytes, 20ull * (128 << 20));
}

TEST(GrowthVerdict, nothing_is_called_rising_too_early_or_when_it_stopped_or_wanders) {
  auto run = [](int steps, auto&& each_step) {
    SyntheticTrace t;
    auto site = t.python_site("/work/cache.py", 8, "fill");
    for (int step = 0; step < steps; ++step) {
      each_step(t, site, step);
      t.step(step);
    }
    return analyze(t).growth;
  };
  // Fewer than rising_min_steps after warm-up.
  GrowthReport early =
      run(12, [](SyntheticTrace& t, std::uint32_t site, int) { t.alloc(site, 8 << 20); });
  EXPECT_EQ(early.verdict, Verdict::kNotYet);
  EXPECT_TRUE(early.rising_sites.empty());
  // A cache that filled for ten steps and has been flat for twenty.
  GrowthReport filled = run(35, [](SyntheticTrace& t, std::uint32_t site, int step) {
    if (step < 10) t.alloc(site, 8 << 20);
  });
  EXPECT_EQ(filled.verdict, Verdict::kNotYet);
  EXPECT_TRUE(filled.rising_sites.empty());
  // A buffer re-made every step at a size that goes up and down.
  std::uint64_t buffer = 0;
  GrowthReport wandering = run(35, [&buffer](SyntheticTrace& t, std::uint32_t site, int step) {
    if (buffer) t.free(buffer);
    buffer = t.alloc(site, static_cast<std::uint64_t>((step * 7919) % 13 + 1) << 20);
  });
  EXPECT_TRUE(wandering.rising_sites.empty());
  // Past the minimum a leak is a verdict, not a rising site.
  GrowthReport leak =
      run(60, [](SyntheticTrace& t, std::uint32_t site, int) { t.alloc(site, 8 << 20); });
  EXPECT_EQ(leak.verdict, Verdict::kLeak);
  EXPECT_TRUE(leak.rising_sites.empty());
}

TEST(GrowthVerdict, leak_every_fifth_step_is_found_once_enough_increases_are_seen) {
  SyntheticTrace t;
  auto leak = t.python_site("/work/eval.py", 31, "validate");
  for (int step = 0; step < 200; ++step) {
    if (step % 5 == 0) t.alloc(leak, 1 << 20);
    t.step(step);
  }
  Outcome run = analyze(t);
  ASSERT_EQ(run.growth.verdict, Verdict::kLeak);
  EXPECT_NEAR(run.growth.rate_bytes_per_step, (1 << 20) / 5.0, 1);
}

TEST(GrowthVerdict, validation_every_tenth_step_keeping_outputs_is_found_within_50_steps) {
  // A staircase: 12 MiB kept by a validation pass every 10 training steps
  // (examples/loops/leak_validation_inside_training.py's shape). Four
  // increases at a steady interval are enough; eight would take 80 steps.
  SyntheticTrace t;
  auto kept = t.python_site("/work/train.py", 77, "validate");
  for (int step = 0; step < 50; ++step) {
    if (step % 10 == 9) t.alloc(kept, 12 << 20);
    t.step(step);
  }
  Outcome run = analyze(t);
  ASSERT_EQ(run.growth.verdict, Verdict::kLeak);
  EXPECT_NEAR(run.growth.rate_bytes_per_step, (12 << 20) / 10.0, (12 << 20) / 40.0);
}

TEST(GrowthVerdict, a_staircase_that_stopped_before_the_minimum_steps_is_not_a_leak) {
  // Three rises 10 steps apart, then flat: too few rises, and none in the
  // later quarters of any window the verdict looks at.
  SyntheticTrace t;
  auto site = t.python_site("/work/cache.py", 8, "fill");
  for (int step = 0; step < 300; ++step) {
    if (step % 10 == 9 && step < 30) t.alloc(site, 12 << 20);
    t.step(step);
  }
  EXPECT_NE(analyze(t).growth.verdict, Verdict::kLeak);
}

TEST(GrowthVerdict, record_highs_at_doubling_steps_are_not_regular_growth) {
  // A buffer re-grown for a new longest batch: its rises come ever rarer.
  SyntheticTrace t;
  auto site = t.python_site("/work/model.py", 30, "grow_buffer");
  std::uint64_t buffer = 0;
  std::uint64_t size = 1 << 20;
  for (int step = 0; step < 300; ++step) {
    if (step == 6 || step == 12 || step == 24 || step == 48 || step == 96 || step == 192) {
      if (buffer) t.free(buffer);
      size *= 2;
      buffer = t.alloc(site, size);
    }
    t.step(step);
  }
  EXPECT_NE(analyze(t).growth.verdict, Verdict::kLeak);
}

TEST(GrowthVerdict, a_pool_that_hides_arrays_is_never_called_clean) {
  // JAX preallocates: its arrays live inside one block the driver saw at
  // start. A steady loop of visible allocations says nothing about them.
  SyntheticTrace t;
  t.annotate("framework_tracking",
             R"({"framework": "JAX", "mode": "preallocated-pool", "hidden_allocations": true,
                 "how_to_see": "XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_ALLOCATOR=platform"})");
  auto forward = t.python_site("/work/train.py", 20, "train_step");
  for (int step = 0; step < 200; ++step) {
    activations(t, forward, 1 << 20, 4);
    t.step(step);
  }
  Outcome run = analyze(t);
  EXPECT_EQ(run.growth.verdict, Verdict::kNotYet);
  EXPECT_NE(run.growth.undecided_reason.find("JAX allocates its arrays from a pool"),
            std::string::npos)
      << run.growth.undecided_reason;
  EXPECT_NE(run.growth.undecided_reason.find("XLA_PYTHON_CLIENT_ALLOCATOR=platform"),
            std::string::npos);
}

// JAX 0.11 with XLA_PYTHON_CLIENT_ALLOCATOR=platform on the H200 took its
// memory as virtual-memory granules (cuMemCreate, 2 MiB) and kept a list of
// arrays alive in them: growth of its device memory is arrays kept alive,
// not driver memory outside the framework. Without the annotation's flag the
// same growth stays "non-tensor".
TEST(GrowthVerdict, device_memory_of_a_framework_that_holds_only_arrays_is_arrays_kept_alive) {
  for (bool holds_arrays : {true, false}) {
    SyntheticTrace t;
    t.annotate("framework_tracking",
               std::string(R"({"framework": "JAX", "mode": "platform", "hidden_allocations": false,
                   "device_memory_holds_arrays": )") +
                   (holds_arrays ? "true}" : "false}"));
    auto step_site = t.python_site("/work/train.py", 52, "main");
    for (int step = 0; step < 200; ++step) {
      if (step % 2 == 0) t.alloc(step_site, 2 << 20, trace::MemoryKind::kVmmPhysical);
      t.step(step);
    }
    Outcome run = analyze(t);
    ASSERT_EQ(run.growth.verdict, Verdict::kLeak);
    EXPECT_EQ(run.growth.cause,
              holds_arrays ? "tensors-kept-alive" : "non-tensor-driver-allocations");
  }
}

TEST(GrowthVerdict, allocator_warmup_is_not_a_leak) {
  SyntheticTrace t;
  auto state = t.python_site("/work/optim.py", 5, "step");
  auto forward = t.python_site("/work/model.py", 20, "forward");
  for (int step = 0; step < 500; ++step) {
    if (step < 3) t.alloc(state, 32 << 20);  // optimizer state created lazily
    activations(t, forward, 2 << 20, 4);
    t.step(step);
  }
  Outcome run = analyze(t);
  EXPECT_EQ(run.growth.verdict, Verdict::kNoLeak);
  EXPECT_TRUE(run.growth.sites.empty());
}

TEST(GrowthVerdict, varying_sequence_length_is_not_a_leak) {
  SyntheticTrace t;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> length(16, 512);
  auto forward = t.python_site("/work/model.py", 20, "forward");
  auto buffer_site = t.python_site("/work/model.py", 30, "grow_buffer");
  std::uint64_t buffer = 0, buffer_size = 0;
  for (int step = 0; step < 500; ++step) {
    std::uint64_t bytes = static_cast<std::uint64_t>(length(rng)) * 4096;
    activations(t, forward, bytes, 6);
    if (bytes > buffer_size) {  // a buffer re-grown only for a new longest batch
      if (buffer) t.free(buffer);
      buffer = t.alloc(buffer_site, bytes);
      buffer_size = bytes;
    }
    t.step(step);
  }
  EXPECT_EQ(analyze(t).growth.verdict, Verdict::kNoLeak);
}

TEST(GrowthVerdict, small_bounded_buffer_that_plateaus_is_not_a_leak) {
  for (std::size_t capacity : {16u, 32u}) {
    SyntheticTrace t;
    auto site = t.python_site("/work/replay.py", 12, "add");
    std::deque<std::uint64_t> buffer;
    for (int step = 0; step < 500; ++step) {
      buffer.push_back(t.alloc(site, 64 << 10));
      if (buffer.size() > capacity) {
        t.free(buffer.front());
        buffer.pop_front();
      }
      t.step(step);
    }
    EXPECT_EQ(analyze(t).growth.verdict, Verdict::kNoLeak) << "capacity " << capacity;
  }
}

TEST(GrowthVerdict, large_bounded_buffer_is_bounded_growth_once_its_holder_is_known) {
  SyntheticTrace t;
  auto site = t.python_site("/work/replay.py", 12, "add");
  std::deque<std::uint64_t> buffer;
  for (int step = 0; step < 500; ++step) {
    buffer.push_back(t.alloc(site, 64 << 10));
    if (buffer.size() > 200) {
      t.free(buffer.front());
      buffer.pop_front();
    }
    if (step == 60) {
      t.annotate(
          "holder",
          R"({"request_id":1,"sites":[{"site_id":)" + std::to_string(site) +
              R"(,"kind":"tensor","holder":{"type":"deque","name":"replay","owner":"module __main__","bounded":true,"maxlen":200},"fix":""}]})");
    }
    t.step(step);
  }
  Outcome run = analyze(t);
  EXPECT_EQ(run.growth.verdict, Verdict::kNoLeak);
  EXPECT_EQ(run.growth.cause, "bounded-growth");
  ASSERT_FALSE(run.growth.sites.empty());
  EXPECT_TRUE(run.growth.sites[0].bounded);
}

TEST(GrowthVerdict, missing_zero_grad_is_not_a_leak) {
  SyntheticTrace t;
  auto grad = t.python_site("/work/train.py", 50, "backward");
  auto forward = t.python_site("/work/model.py", 20, "forward");
  for (int i = 0; i < 4; ++i) t.alloc(grad, 8 << 20);  // .grad buffers: created once, reused
  for (int step = 0; step < 500; ++step) {
    activations(t, forward, 1 << 20, 10);
    t.step(step);
  }
  EXPECT_EQ(analyze(t).growth.verdict, Verdict::kNoLeak);
}

TEST(GrowthVerdict, empty_cache_every_step_changes_reserved_not_tensors) {
  SyntheticTrace t;
  auto forward = t.python_site("/work/model.py", 20, "forward");
  for (int step = 0; step < 500; ++step) {
    t.sample(Metric::kTorchReservedBytes, 512u << 20);
    activations(t, forward, 4 << 20, 10);
    t.sample(Metric::kTorchReservedBytes, 0);  // empty_cache() returned the blocks
    t.step(step);
  }
  Outcome run = analyze(t);
  EXPECT_EQ(run.growth.verdict, Verdict::kNoLeak);
  EXPECT_TRUE(run.growth.note.empty());
}

TEST(GrowthVerdict, reserved_growth_without_tensor_growth_is_explained_as_cache) {
  SyntheticTrace t;
  auto forward = t.python_site("/work/model.py", 20, "forward");
  for (int step = 0; step < 200; ++step) {
    t.sample(Metric::kTorchReservedBytes, (512ull << 20) + step * (2ull << 20));
    activations(t, forward, 4 << 20, 10);
    t.step(step);
  }
  Outcome run = analyze(t);
  EXPECT_EQ(run.growth.verdict, Verdict::kNoLeak);
  EXPECT_GT(run.growth.pool_reserved_bytes_per_step, 1 << 20);
  EXPECT_NE(run.growth.note.find("caching"), std::string::npos);
}

TEST(GrowthVerdict, many_forward_sites_growing_together_is_a_kept_autograd_graph) {
  SyntheticTrace t;
  std::vector<std::uint32_t> layers;
  for (int i = 0; i < 14; ++i)
    layers.push_back(t.python_site("/work/model.py", 100 + i, "forward"));
  for (int step = 0; step < 100; ++step) {
    for (auto layer : layers) t.alloc(layer, 256 << 10);  // saved activations never freed
    t.step(step);
  }
  Outcome run = analyze(t);
  ASSERT_EQ(run.growth.verdict, Verdict::kLeak);
  EXPECT_EQ(run.growth.cause, "autograd-graph-kept-alive");
  EXPECT_EQ(run.growth.sites.size(), 14u);
  EXPECT_NEAR(run.growth.rate_bytes_per_step, 14.0 * (256 << 10), 1);
}

TEST(GrowthVerdict, holder_answer_sets_cause_and_fix) {
  SyntheticTrace t;
  auto leak = t.python_site("/work/train.py", 42, "train");
  for (int step = 0; step < 100; ++step) {
    t.alloc(leak, 1 << 20);
    if (step == 50) {
      t.annotate(
          "holder",
          R"({"request_id":1,"sites":[{"site_id":)" + std::to_string(leak) +
              R"(,"kind":"graph","graph_tensors_per_element":14,"holder":{"type":"list","name":"losses","owner":"module __main__","bounded":false},"fix":"append loss.item() (a Python float) instead of the loss tensor"}]})");
    }
    t.step(step);
  }
  Outcome run = analyze(t);
  ASSERT_EQ(run.growth.verdict, Verdict::kLeak);
  EXPECT_EQ(run.growth.cause, "autograd-graph-kept-alive");
  EXPECT_EQ(run.growth.fix, "append loss.item() (a Python float) instead of the loss tensor");
  ASSERT_TRUE(run.growth.holder && run.growth.holder->holder);
  EXPECT_EQ(run.growth.holder->holder->name, "losses");
  EXPECT_EQ(run.growth.holder->kind, "graph");
  EXPECT_EQ(run.growth.holder->graph_tensors_per_element, 14);
}

TEST(GrowthVerdict, driver_memory_outside_pytorch_is_a_non_tensor_leak) {
  SyntheticTrace t;
  auto extension = t.native_site("/opt/ext/libmyop.so");
  // A Python process: a tensor made and freed once.
  t.free(t.alloc(t.python_site("/work/train.py", 12, "train"), 4096));
  for (int step = 0; step < 100; ++step) {
    t.alloc(extension, 2 << 20, MemoryKind::kDevice);
    t.step(step);
  }
  Outcome run = analyze(t);
  ASSERT_EQ(run.growth.verdict, Verdict::kLeak);
  EXPECT_EQ(run.growth.cause, "non-tensor-driver-allocations");
  EXPECT_FALSE(run.growth.sites[0].tensor_level);
}

TEST(GrowthVerdict, the_same_driver_memory_in_a_process_without_python_gets_cuda_words) {
  SyntheticTrace t;
  auto buffer = t.native_site("/work/render");
  for (int step = 0; step < 100; ++step) {
    t.alloc(buffer, 2 << 20, MemoryKind::kDevice);
    t.step(step);
  }
  Outcome run = analyze(t);
  ASSERT_EQ(run.growth.verdict, Verdict::kLeak);
  EXPECT_EQ(run.growth.cause, "device-buffers-never-freed");
  EXPECT_NE(run.growth.fix.find("cudaFree"), std::string::npos) << run.growth.fix;
  EXPECT_EQ(run.growth.cause_text.find("Python"), std::string::npos) << run.growth.cause_text;
}

// Issue 37's slow leak: 4 KiB a step at its own site under 20 GiB of
// steady tensors is found, and a clean run states the slowest growth it
// could have shown.
TEST(GrowthVerdict,
     a_slow_leak_under_a_large_steady_job_is_found_and_a_clean_run_states_its_floor) {
  SyntheticTrace t;
  auto weights = t.python_site("/work/train.py", 10, "build");
  auto slow = t.python_site("/work/train.py", 50, "train");
  for (int i = 0; i < 20; ++i) t.alloc(weights, 1ull << 30);
  for (int step = 0; step < 300; ++step) {
    t.alloc(slow, 4096);
    t.step(step);
  }
  Outcome run = analyze(t);
  ASSERT_EQ(run.growth.verdict, Verdict::kLeak);
  EXPECT_NEAR(run.growth.rate_bytes_per_step, 4096, 64);
  ASSERT_TRUE(run.growth.verdict_step.has_value());
  EXPECT_LE(*run.growth.verdict_step, 60u);

  SyntheticTrace flat;
  auto model = flat.python_site("/work/train.py", 10, "build");
  auto activations_site = flat.python_site("/work/train.py", 30, "forward");
  for (int i = 0; i < 20; ++i) flat.alloc(model, 1ull << 30);
  for (int step = 0; step < 300; ++step) {
    flat.free(flat.alloc(activations_site, 1 << 20));
    flat.step(step);
  }
  Outcome clean = analyze(flat);
  ASSERT_EQ(clean.growth.verdict, Verdict::kNoLeak);
  ASSERT_TRUE(clean.growth.detection_floor_bytes_per_step.has_value());
  EXPECT_DOUBLE_EQ(*clean.growth.detection_floor_bytes_per_step, 32.0 * 1024 / 200);
}

TEST(GrowthVerdict, caching_allocator_segments_are_not_reported_as_their_own_leak) {
  SyntheticTrace t;
  auto segments = t.native_site("/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so");
  auto leak = t.python_site("/work/train.py", 42, "train");
  for (int step = 0; step < 100; ++step) {
    t.alloc(leak, 2 << 20);
    t.alloc(segments, 2 << 20, MemoryKind::kDevice);  // the cache grows to hold the leaked tensors
    t.step(step);
  }
  Outcome run = analyze(t);
  ASSERT_EQ(run.growth.verdict, Verdict::kLeak);
  ASSERT_EQ(run.growth.sites.size(), 1u);
  EXPECT_EQ(run.growth.sites[0].site.label(), "train.py:42");
  // At exit, the cache's segments are listed as suppressed, not as leaks.
  EXPECT_EQ(run.report.leaks.allocations, 100u);
  EXPECT_EQ(run.report.leaks.suppressed_allocations, 100u);
}

TEST(GrowthVerdict, host_memory_growth_is_reported_as_host) {
  SyntheticTrace t;
  auto forward = t.python_site("/work/model.py", 20, "forward");
  for (int step = 0; step < 150; ++step) {
    t.sample(Metric::kHostRssBytes, (1ull << 30) + step * (1ull << 20));
    activations(t, forward, 1 << 20, 4);
    t.step(step);
  }
  Outcome run = analyze(t);
  EXPECT_EQ(run.growth.where, Where::kHost);
  EXPECT_NEAR(run.growth.host_rss_bytes_per_step, 1 << 20, 1);
}

TEST(GrowthVerdict, time_to_full_comes_from_the_device_samples) {
  SyntheticTrace t;
  auto leak = t.python_site("/work/train.py", 42, "train");
  t.sample(Metric::kDeviceTotalBytes, 100ull << 30);
  for (int step = 0; step < 100; ++step) {
    t.alloc(leak, 100 << 20);
    t.sample(Metric::kDeviceUsedBytes, (50ull << 30) + step * (100ull << 20));
    t.advance_ms(100);
    t.step(step);
  }
  Outcome run = analyze(t);
  ASSERT_EQ(run.growth.verdict, Verdict::kLeak);
  ASSERT_TRUE(run.growth.seconds_to_full.has_value());
  // (100 GiB - (50 GiB + 99 * 100 MiB)) / (100 MiB per 0.1 s)
  double expected = ((100.0 * 1024) - (50.0 * 1024 + 99 * 100)) / 1000.0;
  EXPECT_NEAR(*run.growth.seconds_to_full, expected, 0.5);
}

TEST(GrowthVerdict, a_serving_loop_of_one_statement_counts_its_requests) {
  SyntheticTrace t;
  auto leak = t.python_site("/work/serve.py", 7, "handle");
  for (int i = 0; i < 600; ++i) {  // 60 s of requests, one leaked buffer per 100 ms
    t.alloc(leak, 64 << 10);
    t.advance_ms(100);
  }
  Outcome run = analyze(t);
  EXPECT_EQ(run.growth.step_source, "allocation-period");
  EXPECT_EQ(run.growth.steps, 600u);
  EXPECT_EQ(run.growth.verdict, Verdict::kLeak);
  EXPECT_NEAR(run.growth.rate_bytes_per_step, 64 << 10, 1);
}

TEST(GrowthVerdict, programs_where_nothing_repeats_use_time_windows) {
  SyntheticTrace t;
  std::vector<std::uint32_t> sites;
  for (int i = 0; i < 40; ++i) sites.push_back(t.python_site("/work/serve.py", 10 + i, "handle"));
  std::mt19937 rng(17);
  for (int i = 0; i < 600; ++i) {  // 60 s of requests down random code paths, all kept
    t.alloc(sites[rng() % sites.size()], 64 << 10);
    t.advance_ms(100);
  }
  Outcome run = analyze(t);
  EXPECT_EQ(run.growth.step_source, "time-window");
  EXPECT_EQ(run.growth.verdict, Verdict::kLeak);
}

TEST(GrowthVerdict, real_steps_replace_time_windows) {
  SyntheticTrace t;
  auto leak = t.python_site("/work/train.py", 42, "train");
  t.advance_ms(5000);  // slow start-up with no steps
  t.alloc(leak, 1);
  for (int step = 0; step < 100; ++step) {
    t.alloc(leak, 64 << 10);
    t.step(step);
  }
  Outcome run = analyze(t);
  EXPECT_EQ(run.growth.step_source, "optimizer-hook");
  EXPECT_EQ(run.growth.steps, 100u);
}

TEST(GrowthVerdict, malformed_holder_answers_are_ignored_not_fatal) {
  SyntheticTrace t;
  auto leak = t.python_site("/work/train.py", 42, "train");
  for (int step = 0; step < 100; ++step) {
    t.alloc(leak, 1 << 20);
    if (step == 50) {
      t.annotate("holder", R"({"sites":[{"site_id":"one"}]})");
      t.annotate("holder", R"({"sites":[{"site_id":)" + std::to_string(leak) +
                               R"(,"kind":7,"holder":{"type":null,"bounded":"yes","name":3}}]})");
      t.annotate("holder", "not json at all");
      t.annotate("holder", R"({"sites":[{"site_id":-4},{"site_id":99999999999}]})");
    }
    t.step(step);
  }
  Outcome run = analyze(t);
  EXPECT_EQ(run.growth.verdict, Verdict::kLeak);  // "bounded":"yes" is not a boolean
  EXPECT_EQ(run.growth.cause, "tensors-kept-alive");
}

TEST(GrowthVerdict, a_later_empty_holder_answer_does_not_erase_a_named_holder) {
  SyntheticTrace t;
  auto leak = t.python_site("/work/train.py", 42, "train");
  for (int step = 0; step < 100; ++step) {
    t.alloc(leak, 1 << 20);
    if (step == 20) {
      t.annotate(
          "holder",
          R"({"sites":[{"site_id":)" + std::to_string(leak) +
              R"(,"kind":"tensor","holder":{"type":"list","name":"kept","owner":"module __main__"}}]})");
    }
    if (step == 60) {
      t.annotate("holder", R"({"sites":[{"site_id":)" + std::to_string(leak) +
                               R"(,"kind":"unknown","holder":null}]})");
    }
    t.step(step);
  }
  Outcome run = analyze(t);
  ASSERT_EQ(run.growth.verdict, Verdict::kLeak);
  ASSERT_TRUE(run.growth.holder && run.growth.holder->holder);
  EXPECT_EQ(run.growth.holder->holder->name, "kept");
}

TEST(GrowthVerdict, an_event_dated_near_the_end_of_time_does_not_hang_the_time_windows) {
  SyntheticTrace t;
  auto site = t.python_site("/work/serve.py", 7, "handle");
  t.alloc(site, 64);
  t.advance_ms(1e12);  // a damaged clock: ~31 years later
  t.alloc(site, 64);
  trace::AllocRecord last;
  last.seq = 1000000;
  last.time_ns = UINT64_MAX - 6;
  last.address = 0x42;
  last.size = 1;
  last.stack_id = site;
  std::vector<trace::Record> records = t.records();
  records.push_back(last);
  ProcessAnalysis analysis;
  for (const auto& r : records) analysis.consume(r);
  EXPECT_LE(analysis.boundaries(), 3000u);  // bounded work, and it returned at all
}

}  // namespace
}  // namespace gpuleak::analysis
