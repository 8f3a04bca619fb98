import lightning as L
import torch
from torchmetrics import AUROC, AveragePrecision


class Classifier(L.LightningModule):
    def __init__(self, net):
        super().__init__()
        self.net = net
        self.val_auroc = AUROC(task="binary")
        self.val_ap = AveragePrecision(task="binary")

    def validation_step(self, batch, batch_idx):
        x, y = batch
        probs = torch.sigmoid(self.net(x))
        self.val_auroc.update(probs, y)
        self.val_ap.update(probs, y)

    def on_validation_epoch_end(self):
        self.log("val/auroc", self.val_auroc.compute())
        self.log("val/ap", self.val_ap.compute())
        for metric in (self.val_auroc, self.val_ap):
            metric.reset()
