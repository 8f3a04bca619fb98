"""Keeps every batch's predicted class probabilities for an end-of-training report.

An image classifier (1000 classes) is trained on random 32x32 images. To report
the model's calibration after training, the loop keeps each batch's softmax
output in `all_probs`. The probabilities are detached, so no autograd graph is
kept, but each one is a new 128 x 1000 float32 tensor (512 KiB) that stays on
the GPU: 512 KiB per step, without bound.

Cause: tensors-kept-alive (a local list of the training function).
Fix: reduce to what the report needs while training (a running histogram, or
`probs.max(1).values.sum().item()`), or move each batch to the CPU.
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

CLASSES = 1000
BATCH = 128


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120, help="optimizer steps (default 120)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 256), nn.ReLU())
        self.head = nn.Linear(256, CLASSES)

    def forward(self, images):
        return self.head(self.body(images))


def train(steps, device):
    torch.manual_seed(0)
    model = Classifier().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    all_probs = []
    for _ in range(steps):
        images = torch.randn(BATCH, 3, 32, 32, device=device)
        labels = torch.randint(0, CLASSES, (BATCH,), device=device)
        logits = model(images)
        loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        all_probs.append(logits.detach().softmax(dim=1))  # LEAK: tensors-kept-alive
    return loss.item(), all_probs


def main():
    args = parse_args()
    loss, all_probs = train(args.steps, torch.device(args.device))
    confidence = sum(p.max(dim=1).values.mean().item() for p in all_probs) / len(all_probs)
    print("steps=%d loss=%.4f mean_confidence=%.4f kept_batches=%d"
          % (args.steps, loss, confidence, len(all_probs)))


if __name__ == "__main__":
    main()
