import torch
import lightning.pytorch as pl


class Classifier(pl.LightningModule):
    def __init__(self, net):
        super().__init__()
        self.net = net
        self.validation_step_outputs = []

    def validation_step(self, batch, batch_idx):
        x, y = batch
        preds = self.net(x)
        self.validation_step_outputs.append(preds)  # expect: GL201

    def on_validation_epoch_end(self):
        all_preds = torch.cat(self.validation_step_outputs)
        self.log("val_mean", all_preds.mean())
