# Source: https://github.com/pytorchbearer/torchbearer/pull/507, files
#   torchbearer/metrics/primitives.py (MeanSquaredError) and torchbearer/metrics/aggregators.py
#   (Mean) (after the fix 89c2724)
# Reported: "Fix memory leak with mse primitive": the primitive now returns .data.
# Pattern: the squared error is returned as .data (no graph); the Mean aggregator's running sum
#   holds one graph-free tensor.
# Label: control: nothing here keeps GPU memory across steps
# ---- torchbearer/metrics/primitives.py ----
import torchbearer
from torchbearer import Metric
from .decorators import default_for_key, running_mean, mean, std, to_dict

import torch

old_super = super


def super(_, obj):
    return old_super(obj.__class__, obj)

@default_for_key('mse')
@running_mean
@mean
class MeanSquaredError(Metric):
    """Mean squared error metric. Computes the pixelwise squared error which is then averaged with decorators.
    Decorated with a mean and running_mean. Default for key: 'mse'.

    Args:
        pred_key (:class:`torchbearer.StateKey`): The key in state which holds the predicted values
        target_key (:class:`torchbearer.StateKey`): The key in state which holds the target values
    """

    def __init__(self, pred_key=torchbearer.Y_PRED, target_key=torchbearer.Y_TRUE):
        super(MeanSquaredError, self).__init__('mse')
        self.pred_key = pred_key
        self.target_key = target_key

    def process(self, *args):
        state = args[0]
        y_pred = state[self.pred_key]
        y_true = state[self.target_key]
        return torch.pow(y_pred - y_true.view_as(y_pred), 2).data



# ---- torchbearer/metrics/aggregators.py ----
from collections import deque

import torch

from torchbearer.bases import Metric
from .metrics import AdvancedMetric

class Mean(Metric):
    """Metric aggregator which calculates the mean of process outputs between calls to reset.

    Args:
        name (str): The name of this metric.
        dim (int, tuple): The dimension(s) on which to perform the mean. If left as None, this will mean over the whole
            Tensor
    """

    def __init__(self, name, dim=None):
        super(Mean, self).__init__(name)
        self._kwargs = {'dim': dim} if dim is not None else {}
        self._sum = 0.0
        self._count = 0

    def process(self, *args):
        """Add the input to the rolling sum. Input must be a torch tensor.

        Args:
            args:  The output of some previous call to :meth:`.Metric.process`.
        """
        data = args[0]
        tot = data.sum(**self._kwargs)
        self._sum += tot
        self._count += data.numel() / tot.numel()

    def process_final(self, *args):
        """Compute and return the mean of all metric values since the last call to reset.

        Returns:
            The mean of the metric values since the last call to reset.
        """
        res = self._sum / self._count
        return res.item() if res.numel() <= 1 else res.tolist()

    def reset(self, state):
        """Reset the running count and total.

        Args:
            state (dict): The model state.
        """
        super(Mean, self).reset(state)
        self._sum = 0.0
        self._count = 0
