import pytorch_lightning as pl
import torch


class Denoiser(pl.LightningModule):
    def __init__(self, unet):
        super().__init__()
        self.unet = unet

    def test_step(self, batch, batch_idx):
        noisy = batch["noisy"]
        clean = self(noisy)
        return {"clean": clean, "noisy": noisy}  # expect: GL204

    def test_epoch_end(self, outputs):
        torch.save([o["clean"].cpu() for o in outputs], "denoised.pt")
