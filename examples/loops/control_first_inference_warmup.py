"""NOT A LEAK: the first inference takes far more GPU memory than the later ones (cuDNN benchmark, lazy init).

Sources:
  https://discuss.pytorch.org/t/gpu-memory-consumption-and-inference-time-is-higher-for-first-inference/155668
      ("gpu memory consumption and inference time is much higher for first inference than subsequent
      inferences": max_memory_allocated 10.4 GB for the first sample, 1.2 GB for every later one; the loop
      calls torch.cuda.empty_cache() and reset_peak_memory_stats() every iteration)
  https://forums.developer.nvidia.com/t/slow-first-iteration-of-cudnn-convoultion-operations/202362

What was reported: an evaluation loop over samples, each run under no_grad,
resets the peak statistics and empties the cache before every sample, and
finds the first inference much more expensive in time and memory than the
rest -- the one-time costs of the first call (algorithm search and its
workspaces, lazily created state), not something that grows.

This program: a convolutional network with a lazily initialised head
(nn.LazyLinear) and torch.backends.cudnn.benchmark = True runs under
torch.no_grad() on one batch per iteration, calling empty_cache() and
reset_peak_memory_stats() every iteration as the reporter did; the first
iteration allocates the lazy weights and cuDNN's trial workspaces.

Iteration: one sample (batch of 8 images).
Verdict: NO LEAK (one-time growth in the first iteration).
"""
import argparse
import sys

import torch
from torch import nn


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=600, help="samples (default 600)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


def main():
    args = parse_args()
    torch.manual_seed(0)
    device = torch.device(args.device)
    torch.backends.cudnn.benchmark = True
    model = nn.Sequential(
        nn.Conv2d(3, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(8),
        nn.Flatten(), nn.LazyLinear(10)).to(device).eval()
    peaks = []
    with torch.no_grad():
        for _ in range(args.iterations):
            if device.type == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            scores = model(torch.rand(8, 3, 128, 128, device=device)).softmax(dim=-1)
            float(scores.max())
            if device.type == "cuda":
                peaks.append(torch.cuda.max_memory_allocated())
    print("iterations=%d first_peak=%s later_peak=%s" % (args.iterations, peaks[0] if peaks else None,
                                                         peaks[-1] if peaks else None))


if __name__ == "__main__":
    main()
