import torch


def train(model, loader, optimizer, criterion, tasks):
    for x, targets in loader:
        optimizer.zero_grad()
        features = model(x)
        loss = 0
        for task in tasks:
            loss = loss + criterion(task.head(features), targets[task.name])
        loss.backward()
        optimizer.step()
