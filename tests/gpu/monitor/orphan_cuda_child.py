"""GPU scenario: a parent that exits and leaves a child holding a CUDA context.

The parent starts a child that allocates CHILD_HOLD_GIB GiB on the GPU and
sleeps; once the child reports its allocation, the parent writes both pids
to READY_FILE and exits without waiting for it -- the child is re-parented
(an orphan) and keeps its memory. The child ends itself after LIFETIME_S so
a forgotten run cannot hold the GPU for long.

usage: python3 orphan_cuda_child.py READY_FILE [LIFETIME_S]
"""
import json
import os
import subprocess
import sys

CHILD_HOLD_GIB = 1

CHILD = f"""
import os, sys, time, torch
held = torch.empty({CHILD_HOLD_GIB} * 2**30, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print(os.getpid(), flush=True)
sys.stdout.close()
deadline = time.monotonic() + float(sys.argv[1])
while time.monotonic() < deadline:
    time.sleep(0.5)
"""


def main():
    ready_file = sys.argv[1]
    lifetime_s = sys.argv[2] if len(sys.argv) > 2 else "300"
    child = subprocess.Popen([sys.executable, "-c", CHILD, lifetime_s], stdout=subprocess.PIPE, text=True)
    child_pid = int(child.stdout.readline())
    with open(ready_file + ".tmp", "w") as out:
        json.dump({"parent": os.getpid(), "orphan": child_pid}, out)
    os.rename(ready_file + ".tmp", ready_file)
    os._exit(0)  # no wait(), no terminate(): the bug under test


if __name__ == "__main__":
    main()
