"""An AverageMeter whose update() keeps the loss tensor: every step's autograd graph stays alive in its sum.

Sources:
  https://github.com/lyq133/LIC-HPCM/issues/4  ("Bug: Memory Leak in AverageMeter Prevents Per-Step VRAM
      Release": "Inside the loop, loss.update(out_criterion["loss"]) is called. The out_criterion["loss"]
      is a torch.Tensor that holds the entire computation graph for that step"; the run "crashes deep in
      the epoch (e.g., at step [14400/20718])")
  https://github.com/facebookresearch/mmf/pull/560  ("[fix] memory leak in loss reporting": the meter
      update "was storing the loss with the gradient and computation graph")

What was reported: the common AverageMeter class (val, sum, count, avg) is
updated with the loss tensor itself instead of loss.item(). `self.sum += val *
n` then builds a chain of additions whose every link holds the step's graph,
so the activations saved by every step's forward pass are never freed, and
the job dies of out-of-memory thousands of steps into an epoch.

This program: a small convolutional classifier is validated batch by batch
(model.eval(), but the loop forgot torch.no_grad(), as validation loops often
do); after each batch `val_losses.update(loss, images.size(0))` hands the loss
tensor, still attached to its graph, to the meter. Nothing calls backward, so
each batch's graph keeps the activations its forward pass saved, and the
meter's running `self.sum` (val * n added on each update) links them all.

Step: one validation batch.
Leak: the tensors each batch's forward pass saved for backward (the input, conv outputs kept by the
  ReLUs, max-pool indices, pooled outputs kept by the next layer, for 32 images): about 11 MB per step
  (393,216 + 4,194,304 + 2,097,152 + 1,048,576 + 2,097,152 + 1,048,576 + 524,288 bytes), estimated.
Keeping statements: `self.sum += val * n` inside AverageMeter.update (marked KEEP) and the caller
  `val_losses.update(loss, images.size(0))` (marked KEEP-CALLER).
Fix: update the meter with loss.item() (a Python float); validate under torch.no_grad().
"""
import argparse
import sys

import torch
from torch import nn
from torch.nn import functional as F

BATCH = 32


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="validation batches (default 100)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("CUDA is not available here")
    return args


class AverageMeter:
    """Computes and stores the average and current value (the ImageNet example's meter)."""

    def __init__(self, name):
        self.name = name
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n  # KEEP: the sum links every step's loss and graph
        self.count += n
        self.avg = self.sum / self.count


class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc = nn.Linear(64 * 8 * 8, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def main():
    args = parse_args()
    torch.manual_seed(0)
    model = SmallNet().cuda()
    model.eval()
    val_losses = AverageMeter("Loss")
    for step in range(args.steps):
        images = torch.randn(BATCH, 3, 32, 32, device="cuda")
        labels = torch.randint(0, 10, (BATCH,), device="cuda")
        loss = F.cross_entropy(model(images), labels)
        val_losses.update(loss, images.size(0))  # KEEP-CALLER: hands the graph-attached loss to the meter
    print("steps=%d loss_avg=%.4f allocated_mib=%.2f" % (args.steps, float(val_losses.avg),
                                                        torch.cuda.memory_allocated() / 2**20))


if __name__ == "__main__":
    main()
