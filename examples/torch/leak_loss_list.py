"""Keeps every training loss tensor in the module-level list `losses`.

A small classifier is trained on Gaussian blobs; the script appends each step's
loss to `losses` "to plot the curve later". Folklore says this keeps the whole
autograd graph of every step alive. After `loss.backward()` that is not true:
backward frees the graph's saved tensors (retain_graph=False), so each kept
loss holds only its own one-element tensor (one 512-byte block of PyTorch's
CUDA caching allocator) and a few CPU-side graph nodes. It is still a leak,
just a slow one: 512 bytes of GPU memory per step for as long as training runs.
`leak_retain_graph_loop.py` is the same mistake with `retain_graph=True`, where
the whole graph does stay alive.

Cause: tensors-kept-alive (the kept loss still has a grad_fn, but its saved
tensors are gone, so what grows is the loss tensors themselves).
Fix: `losses.append(loss.item())`.
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

CLASSES = 4
FEATURES = 32
BATCH = 128

losses = []  # the training curve, plotted after training


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
    model = nn.Sequential(nn.Linear(FEATURES, 128), nn.ReLU(), nn.Linear(128, CLASSES)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    centers = torch.randn(CLASSES, FEATURES, device=device) * 2
    for _ in range(steps):
        labels = torch.randint(0, CLASSES, (BATCH,), device=device)
        x = centers[labels] + torch.randn(BATCH, FEATURES, device=device)
        loss = F.cross_entropy(model(x), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss)  # LEAK: tensors-kept-alive


def main():
    args = parse_args()
    train(args.steps, torch.device(args.device))
    print("steps=%d first_loss=%.4f last_loss=%.4f kept=%d"
          % (args.steps, losses[0].item(), losses[-1].item(), len(losses)))


if __name__ == "__main__":
    main()
