"""Control: `torch.multiprocessing.spawn` with join=True; every process ends before the parent does.

From https://github.com/pytorch/pytorch/pull/13518, which added
torch.multiprocessing.spawn: it waits on whichever spawned process ends first,
and when one fails it terminates the others, so none is left behind; with
join=True the parent returns only after all of them have ended. Each process
here trains on the GPU on purpose (one process per rank, as with
DistributedDataParallel; on a one-GPU machine both ranks share GPU 0), so its
context is intended.

What gpuleak must say: the main program and its two spawned processes (roles
named), each spawned process with its own context (CUDA first used at the line
marked CUDA-INIT); no process finding: none is idle, left running, orphaned or
a zombie.

usage: python3 control_torch_mp_spawn.py [--steps N] [--truth FILE]
"""
import argparse
import json
import os

import torch
import torch.multiprocessing as mp

PROCESSES = 2


def train(rank, steps, pid_folder):
    torch.manual_seed(rank)
    model = torch.nn.Linear(256, 256).to("cuda:0")  # CUDA-INIT: this rank's model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        loss = model(torch.randn(64, 256, device="cuda:0")).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if pid_folder:
        with open(os.path.join(pid_folder, "rank-%d" % rank), "w") as out:
            out.write(str(os.getpid()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--truth", help="write the pids of the main process and the ranks here")
    args = parser.parse_args()
    pid_folder = args.truth + ".d" if args.truth else None
    if pid_folder:
        os.makedirs(pid_folder, exist_ok=True)
    mp.spawn(train, args=(args.steps, pid_folder), nprocs=PROCESSES, join=True)
    if args.truth:
        ranks = [int(open(os.path.join(pid_folder, "rank-%d" % r)).read()) for r in range(PROCESSES)]
        with open(args.truth, "w") as out:
            json.dump({"main": os.getpid(), "multiprocessing_worker": ranks}, out)


if __name__ == "__main__":
    main()
