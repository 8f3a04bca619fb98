import torch
import torch.nn.functional as F


def train_epoch(net, loader, opt):
    losses = []
    for batch in loader:
        opt.zero_grad()
        logits = net(batch["input"])
        loss = F.cross_entropy(logits, batch["label"])
        loss.backward()
        opt.step()
        losses.append(loss)  # expect: GL101
    return torch.stack(losses).mean().item()
