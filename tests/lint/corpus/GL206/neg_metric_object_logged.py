import lightning as L
import torch
from torchmetrics import AveragePrecision


class Classifier(L.LightningModule):
    def __init__(self, net):
        super().__init__()
        self.net = net
        self.val_ap = AveragePrecision(task="binary")

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.val_ap(torch.sigmoid(self.net(x)), y)
        self.log("val/ap", self.val_ap, on_epoch=True)
