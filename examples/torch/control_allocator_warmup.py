"""NOT A LEAK: GPU memory jumps during the first steps, then stays flat.

A small CNN is trained with the usual first-step costs all in one script:
- the classifier head is an `nn.LazyLinear`, whose weight is created at the first forward;
- Adam creates its state (two buffers the size of every parameter) at the first `optimizer.step()`;
- `torch.backends.cudnn.benchmark = True` tries several convolution algorithms,
  with their workspaces, the first time it sees each input shape;
- the batch size is ramped up over the first five steps (8 -> 128), so each of
  those steps needs more activation memory than the one before, and the caching
  allocator reserves new segments for it.
Memory use climbs steeply for a few steps, then every later step reuses the same
blocks. A tool that fits a line to the first steps, or that compares the end of
the run with its start, reports a leak; one that waits for warm-up to end sees
a flat line.

Verdict: NO LEAK.
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

BATCH_RAMP = (8, 16, 32, 64)  # batch sizes of the first steps; then BATCH
BATCH = 128
CLASSES = 10


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500, help="optimizer steps (default 500)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.LazyLinear(CLASSES)

    def forward(self, images):
        return self.head(self.features(images).flatten(1))


def batch_size(step):
    return BATCH_RAMP[step] if step < len(BATCH_RAMP) else BATCH


def train(steps, device):
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    model = Net().to(device)
    model(torch.zeros(1, 3, 32, 32, device=device))  # materializes the LazyLinear before the optimizer sees it
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(steps):
        images = torch.randn(batch_size(step), 3, 32, 32, device=device)
        labels = torch.randint(0, CLASSES, (len(images),), device=device)
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    args = parse_args()
    loss = train(args.steps, torch.device(args.device))
    print("steps=%d loss=%.4f" % (args.steps, loss))


if __name__ == "__main__":
    main()
