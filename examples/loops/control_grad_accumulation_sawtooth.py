"""NOT A LEAK: gradient accumulation over 8 micro-batches per optimizer step; memory rises and falls with the step.

Sources:
  https://discuss.pytorch.org/t/vram-usage-increase-with-more-gradient-accumulation-steps/180729  ("What would
      cause GPU memory usage increase with more gradient accumulation steps?" -- answer: with accumulation the
      .grad tensors stay allocated across micro-batches, so the high-water mark is higher; expected, not a leak)
  https://github.com/ThilinaRajapakse/BERT_binary_text_classification/issues/15  (the usual loop: divide the
      loss by the accumulation steps, step the optimizer every N micro-batches)

What was reported: a training loop with gradient accumulation uses more GPU
memory than the same loop without it, and its memory goes up and down within
each optimizer step; the user suspects a leak. The loop itself is the
textbook one: `loss / steps`, `backward()` per micro-batch, `total_loss +=
loss.detach()`, an optimizer step and zero_grad(set_to_none=True) every N.

This program: that loop, with torch.optim.AdamW (the reported loop used a
torch.optim optimizer; it steps every 8 micro-batches), over a small
Transformer encoder. The gradients exist from the first backward of a step to
zero_grad(); AdamW's state is created at the first step. Memory is periodic
with a period of 8 iterations and does not trend.

Iteration: one micro-batch (8 make an optimizer step).
Verdict: NO LEAK (a sawtooth with period 8; one-time growth at the first optimizer step).
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

ACCUMULATION_STEPS = 8
BATCH = 8
SEQ_LEN = 64
WIDTH = 256
VOCAB = 1000


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=640, help="micro-batches (default 640)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        layer = nn.TransformerEncoderLayer(WIDTH, 4, dim_feedforward=2 * WIDTH, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2)
        self.head = nn.Linear(WIDTH, 2)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)).mean(dim=1))


def main():
    args = parse_args()
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = Classifier().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    total_loss = torch.zeros((), device=device)
    logged = []
    for micro_step in range(args.iterations):
        tokens = torch.randint(0, VOCAB, (BATCH, SEQ_LEN), device=device)
        labels = torch.randint(0, 2, (BATCH,), device=device)
        loss = F.cross_entropy(model(tokens), labels) / ACCUMULATION_STEPS
        loss.backward()
        total_loss += loss.detach()
        if (micro_step + 1) % ACCUMULATION_STEPS == 0:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            logged.append(total_loss.item())
            total_loss.zero_()
    print("iterations=%d optimizer_steps=%d last_loss=%.4f" % (args.iterations, len(logged), logged[-1] if logged else 0.0))


if __name__ == "__main__":
    main()
