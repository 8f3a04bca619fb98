// Builds SyntaxTree's flat pre-order array from tree-sitter trees, one
// parsed piece at a time: a whole file, a run of top-level statements, or a
// huge statement whose largest block is parsed in pieces (block_cuts.h) and
// grafted back, so that tree-sitter's own tree (some 40 bytes per source
// byte) never covers more than a piece.
//
// Internal to PythonParser; not thread-safe (one per parse).
#pragma once

#include <tree_sitter/api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "block_cuts.h"
#include "syntax_tree.h"

namespace gpuleak::lint {

// Nodes of a tree-sitter tree, down to the depth the builder follows.
std::size_t count_nodes_of(TSTree* tree);

class SyntaxTreeBuilder {
 public:
  SyntaxTreeBuilder(SyntaxTree& tree, TSParser* parser, std::size_t source_bytes)
      : tree_(tree), parser_(parser), source_bytes_(source_bytes) {}

  enum class Appended { kDone, kTooDeep, kStopped, kTimedOut };
  static constexpr std::uint32_t kNoGraft = 0xFFFFFFFFu;

  // Where a parsed piece goes.
  struct Placement {
    std::int64_t shift;  // added to tree-sitter's byte offsets
    // kNoNode: `top` itself is appended as the root; otherwise `top` is left
    // out and its children hang under this node.
    NodeId parent;
    std::size_t depth_above;  // ancestors of `parent`, for the depth limit
  };
  static constexpr Placement kAsRoot{0, kNoNode, 0};

  // Where `graft` adds children to a block: the block node starting at byte
  // `block_start`, before its first child starting at `resume_byte` or more
  // (what the skeleton has after the cut, such as the block's last
  // comments), or else at its end.
  struct GraftSite {
    std::uint32_t block_start;
    std::uint32_t resume_byte;
  };
  using Graft = std::function<Appended(NodeId block, const std::vector<NodeId>& open)>;

  // Appends the subtree of `top` in pre-order; `graft` runs once, at
  // `site`, with the block and its open ancestors (the block last).
  Appended append_subtree(TSNode top, const Placement& where, GraftSite site, const Graft& graft);
  Appended append_subtree(TSNode top, const Placement& where) {
    return append_subtree(top, where, GraftSite{kNoGraft, kNoGraft}, Graft());
  }

  // The statement(s) in [from, to) with the largest block parsed in the
  // pieces `cuts` gives, under the root. kStopped, with nothing appended,
  // when the skeleton or a piece does not parse cleanly alone or the block
  // is not where the scan put it: the caller then parses the run whole.
  Appended append_cut_statement(std::string_view source, std::uint32_t from, std::uint32_t to,
                                const BlockCuts& cuts);

  // Room for `more` nodes. The array grows to what the whole file needs at
  // the density seen so far (`parsed_up_to` bytes) instead of doubling: a
  // doubling vector holds the old and the new array at once. Reserved pages
  // that are never written are never resident.
  void reserve(std::size_t more, std::uint32_t parsed_up_to);

 private:
  SyntaxTree& tree_;
  TSParser* parser_;
  std::size_t source_bytes_;
};

}  // namespace gpuleak::lint
