import torch


def train(model, loader, optimizer, criterion):
    all_logits = torch.empty(0, device="cuda")
    for x, y in loader:
        optimizer.zero_grad()
        logits = model(x)
        loss = criterion(logits, y)
        loss.backward()
        optimizer.step()
        all_logits = torch.cat([all_logits, logits])  # expect: GL101
    return all_logits
