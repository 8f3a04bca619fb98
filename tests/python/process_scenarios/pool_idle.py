"""A spawn Pool whose workers use the stand-in GPU once and then sit idle for --idle seconds.

usage: pool_idle.py TRUTH_FILE IDLE_SECONDS
"""
import json
import multiprocessing
import os
import sys
import time

import stand_in_gpu


def task(_):
    stand_in_gpu.use_gpu(1 << 20)  # FIRST-USE: the task's model goes to the GPU
    time.sleep(0.3)
    return os.getpid()


def main():
    context = multiprocessing.get_context("spawn")
    pool = context.Pool(2)
    used = sorted(set(pool.map(task, range(2), chunksize=1)))
    with open(sys.argv[1], "w") as out:
        json.dump({"main": os.getpid(), "pool_worker": [p.pid for p in pool._pool],
                   "pool_worker_with_gpu": used}, out)
    time.sleep(float(sys.argv[2]))
    pool.close()
    pool.join()


if __name__ == "__main__":
    main()
