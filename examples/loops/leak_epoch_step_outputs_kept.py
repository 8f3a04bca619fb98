"""Epochs x batches: every training step's outputs (predictions, targets) are kept on the GPU until epoch end.

Sources:
  https://github.com/Lightning-AI/pytorch-lightning/issues/1510  ("Memory (CPU and GPU) leaks during the 1st
      epoch": "Here is a list that stores all train step outputs during the epoch" ... "they (tensors) are
      still on the GPU after detach. So, in case of long epochs or huge outputs from the training step, the GPU
      memory will blow")
  https://github.com/HelmholtzAI-Consultants-Munich/Quicksetup-ai/pull/26  (predictions and target returned
      from each training step "are kept in GPU memory, which is then growing during training up to a point
      where it can exceed available GPU memory (as happened when we were using large images)")
  https://github.com/TRI-ML/packnet-sfm/issues/47  ("outputs hold the output['loss'] in the all epoch ...
      after one epoch, the memory will be free")

What was reported: a trainer collects whatever each training step returns
(loss, predictions, targets) in a list for the epoch-end hook; the tensors are
detached but stay on the GPU, so memory grows with every batch of an epoch
and drops only when the epoch ends -- a long epoch or large outputs run out
of memory.

This program: a hand-written trainer in that style (epochs x batches) trains
a small segmentation CNN with a manual SGD update under torch.no_grad() (no
torch.optim); `training_step` returns loss, predictions and target; the trainer
appends them to `epoch_outputs`, hands them to `training_epoch_end` and clears
the list when the epoch is over. Memory is a sawtooth with the epoch as its
period, growing through every epoch.

Iteration: one training batch (--batches-per-epoch of them make an epoch).
Leak: 4x1x128x128x4 = 262,144 B of predictions + 262,144 B of targets per batch (exact tensor bytes), freed at each epoch end.
Fix: return only the loss from the step, or move what the epoch end needs to the CPU (or reduce it per step).
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 4
SIZE = 128


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300, help="training batches in all (default 300)")
    parser.add_argument("--batches-per-epoch", type=int, default=100, help="batches per epoch (default 100)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class Segmenter(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1),
                                 nn.ReLU(), nn.Conv2d(16, 1, 1))

    def training_step(self, batch):
        images, target = batch
        logits = self(images)
        loss = F.binary_cross_entropy_with_logits(logits, target)
        return {"loss": loss, "preds": torch.sigmoid(logits), "target": target}

    def training_epoch_end(self, outputs):
        return torch.stack([output["loss"] for output in outputs]).mean().item()

    def forward(self, images):
        return self.net(images)


class Trainer:
    def __init__(self, model, learning_rate=0.05):
        self.model = model
        self.learning_rate = learning_rate

    def optimizer_step(self):
        with torch.no_grad():
            for p in self.model.parameters():
                p -= self.learning_rate * p.grad
                p.grad = None

    def fit(self, batches, batches_per_epoch):
        epoch_outputs, epoch_losses = [], []
        for index, batch in enumerate(batches):
            output = self.model.training_step(batch)
            output["loss"].backward()
            self.optimizer_step()
            epoch_outputs.append({key: value.detach() for key, value in output.items()})  # LEAK: tensors-kept-alive (until the epoch ends)
            if (index + 1) % batches_per_epoch == 0:
                epoch_losses.append(self.model.training_epoch_end(epoch_outputs))
                epoch_outputs.clear()
        return epoch_losses


def synthetic_batches(count, device):
    for _ in range(count):
        images = torch.rand(BATCH, 1, SIZE, SIZE, device=device)
        yield images, (images > 0.5).float()


def main():
    args = parse_args()
    torch.manual_seed(0)
    device = torch.device(args.device)
    trainer = Trainer(Segmenter().to(device))
    losses = trainer.fit(synthetic_batches(args.iterations, device), args.batches_per_epoch)
    print("iterations=%d epochs=%d last_loss=%s" % (args.iterations, len(losses), losses[-1] if losses else None))


if __name__ == "__main__":
    main()
