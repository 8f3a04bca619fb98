import torch


def train(model, loader, optimizer, criterion):
    losses = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        # .cpu() copies the value but the copy still has grad_fn: the graph stays.
        losses.append(loss.cpu())  # expect: GL101
    return losses
