#include "cuda_use.h"

#include "vocabulary.h"

namespace gpuleak::lint {

bool call_targets_cuda_device(const FileAnalysis& file, NodeId call) {
  const SyntaxTree& tree = file.tree();
  NodeId args = tree.child_by_field(call, Field::kArguments);
  if (args == kNoNode || tree.kind(args) != NodeKind::kArgumentList) return false;
  bool is_to = file.callee_last_name(call) == "to";
  for (NodeId a : tree.named_children(args)) {
    NodeId v = a;
    if (tree.kind(a) == NodeKind::kKeywordArgument) {
      NodeId n = tree.child_by_field(a, Field::kName);
      if (n == kNoNode || tree.text(n) != "device") continue;
      v = tree.child_by_field(a, Field::kValue);
    } else if (!is_to) {
      continue;  // positional device arguments only for .to(...)
    }
    if (v == kNoNode) continue;
    std::string_view text = tree.text(v);
    if (tree.kind(v) == NodeKind::kString) {
      return text.find("cuda") != std::string_view::npos;
    }
    if (text.find("cpu") != std::string_view::npos && text.find("cuda") == std::string_view::npos) {
      return false;
    }
    if (text.find("cuda") != std::string_view::npos) return true;
    std::string dotted = dotted_text(tree, v);
    if (!dotted.empty() && vocabulary::is_device_name(dotted)) return true;
    if (tree.kind(v) == NodeKind::kCall &&
        vocabulary::last_component(file.qualified_name(file.callee(v))) == "device") {
      return tree.text(v).find("cuda") != std::string_view::npos;
    }
  }
  return false;
}

bool call_uses_cuda(const FileAnalysis& file, NodeId call) {
  std::string_view name = file.callee_last_name(call);
  if (name == "cuda" && file.method_receiver(call) != kNoNode) return true;
  if (name == "to") return call_targets_cuda_device(file, call);
  std::string q = file.qualified_name(file.callee(call));
  if (q.rfind("torch.cuda.", 0) == 0) {
    std::string_view last = vocabulary::last_component(q);
    return last != "is_available" && last != "device_count" && last != "is_initialized" &&
           last != "get_arch_list" && last != "empty_cache" && last != "is_bf16_supported" &&
           last != "manual_seed" && last != "manual_seed_all" && last != "amp" &&
           last != "autocast" && last != "GradScaler";
  }
  if (q.rfind("torch.", 0) == 0) return call_targets_cuda_device(file, call);
  return false;
}

NodeId first_cuda_use(const FileAnalysis& file, NodeId root, std::size_t scope) {
  const SyntaxTree& tree = file.tree();
  for (NodeId id = root; id < tree.node(root).subtree_end; ++id) {
    if (tree.kind(id) == NodeKind::kCall && file.scope_index_of(id) == scope &&
        call_uses_cuda(file, id)) {
      return id;
    }
  }
  return kNoNode;
}

}  // namespace gpuleak::lint
