"""A leak on a rare branch: every 50th step keeps a reconstruction for the image log, on the GPU.

Sources:
  No public report of this exact shape was found (see README.md); written from issue 37's description
  ("leaks on a rare branch (every 50th step)"). The control's shape -- periodic extra work that allocates
  every N epochs and frees it -- is the one reported in
  https://github.com/open-mmlab/mmskeleton/issues/94  ("when the epoch=9, the GPU memory used 2845MiB";
      the maintainer: "The reason is that an extra batch for evaluation will be sampled every 10 epochs.")

What was reported (issue 37): leaks that happen only on a branch taken now and
then -- logging, checkpointing, a periodic evaluation -- so memory is flat for
49 steps out of 50 and rises by one block on the 50th.

This program: an autoencoder trains on 64 x 3 x 64 x 64 images; every 50th
step the loop logs a reconstruction and keeps it (detached, still on the GPU)
in `logged_reconstructions` "to build a grid at the end": 64 x 3 x 64 x 64
float32 = 3,145,728 bytes every 50 steps. The other 49 steps keep nothing.

Step: one optimizer step.
Leak: 3,145,728 bytes every 50th step (62,914.56 bytes per step on average), first at step 0.
Fix: keep .cpu() copies of the logged images (or write them out and drop them).
"""
import argparse
import sys

import torch
from torch import nn
from torch.nn import functional as F

LOG_EVERY = 50


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1500, help="optimizer steps (default 1500)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("CUDA is not available here")
    return args


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encode = nn.Sequential(nn.Conv2d(3, 16, 4, stride=2, padding=1), nn.ReLU(),
                                    nn.Conv2d(16, 32, 4, stride=2, padding=1), nn.ReLU())
        self.decode = nn.Sequential(nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1), nn.ReLU(),
                                    nn.ConvTranspose2d(16, 3, 4, stride=2, padding=1))

    def forward(self, x):
        return self.decode(self.encode(x))


def main():
    args = parse_args()
    torch.manual_seed(0)
    model = AutoEncoder().cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    logged_reconstructions = []
    for step in range(args.steps):
        images = torch.rand(64, 3, 64, 64, device="cuda")
        reconstruction = model(images)
        loss = F.mse_loss(reconstruction, images)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % LOG_EVERY == 0:
            logged_reconstructions.append(reconstruction.detach())  # KEEP: 3 MiB every 50th step
    print("steps=%d logged=%d allocated_mib=%.1f" % (args.steps, len(logged_reconstructions),
                                                     torch.cuda.memory_allocated() / 2**20))


if __name__ == "__main__":
    main()
