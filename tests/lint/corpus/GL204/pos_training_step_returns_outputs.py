import pytorch_lightning as pl
import torch
import torch.nn.functional as F


class Classifier(pl.LightningModule):
    def __init__(self, backbone):
        super().__init__()
        self.backbone = backbone

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self.backbone(x)
        loss = F.cross_entropy(logits, y)
        return {"loss": loss, "logits": logits}  # expect: GL204

    def training_epoch_end(self, outputs):
        preds = torch.cat([o["logits"].argmax(1) for o in outputs])
        self.log("train_pred_mean", preds.float().mean())
