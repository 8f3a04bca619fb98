import torch


def train(model, loader, optimizer, criterion, hidden):
    for x, y in loader:
        optimizer.zero_grad()
        output, hidden = model(x, hidden)  # expect: GL104
        loss = criterion(output, y)
        loss.backward(retain_graph=True)  # expect: GL103
        optimizer.step()
