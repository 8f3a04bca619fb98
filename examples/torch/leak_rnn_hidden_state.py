"""Language-model evaluation that carries the RNN hidden state without detach.

A GRU language model is evaluated on one long token stream cut into
consecutive 35-token windows; the hidden state at the end of a window is the
initial state of the next one, as in truncated backpropagation through time.
The loop runs with autograd enabled and never detaches `hidden`, so each new
hidden state's `grad_fn` reaches back through every window evaluated so far:
the embeddings, GRU outputs and hidden states of all past windows stay alive,
and more of them with each window. (The same bug in training either raises
"Trying to backward through the graph a second time" or, with
retain_graph=True, leaks the same way and slows down every step.)

Cause: autograd-graph-kept-alive (the local tensor `hidden` of `evaluate`).
Fix: `hidden = hidden.detach()` at the start of each window (the classic
`repackage_hidden`), and evaluate under `torch.no_grad()`.
"""
import argparse
import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

try:  # under `gpuleak run` this marks a step; without gpuleak it does nothing
    from gpuleak import step as mark_step
except ImportError:
    def mark_step():
        pass

VOCAB = 1000
EMBEDDING = 128
HIDDEN = 256
BATCH = 20
WINDOW = 35


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120, help="evaluation windows (default 120)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class GRULanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, EMBEDDING)
        self.rnn = nn.GRU(EMBEDDING, HIDDEN, batch_first=True)
        self.decoder = nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens, hidden):
        output, hidden = self.rnn(self.embed(tokens), hidden)
        return self.decoder(output), hidden

    def initial_hidden(self, batch, device):
        return torch.zeros(1, batch, HIDDEN, device=device)


def evaluate(model, stream, windows, device):
    model.eval()
    hidden = model.initial_hidden(BATCH, device)
    total_nll = 0.0
    for window in range(windows):
        start = window * WINDOW
        tokens = stream[:, start:start + WINDOW]
        targets = stream[:, start + 1:start + WINDOW + 1]
        logits, hidden = model(tokens, hidden)  # LEAK: autograd-graph-kept-alive
        total_nll += F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1)).item()
        mark_step()
    return total_nll / windows


def main():
    args = parse_args()
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = GRULanguageModel().to(device)
    stream = torch.randint(0, VOCAB, (BATCH, args.steps * WINDOW + 1), device=device)
    nll = evaluate(model, stream, args.steps, device)
    print("windows=%d perplexity=%.1f" % (args.steps, math.exp(nll)))


if __name__ == "__main__":
    main()
