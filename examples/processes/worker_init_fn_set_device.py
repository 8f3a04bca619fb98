"""`worker_init_fn` builds a distributed backend that calls `torch.cuda.set_device`: a context in every worker.

Reported in https://github.com/ai2cm/ace/pull/1396: inference DataLoaders use a
forkserver context and persistent workers, and their `worker_init_fn` enters a
`Distributed` context so each worker knows which samples belong to its rank.
Constructing the backend called `torch.cuda.set_device`, creating a ~520 MiB
CUDA context in every worker; six loaders with four workers each left 24 idle
contexts holding 12.2 GiB per GPU. The workers only read the rank and the world
size for sharding; they never place a tensor on the GPU.

What gpuleak must say: four DataLoader workers of the main process with their
own CUDA context, CUDA first used in `worker_init_fn` (through the backend's
constructor, the line marked CUDA-INIT). Fix: take rank and world size from the
launcher's environment in the workers and skip the device setup there.

usage: python3 worker_init_fn_set_device.py [--epochs N] [--truth FILE]
"""
import argparse
import json
import os

import torch
from torch.utils.data import DataLoader, Dataset

WORKERS = 4
_backend = None


class Distributed:
    """The job's distributed backend: rank, world size and this rank's GPU."""

    def __init__(self):
        self.rank = int(os.environ.get("RANK", "0"))
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))  # CUDA-INIT


def worker_init_fn(worker_id):
    global _backend
    _backend = Distributed()


class ShardedSamples(Dataset):
    """Samples of this rank's shard (CPU tensors only)."""

    def __init__(self, count):
        self.count = count

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        backend = _backend or Distributed()
        sample = index * backend.world_size + backend.rank
        return torch.full((64,), float(sample))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--truth", help="write the pids of the main process and the workers here")
    args = parser.parse_args()

    loader = DataLoader(ShardedSamples(4096), batch_size=64, num_workers=WORKERS,
                        multiprocessing_context="forkserver", persistent_workers=True,
                        worker_init_fn=worker_init_fn)
    weights = torch.zeros(64, device="cuda")
    for epoch in range(args.epochs):
        for batch in loader:
            weights += batch.cuda().mean(dim=0)
        if epoch == 0 and args.truth:
            with open(args.truth, "w") as out:
                json.dump({"main": os.getpid(),
                           "dataloader_worker": [w.pid for w in loader._iterator._workers]}, out)
    print("checksum %.1f" % weights.sum().item())


if __name__ == "__main__":
    main()
