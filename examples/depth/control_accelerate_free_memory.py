"""NOT A LEAK: the same hyperparameter search calls accelerator.free_memory() at the start of every trial.

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

This program: the same trials as leak_accelerate_prepare_per_trial.py, with
the fix of accelerate's PR 739: accelerator.free_memory() is the first thing
each trial does, which empties the Accelerator's lists of prepared objects, so
the previous trial's model and optimizer are freed.

Step: one trial.
Verdict: NO LEAK.
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
    accelerator.free_memory()
    model = make_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    model, optimizer = accelerator.prepare(model, optimizer)
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
