import torch


def train_step(model, seq, target, optimizer, criterion):
    optimizer.zero_grad()
    h = torch.zeros(seq.size(1), 128, device=seq.device)
    for t in range(seq.size(0)):
        h = model(seq[t], h)
    loss = criterion(h, target)
    loss.backward()
    optimizer.step()
