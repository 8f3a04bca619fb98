"""A non-daemon `multiprocessing.Process` on the GPU is still running when the main program returns.

Reported in https://github.com/wool-labs/wool/pull/305: a worker class extends
multiprocessing.Process without the daemon flag, and multiprocessing registers
an atexit handler that joins every live non-daemonic child, so a worker still
alive at interpreter exit holds the parent hostage: the program's code is done,
but the process does not end until the child does.

Here the main program starts a GPU "evaluator" child that serves requests from
a queue, finishes its own training and returns without telling the child to
stop. The child keeps its CUDA context until it gives up waiting (after
--child-seconds), and only then does the main process exit.

What gpuleak must say: a multiprocessing worker of the main process, holding
its context, was still running when the main program returned, and kept the
job alive that much longer; CUDA first used in the child at the line marked
CUDA-INIT. Fix: send the child a stop message and join() it before returning
(or make it daemon=True, which terminates it at exit).

usage: python3 mp_process_left_running.py [--child-seconds S] [--truth FILE]
"""
import argparse
import json
import multiprocessing
import os
import queue


def evaluator(requests, idle_limit_s):
    import torch

    model = torch.nn.Linear(256, 256).cuda()  # CUDA-INIT: the evaluator's model
    while True:
        try:
            request = requests.get(timeout=idle_limit_s)
        except queue.Empty:
            return  # nobody asked for anything for idle_limit_s: give up
        if request is None:
            return
        with torch.no_grad():
            model(torch.randn(request, 256, device="cuda")).sum().item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child-seconds", type=float, default=8.0,
                        help="how long the evaluator waits for a request before it gives up")
    parser.add_argument("--truth", help="write the pids of the main process and the child here")
    args = parser.parse_args()

    import torch

    context = multiprocessing.get_context("spawn")
    requests = context.Queue()
    child = context.Process(target=evaluator, args=(requests, args.child_seconds))
    child.start()
    if args.truth:
        with open(args.truth, "w") as out:
            json.dump({"main": os.getpid(), "multiprocessing_worker": [child.pid]}, out)

    model = torch.nn.Linear(256, 256).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(200):
        loss = model(torch.randn(64, 256, device="cuda")).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            requests.put(64)
    print("training done, loss %.4f" % loss.item())
    # Returns without requests.put(None) and child.join(): the bug under test.


if __name__ == "__main__":
    main()
