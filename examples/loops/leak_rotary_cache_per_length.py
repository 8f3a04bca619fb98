"""Evaluation over variable-length batches with a rotary-embedding cache keyed by sequence length.

Sources:
  https://github.com/lucidrains/rotary-embedding-torch/issues/15  ("Model hangs on eval"; the maintainer:
      "i'm incorrectly caching by the sequence length, but it should cache the longest sequence length and
      slice out any subsequent calls with shorter ones")
  https://github.com/facebookresearch/xformers/issues/728  (rotary cos/sin caches recomputed for every
      sequence length that differs from the cached one)

What was reported: an encoder-decoder with rotary embeddings ran fine in
training but its evaluation stage hung and ran out of memory after a few
epochs; the rotary module cached its frequency tables under each sequence
length it was called with, so every new length added a table.

This program: an attention layer with rotary embeddings is evaluated under
torch.no_grad() on batches whose length is drawn from 64..1024 tokens. The
rotary module memoizes (cos, sin) in a dict keyed by the length: each length
not seen before adds 2 x length x 64 x 4 bytes that are never freed. Lengths
repeat only rarely in a run of a few hundred batches, so the cache grows
almost every iteration, by an amount that depends on the data.

Iteration: one validation batch (its length, and so its work, varies).
Leak: about 512 x length bytes per new length, ~280 KB per batch on average (estimate: depends on the drawn lengths).
Fix: cache the tables for the longest length seen and slice them for shorter ones.
"""
import argparse
import random
import sys

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 4
HEADS = 4
HEAD_DIM = 64
MIN_LEN, MAX_LEN = 64, 1024


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200, help="validation batches (default 200)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class RotaryEmbedding(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))
        self.cache = {}

    def tables(self, seq_len, device):
        if seq_len not in self.cache:
            positions = torch.arange(seq_len, device=device, dtype=torch.float32)
            freqs = torch.outer(positions, self.inv_freq)
            freqs = torch.cat((freqs, freqs), dim=-1)
            self.cache[seq_len] = (freqs.cos(), freqs.sin())  # LEAK: tensors-kept-alive (one entry per length)
        return self.cache[seq_len]

    def forward(self, x):
        cos, sin = self.tables(x.shape[-2], x.device)
        first, second = x.chunk(2, dim=-1)
        return x * cos + torch.cat((-second, first), dim=-1) * sin


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        width = HEADS * HEAD_DIM
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.rotary = RotaryEmbedding(HEAD_DIM)

    def forward(self, x):
        batch, length, width = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, HEADS, HEAD_DIM).permute(2, 0, 3, 1, 4)
        q, k = self.rotary(q), self.rotary(k)
        scores = (q @ k.transpose(-1, -2)) / HEAD_DIM ** 0.5
        mixed = F.softmax(scores, dim=-1) @ v
        return self.out(mixed.transpose(1, 2).reshape(batch, length, width))


def main():
    args = parse_args()
    torch.manual_seed(0)
    lengths = random.Random(1)
    model = Attention().to(args.device).eval()
    total = 0.0
    with torch.no_grad():
        for _ in range(args.iterations):
            length = lengths.randint(MIN_LEN, MAX_LEN)
            x = torch.randn(BATCH, length, HEADS * HEAD_DIM, device=args.device)
            total += model(x).float().pow(2).mean().item()
    print("iterations=%d cached_lengths=%d score=%.4f" % (args.iterations, len(model.rotary.cache), total))


if __name__ == "__main__":
    main()
