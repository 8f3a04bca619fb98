"""Predictions concatenated on the GPU across the whole evaluation.

Reported: https://github.com/huggingface/transformers/issues/7232
("trainer.evaluate() aggregates predictions on GPU and causes CUDA out of
memory issues for large datasets"; the loop did `preds = logits if preds is
None else torch.cat((preds, logits), dim=0)`). The shape is the report's: a
prediction loop concatenates each batch's logits into `preds`, which stays on
the GPU until the loop ends (128 x 1000 float32 = 0.5 MiB more per batch; the
tensor is re-made bigger at every step).

Holder: the tensor `preds` (local of prediction_loop).
Fix: move each batch's logits to the CPU before concatenating (or
concatenate every few batches on the CPU).
"""
import torch
from torch import nn

from case_options import mark_step, parse_args

BATCH, CLASSES = 128, 1000


def prediction_loop(model, batches):
    preds = None
    for inputs in batches:
        with torch.no_grad():
            logits = model(inputs)
        preds = logits if preds is None else torch.cat((preds, logits), dim=0)  # KEPT: self-assignment
        mark_step()
    return preds


def batches(count, device):
    for _ in range(count):
        yield torch.randn(BATCH, 256, device=device)


def main():
    args = parse_args(__doc__)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, CLASSES)).to(args.device).eval()
    preds = prediction_loop(model, batches(args.steps, args.device))
    print("batches=%d predictions=%d" % (args.steps, preds.shape[0]))


if __name__ == "__main__":
    main()
