"""CUDA tensors made in Dataset.__getitem__ with fork workers: a new context in every worker, every epoch.

Reported in https://github.com/NVIDIAGameWorks/kaolin/issues/855: a Dataset
builds `torch.tensor(..., device="cuda")` inside `__getitem__` and runs GPU
kernels on them; the DataLoader uses num_workers > 0 with the default start
method (fork on Linux) and the main program only iterates, so CUDA was never
initialized before the workers were forked and each worker can create its own
context (the report is about wrong results; the contexts come with it). Without
persistent_workers the DataLoader starts new workers for every epoch, so each
epoch creates num_workers fresh contexts.

What gpuleak must say: DataLoader workers of the main process (two at a time,
new ones each epoch) that created their own CUDA context, with the memory of
each, CUDA first used at the line marked CUDA-INIT. The main process never uses
CUDA here.

usage: python3 dataloader_getitem_cuda_fork.py [--epochs N] [--truth FILE]
"""
import argparse
import json
import os

import torch
from torch.utils.data import DataLoader, Dataset

WORKERS = 2


class NearestPointQueries(Dataset):
    """For each query point, the distance to the nearest of a fixed point cloud, on the GPU."""

    def __init__(self, queries):
        generator = torch.Generator().manual_seed(0)
        self.points = torch.rand(4096, 3, generator=generator).tolist()
        self.queries = torch.rand(queries, 3, generator=generator).tolist()

    def __len__(self):
        return len(self.queries)

    def __getitem__(self, index):
        points = torch.tensor(self.points, device="cuda")  # CUDA-INIT: built on the GPU per sample
        query = torch.tensor(self.queries[index], device="cuda").unsqueeze(0)
        return torch.cdist(query, points).min().cpu()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--truth", help="write the pids of the main process and the workers here")
    args = parser.parse_args()

    loader = DataLoader(NearestPointQueries(512), batch_size=16, num_workers=WORKERS)
    workers = []
    distances = []
    for _ in range(args.epochs):
        iterator = iter(loader)
        workers += [w.pid for w in iterator._workers]
        for batch in iterator:
            distances.append(batch)
        del iterator
    if args.truth:
        with open(args.truth, "w") as out:
            json.dump({"main": os.getpid(), "dataloader_worker": workers}, out)
    print("mean nearest distance %.4f" % torch.cat(distances).mean().item())


if __name__ == "__main__":
    main()
