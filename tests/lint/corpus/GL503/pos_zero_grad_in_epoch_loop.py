import torch


def fit(model, loader, opt, criterion, epochs):
    for epoch in range(epochs):
        opt.zero_grad()
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            opt.step()  # expect: GL503
