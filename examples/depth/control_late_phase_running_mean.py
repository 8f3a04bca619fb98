"""NOT A LEAK: the same late phase keeps a running mean of the outputs in place.

Sources:
  https://github.com/goodfire-ai/spd/issues/86  ("Fix GPU memory leak": "We have an issue where GPU memory
      leaks at seemingly random points throughout training ... Note that the memory leak does not coincide
      with entering a new epoch")
  The start step and the trigger (a phase that begins after the learning-rate warm-up) are issue 37's
  ("leaks that start late (epoch 3, after a learning-rate change)"); the report gives the symptom.

What was reported: memory is flat for a long stretch of training and then
starts to grow, so a tool that judged the first few hundred steps calls the
job clean.

This program: the same training and warm-up as leak_starts_at_step_300.py;
from step 300 on, the averaging phase adds each step's output into one running
mean tensor in place (allocated once, at step 300: 256 KiB), so memory is flat
before and after the phase starts.

Step: one optimizer step.
Verdict: NO LEAK (one 256 KiB allocation at step 300, then flat).
"""
import argparse
import sys

import torch
from torch import nn
from torch.nn import functional as F

WARMUP_STEPS = 300


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=700, help="optimizer steps (default 700)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("CUDA is not available here")
    return args


def main():
    args = parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 256)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    swa_mean = None
    averaged = 0
    for step in range(args.steps):
        for group in optimizer.param_groups:
            group["lr"] = 0.05 * min(1.0, (step + 1) / WARMUP_STEPS)
        x = torch.randn(256, 256, device="cuda")
        output = model(x)
        loss = F.mse_loss(output, x)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step >= WARMUP_STEPS:
            if swa_mean is None:
                swa_mean = torch.zeros_like(output)
            averaged += 1
            swa_mean.add_((output.detach() - swa_mean) / averaged)
    print("steps=%d averaged=%d allocated_mib=%.1f" % (args.steps, averaged, torch.cuda.memory_allocated() / 2**20))


if __name__ == "__main__":
    main()
