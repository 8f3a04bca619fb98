"""An evaluation loop, leaking or fixed: the pair `gpuleak diff` compares.

With no flag the loop sums each batch's loss tensor with autograd on, so
`total_loss` chains every batch's graph (the pattern of
examples/torch/leak_eval_total_loss.py). With `--fixed` it runs under
`torch.no_grad()` and sums `loss.item()`, the fix people apply. Same program,
same batches: a diff of the two runs shows the growing sites gone; a diff of
two fixed runs shows nothing.
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


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=80, help="evaluation batches (default 80)")
    parser.add_argument("--fixed", action="store_true", help="no_grad and loss.item()")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("CUDA is not available here")
    return args


def evaluate(model, steps, fixed):
    generator = torch.Generator(device="cuda").manual_seed(1)
    total_loss = 0.0
    with torch.set_grad_enabled(not fixed):
        for _ in range(steps):
            images = torch.rand(256, 784, device="cuda", generator=generator)
            labels = torch.randint(0, 10, (256,), device="cuda", generator=generator)
            loss = F.cross_entropy(model(images), labels)
            total_loss += loss.item() if fixed else loss
            mark_step()
    return float(total_loss) / steps


def main():
    args = parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10)).cuda().eval()
    print(f"mean loss {evaluate(model, args.steps, args.fixed):.4f}")


if __name__ == "__main__":
    main()
