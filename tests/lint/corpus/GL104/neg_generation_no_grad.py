import torch


@torch.no_grad()
def generate(model, loader, state):
    tokens = []
    for batch in loader:
        logits, state = model(batch, state)
        tokens.append(logits.argmax(-1).cpu())
    return tokens
