import torch
from torch.cuda import empty_cache


@torch.no_grad()
def evaluate(model, val_loader):
    scores = []
    for x in val_loader:
        scores.append(model(x).mean().item())
        empty_cache()  # expect: GL502
    return scores
