"""A torchmetrics metric with list states, computed every epoch and never reset: its states keep every batch on the GPU.

Sources:
  https://github.com/NRCan/geo-deep-learning/issues/582  ("[BUG]: Torchmetrics memory leaks causing OOMs":
      "the way we are currently handling the Torchmetric metrics is causing a subtle and slow memory leak.
      This can lead to OOM crash if ran for enough epochs ... basically the fix is to use
      self.iou_classwise_metric.reset() at the end of validation and test step")
  https://github.com/Lightning-AI/torchmetrics/issues/2481  ("Retrieval Metrics GPU Memory Leak":
      "Updating a RetrievalMetric in training and/or validation results in runaway GPU memory usage ...
      the RetrievalMetric class initializes self.add_state("preds", default=[], ...) using python lists")

What was reported: metrics whose state is a list (AUROC and average precision
without thresholds, retrieval metrics, ...) append every update's tensors to
that list on the metric's device; compute() does not empty it, only reset()
does. A training script that computes the metric at each epoch's end and never
resets it keeps every batch it ever saw on the GPU.

This program: a validation loop scores 32,768 predictions per batch with
torchmetrics' BinaryAUROC (thresholds=None: list states `preds` and `target`),
calls compute() every 20 batches (an "epoch") to log the value, and never calls
reset().

Step: one validation batch.
Leak: 32,768 float32 predictions + 32,768 int64 targets = 393,216 bytes per step, held in the
  metric's list states (preds, target).
Keeping statement: the user's call that hands the tensors to the library, metric.update(...).
Fix: metric.reset() after each epoch's compute() (or compute_on_cpu=True, the library's option to keep
  list states on the host).
"""
import argparse
import sys

import torch
from torchmetrics.classification import BinaryAUROC

BATCH = 32768
EPOCH = 20


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="validation batches (default 200)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("CUDA is not available here")
    return args


def main():
    args = parse_args()
    torch.manual_seed(0)
    metric = BinaryAUROC(thresholds=None).to("cuda")
    weights = torch.randn(64, device="cuda")
    history = []
    for step in range(args.steps):
        features = torch.randn(BATCH, 64, device="cuda")
        target = (features[:, 0] > 0).long()
        with torch.no_grad():
            preds = torch.sigmoid(features @ weights)
        metric.update(preds, target)  # KEEP: appended to the metric's list states preds / target
        if (step + 1) % EPOCH == 0:
            history.append(float(metric.compute()))
    print("steps=%d auroc=%.4f allocated_mib=%.1f" % (args.steps, history[-1] if history else float("nan"),
                                                      torch.cuda.memory_allocated() / 2**20))


if __name__ == "__main__":
    main()
