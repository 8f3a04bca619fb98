# Losses written into a preallocated tensor: each write records a CopySlices node that
# keeps the previous version of the buffer's graph and the new loss's graph, so the
# buffer holds every step's graph (the mechanism of BorealisAI/advertorch#73).
import torch


def train(model, loader, optimizer, criterion, epochs):
    losses = torch.zeros(epochs * len(loader), device="cuda")
    step = 0
    for epoch in range(epochs):
        for x, y in loader:
            loss = criterion(model(x.cuda()), y.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses[step] = loss  # expect: GL101
            step += 1
    return losses.mean().item()
