"""`.cuda()` in Dataset.__getitem__ with spawn workers: each worker creates its own CUDA context.

Reported in https://github.com/pytorch/pytorch/issues/20260: a custom transform
calls `tensor.cuda()` inside the Dataset so the GPU does the heavy
preprocessing. With num_workers > 0 and the default start method (fork) it
failed with "CUDA error: initialization error"; the advice given was to switch
to the 'spawn' start method, which "did solve the problem". It runs, but every
worker process then initializes CUDA for itself: one context per worker,
hundreds of MiB each, for as long as the worker lives (persistent workers: the
whole run).

What gpuleak must say: four DataLoader workers of the main process, each with
its own context and its memory as the driver counts it, CUDA first used in each
worker at the line marked CUDA-INIT; the main program trains on the GPU as
intended. Fix: keep the Dataset on the CPU and move each batch to the GPU in
the training loop.

usage: python3 dataloader_getitem_cuda_spawn.py [--epochs N] [--truth FILE]
"""
import argparse
import json
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

WORKERS = 4


class GpuNormalizedImages(Dataset):
    """Random 3x32x32 images, normalized on the GPU one sample at a time."""

    def __init__(self, count):
        generator = torch.Generator().manual_seed(0)
        self.images = torch.rand(count, 3, 32, 32, generator=generator)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        image = self.images[index].cuda()  # CUDA-INIT: the transform runs on the GPU
        image = (image - image.mean()) / (image.std() + 1e-6)
        return image.cpu()


def write_truth(path, **roles):
    if path:
        with open(path, "w") as out:
            json.dump(roles, out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--truth", help="write the pids of the main process and the workers here")
    args = parser.parse_args()

    loader = DataLoader(GpuNormalizedImages(2048), batch_size=64, num_workers=WORKERS,
                        multiprocessing_context="spawn", persistent_workers=True)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 256), nn.ReLU(),
                          nn.Linear(256, 10)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(args.epochs):
        for images in loader:
            images = images.cuda(non_blocking=True)
            loss = model(images).logsumexp(dim=1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if epoch == 0:
            write_truth(args.truth, main=os.getpid(),
                        dataloader_worker=[w.pid for w in loader._iterator._workers])
    print("loss %.4f" % loss.item())


if __name__ == "__main__":
    main()
