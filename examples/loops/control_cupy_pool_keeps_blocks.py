"""NOT A LEAK: a CuPy loop over arrays of varying size; the memory pool keeps freed blocks, nvidia-smi stays high.

Sources:
  https://github.com/cupy/cupy/issues/6616  ("Memory is full and cannot be released by delete vars or free
      blocks()"; the maintainer: "It's likely normal and due to CuPy's mempool holding memory for subsequent
      reuse")
  https://github.com/cupy/cupy/issues/558  ("Doubled memory usage?": "CuPy has recently introduced its own
      memory pool. That's why intermediate buffers are not apparently released. Even if it looks leaking, it
      should have no harm in practice.")
  https://docs.cupy.dev/en/stable/user_guide/memory.html

What was reported: GPU memory seen from outside stays high after arrays are
deleted; the pool keeps the blocks and hands them out again. The pool grows
while it meets sizes it cannot serve from what it holds, then stops.

This program: each iteration draws a signal length from 2^16..2^20 samples
(data-dependent sizes), filters it with an FFT and keeps only a Python float;
everything allocated in the iteration is dropped. The pool's total grows
during the first iterations and then plateaus; its used bytes return to the
same level after every iteration.

Iteration: one signal.
Verdict: NO LEAK (pool growth that plateaus).
"""
import argparse
import random
import time

import cupy as xp


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=800, help="signals (default 800)")
    return parser.parse_args()


def main():
    args = parse_args()
    lengths = random.Random(1)
    xp.random.seed(0)
    energy = 0.0
    started = time.monotonic()
    for _ in range(args.iterations):
        length = lengths.randint(1 << 16, 1 << 20)
        signal = xp.random.standard_normal(length, dtype=xp.float32)
        spectrum = xp.fft.rfft(signal)
        spectrum[length // 8:] = 0
        energy += float(xp.abs(xp.fft.irfft(spectrum, n=length)).mean())
    pool = xp.get_default_memory_pool()
    print("iterations=%d energy=%.3f pool_used=%d pool_total=%d seconds=%.2f" % (
        args.iterations, energy, pool.used_bytes(), pool.total_bytes(), time.monotonic() - started))


if __name__ == "__main__":
    main()
