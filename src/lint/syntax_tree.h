// A parsed Python file as a flat, read-only array of nodes.
//
// tree-sitter's own TSNode walks to a parent by re-descending from the root
// and to the i-th child by scanning siblings; the rules ask for parents,
// children and "everything inside this loop" constantly. So the tree is
// copied once into a pre-order array: a node's descendants are exactly the
// ids in (id, subtree_end), which makes "does this block contain X" a range
// scan.
//
// Ownership: the tree holds a view of the source text; whoever parses keeps
// the text alive at least as long as the tree. Not thread-safe to build;
// read-only afterwards. PythonParser is one per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "syntax_kind.h"

struct TSParser;
struct TSTree;

namespace gpuleak::lint {

using NodeId = std::uint32_t;
inline constexpr NodeId kNoNode = 0xFFFFFFFFu;

// 20 bytes per node: children and siblings follow from the pre-order layout
// (the first child is id + 1, the next sibling starts where this subtree
// ends) and rows and columns from the byte offsets, so they are not stored;
// the grammar's symbol (some 250 of them) shares two bytes with the flags.
struct SyntaxNode {
  NodeKind kind = NodeKind::kOther;
  Field field = Field::kNone;  // this node's field name in its parent
  // tree-sitter's symbol id; its ERROR symbol (0xFFFF) is stored as kErrorSymbol.
  std::uint16_t symbol : 14 = 0;
  bool named : 1 = false;
  bool error : 1 = false;  // an ERROR node or a MISSING token inserted by recovery
  std::uint32_t start_byte = 0;
  std::uint32_t end_byte = 0;
  NodeId parent = kNoNode;
  NodeId subtree_end = 0;  // one past the last descendant
};

static_assert(sizeof(SyntaxNode) == 20, "the node array is most of a large file's memory");
inline constexpr std::uint16_t kErrorSymbol = 0x3FFF;

// A 0-based row and byte column, as tree-sitter counts them ('\n' ends a row).
struct TextPoint {
  std::uint32_t row = 0;
  std::uint32_t column_bytes = 0;
};

class SyntaxTree {
 public:
  NodeId root() const { return 0; }
  std::size_t size() const { return nodes_.size(); }
  const SyntaxNode& node(NodeId id) const { return nodes_[id]; }
  NodeKind kind(NodeId id) const { return nodes_[id].kind; }
  std::string_view text(NodeId id) const {
    return source_.substr(nodes_[id].start_byte, nodes_[id].end_byte - nodes_[id].start_byte);
  }
  std::string_view source() const { return source_; }
  // The grammar's name for the node type ("call", "+="), for kinds the enum lacks.
  std::string_view type_name(NodeId id) const;

  NodeId parent(NodeId id) const { return nodes_[id].parent; }
  NodeId first_child(NodeId id) const { return nodes_[id].subtree_end > id + 1 ? id + 1 : kNoNode; }
  NodeId next_sibling(NodeId id) const {
    NodeId p = nodes_[id].parent;
    if (p == kNoNode) return kNoNode;
    NodeId next = nodes_[id].subtree_end;
    return next < nodes_[p].subtree_end ? next : kNoNode;
  }
  bool is_named(NodeId id) const { return nodes_[id].named; }
  TextPoint start_point(NodeId id) const { return point_of(nodes_[id].start_byte); }
  TextPoint end_point(NodeId id) const { return point_of(nodes_[id].end_byte); }
  TextPoint point_of(std::uint32_t byte) const;
  NodeId child_by_field(NodeId id, Field field) const;
  // Named children only, in order (operators and punctuation skipped).
  std::vector<NodeId> named_children(NodeId id) const;
  NodeId first_named_child(NodeId id) const;
  // True when `inner` is `outer` or lies inside it.
  bool contains(NodeId outer, NodeId inner) const {
    return inner >= outer && inner < nodes_[outer].subtree_end;
  }
  // The nearest ancestor (not the node itself) of one of the given kinds.
  NodeId ancestor_of_kind(NodeId id, std::initializer_list<NodeKind> kinds) const;

  // Syntax errors: the first ERROR node or MISSING token, in source order.
  bool has_error() const { return first_error_ != kNoNode; }
  NodeId first_error() const { return first_error_; }
  std::uint32_t depth() const { return depth_; }

 private:
  friend class PythonParser;
  friend class SyntaxTreeBuilder;
  std::string_view source_;
  std::vector<SyntaxNode> nodes_;
  std::vector<std::uint32_t> line_starts_;  // byte offset of each row
  NodeId first_error_ = kNoNode;
  std::uint32_t depth_ = 0;
  const void* language_ = nullptr;
};

// Result of parsing: a tree, or why there is none.
struct ParseResult {
  std::unique_ptr<SyntaxTree> tree;
  std::string failure;  // non-empty when tree is null
};

// Owns a tree-sitter parser configured for Python. One per thread.
class PythonParser {
 public:
  PythonParser();
  ~PythonParser();
  PythonParser(const PythonParser&) = delete;
  PythonParser& operator=(const PythonParser&) = delete;

  // Parses UTF-8 text. Fails (tree == nullptr) only when tree-sitter gives up
  // (time limit) or the file is nested deeper than the analysis follows;
  // syntax errors still give a tree, with has_error() set.
  ParseResult parse(std::string_view source) { return parse(source, kDefaultPieces); }

  // How a large file is cut into pieces parsed one at a time (the defaults
  // below). Tests shrink them to check that pieces give the tree of one parse.
  struct Pieces {
    std::size_t parsed_in_runs_above;
    std::size_t run_bytes;
    std::size_t cut_inside_above;
  };
  ParseResult parse(std::string_view source, const Pieces& pieces);

  // Nesting beyond this is refused: CPython itself stops at 200 levels of
  // parentheses, and the analysis recurses on expressions.
  static constexpr std::uint32_t kMaxDepth = 3000;
  static constexpr std::size_t kMaxBracketDepth = 1000;
  static constexpr std::uint64_t kTimeLimitMicros = 20'000'000;
  // Files larger than this are parsed in runs of top-level statements of
  // about kRunBytes each, so tree-sitter's own tree (some 40 bytes per
  // source byte) never covers more; a run that is one statement larger than
  // kCutInsideAboveBytes is cut inside its largest block (block_cuts.h).
  static constexpr std::size_t kParsedInRunsAboveBytes = 256u << 10;
  static constexpr std::size_t kRunBytes = 32u << 10;
  static constexpr std::size_t kCutInsideAboveBytes = 2 * kRunBytes;
  static constexpr Pieces kDefaultPieces{kParsedInRunsAboveBytes, kRunBytes, kCutInsideAboveBytes};

  // Byte ranges [from, to) of runs of whole top-level statements, each at
  // least `run_bytes` long but the last; one range when there is no cut.
  static std::vector<std::pair<std::uint32_t, std::uint32_t>> top_level_runs(
      std::string_view source, std::size_t run_bytes);

 private:
  // Moves first_error_ to the innermost error inside it.
  static void point_at_innermost_error(SyntaxTree& tree);
  TSParser* parser_;
};

}  // namespace gpuleak::lint
