"""A 2-rank DistributedDataParallel job where only rank 1 leaks.

Rank 1 keeps one 64 KiB tensor per step in a list (a metrics buffer that is
never cleared); rank 0 is clean. Run under torchrun:
  gpuleak run -- torchrun --nproc-per-node 2 train_ddp.py --backend nccl
With one GPU, use --backend gloo: both ranks share the device.
"""
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--leak-rank", type=int, default=1)
    args = parser.parse_args()

    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local_rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    dist.init_process_group(args.backend)
    torch.manual_seed(rank)

    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256)).to(device)
    model = DistributedDataParallel(model, device_ids=[device.index])
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    kept = []
    for step in range(args.steps):
        x = torch.randn(64, 256, device=device)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if rank == args.leak_rank:
            kept.append(torch.randn(16384, device=device))  # LEAK: 64 KiB per step on this rank only
    torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()
    print("rank %d done, kept %d tensors" % (rank, len(kept)))


if __name__ == "__main__":
    main()
