#include "syntax_tree.h"

#include <tree_sitter/api.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <vector>

extern "C" const TSLanguage* tree_sitter_python(void);

namespace gpuleak::lint {
namespace {

// Symbol id -> NodeKind and field id -> Field, built once from the grammar's
// own name tables so that aliased symbols with the same name map alike.
struct GrammarTables {
  std::vector<NodeKind> kind_by_symbol;
  std::vector<Field> field_by_id;
};

const GrammarTables& grammar_tables() {
  static const GrammarTables tables = [] {
    GrammarTables t;
    const TSLanguage* language = tree_sitter_python();
    struct Named {
      const char* name;
      NodeKind kind;
    };
    static constexpr Named kKinds[] = {
#define GPULEAK_LINT_KIND_ROW(name, text) {text, NodeKind::name},
        GPULEAK_LINT_NODE_KINDS(GPULEAK_LINT_KIND_ROW)
#undef GPULEAK_LINT_KIND_ROW
    };
    std::uint32_t symbols = ts_language_symbol_count(language);
    t.kind_by_symbol.assign(symbols, NodeKind::kOther);
    for (std::uint32_t s = 0; s < symbols; ++s) {
      const char* name = ts_language_symbol_name(language, static_cast<TSSymbol>(s));
      if (name == nullptr) continue;
      for (const auto& k : kKinds) {
        if (std::strcmp(name, k.name) == 0) {
          t.kind_by_symbol[s] = k.kind;
          break;
        }
      }
    }
    struct NamedField {
      const char* name;
      Field field;
    };
    static constexpr NamedField kFields[] = {
#define GPULEAK_LINT_FIELD_ROW(name, text) {text, Field::name},
        GPULEAK_LINT_FIELDS(GPULEAK_LINT_FIELD_ROW)
#undef GPULEAK_LINT_FIELD_ROW
    };
    std::uint32_t fields = ts_language_field_count(language);
    t.field_by_id.assign(fields + 1, Field::kNone);
    for (std::uint32_t f = 1; f <= fields; ++f) {
      const char* name = ts_language_field_name_for_id(language, static_cast<TSFieldId>(f));
      if (name == nullptr) continue;
      for (const auto& k : kFields) {
        if (std::strcmp(name, k.name) == 0) {
          t.field_by_id[f] = k.field;
          break;
        }
      }
    }
    return t;
  }();
  return tables;
}

}  // namespace

std::string_view SyntaxTree::type_name(NodeId id) const {
  const char* name =
      ts_language_symbol_name(static_cast<const TSLanguage*>(language_), nodes_[id].symbol);
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

std::size_t PythonParser::count_nodes(TSTree* ts_tree) {
  std::size_t count = 0;
  TSTreeCursor counter = ts_tree_cursor_new(ts_tree_root_node(ts_tree));
  std::size_t depth = 0;
  for (;;) {
    ++count;
    if (depth < kMaxDepth && ts_tree_cursor_goto_first_child(&counter)) {
      ++depth;
      continue;
    }
    bool done = false;
    while (!ts_tree_cursor_goto_next_sibling(&counter)) {
      if (depth == 0 || !ts_tree_cursor_goto_parent(&counter)) {
        done = true;
        break;
      }
      --depth;
    }
    if (done) break;
  }
  ts_tree_cursor_delete(&counter);
  return count;
}

bool PythonParser::append_tree(TSTree* ts_tree, std::uint32_t offset, bool under_root,
                               SyntaxTree& tree) {
  const GrammarTables& tables = grammar_tables();
  auto& nodes = tree.nodes_;
  // Iterative pre-order walk; `open` holds the ancestors of the current node.
  std::vector<NodeId> open;
  if (under_root) open.push_back(0);
  TSTreeCursor cursor = ts_tree_cursor_new(ts_tree_root_node(ts_tree));
  if (under_root && !ts_tree_cursor_goto_first_child(&cursor)) {
    ts_tree_cursor_delete(&cursor);
    return true;  // an empty run
  }
  std::size_t floor = open.size();  // the walk never climbs above this
  bool too_deep = false;
  for (;;) {
    TSNode n = ts_tree_cursor_current_node(&cursor);
    SyntaxNode sn;
    TSSymbol symbol = ts_node_symbol(n);
    sn.symbol = symbol;
    // ts_builtin_sym_error (0xFFFF) lies outside the grammar's symbol table.
    sn.kind = symbol < tables.kind_by_symbol.size() ? tables.kind_by_symbol[symbol]
              : symbol == 0xFFFF                    ? NodeKind::kError
                                                    : NodeKind::kOther;
    TSFieldId field = ts_tree_cursor_current_field_id(&cursor);
    sn.field = field < tables.field_by_id.size() ? tables.field_by_id[field] : Field::kNone;
    sn.named = ts_node_is_named(n);
    sn.error = ts_node_is_missing(n) || sn.kind == NodeKind::kError;
    sn.start_byte = ts_node_start_byte(n) + offset;
    sn.end_byte = ts_node_end_byte(n) + offset;
    NodeId id = static_cast<NodeId>(nodes.size());
    if (!open.empty()) sn.parent = open.back();
    if (sn.error && tree.first_error_ == kNoNode) tree.first_error_ = id;
    nodes.push_back(sn);

    if (ts_tree_cursor_goto_first_child(&cursor)) {
      open.push_back(id);
      if (open.size() > tree.depth_) tree.depth_ = static_cast<std::uint32_t>(open.size());
      if (open.size() > kMaxDepth) {
        too_deep = true;
        break;
      }
      continue;
    }
    nodes[id].subtree_end = id + 1;
    // Climb until a sibling exists, closing finished subtrees.
    bool done = false;
    while (!ts_tree_cursor_goto_next_sibling(&cursor)) {
      if (open.size() <= floor || !ts_tree_cursor_goto_parent(&cursor)) {
        done = true;
        break;
      }
      nodes[open.back()].subtree_end = static_cast<NodeId>(nodes.size());
      open.pop_back();
    }
    if (done) break;
  }
  ts_tree_cursor_delete(&cursor);
  return !too_deep;
}

std::vector<std::pair<std::uint32_t, std::uint32_t>> PythonParser::top_level_runs(
    std::string_view source, std::size_t run_bytes) {
  // Where a line can start a new top-level statement: outside brackets and
  // strings, after a line that does not continue with a backslash, at
  // column 0, and not a clause that continues the statement before
  // (else/elif/except/finally) or the definition under a decorator.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> runs;
  std::size_t depth = 0;
  char quote = 0;       // inside a string opened with this character
  bool triple = false;  // ... with three of them
  bool continued = false;
  bool after_decorator = false;
  std::uint32_t run_start = 0;
  std::size_t i = 0;
  auto starts_with_word = [&](std::size_t at, std::string_view w) {
    if (source.substr(at, w.size()) != w) return false;
    char next = at + w.size() < source.size() ? source[at + w.size()] : ' ';
    return !(std::isalnum(static_cast<unsigned char>(next)) || next == '_');
  };
  while (i < source.size()) {
    // At the start of a line.
    bool line_start_top = quote == 0 && depth == 0 && !continued;
    if (line_start_top && i - run_start >= run_bytes) {
      char c = source[i];
      bool statement = !(c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '#' || c == '\f' ||
                         c == ')' || c == ']' || c == '}');
      if (statement && !after_decorator && !starts_with_word(i, "else") &&
          !starts_with_word(i, "elif") && !starts_with_word(i, "except") &&
          !starts_with_word(i, "finally")) {
        runs.emplace_back(run_start, static_cast<std::uint32_t>(i));
        run_start = static_cast<std::uint32_t>(i);
      }
    }
    if (line_start_top) {
      char c = source[i];
      if (c == '@') {
        after_decorator = true;
      } else if (!(c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '#')) {
        after_decorator = false;
      }
    }
    continued = false;
    bool string_continues = false;  // a one-line string escapes its newline
    // Through the line.
    for (; i < source.size() && source[i] != '\n'; ++i) {
      char c = source[i];
      if (quote != 0) {
        if (c == '\\') {
          ++i;  // an escaped character, quote or newline included
          if (i < source.size() && source[i] == '\n') {
            string_continues = true;
            break;
          }
          continue;
        }
        if (c == quote) {
          if (!triple) {
            quote = 0;
          } else if (i + 2 < source.size() && source[i + 1] == quote && source[i + 2] == quote) {
            quote = 0;
            i += 2;
          }
        }
        continue;
      }
      if (c == '#') {
        while (i < source.size() && source[i] != '\n') ++i;
        break;
      }
      if (c == '\'' || c == '"') {
        quote = c;
        triple = i + 2 < source.size() && source[i + 1] == c && source[i + 2] == c;
        if (triple) i += 2;
      } else if (c == '(' || c == '[' || c == '{') {
        ++depth;
      } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
        --depth;
      } else if (c == '\\' && i + 1 < source.size() && source[i + 1] == '\n') {
        continued = true;
      }
    }
    // A one-line string cannot span lines, unless its newline is escaped
    // (`"deprecated, \` then the rest on the next line).
    if (quote != 0 && !triple && !string_continues) quote = 0;
    ++i;  // the newline
  }
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

ParseResult PythonParser::parse(std::string_view source) {
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
  // tree-sitter's own tree takes some 20 bytes per source byte; a large file
  // is parsed one run of top-level statements at a time, so that only one
  // such tree exists at once. A run that does not parse alone is parsed again
  // joined with the next one (the cut may have split a statement the scan
  // misread); if that does not parse either, the run keeps its error nodes,
  // like any file with a syntax error: those statements are reported and the
  // rest analysed. Memory stays bounded by two runs whatever the file holds.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> runs;
  if (source.size() > kParsedInRunsAboveBytes) runs = top_level_runs(source, kRunBytes);
  if (runs.size() > 1) {
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
        result.failure = "the parser gave up after its time limit";
        return result;
      }
      bool errors = ts_node_has_error(ts_tree_root_node(owned.get()));
      // Grow the array to what the whole file needs at the density seen so
      // far, with a margin, instead of doubling: a doubling vector holds the
      // old and the new array at once, up to three times the nodes. Reserved
      // pages that are never written are never resident.
      std::size_t needed = tree->nodes_.size() + count_nodes(owned.get());
      if (needed > tree->nodes_.capacity()) {
        double nodes_per_byte = static_cast<double>(needed) / std::max<double>(1, to);
        tree->nodes_.reserve(
            std::max(needed, static_cast<std::size_t>(nodes_per_byte * source.size() * 1.15)) + 16);
      }
      NodeId before = static_cast<NodeId>(tree->nodes_.size());
      if (!append_tree(owned.get(), from, true, *tree)) {
        result.failure = "code is nested more than " + std::to_string(kMaxDepth) +
                         " levels deep; gpuleak does not analyse it";
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
    point_at_innermost_error(*tree);
    result.tree = std::move(tree);
    return result;
  }
  TSTree* ts_tree = ts_parser_parse_string(parser_, nullptr, source.data(),
                                           static_cast<std::uint32_t>(source.size()));
  if (ts_tree == nullptr) {
    ts_parser_reset(parser_);
    result.failure = "the parser gave up after its time limit";
    return result;
  }
  std::unique_ptr<TSTree, void (*)(TSTree*)> owned(ts_tree, ts_tree_delete);
  // Count first so the array is allocated once at its final size: a
  // doubling vector would hold up to twice the memory at its peak.
  tree->nodes_.reserve(count_nodes(ts_tree));
  if (!append_tree(ts_tree, 0, false, *tree)) {
    result.failure = "code is nested more than " + std::to_string(kMaxDepth) +
                     " levels deep; gpuleak does not analyse it";
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
