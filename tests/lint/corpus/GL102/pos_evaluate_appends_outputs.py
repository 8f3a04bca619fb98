import torch


def evaluate(model, loader):
    model.eval()
    predictions = []
    for x, _ in loader:
        logits = model(x.cuda())
        predictions.append(logits)  # expect: GL102
    return torch.cat(predictions)
