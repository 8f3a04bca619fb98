import torch


def validate(model, val_loader, criterion):
    model.eval()
    val_loss = 0.0
    scores = []
    for x, y in val_loader:
        out = model(x)
        val_loss += criterion(out, y).item()
        scores.append(out.detach().cpu())
    return val_loss, scores
