import torch


class History:
    def __init__(self):
        self.losses = []
        self.preds = []

    def update(self, loss, logits):
        self.losses.append(loss.item())
        self.preds.append(logits.detach().cpu())
