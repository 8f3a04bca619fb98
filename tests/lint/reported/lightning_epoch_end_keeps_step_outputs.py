# Source: https://github.com/Lightning-AI/pytorch-lightning/issues/15514
# Reported: "OOM when implementing training_epoch_end ... Run it, and we can get an OOM" (the loop
#   keeps every training_step output for training_epoch_end; the tensor "x" returned with the
#   loss stays on the GPU for the whole epoch). Lightning 2.0 removed the hook for this reason.
# Pattern: training_step returns a large CUDA tensor while training_epoch_end is implemented.
# Label: the line marked `# leak` keeps the memory.
import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SomeModel(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(1, 2)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)

    def forward(self):
        batch_size, features = 10240, 24000
        x_hat = torch.randn(batch_size, features, requires_grad=True, device=self.device)
        x = torch.randn(batch_size, features, device=self.device)
        loss = F.mse_loss(x_hat, x)
        self.log("train_loss", loss)
        return {
            "loss": loss,
            "x": x,
        }

    def training_step(self, batch, batch_idx):
        return self()  # leak

    def training_epoch_end(self, outputs) -> None:
        # do nothing
        ...


class SomeDataset(Dataset):
    def __len__(self):
        return 100000000

    def __getitem__(self, index):
        return "some sample"


model = SomeModel()
trainer = pl.Trainer(devices=1, accelerator="gpu", check_val_every_n_epoch=1)
trainer.fit(model, DataLoader(SomeDataset()), DataLoader(SomeDataset()))
