// What a loop (or function) is for, judged from what it calls and what it
// iterates: a training step loop calls backward() or optimizer.step(); an
// evaluation loop runs after model.eval(), over a validation loader, or in a
// function named evaluate/validate/test.
#pragma once

#include "file_analysis.h"

namespace gpuleak::lint {

// Calls anywhere inside `loop` (nested loops included), in the loop's scope.
bool loop_calls_backward(const FileAnalysis& file, NodeId loop);
bool loop_steps_optimizer(const FileAnalysis& file, NodeId loop);
// Whether `loop` itself (not only a nested loop) calls a model, backward or
// optimizer.step(): one iteration is one training or evaluation step.
bool loop_runs_a_step(const FileAnalysis& file, NodeId loop);
// `for batch in loader`, `enumerate(train_loader)`, `tqdm(val_dl)`.
bool iterates_over_batches(const FileAnalysis& file, NodeId loop);
// True when `site` (inside `loop`, which may be kNoNode) evaluates a model
// rather than trains it; a loop that calls backward() never is.
bool is_evaluation_context(const FileAnalysis& file, NodeId site, NodeId loop);
// Functions a framework calls once per batch: training_step, train_step,
// validation_step, on_train_batch_end ...
bool is_per_step_function(const Scope& scope);

}  // namespace gpuleak::lint
