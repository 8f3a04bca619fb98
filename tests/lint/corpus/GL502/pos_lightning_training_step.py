import torch
import lightning as L


class Model(L.LightningModule):
    def training_step(self, batch, batch_idx):
        loss = self.compute_loss(batch)
        torch.cuda.empty_cache()  # expect: GL502
        return loss
