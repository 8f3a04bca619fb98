"""Skipped batches kept as exceptions, whose tracebacks keep GPU tensors.

Every other batch of this image dataset has a corrupt (NaN) pixel.
`preprocess` moves a batch to the GPU, normalizes it, and raises
`CorruptBatch` when it finds a non-finite value. The training loop catches the
error and keeps it in `skipped` to report the bad batches at the end. An
exception holds its traceback, the traceback holds the frame of `preprocess`,
and that frame still holds its local `pixels`: the whole normalized batch,
64 x 3 x 32 x 32 float32 = 768 KiB on the GPU, per skipped batch. With one
corrupt batch per optimizer step that is 768 KiB per step.

Cause: tensors-kept-alive (a frame kept by an exception traceback holds them).
Fix: keep `str(error)` (or the batch index) instead of the exception, or
`error.with_traceback(None)`; `del pixels` before raising also works.
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 64
CLASSES = 10


class CorruptBatch(ValueError):
    pass


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120, help="optimizer steps (default 120)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


def load_batch(index, generator):
    """A batch of images as they come from disk (on the CPU); odd batches have a corrupt pixel."""
    images = torch.randn(BATCH, 3, 32, 32, generator=generator)
    labels = torch.randint(0, CLASSES, (BATCH,), generator=generator)
    if index % 2 == 1:
        images[index % BATCH, 0, 0, 0] = float("nan")
    return images, labels


def preprocess(images, mean, std):
    pixels = images.to(mean.device, copy=True)
    pixels.sub_(mean).div_(std)
    if not torch.isfinite(pixels).all():
        raise CorruptBatch("batch has non-finite pixels")
    return pixels


def train(steps, device):
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, CLASSES)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    mean = torch.tensor([0.1, 0.0, -0.1], device=device).view(1, 3, 1, 1)
    std = torch.tensor([1.1, 1.0, 0.9], device=device).view(1, 3, 1, 1)
    skipped = []
    done = 0
    batch_index = 0
    while done < steps:
        images, labels = load_batch(batch_index, generator)
        batch_index += 1
        try:
            pixels = preprocess(images, mean, std)
        except CorruptBatch as error:
            skipped.append(error)  # LEAK: tensors-kept-alive
            continue
        loss = F.cross_entropy(model(pixels), labels.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        done += 1
    return loss.item(), skipped


def main():
    args = parse_args()
    loss, skipped = train(args.steps, torch.device(args.device))
    print("steps=%d loss=%.4f skipped_batches=%d" % (args.steps, loss, len(skipped)))


if __name__ == "__main__":
    main()
