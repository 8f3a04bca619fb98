import torch


def train(model, loader, optimizer, criterion):
    errors = []
    for x, y in loader:
        try:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        except RuntimeError as e:
            errors.append(e)  # expect: GL203
    return errors
