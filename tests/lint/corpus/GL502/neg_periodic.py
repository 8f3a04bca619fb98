import torch


def train(model, loader, optimizer, criterion):
    for step, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        if step % 1000 == 0:
            torch.cuda.empty_cache()
