import torch


def train(model, loader, optimizer, criterion, heads):
    for x, y in loader:
        optimizer.zero_grad()
        features = model(x)
        for i, head in enumerate(heads):
            loss = criterion(head(features), y)
            loss.backward(retain_graph=i < len(heads) - 1)
        optimizer.step()
