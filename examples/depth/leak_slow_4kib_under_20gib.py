"""A 4 KiB-per-step leak in a job that holds 20 GiB: a per-step histogram kept on the GPU.

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

This program: first allocates 20 GiB of long-lived tensors (standing in for a
large model's weights and optimizer state, 20 tensors of 1 GiB), then trains a
small model; each step appends `torch.histc(output, bins=1024)` -- 1,024
float32 on the GPU, 4,096 bytes -- to `activation_histograms` for a plot at
the end.

Step: one optimizer step.
Leak: 4,096 bytes per step (one 1,024-bin float32 histogram), under 21,474,836,480 bytes of live tensors.
Fix: keep the histograms on the host (.cpu()) or a bounded window of them.
"""
import argparse
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
    activation_histograms = []
    for step in range(args.steps):
        x = torch.randn(256, 512, device="cuda")
        output = model(x)
        loss = F.mse_loss(output, x)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        activation_histograms.append(torch.histc(output.detach(), bins=1024))  # KEEP: 4 KiB per step
    torch.cuda.synchronize()
    print("steps=%d resident_gib=%d histograms=%d allocated_mib=%.1f" % (
        args.steps, len(resident), len(activation_histograms), torch.cuda.memory_allocated() / 2**20))


if __name__ == "__main__":
    main()
