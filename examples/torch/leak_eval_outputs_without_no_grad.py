"""Batch inference that keeps model outputs computed with autograd enabled.

An inference script runs a small CNN over a stream of images and keeps the
logits of every batch in `predictions` to write them out at the end. It
forgets `torch.no_grad()`, so each kept output has a `grad_fn`, and through it
the whole graph of its forward pass: the input batch, the convolution and ReLU
outputs and the pooling indices -- about 5.6 MiB per batch, all for a 10 KiB
result. Many forward-pass sites grow together, one allocation each per batch.

Cause: autograd-graph-kept-alive (a local list of `predict`; its elements have
a grad_fn).
Fix: run inference under `torch.inference_mode()` (or `torch.no_grad()`), or
keep `logits.detach()` -- and move results to the CPU if they are many.
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

try:  # under `gpuleak run` this marks a step; without gpuleak it does nothing
    from gpuleak import step as mark_step
except ImportError:
    def mark_step():
        pass

BATCH = 32
CLASSES = 80


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120, help="inference batches (default 120)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.head = nn.Linear(32 * 8 * 8, CLASSES)

    def forward(self, images):
        x = F.max_pool2d(F.relu(self.conv1(images)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.head(x.flatten(1))


def image_stream(count, device):
    generator = torch.Generator(device=device).manual_seed(1)
    for _ in range(count):
        yield torch.rand(BATCH, 3, 32, 32, device=device, generator=generator)


def predict(model, images_stream):
    model.eval()
    predictions = []
    for images in images_stream:
        predictions.append(model(images))  # LEAK: autograd-graph-kept-alive
        mark_step()
    return predictions


def main():
    args = parse_args()
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = Tagger().to(device)
    predictions = predict(model, image_stream(args.steps, device))
    tags = torch.cat([p.argmax(dim=1) for p in predictions])
    print("batches=%d predictions=%d distinct_tags=%d" % (args.steps, len(tags), len(tags.unique())))


if __name__ == "__main__":
    main()
