// Where the body of one huge statement can be cut so that its pieces parse
// on their own.
//
// A large file is parsed one run of top-level statements at a time, so that
// tree-sitter's own tree (some 40 bytes per source byte on training code)
// never covers more than a run. One function or loop that holds most of the
// file is a single top-level statement: it cannot be cut there. Its largest
// block (descending while one statement holds most of it: the loop inside
// the function) is cut instead, between statements of the block, into pieces
// of about `piece_bytes`. The parser then parses the statement with the
// block's pieces left out (the skeleton) and each piece alone, and grafts the
// pieces' statements into the skeleton's block.
//
// The scan is lexical, like the top-level one: lines inside brackets,
// strings or after a backslash do not start statements; `else`, `elif`,
// `except`, `finally` and a definition under a decorator continue the
// statement before. A cut is only placed after a line of code (not a comment
// or blank line), so that comments stay inside a piece whose neighbours are
// the same as in one parse of the whole file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace gpuleak::lint {

struct BlockCuts {
  // The first byte of the block's first statement (after its indentation):
  // where tree-sitter's block node starts.
  std::uint32_t block_start = 0;
  // Piece boundaries, in order: the skeleton keeps [statement start,
  // cuts.front()) and [cuts.back(), statement end); piece i is
  // [cuts[i], cuts[i + 1]). cuts.back() is the end of the block's last line
  // of code. At least two entries.
  std::vector<std::uint32_t> cuts;
};

// For the top-level statements in [from, to) of `source`: the cuts of the
// largest block, when it holds at least half of the range and has more than
// one statement to cut between; nothing otherwise.
std::optional<BlockCuts> find_block_cuts(std::string_view source, std::uint32_t from,
                                         std::uint32_t to, std::size_t piece_bytes);

}  // namespace gpuleak::lint
