"""Training loop with a validation pass every few steps that runs with autograd on and keeps its metrics.

Sources:
  https://github.com/leftthomas/SRGAN/issues/43  ("GPU RAM exploding on validation"; fixed "by adding `with
      torch.no_grad():` to the entire validation for loop, probably some operations like `.mean()` save the
      entire calculation graph, rather than just the values")
  https://github.com/behavioral-data/Homekit2020/issues/13  (out of memory after training long: "a memory leak
      during the validation routine")

What was reported: a super-resolution model trains fine, but the validation
it runs during training makes GPU memory climb until it is exhausted; the
validation loop was not under no_grad, and its per-batch quality metrics were
kept as tensors.

This program: a small super-resolution CNN trained with torch.optim.Adam
(the reported code used Adam; the optimizer steps mark nothing here that the
corpus relies on); every 10 training steps it validates on 2 batches without
torch.no_grad() and appends each batch's PSNR tensor (which still has a
grad_fn) to `validation_history`. The growth comes in a step every 10
training iterations, from the validation phase only.

Iteration: one training step (a validation of 2 batches runs after every 10th).
Leak: about 12 MB per validation (the validation batches' saved activations), ~1.2 MB per training step on
average (measured on the CPU as peak RSS growth over steps 10..50: 1.20 MB).
Fix: run validation under torch.no_grad() and keep psnr.item().
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 8
LOW_RES = 32
SCALE = 2
VALIDATE_EVERY = 10
VALIDATION_BATCHES = 2


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=250, help="training steps (default 250)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class SuperResolution(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.PReLU(),
            nn.Conv2d(32, 32, 3, padding=1), nn.PReLU(),
            nn.Conv2d(32, 3 * SCALE * SCALE, 3, padding=1), nn.PixelShuffle(SCALE))

    def forward(self, low_res):
        return torch.sigmoid(self.body(low_res))


def image_pair(device):
    high_res = torch.rand(BATCH, 3, LOW_RES * SCALE, LOW_RES * SCALE, device=device)
    return F.avg_pool2d(high_res, SCALE), high_res


def validate(model, device, history):
    model.eval()
    for _ in range(VALIDATION_BATCHES):
        low_res, high_res = image_pair(device)
        mse = ((model(low_res) - high_res) ** 2).mean()
        psnr = 10 * torch.log10(1 / mse)
        history.append(psnr)  # LEAK: autograd-graph-kept-alive (each PSNR keeps its batch's graph)
    model.train()


def main():
    args = parse_args()
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = SuperResolution().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    validation_history = []
    for step in range(args.iterations):
        low_res, high_res = image_pair(device)
        loss = F.mse_loss(model(low_res), high_res)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if (step + 1) % VALIDATE_EVERY == 0:
            validate(model, device, validation_history)
    print("iterations=%d validations=%d" % (args.iterations, len(validation_history) // VALIDATION_BATCHES))


if __name__ == "__main__":
    main()
