// GraphFlow evaluating calls: container methods that store, tensor methods,
// torch functions, builtins, model and loss calls, same-file functions
// (through their summaries) and constructors; and what each call passes to
// the functions of the file it reaches.
#include <cctype>

#include "cuda_use.h"
#include "graph_flow.h"
#include "graph_flow_shared.h"
#include "vocabulary.h"

namespace gpuleak::lint {

using namespace graph_flow;

namespace {

// weakref.ref(x), StorageWeakRefWrapper(x), TensorWeakRef(x): the referent is
// not kept alive by the result.
bool is_weak_reference(std::string_view qualified) {
  constexpr std::string_view kWord = "weakref";
  for (std::size_t i = 0; i + kWord.size() <= qualified.size(); ++i) {
    std::size_t j = 0;
    while (j < kWord.size() &&
           std::tolower(static_cast<unsigned char>(qualified[i + j])) == kWord[j]) {
      ++j;
    }
    if (j == kWord.size()) return true;
  }
  return false;
}

// Methods whose result is a Python value, not a tensor.
bool returns_python_value(std::string_view method) {
  return one_of(method, {"item",          "tolist",       "numpy",         "__float__", "__int__",
                         "size",          "dim",          "numel",         "nelement",  "stride",
                         "data_ptr",      "element_size", "is_contiguous", "equal",     "backward",
                         "register_hook", "get_device",   "__len__",       "__repr__",  "__str__",
                         "__format__",    "keys"});
}

// Methods whose result is an integer or boolean tensor: no grad_fn.
bool returns_tensor_without_graph(std::string_view method) {
  return one_of(method, {"argmax", "argmin",      "eq",          "ne",         "lt",
                         "gt",     "le",          "ge",          "long",       "int",
                         "bool",   "byte",        "short",       "nonzero",    "isnan",
                         "isinf",  "isfinite",    "any",         "all",        "argsort",
                         "eq_",    "logical_not", "logical_and", "logical_or", "count_nonzero",
                         "unique"});
}

// Collectives that return the reduced or gathered tensor.
bool returns_collective_result(std::string_view method) {
  return one_of(method, {"allreduce", "allgather", "grouped_allreduce", "all_gather", "reduce_mean",
                         "mesh_reduce"});
}

// Container methods that put their argument into the receiver.
bool is_append_method(std::string_view method) {
  // Not add(): on tensors and quantized functionals it is arithmetic. Not
  // put(): a queue hands the value to its consumer.
  return one_of(method, {"append", "appendleft"});
}

}  // namespace

FlowBits GraphFlow::same_file_function_bits(NodeId call) const {
  // The defs the call can run (callees_of): `algo.train(feed)` runs a method
  // named train, never the module-level `def train(...)` beside it; a method
  // of an instance of a class of this file runs that class's method.
  FlowBits bits = 0;
  for (std::size_t s : file_.callees_of(call)) bits |= learnt_.returns[s];
  // A function that returns what it caught hands it to its caller on
  // purpose; only tensors and graphs flow through summaries.
  return bits & kTensorFacts;
}

std::vector<FlowBits> GraphFlow::same_file_return_elements(NodeId call, std::size_t count) const {
  std::vector<FlowBits> out;
  std::vector<std::size_t> scopes = file_.callees_of(call);
  if (scopes.empty()) return out;
  for (std::size_t s : scopes) {
    const std::vector<FlowBits>& e = learnt_.return_elements[s];
    if (e.size() != count) return {};
    if (out.empty()) out.assign(count, 0);
    for (std::size_t i = 0; i < count; ++i) out[i] |= e[i] & kTensorFacts;
  }
  return out;
}

std::vector<std::size_t> GraphFlow::forward_of_instance_called(NodeId call) const {
  // `model = Net(dataset.num_features).to(device)` then `model(data)`: the
  // forward of the file's nn.Module class Net (pytorch_geometric examples).
  // Every binding of the name in the file must construct that class.
  NodeId fn = file_.callee(call);
  if (fn == kNoNode || tree_.kind(fn) != NodeKind::kIdentifier) return {};
  std::string class_name;
  for (NodeId assignment : file_.assignments_to(std::string(tree_.text(fn)))) {
    NodeId right = tree_.child_by_field(assignment, Field::kRight);
    // Through `.to(device)`, `.cuda()`: methods that return the module.
    while (right != kNoNode && tree_.kind(right) == NodeKind::kCall &&
           one_of(file_.callee_last_name(right), {"to", "cuda", "train", "eval", "float"})) {
      NodeId receiver = file_.method_receiver(right);
      if (receiver == kNoNode) break;
      right = receiver;
    }
    if (right == kNoNode || tree_.kind(right) != NodeKind::kCall) return {};
    NodeId constructor = file_.callee(right);
    if (constructor == kNoNode || tree_.kind(constructor) != NodeKind::kIdentifier) return {};
    std::string name(tree_.text(constructor));
    if (!class_name.empty() && name != class_name) return {};
    class_name = name;
  }
  if (class_name.empty()) return {};
  std::vector<std::size_t> out;
  for (std::size_t s : file_.scopes_named("forward")) {
    const ClassFacts* facts = file_.class_facts(file_.scopes_[s].class_node);
    if (facts != nullptr && facts->is_module && facts->name == class_name) out.push_back(s);
  }
  return out;
}

bool GraphFlow::is_python_number(NodeId expression, std::size_t scope, int depth) const {
  if (expression == kNoNode || depth > 4) return false;
  switch (tree_.kind(expression)) {
    case NodeKind::kInteger:
    case NodeKind::kFloat:
      return true;
    case NodeKind::kParenthesizedExpression:
    case NodeKind::kUnaryOperator:
      return is_python_number(tree_.first_named_child(expression), scope, depth + 1);
    case NodeKind::kBinaryOperator:
      return is_python_number(tree_.child_by_field(expression, Field::kLeft), scope, depth + 1) &&
             is_python_number(tree_.child_by_field(expression, Field::kRight), scope, depth + 1);
    case NodeKind::kCall: {
      // `x.size(0)`, `len(x)`, `loss.item()`, `float(...)`: numbers, not tensors.
      std::string_view m = file_.callee_last_name(expression);
      if (file_.method_receiver(expression) != kNoNode) {
        return (m == "size" && !file_.positional_arguments(expression).empty()) || m == "item" ||
               m == "numel" || m == "dim";
      }
      return one_of(m, {"len", "float", "int"});
    }
    case NodeKind::kIdentifier: {
      const std::vector<NodeId>& bound =
          file_.assignments_in_scope(std::string(tree_.text(expression)), scope);
      if (bound.empty()) return false;
      for (NodeId a : bound) {
        if (!is_python_number(tree_.child_by_field(a, Field::kRight), scope, depth + 1)) {
          return false;
        }
      }
      return true;
    }
    default:
      return false;
  }
}

bool GraphFlow::forward_returns_python_number(std::size_t scope, std::size_t index,
                                              std::size_t count) const {
  NodeId node = file_.scopes_[scope].node;
  bool any = false;
  for (NodeId id = node; id < tree_.node(node).subtree_end; ++id) {
    if (tree_.kind(id) != NodeKind::kReturnStatement || file_.scope_index_of(id) != scope) {
      continue;
    }
    NodeId value = tree_.first_named_child(id);
    if (value == kNoNode) return false;
    NodeKind k = tree_.kind(value);
    if (k != NodeKind::kTuple && k != NodeKind::kExpressionList) return false;
    std::vector<NodeId> parts = tree_.named_children(value);
    if (parts.size() != count || !is_python_number(parts[index], scope, 0)) return false;
    any = true;
  }
  return any;
}

void GraphFlow::record_call_arguments(NodeId call, const std::vector<NodeId>& positional,
                                      NodeId args) {
  std::vector<std::size_t> targets = file_.callees_of(call);
  if (targets.empty()) return;
  for (std::size_t s : targets) {
    if (file_.is_hook_scope(s)) continue;  // the framework calls it with its own values
    const Scope& callee = file_.scopes_[s];
    std::vector<FlowBits>& into = next_.arguments[s];
    std::size_t first = callee.class_node != kNoNode ? 1 : 0;  // self
    for (std::size_t i = 0; i < positional.size(); ++i) {
      if (tree_.kind(positional[i]) == NodeKind::kListSplat) break;  // *args: positions unknown
      std::size_t p = first + i;
      if (p >= into.size()) break;
      into[p] |= as_operand(file_.bits_[positional[i]]) & kTensorFacts;
    }
    if (args == kNoNode || tree_.kind(args) != NodeKind::kArgumentList) continue;
    for (NodeId a : tree_.named_children(args)) {
      if (tree_.kind(a) != NodeKind::kKeywordArgument) continue;
      NodeId name = tree_.child_by_field(a, Field::kName);
      NodeId value = tree_.child_by_field(a, Field::kValue);
      if (name == kNoNode || value == kNoNode) continue;
      for (std::size_t p = 0; p < callee.parameters.size(); ++p) {
        if (callee.parameters[p] == tree_.text(name)) {
          into[p] |= as_operand(file_.bits_[value]) & kTensorFacts;
        }
      }
    }
  }
}

FlowBits GraphFlow::torch_function_bits(std::string_view q, NodeId call, FlowBits args) {
  std::string_view last = vocabulary::last_component(q);
  // `yy = nn.Parameter(x.clone())` or `delta = torch.zeros_like(x,
  // requires_grad=True)` made in a function: a leaf that requires grad, the
  // variable of an optimisation loop (an attack's perturbation). Not on the
  // meta device, which holds no memory (torch's fake-tensor memo makes such
  // tensors).
  if (q == "torch.nn.Parameter" || q == "torch.nn.parameter.Parameter") return kRequiresGradLeaf;
  NodeId requires_grad = file_.keyword_argument(call, "requires_grad");
  if (requires_grad != kNoNode && tree_.kind(requires_grad) == NodeKind::kTrue) {
    NodeId device = file_.keyword_argument(call, "device");
    std::string_view where = device != kNoNode ? tree_.text(device) : std::string_view();
    if (where != "\"meta\"" && where != "'meta'") return kRequiresGradLeaf;
  }
  if (vocabulary::is_capitalized(last) || q.starts_with("torch.cuda.") ||
      q.starts_with("torch.distributed.") || q.starts_with("torch.utils.") ||
      q.starts_with("torch.backends.")) {
    return 0;
  }
  if (one_of(last, {"zeros", "ones", "empty", "full", "rand", "randn", "randint", "tensor",
                    "as_tensor", "arange", "linspace", "eye", "randperm", "from_numpy"})) {
    if (!call_targets_cuda_device(file_, call)) return 0;
    // torch.tensor(0.0, device=...) is one number; anything with a shape is not.
    std::vector<NodeId> positional = file_.positional_arguments(call);
    bool one_number = (last == "tensor" || last == "as_tensor") && positional.size() == 1 &&
                      (tree_.kind(positional[0]) == NodeKind::kInteger ||
                       tree_.kind(positional[0]) == NodeKind::kFloat);
    return static_cast<FlowBits>(one_number ? kDeviceTensor : kDeviceTensor | kNonScalar);
  }
  if (one_of(last,
             {"zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like"})) {
    return args & (kDeviceTensor | kNonScalar);
  }
  if (one_of(last, {"no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "device",
                    "manual_seed", "save", "load", "is_tensor", "numel", "compile",
                    "set_default_dtype", "get_default_dtype", "is_grad_enabled"})) {
    return 0;
  }
  if (one_of(last, {"argmax", "argmin", "eq", "ne", "lt", "gt", "le", "ge", "isnan", "isinf",
                    "isfinite", "nonzero", "argsort", "equal", "allclose", "count_nonzero"})) {
    return args & (kDeviceTensor | kNonScalar);
  }
  // A loss function gives one number unless asked not to reduce.
  if (q.starts_with("torch.nn.functional.") &&
      (vocabulary::is_loss_name(last) || last.starts_with("cross_entropy") ||
       last.starts_with("binary_cross_entropy") || last == "kl_div")) {
    NodeId reduction = file_.keyword_argument(call, "reduction");
    bool reduced =
        reduction == kNoNode || tree_.text(reduction).find("none") == std::string_view::npos;
    FlowBits bits = args & (reduced ? kTensorBits : kTensorFacts);
    return strip_if_no_grad(bits);
  }
  if (q == "torch.autograd.grad") {
    NodeId create = file_.keyword_argument(call, "create_graph");
    bool graph = create != kNoNode && tree_.kind(create) != NodeKind::kFalse;
    return graph ? strip_if_no_grad(kTensorBits) : static_cast<FlowBits>(kDeviceTensor);
  }
  FlowBits bits = args & kTensorFacts;
  if (one_of(last, {"sum", "mean", "norm", "prod", "std", "var"}) &&
      file_.positional_arguments(call).size() == 1 &&
      file_.keyword_argument(call, "dim") == kNoNode) {
    bits = static_cast<FlowBits>(bits & ~kNonScalar);
  }
  if (one_of(last, {"cat", "concat", "concatenate", "stack", "hstack", "vstack"})) {
    bits |= (bits & kTensorBits) ? kNonScalar : 0;
  }
  return strip_if_no_grad(bits);
}

FlowBits GraphFlow::eval_call(NodeId call, Env& env) {
  NodeId fn = file_.callee(call);
  NodeId receiver = file_.method_receiver(call);
  FlowBits receiver_bits = 0;
  if (receiver != kNoNode) {
    receiver_bits = as_operand(eval(receiver, env));
  } else if (fn != kNoNode && tree_.kind(fn) != NodeKind::kIdentifier) {
    eval(fn, env);
  }
  // Arguments, in order.
  FlowBits arg_bits = 0;
  bool model_argument = false;
  std::vector<NodeId> positional;
  NodeId args = tree_.child_by_field(call, Field::kArguments);
  if (args != kNoNode) {
    if (tree_.kind(args) == NodeKind::kGeneratorExpression) {
      arg_bits |= as_operand(eval(args, env));
      positional.push_back(args);
    } else {
      for (NodeId a : tree_.named_children(args)) {
        arg_bits |= as_operand(eval(a, env));
        NodeKind k = tree_.kind(a);
        if (k != NodeKind::kKeywordArgument && k != NodeKind::kDictionarySplat) {
          positional.push_back(a);
          if ((k == NodeKind::kIdentifier || k == NodeKind::kAttribute) &&
              file_.is_model_expression(a, call)) {
            model_argument = true;
          }
        }
      }
    }
  }
  std::string_view name = file_.callee_last_name(call);
  std::string q = file_.qualified_name(fn);
  record_stores_through_parameters(call, positional);
  record_stores_into_arguments(call, positional);
  record_call_arguments(call, positional, args);
  if (receiver != kNoNode) record_in_place_accumulation(call, name, positional);

  if (receiver != kNoNode) {
    // Stores into containers: the receiver now holds the value.
    StoreKind store_kind = StoreKind::kAppend;
    NodeId stored = kNoNode;
    if (is_append_method(name) && !positional.empty()) {
      stored = positional.back();
    } else if (name == "insert" && positional.size() == 2 &&
               !(file_.bits_[positional[0]] & kTensorFacts)) {
      // list.insert(index, value); `neighbor_loader.insert(batch.src,
      // batch.dst)` (pytorch_geometric's LastNeighborLoader) hands tensors
      // to an object's own method.
      stored = positional[1];
    } else if ((name == "extend" || name == "extendleft") && !positional.empty()) {
      store_kind = StoreKind::kExtend;
      stored = positional.front();
    }
    if (stored != kNoNode) {
      FlowBits bits = file_.bits_[stored];
      record_store(store_kind, call, receiver, kNoNode, stored, bits);
      std::string holder = dotted_text(tree_, receiver);
      // A container of leaves is no leaf (`self.append(nn.Parameter(...))`
      // in an unpickler, `opt = Adam([z])`).
      bits &= ~kRequiresGradLeaf;
      if (!holder.empty() && bits != 0) env.add(holder, bits);
      return 0;
    }
  }

  if (q == "sys.exc_info" || q == "sys.exception") return kException;
  if (is_weak_reference(q)) return 0;
  if (q.starts_with("traceback.") || q.starts_with("logging.") || q.starts_with("np.") ||
      q.starts_with("numpy.") || q.starts_with("math.") || q.starts_with("statistics.")) {
    return 0;
  }

  if (receiver != kNoNode) {
    if (receiver_bits & kException) {
      if (name == "with_traceback") {
        return (!positional.empty() && tree_.kind(positional[0]) == NodeKind::kNone)
                   ? 0
                   : receiver_bits;
      }
      return 0;
    }
    if (returns_python_value(name)) return 0;
    // `delta.requires_grad_()` (or `x.detach().requires_grad_()`): the tensor
    // is now a leaf that requires grad. (`r.requires_grad = True` is not taken:
    // Debian's torch sets it on the meta tensors of its fake-tensor memo.)
    if (name == "requires_grad_" &&
        (positional.empty() || tree_.kind(positional[0]) == NodeKind::kTrue)) {
      std::string holder = dotted_text(tree_, receiver);
      if (!holder.empty() && tree_.kind(receiver) == NodeKind::kIdentifier) {
        env.add(holder, kRequiresGradLeaf);
      }
      return static_cast<FlowBits>((receiver_bits & kNonScalar) | kRequiresGradLeaf);
    }
    // Only tensors have detach(): whatever it was, the result is one.
    if (name == "detach" || name == "detach_") {
      return static_cast<FlowBits>(kDeviceTensor | (receiver_bits & kNonScalar));
    }
    // The copy is on the host; its graph (and the graph's activations) is not.
    // A parameter moved to the host is still that parameter: a function
    // that sums `val.cpu()` into an attribute keeps its callers' graphs.
    if (name == "cpu") return receiver_bits & (kCarriesGraph | kNonScalar | kParameterBits);
    if (name == "to" || name == "cuda") {
      if (file_.is_model_expression(receiver, call)) return 0;  // a module, not a tensor
      if (name == "to") {
        NodeId a = args;
        bool to_cpu = a != kNoNode && tree_.text(a).find("cpu") != std::string_view::npos;
        if (to_cpu) return receiver_bits & (kCarriesGraph | kNonScalar | kParameterBits);
        return static_cast<FlowBits>(receiver_bits |
                                     (call_targets_cuda_device(file_, call) ? kDeviceTensor : 0));
      }
      return static_cast<FlowBits>(receiver_bits | kDeviceTensor);
    }
    if (returns_tensor_without_graph(name)) return receiver_bits & kDeviceTensor;
  }

  if (q == "functools.partial" || q == "partial") {
    return arg_bits & kTensorFacts;  // a closure over its arguments
  }
  if (receiver == kNoNode) {
    if (one_of(name, {"float",   "int",   "bool", "str",        "repr",       "len",  "print",
                      "format",  "type",  "id",   "isinstance", "issubclass", "hash", "callable",
                      "hasattr", "bytes", "ord",  "chr",        "vars",       "dir",  "open"})) {
      return 0;
    }
    if (one_of(name, {"sum", "max", "min", "abs", "round", "pow"})) {
      return strip_if_no_grad(arg_bits & kTensorFacts);
    }
    if (one_of(name, {"list", "tuple", "set", "dict", "sorted", "reversed", "iter", "next", "zip",
                      "enumerate", "map", "filter", "frozenset", "deepcopy"}) ||
        q == "copy.copy" || q == "copy.deepcopy") {
      return arg_bits;
    }
  }

  // `hvd.allreduce(val)`, `xm.all_gather(t)`: a collective that returns its
  // result hands back the tensor it reduced, graph included (Horovod's
  // allreduce is differentiable). torch.distributed's work in place.
  if (receiver != kNoNode && returns_collective_result(name) &&
      !q.starts_with("torch.distributed.")) {
    return strip_if_no_grad(arg_bits & (kTensorFacts | kParameterBits));
  }
  if (file_.is_model_call(call)) return strip_if_no_grad(kTensorBits | kNonScalar);
  // `model.generate(...)` decodes token tensors on the model's device; the
  // generation loop runs without gradients.
  if (name == "generate" && receiver != kNoNode && file_.is_model_expression(receiver, call)) {
    return static_cast<FlowBits>(kDeviceTensor | kNonScalar);
  }
  if (receiver != kNoNode && (receiver_bits & kTensorBits)) {
    // A tensor method: sum(), mean(), view(), softmax() ... passes it on;
    // a full reduction leaves one element.
    FlowBits bits =
        static_cast<FlowBits>((receiver_bits | (arg_bits & kTensorBits)) & kTensorFacts);
    if (one_of(name, {"sum", "mean", "norm", "max", "min", "prod", "std", "var", "amax", "amin",
                      "logsumexp"}) &&
        positional.empty() && file_.keyword_argument(call, "dim") == kNoNode) {
      bits = static_cast<FlowBits>(bits & ~kNonScalar);
    }
    return strip_if_no_grad(bits);
  }
  // `problem.evaluate_loss(data, logits)`: a loss-named method of a
  // parameter is a loss of its arguments (below), not just the parameter's.
  if (receiver != kNoNode && (receiver_bits & kParameterBits) && !(receiver_bits & kValueBits) &&
      !(file_.is_loss_callee(call) && (arg_bits & kTensorBits))) {
    // A method of a parameter we know nothing more about (`stats.items()`,
    // `val.float()`): the result still comes from that parameter.
    return receiver_bits & kParameterBits;
  }
  if (q.starts_with("torch.")) return torch_function_bits(q, call, arg_bits);
  if (file_.is_loss_callee(call)) {
    FlowBits bits = arg_bits & kTensorBits;
    if (model_argument) bits |= kTensorBits;  // compute_loss(model, batch)
    // A loss is one number unless asked not to reduce.
    NodeId reduction = file_.keyword_argument(call, "reduction");
    if (reduction != kNoNode && tree_.text(reduction).find("none") != std::string_view::npos) {
      bits |= kNonScalar;
    }
    return strip_if_no_grad(bits);
  }
  std::string dotted = dotted_text(tree_, fn);
  if (!dotted.empty() && (receiver == kNoNode || dotted.rfind("self.", 0) == 0 ||
                          file_.project_module_function(call) != static_cast<std::size_t>(-1))) {
    FlowBits summary = same_file_function_bits(call);
    if (summary != 0) return strip_if_no_grad(summary);
  }
  if (receiver != kNoNode && !file_.constructed_classes(receiver).empty()) {
    // `train_util.train_step(imgs)` where every binding of `train_util`
    // constructs a class of this file: what that class's method returns.
    FlowBits summary = same_file_function_bits(call);
    if (summary != 0) return strip_if_no_grad(summary);
  }
  if (receiver == kNoNode && vocabulary::is_capitalized(name)) {
    // A module built from tensors holds its own parameters, not one value per
    // step; a weak reference keeps nothing alive.
    if (constructs_module(call) || is_weak_reference(q)) return 0;
    // A constructor keeps what it is given (a record of (step, loss, error)).
    return arg_bits;
  }
  return 0;
}

bool GraphFlow::constructs_module(NodeId call) {
  if (file_.is_torch_module_constructor(call)) return true;
  if (!module_classes_ready_) {
    module_classes_ready_ = true;
    for (const ClassFacts& c : file_.classes_) {
      if (c.is_module) module_classes_.insert(c.name);
    }
  }
  return module_classes_.count(std::string(file_.callee_last_name(call))) != 0;
}

}  // namespace gpuleak::lint
