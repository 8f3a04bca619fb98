import torch
import torch.nn as nn


def train(model, loader, optimizer):
    criterion = nn.CrossEntropyLoss()
    total_loss = 0
    for x, y in loader:
        optimizer.zero_grad()
        out = model(x)
        loss = criterion(out, y)
        loss.backward()
        optimizer.step()
        total_loss += loss  # expect: GL101
    return total_loss / len(loader)
