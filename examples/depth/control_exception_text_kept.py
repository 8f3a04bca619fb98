"""NOT A LEAK: the same out-of-memory retry loop keeps the text of each caught exception, not the exception.

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

This program: the same training loop as leak_exception_kept_for_report.py,
with the fix the maintainers give: the except block keeps `str(error)` for the
end-of-epoch report, so the exception, its traceback and forward()'s frame are
freed when the block ends.

Step: one batch (half of them fail).
Verdict: NO LEAK.
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
            skipped.append(str(error))
    print("steps=%d skipped=%d allocated_mib=%.1f" % (args.steps, len(skipped),
                                                      torch.cuda.memory_allocated() / 2**20))


if __name__ == "__main__":
    main()
