"""NOT A LEAK: a rotary-embedding cache that grows to the longest length seen (next power of two), then stays.

Sources:
  https://github.com/karpathy/nanochat/pull/520  ("Fix RoPE cache overflow for long prompts with KV cache":
      "Grow the cache to the next power of two for amortized behavior. Overwrite existing buffers instead of
      re-registering them.")
  https://github.com/facebookresearch/xformers/issues/728  ("The cached tensors should only be re-computed if
      the sequence length is larger than the cached sequence length")
  https://github.com/openai/gpt-oss/pull/43  ("Ensured that cache updates only when the sequence length increases")

What was reported: the fix for rotary caches keyed by every length is to keep
one table for the longest length seen, slice it for shorter inputs, and grow
it (to the next power of two) only when a longer input arrives. Memory grows
a few times early in a run and then not at all: a workspace that plateaus.

This program: the evaluation of leak_rotary_cache_per_length.py (the same
attention layer, lengths drawn from 64..1024) with that fix: the cos/sin
tables are reallocated only when a batch is longer than the table, at most
five times (64 -> 1024), almost all of them in the first few iterations.

Iteration: one validation batch (its length varies).
Verdict: NO LEAK (growth that stops once the longest length has been seen).
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
    parser.add_argument("--iterations", type=int, default=600, help="validation batches (default 600)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class RotaryEmbedding(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))
        self.cos = self.sin = None
        self.growths = 0

    def tables(self, seq_len, device):
        if self.cos is None or self.cos.shape[0] < seq_len:
            capacity = 1 << (seq_len - 1).bit_length()
            positions = torch.arange(capacity, device=device, dtype=torch.float32)
            freqs = torch.outer(positions, self.inv_freq)
            freqs = torch.cat((freqs, freqs), dim=-1)
            self.cos, self.sin = freqs.cos(), freqs.sin()
            self.growths += 1
        return self.cos[:seq_len], self.sin[:seq_len]

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
        mixed = F.softmax((q @ k.transpose(-1, -2)) / HEAD_DIM ** 0.5, dim=-1) @ v
        return self.out(mixed.transpose(1, 2).reshape(batch, length, width))


def main():
    args = parse_args()
    torch.manual_seed(0)
    lengths = random.Random(1)
    model = Attention().to(args.device).eval()
    total = 0.0
    with torch.no_grad():
        for _ in range(args.iterations):
            x = torch.randn(BATCH, lengths.randint(MIN_LEN, MAX_LEN), HEADS * HEAD_DIM, device=args.device)
            total += model(x).float().pow(2).mean().item()
    print("iterations=%d table_growths=%d score=%.4f" % (args.iterations, model.rotary.growths, total))


if __name__ == "__main__":
    main()
