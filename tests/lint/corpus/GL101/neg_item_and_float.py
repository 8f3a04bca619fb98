import torch


def train(model, loader, optimizer, criterion):
    total = 0.0
    other = 0.0
    history = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
        other += float(loss)
        history.append(loss.detach().cpu())
        history.append(loss.data.cpu().numpy())
    return total, other, history
