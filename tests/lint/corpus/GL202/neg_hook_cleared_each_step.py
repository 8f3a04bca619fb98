import torch

feats = []


def hook(module, inputs, output):
    feats.append(output)


def train(model, loader, optimizer, criterion):
    model.layer3.register_forward_hook(hook)
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y) + 0.1 * sum(f.pow(2).mean() for f in feats)
        loss.backward()
        optimizer.step()
        feats.clear()
