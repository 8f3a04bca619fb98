#include "syntax_tree.h"

#include <tree_sitter/api.h>

#include <algorithm>
#include <array>
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

NodeId SyntaxTree::child_by_field(NodeId id, Field field) const {
  for (NodeId c = nodes_[id].first_child; c != kNoNode; c = nodes_[c].next_sibling) {
    if (nodes_[c].field == field) return c;
  }
  return kNoNode;
}

std::vector<NodeId> SyntaxTree::named_children(NodeId id) const {
  std::vector<NodeId> out;
  for (NodeId c = nodes_[id].first_child; c != kNoNode; c = nodes_[c].next_sibling) {
    if (nodes_[c].named && nodes_[c].kind != NodeKind::kComment) out.push_back(c);
  }
  return out;
}

NodeId SyntaxTree::first_named_child(NodeId id) const {
  for (NodeId c = nodes_[id].first_child; c != kNoNode; c = nodes_[c].next_sibling) {
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
  TSTree* ts_tree = ts_parser_parse_string(parser_, nullptr, source.data(),
                                           static_cast<std::uint32_t>(source.size()));
  if (ts_tree == nullptr) {
    ts_parser_reset(parser_);
    result.failure = "the parser gave up after its time limit";
    return result;
  }
  std::unique_ptr<TSTree, void (*)(TSTree*)> owned(ts_tree, ts_tree_delete);
  const GrammarTables& tables = grammar_tables();

  auto tree = std::make_unique<SyntaxTree>();
  tree->source_ = source;
  tree->language_ = tree_sitter_python();
  auto& nodes = tree->nodes_;
  nodes.reserve(source.size() / 3 + 16);

  // Iterative pre-order walk; `open` holds the ancestors of the current node
  // and the last child appended under each, to link siblings.
  struct Open {
    NodeId id;
    NodeId last_child;
  };
  std::vector<Open> open;
  TSTreeCursor cursor = ts_tree_cursor_new(ts_tree_root_node(ts_tree));
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
    sn.start_byte = ts_node_start_byte(n);
    sn.end_byte = ts_node_end_byte(n);
    TSPoint start = ts_node_start_point(n);
    TSPoint end = ts_node_end_point(n);
    sn.start_row = start.row;
    sn.start_column_bytes = start.column;
    sn.end_row = end.row;
    sn.end_column_bytes = end.column;
    NodeId id = static_cast<NodeId>(nodes.size());
    if (!open.empty()) {
      sn.parent = open.back().id;
      if (open.back().last_child == kNoNode) {
        nodes[open.back().id].first_child = id;
      } else {
        nodes[open.back().last_child].next_sibling = id;
      }
      open.back().last_child = id;
    }
    if (sn.error && tree->first_error_ == kNoNode) tree->first_error_ = id;
    nodes.push_back(sn);

    if (ts_tree_cursor_goto_first_child(&cursor)) {
      open.push_back({id, kNoNode});
      if (open.size() > tree->depth_) tree->depth_ = static_cast<std::uint32_t>(open.size());
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
      if (!ts_tree_cursor_goto_parent(&cursor) || open.empty()) {
        done = true;
        break;
      }
      nodes[open.back().id].subtree_end = static_cast<NodeId>(nodes.size());
      open.pop_back();
    }
    if (done) break;
  }
  ts_tree_cursor_delete(&cursor);
  if (too_deep) {
    result.failure = "code is nested more than " + std::to_string(kMaxDepth) +
                     " levels deep; gpuleak does not analyse it";
    return result;
  }
  // Recovery can wrap most of a file in one ERROR node; point at the first
  // error that contains no other, which is where the parser really stopped.
  if (tree->first_error_ != kNoNode) {
    NodeId e = tree->first_error_;
    for (NodeId id = e + 1; id < nodes.size(); ++id) {
      if (!nodes[id].error) continue;
      if (id >= nodes[e].subtree_end) break;
      e = id;  // an error nested inside the current one
    }
    tree->first_error_ = e;
  }
  // The ERROR search above marks ERROR nodes; a tree with has_error but no
  // such node (possible with zero-width errors) still counts as broken.
  if (tree->first_error_ == kNoNode && ts_node_has_error(ts_tree_root_node(ts_tree))) {
    tree->first_error_ = 0;
  }
  result.tree = std::move(tree);
  return result;
}

}  // namespace gpuleak::lint
