# The buffer receives values without a graph: detached losses, Python numbers, and an
# input batch statistic.
import torch


def train(model, loader, optimizer, criterion, epochs):
    losses = torch.zeros(epochs * len(loader), device="cuda")
    numbers = torch.zeros(epochs * len(loader))
    means = torch.zeros(epochs * len(loader), device="cuda")
    step = 0
    for epoch in range(epochs):
        for x, y in loader:
            x, y = x.cuda(), y.cuda()
            loss = criterion(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses[step] = loss.detach()
            numbers[step] = loss.item()
            means[step] = x.mean()
            step += 1
    return losses.mean().item(), numbers.mean().item(), means.mean().item()
