"""A leak that starts late: from step 300 (the end of the learning-rate warm-up) each step keeps its output.

Sources:
  https://github.com/goodfire-ai/spd/issues/86  ("Fix GPU memory leak": "We have an issue where GPU memory
      leaks at seemingly random points throughout training ... Note that the memory leak does not coincide
      with entering a new epoch")
  The start step and the trigger (a phase that begins after the learning-rate warm-up) are issue 37's
  ("leaks that start late (epoch 3, after a learning-rate change)"); the report gives the symptom.

What was reported: memory is flat for a long stretch of training and then
starts to grow, so a tool that judged the first few hundred steps calls the
job clean.

This program: trains a small model with a linear learning-rate warm-up over
300 steps; when the warm-up ends the loop enters its "averaging" phase, in
which it keeps each step's output batch for a stochastic-weight-averaging
style evaluation at the end -- 256 x 256 float32 = 262,144 bytes per step,
kept in `swa_outputs`. Steps 0..299 keep nothing.

Step: one optimizer step.
Leak: 262,144 bytes per step from step 300 on (none before).
Fix: keep a running mean in place (or host copies) instead of every output.
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
    swa_outputs = []
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
            swa_outputs.append(output.detach())  # KEEP: from step 300 on, 256 KiB per step
    print("steps=%d kept=%d allocated_mib=%.1f" % (args.steps, len(swa_outputs), torch.cuda.memory_allocated() / 2**20))


if __name__ == "__main__":
    main()
