"""Lightning control: per-step predictions kept for an epoch-end metric, cleared each epoch.

Reported: the migration guide of https://github.com/Lightning-AI/pytorch-lightning/pull/16520
("self.training_step_outputs.clear()  # free memory"); the memory-retaining
epoch-end hooks were removed from Lightning for the reason this case tests.

GPU memory rises by 256 KiB per step for 20 steps, then falls back at every
epoch end: a saw-tooth that never climbs. Not a leak.

    python3 control_outputs_cleared_each_epoch.py --steps 200 [--device cuda|cpu]

Prints one `CLIENT_STEP {"step", "loss", "step_ms"}` line per optimizer step.
"""
import argparse
import json
import time

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class Classifier(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                       torch.nn.Linear(512, 1024))
        self.training_step_outputs = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self.net(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        self.training_step_outputs.append(logits.detach())
        return loss

    def on_train_epoch_end(self):
        epoch_confidence = torch.cat(self.training_step_outputs).softmax(-1).max(-1).values.mean()
        self.log("epoch_confidence", epoch_confidence)
        self.training_step_outputs.clear()  # free memory

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


class StepPrinter(L.Callback):
    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.started = time.perf_counter()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        record = {"step": trainer.global_step, "loss": float(outputs["loss"]),
                  "step_ms": (time.perf_counter() - self.started) * 1e3}
        print("CLIENT_STEP " + json.dumps(record), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    L.seed_everything(0, verbose=False)
    batches_per_epoch = 20
    data = TensorDataset(torch.randn(64 * batches_per_epoch, 256),
                         torch.randint(0, 1024, (64 * batches_per_epoch,)))
    trainer = L.Trainer(accelerator="gpu" if args.device == "cuda" else "cpu", devices=1,
                        max_steps=args.steps, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[StepPrinter()])
    trainer.fit(Classifier(), DataLoader(data, batch_size=64))


if __name__ == "__main__":
    main()
