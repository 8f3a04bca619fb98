import torch


def train(model, loader, optimizer, criterion, accumulation_steps=4):
    loss_acc = 0
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y) / accumulation_steps
        loss_acc = loss_acc + loss
        if (i + 1) % accumulation_steps == 0:
            loss_acc.backward()
            optimizer.step()
            optimizer.zero_grad()
            loss_acc = 0
