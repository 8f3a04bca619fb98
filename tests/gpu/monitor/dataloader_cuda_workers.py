"""GPU scenario: DataLoader workers that initialize CUDA.

Dataset.__getitem__ creates a CUDA tensor, so each of the two workers
(start method 'spawn': CUDA cannot be re-initialized in a forked child)
creates its own CUDA context, and keeps WORKER_HOLD_MIB more allocated so
the amount is easy to see. The main process uses the GPU too. When the
workers have served some batches, the pids go to READY_FILE as JSON; then
everything sleeps until killed (or LIFETIME_S passes, so nothing outlives
a forgotten run).

usage: python3 dataloader_cuda_workers.py READY_FILE [LIFETIME_S]
"""
import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

WORKER_HOLD_MIB = 256
_held_in_worker = []


class CudaTouchingDataset(Dataset):
    def __len__(self):
        return 1_000_000

    def __getitem__(self, index):
        if not _held_in_worker:
            _held_in_worker.append(torch.empty(WORKER_HOLD_MIB * 2**20, dtype=torch.uint8, device="cuda"))
        sample = torch.full((16,), float(index), device="cuda")  # the mistake under test
        return sample.cpu()


def main():
    ready_file = sys.argv[1]
    lifetime_s = float(sys.argv[2]) if len(sys.argv) > 2 else 300.0
    model = torch.nn.Linear(16, 16).cuda()
    loader = DataLoader(
        CudaTouchingDataset(), batch_size=8, num_workers=2, multiprocessing_context="spawn", persistent_workers=True
    )
    iterator = iter(loader)
    for _ in range(8):
        model(next(iterator).cuda())
    torch.cuda.synchronize()
    workers = [worker.pid for worker in iterator._workers]
    with open(ready_file + ".tmp", "w") as out:
        json.dump({"main": os.getpid(), "workers": workers}, out)
    os.rename(ready_file + ".tmp", ready_file)
    deadline = time.monotonic() + lifetime_s
    while time.monotonic() < deadline:
        time.sleep(0.5)


if __name__ == "__main__":
    main()
