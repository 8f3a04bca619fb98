"""Evaluation without `torch.no_grad()` that sums the loss as a tensor.

An evaluation pass over a validation set computes the mean cross-entropy of a
trained MLP. It runs with autograd enabled (no `torch.no_grad()`), and it adds
each batch's loss tensor to `total_loss`. The first `+=` turns the Python float
into a tensor whose `grad_fn` links to that batch's graph; every later `+=`
links one more graph. Nothing ever calls backward, so every batch's saved
activations stay alive through `total_loss`: the input batch and the outputs
of both hidden layers, about 1.8 MiB per batch, and no single allocation site
stands out -- all forward-pass sites grow together.

Cause: autograd-graph-kept-alive (the local tensor `total_loss` of `evaluate`).
Fix: wrap the loop in `torch.no_grad()` (or `torch.inference_mode()`) and
accumulate `loss.item()`.
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

try:  # under `gpuleak run` this marks a step; without gpuleak it does nothing
    from gpuleak import step as mark_step
except ImportError:
    def mark_step():
        pass

BATCH = 256
FEATURES = 784
HIDDEN = 512
CLASSES = 10


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120, help="evaluation batches (default 120)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(FEATURES, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.fc3 = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def validation_batches(count, device):
    generator = torch.Generator(device=device).manual_seed(1)
    for _ in range(count):
        images = torch.rand(BATCH, FEATURES, device=device, generator=generator)
        labels = torch.randint(0, CLASSES, (BATCH,), device=device, generator=generator)
        yield images, labels


def evaluate(model, batches):
    model.eval()
    total_loss = 0.0
    count = 0
    for images, labels in batches:
        loss = F.cross_entropy(model(images), labels)
        total_loss += loss  # LEAK: autograd-graph-kept-alive
        count += 1
        mark_step()
    return total_loss / count


def main():
    args = parse_args()
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = MLP().to(device)
    mean_loss = evaluate(model, validation_batches(args.steps, device))
    print("batches=%d mean_loss=%.4f" % (args.steps, mean_loss.item()))


if __name__ == "__main__":
    main()
