import torch


def penalty_step(critic, loader, optimizer):
    for real in loader:
        real = real.cuda().requires_grad_(True)
        score = critic(real).sum()
        score.backward(create_graph=True)  # expect: GL105
        penalty = (real.grad.norm(2, dim=1) - 1).pow(2).mean()
        optimizer.zero_grad()
        penalty.backward()
        optimizer.step()
