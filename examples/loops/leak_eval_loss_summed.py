"""Evaluation loop that sums the loss as a tensor, with autograd on.

Sources:
  https://pytorch.org/docs/stable/notes/faq.html  ("My model reports cuda runtime error(2): out of memory":
      "Don't accumulate history across your training loop", the `total_loss += loss` example)
  https://discuss.pytorch.org/t/gpu-memory-increase-while-i-wanna-to-backward-with-accumulative-loss/43284

What was reported: PyTorch's FAQ shows a loop that adds each batch's loss to
`total_loss`; the loss is still a differentiable tensor, so `total_loss`
accumulates history and the GPU fills up. The forum thread reports the same
`loss += loss_part` accumulation growing memory fast and never releasing it.

This program: a small Transformer encoder is evaluated over validation batches
(model.eval(), but no torch.no_grad()), and `total_loss += loss` links every
batch's graph to the running sum. Every batch's saved activations (attention,
feed-forward, layer norms: many allocation sites at once) stay on the GPU.
Nothing calls backward() and nothing calls an optimizer.

Iteration: one validation batch.
Leak: about 12 MB per batch (saved activations of the two layers; measured on the CPU as peak RSS growth,
11.7 MB per batch over batches 5..25; the GPU's kernels save a similar set).
Fix: wrap the loop in torch.no_grad() and accumulate loss.item().
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 8
SEQ_LEN = 64
WIDTH = 128
HEADS = 4
VOCAB = 1000


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200, help="validation batches (default 200)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        layer = nn.TransformerEncoderLayer(WIDTH, HEADS, dim_feedforward=4 * WIDTH, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2)
        self.head = nn.Linear(WIDTH, 2)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)).mean(dim=1))


def validation_batches(count, device):
    generator = torch.Generator(device="cpu").manual_seed(1)
    for _ in range(count):
        tokens = torch.randint(0, VOCAB, (BATCH, SEQ_LEN), generator=generator)
        labels = torch.randint(0, 2, (BATCH,), generator=generator)
        yield tokens.to(device), labels.to(device)


def evaluate(model, batches):
    model.eval()
    total_loss = 0
    count = 0
    for tokens, labels in batches:
        loss = F.cross_entropy(model(tokens), labels)
        total_loss += loss  # LEAK: autograd-graph-kept-alive (the sum links every batch's graph)
        count += 1
    return total_loss / count


def main():
    args = parse_args()
    torch.manual_seed(0)
    model = Classifier().to(args.device)
    mean_loss = evaluate(model, validation_batches(args.iterations, args.device))
    print("iterations=%d mean_loss=%.4f" % (args.iterations, float(mean_loss)))


if __name__ == "__main__":
    main()
