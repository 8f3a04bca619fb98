import torch


def train(model, loader, optimizer, criterion):
    correct = 0
    seen = 0
    for x, y in loader:
        optimizer.zero_grad()
        out = model(x)
        loss = criterion(out, y)
        loss.backward()
        optimizer.step()
        correct += (out.argmax(dim=1) == y).sum()
        seen += y.size(0)
    return correct.item() / seen
