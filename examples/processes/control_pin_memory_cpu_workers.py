"""Control: `pin_memory=True` with CPU-only workers. The workers create no CUDA context.

Reported in https://github.com/pytorch/pytorch/issues/65046 ("Why DataLoader
needs a separate thread for pin_memory?"): pinning happens in a thread of the
main process, not in the workers, because page-locked memory pinned by a worker
would not be usable by the trainer's CUDA context. So `pin_memory=True` does not
make the workers touch CUDA: they load and collate on the CPU; only the main
process holds a context (and the pinned host buffers).

What gpuleak must say: the main program and four DataLoader workers of it that
never used CUDA; no process finding.

usage: python3 control_pin_memory_cpu_workers.py [--epochs N] [--truth FILE]
"""
import argparse
import json
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

WORKERS = 4


class CpuImages(Dataset):
    def __init__(self, count):
        generator = torch.Generator().manual_seed(0)
        self.images = torch.rand(count, 3, 32, 32, generator=generator)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        image = self.images[index]
        return (image - image.mean()) / (image.std() + 1e-6)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--truth", help="write the pids of the main process and the workers here")
    args = parser.parse_args()

    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10)).cuda()  # CUDA-INIT (main)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(CpuImages(4096), batch_size=64, num_workers=WORKERS, pin_memory=True,
                        persistent_workers=True)
    for epoch in range(args.epochs):
        for images in loader:
            loss = model(images.cuda(non_blocking=True)).logsumexp(dim=1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if epoch == 0 and args.truth:
            with open(args.truth, "w") as out:
                json.dump({"main": os.getpid(),
                           "dataloader_worker": [w.pid for w in loader._iterator._workers]}, out)
    print("loss %.4f" % loss.item())


if __name__ == "__main__":
    main()
