"""`retain_graph=True` in a training loop that also keeps the loss tensors.

A two-head model (a main classification head and an auxiliary regression head
on a shared trunk) backpropagates the two losses separately. The first
backward needs `retain_graph=True` because the second one goes through the
same trunk; the second was given `retain_graph=True` too, "to be safe". The
loop also keeps each step's main loss in `loss_history` for a plot. Without
retain_graph that would cost one small tensor per step (see leak_loss_list.py);
with it, backward no longer frees the graph, and the kept loss keeps every
saved activation of its step alive: the input batch and both hidden layers of
the trunk, about 640 KiB per step.

Cause: autograd-graph-kept-alive (a local list of `train` keeps losses whose
graphs were retained).
Fix: drop `retain_graph=True` from the last backward (or backprop the sum of
the losses once) and keep `loss.item()`.
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 128
FEATURES = 256
HIDDEN = 512
CLASSES = 10


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120, help="optimizer steps (default 120)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class TwoHeadNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(),
                                   nn.Linear(HIDDEN, HIDDEN), nn.ReLU())
        self.classify = nn.Linear(HIDDEN, CLASSES)
        self.regress = nn.Linear(HIDDEN, 1)

    def forward(self, x):
        shared = self.trunk(x)
        return self.classify(shared), self.regress(shared).squeeze(1)


def train(steps, device):
    torch.manual_seed(0)
    model = TwoHeadNet().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_history = []
    for _ in range(steps):
        x = torch.randn(BATCH, FEATURES, device=device)
        labels = (x[:, :CLASSES]).argmax(dim=1)
        target = x.pow(2).mean(dim=1)
        logits, value = model(x)
        main_loss = F.cross_entropy(logits, labels)
        aux_loss = F.mse_loss(value, target)
        optimizer.zero_grad()
        aux_loss.backward(retain_graph=True)  # needed: main_loss backprops through the same trunk
        main_loss.backward(retain_graph=True)  # not needed: nothing backprops through this graph again
        optimizer.step()
        loss_history.append(main_loss)  # LEAK: autograd-graph-kept-alive
    return loss_history


def main():
    args = parse_args()
    loss_history = train(args.steps, torch.device(args.device))
    print("steps=%d first_loss=%.4f last_loss=%.4f"
          % (args.steps, loss_history[0].item(), loss_history[-1].item()))


if __name__ == "__main__":
    main()
