import torch


def evaluate(model, loader):
    model.eval()
    outputs = []
    with torch.set_grad_enabled(False):
        for x in loader:
            outputs.append(model(x))
    return outputs
