// Finding steps without marks: the repetition detector on synthetic key
// streams (noise, varying length, nested periods, none at all), the clock
// arbiter's trust order, and whole analyses of loops that call no optimizer.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "analysis/steps/clock_arbiter.h"
#include "analysis/steps/repetition.h"
#include "analysis/synthetic_trace.h"

namespace gpuleak::analysis {
namespace {

using testing::SyntheticTrace;
using trace::StepSource;

std::vector<std::uint64_t> repeat(const std::vector<std::uint64_t>& body, int times) {
  std::vector<std::uint64_t> out;
  for (int i = 0; i < times; ++i) out.insert(out.end(), body.begin(), body.end());
  return out;
}

// ---- repetition.h ------------------------------------------------------------

TEST(Repetition, a_repeated_body_is_found_with_its_first_key_as_anchor) {
  auto keys = repeat({10, 11, 12, 13}, 20);
  auto found = find_repetition(keys);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->anchor, 10u);
  EXPECT_EQ(found->occurrences, 20u);
  EXPECT_DOUBLE_EQ(found->mean_piece_length, 4.0);
}

TEST(Repetition, noise_between_passes_does_not_hide_the_loop) {
  std::mt19937 random(7);
  std::vector<std::uint64_t> keys;
  for (int i = 0; i < 60; ++i) {
    for (std::uint64_t k : {10, 11, 12, 13, 14, 15}) {
      keys.push_back(k);
      if (random() % 20 == 0) keys.push_back(1000 + random() % 50);  // data-dependent extras
    }
  }
  auto found = find_repetition(keys);
  ASSERT_TRUE(found);
  EXPECT_GE(found->anchor, 10u);
  EXPECT_LE(found->anchor, 15u);
  EXPECT_EQ(found->occurrences, 60u);
}

TEST(Repetition, passes_of_varying_length_are_found) {
  std::mt19937 random(3);
  std::vector<std::uint64_t> keys;
  for (int i = 0; i < 40; ++i) {
    keys.push_back(10);
    keys.push_back(11);
    int steps = 1 + static_cast<int>(random() % 12);  // a sequence of varying length
    for (int s = 0; s < steps; ++s) keys.push_back(12);
    keys.push_back(13);
  }
  auto found = find_repetition(keys);
  ASSERT_TRUE(found);
  EXPECT_NE(found->anchor, 12u);  // the key of the inner steps is no iteration
  EXPECT_EQ(found->occurrences, 40u);
}

TEST(Repetition, two_nested_periods_give_the_inner_one) {
  std::vector<std::uint64_t> keys;
  for (int epoch = 0; epoch < 6; ++epoch) {
    keys.push_back(100);  // once per epoch
    auto batches = repeat({1, 2, 3}, 12);
    keys.insert(keys.end(), batches.begin(), batches.end());
  }
  auto found = find_repetition(keys);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->anchor, 1u);
  EXPECT_EQ(found->occurrences, 72u);
}

TEST(Repetition, random_keys_have_no_period) {
  std::mt19937 random(11);
  std::vector<std::uint64_t> keys;
  for (int i = 0; i < 2000; ++i) keys.push_back(random() % 20);
  EXPECT_FALSE(find_repetition(keys));
}

TEST(Repetition, one_key_repeated_is_a_loop_of_one_statement) {
  std::vector<std::uint64_t> keys(30, 7);
  auto found = find_repetition(keys);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->anchor, 7u);
  EXPECT_EQ(found->occurrences, 30u);
}

TEST(Repetition, too_few_rounds_are_no_loop_yet) {
  EXPECT_FALSE(find_repetition(repeat({1, 2, 3}, 5)));
}

TEST(Repetition, a_key_of_a_short_inner_loop_is_not_the_anchor) {
  // (A B) three times, then C: C starts each outer time round.
  auto keys = repeat({1, 2, 1, 2, 1, 2, 3}, 20);
  auto found = find_repetition(keys);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->anchor, 3u);
  EXPECT_EQ(found->occurrences, 20u);
}

TEST(Repetition, a_loop_that_ended_long_ago_is_not_the_current_one) {
  auto keys = repeat({1, 2, 3}, 20);
  for (int i = 0; i < 300; ++i) keys.push_back(500 + i);  // other work since
  RepetitionOptions ongoing;
  ongoing.max_pieces_since_last = 8;
  EXPECT_FALSE(find_repetition(keys, ongoing));
  EXPECT_TRUE(find_repetition(keys));  // at the end of a trace, it still counts
}

// ---- clock_arbiter.h ---------------------------------------------------------

TEST(ClockArbiter, a_clock_that_only_repeats_a_better_one_is_ignored) {
  ClockArbiter arbiter;
  int dataloader_boundaries = 0;
  for (int i = 0; i < 50; ++i) {
    std::uint64_t t = 1'000'000'000ull + i * 10'000'000ull;
    dataloader_boundaries += arbiter.on_step_boundary({StepSource::kDataLoader, 1}, t);
    EXPECT_TRUE(arbiter.on_step_boundary({StepSource::kOptimizerHook, 0}, t + 9'000'000));
  }
  EXPECT_LE(dataloader_boundaries, 1);  // its first step came before any optimizer step
}

TEST(ClockArbiter, micro_batches_between_optimizer_steps_are_not_steps) {
  ClockArbiter arbiter;
  int micro = 0;
  std::uint64_t t = 1'000'000'000ull;
  for (int step = 0; step < 30; ++step) {
    for (int m = 0; m < 8; ++m) {
      t += 5'000'000;
      micro += arbiter.on_step_boundary({StepSource::kAllocationPeriod, 1}, t);
    }
    arbiter.on_step_boundary({StepSource::kOptimizerHook, 0}, t + 1'000'000);
  }
  EXPECT_LE(micro, 16);  // only before the optimizer's pace is known
}

TEST(ClockArbiter, a_validation_loop_between_two_optimizer_steps_counts) {
  ClockArbiter arbiter;
  std::uint64_t t = 1'000'000'000ull;
  for (int step = 0; step < 20; ++step) {
    t += 10'000'000;
    arbiter.on_step_boundary({StepSource::kOptimizerHook, 0}, t);
  }
  int validation = 0;
  for (int batch = 0; batch < 50; ++batch) {
    t += 10'000'000;
    validation += arbiter.on_step_boundary({StepSource::kDataLoader, 2}, t);
  }
  EXPECT_GE(validation, 45);
}

TEST(ClockArbiter, explicit_steps_once_per_epoch_leave_optimizer_steps_counting) {
  ClockArbiter arbiter;
  std::uint64_t t = 1'000'000'000ull;
  int optimizer = 0;
  for (int epoch = 0; epoch < 4; ++epoch) {
    for (int step = 0; step < 100; ++step) {
      t += 10'000'000;
      optimizer += arbiter.on_step_boundary({StepSource::kOptimizerHook, 0}, t);
    }
    arbiter.on_step_boundary({StepSource::kExplicit, 0}, t + 1);
  }
  EXPECT_GE(optimizer, 390);
}

// ---- whole analyses ------------------------------------------------------------

using Frames = std::vector<SyntheticTrace::PyFrame>;

// The stacks of an evaluation loop like the ones users write:
//   main() -> evaluate() { for x, y in batches(): out = model(x); loss = ...; total += loss }
// with a model whose forward runs 12 identical layers.
struct EvalLoop {
  explicit EvalLoop(SyntheticTrace& t) {
    Frames outer = {{"/w/eval.py", 90, "<module>"}, {"/w/eval.py", 83, "main"}};
    auto with = [&](Frames tail) {
      Frames f = outer;
      f.insert(f.end(), tail.begin(), tail.end());
      return t.python_stack(f);
    };
    batch = with({{"/w/eval.py", 70, "evaluate"}, {"/w/eval.py", 61, "batches"}});
    embed = with({{"/w/eval.py", 71, "evaluate"}, {"/w/model.py", 30, "forward"}});
    layer_a = with({{"/w/eval.py", 71, "evaluate"},
                    {"/w/model.py", 31, "forward"},
                    {"/w/model.py", 12, "Block.forward"}});
    layer_b = with({{"/w/eval.py", 71, "evaluate"},
                    {"/w/model.py", 31, "forward"},
                    {"/w/model.py", 13, "Block.forward"}});
    head = with({{"/w/eval.py", 71, "evaluate"}, {"/w/model.py", 32, "forward"}});
    loss = with({{"/w/eval.py", 72, "evaluate"}});
    total = with({{"/w/eval.py", 73, "evaluate"}});
  }
  // One step; what it keeps stays allocated.
  void run_step(SyntheticTrace& t, bool keep, std::uint64_t batch_bytes = 1 << 20) {
    std::vector<std::uint64_t> transient;
    transient.push_back(t.alloc(batch, batch_bytes));
    transient.push_back(t.alloc(embed, 256 << 10));
    for (int l = 0; l < 12; ++l) {
      transient.push_back(t.alloc(layer_a, 256 << 10));
      transient.push_back(t.alloc(layer_b, 256 << 10));
    }
    transient.push_back(t.alloc(head, 64 << 10));
    std::uint64_t kept = t.alloc(loss, 512);
    if (keep) {
      t.alloc(total, 512);
      for (int i = 0; i < 4; ++i) transient.pop_back();  // the graph keeps the last activations
    } else {
      t.free(kept);
    }
    for (std::uint64_t a : transient) t.free(a);
    t.advance_ms(8);
  }
  std::uint32_t batch, embed, layer_a, layer_b, head, loss, total;
};

// The phases of a growth report, for failure messages.
std::string phases_of(const GrowthReport& g) {
  std::string out = g.undecided_reason;
  for (const PhaseSummary& p : g.phases) {
    out += "\n  " + p.name + " [" + p.step_source + "] steps " + std::to_string(p.steps) + " " +
           verdict_name(p.verdict) + (p.primary ? " (primary)" : "");
  }
  return out;
}

GrowthReport growth_of(const SyntheticTrace& t) {
  ProcessAnalysis analysis = t.analyze();
  return analysis.build_report("synthetic").growth;
}

TEST(StepFinding, eval_loop_without_marks_gets_a_leak_verdict_within_50_steps) {
  SyntheticTrace t;
  EvalLoop loop(t);
  for (int i = 0; i < 120; ++i) loop.run_step(t, /*keep=*/true);
  GrowthReport g = growth_of(t);
  ASSERT_EQ(g.verdict, Verdict::kLeak) << phases_of(g);
  EXPECT_EQ(g.step_source, "allocation-period");
  // Iterations of the loop in evaluate(), not layers of the model.
  EXPECT_GE(g.steps, 110u);
  EXPECT_LE(g.steps, 121u);
  EXPECT_NE(g.phase.find("evaluate"), std::string::npos) << g.phase;
  EXPECT_NE(g.phase.find("eval.py:70"), std::string::npos) << g.phase;
  ASSERT_TRUE(g.verdict_step);
  EXPECT_LE(*g.verdict_step - g.warmup_steps, 50u);
  EXPECT_NE(g.step_source_reason.find("repeat"), std::string::npos);
}

TEST(StepFinding, eval_loop_that_frees_everything_is_no_leak_over_500_steps) {
  SyntheticTrace t;
  EvalLoop loop(t);
  std::mt19937 random(5);
  for (int i = 0; i < 500; ++i) {
    loop.run_step(t, /*keep=*/false, (1 + random() % 4) << 20);  // varying batch sizes
  }
  GrowthReport g = growth_of(t);
  EXPECT_EQ(g.verdict, Verdict::kNoLeak) << phases_of(g);
  EXPECT_EQ(g.step_source, "allocation-period");
  for (const PhaseSummary& p : g.phases) EXPECT_EQ(p.verdict, Verdict::kNoLeak) << p.name;
}

TEST(StepFinding, a_thread_allocating_at_random_does_not_hide_the_loop) {
  SyntheticTrace t;
  EvalLoop loop(t);
  std::vector<std::uint32_t> others;
  for (int i = 0; i < 30; ++i) others.push_back(t.python_stack({{"/w/worker.py", 10u + i, "run"}}));
  std::mt19937 random(9);
  for (int i = 0; i < 120; ++i) {
    loop.run_step(t, /*keep=*/true);
    t.set_thread(2);
    for (int k = 0; k < 5; ++k) t.free(t.alloc(others[random() % others.size()], 4096));
    t.set_thread(1);
  }
  GrowthReport g = growth_of(t);
  ASSERT_EQ(g.verdict, Verdict::kLeak) << phases_of(g);
  EXPECT_EQ(g.step_source, "allocation-period");
  EXPECT_GE(g.steps, 110u);
}

TEST(StepFinding, evaluation_after_training_is_judged_as_its_own_phase) {
  SyntheticTrace t;
  auto forward = t.python_stack({{"/w/train.py", 50, "<module>"}, {"/w/train.py", 30, "train"}});
  for (int step = 0; step < 100; ++step) {
    std::vector<std::uint64_t> live;
    for (int i = 0; i < 6; ++i) live.push_back(t.alloc(forward, 1 << 20));
    for (auto a : live) t.free(a);
    t.advance_ms(10);
    t.step(step + 1);
  }
  EvalLoop loop(t);
  for (int i = 0; i < 80; ++i) loop.run_step(t, /*keep=*/true);
  GrowthReport g = growth_of(t);
  ASSERT_EQ(g.verdict, Verdict::kLeak) << phases_of(g);
  EXPECT_EQ(g.step_source, "allocation-period");
  bool training_clean = false;
  for (const PhaseSummary& p : g.phases) {
    if (p.step_source == "optimizer-hook") training_clean = p.verdict == Verdict::kNoLeak;
  }
  EXPECT_TRUE(training_clean);
}

TEST(StepFinding, validation_passes_inside_training_are_one_phase) {
  SyntheticTrace t;
  auto forward = t.python_stack({{"/w/train.py", 90, "<module>"}, {"/w/train.py", 30, "fit"}});
  Frames val = {{"/w/train.py", 90, "<module>"}, {"/w/train.py", 35, "fit"}};
  auto with = [&](Frames tail) {
    Frames f = val;
    f.insert(f.end(), tail.begin(), tail.end());
    return t.python_stack(f);
  };
  auto val_batch = with({{"/w/train.py", 60, "validate"}});
  auto val_out = with({{"/w/train.py", 61, "validate"}});
  auto val_metric = with({{"/w/train.py", 62, "validate"}});
  for (int step = 0; step < 400; ++step) {
    std::vector<std::uint64_t> live;
    for (int i = 0; i < 6; ++i) live.push_back(t.alloc(forward, 1 << 20));
    for (auto a : live) t.free(a);
    t.advance_ms(10);
    t.step(step + 1);
    if ((step + 1) % 40 == 0) {
      for (int b = 0; b < 12; ++b) {  // a validation pass that keeps every output
        std::uint64_t x = t.alloc(val_batch, 1 << 20);
        t.alloc(val_out, 64 << 10);
        t.free(t.alloc(val_metric, 512));
        t.free(x);
        t.advance_ms(5);
      }
    }
  }
  GrowthReport g = growth_of(t);
  ASSERT_EQ(g.verdict, Verdict::kLeak) << phases_of(g);
  EXPECT_NE(g.phase.find("validate"), std::string::npos) << g.phase;
  EXPECT_GE(g.steps, 100u);  // the ten passes counted as one loop
}

// The serving loop of examples/loops/leak_serving_shape_keyed_cache.py as its
// stream looks: four request threads run serve() { x = randn(...); y =
// model(x, lengths) (an inner loop over the batch's requests) }, the
// interpreter switching between them every few allocations; the first thread
// serves a few batches before the others start. A scratch buffer cached by
// the batch's total length is kept for every new total.
TEST(StepFinding, request_threads_running_one_loop_each_count_their_batches) {
  SyntheticTrace t;
  Frames thread_frames = {{"/usr/lib/python3.12/threading.py", 1032, "_bootstrap"},
                          {"/usr/lib/python3.12/threading.py", 1075, "_bootstrap_inner"},
                          {"/usr/lib/python3.12/threading.py", 1012, "run"}};
  auto with = [&](Frames tail) {
    Frames f = thread_frames;
    f.insert(f.end(), tail.begin(), tail.end());
    return t.python_stack(f);
  };
  const Frames call = {{"/w/serve.py", 97, "serve"}};
  auto in_forward = [&](std::uint32_t line) {
    Frames f = call;
    f.push_back({"/w/serve.py", line, "forward"});
    return with(f);
  };
  auto packed = with({{"/w/serve.py", 96, "serve"}});
  auto qkv = in_forward(70);
  auto placeholder =
      with({call[0], {"/w/serve.py", 72, "forward"}, {"/w/serve.py", 55, "placeholder"}});
  auto scores = in_forward(76), weights = in_forward(77), sums = in_forward(78);
  auto joined = in_forward(81), out = in_forward(82);
  auto result = with(call);  // .abs().mean() on the line that calls the model

  // Each thread's batch as the allocations it makes, in order, and what it frees after.
  struct Op {
    std::uint32_t stack;
    std::uint64_t bytes;
    bool kept;
  };
  std::mt19937 random(3);
  std::set<std::uint64_t> totals_seen;
  auto batch_ops = [&]() {
    std::vector<Op> ops;
    int requests = 1 + static_cast<int>(random() % 16);
    std::uint64_t total = 0;
    for (int r = 0; r < requests; ++r) total += 16 + random() % 497;
    ops.push_back({packed, total * 2048, false});
    ops.push_back({qkv, total * 6144, false});
    if (totals_seen.insert(total).second) ops.push_back({placeholder, total * 64, true});
    for (int r = 0; r < requests; ++r) {
      ops.push_back({scores, 64 << 10, false});
      ops.push_back({weights, 64 << 10, false});
      ops.push_back({sums, 4 << 10, false});
    }
    ops.push_back({joined, total * 2048, false});
    ops.push_back({out, total * 2048, false});
    ops.push_back({result, total * 2048, false});
    ops.push_back({result, 512, false});
    return ops;
  };
  struct Worker {
    std::uint32_t thread;
    std::vector<Op> batch;
    std::size_t next = 0;
    std::vector<std::uint64_t> transient;
  };
  std::vector<Worker> workers;
  for (std::uint32_t id = 1; id <= 4; ++id) workers.push_back({id, {}, 0, {}});
  const int batches = 300;
  int started = 0, served = 0;
  auto run_slice = [&](Worker& w, int allocations) {
    t.set_thread(w.thread);
    for (int i = 0; i < allocations; ++i) {
      if (w.next == w.batch.size()) {  // the batch is done: free it, take the next
        for (std::uint64_t a : w.transient) t.free(a);
        w.transient.clear();
        if (!w.batch.empty()) ++served;
        if (started == batches) return false;
        ++started;
        w.batch = batch_ops();
        w.next = 0;
      }
      const Op& op = w.batch[w.next++];
      std::uint64_t a = t.alloc(op.stack, op.bytes);
      if (!op.kept) w.transient.push_back(a);
      t.advance_ms(0.05);
    }
    return true;
  };
  run_slice(workers[0], 150);  // the first thread alone for a few batches
  bool any = true;
  while (any) {
    any = false;
    for (Worker& w : workers) any |= run_slice(w, 5 + static_cast<int>(random() % 40));
  }
  GrowthReport g = growth_of(t);
  ASSERT_EQ(g.verdict, Verdict::kLeak) << phases_of(g);
  EXPECT_EQ(g.step_source, "allocation-period");
  // One iteration per served batch, whichever thread served it.
  EXPECT_GE(g.steps, 270u) << phases_of(g);
  EXPECT_LE(g.steps, 310u) << phases_of(g);
  ASSERT_TRUE(g.verdict_step);
  EXPECT_LE(*g.verdict_step - g.warmup_steps, 50u);
}

// Autograd's engine thread allocates each backward pass's gradients in the
// same node order, under the Python stack lent by the thread that called
// backward() (its innermost frame gpuleak's own wrapper) and one native frame
// naming the node: that repeats once per training step, but it is not a loop
// of the program, and no phase may be named after gpuleak's wrapper.
TEST(StepFinding, backward_passes_under_a_lent_stack_are_not_a_loop_of_their_own) {
  SyntheticTrace t;
  Frames train = {{"/w/train.py", 60, "<module>"}, {"/w/train.py", 50, "train"}};
  auto at = [&](int line) {
    Frames f = train;
    f.push_back({"/w/train.py", static_cast<std::uint32_t>(line), "train"});
    return t.python_stack(f);
  };
  std::uint32_t forward_a = at(44), forward_b = at(45), loss_line = at(46);
  Frames lent = train;
  lent.push_back({"/w/train.py", 47, "train"});
  lent.push_back({"/venv/lib/python3.12/site-packages/torch/_tensor.py", 626, "Tensor.backward"});
  lent.push_back({"/opt/gpuleak/python/gpuleak/_backward_lines.py", 43,
                  "lend_stacks_during_backward.<locals>._engine_run_backward"});
  std::vector<std::uint32_t> nodes;
  for (std::uint64_t node = 1; node <= 6; ++node)
    nodes.push_back(t.python_stack(lent, {0x7000 + node}));
  for (int step = 1; step <= 120; ++step) {
    t.set_thread(1);
    std::uint64_t a = t.alloc(forward_a, 1 << 20), b = t.alloc(forward_b, 1 << 20);
    std::uint64_t l = t.alloc(loss_line, 512);
    t.set_thread(2);  // the engine thread
    std::vector<std::uint64_t> grads;
    for (std::uint32_t node : nodes) grads.push_back(t.alloc(node, 256 << 10));
    for (std::uint64_t g : grads) t.free(g);
    t.set_thread(1);
    for (std::uint64_t x : {a, b, l}) t.free(x);
    t.step(step);
    t.advance_ms(5);
  }
  GrowthReport g = growth_of(t);
  EXPECT_EQ(g.verdict, Verdict::kNoLeak) << phases_of(g);
  for (const PhaseSummary& p : g.phases)
    EXPECT_EQ(p.name.find("_backward_lines"), std::string::npos) << phases_of(g);
  EXPECT_EQ(g.phase.find("_backward_lines"), std::string::npos) << g.phase;
}

TEST(StepFinding, loop_of_a_cuda_program_is_found_from_native_frames) {
  SyntheticTrace t;
  // _start -> main -> run_step (3 call sites) -> cudaMalloc.
  auto site = [&](std::uint64_t call) {
    return t.native_stack({0x401000, 0x401200, call, 0x7f0000001000});
  };
  auto input = site(0x402010), scratch = site(0x402020), kept = site(0x402030);
  for (int i = 0; i < 100; ++i) {
    std::uint64_t a = t.alloc(input, 1 << 20, trace::MemoryKind::kDevice);
    std::uint64_t b = t.alloc(scratch, 4 << 20, trace::MemoryKind::kDevice);
    t.alloc(kept, 256 << 10, trace::MemoryKind::kDevice);
    t.free(b, trace::MemoryKind::kDevice);
    t.free(a, trace::MemoryKind::kDevice);
    t.advance_ms(3);
  }
  GrowthReport g = growth_of(t);
  ASSERT_EQ(g.verdict, Verdict::kLeak) << phases_of(g);
  EXPECT_EQ(g.step_source, "allocation-period");
  EXPECT_GE(g.steps, 95u);
}

TEST(StepFinding, when_nothing_repeats_the_report_says_why) {
  SyntheticTrace t;
  std::vector<std::uint32_t> sites;
  for (int i = 0; i < 60; ++i) sites.push_back(t.python_stack({{"/w/a.py", 10u + i, "f"}}));
  std::mt19937 random(1);
  for (int i = 0; i < 300; ++i) {
    t.alloc(sites[random() % sites.size()], 4096);
    t.advance_ms(10);
  }
  GrowthReport g = growth_of(t);
  EXPECT_EQ(g.verdict, Verdict::kNotYet);
  EXPECT_NE(g.undecided_reason.find("no repeating loop"), std::string::npos) << g.undecided_reason;
  EXPECT_NE(g.undecided_reason.find("gpuleak.step()"), std::string::npos);
  // How far it was from a verdict: the time windows seen and needed.
  EXPECT_NE(g.undecided_reason.find(fmt::format("{} windows of 1 s, a verdict needs {}", g.steps,
                                                g.warmup_steps + GrowthOptions{}.min_steps)),
            std::string::npos)
      << g.undecided_reason;
}

// A new thread per iteration (a worker started for each batch that makes a
// library handle and never destroys it, as the depth corpus's cuDNN case):
// no thread repeats anything, but the threads, one after another, do: each
// thread is one iteration, and 80 of them are a verdict with steps counted.
TEST(StepFinding, a_thread_started_per_step_is_one_step_each) {
  SyntheticTrace t;
  auto create = t.native_stack({0x401000, 0x401200, 0x402030, 0x7f0000001000});
  auto scratch = t.native_stack({0x401000, 0x401200, 0x402040, 0x7f0000002000});
  t.alloc(t.native_stack({0x400100, 0x400200}), 8 << 20, trace::MemoryKind::kDevice);  // main
  for (std::uint32_t i = 0; i < 80; ++i) {
    t.set_thread(100 + i);
    t.alloc(create, 9 << 20, trace::MemoryKind::kDevice);  // never freed
    std::uint64_t s = t.alloc(scratch, 64 << 10, trace::MemoryKind::kDevice);
    t.free(s, trace::MemoryKind::kDevice);
    t.advance_ms(19);
  }
  GrowthReport g = growth_of(t);
  EXPECT_EQ(g.step_source, "allocation-period") << g.undecided_reason;
  EXPECT_GE(g.steps, 75u);
  ASSERT_EQ(g.verdict, Verdict::kLeak) << g.undecided_reason;
  ASSERT_FALSE(g.sites.empty());
  EXPECT_NEAR(g.sites[0].rate_bytes_per_step, 9 << 20, 1 << 16);
  EXPECT_EQ(g.phase.rfind("threads started one per iteration", 0), 0u) << g.phase;
  EXPECT_NE(g.step_source_reason.find("each thread is one time round"), std::string::npos)
      << g.step_source_reason;
}

// Its control: each thread frees what it made; the same loop, no growth.
TEST(StepFinding, threads_per_step_that_free_what_they_made_are_no_leak) {
  SyntheticTrace t;
  auto create = t.native_stack({0x401000, 0x401200, 0x402030, 0x7f0000001000});
  for (std::uint32_t i = 0; i < 80; ++i) {
    t.set_thread(100 + i);
    std::uint64_t a = t.alloc(create, 9 << 20, trace::MemoryKind::kDevice);
    t.free(a, trace::MemoryKind::kDevice);
    t.advance_ms(19);
  }
  GrowthReport g = growth_of(t);
  EXPECT_EQ(g.step_source, "allocation-period") << g.undecided_reason;
  EXPECT_EQ(g.verdict, Verdict::kNoLeak) << g.undecided_reason;
}

// Threads that each allocate at random places: nothing repeats, no loop is
// found; a run of a second says how many time windows it saw and needs.
TEST(StepFinding, threads_with_nothing_alike_in_a_short_run_say_what_they_saw_and_need) {
  SyntheticTrace t;
  std::vector<std::uint32_t> sites;
  for (std::uint64_t i = 0; i < 60; ++i)
    sites.push_back(t.native_stack({0x401000 + i * 0x100, 0x402000 + i * 0x10}));
  std::mt19937 random(3);
  for (std::uint32_t i = 0; i < 80; ++i) {
    t.set_thread(100 + i);
    t.alloc(sites[random() % sites.size()], 9 << 20, trace::MemoryKind::kDevice);
    t.alloc(sites[random() % sites.size()], 64 << 10, trace::MemoryKind::kDevice);
    t.advance_ms(19);
  }
  GrowthReport g = growth_of(t);
  EXPECT_EQ(g.verdict, Verdict::kNotYet) << g.undecided_reason;
  EXPECT_EQ(g.step_source, "time-window");
  EXPECT_LE(g.steps, 2u);
  std::string seen =
      fmt::format("{} window{} of 1 s, a verdict needs {}", g.steps, g.steps == 1 ? "" : "s",
                  g.warmup_steps + GrowthOptions{}.min_steps);
  EXPECT_NE(g.undecided_reason.find(seen), std::string::npos) << g.undecided_reason;
}

TEST(StepFinding, explicit_step_once_per_epoch_leaves_optimizer_steps_pacing) {
  SyntheticTrace t;
  auto forward = t.python_stack({{"/w/train.py", 30, "train"}});
  auto leak = t.python_stack({{"/w/train.py", 42, "train"}});
  for (int step = 0; step < 200; ++step) {
    t.free(t.alloc(forward, 1 << 20));
    t.alloc(leak, 64 << 10);
    t.advance_ms(10);
    t.step(step + 1);
    if ((step + 1) % 50 == 0) t.step_from(StepSource::kExplicit, (step + 1) / 50);
  }
  GrowthReport g = growth_of(t);
  ASSERT_EQ(g.verdict, Verdict::kLeak);
  EXPECT_EQ(g.step_source, "optimizer-hook");
  EXPECT_GE(g.steps, 190u);
}

TEST(StepFinding, dataloader_batches_are_the_steps_of_a_loop_without_optimizer) {
  SyntheticTrace t;
  t.annotate("iteration_clock",
             R"({"source": 4, "clock": 1, "description": "batches of the DataLoader over Val"})");
  EvalLoop loop(t);
  for (int i = 0; i < 80; ++i) {
    t.step_from(StepSource::kDataLoader, i + 1, 1);
    loop.run_step(t, /*keep=*/true);
  }
  GrowthReport g = growth_of(t);
  ASSERT_EQ(g.verdict, Verdict::kLeak);
  EXPECT_EQ(g.step_source, "dataloader");
  EXPECT_EQ(g.phase, "batches of the DataLoader over Val");
}

TEST(StepFinding, a_phase_the_program_names_labels_its_steps) {
  SyntheticTrace t;
  EvalLoop loop(t);
  t.annotate("phase", R"({"name": "eval", "event": "begin"})");
  for (int i = 0; i < 80; ++i) loop.run_step(t, /*keep=*/true);
  t.annotate("phase", R"({"name": "eval", "event": "end"})");
  GrowthReport g = growth_of(t);
  ASSERT_EQ(g.verdict, Verdict::kLeak);
  EXPECT_EQ(g.phase.rfind("eval: ", 0), 0u) << g.phase;
  ASSERT_FALSE(g.phases.empty());
  bool labelled = false;
  for (const PhaseSummary& p : g.phases) labelled |= p.primary && p.label == "eval";
  EXPECT_TRUE(labelled);
}

}  // namespace
}  // namespace gpuleak::analysis
