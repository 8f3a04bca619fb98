"""NOT A LEAK: a bounded functools.lru_cache of device tensors, keyed by batch size, in a decode loop.

Sources:
  https://github.com/ROCm/aiter/pull/4587  (`get_meta_param` returns a device tensor from "a bounded
      `@functools.lru_cache` ... once the cache overflows, the tensor is freed and its block goes back to the
      caching allocator")
  https://github.com/pytorch/pytorch/pull/112301  ("Memory leak from bsr_scatter_mm_indices_data argument
      cache": an lru_cache(maxsize=128) holding tensors made a leak check fire -- "the cache is causing the
      test to look leaky")

What was reported: attention kernels memoize small device tables (split
offsets) with functools.lru_cache, keyed by the batch's shape parameters.
The cache holds device memory and grows while new keys arrive -- long enough
for a leak check to fire -- but it is bounded: past maxsize, each new entry
evicts the least recently used one and its tensor is freed.

This program: a decode loop whose batch size varies over 1..64 (continuous
batching) asks an lru_cache(maxsize=16) function for an index table of
(batch_size + 1) x splits int32 plus a workspace of batch_size x 64 KiB; with
64 possible keys and 16 slots, the cache is full within the first ~20
iterations and then evicts as often as it inserts: memory in use jitters
around a plateau, the sizes depending on the data.

Iteration: one decode step.
Verdict: NO LEAK (grows for the first ~20 iterations, bounded by 16 entries after).
"""
import argparse
import functools
import random
import sys

import torch

SPLITS = 32
WORKSPACE_FLOATS_PER_ROW = 16384


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=800, help="decode steps (default 800)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


@functools.lru_cache(maxsize=16)
def split_tables(batch_size, splits, device):
    indptr = torch.arange(0, (batch_size + 1) * splits, splits, dtype=torch.int32, device=device)
    workspace = torch.empty(batch_size, WORKSPACE_FLOATS_PER_ROW, device=device)
    return indptr, workspace


def decode_step(query, keys, device):
    batch_size = query.shape[0]
    indptr, workspace = split_tables(batch_size, SPLITS, device)
    scores = torch.einsum("bd,bsd->bs", query, keys)
    workspace[:, :scores.shape[1]] = scores
    return workspace[:, :scores.shape[1]].softmax(dim=-1).sum() + indptr[-1].float()


def main():
    args = parse_args()
    torch.manual_seed(0)
    arrivals = random.Random(1)
    device = torch.device(args.device)
    total = 0.0
    with torch.inference_mode():
        for _ in range(args.iterations):
            batch_size = arrivals.randint(1, 64)
            query = torch.randn(batch_size, 64, device=device)
            keys = torch.randn(batch_size, 128, 64, device=device)
            total += float(decode_step(query, keys, str(device)))
    info = split_tables.cache_info()
    print("iterations=%d cache_size=%d misses=%d total=%.1f" % (args.iterations, info.currsize, info.misses, total))


if __name__ == "__main__":
    main()
