"""Positional encodings memoised with an unbounded functools.lru_cache.

Reported: https://github.com/MoonshotAI/Kimi-Audio/issues/117
("`@lru_cache(maxsize=None)` may cause memory leakage when training data
grows larger"). The shape here: a module-level function builds the sinusoidal
position table for a sequence length on the GPU and is decorated with
`@functools.lru_cache(maxsize=None)`, keyed by length and device. Batches are
padded to their own longest sequence, so nearly every batch has a new length
and the cache keeps one more table (length x 1024 float32, about 0.5 MiB and
growing).

Holder: the cache of the lru_cache-wrapped `positional_encoding` (module
__main__).
Fix: a bounded cache (`maxsize=8`), or build one table for the longest length
and slice it.
"""
import functools
import math

import torch
from torch import nn

from case_options import parse_args

BATCH, WIDTH = 16, 1024


@functools.lru_cache(maxsize=None)  # KEPT: lru-cache
def positional_encoding(length, device):
    position = torch.arange(length, device=device, dtype=torch.float32)[:, None]
    frequency = torch.exp(torch.arange(0, WIDTH, 2, device=device) * (-math.log(10000.0) / WIDTH))
    table = torch.zeros(length, WIDTH, device=device)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table


def train(steps, device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.GELU(), nn.Linear(WIDTH, 1)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    for step in range(steps):
        length = 100 + step  # dynamic padding: each batch padded to its own longest sequence
        tokens = torch.randn(BATCH, length, WIDTH, device=device)
        loss = model(tokens + positional_encoding(length, device)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    args = parse_args(__doc__)
    print("steps=%d loss=%.4f" % (args.steps, train(args.steps, args.device)))


if __name__ == "__main__":
    main()
