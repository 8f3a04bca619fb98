import torch


def train(model, loader, optimizer, criterion):
    for x, y in loader:
        optimizer.zero_grad()
        step_losses = []
        for head in model.heads:
            step_losses.append(criterion(head(model(x)), y))
        loss = torch.stack(step_losses).sum()
        loss.backward()
        optimizer.step()
