import torch
from collections import defaultdict


def train(model, loader, optimizer, criterion):
    metrics = defaultdict(float)
    for x, y in loader:
        optimizer.zero_grad()
        out = model(x)
        loss = criterion(out, y)
        loss.backward()
        optimizer.step()
        metrics["loss"] += loss  # expect: GL101
    return metrics
