"""A custom batch-norm layer whose running-mean buffer chains every step's graph.

Reported: https://github.com/pytorch/pytorch/issues/20275 ("Memory (CPU/sys)
leak with custom batch norm layer"; the answer: "that `running_mean` update is
exactly your problem. You keep extending the graph."). The shape is the
report's: `forward` updates the registered buffers `running_mean` and
`running_var` from the batch statistics without `torch.no_grad()` or
`.detach()`, so each buffer has a `grad_fn` that reaches the previous step's
buffer. The running variance is the unbiased one, computed apart from the
biased variance that normalises the batch, so `loss.backward()` never passes
through its node: that node keeps its input, the layer's input batch
(512 x 1024 float32 = 2 MiB per step). (`running_mean`'s chain keeps graph
nodes but no tensor: the mean's backward saves only sizes.)

Holder: the buffer `running_var` of MyBatchNorm.
Fix: update the buffers under `torch.no_grad()` (or from `.detach()`ed statistics).
"""
import torch
from torch import nn

from case_options import parse_args

BATCH, FEATURES = 512, 1024


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
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mean
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * x.var(0, unbiased=True)  # KEPT: attribute-assignment
        else:
            mean, var = self.running_mean, self.running_var
        return (x - mean) / (var + self.eps).sqrt() * self.weight + self.bias


def train(steps, device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, FEATURES), MyBatchNorm(FEATURES), nn.ReLU(),
                          nn.Linear(FEATURES, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        inputs = torch.randn(BATCH, FEATURES, device=device)
        labels = torch.randint(0, 10, (BATCH,), device=device)
        loss = nn.functional.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    args = parse_args(__doc__)
    print("steps=%d loss=%.4f" % (args.steps, train(args.steps, args.device)))


if __name__ == "__main__":
    main()
