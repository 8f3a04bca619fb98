import torch


def train(model, loader, optimizer, criterion, epochs):
    all_preds = []
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            out = model(x)
            loss = criterion(out, y)
            loss.backward()
            optimizer.step()
            all_preds.append(out.detach())  # expect: GL201
    return all_preds
