"""An nn.Module that logs its hidden activations in an attribute list.

The encoder keeps every batch's hidden activations in `self.activation_log`,
meant for a "dead ReLU units" report at the end of training. The activations
are detached, so no graph is kept, but each is the 128 x 512 float32 output of
the first layer (256 KiB): once backward has run, the only reference left to
it is the log, and 256 KiB stay on the GPU per step.

Cause: tensors-kept-alive (a list that is an attribute of the Encoder module).
Fix: log a reduction (`(hidden > 0).float().mean(0)` summed into a buffer
that is overwritten, or `.item()` values), or clear the log after each report.
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

FEATURES = 512
BATCH = 128


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120, help="optimizer steps (default 120)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(FEATURES, 512)
        self.fc2 = nn.Linear(512, 64)
        self.activation_log = []  # read by dead_unit_fraction() after training

    def forward(self, x):
        hidden = F.relu(self.fc1(x))
        self.activation_log.append(hidden.detach())  # LEAK: tensors-kept-alive
        return self.fc2(hidden)

    def dead_unit_fraction(self):
        alive = torch.zeros(512, dtype=torch.bool, device=self.fc1.weight.device)
        for hidden in self.activation_log:
            alive |= (hidden > 0).any(dim=0)
        return 1.0 - alive.float().mean().item()


def train(steps, device):
    torch.manual_seed(0)
    model = Encoder().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    projection = torch.randn(FEATURES, 64, device=device) / FEATURES ** 0.5
    for _ in range(steps):
        x = torch.randn(BATCH, FEATURES, device=device)
        loss = F.mse_loss(model(x), torch.tanh(x @ projection))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model, loss.item()


def main():
    args = parse_args()
    model, loss = train(args.steps, torch.device(args.device))
    print("steps=%d loss=%.5f dead_units=%.3f logged_batches=%d"
          % (args.steps, loss, model.dead_unit_fraction(), len(model.activation_log)))


if __name__ == "__main__":
    main()
