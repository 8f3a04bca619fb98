"""NOT A LEAK: activation memory jitters with the sequence length of each batch.

A small Transformer encoder classifies token sequences whose length changes
from batch to batch: a length-bucketing sampler gives each batch sequences of
similar length, anywhere from 16 to 160 tokens, padded to the longest one. Each step's activations, and so its
peak memory, depend on that length: memory in use swings up and down from
step to step, and PyTorch's caching allocator reserves more each time a longer
batch than any before arrives, a staircase that rises quickly at first and then
more and more rarely. Sampled at random moments it looks like noisy growth;
nothing is kept from one step to the next.

Verdict: NO LEAK.
"""
import argparse
import random
import sys

import torch
import torch.nn.functional as F
from torch import nn

VOCAB = 1000
WIDTH = 64
BATCH = 16
CLASSES = 5
MIN_TOKENS, MAX_TOKENS = 16, 160


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500, help="optimizer steps (default 500)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class SequenceClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH, padding_idx=0)
        self.position = nn.Embedding(MAX_TOKENS, WIDTH)
        layer = nn.TransformerEncoderLayer(WIDTH, nhead=4, dim_feedforward=128, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2)
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, tokens, padding):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.encoder(self.embed(tokens) + self.position(positions), src_key_padding_mask=padding)
        keep = (~padding).unsqueeze(2).float()
        return self.head((x * keep).sum(1) / keep.sum(1))


def make_batch(rng, device):
    bucket = rng.randint(MIN_TOKENS, MAX_TOKENS)
    lengths = [rng.randint(max(MIN_TOKENS, bucket // 2), bucket) for _ in range(BATCH)]
    longest = max(lengths)
    tokens = torch.zeros(BATCH, longest, dtype=torch.long)
    for row, length in enumerate(lengths):
        tokens[row, :length] = torch.randint(1, VOCAB, (length,))
    labels = torch.tensor([length * CLASSES // (MAX_TOKENS + 1) for length in lengths])
    return tokens.to(device), (tokens == 0).to(device), labels.to(device)


def train(steps, device):
    torch.manual_seed(0)
    rng = random.Random(0)
    model = SequenceClassifier().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for _ in range(steps):
        tokens, padding, labels = make_batch(rng, device)
        loss = F.cross_entropy(model(tokens, padding), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    args = parse_args()
    loss = train(args.steps, torch.device(args.device))
    print("steps=%d loss=%.4f" % (args.steps, loss))


if __name__ == "__main__":
    main()
