# An exponential moving average of a weight kept in forward: the average is computed from
# the parameter, which requires grad, and fed back every call.
import torch
from torch import nn


class SmoothedLinear(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n, n))
        self.register_buffer("weight_ema", torch.zeros(n, n))

    def forward(self, x):
        self.weight_ema = 0.99 * self.weight_ema + 0.01 * self.weight  # expect: GL104
        return x @ self.weight.t()
