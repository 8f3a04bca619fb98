# Source: https://github.com/Lightning-AI/pytorch-lightning/issues/2103
# Reported: "In PyTorch, I know this is used to prevent memory leaks, but I am unsure if this is
#   done automatically in Lightning" - "we avoid .item() and instead use .detach() but we do it
#   automatically for the user".
# Label: clean. validation_step runs under no_grad (Lightning); the epoch-end mean is a number.
import pytorch_lightning as pl
import torch
import torch.nn.functional as F


class LitClassifier(pl.LightningModule):
    def __init__(self, backbone):
        super().__init__()
        self.backbone = backbone

    def validation_step(self, batch, batch_idx):
        x, y = batch
        y_hat = self.backbone(x)
        loss = F.cross_entropy(y_hat, y)
        return {"val_loss": loss}

    def validation_epoch_end(self, outputs):
        avg_loss = torch.stack([x["val_loss"] for x in outputs]).mean()
        return {"avg_val_loss": avg_loss.item()}
