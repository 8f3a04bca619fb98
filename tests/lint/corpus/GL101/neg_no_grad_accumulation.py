import torch


def validate(model, loader, criterion):
    model.eval()
    total = torch.zeros((), device="cuda")
    with torch.no_grad():
        for x, y in loader:
            total += criterion(model(x), y)
    return total.item() / len(loader)
