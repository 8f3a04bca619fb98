import lightning as L
import torch
from torchmetrics import AUROC


class Classifier(L.LightningModule):
    def __init__(self, net):
        super().__init__()
        self.net = net
        self.val_auroc = AUROC(task="binary")

    def validation_step(self, batch, batch_idx):
        x, y = batch
        probs = torch.sigmoid(self.net(x))
        self.val_auroc(probs, y)  # expect: GL206

    def on_validation_epoch_end(self):
        self.log("val/auroc", self.val_auroc.compute())
