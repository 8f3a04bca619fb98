"""CuPy loop that grows an array by concatenation, one chunk of new samples per iteration.

Sources:
  https://github.com/cupy/cupy/issues/8646  ("Possible memory leak on NVIDIA Jetson Orin Nano": "Iteratively
      constructing an array via `xp.concatenate` appears to leak memory ... GPU memory use ... climbs past 300
      MB, eventually crashing the device"; pre-allocating the array keeps memory constant)
  https://docs.cupy.dev/en/stable/user_guide/memory.html  (the memory pool keeps freed blocks for reuse)

What was reported: a sensor loop appends 60 new float64 samples per tick to a
CuPy array with `xp.concatenate([array, new_data])` and sleeps 20 ms; GPU
memory grows until the device crashes, while a preallocated array stays flat.

This program: the same loop with larger chunks (8,192 float64 = 64 KiB per
tick; the report used 60) and a 2 ms pause per tick. Every iteration allocates
a new, larger array and drops the old one: the live data grows by one chunk
per tick, and CuPy's pool, which keeps each freed block for a later request of
its size, asks the driver for a new block each time, so driver memory grows
faster still.

Iteration: one tick (one concatenate of a new chunk).
Leak: 65,536 bytes of live data per tick (exact); the pool's driver allocations grow by the whole array each tick.
Fix: preallocate the array (or a ring buffer) and write each chunk into its slice.
"""
import argparse
import time

import cupy as xp


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=250, help="ticks (default 250)")
    parser.add_argument("--chunk", type=int, default=8192, help="float64 samples per tick (default 8192)")
    parser.add_argument("--sleep-ms", type=float, default=2.0, help="pause per tick (default 2)")
    return parser.parse_args()


def main():
    args = parse_args()
    xp.random.seed(0)
    array = xp.empty(0, dtype=xp.float64)
    started = time.monotonic()
    for _ in range(args.iterations):
        new_data = xp.random.rand(args.chunk)
        array = xp.concatenate([array, new_data])  # LEAK: the array grows by one chunk every tick
        time.sleep(args.sleep_ms / 1000.0)
    xp.cuda.Device().synchronize()
    pool = xp.get_default_memory_pool()
    print("iterations=%d elements=%d pool_used=%d pool_total=%d seconds=%.2f" % (
        args.iterations, array.size, pool.used_bytes(), pool.total_bytes(), time.monotonic() - started))


if __name__ == "__main__":
    main()
