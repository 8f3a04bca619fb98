import lightning as L
import torch


class Segmenter(L.LightningModule):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def validation_step(self, batch, batch_idx):
        image, mask = batch
        pred = self.net(image)
        return pred  # expect: GL204

    def validation_epoch_end(self, outputs):
        self.log("val_mean", torch.stack([p.mean() for p in outputs]).mean())
