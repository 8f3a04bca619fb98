// The holder found by the Python package, in words, for every report:
// "list `losses` (module __main__), one autograd graph of 14 tensors per
// element". The annotation is input from the traced process, so any field
// of the wrong type is left out rather than trusted.
#pragma once

#include <string>

namespace gpuleak::report {

// Empty when the annotation names no holder.
std::string holder_text(const std::string& holder_json);

}  // namespace gpuleak::report
