import torch


@torch.no_grad()
def predict(model, loader):
    preds = []
    for x in loader:
        preds.append(model(x))
    return torch.cat(preds)
