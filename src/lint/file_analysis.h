// What the rules know about one parsed Python file: its scopes and classes,
// which callees are networks, where gradients are off, and the data-flow
// facts (which expressions carry an autograd graph, which stores put them
// where). Built once per file; rules only read it.
//
// Not thread-safe to build; immutable afterwards. Holds references to the
// tree, which must outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "import_table.h"
#include "syntax_tree.h"

namespace gpuleak::lint {

// What a value may be, as a bit set (a "may" analysis: a bit is set when
// some path makes it so).
enum ValueBit : std::uint8_t {
  kCarriesGraph = 1,  // a tensor with grad_fn: keeps its step's saved activations
  kDeviceTensor = 2,  // a tensor (assumed on the GPU) or a container or closure of them
  kException = 4,     // an exception, traceback or sys.exc_info() tuple: keeps frames
  kNonScalar = 8,     // may hold more than one element (a model output, not a loss):
                      // `.item()` would raise on it
};
// What GraphFlow keeps per value: the ValueBits in the low nibble and, above
// them, one bit per parameter of the function being walked (after self), so
// that a store can say which parameter its value came from and a call can
// hand its arguments through the function's summary, whatever their position
// (`_update(adv, labs, out, dist, n, cur_dist, ...)` keeps its 4th argument in
// its 6th). Parameters past the 27th are not followed.
using FlowBits = std::uint32_t;
// The rules' bits (the low nibble of FlowBits).
inline constexpr std::uint8_t kValueBits = kCarriesGraph | kDeviceTensor | kException | kNonScalar;
// What a tensor value is; kException travels separately.
inline constexpr std::uint8_t kTensorFacts = kCarriesGraph | kDeviceTensor | kNonScalar;

// A function, lambda or the module itself: a unit of data-flow.
struct Scope {
  NodeId node = kNoNode;        // function_definition, lambda, or the module root
  NodeId body = kNoNode;        // block, or a lambda's body expression
  NodeId definition = kNoNode;  // decorated_definition when decorated, else `node`
  NodeId class_node = kNoNode;  // enclosing class_definition for methods
  std::string name;             // "<module>" and "<lambda>" for those
  std::vector<std::string> parameters;
  std::unordered_set<std::string> declared_global;  // `global` / `nonlocal` names
  std::unordered_set<std::string> assigned;         // names bound in this scope
  // Parameters whose default is a mutable container (`history=[]`): one
  // object for every call, living as long as the function.
  std::unordered_set<std::string> mutable_defaults;
  bool grad_disabled = false;  // @torch.no_grad(), or a Lightning eval hook
};

struct ClassFacts {
  NodeId node = kNoNode;
  std::string name;
  std::vector<std::string> bases;  // qualified
  bool is_module = false;          // nn.Module (or LightningModule) subclass
  bool is_dataset = false;         // torch.utils.data Dataset / IterableDataset subclass
  bool is_lightning = false;
};

enum class StoreKind {
  kAppend,              // c.append(v), c.insert(i, v), c.add(v), c.appendleft(v)
  kExtend,              // c.extend(v)
  kAugmented,           // c += v (and -=, *= ...)
  kSelfUpdate,          // c = c + v, c = torch.cat([c, v])
  kSubscript,           // c[k] = v
  kSubscriptAugmented,  // c[k] += v
  kAttribute,           // obj.a = v
  kGlobalName,          // name = v with `global name`/`nonlocal name`
  kLocalName,           // name = v, a plain local binding
};

// One place where a value is put somewhere that may outlive the statement.
struct StoreEvent {
  StoreKind kind = StoreKind::kAppend;
  NodeId site = kNoNode;       // the statement or call to report
  NodeId container = kNoNode;  // expression receiving the value (`losses`, `self.cache`)
  NodeId key = kNoNode;        // subscript key, when there is one
  NodeId value = kNoNode;      // the stored expression
  std::uint8_t value_bits = 0;
  bool grad_enabled = true;
  std::size_t scope = 0;  // index into FileAnalysis::scopes()
  // For a call that hands the value to a function of this file which keeps
  // it (`meter.update(loss)`): that function's scope; SIZE_MAX otherwise.
  std::size_t keeping_function = static_cast<std::size_t>(-1);
  bool closure = false;  // the value is a lambda or nested def capturing tensors
  // What shows the value carries a graph when nothing that made it does:
  // `losses[i - 1].backward()` for a store into `losses`; kNoNode otherwise.
  NodeId evidence = kNoNode;
  // Which of the storing function's parameters (after self) the value comes
  // from, bit i for the i-th: the start of the evidence chain when a
  // parameter's tensor-ness is known from its function's signature.
  FlowBits parameter_sources = 0;
  // The graph is inferred from the input of the module's `forward` (its
  // first parameter after self), not from anything that made the value.
  bool graph_from_forward_input = false;
};

class FileAnalysis {
 public:
  explicit FileAnalysis(const SyntaxTree& tree);
  ~FileAnalysis();

  const SyntaxTree& tree() const { return tree_; }
  const ImportTable& imports() const { return imports_; }
  // The file is PyTorch code: it imports torch (or a framework on top of it)
  // or calls .backward(). Rules stay silent elsewhere.
  bool uses_torch() const { return uses_torch_; }

  std::string qualified_name(NodeId expression) const {
    return imports_.qualified_name(tree_, expression);
  }
  std::string_view text(NodeId id) const { return tree_.text(id); }

  // --- calls -------------------------------------------------------------
  const std::vector<NodeId>& calls() const { return calls_; }
  NodeId callee(NodeId call) const { return tree_.child_by_field(call, Field::kFunction); }
  // `x.cuda()` -> "cuda"; `float(x)` -> "float"; "" otherwise.
  std::string_view callee_last_name(NodeId call) const;
  // `x.cuda()` -> x; kNoNode for plain function calls.
  NodeId method_receiver(NodeId call) const;
  // The right side of the first assignment in the file whose target is the
  // name or attribute chain `dotted` ("loader", "self.ds"), or kNoNode.
  NodeId first_assigned_value(const std::string& dotted) const;
  // Indexes built once per file, so that rules asked about every store do
  // not rescan the file: the assignments (`kAssignment` nodes, in source
  // order) whose target is exactly `dotted`; the calls whose callee's last
  // name is `name`; the `del` statements.
  const std::vector<NodeId>& assignments_to(const std::string& dotted) const;
  // The assignments `dotted[key] = ...` (one slot of the container `dotted`).
  const std::vector<NodeId>& slot_assignments_to(const std::string& dotted) const;
  // The last `dotted = ...` of `scope` that starts before `at`; kNoNode if none.
  NodeId last_assignment_before(std::string_view dotted, NodeId at, std::size_t scope) const;
  // Every `dotted = ...` of `scope`, in source order.
  const std::vector<NodeId>& assignments_in_scope(std::string_view dotted, std::size_t scope) const;
  const std::vector<NodeId>& calls_named(std::string_view name) const;
  const std::vector<NodeId>& delete_statements() const { return deletes_; }
  // A name or attribute whose last component is `last` is set to a literal
  // False somewhere in the file (`self._prep_stage = False`).
  bool switched_off_somewhere(std::string_view last) const {
    return switched_off_.count(std::string(last)) != 0;
  }
  std::vector<NodeId> positional_arguments(NodeId call) const;
  NodeId keyword_argument(NodeId call, std::string_view name) const;  // its value
  // The model call recognizer: `model(x)`, `self.encoder(h)`, `netG(z)`,
  // `self(x)` inside an nn.Module, `model.forward(x)`.
  bool is_model_call(NodeId call) const;
  bool is_loss_callee(NodeId call) const;
  bool is_backward_call(
      NodeId call) const;  // t.backward(), autograd.backward(), accelerator.backward()
  bool is_optimizer_step_call(NodeId call) const;  // optimizer.step(), scaler.step(opt)
  bool is_dataloader_constructor(NodeId call) const;
  bool is_torch_module_constructor(NodeId call) const;

  // --- structure ---------------------------------------------------------
  const std::vector<Scope>& scopes() const { return scopes_; }
  std::size_t scope_index_of(NodeId node) const;  // innermost scope containing node
  const Scope& scope_of(NodeId node) const { return scopes_[scope_index_of(node)]; }
  const std::vector<ClassFacts>& classes() const { return classes_; }
  const ClassFacts* class_facts(NodeId class_node) const;
  // Functions and lambdas by name, for resolving `collate_fn=my_collate`.
  std::vector<std::size_t> scopes_named(std::string_view name) const;
  const std::vector<std::size_t>& scopes_named_ref(std::string_view name) const;
  // callees_of() leaves a call unresolved when more defs than this share its name.
  static constexpr std::size_t kMaxCalleesByName = 16;
  // The functions an argument passes as a callback: a name, `self.method`,
  // a lambda, `functools.partial(fn, ...)`, or `make_hook(...)` whose body
  // returns a nested def. Empty when it cannot be resolved in this file.
  std::vector<std::size_t> functions_passed_as(NodeId argument) const;
  // register_forward_hook(fn) and the other hook registrations, by call.
  const std::vector<NodeId>& hook_registrations() const { return hook_registrations_; }
  bool is_hook_scope(std::size_t scope) const { return hook_scope_[scope] != 0; }

  // The innermost for/while loop around `node` in the same scope, or kNoNode.
  NodeId innermost_loop(NodeId node) const;
  // The loop around `loop` in the same scope, or kNoNode.
  NodeId outer_loop(NodeId loop) const { return innermost_loop(loop); }
  NodeId loop_body(NodeId loop) const { return tree_.child_by_field(loop, Field::kBody); }
  // True when `node` runs on only some iterations of `loop`: under an if,
  // elif, else, except, match case or a nested loop inside the loop's body.
  bool runs_conditionally_in(NodeId node, NodeId loop) const {
    return runs_conditionally_within(node, loop_body(loop));
  }
  // The same for any block `body` around `node` (a loop or function body).
  // An if or elif whose condition `is_guard` accepts (e.g. "is CUDA there
  // at all") does not count as a condition.
  bool runs_conditionally_within(
      NodeId node, NodeId body,
      const std::function<bool(NodeId condition)>& is_guard = nullptr) const;
  // Names bound by a for loop's target (`for i, (x, y) in ...` -> i, x, y).
  std::vector<std::string> loop_variables(NodeId loop) const;
  // The loop's iterable (for) or condition (while).
  NodeId loop_iterable(NodeId loop) const;
  // True for `while True:` and `for ... in itertools.count()`.
  bool is_unbounded_loop(NodeId loop) const;

  // Whether the function runs once per training or evaluation step: a
  // framework per-step method (training_step, on_train_batch_end), a hook
  // registered in this file, or a function called (at most three calls
  // away) from a step loop or from such a function.
  bool runs_per_step(std::size_t scope) const { return per_step_[scope] != 0; }
  // Same-file functions a call may reach, by name: methods for `x.f()`,
  // functions for `f()` (and the def a factory `f = make()` returns).
  std::vector<std::size_t> callees_of(NodeId call) const;
  // The classes that every binding of `receiver` constructs (`self.meter =
  // AverageMeter()` -> {"AverageMeter"}); empty when any binding is something
  // else, or the receiver is `self`.
  std::vector<std::string> constructed_classes(NodeId receiver) const;
  // The classes every call of the function `scope` constructs for its
  // parameter `name` (by keyword or position); empty when one passes
  // anything else.
  std::vector<std::string> classes_passed_for_parameter(const std::string& name,
                                                        std::size_t scope) const;
  // `util.split(out)` where `util` is a module of the project (imported, not
  // a known library) and this file defines `split` at module level: the file
  // holds that module's code (an excerpt of several files, or a module that
  // re-exports its helpers). That def's scope, or SIZE_MAX.
  std::size_t project_module_function(NodeId call) const;

  // --- data flow (see graph_flow.h) --------------------------------------
  std::uint8_t value_bits(NodeId expression) const {
    return static_cast<std::uint8_t>(bits_[expression] & kValueBits);
  }
  bool grad_disabled_at(NodeId node) const { return grad_disabled_[node] != 0; }
  const std::vector<StoreEvent>& stores() const { return stores_; }

 private:
  friend class GraphFlow;
  void collect_structure();
  // `[]`, `{}`, `set()`, `list()`, `dict()`, `defaultdict(...)`, `deque()`
  // without maxlen: a container that grows when appended to.
  bool is_mutable_container(NodeId value) const;
  void collect_model_names();
  void collect_hooks();
  std::vector<std::size_t> functions_passed_as(NodeId argument, int depth) const;
  void collect_per_step();
  bool is_model_expression(NodeId callee_expression, NodeId at) const;
  // A def of this file (not a property) answers to `dotted`: calling it runs
  // a function, not a network.
  bool defined_as_function(const std::string& dotted) const;
  // Every binding of the local `dotted` in the scope of `at` is None or a
  // name that is no network (`generator = gen_ops_library`).
  bool bound_only_to_non_models(const std::string& dotted, NodeId at) const;

  const SyntaxTree& tree_;
  ImportTable imports_;
  bool uses_torch_ = false;
  std::vector<NodeId> calls_;
  std::vector<Scope> scopes_;
  std::vector<std::uint32_t> scope_of_node_;         // innermost scope per node id
  std::vector<std::uint16_t> scope_of_node_narrow_;  // the same, when scopes fit 16 bits
  std::vector<ClassFacts> classes_;
  std::unordered_map<std::string, std::vector<std::size_t>> scopes_by_name_;
  std::unordered_map<NodeId, std::size_t> class_index_;
  std::unordered_set<std::string> model_keys_;  // dotted names known to hold a network
  std::unordered_set<std::string> loss_keys_;   // dotted names holding a loss module
  std::vector<NodeId> hook_registrations_;
  std::vector<std::uint8_t> hook_scope_;
  std::vector<std::uint8_t> per_step_;
  std::unordered_map<std::string, std::vector<NodeId>> assignments_by_target_;
  std::unordered_map<std::string, std::vector<NodeId>> slot_assignments_;
  // The same per scope, keyed by scoped_key(scope, target).
  std::unordered_map<std::string, std::vector<NodeId>> scoped_assignments_;
  static std::string scoped_key(std::size_t scope, std::string_view dotted);
  std::unordered_map<std::string, std::vector<NodeId>> calls_by_name_;
  std::vector<NodeId> deletes_;
  std::unordered_map<NodeId, std::size_t> scope_by_node_;  // def/lambda node -> its scope
  // functions_passed_as() of calls (factories) and attributes, asked about
  // every call; one thread reads a FileAnalysis at a time.
  mutable std::unordered_map<NodeId, std::vector<std::size_t>> passed_as_memo_;
  std::unordered_set<std::string> switched_off_;
  // `log = make_logger()`: name -> the calls on the right of such assignments.
  std::unordered_map<std::string, std::vector<NodeId>> factory_calls_by_name_;

  std::vector<FlowBits> bits_;
  std::vector<bool> grad_disabled_;  // one bit per node
  std::vector<StoreEvent> stores_;
};

}  // namespace gpuleak::lint
