"""Out-of-memory retry loop that keeps each caught exception for an end-of-epoch report: each keeps its frames' tensors.

Sources:
  https://github.com/pytorch/pytorch/issues/18853  ("Inconsistent recovery from CUDA OOMs"; its editorial
      note: "Make sure that you are not holding on to tensors via an exception object (which contains the
      stack trace and will retain tensors). Do not bring the exception object into scope, or do error
      recovery outside of the catch block.")
  https://github.com/pytorch/pytorch/issues/27600  ("Free Memory after CUDA out of memory error"; the
      maintainer: "the exception holds on to the frame where the error was raised. Which holds onto all
      the Tensors on the GPU and so they cannot be freed yet ... as long as you hold onto the exception,
      the memory cannot be freed.")

What was reported: training loops catch the CUDA out-of-memory RuntimeError,
skip the batch and go on; an exception object keeps its traceback, the
traceback keeps the frames it passed through, and the frames keep their local
tensors, so any exception kept beyond the except block keeps the failed
step's GPU tensors.

This program: a training loop whose forward pass, on every other batch (the
"long" ones), computes its first activations and then fails the way an
out-of-memory error does (a RuntimeError raised from inside forward(), so the
run needs no real OOM). The loop catches it, skips the batch, and keeps the
exception in `skipped` to log them all at the end of the epoch. Each kept
exception keeps forward()'s frame: its input x (2 MiB), its activation hidden
(8 MiB) and, through hidden's graph, the pre-activation GELU saved (8 MiB).

Step: one batch (half of them fail).
Leak: 18,874,368 bytes per failed batch, 9,437,184 bytes per step on average (x: 4 x 512 x 256 float32;
  hidden and the saved pre-activation: 4 x 512 x 1024 float32 each).
Fix: keep str(error) (or traceback.format_exc()), not the exception object; recover outside the except block.
"""
import argparse
import sys

import torch
from torch import nn
from torch.nn import functional as F

BATCH = 4
SEQ_LEN = 512
WIDTH = 1024


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="batches (default 100)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("CUDA is not available here")
    return args


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(256, WIDTH)
        self.down = nn.Linear(WIDTH, 256)

    def forward(self, x, too_long):
        hidden = F.gelu(self.up(x))  # 4 x 512 x 1024 float32: 8 MiB
        if too_long:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (simulated for a long batch)")
        return self.down(hidden)


def main():
    args = parse_args()
    torch.manual_seed(0)
    model = Encoder().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    skipped = []
    for step in range(args.steps):
        x = torch.randn(BATCH, SEQ_LEN, 256, device="cuda")
        try:
            loss = model(x, too_long=step % 2 == 1).pow(2).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        except RuntimeError as error:
            if "out of memory" not in str(error):
                raise
            optimizer.zero_grad(set_to_none=True)
            skipped.append(error)  # KEEP: the traceback keeps forward()'s frame and its activation
    print("steps=%d skipped=%d allocated_mib=%.1f" % (args.steps, len(skipped),
                                                      torch.cuda.memory_allocated() / 2**20))


if __name__ == "__main__":
    main()
