"""Control: spawn DataLoader workers that stay on the CPU; the batch moves to the GPU in the main process.

Reported in https://github.com/NVIDIA/recsys-examples/pull/412: the main process
initializes CUDA (torch.cuda.set_device), so fork workers cannot be used; the
DataLoader is built with the spawn start method and persistent_workers, and
"workers only do CPU work (dataset reads + collate_fn); the host-to-device copy
stays in the main process". This is the fix the other DataLoader cases point
to: no worker touches CUDA, so no worker has a context.

What gpuleak must say: the main program (CUDA first used at one of the lines
marked CUDA-INIT) and four DataLoader workers of it that never used CUDA; no process
finding.

usage: python3 control_cpu_workers_spawn.py [--epochs N] [--truth FILE]
"""
import argparse
import json
import os

import torch
from torch.utils.data import DataLoader, Dataset

WORKERS = 4


class Ratings(Dataset):
    """(user, item, rating) triples, read and collated on the CPU."""

    def __init__(self, count):
        generator = torch.Generator().manual_seed(0)
        self.users = torch.randint(0, 1000, (count,), generator=generator)
        self.items = torch.randint(0, 500, (count,), generator=generator)
        self.ratings = torch.rand(count, generator=generator) * 5

    def __len__(self):
        return len(self.ratings)

    def __getitem__(self, index):
        return self.users[index], self.items[index], self.ratings[index]


class MatrixFactorization(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.users = torch.nn.Embedding(1000, 32)
        self.items = torch.nn.Embedding(500, 32)

    def forward(self, users, items):
        return (self.users(users) * self.items(items)).sum(dim=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--truth", help="write the pids of the main process and the workers here")
    args = parser.parse_args()

    torch.cuda.set_device(0)  # CUDA-INIT (main), if setting the device creates the context
    model = MatrixFactorization().cuda()  # CUDA-INIT (main), if it does not
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    loader = DataLoader(Ratings(16384), batch_size=256, num_workers=WORKERS,
                        multiprocessing_context="spawn", persistent_workers=True)
    for epoch in range(args.epochs):
        for users, items, ratings in loader:
            users, items, ratings = users.cuda(), items.cuda(), ratings.cuda()
            loss = (model(users, items) - ratings).square().mean()
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
