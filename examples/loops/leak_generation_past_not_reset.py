"""Token-by-token generation loop whose `past` is carried forever, with autograd on.

Sources:
  https://github.com/huggingface/transformers/issues/3141  ("GPU memory getting out of bound": GPT-2 run
      step by step with `output, past = model(b_train_contexts, past=past)`, batch 16, not in training mode;
      "after each iteration about 440MB of memory is allocated"; a 32 GB GPU is full before 500 iterations)
  https://github.com/hitomi-team/sukima/issues/5  (CUDA memory balloons during HF GPT generation; fixed
      with @torch.inference_mode() on generate())

What was reported: a loop feeds one token per sequence per call and passes
the returned `past` back in; `past` is never reset, so it gains one position
per call, and since the loop does not run under no_grad, every call's graph
-- which saved the whole key/value cache of that call for backward -- stays
reachable from the newest `past` (through the next layer's inputs).

This program: a two-layer decoder with a hand-written KV cache is called 16
sequences x 1 token at a time; `past` is passed back every call and never
reset; model.eval() but no torch.no_grad(). The growth per iteration itself
grows (the cache saved by iteration t has t positions).

Iteration: one model call (one new token for each of the 16 sequences).
Leak: about 33 KB x t at call t (the keys, values and attention weights saved by each call's graph, reachable
through the next layer's `past`; measured on the CPU as peak RSS growth, 1.0 MB per call averaged over calls
10..50, so ~3.3 MB per call at t=100; the rate itself grows).
Fix: run generation under torch.inference_mode() and reset `past` for each new batch of contexts.
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

VOCAB = 2048
WIDTH = 128
HEADS = 4
HEAD_DIM = WIDTH // HEADS
LAYERS = 2
SEQUENCES = 16


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200, help="model calls (default 200)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)

    def forward(self, x, layer_past):
        batch, length, _ = x.shape
        q, k, v = self.qkv(self.norm(x)).view(batch, length, 3, HEADS, HEAD_DIM).permute(2, 0, 3, 1, 4)
        if layer_past is not None:
            k = torch.cat((layer_past[0], k), dim=-2)
            v = torch.cat((layer_past[1], v), dim=-2)
        weights = F.softmax((q @ k.transpose(-1, -2)) / HEAD_DIM ** 0.5, dim=-1)
        mixed = (weights @ v).transpose(1, 2).reshape(batch, length, WIDTH)
        return x + self.proj(mixed), (k, v)


class GPTLike(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, tokens, past=None):
        x = self.embed(tokens)
        presents = []
        for index, block in enumerate(self.blocks):
            x, present = block(x, None if past is None else past[index])
            presents.append(present)
        return self.head(x), presents


def main():
    args = parse_args()
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = GPTLike().to(device).eval()
    contexts = torch.randint(0, VOCAB, (SEQUENCES, 1), device=device)
    past = None
    for _ in range(args.iterations):
        output, past = model(contexts, past=past)  # LEAK: autograd-graph-kept-alive (past grows and keeps every call's graph)
        contexts = output[:, -1].argmax(dim=-1, keepdim=True)
    print("iterations=%d past_length=%d" % (args.iterations, past[0][0].shape[-2]))


if __name__ == "__main__":
    main()
