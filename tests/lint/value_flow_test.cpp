// The value-flow inferences of issue 36, each on the shape the issue names:
// what makes a value a tensor or a graph (evidence from its uses, sums of
// lists, tuples through a variable), which stores escape the iteration
// (helpers handed a container, meters whose reset runs per epoch, slots
// updated from themselves, predict_step results, hook handles), and what
// bounds a store (tuple resets, periodic flushes, size trims, weak keys).
#include <gtest/gtest.h>

#include <algorithm>

#include "lint/file_analysis.h"
#include "lint/syntax_tree.h"
#include "lint_test_support.h"

namespace gpuleak::lint {
namespace {

using Ids = std::vector<std::string>;

// The (rule, line) pairs gpuleak reports on `source`.
std::vector<std::pair<std::string, int>> findings(std::string_view source) {
  std::vector<std::pair<std::string, int>> out;
  for (const Finding& f : testing::lint_snippet(source).findings) {
    out.emplace_back(std::string(f.rule->id), static_cast<int>(f.start.line));
  }
  return out;
}

std::string message_of(std::string_view source, std::string_view rule) {
  for (const Finding& f : testing::lint_snippet(source).findings) {
    if (f.rule->id == rule) return f.message;
  }
  return {};
}

std::uint8_t bits_of(std::string_view source, std::string_view expression) {
  PythonParser parser;
  ParseResult r = parser.parse(source);
  FileAnalysis analysis(*r.tree);
  NodeId found = kNoNode;
  for (NodeId id = 0; id < r.tree->size(); ++id) {
    if (r.tree->node(id).named && r.tree->text(id) == expression) found = id;
  }
  EXPECT_NE(found, kNoNode) << "no node `" << expression << "`";
  return found == kNoNode ? 0 : analysis.value_bits(found);
}

// --- what a value is -------------------------------------------------------

TEST(lint_value_flow, unpacking_through_a_variable_keeps_each_elements_facts) {
  // `result = step(...)` then `loss, report, n, state = result`: `n` is the
  // batch size the function returns, not the loss beside it.
  std::string source =
      "import torch\n"
      "def step(model, batch):\n"
      "    out = model(batch)\n"
      "    loss = out.mean()\n"
      "    return loss, {'loss': loss.item()}, out.shape[0], None\n"
      "def train(model, loader, optimizer):\n"
      "    seen = []\n"
      "    total = 0\n"
      "    for batch in loader:\n"
      "        optimizer.zero_grad()\n"
      "        result = step(model, batch)\n"
      "        loss, report, n, state = result\n"
      "        loss.backward()\n"
      "        optimizer.step()\n"
      "        seen.append(n)\n"
      "        total += n\n";
  EXPECT_TRUE(findings(source).empty());
  EXPECT_EQ(bits_of(source, "n"), 0);
  // Unpacking the same tuple from a plain call still marks the loss.
  std::string kept = source;
  kept.replace(kept.find("seen.append(n)"), 14, "seen.append(loss)");
  EXPECT_EQ(findings(kept), (std::vector<std::pair<std::string, int>>{{"GL101", 15}}));
}

TEST(lint_value_flow, a_list_summed_into_the_differentiated_loss_carries_the_graph) {
  // RecBole: `loss = sum(losses) if isinstance(losses, tuple) else losses`;
  // `loss.backward()` shows that `losses` holds the graph too.
  std::string source =
      "import torch\n"
      "def train_epoch(model, data, optimizer):\n"
      "    losses_list = []\n"
      "    for interaction in data:\n"
      "        optimizer.zero_grad()\n"
      "        losses = model.calculate_loss(interaction)\n"
      "        loss = sum(losses) if isinstance(losses, tuple) else losses\n"
      "        loss.backward()\n"
      "        optimizer.step()\n"
      "        losses_list.append(losses)\n"
      "    return sum(losses_list).item()\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL101", 10}}));
  std::string reduced = source;
  reduced.replace(reduced.find("sum(losses) if"), 14, "functools.reduce(operator.add, losses) if");
  reduced.insert(0, "import functools\nimport operator\n");
  EXPECT_EQ(findings(reduced), (std::vector<std::pair<std::string, int>>{{"GL101", 12}}));
}

TEST(lint_value_flow, a_name_bound_by_unpacking_and_differentiated_carries_the_graph_alone) {
  // gflownet: `losses, rewards = self.flowmatch_loss(...)`, `losses[0].backward()`,
  // then moving averages of `losses[1]` chained over the run.
  std::string source =
      "import torch\n"
      "class Agent:\n"
      "    def train(self, batches, alpha):\n"
      "        ema = None\n"
      "        kept = []\n"
      "        for batch in batches:\n"
      "            self.opt.zero_grad()\n"
      "            losses, rewards = self.flowmatch_loss(batch)\n"
      "            losses[0].backward()\n"
      "            self.opt.step()\n"
      "            kept.append(rewards)\n"
      "            if ema is not None:\n"
      "                ema = alpha * losses[1] + (1 - alpha) * ema\n"
      "            else:\n"
      "                ema = losses[1]\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL101", 13}}));
  EXPECT_EQ(bits_of(source, "rewards") & kCarriesGraph, 0);
}

TEST(lint_value_flow, a_later_element_of_an_opaque_tuple_needs_evidence_to_be_a_tensor) {
  // neural-network-lyapunov: `total_loss` returns the loss and Gurobi costs;
  // nothing says the costs stored in the lists are tensors.
  std::string source =
      "import torch\n"
      "class Trainer:\n"
      "    def train(self, relu, samples):\n"
      "        costs = [None] * self.max_iterations\n"
      "        losses = [None] * self.max_iterations\n"
      "        iter_count = 0\n"
      "        def closure():\n"
      "            loss, costs[iter_count], _ = self.total_loss(relu, samples)\n"
      "            return loss\n"
      "        while iter_count < self.max_iterations:\n"
      "            self.optimizer.zero_grad()\n"
      "            loss = self.optimizer.step(closure)\n"
      "            loss.backward()\n"
      "            losses[iter_count] = loss.item()\n"
      "            if costs[iter_count] < self.tolerance:\n"
      "                return True\n"
      "            iter_count += 1\n";
  EXPECT_EQ(bits_of(source, "costs[iter_count]") & kCarriesGraph, 0);
  EXPECT_TRUE(findings(source).empty());
  // `costs[i].backward()` elsewhere in the function is the evidence.
  std::string evidenced = source;
  evidenced.replace(evidenced.find("            loss.backward()"), 27,
                    "            costs[iter_count].backward()");
  EXPECT_NE(bits_of(evidenced, "costs[iter_count]") & kCarriesGraph, 0);
}

TEST(lint_value_flow, an_element_differentiated_later_shows_the_container_holds_graphs) {
  // neural-network-lyapunov (before its fix): nothing says what
  // `optimizer.step(closure)` returns, but `losses[i - 1].backward()` on
  // the next iteration does; the message names that evidence.
  std::string source =
      "import torch\n"
      "def train(closure, optimizer, max_iterations):\n"
      "    losses = [None] * max_iterations\n"
      "    losses[0] = closure()\n"
      "    iter_count = 1\n"
      "    while iter_count < max_iterations:\n"
      "        optimizer.zero_grad()\n"
      "        losses[iter_count - 1].backward()\n"
      "        losses[iter_count] = optimizer.step(closure)\n"
      "        iter_count += 1\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL101", 9}}));
  EXPECT_NE(
      message_of(source, "GL101")
          .find("`losses[iter_count - 1].backward()` at line 8 shows the elements have a graph"),
      std::string::npos)
      << message_of(source, "GL101");
  // Numbers in the list: `.item()` before storing, backward on the loss.
  std::string numbers =
      "import torch\n"
      "def train(closure, optimizer, max_iterations):\n"
      "    losses = [None] * max_iterations\n"
      "    iter_count = 1\n"
      "    while iter_count < max_iterations:\n"
      "        optimizer.zero_grad()\n"
      "        loss = optimizer.step(closure)\n"
      "        loss.backward()\n"
      "        losses[iter_count] = loss.item()\n"
      "        iter_count += 1\n";
  EXPECT_TRUE(findings(numbers).empty());
}

TEST(lint_value_flow, counters_an_object_keeps_beside_its_tensors_are_ints) {
  std::string source =
      "import torch\n"
      "def run(model, batch):\n"
      "    report = model(batch)\n"
      "    a = report.batch_size\n"
      "    b = report.num_samples\n"
      "    c = report.logits\n";
  EXPECT_EQ(bits_of(source, "report.batch_size"), 0);
  EXPECT_EQ(bits_of(source, "report.num_samples"), 0);
  EXPECT_NE(bits_of(source, "report.logits") & kCarriesGraph, 0);
}

TEST(lint_value_flow, a_project_module_function_defined_in_the_file_has_its_summary) {
  // SevenNet (util.py and inference.py in one excerpt): `util.to_atom_graph_list(output)`
  // splits GPU outputs that still carry their graph.
  std::string source =
      "import torch\n"
      "import sevenn.util as util\n"
      "def to_atom_graph_list(batch):\n"
      "    return torch.split(batch['force'], 4)\n"
      "def infer(model, loader):\n"
      "    model.eval()\n"
      "    output_list = []\n"
      "    for batch in loader:\n"
      "        output = model(batch)\n"
      "        output_list.extend(util.to_atom_graph_list(output))\n"
      "    return output_list\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL102", 10}}));
  // A library's function of the same name is not this one.
  std::string library = source;
  library.replace(library.find("import sevenn.util as util"), 26, "import numpy as util");
  EXPECT_TRUE(findings(library).empty());
}

TEST(lint_value_flow, cpu_of_a_parameter_still_hands_the_callers_graph_to_a_sum) {
  // Horovod's Metric: `self.sum += hvd.allreduce(val.cpu())` keeps the graph
  // of every loss it is given; `.detach().cpu()` keeps none.
  std::string source =
      "import torch\n"
      "import torch.nn.functional as F\n"
      "import horovod.torch as hvd\n"
      "class Metric:\n"
      "    def __init__(self, name):\n"
      "        self.sum = torch.tensor(0.)\n"
      "    def update(self, val):\n"
      "        self.sum += hvd.allreduce(val.cpu(), name=self.name)\n"
      "def train(model, loader, optimizer):\n"
      "    train_loss = Metric('train_loss')\n"
      "    for data, target in loader:\n"
      "        optimizer.zero_grad()\n"
      "        loss = F.cross_entropy(model(data), target)\n"
      "        loss.backward()\n"
      "        optimizer.step()\n"
      "        train_loss.update(loss)\n";
  EXPECT_EQ(findings(source),
            (std::vector<std::pair<std::string, int>>{{"GL101", 8}, {"GL101", 16}}));
  std::string fixed = source;
  fixed.replace(fixed.find("val.cpu()"), 9, "val.detach().cpu()");
  EXPECT_TRUE(findings(fixed).empty());
}

TEST(lint_value_flow, values_computed_from_a_parameter_made_in_the_function_carry_a_graph) {
  // `yy_k = nn.Parameter(x.clone())` in advertorch's EAD attack: the iterate of
  // an optimisation loop is a leaf that requires grad, so what is computed
  // from it has a graph, whatever the opaque calls around it.
  std::string source =
      "import torch\n"
      "import torch.nn as nn\n"
      "def fit(target, steps):\n"
      "    z = nn.Parameter(torch.zeros_like(target))\n"
      "    opt = torch.optim.Adam([z], lr=0.1)\n"
      "    gaps = []\n"
      "    for _ in range(steps):\n"
      "        opt.zero_grad()\n"
      "        gap = z - target\n"
      "        loss = (gap ** 2).sum()\n"
      "        loss.backward()\n"
      "        opt.step()\n"
      "        gaps.append(gap)\n"
      "    return gaps\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL101", 13}}));
  std::string flag = source;
  flag.replace(flag.find("nn.Parameter(torch.zeros_like(target))"), 38,
               "torch.zeros_like(target, requires_grad=True)");
  EXPECT_EQ(findings(flag), (std::vector<std::pair<std::string, int>>{{"GL101", 13}}));
  std::string set_later = source;
  set_later.replace(set_later.find("nn.Parameter(torch.zeros_like(target))"), 38,
                    "torch.zeros_like(target)\n    z.requires_grad_()");
  EXPECT_EQ(findings(set_later), (std::vector<std::pair<std::string, int>>{{"GL101", 14}}));
  // A meta tensor holds no memory.
  std::string meta = source;
  meta.replace(meta.find("nn.Parameter(torch.zeros_like(target))"), 38,
               "torch.empty((0,), device=\"meta\", requires_grad=True)");
  EXPECT_TRUE(findings(meta).empty()) << ::testing::PrintToString(findings(meta));
  std::string detached = source;
  detached.replace(detached.find("gaps.append(gap)"), 16, "gaps.append(gap.detach())");
  EXPECT_TRUE(findings(detached).empty()) << ::testing::PrintToString(findings(detached));
  // The leaf itself has no graph: a list of parameters is no graph store, and
  // nor is what is read back from a list that holds leaves.
  std::string leaves =
      "import torch\n"
      "import torch.nn as nn\n"
      "def make(n, steps):\n"
      "    params = []\n"
      "    firsts = []\n"
      "    for _ in range(steps):\n"
      "        params.append(nn.Parameter(torch.zeros(n)))\n"
      "        firsts.append(params[0] * 1)\n"
      "    return params\n";
  EXPECT_TRUE(findings(leaves).empty()) << ::testing::PrintToString(findings(leaves));
}

// --- where a value escapes -------------------------------------------------

TEST(lint_value_flow, a_helper_that_appends_to_a_container_it_is_handed_stores_at_the_call) {
  // overcomplete's `_log_metrics(logs, ...)`: `logs` lives for the whole
  // run, the helper appends a detached GPU tensor to it every step.
  std::string source =
      "import torch\n"
      "from collections import defaultdict\n"
      "def _log_metrics(logs, model, z, loss):\n"
      "    logs['step_loss'].append(loss.item())\n"
      "    logs['z'].append(z.detach()[::10])\n"
      "def train(model, dataloader, optimizer, criterion, nb_epochs):\n"
      "    logs = defaultdict(list)\n"
      "    for epoch in range(nb_epochs):\n"
      "        for x in dataloader:\n"
      "            optimizer.zero_grad()\n"
      "            z = model(x)\n"
      "            loss = criterion(x, z)\n"
      "            loss.backward()\n"
      "            optimizer.step()\n"
      "            _log_metrics(logs, model, z, loss)\n"
      "    return logs\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL201", 15}}));
  EXPECT_NE(message_of(source, "GL201").find("hands `logs` to `_log_metrics`"), std::string::npos)
      << message_of(source, "GL201");
  std::string numbers = source;
  numbers.replace(numbers.find("z.detach()[::10]"), 16, "z.mean().item()");
  EXPECT_TRUE(findings(numbers).empty());
}

TEST(lint_value_flow, a_helper_handed_its_container_and_value_past_the_fourth_argument_stores) {
  // advertorch's EAD attack: `_update_if_smaller_dist_succeed(adv, labs, out,
  // dist, n, cur_dist, ...)` keeps its 4th argument in its 6th. Every position
  // counts, not the first four.
  std::string source =
      "import torch\n"
      "from collections import defaultdict\n"
      "def _log_metrics(step, epoch, lr, model, x, logs, z):\n"
      "    logs['z'].append(z.detach())\n"
      "def train(model, dataloader, optimizer, criterion, nb_epochs):\n"
      "    logs = defaultdict(list)\n"
      "    for epoch in range(nb_epochs):\n"
      "        for step, x in enumerate(dataloader):\n"
      "            optimizer.zero_grad()\n"
      "            z = model(x)\n"
      "            loss = criterion(x, z)\n"
      "            loss.backward()\n"
      "            optimizer.step()\n"
      "            _log_metrics(step, epoch, 0.1, model, x, logs, z)\n"
      "    return logs\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL201", 14}}));
  std::string numbers = source;
  numbers.replace(numbers.find("z.detach()"), 10, "z.mean().item()");
  EXPECT_TRUE(findings(numbers).empty());
}

TEST(lint_value_flow, a_method_that_keeps_its_sixth_parameter_stores_at_the_call) {
  std::string source =
      "import torch\n"
      "class Recorder:\n"
      "    def __init__(self):\n"
      "        self.kept = []\n"
      "    def record(self, step, epoch, lr, phase, tag, value):\n"
      "        self.kept.append(value)\n"
      "def train(model, loader, optimizer):\n"
      "    recorder = Recorder()\n"
      "    for step, x in enumerate(loader):\n"
      "        optimizer.zero_grad()\n"
      "        loss = model(x).mean()\n"
      "        loss.backward()\n"
      "        optimizer.step()\n"
      "        recorder.record(step, 0, 0.1, 'train', 'loss', loss)\n";
  auto found = findings(source);
  EXPECT_TRUE(std::any_of(found.begin(), found.end(), [](const auto& f) { return f.second == 14; }))
      << ::testing::PrintToString(found);
  std::string number = source;
  number.replace(number.find("'loss', loss)"), 13, "'loss', loss.item())");
  EXPECT_TRUE(findings(number).empty());
}

TEST(lint_value_flow, a_helper_writing_a_graph_into_a_slot_of_a_buffer_it_is_handed_chains_it) {
  // `best[mask] = dist[mask]` in a helper, on a buffer the loop's function
  // made: each write adds a CopySlices node over the buffer's last version,
  // so the buffer keeps every step's graph. Without a graph, or into a list,
  // the write replaces what was there.
  std::string source =
      "import torch\n"
      "def update_best(dist, labels, best_dist, best_labels):\n"
      "    mask = dist < best_dist\n"
      "    best_dist[mask] = dist[mask]\n"
      "    best_labels[mask] = labels[mask]\n"
      "def attack(model, x, y, steps):\n"
      "    best_dist = torch.full((len(x),), 1e10, device=x.device)\n"
      "    best_labels = torch.zeros_like(y)\n"
      "    for _ in range(steps):\n"
      "        out = model(x)\n"
      "        out.sum().backward()\n"
      "        dist = (out - x).pow(2).sum(1)\n"
      "        update_best(dist, y, best_dist, best_labels)\n"
      "    return best_dist\n";
  auto found = findings(source);
  EXPECT_TRUE(std::any_of(found.begin(), found.end(), [](const auto& f) { return f.second == 13; }))
      << ::testing::PrintToString(found);
  EXPECT_NE(message_of(source, "GL101").find("which writes it into the tensor `best_dist`"),
            std::string::npos)
      << message_of(source, "GL101");
  std::string detached = source;
  detached.replace(detached.find("update_best(dist, y"), 18, "update_best(dist.detach(), y");
  EXPECT_TRUE(findings(detached).empty()) << ::testing::PrintToString(findings(detached));
  std::string list = source;
  list.replace(list.find("torch.full((len(x),), 1e10, device=x.device)"), 45, "[1e10] * len(x)");
  EXPECT_TRUE(findings(list).empty()) << ::testing::PrintToString(findings(list));
}

TEST(lint_value_flow, a_method_cache_keeps_an_instance_the_file_deletes) {
  // ParlAI's DynamicBatchWorld: `@lru_cache(maxsize=1)` on a method keeps
  // `self`, so `del world, agent` frees nothing and the next model is loaded
  // on top of the training one. One entry is no bound here: no next call
  // comes to replace it.
  std::string source =
      "import torch\n"
      "from functools import lru_cache\n"
      "class Session:\n"
      "    def __init__(self, agent):\n"
      "        self.agent = agent\n"
      "    @lru_cache(maxsize=1)\n"
      "    def num_batches(self):\n"
      "        return len(self.agent.data)\n"
      "def run(make_agent, load_next):\n"
      "    agent = make_agent()\n"
      "    session = Session(agent)\n"
      "    while session.num_batches() > 0:\n"
      "        session.agent.step()\n"
      "    del session, agent\n"
      "    return load_next()\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL205", 6}}));
  EXPECT_NE(message_of(source, "GL205").find("`del session, agent` at line 14"), std::string::npos)
      << message_of(source, "GL205");
  std::string kept = source;
  kept.replace(kept.find("    del session, agent\n"), 23, "");
  EXPECT_TRUE(findings(kept).empty()) << ::testing::PrintToString(findings(kept));
  std::string factory = source;
  factory.replace(factory.find("Session(agent)"), 14, "make_session(agent)");
  EXPECT_TRUE(findings(factory).empty()) << ::testing::PrintToString(findings(factory));
}

TEST(lint_value_flow, a_mutable_default_argument_is_a_store_that_outlives_every_call) {
  std::string source =
      "import torch\n"
      "def log_step(out, history=[]):\n"
      "    history.append(out.detach())\n"
      "    return len(history)\n"
      "def train(model, loader, optimizer):\n"
      "    for x in loader:\n"
      "        optimizer.zero_grad()\n"
      "        out = model(x)\n"
      "        out.mean().backward()\n"
      "        optimizer.step()\n"
      "        log_step(out)\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL201", 3}}));
  std::string fresh = source;
  fresh.replace(fresh.find("history=[]"), 10, "history=None");
  fresh.replace(fresh.find("    history.append"), 18, "    history = []\n    history.append");
  EXPECT_TRUE(findings(fresh).empty());
}

TEST(lint_value_flow, a_meter_reset_per_epoch_does_not_bound_a_sum_of_graphs) {
  // SLIP: AverageMeter.synchronize() rebinds self.sum once per epoch; every
  // step's loss graph stays chained in the sum until then.
  std::string source =
      "import torch\n"
      "class AverageMeter:\n"
      "    def __init__(self):\n"
      "        self.reset()\n"
      "    def reset(self):\n"
      "        self.sum = 0\n"
      "    def update(self, val, n=1):\n"
      "        self.sum += val * n\n"
      "    def synchronize(self):\n"
      "        t = torch.tensor([self.sum])\n"
      "        self.sum = int(t[0])\n"
      "def train(loader, model, criterion, optimizer):\n"
      "    meter = AverageMeter()\n"
      "    for x, y in loader:\n"
      "        optimizer.zero_grad()\n"
      "        loss = criterion(model(x), y)\n"
      "        loss.backward()\n"
      "        optimizer.step()\n"
      "        meter.update(loss, x.size(0))\n"
      "    meter.synchronize()\n";
  EXPECT_EQ(findings(source),
            (std::vector<std::pair<std::string, int>>{{"GL101", 8}, {"GL101", 19}}));
  // Restarted every step, the sum holds one step's graph at most.
  std::string per_step = source;
  per_step.replace(per_step.find("        meter.update(loss, x.size(0))\n"), 38,
                   "        meter.update(loss, x.size(0))\n        meter.reset()\n");
  EXPECT_TRUE(findings(per_step).empty());
}

TEST(lint_value_flow, a_slot_concatenated_with_graphs_from_itself_chains_them) {
  // MMF's Report: `self[key] = torch.cat((self[key], report[key]))` with
  // reports that still carry their graph.
  std::string source =
      "import torch\n"
      "class Report(dict):\n"
      "    def accumulate(self, report, fields):\n"
      "        for key in fields:\n"
      "            self[key] = torch.cat((self[key], report[key]), dim=0)\n"
      "def train(model, loader, optimizer):\n"
      "    combined = None\n"
      "    for batch in loader:\n"
      "        optimizer.zero_grad()\n"
      "        report = model(batch)\n"
      "        report['loss'].backward()\n"
      "        optimizer.step()\n"
      "        if combined is None:\n"
      "            combined = report\n"
      "        else:\n"
      "            combined.accumulate(report, ['logits'])\n";
  auto got = findings(source);
  EXPECT_NE(std::find(got.begin(), got.end(), std::make_pair(std::string("GL101"), 5)), got.end())
      << testing::lint_snippet(source).findings.size();
  std::string detached = source;
  detached.replace(detached.find("combined.accumulate(report,"), 27,
                   "combined.accumulate(report.detach(),");
  detached.replace(detached.find("combined = report\n"), 18, "combined = report.detach()\n");
  EXPECT_TRUE(findings(detached).empty());
}

TEST(lint_value_flow, predict_step_returning_gpu_tensors_is_kept_by_trainer_predict) {
  std::string source =
      "import torch\n"
      "from lightning import LightningModule\n"
      "class Wrapper(LightningModule):\n"
      "    def forward(self, x):\n"
      "        return self.model(x)\n"
      "    def predict_step(self, batch, batch_idx):\n"
      "        results = self(batch)\n"
      "        return results\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL204", 8}}));
  std::string host = source;
  host.replace(host.find("return results"), 14, "return results.detach().cpu()");
  EXPECT_TRUE(findings(host).empty());
  std::string not_returned =
      source +
      "def run(trainer, model, dm):\n"
      "    trainer.predict(model, datamodule=dm, return_predictions=False)\n";
  EXPECT_TRUE(findings(not_returned).empty());
}

TEST(lint_value_flow, trainer_predict_whose_result_is_thrown_away_should_not_keep_it) {
  // eva: predictions written by a callback, yet trainer.predict keeps them all.
  std::string source =
      "from eva import trainers\n"
      "class Interface:\n"
      "    def predict(self, model, data, trainer):\n"
      "        trainer.predict(model=model, datamodule=data)\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL204", 4}}));
  std::string off = source;
  off.replace(off.find("datamodule=data)"), 16, "datamodule=data, return_predictions=False)");
  EXPECT_TRUE(findings(off).empty());
  std::string used = source;
  used.replace(used.find("        trainer.predict("), 24, "        return trainer.predict(");
  EXPECT_TRUE(findings(used).empty()) << "the caller wants the predictions";
}

TEST(lint_value_flow, hook_handles_appended_on_every_call_to_a_list_never_emptied) {
  // Splice's extractor: `_clear_hooks` removes the hooks but keeps their
  // handles; the fix empties the list.
  std::string source =
      "import torch\n"
      "class Extractor:\n"
      "    def __init__(self, model):\n"
      "        self.model = model\n"
      "        self.hook_handlers = []\n"
      "        self.outputs = {'block': []}\n"
      "    def _init_hooks_data(self):\n"
      "        for key in ['block']:\n"
      "            self.outputs[key] = []\n"
      "    def _register_hooks(self):\n"
      "        for block in self.model.blocks:\n"
      "            self.hook_handlers.append(block.register_forward_hook(self._get_hook()))\n"
      "    def _clear_hooks(self):\n"
      "        for handler in self.hook_handlers:\n"
      "            handler.remove()\n"
      "    def _get_hook(self):\n"
      "        def _hook(model, input, output):\n"
      "            self.outputs['block'].append(output)\n"
      "        return _hook\n"
      "    def features(self, image):\n"
      "        self._register_hooks()\n"
      "        self.model(image)\n"
      "        feature = self.outputs['block']\n"
      "        self._clear_hooks()\n"
      "        self._init_hooks_data()\n"
      "        return feature\n";
  // The hook's appends go to a slot emptied after every call: only the
  // handles pile up.
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL202", 12}}));
  std::string emptied = source;
  emptied.replace(emptied.find("            handler.remove()\n"), 29,
                  "            handler.remove()\n        self.hook_handlers = []\n");
  EXPECT_TRUE(findings(emptied).empty());
}

// A hook that holds its owner (a bound method, or a closure over `self`)
// registered in an __init__ with the handle dropped, while the object is
// made anew on every iteration: each old object stays alive through the
// layer's hook dict (jacobgil/pytorch-grad-cam#132).
TEST(lint_value_flow, hook_holding_its_owner_registered_per_instance) {
  std::string source =
      "import torch\n"
      "class Extractor:\n"
      "    def __init__(self, model, layer):\n"
      "        self.model = model\n"
      "        self.activation = None\n"
      "        layer.register_forward_hook(self.save)\n"
      "    def save(self, module, input, output):\n"
      "        self.activation = output.detach()\n"
      "class Cam(Extractor):\n"
      "    def __init__(self, model, layer):\n"
      "        super().__init__(model, layer)\n"
      "for i in range(100):\n"
      "    cam = Cam(model=model, layer=model.conv5)\n"
      "    out = cam.model(x)\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL202", 6}}));
  // The evidence chain: what holds the object, who builds it where.
  std::string message = message_of(source, "GL202");
  EXPECT_NE(message.find("`self.save` is a bound method"), std::string::npos) << message;
  EXPECT_NE(message.find("`Cam(model=model, layer=model.conv5)` in the loop at line 13"),
            std::string::npos)
      << message;
  // The handle kept (and so removable): nothing to report.
  std::string kept = source;
  kept.replace(kept.find("        layer.register_forward_hook(self.save)\n"), 47,
               "        self.handle = layer.register_forward_hook(self.save)\n");
  EXPECT_TRUE(findings(kept).empty());
  // Objects collected on purpose (`[Cam(...) for ...]`) are not dropped per iteration.
  std::string collected = source;
  collected.replace(collected.find("for i in range(100):"), std::string::npos,
                    "cams = [Cam(model, l) for l in layers]\n");
  EXPECT_TRUE(findings(collected).empty());
}

// A nested hook that uses `self`, registered on the module itself: a
// reference cycle per instance made in the loop (pytorch/pytorch#46386).
TEST(lint_value_flow, hook_closure_over_self_is_a_cycle_per_instance) {
  std::string source =
      "import torch\n"
      "import torch.nn as nn\n"
      "class Leaky(nn.Module):\n"
      "    def __init__(self):\n"
      "        super().__init__()\n"
      "        def fw_hook(m, m_in, m_out):\n"
      "            self(m_in)\n"
      "        self.register_forward_hook(fw_hook)\n"
      "for i in range(1000):\n"
      "    net = Leaky()\n"
      "    net.to('cuda:0')\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL202", 8}}));
  std::string message = message_of(source, "GL202");
  EXPECT_NE(message.find("uses `self` (line 7)"), std::string::npos) << message;
  EXPECT_NE(message.find("reference cycle"), std::string::npos) << message;
  // A hook that does not refer to its owner keeps nothing of it.
  std::string plain = source;
  plain.replace(plain.find("            self(m_in)\n"), 23, "            print(m_in)\n");
  EXPECT_TRUE(findings(plain).empty());
}

// GL207: a lambda that uses `self` kept on the object (here inside a
// scheduler), the object holding an optimizer and made anew on every
// iteration: a reference cycle per iteration (pytorch/pytorch#47589).
TEST(lint_value_flow, closure_over_self_kept_on_an_object_made_per_iteration) {
  std::string source =
      "import torch\n"
      "weight = torch.nn.Linear(100, 100).to('cuda')\n"
      "class Foo:\n"
      "    def __init__(self):\n"
      "        self.lr = 1.0\n"
      "        self.op = torch.optim.Adam(weight.parameters())\n"
      "        self.sc = torch.optim.lr_scheduler.LambdaLR(self.op, lr_lambda=lambda s: self.lr)\n"
      "    def run(self):\n"
      "        self.sc.step()\n"
      "while True:\n"
      "    Foo().run()\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL207", 7}}));
  std::string message = message_of(source, "GL207");
  EXPECT_NE(message.find("the lambda `lambda s: self.lr` uses `self`"), std::string::npos)
      << message;
  EXPECT_NE(message.find("keeps an optimizer's state"), std::string::npos) << message;
  EXPECT_NE(message.find("`Foo()` in the loop at line 11"), std::string::npos) << message;
  // The lambda uses a value, not the object: no cycle.
  std::string value = source;
  value.replace(value.find("lambda s: self.lr"), 17, "lambda s: 1.0");
  EXPECT_TRUE(findings(value).empty());
  // A weak reference breaks the cycle.
  std::string weak = source;
  weak.replace(weak.find("torch.optim.lr_scheduler.LambdaLR(self.op, lr_lambda=lambda s: self.lr)"),
               71, "weakref.WeakMethod(self.run)");
  EXPECT_TRUE(findings(weak).empty());
  // Made once, not per iteration.
  std::string once = source;
  once.replace(once.find("while True:\n    Foo().run()\n"), 28, "foo = Foo()\nfoo.run()\n");
  EXPECT_TRUE(findings(once).empty());
  // Nothing shows GPU memory in the object: not reported.
  std::string host = source;
  host.replace(host.find("        self.op = torch.optim.Adam(weight.parameters())\n"), 56,
               "        self.op = make_opt()\n");
  EXPECT_TRUE(findings(host).empty());
}

// GL207 through autograd: a hook on a tensor's grad_fn that uses `self`,
// while a forward hook of a subclass keeps the module's input on `self`:
// object -> input -> grad_fn -> hook -> object, a cycle the collector does
// not see (chr5tphr/zennit#13).
TEST(lint_value_flow, hook_on_grad_fn_using_self_while_self_keeps_the_input) {
  std::string source =
      "import torch\n"
      "class Hook:\n"
      "    def pre_forward(self, module, input):\n"
      "        def wrapper(grad_input, grad_output):\n"
      "            return self.backward(module, grad_input)\n"
      "        output = Identity.apply(input[0])\n"
      "        output.grad_fn.register_hook(wrapper)\n"
      "        return (output.clone(),)\n"
      "class LinearHook(Hook):\n"
      "    def forward(self, module, input, output):\n"
      "        self.input = input\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL207", 11}}));
  std::string message = message_of(source, "GL207");
  EXPECT_NE(message.find("`output.grad_fn.register_hook(wrapper)` (line 7)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("the hook `wrapper` uses `self`"), std::string::npos) << message;
  // The fix: the hook holds the object weakly.
  std::string weak = source;
  weak.replace(weak.find("self.backward(module, grad_input)"), 33,
               "hook_ref().backward(module, grad_input)");
  EXPECT_TRUE(findings(weak).empty());
  // A gradient kept by a backward hook is no tensor of the forward graph.
  std::string grads = source;
  grads.replace(
      grads.find("    def forward(self, module, input, output):\n        self.input = input\n"),
      std::string::npos,
      "    def pre_backward(self, module, grad_input, grad_output):\n"
      "        self.grad_output = grad_output\n");
  EXPECT_TRUE(findings(grads).empty());
}

// A dict keyed by the tensor itself keeps the tensor, whatever the value
// (pytorch_memlab#18): found at the store, with what shows the key is a
// tensor; keyed by `id(tensor)`, or a WeakKeyDictionary, it keeps nothing.
TEST(lint_value_flow, dict_keyed_by_the_tensor_keeps_it) {
  std::string source =
      "import torch\n"
      "class Reporter:\n"
      "    def __init__(self):\n"
      "        self.names = {}\n"
      "    def name_of(self, tensor):\n"
      "        if tensor not in self.names:\n"
      "            self.names[tensor] = 'Tensor' + str(len(self.names))\n"
      "        return self.names[tensor]\n"
      "    def report(self, tensors):\n"
      "        for t in tensors:\n"
      "            assert isinstance(t, torch.Tensor)\n"
      "            print(self.name_of(t), t.numel())\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL201", 7}}));
  std::string message = message_of(source, "GL201");
  EXPECT_NE(message.find("keys `self.names` by the tensor `tensor` itself"), std::string::npos)
      << message;
  EXPECT_NE(message.find("`isinstance(t, torch.Tensor)` at line 11"), std::string::npos) << message;
  std::string by_id = source;
  by_id.replace(by_id.find("self.names[tensor] = "), 21, "self.names[id(tensor)] = ");
  EXPECT_TRUE(findings(by_id).empty());
  std::string weak = source;
  weak.replace(weak.find("self.names = {}"), 15, "self.names = weakref.WeakKeyDictionary()");
  EXPECT_TRUE(findings(weak).empty());
}

// GL206 through parameters: the metric class reaches the attribute as a
// class object a subclass hands to its base's __init__, which builds it and
// hands the instance on (torchok#166); reset by the fix, nothing to report.
TEST(lint_value_flow, metric_class_handed_in_through_super_init) {
  std::string source =
      "import torch\n"
      "from torchmetrics import Metric, RetrievalMAP\n"
      "class IndexMeter(Metric):\n"
      "    def __init__(self, metric_func, k=None):\n"
      "        super().__init__()\n"
      "        self.metric_func = metric_func\n"
      "    def compute(self):\n"
      "        total = 0\n"
      "        for args in self.batches():\n"
      "            total += self.metric_func(*args).mean()\n"
      "        return total\n"
      "class MetricMeter(IndexMeter):\n"
      "    def __init__(self, metric_class, metric_params=None, k=None):\n"
      "        metric_func = metric_class(**(metric_params or {}))\n"
      "        super().__init__(metric_func=metric_func, k=k)\n"
      "class MAPMeter(MetricMeter):\n"
      "    def __init__(self, k=None):\n"
      "        super().__init__(metric_class=RetrievalMAP, k=k)\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL206", 10}}));
  std::string message = message_of(source, "GL206");
  EXPECT_NE(message.find("`torchmetrics.RetrievalMAP` (handed in as `metric_class=RetrievalMAP` "
                         "at line 18)"),
            std::string::npos)
      << message;
  std::string reset = source + "    def reset(self):\n        self.metric_func.reset()\n";
  EXPECT_TRUE(findings(reset).empty());
  // A class without list states handed in the same way keeps nothing.
  std::string sums = source;
  sums.replace(sums.find("metric_class=RetrievalMAP"), 25, "metric_class=MeanMetric");
  EXPECT_TRUE(findings(sums).empty());
}

// --- what bounds a store ---------------------------------------------------

TEST(lint_value_flow, one_tuple_assignment_empties_every_list_it_names) {
  // Lists emptied every optimizer step by `a, b, c = [], [], {}`.
  std::string source =
      "import torch\n"
      "def train(model, loader, optimizer, report):\n"
      "    preds, targets, stats = [], [], {}\n"
      "    for step, (x, y) in enumerate(loader):\n"
      "        out = model(x)\n"
      "        loss = out.mean()\n"
      "        loss.backward()\n"
      "        preds.append(out.detach())\n"
      "        targets.append(y)\n"
      "        if step % 8 == 0:\n"
      "            optimizer.step()\n"
      "            optimizer.zero_grad()\n"
      "            report(preds, targets)\n"
      "            preds, targets, stats = [], [], {}\n";
  EXPECT_TRUE(findings(source).empty());
  std::string never = source;
  never.replace(never.find("            preds, targets, stats = [], [], {}\n"), 45, "");
  EXPECT_EQ(findings(never), (std::vector<std::pair<std::string, int>>{{"GL201", 8}}));
}

TEST(lint_value_flow, a_conditional_rebinding_to_a_value_starts_it_and_bounds_nothing) {
  // gflownet: `else: ema = losses[1]` starts the moving average; the chain
  // `ema = a * losses[1] + (1 - a) * ema` still spans the run.
  std::string source =
      "import torch\n"
      "def train(model, loader, optimizer, alpha):\n"
      "    ema = None\n"
      "    for x in loader:\n"
      "        optimizer.zero_grad()\n"
      "        loss = model(x).mean()\n"
      "        loss.backward()\n"
      "        optimizer.step()\n"
      "        if ema is not None:\n"
      "            ema = alpha * loss + (1 - alpha) * ema\n"
      "        else:\n"
      "            ema = loss\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL101", 10}}));
}

TEST(lint_value_flow, a_history_grown_with_cat_in_one_branch_chains_every_graph) {
  std::string source =
      "import torch\n"
      "def train(model, loader, optimizer):\n"
      "    hist = None\n"
      "    for x in loader:\n"
      "        optimizer.zero_grad()\n"
      "        out = model(x)\n"
      "        out.mean().backward()\n"
      "        optimizer.step()\n"
      "        hist = out if hist is None else torch.cat([hist, out])\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL101", 9}}));
  std::string detached = source;
  detached.replace(detached.find("torch.cat([hist, out])"), 22, "torch.cat([hist, out.detach()])");
  detached.replace(detached.find("hist = out if"), 13, "hist = out.detach() if");
  auto got = findings(detached);
  EXPECT_TRUE(
      std::none_of(got.begin(), got.end(), [](const auto& f) { return f.first == "GL101"; }));
}

TEST(lint_value_flow, a_slot_filled_on_first_use_is_no_reset) {
  // pytracking: `if self.stats[name] is None: self.stats[name] = OrderedDict(...)`
  // creates the meters once; they keep summing graphs.
  std::string source =
      "import torch\n"
      "from collections import OrderedDict\n"
      "class AverageMeter:\n"
      "    def __init__(self):\n"
      "        self.sum = 0\n"
      "    def update(self, val, n=1):\n"
      "        self.sum += val * n\n"
      "class Trainer:\n"
      "    def __init__(self, actor, optimizer):\n"
      "        self.actor = actor\n"
      "        self.optimizer = optimizer\n"
      "        self.stats = {}\n"
      "    def cycle(self, loader):\n"
      "        for data in loader:\n"
      "            loss, stats = self.actor(data)\n"
      "            self.optimizer.zero_grad()\n"
      "            loss.backward()\n"
      "            self.optimizer.step()\n"
      "            self._update_stats(stats, loader)\n"
      "    def _update_stats(self, new_stats, loader):\n"
      "        if self.stats.get(loader.name) is None:\n"
      "            self.stats[loader.name] = OrderedDict({k: AverageMeter() for k in new_stats})\n"
      "        for name, val in new_stats.items():\n"
      "            self.stats[loader.name][name].update(val, 1)\n";
  auto got = findings(source);
  EXPECT_NE(std::find(got.begin(), got.end(), std::make_pair(std::string("GL101"), 24)), got.end());
}

TEST(lint_value_flow, a_list_trimmed_to_a_size_bound_is_bounded) {
  std::string source =
      "import torch\n"
      "def train(model, loader, optimizer, max_keep=100):\n"
      "    recent = []\n"
      "    for x in loader:\n"
      "        optimizer.zero_grad()\n"
      "        out = model(x)\n"
      "        out.mean().backward()\n"
      "        optimizer.step()\n"
      "        recent.append(out.detach())\n"
      "        if len(recent) > max_keep:\n"
      "            TRIM\n";
  for (std::string trim : {"recent = recent[1:]", "recent.pop(0)", "del recent[0]"}) {
    std::string s = source;
    s.replace(s.find("TRIM"), 4, trim);
    EXPECT_TRUE(findings(s).empty()) << trim;
  }
  std::string untrimmed = source;
  untrimmed.replace(untrimmed.find("        if len(recent) > max_keep:\n            TRIM\n"), 52,
                    "");
  EXPECT_EQ(findings(untrimmed), (std::vector<std::pair<std::string, int>>{{"GL201", 9}}));
}

TEST(lint_value_flow, a_weak_key_cache_keeps_nothing_alive) {
  std::string source =
      "import weakref\n"
      "import torch\n"
      "class Cache:\n"
      "    def __init__(self):\n"
      "        self._cache = weakref.WeakKeyDictionary()\n"
      "    def get(self, module, x):\n"
      "        out = module(x)\n"
      "        self._cache[module] = out\n"
      "        return out\n"
      "def train(model, loader, optimizer):\n"
      "    cache = Cache()\n"
      "    for step, x in enumerate(loader):\n"
      "        optimizer.zero_grad()\n"
      "        out = cache.get(model, x)\n"
      "        out.mean().backward()\n"
      "        optimizer.step()\n";
  EXPECT_TRUE(findings(source).empty());
}

TEST(lint_value_flow, detached_numbers_a_function_collects_for_its_result_are_not_a_leak) {
  // dair_pll: one detached loss per step, averaged for the epoch's result.
  std::string source =
      "import torch\n"
      "def train_epoch(data, model, optimizer):\n"
      "    losses = []\n"
      "    for x, y in data:\n"
      "        optimizer.zero_grad()\n"
      "        loss = (model(x) - y).pow(2).mean()\n"
      "        losses.append(loss.clone().detach())\n"
      "        loss.backward()\n"
      "        optimizer.step()\n"
      "    return sum(losses) / len(losses)\n";
  EXPECT_TRUE(findings(source).empty());
  // Whole outputs (not one number each) are a different matter.
  std::string outputs = source;
  outputs.replace(outputs.find("losses.append(loss.clone().detach())"), 36,
                  "losses.append(model(x).detach())");
  EXPECT_EQ(findings(outputs), (std::vector<std::pair<std::string, int>>{{"GL201", 7}}));
}

TEST(lint_value_flow, one_number_per_epoch_is_not_a_growing_store) {
  // ImVisible: epoch averages under no_grad appended to history lists.
  std::string source =
      "import torch\n"
      "def run(model, train_loader, val_loader, optimizer, epochs):\n"
      "    valid_losses = []\n"
      "    for epoch in range(epochs):\n"
      "        for x in train_loader:\n"
      "            optimizer.zero_grad()\n"
      "            model(x).mean().backward()\n"
      "            optimizer.step()\n"
      "        total = 0\n"
      "        with torch.no_grad():\n"
      "            for x in val_loader:\n"
      "                total += model(x).mean()\n"
      "        valid_losses.append(total / len(val_loader))\n";
  EXPECT_TRUE(findings(source).empty());
  // Whole outputs per epoch are another matter.
  std::string outputs = source;
  outputs.replace(outputs.find("valid_losses.append(total / len(val_loader))"), 45,
                  "valid_losses.append(model(x).detach())");
  EXPECT_EQ(findings(outputs), (std::vector<std::pair<std::string, int>>{{"GL201", 13}}));
}

TEST(lint_value_flow, setitem_of_an_object_that_keeps_its_value_is_a_store_at_the_assignment) {
  // IBM/mi-prometheus#111: `stat_col['loss'] = loss` goes through
  // StatisticsCollector.__setitem__, which appends the value to a list the
  // collector empties only once the loop is over: every step's graph stays.
  std::string source =
      "import torch\n"
      "class StatisticsCollector:\n"
      "    def __init__(self):\n"
      "        self.statistics = dict()\n"
      "    def add_statistic(self, key):\n"
      "        self.statistics[key] = list()\n"
      "    def __setitem__(self, key, value):\n"
      "        self.statistics[key].append(value)\n"
      "    def empty(self):\n"
      "        self.statistics.clear()\n"
      "def collect(model, batch, stat_col):\n"
      "    loss = torch.nn.functional.cross_entropy(model(batch.cuda()), batch)\n"
      "    stat_col['loss'] = loss\n"
      "    return loss\n"
      "def train(model, loader, optimizer):\n"
      "    stat_col = StatisticsCollector()\n"
      "    stat_col.add_statistic('loss')\n"
      "    for batch in loader:\n"
      "        optimizer.zero_grad()\n"
      "        loss = collect(model, batch, stat_col)\n"
      "        loss.backward()\n"
      "        optimizer.step()\n"
      "    stat_col.empty()\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL101", 13}}));
  EXPECT_NE(message_of(source, "GL101").find("StatisticsCollector.__setitem__"), std::string::npos);
  // A detached tensor is bounded by the emptying after the loop.
  std::string detached = source;
  detached.replace(detached.find("stat_col['loss'] = loss\n"), 24,
                   "stat_col['loss'] = loss.detach()\n");
  EXPECT_TRUE(findings(detached).empty());
  // A method that is no `__setitem__` is not what the assignment calls.
  std::string other = source;
  other.replace(other.find("__setitem__"), 11, "put");
  EXPECT_TRUE(findings(other).empty());
}

TEST(lint_value_flow, a_loss_named_method_of_a_parameter_is_a_loss_of_its_arguments) {
  // IBM/mi-prometheus worker.py: `loss = problem.evaluate_loss(data_dict,
  // logits)` with `problem` a parameter: the loss of the model's logits.
  std::string source =
      "import torch\n"
      "class Worker:\n"
      "    def collect(self, model, problem, data_dict):\n"
      "        logits = model(data_dict)\n"
      "        loss = problem.evaluate_loss(data_dict, logits)\n"
      "        stats = problem.summary(data_dict, logits)\n"
      "        return loss\n";
  EXPECT_NE(bits_of(source, "problem.evaluate_loss(data_dict, logits)") & kCarriesGraph, 0);
  // Any other method of the parameter says nothing of its result.
  EXPECT_EQ(bits_of(source, "problem.summary(data_dict, logits)") & kCarriesGraph, 0);
}

TEST(lint_value_flow, an_emptying_method_called_once_per_epoch_does_not_bound_graphs) {
  // IBM/mi-prometheus offline_trainer.py: `stat_col.empty()` runs at the
  // start of each epoch, beside the episode loop; its own loop over the keys
  // is no step loop. Every episode's loss graph stays until the next epoch.
  std::string source =
      "import torch\n"
      "class StatisticsCollector:\n"
      "    def __init__(self):\n"
      "        self.statistics = dict()\n"
      "    def __setitem__(self, key, value):\n"
      "        self.statistics[key].append(value)\n"
      "    def empty(self):\n"
      "        for key in self.statistics.keys():\n"
      "            del self.statistics[key][:]\n"
      "def collect(model, batch, stat_col):\n"
      "    loss = torch.nn.functional.cross_entropy(model(batch.cuda()), batch)\n"
      "    stat_col['loss'] = loss\n"
      "    return loss\n"
      "def train(model, loader, optimizer, epochs):\n"
      "    stat_col = StatisticsCollector()\n"
      "    for epoch in range(epochs):\n"
      "        stat_col.empty()\n"
      "        for batch in loader:\n"
      "            optimizer.zero_grad()\n"
      "            loss = collect(model, batch, stat_col)\n"
      "            loss.backward()\n"
      "            optimizer.step()\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL101", 12}}));
  // Emptied inside the step loop, it holds one step's graph at most.
  std::string per_step = source;
  per_step.replace(per_step.find("        stat_col.empty()\n"), 25, "");
  per_step.replace(per_step.find("            optimizer.step()\n"), 29,
                   "            optimizer.step()\n            stat_col.empty()\n");
  EXPECT_TRUE(findings(per_step).empty());
}

}  // namespace
}  // namespace gpuleak::lint

namespace gpuleak::lint {
namespace {

// --- Lightning step outputs and lists emptied at epoch end (second round) ---

TEST(lint_value_flow, side_losses_returned_beside_the_loss_are_reported_at_their_entries) {
  // pdearena #4: the step's dict keeps two side losses with their graphs for
  // training_epoch_end; the criterion attribute says they are losses.
  std::string source =
      "import torch\n"
      "from pytorch_lightning import LightningModule\n"
      "class M(LightningModule):\n"
      "    def __init__(self):\n"
      "        super().__init__()\n"
      "        self.model = torch.nn.Linear(4, 4)\n"
      "        self.train_criterion = torch.nn.MSELoss()\n"
      "    def training_step(self, batch, batch_idx):\n"
      "        x, y = batch\n"
      "        pred = self.model(x)\n"
      "        loss = self.train_criterion(pred, y)\n"
      "        side = self.train_criterion(pred[:, :2], y[:, :2])\n"
      "        return {\n"
      "            'loss': loss,\n"
      "            'side': side,\n"
      "            'count': 3,\n"
      "        }\n"
      "    def training_epoch_end(self, outputs):\n"
      "        pass\n";
  auto f = findings(source);
  EXPECT_NE(std::find(f.begin(), f.end(), std::make_pair(std::string("GL204"), 15)), f.end());
  EXPECT_EQ(std::count_if(f.begin(), f.end(), [](const auto& p) { return p.first == "GL204"; }), 1);
  EXPECT_NE(message_of(source, "GL204").find("carries an autograd graph"), std::string::npos);
}

TEST(lint_value_flow, side_losses_detached_in_the_returned_dict_are_not_reported) {
  std::string source =
      "import torch\n"
      "from pytorch_lightning import LightningModule\n"
      "class M(LightningModule):\n"
      "    def __init__(self):\n"
      "        super().__init__()\n"
      "        self.model = torch.nn.Linear(4, 4)\n"
      "        self.train_criterion = torch.nn.MSELoss()\n"
      "    def training_step(self, batch, batch_idx):\n"
      "        x, y = batch\n"
      "        pred = self.model(x)\n"
      "        loss = self.train_criterion(pred, y)\n"
      "        side = self.train_criterion(pred[:, :2], y[:, :2])\n"
      "        return {'loss': loss, 'side': side.detach()}\n"
      "    def training_epoch_end(self, outputs):\n"
      "        pass\n";
  EXPECT_TRUE(findings(source).empty());
}

TEST(lint_value_flow, graphs_kept_in_a_list_emptied_only_at_epoch_end_grow_for_the_epoch) {
  // An epoch-end clear bounds tensors to one epoch, but each kept graph holds
  // its step's activations until then.
  std::string source =
      "import torch\n"
      "import lightning as L\n"
      "class M(L.LightningModule):\n"
      "    def __init__(self, model):\n"
      "        super().__init__()\n"
      "        self.model = model\n"
      "        self.kept = []\n"
      "    def training_step(self, batch, batch_idx):\n"
      "        x, y = batch\n"
      "        out = self.model(x)\n"
      "        loss = torch.nn.functional.cross_entropy(out, y)\n"
      "        self.kept.append(out)\n"
      "        return loss\n"
      "    def on_train_epoch_end(self):\n"
      "        self.kept.clear()\n";
  auto f = findings(source);
  EXPECT_NE(std::find(f.begin(), f.end(), std::make_pair(std::string("GL101"), 12)), f.end());
}

TEST(lint_value_flow, the_backpropagated_loss_kept_until_epoch_end_is_not_reported) {
  // Lightning's migration guide: the loss it backpropagates, kept for the
  // epoch average, has its activations freed by backward.
  std::string source =
      "import torch\n"
      "import lightning as L\n"
      "class M(L.LightningModule):\n"
      "    def __init__(self, model):\n"
      "        super().__init__()\n"
      "        self.model = model\n"
      "        self.training_step_outputs = []\n"
      "    def training_step(self, batch, batch_idx):\n"
      "        x, y = batch\n"
      "        loss = torch.nn.functional.cross_entropy(self.model(x), y)\n"
      "        self.training_step_outputs.append(loss)\n"
      "        return loss\n"
      "    def on_train_epoch_end(self):\n"
      "        self.training_step_outputs.clear()\n";
  EXPECT_TRUE(findings(source).empty());
}

TEST(lint_value_flow, graphs_kept_in_a_list_emptied_every_step_are_bounded) {
  std::string source =
      "import torch\n"
      "def train(model, loader, optimizer):\n"
      "    kept = []\n"
      "    for x, y in loader:\n"
      "        out = model(x)\n"
      "        kept.append(out)\n"
      "        loss = torch.stack(kept).sum()\n"
      "        loss.backward()\n"
      "        optimizer.step()\n"
      "        optimizer.zero_grad()\n"
      "        kept.clear()\n";
  EXPECT_TRUE(findings(source).empty());
}

}  // namespace
}  // namespace gpuleak::lint

namespace gpuleak::lint {
namespace {

// --- Lightning's hook signatures as evidence (third round) -----------------

TEST(lint_value_flow, outputs_a_lightning_callback_is_handed_are_gpu_tensors) {
  // The documented signature on_validation_batch_end(trainer, pl_module,
  // outputs, batch, batch_idx): `outputs` is what the step returned.
  std::string source =
      "import lightning as L\n"
      "class Collect(L.Callback):\n"
      "    def __init__(self):\n"
      "        self.preds = []\n"
      "    def on_validation_batch_end(self, trainer, pl_module, out, batch, batch_idx):\n"
      "        self.preds.append(out)\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL201", 6}}));
  EXPECT_NE(message_of(source, "GL201")
                .find("`out` is what Lightning hands `on_validation_batch_end`: the step's "
                      "outputs, on the GPU"),
            std::string::npos);
  std::string host = source;
  host.replace(host.find("append(out)"), 11, "append(out.detach().cpu())");
  EXPECT_TRUE(findings(host).empty());
  std::string index_only = source;
  index_only.replace(index_only.find("append(out)"), 11, "append(batch_idx)");
  EXPECT_TRUE(findings(index_only).empty());
}

TEST(lint_value_flow, a_method_named_like_a_hook_outside_lightning_is_not_handed_outputs) {
  // Neither a Callback base, nor (trainer, pl_module) first, nor a LightningModule.
  std::string source =
      "import torch\n"
      "class Recorder:\n"
      "    def __init__(self):\n"
      "        self.seen = []\n"
      "    def on_train_batch_end(self, out, batch, batch_idx):\n"
      "        self.seen.append(out)\n";
  EXPECT_TRUE(findings(source).empty());
}

TEST(lint_value_flow, prediction_outputs_kept_until_the_pass_ends_fill_the_gpu) {
  // pytorch-forecasting #2224: emptied at on_predict_epoch_end, after every
  // batch of the data set has been kept on the GPU.
  std::string source =
      "from lightning.pytorch.callbacks import BasePredictionWriter\n"
      "class Keep(BasePredictionWriter):\n"
      "    def __init__(self):\n"
      "        self.kept = []\n"
      "    def on_predict_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):\n"
      "        self.kept.append(outputs)\n"
      "    def on_predict_epoch_end(self, trainer, pl_module):\n"
      "        self.result = self.kept\n"
      "        self.kept = []\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL201", 6}}));
  EXPECT_NE(message_of(source, "GL201").find("for every batch of the prediction pass"),
            std::string::npos);
  std::string written = source;
  written.replace(written.find("        self.kept.append(outputs)\n"), 34,
                  "        self.kept.append(outputs)\n"
                  "        self.write(self.kept)\n"
                  "        self.kept.clear()\n");
  EXPECT_TRUE(findings(written).empty()) << "emptied on every batch";
}

}  // namespace
}  // namespace gpuleak::lint

namespace gpuleak::lint {
namespace {

// --- in-place updates of kept tensors from a forward's input (third round) ---

TEST(lint_value_flow, a_buffer_updated_in_place_from_the_forward_input_chains_graphs) {
  // nflows #10: batch statistics of the input, added into running buffers.
  std::string source =
      "import torch\n"
      "from nflows.transforms.base import Transform\n"
      "class BatchNorm(Transform):\n"
      "    def __init__(self, n, momentum=0.1):\n"
      "        super().__init__()\n"
      "        self.momentum = momentum\n"
      "        self.register_buffer('running_mean', torch.zeros(n))\n"
      "    def forward(self, inputs):\n"
      "        mean = inputs.mean(0)\n"
      "        self.running_mean.mul_(1 - self.momentum).add_(mean * self.momentum)\n"
      "        return inputs - mean\n";
  EXPECT_EQ(findings(source), (std::vector<std::pair<std::string, int>>{{"GL101", 10}}));
  EXPECT_NE(message_of(source, "GL101")
                .find("is computed from `inputs`, the input of `forward`: in training"),
            std::string::npos);
  std::string detached = source;
  detached.replace(detached.find("add_(mean * self.momentum)"), 26,
                   "add_(mean.detach() * self.momentum)");
  EXPECT_TRUE(findings(detached).empty());
  std::string no_grad = source;
  no_grad.replace(no_grad.find("        self.running_mean.mul_"), 30,
                  "        with torch.no_grad():\n            self.running_mean.mul_");
  EXPECT_TRUE(findings(no_grad).empty());
}

TEST(lint_value_flow, a_buffer_updated_from_values_unrelated_to_the_input_is_not_reported) {
  // A counter or a statistic of something else: no evidence of a graph.
  std::string source =
      "import torch\n"
      "from torch import nn\n"
      "class Counter(nn.Module):\n"
      "    def __init__(self):\n"
      "        super().__init__()\n"
      "        self.register_buffer('seen', torch.zeros(()))\n"
      "    def forward(self, x, step):\n"
      "        self.seen.add_(step)\n"
      "        return x\n"
      "    def update(self, x):\n"
      "        self.seen.add_(x.mean())\n";
  EXPECT_TRUE(findings(source).empty());
}

// --- steps run by helpers, keys of dicts (fourth round) ---------------------

TEST(lint_value_flow, a_method_of_an_instance_of_a_file_class_returns_what_it_computes) {
  // `train_util = Trainer(...)` at module level, `train_util.compute(imgs)` in
  // the loop: the summary of Trainer.compute, though the receiver is not self.
  std::string source =
      "import torch\n"
      "class Trainer:\n"
      "    def __init__(self, net):\n"
      "        self.net = net\n"
      "    def compute(self, imgs):\n"
      "        return self.net(imgs).mean()\n"
      "def fit(gen, optimizer):\n"
      "    total = 0\n"
      "    for imgs in gen:\n"
      "        optimizer.zero_grad()\n"
      "        loss = train_util.compute(imgs)\n"
      "        optimizer.step()\n"
      "        total += loss\n"
      "    return total.item()\n"
      "train_util = Trainer(torch.nn.Linear(2, 2).cuda())\n";
  auto f = findings(source);
  EXPECT_NE(std::find(f.begin(), f.end(), std::make_pair(std::string("GL101"), 13)), f.end());
}

TEST(lint_value_flow, a_loop_calling_a_helper_that_runs_one_step_is_a_step_loop) {
  // bubbliiiing/faster-rcnn-pytorch's shape: backward() and optimizer.step()
  // run inside train_step; the loop over `gen` (no loader name) only sums.
  std::string source =
      "import torch\n"
      "def train_step(model, optimizer, imgs):\n"
      "    optimizer.zero_grad()\n"
      "    loss = model(imgs).mean()\n"
      "    loss.backward()\n"
      "    optimizer.step()\n"
      "    return loss\n"
      "def fit(model, optimizer, gen):\n"
      "    total_loss = 0\n"
      "    for imgs in gen:\n"
      "        loss = train_step(model, optimizer, imgs)\n"
      "        total_loss += loss\n"
      "    return total_loss.item()\n";
  auto f = findings(source);
  EXPECT_NE(std::find(f.begin(), f.end(), std::make_pair(std::string("GL101"), 12)), f.end());
}

TEST(lint_value_flow, a_helper_that_loops_over_batches_does_not_make_its_caller_a_step_loop) {
  // train_epoch runs many steps in its own loop: the loop over epochs that
  // calls it is not a loop of steps (it keeps one value per epoch).
  std::string source =
      "import torch\n"
      "def train_epoch(model, optimizer, gen):\n"
      "    for imgs in gen:\n"
      "        optimizer.zero_grad()\n"
      "        loss = model(imgs).mean()\n"
      "        loss.backward()\n"
      "        optimizer.step()\n"
      "    return loss\n"
      "def fit(model, optimizer, gen, epochs):\n"
      "    last = []\n"
      "    for epoch in range(epochs):\n"
      "        last.append(train_epoch(model, optimizer, gen))\n"
      "    return last\n";
  EXPECT_TRUE(findings(source).empty());
}

TEST(lint_value_flow, the_keys_of_a_dict_iterated_with_items_are_not_its_values) {
  // caikit-nlp's step log: the dict holds losses (a leak, line 12); the step
  // numbers read back with `.items()` are keys, and `float(loss_val)` drops
  // the graph, so the record appended per step keeps nothing.
  std::string source =
      "import torch\n"
      "def train(model, loader, optimizer, epochs):\n"
      "    tracker = []\n"
      "    step = 1\n"
      "    for epoch in range(epochs):\n"
      "        log = {}\n"
      "        for batch in loader:\n"
      "            optimizer.zero_grad()\n"
      "            loss = model(batch).mean()\n"
      "            loss.backward()\n"
      "            optimizer.step()\n"
      "            log[step] = loss\n"
      "            step += 1\n"
      "        for s, loss_val in log.items():\n"
      "            tracker.append({'step': s, 'value': float(loss_val)})\n"
      "    return tracker\n";
  auto f = findings(source);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0], std::make_pair(std::string("GL101"), 12));
}

TEST(lint_value_flow, an_append_is_not_described_as_an_in_place_tensor_update) {
  std::string source =
      "import torch\n"
      "def train(model, loader, optimizer):\n"
      "    losses = []\n"
      "    for batch in loader:\n"
      "        optimizer.zero_grad()\n"
      "        loss = model(batch).mean()\n"
      "        loss.backward()\n"
      "        optimizer.step()\n"
      "        losses.append(loss)\n"
      "    return losses\n";
  std::string message = message_of(source, "GL101");
  EXPECT_NE(message.find("keeps `loss`"), std::string::npos) << message;
  EXPECT_EQ(message.find("in place"), std::string::npos) << message;
}

TEST(lint_value_flow, a_method_of_an_instance_that_zeroes_gradients_clears_them_for_the_loop) {
  // GL503 looks for zero_grad() in what the loop calls: here in Trainer.step,
  // reached through `trainer`, which the file constructs from Trainer.
  std::string source =
      "import torch\n"
      "class Trainer:\n"
      "    def __init__(self, net, optimizer):\n"
      "        self.net = net\n"
      "        self.optimizer = optimizer\n"
      "    def step(self, x):\n"
      "        self.optimizer.zero_grad()\n"
      "        return self.net(x).mean()\n"
      "def fit(gen):\n"
      "    for x in gen:\n"
      "        loss = trainer.step(x)\n"
      "        loss.backward()\n"
      "        trainer.optimizer.step()\n"
      "trainer = Trainer(torch.nn.Linear(2, 2).cuda(), None)\n";
  EXPECT_TRUE(findings(source).empty());
}

TEST(lint_value_flow, a_method_call_reads_the_summary_of_methods_not_of_a_function_of_that_name) {
  // ULTRA_pytorch's shape: `model.train(feed)` runs DLA.train, which returns
  // the loss it differentiated; the loop sits in a module-level `def train`
  // that returns nothing. The call's summary is the method's alone.
  std::string source =
      "import torch\n"
      "class Algo:\n"
      "    def train(self, feed):\n"
      "        self.loss = self.loss_func(self.model(feed), feed)\n"
      "        self.loss.backward()\n"
      "        return self.loss, None, {}\n"
      "def train(model, data):\n"
      "    loss = 0.0\n"
      "    while True:\n"
      "        step_loss, _, summary = model.train(data)\n"
      "        loss += step_loss / 10\n";
  auto f = findings(source);
  EXPECT_NE(std::find(f.begin(), f.end(), std::make_pair(std::string("GL101"), 11)), f.end());
}

TEST(lint_value_flow, a_plain_call_reads_the_summary_of_functions_not_of_a_method_of_that_name) {
  // The other way round: `step(batch)` runs the module-level step, which
  // returns a float; a method `step` returning a loss is not what runs.
  std::string source =
      "import torch\n"
      "class Trainer:\n"
      "    def step(self, batch):\n"
      "        loss = self.model(batch).mean()\n"
      "        loss.backward()\n"
      "        return loss, 0\n"
      "def step(batch):\n"
      "    return float(len(batch)), 0\n"
      "def run(loader):\n"
      "    total = 0.0\n"
      "    for batch in loader:\n"
      "        size, _ = step(batch)\n"
      "        total += size\n";
  EXPECT_TRUE(findings(source).empty());
}

TEST(lint_value_flow, a_window_trimmed_by_slicing_still_chains_the_graphs_it_concatenates) {
  // botorch's stopping criterion: the window keeps n + 1 values, but the
  // slice of the previous window is a view carrying its graph.
  std::string source =
      "import torch\n"
      "def fit(model, loader, opt):\n"
      "    hist = None\n"
      "    for x in loader:\n"
      "        opt.zero_grad()\n"
      "        loss = model(x).mean()\n"
      "        loss.backward()\n"
      "        opt.step()\n"
      "        if hist is None:\n"
      "            hist = loss.unsqueeze(0)\n"
      "        else:\n"
      "            hist = torch.cat([hist[-10:], loss.unsqueeze(0)])\n";
  auto f = findings(source);
  EXPECT_NE(std::find(f.begin(), f.end(), std::make_pair(std::string("GL101"), 12)), f.end());
}

TEST(lint_value_flow, a_window_trimmed_by_slicing_of_values_without_graph_is_bounded) {
  std::string source =
      "import torch\n"
      "def fit(model, loader, opt):\n"
      "    hist = torch.zeros(0)\n"
      "    for x in loader:\n"
      "        opt.zero_grad()\n"
      "        loss = model(x).mean()\n"
      "        loss.backward()\n"
      "        opt.step()\n"
      "        hist = torch.cat([hist[-10:], loss.detach().unsqueeze(0)])\n";
  EXPECT_TRUE(findings(source).empty());
}

TEST(lint_value_flow, the_first_fill_of_an_unset_attribute_does_not_restart_it) {
  // `if self.prev is None: self.prev = v` runs once; the concatenation after
  // it keeps growing the graph chain of every call.
  std::string source =
      "import torch\n"
      "class Window:\n"
      "    def __init__(self, n):\n"
      "        self.n = n\n"
      "        self.prev = None\n"
      "    def evaluate(self, fvals):\n"
      "        if self.prev is None:\n"
      "            self.prev = torch.zeros(0)\n"
      "        self.prev = torch.cat([self.prev[-self.n:], fvals.unsqueeze(0)])\n"
      "        return False\n"
      "def fit(model, loader, opt):\n"
      "    crit = Window(10)\n"
      "    for x in loader:\n"
      "        opt.zero_grad()\n"
      "        loss = model(x).mean()\n"
      "        loss.backward()\n"
      "        opt.step()\n"
      "        if crit.evaluate(loss):\n"
      "            break\n";
  auto f = findings(source);
  EXPECT_NE(std::find(f.begin(), f.end(), std::make_pair(std::string("GL102"), 9)), f.end());
}

TEST(lint_value_flow, an_attribute_emptied_when_it_passes_a_bound_is_still_restarted) {
  // `if len(self.prev) > n: self.prev = ...` is a trim, not a first fill.
  std::string source =
      "import torch\n"
      "class Window:\n"
      "    def __init__(self, n):\n"
      "        self.n = n\n"
      "        self.prev = torch.zeros(0)\n"
      "    def evaluate(self, fvals):\n"
      "        if len(self.prev) > self.n:\n"
      "            self.prev = torch.zeros(0)\n"
      "        self.prev = self.prev + fvals\n"
      "        return False\n"
      "def fit(model, loader, opt):\n"
      "    crit = Window(10)\n"
      "    for x in loader:\n"
      "        opt.zero_grad()\n"
      "        loss = model(x).mean()\n"
      "        loss.backward()\n"
      "        opt.step()\n"
      "        crit.evaluate(loss)\n";
  EXPECT_TRUE(findings(source).empty());
}

TEST(lint_value_flow, calling_an_instance_of_a_class_of_the_file_runs_its_dunder_call) {
  // `crit = Window(10)`, `crit(loss)`: Window.__call__ hands the loss to
  // evaluate, which keeps it in a window that lives across steps.
  std::string source =
      "import torch\n"
      "class Window:\n"
      "    def __init__(self, n):\n"
      "        self.n = n\n"
      "        self.prev = torch.zeros(0)\n"
      "    def __call__(self, fvals):\n"
      "        return self.evaluate(fvals)\n"
      "    def evaluate(self, fvals):\n"
      "        self.prev = torch.cat([self.prev, fvals.unsqueeze(0)])\n"
      "        return False\n"
      "def fit(model, loader, opt):\n"
      "    crit = Window(10)\n"
      "    for x in loader:\n"
      "        opt.zero_grad()\n"
      "        loss = model(x).mean()\n"
      "        loss.backward()\n"
      "        opt.step()\n"
      "        if crit(loss):\n"
      "            break\n";
  auto f = findings(source);
  EXPECT_NE(std::find(f.begin(), f.end(), std::make_pair(std::string("GL102"), 9)), f.end());
}

// A parameter that every call of its function fills with `Window(10)` holds a
// Window: calling it runs Window.__call__ (botorch's torch_minimize).
std::string stopping_source(std::string_view second_call) {
  return "import torch\n"
         "class Window:\n"
         "    def __init__(self, n):\n"
         "        self.prev = torch.zeros(0)\n"
         "    def __call__(self, fvals):\n"
         "        self.prev = torch.cat([self.prev, fvals.unsqueeze(0)])\n"
         "        return False\n"
         "def minimize(model, loader, opt, stop=None):\n"
         "    for x in loader:\n"
         "        opt.zero_grad()\n"
         "        loss = model(x).mean()\n"
         "        loss.backward()\n"
         "        opt.step()\n"
         "        if stop is not None and stop(loss):\n"
         "            break\n"
         "def fit(model, loader, opt):\n"
         "    minimize(model, loader, opt, stop=Window(10))\n" +
         std::string(second_call);
}

TEST(lint_value_flow, a_parameter_every_caller_fills_with_an_instance_holds_that_class) {
  auto f = findings(stopping_source("    minimize(model, loader, opt)\n"));
  EXPECT_NE(std::find(f.begin(), f.end(), std::make_pair(std::string("GL101"), 6)), f.end());
  EXPECT_NE(std::find(f.begin(), f.end(), std::make_pair(std::string("GL101"), 14)), f.end());
}

TEST(lint_value_flow, a_parameter_one_caller_fills_with_something_else_holds_no_known_class) {
  EXPECT_TRUE(findings(stopping_source("    minimize(model, loader, opt, make_stop())\n")).empty());
}

// A torchmetrics metric with list states made once in a function, before
// its epoch loop, and updated in the batch loop inside it.
std::string local_metric_source(std::string_view made_in_epoch, std::string_view after_compute) {
  return std::string(
             "import torch\n"
             "import torchmetrics\n"
             "def evaluate(model, loader, epochs):\n"
             "    auroc = torchmetrics.AUROC(task='binary').cuda()\n"
             "    for epoch in range(epochs):\n") +
         std::string(made_in_epoch) +
         "        for x, y in loader:\n"
         "            with torch.no_grad():\n"
         "                preds = model(x.cuda())\n"
         "            auroc.update(preds, y.cuda())\n"
         "        print(auroc.compute())\n" +
         std::string(after_compute);
}

TEST(lint_value_flow, a_local_list_state_metric_updated_every_epoch_and_never_reset_grows) {
  auto f = findings(local_metric_source("", ""));
  EXPECT_NE(std::find(f.begin(), f.end(), std::make_pair(std::string("GL206"), 9)), f.end());
}

TEST(lint_value_flow, a_local_metric_reset_or_made_per_epoch_holds_one_epoch) {
  EXPECT_TRUE(findings(local_metric_source("", "        auroc.reset()\n")).empty());
  std::string per_epoch =
      local_metric_source("        auroc = torchmetrics.AUROC(task='binary').cuda()\n", "");
  EXPECT_TRUE(findings(per_epoch).empty());
  // One pass over the loader: the metric is the function's, released on return.
  std::string one_pass =
      "import torch\n"
      "import torchmetrics\n"
      "def evaluate(model, loader):\n"
      "    auroc = torchmetrics.AUROC(task='binary').cuda()\n"
      "    for x, y in loader:\n"
      "        with torch.no_grad():\n"
      "            preds = model(x.cuda())\n"
      "        auroc.update(preds, y.cuda())\n"
      "    return auroc.compute()\n";
  EXPECT_TRUE(findings(one_pass).empty());
}
}  // namespace
}  // namespace gpuleak::lint
