"""Serving loop whose placeholder cache is keyed by the batch's total token count (request threads).

Sources:
  https://github.com/NVIDIA/cudnn-frontend/pull/370  (review: "Unbounded growth of `_denom_placeholder_cache`
      on the THD path. The cache key includes the full shape, and the varlen caller passes `(total_q,)`, which
      changes with nearly every batch in a serving workload. Each new `total_q` permanently retains a
      `total_q * 4` byte device allocation that is never freed nor reused.")
  https://github.com/NVIDIA/cudnn-frontend/pull/627  (review: a memo "keyed by exact operand shapes ...
      Changing token count creates another entry ... A long-running process can therefore retain unbounded
      memo entries.")

What was reported: an attention kernel wrapper keeps a module-level dict of
device buffers keyed by (device, shape) so it does not allocate one per call.
In variable-length ("THD") serving the shape is the total number of tokens of
the batch, which is different nearly every time, so the dict only grows.

This program: four request threads pull batches of 1..16 requests of 16..512
tokens each from a queue, pack them (variable length, as a varlen kernel
would take them), and run a small attention block under torch.inference_mode().
The block asks a helper for a scratch buffer of shape (total_tokens, heads);
the helper caches it under its shape forever. The helper is shared by the
threads and guarded by a lock.

Iteration: one served batch (any thread).
Leak: total_tokens x 16 heads x 4 bytes per batch with a new total, ~140 KB on average (estimate: data-dependent sizes; a repeated total adds nothing).
Fix: cache one buffer of the largest size per device and slice it.
"""
import argparse
import queue
import random
import sys
import threading

import torch
import torch.nn.functional as F
from torch import nn

HEADS = 16
HEAD_DIM = 32
THREADS = 4

_placeholder_cache = {}
_placeholder_lock = threading.Lock()


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300, help="served batches, over all threads (default 300)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


def denominator_placeholder(shape, device):
    key = (device.type, device.index, shape)
    with _placeholder_lock:
        cached = _placeholder_cache.get(key)
        if cached is None:
            cached = torch.empty(shape, dtype=torch.float32, device=device)
            _placeholder_cache[key] = cached  # LEAK: tensors-kept-alive (one buffer per distinct total)
        return cached


class PackedAttention(nn.Module):
    def __init__(self):
        super().__init__()
        width = HEADS * HEAD_DIM
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, packed, lengths):
        total = packed.shape[0]
        q, k, v = self.qkv(packed).view(total, 3, HEADS, HEAD_DIM).unbind(1)
        denominators = denominator_placeholder((total, HEADS), packed.device)
        outputs = []
        start = 0
        for length in lengths:  # one request at a time, as a varlen kernel walks cu_seqlens
            end = start + length
            scores = torch.einsum("qhd,khd->hqk", q[start:end], k[start:end]) / HEAD_DIM ** 0.5
            weights = F.softmax(scores, dim=-1)
            denominators[start:end] = weights.sum(dim=-1).transpose(0, 1)
            outputs.append(torch.einsum("hqk,khd->qhd", weights, v[start:end]))
            start = end
        return self.out(torch.cat(outputs).reshape(total, HEADS * HEAD_DIM))


def serve(model, requests, results, device):
    with torch.inference_mode():
        while True:
            lengths = requests.get()
            if lengths is None:
                return
            packed = torch.randn(sum(lengths), HEADS * HEAD_DIM, device=device)
            results.append(float(model(packed, lengths).abs().mean()))


def main():
    args = parse_args()
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = PackedAttention().to(device).eval()
    draw = random.Random(1)
    requests = queue.Queue()
    for _ in range(args.iterations):
        requests.put([draw.randint(16, 512) for _ in range(draw.randint(1, 16))])
    for _ in range(THREADS):
        requests.put(None)
    results = []
    workers = [threading.Thread(target=serve, args=(model, requests, results, device)) for _ in range(THREADS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    print("iterations=%d cached_shapes=%d" % (len(results), len(_placeholder_cache)))


if __name__ == "__main__":
    main()
