import torch


def train(model, loader, optimizer, criterion, epochs):
    for epoch in range(epochs):
        epoch_preds = []
        for x, y in loader:
            optimizer.zero_grad()
            out = model(x)
            loss = criterion(out, y)
            loss.backward()
            optimizer.step()
            epoch_preds.append(out.detach())
        report(torch.cat(epoch_preds))
