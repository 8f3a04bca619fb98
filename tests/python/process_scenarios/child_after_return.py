"""The main program returns while a non-daemon multiprocessing child on the stand-in GPU runs on.

Modes: `left-running` (the child runs CHILD_SECONDS more; multiprocessing's
atexit join keeps the main process alive meanwhile), `orphan` (the main
program kills itself with SIGTERM once the child is up; the daemon child lives
CHILD_SECONDS), `zombie` (the child exits at once; the main program trains on
for CHILD_SECONDS without joining it).

usage: child_after_return.py MODE TRUTH_FILE CHILD_SECONDS
"""
import json
import os
import signal
import sys
import time

import stand_in_gpu

MODE, TRUTH, SECONDS = sys.argv[1], sys.argv[2], float(sys.argv[3])


def child(seconds, ready):
    stand_in_gpu.use_gpu(4 << 20)  # FIRST-USE: the child's buffer
    ready.set()
    time.sleep(seconds)
    stand_in_gpu.leave()


def main():
    stand_in_gpu.use_gpu(1 << 20)  # the main program uses the GPU too (registers its exit first)
    import multiprocessing

    from gpuleak import _collector, _process_role

    _process_role.install_exit_marker(_collector.load())
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    seconds = 0.0 if MODE == "zombie" else SECONDS
    worker = context.Process(target=child, args=(seconds, ready), daemon=(MODE == "orphan"))
    worker.start()
    ready.wait(60)
    with open(TRUTH, "w") as out:
        json.dump({"main": os.getpid(), "multiprocessing_worker": [worker.pid]}, out)
    if MODE == "orphan":
        os.kill(os.getpid(), signal.SIGTERM)
    if MODE == "zombie":
        time.sleep(SECONDS)  # never joins the finished child: a zombie all along
    # left-running: returns; multiprocessing joins the non-daemon child at exit


if __name__ == "__main__":
    main()
