"""NOT A LEAK: inference on images of varying size; the caching allocator's reserve climbs in steps.

Sources:
  https://discuss.pytorch.org/t/what-exactly-is-occupying-the-gpu-cache/80645  (the caching allocator keeps
      freed blocks "to avoid free and alloc calls ... this memory is pushed to the cache and reused later")
  https://discuss.pytorch.org/t/control-gpu-memory-cache/175356  ("the memory already allocated by PyTorch
      would not be returned to the device to avoid excessive cudamalloc/free calls every iteration")
  https://jae-heo.github.io/tech/en/posts/pytorch-internals-07.html  ("reserved memory and active memory
      differ ... shape patterns can create unexpectedly high peaks")

What was reported: users watching nvidia-smi during inference on inputs of
different sizes see GPU memory rise and not come back, and ask where the
leak is; the answer is PyTorch's caching allocator, which keeps every segment
it reserved for the largest shapes seen and reuses it.

This program: a small fully convolutional detector runs under
torch.inference_mode() on one image per iteration whose height and width are
drawn from 256..1024 (step 32); the boxes above a score threshold -- a
data-dependent number -- are converted to Python lists. Nothing is kept on
the GPU: memory in use swings with the image size, reserved memory climbs
whenever a larger image than any before arrives, then stays.

Iteration: one image.
Verdict: NO LEAK.
"""
import argparse
import random
import sys

import torch
from torch import nn


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=600, help="images (default 600)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.ReLU())
        self.scores = nn.Conv2d(32, 1, 1)
        self.boxes = nn.Conv2d(32, 4, 1)

    def forward(self, image):
        features = self.backbone(image)
        return self.scores(features).sigmoid().flatten(), self.boxes(features).flatten(2).squeeze(0).t()


def main():
    args = parse_args()
    torch.manual_seed(0)
    sizes = random.Random(1)
    device = torch.device(args.device)
    model = Detector().to(device).eval()
    detections = 0
    with torch.inference_mode():
        for _ in range(args.iterations):
            height, width = sizes.randrange(256, 1025, 32), sizes.randrange(256, 1025, 32)
            scores, boxes = model(torch.rand(1, 3, height, width, device=device))
            keep = scores > 0.5
            detections += len(boxes[keep].tolist())
    print("iterations=%d detections=%d" % (args.iterations, detections))


if __name__ == "__main__":
    main()
