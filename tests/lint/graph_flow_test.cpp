// The data-flow facts the rules rely on, checked on small functions.
#include <gtest/gtest.h>

#include "lint/file_analysis.h"
#include "lint/syntax_tree.h"
#include "lint_test_support.h"

namespace gpuleak::lint {
namespace {

// Parses `source` and answers questions about the node whose text is
// `expression` (the last one in the file, so loop bodies read as seen on
// the second pass).
class Flow {
 public:
  explicit Flow(std::string source) : source_(std::move(source)) {
    ParseResult r = parser_.parse(source_);
    tree_ = std::move(r.tree);
    analysis_ = std::make_unique<FileAnalysis>(*tree_);
  }
  NodeId find(std::string_view expression) const {
    NodeId found = kNoNode;
    for (NodeId id = 0; id < tree_->size(); ++id) {
      if (tree_->node(id).named && tree_->text(id) == expression) found = id;
    }
    return found;
  }
  std::uint8_t bits(std::string_view expression) const {
    NodeId n = find(expression);
    EXPECT_NE(n, kNoNode) << "no node `" << expression << "`";
    return n == kNoNode ? 0 : analysis_->value_bits(n);
  }
  bool graph(std::string_view e) const { return bits(e) & kCarriesGraph; }
  bool tensor(std::string_view e) const { return bits(e) & kDeviceTensor; }
  const FileAnalysis& analysis() const { return *analysis_; }

 private:
  std::string source_;
  PythonParser parser_;
  std::unique_ptr<SyntaxTree> tree_;
  std::unique_ptr<FileAnalysis> analysis_;
};

TEST(lint_graph_flow, model_call_carries_graph_and_loss_passes_it_on) {
  Flow f(
      "import torch\n"
      "def step(model, criterion, x, y):\n"
      "    out = model(x)\n"
      "    loss = criterion(out, y)\n"
      "    scaled = loss * 2 + 1\n"
      "    return scaled\n");
  EXPECT_TRUE(f.graph("model(x)"));
  EXPECT_TRUE(f.graph("criterion(out, y)"));
  EXPECT_TRUE(f.graph("loss * 2 + 1"));
}

TEST(lint_graph_flow, python_values_clear_the_graph) {
  Flow f(
      "import torch\n"
      "def step(model, x):\n"
      "    loss = model(x).sum()\n"
      "    a = loss.item()\n"
      "    b = float(loss)\n"
      "    c = loss.tolist()\n"
      "    d = loss.detach().cpu().numpy()\n"
      "    return a, b, c, d\n");
  EXPECT_TRUE(f.graph("model(x).sum()"));
  EXPECT_EQ(f.bits("loss.item()"), 0);
  EXPECT_EQ(f.bits("float(loss)"), 0);
  EXPECT_EQ(f.bits("loss.tolist()"), 0);
  EXPECT_EQ(f.bits("loss.detach().cpu().numpy()"), 0);
}

TEST(lint_graph_flow, detach_keeps_the_tensor_and_cpu_keeps_the_graph) {
  Flow f(
      "import torch\n"
      "def step(model, x):\n"
      "    out = model(x)\n"
      "    kept = out.detach()\n"
      "    host = out.cpu()\n"
      "    return kept, host\n");
  EXPECT_FALSE(f.graph("out.detach()"));
  EXPECT_TRUE(f.tensor("out.detach()"));
  EXPECT_TRUE(f.graph("out.cpu()"));
  EXPECT_FALSE(f.tensor("out.cpu()"));
}

TEST(lint_graph_flow, no_grad_block_and_decorator_compute_without_graph) {
  Flow f(
      "import torch\n"
      "def a(model, x):\n"
      "    with torch.no_grad():\n"
      "        first = model(x)\n"
      "    return first\n"
      "@torch.inference_mode()\n"
      "def b(net, x):\n"
      "    second = net(x)\n"
      "    return second\n");
  EXPECT_FALSE(f.graph("model(x)"));
  EXPECT_TRUE(f.tensor("model(x)"));
  EXPECT_FALSE(f.graph("net(x)"));
}

TEST(lint_graph_flow, comparisons_and_argmax_carry_no_graph) {
  Flow f(
      "import torch\n"
      "def acc(model, x, y):\n"
      "    out = model(x)\n"
      "    hits = (out.argmax(1) == y).sum()\n"
      "    return hits\n");
  EXPECT_FALSE(f.graph("(out.argmax(1) == y).sum()"));
  EXPECT_TRUE(f.tensor("(out.argmax(1) == y).sum()"));
}

TEST(lint_graph_flow, value_carried_around_a_loop_is_seen_on_the_next_iteration) {
  Flow f(
      "import torch\n"
      "def run(model, loader, h):\n"
      "    for x in loader:\n"
      "        use(h)\n"
      "        out, h = model(x, h)\n");
  // `h` in use(h) is a plain parameter on entry, but the graph-carrying
  // result of the previous iteration afterwards.
  EXPECT_TRUE(f.graph("use(h)") || f.graph("h"));
  NodeId use_arg = kNoNode;
  const SyntaxTree& t = f.analysis().tree();
  for (NodeId id = 0; id < t.size(); ++id) {
    if (t.kind(id) == NodeKind::kCall && t.text(id) == "use(h)") {
      use_arg = t.named_children(t.child_by_field(id, Field::kArguments)).front();
    }
  }
  ASSERT_NE(use_arg, kNoNode);
  EXPECT_TRUE(f.analysis().value_bits(use_arg) & kCarriesGraph);
}

TEST(lint_graph_flow, same_file_function_summaries_carry_the_graph) {
  Flow f(
      "import torch\n"
      "def outer(model, batch):\n"
      "    return inner(model, batch)\n"
      "def inner(model, batch):\n"
      "    return model(batch)\n"
      "def use(model, batch):\n"
      "    value = outer(model, batch)\n"
      "    return value\n");
  EXPECT_TRUE(f.graph("outer(model, batch)"));
}

TEST(lint_graph_flow, stores_record_container_value_and_grad_mode) {
  Flow f(
      "import torch\n"
      "def run(model, loader):\n"
      "    kept = []\n"
      "    for x in loader:\n"
      "        kept.append(model(x))\n"
      "        with torch.no_grad():\n"
      "            kept.append(model(x))\n");
  const auto& stores = f.analysis().stores();
  ASSERT_EQ(stores.size(), 2u);
  EXPECT_EQ(stores[0].kind, StoreKind::kAppend);
  EXPECT_TRUE(stores[0].value_bits & kCarriesGraph);
  EXPECT_TRUE(stores[0].grad_enabled);
  EXPECT_FALSE(stores[1].value_bits & kCarriesGraph);
  EXPECT_FALSE(stores[1].grad_enabled);
}

TEST(lint_graph_flow, exceptions_and_exc_info_are_tracked_but_not_their_text) {
  Flow f(
      "import sys\n"
      "import torch\n"
      "def run(step, errors):\n"
      "    try:\n"
      "        step()\n"
      "    except RuntimeError as e:\n"
      "        errors.append(e)\n"
      "        errors.append(repr(e))\n"
      "        info = sys.exc_info()\n"
      "        kind = sys.exc_info()[0]\n");
  EXPECT_TRUE(f.bits("sys.exc_info()") & kException);
  EXPECT_EQ(f.bits("repr(e)"), 0);
  EXPECT_EQ(f.bits("sys.exc_info()[0]"), 0);
}

TEST(lint_graph_flow, arithmetic_on_a_parameter_still_reaches_the_store_through_a_method) {
  // AverageMeter.update sums `val * n` into self: the meter is a sink for
  // its first parameter, so the call hands the loss (and its graph) to it.
  Flow f(
      "import torch\n"
      "class AverageMeter:\n"
      "    def __init__(self):\n"
      "        self.sum = 0\n"
      "    def update(self, val, n=1):\n"
      "        self.sum += val * n\n"
      "def train(model, loader, opt, criterion):\n"
      "    meter = AverageMeter()\n"
      "    for x, y in loader:\n"
      "        loss = criterion(model(x), y)\n"
      "        loss.backward()\n"
      "        meter.update(loss)\n");
  EXPECT_TRUE(f.graph("val * n")) << "the callers' loss seeds `val`";
  bool handed = false;
  for (const StoreEvent& s : f.analysis().stores()) {
    if (f.analysis().tree().text(s.site) == "self.sum += val * n")
      handed |= (s.value_bits & kCarriesGraph) != 0;
  }
  EXPECT_TRUE(handed);
}

TEST(lint_graph_flow, class_attributes_and_closures_carry_their_tensors) {
  Flow f(
      "import torch\n"
      "class Model(torch.nn.Module):\n"
      "    def __init__(self):\n"
      "        super().__init__()\n"
      "        self.probe = torch.nn.Parameter(torch.ones(8, device='cuda'))\n"
      "    def inspect(self):\n"
      "        intensity = self.probe.detach() ** 2\n"
      "        show = lambda fig: fig.imshow(intensity.cpu())\n"
      "        def later():\n"
      "            return intensity.sum()\n"
      "        return show, later\n");
  EXPECT_TRUE(f.tensor("self.probe.detach() ** 2"));
  EXPECT_TRUE(f.tensor("lambda fig: fig.imshow(intensity.cpu())"));
  EXPECT_FALSE(f.graph("lambda fig: fig.imshow(intensity.cpu())"));
}

TEST(lint_graph_flow, a_name_that_is_differentiated_carries_a_graph_whatever_made_it) {
  // Nothing says what `loss_function` returns, but `total.backward()` does.
  std::string source =
      "import torch\n"
      "def optimize(loss_function, tensors, opt):\n"
      "    history = []\n"
      "    while True:\n"
      "        opt.zero_grad()\n"
      "        total = sum(loss_function(*tensors))\n"
      "        total.backward()\n"
      "        opt.step()\n"
      "        history.append(total)\n";
  EXPECT_EQ(testing::rule_ids(source), (std::vector<std::string>{"GL101"}));
  std::string rebound = source;
  rebound.replace(rebound.find("history.append(total)"), 21,
                  "total = total.item()\n        history.append(total)");
  EXPECT_TRUE(testing::rule_ids(rebound).empty()) << "a number after backward";
}

TEST(lint_graph_flow, losses_are_one_number_and_model_outputs_are_not) {
  Flow f(
      "import torch\n"
      "import torch.nn.functional as F\n"
      "def step(model, x, y):\n"
      "    out = model(x)\n"
      "    loss = F.cross_entropy(out, y)\n"
      "    each = F.cross_entropy(out, y, reduction='none')\n"
      "    total = out.sum()\n"
      "    rows = out.sum(dim=1)\n"
      "    return loss, each, total, rows\n");
  EXPECT_TRUE(f.bits("model(x)") & kNonScalar);
  EXPECT_FALSE(f.bits("F.cross_entropy(out, y)") & kNonScalar);
  EXPECT_TRUE(f.bits("F.cross_entropy(out, y, reduction='none')") & kNonScalar);
  EXPECT_FALSE(f.bits("out.sum()") & kNonScalar);
  EXPECT_TRUE(f.bits("out.sum(dim=1)") & kNonScalar);
}

TEST(lint_graph_flow, tuples_returned_by_a_function_of_the_file_keep_their_elements_apart) {
  Flow f(
      "import torch\n"
      "def validation_step(model, x, y):\n"
      "    y_hat = model(x)\n"
      "    return y_hat.detach(), (y_hat - y).pow(2).mean().item()\n"
      "def run(model, loader, costs):\n"
      "    for x, y in loader:\n"
      "        _, cost = validation_step(model, x, y)\n"
      "        costs.append(cost)\n");
  EXPECT_EQ(f.bits("cost"), 0);
}

}  // namespace
}  // namespace gpuleak::lint
