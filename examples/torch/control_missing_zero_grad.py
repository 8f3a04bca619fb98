"""NOT A LEAK: the training loop never calls `optimizer.zero_grad()`.

A regression MLP is trained without ever clearing its gradients, so each
backward pass adds to the gradients of all previous steps. That is a real bug
-- the update direction becomes the sum of every gradient so far, and training
goes wrong -- but it is a bug in values, not in memory: every parameter's
`.grad` is allocated once, at the first backward, and later backward passes
add into the same buffer in place. Memory is flat after the first step.
(Folklore blames a missing zero_grad for "memory growing"; it does not.)
Gradient clipping keeps the run from diverging to NaN.

Verdict: NO LEAK.
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 256
FEATURES = 64


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500, help="optimizer steps (default 500)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


def train(steps, device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, 512), nn.Tanh(), nn.Linear(512, 512), nn.Tanh(),
                          nn.Linear(512, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    weights = torch.randn(FEATURES, 1, device=device) / FEATURES ** 0.5
    for _ in range(steps):
        x = torch.randn(BATCH, FEATURES, device=device)
        loss = F.mse_loss(model(x), torch.sin(x @ weights))
        loss.backward()  # BUG (values only): gradients add up because zero_grad() is never called
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    return loss.item(), model[0].weight.grad.norm().item()


def main():
    args = parse_args()
    loss, grad_norm = train(args.steps, torch.device(args.device))
    print("steps=%d loss=%.4f first_layer_grad_norm=%.4f" % (args.steps, loss, grad_norm))


if __name__ == "__main__":
    main()
