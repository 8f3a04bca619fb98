# Shape of https://github.com/pytorch/pytorch/issues/20275 ("Memory (CPU/sys) leak with custom
# batch norm layer"; the answer: "that `running_mean` update is exactly your problem. You keep
# extending the graph."): forward updates its running statistics from the batch without
# no_grad() or detach(), so each buffer's graph reaches the previous step's.
import torch
from torch import nn


class MyBatchNorm(nn.Module):
    def __init__(self, features, momentum=0.1, eps=1e-5):
        super().__init__()
        self.momentum, self.eps = momentum, eps
        self.weight = nn.Parameter(torch.ones(features))
        self.bias = nn.Parameter(torch.zeros(features))
        self.register_buffer("running_mean", torch.zeros(features))
        self.register_buffer("running_var", torch.ones(features))

    def forward(self, x):
        if self.training:
            mean, var = x.mean(0), x.var(0, unbiased=False)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mean  # expect: GL104
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * x.var(0, unbiased=True)  # expect: GL104
        else:
            mean, var = self.running_mean, self.running_var
        return (x - mean) / (var + self.eps).sqrt() * self.weight + self.bias
