"""NOT A LEAK: every 50th step runs an extra evaluation batch whose memory is freed (a periodic spike).

Sources:
  No public report of this exact shape was found (see README.md); written from issue 37's description
  ("leaks on a rare branch (every 50th step)"). The control's shape -- periodic extra work that allocates
  every N epochs and frees it -- is the one reported in
  https://github.com/open-mmlab/mmskeleton/issues/94  ("when the epoch=9, the GPU memory used 2845MiB";
      the maintainer: "The reason is that an extra batch for evaluation will be sampled every 10 epochs.")

What was reported (mmskeleton 94): memory rose at the epoch that ran an extra
evaluation batch -- periodic extra work that allocates now and then and frees
what it allocated, which from outside looks like a leak on a rare branch.

This program: the same autoencoder training as leak_every_50th_step.py; every
50th step it evaluates one extra batch of 256 images under torch.no_grad()
(about 12 MiB of input and output, freed after the step) and keeps only the
Python float of its loss, on the host.

Step: one optimizer step.
Verdict: NO LEAK (a spike every 50th step, flat between).
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
    eval_losses = []
    for step in range(args.steps):
        images = torch.rand(64, 3, 64, 64, device="cuda")
        reconstruction = model(images)
        loss = F.mse_loss(reconstruction, images)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % LOG_EVERY == 0:
            with torch.no_grad():
                held_out = torch.rand(256, 3, 64, 64, device="cuda")
                eval_losses.append(F.mse_loss(model(held_out), held_out).item())
    print("steps=%d evaluated=%d allocated_mib=%.1f" % (args.steps, len(eval_losses),
                                                     torch.cuda.memory_allocated() / 2**20))


if __name__ == "__main__":
    main()
