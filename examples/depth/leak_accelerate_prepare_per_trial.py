"""Hyperparameter search that reuses one Accelerator: every trial's prepared model and optimizer stay in its lists.

Sources:
  https://github.com/huggingface/accelerate/issues/84  ("Add warning not to reuse Accelerator": "I was
      training multiple models, and there seems to be some GPU memory leak. I think it's because
      Accelerator appends reference to optimizer, which in turn reference some GPU memory. ... When
      reusing Accelerator to train multiple models, the GPU memory used by old optimizer is not released.")
  https://github.com/huggingface/accelerate/pull/739  ("Fix memory leak": "The accelerator should be the
      only one defined out of the loop, and accelerator.free_memory() should be the first thing called in
      the loop. This way all memory is actually freed and lingering references can be wiped.")

What was reported: Accelerator.prepare() records every model and optimizer it
prepares in the Accelerator's own lists (_models, _optimizers). A script that
makes one Accelerator and then trains several models in turn (a
hyperparameter search, k-fold training) drops its own references to each
finished model, but the Accelerator still holds them, with their parameters,
gradients and optimizer states on the GPU.

This program: one Accelerator; each trial builds an MLP (1024 -> 2048 ->
1024, 16.8 MB of float32 parameters) and an AdamW optimizer with that trial's
learning rate, passes them to accelerator.prepare(), trains 4 steps, records
the last loss and drops both (del, gc.collect(), empty_cache()).

Step: one trial.
Leak: per trial, the parameters (16,789,504 bytes), their gradients (16,789,504) and AdamW's two states
  (33,579,008): 67,158,016 bytes, held by Accelerator._models and Accelerator._optimizers.
Keeping statement: the user's call that hands the objects to the library, accelerator.prepare(...).
Fix: call accelerator.free_memory() at the start (or end) of each trial -- the fix the library documents.
"""
import argparse
import gc
import sys

import torch
from accelerate import Accelerator
from torch import nn
from torch.nn import functional as F


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=25, help="trials (default 25)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("CUDA is not available here")
    return args


def make_model():
    return nn.Sequential(nn.Linear(1024, 2048), nn.GELU(), nn.Linear(2048, 1024))


def run_trial(accelerator, learning_rate):
    model = make_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    model, optimizer = accelerator.prepare(model, optimizer)  # KEEP: kept in Accelerator._models / _optimizers
    for _ in range(4):
        x = torch.randn(64, 1024, device=accelerator.device)
        loss = F.mse_loss(model(x), x)
        optimizer.zero_grad()
        accelerator.backward(loss)
        optimizer.step()
    return loss.item()


def main():
    args = parse_args()
    torch.manual_seed(0)
    accelerator = Accelerator()
    results = {}
    for trial in range(args.steps):
        learning_rate = 1e-4 * (1 + trial % 5)
        results[trial] = run_trial(accelerator, learning_rate)
        gc.collect()
        torch.cuda.empty_cache()
    print("steps=%d best=%.4f allocated_mib=%.1f" % (args.steps, min(results.values()),
                                                     torch.cuda.memory_allocated() / 2**20))


if __name__ == "__main__":
    main()
