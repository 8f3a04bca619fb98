// GraphFlow recording in-place updates of tensors an object keeps
// (`self.running_mean.mul_(1 - m).add_(mean * m)`): the buffer outlives the
// call, and an in-place op whose operand carries a graph gives the buffer a
// grad_fn that links to that graph and to the buffer's previous one, so every
// call's graph stays reachable from it (nflows #10).
//
// Inside a module's `forward`, the input is taken to carry a graph: in
// training, a layer's input is the activations of the layers before it. A
// statistic computed from it (`inputs.mean(0)`) and accumulated without
// `.detach()` or `torch.no_grad()` is the leak; a buffer updated from values
// the analysis knows nothing about is not reported.
#include "graph_flow.h"
#include "graph_flow_shared.h"
#include "import_table.h"

namespace gpuleak::lint {

using namespace graph_flow;

namespace {

// In-place ops that add their operand into the receiver (not `copy_` or
// `fill_`, which replace it).
bool accumulates_in_place(std::string_view method) {
  return one_of(method, {"add_", "sub_", "addcmul_", "addcdiv_", "lerp_"});
}

}  // namespace

void GraphFlow::record_in_place_accumulation(NodeId call, std::string_view method,
                                             const std::vector<NodeId>& positional) {
  if (!grad_enabled_ || !accumulates_in_place(method) || positional.empty()) return;
  const Scope& scope = file_.scopes_[scope_];
  if (scope.class_node == kNoNode) return;
  // Through chained in-place ops (`.mul_(m).add_(v)`) to the kept tensor.
  NodeId target = file_.method_receiver(call);
  while (target != kNoNode && tree_.kind(target) == NodeKind::kCall) {
    std::string_view inner = file_.callee_last_name(target);
    if (inner.empty() || inner.back() != '_') return;
    target = file_.method_receiver(target);
  }
  if (target == kNoNode || tree_.kind(target) != NodeKind::kAttribute) return;
  if (dotted_text(tree_, target).rfind("self.", 0) != 0) return;
  // The operands that are added: all tensors for addcmul_/addcdiv_, the end
  // point for lerp_ (its weight is a number or a tensor of weights).
  NodeId value = positional.front();
  FlowBits bits = 0;
  std::size_t operands = method == "addcmul_" || method == "addcdiv_" ? positional.size() : 1;
  for (std::size_t i = 0; i < operands && i < positional.size(); ++i) {
    bits |= file_.bits_[positional[i]];
  }
  bool from_input = false;
  if (!(bits & kCarriesGraph)) {
    // The forward's input (bit 0: its first parameter after self).
    if (scope.name != "forward" || !(bits & kFirstParameterBit)) return;
    from_input = true;
    bits |= kTensorBits;
  }
  record_store(StoreKind::kAugmented, call, target, kNoNode, value,
               static_cast<FlowBits>(bits & kValueBits));
  auto it = store_index_.find(target);
  if (it != store_index_.end()) file_.stores_[it->second].graph_from_forward_input = from_input;
}

}  // namespace gpuleak::lint
