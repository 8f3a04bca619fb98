import torch


def train(model, loader, optimizer, criterion):
    for x, y in loader:
        for p in model.parameters():
            p.grad = None
        criterion(model(x), y).backward()
        optimizer.step()
