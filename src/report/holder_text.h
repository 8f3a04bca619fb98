// The holder found by the Python package, in words, for every report.
//
//   holder_text:  "list `losses` (module __main__), one autograd graph of 14
//                 tensors per element"
//   kept_at_text: "eval.py:72  total_loss += loss  (total_loss, local of
//                 evaluate)" -- the statement that stores into the holder,
//                 which every report leads with when the walk found it.
//
// The annotation is input from the traced process, so any field of the
// wrong type is left out rather than trusted. Nothing here opens a source
// file: the statement's text travels in the annotation.
#pragma once

#include <cstdint>
#include <string>

namespace gpuleak::report {

// Empty when the annotation names no holder.
std::string holder_text(const std::string& holder_json);

// Empty when the annotation names no keeping statement.
std::string kept_at_text(const std::string& holder_json);

// "since step 7" ("since batch 7": `noun` names the iteration), or "since
// warm-up" when growth began inside the warm-up iterations (which the
// verdict ignores, so a number there misleads).
std::string growth_start_text(std::uint64_t first_growing_step, std::uint64_t warmup_steps,
                              const std::string& noun = "step");

}  // namespace gpuleak::report
