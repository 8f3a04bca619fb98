// Which module each imported name stands for in one file, so that
// `mp.Process`, `multiprocessing.Process` and a bare `Process` imported from
// multiprocessing all read as "multiprocessing.Process".
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "syntax_tree.h"

namespace gpuleak::lint {

class ImportTable {
 public:
  // Reads every import statement of the file, at any depth (imports inside
  // functions count too: the rules do not track where they are visible).
  explicit ImportTable(const SyntaxTree& tree);

  // The dotted text of a name or attribute chain with the first component
  // replaced by what it was imported as; "" for anything else (calls,
  // subscripts). `nn.functional.relu` -> "torch.nn.functional.relu".
  std::string qualified_name(const SyntaxTree& tree, NodeId expression) const;

  // True when the file imports a GPU framework the rules know (torch,
  // lightning, transformers, accelerate).
  bool imports_torch() const { return imports_torch_; }

  // True when the file imports another framework with its own autograd
  // (mxnet, tensorflow, jax, paddle ...): its `.backward()` is not torch's.
  bool imports_other_autograd() const { return imports_other_autograd_; }

  // True when `name` was bound by an import (`import os`, `from x import y`).
  bool is_imported(std::string_view name) const {
    return alias_to_module_.count(std::string(name)) != 0;
  }

 private:
  std::unordered_map<std::string, std::string> alias_to_module_;
  bool imports_torch_ = false;
  bool imports_other_autograd_ = false;
};

// The plain dotted text of a name/attribute chain ("self.model.fc"), or "".
std::string dotted_text(const SyntaxTree& tree, NodeId expression);

// A target that unpacks its value into its named children, in order:
// `a, b = ...`, `(a, b)`, `[a, b]`. Starred targets (`*rest`) bind a list
// and are not one.
bool is_unpacking_target(NodeKind kind);

// The names and attributes an assignment target binds, left to right:
// `a`, `self.x`, and each one inside tuple, list and starred patterns
// (`a, (b, *c) = ...`). Subscripts and anything else bind no name.
std::vector<NodeId> bound_targets(const SyntaxTree& tree, NodeId target);
// The plain names among them (identifiers), appended to `out`.
void bound_names(const SyntaxTree& tree, NodeId target, std::vector<std::string>& out);

}  // namespace gpuleak::lint
