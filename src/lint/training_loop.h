// What a loop (or function) is for, judged from what it calls and what it
// iterates: a training step loop calls backward() or optimizer.step(); an
// evaluation loop runs after model.eval(), over a validation loader, or in a
// function named evaluate/validate/test.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "file_analysis.h"
#include "store_growth.h"

namespace gpuleak::lint {

// Calls anywhere inside `loop` (nested loops included), in the loop's scope.
bool loop_calls_backward(const FileAnalysis& file, NodeId loop);
bool loop_steps_optimizer(const FileAnalysis& file, NodeId loop);
// Whether `loop` itself (not only a nested loop) calls a model, backward or
// optimizer.step(): one iteration is one training or evaluation step.
bool loop_runs_a_step(const FileAnalysis& file, NodeId loop);
// `for batch in loader`, `enumerate(train_loader)`, `tqdm(val_dl)`.
bool iterates_over_batches(const FileAnalysis& file, NodeId loop);
// `for i in range(3)` or `range(n)` with `n = 8` in the same function: a
// handful of iterations (at most kSmallLoopIterations), known before it runs.
inline constexpr long kSmallLoopIterations = 64;
bool is_small_constant_loop(const FileAnalysis& file, NodeId loop);
// `for i in range(10000)`: more than kSmallLoopIterations, known before it runs.
bool is_large_constant_loop(const FileAnalysis& file, NodeId loop);
// A loop whose iterations are training or evaluation steps: it iterates
// over batches, calls backward() or optimizer.step() (itself or through a
// helper that runs one step), or never ends. Loops
// over layers, heads or time steps inside one step are not.
bool is_step_loop(const FileAnalysis& file, NodeId loop);
// Whether the function of scope `scope_index` runs one training step:
// it calls backward() or optimizer.step() outside any loop of its own
// (`train_step(batch)`; not `train_epoch(loader)`, whose loop runs many).
bool runs_one_step(const FileAnalysis& file, std::size_t scope_index);
// `losses = trainer.train_step(imgs)`: the loop calls a function of this file
// that runs one step, so each iteration is a training step.
bool loop_steps_through_helper(const FileAnalysis& file, NodeId loop);
// Whether any of the `count` loops from `loop` outwards is a step loop.
bool any_step_loop(const FileAnalysis& file, NodeId loop, int count);
// For a store of a value that carries an autograd graph into a container
// (not a plain rebinding, not in a module hook): how the container grows,
// when it keeps one graph per training or evaluation step; nullopt when it
// is bounded, or filled only within one step (over layers, heads or time
// steps: that builds one step's graph).
std::optional<GrowthVerdict> graph_kept_across_steps(const FileAnalysis& file,
                                                     const StoreEvent& store);
// True when `site` (inside `loop`, which may be kNoNode) evaluates a model
// rather than trains it; a loop that calls backward() never is.
bool is_evaluation_context(const FileAnalysis& file, NodeId site, NodeId loop);
// The steps a kept graph is made in: the stores graph_kept_across_steps
// keeps are split between training (GL101) and evaluation (GL102) by
// is_evaluation_context.
enum class StepPurpose { kTraining, kEvaluation };
// Calls `visit` with each store of the file whose graph is kept across steps
// of that purpose, and how its container grows, in the order of stores().
void for_each_graph_kept_across_steps(
    const FileAnalysis& file, StepPurpose purpose,
    const std::function<void(const StoreEvent&, const GrowthVerdict&)>& visit);
// True when `name` (or a value computed from it, one assignment away) is
// differentiated in `scope`: `loss.backward()`, `torch.stack(losses).sum().backward()`,
// `accelerator.backward(total)`. An accumulator that is the loss of its step
// is meant to carry the graph.
bool differentiated_in_scope(const FileAnalysis& file, const std::string& name, std::size_t scope);
// Functions a framework calls once per batch: training_step, train_step,
// validation_step, on_train_batch_end ...
bool is_per_step_function(const Scope& scope);
// Whether `region` clears gradients: zero_grad(), `p.grad = None`,
// `p.grad.zero_()`, or a call to a function of this file (two calls deep)
// that does one of those.
bool clears_gradients(const FileAnalysis& file, NodeId region);

}  // namespace gpuleak::lint
