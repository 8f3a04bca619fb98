"""`.to("cuda")` in Dataset.__getitem__ with fork workers after the parent initialized CUDA: the workers fail.

Reported in https://github.com/pytorch/pytorch/issues/77159: a custom Dataset
moves each tensor to the GPU as its last step; with num_workers > 0 the program
fails with "Cannot re-initialize CUDA in forked subprocess. To use CUDA with
multiprocessing, you must use the 'spawn' start method". The parent had already
initialized CUDA (the model is on the GPU) before the DataLoader forked its
workers, and a forked child cannot use CUDA after its parent initialized it.

What gpuleak must say: the program failed (exit status 1); no worker created a
context, so no worker holds GPU memory and there is no worker finding. The
main program is the only process with a context.

usage: python3 dataloader_getitem_cuda_fork_after_init.py [--truth FILE]
"""
import argparse
import json
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class ToGpuDataset(Dataset):
    def __init__(self, count):
        self.samples = torch.randn(count, 16)

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        return self.samples[index].to("cuda")  # CUDA-INIT: fails in a forked worker


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--truth", help="write the pid of the main process here")
    args = parser.parse_args()
    if args.truth:
        with open(args.truth, "w") as out:
            json.dump({"main": os.getpid()}, out)

    model = nn.Linear(16, 4).cuda()
    loader = DataLoader(ToGpuDataset(64), batch_size=8, num_workers=2)
    for batch in loader:
        model(batch).sum().backward()


if __name__ == "__main__":
    main()
