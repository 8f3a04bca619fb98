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
// Functions of the same file are summarised by what they return (two
// rounds), so `loss = train_step(batch)` is known to carry a graph.
//
// The results land in FileAnalysis: bits per expression node, whether
// gradients were off there, and every store of a value into a container,
// attribute or global (StoreEvent).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "file_analysis.h"

namespace gpuleak::lint {

class GraphFlow {
 public:
  explicit GraphFlow(FileAnalysis& file);
  void run();

 private:
  using Env = std::unordered_map<std::string, std::uint8_t>;

  void analyze_scope(std::size_t scope);
  void walk_block(NodeId block, Env& env);
  void walk_statement(NodeId statement, Env& env);
  void walk_if(NodeId statement, Env& env);
  void walk_try(NodeId statement, Env& env);
  void walk_with(NodeId statement, Env& env);
  void walk_loop_body(NodeId body, Env& env);
  void walk_assignment(NodeId assignment, Env& env);
  void walk_augmented(NodeId assignment, Env& env);
  void assign_target(NodeId target, NodeId value, std::uint8_t bits, Env& env, NodeId site);
  void bind_pattern(NodeId target, std::uint8_t bits, Env& env);

  std::uint8_t eval(NodeId expression, Env& env);
  std::uint8_t eval_attribute(NodeId attribute, Env& env);
  std::uint8_t eval_call(NodeId call, Env& env);
  std::uint8_t eval_comprehension(NodeId comprehension, Env& env);
  std::uint8_t torch_function_bits(std::string_view qualified, NodeId call, std::uint8_t args);
  std::uint8_t same_file_function_bits(std::string_view name) const;
  // For `c = c + v` / `c = torch.cat([c, v])`: the operand that is not `c`.
  // `other_bits` receives what all the other operands carry.
  NodeId self_update_operand(NodeId target, NodeId value, std::uint8_t& other_bits) const;

  void record_store(StoreKind kind, NodeId site, NodeId container, NodeId key, NodeId value,
                    std::uint8_t bits);
  static void set(Env& env, const std::string& key, std::uint8_t bits);
  static void merge_into(Env& into, const Env& from);
  std::uint8_t strip_if_no_grad(std::uint8_t bits) const;

  // Parameters whose value a function puts into a container that outlives
  // the call (self.values.append(x), a global list): calls pass their
  // arguments' facts through these, so `metric.update(loss)` is a store.
  bool is_long_lived_container(NodeId container) const;
  std::vector<std::size_t> callees_of(NodeId call) const;
  void record_stores_through_parameters(NodeId call, const std::vector<NodeId>& positional);

  FileAnalysis& file_;
  std::vector<std::uint8_t> parameter_sinks_;  // per scope: bit i = positional parameter i
  bool any_parameter_sinks_ = false;
  // Memos: each answer costs a scan of the whole file.
  std::unordered_map<std::string, bool> bounded_containers_;
  std::unordered_map<std::string, std::vector<NodeId>> factory_calls_by_name_;
  bool factory_calls_indexed_ = false;
  const SyntaxTree& tree_;
  std::vector<std::uint8_t> returns_;  // per scope: bits of what it returns
  std::unordered_map<NodeId, std::size_t> store_index_;
  std::size_t scope_ = 0;
  bool grad_enabled_ = true;
  int loop_depth_ = 0;
  std::uint8_t returned_ = 0;
};

}  // namespace gpuleak::lint
