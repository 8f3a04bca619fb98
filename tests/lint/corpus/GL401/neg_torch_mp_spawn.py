import torch
import torch.multiprocessing as mp


def run(rank, world_size):
    torch.cuda.set_device(rank)
    train(rank, world_size)


def main():
    torch.cuda.synchronize()
    mp.spawn(run, args=(2,), nprocs=2, join=True)
