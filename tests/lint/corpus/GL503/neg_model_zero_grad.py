import torch


def train(model, loader, optim, criterion):
    for x, y in loader:
        model.zero_grad()
        criterion(model(x), y).backward()
        optim.step()
