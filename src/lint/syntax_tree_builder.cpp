#include "syntax_tree_builder.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

extern "C" const TSLanguage* tree_sitter_python(void);

namespace gpuleak::lint {
namespace {

// Symbol id -> NodeKind and field id -> Field, built once from the grammar's
// own name tables so that aliased symbols with the same name map alike.
struct GrammarTables {
  std::vector<NodeKind> kind_by_symbol;
  std::vector<Field> field_by_id;
  // Brackets, commas, colons, dots, semicolons: no rule reads them (their
  // parents' offsets say where they are), and they are a quarter of the
  // nodes of training code, so they are not copied into the tree.
  std::vector<bool> punctuation_by_symbol;
};

// A row of a table from the grammar's names to ours.
template <class Value>
struct Named {
  const char* name;
  Value value;
};

// The value of the row named `name` (which may be null), or `otherwise`.
template <class Value, std::size_t N>
Value value_named(const Named<Value> (&table)[N], const char* name, Value otherwise) {
  if (name == nullptr) return otherwise;
  for (const Named<Value>& row : table) {
    if (std::strcmp(name, row.name) == 0) return row.value;
  }
  return otherwise;
}

const GrammarTables& grammar_tables() {
  static const GrammarTables kTables = [] {
    GrammarTables t;
    const TSLanguage* language = tree_sitter_python();
    static constexpr Named<NodeKind> kKinds[] = {
#define GPULEAK_LINT_KIND_ROW(name, text) {text, NodeKind::name},
        GPULEAK_LINT_NODE_KINDS(GPULEAK_LINT_KIND_ROW)
#undef GPULEAK_LINT_KIND_ROW
    };
    std::uint32_t symbols = ts_language_symbol_count(language);
    if (symbols >= kErrorSymbol) {
      // Only a grammar far larger than Python's gets here (a build problem).
      throw std::runtime_error("the Python grammar has more symbols than a syntax node stores");
    }
    t.kind_by_symbol.assign(symbols, NodeKind::kOther);
    for (std::uint32_t s = 0; s < symbols; ++s) {
      t.kind_by_symbol[s] = value_named(
          kKinds, ts_language_symbol_name(language, static_cast<TSSymbol>(s)), NodeKind::kOther);
    }
    static constexpr Named<Field> kFields[] = {
#define GPULEAK_LINT_FIELD_ROW(name, text) {text, Field::name},
        GPULEAK_LINT_FIELDS(GPULEAK_LINT_FIELD_ROW)
#undef GPULEAK_LINT_FIELD_ROW
    };
    std::uint32_t fields = ts_language_field_count(language);
    t.field_by_id.assign(fields + 1, Field::kNone);
    for (std::uint32_t f = 1; f <= fields; ++f) {
      t.field_by_id[f] =
          value_named(kFields, ts_language_field_name_for_id(language, static_cast<TSFieldId>(f)),
                      Field::kNone);
    }
    t.punctuation_by_symbol.assign(symbols, false);
    for (std::uint32_t s = 0; s < symbols; ++s) {
      const char* name = ts_language_symbol_name(language, static_cast<TSSymbol>(s));
      if (name == nullptr ||
          ts_language_symbol_type(language, static_cast<TSSymbol>(s)) != TSSymbolTypeAnonymous) {
        continue;
      }
      std::string_view text(name);
      t.punctuation_by_symbol[s] = text == "(" || text == ")" || text == "[" || text == "]" ||
                                   text == "{" || text == "}" || text == "," || text == ":" ||
                                   text == "." || text == ";";
    }
    return t;
  }();
  return kTables;
}

}  // namespace

std::size_t count_nodes_of(TSTree* ts_tree) {
  std::size_t count = 0;
  TSTreeCursor counter = ts_tree_cursor_new(ts_tree_root_node(ts_tree));
  std::size_t depth = 0;
  for (;;) {
    ++count;
    if (depth < PythonParser::kMaxDepth && ts_tree_cursor_goto_first_child(&counter)) {
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

void SyntaxTreeBuilder::reserve(std::size_t more, std::uint32_t parsed_up_to) {
  auto& nodes = tree_.nodes_;
  std::size_t needed = nodes.size() + more;
  if (needed <= nodes.capacity()) return;
  double nodes_per_byte = static_cast<double>(needed) / std::max<double>(1, parsed_up_to);
  nodes.reserve(std::max(needed, static_cast<std::size_t>(
                                     nodes_per_byte * static_cast<double>(source_bytes_) * 1.15)) +
                16);
}

SyntaxTreeBuilder::Appended SyntaxTreeBuilder::append_subtree(TSNode top, const Placement& where,
                                                              GraftSite site, const Graft& graft) {
  const GrammarTables& tables = grammar_tables();
  auto& nodes = tree_.nodes_;
  // Iterative pre-order walk; `open` holds the ancestors of the current node.
  std::vector<NodeId> open;
  bool children_only = where.parent != kNoNode;
  if (children_only) open.push_back(where.parent);
  TSTreeCursor cursor = ts_tree_cursor_new(top);
  if (children_only && !ts_tree_cursor_goto_first_child(&cursor)) {
    ts_tree_cursor_delete(&cursor);
    return Appended::kDone;  // an empty piece
  }
  std::size_t floor = open.size();  // the walk never climbs above this
  Appended result = Appended::kDone;
  bool grafted = !graft;
  // Grafts when `id` is the site's block; false when the graft failed.
  auto graft_at = [&](NodeId id) {
    if (grafted || id == kNoNode || nodes[id].kind != NodeKind::kBlock ||
        nodes[id].start_byte != site.block_start) {
      return true;
    }
    grafted = true;
    result = graft(id, open);
    return result == Appended::kDone;
  };
  for (;;) {
    TSNode n = ts_tree_cursor_current_node(&cursor);
    SyntaxNode sn;
    TSSymbol symbol = ts_node_symbol(n);
    // Every grammar symbol fits 14 bits; the ERROR symbol gets its own value.
    sn.symbol = symbol == 0xFFFF ? kErrorSymbol : static_cast<std::uint16_t>(symbol & kErrorSymbol);
    // ts_builtin_sym_error (0xFFFF) lies outside the grammar's symbol table.
    sn.kind = symbol < tables.kind_by_symbol.size() ? tables.kind_by_symbol[symbol]
              : symbol == 0xFFFF                    ? NodeKind::kError
                                                    : NodeKind::kOther;
    TSFieldId field = ts_tree_cursor_current_field_id(&cursor);
    sn.field = field < tables.field_by_id.size() ? tables.field_by_id[field] : Field::kNone;
    sn.named = ts_node_is_named(n);
    sn.error = ts_node_is_missing(n) || sn.kind == NodeKind::kError;
    sn.start_byte = static_cast<std::uint32_t>(ts_node_start_byte(n) + where.shift);
    sn.end_byte = static_cast<std::uint32_t>(ts_node_end_byte(n) + where.shift);
    if (!grafted && sn.start_byte >= site.resume_byte && !open.empty() && !graft_at(open.back())) {
      break;
    }
    bool punctuation = !sn.named && !sn.error && sn.field == Field::kNone &&
                       symbol < tables.punctuation_by_symbol.size() &&
                       tables.punctuation_by_symbol[symbol] && ts_node_child_count(n) == 0;
    if (!punctuation) {
      NodeId id = static_cast<NodeId>(nodes.size());
      if (!open.empty()) sn.parent = open.back();
      if (sn.error && tree_.first_error_ == kNoNode) tree_.first_error_ = id;
      nodes.push_back(sn);
      if (ts_tree_cursor_goto_first_child(&cursor)) {
        open.push_back(id);
        std::size_t depth = open.size() + where.depth_above;
        if (depth > tree_.depth_) tree_.depth_ = static_cast<std::uint32_t>(depth);
        if (depth > PythonParser::kMaxDepth) {
          result = Appended::kTooDeep;
          break;
        }
        continue;
      }
      nodes[id].subtree_end = id + 1;
    }
    // Climb until a sibling exists, closing finished subtrees.
    bool done = false;
    while (!ts_tree_cursor_goto_next_sibling(&cursor)) {
      if (open.size() <= floor || !ts_tree_cursor_goto_parent(&cursor)) {
        done = true;
        break;
      }
      if (!graft_at(open.back())) {
        done = true;
        break;
      }
      nodes[open.back()].subtree_end = static_cast<NodeId>(nodes.size());
      open.pop_back();
    }
    if (done) break;
  }
  ts_tree_cursor_delete(&cursor);
  return result;
}

SyntaxTreeBuilder::Appended SyntaxTreeBuilder::append_cut_statement(std::string_view source,
                                                                    std::uint32_t from,
                                                                    std::uint32_t to,
                                                                    const BlockCuts& cuts) {
  using OwnedTree = std::unique_ptr<TSTree, void (*)(TSTree*)>;
  auto& nodes = tree_.nodes_;
  std::size_t before = nodes.size();
  NodeId first_error_before = tree_.first_error_;
  std::uint32_t depth_before = tree_.depth_;
  auto undo = [&](Appended why) {
    nodes.resize(before);
    tree_.first_error_ = first_error_before;
    tree_.depth_ = depth_before;
    return why;
  };
  // The skeleton: the statement with the block's pieces left out. Included
  // ranges keep the file's own byte offsets.
  auto point = [&](std::uint32_t byte) {
    TextPoint p = tree_.point_of(byte);
    return TSPoint{p.row, p.column_bytes};
  };
  std::uint32_t cut_from = cuts.cuts.front();
  std::uint32_t cut_to = cuts.cuts.back();
  std::array<TSRange, 2> ranges{TSRange{point(from), point(cut_from), from, cut_from},
                                TSRange{point(cut_to), point(to), cut_to, to}};
  std::uint32_t range_count = cut_to < to ? 2 : 1;
  if (!ts_parser_set_included_ranges(parser_, ranges.data(), range_count)) {
    return Appended::kStopped;
  }
  OwnedTree skeleton(ts_parser_parse_string(parser_, nullptr, source.data(), to), ts_tree_delete);
  ts_parser_set_included_ranges(parser_, nullptr, 0);
  if (!skeleton) {
    ts_parser_reset(parser_);
    return Appended::kTimedOut;
  }
  if (ts_node_has_error(ts_tree_root_node(skeleton.get()))) return Appended::kStopped;

  // Each piece parses alone as the body of `if 1:` (the block's own
  // indentation follows any header); its statements hang under the
  // skeleton's block, offsets shifted back to the file's.
  constexpr std::string_view kHeader = "if 1:\n";
  bool grafted = false;
  auto graft = [&](NodeId block, const std::vector<NodeId>& open) {
    grafted = true;
    std::uint32_t old_end = nodes[block].end_byte;
    // Where the last piece's block ends, in the file's offsets: where one
    // parse ends the whole block (its last statement, and a `;` after it).
    std::uint32_t pieces_end = 0;
    std::string piece;
    for (std::size_t i = 0; i + 1 < cuts.cuts.size(); ++i) {
      std::uint32_t at = cuts.cuts[i];
      piece.assign(kHeader);
      piece.append(source.substr(at, cuts.cuts[i + 1] - at));
      OwnedTree parsed(ts_parser_parse_string(parser_, nullptr, piece.data(),
                                              static_cast<std::uint32_t>(piece.size())),
                       ts_tree_delete);
      if (!parsed) {
        ts_parser_reset(parser_);
        return Appended::kTimedOut;
      }
      TSNode root = ts_tree_root_node(parsed.get());
      if (ts_node_has_error(root) || ts_node_named_child_count(root) != 1) {
        return Appended::kStopped;
      }
      TSNode wrapper = ts_node_named_child(root, 0);
      TSNode body = ts_node_child_by_field_name(wrapper, "consequence", 11);
      if (ts_node_is_null(body) || ts_node_named_child_count(wrapper) != 2) {
        return Appended::kStopped;
      }
      reserve(count_nodes_of(parsed.get()), cuts.cuts[i + 1]);
      std::int64_t shift =
          static_cast<std::int64_t>(at) - static_cast<std::int64_t>(kHeader.size());
      Appended appended = append_subtree(body, Placement{shift, block, open.size() - 1});
      if (appended != Appended::kDone) return appended;
      pieces_end = static_cast<std::uint32_t>(ts_node_end_byte(body) + shift);
    }
    // The block and the ancestors that ended with it now end where the last
    // piece does; those that reach beyond the cut (the block's last comments,
    // a clause after it) already end where one parse ends them.
    if (old_end <= cut_from && pieces_end > old_end) {
      for (NodeId id : open) {
        if (nodes[id].end_byte == old_end) nodes[id].end_byte = pieces_end;
      }
    }
    return Appended::kDone;
  };
  reserve(count_nodes_of(skeleton.get()), to);
  Appended appended = append_subtree(ts_tree_root_node(skeleton.get()), Placement{0, 0, 0},
                                     GraftSite{cuts.block_start, cut_to}, graft);
  if (appended != Appended::kDone) return undo(appended);
  if (!grafted) return undo(Appended::kStopped);  // the block was not where the scan put it
  if (tree_.first_error_ != first_error_before) return undo(Appended::kStopped);
  return Appended::kDone;
}

}  // namespace gpuleak::lint
