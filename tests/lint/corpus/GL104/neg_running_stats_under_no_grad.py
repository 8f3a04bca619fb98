# The running statistics are updated without gradients, from detached batch statistics, or
# only count calls: nothing is chained.
import torch
from torch import nn


class RunningNorm(nn.Module):
    def __init__(self, features, momentum=0.1):
        super().__init__()
        self.momentum = momentum
        self.register_buffer("running_mean", torch.zeros(features))
        self.register_buffer("running_var", torch.ones(features))
        self.register_buffer("running_max", torch.zeros(features))
        self.calls = 0

    def forward(self, x):
        mean, var = x.mean(0), x.var(0)
        if self.training:
            with torch.no_grad():
                self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mean
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var.detach()
            self.running_max = torch.maximum(self.running_max, x.detach().amax(0))
            self.calls = self.calls + 1
        return (x - mean) / var.sqrt()
