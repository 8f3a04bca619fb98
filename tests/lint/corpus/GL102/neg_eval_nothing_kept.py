import torch


def evaluate(model, loader, metric):
    model.eval()
    for x, y in loader:
        out = model(x)
        metric.update(out.argmax(1), y)
    return metric.compute()
