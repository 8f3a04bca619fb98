import torch


def reset(optimizer):
    optimizer.zero_grad(set_to_none=True)


def train(model, loader, optimizer, criterion):
    for x, y in loader:
        reset(optimizer)
        criterion(model(x), y).backward()
        optimizer.step()
