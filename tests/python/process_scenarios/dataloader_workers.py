"""A torch DataLoader (CPU tensors) whose Dataset uses the stand-in GPU in __getitem__, fork workers.

The parent never touches the GPU, so each worker starts the collector and
creates its own context, as real fork workers do when the parent has not
initialized CUDA. usage: dataloader_workers.py TRUTH_FILE
"""
import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

import stand_in_gpu


class GpuDataset(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, index):
        stand_in_gpu.use_gpu(1 << 20)  # FIRST-USE: the sample goes to the GPU
        return torch.full((4,), float(index))


def main():
    loader = DataLoader(GpuDataset(), batch_size=8, num_workers=2, persistent_workers=True)
    total = 0.0
    for _ in range(2):
        for batch in loader:
            total += float(batch.sum())
            time.sleep(0.05)
    with open(sys.argv[1], "w") as out:
        json.dump({"main": os.getpid(),
                   "dataloader_worker": [w.pid for w in loader._iterator._workers]}, out)
    time.sleep(1.0)  # the workers live on with their contexts (persistent workers)
    print("sum", total)


if __name__ == "__main__":
    main()
