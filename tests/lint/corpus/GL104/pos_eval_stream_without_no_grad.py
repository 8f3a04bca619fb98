import torch


def score_stream(model, val_loader, state):
    model.eval()
    scores = 0.0
    for batch in val_loader:
        logits, state = model(batch, state)  # expect: GL104
        scores += logits.softmax(-1).max().item()
    return scores
