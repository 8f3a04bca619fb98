"""CuPy control: arrays freed every iteration; the memory pool keeps their blocks.

Reported: https://github.com/cupy/cupy/issues/8478 ("VRAM not freed") and
https://github.com/cupy/cupy/issues/6616 -- "It's likely normal and due to
CuPy's mempool holding memory for subsequent reuse".

Each iteration allocates, uses and drops its arrays; CuPy's pool keeps the
freed blocks, so nvidia-smi shows the memory held, flat. Not a leak.

    python3 control_pool_keeps_blocks.py --steps 200

Prints one `CLIENT_STEP {"step", "loss", "step_ms"}` line per iteration.
"""
import argparse
import json
import time

import cupy as cp


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    generator = cp.random.default_rng(0)
    total_power = 0.0
    for step in range(1, args.steps + 1):
        started = time.perf_counter()
        block = generator.standard_normal((256, 2046), dtype=cp.float32)
        power = cp.abs(cp.fft.rfft(block, axis=1)) ** 2
        mean_power = float(power.mean())
        total_power += mean_power
        del block, power
        print("CLIENT_STEP " + json.dumps({"step": step, "loss": mean_power,
                                           "step_ms": (time.perf_counter() - started) * 1e3}),
              flush=True)
    pool = cp.get_default_memory_pool()
    print("average power %.6f; pool holds %d bytes, %d in use"
          % (total_power / args.steps, pool.total_bytes(), pool.used_bytes()))


if __name__ == "__main__":
    main()
