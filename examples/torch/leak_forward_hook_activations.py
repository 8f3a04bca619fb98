"""A forward hook that keeps a convolution's output for feature visualization.

`attach_feature_probe` registers a forward hook on the second convolution of a
small CNN. The hook appends the layer's output to a list that lives only in
the hook's closure and is meant to be summarized every 1000 steps -- but it is
never cleared, so every batch's feature map stays alive: 32 x 32 x 16 x 16
float32 = 1 MiB per step. The output is detached, so no graph is kept; the
hook itself is the holder (model -> _forward_hooks -> keep_output -> saved).

Cause: tensors-kept-alive (held through a forward hook on a Conv2d).
Fix: keep a reduction (`output.mean((0, 2, 3))`), clear `saved` after each
summary, or remove the hook (`handle.remove()`) when the probe is done.
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 32
CLASSES = 10


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120, help="optimizer steps (default 120)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.head = nn.Linear(32, CLASSES)

    def forward(self, images):
        x = F.max_pool2d(F.relu(self.conv1(images)), 2)
        x = F.relu(self.conv2(x))
        return self.head(x.mean(dim=(2, 3)))


def attach_feature_probe(layer, summarize_every=1000):
    """Collects the layer's outputs; prints their mean channel activity every `summarize_every` batches."""
    saved = []

    def keep_output(module, inputs, output):
        saved.append(output.detach())  # LEAK: tensors-kept-alive
        if len(saved) % summarize_every == 0:
            activity = torch.stack([o.mean(dim=(0, 2, 3)) for o in saved[-summarize_every:]])
            print("mean channel activity:", activity.mean().item())

    return layer.register_forward_hook(keep_output)


def train(steps, device):
    torch.manual_seed(0)
    model = SmallCNN().to(device)
    attach_feature_probe(model.conv2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for _ in range(steps):
        images = torch.randn(BATCH, 3, 32, 32, device=device)
        labels = torch.randint(0, CLASSES, (BATCH,), device=device)
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
