import torch


def train(model, loader, optimizer, criterion, hidden):
    for x, y in loader:
        optimizer.zero_grad()
        output, hidden = model(x, hidden)
        loss = criterion(output, y)
        loss.backward()
        optimizer.step()
        hidden = hidden.detach()
