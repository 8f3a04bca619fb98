import torch


@torch.no_grad()
def evaluate(model, loader, criterion):
    model.eval()
    losses = []
    for x, y in loader:
        losses.append(criterion(model(x), y))
    return torch.stack(losses).mean()
