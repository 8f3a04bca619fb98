# Source: https://github.com/Quantinuum/lambeq/pull/251 (lambeq/training/pytorch_trainer.py)
# Reported: "Detach the tensors returned in the training loops to ensure the computation graph can
#   be cleared from memory"; review: ".item() already converts the loss to a python scalar".
# Label: clean. Training costs are floats; validation runs under no_grad; nothing keeps y_hat.
import torch


class PytorchTrainer:
    def __init__(self, model, loss_function, optimizer, device):
        self.model = model
        self.loss_function = loss_function
        self.optimizer = optimizer
        self.device = device
        self.train_costs = []
        self.val_costs = []

    def validation_step(self, batch):
        x, y = batch
        with torch.no_grad():
            y_hat = self.model(x)
            loss = self.loss_function(y_hat, y.to(self.device))
        return y_hat.detach(), loss.item()

    def training_step(self, batch):
        x, y = batch
        y_hat = self.model(x)
        loss = self.loss_function(y_hat, y.to(self.device))
        self.train_costs.append(loss.item())
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return y_hat.detach(), loss.item()

    def fit(self, train_loader, val_loader, epochs):
        for epoch in range(epochs):
            for batch in train_loader:
                self.training_step(batch)
            for batch in val_loader:
                _, val_loss = self.validation_step(batch)
                self.val_costs.append(val_loss)
