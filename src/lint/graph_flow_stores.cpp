// GraphFlow recording stores (StoreEvent): a value put into a container,
// attribute or global, and the parameters a function stores, so that a call
// passing a tensor to such a function counts as a store at the call.
#include <algorithm>

#include "graph_flow.h"
#include "graph_flow_shared.h"
#include "store_growth.h"

namespace gpuleak::lint {

using namespace graph_flow;

void GraphFlow::record_store(StoreKind kind, NodeId site, NodeId container, NodeId key,
                             NodeId value, FlowBits bits, std::size_t keeper) {
  if ((bits & kParameterBits) && !(bits & kValueBits) && container != kNoNode &&
      kind != StoreKind::kLocalName && kind != StoreKind::kAttribute &&
      kind != StoreKind::kGlobalName && is_long_lived_container(container) &&
      (kind != StoreKind::kSubscript || key_varies_per_step(file_, key))) {
    std::string path = container_path(file_, container);
    // `self.sum += val * n` adds into a sum; `self.outputs += [val]` keeps val.
    NodeKind added = value != kNoNode ? tree_.kind(value) : NodeKind::kOther;
    // `self.losses[key] += value` sums into a slot just the same.
    bool sums = (kind == StoreKind::kAugmented || kind == StoreKind::kSubscriptAugmented) &&
                added != NodeKind::kList && added != NodeKind::kTuple &&
                added != NodeKind::kListComprehension;
    // A sum is handed graphs only: what bounds it is a restart every step
    // (a meter's reset() per epoch does not).
    std::string memo_key = sums ? "+" + path : path;
    auto memo = bounded_containers_.find(memo_key);
    if (memo == bounded_containers_.end()) {
      bool bounded =
          sums ? sum_restarted_every_step(file_, path) : container_bounded_elsewhere(file_, path);
      memo = bounded_containers_.emplace(memo_key, bounded).first;
    }
    auto parameters = static_cast<FlowBits>((bits & kParameterBits) >> kParameterShift);
    if (!memo->second) {
      (sums ? parameter_sums_ : parameter_sinks_)[scope_] |= parameters;
      any_parameter_sinks_ = true;
    } else if (!sums) {
      // Emptied somewhere, but maybe not every step: graphs stay until then.
      auto step = bounded_containers_.find("!" + path);
      if (step == bounded_containers_.end()) {
        step = bounded_containers_
                   .emplace("!" + path,
                            container_bounded_elsewhere(file_, path, EmptiedWhen::kEveryStep))
                   .first;
      }
      if (!step->second) {
        parameter_graph_sinks_[scope_] |= parameters;
        any_parameter_sinks_ = true;
      }
    }
  }
  note_store_into_parameter(kind, container, key, value, bits);
  NodeId evidence = kNoNode;
  if (grad_enabled_ && !(bits & kCarriesGraph) && container != kNoNode &&
      !differentiated_elements_.empty() &&
      (kind == StoreKind::kSubscript || kind == StoreKind::kAppend || kind == StoreKind::kExtend ||
       kind == StoreKind::kSubscriptAugmented)) {
    auto it = differentiated_elements_.find(dotted_text(tree_, container));
    if (it != differentiated_elements_.end()) {
      bits |= kTensorBits;
      evidence = it->second;
    }
  }
  auto parameter_sources = static_cast<FlowBits>((bits & kParameterBits) >> kParameterShift);
  bits &= kValueBits;
  if (bits == 0 && kind != StoreKind::kAppend && kind != StoreKind::kExtend &&
      kind != StoreKind::kAugmented && kind != StoreKind::kSubscript &&
      kind != StoreKind::kSubscriptAugmented && kind != StoreKind::kSelfUpdate) {
    return;
  }
  StoreEvent event;
  event.kind = kind;
  event.site = site;
  event.container = container;
  event.key = key;
  event.value = value;
  event.value_bits = static_cast<std::uint8_t>(bits);
  event.grad_enabled = grad_enabled_;
  event.scope = scope_;
  event.keeping_function = keeper;
  event.evidence = evidence;
  event.parameter_sources = parameter_sources;
  {
    NodeId v = value;
    while (v != kNoNode && tree_.kind(v) == NodeKind::kParenthesizedExpression) {
      v = tree_.first_named_child(v);
    }
    if (v != kNoNode) {
      NodeKind vk = tree_.kind(v);
      if (vk == NodeKind::kLambda) {
        event.closure = true;
      } else if (vk == NodeKind::kIdentifier) {
        for (std::size_t f : file_.scopes_named(tree_.text(v))) {
          if (file_.scopes_[f].node > file_.scopes_[scope_].node &&
              tree_.contains(file_.scopes_[scope_].node, file_.scopes_[f].node)) {
            event.closure = true;  // a def nested in this function
          }
        }
      } else if (vk == NodeKind::kCall) {
        std::string q = file_.qualified_name(file_.callee(v));
        event.closure = q == "functools.partial" || q == "partial";
      }
    }
  }
  NodeId identity = container != kNoNode ? container : site;
  auto [it, inserted] = store_index_.emplace(identity, file_.stores_.size());
  if (inserted) {
    file_.stores_.push_back(event);
  } else {
    // A later walk (second loop pass, second round) knows at least as much.
    file_.stores_[it->second] = event;
  }
}

bool GraphFlow::is_long_lived_container(NodeId container) const {
  // Reached through self, a `global`, or a name this function does not bind.
  NodeId n = container;
  while (n != kNoNode &&
         (tree_.kind(n) == NodeKind::kSubscript || tree_.kind(n) == NodeKind::kAttribute)) {
    n = tree_.kind(n) == NodeKind::kSubscript ? tree_.child_by_field(n, Field::kValue)
                                              : tree_.child_by_field(n, Field::kObject);
  }
  if (n == kNoNode || tree_.kind(n) != NodeKind::kIdentifier) return false;
  std::string root(tree_.text(n));
  const Scope& scope = file_.scopes_[scope_];
  if (root == "self" || root == "cls") return scope.class_node != kNoNode;
  if (scope.declared_global.count(root) || scope.mutable_defaults.count(root)) return true;
  if (scope_ == 0 || scope.assigned.count(root)) return false;
  for (const auto& p : scope.parameters) {
    if (p == root) return false;
  }
  return true;
}

void GraphFlow::record_stores_through_parameters(NodeId call,
                                                 const std::vector<NodeId>& positional) {
  if (!any_parameter_sinks_ || positional.empty()) return;
  FlowBits sinks = 0;
  FlowBits sums = 0;
  std::size_t keeper = static_cast<std::size_t>(-1);
  FlowBits graph_sinks = 0;
  for (std::size_t s : file_.callees_of(call)) {
    if (parameter_sinks_[s] || parameter_sums_[s] || parameter_graph_sinks_[s]) keeper = s;
    sinks |= parameter_sinks_[s];
    sums |= parameter_sums_[s];
    graph_sinks |= parameter_graph_sinks_[s];
  }
  if (sinks == 0 && sums == 0 && graph_sinks == 0) return;
  for (std::size_t i = 0; i < positional.size() && i < kTrackedParameters; ++i) {
    FlowBits bits = file_.bits_[positional[i]] & kValueBits;
    bool kept = (sinks & (FlowBits{1} << i)) != 0 ||
                ((graph_sinks & (FlowBits{1} << i)) != 0 && (bits & kCarriesGraph) != 0);
    bool summed_graph = (sums & (FlowBits{1} << i)) != 0 && (bits & kCarriesGraph) != 0;
    if (!kept && !summed_graph) continue;
    if (!(bits & kTensorBits)) continue;
    NodeId receiver = file_.method_receiver(call);
    record_store(StoreKind::kAppend, call, receiver != kNoNode ? receiver : file_.callee(call),
                 kNoNode, positional[i], bits, keeper);
  }
}

void GraphFlow::record_stores_through_setitem(NodeId site, NodeId container, NodeId value,
                                              FlowBits bits) {
  if (!any_parameter_sinks_ || container == kNoNode || value == kNoNode) return;
  if (!(bits & kTensorBits)) return;
  std::vector<std::string> classes = file_.constructed_classes(container);
  // `__setitem__(self, key, value)`: the value is its second parameter.
  constexpr FlowBits kValueParameter = FlowBits{1} << 1;
  for (std::size_t s : file_.scopes_named("__setitem__")) {
    const Scope& scope = file_.scopes_[s];
    if (scope.class_node == kNoNode) continue;
    if (!classes.empty()) {
      const ClassFacts* owner = file_.class_facts(scope.class_node);
      if (owner == nullptr ||
          std::find(classes.begin(), classes.end(), owner->name) == classes.end()) {
        continue;
      }
    }
    bool kept = (parameter_sinks_[s] & kValueParameter) != 0 ||
                ((parameter_graph_sinks_[s] & kValueParameter) != 0 && (bits & kCarriesGraph));
    if (!kept) continue;
    record_store(StoreKind::kAppend, site, container, kNoNode, value, bits & kValueBits, s);
    return;
  }
}

void GraphFlow::note_store_into_parameter(StoreKind kind, NodeId container, NodeId key,
                                          NodeId value, FlowBits bits) {
  if (container == kNoNode || scope_ == 0) return;
  // `b[:n] = data` copies into a buffer the caller handed over; only a key
  // that is new every step (`cache[step] = x`) adds an entry.
  bool slice = key != kNoNode && tree_.kind(key) == NodeKind::kSlice;
  bool grows = kind == StoreKind::kAppend || kind == StoreKind::kExtend ||
               (kind == StoreKind::kSubscript && !slice && key_varies_per_step(file_, key));
  if (kind == StoreKind::kAugmented && value != kNoNode) {
    NodeKind k = tree_.kind(value);
    grows = k == NodeKind::kList || k == NodeKind::kTuple || k == NodeKind::kListComprehension;
  }
  // `cur_dist[mask] = dist[mask]` into a buffer the caller handed over: into
  // a tensor, a value with a graph adds a CopySlices node over the buffer's
  // previous version, whatever the key. Whether the value has a graph (often
  // an argument) and the buffer is a tensor is known at the call. A write
  // under a key that changes (`mems[i] = ...`) may fill the slots of a list
  // of fixed length the caller made, which the helper cannot tell: it counts
  // as a slot write too.
  bool slot_write =
      kind == StoreKind::kSubscript && grad_enabled_ && (bits & (kCarriesGraph | kParameterBits));
  if (kind == StoreKind::kSubscript && !slot_write) return;
  if (!grows && !slot_write) return;
  if (!(bits & (kTensorBits | kParameterBits))) return;
  // `logs["z"].append(...)`, `logs.append(...)`: the root name of the container.
  NodeId n = container;
  while (n != kNoNode &&
         (tree_.kind(n) == NodeKind::kSubscript || tree_.kind(n) == NodeKind::kAttribute)) {
    n = tree_.kind(n) == NodeKind::kSubscript ? tree_.child_by_field(n, Field::kValue)
                                              : tree_.child_by_field(n, Field::kObject);
  }
  if (n == kNoNode || tree_.kind(n) != NodeKind::kIdentifier) return;
  const Scope& scope = file_.scopes_[scope_];
  std::string_view root = tree_.text(n);
  if (root == "self" || root == "cls") return;
  std::size_t first = scope.class_node != kNoNode ? 1 : 0;
  for (std::size_t p = first; p < scope.parameters.size(); ++p) {
    if (scope.parameters[p] != root) continue;
    std::size_t m = p - first;
    if (m >= kTrackedParameters) return;
    FlowBits what = bits & (kTensorFacts | kParameterBits);
    // The container's own bit says nothing of what is stored in it.
    what = static_cast<FlowBits>(what & ~(kFirstParameterBit << m));
    if (what == 0) return;
    if (slot_write) {
      argument_slot_writes_[scope_][m] |= what;
    } else {
      argument_containers_[scope_][m] |= what;
    }
    any_argument_containers_ = true;
    return;
  }
}

void GraphFlow::record_stores_into_arguments(NodeId call, const std::vector<NodeId>& positional) {
  if (!any_argument_containers_ || positional.empty()) return;
  for (std::size_t s : file_.callees_of(call)) {
    for (std::size_t m = 0; m < kTrackedParameters && m < positional.size(); ++m) {
      bool appended = false;  // one store per container: an append says more than a slot write
      for (bool slot_write : {false, true}) {
        if (slot_write && appended) break;
        const auto& summaries = slot_write ? argument_slot_writes_ : argument_containers_;
        auto found = summaries.find(s);
        if (found == summaries.end()) continue;
        FlowBits summary = found->second[m];
        if (summary == 0) continue;
        NodeId container = positional[m];
        if (dotted_text(tree_, container).empty()) continue;  // a fresh list dies with the call
        // What goes in: tensors the function makes itself, and the arguments
        // it takes them from.
        FlowBits stored = summary & kTensorFacts;
        NodeId source = kNoNode;
        for (std::size_t p = 0; p < kTrackedParameters && p < positional.size(); ++p) {
          if (!(summary & (kFirstParameterBit << p))) continue;
          FlowBits passed = file_.bits_[positional[p]] & kTensorFacts;
          if (passed != 0 && source == kNoNode) source = positional[p];
          stored |= passed;
        }
        stored = strip_if_no_grad(stored);
        if (!(stored & kTensorBits)) continue;
        // A slot write keeps something only as a graph chained into a tensor
        // (store_growth checks that the caller's container is one).
        if (slot_write && !(stored & kCarriesGraph)) continue;
        record_store(slot_write ? StoreKind::kSubscript : StoreKind::kAppend, call, container,
                     kNoNode, source != kNoNode ? source : call, stored, s);
        appended = true;
      }
    }
  }
}

}  // namespace gpuleak::lint
