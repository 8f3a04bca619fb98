import torch
import torch.nn.functional as F
import lightning as L


class LitClassifier(L.LightningModule):
    def __init__(self, backbone):
        super().__init__()
        self.backbone = backbone
        self.train_losses = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self.backbone(x), y)
        self.train_losses.append(loss)  # expect: GL101
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters())
