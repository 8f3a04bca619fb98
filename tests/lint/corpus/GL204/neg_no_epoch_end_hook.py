import lightning as L
import torch


class Segmenter(L.LightningModule):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def validation_step(self, batch, batch_idx):
        image, mask = batch
        pred = self.net(image)
        return pred

    def on_validation_epoch_end(self):
        self.log("done", 1.0)
