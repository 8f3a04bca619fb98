import torch


def train(critic, loader, optimizer):
    for real in loader:
        optimizer.zero_grad()
        real.requires_grad_(True)
        score = critic(real)
        grad = torch.autograd.grad(score.sum(), real, create_graph=True, retain_graph=True)[0]
        penalty = ((grad.norm(2, dim=1) - 1) ** 2).mean()
        loss = -score.mean() + 10 * penalty
        loss.backward()
        optimizer.step()
