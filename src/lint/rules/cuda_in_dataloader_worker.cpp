// GL301: CUDA used by code that DataLoader runs in its worker processes.
#include <fmt/format.h>

#include <set>

#include "lint/cuda_use.h"
#include "lint/rules/rule_factories.h"
#include "lint/vocabulary.h"

namespace gpuleak::lint {
namespace {

constexpr RuleInfo kInfo{
    "GL301",
    "cuda-in-dataloader-worker",
    Severity::kError,
    Cause::kWorkersWithCuda,
    "CUDA is used in code that DataLoader runs in worker processes (Dataset methods, collate_fn, "
    "worker_init_fn).",
    "With `num_workers > 0`, DataLoader runs `__getitem__`, `collate_fn` and `worker_init_fn` in "
    "separate worker processes. A worker that touches CUDA creates its own CUDA context, "
    "hundreds of MiB of device memory per worker, held as long as the worker lives (the whole "
    "run with `persistent_workers=True`); with the default fork start method it fails instead "
    "with \"Cannot re-initialize CUDA in forked subprocess\". CUDA tensors created in a "
    "dataset's `__init__` travel to every worker the same way.",
    "Return CPU tensors from the dataset and move each batch in the training loop: `x = "
    "x.to(device, non_blocking=True)`, with `pin_memory=True` on the DataLoader.",
};

constexpr int kUnknownWorkers = -1;

// num_workers of a DataLoader call: 0 when absent, -1 when not a literal.
int workers_of(const FileAnalysis& file, NodeId loader, NodeId& expression) {
  expression = file.keyword_argument(loader, "num_workers");
  if (expression == kNoNode) {
    std::vector<NodeId> args = file.positional_arguments(loader);
    if (args.size() > 5) expression = args[5];
  }
  if (expression == kNoNode) return 0;
  if (file.tree().kind(expression) == NodeKind::kInteger) {
    std::string digits(file.text(expression));
    try {
      return std::stoi(digits, nullptr, 0);
    } catch (const std::exception&) {
      return kUnknownWorkers;
    }
  }
  return kUnknownWorkers;
}

// The dataset class a DataLoader is built on, when the file says.
std::string dataset_class_of(const FileAnalysis& file, NodeId loader) {
  const SyntaxTree& tree = file.tree();
  NodeId ds = file.keyword_argument(loader, "dataset");
  if (ds == kNoNode) {
    std::vector<NodeId> args = file.positional_arguments(loader);
    if (!args.empty()) ds = args.front();
  }
  for (int hop = 0; ds != kNoNode && hop < 4; ++hop) {
    if (tree.kind(ds) == NodeKind::kCall) {
      std::string name(vocabulary::last_component(dotted_text(tree, file.callee(ds))));
      if (name == "Subset" || name == "ConcatDataset") {
        std::vector<NodeId> args = file.positional_arguments(ds);
        ds = args.empty() ? kNoNode : args.front();
        continue;
      }
      return name;
    }
    std::string dotted = dotted_text(tree, ds);
    if (dotted.empty()) return {};
    NodeId next = file.first_assigned_value(dotted);
    ds = next;
  }
  return {};
}

std::string workers_phrase(const FileAnalysis& file, int workers, NodeId expression) {
  if (workers == kUnknownWorkers) {
    return fmt::format("num_workers={}", quote(file, expression, 30));
  }
  return fmt::format("num_workers={}", workers);
}

void check(const FileAnalysis& file, FindingSink& sink) {
  std::vector<NodeId> loaders;
  for (NodeId call : file.calls()) {
    if (file.is_dataloader_constructor(call)) loaders.push_back(call);
  }
  std::set<std::size_t> reported;
  // Dataset methods.
  for (std::size_t s = 1; s < file.scopes().size(); ++s) {
    const Scope& scope = file.scopes()[s];
    if (scope.class_node == kNoNode) continue;
    const ClassFacts* owner = file.class_facts(scope.class_node);
    if (owner == nullptr || !owner->is_dataset) continue;
    const std::string& m = scope.name;
    if (m != "__getitem__" && m != "__getitems__" && m != "__iter__" && m != "__next__" &&
        m != "__init__") {
      continue;
    }
    NodeId use = scope.body != kNoNode ? first_cuda_use(file, scope.body, s) : kNoNode;
    if (use == kNoNode) continue;

    // The strongest evidence wins: a literal worker count over an
    // expression, an expression over nothing.
    int known_workers = 0;
    NodeId unknown_expression = kNoNode;
    bool any_for_class = false;
    bool unresolved_with_workers = false;
    for (NodeId loader : loaders) {
      NodeId expression = kNoNode;
      int workers = workers_of(file, loader, expression);
      std::string cls = dataset_class_of(file, loader);
      if (cls == owner->name) {
        any_for_class = true;
        if (workers > known_workers) known_workers = workers;
        if (workers == kUnknownWorkers && unknown_expression == kNoNode) {
          unknown_expression = expression;
        }
      } else if (cls.empty() && workers != 0) {
        unresolved_with_workers = true;
      }
    }
    RuleReport r;
    r.node = use;
    std::string where = fmt::format("{}.{}", owner->name, m);
    std::string condition;
    if (any_for_class) {
      if (known_workers > 0) {
        condition = workers_phrase(file, known_workers, kNoNode);
      } else if (unknown_expression != kNoNode) {
        condition = workers_phrase(file, kUnknownWorkers, unknown_expression);
        r.severity = Severity::kWarning;
      } else {
        continue;  // every loader of this dataset runs without workers
      }
    } else if (loaders.empty() || unresolved_with_workers) {
      condition = "when loaded with num_workers > 0";
      r.severity = Severity::kWarning;
    } else {
      continue;
    }
    if (m == "__init__") {
      r.message = fmt::format(
          "`{}` in `{}` puts CUDA tensors into the dataset, which is copied into every "
          "DataLoader worker ({}): each worker that touches them needs its own CUDA context",
          quote(file, use, 40), where, condition);
    } else {
      r.message = fmt::format(
          "`{}` in `{}` runs inside every DataLoader worker ({}): each worker process creates "
          "its own CUDA context, hundreds of MiB of GPU memory each",
          quote(file, use, 40), where, condition);
    }
    reported.insert(s);
    sink.report(kInfo, std::move(r));
  }
  // collate_fn and worker_init_fn.
  for (NodeId loader : loaders) {
    NodeId expression = kNoNode;
    int workers = workers_of(file, loader, expression);
    if (workers == 0) continue;
    for (const char* role : {"collate_fn", "worker_init_fn"}) {
      NodeId fn = file.keyword_argument(loader, role);
      if (fn == kNoNode) continue;
      for (std::size_t s : file.functions_passed_as(fn)) {
        if (!reported.insert(s).second) continue;
        const Scope& scope = file.scopes()[s];
        NodeId use = scope.body != kNoNode ? first_cuda_use(file, scope.body, s) : kNoNode;
        if (use == kNoNode) continue;
        RuleReport r;
        r.node = use;
        if (workers == kUnknownWorkers) r.severity = Severity::kWarning;
        r.message = fmt::format(
            "`{}` in the {} `{}` runs inside every DataLoader worker ({}): each worker process "
            "creates its own CUDA context, hundreds of MiB of GPU memory each",
            quote(file, use, 40), role, scope.name, workers_phrase(file, workers, expression));
        sink.report(kInfo, std::move(r));
      }
    }
  }
}

}  // namespace

std::unique_ptr<Rule> make_cuda_in_dataloader_worker_rule() { return make_rule(kInfo, check); }

}  // namespace gpuleak::lint
