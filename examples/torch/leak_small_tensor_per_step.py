"""Leaks exactly one 4 KiB tensor (1024 float32) per training step.

A linear model (1024 inputs -> 16 outputs) is fitted to a fixed random linear
map with SGD. To study how the gradient of the first output unit drifts, the
loop clones that row of the weight gradient after every backward pass and
appends it to the list `grad_rows`, which is only read after training. Each
clone is a new 1024 x float32 = 4096-byte allocation that nothing ever frees:
the live set grows by exactly 4 KiB per step. Everything else a step allocates
is freed or reused by the next step.

This is the sensitivity case: a leak this small must be found within 50 steps
after warm-up.

Cause: tensors-kept-alive (a local list of the training function keeps them).
Fix: keep a number (`grad_row.norm().item()`), copy the row to the CPU, or
keep only the last few rows in a `collections.deque(maxlen=N)`.
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

INPUTS = 1024  # one gradient row = 1024 float32 = 4096 bytes
BATCH = 256


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120, help="optimizer steps (default 120)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


def train(steps, device):
    torch.manual_seed(0)
    model = nn.Linear(INPUTS, 16).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    true_map = torch.randn(INPUTS, 16, device=device) / INPUTS ** 0.5
    grad_rows = []
    for _ in range(steps):
        x = torch.randn(BATCH, INPUTS, device=device)
        loss = F.mse_loss(model(x), x @ true_map)
        optimizer.zero_grad()
        loss.backward()
        grad_rows.append(model.weight.grad[0].clone())  # LEAK: tensors-kept-alive
        optimizer.step()
    return loss.item(), grad_rows


def main():
    args = parse_args()
    loss, grad_rows = train(args.steps, torch.device(args.device))
    first, last = grad_rows[0].norm().item(), grad_rows[-1].norm().item()
    print("steps=%d loss=%.4f kept_rows=%d grad_row_norm first=%.4f last=%.4f"
          % (args.steps, loss, len(grad_rows), first, last))


if __name__ == "__main__":
    main()
