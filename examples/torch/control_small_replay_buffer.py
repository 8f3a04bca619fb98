"""NOT A LEAK: a contrastive queue of the last 16 batches of keys, full during warm-up.

A MoCo-style contrastive learner keeps the key embeddings of the last 16
batches in `NegativeQueue.keys`, a `collections.deque(maxlen=16)`, and uses
them as negatives. Each batch adds 256 x 128 float32 (128 KiB) of keys, so GPU
memory grows for 16 steps and is flat from then on -- the queue is full before
warm-up is over. A tool that compares memory after step 16 with memory after
step 1 sees 2 MiB of growth; after warm-up there is none.

Verdict: NO LEAK (the queue is bounded: deque `keys`, maxlen 16).
"""
import argparse
import collections
import copy
import sys

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 256
FEATURES = 64
EMBEDDING = 128
QUEUE_BATCHES = 16
MOMENTUM = 0.99
TEMPERATURE = 0.2


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500, help="optimizer steps (default 500)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class NegativeQueue:
    """Key embeddings of the last `batches` batches."""

    def __init__(self, batches):
        self.keys = collections.deque(maxlen=batches)

    def push(self, keys):
        self.keys.append(keys)

    def negatives(self):
        return torch.cat(list(self.keys)) if self.keys else None


def contrastive_loss(queries, keys, negatives):
    positive = (queries * keys).sum(dim=1, keepdim=True)
    logits = positive if negatives is None else torch.cat([positive, queries @ negatives.t()], dim=1)
    labels = torch.zeros(len(queries), dtype=torch.long, device=queries.device)
    return F.cross_entropy(logits / TEMPERATURE, labels)


def train(steps, device):
    torch.manual_seed(0)
    query_encoder = nn.Sequential(nn.Linear(FEATURES, 256), nn.ReLU(), nn.Linear(256, EMBEDDING)).to(device)
    key_encoder = copy.deepcopy(query_encoder)
    for parameter in key_encoder.parameters():
        parameter.requires_grad_(False)
    optimizer = torch.optim.SGD(query_encoder.parameters(), lr=0.03, momentum=0.9)
    queue = NegativeQueue(QUEUE_BATCHES)
    for _ in range(steps):
        samples = torch.randn(BATCH, FEATURES, device=device)
        queries = F.normalize(query_encoder(samples + 0.1 * torch.randn_like(samples)), dim=1)
        with torch.no_grad():
            keys = F.normalize(key_encoder(samples + 0.1 * torch.randn_like(samples)), dim=1)
        loss = contrastive_loss(queries, keys, queue.negatives())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            for key_param, query_param in zip(key_encoder.parameters(), query_encoder.parameters()):
                key_param.mul_(MOMENTUM).add_(query_param, alpha=1 - MOMENTUM)
        queue.push(keys)
    return loss.item(), len(queue.keys)


def main():
    args = parse_args()
    loss, queued = train(args.steps, torch.device(args.device))
    print("steps=%d loss=%.4f queued_batches=%d" % (args.steps, loss, queued))


if __name__ == "__main__":
    main()
