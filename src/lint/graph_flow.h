// The light data-flow behind the autograd-graph rules.
//
// Inside each function (and the module body), statements are walked in
// order with an environment mapping names and attribute paths
// ("self.hidden") to ValueBits. Sources: a model call outside no_grad
// carries a graph; arithmetic, tensor methods, torch functions and loss
// functions pass graphs on; `.item()`, `float()`, `.tolist()`, `.numpy()`
// drop the value to Python, `.detach()`/`.data` drop the graph but keep a
// tensor, code under no_grad/inference_mode computes without a graph.
// Branches merge by union (a may-analysis); a loop body is walked again with
// the state it ends in, so values carried into the next iteration are seen.
// Functions of the same file are summarised by what they return (for a
// tuple, element by element) and seeded with what their callers in the file
// pass them; rounds repeat until nothing new is learnt (at most four), so
// `loss = train_step(batch)` carries a graph and `meter.update(loss)` hands
// one to `update`. Attributes a class keeps tensors in (`self.probe`) are
// known to every method of the class. A name that is differentiated in a
// function (`total.backward()`) carries a graph there, whatever produced it.
// A lambda or nested def carries the tensors it captures.
//
// The results land in FileAnalysis: bits per expression node, whether
// gradients were off there, and every store of a value into a container,
// attribute or global (StoreEvent).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "file_analysis.h"
#include "flow_environment.h"

namespace gpuleak::lint {

// graph_flow::kTrackedParameters, for the header (graph_flow_shared.h checks they agree).
inline constexpr std::size_t kGraphFlowTrackedParameters = 27;

class GraphFlow {
 public:
  explicit GraphFlow(FileAnalysis& file);
  void run();

 private:
  using Env = FlowEnvironment;
  // What the analysis learns across functions; rounds repeat while it grows.
  struct Summaries {
    std::vector<FlowBits> returns;                               // per scope
    std::vector<std::vector<FlowBits>> return_elements;          // per scope, when tuples
    std::vector<std::vector<FlowBits>> arguments;                // per scope, per parameter
    std::unordered_map<std::string, FlowBits> class_attributes;  // "Class.attr"
    bool operator==(const Summaries&) const = default;
  };

  void analyze_scope(std::size_t scope);
  // Marks private functions whose every call in the file runs without
  // gradients; true when one was marked.
  bool disable_grad_in_private_functions();
  void walk_block(NodeId block, Env& env);
  void walk_statement(NodeId statement, Env& env);
  void walk_if(NodeId statement, Env& env);
  // What an `if` condition says of a name: `isinstance(x, torch.Tensor)`
  // false, `not isinstance(...)` or `x is None` true, mean x is no tensor.
  struct TensorTest {
    std::string name;
    bool true_means_not_tensor = false;
  };
  std::optional<TensorTest> tensor_test(NodeId condition) const;
  void walk_try(NodeId statement, Env& env);
  void walk_with(NodeId statement, Env& env);
  void walk_loop_body(NodeId body, Env& env);
  void walk_assignment(NodeId assignment, Env& env);
  void walk_augmented(NodeId assignment, Env& env);
  void assign_target(NodeId target, NodeId value, FlowBits bits, Env& env, NodeId site);
  void assign_elements(NodeId target, NodeId value, FlowBits bits, Env& env, NodeId site);
  void bind_pattern(NodeId target, FlowBits bits, Env& env);
  void bind_loop_targets(NodeId target, NodeId iterable, FlowBits bits, Env& env);
  // A later element of a tuple unpacked from an opaque call, stored into a
  // container slot or attribute that nothing in the function uses as a tensor.
  bool opaque_element_without_evidence(NodeId element);
  // A name bound by a later element of a tuple unpacked from an opaque call
  // that nothing in the function differentiates, hands to a loss or torch
  // function, or calls a tensor method on.
  bool opaque_name_without_graph_evidence(NodeId element);
  // `criterion(model, sample)`: a loss callee handed the model runs it itself.
  bool criterion_running_the_model(NodeId call) const;
  // `nn.Linear(...)`, or a class of this file that is an nn.Module.
  bool constructs_module(NodeId call);

  FlowBits eval(NodeId expression, Env& env);
  FlowBits eval_attribute(NodeId attribute, Env& env);
  FlowBits eval_call(NodeId call, Env& env);
  FlowBits eval_comprehension(NodeId comprehension, Env& env);
  FlowBits torch_function_bits(std::string_view qualified, NodeId call, FlowBits args);
  // What the defs of this file that a call can run return (callees_of), as
  // tensor facts: functions, methods of self, methods of an instance of a class
  // of this file. 0 when the call runs none of them.
  FlowBits same_file_function_bits(NodeId call) const;
  // Per-element bits of what a same-file function returns, when every
  // return of it is a tuple of `count` elements; empty otherwise.
  std::vector<FlowBits> same_file_return_elements(NodeId call, std::size_t count) const;
  // The forward of the file's nn.Module class that every binding of the
  // called name constructs (`model = Net().to(device)`); empty if unknown.
  std::vector<std::size_t> forward_of_instance_called(NodeId call) const;
  // A Python number: literals, `x.size(0)`, `len(...)`, `.item()`, and
  // arithmetic of them, through names bound only to such in `scope`.
  bool is_python_number(NodeId expression, std::size_t scope, int depth) const;
  // Every return of `scope` is a `count`-tuple whose element `index` is one.
  bool forward_returns_python_number(std::size_t scope, std::size_t index, std::size_t count) const;
  void record_call_arguments(NodeId call, const std::vector<NodeId>& positional, NodeId args);
  FlowBits captured_bits(NodeId function_or_lambda, const Env& env) const;
  std::string class_attribute_key(const std::string& dotted) const;
  void collect_differentiated_names(std::size_t scope);
  std::vector<std::string> summed_sources(NodeId value) const;
  // The last assignment of scope `index` before `before` that binds `name`
  // by unpacking (`name, other = ...`); kNoNode if none.
  NodeId last_unpacking_of(const std::string& name, NodeId before, std::size_t index) const;
  // For `c = c + v` / `c = torch.cat([c, v])`: the operand that is not `c`.
  // `other_bits` receives what all the other operands carry.
  NodeId self_update_operand(NodeId target, NodeId value, FlowBits& other_bits) const;

  void record_store(StoreKind kind, NodeId site, NodeId container, NodeId key, NodeId value,
                    FlowBits bits, std::size_t keeper = static_cast<std::size_t>(-1));
  static void set(Env& env, const std::string& key, FlowBits bits);
  // Leaves every name changed since `at` bound to the union of its value
  // then and now (what a loop may carry out of its body).
  static void join_with_checkpoint(Env& env, FlowEnvironment::Checkpoint at);
  FlowBits strip_if_no_grad(FlowBits bits) const;

  // Parameters whose value a function puts into a container that outlives
  // the call (self.values.append(x), a global list): calls pass their
  // arguments' facts through these, so `metric.update(loss)` is a store.
  // A parameter the function only adds into a running sum (`self.sum += val
  // * n`) keeps nothing of a tensor without a graph (the sum is replaced),
  // only the graph of one that has one: such calls store graphs only.
  bool is_long_lived_container(NodeId container) const;
  void record_stores_through_parameters(NodeId call, const std::vector<NodeId>& positional);
  // `stat_col["loss"] = loss` where a class of the file defines
  // `__setitem__` that keeps its value: a store at the assignment.
  void record_stores_through_setitem(NodeId site, NodeId container, NodeId value, FlowBits bits);
  // Stores into a container the function was handed (`logs[k].append(z.detach())`
  // in `_log_metrics(logs, z)`): the summary "stores into argument M" with what
  // it stores (tensor facts, and which parameters they come from), so that the
  // call `_log_metrics(logs, z)` in a loop is a store into the caller's `logs`.
  void note_store_into_parameter(StoreKind kind, NodeId container, NodeId key, NodeId value,
                                 FlowBits bits);
  void record_stores_into_arguments(NodeId call, const std::vector<NodeId>& positional);
  // `self.running_mean.mul_(m).add_(mean * (1 - m))`: an in-place update of
  // a tensor the object keeps, from a value with a graph, links every call's
  // graph into it (graph_flow_in_place.cpp says when a forward's input counts).
  void record_in_place_accumulation(NodeId call, std::string_view method,
                                    const std::vector<NodeId>& positional);

  FileAnalysis& file_;
  std::vector<FlowBits> parameter_sinks_;  // per scope: bit i = positional parameter i
  std::vector<FlowBits> parameter_sums_;   // per scope: added into a sum only
  // Per scope: kept in a container emptied only now and then (an epoch-end
  // `empty()`), which bounds tensors but not graphs: a sink for graphs only.
  std::vector<FlowBits> parameter_graph_sinks_;
  // Per scope, per tracked parameter used as a container: what is stored
  // into it (kTensorFacts and the kParameterBits of its sources); 0 if none.
  // Kept by scope, for the few functions that have any.
  using ArgumentSummary = std::array<FlowBits, kGraphFlowTrackedParameters>;
  std::unordered_map<std::size_t, ArgumentSummary> argument_containers_;
  // The same for values written into a slot of such a parameter
  // (`buf[mask] = v`): a store only of a graph, into a caller's tensor.
  std::unordered_map<std::size_t, ArgumentSummary> argument_slot_writes_;
  bool any_parameter_sinks_ = false;
  bool any_argument_containers_ = false;
  bool private_values_scanned_ = false;
  bool module_classes_ready_ = false;
  std::unordered_set<std::string> module_classes_;   // nn.Module subclasses of the file
  std::unordered_set<std::string> passed_as_value_;  // private defs used as values
  // Memos: each answer costs a scan of the whole file.
  std::unordered_map<std::string, bool> bounded_containers_;
  std::unordered_map<std::string, bool> used_as_tensor_;  // "scope:path"
  const SyntaxTree& tree_;
  Summaries learnt_;  // from the previous round: what this round reads
  Summaries next_;    // being filled by this round
  // Assignments (in the current scope) whose value is later differentiated.
  // (assignment, name) pairs: the name that assignment binds is differentiated.
  std::vector<std::pair<NodeId, std::string>> differentiated_;
  // Containers (in the current scope) whose elements are differentiated:
  // path -> the backward() call that shows it.
  std::unordered_map<std::string, NodeId> differentiated_elements_;
  std::vector<FlowBits> returned_elements_;
  bool returns_only_tuples_ = true;
  std::unordered_map<NodeId, std::size_t> store_index_;
  std::size_t scope_ = 0;
  bool grad_enabled_ = true;
  int loop_depth_ = 0;
  FlowBits returned_ = 0;
};

}  // namespace gpuleak::lint
