// The lexical scan that finds where a Python statement may begin, shared by
// the two places that cut a large file before tree-sitter sees it: the runs
// of top-level statements (PythonParser::top_level_runs) and the cuts inside
// one huge statement's block (block_cuts.h).
//
// A statement line begins outside brackets and strings and not after a line
// that ends in a backslash. Comments are skipped; a one-line string ends at
// its line's end unless its newline is escaped; a triple-quoted one runs on.
// No tokenizer: what the scan misreads (a pathological file) costs at most a
// piece that does not parse alone, which the parser then parses joined.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace gpuleak::lint {

// Calls `at_line` with the first byte of every statement line that starts
// in [from, to) of `source`, in order.
void scan_statement_lines(std::string_view source, std::uint32_t from, std::uint32_t to,
                          const std::function<void(std::uint32_t line_start)>& at_line);

// Whether the code at `at` is a clause that continues the statement before
// it rather than starting one: `else`, `elif`, `except` or `finally`.
bool continues_statement_before(std::string_view source, std::size_t at);

}  // namespace gpuleak::lint
