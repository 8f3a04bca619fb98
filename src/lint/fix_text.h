// The code that fix texts quote. A fix is something to type: it quotes the
// user's expression whole or not at all (never cut with "..."), and only
// suggests what is valid for the value: `.item()` for a tensor known to hold
// one number (a loss), `.detach()` / `.cpu()` for anything else, and, for a
// tuple, a closure or an expression too long to quote, words instead of code.
#pragma once

#include <cstdint>
#include <string>

#include "file_analysis.h"

namespace gpuleak::lint {

// The expression's text when it fits on one line in `max_chars` (whitespace
// runs folded); "" when it does not.
std::string whole_code(const FileAnalysis& file, NodeId node, std::size_t max_chars = 60);

// `loss.item()` / `(a + b).item()` when the value is one number,
// `out.detach()` (with `.cpu()` when `to_host`) otherwise; "" when the value
// cannot be quoted whole or is a literal tuple, list or dict.
std::string converted_code(const FileAnalysis& file, NodeId value, std::uint8_t bits, bool to_host);

// A complete instruction for storing `value` without its graph or off the
// GPU: "store `loss.item()` (a Python number)", or for values that cannot be
// quoted: "store Python numbers (`.item()` on each one-element tensor) or
// host copies (`.detach().cpu()`)".
std::string store_instead(const FileAnalysis& file, NodeId value, std::uint8_t bits);

}  // namespace gpuleak::lint
