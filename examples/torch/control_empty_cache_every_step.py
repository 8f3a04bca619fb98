"""NOT A LEAK: `torch.cuda.empty_cache()` after every training step.

The author calls `empty_cache()` every step "to stop the memory leak". It
stops nothing: `empty_cache()` only hands cached blocks that no tensor uses
back to the driver; it cannot free a tensor that is still referenced. Here
nothing leaks, so what it does is churn: each step the caching allocator must
ask the driver again for the segments it just returned (the 128 x 4096
activations are 2 MiB each, too big for its small-block pool), so the driver sees cuMemAlloc/cuMemFree pairs
every step, nvidia-smi's number saws up and down, and training gets slower.
Tools that watch driver allocations or nvidia-smi see constant activity; the
tensors alive at each step boundary are the same every step. With
`--device cpu` the call is skipped (there is no CUDA cache).

Verdict: NO LEAK.
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 128
FEATURES = 64
WIDTH = 4096


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
    model = nn.Sequential(nn.Linear(FEATURES, WIDTH), nn.GELU(), nn.Linear(WIDTH, FEATURES)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(steps):
        x = torch.randn(BATCH, FEATURES, device=device)
        loss = F.mse_loss(model(x), x)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.empty_cache()  # useless here; it never frees a referenced tensor
    return loss.item()


def main():
    args = parse_args()
    device = torch.device(args.device)
    loss = train(args.steps, device)
    reserved = torch.cuda.memory_reserved() if device.type == "cuda" else 0
    print("steps=%d loss=%.5f reserved_after_empty_cache=%d" % (args.steps, loss, reserved))


if __name__ == "__main__":
    main()
