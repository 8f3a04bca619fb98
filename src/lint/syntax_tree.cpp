#include "syntax_tree.h"

#include <tree_sitter/api.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>

#include "block_cuts.h"
#include "statement_lines.h"
#include "syntax_tree_builder.h"

extern "C" const TSLanguage* tree_sitter_python(void);

namespace gpuleak::lint {
std::string_view SyntaxTree::type_name(NodeId id) const {
  const char* name =
      ts_language_symbol_name(static_cast<const TSLanguage*>(language_),
                              nodes_[id].symbol == kErrorSymbol ? 0xFFFF : nodes_[id].symbol);
  return name ? std::string_view(name) : std::string_view();
}

TextPoint SyntaxTree::point_of(std::uint32_t byte) const {
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), byte);
  std::uint32_t row =
      it == line_starts_.begin() ? 0 : static_cast<std::uint32_t>(it - line_starts_.begin() - 1);
  return {row, byte - (line_starts_.empty() ? 0 : line_starts_[row])};
}

NodeId SyntaxTree::child_by_field(NodeId id, Field field) const {
  NodeId end = nodes_[id].subtree_end;
  for (NodeId c = id + 1; c < end; c = nodes_[c].subtree_end) {
    if (nodes_[c].field == field) return c;
  }
  return kNoNode;
}

std::vector<NodeId> SyntaxTree::named_children(NodeId id) const {
  std::vector<NodeId> out;
  NodeId end = nodes_[id].subtree_end;
  for (NodeId c = id + 1; c < end; c = nodes_[c].subtree_end) {
    if (nodes_[c].named && nodes_[c].kind != NodeKind::kComment) out.push_back(c);
  }
  return out;
}

NodeId SyntaxTree::first_named_child(NodeId id) const {
  NodeId end = nodes_[id].subtree_end;
  for (NodeId c = id + 1; c < end; c = nodes_[c].subtree_end) {
    if (nodes_[c].named && nodes_[c].kind != NodeKind::kComment) return c;
  }
  return kNoNode;
}

NodeId SyntaxTree::ancestor_of_kind(NodeId id, std::initializer_list<NodeKind> kinds) const {
  for (NodeId p = nodes_[id].parent; p != kNoNode; p = nodes_[p].parent) {
    for (NodeKind k : kinds) {
      if (nodes_[p].kind == k) return p;
    }
  }
  return kNoNode;
}

std::vector<std::pair<std::uint32_t, std::uint32_t>> PythonParser::top_level_runs(
    std::string_view source, std::size_t run_bytes) {
  // Where a line can start a new top-level statement: outside brackets and
  // strings, after a line that does not continue with a backslash, at
  // column 0, and not a clause that continues the statement before
  // (else/elif/except/finally) or the definition under a decorator.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> runs;
  bool after_decorator = false;
  std::uint32_t run_start = 0;
  scan_statement_lines(source, 0, static_cast<std::uint32_t>(source.size()), [&](std::uint32_t i) {
    char c = source[i];
    if (i - run_start >= run_bytes) {
      bool statement = !(c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '#' || c == '\f' ||
                         c == ')' || c == ']' || c == '}');
      if (statement && !after_decorator && !continues_statement_before(source, i)) {
        runs.emplace_back(run_start, i);
        run_start = i;
      }
    }
    if (c == '@') {
      after_decorator = true;
    } else if (!(c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '#')) {
      after_decorator = false;
    }
  });
  runs.emplace_back(run_start, static_cast<std::uint32_t>(source.size()));
  return runs;
}

// Recovery can wrap most of a file in one ERROR node; point at the first
// error that contains no other, which is where the parser really stopped.
void PythonParser::point_at_innermost_error(SyntaxTree& tree) {
  if (tree.first_error_ == kNoNode) return;
  const auto& nodes = tree.nodes_;
  NodeId e = tree.first_error_;
  for (NodeId id = e + 1; id < nodes.size(); ++id) {
    if (!nodes[id].error) continue;
    if (id >= nodes[e].subtree_end) break;
    e = id;  // an error nested inside the current one
  }
  tree.first_error_ = e;
}

PythonParser::PythonParser() : parser_(ts_parser_new()) {
  if (parser_ == nullptr || !ts_parser_set_language(parser_, tree_sitter_python())) {
    // Only a grammar/library ABI mismatch gets here (a build problem).
    if (parser_) ts_parser_delete(parser_);
    throw std::runtime_error(
        "the tree-sitter library refuses the tree-sitter-python grammar (ABI version mismatch)");
  }
  ts_parser_set_timeout_micros(parser_, kTimeLimitMicros);
}

PythonParser::~PythonParser() { ts_parser_delete(parser_); }

ParseResult PythonParser::parse(std::string_view source, const Pieces& pieces) {
  ParseResult result;
  if (source.size() > 0xFFFFFFF0u) {
    result.failure = "file is larger than 4 GiB";
    return result;
  }
  // libtree-sitter 0.20.7 corrupts its heap on brackets nested some 65
  // thousand deep (seen in the robustness test); CPython refuses more than
  // 200. Count them first (strings and comments included: a cheap upper
  // bound) and refuse before tree-sitter sees them.
  std::size_t open_brackets = 0;
  std::size_t deepest = 0;
  for (char c : source) {
    if (c == '(' || c == '[' || c == '{') {
      deepest = std::max(deepest, ++open_brackets);
    } else if ((c == ')' || c == ']' || c == '}') && open_brackets > 0) {
      --open_brackets;
    }
  }
  if (deepest > kMaxBracketDepth) {
    result.failure = "brackets are nested more than " + std::to_string(kMaxBracketDepth) +
                     " levels deep (Python itself stops at 200); gpuleak does not parse it";
    return result;
  }
  auto tree = std::make_unique<SyntaxTree>();
  tree->source_ = source;
  tree->language_ = tree_sitter_python();
  tree->line_starts_.push_back(0);
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\n') tree->line_starts_.push_back(static_cast<std::uint32_t>(i + 1));
  }
  const std::string too_deep = "code is nested more than " + std::to_string(kMaxDepth) +
                               " levels deep; gpuleak does not analyse it";
  const std::string timed_out = "the parser gave up after its time limit";
  SyntaxTreeBuilder builder(*tree, parser_, source.size());
  using Appended = SyntaxTreeBuilder::Appended;
  // tree-sitter's own tree takes some 40 bytes per source byte; a large file
  // is parsed one run of top-level statements at a time, so that only one
  // such tree exists at once, and a run that is one huge statement is cut
  // inside its largest block (block_cuts.h). A run that does not parse alone
  // is parsed again joined with the next one (the cut may have split a
  // statement the scan misread); if that does not parse either, the run
  // keeps its error nodes, like any file with a syntax error: those
  // statements are reported and the rest analysed. Memory stays bounded by
  // two runs whatever the file holds.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> runs;
  if (source.size() > pieces.parsed_in_runs_above) {
    runs = top_level_runs(source, pieces.run_bytes);
  }
  // One run with nothing to cut inside it is parsed whole, as a small file.
  if (runs.size() > 1 ||
      (runs.size() == 1 && source.size() > pieces.cut_inside_above &&
       find_block_cuts(source, 0, static_cast<std::uint32_t>(source.size()), pieces.run_bytes))) {
    SyntaxNode root;
    root.kind = NodeKind::kModule;
    root.named = true;
    root.start_byte = 0;
    root.end_byte = static_cast<std::uint32_t>(source.size());
    root.symbol = ts_language_symbol_for_name(tree_sitter_python(), "module", 6, true);
    tree->nodes_.push_back(root);
    using OwnedTree = std::unique_ptr<TSTree, void (*)(TSTree*)>;
    auto parse_range = [&](std::uint32_t from, std::uint32_t to) {
      return OwnedTree(ts_parser_parse_string(parser_, nullptr, source.data() + from, to - from),
                       ts_tree_delete);
    };
    for (std::size_t r = 0; r < runs.size(); ++r) {
      auto [from, to] = runs[r];
      if (to - from > pieces.cut_inside_above) {
        std::optional<BlockCuts> cuts = find_block_cuts(source, from, to, pieces.run_bytes);
        Appended appended =
            cuts ? builder.append_cut_statement(source, from, to, *cuts) : Appended::kStopped;
        if (appended == Appended::kDone) continue;
        if (appended == Appended::kTimedOut) {
          result.failure = timed_out;
          return result;
        }
        if (appended == Appended::kTooDeep) {
          result.failure = too_deep;
          return result;
        }
        // kStopped: the run is parsed whole below.
      }
      OwnedTree owned = parse_range(from, to);
      if (owned && ts_node_has_error(ts_tree_root_node(owned.get())) && r + 1 < runs.size()) {
        OwnedTree joined = parse_range(from, runs[r + 1].second);
        if (joined && !ts_node_has_error(ts_tree_root_node(joined.get()))) {
          owned = std::move(joined);
          to = runs[++r].second;
        }
      }
      if (!owned) {
        ts_parser_reset(parser_);
        result.failure = timed_out;
        return result;
      }
      bool errors = ts_node_has_error(ts_tree_root_node(owned.get()));
      builder.reserve(count_nodes_of(owned.get()), to);
      NodeId before = static_cast<NodeId>(tree->nodes_.size());
      if (builder.append_subtree(ts_tree_root_node(owned.get()), {from, 0, 0}) != Appended::kDone) {
        result.failure = too_deep;
        return result;
      }
      // The run's own root is left out; when it was the ERROR (or the error
      // is zero-width), nothing appended says so: every statement of the run
      // is then marked, so that it is reported rather than analysed.
      auto& nodes = tree->nodes_;
      bool marked = false;
      for (NodeId id = before; id < nodes.size() && errors && !marked; ++id)
        marked = nodes[id].error;
      if (errors && !marked) {
        for (NodeId c = before; c < nodes.size(); c = nodes[c].subtree_end) nodes[c].error = true;
        if (tree->first_error_ == kNoNode) tree->first_error_ = before < nodes.size() ? before : 0;
      }
    }
    // No shrink_to_fit: it would copy the array, both copies resident at once.
    tree->nodes_[0].subtree_end = static_cast<NodeId>(tree->nodes_.size());
    // tree-sitter's module starts where its first child does (after blank lines).
    if (tree->nodes_.size() > 1) tree->nodes_[0].start_byte = tree->nodes_[1].start_byte;
    point_at_innermost_error(*tree);
    result.tree = std::move(tree);
    return result;
  }
  TSTree* ts_tree = ts_parser_parse_string(parser_, nullptr, source.data(),
                                           static_cast<std::uint32_t>(source.size()));
  if (ts_tree == nullptr) {
    ts_parser_reset(parser_);
    result.failure = timed_out;
    return result;
  }
  std::unique_ptr<TSTree, void (*)(TSTree*)> owned(ts_tree, ts_tree_delete);
  // Count first so the array is allocated once at its final size: a
  // doubling vector would hold up to twice the memory at its peak.
  tree->nodes_.reserve(count_nodes_of(ts_tree));
  if (builder.append_subtree(ts_tree_root_node(ts_tree), SyntaxTreeBuilder::kAsRoot) !=
      Appended::kDone) {
    result.failure = too_deep;
    return result;
  }
  point_at_innermost_error(*tree);
  // The ERROR search above marks ERROR nodes; a tree with has_error but no
  // such node (possible with zero-width errors) still counts as broken.
  if (tree->first_error_ == kNoNode && ts_node_has_error(ts_tree_root_node(ts_tree))) {
    tree->first_error_ = 0;
  }
  result.tree = std::move(tree);
  return result;
}

}  // namespace gpuleak::lint
