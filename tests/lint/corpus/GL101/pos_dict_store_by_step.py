import torch


def fit(model, loader, optimizer, loss_fn):
    history = {}
    for step, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        history[step] = loss  # expect: GL101
    return history
