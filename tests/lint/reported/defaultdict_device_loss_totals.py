# Source: https://github.com/MultimediaTechLab/YOLO/pull/83
# Reported: "Around 1-2MB of CPU memory are being leaked per batch ... This was the original
#   definition: total_loss = defaultdict(lambda: torch.tensor(0.0, device=self.device))";
#   the fix accumulates loss_val.item() * batch_size into defaultdict(float).
# Pattern: per-epoch loss totals kept as device tensors and summed from graph-carrying losses.
# Label: the line marked `# leak` keeps the memory.
from collections import defaultdict

import torch
from torch.cuda.amp import autocast


class ModelTrainer:
    def __init__(self, cfg, model, optimizer, loss_fn, device):
        self.model = model
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.device = device
        self.scaler = torch.cuda.amp.GradScaler()

    def train_one_batch(self, images, targets):
        images, targets = images.to(self.device), targets.to(self.device)
        self.optimizer.zero_grad()
        with autocast():
            predicts = self.model(images)
            loss, loss_item = self.loss_fn(predicts, targets)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss_item

    def train_one_epoch(self, dataloader):
        self.model.train()
        total_loss = defaultdict(lambda: torch.tensor(0.0, device=self.device))
        total_samples = 0
        for batch_size, images, targets, *_ in dataloader:
            loss_each = self.train_one_batch(images, targets)
            for loss_name, loss_val in loss_each.items():
                total_loss[loss_name] += loss_val * batch_size  # leak
            total_samples += batch_size
        for loss_val in total_loss.values():
            loss_val /= total_samples
        return total_loss
