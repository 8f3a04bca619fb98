"""A GPU worker exits when told to, but its parent never joins it: a zombie for the rest of the run.

Reported in https://github.com/vatlab/sos/issues/1250: the master sends `None`
to a worker, which then ends itself, but `p.join()` is never called, so the
finished worker stays `<defunct>` (a zombie) until the master happens to reap
it; "what I've observed is certainly longer than 5 secs". A zombie holds no GPU
memory (its context went when it exited), but it shows that the parent does not
watch its children: a worker that crashes goes unnoticed the same way.

Here the master hands a GPU worker a few jobs, sends it `None`, and goes on
training on the GPU for --master-seconds without joining it.

What gpuleak must say: the multiprocessing worker of the main process exited
and stayed a zombie (not reaped by its parent) for several seconds, holding no
GPU memory once it had exited; CUDA first used in the worker at the line marked
CUDA-INIT. Fix: join() the worker when it is done.

usage: python3 zombie_unreaped_child.py [--master-seconds S] [--truth FILE]
"""
import argparse
import json
import multiprocessing
import os
import time


def worker(jobs, results):
    import torch

    weights = torch.randn(512, 512, device="cuda")  # CUDA-INIT: the worker's model
    while True:
        job = jobs.get()
        if job is None:
            return  # told to stop: it ends itself, nobody joins it
        results.put((weights @ torch.randn(512, job, device="cuda")).norm().item())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master-seconds", type=float, default=8.0,
                        help="how long the master trains after telling the worker to stop")
    parser.add_argument("--truth", help="write the pids of the main process and the worker here")
    args = parser.parse_args()

    import torch

    context = multiprocessing.get_context("spawn")
    jobs, results = context.Queue(), context.Queue()
    child = context.Process(target=worker, args=(jobs, results))
    child.start()
    if args.truth:
        with open(args.truth, "w") as out:
            json.dump({"main": os.getpid(), "multiprocessing_worker": [child.pid]}, out)
    for size in (16, 32, 64):
        jobs.put(size)
    print("norms", [round(results.get(timeout=120), 1) for _ in range(3)])
    jobs.put(None)

    model = torch.nn.Linear(512, 512).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    deadline = time.monotonic() + args.master_seconds
    while time.monotonic() < deadline:
        loss = model(torch.randn(64, 512, device="cuda")).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    # No child.join() before this point: the worker was a zombie all along.


if __name__ == "__main__":
    main()
