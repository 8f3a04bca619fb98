import torch


def train_step(model, batch, optimizer, criterion):
    optimizer.zero_grad()
    loss = criterion(model(batch[0]), batch[1])
    loss.backward()
    optimizer.step()
    return loss


def train(model, loader, optimizer, criterion):
    total = 0
    for batch in loader:
        total += train_step(model, batch, optimizer, criterion)  # expect: GL101
    return total
