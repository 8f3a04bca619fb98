"""Prediction loop that concatenates every batch's output on the GPU.

Sources:
  https://github.com/sktime/pytorch-forecasting/issues/322  ("The predict function concatenates the outputs
      which leads to GPU OOM for large datasets")
  https://github.com/nitrain/nitrain/issues/27  (predict_loader runs out of GPU memory; the fix moves every
      output to cpu() before torch.cat)

What was reported: a forecasting model's predict() loop keeps each batch's
raw output dictionary on the GPU and concatenates them at the end; with a large
validation set the GPU runs out of memory. In nitrain, predictions were joined
with torch.cat on the GPU batch after batch, and memory filled up.

This program: an inference loop (under torch.no_grad(), so no graph) over a
stream of batches; a small sequence model predicts 24 steps x 7 quantiles for
256 series per batch. The running result is rebuilt each batch with
`torch.cat((predictions, output))` on the GPU: the old result is freed and a
larger one allocated, so live memory grows by one batch of output every
iteration although no single allocation survives. The input windows are also
kept (`return_x`), in a list.

Iteration: one prediction batch.
Leak: 256*24*7*4 = 172,032 bytes of output plus 256*48*8*4 = 393,216 bytes of inputs per batch (exact tensor bytes).
Fix: move each output to the CPU (or to numpy) before keeping it.
"""
import argparse
import sys

import torch
from torch import nn

SERIES = 256
ENCODER_STEPS = 48
FEATURES = 8
HORIZON = 24
QUANTILES = 7


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=250, help="prediction batches (default 250)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    return args


class Forecaster(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.GRU(FEATURES, 64, batch_first=True)
        self.decoder = nn.Linear(64, HORIZON * QUANTILES)

    def forward(self, x):
        _, hidden = self.encoder(x)
        return self.decoder(hidden[-1]).view(-1, HORIZON, QUANTILES)


def predict(model, batches, device):
    model.eval()
    predictions = torch.empty(0, HORIZON, QUANTILES, device=device)
    inputs = []
    with torch.no_grad():
        for x in batches:
            output = model(x)
            predictions = torch.cat((predictions, output))  # LEAK: tensors-kept-alive (grows by one batch each time)
            inputs.append(x)  # LEAK: tensors-kept-alive (return_x keeps every input window)
    return predictions, inputs


def main():
    args = parse_args()
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = Forecaster().to(device)
    batches = (torch.randn(SERIES, ENCODER_STEPS, FEATURES, device=device) for _ in range(args.iterations))
    predictions, inputs = predict(model, batches, device)
    print("iterations=%d predictions=%s inputs=%d" % (args.iterations, tuple(predictions.shape), len(inputs)))


if __name__ == "__main__":
    main()
