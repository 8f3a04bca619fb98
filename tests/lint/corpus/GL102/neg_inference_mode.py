import torch


def predict(model, loader):
    model.eval()
    out = []
    with torch.inference_mode():
        for batch in loader:
            out.append(model(batch))
    return out
