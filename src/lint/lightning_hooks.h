// Lightning's batch-end hooks, whose signatures are a documented API: the
// parameter Lightning fills with the step's outputs (what training_step,
// validation_step, test_step or predict_step returned: model outputs, on the
// model's device). The analysis takes it for GPU tensors, and a finding names
// the hook as its evidence.
//
// Callback hooks: on_{train,validation,test,predict}_batch_end(self, trainer,
// pl_module, outputs, batch, batch_idx, ...); LightningModule hooks: the same
// without trainer and pl_module. Parameters are matched by position, as
// Lightning passes them. The `batch` parameter is left alone: Lightning
// moves only its tensors, and a batch often carries host data (ids, texts,
// indices) beside them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "file_analysis.h"

namespace gpuleak::lint {

// The index into Scope::parameters (self counts) of the `outputs` parameter
// of a Lightning batch-end hook; SIZE_MAX when `scope` is none.
std::size_t lightning_outputs_parameter(const FileAnalysis& file, std::size_t scope);

// True for on_predict_batch_end of a Lightning callback or module: what it
// keeps until the pass ends is every batch of the data set.
bool is_predict_batch_hook(const FileAnalysis& file, std::size_t scope);

// The evidence for a store whose value comes from the parameters in
// `parameter_sources` (bit i: the i-th parameter after self): "`outputs` is
// what Lightning hands `on_predict_batch_end`: the step's outputs, on the
// GPU"; empty when none of them is a Lightning hook's outputs.
std::string lightning_parameter_evidence(const FileAnalysis& file, std::size_t scope,
                                         FlowBits parameter_sources);

}  // namespace gpuleak::lint
