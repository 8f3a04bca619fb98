"""A multiprocessing pool whose workers ran one GPU task each and then sit idle, holding their contexts.

Reported in https://github.com/activetigger/activetigger/issues/164: after a
GPU task completes in a worker of a process pool, the worker keeps ~160 MB of
VRAM ("per worker, so if there are 4 workers ... up to ~600 Mo"); clearing the
cache did not help, and the workaround was to restart the pool's processes.
https://github.com/algorithmicsuperintelligence/openevolve/pull/331 describes
the same with spawn workers ("long-lived workers hold CUDA contexts") and fixes
it with max_tasks_per_child. A CUDA context lives as long as its process; an
idle pool worker is still a live process.

What gpuleak must say: four pool workers of the main process hold a CUDA
context while idle (after their task, until the pool is closed), with the memory
of each and in all; CUDA first used in the task function (line marked
CUDA-INIT). Fix: max_tasks_per_child=1 / maxtasksperchild=1, close the pool when
the GPU work is done, or do the GPU work in one process.

usage: python3 pool_idle_workers_cuda.py [--idle-seconds S] [--truth FILE]
"""
import argparse
import json
import multiprocessing
import os
import time

WORKERS = 4


def score_texts(texts):
    """Embeds a batch of 'texts' with a small model on the GPU and returns one score each."""
    import torch

    torch.manual_seed(len(texts))
    model = torch.nn.EmbeddingBag(1000, 128).cuda()  # CUDA-INIT: the task loads its model on the GPU
    tokens = torch.tensor([[hash(word) % 1000 for word in text.split()][:8] for text in texts],
                          device="cuda")
    scores = model(tokens).norm(dim=1).tolist()
    time.sleep(1.0)  # the rest of the task (writing results) takes a while
    del model, tokens
    torch.cuda.empty_cache()  # what the report tried: it does not release the context
    return os.getpid(), scores


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle-seconds", type=float, default=8.0,
                        help="how long the parent works on before it closes the pool")
    parser.add_argument("--truth", help="write the pids of the main process and the workers here")
    args = parser.parse_args()

    context = multiprocessing.get_context("spawn")
    pool = context.Pool(WORKERS)
    batches = [["a b c d e f g h"] * 16 for _ in range(WORKERS)]
    results = pool.map(score_texts, batches, chunksize=1)
    if args.truth:  # which workers ran a task (and so hold a context) is up to the pool
        with open(args.truth, "w") as out:
            json.dump({"main": os.getpid(), "pool_worker": [p.pid for p in pool._pool],
                       "pool_worker_with_cuda": sorted({pid for pid, _ in results})}, out)
    print("scored %d batches in %d workers" % (len(results), len({pid for pid, _ in results})))
    time.sleep(args.idle_seconds)  # the parent goes on with other (CPU) work; the pool stays open
    pool.close()
    pool.join()


if __name__ == "__main__":
    main()
