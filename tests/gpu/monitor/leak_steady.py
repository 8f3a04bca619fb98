"""GPU scenario: a process whose GPU memory grows steadily (a leak).

Allocates and keeps LEAK_MIB_PER_S MiB every second (tensors appended to a
list that is never cleared) until MAX_S seconds pass or the GPU would be
more than half full, then holds what it has for another minute and exits.

usage: python3 leak_steady.py READY_FILE [MAX_S]
"""
import json
import os
import sys
import time

import torch

LEAK_MIB_PER_S = 64


def main():
    ready_file = sys.argv[1]
    max_s = float(sys.argv[2]) if len(sys.argv) > 2 else 120.0
    torch.cuda.init()
    free_bytes, total_bytes = torch.cuda.mem_get_info()
    kept = []
    started = time.time()
    with open(ready_file + ".tmp", "w") as out:
        json.dump(
            {"pid": os.getpid(), "leak_started_unix_s": started, "leak_bytes_per_s": LEAK_MIB_PER_S * 2**20}, out
        )
    os.rename(ready_file + ".tmp", ready_file)
    next_tick = time.monotonic()
    while time.time() - started < max_s:
        if (len(kept) + 1) * LEAK_MIB_PER_S * 2**20 < free_bytes // 2:
            kept.append(torch.empty(LEAK_MIB_PER_S * 2**20, dtype=torch.uint8, device="cuda"))
        next_tick += 1.0
        time.sleep(max(0.0, next_tick - time.monotonic()))
    time.sleep(60)  # hold what leaked a while longer, then go: never outlive a forgotten run


if __name__ == "__main__":
    main()
