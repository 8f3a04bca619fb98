import lightning as L
import torch
from torchmetrics import Accuracy


class Classifier(L.LightningModule):
    def __init__(self, net):
        super().__init__()
        self.net = net
        self.val_acc = Accuracy(task="binary")

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.val_acc(torch.sigmoid(self.net(x)), y)

    def on_validation_epoch_end(self):
        self.log("val/acc", self.val_acc.compute())
