// Patterns from installed libraries that the rules reported although they
// keep nothing (issue 16: torch, torchvision, transformers, lightning and
// timm site-packages, `git show 0c770f9:bench/baselines/gpu/lint-site-packages-64bbda9.json`),
// each written here as a minimal reproduction, next to the leaky neighbour
// the same rule must still report.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "lint_test_support.h"

namespace gpuleak::lint {
namespace {

using testing::rule_ids;

int count(const std::vector<std::string>& ids, const std::string& id) {
  return static_cast<int>(std::count(ids.begin(), ids.end(), id));
}

// torch/_inductor/fx_passes/numeric_utils.py (run_model): two models run on
// the same input every iteration and their gradients are compared; the
// outputs are rebound at the next iteration and nothing else links them.
TEST(lint_library_false_positives, retained_graphs_of_a_loop_over_fixed_inputs_are_not_reported) {
  const char* source = R"(import torch


def compare_gradients_repeatedly(first, second, inputs, rounds):
    for step in range(rounds):
        out_first = first(*inputs)
        out_second = second(*inputs)
        out_first[0].sum().backward(retain_graph=True)
        out_second[0].sum().backward(retain_graph=True)
        check(first, second)
)";
  EXPECT_EQ(count(rule_ids(source), "GL103"), 0);
}

TEST(lint_library_false_positives, a_fixed_input_loop_that_carries_a_state_is_still_reported) {
  // Same fixed input, but the hidden state links one iteration's graph to
  // the next.
  const char* source = R"(import torch


def train(model, first_input, optimizer, rounds, hidden):
    for step in range(rounds):
        optimizer.zero_grad()
        out, hidden = model(first_input, hidden)
        loss = out.sum()
        loss.backward(retain_graph=True)
        optimizer.step()
)";
  EXPECT_EQ(count(rule_ids(source), "GL103"), 1);
}

TEST(lint_library_false_positives, a_fixed_iterator_advanced_in_the_loop_is_not_a_fixed_input) {
  const char* source = R"(import torch


def train(model, stream, optimizer, criterion):
    while True:
        optimizer.zero_grad()
        x, y = next(stream)
        loss = criterion(model(x), y)
        loss.backward(retain_graph=True)
        optimizer.step()
)";
  EXPECT_EQ(count(rule_ids(source), "GL103"), 1);
}

// torch/_inductor/autotune_process.py (AutotuneProcessPool): a method
// creates the executor and returns it; the class keeps it in an attribute
// and shuts that attribute down in another method registered with atexit.
TEST(lint_library_false_positives, an_executor_returned_into_an_attribute_the_class_shuts_down) {
  const char* source = R"(import atexit
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import torch


class BenchmarkWorkers:
    def __init__(self):
        self.executor = self.make_executor()

    def make_executor(self):
        executor = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        atexit.register(self.stop)
        log_created(executor)
        return executor

    def stop(self):
        if self.executor is not None:
            self.executor.shutdown(wait=False)
            self.executor = None
)";
  EXPECT_EQ(count(rule_ids(source), "GL402"), 0);
}

TEST(lint_library_false_positives, an_executor_returned_into_an_attribute_nobody_shuts_down) {
  const char* source = R"(from concurrent.futures import ProcessPoolExecutor

import torch


class BenchmarkWorkers:
    def __init__(self):
        self.executor = self.make_executor()

    def make_executor(self):
        executor = ProcessPoolExecutor(max_workers=1)
        self.ready = check_environment()
        return executor

    def run(self, job):
        return self.executor.submit(job)
)";
  EXPECT_EQ(count(rule_ids(source), "GL402"), 1);
}

}  // namespace
}  // namespace gpuleak::lint
