"""NOT A GPU LEAK: predictions are kept, but in host memory.

An image classifier keeps each batch's logits for an end-of-training report,
like leak_outputs_list.py -- but it copies them to the CPU first
(`.detach().cpu()`). The process's resident memory (RSS) grows by 128 x 1000
float32 = 512 KiB per step, so a tool that watches the process's memory calls
it a leak; GPU memory is flat, because the GPU tensors are freed as soon as
the step ends. It is unbounded host memory growth, not a GPU memory leak.
(With `--device cpu` the kept copies are ordinary CPU tensors and do grow.)

Verdict: NO LEAK on the GPU.
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
    parser.add_argument("--steps", type=int, default=500, help="optimizer steps (default 500)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


def train(steps, device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 256), nn.ReLU(), nn.Linear(256, CLASSES)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    host_logits = []
    for _ in range(steps):
        images = torch.randn(BATCH, 3, 32, 32, device=device)
        labels = torch.randint(0, CLASSES, (BATCH,), device=device)
        logits = model(images)
        loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        host_logits.append(logits.detach().to("cpu", copy=True))  # host RAM grows; GPU memory does not
    return loss.item(), host_logits


def main():
    args = parse_args()
    loss, host_logits = train(args.steps, torch.device(args.device))
    print("steps=%d loss=%.4f host_batches=%d host_bytes=%d"
          % (args.steps, loss, len(host_logits), sum(t.numel() * t.element_size() for t in host_logits)))


if __name__ == "__main__":
    main()
