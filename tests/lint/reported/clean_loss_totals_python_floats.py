# Source: https://github.com/MultimediaTechLab/YOLO/pull/83 (the fix proposed in review)
# Reported: "I tried out the following variation to solve the leak: total_loss =
#   defaultdict(float); total_loss[loss_name] += loss_val.item() * batch_size".
# Label: clean. The totals are Python floats.
from collections import defaultdict

import torch


class ModelTrainer:
    def __init__(self, model, optimizer, loss_fn, device):
        self.model = model
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.device = device

    def train_one_batch(self, images, targets):
        images, targets = images.to(self.device), targets.to(self.device)
        self.optimizer.zero_grad()
        predicts = self.model(images)
        loss, loss_item = self.loss_fn(predicts, targets)
        loss.backward()
        self.optimizer.step()
        return loss_item

    def train_one_epoch(self, dataloader):
        self.model.train()
        total_loss = defaultdict(float)
        total_samples = 0
        for batch_size, images, targets, *_ in dataloader:
            loss_each = self.train_one_batch(images, targets)
            for loss_name, loss_val in loss_each.items():
                total_loss[loss_name] += loss_val.item() * batch_size
            total_samples += batch_size
        return {name: value / total_samples for name, value in total_loss.items()}
