"""The parent is killed with SIGTERM; its daemon child keeps running and holds its CUDA context.

Reported in https://github.com/dmlc/gluon-nlp/issues/724: after `kill
$PARENT_PID` the parent exits but its prefetching child process still runs and
blocks, although it was marked daemon=True ("the way openmpi kills a worker").
daemon=True only means that multiprocessing terminates the child from the
parent's atexit handler, and a process ended by a signal runs no atexit
handlers. https://github.com/pytorch/pytorch/issues/5736 ("gpu memory not
released after `sudo kill [pytorch process id]`") is the GPU form of it: the
children that outlive the killed parent keep their GPU memory.

Here the parent starts a daemon child that prefetches batches on the GPU, and
the job is then ended by SIGTERM, as a scheduler or `kill` would end it. The
child (like the report's, blocked on a queue nobody reads) lives on until its
own --child-seconds limit.

What gpuleak must say: after the main program ended (by SIGTERM), its
multiprocessing worker was still alive after the grace period, holding its
context: an orphan, with its PID and memory, and `gpuleak doctor
--kill-orphans` to end it; CUDA first used in the child at the line marked
CUDA-INIT.

usage: python3 orphan_parent_killed.py [--child-seconds S] [--truth FILE]
"""
import argparse
import json
import multiprocessing
import os
import signal
import time


def prefetcher(batches, lifetime_s):
    import torch

    buffer = torch.empty(64 * 2**20, dtype=torch.uint8, device="cuda")  # CUDA-INIT: 64 MiB staging
    deadline = time.monotonic() + lifetime_s
    while time.monotonic() < deadline:
        if batches.qsize() < 4:
            batches.put(buffer[:1024].float().mean().item())
        time.sleep(0.2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child-seconds", type=float, default=25.0,
                        help="how long the child lives at most (so it cannot hold the GPU for long)")
    parser.add_argument("--truth", help="write the pids of the main process and the child here")
    args = parser.parse_args()

    import torch

    context = multiprocessing.get_context("spawn")
    batches = context.Queue()
    child = context.Process(target=prefetcher, args=(batches, args.child_seconds), daemon=True)
    child.start()
    if args.truth:
        with open(args.truth, "w") as out:
            json.dump({"main": os.getpid(), "multiprocessing_worker": [child.pid]}, out)
    model = torch.nn.Linear(128, 128).cuda()
    for _ in range(5):
        batches.get(timeout=60)
        model(torch.randn(32, 128, device="cuda")).sum().backward()
    # The scheduler's SIGTERM (or `kill PID`): no atexit handler runs, daemon=True does nothing.
    os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":
    main()
