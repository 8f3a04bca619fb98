import torch


def evaluate(model, loader):
    model.eval()
    predictions = []
    with torch.no_grad():
        for x, _ in loader:
            predictions.append(model(x.cuda()))
    return torch.cat(predictions)
