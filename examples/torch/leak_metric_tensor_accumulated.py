"""A running metric that accumulates per-sample losses as tensors.

`MeanLoss.update` stores the per-sample loss tensor of every batch so that
`compute()` can average them at the end of the epoch. The stored tensors still
have a `grad_fn`, which looks like "the graph is kept" -- but `loss.backward()`
already freed that graph's saved tensors, so what stays alive is each batch's
per-sample loss vector itself: 4096 float32 = 16 KiB per step, held by the
metric object's list.

Cause: tensors-kept-alive (a list attribute of the metric; the tensors carry
a grad_fn whose saved tensors are already freed).
Fix: accumulate `per_sample.detach().sum()` into one running tensor (or
`.item()`), and a count.
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 4096
FEATURES = 20
CLASSES = 16


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120, help="optimizer steps (default 120)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class MeanLoss:
    """Average per-sample loss over an epoch."""

    def __init__(self):
        self.values = []

    def update(self, per_sample_loss):
        self.values.append(per_sample_loss)

    def compute(self):
        return torch.cat(self.values).mean().item()


def train(steps, device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, CLASSES)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    rule = torch.randn(FEATURES, CLASSES, device=device)
    train_loss = MeanLoss()
    for _ in range(steps):
        features = torch.randn(BATCH, FEATURES, device=device)
        labels = (features @ rule).argmax(dim=1)
        per_sample = F.cross_entropy(model(features), labels, reduction="none")
        loss = per_sample.mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        train_loss.update(per_sample)  # LEAK: tensors-kept-alive
    return train_loss


def main():
    args = parse_args()
    train_loss = train(args.steps, torch.device(args.device))
    print("steps=%d epoch_mean_loss=%.4f kept_batches=%d"
          % (args.steps, train_loss.compute(), len(train_loss.values)))


if __name__ == "__main__":
    main()
