"""NOT A LEAK: the same 20 GiB job keeps only the last 100 per-step histograms on the GPU.

Sources:
  https://github.com/dingo-gw/dingo/issues/60  ("Memory leaks during training": "Using nvidia-smi -l 1 to
      monitor GPU during training, I notice that the GPU RAM usage slowly increases during each epoch
      ... This adds up to ~ 100 MB / epoch.")
  https://github.com/moskomule/homura/issues/16  ("GPU memory leak?": "While DDP training, GPU memory
      consumption gradually and slowly grows.")
  The rate and the live size are issue 37's ("leaks of a few KiB per step in a job that holds tens of GiB
  (found after how many steps?)"); the reports give the symptom, not this program.

What was reported: a leak too slow to see in any one snapshot of a large job:
memory creeps up by a small amount per step, against a large and steady live
set, and the job runs out of memory hours or days later.

This program: the same job as leak_slow_4kib_under_20gib.py (20 GiB of
long-lived tensors, a small model, a 4 KiB histogram per step), but the
histograms go to a collections.deque(maxlen=100): memory grows by 4 KiB a
step for the first 100 steps (400 KiB) and is flat after.

Step: one optimizer step.
Verdict: NO LEAK (bounded growth that stops at step 100).
"""
import argparse
import collections
import sys

import torch
from torch import nn
from torch.nn import functional as F

LIVE_GIB = 20


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=800, help="optimizer steps (default 800)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("CUDA is not available here")
    return args


def main():
    args = parse_args()
    torch.manual_seed(0)
    resident = [torch.ones(1 << 30, dtype=torch.uint8, device="cuda") for _ in range(LIVE_GIB)]
    model = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    activation_histograms = collections.deque(maxlen=100)
    for step in range(args.steps):
        x = torch.randn(256, 512, device="cuda")
        output = model(x)
        loss = F.mse_loss(output, x)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        activation_histograms.append(torch.histc(output.detach(), bins=1024))  # the last 100 only
    torch.cuda.synchronize()
    print("steps=%d resident_gib=%d histograms=%d allocated_mib=%.1f" % (
        args.steps, len(resident), len(activation_histograms), torch.cuda.memory_allocated() / 2**20))


if __name__ == "__main__":
    main()
