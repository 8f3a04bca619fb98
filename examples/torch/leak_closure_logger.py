"""A logging callback whose closure keeps every batch's embeddings.

A small encoder is trained contrastively (two noisy views of each sample, an
InfoNCE loss). `make_embedding_logger` returns a callback that keeps each
step's embeddings for a projector plot written every 5000 steps. The author
meant to move them to the CPU; instead `.half()` makes a new fp16 copy on the
GPU, and the list that holds the copies lives in the callback's closure, where
nothing else can see or clear it: 256 x 128 x 2 bytes = 64 KiB per step.

Cause: tensors-kept-alive (a list captured by the closure of `log`).
Fix: `.cpu()` (or better, keep a fixed-size sample), and clear the list after
each plot.
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 256
FEATURES = 64
EMBEDDING = 128


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120, help="optimizer steps (default 120)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


def make_embedding_logger(plot_every=5000):
    """Returns log(step, embeddings); every `plot_every` steps it prints a projector summary."""
    history = []

    def log(step, embeddings):
        history.append(embeddings.detach().half())  # LEAK: tensors-kept-alive
        if step % plot_every == plot_every - 1:
            points = torch.cat(history).float()
            print("projector: %d points, mean norm %.3f" % (len(points), points.norm(dim=1).mean().item()))

    return log


def info_nce(a, b, temperature=0.1):
    a, b = F.normalize(a, dim=1), F.normalize(b, dim=1)
    logits = a @ b.t() / temperature
    return F.cross_entropy(logits, torch.arange(len(a), device=a.device))


def train(steps, device):
    torch.manual_seed(0)
    encoder = nn.Sequential(nn.Linear(FEATURES, 256), nn.ReLU(), nn.Linear(256, EMBEDDING)).to(device)
    optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-3)
    log = make_embedding_logger()
    for step in range(steps):
        samples = torch.randn(BATCH, FEATURES, device=device)
        view_a = encoder(samples + 0.1 * torch.randn_like(samples))
        view_b = encoder(samples + 0.1 * torch.randn_like(samples))
        loss = info_nce(view_a, view_b)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        log(step, view_a)
    return loss.item()


def main():
    args = parse_args()
    loss = train(args.steps, torch.device(args.device))
    print("steps=%d loss=%.4f" % (args.steps, loss))


if __name__ == "__main__":
    main()
