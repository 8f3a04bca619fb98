// The holder found by the Python package, in words, for every report.
//
//   holder_text:  "list `losses` (module __main__), one autograd graph of 14
//                 tensors per element"
//   kept_at_text: "eval.py:72  total_loss += loss  (total_loss, local of
//                 evaluate)" -- the statement that stores into the holder,
//                 which every report leads with when the walk found it.
//
// The answer comes typed from the analysis (a field the traced process wrote
// with the wrong type is already empty there). Nothing here opens a source
// file: the statement's text travels in the annotation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "analysis/model/report_model.h"

namespace gpuleak::report {

// Empty when there is no answer or it names no holder.
std::string holder_text(const std::optional<analysis::HolderAnswer>& answer);

// Empty when there is no answer or it names no keeping statement.
std::string kept_at_text(const std::optional<analysis::HolderAnswer>& answer);

// "since step 7" ("since batch 7": `noun` is the step source's word for a step), or "since
// warm-up" when growth began inside the warm-up steps (which the
// verdict ignores, so a number there misleads).
std::string growth_start_text(std::uint64_t first_growing_step, std::uint64_t warmup_steps,
                              const std::string& noun = "step");

}  // namespace gpuleak::report
