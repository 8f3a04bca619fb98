# Source: https://github.com/pfnet/pytorch-pfn-extras/pull/49
# Reported: "Use detach instead of clone to avoid retention of computational graph in reporter ...
#   This fixes a memory leak that happens due to the reporter retaining the computational graph
#   associated with the reported Tensor." (merged; the fix is `value.clone()` -> `value.detach()`).
# Pattern: a reporter that "copies" reported tensors with clone(), which keeps the autograd history,
#   and a summary that sums the reported values across iterations until the next log.
# Label: the lines marked `# leak` keep the memory (the clone and the sums it feeds).
import collections

import numpy
import torch
import torch.nn.functional as F


def _copy_variable(value):
    if isinstance(value, torch.Tensor):
        return value.clone()  # leak
    return value


class Reporter:
    def __init__(self):
        self._observer_names = {}
        self.observation = {}

    def add_observer(self, name, observer):
        self._observer_names[id(observer)] = name

    def report(self, values, observer=None):
        # "the variable is copied without preserving the computational graph"
        values = {k: _copy_variable(v) for k, v in values.items()}
        if observer is not None:
            observer_name = self._observer_names[id(observer)]
            for key, value in values.items():
                self.observation['%s/%s' % (observer_name, key)] = value
        else:
            self.observation.update(values)


_reporters = [Reporter()]


def report(values, observer=None):
    if _reporters:
        _reporters[-1].report(values, observer)


class Summary:
    def __init__(self):
        self._x = 0.0
        self._x2 = 0.0
        self._n = 0

    def add(self, value, weight=1):
        self._x += weight * value  # leak
        self._x2 += weight * value * value  # leak
        self._n += weight

    def compute_mean(self):
        return self._x / self._n


class DictSummary:
    def __init__(self):
        self._summaries = collections.defaultdict(Summary)

    def add(self, d):
        for k, v in d.items():
            if numpy.isscalar(v) or getattr(v, 'ndim', -1) == 0:
                self._summaries[k].add(v)


class MyRegressor(torch.nn.Module):
    def __init__(self, predictor):
        super().__init__()
        self.predictor = predictor

    def forward(self, x, y):
        pred = self.predictor(x)
        abs_error = (pred - y).abs().sum() / len(x)
        loss = F.mse_loss(pred, y)
        report({'abs_error': abs_error, 'squared_error': loss}, self)
        return loss


def train(model, optimizer, train_loader, epochs):
    reporter = _reporters[-1]
    reporter.add_observer('main', model)
    for epoch in range(epochs):
        summary = DictSummary()  # LogReport's summary, emptied when its trigger (1 epoch) fires
        for x, y in train_loader:
            reporter.observation = {}
            optimizer.zero_grad()
            loss = model(x.cuda(), y.cuda())
            loss.backward()
            optimizer.step()
            summary.add(reporter.observation)
        print(epoch, {k: s.compute_mean() for k, s in summary._summaries.items()})
