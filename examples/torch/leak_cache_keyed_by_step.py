"""Distillation with a teacher-output cache whose key never repeats.

A small student text classifier is distilled from a larger frozen teacher. To
avoid running the teacher again in later epochs, `teacher_logits` memoizes the
teacher's output in the module-level dict `teacher_cache` -- but it is keyed by
the global step, which never repeats, so the cache is never hit and only grows.
Each entry is the teacher's 256 x 512 float32 output computed under
`torch.no_grad()` (512 KiB, no autograd graph): 512 KiB per step.

Cause: tensors-kept-alive (a module-level dict).
Fix: key the cache by what identifies the input (the dataset index of the
batch), bound it (an LRU of a few entries), or keep it on the CPU.
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

VOCAB = 5000
CLASSES = 512
BATCH = 256
TOKENS = 24
TEMPERATURE = 2.0

teacher_cache = {}  # global step -> teacher logits


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120, help="optimizer steps (default 120)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class BagOfWords(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.embed = nn.EmbeddingBag(VOCAB, width, mode="mean")
        self.head = nn.Linear(width, CLASSES)

    def forward(self, tokens):
        return self.head(self.embed(tokens))


def teacher_logits(teacher, global_step, tokens):
    """The teacher's logits for a batch, memoized so later epochs can reuse them."""
    if global_step in teacher_cache:
        return teacher_cache[global_step]
    with torch.no_grad():
        logits = teacher(tokens)
    teacher_cache[global_step] = logits  # LEAK: tensors-kept-alive
    return logits


def train(steps, device):
    torch.manual_seed(0)
    teacher = BagOfWords(256).to(device).eval()
    for parameter in teacher.parameters():
        parameter.requires_grad_(False)
    student = BagOfWords(64).to(device)
    optimizer = torch.optim.AdamW(student.parameters(), lr=1e-3)
    for global_step in range(steps):
        tokens = torch.randint(0, VOCAB, (BATCH, TOKENS), device=device)
        target = F.softmax(teacher_logits(teacher, global_step, tokens) / TEMPERATURE, dim=1)
        student_log_probs = F.log_softmax(student(tokens) / TEMPERATURE, dim=1)
        loss = F.kl_div(student_log_probs, target, reduction="batchmean") * TEMPERATURE ** 2
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    args = parse_args()
    loss = train(args.steps, torch.device(args.device))
    print("steps=%d loss=%.5f cached_batches=%d" % (args.steps, loss, len(teacher_cache)))


if __name__ == "__main__":
    main()
