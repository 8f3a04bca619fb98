import torch

ACTIVATIONS = []


def train_step(model, batch, optimizer, criterion):
    optimizer.zero_grad()
    out = model(batch[0])
    loss = criterion(out, batch[1])
    loss.backward()
    optimizer.step()
    ACTIVATIONS.append(out.detach())  # expect: GL201
    return loss.item()
