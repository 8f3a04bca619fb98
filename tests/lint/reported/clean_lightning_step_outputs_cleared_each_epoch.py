# Source: https://github.com/Lightning-AI/pytorch-lightning/pull/16520 (migration guide)
# Reported: "Remove memory-retaining epoch-end hooks ... self.training_step_outputs.append(loss)
#   ... self.training_step_outputs.clear()  # free memory".
# Label: clean. The list is emptied at the end of every epoch (it holds one epoch of losses, by
#   design).
import lightning as L
import torch


class MyLightningModule(L.LightningModule):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.training_step_outputs = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.model(x), y)
        self.training_step_outputs.append(loss)
        return loss

    def on_train_epoch_end(self):
        epoch_average = torch.stack(self.training_step_outputs).mean()
        self.log("training_epoch_average", epoch_average)
        self.training_step_outputs.clear()  # free memory

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)
