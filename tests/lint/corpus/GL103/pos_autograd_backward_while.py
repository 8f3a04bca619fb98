import torch


def train(model, stream, optimizer, loss_fn):
    while True:
        batch = next(stream)
        optimizer.zero_grad()
        loss = loss_fn(model(batch["x"]), batch["y"])
        torch.autograd.backward(loss, retain_graph=True)  # expect: GL103
        optimizer.step()
