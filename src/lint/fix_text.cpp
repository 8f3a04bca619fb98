#include "fix_text.h"

#include <fmt/format.h>

namespace gpuleak::lint {

std::string whole_code(const FileAnalysis& file, NodeId node, std::size_t max_chars) {
  if (node == kNoNode) return {};
  std::string_view text = file.text(node);
  std::string out;
  bool space = false;
  for (char c : text) {
    if (c == '\n' || c == '\r') return {};  // a multi-line expression is not quoted
    if (c == ' ' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
    if (out.size() > max_chars) return {};
  }
  return out;
}

std::string converted_code(const FileAnalysis& file, NodeId value, std::uint8_t bits,
                           bool to_host) {
  const SyntaxTree& tree = file.tree();
  while (value != kNoNode && tree.kind(value) == NodeKind::kParenthesizedExpression) {
    value = tree.first_named_child(value);
  }
  if (value == kNoNode) return {};
  NodeKind k = tree.kind(value);
  if (k == NodeKind::kTuple || k == NodeKind::kList || k == NodeKind::kDictionary ||
      k == NodeKind::kExpressionList || k == NodeKind::kLambda || k == NodeKind::kSet ||
      k == NodeKind::kListComprehension || k == NodeKind::kDictionaryComprehension) {
    return {};
  }
  std::string code = whole_code(file, value, 50);
  if (code.empty()) return {};
  bool simple = k == NodeKind::kIdentifier || k == NodeKind::kAttribute || k == NodeKind::kCall ||
                k == NodeKind::kSubscript;
  if (!simple) code = "(" + code + ")";
  if (!(bits & kNonScalar)) return code + ".item()";
  return code + (to_host ? ".detach().cpu()" : ".detach()");
}

std::string store_instead(const FileAnalysis& file, NodeId value, std::uint8_t bits) {
  std::string number = converted_code(file, value, bits & ~kNonScalar, false);
  std::string host = converted_code(file, value, bits | kNonScalar, true);
  if (!(bits & kNonScalar) && !number.empty()) {
    return fmt::format("store `{}` (a Python number), or `{}` to keep a tensor off the GPU", number,
                       host);
  }
  if (!host.empty()) return fmt::format("store `{}` (a host copy without the graph)", host);
  return "store Python numbers (`.item()` on each one-element tensor) or host copies "
         "(`.detach().cpu()`) of the tensors instead";
}

}  // namespace gpuleak::lint
