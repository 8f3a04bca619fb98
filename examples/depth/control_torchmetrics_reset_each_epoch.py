"""NOT A LEAK: the same metric with list states, reset after each epoch's compute().

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

This program: the same validation loop as
leak_torchmetrics_list_state_not_reset.py, with the fix both reports give:
metric.reset() after each epoch's compute(). The list states grow for 20
batches (7.5 MiB) and are emptied: memory is a sawtooth with a flat top.

Step: one validation batch.
Verdict: NO LEAK (bounded: growth within each 20-batch epoch, back to the start after reset()).
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
        metric.update(preds, target)
        if (step + 1) % EPOCH == 0:
            history.append(float(metric.compute()))
            metric.reset()
    print("steps=%d auroc=%.4f allocated_mib=%.1f" % (args.steps, history[-1] if history else float("nan"),
                                                      torch.cuda.memory_allocated() / 2**20))


if __name__ == "__main__":
    main()
